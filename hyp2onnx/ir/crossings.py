"""Which rows may take another path when their values change a little.

A tree ensemble with axis-aligned splits routes a row by the comparisons of
its values with the thresholds of each feature, nothing else. Two versions
``a`` and ``b`` of a row (float64 points and their float32 rounding) take the
same path through every tree of a model, and so get the same outputs, when
on every feature a split tests, as many of that feature's thresholds lie
below ``a`` as below ``b`` (in the backend's sense of "below": ``t < x`` for
``x <= t`` splits, ``t <= x`` for ``x < t`` splits), the values being first
rounded to the precision the backend compares in. `rows_that_may_cross`
returns the other rows, the only ones whose outputs need the library's own
``predict``: a search in each feature's sorted thresholds, O(n d log T),
instead of a walk of every row down every tree.

Most splits need no search at all. A split whose two nearest training
values ``lo`` (largest routed left) and ``hi`` (smallest routed right)
stay on their sides when moved by as much as any row moved on that
feature cannot route a training row apart: every row that reaches it lies
at or below ``lo``, or at or above ``hi``. `splits_in_reach` keeps the
others (and every set-membership split), so the search runs against a
handful of thresholds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np

from .trees import Op, TreeArrays, as_compared, goes_left


class Margins(NamedTuple):
    """Numeric splits as the threshold correction placed them: feature, threshold as
    the model stores it (held in float64), and the float64 values of the split's two
    nearest training values among the rows that reach it, ``lo`` routed left and
    ``hi`` routed right (``-inf``/``inf`` where no row went that way)."""

    feature: np.ndarray
    threshold: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


class Splits(NamedTuple):
    """Every split of a model: feature (-1 at leaves), threshold as the model
    stores it (held in float64) and whether it is a set-membership split;
    ``margins``: the numeric splits' nearest training values, if known."""

    feature: np.ndarray
    threshold: np.ndarray
    member: np.ndarray
    margins: Margins | None = None

    @classmethod
    def of(
        cls, trees: Sequence[TreeArrays], thresholds: Sequence[np.ndarray], threshold_dtype: str
    ) -> Splits:
        """The splits of ``trees`` with ``thresholds`` (one array per tree) in ``threshold_dtype``."""
        feature = np.concatenate([np.asarray(t.feature, dtype=np.int64) for t in trees])
        threshold = np.concatenate([np.asarray(t, dtype=np.float64) for t in thresholds])
        member = np.concatenate(
            [
                np.zeros(t.feature.shape[0], bool) if t.categories is None else t.categories.member
                for t in trees
            ]
        )
        return cls(feature, as_compared(threshold, threshold_dtype), member)


def moved_by(a: np.ndarray, b: np.ndarray, zero_band: float = 0.0) -> np.ndarray:
    """Per column, a float64 bound of ``|b - a|`` over the rows (values in the zero
    band read as 0, as the backend reads them); ``inf`` on a column with a value
    that is not finite. Rounded up: at least the exact difference."""
    if zero_band:
        a, b = (np.where(np.abs(v) <= zero_band, 0.0, v) for v in (a, b))
    with np.errstate(invalid="ignore", over="ignore"):
        gap = np.abs(b - a).max(axis=0, initial=0.0)
    gap[~np.isfinite(gap)] = np.inf
    return np.nextafter(gap, np.inf)


