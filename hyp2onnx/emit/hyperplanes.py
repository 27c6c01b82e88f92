"""A level walk for forests routed by hyperplanes: only the splits on a row's path.

A rotation forest routed by hyperplanes (``routing_ == "hyperplanes"``) is an
oblique ensemble: node ``j`` of tree ``t`` tests ``w_j . k <= c_j``, the
projection added in feature order (`hyp2onnx.ir.projection.project`).
Projecting every row onto every split's normal and handing the projections to
the tree operator computes ``n_splits`` projections a row; walking the trees
level by level computes ``depth`` a tree, exactly the nodes the row visits.

The walk is the perfect walk of oblique isolation forests
(`hyp2onnx.emit.isolation.emit_perfect_walk`): each (row, tree) pair holds
its slot in a perfect binary layout of the tree, gathers the slot's normal
and threshold, forms ``k_0 w_0``, ``+ k_1 w_1``, ... with one ``Mul`` and
one ``Add`` per Klein feature (correctly rounded float64, the Python model's
order) and goes left where the sum is ``<= c``. At the bottom, each class's
leaf value is gathered and the trees are added in tree order (``CumSum``),
then divided by the tree count as the exact encoding's sums are: the scores
are the Python model's bit for bit.
"""

from __future__ import annotations

import numpy as np

from ..ir import Ensemble
from ._graph import GraphBuilder
from .isolation import PERFECT_MAX_ENTRIES, _depth, _perfect_tables, level_step
from .trees import by_row_blocks, cast_to, finish_scores

STAGE = "hyperplanes"

__all__ = ["emit_forest_walk", "forest_walk_applies"]


def forest_walk_applies(ensemble: Ensemble) -> bool:
    """Whether `emit_forest_walk` takes ``ensemble``: oblique float64 ``<=`` splits, no
    categories, at least one split, and perfect tables within ``PERFECT_MAX_ENTRIES``."""
    if (
        ensemble.projection is None
        or ensemble.op != "<="
        or ensemble.compare_dtype != "float64"
        or ensemble.categories is not None
        or not np.any(ensemble.feature >= 0)
    ):
        return False
    bottom = _depth(ensemble)
    width = ensemble.projection.shape[0] + 1 + ensemble.n_outputs
    return bottom < 40 and (2 << bottom) * ensemble.n_trees * width <= PERFECT_MAX_ENTRIES


def emit_forest_walk(builder: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble) -> str:
    """Scores ``[N, n_outputs]`` (float64, averaged as the ensemble says) of an oblique
    forest, walking perfect trees level by level (module doc).

    Laid out tree-major, ``[T, b]``: each Klein feature is one ``[1, b]`` row
    that ``Mul`` broadcasts over the ``T`` trees' gathered weights, whole rows
    of a block at a time. At the bottom one ``Gather`` reads each tree's leaf
    row ``[T, b, C]`` of a value table and ``CumSum`` adds the trees in order.
    """
    k = cast_to(builder, k, k_dtype, "float64")
    assert ensemble.projection is not None  # forest_walk_applies
    normals, thresholds, values = _perfect_tables(ensemble)
    bottom = len(thresholds)
    d, n_trees, width = ensemble.projection.shape[0], ensemble.n_trees, ensemble.n_outputs
    # [T, 2**L] tables, tree-major (the root level's are [T, 1] columns)
    w = [
        [builder.const(STAGE, f"normal_{L}_{f}", normals[L][f].T.copy()) for f in range(d)]
        for L in range(bottom)
    ]
    t = [builder.const(STAGE, f"threshold_{L}", thresholds[L].T.copy()) for L in range(bottom)]
    slots = values.shape[0]
    table = builder.const(
        STAGE, "leaf_values", values.transpose(1, 0, 2).reshape(n_trees * slots, width)
    )
    first = builder.const(STAGE, "first_slot", (np.arange(n_trees) * slots)[:, None], np.int64)
    axis0 = builder.const(STAGE, "axis0", 0, np.int64)
    last = builder.const(STAGE, "last", -1, np.int64)

    def walk(block: GraphBuilder, rows: str) -> str:
        k_t = block.op(STAGE, "Transpose", [rows], perm=[1, 0])  # [d, b]
        if d == 1:
            columns = [k_t]
        else:
            count = {"num_outputs": d} if block.opset >= 18 else {}
            columns = block.op(STAGE, "Split", [k_t], n_outputs=d, axis=0, **count)  # d x [1, b]
        slot: str | None = None
        for depth in range(bottom):
            slot = level_step(block, columns, slot, w[depth], t[depth], stage=STAGE, axis=1)
        assert slot is not None  # forest_walk_applies: some tree splits
        leaf = block.op(STAGE, "Add", [slot, first])  # [T, b]: row of the leaf table
        per_tree = block.op(STAGE, "Gather", [table, leaf], axis=0)  # [T, b, C]
        sums = block.op(STAGE, "CumSum", [per_tree, axis0])  # trees added in tree order
        return block.op(STAGE, "Gather", [sums, last], axis=0)  # [b, C]

    raw = by_row_blocks(builder, k, walk, width, "float64")
    return finish_scores(builder, raw, ensemble, "float64")
