"""ONNX nodes of ReLU networks on Klein coordinates, and of their region trees.

Two graphs of a network (`hyp2onnx.ir.network.Network`):

``emit_chain`` (the ``exact`` encoding)
    Every layer as the Python model computes it: ``Split`` the activations
    into columns, then ``z = a_0 w_0``, ``z = z + a_1 w_1``, ... and ``+ b``,
    one ``Mul`` and one ``Add`` per input unit, on the transposed ``[m, N]``
    layout (as the oblique splits' projections, `hyp2onnx.emit.oblique`).
    Each is a correctly rounded float64 operation, so the logits are the
    Python model's bit for bit.

``emit_matmul`` (the ``fast`` encoding, default)
    ``Gemm`` (product, the bias on a column of ones) and ``Relu`` per layer,
    in the runtime's order of additions: every logit within ``value_bound``
    (`hyp2onnx.ir.network.error_bounds`, twice the bound on either
    order's distance from the exact value) of the Python model's. A label can
    change only on a row whose logits are that close to a tie, or off the
    unit cube (``|k_f| > 1``, no point of the space) where the bound does not
    hold: on every call the graph takes the batch's smallest gap between two
    logits (`_near`; one logistic logit: ``|z|``) and largest ``|k_f|``,
    and an ``If`` that only when some row needs it rescores those rows
    with the chain (``NonZero``, ``GatherND``, ``ScatterND``), as the fast tree
    graph's guard does. Labels are the Python model's on every row.

``emit_region_tree`` evaluates a region tree (`hyp2onnx.ir.regions`):
the first hidden layer's signs at once and a table of the nodes they lead
to, then a walk of the later levels (projections in ``project``'s order, so
routing is the Python model's; `_walk`), a
``Gather`` of the leaf's affine map and its products added in feature order
(``CumSum``), and the same ``If`` rescoring uncovered and near-tie rows with
the chain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from ..ir import InputSpace
from ..ir.network import Network, tie_margin
from ..ir.regions import AffineTree
from ._graph import GraphBuilder, onnx_type
from .outputs import label_tensor
from .projection import emit_projection, emit_whole_rows, whole_rows_column
from .trees import by_row_blocks

__all__ = [
    "emit_chain",
    "emit_guarded",
    "emit_klein",
    "emit_klein_with_ones",
    "emit_matmul",
    "emit_network_outputs",
    "emit_region_tree",
    "network_head",
    "network_output_infos",
]

STAGE = "network"
GUARD = "guard"


def _chain_rows(
    network: Network, builder: GraphBuilder, *, ones_column: int | None = None
) -> Callable[[GraphBuilder, str], str]:
    """``rows [b, d] -> logits [b, C]`` in the Python model's order (module doc).

    With ``ones_column``, the rows are `emit_klein_with_ones`'s ``[b, d + 1]``
    and that column is left out.
    """
    columns = [
        [
            builder.const(STAGE, f"layer{i}_w{f}", W[f].astype(np.float64)[:, None])
            for f in range(len(W))
        ]
        for i, W in enumerate(network.weights)
    ]
    biases = [
        builder.const(STAGE, f"layer{i}_b", b.astype(np.float64)[:, None])
        for i, b in enumerate(network.biases)
    ]
    last = len(network.weights) - 1

    def chain(block: GraphBuilder, rows: str) -> str:
        a = block.op(STAGE, "Transpose", [rows], perm=[1, 0])  # [d, b]
        for i, weights in enumerate(columns):
            n = len(weights) + (i == 0 and ones_column is not None)
            if n == 1:
                parts = [a]
            else:
                count: dict[str, Any] = {"num_outputs": n} if block.opset >= 18 else {}
                parts = block.op(STAGE, "Split", [a], n_outputs=n, axis=0, **count)
            if i == 0 and ones_column is not None:
                parts = [p for j, p in enumerate(parts) if j != ones_column]
            total = None
            for part, w in zip(parts, weights, strict=True):
                term = block.op(STAGE, "Mul", [part, w])  # [1, b] * [m, 1] -> [m, b]
                total = term if total is None else block.op(STAGE, "Add", [total, term])
            assert total is not None  # every layer has an input
            z = block.op(STAGE, "Add", [total, biases[i]])
            a = z if i == last else block.op(STAGE, "Relu", [z])
        return block.op(STAGE, "Transpose", [a], perm=[1, 0])

    return chain


def emit_chain(builder: GraphBuilder, k: str, network: Network) -> str:
    """Logits ``[N, C]`` of float64 Klein rows ``k``, bit for bit the Python model's."""
    return by_row_blocks(builder, k, _chain_rows(network, builder), network.n_outputs, "float64")


