"""Trees compiled to standard ONNX operators only (no ai.onnx.ml domain).

For runtimes without the ML tree operators (onnxruntime-web's WebGPU
bundle, OpenVINO, tract, builds made with ``--disable_ml_ops``). Every tree
is evaluated for all rows at once, then the trees' leaf values are added in
tree order with ``CumSum`` as in the exact encoding, so the outputs are the
exact encoding's, bit for bit. No Loop or sequence operator is used (those
runtimes lack them too), so a call holds ``N * T * C`` numbers at once:
score very large batches in pieces.

Trees are walked level by level, in groups by depth (`plan_groups`):
each group takes only as many steps as its deepest tree, so that a few deep
trees no longer make every tree take their number of steps. The trees,
sorted by depth, are cut into at most `MAX_GROUPS` groups that
minimise a cost model (trees x steps, `STEP_COST` per walk, plus
`GROUP_STEP_COST` per step of each group); the groups' leaf slots
are joined and put back in output-column order with one ``GatherElements``
before the ordered sum. Each group is walked by one of two strategies,
chosen by its depth (`choose_strategy`):

* ``"perfect"`` (depth <= 12): the group's trees laid out as perfect binary
  trees, ``pos = pos + pos + right`` (an ``Add``: an int32 ``Mul`` by 2 is
  slower); each level reads the split's feature and threshold with
  ``GatherElements`` from ``[2^level, trees]`` tables (in onnxruntime
  ``GatherElements`` is several times cheaper an element than ``Gather``
  along the last axis).
* ``"pointer"`` (deeper groups, whose perfect layout would be too large):
  child pointers in ``[max nodes, trees]`` tables with siblings side by
  side, so that a step is ``node = left[node] + right`` (a ``Cast`` and an
  ``Add``, much cheaper than a ``Where`` between the two children); leaves
  point to themselves.

In both, the roots are tested without a table (every row starts there),
leaves and empty slots test ``+inf``, which no Klein coordinate passes
(they go left, under ``GreaterOrEqual`` too; NaN would do the same by IEEE
754, but OpenVINO's CPU plugin answers ``Greater(x, NaN)`` with true), and
slots and feature indices are int32 (``GatherElements`` reads int32
indices faster than int64). The per-class values are stacked as
``[C, N, T]`` and transposed for the sum, cheaper than a ``Concat`` along a
new last axis.

docs/export.md gives the measured throughput against the peer (the plain
ai.onnx.ml graph fed Klein coordinates) for every model, and what was tried
and not kept: more groups, smaller groups, one ``GatherElements`` of a
``[slots, T, C]`` table, each distinct test made once per row before the
walks, and hummingbird's GEMM strategy (a one-hot ``MatMul`` picks the
features, a path-matrix ``MatMul`` finds the leaf), slower than the perfect
walk at every depth measured. LightGBM's many-leaf trees stay furthest from
the peer: every row walks every tree to the depth of its group, where the
peer's operator stops each tree at the row's leaf; walking each row only to
its leaf would need the unfinished (row, tree) pairs compacted
(``NonZero``/``Compress``), which this encoding's runtimes were not checked
with.

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
    sum_in_order,
    sum_tree_columns,
    tree_columns,
    tree_of_node,
)

STAGE = "trees"
PERFECT_MAX_DEPTH = 12
#: Relative cost of one walk step per (row, tree) in onnxruntime (int32 indices),
#: from benchmarks/bench_export.py's timings.
STEP_COST = {"perfect": 1.0, "pointer": 1.2}
#: Fixed cost of one more group per step of its walk, in (row, tree) steps: its own
#: seven kernels per level, plus the reordering; keeps tiny groups from being split off.
GROUP_STEP_COST = 8.0
MAX_GROUPS = 4
INDEX = np.int32  # leaf slots and features: int32 GatherElements indices are faster than int64


@dataclass(frozen=True)
class _Layout:
    """Where each node of each tree sits: depth, position in its level, pointer slot."""

    depth: np.ndarray  # per node
    position: np.ndarray  # per node, 0 .. 2^depth - 1
    local: np.ndarray  # per node, slot in its tree's pointer table (siblings adjacent)
    tree: np.ndarray  # per node
    tree_depth: np.ndarray  # per tree: its deepest leaf


@dataclass(frozen=True)
class Group:
    """Trees walked together: ``trees`` in output-column order, ``depth`` steps."""

    strategy: str
    trees: np.ndarray
    depth: int


def _layout(ensemble: Ensemble) -> _Layout:
    n = ensemble.n_nodes
    depth = np.zeros(n, dtype=np.int64)
    position = np.zeros(n, dtype=np.int64)
    local = np.zeros(n, dtype=np.int64)
    tree = tree_of_node(ensemble)
    used = np.ones(ensemble.n_trees, dtype=np.int64)  # pointer slots taken per tree (root: 0)
    frontier = ensemble.roots
    while frontier.size:
        parents = frontier[ensemble.feature[frontier] >= 0]
        # level by level, siblings side by side: right child = left child + 1
        parents = parents[np.lexsort((local[parents], tree[parents]))]
        left, right = ensemble.left[parents], ensemble.right[parents]
        depth[left] = depth[right] = depth[parents] + 1
        position[left] = 2 * position[parents]
        position[right] = 2 * position[parents] + 1
        owner = tree[parents]
        first = np.searchsorted(owner, owner)  # index of the tree's first parent this level
        local[left] = used[owner] + 2 * (np.arange(parents.size) - first)
        local[right] = local[left] + 1
        np.add.at(used, owner, 2)
        frontier = np.concatenate([left, right])
    tree_depth = np.zeros(ensemble.n_trees, dtype=np.int64)
    np.maximum.at(tree_depth, tree, depth)
    return _Layout(depth, position, local, tree, tree_depth)


def choose_strategy(depth: int) -> str:
    """``"perfect"`` or ``"pointer"`` for a group whose deepest leaf is at ``depth``."""
    return "perfect" if depth <= PERFECT_MAX_DEPTH else "pointer"


def _group_cost(n_trees: int, depth: int) -> float:
    return (n_trees * STEP_COST[choose_strategy(depth)] + GROUP_STEP_COST) * depth


def plan_groups(ensemble: Ensemble, column: np.ndarray | None = None) -> list[Group]:
    """Trees grouped by depth, each group walked only as deep as its deepest tree.

    Trees sorted by depth are cut into at most `MAX_GROUPS` runs that
    minimise the modelled walk cost (`STEP_COST`, `GROUP_STEP_COST`),
    by dynamic programming over the distinct depths.
    """
    tree_depth = _layout(ensemble).tree_depth
    if column is None:
        column = np.arange(ensemble.n_trees)
    depths = np.unique(tree_depth)
    counts = np.array([np.count_nonzero(tree_depth <= d) for d in depths])
    m = depths.size
    # best[g][i]: cheapest cost of the trees of depth <= depths[i] in g + 1 groups
    best = np.full((MAX_GROUPS, m), np.inf)
    cut = np.zeros((MAX_GROUPS, m), dtype=np.int64)
    for i in range(m):
        best[0, i] = _group_cost(int(counts[i]), int(depths[i]))
    for g in range(1, MAX_GROUPS):
        for i in range(m):
            for j in range(i):  # the last group holds depths[j + 1 .. i]
                cost = best[g - 1, j] + _group_cost(int(counts[i] - counts[j]), int(depths[i]))
                if cost < best[g, i]:
                    best[g, i], cut[g, i] = cost, j
    g = int(np.argmin(best[:, m - 1]))
    bounds, i = [], m - 1
    while True:
        bounds.append(i)
        if g == 0:
            break
        i, g = int(cut[g, i]), g - 1
    groups, low = [], -1
    order = np.argsort(column)  # trees in output-column order
    for i in reversed(bounds):
        d = int(depths[i])
        members = order[(tree_depth[order] > low) & (tree_depth[order] <= d)]
        groups.append(Group(strategy=choose_strategy(d), trees=members, depth=d))
        low = d
    return groups


def emit_standard(
    builder: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble, *, strategy: str | None = None
) -> str:
    """Raw scores ``[N, n_outputs]`` in ``ensemble.sum_dtype`` from standard operators.

    ``strategy`` (``"perfect"`` or ``"pointer"``) walks every tree in one
    group that way instead of the groups of `plan_groups`.
    """
    if strategy not in (None, "perfect", "pointer"):
        raise ValueError(f"unknown strategy {strategy!r}")
    layout = _layout(ensemble)
    classes = per_class_trees(ensemble)
    # Where each tree's values go: tree order, or by class when each feeds one class.
    column = tree_columns(classes) if classes is not None else np.arange(ensemble.n_trees)
    if strategy is None:
        groups = plan_groups(ensemble, column)
    else:
        groups = [
            Group(strategy=strategy, trees=np.argsort(column), depth=int(layout.tree_depth.max()))
        ]
    compare = ensemble.compare_dtype
    k = cast_to(builder, k, k_dtype, compare)
    thresholds = threshold_in(ensemble.threshold, compare, ensemble.op)
    greater = "Greater" if ensemble.op == "<=" else "GreaterOrEqual"  # true: go right
    members = _Membership.build(builder, ensemble)
    slot = _slots(ensemble, layout, groups)
    value_tables = _value_tables(ensemble, layout, slot, column, by_class=classes is not None)
    tables = [builder.const(STAGE, f"leaf_values_{i}", t) for i, t in enumerate(value_tables)]
    walk = {"perfect": _perfect, "pointer": _pointer}
    walks = [
        walk[group.strategy](builder, ensemble, layout, group, thresholds, greater, members)
        for group in groups
    ]
    # The groups' columns, one after the other, back in output-column order.
    reorder = None
    if len(groups) > 1:
        joined = column[np.concatenate([group.trees for group in groups])]
        reorder = builder.const(STAGE, "tree_order", np.argsort(joined)[None, :], INDEX)

    def find_leaves(block: GraphBuilder, x: str) -> str:
        parts = [w(block, x) for w in walks]  # [b, trees of the group] leaf slots
        if reorder is None:
            return parts[0]
        joined = block.op(STAGE, "Concat", parts, axis=1)
        index = block.op(STAGE, "Expand", [reorder, block.op(STAGE, "Shape", [joined])])
        return block.op(STAGE, "GatherElements", [joined, index], axis=1)

    # All rows at once: the exact encoding's row blocks need Loop and sequence
    # operators, which runtimes without the tree operators (OpenVINO, tract)
    # lack as well.
    sums = _tree_sums(builder, find_leaves(builder, k), tables, classes, ensemble.n_trees)
    return finish_scores(builder, sums, ensemble, ensemble.sum_dtype)


def _slots(ensemble: Ensemble, layout: _Layout, groups: list[Group]) -> np.ndarray:
    """Each node's slot in its group's walk: the leftmost leaf slot below it
    (perfect layout) or its pointer slot."""
    slot = np.zeros(ensemble.n_nodes, dtype=np.int64)
    for group in groups:
        nodes = np.isin(layout.tree, group.trees)
        if group.strategy == "perfect":
            slot[nodes] = layout.position[nodes] << (group.depth - layout.depth[nodes])
        else:
            slot[nodes] = layout.local[nodes]
    return slot


def _value_tables(
    ensemble: Ensemble, layout: _Layout, slot: np.ndarray, column: np.ndarray, *, by_class: bool
) -> list[np.ndarray]:
    """Leaf value tables ``[n_slots, T]`` (one per output column, or one for trees that
    feed one class each), in the backend's summation precision."""
    leaf = ensemble.feature < 0
    shape = (int(slot.max()) + 1, ensemble.n_trees)
    where = slot[leaf], column[layout.tree[leaf]]
    if by_class:
        table = np.zeros(shape, dtype=ensemble.sum_dtype)
        table[where] = ensemble.value[leaf].sum(axis=1)
        return [table]
    tables = []
    for c in range(ensemble.n_outputs):
        table = np.zeros(shape, dtype=ensemble.sum_dtype)
        table[where] = ensemble.value[leaf, c]
        tables.append(table)
    return tables


