"""Projections of Klein points onto split normals, in one fixed order.

An oblique split tests ``w . k <= t`` for a unit normal ``w``; for a Klein
point the projection ``w . k`` is itself a Klein coordinate along ``w``, so
its threshold is corrected by the same 1-D Einstein midpoint as an
axis-parallel one. Every node's projection is computed here, and the ONNX
emitter (`hyp2onnx.emit.oblique`) repeats the same operations node for
node, so the graph routes each row exactly as the Python model does.

Why not a matrix product: ``k @ W`` lets the BLAS (numpy) or MLAS
(onnxruntime) choose the summation order, blocking and fused multiply-adds,
which differ between libraries, machines and even batch sizes; the last bit
of a projection then differs, and a row whose projection lies within that bit
of a threshold goes the other way. Here each entry is the strict left-to-right
sum ``((k_0 w_0 + k_1 w_1) + k_2 w_2) + ...`` of correctly rounded float64
products: one ``Mul`` and one ``Add`` per Klein feature in the graph.
"""

from __future__ import annotations

import numpy as np

__all__ = ["project"]


def project(k: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """``P[i, j] = sum_f k[i, f] * normals[f, j]``, added in feature order, in float64.

    ``k`` is ``[n, d]`` Klein coordinates and ``normals`` ``[d, m]`` (one
    column per split). Features whose weight is zero in every column may be
    left out (as the emitter does): adding ``+-0`` leaves a finite sum's value
    unchanged.
    """
    k = np.asarray(k, dtype=np.float64)
    normals = np.asarray(normals, dtype=np.float64)
    if k.ndim != 2 or normals.ndim != 2 or k.shape[1] != normals.shape[0]:
        raise ValueError(
            f"cannot project rows of shape {k.shape} onto normals of shape {normals.shape}: "
            "need k [n, d] and normals [d, m]."
        )
    n, d = k.shape
    if d == 0:
        return np.zeros((n, normals.shape[1]))
    out = k[:, 0:1] * normals[0]
    for f in range(1, d):
        out += k[:, f : f + 1] * normals[f]
    return out
