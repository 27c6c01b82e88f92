"""ONNX nodes for the tree ensemble, in two encodings.

``exact``: the ensemble operator returns, for every tree, the row of the
leaf value table that the row reaches (each tree is
its own target, so no runtime ever adds two trees' values, whatever its
threading). The leaf values then come from one ``Gather`` of a table in the
model's own precision and are added tree by tree, in tree order, by
``CumSum``: the very additions scikit-learn, XGBoost and LightGBM make.
Each tree is walked once whatever the number of classes, where putting the
classes in the operator itself would repeat every tree once per class. The
operator is the legacy float32 one when values are compared in float32
(exact routing with thresholds rounded as below; leaf rows are integers
below 2**24, exact in float32) and opset-5 ``TreeEnsemble`` in double when
they are compared in float64 (see `plan_trees`).

``compat`` (legacy ai.onnx.ml opset 1 ``TreeEnsembleRegressor``): float32
thresholds and leaf sums, for older and smaller runtimes. Thresholds are
rounded in the direction that keeps float32 routing exact (toward -inf for
``<=``, toward +inf for ``<``); sums are float32, so probabilities may differ
in the last float32 bits and exact vote ties may break differently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
from onnx import TensorProto, helper

from ..ir import Ensemble
from ..ir.trees import Op, threshold_in
from ._graph import ML_DOMAIN, GraphBuilder, onnx_type

STAGE = "trees"
_MODES = {"<=": 0, "<": 1}  # TreeEnsemble (opset 5) BRANCH_LEQ, BRANCH_LT
_MEMBER_MODE = 6  # TreeEnsemble (opset 5) BRANCH_MEMBER: true iff the value equals a member
_LEGACY_MODES = {"<=": "BRANCH_LEQ", "<": "BRANCH_LT"}
#: Up to this many classes, leaf values are read with one GatherElements per
#: class, each cheap; beyond, one Gather of [leaves, C] rows, whose cost hardly
#: depends on C, is cheaper.
ELEMENTWISE_MAX_CLASSES = 3
#: Rows per block of the exact encoding's Loop (see _row_block_loop).
CHUNK_ROWS = 1024
#: Rows per call of the exact encoding's tree operator in a large batch;
#: the sums inside each such block go CHUNK_ROWS rows at a time.
OPERATOR_BLOCK_ROWS = 16384


def remap_features(ensemble: Ensemble) -> tuple[Ensemble, np.ndarray]:
    """The ensemble reading only its used Klein features, renumbered 0..u-1, and those features."""
    used = ensemble.used_features()
    if used.size == 0:  # only leaves: the operator still needs one input column
        used = np.array([0], dtype=np.int64)
    feature = np.where(ensemble.feature >= 0, np.searchsorted(used, ensemble.feature), -1)
    return replace(ensemble, feature=feature.astype(np.int64), n_features=int(used.size)), used


def tree_of_node(ensemble: Ensemble) -> np.ndarray:
    """The tree each node belongs to, node by node."""
    sizes = np.diff(np.append(ensemble.roots, ensemble.n_nodes))
    return np.repeat(np.arange(ensemble.n_trees, dtype=np.int64), sizes)


def _thresholds(ensemble: Ensemble, dtype: str) -> np.ndarray:
    return threshold_in(ensemble.threshold, dtype, ensemble.op)


def float32_boundaries(threshold: np.ndarray, op: Op) -> np.ndarray:
    """Float64 thresholds ``b`` with ``x <= b`` iff the model's float32 comparison
    of ``float32(x)`` holds, for every float64 ``x``.

    With them a float64 Klein coordinate goes to the tree operator as it is,
    without the two ``Cast`` nodes (to float32 and back) that round it first.
    For a float32 threshold ``t`` (``<`` becomes ``<=`` the float32 below),
    ``float32(x) <= t`` iff ``x`` lies below the midpoint ``h`` of ``t`` and
    the next float32, or equals ``h`` and rounds to ``t`` (ties to even):
    ``b`` is ``h`` or the float64 just below it.

    The result is NaN where ``t`` or the float32 above it is infinite (no
    Klein threshold is): callers keep the rounding ``Cast`` nodes then.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        t32 = threshold_in(threshold, "float32", op)
        if op == "<":  # float32(x) < t  iff  float32(x) <= the float32 below t
            t32 = np.nextafter(t32, np.float32(-np.inf))
        t = t32.astype(np.float64)
        up = np.nextafter(t32, np.float32(np.inf)).astype(np.float64)
        h = np.where(np.isinf(up), np.nan, t + (up - t) / 2)  # exact: 25 significant bits
        rounds_to_t = h.astype(np.float32) == t32
    return np.where(rounds_to_t, h, np.nextafter(h, -np.inf))


