"""Reading points from ``.npy``, ``.csv`` and ``.parquet`` files, in chunks.

Each format is read a chunk of rows at a time, so memory stays bounded
whatever the file size: ``.npy`` through a memory map, ``.csv`` line by line
(comma-separated numbers; a first line that is not all numbers is a header
and skipped; a UTF-8 byte-order mark, as spreadsheet programs write, is
ignored), ``.parquet`` by record batches (needs pyarrow). Rows are
numbered from 0, not counting a header.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._common import InputError, existing_file, first_line, progress

if TYPE_CHECKING:
    from ..export._metadata import GraphMetadata

__all__ = [
    "DATA_FORMATS",
    "DataSource",
    "check_points_in",
    "check_width",
    "open_data",
]

DATA_FORMATS: tuple[str, ...] = (".npy", ".csv", ".parquet")
#: Rows per chunk unless a command is told otherwise.
DEFAULT_CHUNK_ROWS = 65536


@dataclass(frozen=True)
class DataSource:
    """A data file's shape and a way to read it chunk by chunk."""

    path: Path
    n_rows: int | None  #: None when unknown without reading the file (CSV)
    n_cols: int

    def chunks(self, rows: int = DEFAULT_CHUNK_ROWS) -> Iterator[np.ndarray]:
        """float64 arrays of at most ``rows`` rows, in file order."""
        suffix = self.path.suffix.lower()
        if suffix == ".npy":
            return _npy_chunks(self.path, rows)
        if suffix == ".csv":
            return _csv_chunks(self.path, rows, self.n_cols)
        return _parquet_chunks(self.path, rows)

    def read_all(self) -> np.ndarray:
        """The whole file as one float64 array (a progress bar on a terminal)."""
        parts = []
        with progress(self.n_rows, f"read {self.path.name}") as bar:
            for chunk in self.chunks():
                parts.append(chunk)
                bar.update(chunk.shape[0])
        return np.concatenate(parts) if parts else np.zeros((0, self.n_cols))


def open_data(path: Path) -> DataSource:
    """Check that ``path`` is a readable data file and read its shape."""
    suffix = path.suffix.lower()
    if suffix not in DATA_FORMATS:
        raise InputError(
            path,
            f"unknown data file type {suffix or '(no suffix)'!r}",
            "save the points as .npy, .csv or .parquet",
        )
    existing_file(path, "data")
    if suffix == ".npy":
        array = _npy(path)
        return DataSource(path, int(array.shape[0]), int(array.shape[1]))
    if suffix == ".csv":
        return DataSource(path, None, _csv_start(path)[1])
    n_rows, n_cols = _parquet_shape(path)
    return DataSource(path, n_rows, n_cols)


# -- .npy -----------------------------------------------------------------------


def _npy(path: Path) -> np.ndarray:
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:
        raise InputError(
            path,
            f"not a readable .npy array ({first_line(exc)})",
            "save the points with numpy.save as a numeric array",
        ) from exc
    if not isinstance(array, np.ndarray):  # np.load reads a .npz archive whatever its name
        names = list(getattr(array, "files", []))
        if hasattr(array, "close"):
            array.close()
        raise InputError(
            path,
            f"is a .npz archive of {len(names)} array(s) ({', '.join(names[:5])}), "
            "not a .npy array",
            "save the points alone with numpy.save(path, X)",
        )
    if array.ndim != 2:
        shape = getattr(array, "shape", None)
        raise InputError(
            path,
            f"holds an array of shape {shape}, not a table of points (rows, columns)",
            "save a 2-D array; a single point as X.reshape(1, -1)",
        )
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)):
        raise InputError(path, f"holds {array.dtype} values, not numbers", "save a numeric array")
    return array


def _npy_chunks(path: Path, rows: int) -> Iterator[np.ndarray]:
    array = _npy(path)
    for start in range(0, array.shape[0], rows):
        yield np.asarray(array[start : start + rows], dtype=np.float64)


# -- .csv -----------------------------------------------------------------------


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _csv_start(path: Path) -> tuple[bool, int]:
    """Whether the first non-empty line is a header, and the number of columns of the data."""
    has_header = False
    try:
        with path.open(encoding="utf-8-sig") as f:
            for line in f:
                if not line.strip():
                    continue
                fields = [x.strip() for x in line.split(",")]
                if all(_is_number(x) for x in fields):
                    return has_header, len(fields)
                if has_header:
                    raise InputError(
                        path,
                        "the line after the header is not all numbers",
                        "write one point per line as comma-separated numbers",
                    )
                has_header = True
    except UnicodeDecodeError as exc:
        raise InputError(path, "is not a text (UTF-8) CSV file", "save the points as CSV") from exc
    raise InputError(path, "holds no rows of numbers", "write one point per line, comma-separated")


def _csv_chunks(path: Path, rows: int, n_cols: int) -> Iterator[np.ndarray]:
    has_header, _ = _csv_start(path)
    with path.open(encoding="utf-8-sig") as f:
        lines = (line for line in f if line.strip())
        if has_header:
            next(lines)
        row = 0
        while True:
            block = list(islice(lines, rows))
            if not block:
                return
            try:
                chunk = np.loadtxt(block, delimiter=",", dtype=np.float64, ndmin=2)
            except ValueError as exc:
                raise InputError(
                    path,
                    f"rows {row}-{row + len(block) - 1}: {first_line(exc)}",
                    f"every row must hold {n_cols} comma-separated numbers",
                ) from exc
            if chunk.shape[1] != n_cols:
                raise InputError(
                    path,
                    f"rows {row}-{row + len(block) - 1} have {chunk.shape[1]} columns, the first "
                    f"row {n_cols}",
                    "every row must have the same number of columns",
                )
            row += len(block)
            yield chunk


