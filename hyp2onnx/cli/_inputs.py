"""A data file matched with a graph's inputs: a table of points, or an ``.npz`` of named arrays.

hyp2onnx's own graphs take one float table, read by `hyp2onnx.cli._data`. A
graph with an encoder in front may take several inputs, or integer and bool
ones (token ids, an edge list, a mask): those come from an ``.npz`` file
(``numpy.savez``) holding one array per input, named after it, each read
with its own dtype. An ``.npz`` of one array, whatever its name, is the
input of a one-input graph. Every array is checked against its input
(`hyp2onnx._feeds.feeds`) with errors naming the file, the input and the
file's rows.

Row chunks split every input along its first axis, which is safe only where
every input's first axis is the rows: one input, or inputs that all declare
the same named first dimension and use it nowhere else
(`hyp2onnx._feeds.split_problem`). Other files are scored whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._feeds import InputSpec, check_dims, feeds, input_specs, split_problem
from ._common import InputError, existing_file, first_line
from ._data import DataSource, _file_rows, _parts, check_points_in, check_width, open_data

if TYPE_CHECKING:
    from ..export._metadata import GraphMetadata

__all__ = ["GraphData", "NpzData", "match_data", "open_inputs"]


@dataclass(frozen=True)
class NpzData:
    """The arrays of an ``.npz`` file, by the names it stores them under."""

    path: Path
    arrays: dict[str, np.ndarray]


def open_inputs(path: Path) -> DataSource | NpzData:
    """``path`` opened as an ``.npz`` of named arrays, or as a table of points.

    A ``.npy`` array that is not 2-D is no table: it is read as the one
    input of a one-input graph (token ids ``[N]``, say).
    """
    suffix = path.suffix.lower()
    if suffix == ".npy" and path.is_file():
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except Exception:
            array = None  # open_data says what is wrong with it
        if isinstance(array, np.ndarray) and array.ndim != 2:
            return NpzData(path, {"arr_0": array})
    if suffix != ".npz":
        return open_data(path)
    existing_file(path, "data")
    fix = "save the inputs with numpy.savez(path, name=array, ...)"
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise InputError(path, f"not a readable .npz archive ({first_line(exc)})", fix) from exc
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise InputError(path, "is a single .npy array, not an .npz archive", fix)
    try:
        with archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as exc:  # object arrays (refused without pickle), damaged members
        raise InputError(
            path, f"holds an array that cannot be read as numbers ({first_line(exc)})", fix
        ) from exc
    if not arrays:
        raise InputError(path, "holds no arrays", "save one array per graph input")
    return NpzData(path, arrays)


def _listing(specs: list[InputSpec]) -> str:
    return ", ".join(map(str, specs))


def _savez_fix(specs: list[InputSpec]) -> str:
    names = ", ".join(f"{s.name}=..." for s in specs)
    return f"save one array per input, named after it: numpy.savez(path, {names})"


@dataclass(frozen=True)
class GraphData:
    """A data file's arrays by the graph's input names, read in row chunks."""

    path: Path
    specs: list[InputSpec]
    metadata: GraphMetadata
    table: DataSource | None  #: a table of points (one input), read chunk by chunk
    arrays: dict[str, np.ndarray] | None  #: an .npz's arrays, by input name
    #: why the arrays cannot be split into row chunks; None where they can
    split_problem: str | None = None

    @property
    def n_rows(self) -> int | None:
        """Rows to score, where known before scoring (for the progress bar)."""
        if self.table is not None:
            return self.table.n_rows
        if self.arrays is None or self.split_problem is not None:
            return None
        return int(np.shape(self.arrays[self.specs[0].name])[0])

    def chunks(self, rows: int) -> Iterator[tuple[int, dict[str, np.ndarray]]]:
        """(first row, arrays by input name) of at most ``rows`` rows; unsplittable
        arrays whole, once."""
        name = self.specs[0].name
        if self.table is not None:
            first = 0
            for chunk in self.table.chunks(rows):
                yield first, {name: chunk}
                first += chunk.shape[0]
            return
        assert self.arrays is not None
        if self.split_problem is not None:
            yield 0, self.arrays
            return
        for start in range(0, int(np.shape(self.arrays[name])[0]), rows):
            yield start, {k: v[start : start + rows] for k, v in self.arrays.items()}

    def empty(self) -> dict[str, np.ndarray]:
        """Arrays of no rows, to run the graph once for its outputs' shapes."""
        if self.table is not None:
            return {self.specs[0].name: np.zeros((0, self.table.n_cols))}
        assert self.arrays is not None
        return self.arrays

    def read_all(self) -> dict[str, np.ndarray]:
        """Every array whole, by input name."""
        if self.table is not None:
            return {self.specs[0].name: self.table.read_all()}
        assert self.arrays is not None
        return self.arrays

    def check_points(
        self, chunk: dict[str, np.ndarray], first_row: int, *, manifold: bool = True
    ) -> None:
        """A plain graph's points on its manifold (a composed graph checks its own)."""
        if not self.metadata.is_composed:
            check_points_in(
                chunk[self.specs[0].name], self.metadata, self.path, first_row, manifold=manifold
            )

    def feeds(self, chunk: dict[str, np.ndarray], first_row: int) -> dict[str, np.ndarray]:
        """``chunk`` checked and cast for the graph; errors name the file and its rows."""
        try:
            return feeds(self.specs, chunk)
        except ValueError as exc:
            message, fix = _parts(exc)
            raise InputError(
                self.path, _file_rows(message, first_row), fix and fix.rstrip(".")
            ) from exc