def cast_to(builder: GraphBuilder, k: str, k_dtype: str, dtype: str) -> str:
    """``k`` (held in ``k_dtype``) as ``dtype``: a Cast node only where they differ."""
    return k if k_dtype == dtype else builder.cast(STAGE, k, dtype)


def per_class_trees(ensemble: Ensemble) -> np.ndarray | None:
    """Trees grouped by the output column they feed, ``[C, T / C]``, or None.

    None unless every tree feeds a single column and every column is fed by
    as many trees (boosted models, single-output models).
    """
    if ensemble.n_outputs == 1:
        return np.arange(ensemble.n_trees)[None, :]
    if ensemble.tree_target is None:
        return None
    counts = np.bincount(ensemble.tree_target, minlength=ensemble.n_outputs)
    if np.any(counts != counts[0]):
        return None
    order = np.argsort(ensemble.tree_target, kind="stable")
    return order.reshape(ensemble.n_outputs, -1)


#: How the exact encoding's sums meet a batch: ``"whole"`` all rows at once (a
#: single tree); ``"short_or_blocks"`` an ``If`` that sends batches of up to
#: ``CHUNK_ROWS`` rows past the row-block ``Loop`` (both branches hold the tree
#: operator); ``"blocks"`` always the ``Loop`` (one copy of the operator).
Batching = Literal["whole", "short_or_blocks", "blocks"]


@dataclass(frozen=True, kw_only=True)
class TreePlan:
    """How the ensemble operator is used (chosen by `hyp2onnx.emit.strategy`).

    ``operator``: ``"legacy"`` is ai.onnx.ml opset-1 ``TreeEnsembleRegressor``
    (float32 thresholds and outputs; exact routing for values compared in
    float32, and every runtime with ML operators has it); ``"v5"`` is
    opset-5 ``TreeEnsemble`` in double; ``"v3"`` the opset-3
    ``TreeEnsembleRegressor`` with double thresholds and float32 outputs
    (leaf rows, exact below 2**24), for graphs that also hold the fast
    encoding's opset-3 operator (`class_weight_regressor`). ``carries``:
    ``"values"`` when each tree feeds one output column and hands over its
    own leaf value, ``"leaf_rows"`` when it hands over where its leaf's
    values are: the leaf's index among its tree's leaves (forests of up to
    ``ELEMENTWISE_MAX_CLASSES`` classes, read by GatherElements) or its row
    in one table (Gather; a single tree's by GatherND).
    ``batching``: see `Batching`.
    """

    operator: Literal["legacy", "v3", "v5"]
    carries: Literal["values", "leaf_rows"]
    batching: Batching
    #: the fast encoding adds each leaf's class values with the ai.onnx.ml
    #: opset-3 operator (double thresholds and weights, `class_weight_regressor`)
    class_weights: bool = False

    @property
    def ml_opset(self) -> int:
        if self.operator == "v5":
            return 5
        return 3 if self.class_weights or self.operator == "v3" else 1


def emit_exact(
    builder: GraphBuilder,
    k: str,
    k_dtype: str,
    ensemble: Ensemble,
    plan: TreePlan,
    *,
    features: Callable[[GraphBuilder, str], str] | None = None,
) -> str:
    """Raw scores ``[N, n_outputs]`` in ``ensemble.sum_dtype`` (aggregated, base added).

    When each tree feeds one output column, the ensemble operator returns
    every tree's own leaf value (a target per tree, so the value passes
    unchanged) and ``CumSum`` adds them per column in tree order. Otherwise
    (scikit-learn classifiers: a leaf holds a value per class) it returns
    the row of each tree's leaf in a value table, which ``Gather`` reads.
    The operator runs on blocks of ``OPERATOR_BLOCK_ROWS`` rows and the sums
    on blocks of ``CHUNK_ROWS`` rows inside each (`_row_block_loop`);
    small models also send batches of up to ``CHUNK_ROWS`` rows past the
    Loops (`by_row_blocks`).

    ``features``, if given, maps a block of rows of ``k`` to the float64
    columns the ensemble reads (rotation forests' frame coordinates,
    `hyp2onnx.emit.frames.frame_chain`): see
    `ExactScorer.fused_batch`.
    """
    scorer = ExactScorer.build(builder, ensemble, plan)
    if features is not None:
        raw = scorer.fused_batch(builder, k, features)
    else:
        raw = scorer.any_batch(builder, scorer.operator_input(builder, k, k_dtype))
    return finish_scores(builder, raw, ensemble, ensemble.sum_dtype)


