"""Threshold correction for whole ensembles.

:func:`correct_trees` corrects every tree of a model on the rows it was
grown on. Trees with rows of their own (bootstrapped forests), and single
trees, go through :func:`~hyp2onnx.thresholds.correct_tree` one by one;
many trees grown on the same rows (boosters, forests without bootstrap)
are corrected in one pass, as follows.

:func:`hyp2onnx.thresholds.correct_tree` routes every training row down
every tree: O(n * depth) per tree, which for a 100-tree booster on 100k rows
costs several times the booster's own training. Here all trees share one
set of training rows (a booster without row subsampling), and each split
only needs two numbers: ``L``, the largest value routed left, and ``R``,
the smallest value routed right, among the rows that reached the node.

So the rows are sorted once per feature, and every split's region becomes
a box of rank intervals (a row reaches the node iff its rank on each
feature lies in the box). ``L`` is found by walking down the split
feature's sorted rows from the threshold until the first row inside the
box, ``R`` likewise upward. A walk looks at the rows that lie between
``L`` and ``R`` (few for large nodes), in windows that double, for all
splits of all trees at once; each candidate is checked against the box's
narrowest interval first, so most are dropped after one comparison. A walk
that has looked at as many rows as that narrowest interval holds reads the
interval instead (the "slab"), so a small node costs at most about twice
the cheaper of the two. A tree whose search would cost more than routing
its rows is handed to :func:`~hyp2onnx.thresholds.correct_tree` instead.

The result is identical to :func:`~hyp2onnx.thresholds.correct_tree` tree
by tree: ``L`` and ``R`` are the same maximum and minimum, placed by the
same :func:`~hyp2onnx.thresholds.place_thresholds`.
"""

from __future__ import annotations

import sys

import numpy as np

from ._tree import Op, TreeArrays
from .thresholds import (
    CorrectionReport,
    Midpoint,
    Placer,
    correct_tree,
    thresholds_from_neighbours,
)

__all__ = ["correct_shared_rows", "correct_trees", "shared_rows"]

#: Candidates a walk looks at first; each further window is _GROWTH times larger.
_FIRST_WINDOW = 4
_GROWTH = 2
#: A tree is routed instead once its walks in one direction looked at this
#: many candidates per training row and tree level (a candidate costs about
#: half of what routing one row one level does).
_ROUTING_BUDGET = 1.0
#: Largest rank table (entries) also kept in walking order for the first check.
_IN_ORDER_MAX = 1 << 24


def shared_rows(rows: list[np.ndarray]) -> np.ndarray | None:
    """The one row set every tree saw, or None if the trees saw different rows."""
    if not rows:
        return None
    first = rows[0]
    if all(r is first or np.array_equal(r, first) for r in rows[1:]):
        return first
    return None


def correct_trees(
    trees: list[TreeArrays],
    X: np.ndarray,
    rows: list[np.ndarray],
    *,
    op: Op,
    threshold_dtype: str = "float64",
    midpoint: Midpoint | np.ndarray = "einstein",
    place: Placer | None = None,
) -> tuple[list[np.ndarray], CorrectionReport]:
    """Corrected thresholds of every tree, each on its rows ``X[rows[i]]``.

    ``X`` holds the training rows in the backend's comparison precision.
    Several trees that share their rows are corrected in one pass (a single
    tree is cheaper to route than to sort its rows for).
    """
    # The rank search knows threshold splits only: trees with set-membership
    # splits (categorical codes) are routed.
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
        thresholds, tree_report = correct_tree(
            tree, seen, op=op, threshold_dtype=threshold_dtype, midpoint=midpoint, place=place
        )
        out.append(thresholds)
        report = report + tree_report
    return out, report


