"""Threshold correction from per-partition summaries: the map-reduce form of the one-pass
correction.

Every split needs two numbers (see `hyp2onnx.correction.midpoints`): ``L``, the
largest value of its feature among the training rows routed left, and
``R``, the smallest routed right, among the rows that reach it. The ``L`` of
a union of row sets is the largest of their ``L`` (``R``: the smallest), and
max and min of floating-point values are exact whatever the order or the
grouping. So each partition of the rows is summarised apart,
`summarise` (the single-machine search,
`shared_neighbours`, on the partition),
the summaries merge by element-wise max/min (`SplitSummary.merge`, in
any tree shape), and `correct_from_summary` places the same thresholds
as `correct_trees` on all rows, bit for
bit. A summary holds four numbers per split in the backend's comparison
precision (float32 for XGBoost), whatever the number of rows.

The rows go where the single-machine correction sends them: ``x < t`` in
float32 (XGBoost) or ``x <= t`` in float64 (LightGBM), the booster's own
routing of the finite Klein coordinates hyp2onnx trains on. (Asking the
booster itself, ``pred_leaf``, then grouping every row's leaf in every
tree, costs several times the search on large many-tree boosters.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.trees import Op, TreeArrays
from .midpoints import CorrectionReport, Midpoint, Placement, Placer
from .shared_rows import Nodes, shared_neighbours_and_sides
from .tree_space import TreeSpace

__all__ = [
    "SplitSummary",
    "correct_from_summary",
    "klein_space",
    "summarise",
]


@dataclass(frozen=True)
class SplitSummary:
    """Per split of a model's trees (internal nodes in tree order), summaries of some rows.

    ``largest_left``/``smallest_right``: the split's ``L`` and ``R`` among
    those rows that reach it (``-inf``/``inf`` where none goes that way).
    ``below``/``above``: the largest value of the split's feature that the
    comparison sends left and the smallest it sends right among *all* those
    rows, reached or not: a split that no row reaches on one side is placed
    between these (as `KleinPlacer` does with the
    training values of the whole feature). All four in the backend's
    comparison precision.
    """

    largest_left: np.ndarray
    smallest_right: np.ndarray
    below: np.ndarray
    above: np.ndarray

    def merge(self, other: SplitSummary) -> SplitSummary:
        """The summary of the union of both summaries' rows (exact, in any order)."""
        a, b = self.largest_left, other.largest_left
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError(
                f"cannot merge split summaries of {a.shape[0]} splits ({a.dtype}) and "
                f"{b.shape[0]} splits ({b.dtype}): they come from different models"
            )
        return SplitSummary(
            np.maximum(a, b),
            np.minimum(self.smallest_right, other.smallest_right),
            np.maximum(self.below, other.below),
            np.minimum(self.above, other.above),
        )

    @property
    def nbytes(self) -> int:
        return int(
            self.largest_left.nbytes
            + self.smallest_right.nbytes
            + self.below.nbytes
            + self.above.nbytes
        )


def summarise(trees: list[TreeArrays], X: np.ndarray, op: Op) -> SplitSummary:
    """The summary of the rows ``X`` (a partition of the rows every tree was grown on).

    ``X`` holds the rows in the backend's comparison precision (float32 for
    XGBoost, float64 for LightGBM) and the summary keeps that dtype. No
    rows: every entry is the merge's identity.
    """
    X = np.asarray(X)
    if X.ndim != 2 or not np.issubdtype(X.dtype, np.floating):
        raise TypeError(f"X must be a 2-D array of floating-point values, got {X.dtype} {X.shape}")
    nodes = Nodes.of(trees)
    split = nodes.feature >= 0
    per_node = shared_neighbours_and_sides(trees, X, op)
    return SplitSummary(*(v[split].astype(X.dtype) for v in per_node))


def _per_node(trees: list[TreeArrays], summary: SplitSummary) -> tuple[Nodes, np.ndarray]:
    """The trees' nodes, and the summary spread over them (float64, shape (4, nodes))."""
    nodes = Nodes.of(trees)
    split = nodes.feature >= 0
    if summary.largest_left.shape != (np.count_nonzero(split),):
        raise ValueError(
            f"a summary of {summary.largest_left.shape[0]} splits does not fit these trees "
            f"({np.count_nonzero(split)} splits)"
        )
    values = np.empty((4, split.shape[0]))
    values[:, ~split] = [[-np.inf], [np.inf], [-np.inf], [np.inf]]
    values[:, split] = [summary.largest_left, summary.smallest_right, summary.below, summary.above]
    return nodes, values


def correct_from_summary(
    trees: list[TreeArrays],
    summary: SplitSummary,
    *,
    op: Op,
    threshold_dtype: str = "float64",
    midpoint: Midpoint | np.ndarray = "einstein",
    place: Placer | None = None,
) -> tuple[list[np.ndarray], CorrectionReport]:
    """Corrected thresholds of every tree from the summary of its training rows.

    The same result as `correct_trees`
    on those rows (``place`` as there: a
    `KleinPlacer`, see `klein_space`).
    """
    if not trees:
        return [], CorrectionReport()
    nodes, (largest_left, smallest_right, _, _) = _per_node(trees, summary)
    placement = Placement(op, threshold_dtype, midpoint, place)
    return nodes.per_tree(placement, largest_left, smallest_right)


def klein_space(
    trees: list[TreeArrays],
    summary: SplitSummary,
    n_features: int,
    compare_dtype: str,
    zero_band: float = 0.0,
) -> TreeSpace:
    """A ``"klein"`` `TreeSpace` holding only the training
    values the placement of these trees looks up.

    The single-machine space holds every distinct training value; placement
    reads from it each split's nearest values on either side: its ``L`` and
    ``R`` (rows reaching the split) and, for a split no row reaches on one
    side, ``below`` and ``above``. All are training values in the compared
    precision, so the predecessor (successor) of any such query in this
    subset is the one in the full table, and
    `KleinPlacer` places the same thresholds
    from it.
    """
    nodes, values = _per_node(trees, summary)
    per_feature = []
    for f in range(n_features):
        v = values[:, nodes.feature == f].ravel()
        per_feature.append(np.unique(v[np.isfinite(v)]))
    tables = tuple(per_feature)
    return TreeSpace("klein", compare_dtype, tables, tables, zero_band)
