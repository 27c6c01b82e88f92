"""ONNX nodes from an isolation forest's summed path lengths to its outputs.

The tree stage adds each tree's leaf path length in tree order (the sums
are the Python model's bit for bit). Outputs, each ``[N]``:

- ``path_length``: the summed path lengths ``S``;
- ``scores``: ``-(2 ** -(S / D))`` with ``D = n_estimators * c(max_samples_)``,
  scikit-learn's ``score_samples`` (``Div``, ``Neg``, ``Pow``, ``Neg``: the same
  operations; ``Pow`` is the runtime's, which may differ from numpy's
  ``2 ** x`` in the last bit);
- ``label``: int64, -1 (outlier) iff ``S < path_threshold``, else +1: decided
  on the sums, so identical to the Python model's ``predict``.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ..ir import Ensemble
from ._graph import GraphBuilder, onnx_type
from .trees import by_row_blocks, cast_to, sum_in_order

STAGE = "anomaly"

__all__ = ["OUTPUTS", "emit_anomaly_outputs"]

#: Graph outputs of an isolation forest, in order.
OUTPUTS = ("label", "scores", "path_length")


def emit_anomaly_outputs(
    builder: GraphBuilder, sums: str, metadata: dict[str, str], dtype: str
) -> list[helper.ValueInfoProto]:
    """Wire ``label``, ``scores`` and ``path_length`` from the ``[N, 1]`` sums."""
    elem = onnx_type(dtype)
    total = builder.op(STAGE, "Squeeze", [sums, builder.const(STAGE, "axis", [1], np.int64)])
    builder.rename(total, "path_length")
    denominator = float(metadata["denominator"])
    if denominator != 0:
        ratio = builder.op(
            STAGE, "Div", ["path_length", builder.const(STAGE, "denominator", denominator, dtype)]
        )
    else:  # one training row: scikit-learn scores every point -(2 ** -1)
        zero = builder.op(STAGE, "Mul", ["path_length", builder.const(STAGE, "zero", 0.0, dtype)])
        ratio = builder.op(STAGE, "Add", [zero, builder.const(STAGE, "one", 1.0, dtype)])
    power = builder.op(
        STAGE, "Pow", [builder.const(STAGE, "two", 2.0, dtype), builder.op(STAGE, "Neg", [ratio])]
    )
    builder.op(STAGE, "Neg", [power], outputs=["scores"])
    threshold = builder.const(STAGE, "path_threshold", float(metadata["path_threshold"]), dtype)
    outlier = builder.op(STAGE, "Less", ["path_length", threshold])
    builder.op(
        STAGE,
        "Where",
        [
            outlier,
            builder.const(STAGE, "outlier", -1, np.int64),
            builder.const(STAGE, "inlier", 1, np.int64),
        ],
        outputs=["label"],
    )
    return [
        helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
        helper.make_tensor_value_info("scores", elem, ["N"]),
        helper.make_tensor_value_info("path_length", elem, ["N"]),
    ]


# -- oblique isolation forests: a level-by-level walk ------------------------------------------

WALK = "walk"


def walk_applies(ensemble) -> bool:
    """Whether `emit_oblique_walk` can take ``ensemble``: oblique, one output, float64."""
    return (
        ensemble.projection is not None
        and ensemble.n_outputs == 1
        and ensemble.op == "<="
        and ensemble.compare_dtype == "float64"
        and ensemble.categories is None
    )


def _walk_tables(ensemble) -> dict[str, np.ndarray]:
    """Per-node tables of the walk: normals by Klein feature, thresholds, children, values.

    A leaf points to itself on both sides, with a zero normal and threshold 0:
    its margin ``p - t`` is a sum of +-0, which is ``<= 0``, so a row that
    reached a leaf stays there however many levels remain.
    """
    n = ensemble.n_nodes
    leaf = ensemble.feature < 0
    column = np.where(leaf, 0, ensemble.feature)
    normals = np.where(leaf[None, :], 0.0, ensemble.projection[:, column])  # [d, n_nodes]
    own = np.arange(n, dtype=np.int64)
    return {
        "normals": normals,
        "threshold": np.where(leaf, 0.0, ensemble.threshold),
        "left": np.where(leaf, own, ensemble.left),
        "right": np.where(leaf, own, ensemble.right),
        "value": ensemble.value[:, 0].astype(np.float64),
    }


def _depth(ensemble) -> int:
    depth = np.zeros(ensemble.n_nodes, dtype=np.int64)
    for j in range(ensemble.n_nodes):  # children come after their parents
        if ensemble.feature[j] >= 0:
            depth[ensemble.left[j]] = depth[ensemble.right[j]] = depth[j] + 1
    return int(depth.max()) if depth.size else 0


def emit_oblique_walk(builder: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble) -> str:
    """Summed leaf values ``[N, 1]`` (float64) of an oblique single-output ensemble.

    Every (row, tree) pair holds its current node. At each level one
    ``Gather`` reads the node's row ``(w_0, ..., w_{d-1}, t)`` of a table,
    ``Mul`` forms ``(k_0 w_0, ..., k_{d-1} w_{d-1}, -t)`` (the row's Klein
    coordinates extended by -1) and ``CumSum`` adds them in index order: its
    second-to-last entry is the projection exactly as
    `hyp2onnx.ir.projection.project` forms it (``k_0 w_0``, then
    ``+ k_1 w_1``, ...; correctly rounded float64 operations), its last the
    correctly rounded ``p - t``, which is ``<= 0`` iff ``p <= t`` (IEEE
    subtraction is zero only for equal operands and never changes sign). So
    every row takes the Python model's path, and only the nodes a row visits
    are projected: ``depth`` levels of ``T`` projections per row, where
    projecting onto every split's normal costs one per split. The leaf
    values are then added in tree order (``CumSum``).
    """
    k = cast_to(builder, k, k_dtype, "float64")
    consts, adjacent = _node_walk_constants(builder, ensemble)
    levels, n_trees = _depth(ensemble), ensemble.n_trees

    def walk(block: GraphBuilder, rows: str) -> str:
        first, extended = _extended_rows(block, rows, consts)
        node = consts["roots"]  # [1, T] at the first level, [b, T] after
        for _ in range(levels):
            node = _node_step(block, node, extended, consts, adjacent=adjacent)
        if levels == 0:  # only roots that are leaves: give every row its own copy
            zero = block.op(WALK, "Mul", [first, consts["zero"]])
            zeros = block.op(WALK, "Cast", [zero], to=TensorProto.INT64)
            per_row = block.op(WALK, "Transpose", [zeros], perm=[1, 0])
            node = block.op(WALK, "Add", [per_row, consts["roots"]])
        values = block.op(WALK, "Gather", [consts["value"], node], axis=0)  # [b, T]
        return sum_in_order(block, values, axis=1, length=n_trees, keep_axis=True)

    return by_row_blocks(builder, k, walk, 1, "float64")


def _node_walk_constants(builder: GraphBuilder, ensemble: Ensemble) -> tuple[dict[str, str], bool]:
    """The node walk's tables as initializers, and whether children sit side by side."""
    tables = _walk_tables(ensemble)
    d = tables["normals"].shape[0]
    # Children side by side: the right child is the left one's neighbour in our trees,
    # so one Gather and an Add of the comparison's complement replaces two Gathers.
    adjacent = bool(
        np.all((tables["right"] == tables["left"] + 1) | (tables["right"] == tables["left"]))
    )
    # [n, d + 1]: each node's normal components, then its threshold. A row gather copies
    # d + 1 neighbouring numbers per index; the Transpose then makes the products and
    # sums below run over contiguous [b, T] planes.
    split_table = np.concatenate([tables["normals"], tables["threshold"][None, :]], axis=0).T
    consts = {
        "splits": builder.const(WALK, "splits", np.ascontiguousarray(split_table)),
        "left": builder.const(WALK, "left", tables["left"]),
        "value": builder.const(WALK, "value", tables["value"]),
        "roots": builder.const(WALK, "roots", ensemble.roots.astype(np.int64)[None, :]),  # [1, T]
        "minus_one": builder.const(WALK, "minus_one", -np.ones((1, 1))),
        "zero": builder.const(WALK, "zero", 0.0),
        "last": builder.const(WALK, "last", d, np.int64),
        "axis0": builder.const(WALK, "axis0", 0, np.int64),
        "axis2": builder.const(WALK, "axis2", [2], np.int64),
    }
    if not adjacent:
        consts["right"] = builder.const(WALK, "right", tables["right"])
    return consts, adjacent