def _tree_sums(
    block: GraphBuilder, where: str, tables: list[str], classes: np.ndarray | None, n_trees: int
) -> str:
    """``[b, T]`` leaf slots -> ``[b, C]`` sums of the looked-up values, in tree order."""
    if classes is not None:
        looked_up = block.op(STAGE, "GatherElements", [tables[0], where], axis=0)
        return sum_tree_columns(block, looked_up, classes)
    # Per-class [b, T] values stacked as [C, b, T] (whole blocks, cheaper than a
    # Concat along a new last axis) and transposed to [b, T, C], where CumSum
    # adds each class's trees in order.
    axis = block.const(STAGE, "class_axis", [0], np.int64)
    stacked = [
        block.op(STAGE, "Unsqueeze", [block.op(STAGE, "GatherElements", [t, where], axis=0), axis])
        for t in tables
    ]
    per_class = block.op(STAGE, "Concat", stacked, axis=0)
    per_tree = block.op(STAGE, "Transpose", [per_class], perm=[1, 2, 0])
    return sum_in_order(block, per_tree, axis=1, length=n_trees)


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
    def build(builder: GraphBuilder, ensemble: Ensemble) -> _Membership | None:
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
        return _Membership(set_id, builder.const(STAGE, "member_codes", table.ravel()), width)

    def level_table(self, layout, column, n_slots, slot, nodes, n_trees) -> np.ndarray:
        ids = np.zeros((n_slots, n_trees), dtype=np.int64)
        ids[slot[nodes], column[layout.tree[nodes]]] = self.set_id[nodes]
        return ids

    def goes_right(self, block: GraphBuilder, value: str, ids: str, right: str) -> str:
        """``right`` at threshold splits; at membership splits, "value not in the set"."""
        dtype = np.float32 if self.width <= 1 << 24 else np.float64
        zero = block.const(STAGE, "code_zero", 0, dtype)
        largest = block.const(STAGE, "largest_code", self.width - 2, dtype)
        invalid = block.const(STAGE, "no_code", self.width - 1, dtype)
        v = block.cast(STAGE, value, dtype)
        valid = block.op(
            STAGE,
            "And",
            [
                block.op(
                    STAGE,
                    "And",
                    [
                        block.op(STAGE, "GreaterOrEqual", [v, zero]),
                        block.op(STAGE, "LessOrEqual", [v, largest]),
                    ],
                ),
                block.op(STAGE, "Equal", [block.op(STAGE, "Floor", [v]), v]),
            ],
        )
        code = block.cast(STAGE, block.op(STAGE, "Where", [valid, v, invalid]), np.int64)
        width = block.const(STAGE, "code_width", self.width, np.int64)
        at = block.op(STAGE, "Add", [block.op(STAGE, "Mul", [ids, width]), code])
        inside = block.op(STAGE, "Gather", [self.table, at], axis=0)
        is_set = block.op(STAGE, "Greater", [ids, block.const(STAGE, "no_set", 0, np.int64)])
        # (onnxruntime has no boolean Where.) right = set ? not inside : right
        outside = block.op(STAGE, "And", [is_set, block.op(STAGE, "Not", [inside])])
        threshold_split = block.op(STAGE, "And", [block.op(STAGE, "Not", [is_set]), right])
        return block.op(STAGE, "Or", [outside, threshold_split])


