"""Threshold correction from per-leaf bounds: the map-reduce form of the one-pass correction.

Every split needs two numbers (see :mod:`hyp2onnx.thresholds`): ``L``, the
largest value of its feature among the training rows routed left, and
``R``, the smallest routed right. A row routed left at a node is a row
whose leaf lies in the node's left subtree. So it is enough to know, for
every (tree, leaf), the smallest and largest value of every split feature
among the rows that end there: ``L`` of a node is the largest maximum over
the leaves of its left subtree, ``R`` the smallest minimum over its right
subtree.

Those bounds are a summary of the rows that merges exactly: the bounds of
two sets of rows are the element-wise minimum and maximum of theirs (min
and max of floating-point values are exact and do not depend on order or
grouping). Hence per-partition summaries, :func:`leaf_bounds`, reduced with
:meth:`LeafBounds.merge` in any tree shape, give the same ``L`` and ``R`` as
one pass over all rows, and :func:`correct_from_bounds` places the same
thresholds as :func:`~hyp2onnx.ensemble_thresholds.correct_trees`, bit for
bit. A summary holds ``2 * leaves * features`` numbers, whatever the number
of rows.

The leaves come from the booster itself (its ``pred_leaf``), so the rows go
where the booster sends them: its comparison, its precision and its
missing-value rules. On the finite Klein coordinates hyp2onnx trains on,
that is the routing the single-machine correction reproduces with
``x < t`` in float32 (XGBoost) or ``x <= t`` in float64 (LightGBM).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .ir.trees import Op, TreeArrays
from .thresholds import CorrectionReport, Midpoint, Placer, thresholds_from_neighbours
from .tree_space import TreeSpace

__all__ = [
    "LeafBounds",
    "LeafLayout",
    "SplitBounds",
    "correct_from_bounds",
    "klein_space",
    "leaf_bounds",
    "leaf_layout",
    "split_bounds",
]


@dataclass(frozen=True)
class LeafLayout:
    """Where the leaves of a model's trees sit in a :class:`LeafBounds` summary."""

    node_offset: np.ndarray  #: first node of each tree in the concatenated node arrays
    slot: np.ndarray  #: summary row of every node (concatenated), -1 at internal nodes
    features: np.ndarray  #: the features some split uses: the summary's columns

    @property
    def n_leaves(self) -> int:
        return int(np.count_nonzero(self.slot >= 0))


def leaf_layout(trees: list[TreeArrays]) -> LeafLayout:
    """The summary layout of ``trees``: one row per leaf, one column per split feature."""
    sizes = np.array([t.feature.shape[0] for t in trees], dtype=np.int64)
    feature = np.concatenate([np.asarray(t.feature, np.int64) for t in trees]) if trees else (
        np.zeros(0, np.int64)
    )
    leaf = feature < 0
    slot = np.where(leaf, np.cumsum(leaf) - 1, -1)
    return LeafLayout(
        node_offset=np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64),
        slot=slot.astype(np.int64),
        features=np.unique(feature[~leaf]),
    )


@dataclass(frozen=True)
class LeafBounds:
    """Per-leaf minimum (``low``) and maximum (``high``) of every split feature.

    Arrays of shape (n_leaves, n_features) in the backend's comparison
    precision; a leaf no row reached holds ``+inf`` / ``-inf``, the
    identities of the merge.
    """

    low: np.ndarray
    high: np.ndarray

    def merge(self, other: LeafBounds) -> LeafBounds:
        """Bounds of the union of both summaries' rows (exact, in any order)."""
        if self.low.shape != other.low.shape or self.low.dtype != other.low.dtype:
            raise ValueError(
                f"cannot merge leaf bounds of shape {self.low.shape} ({self.low.dtype}) with "
                f"{other.low.shape} ({other.low.dtype}): they come from different models"
            )
        return LeafBounds(np.minimum(self.low, other.low), np.maximum(self.high, other.high))

    @property
    def nbytes(self) -> int:
        return int(self.low.nbytes + self.high.nbytes)


def empty_bounds(layout: LeafLayout, dtype: str | np.dtype) -> LeafBounds:
    """The summary of no rows."""
    shape = (layout.n_leaves, layout.features.shape[0])
    return LeafBounds(np.full(shape, np.inf, dtype=dtype), np.full(shape, -np.inf, dtype=dtype))