@dataclass(frozen=True)
class ExactScorer:
    """The exact encoding's per-tree operator and sums, for any rows of Klein coordinates."""

    ensemble: Ensemble
    plan: TreePlan
    groups: np.ndarray | None
    targets: dict
    tables: list | None
    table: str | None

    @staticmethod
    def build(builder: GraphBuilder, ensemble: Ensemble, plan: TreePlan) -> ExactScorer:
        leaf = ensemble.feature < 0
        leaf_nodes = np.flatnonzero(leaf)
        tree = tree_of_node(ensemble)
        groups = per_class_trees(ensemble) if plan.carries == "values" else None
        tables, table = None, None
        if groups is not None:
            column = tree_columns(groups)
            targets = {
                "leaf_nodes": leaf_nodes,
                "target_ids": column[tree[leaf_nodes]],
                "weights": ensemble.value[leaf_nodes].sum(axis=1),  # the one non-zero column
            }
        elif ensemble.n_outputs <= ELEMENTWISE_MAX_CLASSES and ensemble.n_trees > 1:
            # Each tree hands over its leaf's index among its own leaves; one
            # GatherElements per class reads [leaves, T] tables.
            local = (
                np.arange(leaf_nodes.size)
                - np.searchsorted(leaf_nodes, ensemble.roots)[tree[leaf_nodes]]
            )
            tables = []
            for c in range(ensemble.n_outputs):
                values = np.zeros(
                    (int(local.max()) + 1, ensemble.n_trees), dtype=ensemble.sum_dtype
                )
                values[local, tree[leaf_nodes]] = ensemble.value[leaf_nodes, c]
                tables.append(builder.const(STAGE, f"leaf_values_{c}", values))
            targets = {"leaf_nodes": leaf_nodes, "target_ids": tree[leaf_nodes], "weights": local}
        else:
            table = builder.const(
                STAGE, "leaf_values", ensemble.value[leaf].astype(ensemble.sum_dtype)
            )
            targets = {
                "leaf_nodes": leaf_nodes,
                "target_ids": tree[leaf_nodes],
                "weights": np.arange(leaf_nodes.size),
            }
        return ExactScorer(
            ensemble=ensemble, plan=plan, groups=groups, targets=targets, tables=tables, table=table
        )

    @property
    def out_dtype(self) -> str:
        return "float64" if self.plan.operator == "v5" else "float32"

    def operator_input(self, builder: GraphBuilder, k: str, k_dtype: str) -> str:
        """``k`` in the type the operator reads (float32 for legacy; float64 holding compare_dtype values)."""
        if self.plan.operator == "legacy":
            return cast_to(builder, k, k_dtype, "float32")
        compare = self.ensemble.compare_dtype
        return cast_to(builder, cast_to(builder, k, k_dtype, compare), compare, "float64")

    def per_tree_of(self, block: GraphBuilder, rows: str) -> str:
        """[b, F] Klein rows -> [b, T]: each tree's leaf value, or where its leaf's values are."""
        ensemble = self.ensemble
        per_tree = tree_operator(block, rows, ensemble, operator=self.plan.operator, **self.targets)
        if self.groups is not None:
            return cast_to(block, per_tree, self.out_dtype, ensemble.sum_dtype)
        return block.cast(STAGE, per_tree, np.int64)

    def sums_of(self, block: GraphBuilder, per_tree: str) -> str:
        """[b, T] -> [b, C]: the sums in tree order."""
        n_trees = self.ensemble.n_trees
        if self.groups is not None:
            return sum_tree_columns(block, per_tree, self.groups)
        if self.tables is not None:
            return sum_looked_up(block, self.tables, per_tree, n_trees)
        assert self.table is not None  # build() sets it when neither groups nor tables are
        return _sum_trees(block, self.table, per_tree, n_trees)

    def scores_of(self, block: GraphBuilder, rows: str) -> str:
        """All ``rows`` at once (a short batch, or any batch of a single tree): operator, sums."""
        return self.sums_of(block, self.per_tree_of(block, rows))

    def blocks_of(self, block: GraphBuilder, rows: str) -> str:
        """Any batch: the operator on OPERATOR_BLOCK_ROWS rows at a time, the
        sums on CHUNK_ROWS rows at a time inside each (nested Loops)."""
        width, dtype = self.ensemble.n_outputs, self.ensemble.sum_dtype

        def one_block(inner: GraphBuilder, block: str) -> str:
            return _row_block_loop(
                inner, self.per_tree_of(inner, block), self.sums_of, width, dtype
            )

        return _row_block_loop(block, rows, one_block, width, dtype, rows=OPERATOR_BLOCK_ROWS)

    def fused_batch(
        self, builder: GraphBuilder, k: str, features: Callable[[GraphBuilder, str], str]
    ) -> str:
        """Unfinished scores of any batch whose operator input is ``features`` of its rows.

        Each block of ``CHUNK_ROWS`` rows is mapped, routed and summed in
        one Loop body: the wide float64 features (a rotation forest reads
        hundreds of frame columns) are routed while in cache, where a
        whole-batch tensor of them would cost a ``ConcatFromSequence`` and a
        second split into blocks (docs/rotation.md measures it). The operator
        then runs on blocks of ``CHUNK_ROWS`` rows rather than
        ``OPERATOR_BLOCK_ROWS``. ``plan.batching`` is ``"short_or_blocks"``
        or ``"blocks"`` here: the features are always made by blocks.
        """
        ensemble = self.ensemble

        def scores(block: GraphBuilder, rows: str) -> str:
            return self.scores_of(
                block, self.operator_input(block, features(block, rows), "float64")
            )

        width, dtype = ensemble.n_outputs, ensemble.sum_dtype
        if self.plan.batching == "blocks":
            return _row_block_loop(builder, k, scores, width, dtype)
        return by_row_blocks(builder, k, scores, width, dtype)

    def any_batch(self, builder: GraphBuilder, k: str) -> str:
        """Unfinished scores (no mean, no base values) of any batch, as ``plan.batching`` says.

        The operator runs on blocks of rows, so that its per-tree outputs and
        onnxruntime's per-thread score vectors (threads x rows x trees) stay
        the size of a block rather than growing with the batch; its blocks
        are larger than the sums' so that the trees and the leaf tables stay
        in cache while each works.
        """
        if self.plan.batching == "whole":
            return self.scores_of(builder, k)
        if self.plan.batching == "short_or_blocks":
            ensemble = self.ensemble
            return by_row_blocks(
                builder,
                k,
                self.scores_of,
                ensemble.n_outputs,
                ensemble.sum_dtype,
                long=self.blocks_of,
            )
        return self.blocks_of(builder, k)