def _extended_rows(block: GraphBuilder, rows: str, consts: dict[str, str]) -> tuple[str, str]:
    """``[d + 1, b, 1]``: the Klein coordinates, feature-major, and -1 (the threshold's
    coefficient); also the first coordinate row ``[1, b]``."""
    k_t = block.op(WALK, "Transpose", [rows], perm=[1, 0])  # [d, b]
    first_row = block.const(WALK, "first_row", [0], np.int64)
    first = block.op(WALK, "Gather", [k_t, first_row], axis=0)
    zero = block.op(WALK, "Mul", [first, consts["zero"]])
    minus = block.op(WALK, "Add", [zero, consts["minus_one"]])
    extended = block.op(WALK, "Concat", [k_t, minus], axis=0)
    return first, block.op(WALK, "Unsqueeze", [extended, consts["axis2"]])


def _node_step(
    block: GraphBuilder, node: str, extended: str, consts: dict[str, str], *, adjacent: bool
) -> str:
    """One level of the node walk: each (row, tree) pair's next node."""
    split = block.op(WALK, "Gather", [consts["splits"], node], axis=0)  # [(b|1), T, d + 1]
    split = block.op(WALK, "Transpose", [split], perm=[2, 0, 1])  # [d + 1, (b|1), T]
    terms = block.op(WALK, "Mul", [split, extended])  # [d + 1, b, T]
    sums = block.op(WALK, "CumSum", [terms, consts["axis0"]])
    margin = block.op(WALK, "Gather", [sums, consts["last"]], axis=0)  # p - t, [b, T]
    goes_left = block.op(WALK, "LessOrEqual", [margin, consts["zero"]])
    left = block.op(WALK, "Gather", [consts["left"], node], axis=0)
    if adjacent:
        # leaves (left == right == itself) always go left: 0 - 0 <= 0
        goes_right = block.op(WALK, "Not", [goes_left])
        step = block.op(WALK, "Cast", [goes_right], to=TensorProto.INT64)
        return block.op(WALK, "Add", [left, step])
    right = block.op(WALK, "Gather", [consts["right"], node], axis=0)
    return block.op(WALK, "Where", [goes_left, left, right])


