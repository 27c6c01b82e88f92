"""Threshold correction for whole ensembles.

`correct_trees` corrects every tree of a model on the rows it was
grown on. Trees with rows of their own (bootstrapped forests), and single
trees, go through `correct_tree` one by one;
many trees grown on the same rows (boosters, forests without bootstrap)
are corrected in one pass, as follows.

`hyp2onnx.correction.midpoints.correct_tree` routes every training row down
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
its rows is handed to `correct_tree` instead.

The result is identical to `correct_tree` tree
by tree: ``L`` and ``R`` are the same maximum and minimum, placed by the
same `place_thresholds`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .._progress import bar
from .._threads import thread_pool, threaded_map
from ..ir.trees import Op, TreeArrays
from .midpoints import (
    CorrectionReport,
    Midpoint,
    Placement,
    Placer,
    correct_tree,
    tree_neighbours,
)

__all__ = [
    "NeighbourMemo",
    "Nodes",
    "RowsPerTree",
    "correct_shared_rows",
    "correct_trees",
    "shared_neighbours",
    "shared_neighbours_and_sides",
    "shared_rows",
]

#: Candidates a walk looks at first; each further window is _GROWTH times larger.
_FIRST_WINDOW = 4
_GROWTH = 2
#: A tree is routed instead once its walks in one direction looked at this
#: many candidates per training row and tree level (a candidate costs about
#: half of what routing one row one level does).
_ROUTING_BUDGET = 1.0
#: From this many rows a float32 column is sorted by two radix passes (`_sorting_order`).
_RADIX_MIN_ROWS = 1 << 13
#: Trees sharing their rows are searched while they average at most this many
#: splits (about 8 full levels), routed otherwise (`_searched`).
_SEARCH_MAX_SPLITS = 255
#: Candidates looked at in one batch of a walk's round (a few MB of temporaries);
#: a round over more is done in batches of whole walks.
_BATCH = 1 << 16
#: Largest rank table (entries) also kept in walking order for the first check,
#: and the most used features it is kept for: the copy holds ``u`` times the
#: rank table, so it is kept only while it stays about as small as the data.
_IN_ORDER_MAX = 1 << 24
_IN_ORDER_MAX_FEATURES = 4


#: A model's own routing: tree ``t``'s leaf (node id) for each row of a C-contiguous block.
Routing = Callable[[int, np.ndarray], np.ndarray]


@dataclass
class NeighbourMemo:
    """Every split's neighbours, found once for one set of trees and rows and kept
    for the next placement: `hyp2onnx.correction.correct` places twice when the
    learner's own precision cannot separate some split's neighbours (far points),
    and finding them is most of a correction's time. Placement never writes
    into them."""

    found: tuple[np.ndarray, ...] | None = None

    def get(self, find: Callable[[], tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        if self.found is None:
            self.found = find()
        return self.found


@dataclass(frozen=True)
class RowsPerTree:
    """Each tree's own training rows, made as the correction reaches its tree: a
    bootstrapped forest's rows, held at once, are about ``n`` indices per tree.
    Iterable again (the correction may pass twice); each pass makes them anew."""

    make: Callable[[], Iterator[np.ndarray]]

    def __iter__(self) -> Iterator[np.ndarray]:
        return self.make()


def shared_rows(rows: Iterable[np.ndarray]) -> np.ndarray | None:
    """The one row set every tree saw, or None if the trees saw different rows (rows
    made one tree at a time, not a sequence, are each tree's own)."""
    if not isinstance(rows, Sequence) or not rows:
        return None
    first = rows[0]
    if all(r is first or np.array_equal(r, first) for r in rows[1:]):
        return first
    return None


def correct_trees(
    trees: list[TreeArrays],
    X: np.ndarray,
    rows: Iterable[np.ndarray],
    *,
    op: Op,
    threshold_dtype: str = "float64",
    midpoint: Midpoint | np.ndarray = "einstein",
    place: Placer | None = None,
    threads: int = 1,
    routing: Routing | None = None,
    memo: NeighbourMemo | None = None,
) -> tuple[list[np.ndarray], CorrectionReport]:
    """Corrected thresholds of every tree, each on its rows ``X[rows[i]]`` (a list, or an
    iterator that makes them one tree at a time); trees that route their rows go
    ``threads`` at a time, through the library's ``routing`` where given. A ``memo``
    keeps the neighbours for another call with the same trees and rows.

    ``X`` holds the training rows in the backend's comparison precision.
    Several small trees that share their rows are searched in one pass
    (`_searched`); other trees route their rows (a single tree is cheaper to
    route than to sort its rows for).
    """
    # The rank search knows threshold splits only: trees with set-membership
    # splits (categorical codes) are routed.
    thresholds_only = all(t.categories is None for t in trees)
    common = shared_rows(rows) if len(trees) > 1 and thresholds_only else None
    if common is not None:
        seen = X if common.size == X.shape[0] else X[common]
        if _searched(trees):
            return correct_shared_rows(
                trees,
                seen,
                op=op,
                threshold_dtype=threshold_dtype,
                midpoint=midpoint,
                place=place,
                memo=memo,
                threads=threads,
            )
        X, rows = seen, [np.arange(seen.shape[0])] * len(trees)
    if not trees:
        return [], CorrectionReport()
    # Each tree routes its own rows; the thresholds of all trees are then placed
    # in one call (placement is per split, so this is `correct_tree` tree by tree).
    nodes = Nodes.of(trees)
    largest_left, smallest_right = (memo or NeighbourMemo()).get(
        lambda: _routed_neighbours(trees, X, rows, nodes, op, threads, routing)
    )
    fixed = None
    if not thresholds_only:
        fixed = np.concatenate(
            [
                np.zeros(t.feature.shape[0], bool) if t.categories is None else t.categories.member
                for t in trees
            ]
        )
    placement = Placement(op, threshold_dtype, midpoint, place)
    return nodes.per_tree(placement, largest_left, smallest_right, fixed)


def _routed_neighbours(
    trees: list[TreeArrays],
    X: np.ndarray,
    rows: Iterable[np.ndarray],
    nodes: Nodes,
    op: Op,
    threads: int = 1,
    routing: Routing | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every split's nearest training values either side (`tree_neighbours`), each tree
    routing its own rows ``X[rows[i]]``, in `Nodes`' order. On a terminal a bar counts a
    forest's trees (its correction runs for minutes on millions of rows); silent
    elsewhere, and for a lone tree.

    With ``threads`` > 1, that many trees are routed at a time, each on its own
    thread (numpy releases the GIL in the work that counts): the same values, as
    each tree's are its own; at most ``threads`` trees' rows exist at once.
    """
    largest_left = np.empty(nodes.feature.shape[0])
    smallest_right = np.empty(nodes.feature.shape[0])

    def route(t: int, tree: TreeArrays, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        leaf_of = None if routing is None else functools.partial(routing, t)
        return tree_neighbours(tree, X if r.size == X.shape[0] else X[r], op, leaf_of)

    threads = max(1, min(threads, len(trees)))
    work = zip(range(len(trees)), trees, rows, nodes.starts, nodes.sizes, strict=True)
    counted = bar(
        len(trees), "correcting thresholds", unit="trees", unit_scale=False, show=len(trees) > 1
    )
    # One thread routes here: a pool's thread would allocate from an arena of its own,
    # which keeps what it freed (a larger peak resident memory for nothing).
    with counted as shown, thread_pool(threads) as pool:
        while batch := list(itertools.islice(work, threads)):
            done = pool.map(route, *zip(*[(t, tree, r) for t, tree, r, _, _ in batch], strict=True))
            for (_, _, _, start, size), found in zip(batch, done, strict=True):
                at = slice(start, start + size)
                largest_left[at], smallest_right[at] = found
            shown.update(len(batch))
    return largest_left, smallest_right


def _searched(trees: list[TreeArrays]) -> bool:
    """Whether trees that share their rows are cheaper searched than routed.

    A walk costs about the same per split whatever the tree's depth, routing
    costs per row and level: deep, bushy trees (forests without bootstrap,
    extra trees) have far more splits than levels and are routed; boosters'
    small trees are searched. Both give the same neighbours, exactly.
    """
    splits = sum(int(np.count_nonzero(t.feature >= 0)) for t in trees)
    return splits <= _SEARCH_MAX_SPLITS * len(trees)


def correct_shared_rows(
    trees: list[TreeArrays],
    X: np.ndarray,
    *,
    op: Op,
    threshold_dtype: str = "float64",
    midpoint: Midpoint | np.ndarray = "einstein",
    place: Placer | None = None,
    memo: NeighbourMemo | None = None,
    threads: int = 1,
) -> tuple[list[np.ndarray], CorrectionReport]:
    """Corrected thresholds of every tree, all trained on the rows ``X``.

    ``X`` holds the training rows in the backend's comparison precision
    (float32 for XGBoost, or float64 holding such values). Same result as
    `correct_tree` on each tree with ``X``. A ``memo`` keeps the searched
    neighbours for another call with the same trees and rows; the search
    sorts ``threads`` features, and walks both ways, at a time.
    """
    if op not in ("<=", "<"):
        raise ValueError(f"unknown comparison {op!r}; expected '<=' or '<'")
    if not trees:
        return [], CorrectionReport()
    X = np.asarray(X)
    nodes = Nodes.of(trees)
    feature, threshold, tree_of = nodes.feature, nodes.threshold, nodes.tree_of
    largest_left, smallest_right, fallback = (memo or NeighbourMemo()).get(
        lambda: _search(nodes, X, op, threads)[:3]
    )

    # Trees handed to correct_tree are placed there only.
    searched = ~fallback[tree_of]
    internal = feature >= 0
    reached = internal & np.isfinite(largest_left) & np.isfinite(smallest_right)
    new = threshold.copy()
    new[searched] = Placement(op, threshold_dtype, midpoint, place).thresholds(
        feature[searched],
        threshold[searched],
        largest_left[searched],
        smallest_right[searched],
    )[0]
    moved = internal & (new != threshold)
    n_splits, n_moved, n_unreached = (
        np.bincount(tree_of, weights=mask, minlength=len(trees)).astype(np.int64)
        for mask in (internal, moved, internal & ~reached)
    )
    out = np.split(new, nodes.starts[1:])
    for i in np.flatnonzero(fallback):
        out[i], tree_report = correct_tree(
            trees[i], X, op=op, threshold_dtype=threshold_dtype, midpoint=midpoint, place=place
        )
        n_moved[i], n_unreached[i] = tree_report.n_moved, tree_report.n_unreached
    report = CorrectionReport(int(n_splits.sum()), int(n_moved.sum()), int(n_unreached.sum()))
    return out, report


@dataclass(frozen=True)
class Nodes:
    """The nodes of several trees in one set of arrays (children as global indices)."""

    starts: np.ndarray  #: first node of each tree
    sizes: np.ndarray  #: nodes of each tree
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray  #: -1 at leaves
    right: np.ndarray
    tree_of: np.ndarray  #: tree of each node

    @classmethod
    def of(cls, trees: list[TreeArrays]) -> Nodes:
        sizes = np.array([t.feature.shape[0] for t in trees], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        shift = np.repeat(starts, sizes)

        def joined(name: str, dtype: type) -> np.ndarray:
            return np.concatenate([np.asarray(getattr(t, name), dtype=dtype) for t in trees])

        left, right = joined("left", np.int64), joined("right", np.int64)
        return cls(
            starts,
            sizes,
            joined("feature", np.int64),
            joined("threshold", np.float64),
            np.where(left >= 0, left + shift, -1),
            np.where(right >= 0, right + shift, -1),
            np.repeat(np.arange(len(trees)), sizes),
        )

    def per_tree(
        self,
        placement: Placement,
        largest_left: np.ndarray,
        smallest_right: np.ndarray,
        fixed: np.ndarray | None = None,
    ) -> tuple[list[np.ndarray], CorrectionReport]:
        """Every tree's thresholds placed from its splits' neighbours (in these
        nodes' order), and the report over all trees (`CorrectionReport.of`)."""
        placed = placement.thresholds(
            self.feature, self.threshold, largest_left, smallest_right, fixed
        )
        return np.split(placed[0], self.starts[1:]), CorrectionReport.of(self.threshold, *placed)


def _search(
    nodes: Nodes, X: np.ndarray, op: Op, threads: int = 1
) -> tuple[np.ndarray, np.ndarray, np.ndarray, _Ranks | None]:
    """Every node's ``L`` and ``R`` by the rank search, the trees it handed back
    (over budget: their entries are incomplete, route them instead), and the
    sorted rows it searched (None when there was nothing to search)."""
    largest_left = np.full(nodes.feature.shape[0], -np.inf)
    smallest_right = np.full(nodes.feature.shape[0], np.inf)
    fallback = np.zeros(nodes.sizes.shape[0], dtype=bool)
    ranks = None
    if X.shape[0] and np.any(nodes.feature >= 0):
        fallback, ranks = _find_neighbours(
            X,
            nodes.feature,
            nodes.threshold,
            nodes.left,
            nodes.right,
            nodes.starts[nodes.sizes > 0],
            nodes.tree_of,
            op,
            largest_left,
            smallest_right,
            threads,
        )
    return largest_left, smallest_right, fallback, ranks


def shared_neighbours(
    trees: list[TreeArrays], X: np.ndarray, op: Op
) -> tuple[np.ndarray, np.ndarray]:
    """Every node's ``L`` and ``R`` (float64, concatenated over the trees) among the
    rows ``X`` (compared precision) that reach it, all trees grown on ``X``.

    What `correct_trees` places thresholds from, before placing them:
    the rank search of `correct_shared_rows` for several trees with
    threshold splits only, each tree routed (`tree_neighbours`)
    otherwise. Both are exact maxima and minima, so the result does not depend
    on the method, and the ``L`` (``R``) of a union of row sets is the maximum
    (minimum) of theirs.
    """
    _, largest_left, smallest_right, _ = _shared(trees, np.asarray(X), op)
    return largest_left, smallest_right


def shared_neighbours_and_sides(
    trees: list[TreeArrays], X: np.ndarray, op: Op
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """`shared_neighbours`, and per node ``below``/``above``: the nearest values of its
    feature among *all* the rows ``X`` that the comparison sends left and right
    (``-inf``/``inf`` where there is none; float64, zeros +0.0).

    Where the rank search ran, its sorted columns and cuts give them (no
    second sort); otherwise each split feature's distinct values do.
    """
    X = np.asarray(X)
    nodes, largest_left, smallest_right, ranks = _shared(trees, X, op)
    if ranks is None:
        below, above = _sides_of_distinct_values(nodes, X, op)
    else:
        below, above = _sides_of_ranks(ranks, nodes.feature)
    # -0.0 and 0.0 are one value to the comparison; which one the sort put nearer
    # the cut is the CPU's sort kernel's choice: +0.0, as the tree space holds zeros.
    return largest_left, smallest_right, below + 0.0, above + 0.0


def _shared(
    trees: list[TreeArrays], X: np.ndarray, op: Op
) -> tuple[Nodes, np.ndarray, np.ndarray, _Ranks | None]:
    """`shared_neighbours`' nodes, ``L`` and ``R``, and the rank search's sorted rows (None
    where every tree was routed)."""
    nodes = Nodes.of(trees)
    ranks = None
    if len(trees) > 1 and all(t.categories is None for t in trees):
        largest_left, smallest_right, routed, ranks = _search(nodes, X, op)
    else:
        largest_left = np.full(nodes.feature.shape[0], -np.inf)
        smallest_right = np.full(nodes.feature.shape[0], np.inf)
        routed = np.ones(len(trees), dtype=bool)
    X64 = X.astype(np.float64, copy=False)
    for i in np.flatnonzero(routed):
        at = slice(nodes.starts[i], nodes.starts[i] + nodes.sizes[i])
        largest_left[at], smallest_right[at] = tree_neighbours(trees[i], X64, op)
    return nodes, largest_left, smallest_right, ranks


def _sides_of_ranks(ranks: _Ranks, feature: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per split, the sorted values of its feature just below and at its cut: the rows
    of rank below ``pos`` are those the comparison sends left."""
    below = np.full(feature.shape[0], -np.inf)
    above = np.full(feature.shape[0], np.inf)
    split = np.flatnonzero(feature >= 0)
    flat, pos = ranks.col[split] * ranks.n, ranks.pos[split]
    left, right = pos > 0, pos < ranks.n
    below[split[left]] = ranks.value(flat[left] + pos[left] - 1)
    above[split[right]] = ranks.value(flat[right] + pos[right])
    return below, above


def _sides_of_distinct_values(nodes: Nodes, X: np.ndarray, op: Op) -> tuple[np.ndarray, np.ndarray]:
    """Per split, the nearest values of its feature in ``X`` either side of its threshold:
    one sort of each split feature's distinct values, then a binary search per split."""
    feature, threshold = nodes.feature, nodes.threshold
    below = np.full(feature.shape[0], -np.inf)
    above = np.full(feature.shape[0], np.inf)
    if X.shape[0] == 0:
        return below, above
    side: Literal["left", "right"] = "right" if op == "<=" else "left"
    for f in np.unique(feature[feature >= 0]):
        at = np.flatnonzero(feature == f)
        u = np.unique(X[:, f]).astype(np.float64)
        pos = np.searchsorted(u, threshold[at], side=side)
        below[at] = np.where(pos > 0, u[np.maximum(pos - 1, 0)], -np.inf)
        above[at] = np.where(pos < u.size, u[np.minimum(pos, u.size - 1)], np.inf)
    return below, above


def _chunks(walks: np.ndarray, count: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """``walks`` and their candidate ``count`` in consecutive batches of about `_BATCH`
    candidates (a walk is never split)."""
    edges = np.flatnonzero(np.diff(np.cumsum(count) // _BATCH)) + 1
    return list(zip(np.split(walks, edges), np.split(count, edges), strict=True))


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
    threads: int = 1,
) -> tuple[np.ndarray, _Ranks]:
    """Fill ``largest_left``/``smallest_right`` of every split; return trees to route instead,
    and the sorted rows. The two walks read the plan only, each writing its own array:
    with ``threads`` > 1 they go side by side."""
    ranks = _rank_features(X, feature, threshold, op, threads)
    boxes = _node_boxes(ranks, feature, left, right, roots, tree_of)
    plan = _Walks.plan(ranks, boxes, tree_of)
    down, up = threaded_map(
        lambda way: plan.walk(*way), [(-1, largest_left), (1, smallest_right)], threads
    )
    return down | up, ranks


@dataclass(frozen=True)
class _Ranks:
    """The training rows sorted once per feature the splits use.

    ``order[c]`` sorts used feature ``c`` (`value` reads its sorted values),
    ``rank[row, c]`` is a row's position in it; ``col[j]`` is split ``j``'s
    feature as a used-feature column (-1 at leaves) and ``pos[j]`` its cut:
    the rows of rank below ``pos[j]`` satisfy ``x OP threshold``. Ties may be
    ordered any way: the comparison holds exactly for the ranks below
    ``searchsorted(sorted, t, side)``, whatever the tie order.
    """

    n: int
    u: int
    col: np.ndarray
    pos: np.ndarray
    order: np.ndarray  #: [u, n], int32 while row * u + c fits there
    rank: np.ndarray  #: [n, u] int32
    #: ``rank`` read in walking order (``rank[order[c][i]]`` for flat ``c * n + i``),
    #: for sequential reads in the first check; None when too large to keep.
    in_order: np.ndarray | None
    X: np.ndarray  #: the rows, as compared
    used: np.ndarray  #: the feature of each used column

    def value(self, flat: np.ndarray) -> np.ndarray:
        """The values at flat sorted positions ``c * n + i`` (``i``-th smallest of used
        column ``c``), read from the rows: a table of every sorted column would
        hold another copy of the rows."""
        return self.X[self.order.ravel().take(flat), self.used.take(flat // self.n)]


def _rank_features(
    X: np.ndarray, feature: np.ndarray, threshold: np.ndarray, op: Op, threads: int = 1
) -> _Ranks:
    """Sort the rows on every feature a split uses and place every split's cut (``threads``
    features at a time: each writes its own column of the tables)."""
    n = X.shape[0]
    internal = feature >= 0
    used, column = np.unique(feature[internal], return_inverse=True)
    u = used.shape[0]
    col = np.full(feature.shape[0], -1, dtype=np.int64)
    col[internal] = column
    # Row numbers in 32 bits while every flat rank index ``row * u + c`` fits there:
    # half the memory of the largest table the search keeps.
    index = _index_dtype(n * max(u, 1))
    order = np.empty((u, n), dtype=index)
    rank = np.empty((n, u), dtype=np.int32)
    positions = np.arange(n, dtype=np.int32)
    side: Literal["left", "right"] = "left" if op == "<" else "right"
    pos = np.zeros(feature.shape[0], dtype=np.int64)

    def sort(c: int) -> None:
        column = np.ascontiguousarray(X[:, used[c]])
        permutation = _order_of_permutation(column)
        # Ties in any order (see `_Ranks`).
        order[c] = _sorting_order(column) if permutation is None else permutation
        rank[order[c], c] = positions
        at = np.flatnonzero(col == c)
        # As compared; widened when read.
        pos[at] = np.searchsorted(column.take(order[c]), threshold[at], side=side)

    threaded_map(sort, range(u), threads)
    small = u * u * n <= _IN_ORDER_MAX and u <= _IN_ORDER_MAX_FEATURES
    in_order = rank.take(order.ravel(), axis=0).ravel() if small else None
    return _Ranks(n, u, col, pos, order, rank, in_order, X, used)


def _index_dtype(size: int) -> type[np.signedinteger]:
    """int32 while every index below ``size`` fits there (half intp's memory), else intp."""
    return np.int32 if size < 1 << 31 else np.intp


def _sorting_order(column: np.ndarray) -> np.ndarray:
    """An order that sorts ``column`` (ties in any order): ``np.argsort``'s, or for a
    long float32 column two stable passes over its bits' 16-bit halves, which numpy
    sorts by radix, in linear time (measured in docs/results.md, "On a cluster").

    The bits become an unsigned key in the floats' order: a negative float's
    bits inverted, a positive one's sign bit set (-0.0 then sorts just before
    0.0, which compare equal).
    """
    if column.dtype != np.float32 or column.shape[0] < _RADIX_MIN_ROWS:
        return np.argsort(column)
    key = column.view(np.uint32) >> 31
    key *= np.uint32(0x7FFFFFFF)
    key |= np.uint32(0x80000000)
    key ^= column.view(np.uint32)
    index = _index_dtype(column.shape[0])
    order = np.argsort(key.astype(np.uint16), kind="stable").astype(index)  # low 16 bits
    key >>= 16
    high = key.astype(np.uint16)
    del key
    return order.take(np.argsort(high.take(order), kind="stable"))


def _order_of_permutation(column: np.ndarray) -> np.ndarray | None:
    """The order that sorts ``column`` when it holds each of ``1 .. n`` once, else None.

    A rank space's column without ties is such a permutation (continuous
    coordinates have none): its sorting order is the inverse permutation,
    one scatter where a sort costs O(n log n), and the same array as
    ``np.argsort``'s, distinct values having one sorting order only. ``n``
    values that are integers in ``[1, n]`` and fill every slot are a
    permutation; anything else (ties, non-integers, NaN) returns None.
    """
    n = column.shape[0]
    if n == 0 or column.dtype.kind != "f" or column.min() != 1 or column.max() != n:
        return None  # NaN fails both comparisons
    index = _index_dtype(n)
    at = column.astype(index)  # no larger than argsort's order
    if not np.array_equal(at, column):
        return None
    np.subtract(at, 1, out=at)
    order = np.full(n, -1, dtype=index)
    order[at] = np.arange(n, dtype=index)
    return None if order.min() < 0 else order


@dataclass(frozen=True)
class _Boxes:
    """Every split's region as a box of rank intervals, top-down over all trees.

    A row reaches split ``nodes[i]`` iff its rank on every used feature
    ``c`` lies in ``[lo[i, c], hi[i, c])``; ``depth_of_tree`` counts each
    tree's levels of splits.
    """

    nodes: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    depth_of_tree: np.ndarray


def _node_boxes(
    ranks: _Ranks,
    feature: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    roots: np.ndarray,
    tree_of: np.ndarray,
) -> _Boxes:
    """Cut each parent's box at its split: the left child keeps ranks below the cut."""
    internal = feature >= 0
    nodes_by_level, lo_by_level, hi_by_level = [], [], []
    depth_of_tree = np.zeros(int(tree_of[-1]) + 1, dtype=np.int64)
    nodes = roots
    lo = np.zeros((roots.shape[0], ranks.u), dtype=np.int32)
    hi = np.full((roots.shape[0], ranks.u), ranks.n, dtype=np.int32)
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
        k, c, p = np.arange(nodes.shape[0]), ranks.col[nodes], ranks.pos[nodes]
        hi_left, lo_right = hi.copy(), lo.copy()
        hi_left[k, c] = np.minimum(hi[k, c], p)
        lo_right[k, c] = np.maximum(lo[k, c], p)
        nodes = np.concatenate([left[nodes], right[nodes]])
        lo, hi = np.concatenate([lo, lo_right]), np.concatenate([hi_left, hi])
    return _Boxes(
        np.concatenate(nodes_by_level),
        np.concatenate(lo_by_level),
        np.concatenate(hi_by_level),
        depth_of_tree,
    )


@dataclass(frozen=True)
class _Walks:
    """The walks from every split's cut to its nearest rows inside the box.

    ``c``, ``lo_c``, ``hi_c`` and ``p`` are each box's split column, its
    interval there and the cut clipped to it; ``checks`` are the box's other
    intervals, narrowest first, as ``(column, lo, hi)`` per box; the first
    of them is also the "slab" a long walk reads whole instead.
    """

    ranks: _Ranks
    nodes: np.ndarray
    tree: np.ndarray  #: tree of each box
    n_trees: int
    budget: np.ndarray  #: per tree: candidates looked at before it is routed instead
    c: np.ndarray
    lo_c: np.ndarray
    hi_c: np.ndarray
    p: np.ndarray
    checks: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    n_checks: np.ndarray
    slab_width: np.ndarray

    @classmethod
    def plan(cls, ranks: _Ranks, boxes: _Boxes, tree_of: np.ndarray) -> _Walks:
        n, nodes, lo, hi = ranks.n, boxes.nodes, boxes.lo, boxes.hi
        k = np.arange(nodes.shape[0])
        c = ranks.col[nodes]
        lo_c, hi_c = lo[k, c].astype(np.int64), hi[k, c].astype(np.int64)
        p = np.minimum(np.maximum(ranks.pos[nodes], lo_c), hi_c)
        width = hi - lo
        width[k, c] = n
        n_checks = (width < n).sum(axis=1)
        by_width = np.argsort(width, axis=1, kind="stable")[:, : int(n_checks.max(initial=0))]
        checks = [
            (by_width[:, i].copy(), lo[k, by_width[:, i]], hi[k, by_width[:, i]])
            for i in range(by_width.shape[1])
        ]
        # A walk that has looked at as many candidates as its narrowest other
        # interval holds switches to reading that whole interval instead
        # (the "slab"): at most twice the cheaper of the two.
        if checks:
            slab_width = np.maximum(checks[0][2] - checks[0][1], 0).astype(np.int64)  # empty: 0
        else:
            slab_width = np.full(nodes.shape[0], n + 1, dtype=np.int64)
        return cls(
            ranks,
            nodes,
            tree_of[nodes],
            boxes.depth_of_tree.shape[0],
            _ROUTING_BUDGET * n * np.maximum(boxes.depth_of_tree, 1),
            c,
            lo_c,
            hi_c,
            p,
            checks,
            n_checks,
            slab_width,
        )

    def inside(
        self, row: np.ndarray, box: np.ndarray, alive: np.ndarray, todo: list
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Keep the candidates whose ranks pass every check in ``todo``."""
        rank_flat, u = self.ranks.rank.ravel(), self.ranks.u
        for check_col, check_lo, check_hi in todo:
            r = rank_flat.take(row * u + check_col.take(box))
            keep = np.flatnonzero((r >= check_lo.take(box)) & (r < check_hi.take(box)))
            alive, box, row = alive.take(keep), box.take(keep), row.take(keep)
        return alive, box, row

    def walk(self, sign: int, found: np.ndarray) -> np.ndarray:
        """Walk down from each cut (largest value left, ``sign`` -1) or up (smallest
        value right, +1), writing what each finds into ``found``; return the
        trees whose walks went over budget (to be routed instead)."""
        c, p, tree, n = self.c, self.p, self.tree, self.ranks.n
        start, remaining = (p - 1, p - self.lo_c) if sign < 0 else (p, self.hi_c - p)
        cursor = c * n + start  # flat position in order (and `_Ranks.value`)
        window = np.full(self.nodes.shape[0], _FIRST_WINDOW, dtype=np.int64)
        scanned = np.zeros(self.nodes.shape[0], dtype=np.int64)
        work = np.zeros(self.n_trees)
        routed = np.zeros(self.n_trees, dtype=bool)
        to_slab = []
        active = np.flatnonzero(remaining > 0)
        while active.size:
            count = np.minimum(window[active], remaining[active])
            hit = np.concatenate(
                [
                    self._look(sign, part, count_of_part, cursor, found)
                    for part, count_of_part in _chunks(active, count)
                ]
            )
            # Charge the work to each tree; trees over budget are routed instead.
            np.add.at(work, tree[active], count)
            routed |= work > self.budget
            cursor[active] += sign * count
            remaining[active] -= count
            scanned[active] += count
            window[active] *= _GROWTH
            active = active[~hit & (remaining[active] > 0)]
            active = active[~routed[tree[active]]]
            long = scanned[active] >= self.slab_width[active]
            to_slab.append(active[long])
            active = active[~long]
        # No walk at all when no split has rows on this side (a small partition).
        slab = np.concatenate(to_slab) if to_slab else np.zeros(0, dtype=np.int64)
        slab = slab[~routed[tree[slab]]]
        for part, _ in _chunks(slab, self.slab_width[slab]) if slab.size else ():
            routed |= self._read_slabs(sign, part, found, work)
        return routed

    def _look(
        self,
        sign: int,
        active: np.ndarray,
        count: np.ndarray,
        cursor: np.ndarray,
        found: np.ndarray,
    ) -> np.ndarray:
        """Look at the next ``count`` candidates of each walk in ``active``; write what
        the walks that hit a row inside their box find; return which hit."""
        ranks, checks = self.ranks, self.checks
        u = ranks.u
        order_flat, rank_flat = ranks.order.ravel(), ranks.rank.ravel()
        offset = np.cumsum(count) - count
        total = int(offset[-1] + count[-1])
        at = np.repeat(cursor[active] - sign * offset, count)
        if sign < 0:
            at -= np.arange(total)
        else:
            at += np.arange(total)
        todo = checks[: self.n_checks[active].max()]
        if todo:
            # First check on every candidate: per-walk values are repeated
            # (cheap), ranks read in walking order when that table exists.
            check_col, check_lo, check_hi = todo[0]
            g = np.repeat(check_col.take(active), count)
            if ranks.in_order is not None:
                r = ranks.in_order.take(at * u + g)
            else:
                r = rank_flat.take(order_flat.take(at) * u + g)
            alive = np.flatnonzero(
                (r >= np.repeat(check_lo.take(active), count))
                & (r < np.repeat(check_hi.take(active), count))
            )
            # The rest on the few candidates left.
            box = active.take(np.searchsorted(offset, alive, side="right") - 1)
            alive, _, _ = self.inside(order_flat.take(at.take(alive)), box, alive, todo[1:])
        else:
            alive = np.arange(total)
        # The first candidate inside the box, walk by walk.
        first = np.searchsorted(alive, offset)
        hit = first < alive.size
        hit[hit] = alive[first[hit]] < offset[hit] + count[hit]
        found[self.nodes[active[hit]]] = ranks.value(at.take(alive.take(first[hit])))
        return hit

    def _read_slabs(
        self, sign: int, slab: np.ndarray, found: np.ndarray, work: np.ndarray
    ) -> np.ndarray:
        """Every row of each slab on this side of the cut and inside the box; the
        largest (smallest) rank on the split column among them."""
        ranks, c = self.ranks, self.c
        n, u = ranks.n, ranks.u
        slab_col, slab_lo, _ = self.checks[0]
        count = self.slab_width[slab]
        offset = np.cumsum(count) - count
        total = int(offset[-1] + count[-1])
        at = np.repeat(slab_col.take(slab) * n + slab_lo.take(slab) - offset, count)
        at += np.arange(total)
        row = ranks.order.ravel().take(at)
        rc = ranks.rank.ravel().take(row * u + np.repeat(c.take(slab), count))
        side_lo, side_hi = (self.lo_c, self.p) if sign < 0 else (self.p, self.hi_c)
        alive = np.flatnonzero(
            (rc >= np.repeat(side_lo.take(slab), count))
            & (rc < np.repeat(side_hi.take(slab), count))
        )
        box = slab.take(np.searchsorted(offset, alive, side="right") - 1)
        alive, box, _ = self.inside(row.take(alive), box, alive, self.checks[1:])
        if alive.size:
            rc = rc.take(alive)
            starts = np.flatnonzero(np.diff(box, prepend=-1))
            best = (np.maximum if sign < 0 else np.minimum).reduceat(rc, starts)
            walks = box.take(starts)
            found[self.nodes[walks]] = ranks.value(c.take(walks) * n + best)
        np.add.at(work, self.tree[slab], count)
        return work > self.budget