def _group_columns(ensemble: Ensemble, group: Group) -> np.ndarray:
    """Each tree's column in the group's tables, -1 outside the group."""
    where = np.full(ensemble.n_trees, -1, dtype=np.int64)
    where[group.trees] = np.arange(group.trees.size)
    return where


def _tables(ensemble, layout, column, thresholds, n_slots, slot, nodes, dtype):
    """Feature and threshold tables [n_slots, trees] for ``nodes``.

    Leaves and empty slots test ``+inf``, which no finite value passes: they go left.
    (Not NaN: OpenVINO's CPU plugin answers ``Greater(x, NaN)`` and
    ``GreaterOrEqual(x, NaN)`` with true, sending leaves to slots past the tables.)
    """
    T = int(column.max()) + 1
    features = np.zeros((n_slots, T), dtype=INDEX)
    limits = np.full((n_slots, T), np.inf, dtype=dtype)
    features[slot[nodes], column[layout.tree[nodes]]] = ensemble.feature[nodes]
    limits[slot[nodes], column[layout.tree[nodes]]] = thresholds[nodes]
    return features, limits


class _Walk:
    """The steps both layouts share: the roots, then one comparison per level."""

    def __init__(self, builder, ensemble, layout, group, thresholds, greater, members):
        self.builder, self.ensemble, self.layout, self.group = builder, ensemble, layout, group
        self.thresholds, self.greater, self.members = thresholds, greater, members
        self.column = _group_columns(ensemble, group)
        self.internal = (ensemble.feature >= 0) & (self.column[layout.tree] >= 0)
        roots = ensemble.roots[group.trees]
        split = ensemble.feature[roots] >= 0
        # The roots' tests need no table: every row starts there.
        features = np.where(split, ensemble.feature[roots], 0).astype(INDEX)
        limits = np.where(split, thresholds[roots], np.inf).astype(ensemble.compare_dtype)
        self.root_features = builder.const(STAGE, "root_features", features[None, :])
        self.root_limits = builder.const(STAGE, "root_thresholds", limits)
        self.root_sets = None
        if members is not None:
            self.root_sets = builder.const(STAGE, "root_sets", members.set_id[roots])

    def const_tables(self, label, n_slots, slot, nodes):
        features, limits = _tables(
            self.ensemble,
            self.layout,
            self.column,
            self.thresholds,
            n_slots,
            slot,
            nodes,
            self.ensemble.compare_dtype,
        )
        builder = self.builder
        sets = None
        if self.members is not None:
            table = self.members.level_table(
                self.layout, self.column, n_slots, slot, nodes, self.group.trees.size
            )
            sets = builder.const(STAGE, f"sets_{label}", table)
        return (
            builder.const(STAGE, f"features_{label}", features),
            builder.const(STAGE, f"thresholds_{label}", limits),
            sets,
        )

    def shape(self, block: GraphBuilder, x: str) -> str:
        """``[rows of x, trees of the group]`` as a 1-D int64 tensor."""
        trees = block.const(STAGE, "n_trees", [self.group.trees.size], np.int64)
        return block.op(STAGE, "Concat", [block.n_rows(STAGE, x), trees], axis=0)

    def at_roots(self, block: GraphBuilder, x: str) -> str:
        """Int32 ``[b, trees]``: 1 where the row leaves the root to the right."""
        feature = block.op(STAGE, "Expand", [self.root_features, self.shape(block, x)])
        value = block.op(STAGE, "GatherElements", [x, feature], axis=1)
        right = block.op(STAGE, self.greater, [value, self.root_limits])
        if self.root_sets is not None:
            right = self.members.goes_right(block, value, self.root_sets, right)
        return block.cast(STAGE, right, INDEX)

    def goes_right(self, block: GraphBuilder, x: str, tables, where: str) -> str:
        """Int32 ``[b, trees]``: 1 where the row goes right at slot ``where``."""
        features, limits, sets = tables
        feature = block.op(STAGE, "GatherElements", [features, where], axis=0)
        value = block.op(STAGE, "GatherElements", [x, feature], axis=1)
        limit = block.op(STAGE, "GatherElements", [limits, where], axis=0)
        right = block.op(STAGE, self.greater, [value, limit])
        if sets is not None:
            set_ids = block.op(STAGE, "GatherElements", [sets, where], axis=0)
            right = self.members.goes_right(block, value, set_ids, right)
        return block.cast(STAGE, right, INDEX)

    def nowhere(self, block: GraphBuilder, x: str) -> str:
        """Int32 zeros ``[b, trees]``: every tree of the group is one leaf."""
        zero = block.const(STAGE, "zero", np.zeros((1, 1), INDEX))
        return block.op(STAGE, "Expand", [zero, self.shape(block, x)])