# -- the same walk on perfect binary trees: children found by arithmetic ----------------------

#: Most table entries (normals, thresholds and values, every level of every tree)
#: that `emit_perfect_walk` lays out (8 Mi float64, 64 MiB); forests whose
#: perfect layout would be larger (deep trees: large ``max_samples``) take the node
#: walk. 100 trees of 256 rows (depth 8) at d = 8 hold 0.5 Mi.
PERFECT_MAX_ENTRIES = 1 << 23


def _perfect_tables(ensemble) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """Level tables of every tree laid out as a perfect binary tree of depth ``D``.

    Slot ``j`` of level ``L`` (``0 <= j < 2**L``) has its children at slots
    ``2j`` (left) and ``2j + 1`` (right) of level ``L + 1``; ``D`` is the
    deepest leaf's level. Returns, for each level ``L < D``, the normals
    ``[d, 2**L, T]`` and thresholds ``[2**L, T]`` of the splits there, and
    the values ``[2**D, T]`` of the bottom level. A leaf above the bottom
    gives its value to every bottom slot below it, so whichever way a row
    goes through the empty slots under it (zero normals and thresholds), it
    reads that leaf's value.
    """
    n = ensemble.n_nodes
    internal = ensemble.feature >= 0
    level = np.zeros(n, dtype=np.int64)
    slot = np.zeros(n, dtype=np.int64)
    tree = np.zeros(n, dtype=np.int64)
    tree[ensemble.roots] = np.arange(ensemble.n_trees)
    for j in range(n):  # children come after their parents
        if internal[j]:
            for child, side in ((ensemble.left[j], 0), (ensemble.right[j], 1)):
                level[child] = level[j] + 1
                slot[child] = 2 * slot[j] + side
                tree[child] = tree[j]
    bottom = int(level.max()) if n else 0
    d, n_trees = ensemble.projection.shape[0], ensemble.n_trees
    normals = [np.zeros((d, 1 << depth, n_trees)) for depth in range(bottom)]
    thresholds = [np.zeros((1 << depth, n_trees)) for depth in range(bottom)]
    for node in np.flatnonzero(internal).tolist():
        at = slot[node], tree[node]
        normals[level[node]][:, at[0], at[1]] = ensemble.projection[:, ensemble.feature[node]]
        thresholds[level[node]][at] = ensemble.threshold[node]
    values = np.zeros((1 << bottom, n_trees, ensemble.n_outputs))
    for node in np.flatnonzero(~internal).tolist():
        span = 1 << int(bottom - level[node])
        first = int(slot[node]) * span
        values[first : first + span, tree[node]] = ensemble.value[node]
    return normals, thresholds, values


def perfect_applies(ensemble) -> bool:
    """Whether the perfect layout of ``ensemble`` stays within ``PERFECT_MAX_ENTRIES``."""
    bottom = _depth(ensemble)
    d = ensemble.projection.shape[0]
    return bottom < 40 and (2 << bottom) * ensemble.n_trees * (d + 1) <= PERFECT_MAX_ENTRIES