def correct_shared_rows(
    trees: list[TreeArrays],
    X: np.ndarray,
    *,
    op: Op,
    threshold_dtype: str = "float64",
    midpoint: Midpoint | np.ndarray = "einstein",
    place: Placer | None = None,
) -> tuple[list[np.ndarray], CorrectionReport]:
    """Corrected thresholds of every tree, all trained on the rows ``X``.

    ``X`` holds the training rows in the backend's comparison precision
    (float32 for XGBoost, or float64 holding such values). Same result as
    :func:`~hyp2onnx.thresholds.correct_tree` on each tree with ``X``.
    """
    if op not in ("<=", "<"):
        raise ValueError(f"unknown comparison {op!r}; expected '<=' or '<'")
    if not trees:
        return [], CorrectionReport()
    X = np.asarray(X)
    X64 = X.astype(np.float64, copy=False)
    n = X.shape[0]
    sizes = np.array([t.feature.shape[0] for t in trees], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    shift = np.repeat(starts, sizes)
    feature = np.concatenate([np.asarray(t.feature, dtype=np.int64) for t in trees])
    threshold = np.concatenate([np.asarray(t.threshold, dtype=np.float64) for t in trees])
    left = np.concatenate([np.asarray(t.left, dtype=np.int64) for t in trees])
    right = np.concatenate([np.asarray(t.right, dtype=np.int64) for t in trees])
    left = np.where(left >= 0, left + shift, -1)
    right = np.where(right >= 0, right + shift, -1)
    tree_of = np.repeat(np.arange(len(trees)), sizes)
    internal = feature >= 0

    largest_left = np.full(feature.shape[0], -np.inf)
    smallest_right = np.full(feature.shape[0], np.inf)
    fallback = np.zeros(len(trees), dtype=bool)
    if n and internal.any():
        fallback = _find_neighbours(
            X, feature, threshold, left, right, starts[sizes > 0], tree_of, op,
            largest_left, smallest_right,
        )

    # Trees handed to correct_tree are placed there only.
    searched = ~fallback[tree_of]
    internal = feature >= 0
    reached = internal & np.isfinite(largest_left) & np.isfinite(smallest_right)
    new = threshold.copy()
    new[searched] = thresholds_from_neighbours(
        feature[searched], threshold[searched], largest_left[searched], smallest_right[searched],
        op=op, threshold_dtype=threshold_dtype, midpoint=midpoint, place=place,
    )[0]
    moved = internal & (new != threshold)
    n_splits, n_moved, n_unreached = (
        np.bincount(tree_of, weights=mask, minlength=len(trees)).astype(np.int64)
        for mask in (internal, moved, internal & ~reached)
    )
    out = np.split(new, starts[1:])
    for i in np.flatnonzero(fallback):
        out[i], tree_report = correct_tree(
            trees[i], X64, op=op, threshold_dtype=threshold_dtype, midpoint=midpoint, place=place
        )
        n_moved[i], n_unreached[i] = tree_report.n_moved, tree_report.n_unreached
    report = CorrectionReport(int(n_splits.sum()), int(n_moved.sum()), int(n_unreached.sum()))
    return out, report


def _argsort(values: np.ndarray) -> np.ndarray:
    """Ascending order of a float column, by 16-bit radix passes (numpy's stable
    sort of uint16 is a radix sort): about twice as fast as ``np.argsort``."""
    values = np.ascontiguousarray(values)
    if sys.byteorder != "little" or values.dtype not in (np.float32, np.float64):
        return np.argsort(values)
    unsigned = np.uint32 if values.dtype == np.float32 else np.uint64
    bits = values.view(unsigned)
    sign = unsigned(1) << unsigned(8 * values.itemsize - 1)
    # Flip so that unsigned order is float order (-0.0 sorts just before 0.0:
    # equal values, either order is fine).
    key = np.where(bits & sign, ~bits, bits | sign)
    digits = key.view(np.uint16).reshape(values.shape[0], -1)  # column 0: lowest bits
    order = np.argsort(digits[:, 0], kind="stable")
    for i in range(1, digits.shape[1]):
        order = order.take(np.argsort(digits[:, i].take(order), kind="stable"))
    return order


def _find_neighbours(
    X: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    roots: np.ndarray,
    tree_of: np.ndarray,
    op: Op,
    largest_left: np.ndarray,
    smallest_right: np.ndarray,
) -> np.ndarray:
    """Fill ``largest_left``/``smallest_right`` of every split; return trees to route instead."""
    n = X.shape[0]
    n_trees = int(tree_of[-1]) + 1
    internal = feature >= 0
    used, column = np.unique(feature[internal], return_inverse=True)
    u = used.shape[0]
    col = np.full(feature.shape[0], -1, dtype=np.int64)
    col[internal] = column  # split feature as a column of the used features

    # Sorted order of each used feature and every row's ranks. Ties may be
    # ordered any way: "x < t" (or "x <= t") holds exactly for the ranks
    # below searchsorted(sorted, t, side), whatever the tie order.
    columns = [np.ascontiguousarray(X[:, f]) for f in used]
    order = np.empty((u, n), dtype=np.intp)
    sorted_values = np.empty((u, n))
    for i, o in enumerate(map(_argsort, columns)):
        order[i] = o
        sorted_values[i] = columns[i].take(o)
    rank = np.empty((n, u), dtype=np.int32)
    positions = np.arange(n, dtype=np.int32)
    side = "left" if op == "<" else "right"
    pos = np.zeros(feature.shape[0], dtype=np.int64)
    for c in range(u):
        rank[order[c], c] = positions
        at = np.flatnonzero(col == c)
        pos[at] = np.searchsorted(sorted_values[c], threshold[at], side=side)
    order_flat, sorted_flat, rank_flat = order.ravel(), sorted_values.ravel(), rank.ravel()
    # The first check reads the ranks of candidates in walking order, so it
    # gets its own copy laid out that way (sequential reads); later checks,
    # on the few candidates left, read ranks by row.
    in_order = rank.take(order_flat, axis=0).ravel() if u * u * n <= _IN_ORDER_MAX else None

    # Top-down over all trees at once: a node's rows are those whose rank on
    # every used feature c lies in [lo[c], hi[c]), the box its path cuts.
    nodes_by_level, lo_by_level, hi_by_level = [], [], []
    depth_of_tree = np.zeros(n_trees, dtype=np.int64)
    nodes = roots
    lo = np.zeros((roots.shape[0], u), dtype=np.int32)
    hi = np.full((roots.shape[0], u), n, dtype=np.int32)
    depth = 0
    while nodes.size:
        keep = internal[nodes]
        nodes, lo, hi = nodes[keep], lo[keep], hi[keep]
        if not nodes.size:
            break
        nodes_by_level.append(nodes)
        lo_by_level.append(lo)
        hi_by_level.append(hi)
        depth += 1
        depth_of_tree[tree_of[nodes]] = depth
        k, c, p = np.arange(nodes.shape[0]), col[nodes], pos[nodes]
        hi_left, lo_right = hi.copy(), lo.copy()
        hi_left[k, c] = np.minimum(hi[k, c], p)
        lo_right[k, c] = np.maximum(lo[k, c], p)
        nodes = np.concatenate([left[nodes], right[nodes]])
        lo, hi = np.concatenate([lo, lo_right]), np.concatenate([hi_left, hi])
    nodes = np.concatenate(nodes_by_level)
    lo, hi = np.concatenate(lo_by_level), np.concatenate(hi_by_level)
    budget = _ROUTING_BUDGET * n * np.maximum(depth_of_tree, 1)

    k = np.arange(nodes.shape[0])
    c = col[nodes]
    lo_c, hi_c = lo[k, c].astype(np.int64), hi[k, c].astype(np.int64)
    p = np.minimum(np.maximum(pos[nodes], lo_c), hi_c)
    # The box's other intervals are the checks, narrowest first.
    width = hi - lo
    width[k, c] = n
    n_checks = (width < n).sum(axis=1)
    by_width = np.argsort(width, axis=1, kind="stable")[:, : int(n_checks.max(initial=0))]
    checks = [
        (by_width[:, i].copy(), lo[k, by_width[:, i]], hi[k, by_width[:, i]])
        for i in range(by_width.shape[1])
    ]

    # A walk that has looked at as many candidates as its narrowest other
    # interval holds rows switches to reading that whole interval instead
    # (the "slab"): at most twice the cheaper of the two.
    if checks:
        slab_col, slab_lo, slab_hi = checks[0]
        slab_width = np.maximum(slab_hi - slab_lo, 0).astype(np.int64)  # empty boxes: 0
    else:
        slab_width = np.full(nodes.shape[0], n + 1, dtype=np.int64)

    def inside(row: np.ndarray, box: np.ndarray, alive: np.ndarray, todo: list) -> tuple:
        """Keep the candidates whose ranks pass every check in ``todo``."""
        for check_col, check_lo, check_hi in todo:
            r = rank_flat.take(row * u + check_col.take(box))
            keep = np.flatnonzero((r >= check_lo.take(box)) & (r < check_hi.take(box)))
            alive, box, row = alive.take(keep), box.take(keep), row.take(keep)
        return alive, box, row

    def walk(sign: int) -> np.ndarray:
        """Walk down from each threshold (largest value left) or up (smallest value right)."""
        found = largest_left if sign < 0 else smallest_right
        start, remaining = (p - 1, p - lo_c) if sign < 0 else (p, hi_c - p)
        cursor = c * n + start  # flat position in order/sorted_values
        window = np.full(nodes.shape[0], _FIRST_WINDOW, dtype=np.int64)
        scanned = np.zeros(nodes.shape[0], dtype=np.int64)
        work = np.zeros(n_trees)
        routed = np.zeros(n_trees, dtype=bool)
        tree = tree_of[nodes]
        to_slab = []
        active = np.flatnonzero(remaining > 0)
        while active.size:
            count = np.minimum(window[active], remaining[active])
            offset = np.cumsum(count) - count
            total = int(offset[-1] + count[-1])
            at = np.repeat(cursor[active] - sign * offset, count)
            if sign < 0:
                at -= np.arange(total)
            else:
                at += np.arange(total)
            todo = checks[: n_checks[active].max()]
            if todo:
                # First check on every candidate: per-walk values are repeated
                # (cheap), ranks read in walking order when that table exists.
                check_col, check_lo, check_hi = todo[0]
                g = np.repeat(check_col.take(active), count)
                if in_order is not None:
                    r = in_order.take(at * u + g)
                else:
                    r = rank_flat.take(order_flat.take(at) * u + g)
                alive = np.flatnonzero(
                    (r >= np.repeat(check_lo.take(active), count))
                    & (r < np.repeat(check_hi.take(active), count))
                )
                # The rest on the few candidates left.
                box = active.take(np.searchsorted(offset, alive, side="right") - 1)
                alive, _, _ = inside(order_flat.take(at.take(alive)), box, alive, todo[1:])
            else:
                alive = np.arange(total)
            # The first candidate inside the box, walk by walk.
            first = np.searchsorted(alive, offset)
            hit = first < alive.size
            hit[hit] = alive[first[hit]] < offset[hit] + count[hit]
            found[nodes[active[hit]]] = sorted_flat.take(at.take(alive.take(first[hit])))
            # Charge the work to each tree; trees over budget are routed instead.
            np.add.at(work, tree[active], count)
            routed |= work > budget
            cursor[active] += sign * count
            remaining[active] -= count
            scanned[active] += count
            window[active] *= _GROWTH
            active = active[~hit & (remaining[active] > 0)]
            active = active[~routed[tree[active]]]
            long = scanned[active] >= slab_width[active]
            to_slab.append(active[long])
            active = active[~long]
        slab = np.concatenate(to_slab)
        slab = slab[~routed[tree[slab]]]
        if slab.size:
            # Every row of the slab that lies on this side of the threshold and
            # inside the box; the largest (smallest) rank on c among them.
            count = slab_width[slab]
            offset = np.cumsum(count) - count
            total = int(offset[-1] + count[-1])
            at = np.repeat(slab_col.take(slab) * n + slab_lo.take(slab) - offset, count)
            at += np.arange(total)
            row = order_flat.take(at)
            rc = rank_flat.take(row * u + np.repeat(c.take(slab), count))
            side_lo, side_hi = (lo_c, p) if sign < 0 else (p, hi_c)
            alive = np.flatnonzero(
                (rc >= np.repeat(side_lo.take(slab), count))
                & (rc < np.repeat(side_hi.take(slab), count))
            )
            box = slab.take(np.searchsorted(offset, alive, side="right") - 1)
            alive, box, _ = inside(row.take(alive), box, alive, checks[1:])
            if alive.size:
                rc = rc.take(alive)
                starts = np.flatnonzero(np.diff(box, prepend=-1))
                best = (np.maximum if sign < 0 else np.minimum).reduceat(rc, starts)
                walks = box.take(starts)
                found[nodes[walks]] = sorted_flat.take(c.take(walks) * n + best)
            np.add.at(work, tree[slab], count)
            routed |= work > budget
        return routed

    return walk(-1) | walk(1)