# -- .parquet -------------------------------------------------------------------


def _pyarrow_parquet(path: Path) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise InputError(
            path,
            "reading .parquet needs pyarrow, which is not installed",
            "pip install pyarrow (or 'hyp2onnx[parquet]'), or save the points as .npy or .csv",
        ) from exc
    return pq


def _parquet_file(path: Path) -> Any:
    pq = _pyarrow_parquet(path)
    try:
        return pq.ParquetFile(path)
    except Exception as exc:
        raise InputError(
            path, f"not a readable Parquet file ({first_line(exc)})", "check the file"
        ) from exc


def _parquet_shape(path: Path) -> tuple[int, int]:
    parquet = _parquet_file(path)  # first: it explains a missing pyarrow

    import pyarrow as pa

    schema = parquet.schema_arrow
    numeric = (pa.types.is_integer, pa.types.is_floating)
    bad = [f.name for f in schema if not any(is_type(f.type) for is_type in numeric)]
    if bad:
        raise InputError(
            path,
            f"non-numeric column(s) {', '.join(bad[:5])}",
            "keep only the coordinate columns of the points",
        )
    return int(parquet.metadata.num_rows), len(schema)


def _parquet_chunks(path: Path, rows: int) -> Iterator[np.ndarray]:
    parquet = _parquet_file(path)
    for batch in parquet.iter_batches(batch_size=rows):
        columns = [
            np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)
            for column in batch.columns
        ]
        yield np.column_stack(columns) if columns else np.zeros((batch.num_rows, 0))


# -- checks against a model ---------------------------------------------------------


def check_width(source: DataSource, metadata: GraphMetadata) -> None:
    """The data must have as many columns as the graph takes."""
    if metadata.is_composed:  # a composed graph takes the encoder's inputs
        width = metadata["encoder_n_features_in"]
        if not width or source.n_cols == int(width):
            return
        raise InputError(
            source.path,
            f"has {source.n_cols} columns; the graph's encoder takes {width}",
            "pass the encoder's raw inputs",
        )
    want = metadata.n_features_in
    if source.n_cols == want:
        return
    geometry = metadata["input_geometry"]
    if metadata.get("blocks") is not None:
        from ..blocks import describe_blocks

        what = f"rows of {want} columns ({describe_blocks(metadata['blocks'])})"
    elif geometry == "hyperboloid":
        what = (
            f"hyperboloid points with {want} columns (timelike column {metadata['timelike_dim']})"
        )
    else:
        what = f"{geometry} points with {want} columns"
    raise InputError(
        source.path,
        f"has {source.n_cols} columns; the model takes {what}",
        "pass the raw points in the geometry the model was trained on",
    )


def _parts(exc: Exception) -> tuple[str, str | None]:
    """An InvalidPointError's problem (with its rows) and its fix, never cut inside either."""
    problem = getattr(exc, "problem", None)
    if problem is not None:
        return problem, getattr(exc, "fix", None)
    return first_line(exc), None


def check_points_in(
    chunk: np.ndarray,
    metadata: GraphMetadata,
    path: Path,
    first_row: int,
    *,
    manifold: bool = True,
) -> None:
    """Reject off-manifold rows of ``chunk``, naming ``path`` and where the chunk starts.

    ``manifold=False`` (``--no-manifold-check``) skips the manifold test
    only: categorical codes the model refuses (negative, fractional,
    2**31 and above) are refused all the same.
    """
    from ..errors import InvalidPointError
    from ..geometry import check_points

    blocks = metadata.get("blocks")
    if (blocks is None and not manifold) or metadata.is_composed:
        return  # a composed graph checks its encoder's points itself (refuse_flagged_rows)
    try:
        if blocks is not None:
            from ..blocks import to_features

            to_features(chunk, blocks, check=manifold)
        else:
            check_points(
                chunk, metadata["input_geometry"], metadata["curvature"], metadata["timelike_dim"]
            )
    except InvalidPointError as exc:
        message = _file_rows(_parts(exc)[0], first_row)
        if blocks is not None:
            from ..blocks import describe_blocks

            fix = f"pass rows of the blocks this graph was exported for: {describe_blocks(blocks)}"
        else:
            fix = (
                f"pass points of the {metadata['input_geometry']} model with curvature "
                f"{metadata['curvature']:g}, the geometry this graph was exported for"
            )
        raise InputError(path, message, fix) from exc


def _file_rows(message: str, first_row: int) -> str:
    """``message`` with the chunk's row numbers ("(rows 3, 7)") turned into the file's."""
    if not first_row:
        return message
    found = re.search(r"\(rows ([0-9, .]+)\)", message)
    if found is None:
        return f"{message} (in the rows from row {first_row} on)"
    rows = re.sub(r"\d+", lambda m: str(int(m.group()) + first_row), found.group(1))
    return message[: found.start()] + f"(rows {rows})" + message[found.end() :]


def refuse_flagged_rows(outputs: dict[str, Any], path: Path, first_row: int) -> None:
    """A composed graph's rows whose encoder point is off the manifold: an error naming them."""
    from ..errors import InvalidPointError
    from ..verification import refuse_off_manifold

    try:
        refuse_off_manifold(outputs)
    except InvalidPointError as exc:
        message, fix = _parts(exc)
        raise InputError(path, _file_rows(message, first_row), fix and fix.rstrip(".")) from exc