def emit_matmul(
    builder: GraphBuilder, k: str, network: Network, *, ones_column: int | None = None
) -> str:
    """Logits ``[N, C]`` by one product and a ``Relu`` per layer: the runtime's order of
    additions.

    The biases ride on a column of ones (homogeneous coordinates): every
    hidden layer's output gets one more column, exactly 1 (a product by 1
    and zeros, then ``Relu``), and the next layer's weights get the bias as
    the row that meets it (and a column that carries the 1 on). Each output
    is then the same ``n + 1`` terms, summed in the runtime's order, so the
    same bound. With ``ones_column`` (rows from `emit_klein_with_ones`) the
    input has that column already; otherwise the first layer is ``MatMul``
    and ``Add`` (the ones column's bias 1 on zero weights). Every later
    product is a ``Gemm`` without a bias input: cheaper than one with it in
    onnxruntime (docs/neural.md), and tract cannot run a float64
    ``Gemm`` with a bias.
    """
    a = k
    last = len(network.weights) - 1
    for i, (W, b) in enumerate(zip(network.weights, network.biases, strict=True)):
        W, b = W.astype(np.float64), b.astype(np.float64)
        carry = i < last  # this layer's output carries a column of ones on
        if i == 0 and ones_column is None:
            weights = np.concatenate([W, np.zeros((W.shape[0], 1))], axis=1) if carry else W
            bias = np.append(b, 1.0) if carry else b
            product = builder.op(STAGE, "MatMul", [a, builder.const(STAGE, "W0", weights)])
            z = builder.op(STAGE, "Add", [product, builder.const(STAGE, "b0", bias)])
        else:
            # where the input's ones are: rows' own column, or the one the last layer added
            ones = int(W.shape[0] if ones_column is None or i > 0 else ones_column)
            weights = np.insert(W, ones, b, axis=0)
            if carry:
                unit = np.zeros((weights.shape[0], 1))
                unit[ones] = 1.0
                weights = np.concatenate([weights, unit], axis=1)
            z = builder.op(STAGE, "Gemm", [a, builder.const(STAGE, f"W{i}", weights)])
        a = z if i == last else builder.op(STAGE, "Relu", [z])
    return a


def emit_klein(builder: GraphBuilder, x: str, space: InputSpace, *, input_dtype: str) -> str:
    """Float64 Klein coordinates of every input point, as `hyp2onnx.geometry` computes them.

    Hyperboloid input whose timelike column is the first or the last: the
    spacelike columns are one run, cut with ``Slice`` (a ``Gather`` along
    axis 1 copies element by element), then ``x_s / x_0``, the same
    division. Every other case is `hyp2onnx.emit.projection.emit_projection`'s.
    """
    n = space.n_input_features
    t = space.timelike_dim % n if space.geometry == "hyperboloid" else -1
    if t not in (0, n - 1) or n < 2:
        d = space.n_klein_features
        return emit_projection(
            builder, x, space, np.arange(d), input_dtype=input_dtype, dtype="float64"
        )
    if input_dtype != "float64":
        x = builder.cast("klein", x, np.float64)
    start = 1 if t == 0 else 0

    spacelike = builder.columns("klein", x, start, start + n - 1, "spacelike")
    timelike = builder.columns("klein", x, t, t + 1, "timelike")
    return builder.op("klein", "Div", [spacelike, timelike])