def splits_in_reach(splits: Splits, moved: np.ndarray, *, op: Op, compare_dtype: str) -> Splits:
    """The splits of ``splits`` that a training row may cross when each of its values
    on feature ``f`` moves by at most ``moved[f]`` (`moved_by`): every set-membership
    split, and each numeric split whose ``lo`` moved up, or ``hi`` moved down, by that
    much could compare otherwise with its threshold (in ``compare_dtype``, by ``op``).

    Every split when ``splits`` carries no margins, or margins that do not account for
    each of its numeric splits.
    """
    m = splits.margins
    numeric = (splits.feature >= 0) & ~splits.member
    if m is None or m.feature.shape[0] != np.count_nonzero(numeric):
        return splits
    step = moved[m.feature]
    with np.errstate(invalid="ignore", over="ignore"):
        up = as_compared(np.nextafter(m.lo + step, np.inf), compare_dtype)
        down = as_compared(np.nextafter(m.hi - step, -np.inf), compare_dtype)
    left_stays = ~np.isfinite(m.lo) | goes_left(up, m.threshold, op)
    right_stays = ~np.isfinite(m.hi) | ~goes_left(down, m.threshold, op)
    near = ~(left_stays & right_stays)
    member = (splits.feature >= 0) & splits.member
    return Splits(
        np.concatenate([splits.feature[member], m.feature[near]]),
        np.concatenate([splits.threshold[member], m.threshold[near]]),
        np.concatenate(
            [np.ones(np.count_nonzero(member), bool), np.zeros(np.count_nonzero(near), bool)]
        ),
    )


def rows_that_may_cross(
    splits: Splits,
    a: np.ndarray,
    b: np.ndarray,
    *,
    op: Op,
    compare_dtype: str,
    zero_band: float = 0.0,
) -> np.ndarray:
    """Indices of the rows of ``a`` and ``b`` (same shape) that some split may route apart.

    A row is kept when, on a feature a threshold split tests, the counts of
    thresholds below its two values differ; when a set-membership split
    tests a feature on which the two values differ; when a tested value is
    not finite (missing values take a default side); or when the two values
    differ and one lies in the backend's zero band (LightGBM reads ``|x| <=
    zero_band`` as zero). Every other row takes the same path in every tree.
    """
    if op not in ("<=", "<"):
        raise ValueError(f"unknown comparison {op!r}; expected '<=' or '<'")
    side: Literal["left", "right"] = "left" if op == "<=" else "right"
    split = splits.feature >= 0
    used = np.unique(splits.feature[split])
    A = as_compared(a[:, used], compare_dtype)
    B = as_compared(b[:, used], compare_dtype)
    with np.errstate(invalid="ignore"):
        differ = ~(np.isfinite(A).all(axis=1) & np.isfinite(B).all(axis=1))
        if zero_band > 0:
            near_zero = (np.abs(A) <= zero_band) | (np.abs(B) <= zero_band)
            differ |= (near_zero & (A != B)).any(axis=1)
    numeric = split & ~splits.member
    order = np.lexsort((splits.threshold[numeric], splits.feature[numeric]))
    feature, threshold = splits.feature[numeric][order], splits.threshold[numeric][order]
    bounds = np.searchsorted(feature, used, side="left"), np.searchsorted(feature, used, "right")
    categorical = np.isin(used, splits.feature[split & splits.member])
    for c, (lo, hi) in enumerate(zip(*bounds, strict=True)):
        # Equal values cross nothing: search only the rows whose value moved.
        moved = np.flatnonzero(A[:, c] != B[:, c])
        if categorical[c]:
            differ[moved] = True
        if hi > lo and moved.size:
            differ[moved] |= _count_changes(threshold[lo:hi], A[moved, c], B[moved, c], side)
    return np.flatnonzero(differ)


def _count_changes(
    t: np.ndarray, a: np.ndarray, b: np.ndarray, side: Literal["left", "right"]
) -> np.ndarray:
    """Whether ``b`` has another count of sorted thresholds ``t`` below it than ``a``
    (``side`` as ``searchsorted``'s: "left" counts ``t < x``, "right" ``t <= x``).

    One search: ``a``'s count ``i``; ``b`` has the same iff ``t[i - 1]`` (if any)
    is below ``b`` too and ``t[i]`` (if any) is not.
    """
    i = np.searchsorted(t, a, side)
    below, above = t.take(np.maximum(i - 1, 0)), t.take(np.minimum(i, t.size - 1))
    if side == "left":
        same = ((i == 0) | (below < b)) & ((i == t.size) | (above >= b))
    else:
        same = ((i == 0) | (below <= b)) & ((i == t.size) | (above > b))
    return ~same
