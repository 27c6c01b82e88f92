"""A composed graph's rows on Dask and Spark: its encoder's inputs, checked partition by partition.

A graph with an encoder in front (`hyp2onnx.compose`) takes the encoder's
inputs (ids, masks, feature matrices), not points. The scorers cut the data
into partitions of rows, so every input must hold the rows on its first
axis: the same named first dimension in every input, and on no other axis
(`row_problem`). A partition's rows are one numpy structured array, a field
per input (a sub-array for a matrix input), so that the scorers' row
halving and row selection (`hyp2onnx.distributed._scoring.bad_row_mask`,
``with_nulls``) treat them as they treat a matrix of points. Each input is
checked and cast as `hyp2onnx.verification.run_onnx` does
(`hyp2onnx._feeds.prepare`): its errors name the input and the rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from .._feeds import InputSpec, input_specs, prepare

__all__ = ["FeedCheck", "row_problem", "table"]


def row_problem(specs: list[InputSpec]) -> str | None:
    """Why the inputs cannot be cut into partitions of rows; None where they can."""
    for s in specs:
        if not s.dims:
            return f"input {s.name!r} declares no rows axis ({s.shape_text()})"
        if isinstance(s.dims[0], int):
            return f"input {s.name!r} has a fixed first dimension {s.dims[0]}"
    if len(specs) == 1:
        return None
    firsts = {s.dims[0] for s in specs if s.dims}
    shown = ", ".join(f"{s.name} {s.shape_text()}" for s in specs)
    if len(firsts) != 1 or not isinstance(next(iter(firsts)), str):
        return f"the graph's inputs do not share a named first dimension ({shown})"
    symbol = next(iter(firsts))
    if any(symbol in (s.dims or ())[1:] for s in specs):
        return f"dimension {symbol!r} is also a later axis of an input ({shown})"
    return None


def table(arrays: Mapping[str, Any]) -> np.ndarray:
    """One structured array of rows from per-input arrays of equal length (first axis)."""
    values = {name: np.asarray(a) for name, a in arrays.items()}
    lengths = {name: v.shape[0] if v.ndim else -1 for name, v in values.items()}
    if len(set(lengths.values())) > 1 or -1 in lengths.values():
        raise ValueError(
            f"the inputs' partitions hold different numbers of rows {lengths}: give every "
            "input the same partitions of rows."
        )
    rows = np.empty(
        int(next(iter(lengths.values()), 0)),
        dtype=[(name, v.dtype, v.shape[1:]) for name, v in values.items()],
    )
    for name, v in values.items():
        rows[name] = v
    return rows


def _values(series: Any) -> np.ndarray:
    """A pandas column as numpy: its own dtype, or float64 with NaN where values are missing
    (an SQL null; refused by the input's check, naming the row)."""
    if series.isna().any():
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    numpy_type = getattr(series.dtype, "numpy_dtype", None)  # pandas' Int64, boolean
    if numpy_type is not None:
        return series.to_numpy(dtype=numpy_type)
    if series.dtype == np.dtype(object):
        return np.asarray(series.tolist())
    return series.to_numpy()


@dataclass(frozen=True)
class FeedCheck:
    """The checks of a composed graph's rows: each input against its declared type and shape.

    Picklable (it travels to the workers). ``check_manifold=False`` keeps
    the rows the graph flags off its manifold (``on_manifold`` false);
    values an input cannot hold are refused whatever it says.
    """

    inputs: tuple[InputSpec, ...]
    check_manifold: bool = True

    @classmethod
    def of(cls, model: onnx.ModelProto, *, check_manifold: bool = True) -> FeedCheck:
        specs = input_specs(model)
        problem = row_problem(specs)
        if problem is not None:
            raise ValueError(
                f"the Dask and Spark scorers cut the data into partitions of rows, but {problem}: "
                "score this graph whole with hyp2onnx.verification.run_onnx or 'hyp2onnx predict'."
            )
        return cls(tuple(specs), bool(check_manifold))

    def __call__(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """The graph's feeds from the rows ``X``; `InvalidPointError` naming the input and
        the rows (of ``X``, from 0) holding values it cannot take."""
        return {s.name: prepare(s, X[s.name], label=f"input {s.name!r}") for s in self.inputs}

    def layout(self, existing: list[str], columns: Any) -> dict[str, list[str]]:
        """The table columns of each input: ``columns`` ({input: column or list of columns}),
        by default the input's name for a vector or one-column input, ``<name>_<i>`` for
        the columns of a matrix input."""
        given = dict(columns or {})
        if not isinstance(columns, (Mapping, type(None))):
            raise TypeError(
                "columns= of a composed graph is a mapping {input name: column or list of "
                f"columns}}; the graph's inputs are {', '.join(map(str, self.inputs))}."
            )
        names = [s.name for s in self.inputs]
        unknown = [k for k in given if k not in names]
        if unknown:
            raise ValueError(
                f"columns= names {unknown}, which are not among the graph's "
                f"inputs {', '.join(map(str, self.inputs))}."
            )
        out = {}
        for s in self.inputs:
            width = 1 if len(s.dims or ()) == 1 else (s.dims or (None, None))[1]
            if len(s.dims or ()) > 2 or not isinstance(width, int):
                raise ValueError(
                    f"input {s}: a table holds vectors and matrices of known width; pass "
                    "dask arrays by input name for it."
                )
            default = [s.name] if width == 1 else [f"{s.name}_{i}" for i in range(width)]
            cols = given.get(s.name, default)
            out[s.name] = [cols] if isinstance(cols, str) else list(cols)
            if len(out[s.name]) != width:
                raise ValueError(
                    f"input {s} takes {width} column(s); {len(out[s.name])} given: {out[s.name]}."
                )
        missing = sorted({c for cols in out.values() for c in cols} - set(existing))
        if missing:
            raise ValueError(
                f"the DataFrame has no columns {missing} for the graph's inputs "
                f"{', '.join(map(str, self.inputs))}; name them with columns={{input: column}}."
            )
        return out

    def frame_rows(self, frame: Any, layout: dict[str, list[str]]) -> np.ndarray:
        """A pandas partition's rows (`table`) for the inputs laid out by `layout`."""
        arrays = {}
        for s in self.inputs:
            values = [_values(frame[c]) for c in layout[s.name]]
            arrays[s.name] = values[0] if len(s.dims or ()) == 1 else np.column_stack(values)
        return table(arrays)

    def block_rows(self, block: Mapping[str, Any]) -> np.ndarray:
        """A partition of dask arrays by input name, as rows (`table`)."""
        return table(block)