def emit_perfect_walk(builder: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble) -> str:
    """Summed leaf values ``[N, 1]`` (float64), walking perfect trees level by level.

    Each (row, tree) pair holds its slot ``j`` in the current level
    (`_perfect_tables`). For each Klein feature ``f`` a
    ``GatherElements`` reads the slot's weight from that level's
    ``[2**L, T]`` table, and the projection is formed as
    `hyp2onnx.ir.projection.project` forms it: ``k_0 w_0``, then
    ``+ k_1 w_1``, ... (a correctly rounded ``Mul`` and ``Add`` each, in
    feature order); ``p <= t`` with the gathered threshold sends the row
    left, and the next slot is ``2j``, plus one if it went right. The root
    level reads ``[1, T]`` tables directly (no gather). At the bottom the
    slot's value is gathered and the trees' values are added in tree order
    (``CumSum``), as everywhere.

    The node walk (`emit_oblique_walk`) gathers a node's row of
    ``d + 1`` numbers with ``Gather``, transposes it and gathers the child;
    in onnxruntime a ``Gather`` of an index costs several times a
    ``GatherElements`` of an element (as for the standard encoding's perfect
    walk, `hyp2onnx.emit.standard`), so reading the ``d + 1`` numbers
    one table at a time and finding the child by arithmetic is faster.
    """
    k = cast_to(builder, k, k_dtype, "float64")
    assert ensemble.projection is not None  # walk_applies
    normals, thresholds, values = _perfect_tables(ensemble)
    bottom = len(thresholds)
    d, n_trees = ensemble.projection.shape[0], ensemble.n_trees
    w = [
        [builder.const(WALK, f"normal_{depth}_{f}", normals[depth][f]) for f in range(d)]
        for depth in range(bottom)
    ]
    t = [builder.const(WALK, f"threshold_{depth}", thresholds[depth]) for depth in range(bottom)]
    value = builder.const(WALK, "value", values[..., 0])
    width = builder.const(WALK, "n_trees", [n_trees], np.int64) if bottom == 0 else ""

    def walk(block: GraphBuilder, rows: str) -> str:
        if d == 1:
            columns = [rows]
        else:
            count = {"num_outputs": d} if block.opset >= 18 else {}
            columns = block.op(WALK, "Split", [rows], n_outputs=d, axis=1, **count)  # d x [b, 1]
        slot: str | None = None
        for depth in range(bottom):
            slot = level_step(block, columns, slot, w[depth], t[depth])
        if slot is None:  # every tree a single leaf: the [1, T] values for every row
            shape = block.op(WALK, "Concat", [block.n_rows(WALK, rows), width], axis=0)
            leaf_values = block.op(WALK, "Expand", [value, shape])
        else:
            leaf_values = block.op(WALK, "GatherElements", [value, slot], axis=0)  # [b, T]
        return sum_in_order(block, leaf_values, axis=1, length=n_trees, keep_axis=True)

    return by_row_blocks(builder, k, walk, 1, "float64")


def level_step(
    block: GraphBuilder,
    columns: list[str],
    slot: str | None,
    weights: list[str],
    threshold: str,
    *,
    stage: str = WALK,
    axis: int = 0,
) -> str:
    """One level of a perfect walk: each (row, tree) pair's slot on the next level (``2 j``
    plus one where the row goes right); ``slot`` None at the root, whose weights
    broadcast without a gather. The tables are ``[b, T]`` (``axis`` 0, the isolation
    walk) or ``[T, b]`` (``axis`` 1, the rotation forests' walk). ``p <= c`` goes left
    (``Not`` of it right, so a NaN projection goes right, as in the Python models)."""
    projection: str | None = None
    for column, weight in zip(columns, weights, strict=True):
        if slot is not None:
            weight = block.op(stage, "GatherElements", [weight, slot], axis=axis)
        term = block.op(stage, "Mul", [column, weight])
        projection = term if projection is None else block.op(stage, "Add", [projection, term])
    if slot is not None:
        threshold = block.op(stage, "GatherElements", [threshold, slot], axis=axis)
    assert projection is not None  # d >= 1: an oblique ensemble reads a feature
    goes_left = block.op(stage, "LessOrEqual", [projection, threshold])
    goes_right = block.op(stage, "Not", [goes_left])
    right = block.op(stage, "Cast", [goes_right], to=TensorProto.INT64)
    if slot is None:
        return right
    return block.op(stage, "Add", [block.op(stage, "Add", [slot, slot]), right])