def tree_operator(
    builder: GraphBuilder,
    k: str,
    ensemble: Ensemble,
    *,
    operator: Literal["legacy", "v3", "v5"],
    leaf_nodes: np.ndarray,
    target_ids: np.ndarray,
    weights: np.ndarray,
    n_targets: int | None = None,
    average: bool = False,
    boundaries: bool = False,
) -> str:
    """The tree operator `TreePlan.operator` names, reading ``k``: leaf ``leaf_nodes[i]``
    adds ``weights[i]`` to column ``target_ids[i]``; returns [N, n_targets] (default:
    one column per tree), the sums divided by the tree count where ``average`` (the
    operator's AVERAGE: the sum, then one division, as a ``Div`` after it would make).

    ``"legacy"``: TreeEnsembleRegressor with float32 thresholds, weights and sums,
    reading float32 ``k``. ``"v3"``: the ai.onnx.ml opset-3 TreeEnsembleRegressor with
    double thresholds and weights (``*_as_tensor``), its double sums rounded once to
    float32 (a leaf may appear several times). ``"v5"``: opset-5 TreeEnsemble in
    double, one target per leaf. Both double operators read float64 ``k``: the
    thresholds in the comparison's precision, held in double, compare a value of that
    precision widened to double as the model compares it; ``boundaries``: ``k`` is
    float64 that a model comparing in float32 would round first, and the thresholds
    are `float32_boundaries`.
    """
    n_targets = ensemble.n_trees if n_targets is None else n_targets
    if operator == "v5":
        op_type = "TreeEnsemble"
        attributes = _v5_attributes(
            ensemble, leaf_nodes, target_ids, weights, n_targets, average, boundaries
        )
    else:
        op_type = "TreeEnsembleRegressor"
        attributes = {
            **_regressor_nodes(ensemble, operator, weights, boundaries),
            **_regressor_attributes(ensemble, leaf_nodes, target_ids, n_targets, average),
        }
    return builder.op(STAGE, op_type, [k], domain=ML_DOMAIN, **attributes)


def _v5_attributes(
    ensemble: Ensemble,
    leaf_nodes: np.ndarray,
    target_ids: np.ndarray,
    weights: np.ndarray,
    n_targets: int,
    average: bool,
    boundaries: bool,
) -> dict[str, Any]:
    """The attributes of `tree_operator`'s opset-5 TreeEnsemble."""
    leaf = ensemble.feature < 0
    if not np.array_equal(leaf_nodes, np.flatnonzero(leaf)):
        raise ValueError("TreeEnsemble (opset 5) takes exactly one target per leaf")
    nodes = _v5_nodes(ensemble, boundaries=boundaries)
    members = _v5_membership(ensemble, nodes)  # before the roots: they append to nodes
    tree_roots = _v5_roots(ensemble, nodes)
    return {
        # SUM (1): with a target per tree, each target receives exactly one leaf
        "aggregate_function": 0 if average else 1,
        "post_transform": 0,
        "n_targets": n_targets,
        "tree_roots": tree_roots.astype(np.int64).tolist(),
        "nodes_featureids": nodes["features"].astype(np.int64).tolist(),
        "nodes_splits": nodes["splits"],
        "nodes_modes": nodes["modes"],
        "nodes_truenodeids": nodes["true_ids"].astype(np.int64).tolist(),
        "nodes_trueleafs": nodes["true_leafs"].tolist(),
        "nodes_falsenodeids": nodes["false_ids"].astype(np.int64).tolist(),
        "nodes_falseleafs": nodes["false_leafs"].tolist(),
        "leaf_targetids": np.asarray(target_ids, dtype=np.int64).tolist(),
        "leaf_weights": np.asarray(weights, dtype=np.float64),
        **members,
    }


