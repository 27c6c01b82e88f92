"""The fit path as it was before issue 40 made it faster, kept verbatim as the
reference the new code must match bit for bit (tests/test_fit_reference.py).

Each function is the old body, lifted out of its class or module: do not
"improve" it; it is what the new code is compared with.
"""

from __future__ import annotations

import struct
from typing import Any, Literal

import numpy as np

from hyp2onnx.correction.midpoints import (
    CorrectionReport,
    Midpoint,
    Placement,
    Placer,
)
from hyp2onnx.correction.shared_rows import correct_shared_rows, shared_rows
from hyp2onnx.correction.tree_space import TreeSpace
from hyp2onnx.errors import InvalidPointError, UnsupportedModelError
from hyp2onnx.ir.crossings import Splits
from hyp2onnx.ir.trees import Op, TreeArrays, as_compared, walk_levels


def old_float32_keeps_outputs(model: Any, X: np.ndarray) -> bool:
    """``HyperbolicTreeModel._float32_keeps_outputs`` before issue 40: the library's
    outputs on every moved training row, float64 and rounded to float32."""
    rounded = X.astype(np.float32).astype(np.float64)
    moved = np.flatnonzero((rounded != X).any(axis=1))
    if moved.size == 0:
        return True
    outputs = getattr(model.estimator_, "predict_proba", model.estimator_.predict)
    try:
        seen = outputs(model._tree_input(rounded[moved]))
    except InvalidPointError:  # rounding put a point off the manifold: keep float64
        return False
    return bool(np.array_equal(seen, outputs(model._tree_input(X[moved]))))


# -- XGBoost's UBJSON model, as hyp2onnx.estimators._xgboost read it -----------

_NUMBERS = {
    "i": ("i1", "b"),
    "U": ("u1", "B"),
    "I": ("i2", "h"),
    "l": ("i4", "i"),
    "L": ("i8", "q"),
    "d": ("f4", "f"),
    "D": ("f8", "d"),
}
_ARRAYS = {ord(m): np.dtype(">" + dtype) for m, (dtype, _) in _NUMBERS.items()}
_SCALARS = {ord(m): struct.Struct(">" + code) for m, (_, code) in _NUMBERS.items()}


def old_ubj_load(buf: bytearray) -> Any:
    """Parse UBJSON; typed numeric arrays become numpy views into ``buf``."""

    def length(i: int) -> tuple[int, int]:
        s = _SCALARS[buf[i]]
        return s.unpack_from(buf, i + 1)[0], i + 1 + s.size

    def value(i: int, marker: int) -> tuple[Any, int]:
        if marker in _SCALARS:
            s = _SCALARS[marker]
            return s.unpack_from(buf, i)[0], i + s.size
        if marker == ord("S"):
            k, i = length(i)
            return bytes(buf[i : i + k]).decode(), i + k
        if marker in (ord("T"), ord("F"), ord("Z")):
            return {ord("T"): True, ord("F"): False, ord("Z"): None}[marker], i
        if marker not in (ord("["), ord("{")):
            raise UnsupportedModelError(
                f"unexpected UBJSON marker {chr(marker)!r} in the XGBoost model"
            )
        typed = count = None
        if buf[i] == ord("$"):
            typed, i = buf[i + 1], i + 2
        if buf[i] == ord("#"):
            count, i = length(i + 1)
        end = ord("]") if marker == ord("[") else ord("}")
        if marker == ord("[") and typed in _ARRAYS:
            if count is None:  # UBJSON gives a typed container its count ($ then #)
                raise UnsupportedModelError(
                    "a typed UBJSON array without a count in the XGBoost model"
                )
            dt = _ARRAYS[typed]
            return np.frombuffer(buf, dt, count, i), i + count * dt.itemsize
        items: list[Any] = []
        while (len(items) < count) if count is not None else (buf[i] != end):
            if marker == ord("{"):
                k, i = length(i)
                key, i = bytes(buf[i : i + k]).decode(), i + k
            if typed is None:
                item_marker, i = buf[i], i + 1
            else:
                item_marker = typed
            item, i = value(i, item_marker)
            items.append((key, item) if marker == ord("{") else item)
        i += 1 if count is None else 0
        return (dict(items) if marker == ord("{") else items), i

    return value(1, buf[0])[0]


