"""ONNX nodes that turn raw input rows into the features the trees read.

Klein coordinates of hyperbolic points; for a product space (input blocks),
each block's features (Klein, gnomonic, or its columns as they are).

Each function mirrors [`hyp2onnx.geometry`][hyp2onnx.geometry] operation for operation, in
the same precision and order, so the graph's Klein coordinates are
bit-identical to the Python model's. Only the columns some split reads are
projected (the paper's selective projection); the caller remaps feature
indices to ``0 .. len(used) - 1``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..blocks import Hyperbolic, Spherical, spans
from ..geometry import curvature_radius
from ..ir import InputSpace
from ._graph import GraphBuilder

STAGE = "klein"
#: Runs of at least this many neighbouring columns are cut with Slice (see _columns).
_SLICE_MIN_COLUMNS = 4


def _block_spaces(space: InputSpace) -> list[tuple[InputSpace, int, int]]:
    """The space as single-model pieces, each with its first input column and feature.

    A product space's blocks map to the projections they share arithmetic
    with: a spherical block's gnomonic ``x_i / x_0`` is the hyperboloid's
    ``x_i / x_0`` (base column as the timelike one), and Euclidean and
    categorical columns pass through as Klein columns of radius 1 do.
    """
    if space.blocks is None:
        return [(space, 0, 0)]
    pieces = []
    for block, column, feature in spans(space.blocks):
        if isinstance(block, Hyperbolic):
            sub = InputSpace(
                geometry=block.model,
                curvature=block.curvature,
                timelike_dim=block.timelike_dim,
                n_input_features=block.n_columns,
            )
        elif isinstance(block, Spherical):
            sub = InputSpace(
                geometry="hyperboloid",
                curvature=-1.0,
                timelike_dim=block.base_dim,
                n_input_features=block.n_columns,
            )
        else:
            sub = InputSpace(
                geometry="klein", curvature=-1.0, timelike_dim=0, n_input_features=block.n_columns
            )
        pieces.append((sub, column, feature))
    return pieces


def projection_dtype(space: InputSpace, input_dtype: str, compare_dtype: str) -> str:
    """Precision the projection is computed in.

    Python computes Klein coordinates in float64. A float32 division of two
    float32 numbers is the float32 rounding of their float64 quotient, so
    when the input is float32, the trees compare in float32 and the
    projection is one division of input values (hyperboloid, or Klein with
    R = 1), float32 arithmetic gives the very same values at less cost.
    A product space computes in float32 only if every block can.
    """

    def one_division(sub: InputSpace) -> bool:
        return sub.geometry == "hyperboloid" or (
            sub.geometry == "klein" and curvature_radius(sub.curvature) == 1.0
        )

    every = all(one_division(sub) for sub, _, _ in _block_spaces(space))
    if input_dtype == "float32" and compare_dtype == "float32" and every:
        return "float32"
    return "float64"


def _columns(builder: GraphBuilder, x: str, columns: np.ndarray, label: str) -> str:
    """``x[:, columns]``: a ``Slice`` for a run of neighbouring columns, else a ``Gather``.

    onnxruntime's ``Gather`` along axis 1 copies element by element, which for
    a deep tree reading most columns can cost more than the tree itself; a
    ``Slice`` copies each row's run at once.
    For a few columns the two cost the same, and the ``Gather`` says which.
    """
    columns = columns.astype(np.int64)
    if columns.size >= _SLICE_MIN_COLUMNS and np.all(np.diff(columns) == 1):
        return builder.columns(STAGE, x, int(columns[0]), int(columns[-1]) + 1, label)
    return builder.op(STAGE, "Gather", [x, builder.const(STAGE, label, columns)], axis=1)


def sum_of_squares(builder: GraphBuilder, q: str, width: int, dtype: str) -> str:
    """Row sums of ``q * q`` as [N, 1], in [`hyp2onnx.geometry.sum_of_squares`][hyp2onnx.geometry.sum_of_squares]' order."""
    s = builder.op(STAGE, "Mul", [q, q])
    padded = 1 << max(width - 1, 0).bit_length()
    if padded != width:
        pads = builder.const(STAGE, "pads", [0, 0, 0, padded - width], np.int64)
        s = builder.op(STAGE, "Pad", [s, pads])
    while padded > 1:
        halves: dict[str, Any] = {"num_outputs": 2} if builder.opset >= 18 else {}
        first, second = builder.op(STAGE, "Split", [s], n_outputs=2, axis=1, **halves)
        s = builder.op(STAGE, "Add", [first, second])
        padded //= 2
    return s


def whole_rows_column(space: InputSpace, used: np.ndarray) -> int | None:
    """The column of ones of ``X / x_0``, if the trees can read hyperboloid rows divided whole.

    That is one hyperboloid (no input blocks) whose timelike column is the
    first or the last, every spacelike column used: ``X / x_0`` then holds
    every Klein coordinate as the same correctly rounded quotient that
    `emit_projection` gives, beside ``x_0 / x_0 = 1`` exactly, and one
    ``Div`` of the whole row replaces cutting the spacelike columns out (a
    copy of the batch). The trees read feature ``f`` at column ``f + 1``
    when the timelike column is first. None otherwise.
    """
    n = space.n_input_features
    if space.geometry != "hyperboloid" or space.blocks is not None or n < 2:
        return None
    t = space.timelike_dim % n
    if t not in (0, n - 1) or not np.array_equal(used, np.arange(n - 1)):
        return None
    return t


