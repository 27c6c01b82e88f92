"""ONNX nodes for the tree ensemble, in two encodings.

``exact`` (ai.onnx.ml opset 5 ``TreeEnsemble``): the ensemble operator
returns, for every tree, the index of the leaf a row reaches (each tree is
its own target, so no runtime ever adds two trees' values, whatever its
threading). The leaf values then come from one ``Gather`` of a table in the
model's own precision and are added tree by tree, in tree order, by
``CumSum``: the very additions scikit-learn, XGBoost and LightGBM make.
Each tree is walked once whatever the number of classes, where putting the
classes in the operator itself would repeat every tree once per class.

``compat`` (legacy ai.onnx.ml opset 1 ``TreeEnsembleRegressor``): float32
thresholds and leaf sums, for older and smaller runtimes. Thresholds are
rounded in the direction that keeps float32 routing exact (toward -inf for
``<=``, toward +inf for ``<``); sums are float32, so probabilities may differ
in the last float32 bits and exact vote ties may break differently.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from onnx import TensorProto, helper

from ..ir import Ensemble
from ..thresholds import round_threshold
from ._graph import ML_DOMAIN, GraphBuilder, onnx_type

STAGE = "trees"
_MODES = {"<=": 0, "<": 1}  # TreeEnsemble (opset 5) BRANCH_LEQ, BRANCH_LT
_LEGACY_MODES = {"<=": "BRANCH_LEQ", "<": "BRANCH_LT"}
_ROUNDING = {"<=": "down", "<": "up"}
#: Rows per block when adding tree values (see _sum_trees_in_chunks).
CHUNK_ROWS = 1024
#: Leaf indices travel as the ensemble's float type; float32 holds integers exactly below this.
_FLOAT32_EXACT_INTS = 1 << 24


def remap_features(ensemble: Ensemble) -> tuple[Ensemble, np.ndarray]:
    """The ensemble reading only its used Klein features, renumbered 0..u-1, and those features."""
    used = ensemble.used_features()
    if used.size == 0:  # only leaves: the operator still needs one input column
        used = np.array([0], dtype=np.int64)
    feature = np.where(ensemble.feature >= 0, np.searchsorted(used, ensemble.feature), -1)
    return replace(ensemble, feature=feature.astype(np.int64), n_features=int(used.size)), used


def _tree_of_node(ensemble: Ensemble) -> np.ndarray:
    sizes = np.diff(np.append(ensemble.roots, ensemble.n_nodes))
    return np.repeat(np.arange(ensemble.n_trees, dtype=np.int64), sizes)


def _thresholds(ensemble: Ensemble, dtype: str) -> np.ndarray:
    return round_threshold(ensemble.threshold, dtype, _ROUNDING[ensemble.op]).astype(dtype)


def _to(g: GraphBuilder, k: str, k_dtype: str, dtype: str) -> str:
    return k if k_dtype == dtype else g.cast(STAGE, k, dtype)


def emit_exact(g: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble) -> str:
    """Raw scores ``[N, n_outputs]`` in ``ensemble.sum_dtype`` (aggregated, base added)."""
    leaf = ensemble.feature < 0
    internal = ~leaf
    split_rank = np.cumsum(internal) - 1
    leaf_rank = np.cumsum(leaf) - 1
    n_leaves = int(leaf.sum())

    # Values are compared in the backend's precision; the operator runs in
    # that precision too unless leaf indices would not fit in float32.
    k = _to(g, k, k_dtype, ensemble.compare_dtype)
    tree_dtype = ensemble.compare_dtype
    if tree_dtype == "float32" and n_leaves >= _FLOAT32_EXACT_INTS:
        tree_dtype = "float64"
        k = g.cast(STAGE, k, tree_dtype)

    def child(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        is_leaf = leaf[c]
        return np.where(is_leaf, leaf_rank[c], split_rank[c]), is_leaf.astype(np.int64)

    true_ids, true_leafs = child(ensemble.left[internal])
    false_ids, false_leafs = child(ensemble.right[internal])
    features = ensemble.feature[internal]
    splits = _thresholds(ensemble, tree_dtype)[internal]
    modes = np.full(features.shape, _MODES[ensemble.op], dtype=np.uint8)

    # A tree that is a single leaf still needs a split node to start from.
    roots = ensemble.roots
    lone = leaf[roots]
    tree_roots = np.where(lone, 0, split_rank[roots])
    if lone.any():
        n_splits = features.shape[0]
        lone_leaves = leaf_rank[roots[lone]]
        tree_roots[lone] = n_splits + np.arange(lone.sum())
        features = np.append(features, np.zeros(lone.sum(), dtype=np.int64))
        splits = np.append(splits, np.zeros(lone.sum(), dtype=tree_dtype))
        modes = np.append(modes, np.zeros(lone.sum(), dtype=np.uint8))
        true_ids = np.append(true_ids, lone_leaves)
        false_ids = np.append(false_ids, lone_leaves)
        true_leafs = np.append(true_leafs, np.ones(lone.sum(), dtype=np.int64))
        false_leafs = np.append(false_leafs, np.ones(lone.sum(), dtype=np.int64))

    leaf_ids = g.op(
        STAGE,
        "TreeEnsemble",
        [k],
        domain=ML_DOMAIN,
        aggregate_function=1,  # SUM: each target receives exactly one leaf
        post_transform=0,
        n_targets=ensemble.n_trees,
        tree_roots=tree_roots.astype(np.int64).tolist(),
        nodes_featureids=features.astype(np.int64).tolist(),
        nodes_splits=splits.astype(tree_dtype),
        nodes_modes=modes,
        nodes_truenodeids=true_ids.astype(np.int64).tolist(),
        nodes_trueleafs=true_leafs.tolist(),
        nodes_falsenodeids=false_ids.astype(np.int64).tolist(),
        nodes_falseleafs=false_leafs.tolist(),
        leaf_targetids=_tree_of_node(ensemble)[leaf].tolist(),
        leaf_weights=np.arange(n_leaves, dtype=tree_dtype),
    )
    index = g.cast(STAGE, leaf_ids, np.int64)
    table = g.const(STAGE, "leaf_values", ensemble.value[leaf].astype(ensemble.sum_dtype))
    if ensemble.n_trees == 1:
        scores = _sum_trees(g, table, index, 1)
    else:
        scores = _sum_trees_in_chunks(
            g, table, index, ensemble.n_trees, ensemble.n_outputs, ensemble.sum_dtype
        )
    return _finish(g, scores, ensemble, ensemble.sum_dtype)


def _sum_trees(g: GraphBuilder, table: str, index: str, n_trees: int) -> str:
    """``table[index]`` added over trees in tree order: [b, T] leaf rows -> [b, C]."""
    per_tree = g.op(STAGE, "Gather", [table, index], axis=0)  # [b, T, C]
    if n_trees > 1:
        per_tree = g.op(STAGE, "CumSum", [per_tree, g.const(STAGE, "tree_axis", 1, np.int64)])
    last = g.const(STAGE, "last_tree", n_trees - 1, np.int64)
    return g.op(STAGE, "Gather", [per_tree, last], axis=1)


def _sum_trees_in_chunks(
    g: GraphBuilder, table: str, index: str, n_trees: int, n_outputs: int, dtype: str
) -> str:
    """:func:`_sum_trees` over blocks of ``CHUNK_ROWS`` rows, in a Loop.

    The per-tree values of a block ([CHUNK_ROWS, T, C]) stay in cache;
    for all rows at once they would take N * T * C numbers and, measured,
    make a 100k-row call five times slower.
    """
    chunk = g.const(STAGE, "chunk_rows", CHUNK_ROWS, np.int64)
    blocks = g.op(STAGE, "SplitToSequence", [index, chunk], axis=0)
    n_blocks = g.op(STAGE, "SequenceLength", [blocks])
    # Start from a zero-row block so that an empty batch concatenates too.
    no_rows = g.const(STAGE, "no_rows", np.zeros((0, n_outputs), dtype=dtype))
    empty = g.op(STAGE, "SequenceConstruct", [no_rows])

    body = g.child()
    i, cond_in, acc_in = body.unique("block/i"), body.unique("block/cond"), body.unique("block/acc")
    block = body.op("block", "SequenceAt", [blocks, i])
    sums = _sum_trees(body, table, block, n_trees)
    acc_out = body.op("block", "SequenceInsert", [acc_in, sums])
    cond_out = body.op("block", "Identity", [cond_in])
    elem = onnx_type(dtype)
    body_graph = helper.make_graph(
        body.nodes,
        "sum_trees_block",
        [
            helper.make_tensor_value_info(i, TensorProto.INT64, []),
            helper.make_tensor_value_info(cond_in, TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info(acc_in, elem, None),
        ],
        [
            helper.make_tensor_value_info(cond_out, TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info(acc_out, elem, None),
        ],
    )
    # An explicit `true` condition: onnx's reference evaluator runs no
    # iteration when the optional condition input is left out.
    keep_going = g.const(STAGE, "true", True, np.bool_)
    acc = g.op(STAGE, "Loop", [n_blocks, keep_going, empty], body=body_graph)
    return g.op(STAGE, "ConcatFromSequence", [acc], axis=0)


def emit_compat(g: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble) -> str:
    """Raw scores ``[N, n_outputs]`` in float32 from the legacy TreeEnsembleRegressor."""
    k = _to(g, k, k_dtype, "float32")
    leaf = ensemble.feature < 0
    tree = _tree_of_node(ensemble)
    local = np.arange(ensemble.n_nodes) - ensemble.roots[tree]
    to_local = lambda c: np.where(leaf, 0, c - ensemble.roots[tree])  # noqa: E731

    leaf_nodes, columns = np.nonzero(ensemble.value * leaf[:, None])
    scores = g.op(
        STAGE,
        "TreeEnsembleRegressor",
        [k],
        domain=ML_DOMAIN,
        aggregate_function="SUM",
        post_transform="NONE",
        n_targets=ensemble.n_outputs,
        nodes_treeids=tree.tolist(),
        nodes_nodeids=local.tolist(),
        nodes_featureids=np.where(leaf, 0, ensemble.feature).tolist(),
        nodes_modes=[b"LEAF" if x else _LEGACY_MODES[ensemble.op].encode() for x in leaf],
        nodes_values=np.where(leaf, 0.0, _thresholds(ensemble, "float32")).astype(np.float32).tolist(),
        nodes_truenodeids=to_local(ensemble.left).tolist(),
        nodes_falsenodeids=to_local(ensemble.right).tolist(),
        nodes_missing_value_tracks_true=[0] * ensemble.n_nodes,
        target_treeids=tree[leaf_nodes].tolist(),
        target_nodeids=local[leaf_nodes].tolist(),
        target_ids=columns.tolist(),
        target_weights=ensemble.value[leaf_nodes, columns].astype(np.float32).tolist(),
    )
    return _finish(g, scores, ensemble, "float32")


def _finish(g: GraphBuilder, scores: str, ensemble: Ensemble, dtype: str) -> str:
    """Divide by the tree count ("mean") and add base values, in the IR's order."""
    if ensemble.aggregate == "mean" and ensemble.n_trees > 1:
        scores = g.op(STAGE, "Div", [scores, g.const(STAGE, "n_trees", ensemble.n_trees, dtype)])
    if np.any(ensemble.base_values != 0):
        scores = g.op(STAGE, "Add", [scores, g.const(STAGE, "base_values", ensemble.base_values, dtype)])
    return scores