# -- the threshold correction's per-tree path ----------------------------------


def old_correct_trees(
    trees: list[TreeArrays],
    X: np.ndarray,
    rows: list[np.ndarray],
    *,
    op: Op,
    threshold_dtype: str = "float64",
    midpoint: Midpoint | np.ndarray = "einstein",
    place: Placer | None = None,
) -> tuple[list[np.ndarray], CorrectionReport]:
    """``hyp2onnx.correction.shared_rows.correct_trees`` before issue 40: trees that do
    not share their rows placed one by one."""
    thresholds_only = all(t.categories is None for t in trees)
    common = shared_rows(rows) if len(trees) > 1 and thresholds_only else None
    if common is not None:
        seen = X if common.size == X.shape[0] else X[common]
        return correct_shared_rows(
            trees, seen, op=op, threshold_dtype=threshold_dtype, midpoint=midpoint, place=place
        )
    out, report = [], CorrectionReport()
    for tree, r in zip(trees, rows, strict=True):
        seen = X if r.size == X.shape[0] else X[r]
        largest_left, smallest_right = old_tree_neighbours(tree, seen, op)
        placement = Placement(op, threshold_dtype, midpoint, place)
        fixed = None if tree.categories is None else tree.categories.member
        placed = placement.thresholds(
            tree.feature, tree.threshold, largest_left, smallest_right, fixed
        )
        thresholds, tree_report = placed[0], CorrectionReport.of(tree.threshold, *placed)
        out.append(thresholds)
        report = report + tree_report
    return out, report


def old_tree_neighbours(tree: TreeArrays, X: np.ndarray, op: Op) -> tuple[np.ndarray, np.ndarray]:
    """``hyp2onnx.correction.midpoints.tree_neighbours`` before issue 40's second round:
    every row routed level by level, one unbuffered max per level."""
    n_nodes = tree.feature.shape[0]
    extreme = np.full(2 * n_nodes, -np.inf)
    for start in range(0, X.shape[0], 1 << 15):
        for _, nodes, values, left_mask in walk_levels(tree, X[start : start + (1 << 15)], op):
            values = values.astype(np.float64, copy=False)
            slot = nodes * 2
            slot += ~left_mask
            np.maximum.at(extreme, slot, np.where(left_mask, values, -values))
    return extreme[0::2], -extreme[1::2]


def old_tree_space(
    model: Any, backend: Any, Xk: np.ndarray, sample_weight: np.ndarray | None
) -> TreeSpace:
    """``HyperbolicTreeModel._tree_space`` before issue 40 (``fit`` then mapped the
    training rows with ``transform``)."""
    if not backend.feature_splits:
        space = getattr(model, "tree_space", "klein")
        if space != "klein":
            raise ValueError(
                f"{backend.name} trees split on projections of the Klein coordinates, "
                f"which tree_space={space!r} does not keep; use tree_space='klein'."
            )
        return TreeSpace.fit(Xk[:0], "klein", backend.compare_dtype)
    weighted = None if sample_weight is None else sample_weight != 0
    return TreeSpace.fit(
        Xk if weighted is None or not weighted.any() else Xk[weighted],
        model.tree_space,
        backend.compare_dtype,
        backend.zero_band,
    )


# -- which rows the float32 check hands to the library ------------------------


def old_rows_that_may_cross(
    splits: Splits,
    a: np.ndarray,
    b: np.ndarray,
    *,
    op: Op,
    compare_dtype: str,
    zero_band: float = 0.0,
) -> np.ndarray:
    """``hyp2onnx.ir.crossings.rows_that_may_cross`` before issue 40's second round:
    two searches per moved value."""
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
            t, a_c, b_c = threshold[lo:hi], A[moved, c], B[moved, c]
            differ[moved] |= np.searchsorted(t, a_c, side) != np.searchsorted(t, b_c, side)
    return np.flatnonzero(differ)