def emit_klein_with_ones(
    builder: GraphBuilder, x: str, space: InputSpace, *, input_dtype: str
) -> tuple[str, int] | None:
    """``X / x_0`` ``[N, d + 1]`` and where its column of ones is, for hyperboloid input whose
    timelike column is the first or the last (else None).

    Every other column is the Klein coordinate `emit_klein` gives, the same
    correctly rounded quotient, and ``x_0 / x_0`` is 1 exactly
    (`hyp2onnx.emit.projection.whole_rows_column`); the ones carry the
    first layer's bias (`emit_matmul`), and ``max |X / x_0|`` is then the
    guard's ``max(1, |k_f|)`` itself.
    """
    t = whole_rows_column(space, np.arange(space.n_klein_features))
    if t is None:
        return None
    return emit_whole_rows(builder, x, space, input_dtype=input_dtype, dtype="float64"), t


#: Up to this many classes the guard takes the gap of every pair of logits in one ``MatMul``
#: (``C (C - 1) / 2`` columns); beyond, each logit against the row's largest.
PAIRWISE_CLASSES = 8


def _pair_differences(n_classes: int) -> np.ndarray:
    """``[C, C (C - 1) / 2]``: column ``(i, j)`` is ``e_i - e_j``, for ``i < j``."""
    first, second = np.triu_indices(n_classes, 1)
    columns = np.arange(first.size)
    differences = np.zeros((n_classes, first.size))
    differences[first, columns] = 1.0
    differences[second, columns] = -1.0
    return differences


def _near(builder: GraphBuilder, logits: str, network: Network, margin: str) -> tuple[str, str]:
    """Whether some row's label could change if its logits moved by ``margin`` (a tensor
    name), and what `_rows_near` finds the rows from: the batch test runs on every
    call, the rows are found only when needed.

    One logistic logit: ``|z| <= margin``. Up to `PAIRWISE_CLASSES` logits:
    some pair has ``|z_i - z_j| <= margin``, the gaps from one ``MatMul``
    against `_pair_differences`. Each of its columns has one product by 1,
    one by -1 and zeros, all exact, so the gap is ``z_i - z_j`` rounded
    once, whatever order the runtime adds in; rounding is monotone and the
    margin a float, so every row whose exact top-two gap is at most the
    margin is flagged (and some whose other logits are that close: they are
    rescored too, which is exact, only slower). More logits: some logit
    other than the first largest has ``z_j + margin >= max z``, counted
    over the batch against the number of rows. Both are cheaper than
    ``TopK``'s gap.
    """
    if network.output == "logistic":
        gaps = builder.op(GUARD, "Abs", [logits])
    elif network.n_outputs <= PAIRWISE_CLASSES:
        pairs = builder.const(GUARD, "pair_differences", _pair_differences(network.n_outputs))
        gaps = builder.op(GUARD, "Abs", [builder.op(GUARD, "MatMul", [logits, pairs])])
    else:
        largest = _reduce(builder, "ReduceMax", logits, [1], keepdims=1)
        close = builder.op(
            GUARD, "GreaterOrEqual", [builder.op(GUARD, "Add", [logits, margin]), largest]
        )
        counted = builder.cast(GUARD, close, np.float64)
        total = _reduce(builder, "ReduceSum", counted, None)
        rows = builder.cast(GUARD, builder.n_rows(GUARD, logits), np.float64)
        return builder.op(GUARD, "Greater", [total, rows]), counted
    least = _reduce(builder, "ReduceMin", gaps, None)  # +inf for an empty batch
    return builder.op(GUARD, "LessOrEqual", [least, margin]), gaps


def _rows_near(block: GraphBuilder, found: str, network: Network, margin: str) -> str:
    """``[N]`` bool: the rows `_near` flags, from its second result."""
    if network.output == "logistic" or network.n_outputs <= PAIRWISE_CLASSES:
        least = _reduce(block, "ReduceMin", found, [1])
        return block.op(GUARD, "LessOrEqual", [least, margin])
    per_row = _reduce(block, "ReduceSum", found, [1])
    return block.op(GUARD, "Greater", [per_row, block.const(GUARD, "one_close", 1.5)])


def _axes(builder: GraphBuilder, axes: list[int]) -> str:
    return builder.const(GUARD, "axes", axes, np.int64)


