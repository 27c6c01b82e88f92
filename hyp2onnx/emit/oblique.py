"""ONNX nodes that project Klein coordinates onto the normals of oblique splits.

An oblique ensemble (``Ensemble.projection`` set) tests column ``j`` of
``P = project(k, normals)``. The graph computes ``P`` as
`hyp2onnx.ir.projection.project` does, operation for operation: ``Split``
the Klein columns, then ``P = k_0 * w_0``, ``P = P + k_1 * w_1``, ... in
float64, one ``Mul`` and one ``Add`` per Klein feature (on the transposed
``[m, N]`` layout, which onnxruntime broadcasts fastest, and in blocks of
rows like the tree stage's sums). Each is a correctly
rounded IEEE operation in every runtime, so ``P`` is bit-identical to the
Python model's and the tree operator routes every row as Python does.

A ``MatMul`` would be one node, but its summation order (blocking, vector
lanes, fused multiply-adds) is the runtime's choice and differs from
numpy's: rows within one ulp of a threshold would change sides.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..ir import Ensemble
from ._graph import GraphBuilder
from .trees import by_row_blocks

STAGE = "oblique"

__all__ = ["emit_normals", "remap_projection"]


def remap_projection(ensemble: Ensemble) -> tuple[Ensemble, np.ndarray]:
    """The oblique ensemble reading only what it needs, and the Klein features it reads.

    Keeps the projection columns some node tests (renumbered in order) and
    the Klein features with a non-zero weight in one of them: a feature
    whose every weight is zero adds only ``+-0`` to a finite sum, which
    changes no projection's value. A tree of leaves only gets the plain
    (axis-parallel) form with one Klein column, as
    `hyp2onnx.emit.trees.remap_features` gives it.
    """
    if ensemble.projection is None:
        raise ValueError("remap_projection takes an oblique ensemble (projection set)")
    internal = ensemble.feature >= 0
    if not internal.any():
        return replace(ensemble, projection=None, n_features=1), np.array([0], dtype=np.int64)
    columns = np.unique(ensemble.feature[internal])
    normals = ensemble.projection[:, columns]
    used = np.flatnonzero(np.any(normals != 0, axis=1))
    if used.size == 0:  # all-zero normals: every projection is 0; still read one column
        used = np.array([0], dtype=np.int64)
    feature = np.where(internal, np.searchsorted(columns, ensemble.feature), -1).astype(np.int64)
    remapped = replace(
        ensemble,
        feature=feature,
        n_features=int(used.size),
        projection=np.ascontiguousarray(normals[used]),
    )
    return remapped, used.astype(np.int64)


def emit_normals(
    builder: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble
) -> tuple[str, str, Ensemble]:
    """Projections ``[N, n_columns]`` (float64) of Klein coordinates ``k``.

    ``k`` holds the Klein features of ``ensemble.projection``'s rows, in
    order (what `remap_projection` returns as used). Returns the
    projections, their dtype and the ensemble that reads them as plain
    features (``projection`` cleared), for the tree stage.
    """
    normals = ensemble.projection
    if normals is None:
        raise ValueError("emit_normals takes an oblique ensemble (projection set)")
    n_features = normals.shape[0]
    if k_dtype != "float64":
        k = builder.cast(STAGE, k, np.float64)
    weights = [
        builder.const(STAGE, f"normals_{f}", normals[f].astype(np.float64)[:, None])
        for f in range(n_features)
    ]

    def chain(block: GraphBuilder, rows: str) -> str:
        """[b, u] Klein rows -> [b, m] projections.

        Computed transposed, [m, b]: each Mul broadcasts one weight over a
        whole row of values, where [b, 1] * [m] would loop over b short
        rows (several times slower in onnxruntime). Same operations, same order.
        """
        k_t = block.op(STAGE, "Transpose", [rows], perm=[1, 0])  # [u, b]
        if n_features == 1:
            parts = [k_t]
        else:
            count = {"num_outputs": n_features} if block.opset >= 18 else {}
            parts = block.op(STAGE, "Split", [k_t], n_outputs=n_features, axis=0, **count)
        total = None
        for part, weight in zip(parts, weights, strict=True):
            term = block.op(STAGE, "Mul", [part, weight])  # [1, b] * [m, 1] -> [m, b]
            total = term if total is None else block.op(STAGE, "Add", [total, term])
        assert total is not None  # an oblique ensemble has at least one projection
        return block.op(STAGE, "Transpose", [total], perm=[1, 0])

    # In blocks of rows, so that the [m, b] intermediates stay in cache
    # (several times faster on large batches than one pass over the batch).
    projections = by_row_blocks(builder, k, chain, int(normals.shape[1]), "float64")
    planar = replace(ensemble, projection=None, n_features=int(normals.shape[1]))
    return projections, "float64", planar
