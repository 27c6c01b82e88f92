"""Move split thresholds to the hyperbolic midpoint (Fast-HyperDT, Algorithm 1).

A Euclidean learner on Klein coordinates finds the right *partition* of its
training rows but puts each threshold at the arithmetic midpoint of the two
nearest training values ``L < R``. The hyperbolic tree puts it at their
Einstein midpoint instead. Here, for every split of a tree, ``L`` is the
largest value routed left and ``R`` the smallest routed right *among the
rows that reached that node*, compared exactly as the backend compares
(its operator and precision), and the new threshold is placed so that every
one of those rows stays on its side:

* ``x <= t`` (scikit-learn, LightGBM): ``L <= t < R``;
* ``x < t`` (XGBoost): ``L < t <= R``;

then rounded to the dtype the backend stores thresholds in, in the direction
that keeps that interval (toward -inf for ``<=``, toward +inf for ``<``).
Hence the tree routes the rows it was trained on exactly as before.

Pure numpy; one walk of the tree's rows, O(n * depth), no loop over rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..geometry import einstein_midpoint, gnomonic_midpoint
from ..ir.trees import Op, TreeArrays, goes_left, round_threshold, walk_levels

Midpoint = Literal["einstein", "angular", "arithmetic"]
#: Per-node arrays (features, thresholds, neighbours) as the placers take them.
Array = np.ndarray
#: Places thresholds from ``(feature, threshold, largest_left, smallest_right)``
#: per node, instead of `place_thresholds` (see `hyp2onnx.correction.tree_space`).
Placer = Callable[[Array, Array, Array, Array], np.ndarray]
_RULES = {
    "einstein": einstein_midpoint,
    "angular": gnomonic_midpoint,
    "arithmetic": lambda L, R: L / 2.0 + R / 2.0,
}
#: Per-feature rule name of features whose splits keep the learner's threshold
#: (categorical codes: the backend's own rule).
KEEP = "keep"

#: Rows walked at a time by `correct_tree` (temporaries of a few hundred kB).
_BLOCK_ROWS = 1 << 15

__all__ = [
    "CorrectionReport",
    "LeafRouting",
    "Placement",
    "correct_tree",
    "place_thresholds",
    "tree_neighbours",
]


@dataclass(frozen=True)
class CorrectionReport:
    """What a correction did, summed over trees."""

    n_splits: int = 0  #: internal nodes seen
    n_moved: int = 0  #: thresholds whose value changed
    n_unreached: int = 0  #: splits left as they were: no training row on one side

    @classmethod
    def of(
        cls, threshold: np.ndarray, new: np.ndarray, internal: np.ndarray, reached: np.ndarray
    ) -> CorrectionReport:
        """What `Placement.thresholds` did, from what it returned (``new``, ``internal``,
        ``reached``): the splits a midpoint applies to, those whose ``threshold`` it
        moved, those reached from one side only."""
        return cls(
            n_splits=int(internal.sum()),
            n_moved=int(np.sum(new[internal] != threshold[internal])),
            n_unreached=int(np.sum(internal & ~reached)),
        )

    def __add__(self, other: CorrectionReport) -> CorrectionReport:
        return CorrectionReport(
            self.n_splits + other.n_splits,
            self.n_moved + other.n_moved,
            self.n_unreached + other.n_unreached,
        )


def midpoints(L: np.ndarray, R: np.ndarray, midpoint: Midpoint | np.ndarray) -> np.ndarray:
    """Midpoints of ``L < R`` by one rule, or by a rule per element.

    Rules: ``"einstein"`` (hyperbolic, Klein coordinates), ``"angular"``
    (spherical, gnomonic coordinates: [`hyp2onnx.blocks.gnomonic_midpoint`][hyp2onnx.blocks.gnomonic_midpoint])
    and ``"arithmetic"``. An array of rule names picks one per element.
    """
    if isinstance(midpoint, str):
        if midpoint not in _RULES:
            raise ValueError(
                f"midpoint must be one of {', '.join(map(repr, _RULES))}, got {midpoint!r}"
            )
        return _RULES[midpoint](L, R)
    rules = np.asarray(midpoint)
    unknown = set(np.unique(rules).tolist()) - set(_RULES)
    if unknown:
        raise ValueError(f"unknown midpoint rule(s) {sorted(unknown)}; expected {list(_RULES)}")
    m = np.empty_like(L)
    for name, rule in _RULES.items():
        at = rules == name
        if at.any():
            m[at] = rule(L[at], R[at])
    return m


def place_thresholds(
    L: np.ndarray,
    R: np.ndarray,
    *,
    op: Op,
    threshold_dtype: str = "float64",
    midpoint: Midpoint | np.ndarray = "einstein",
) -> np.ndarray:
    """New thresholds between ``L < R`` that keep ``L`` left and ``R`` right.

    ``midpoint`` is one rule for all, or a rule per element (`midpoints`).

    ``L`` and ``R`` must be values representable in ``threshold_dtype``
    (they are training values in the backend's comparison precision).
    """
    L = np.asarray(L, dtype=np.float64)
    R = np.asarray(R, dtype=np.float64)
    if np.any(~(L < R)):
        raise ValueError("every split needs L < R (largest value left < smallest value right)")
    m = midpoints(L, R, midpoint)
    if op == "<=":
        m = np.clip(m, L, np.nextafter(R, -np.inf))
        return np.maximum(round_threshold(m, threshold_dtype, "down"), L)
    if op == "<":
        m = np.clip(m, np.nextafter(L, np.inf), R)
        return np.minimum(round_threshold(m, threshold_dtype, "up"), R)
    raise ValueError(f"unknown comparison {op!r}; expected '<=' or '<'")


@dataclass(frozen=True)
class Placement:
    """How a learner's thresholds are placed between their nearest training values:
    its comparison ``op``, the dtype it stores thresholds in, the ``midpoint``
    rule (one, or an array giving each feature's rule: `midpoints`) and
    ``place``, a `Placer` used instead of `place_thresholds` when given.

    Every correction (one tree, an ensemble, merged summaries) gathers each
    split's neighbours its own way and hands them to one of these.
    """

    op: Op
    threshold_dtype: str = "float64"
    midpoint: Midpoint | np.ndarray = "einstein"
    place: Placer | None = None

    def thresholds(
        self,
        feature: np.ndarray,
        threshold: np.ndarray,
        largest_left: np.ndarray,
        smallest_right: np.ndarray,
        fixed: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """New thresholds from each split's nearest training values on either side.

        ``largest_left``/``smallest_right`` are per node, infinite where no
        training row went that way; such splits keep their threshold, as do the
        nodes ``fixed`` marks (set-membership splits) and splits on features
        whose rule is ``"keep"``, unless ``place`` is given: it then places every
        node's threshold but the ``fixed`` ones. Returns the new
        thresholds (float64), the mask of splits a midpoint applies to, and of
        those the ones reached from both sides.
        """
        midpoint, place = self.midpoint, self.place
        internal = feature >= 0
        if fixed is not None:
            internal &= ~fixed
        rules = midpoint
        if not isinstance(midpoint, str):
            per_feature = np.asarray(midpoint)
            internal &= np.where(internal, per_feature[np.maximum(feature, 0)], KEEP) != KEEP
        reached = internal & np.isfinite(largest_left) & np.isfinite(smallest_right)
        if place is not None:
            if fixed is None:
                return place(feature, threshold, largest_left, smallest_right), internal, reached
            new = place(np.where(fixed, -1, feature), threshold, largest_left, smallest_right)
            return np.where(fixed, threshold, new), internal, reached
        if not isinstance(midpoint, str):
            rules = per_feature[feature[reached]]
        new = np.asarray(threshold, dtype=np.float64).copy()
        new[reached] = place_thresholds(
            largest_left[reached],
            smallest_right[reached],
            op=self.op,
            threshold_dtype=self.threshold_dtype,
            midpoint=rules,
        )
        # -0.0 and 0.0 tie, so which one is largest (smallest) depends on the order
        # the rows are seen in, and a threshold at zero could carry either sign.
        # Both route every value alike; keep +0.0 so that every order, partitioned
        # or not, gives the same bits.
        new[reached] += 0.0
        return new, internal, reached


#: A tree's own routing (the library's compiled one): the leaf, a node id of the tree,
#: each row of a C-contiguous block of rows reaches.
LeafRouting = Callable[[np.ndarray], np.ndarray]


def tree_neighbours(
    tree: TreeArrays, X: np.ndarray, op: Op, leaf_of: LeafRouting | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each node's largest value routed left and smallest routed right (float64),
    among the rows ``X`` (compared precision) that reach it; ``-inf``/``inf`` where none.
    ``leaf_of``: the library's own routing of rows to ``tree``'s leaves, used for
    `leaves` where given (the same leaves, from compiled code).

    Threshold trees: each row's leaf (`leaves`), each leaf's column-wise
    extremes, then each node's extremes from its children's, bottom up
    (`_subtree_extremes`); ``L`` of a split is the largest value of its
    feature below its left child. Trees with set-membership splits route
    level by level (`_routed_neighbours`). Both are exact maxima and minima,
    O(n * depth) for the walk; a zero comes back as +0.0 (which of -0.0 and
    0.0 a max keeps depends on the order it meets them).
    """
    if tree.categories is not None:
        return _routed_neighbours(tree, X, op)
    X = np.ascontiguousarray(X)
    largest, smallest = _subtree_extremes(tree, X, op, leaf_of)
    internal = np.flatnonzero(tree.feature >= 0)
    f = tree.feature[internal]
    largest_left = np.full(tree.feature.shape[0], -np.inf)
    smallest_right = np.full(tree.feature.shape[0], np.inf)
    largest_left[internal] = largest[tree.left[internal], f]
    smallest_right[internal] = smallest[tree.right[internal], f]
    return largest_left + 0.0, smallest_right + 0.0


def _subtree_extremes(
    tree: TreeArrays, X: np.ndarray, op: Op, leaf_of: LeafRouting | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Per node and column, the largest and smallest value (float64) among the rows of
    ``X`` below the node (``-inf``/``inf`` where none): rows grouped by leaf (`leaves`,
    or ``leaf_of``), in blocks of `_BLOCK_ROWS` (small temporaries), then every parent
    from its two children."""
    if leaf_of is None:
        leaf_of = functools.partial(leaves, tree, op=op)
    n_nodes, d = tree.feature.shape[0], X.shape[1]
    largest = np.full((n_nodes, d), -np.inf)
    smallest = np.full((n_nodes, d), np.inf)
    key = np.uint16 if n_nodes <= 1 << 16 else np.int64  # 16-bit keys: a radix sort
    for start in range(0, X.shape[0], _BLOCK_ROWS):
        block = X[start : start + _BLOCK_ROWS]
        leaf = leaf_of(block)
        order = np.argsort(leaf.astype(key), kind="stable")
        leaf = leaf.take(order)
        starts = np.flatnonzero(np.concatenate([[True], leaf[1:] != leaf[:-1]]))
        rows = block.take(order, axis=0)
        at = leaf.take(starts)
        largest[at] = np.maximum(largest[at], np.maximum.reduceat(rows, starts, axis=0))
        smallest[at] = np.minimum(smallest[at], np.minimum.reduceat(rows, starts, axis=0))
    for parents in reversed(_levels(tree)):
        left, right = tree.left.take(parents), tree.right.take(parents)
        largest[parents] = np.maximum(largest[left], largest[right])
        smallest[parents] = np.minimum(smallest[left], smallest[right])
    return largest, smallest


def _levels(tree: TreeArrays) -> list[np.ndarray]:
    """The internal nodes of ``tree``, level by level from the root."""
    out, nodes = [], np.zeros(1, dtype=np.int64)
    while nodes.size:
        nodes = nodes[tree.feature.take(nodes) >= 0]
        if nodes.size:
            out.append(nodes)
            nodes = np.concatenate([tree.left.take(nodes), tree.right.take(nodes)])
    return out


def leaves(tree: TreeArrays, X: np.ndarray, op: Op) -> np.ndarray:
    """The leaf (local node id) each row of ``X`` (C-contiguous) reaches, for a tree of
    threshold splits: every row steps down one level at a time, rows at leaves
    dropped once they are a quarter of those still walking."""
    n, d = X.shape
    at_leaf = tree.feature < 0
    if at_leaf[0]:  # a lone leaf (oblique trees then project onto no normal: d = 0)
        return np.zeros(n, dtype=np.int64)
    feature = np.where(at_leaf, 0, tree.feature)
    children = np.stack([tree.left, tree.right], axis=1)
    children[at_leaf] = np.flatnonzero(at_leaf)[:, None]  # a leaf steps to itself
    children = children.reshape(-1)
    flat = X.reshape(-1)
    threshold = tree.threshold
    out = np.zeros(n, dtype=np.int64)
    rows = np.arange(n)
    at = rows * d  # each walking row's start in ``flat``
    nodes = out.copy()
    while rows.size:
        slot = nodes * 2
        slot += ~goes_left(flat.take(at + feature.take(nodes)), threshold.take(nodes), op)
        nodes = children.take(slot)
        done = at_leaf.take(nodes)
        if 4 * np.count_nonzero(done) >= done.size:
            out[rows[done]] = nodes[done]
            keep = ~done
            rows, nodes, at = rows[keep], nodes[keep], at[keep]
    return out


def _routed_neighbours(tree: TreeArrays, X: np.ndarray, op: Op) -> tuple[np.ndarray, np.ndarray]:
    """`tree_neighbours` by routing the rows level by level (any split kind)."""
    n_nodes = tree.feature.shape[0]
    # One unbuffered max per level, no boolean selection: slot 2j collects
    # the values going left at node j, slot 2j+1 the negated values going
    # right (negation is exact, so -max(-v) is min(v) bit for bit).
    # Rows go in blocks so the walk's temporaries stay in cache.
    extreme = np.full(2 * n_nodes, -np.inf)
    for start in range(0, X.shape[0], _BLOCK_ROWS):
        for _, nodes, values, left_mask in walk_levels(tree, X[start : start + _BLOCK_ROWS], op):
            values = values.astype(np.float64, copy=False)
            slot = nodes * 2
            slot += ~left_mask
            np.maximum.at(extreme, slot, np.where(left_mask, values, -values))
    return extreme[0::2] + 0.0, 0.0 - extreme[1::2]


def correct_tree(
    tree: TreeArrays,
    X: np.ndarray,
    *,
    op: Op,
    threshold_dtype: str = "float64",
    midpoint: Midpoint | np.ndarray = "einstein",
    place: Placer | None = None,
) -> tuple[np.ndarray, CorrectionReport]:
    """Corrected thresholds of one tree and a report.

    ``midpoint``: one rule, or each feature's rule (`midpoints`);
    set-membership splits keep what they are.

    ``X`` holds the rows this tree was trained on, already rounded to the
    backend's comparison precision (``_tree.as_compared``, or simply stored in
    that dtype, e.g. float32). Splits that no
    training row reaches on one side keep their threshold and are counted
    in ``n_unreached``.
    """
    largest_left, smallest_right = tree_neighbours(tree, X, op)
    fixed = None if tree.categories is None else tree.categories.member
    placement = Placement(op, threshold_dtype, midpoint, place)
    placed = placement.thresholds(tree.feature, tree.threshold, largest_left, smallest_right, fixed)
    return placed[0], CorrectionReport.of(tree.threshold, *placed)