def _reduce(
    builder: GraphBuilder, op: str, x: str, axes: list[int] | None, keepdims: int = 0
) -> str:
    """A reduction over ``axes`` (None: every axis, to one number). Axes are an input of
    ``ReduceSum`` from opset 13 and of the others from opset 18; an attribute before."""
    if axes is None:
        return builder.op(GUARD, op, [x], keepdims=keepdims)
    if builder.opset >= 18 or op == "ReduceSum":
        return builder.op(GUARD, op, [x, _axes(builder, axes)], keepdims=keepdims)
    return builder.op(GUARD, op, [x], axes=axes, keepdims=keepdims)


def _off_ball(builder: GraphBuilder, k: str) -> str:
    """``[N]`` bool: rows with some ``|k_f| > 1`` (no point of the space; the bounds assume
    ``|k_f| <= 1``)."""
    largest = _reduce(builder, "ReduceMax", builder.op(GUARD, "Abs", [k]), [1])
    return builder.op(GUARD, "Greater", [largest, builder.const(GUARD, "one", 1.0)])


def _rescore(
    builder: GraphBuilder,
    condition: str,
    logits: str,
    k: str,
    redo: Callable[[GraphBuilder], str],
    network: Network,
    *,
    ones_column: int | None = None,
) -> list[str]:
    """The graph's outputs (`network_head`) of ``logits``, with the rows where ``redo``
    ``[N]`` holds scored by the chain instead.

    An ``If`` on ``condition`` (true whenever some row needs it): one branch
    puts the chain's logits of those rows in place (``ScatterND``), and each
    branch computes the outputs itself. An ``If`` that returned the logits
    copied them in the branch that keeps them (an ``Identity``, a cost
    docs/neural.md gives); one that returned only the rescored rows
    gives its branches outputs of different sizes, which tract refuses.
    """
    branch = builder.child()
    exact, index = _chain_of_rows(branch, redo(branch), k, network, ones_column)
    redone = network_head(branch, branch.op(GUARD, "ScatterND", [logits, index, exact]), network)
    keep = builder.child()
    kept = network_head(keep, logits, network)
    if kept == [logits]:  # a regressor's values: a branch returns its own tensor
        kept = [keep.op(GUARD, "Identity", [logits])]
    infos = network_output_infos(network)

    def branch_graph(nodes: list[Any], label: str, names: list[str]) -> Any:
        outputs = [
            helper.make_tensor_value_info(name, info.type.tensor_type.elem_type, None)
            for name, info in zip(names, infos, strict=True)
        ]
        return helper.make_graph(nodes, label, [], outputs)

    then_graph = branch_graph(branch.nodes, "rescore", redone)
    else_graph = branch_graph(keep.nodes, "keep", kept)
    found = builder.op(
        GUARD,
        "If",
        [condition],
        then_branch=then_graph,
        else_branch=else_graph,
        n_outputs=len(infos),
    )
    return [found] if isinstance(found, str) else found


def _chain_of_rows(
    block: GraphBuilder, redo: str, k: str, network: Network, ones_column: int | None
) -> tuple[str, str]:
    """The chain's logits ``[M, C]`` of the rows where ``redo`` ``[N]`` holds, and their
    indices ``[M, 1]``."""
    index = block.op(GUARD, "Transpose", [block.op(GUARD, "NonZero", [redo])], perm=[1, 0])
    rows = block.op(GUARD, "GatherND", [k, index])  # [M, d]
    return _chain_rows(network, block, ones_column=ones_column)(block, rows), index


def emit_guarded(
    builder: GraphBuilder, k: str, network: Network, bound: float, *, ones_column: int | None = None
) -> list[str]:
    """The outputs (`network_head`) of `emit_matmul`'s logits, with the rows near a tie
    scored by the chain.

    The bound holds for ``|k_f| <= 1`` and grows at most in proportion to
    ``max(1, |k_f|)`` beyond (every term of `hyp2onnx.ir.network.error_bounds`
    does), so the margin is scaled by the batch's largest ``|k_f|`` (at least 1:
    with ``ones_column``, the rows' own column of ones sees to that).
    """
    logits = emit_matmul(builder, k, network, ones_column=ones_column)
    if not network.is_classifier:
        return network_head(builder, logits, network)
    # max |k_f| as max(max k, -min k): two reductions cost less than Abs and one.
    highest, lowest = (_reduce(builder, op, k, None) for op in ("ReduceMax", "ReduceMin"))
    scale = builder.op(GUARD, "Max", [highest, builder.op(GUARD, "Neg", [lowest])])
    if ones_column is None:
        scale = builder.op(GUARD, "Max", [scale, builder.const(GUARD, "one", 1.0)])
    margin = builder.op(
        GUARD, "Mul", [scale, builder.const(GUARD, "margin", tie_margin(network, bound))]
    )
    condition, found = _near(builder, logits, network, margin)

    def redo(block: GraphBuilder) -> str:
        return _rows_near(block, found, network, margin)

    return _rescore(builder, condition, logits, k, redo, network, ones_column=ones_column)


