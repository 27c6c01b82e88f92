"""What a graph's inputs take, and the user's arrays checked and cast for them.

hyp2onnx's own graphs take one float matrix ``X``; a graph with an encoder in
front (`hyp2onnx.compose`) takes whatever the encoder takes: several inputs,
integer ids, boolean masks. onnxruntime refuses an array of another element
type and casts nothing, and a cast done by the caller may lose what the
array holds (a fractional id, an id past the type's range, a NaN). `feeds`
checks every array against its declared input first (element type, rank,
fixed dimensions, and symbolic dimensions that the graph declares equal)
and casts only where the cast keeps every value; anything else is an error
naming the input, never a silent fallback.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import InvalidPointError
from .geometry import check_representable, raise_rows

if TYPE_CHECKING:
    import onnx

__all__ = ["InputSpec", "check_dims", "feeds", "input_specs", "prepare", "split_problem"]


def numpy_dtype(elem: int) -> np.dtype | None:
    """The numpy dtype of ONNX element type ``elem`` (onnx's own table), or None for one
    that numpy holds only through extensions or not as numbers (strings, complex,
    bfloat16, float8, int4, ...): hyp2onnx feeds and returns numbers and booleans only."""
    from onnx import helper  # onnx is loaded by then (a graph was read); not on import

    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(elem))
    except (KeyError, TypeError, ValueError):
        return None
    return dtype if dtype.kind in "biuf" and dtype.isbuiltin == 1 else None


#: Largest magnitude up to which every integer is a float64 value.
_EXACT_IN_FLOAT64 = 2**53


@dataclass(frozen=True)
class InputSpec:
    """One input of a graph: its name, numpy element type and declared dimensions.

    ``dims`` holds an int for a fixed dimension, the name of a symbolic one
    (``"N"``) or None where the graph leaves it unnamed; ``dims`` is None
    where the graph does not declare the rank.
    """

    name: str
    dtype: np.dtype
    dims: tuple[int | str | None, ...] | None

    def shape_text(self, rows: str | None = None) -> str:
        """The declared shape, ``(N, 5)``; ``rows`` names a symbolic first axis."""
        if self.dims is None:
            return "(any shape)"
        names = ["?" if d is None else str(d) for d in self.dims]
        if rows is not None and names and not isinstance(self.dims[0], int):
            names[0] = rows
        return "(" + ", ".join(names) + ("," if len(names) == 1 else "") + ")"

    def __str__(self) -> str:
        return f"{self.name} ({self.dtype.name} {self.shape_text()})"


def input_specs(onnx_model: onnx.ModelProto) -> list[InputSpec]:
    """The inputs a caller feeds (initializers listed as inputs excluded), in graph order.

    An input of an element type hyp2onnx cannot feed (strings, bfloat16,
    sequences) is a ValueError naming it.
    """
    initialized = {t.name for t in onnx_model.graph.initializer}
    specs = []
    for value in onnx_model.graph.input:
        if value.name in initialized:
            continue
        tensor = value.type.tensor_type
        dtype = numpy_dtype(tensor.elem_type) if value.type.HasField("tensor_type") else None
        if dtype is None:
            raise ValueError(
                f"the graph's input {value.name!r} is not a tensor of numbers or booleans "
                f"(ONNX type {value.type}); hyp2onnx feeds float, integer and bool tensors only."
            )
        dims = None
        if tensor.HasField("shape"):
            dims = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in tensor.shape.dim
            )
        specs.append(InputSpec(value.name, dtype, dims))
    return specs


def _listing(specs: list[InputSpec]) -> str:
    return ", ".join(map(str, specs))


def named_arrays(specs: list[InputSpec], X: Any) -> tuple[dict[str, Any], bool]:
    """``X`` by input name, and whether it was given as a single array.

    A single array is the input of a one-input graph; a graph with several
    inputs needs a mapping {input name: array} that names each once.
    """
    if not isinstance(X, Mapping):
        if len(specs) != 1:
            raise ValueError(
                f"this graph takes {len(specs)} inputs, {_listing(specs)}: pass a mapping "
                "{input name: array} (on the command line, an .npz file with one array "
                "named after each input)."
            )
        return {specs[0].name: X}, True
    names = [s.name for s in specs]
    missing = [n for n in names if n not in X]
    unknown = [repr(k) for k in X if k not in names]
    if missing or unknown:
        parts = [f"missing {', '.join(map(repr, missing))}"] if missing else []
        parts += [f"unknown {', '.join(unknown)}"] if unknown else []
        raise ValueError(
            f"the arrays given do not match the graph's inputs ({'; '.join(parts)}): "
            f"the graph's inputs are {_listing(specs)}."
        )
    return {n: X[n] for n in names}, False


def feeds(specs: list[InputSpec], X: Any) -> dict[str, np.ndarray]:
    """``X`` (one array, or a mapping {input name: array}) checked and cast for ``specs``.

    Each array is checked by `prepare`; then every symbolic dimension must
    have one size across the inputs that declare it (a per-row input of
    the wrong length would otherwise broadcast without a word).
    """
    arrays, single = named_arrays(specs, X)
    plain = single and specs[0].dtype.kind == "f"  # hyp2onnx's own X: its old messages
    out = {
        s.name: prepare(s, arrays[s.name], label=None if plain else f"input {s.name!r}")
        for s in specs
    }
    check_dims(specs, out)
    return out


def check_dims(specs: list[InputSpec], arrays: Mapping[str, Any]) -> None:
    """ValueError unless every symbolic dimension has one size across ``arrays``."""
    seen: dict[str, tuple[int, str, int]] = {}
    for s in specs:
        shape = np.shape(arrays[s.name])
        for axis, dim in enumerate(s.dims or ()):
            if not isinstance(dim, str) or axis >= len(shape):
                continue
            first = seen.setdefault(dim, (shape[axis], s.name, axis))
            if first[0] != shape[axis]:
                raise ValueError(
                    f"dimension {dim!r} is {first[0]} in input {first[1]!r} (axis {first[2]}) "
                    f"but {shape[axis]} in input {s.name!r} (axis {axis}); the graph declares "
                    f"them equal. Its inputs are {_listing(specs)}."
                )


def prepare(spec: InputSpec, value: Any, *, label: str | None = None) -> np.ndarray:
    """``value`` as ``spec``'s element type, after checking its rank, dimensions and values.

    Float inputs: real numbers (not booleans), finite and within the
    type's range (`check_representable`). Integer inputs: integers, or
    floats with integral values up to 2**53, within the type's range. Bool
    inputs: booleans, or numbers that are 0 or 1. Errors name ``label``
    (default: no name, hyp2onnx's ``X``) and the rows along the first axis.
    """
    value = np.asarray(value)
    what = label or "X"
    if spec.dims is not None:
        shape = spec.shape_text(None if label else "n_samples")
        if value.ndim != len(spec.dims) or any(
            isinstance(d, int) and d != n for d, n in zip(spec.dims, value.shape)
        ):
            hint = ""
            if value.ndim == 1 and len(spec.dims) == 2:
                hint = " Reshape a single row with X.reshape(1, -1)."
            raise ValueError(
                f"{what} must have shape {shape} for this graph, got {value.shape}.{hint}"
            )
    if value.dtype.kind not in "biuf" or (value.dtype.kind == "b" and spec.dtype.kind == "f"):
        wanted = "real numbers" if spec.dtype.kind == "f" else "numbers or booleans"
        raise ValueError(
            f"{what} must hold {wanted} for the graph's {spec.dtype.name} input, got dtype "
            f"{value.dtype}."
        )
    table = value.reshape(value.shape[0], -1) if value.ndim and value.size else value.reshape(1, -1)
    try:
        if spec.dtype.kind == "f":
            return check_representable(table, spec.dtype).reshape(value.shape)
        _exact(spec.dtype, table)
    except InvalidPointError as exc:
        raise _named(exc, label) from None
    return value.astype(spec.dtype)


def _exact(dtype: np.dtype, table: np.ndarray) -> None:
    """Refuse values of ``table`` that ``dtype`` (an integer or bool type) cannot hold exactly."""
    kind = table.dtype.kind
    if kind == "b":
        return  # False and True are 0 and 1 in every integer type
    fix = f"Pass {'booleans (or 0 and 1)' if dtype.kind == 'b' else 'integers'} for this input."
    if kind == "f":
        raise_rows((~np.isfinite(table)).any(axis=1), "contain NaN or infinity", fix)
        raise_rows(
            (table != np.floor(table)).any(axis=1),
            f"hold fractional values, which the input's type ({dtype.name}) cannot hold",
            fix,
        )
        raise_rows(
            (np.abs(table) > _EXACT_IN_FLOAT64).any(axis=1),
            "hold float values beyond 2**53, which are not exact integers",
            "Pass an integer array (an .npz file keeps its dtype).",
        )
    if dtype.kind == "b":
        raise_rows(
            ((table != 0) & (table != 1)).any(axis=1),
            "hold values other than 0 and 1, which a bool input cannot take",
            fix,
        )
        return
    info = np.iinfo(dtype)
    if kind in "iu" and np.can_cast(table.dtype, dtype, "safe"):
        return
    outside = np.asarray((table < info.min) | (table > info.max))
    raise_rows(
        np.asarray(outside.any(axis=1)),
        f"hold values outside {dtype.name}'s range {info.min} .. {info.max}",
        "Pass values the input's type can hold.",
    )


def _named(exc: InvalidPointError, label: str | None) -> InvalidPointError:
    """``exc`` with ``label`` in front of its message (and of its parts, for the command line)."""
    if label is None:
        return exc
    named = InvalidPointError(f"{label}: {exc}")
    if hasattr(exc, "problem"):
        named.problem, named.fix = f"{label}: {exc.problem}", exc.fix
    return named


def split_problem(specs: list[InputSpec], arrays: Mapping[str, np.ndarray]) -> str | None:
    """Why ``arrays`` cannot be cut into row chunks along axis 0; None where they can.

    One input: its first axis is the rows, as for hyp2onnx's own graphs.
    Several: only where every input declares the same symbolic first
    dimension, used on no other axis, and the arrays agree on its size.
    Otherwise a slice of one input could not be matched with slices of the
    others (an edge list beside node features, a table shared by all rows).
    """
    if any(np.ndim(arrays[s.name]) == 0 for s in specs):
        scalar = next(s for s in specs if np.ndim(arrays[s.name]) == 0)
        return f"input {scalar.name!r} is a scalar, with no rows"
    if len(specs) == 1:
        return None
    firsts = {s.name: (s.dims[0] if s.dims else None) for s in specs}
    symbols = set(firsts.values())
    if len(symbols) != 1 or not isinstance(next(iter(symbols)), str):
        shown = ", ".join(f"{s.name} {s.shape_text()}" for s in specs)
        return f"the graph's inputs do not share a named first dimension ({shown})"
    symbol = next(iter(symbols))
    elsewhere = [s.name for s in specs if s.dims and symbol in s.dims[1:]]
    if elsewhere:
        return (
            f"dimension {symbol!r} is also a later axis of input(s) {', '.join(elsewhere)}, "
            "which row chunks would cut"
        )
    sizes = {np.shape(arrays[s.name])[0] for s in specs}
    if len(sizes) != 1:
        return f"the inputs' first axes ({symbol!r}) have different lengths {sorted(sizes)}"
    return None
