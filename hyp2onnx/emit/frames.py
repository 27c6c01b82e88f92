"""ONNX nodes for frame coordinates: the linear-fractional features of rotation forests.

An ensemble with ``Ensemble.frames`` set tests column ``j`` of
``F = frame_features(k, frames)`` (`hyp2onnx.ir.frames`). The graph
computes ``F`` as the Python model does, operation for operation: every
numerator and every denominator is ``a``, then ``+ k_0 w_0``, ``+ k_1 w_1``,
... (one ``Mul`` and one ``Add`` per Klein feature, float64, on the
transposed ``[m, N]`` layout as the oblique projections), then one ``Div``
of each numerator by its frame's denominator. Each is a correctly rounded
IEEE operation in every runtime, so ``F`` is the Python model's bit for bit
and the tree stage routes every row as Python does.

A ``MatMul`` would let the runtime choose the order of the sums, and most
frame coordinates would then differ from numpy's fixed-order sums in their
last bits (docs/rotation.md). Only the columns some split reads are
computed (`remap_frames`), and only their frames' denominators. The
exact and default encodings run the chain inside their own row blocks
(`frame_chain`), right before the tree operator reads its output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..ir import Ensemble
from ..ir.frames import Frames
from ._graph import GraphBuilder
from .trees import by_row_blocks

STAGE = "frames"

__all__ = ["emit_frames", "frame_chain", "frames_map", "remap_frames"]


def remap_frames(ensemble: Ensemble) -> tuple[Ensemble, np.ndarray]:
    """The ensemble reading only the frame columns it tests, and the Klein features they read.

    The kept frames read only the Klein features with a non-zero weight in
    one of their numerators or denominators: a feature whose every weight
    is zero adds only ``+-0`` to a finite sum, which changes no value.
    """
    frames = ensemble.frames
    if frames is None:
        raise ValueError("remap_frames takes an ensemble with frames")
    internal = ensemble.feature >= 0
    if not internal.any():  # only leaves: the plain form, reading one Klein column
        return replace(ensemble, frames=None, n_features=1), np.array([0], dtype=np.int64)
    columns = np.unique(ensemble.feature[internal])
    kept = frames.select(columns)
    used = kept.used_features()
    if used.size == 0:
        used = np.array([0], dtype=np.int64)
    rows = np.concatenate([[0], used + 1])  # the constant, then the used features
    kept = replace(
        kept,
        numerator=np.ascontiguousarray(kept.numerator[rows]),
        denominator=np.ascontiguousarray(kept.denominator[rows]),
    )
    feature = np.where(internal, np.searchsorted(columns, ensemble.feature), -1).astype(np.int64)
    remapped = replace(ensemble, feature=feature, n_features=int(used.size), frames=kept)
    return remapped, used.astype(np.int64)


def frame_chain(
    builder: GraphBuilder, k_dtype: str, ensemble: Ensemble
) -> tuple[Callable[[GraphBuilder, str], str], Ensemble]:
    """The chain as a map of row blocks, and the ensemble that reads its output.

    The map takes ``[b, u]`` Klein rows (the features `remap_frames`
    returned, in ``k_dtype``) to their ``[b, m]`` float64 frame coordinates;
    the ensemble reads those as plain features (``frames`` cleared). The
    exact encoding applies the map inside its own row blocks
    (`hyp2onnx.emit.trees.emit_exact`), so that the coordinates are
    routed while they are in cache and never make a whole-batch tensor.
    """
    frames = ensemble.frames
    if frames is None:
        raise ValueError("frame_chain takes an ensemble with frames")
    chain = frames_map(builder, k_dtype, frames)
    return chain, replace(ensemble, frames=None, n_features=frames.n_columns)


def frames_map(
    builder: GraphBuilder, k_dtype: str, frames: Frames
) -> Callable[[GraphBuilder, str], str]:
    """``[b, u]`` Klein rows -> ``[b, m]`` float64 coordinates of ``frames``, in the fixed
    order of `hyp2onnx.ir.frames.frame_features` (module doc); the constants are made once
    in ``builder``, the map may run in any of its row blocks."""
    n_features = frames.n_klein_features
    m, n_frames = frames.n_columns, frames.denominator.shape[1]
    # Numerators and denominators in one chain: [m + n_frames] sums per row.
    weights = np.concatenate([frames.numerator, frames.denominator], axis=1)
    constant = builder.const(STAGE, "constant", weights[0][:, None])
    terms = [
        builder.const(STAGE, f"weights_{f}", weights[1 + f][:, None]) for f in range(n_features)
    ]
    starts = {
        name: builder.const(STAGE, name, [value], np.int64)
        for name, value in (("zero", 0), ("m", m), ("end", m + n_frames))
    }
    frame = builder.const(STAGE, "frame", frames.frame.astype(np.int64))

    def chain(block: GraphBuilder, rows: str) -> str:
        """[b, u] Klein rows -> [b, m] frame coordinates (computed transposed, [m, b])."""
        if k_dtype != "float64":
            rows = block.cast(STAGE, rows, np.float64)
        k_t = block.op(STAGE, "Transpose", [rows], perm=[1, 0])  # [u, b]
        if n_features == 1:
            parts = [k_t]
        else:
            count: dict[str, Any] = {"num_outputs": n_features} if block.opset >= 18 else {}
            parts = block.op(STAGE, "Split", [k_t], n_outputs=n_features, axis=0, **count)
        total = constant  # [m + F, 1]: Python's first product, 1 * a, is a exactly
        for part, weight in zip(parts, terms, strict=True):
            total = block.op(STAGE, "Add", [total, block.op(STAGE, "Mul", [part, weight])])
        numerator = block.op(STAGE, "Slice", [total, starts["zero"], starts["m"]])
        denominator = block.op(STAGE, "Slice", [total, starts["m"], starts["end"]])
        below = block.op(STAGE, "Gather", [denominator, frame], axis=0)  # [m, b]
        return block.op(
            STAGE, "Transpose", [block.op(STAGE, "Div", [numerator, below])], perm=[1, 0]
        )

    return chain


def emit_frames(
    builder: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble
) -> tuple[str, str, Ensemble]:
    """Frame coordinates ``[N, m]`` (float64) of Klein coordinates ``k``, the whole batch.

    ``k`` holds the Klein features `remap_frames` returned, in order.
    Returns the coordinates, their dtype and the ensemble that reads them as
    plain features (``frames`` cleared), for the tree stage. (The exact
    encoding takes `frame_chain` instead, block by block.)
    """
    chain, planar = frame_chain(builder, k_dtype, ensemble)
    coordinates = by_row_blocks(builder, k, chain, planar.n_features, "float64")
    return coordinates, "float64", planar