#: The first hidden layer's units are looked up in one table of ``2 ** m`` nodes up to this ``m``.
FIRST_LAYER_TABLE_UNITS = 20


def _first_layer_nodes(tree: AffineTree) -> np.ndarray:
    """Node reached after the first hidden layer's levels, for every code of its unit signs
    (bit ``m - 1 - j`` of the code: unit ``j`` active); a missing leaf met earlier stays."""
    e = tree.ensemble
    m = tree.network.hidden_sizes[0]
    codes = np.arange(1 << m, dtype=np.int64)
    node = np.zeros(codes.size, dtype=np.int64)
    for j in range(m):
        active = (codes >> (m - 1 - j)) & 1
        inside = e.feature[node] >= 0
        node = np.where(inside, np.where(active == 1, e.right[node], e.left[node]), node)
    return node


def _walk(builder: GraphBuilder, k: str, tree: AffineTree) -> str:
    """``[N]`` int64: the leaf value (leaf number + 1, 0 missing) each Klein row reaches.

    Every node of the first hidden layer's levels tests the same unit's
    weights (no earlier pattern to collapse), so those levels are one
    projection in the Python model's order (`_first_layer`), whose
    signs index a table of the nodes they lead to. The later levels go one at
    a time (`_levels`).
    """
    hidden = tree.network.hidden_sizes
    if hidden and hidden[0] <= FIRST_LAYER_TABLE_UNITS:
        node = _first_layer(builder, k, tree)
        levels = tree.depth - hidden[0]
    else:
        first = builder.columns(STAGE, k, 0, 1, "first_col")  # [N, 1]
        zero = builder.op(STAGE, "Mul", [first, builder.const(STAGE, "zero_k", 0.0)])
        node = builder.op(
            STAGE, "Squeeze", [builder.cast(STAGE, zero, np.int64), _axes(builder, [1])]
        )  # root
        levels = tree.depth
    if levels:
        node = _levels(builder, k, tree, node, levels)
    values = tree.ensemble.value[:, 0].astype(np.int64)
    return builder.op(STAGE, "Gather", [builder.const(STAGE, "leaf_values", values), node], axis=0)


def _first_layer(builder: GraphBuilder, k: str, tree: AffineTree) -> str:
    """``[N]``: the node each row reaches after the first hidden layer's levels.

    Its ``m`` pre-activations without the bias, ``p_j = k_0 w_0j + k_1 w_1j +
    ...`` (one ``Mul`` and ``Add`` per Klein feature, on the transposed
    ``[m, N]`` layout, the Python model's order), compared as its nodes do,
    ``p_j <= -b_j`` (inactive); the active units' bits index the table.
    """
    network = tree.network
    d = network.n_features
    m = network.hidden_sizes[0]
    W, b = network.weights[0], network.biases[0]
    k_t = builder.op(STAGE, "Transpose", [k], perm=[1, 0])  # [d, N]
    parts = (
        [k_t]
        if d == 1
        else builder.op(STAGE, "Split", [k_t], n_outputs=d, axis=0, **_count(builder, d))
    )
    total = None
    for f, part in enumerate(parts):
        term = builder.op(STAGE, "Mul", [part, builder.const(STAGE, f"first_w{f}", W[f][:, None])])
        total = term if total is None else builder.op(STAGE, "Add", [total, term])
    assert total is not None
    inactive = builder.op(
        STAGE, "LessOrEqual", [total, builder.const(STAGE, "first_t", -b[:, None])]
    )
    bits = builder.cast(STAGE, builder.op(STAGE, "Not", [inactive]), np.int64)  # [m, N]
    place = builder.const(STAGE, "first_place", (1 << np.arange(m - 1, -1, -1))[:, None], np.int64)
    code = _reduce(builder, "ReduceSum", builder.op(STAGE, "Mul", [bits, place]), [0])  # [N]
    table = builder.const(STAGE, "first_nodes", _first_layer_nodes(tree))
    return builder.op(STAGE, "Gather", [table, code], axis=0)


