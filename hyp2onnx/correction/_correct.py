"""The one entry point of threshold correction: `correct`.

Both ways of training call it: the estimators (every training row in this
process, `from_rows`) and Dask (per-partition summaries merged at the
driver, `from_summary`). Given where each split's two nearest
training values lie, it places Klein thresholds in the learner's own
comparison when that comparison separates them, else in float64 through
split indices, and says which input dtype keeps every split.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UnsupportedModelError, warn_user
from ..ir.crossings import Margins
from ..ir.trees import Op, TreeArrays, as_compared
from .midpoints import Array, CorrectionReport, Midpoint, Placement
from .shared_rows import NeighbourMemo, Routing, correct_trees
from .summaries import SplitSummary, correct_from_summary
from .tree_space import KleinPlacer, ResolutionError, SplitIndex, TreeSpace

__all__ = ["Comparison", "Correction", "Neighbours", "correct", "from_rows", "from_summary"]

#: Gathers each split's two nearest training values and hands them to ``place``:
#: ``neighbours(place=...) -> (new thresholds per tree, report)``.
Neighbours = Callable[..., tuple[list[np.ndarray], CorrectionReport]]


@dataclass(frozen=True)
class Comparison:
    """How a learner compares: left iff ``x op threshold``, in ``compare_dtype``.

    ``feature_splits`` is False for oblique splits, which compare projections
    of all Klein coordinates rather than one coordinate.
    """

    op: Op
    compare_dtype: str
    threshold_dtype: str
    feature_splits: bool = True

    def keywords(self, midpoint: Midpoint | np.ndarray) -> dict[str, Any]:
        """The keywords every neighbour search takes: the comparison and the midpoint rule."""
        return {"op": self.op, "threshold_dtype": self.threshold_dtype, "midpoint": midpoint}


@dataclass(frozen=True)
class Correction:
    """What `correct` decided: the thresholds to write back into the learner."""

    thresholds: list[np.ndarray]  #: one array per tree, in the learner's own space
    report: CorrectionReport
    split_index: SplitIndex | None  #: set when the learner now reads split indices
    input_dtype: str  #: "float32" if float32 input keeps every split, else "float64"
    #: Each numeric split with its two nearest training values (None: not known,
    #: as for split indices and oblique splits).
    margins: Margins | None = None


def from_rows(
    trees: list[TreeArrays],
    compared: np.ndarray,
    rows: Iterable[np.ndarray],
    comparison: Comparison,
    midpoint: Midpoint | np.ndarray,
    *,
    threads: int = 1,
    routing: Routing | None = None,
) -> Neighbours:
    """Neighbours found by routing the training rows (``rows[t]``: tree t's rows), trees
    that route their own ``threads`` at a time, through the library's ``routing`` if
    given (`Backend.leaf_routing`). The neighbours are found at the first call and
    kept for a second (`correct` places again in float64 when it must)."""
    return functools.partial(
        correct_trees,
        trees,
        compared,
        rows,
        threads=threads,
        routing=routing,
        memo=NeighbourMemo(),
        **comparison.keywords(midpoint),
    )


def from_summary(
    trees: list[TreeArrays],
    summary: SplitSummary,
    comparison: Comparison,
    midpoint: Midpoint | np.ndarray,
) -> Neighbours:
    """Neighbours read from merged per-partition summaries (the distributed path)."""
    return functools.partial(correct_from_summary, trees, summary, **comparison.keywords(midpoint))


def correct(
    trees: list[TreeArrays],
    space: TreeSpace,
    neighbours: Neighbours,
    comparison: Comparison,
    midpoint: Midpoint | np.ndarray,
) -> Correction:
    """Place a Klein threshold for every split of ``trees`` (fitted on ``space``).

    First in the learner's own comparison; if that cannot separate some
    split's two nearest training values (points far from the origin), in
    float64 through a `SplitIndex`, which categorical splits cannot
    use. Warns about splits with no training row on one side.
    """
    if not comparison.feature_splits:
        # Oblique splits: thresholds are placed among the projections, in float64.
        check = _Float32Check(comparison.op, comparison.threshold_dtype, midpoint)
        new_thresholds, report = neighbours(place=check)
        _warn_unreached(report, "keeps the learner's threshold")
        dtype = "float32" if check.float32_separates else "float64"
        return Correction(new_thresholds, report, None, dtype)
    placer = functools.partial(KleinPlacer, space, comparison.op, midpoint=midpoint)
    index, place = (
        None,
        placer(
            op=comparison.op,
            compare_dtype=comparison.compare_dtype,
            threshold_dtype=comparison.threshold_dtype,
        ),
    )
    try:
        new_thresholds, report = neighbours(place=place)
    except ResolutionError:
        if any(t.categories is not None for t in trees):
            raise UnsupportedModelError(
                "the backend's precision cannot separate some split's two nearest training "
                "rows (points far from the origin), which needs split-index routing, and "
                "that is not available with categorical splits. Move the points nearer the "
                "origin, or drop the Categorical blocks (split their codes as numbers)."
            ) from None
        place = placer(op="<=", compare_dtype="float64", threshold_dtype="float64")
        klein, report = neighbours(place=place)
        index = SplitIndex.from_splits(
            np.concatenate([t.feature for t in trees]),
            np.concatenate(klein),
            space.n_features,
            "float64",
        )
        new_thresholds = [
            index.native_thresholds(t.feature, k) for t, k in zip(trees, klein, strict=True)
        ]
    if space.space != "klein":  # learner thresholds are not Klein values to compare with
        report = dataclasses.replace(report, n_moved=place.n_moved)
    _warn_unreached(report, "is placed just past the training values on the other side")
    dtype = "float32" if place.float32_separates else "float64"
    margins = place.margins if index is None else None
    return Correction(new_thresholds, report, index, dtype, margins)


def _warn_unreached(report: CorrectionReport, what_happens: str) -> None:
    """Warn (at the caller of ``fit``) about splits no training row reached on one side."""
    if report.n_unreached:
        warn_user(
            f"{report.n_unreached} of {report.n_splits} splits had no training row on one "
            f"side; each {what_happens}."
        )


class _Float32Check:
    """The standard placement (``place=`` of the correction), noting whether float32
    separates every split's two nearest training values (what float32 input keeps)."""

    def __init__(self, op: Op, threshold_dtype: str, midpoint: Midpoint | np.ndarray) -> None:
        self.placement = Placement(op, threshold_dtype, midpoint)
        self.float32_separates = True

    def __call__(
        self, feature: Array, threshold: Array, largest_left: Array, smallest_right: Array
    ) -> np.ndarray:
        new, _, reached = self.placement.thresholds(
            feature, threshold, largest_left, smallest_right
        )
        lo = as_compared(largest_left[reached], "float32")
        self.float32_separates &= bool(np.all(lo < as_compared(smallest_right[reached], "float32")))
        return new