def _v5_nodes(ensemble: Ensemble, *, boundaries: bool) -> dict[str, np.ndarray]:
    """The split nodes as opset-5 ``TreeEnsemble`` numbers them (split ranks, leaf ranks):
    features, thresholds, modes and children."""
    leaf = ensemble.feature < 0
    internal = ~leaf
    split_rank = np.cumsum(internal) - 1
    leaf_rank = np.cumsum(leaf) - 1

    def child(c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        is_leaf = leaf[c]
        return np.where(is_leaf, leaf_rank[c], split_rank[c]), is_leaf.astype(np.int64)

    true_ids, true_leafs = child(ensemble.left[internal])
    false_ids, false_leafs = child(ensemble.right[internal])
    features = ensemble.feature[internal]
    if boundaries:
        if ensemble.compare_dtype != "float32" or ensemble.categories is not None:
            raise ValueError("float32 boundaries are for float32 comparisons without categories")
        splits = float32_boundaries(ensemble.threshold, ensemble.op)[internal]
        modes: np.ndarray = np.full(features.shape, _MODES["<="], dtype=np.uint8)
    else:
        splits = _thresholds(ensemble, ensemble.compare_dtype).astype(np.float64)[internal]
        modes = np.full(features.shape, _MODES[ensemble.op], dtype=np.uint8)
    return {
        "split_rank": split_rank,
        "leaf_rank": leaf_rank,
        "features": features,
        "splits": splits,
        "modes": modes,
        "true_ids": true_ids,
        "true_leafs": true_leafs,
        "false_ids": false_ids,
        "false_leafs": false_leafs,
    }


def _v5_membership(ensemble: Ensemble, nodes: dict[str, np.ndarray]) -> dict[str, Any]:
    """Set-membership splits: their mode (in ``nodes``, changed in place) and codes."""
    if ensemble.categories is None:
        return {}
    split_rank = nodes["split_rank"]
    member_nodes = np.flatnonzero(ensemble.categories.member)  # all internal, in node order
    nodes["modes"][split_rank[member_nodes]] = _MEMBER_MODE
    nodes["splits"][split_rank[member_nodes]] = 0.0
    # Each node's codes in node order, each set closed by NaN (onnxruntime and
    # onnx's reference both count one NaN per membership node).
    sets = [np.append(ensemble.categories.codes(int(j)), np.nan) for j in member_nodes]
    return {"membership_values": np.concatenate(sets).astype(np.float64)}


def _v5_roots(ensemble: Ensemble, nodes: dict[str, np.ndarray]) -> np.ndarray:
    """Each tree's root split; a tree that is a single leaf gets a split node to start
    from (appended to ``nodes``), both of whose children are that leaf."""
    leaf = ensemble.feature < 0
    roots = ensemble.roots
    lone = leaf[roots]
    tree_roots = np.where(lone, 0, nodes["split_rank"][roots])
    if lone.any():
        n_lone = int(lone.sum())
        lone_leaves = nodes["leaf_rank"][roots[lone]]
        tree_roots[lone] = nodes["features"].shape[0] + np.arange(n_lone)
        appended = {
            "features": np.zeros(n_lone, dtype=np.int64),
            "splits": np.zeros(n_lone),
            "modes": np.zeros(n_lone, dtype=np.uint8),
            "true_ids": lone_leaves,
            "false_ids": lone_leaves,
            "true_leafs": np.ones(n_lone, dtype=np.int64),
            "false_leafs": np.ones(n_lone, dtype=np.int64),
        }
        for key, more in appended.items():
            nodes[key] = np.append(nodes[key], more)
    return tree_roots


def _legacy_nodes(ensemble: Ensemble) -> dict[str, Any]:
    """The node attributes shared by the legacy (opset 1 to 3) tree operators, but thresholds."""
    leaf = ensemble.feature < 0
    tree = tree_of_node(ensemble)
    local = np.arange(ensemble.n_nodes) - ensemble.roots[tree]
    to_local = lambda c: np.where(leaf, 0, c - ensemble.roots[tree])
    return {
        "nodes_treeids": tree.tolist(),
        "nodes_nodeids": local.tolist(),
        "nodes_featureids": np.where(leaf, 0, ensemble.feature).tolist(),
        "nodes_truenodeids": to_local(ensemble.left).tolist(),
        "nodes_falsenodeids": to_local(ensemble.right).tolist(),
        "nodes_missing_value_tracks_true": [0] * ensemble.n_nodes,
    }


def _regressor_attributes(
    ensemble: Ensemble,
    leaf_nodes: np.ndarray,
    target_ids: np.ndarray,
    n_targets: int,
    average: bool,
) -> dict[str, Any]:
    """The attributes both TreeEnsembleRegressor forms share: the aggregation, the targets
    (leaf ``leaf_nodes[i]`` adds to column ``target_ids[i]``) and the node lists."""
    tree = tree_of_node(ensemble)
    local = np.arange(ensemble.n_nodes) - ensemble.roots[tree]
    return {
        "aggregate_function": "AVERAGE" if average else "SUM",
        "post_transform": "NONE",
        "n_targets": n_targets,
        "target_treeids": tree[leaf_nodes].tolist(),
        "target_nodeids": local[leaf_nodes].tolist(),
        "target_ids": np.asarray(target_ids, dtype=np.int64).tolist(),
        **_legacy_nodes(ensemble),
    }


def _double_splits(ensemble: Ensemble, boundaries: bool) -> tuple[np.ndarray, list[bytes]]:
    """Double thresholds and modes, every node (leaves 0): the thresholds in the
    comparison's precision, or `float32_boundaries` with ``<=``."""
    leaf = ensemble.feature < 0
    if boundaries:
        splits = float32_boundaries(ensemble.threshold, ensemble.op)
        modes = [b"LEAF" if x else b"BRANCH_LEQ" for x in leaf]
    else:
        splits = _thresholds(ensemble, ensemble.compare_dtype).astype(np.float64)
        modes = [b"LEAF" if x else _LEGACY_MODES[ensemble.op].encode() for x in leaf]
    return np.where(leaf, 0.0, splits).astype(np.float64), modes


def _regressor_nodes(
    ensemble: Ensemble, operator: Literal["legacy", "v3"], weights: np.ndarray, boundaries: bool
) -> dict[str, Any]:
    """The modes, thresholds and weights of `tree_operator`'s TreeEnsembleRegressor:
    float32 lists (``"legacy"``), or double tensors (``"v3"``)."""
    if operator == "v3":
        splits, modes = _double_splits(ensemble, boundaries)
        return {
            "nodes_modes": modes,
            "nodes_values_as_tensor": splits,
            "target_weights_as_tensor": np.asarray(weights, dtype=np.float64),
        }
    if boundaries:
        raise ValueError("float32 boundaries are for the double tree operators")
    leaf = ensemble.feature < 0
    return {
        "nodes_modes": [b"LEAF" if x else _LEGACY_MODES[ensemble.op].encode() for x in leaf],
        "nodes_values": np.where(leaf, 0.0, _thresholds(ensemble, "float32"))
        .astype(np.float32)
        .tolist(),
        "target_weights": np.asarray(weights, dtype=np.float32).tolist(),
    }


def class_weight_regressor(
    builder: GraphBuilder,
    k: str,
    ensemble: Ensemble,
    *,
    boundaries: bool,
    classes: np.ndarray,
    average: bool = True,
) -> str:
    """The opset-3 `tree_operator` (``"v3"``) with every leaf adding its value of each class in
    ``classes`` to that class's column, divided by the tree count (forests; not with
    ``average`` False): ``[N, len(classes)]`` float32.

    onnxruntime keeps the sums in the thresholds' type (double) in whatever order its
    threads take the trees, divides in double and rounds once to float32 when it
    writes the output. Exact zeros are left out (adding them changes nothing).
    """
    leaf_nodes = np.flatnonzero(ensemble.feature < 0)
    values = ensemble.value[leaf_nodes][:, classes].astype(np.float64)
    nodes, column = np.nonzero(values)
    return tree_operator(
        builder,
        k,
        ensemble,
        operator="v3",
        leaf_nodes=leaf_nodes[nodes],
        target_ids=column,
        weights=values[nodes, column],
        n_targets=len(classes),
        average=average and ensemble.aggregate == "mean",
        boundaries=boundaries,
    )


def class_weight_classifier(
    builder: GraphBuilder, k: str, ensemble: Ensemble, *, boundaries: bool
) -> str:
    """As `class_weight_regressor` with the opset-3 TreeEnsembleClassifier
    (``class_weights_as_tensor``), which only adds: ``[N, C]`` float32 sums, not divided."""
    tree = tree_of_node(ensemble)
    local = np.arange(ensemble.n_nodes) - ensemble.roots[tree]
    splits, modes = _double_splits(ensemble, boundaries)
    leaf_nodes = np.flatnonzero(ensemble.feature < 0)
    values = ensemble.value[leaf_nodes].astype(np.float64)
    nodes, column = np.nonzero(values)
    nodes_of = leaf_nodes[nodes]
    _, sums = builder.op(
        STAGE,
        "TreeEnsembleClassifier",
        [k],
        domain=ML_DOMAIN,
        n_outputs=2,
        post_transform="NONE",
        classlabels_int64s=list(range(ensemble.n_outputs)),
        nodes_modes=modes,
        nodes_values_as_tensor=splits,
        class_treeids=tree[nodes_of].tolist(),
        class_nodeids=local[nodes_of].tolist(),
        class_ids=column.tolist(),
        class_weights_as_tensor=values[nodes, column],
        **_legacy_nodes(ensemble),
    )
    return sums


def _sum_trees(builder: GraphBuilder, table: str, index: str, n_trees: int) -> str:
    """``table[index]`` added over trees in tree order: [b, T] leaf rows -> [b, C]."""
    if n_trees == 1:  # a single tree: its rows, one kernel (no Squeeze of a tree axis)
        return builder.op(STAGE, "GatherND", [table, index])
    per_tree = builder.op(STAGE, "Gather", [table, index], axis=0)  # [b, T, C]
    return sum_in_order(builder, per_tree, axis=1, length=n_trees)


def sum_looked_up(builder: GraphBuilder, tables: list[str], index: str, n_trees: int) -> str:
    """Per-class ``[slots, T]`` tables read at ``index`` [b, T], summed over trees -> [b, C]."""
    looked_up = [builder.op(STAGE, "GatherElements", [t, index], axis=0) for t in tables]
    axis = builder.const(STAGE, "class_axis", [2], np.int64)
    stacked = [builder.op(STAGE, "Unsqueeze", [v, axis]) for v in looked_up]
    per_tree = stacked[0] if len(stacked) == 1 else builder.op(STAGE, "Concat", stacked, axis=2)
    return sum_in_order(builder, per_tree, axis=1, length=n_trees)  # [b, T, C] -> [b, C]


def tree_columns(groups: np.ndarray) -> np.ndarray:
    """Column of each tree in the per-tree values when trees feed one class each.

    ``groups[c, j]`` is the ``j``-th tree of class ``c``; it goes to column
    ``j * C + c`` so that a reshape to ``[N, T / C, C]`` lines each class's
    trees up in order along axis 1, where onnxruntime's CumSum is much faster
    than along the last axis.
    """
    n_classes, per_class = groups.shape
    column = np.empty(groups.size, dtype=np.int64)
    column[groups.T.ravel()] = np.arange(groups.size)
    return column


def sum_tree_columns(builder: GraphBuilder, values: str, groups: np.ndarray) -> str:
    """``[b, T]`` per-tree values in `tree_columns` order -> ``[b, C]`` class sums."""
    n_classes, per_class = groups.shape
    if n_classes == 1:  # [b, T] is already tree-major: no Reshape, and the sum keeps its axis
        return sum_in_order(builder, values, axis=1, length=per_class, keep_axis=True)
    shape = builder.const(STAGE, "tree_major", [-1, per_class, n_classes], np.int64)
    per_tree = builder.op(STAGE, "Reshape", [values, shape])  # [b, T / C, C]
    return sum_in_order(builder, per_tree, axis=1, length=per_class)


def sum_in_order(
    builder: GraphBuilder, x: str, *, axis: int, length: int, keep_axis: bool = False
) -> str:
    """Sum ``x`` over ``axis`` strictly in index order: CumSum, then its last entry.

    ``keep_axis`` leaves the summed axis in place with length 1 (a
    one-element index for the Gather) instead of dropping it.
    """
    if length == 1:
        if keep_axis:
            return x
        # nothing to add: drop the axis (no copy, unlike a Gather)
        return builder.op(
            STAGE, "Squeeze", [x, builder.const(STAGE, f"axis{axis}", [axis], np.int64)]
        )
    x = builder.op(STAGE, "CumSum", [x, builder.const(STAGE, f"axis{axis}", axis, np.int64)])
    last = builder.const(STAGE, "last", [-1] if keep_axis else -1, np.int64)
    return builder.op(STAGE, "Gather", [x, last], axis=axis)


def by_row_blocks(
    builder: GraphBuilder,
    x: str,
    emit: Callable[[GraphBuilder, str], str],
    n_outputs: int,
    dtype: str,
    *,
    long: Callable[[GraphBuilder, str], str] | None = None,
) -> str:
    """``emit(x)``, computed block by block of ``CHUNK_ROWS`` rows when ``x`` is taller.

    ``emit`` expands each row to T * C numbers; for a large batch, doing that
    in one piece runs far slower than blocks that stay in cache. Batches of up to
    ``CHUNK_ROWS`` rows (single-row calls) skip the Loop through an ``If``,
    so ``emit``'s nodes appear twice in the file. ``long``, if given, builds
    the other branch instead of a Loop of ``emit`` over ``CHUNK_ROWS`` rows.
    """
    elem = onnx_type(dtype)
    out_info = helper.make_tensor_value_info
    rows = builder.n_rows(STAGE, x)
    short = builder.op(
        STAGE, "LessOrEqual", [rows, builder.const(STAGE, "chunk_rows_1d", [CHUNK_ROWS], np.int64)]
    )

    whole = builder.child()
    whole_out = emit(whole, x)
    whole_graph = helper.make_graph(
        whole.nodes, "whole_batch", [], [out_info(whole_out, elem, None)]
    )

    blocks = builder.child()
    joined = long(blocks, x) if long else _row_block_loop(blocks, x, emit, n_outputs, dtype)
    blocks_graph = helper.make_graph(blocks.nodes, "row_blocks", [], [out_info(joined, elem, None)])

    # If takes any one-element tensor as its condition: no Squeeze (one node
    # less on the single-row path).
    return builder.op(STAGE, "If", [short], then_branch=whole_graph, else_branch=blocks_graph)


def _row_block_loop(
    builder: GraphBuilder,
    x: str,
    emit: Callable[[GraphBuilder, str], str],
    width: int,
    dtype: str,
    *,
    rows: int = CHUNK_ROWS,
) -> str:
    """``emit`` applied to blocks of ``rows`` rows of ``x`` in a ``Loop``, results stacked.

    ``SplitToSequence`` cuts the rows, the body emits one ``[b, width]``
    block and ``SequenceInsert`` collects it, ``ConcatFromSequence`` joins
    the blocks. A batch of up to ``rows`` rows is one block; the
    collection starts with a ``[0, width]`` tensor, so that an empty batch
    (no blocks) gives an empty result rather than an error.
    """
    elem = onnx_type(dtype)
    out_info = helper.make_tensor_value_info
    chunk = builder.const(STAGE, "chunk_rows", rows, np.int64)
    pieces = builder.op(STAGE, "SplitToSequence", [x, chunk], axis=0)
    n_blocks = builder.op(STAGE, "SequenceLength", [pieces])
    body = builder.child()
    i, cond_in, acc_in = body.unique("block/i"), body.unique("block/cond"), body.unique("block/acc")
    block = body.op("block", "SequenceAt", [pieces, i])
    acc_out = body.op("block", "SequenceInsert", [acc_in, emit(body, block)])
    cond_out = body.op("block", "Identity", [cond_in])
    body_graph = helper.make_graph(
        body.nodes,
        "row_block",
        [
            out_info(i, TensorProto.INT64, []),
            out_info(cond_in, TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info(acc_in, elem, None),
        ],
        [
            out_info(cond_out, TensorProto.BOOL, []),
            helper.make_tensor_sequence_value_info(acc_out, elem, None),
        ],
    )
    # An explicit `true` condition: onnx's reference evaluator runs no
    # iteration when the optional condition input is left out.
    keep_going = builder.const(STAGE, "true", True, np.bool_)
    no_rows = builder.const(STAGE, "no_rows", np.zeros((0, width)), dtype)
    first = builder.op(STAGE, "SequenceConstruct", [no_rows])
    acc = builder.op(STAGE, "Loop", [n_blocks, keep_going, first], body=body_graph)
    return builder.op(STAGE, "ConcatFromSequence", [acc], axis=0)


def emit_compat(
    builder: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble, plan: TreePlan | None = None
) -> str:
    """Raw scores ``[N, n_outputs]`` in float32 from the legacy TreeEnsembleRegressor.

    ``plan`` is always the legacy operator carrying values (`plan_trees`).
    """
    leaf = ensemble.feature < 0
    leaf_nodes, columns = np.nonzero(ensemble.value * leaf[:, None])
    scores = tree_operator(
        builder,
        cast_to(builder, k, k_dtype, "float32"),
        ensemble,
        operator="legacy",
        leaf_nodes=leaf_nodes,
        target_ids=columns,
        weights=ensemble.value[leaf_nodes, columns],
        n_targets=ensemble.n_outputs,
    )
    return finish_scores(builder, scores, ensemble, "float32")


def finish_scores(
    builder: GraphBuilder, scores: str, ensemble: Ensemble, dtype: str, *, averaged: bool = False
) -> str:
    """Divide by the tree count ("mean") and add base values, in the IR's order.

    ``averaged``: the tree operator has divided already (its AVERAGE).
    """
    if ensemble.aggregate == "mean" and ensemble.n_trees > 1 and not averaged:
        scores = builder.op(
            STAGE, "Div", [scores, builder.const(STAGE, "n_trees", ensemble.n_trees, dtype)]
        )
    if np.any(ensemble.base_values != 0):
        scores = builder.op(
            STAGE, "Add", [scores, builder.const(STAGE, "base_values", ensemble.base_values, dtype)]
        )
    return scores