def emit_whole_rows(
    builder: GraphBuilder,
    x: str,
    space: InputSpace,
    *,
    input_dtype: str,
    dtype: str,
    matmul: bool = True,
) -> str:
    """``X / x_0`` ``[N, D]`` in ``dtype``, for a space `whole_rows_column` accepts.

    With ``matmul``, ``x_0`` ``[N, 1]`` is ``X`` times the unit column
    ``e_t``, one ``MatMul``: its products are ``x_0 * 1`` and ``x_i * 0``,
    and the zeros add exactly in any order, so it is ``x_0`` itself for
    finite rows (a non-finite ``x_i`` makes the row NaN, where ``Slice``
    would give an infinite Klein coordinate; neither is a point). It is
    cheaper than the strided copy a ``Slice`` of one column makes, most of
    all with several threads (the networks' graphs, where it was measured
    faster). Without it, ``Gather`` of the one column: the trees' graphs,
    where the ``MatMul`` was no faster in batches and slower on single rows,
    and where the standard encoding must not hold a matrix product (OpenVINO
    may compute those in bfloat16). The ``Gather`` makes the same copy as a
    ``Slice`` with less set-up: a short batch's call is the cheaper for it
    (benchmarks/results/short_batches.md).
    """
    t = space.timelike_dim % space.n_input_features
    if input_dtype != dtype:
        x = builder.cast(STAGE, x, dtype)
    if matmul:
        unit = np.zeros((space.n_input_features, 1))
        unit[t] = 1.0
        unit_column = builder.const(STAGE, "timelike_unit", unit, dtype)
        return builder.op(STAGE, "Div", [x, builder.op(STAGE, "MatMul", [x, unit_column])])
    timelike = builder.const(STAGE, "timelike_column", [t], np.int64)
    return builder.op(STAGE, "Div", [x, builder.op(STAGE, "Gather", [x, timelike], axis=1)])


def emit_projection(
    builder: GraphBuilder,
    x: str,
    space: InputSpace,
    used: np.ndarray,
    *,
    input_dtype: str,
    dtype: str,
) -> str:
    """Tree features ``[N, len(used)]`` of graph input ``x``, in ``dtype``.

    ``used`` lists the feature indices the trees read, sorted. A product
    space projects each block that some split reads in its own nodes, then
    concatenates the blocks' features in order.
    """
    pieces = []
    n_columns = space.n_input_features
    for sub, column, feature in _block_spaces(space):
        n_features = sub.n_klein_features
        mine = used[(used >= feature) & (used < feature + n_features)] - feature
        if mine.size:
            pieces.append(
                _emit_one(
                    builder, x, sub, mine, column, n_columns, input_dtype=input_dtype, dtype=dtype
                )
            )
    return pieces[0] if len(pieces) == 1 else builder.op(STAGE, "Concat", pieces, axis=1)


def _emit_one(
    builder: GraphBuilder,
    x: str,
    space: InputSpace,
    used: np.ndarray,
    offset: int,
    n_columns: int,
    *,
    input_dtype: str,
    dtype: str,
) -> str:
    """Klein coordinates of one model whose columns start at ``offset`` of ``x``."""
    R = curvature_radius(space.curvature)

    def as_dtype(name: str) -> str:
        return name if input_dtype == dtype else builder.cast(STAGE, name, dtype)

    if space.geometry == "hyperboloid":
        t = space.timelike_dim % space.n_input_features
        spacelike = np.delete(np.arange(space.n_input_features), t)
        x_used = as_dtype(_columns(builder, x, offset + spacelike[used], "spacelike_columns"))
        x0 = as_dtype(_columns(builder, x, np.array([offset + t]), "timelike_column"))
        return builder.op(STAGE, "Div", [x_used, x0])
    if space.geometry == "klein":
        every_column = n_columns == space.n_input_features and np.array_equal(
            used, np.arange(space.n_input_features)
        )
        x_used = as_dtype(x if every_column else _columns(builder, x, offset + used, "columns"))
        if R == 1.0:
            return x_used
        return builder.op(STAGE, "Div", [x_used, builder.const(STAGE, "R", R, dtype)])
    # Poincare: q = p / R, k = 2 q / (1 + |q|^2); the norm needs every column.
    width = space.n_input_features
    if width != n_columns:
        x = _columns(builder, x, offset + np.arange(width), "block_columns")
    x = as_dtype(x)
    q = x if R == 1.0 else builder.op(STAGE, "Div", [x, builder.const(STAGE, "R", R, dtype)])
    s = sum_of_squares(builder, q, width, dtype)
    denominator = builder.op(STAGE, "Add", [s, builder.const(STAGE, "one", 1.0, dtype)])
    q_used = q if len(used) == width else _columns(builder, q, used, "columns")
    twice = builder.op(STAGE, "Mul", [q_used, builder.const(STAGE, "two", 2.0, dtype)])
    return builder.op(STAGE, "Div", [twice, denominator])