def leaf_bounds(layout: LeafLayout, leaves: np.ndarray, X: np.ndarray) -> LeafBounds:
    """The summary of the rows ``X``, which reach the nodes ``leaves`` (n_rows, n_trees).

    ``X`` holds the rows in the backend's comparison precision (float32 for
    XGBoost, float64 for LightGBM) and the summary keeps that dtype. Rows are
    grouped by leaf one tree at a time (a stable sort of small integers,
    then one segmented min and max over the split features): O(n * trees *
    features), no loop over rows.
    """
    X = np.asarray(X)
    if not np.issubdtype(X.dtype, np.floating):
        raise TypeError(f"X must hold floating-point values, got {X.dtype}")
    leaves = np.asarray(leaves)
    n_trees = layout.node_offset.shape[0]
    if leaves.shape != (X.shape[0], n_trees):
        raise ValueError(
            f"leaves must have shape (n_rows, n_trees) = ({X.shape[0]}, {n_trees}), "
            f"got {leaves.shape}"
        )
    bounds = empty_bounds(layout, X.dtype)
    if X.shape[0] == 0 or n_trees == 0:
        return bounds
    values = np.ascontiguousarray(X[:, layout.features])
    sizes = np.diff(np.append(layout.node_offset, layout.slot.shape[0]))
    for t in range(n_trees):
        node = leaves[:, t]
        if node.min() < 0 or node.max() >= sizes[t]:
            raise ValueError(f"tree {t}: leaf indices outside the tree's {sizes[t]} nodes")
        small = node.astype(np.uint16) if sizes[t] <= 1 << 16 else node
        order = np.argsort(small, kind="stable")  # a radix sort for 16-bit keys
        ordered = small.take(order)
        starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
        slots = layout.slot.take(layout.node_offset[t] + ordered.take(starts).astype(np.int64))
        if np.any(slots < 0):
            raise ValueError(f"tree {t}: some rows end at an internal node, not a leaf")
        grouped = values.take(order, axis=0)
        bounds.low[slots] = np.minimum.reduceat(grouped, starts, axis=0)
        bounds.high[slots] = np.maximum.reduceat(grouped, starts, axis=0)
    return bounds


def _neighbours(
    trees: list[TreeArrays], layout: LeafLayout, bounds: LeafBounds
) -> tuple[np.ndarray, ...]:
    """Concatenated node arrays and every split's ``L`` and ``R`` from the leaf bounds."""
    offset = layout.node_offset
    sizes = np.diff(np.append(offset, layout.slot.shape[0]))
    shift = np.repeat(offset, sizes)
    feature = np.concatenate([np.asarray(t.feature, np.int64) for t in trees])
    threshold = np.concatenate([np.asarray(t.threshold, np.float64) for t in trees])
    left = np.concatenate([np.asarray(t.left, np.int64) for t in trees])
    right = np.concatenate([np.asarray(t.right, np.int64) for t in trees])
    internal = feature >= 0
    left = np.where(internal, left + shift, -1)
    right = np.where(internal, right + shift, -1)

    # Bounds of every subtree: leaves from the summary, then each level of
    # internal nodes from its children, deepest level first.
    low = np.full((feature.shape[0], layout.features.shape[0]), np.inf)
    high = np.full_like(low, -np.inf)
    leaf = ~internal
    low[leaf] = bounds.low[layout.slot[leaf]]
    high[leaf] = bounds.high[layout.slot[leaf]]
    levels = []
    nodes = offset[sizes > 0]
    while nodes.size:
        nodes = nodes[internal[nodes]]
        if nodes.size:
            levels.append(nodes)
        nodes = np.concatenate([left[nodes], right[nodes]])
    for nodes in reversed(levels):
        low[nodes] = np.minimum(low[left[nodes]], low[right[nodes]])
        high[nodes] = np.maximum(high[left[nodes]], high[right[nodes]])

    largest_left = np.full(feature.shape[0], -np.inf)
    smallest_right = np.full(feature.shape[0], np.inf)
    split = np.flatnonzero(internal)
    column = np.searchsorted(layout.features, feature[split])
    largest_left[split] = high[left[split], column]
    smallest_right[split] = low[right[split], column]
    return feature, threshold, largest_left, smallest_right