def _levels(builder: GraphBuilder, k: str, tree: AffineTree, node: str, levels: int) -> str:
    """``node`` moved down ``levels`` levels, each row projected onto its own node's normal.

    ``Gather`` the node's row ``(w_0, ..., w_{d-1}, t)``, ``Mul`` by
    ``(k_0, ..., k_{d-1}, -1)``, ``CumSum``: the last entry is the correctly
    rounded ``p - t``, ``<= 0`` iff ``p <= t``, the Python model's test.
    Children are adjacent (right = left + 1); a leaf points to itself with a
    zero row, so it stays.
    """
    e = tree.ensemble
    assert e.projection is not None
    d = tree.network.n_features
    leaf_node = e.feature < 0
    normals = np.where(leaf_node[None, :], 0.0, e.projection[:, np.where(leaf_node, 0, e.feature)])
    splits = np.concatenate([normals, np.where(leaf_node, 0.0, e.threshold)[None, :]]).T
    left = np.where(leaf_node, np.arange(e.n_nodes, dtype=np.int64), e.left)
    first = builder.columns(STAGE, k, 0, 1, "first_col")  # [N, 1]
    minus = builder.op(
        STAGE,
        "Sub",
        [
            builder.op(STAGE, "Mul", [first, builder.const(STAGE, "zero_m", 0.0)]),
            builder.const(STAGE, "one_m", 1.0),
        ],
    )
    extended = builder.op(STAGE, "Concat", [k, minus], axis=1)  # [N, d + 1]
    split_table = builder.const(STAGE, "splits", np.ascontiguousarray(splits))
    left_table = builder.const(STAGE, "left", left)
    axis1 = builder.const(STAGE, "axis1", 1, np.int64)
    last = builder.const(STAGE, "last_term", d, np.int64)
    zero_margin = builder.const(STAGE, "zero_margin", 0.0)
    for _ in range(levels):
        split = builder.op(STAGE, "Gather", [split_table, node], axis=0)  # [N, d + 1]
        sums = builder.op(STAGE, "CumSum", [builder.op(STAGE, "Mul", [split, extended]), axis1])
        margin = builder.op(STAGE, "Gather", [sums, last], axis=1)  # p - t, [N]
        right = builder.cast(STAGE, builder.op(STAGE, "Greater", [margin, zero_margin]), np.int64)
        node = builder.op(
            STAGE, "Add", [builder.op(STAGE, "Gather", [left_table, node], axis=0), right]
        )
    return node


def _count(builder: GraphBuilder, n: int) -> dict[str, Any]:
    return {"num_outputs": n} if builder.opset >= 18 else {}


