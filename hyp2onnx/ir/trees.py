"""One tree as plain arrays, and the vectorised walk every stage shares.

A tree is four parallel arrays indexed by node (local to the tree, root 0):
``feature`` (-1 at leaves), ``threshold``, ``left`` and ``right`` (-1 at
leaves). A row goes left iff ``x[feature] OP threshold`` with OP ``"<="`` or
``"<"``, or, at a set-membership split (categorical codes, see
`CategorySets`), iff ``x[feature]`` is one of the node's codes.
Values are compared as float64 after being rounded to the
backend's comparison precision (see `as_compared`), which reproduces
scikit-learn (float32 value vs float64 threshold), XGBoost (float32 vs
float32) and LightGBM (float64 vs float64) exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, NamedTuple

import numpy as np

Op = Literal["<=", "<"]


#: Codes of categorical features are integers below this (LightGBM, XGBoost: 32-bit ints).
_CODE_LIMIT = 1 << 31


class CategorySets(NamedTuple):
    """Set-membership splits of a tree or an ensemble.

    Node ``j`` with ``member[j]`` sends a row left iff its value *equals* one
    of the node's codes (non-negative integers below 2**31); every other
    value (another code, a negative, fractional or NaN value) goes right.
    ``keys`` holds ``j * 2**32 + code`` for every (node, code) pair, sorted.
    """

    member: np.ndarray  # bool, per node
    keys: np.ndarray  # int64, sorted

    @classmethod
    def from_sets(cls, n_nodes: int, sets: dict[int, np.ndarray]) -> CategorySets:
        member = np.zeros(n_nodes, dtype=bool)
        member[list(sets)] = True
        keys = [
            np.int64(node) * (1 << 32) + np.asarray(codes, dtype=np.int64)
            for node, codes in sets.items()
        ]
        return cls(member, np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64))

    def largest_code(self) -> int:
        """The largest code of any node (-1 if there is none)."""
        return int((self.keys & 0xFFFFFFFF).max()) if self.keys.size else -1

    def codes(self, node: int) -> np.ndarray:
        """Sorted codes of membership node ``node``."""
        lo, hi = np.searchsorted(self.keys, [node << 32, (node + 1) << 32])
        return self.keys[lo:hi] - (np.int64(node) << 32)

    def contains(self, nodes: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Whether ``values[i]`` is one of the codes of node ``nodes[i]``."""
        values = np.asarray(values, dtype=np.float64)
        if self.keys.size == 0:
            return np.zeros(values.shape, dtype=bool)
        with np.errstate(invalid="ignore"):
            valid = (values >= 0) & (values < _CODE_LIMIT) & (np.floor(values) == values)
        key = nodes.astype(np.int64) * (1 << 32) + np.where(valid, values, 0).astype(np.int64)
        at = np.minimum(np.searchsorted(self.keys, key), self.keys.size - 1)
        return valid & (self.keys.take(at) == key)

    def slice(self, start: int, stop: int) -> CategorySets | None:
        """The sets of nodes ``start .. stop - 1``, renumbered from 0 (None if there are none)."""
        member = self.member[start:stop]
        if not member.any():
            return None
        lo, hi = np.searchsorted(self.keys, [np.int64(start) << 32, np.int64(stop) << 32])
        return CategorySets(member, self.keys[lo:hi] - (np.int64(start) << 32))


class TreeArrays(NamedTuple):
    """The split structure of one tree (no leaf values)."""

    feature: np.ndarray  # int64, -1 at leaves
    threshold: np.ndarray  # float64
    left: np.ndarray  # int64, -1 at leaves
    right: np.ndarray  # int64, -1 at leaves
    #: set-membership splits (categorical features), or None: all splits are thresholds
    categories: CategorySets | None = None


def as_compared(X: np.ndarray, compare_dtype: str) -> np.ndarray:
    """``X`` rounded to the precision a backend compares in, held as float64."""
    return np.asarray(X).astype(compare_dtype).astype(np.float64)


def goes_left(values: np.ndarray, thresholds: np.ndarray, op: Op) -> np.ndarray:
    """The comparison every backend makes, for one op."""
    if op == "<=":
        return values <= thresholds
    if op == "<":
        return values < thresholds
    raise ValueError(f"unknown comparison {op!r}; expected '<=' or '<'")