def correct_from_bounds(
    trees: list[TreeArrays],
    layout: LeafLayout,
    bounds: LeafBounds,
    *,
    op: Op,
    threshold_dtype: str = "float64",
    midpoint: Midpoint = "einstein",
    place: Placer | None = None,
) -> tuple[list[np.ndarray], CorrectionReport]:
    """Corrected thresholds of every tree from the leaf bounds of its training rows.

    The same result as :func:`~hyp2onnx.ensemble_thresholds.correct_trees`
    on those rows, when the leaves came from the booster's own routing
    (``place`` as there: a :class:`~hyp2onnx.tree_space.KleinPlacer`, see
    :func:`klein_space`).
    """
    if not trees:
        return [], CorrectionReport()
    expected = (layout.n_leaves, layout.features.shape[0])
    if bounds.low.shape != expected or bounds.high.shape != expected:
        raise ValueError(
            f"leaf bounds of shape {bounds.low.shape} do not fit these trees {expected}"
        )
    feature, threshold, largest_left, smallest_right = _neighbours(trees, layout, bounds)
    new, internal, reached = thresholds_from_neighbours(
        feature, threshold, largest_left, smallest_right,
        op=op, threshold_dtype=threshold_dtype, midpoint=midpoint, place=place,
    )
    report = CorrectionReport(
        n_splits=int(internal.sum()),
        n_moved=int(np.sum(internal & (new != threshold))),
        n_unreached=int(np.sum(internal & ~reached)),
    )
    return np.split(new, layout.node_offset[1:]), report


@dataclass(frozen=True)
class SplitBounds:
    """Per split, the nearest training values around its threshold, over all rows.

    ``below``/``above``: the largest value of the split's feature that the
    learner's comparison sends left and the smallest it sends right, among
    every training row (not only those reaching the split); ``-inf``/``inf``
    where there is none. A split that no row reaches on one side is placed
    between these (as :class:`~hyp2onnx.tree_space.KleinPlacer` does with the
    training values of the whole feature). Merges by element-wise max/min.
    """

    below: np.ndarray
    above: np.ndarray

    def merge(self, other: SplitBounds) -> SplitBounds:
        """Bounds of the union of both summaries' rows (exact, in any order)."""
        if self.below.shape != other.below.shape or self.below.dtype != other.below.dtype:
            raise ValueError("cannot merge split bounds of different models")
        return SplitBounds(np.maximum(self.below, other.below), np.minimum(self.above, other.above))

    @property
    def nbytes(self) -> int:
        return int(self.below.nbytes + self.above.nbytes)


def split_bounds(trees: list[TreeArrays], X: np.ndarray, op: Op) -> SplitBounds:
    """The summary of the rows ``X`` (compared precision) around every node's threshold.

    One sort of each split feature's distinct values, then a binary search
    per split: O(n log n + splits log n).
    """
    X = np.asarray(X)
    feature = np.concatenate([np.asarray(t.feature, np.int64) for t in trees])
    threshold = np.concatenate([np.asarray(t.threshold, np.float64) for t in trees])
    below = np.full(feature.shape[0], -np.inf, dtype=X.dtype)
    above = np.full(feature.shape[0], np.inf, dtype=X.dtype)
    if X.shape[0] == 0:
        return SplitBounds(below, above)
    side = "right" if op == "<=" else "left"
    for f in np.unique(feature[feature >= 0]):
        at = np.flatnonzero(feature == f)
        u = np.unique(X[:, f])
        pos = np.searchsorted(u.astype(np.float64), threshold[at], side=side)
        below[at] = np.where(pos > 0, u[np.maximum(pos - 1, 0)], -np.inf)
        above[at] = np.where(pos < u.size, u[np.minimum(pos, u.size - 1)], np.inf)
    return SplitBounds(below, above)


def klein_space(
    trees: list[TreeArrays],
    layout: LeafLayout,
    bounds: LeafBounds,
    around: SplitBounds,
    n_features: int,
    compare_dtype: str,
    zero_band: float = 0.0,
) -> TreeSpace:
    """A ``"klein"`` :class:`~hyp2onnx.tree_space.TreeSpace` holding only the training
    values the placement of these trees looks up.

    The single-machine space holds every distinct training value; placement
    reads from it each split's nearest values on either side: those in the
    leaf bounds (rows reaching the split) and, for a split no row reaches on
    one side, those in ``around``. Both are training values in the compared
    precision, so the predecessor (successor) of any query in this subset is
    the one in the full table, and :class:`~hyp2onnx.tree_space.KleinPlacer`
    places the same thresholds from it.
    """
    feature = np.concatenate([np.asarray(t.feature, np.int64) for t in trees])
    tables = []
    for f in range(n_features):
        values = [around.below[feature == f], around.above[feature == f]]
        column = np.flatnonzero(layout.features == f)
        if column.size:
            values += [bounds.low[:, column[0]], bounds.high[:, column[0]]]
        v = np.concatenate(values).astype(np.float64)
        tables.append(np.unique(v[np.isfinite(v)]))
    tables = tuple(tables)
    return TreeSpace("klein", compare_dtype, tables, tables, zero_band)