def _perfect(builder, ensemble, layout, group, thresholds, greater, members=None):
    walk = _Walk(builder, ensemble, layout, group, thresholds, greater, members)
    levels = [
        walk.const_tables(
            str(level),
            1 << level,
            layout.position,
            np.flatnonzero(walk.internal & (layout.depth == level)),
        )
        for level in range(1, group.depth)
    ]

    def find_leaves(block: GraphBuilder, x: str) -> str:
        if group.depth == 0:
            return walk.nowhere(block, x)
        position = walk.at_roots(block, x)  # pos = 2 * 0 + right
        for tables in levels:
            right = walk.goes_right(block, x, tables, position)
            position = block.op(STAGE, "Add", [block.op(STAGE, "Add", [position, position]), right])
        return position

    return find_leaves


def _pointer(builder, ensemble, layout, group, thresholds, greater, members=None):
    walk = _Walk(builder, ensemble, layout, group, thresholds, greater, members)
    nodes = np.flatnonzero(walk.internal)
    in_group = walk.column[layout.tree] >= 0
    n_slots = int(layout.local[in_group].max()) + 1
    tables = walk.const_tables("pointer", n_slots, layout.local, nodes)
    # Left children (the right child is the next slot); leaves and padding stay put.
    lefts = np.tile(np.arange(n_slots, dtype=INDEX)[:, None], (1, group.trees.size))
    lefts[layout.local[nodes], walk.column[layout.tree[nodes]]] = layout.local[ensemble.left[nodes]]
    left_t = builder.const(STAGE, "lefts", lefts)
    root_lefts = builder.const(STAGE, "root_lefts", lefts[0])

    def find_leaves(block: GraphBuilder, x: str) -> str:
        if group.depth == 0:
            return walk.nowhere(block, x)
        node = block.op(STAGE, "Add", [walk.at_roots(block, x), root_lefts])
        for _ in range(group.depth - 1):
            right = walk.goes_right(block, x, tables, node)
            node = block.op(
                STAGE, "Add", [block.op(STAGE, "GatherElements", [left_t, node], axis=0), right]
            )
        return node

    return find_leaves