def walk_levels(
    tree: TreeArrays, X: np.ndarray, op: Op
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Route all rows of ``X`` down ``tree`` one level at a time.

    Yields, for every level, ``(rows, nodes, values, left_mask)``: the rows
    still at an internal node, the node each is at, the value it is tested
    on and whether it goes left. Cost O(n * depth), no loop over rows.
    """
    n, d = X.shape
    # Flat gathers (``take``) are several times faster than 2-D fancy
    # indexing and ``np.where`` over two gathered child arrays.
    flat = X.reshape(-1) if X.flags.c_contiguous else None
    children = np.stack([tree.left, tree.right], axis=1).reshape(-1)  # [2j]: left, [2j+1]: right
    rows = np.arange(n)
    nodes = np.zeros(n, dtype=np.int64)
    while rows.size:
        feat = tree.feature.take(nodes)
        internal = feat >= 0
        if not internal.all():
            rows, nodes, feat = rows[internal], nodes[internal], feat[internal]
            if not rows.size:
                return
        values = flat.take(rows * d + feat) if flat is not None else X[rows, feat]
        left_mask = goes_left(values, tree.threshold.take(nodes), op)
        if tree.categories is not None:
            member = tree.categories.member.take(nodes)
            if member.any():
                left_mask[member] = tree.categories.contains(nodes[member], values[member])
        yield rows, nodes, values, left_mask
        slot = nodes * 2
        slot += ~left_mask
        nodes = children.take(slot)


def apply(tree: TreeArrays, X: np.ndarray, op: Op) -> np.ndarray:
    """Leaf index (local node id) that each row of ``X`` reaches."""
    leaves = np.zeros(X.shape[0], dtype=np.int64)
    for rows, nodes, _, left_mask in walk_levels(tree, X, op):
        leaves[rows] = np.where(left_mask, tree.left[nodes], tree.right[nodes])
    return leaves


def round_threshold(t: np.ndarray, dtype: str, direction: Literal["down", "up"]) -> np.ndarray:
    """Round float64 thresholds to ``dtype`` toward -inf (``"down"``) or +inf (``"up"``).

    Returned as float64 holding ``dtype`` values. Round-to-nearest would
    misroute inputs that fall between ``t`` and the rounded value.
    """
    t = np.asarray(t, dtype=np.float64)
    if np.dtype(dtype) == np.float64:
        return t.copy()
    r = t.astype(dtype)
    if direction == "down":
        r = np.where(r.astype(np.float64) > t, np.nextafter(r, r.dtype.type(-np.inf)), r)
    elif direction == "up":
        r = np.where(r.astype(np.float64) < t, np.nextafter(r, r.dtype.type(np.inf)), r)
    else:
        raise ValueError(f"direction must be 'down' or 'up', got {direction!r}")
    return r.astype(np.float64)


def threshold_in(t: np.ndarray, dtype: str, op: Op) -> np.ndarray:
    """Thresholds in ``dtype`` that route every ``dtype`` value as ``t`` does under ``op``.

    Rounded toward -inf for ``"<="`` and toward +inf for ``"<"`` (see
    `round_threshold`); held in ``dtype``. What an emitter writes for
    a runtime that compares in ``dtype``.
    """
    return round_threshold(t, dtype, "down" if op == "<=" else "up").astype(dtype)


def where_node(roots: np.ndarray, nodes: np.ndarray) -> str:
    """``"tree T, node J"`` (local to the tree) of the first of ``nodes``."""
    j = int(nodes[0])
    t = int(np.searchsorted(roots, j, side="right")) - 1
    more = f" (and {nodes.size - 1} more)" if nodes.size > 1 else ""
    return f"tree {t}, node {j - int(roots[t])}{more}"


def structure_damage(
    feature: np.ndarray,
    threshold: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    roots: np.ndarray,
    n_tested: int,
    member: np.ndarray | None = None,
) -> str | None:
    """What breaks the trees' invariants, or None: every format's trees promise them.

    ``roots`` are the trees' first nodes (trees are contiguous). A node is a
    leaf (feature -1, no children) or tests an existing feature with two
    children inside its own tree; no node has two parents and no root has
    one (so no walk loops); a threshold split's threshold is finite. A
    library may load and predict a file that breaks them (it follows the
    links unchecked), but a graph cannot agree with it.
    """
    n = feature.shape[0]
    node = np.arange(n)
    tree = np.searchsorted(roots, node, side="right") - 1
    stop = np.append(roots[1:], n)[tree] if roots.size else node
    start = roots[tree] if roots.size else node
    internal = feature >= 0
    if roots.size and (roots[0] != 0 or np.any(np.diff(roots) <= 0) or roots[-1] >= max(n, 1)):
        return "the trees' first nodes are out of order"
    checks = (
        (feature < -1, "a negative feature index"),
        (~internal & ((left != -1) | (right != -1)), "a leaf (feature -1) with children"),
        (internal & (feature >= n_tested), f"a feature index beyond the last ({n_tested - 1})"),
        (
            internal & ((left < start) | (left >= stop) | (right < start) | (right >= stop)),
            "a child outside its tree",
        ),
    )
    for bad, what in checks:
        if bad.any():
            return f"{where_node(roots, np.flatnonzero(bad))} has {what}"
    children = np.concatenate([left[internal], right[internal]])
    parents = np.bincount(children, minlength=n)
    parents[roots] += 1  # a root has no parent: one more makes it count twice
    if np.any(parents > 1):
        return f"{where_node(roots, np.flatnonzero(parents > 1))} is reached from two places"
    thresholds = internal if member is None else internal & ~member
    if not np.all(np.isfinite(threshold[thresholds])):
        bad = np.flatnonzero(thresholds & ~np.isfinite(threshold))
        return f"{where_node(roots, bad)} has threshold {threshold[bad[0]]}"
    return None