def emit_region_tree(builder: GraphBuilder, k: str, tree: AffineTree) -> tuple[list[str], str, str]:
    """The outputs (`network_head`), and the graph outputs ``covered`` ``[N]`` (bool) and
    ``region`` ``[N]`` (int64, -1: none), under those names."""
    network = tree.network
    d = network.n_features
    leaf = _walk(builder, k, tree)  # [N]: leaf number + 1, 0 missing
    zero = builder.const(STAGE, "zero_leaf", 0, np.int64)
    leaf = builder.op(STAGE, "Where", [_off_ball(builder, k), zero, leaf])
    # Named as the graph outputs now: the rescoring branch below reads ``covered``.
    covered = builder.op(STAGE, "Greater", [leaf, zero], outputs=["covered"])
    region = builder.op(
        STAGE, "Sub", [leaf, builder.const(STAGE, "one_leaf", 1, np.int64)], outputs=["region"]
    )
    maps = builder.op(
        STAGE, "Gather", [builder.const(STAGE, "maps", tree.maps), leaf], axis=0
    )  # [N, d, C]
    terms = builder.op(
        STAGE, "Mul", [builder.op(STAGE, "Unsqueeze", [k, _axes(builder, [2])]), maps]
    )
    sums = builder.op(STAGE, "CumSum", [terms, builder.const(STAGE, "feature_axis", 1, np.int64)])
    total = builder.op(
        STAGE, "Gather", [sums, builder.const(STAGE, "last", d - 1, np.int64)], axis=1
    )
    offsets = builder.op(
        STAGE, "Gather", [builder.const(STAGE, "offsets", tree.offsets), leaf], axis=0
    )
    logits = builder.op(STAGE, "Add", [total, offsets])
    # Some row uncovered: the smallest leaf number is 0 (as float64: +inf for no rows).
    lowest = _reduce(builder, "ReduceMin", builder.cast(GUARD, leaf, np.float64), None)
    uncovered = builder.op(GUARD, "Less", [lowest, builder.const(GUARD, "half", 0.5)])
    if not network.is_classifier:

        def redo(block: GraphBuilder) -> str:
            return block.op(GUARD, "Not", [covered])

        return _rescore(builder, uncovered, logits, k, redo, network), covered, region
    margin = builder.const(GUARD, "margin", tie_margin(network, tree.value_bound))
    near_tie, found = _near(builder, logits, network, margin)
    condition = builder.op(GUARD, "Or", [uncovered, near_tie])

    def redo_near(block: GraphBuilder) -> str:
        near = _rows_near(block, found, network, margin)
        return block.op(GUARD, "Or", [near, block.op(GUARD, "Not", [covered])])

    return _rescore(builder, condition, logits, k, redo_near, network), covered, region


def network_head(block: GraphBuilder, logits: str, network: Network) -> list[str]:
    """The outputs of ``logits`` in ``b``: ``[label, probabilities]`` (classifiers) or
    ``[logits]`` (regressors' values), in `network_output_infos`' order.

    The label is decided on the logits, as the Python model decides it:
    ``ArgMax`` (first largest, numpy's rule) or ``z > 0`` for one logistic logit.
    """
    if not network.is_classifier:
        return [logits]
    assert network.classes is not None
    if network.output == "logistic":
        p = block.op("output", "Sigmoid", [logits])
        q = block.op("output", "Sub", [block.const("output", "one", np.ones((1, 1))), p])
        probabilities = block.op("output", "Concat", [q, p], axis=1)
        positive = block.op("output", "Greater", [logits, block.const("output", "zero", 0.0)])
        index = block.op(
            "output", "Squeeze", [block.cast("output", positive, np.int64), _axes(block, [1])]
        )
    else:
        probabilities = block.op("output", "Softmax", [logits], axis=1)
        index = block.op("output", "ArgMax", [logits], axis=1, keepdims=0)
    labels, label_type = label_tensor(network.classes)
    if label_type == TensorProto.INT64 and np.array_equal(labels, np.arange(len(labels))):
        return [index, probabilities]
    label = block.op("output", "Gather", [block.const("output", "classes", labels), index], axis=0)
    return [label, probabilities]


def network_output_infos(network: Network) -> list[helper.ValueInfoProto]:
    """The graph outputs `network_head` gives, named and typed."""
    elem = onnx_type(np.float64)
    if not network.is_classifier:
        return [helper.make_tensor_value_info("variable", elem, ["N", network.n_outputs])]
    assert network.classes is not None
    _, label_type = label_tensor(network.classes)
    return [
        helper.make_tensor_value_info("label", label_type, ["N"]),
        helper.make_tensor_value_info("probabilities", elem, ["N", len(network.classes)]),
    ]


def emit_network_outputs(
    builder: GraphBuilder, head: list[str], network: Network
) -> list[helper.ValueInfoProto]:
    """Name the tensors `network_head` (or an ``If`` around it) gave as the graph outputs."""
    infos = network_output_infos(network)
    for name, info in zip(head, infos, strict=True):
        builder.rename(name, info.name)
    return infos
