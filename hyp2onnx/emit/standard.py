"""Trees compiled to standard ONNX operators only (no ai.onnx.ml domain).

For runtimes without the ML tree operators (onnxruntime-web's WebGPU
bundle, OpenVINO, tract, builds made with ``--disable_ml_ops``). Every tree
is evaluated for all rows at once, then the trees' leaf values are added in
tree order with ``CumSum`` as in the exact encoding, so the outputs are the
exact encoding's, bit for bit. No Loop or sequence operator is used (those
runtimes lack them too), so a call holds ``N * T * C`` numbers at once:
score very large batches in pieces.

A tree's leaves are found by one of two strategies, chosen by depth
(:func:`choose_strategy`):

* ``"perfect"`` (depth <= 12): every tree is laid out as a perfect binary
  tree and walked level by level, ``pos = 2 pos + right``; each level reads
  the split's feature and threshold with ``GatherElements`` from
  ``[2^level, T]`` tables (in onnxruntime ``GatherElements`` costs about
  1 ns an element, ``Gather`` about 12). Empty slots test +inf and go left.
* ``"pointer"`` (deeper trees, whose perfect layout would be too large):
  level by level along child pointers in ``[max nodes, T]`` tables; leaves
  point to themselves.

Dense matrix products (hummingbird's GEMM strategy: a one-hot MatMul picks
the features, one more MatMul with the path matrix finds the leaf) were
measured too and were slower than the perfect walk at every depth from 1 to
4 in onnxruntime (e.g. 146k vs 227k rows/s at depth 4, 100 trees), so they
are not used.

Comparisons are made in the backend's precision with thresholds rounded as
for the tree operators, so routing is exact for float32 and float64 values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Ensemble
from ..ir.trees import threshold_in
from ._graph import GraphBuilder
from .trees import (
    cast_to,
    finish_scores,
    per_class_trees,
    sum_looked_up,
    sum_tree_columns,
    tree_columns,
    tree_of_node,
)

STAGE = "trees"
PERFECT_MAX_DEPTH = 12


@dataclass(frozen=True)
class _Layout:
    """Where each node of each tree sits: depth, position in its level, local index."""

    depth: np.ndarray  # per node
    position: np.ndarray  # per node, 0 .. 2^depth - 1
    local: np.ndarray  # per node, index within its tree
    tree: np.ndarray  # per node
    max_depth: int
    max_nodes: int


def _layout(ensemble: Ensemble) -> _Layout:
    n = ensemble.n_nodes
    depth = np.zeros(n, dtype=np.int64)
    position = np.zeros(n, dtype=np.int64)
    frontier = ensemble.roots
    while frontier.size:
        parents = frontier[ensemble.feature[frontier] >= 0]
        left, right = ensemble.left[parents], ensemble.right[parents]
        depth[left] = depth[right] = depth[parents] + 1
        position[left] = 2 * position[parents]
        position[right] = 2 * position[parents] + 1
        frontier = np.concatenate([left, right])
    tree = tree_of_node(ensemble)
    local = np.arange(n) - ensemble.roots[tree]
    sizes = np.diff(np.append(ensemble.roots, n))
    return _Layout(depth, position, local, tree, int(depth.max()), int(sizes.max()))


def choose_strategy(ensemble: Ensemble) -> str:
    """``"perfect"`` or ``"pointer"`` by the deepest leaf (see module doc)."""
    return "perfect" if _layout(ensemble).max_depth <= PERFECT_MAX_DEPTH else "pointer"


def emit_standard(
    g: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble, *, strategy: str | None = None
) -> str:
    """Raw scores ``[N, n_outputs]`` in ``ensemble.sum_dtype`` from standard operators."""
    strategy = strategy or choose_strategy(ensemble)
    if strategy not in ("perfect", "pointer"):
        raise ValueError(f"unknown strategy {strategy!r}")
    layout = _layout(ensemble)
    groups = per_class_trees(ensemble)
    # Where each tree's values go: tree order, or by class when each feeds one class.
    column = tree_columns(groups) if groups is not None else np.arange(ensemble.n_trees)
    compare = ensemble.compare_dtype
    k = cast_to(g, k, k_dtype, compare)
    thresholds = threshold_in(ensemble.threshold, compare, ensemble.op)
    greater = "Greater" if ensemble.op == "<=" else "GreaterOrEqual"  # true: go right
    internal = ensemble.feature >= 0
    leaf = ~internal
    T = ensemble.n_trees

    if strategy == "pointer":
        slot = layout.local
        n_slots = layout.max_nodes
    else:
        slot = layout.position << (layout.max_depth - layout.depth)  # leftmost leaf slot
        n_slots = 1 << layout.max_depth

    # Leaf value tables [n_slots, T] (one per output column, or one per
    # class group), in the backend's summation precision.
    if groups is not None:
        value_tables = [np.zeros((n_slots, T), dtype=ensemble.sum_dtype)]
        value_tables[0][slot[leaf], column[layout.tree[leaf]]] = ensemble.value[leaf].sum(axis=1)
    else:
        value_tables = []
        for c in range(ensemble.n_outputs):
            table = np.zeros((n_slots, T), dtype=ensemble.sum_dtype)
            table[slot[leaf], column[layout.tree[leaf]]] = ensemble.value[leaf, c]
            value_tables.append(table)
    tables = [g.const(STAGE, f"leaf_values_{i}", t) for i, t in enumerate(value_tables)]

    members = _Membership.build(g, ensemble)
    if strategy == "perfect":
        find_leaves = _perfect(g, ensemble, layout, column, thresholds, greater, members)
    else:
        find_leaves = _pointer(g, ensemble, layout, column, thresholds, greater, members)

    def tree_sums(b: GraphBuilder, x: str) -> str:
        where = find_leaves(b, x)  # [b, T] leaf slots
        if groups is not None:
            looked_up = b.op(STAGE, "GatherElements", [tables[0], where], axis=0)
            return sum_tree_columns(b, looked_up, groups)
        return sum_looked_up(b, tables, where, T)

    # All rows at once: the exact encoding's row blocks need Loop and sequence
    # operators, which runtimes without the tree operators (OpenVINO, tract)
    # lack as well.
    return finish_scores(g, tree_sums(g, k), ensemble, ensemble.sum_dtype)


#: Largest code table (entries) the standard encoding builds for categorical splits.
MAX_MEMBER_TABLE = 1 << 24


@dataclass(frozen=True)
class _Membership:
    """Set-membership splits without the ML operators: a lookup table of codes.

    Set ``s`` (1 .. M; 0 is "no set") has row ``s`` of a flat boolean table
    ``[(M + 1) * width]``, ``width = largest code + 2``; a value that is not
    an integer in ``0 .. largest code`` (negative, fractional, NaN, inf,
    past the largest code) reads the last column, which is never set, so
    it goes right, as the ensemble operator's BRANCH_MEMBER sends it.
    """

    set_id: np.ndarray  # per node, 0 for threshold splits
    table: str
    width: int

    @staticmethod
    def build(g: GraphBuilder, ensemble: Ensemble) -> _Membership | None:
        cats = ensemble.categories
        if cats is None:
            return None
        nodes = np.flatnonzero(cats.member)
        codes = [cats.codes(int(j)) for j in nodes]
        width = int(max((c.max() for c in codes if c.size), default=0)) + 2
        if (nodes.size + 1) * width > MAX_MEMBER_TABLE:
            raise ValueError(
                f"the standard encoding looks categorical codes up in a table of "
                f"(splits + 1) x (largest code + 2) = {(nodes.size + 1) * width} entries, more "
                f"than {MAX_MEMBER_TABLE}; use the exact encoding (BRANCH_MEMBER nodes), or "
                "renumber the categories densely from 0."
            )
        table = np.zeros((nodes.size + 1, width), dtype=bool)
        for s, c in enumerate(codes, start=1):
            table[s, c] = True
        set_id = np.zeros(ensemble.n_nodes, dtype=np.int64)
        set_id[nodes] = np.arange(1, nodes.size + 1)
        return _Membership(set_id, g.const(STAGE, "member_codes", table.ravel()), width)

    def level_table(self, layout, column, n_slots, slot, nodes, n_trees) -> np.ndarray:
        ids = np.zeros((n_slots, n_trees), dtype=np.int64)
        ids[slot[nodes], column[layout.tree[nodes]]] = self.set_id[nodes]
        return ids

    def goes_right(self, b: GraphBuilder, value: str, ids: str, right: str) -> str:
        """``right`` at threshold splits; at membership splits, "value not in the set"."""
        dtype = np.float32 if self.width <= 1 << 24 else np.float64
        zero = b.const(STAGE, "code_zero", 0, dtype)
        largest = b.const(STAGE, "largest_code", self.width - 2, dtype)
        invalid = b.const(STAGE, "no_code", self.width - 1, dtype)
        v = b.cast(STAGE, value, dtype)
        valid = b.op(
            STAGE,
            "And",
            [
                b.op(
                    STAGE,
                    "And",
                    [
                        b.op(STAGE, "GreaterOrEqual", [v, zero]),
                        b.op(STAGE, "LessOrEqual", [v, largest]),
                    ],
                ),
                b.op(STAGE, "Equal", [b.op(STAGE, "Floor", [v]), v]),
            ],
        )
        code = b.cast(STAGE, b.op(STAGE, "Where", [valid, v, invalid]), np.int64)
        width = b.const(STAGE, "code_width", self.width, np.int64)
        at = b.op(STAGE, "Add", [b.op(STAGE, "Mul", [ids, width]), code])
        inside = b.op(STAGE, "Gather", [self.table, at], axis=0)
        is_set = b.op(STAGE, "Greater", [ids, b.const(STAGE, "no_set", 0, np.int64)])
        # (onnxruntime has no boolean Where.) right = set ? not inside : right
        outside = b.op(STAGE, "And", [is_set, b.op(STAGE, "Not", [inside])])
        threshold_split = b.op(STAGE, "And", [b.op(STAGE, "Not", [is_set]), right])
        return b.op(STAGE, "Or", [outside, threshold_split])


def _level_tables(ensemble, layout, column, thresholds, n_slots, slot, nodes, dtype):
    """Feature and threshold tables [n_slots, T] for ``nodes``; empty slots always go left."""
    T = ensemble.n_trees
    features = np.zeros((n_slots, T), dtype=np.int64)
    limits = np.full((n_slots, T), np.inf, dtype=dtype)
    features[slot[nodes], column[layout.tree[nodes]]] = ensemble.feature[nodes]
    limits[slot[nodes], column[layout.tree[nodes]]] = thresholds[nodes]
    return features, limits


def _zeros_per_tree(b: GraphBuilder, x: str, n_trees: int) -> str:
    """An int64 [rows of x, n_trees] tensor of zeros."""
    rows = b.n_rows(STAGE, x)
    size = b.op(STAGE, "Concat", [rows, b.const(STAGE, "n_trees", [n_trees], np.int64)], axis=0)
    return b.op(STAGE, "Expand", [b.const(STAGE, "zero", np.zeros((1, 1), np.int64)), size])


def _perfect(g, ensemble, layout, column, thresholds, greater, members=None):
    compare = ensemble.compare_dtype
    internal = ensemble.feature >= 0
    levels = []
    for level in range(layout.max_depth):
        nodes = np.flatnonzero(internal & (layout.depth == level))
        features, limits = _level_tables(
            ensemble, layout, column, thresholds, 1 << level, layout.position, nodes, compare
        )
        ids = None
        if members is not None:
            ids = g.const(
                STAGE,
                f"sets_{level}",
                members.level_table(
                    layout, column, 1 << level, layout.position, nodes, ensemble.n_trees
                ),
            )
        levels.append(
            (
                g.const(STAGE, f"features_{level}", features),
                g.const(STAGE, f"thresholds_{level}", limits),
                ids,
            )
        )
    two = g.const(STAGE, "two", 2, np.int64)

    def find_leaves(b: GraphBuilder, x: str) -> str:
        position = _zeros_per_tree(b, x, ensemble.n_trees)  # every row at every root
        for features, limits, ids in levels:
            feature = b.op(STAGE, "GatherElements", [features, position], axis=0)
            value = b.op(STAGE, "GatherElements", [x, feature], axis=1)
            limit = b.op(STAGE, "GatherElements", [limits, position], axis=0)
            right = b.op(STAGE, greater, [value, limit])
            if ids is not None:
                set_ids = b.op(STAGE, "GatherElements", [ids, position], axis=0)
                right = members.goes_right(b, value, set_ids, right)
            right = b.cast(STAGE, right, np.int64)
            position = b.op(STAGE, "Add", [b.op(STAGE, "Mul", [position, two]), right])
        return position

    return find_leaves


def _pointer(g, ensemble, layout, column, thresholds, greater, members=None):
    compare = ensemble.compare_dtype
    internal = ensemble.feature >= 0
    T, n_slots = ensemble.n_trees, layout.max_nodes
    features, limits = _level_tables(
        ensemble,
        layout,
        column,
        thresholds,
        n_slots,
        layout.local,
        np.flatnonzero(internal),
        compare,
    )
    lefts = np.tile(np.arange(n_slots)[:, None], (1, T))  # leaves and padding: stay put
    rights = lefts.copy()
    nodes = np.flatnonzero(internal)
    cols = column[layout.tree[nodes]]
    lefts[layout.local[nodes], cols] = layout.local[ensemble.left[nodes]]
    rights[layout.local[nodes], cols] = layout.local[ensemble.right[nodes]]
    names = [
        g.const(STAGE, label, table)
        for label, table in (
            ("features", features),
            ("thresholds", limits),
            ("lefts", lefts),
            ("rights", rights),
        )
    ]
    set_t = None
    if members is not None:
        set_t = g.const(
            STAGE, "sets", members.level_table(layout, column, n_slots, layout.local, nodes, T)
        )

    def find_leaves(b: GraphBuilder, x: str) -> str:
        feat_t, limit_t, left_t, right_t = names
        node = _zeros_per_tree(b, x, T)  # every row at every root (local node 0)
        for _ in range(layout.max_depth):
            feature = b.op(STAGE, "GatherElements", [feat_t, node], axis=0)
            value = b.op(STAGE, "GatherElements", [x, feature], axis=1)
            limit = b.op(STAGE, "GatherElements", [limit_t, node], axis=0)
            right = b.op(STAGE, greater, [value, limit])
            if set_t is not None:
                set_ids = b.op(STAGE, "GatherElements", [set_t, node], axis=0)
                right = members.goes_right(b, value, set_ids, right)
            node = b.op(
                STAGE,
                "Where",
                [
                    right,
                    b.op(STAGE, "GatherElements", [right_t, node], axis=0),
                    b.op(STAGE, "GatherElements", [left_t, node], axis=0),
                ],
            )
        return node

    return find_leaves