def match_data(
    source: DataSource | NpzData, onnx_model: Any, metadata: GraphMetadata, onnx_path: Path
) -> GraphData:
    """``source`` matched with the graph's inputs: names, and a table's width."""
    try:
        specs = input_specs(onnx_model)
    except ValueError as exc:
        raise InputError(onnx_path, first_line(exc)) from exc
    npz = isinstance(source, NpzData) and source.path.suffix.lower() == ".npz"
    if len(specs) != 1 and not npz:
        raise InputError(
            source.path,
            f"holds one array, but the graph takes {len(specs)} inputs: {_listing(specs)}",
            _savez_fix(specs),
        )
    if isinstance(source, DataSource):
        check_width(source, metadata)
        return GraphData(source.path, specs, metadata, source, None)
    stored = source.arrays
    if len(specs) == 1 and len(stored) == 1:  # one array, whatever its name
        arrays = {specs[0].name: next(iter(stored.values()))}
    else:
        names = {s.name for s in specs}
        missing = [s.name for s in specs if s.name not in stored]
        unknown = [k for k in stored if k not in names]
        if missing or unknown:
            parts = [f"missing {', '.join(missing)}"] if missing else []
            parts += [f"unknown {', '.join(unknown)}"] if unknown else []
            raise InputError(
                source.path,
                f"holds arrays that do not match the graph's inputs ({'; '.join(parts)}); the "
                f"graph's inputs are {_listing(specs)}",
                _savez_fix(specs),
            )
        arrays = {s.name: stored[s.name] for s in specs}
    if not metadata.is_composed:  # a plain graph: the array is a table of points
        X = arrays[specs[0].name]
        if X.ndim != 2:
            raise InputError(
                source.path,
                f"holds an array of shape {X.shape}, not a table of points (rows, columns)",
                "save a 2-D array; a single point as X.reshape(1, -1)",
            )
        check_width(DataSource(source.path, X.shape[0], X.shape[1]), metadata)
    try:  # before any chunk is cut: a length mismatch is the file's, whole
        check_dims(specs, arrays)
    except ValueError as exc:
        raise InputError(source.path, first_line(exc), _savez_fix(specs)) from exc
    return GraphData(source.path, specs, metadata, None, arrays, split_problem(specs, arrays))
