"""Running an exported graph inside workers (Dask, Spark): one session per process.

A worker process scores many partitions with the same graph, so its
onnxruntime session is built once and kept, keyed by the graph's hash and
the thread count (a few graphs at most, least recently used dropped).
Sessions are safe to share between a worker's threads. The graph's bytes
are only read when the process has no session for it yet.

Every partition is checked before the graph sees it, as ``hyp2onnx
predict`` checks a file's rows (`RowCheck`): the points must lie on
the graph's manifold (its geometry or input blocks, with the functions of
[`hyp2onnx.geometry`][hyp2onnx.geometry] and [`hyp2onnx.blocks`][hyp2onnx.blocks]), and be finite and
representable in the graph's input type. A graph cannot refuse a row
itself, so without this it would label NaN or an off-manifold point.
``bad_rows="error"`` raises [`InvalidPointError`][hyp2onnx.errors.InvalidPointError]
naming the rows (`locate`); ``"null"`` scores the valid rows and gives
the others null outputs (`null_outputs`).

A graph with an encoder in front (`hyp2onnx.compose`) takes the encoder's
inputs, not points: its rows are checked against its inputs instead
(`hyp2onnx.distributed._composed.FeedCheck`), and a row is also bad where
the graph fails on it (an id past an embedding table, found by halving the
batch) or flags it (``on_manifold`` false). `evaluate` runs a graph and
names such rows for every kind of graph alike.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import onnx

from .. import _runtime
from .._feeds import numpy_dtype
from ..export.composition import ON_MANIFOLD
from ..geometry import raise_rows

__all__ = [
    "BAD_ROWS",
    "Opened",
    "OutputSpec",
    "RowCheck",
    "bad_row_mask",
    "check_of",
    "evaluate",
    "graph_bytes",
    "graph_key",
    "locate",
    "null_outputs",
    "opened",
    "run",
    "session",
    "sessions_created",
]

#: What the distributed scorers do with rows the model would refuse.
BAD_ROWS = ("error", "null")

#: Sessions one process keeps (different graphs or thread counts).
_MAX_SESSIONS = 4
_LOCK = threading.Lock()
_SESSIONS: OrderedDict[tuple[str, int], Any] = OrderedDict()
_CREATED = [0]


def graph_bytes(graph: Any) -> bytes:
    """The serialized graph from an ``onnx.ModelProto``, bytes, or a file path."""
    if isinstance(graph, onnx.ModelProto):
        return graph.SerializeToString()
    if isinstance(graph, (bytes, bytearray)):
        return bytes(graph)
    if isinstance(graph, (str, os.PathLike)):
        with open(graph, "rb") as f:
            return f.read()
    raise TypeError(
        f"graph must be an onnx.ModelProto, bytes or a path, got {type(graph).__name__}."
    )


def graph_key(blob: bytes) -> str:
    """The cache key of a serialized graph: its SHA-256."""
    return hashlib.sha256(blob).hexdigest()


def session(key: str, graph: bytes | Callable[[], bytes], threads: int = 1) -> Any:
    """This process's onnxruntime session for the graph ``key`` (built on first use).

    ``graph`` is the serialized graph, or a function returning it (read only
    when the session is built, e.g. a Spark broadcast's value).
    """
    cache_key = (key, int(threads))
    with _LOCK:
        found = _SESSIONS.get(cache_key)
        if found is not None:
            _SESSIONS.move_to_end(cache_key)
            return found
        blob = graph() if callable(graph) else graph
        built = _runtime.session(blob, threads=int(threads), inter_op_threads=1)
        _SESSIONS[cache_key] = built
        _CREATED[0] += 1
        while len(_SESSIONS) > _MAX_SESSIONS:
            _SESSIONS.popitem(last=False)
        return built


def sessions_created() -> int:
    """Sessions this process has built so far (for tests and benchmarks)."""
    return _CREATED[0]


@functools.cache
def _quiet() -> Any:
    """Run options that keep onnxruntime's own log lines of a failing run off stderr (the
    failure is raised, naming the rows; its log would repeat it once per halving step)."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = 4  # fatal only
    return options


def run(sess: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Outputs of ``sess`` on ``feeds`` (checked arrays by input name, a check's result), by name."""
    values = sess.run(None, feeds, _quiet())
    return {o.name: v for o, v in zip(sess.get_outputs(), values, strict=True)}


def check_bad_rows(bad_rows: Any) -> str:
    """``bad_rows`` if it is one of `BAD_ROWS`, else a ValueError saying which are."""
    if not isinstance(bad_rows, str) or bad_rows not in BAD_ROWS:
        raise ValueError(
            f"bad_rows must be 'error' (refuse the data, naming the rows) or 'null' (null "
            f"outputs for those rows), got {bad_rows!r}."
        )
    return bad_rows


@dataclass(frozen=True)
class RowCheck:
    """The checks ``hyp2onnx predict`` makes on a file's rows, for one graph.

    Built from the graph's metadata (geometry, curvature, timelike column or
    input blocks) and input type; picklable, so it travels to the workers.
    ``check_manifold=False`` skips the manifold test only: NaN, infinity,
    values the input type cannot hold and invalid categorical codes are
    refused whatever it says. The rows of a partition are a float64 matrix
    of points.
    """

    geometry: str
    curvature: float
    timelike_dim: int
    blocks: Any
    dtype: np.dtype
    check_manifold: bool = True
    input_name: str = "X"
    n_features: int = 0

    @classmethod
    def of(cls, blob: bytes, *, check_manifold: bool = True) -> RowCheck:
        from ..export import read_metadata

        model = onnx.load_from_string(blob)
        meta = read_metadata(model)
        elem = model.graph.input[0].type.tensor_type.elem_type
        return cls(
            geometry=meta["input_geometry"],
            curvature=meta["curvature"],
            timelike_dim=meta["timelike_dim"],
            blocks=meta["blocks"],
            dtype=np.dtype(np.float64 if elem == onnx.TensorProto.DOUBLE else np.float32),
            check_manifold=bool(check_manifold),
            input_name=model.graph.input[0].name,
            n_features=int(meta["n_features_in"]),
        )

    def __call__(self, X: np.ndarray) -> dict[str, np.ndarray]:
        """The graph's feeds: ``X`` in its input type; [`InvalidPointError`][hyp2onnx.errors.InvalidPointError]
        naming the rows of ``X`` (numbered from 0) the model would refuse."""
        from ..geometry import check_points, check_representable

        if self.blocks is not None:
            from ..blocks import to_features

            to_features(X, self.blocks, check=self.check_manifold)  # codes always checked
        elif self.check_manifold:
            check_points(X, self.geometry, self.curvature, self.timelike_dim)
        return {self.input_name: np.ascontiguousarray(check_representable(X, self.dtype))}

    def layout(self, existing: list[str], columns: Any) -> list[str]:
        """The point columns of a table with columns ``existing`` (default: all, in order);
        refuses unknown columns and a wrong count."""
        columns = list(existing) if columns is None else list(columns)
        missing = [c for c in columns if c not in existing]
        if missing:
            raise ValueError(f"columns {missing} are not in the DataFrame.")
        if len(columns) != self.n_features:
            raise ValueError(
                f"{len(columns)} point columns given; the graph takes {self.n_features}."
            )
        return columns

    def frame_rows(self, frame: Any, layout: list[str]) -> np.ndarray:
        """A pandas partition's points, float64 (a missing value becomes NaN, refused later)."""
        return frame[layout].to_numpy(dtype=np.float64, na_value=np.nan)

    def block_rows(self, block: Any) -> np.ndarray:
        """A dask array block's points."""
        return np.asarray(block)


def check_of(blob: bytes, *, check_manifold: bool = True) -> Any:
    """The checks of a graph's rows: `RowCheck` for points, or for a composed graph
    (hyp2onnx.compose) `hyp2onnx.distributed._composed.FeedCheck` for its encoder's inputs."""
    from ..export import read_metadata

    model = onnx.load_from_string(blob)
    if read_metadata(model).is_composed:
        from ._composed import FeedCheck

        return FeedCheck.of(model, check_manifold=check_manifold)
    return RowCheck.of(blob, check_manifold=check_manifold)


class Opened(NamedTuple):
    """What `opened` reads from a graph: its bytes, outputs, row checks and cache key."""

    blob: bytes
    spec: OutputSpec
    check: Any
    key: str


def opened(graph: Any, *, check_manifold: bool = True, compiled: Any = None) -> Opened:
    """What ``hyp2onnx.dask.predict`` and ``hyp2onnx.spark.predict`` read from ``graph``
    (`graph_bytes`, `OutputSpec`, `check_of`, `graph_key`) before either library's own
    work; ``compiled``, a compiled scorer of the graph's model, is checked against it."""
    blob = graph_bytes(graph)
    spec = OutputSpec.of(blob)
    check = check_of(blob, check_manifold=check_manifold)
    if compiled is not None:
        from ..verification import default_tolerance

        compiled.check_graph(blob, default_tolerance)
    return Opened(blob, spec, check, graph_key(blob))


def flagged(outputs: dict[str, np.ndarray], check: Any) -> np.ndarray | None:
    """Rows the graph itself marks as no answers: a composed graph's ``on_manifold`` false
    (None where nothing is flagged; ``check_manifold=False`` keeps them)."""
    if ON_MANIFOLD not in outputs or not check.check_manifold:
        return None
    off = ~np.asarray(outputs[ON_MANIFOLD], dtype=bool)
    return off if off.any() else None


#: What a row that the graph flags off its manifold means, and what to do.
_OFF_MANIFOLD = (
    "give encoder outputs off the model's manifold (the graph's on_manifold is false)",
    "The encoder's points must lie on the manifold the model was trained for: check the "
    "encoder's output geometry, curvature and timelike column, and its inputs.",
)


def _failure(exc: Exception) -> str:
    """onnxruntime's message, its first line, without its coloured prefix."""
    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return line[:300]


def _runs(sess: Any, feeds: dict[str, np.ndarray]) -> None:
    """Run the graph; InvalidPointError if it fails (a slice `bad_row_mask` tests)."""
    from ..errors import InvalidPointError

    try:
        sess.run(None, feeds, _quiet())
    except Exception as exc:  # onnxruntime's own errors on these values
        raise InvalidPointError(_failure(exc)) from None


def failing_rows(sess: Any, X: np.ndarray, check: Any) -> np.ndarray:
    """Which rows of ``X`` (already passed by ``check``) make the graph fail on their own.

    A failure inside the graph on checked inputs (an id past an encoder's
    embedding table) is an error in the data; halving finds its rows.
    """
    return bad_row_mask(X, lambda part: _runs(sess, check(part)))


def evaluate(sess: Any, X: np.ndarray, check: Any) -> dict[str, np.ndarray]:
    """The graph's outputs on the rows ``X``, or [`InvalidPointError`][hyp2onnx.errors.InvalidPointError]
    naming the rows (of ``X``, from 0) that ``check`` refuses, that make the graph fail, or
    that the graph flags (`flagged`)."""
    feeds = check(X)
    try:
        outputs = run(sess, feeds)
    except Exception as exc:  # onnxruntime's own errors: the graph failed on these values
        failure = _failure(exc)
        fix = "Check these rows' inputs against what the graph takes (ids within its tables, ...)."
        raise_rows(failing_rows(sess, X, check), f"make the graph fail ({failure})", fix)
        raise_rows(np.ones(len(X), bool), f"make the graph fail together ({failure})", fix)
        raise  # unreachable: raise_rows raised
    off = flagged(outputs, check)
    if off is not None:
        raise_rows(off, *_OFF_MANIFOLD)
    return outputs


def bad_row_mask(X: np.ndarray, check: Any) -> np.ndarray:
    """Which rows of ``X`` ``check`` refuses, found by halving the refused slices.

    ``check`` raises [`InvalidPointError`][hyp2onnx.errors.InvalidPointError] if any row is bad and judges
    each row alone (as `RowCheck` does), so a slice it passes holds no
    bad row: a clean partition costs one call, ``b`` bad rows about
    ``2 b log2(n / b)`` calls on ever smaller slices.
    """
    from ..errors import InvalidPointError

    bad = np.zeros(X.shape[0], dtype=bool)
    pending = [(0, X.shape[0])] if X.shape[0] else []
    while pending:
        lo, hi = pending.pop()
        try:
            check(X[lo:hi])
        except InvalidPointError:
            if hi - lo == 1:
                bad[lo] = True
            else:
                mid = (lo + hi) // 2
                pending += [(mid, hi), (lo, mid)]
    return bad


_ROWS = re.compile(r"\(rows ([0-9, .]+)\)")


def locate(
    message: str,
    *,
    first_row: int | None = None,
    partition: int | None = None,
    first_in_partition: int = 0,
    index: Any = None,
) -> str:
    """``message`` (with a partition's row numbers, "(rows 3, 7)") telling where the rows lie.

    With ``first_row`` (the partition's first row in the whole data) the rows
    become global row numbers; otherwise they are given with ``partition``,
    counted from ``first_in_partition`` (where a partition arrives in batches).
    ``index`` (a DataFrame partition's index) adds the rows' index labels.
    """
    found = _ROWS.search(message)
    local = [int(r) for r in re.findall(r"\d+", found.group(1))] if found else []
    more = ", ..." if found and "..." in found.group(1) else ""
    if first_row is not None:
        where = "rows " + ", ".join(str(first_row + r) for r in local) + more
    else:
        shown = ", ".join(str(first_in_partition + r) for r in local)
        where = f"rows {shown}{more} of partition {partition}"
    if index is not None and local:
        labels = [index[r] for r in local if r < len(index)]
        where += "; index " + ", ".join(map(str, labels)) + more
    if found is None:
        start = f"row {first_row}" if first_row is not None else f"partition {partition}"
        return f"{message} (in the rows from {start} on)"
    return message[: found.start()] + f"({where})" + message[found.end() :]


def null_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of an output that may hold nulls: floats stay, integer labels and bool
    flags (``covered``) become float64 (NaN; integers exact up to 2**53), strings stay
    objects (None)."""
    return dtype if dtype.kind in "fO" else np.dtype(np.float64)


def null_outputs(
    result: dict[str, np.ndarray] | None, keep: np.ndarray, n: int, spec: OutputSpec
) -> dict[str, np.ndarray]:
    """The outputs of ``n`` rows: ``result`` (the outputs of the rows ``keep``) in their
    places, NaN elsewhere (None for string labels), in the dtypes of `null_dtype`."""
    outputs = {}
    for name, dtype, width in spec.outputs:
        shape = (n,) if width is None else (n, width)
        kind = null_dtype(dtype)
        full = np.full(shape, None if kind is object else np.nan, dtype=kind)
        if result is not None:
            full[keep] = result[name]
        outputs[name] = full
    return outputs


def with_nulls(sess: Any, X: np.ndarray, check: Any, spec: OutputSpec) -> dict[str, np.ndarray]:
    """The outputs of the rows of ``X`` that the check passes, that the graph runs on and
    does not flag (`flagged`); null outputs (`null_outputs`) for the others.

    A clean partition costs one check and one run.
    """
    from ..errors import InvalidPointError

    keep = np.arange(X.shape[0])
    try:
        feeds = check(X)
    except InvalidPointError:  # find the rows, check the others again
        keep = keep[~bad_row_mask(X, check)]
        feeds = check(X[keep])
    result = None
    if keep.size:
        try:
            result = run(sess, feeds)
        except Exception:  # onnxruntime's own errors: find the rows, score the others
            keep = keep[~failing_rows(sess, X[keep], check)]
            result = run(sess, check(X[keep])) if keep.size else None
    off = None if result is None else flagged(result, check)
    if off is not None and result is not None:
        keep, result = keep[~off], {name: value[~off] for name, value in result.items()}
    return null_outputs(result, keep, X.shape[0], spec)


def score(
    sess: Any, X: np.ndarray, check: Any, spec: OutputSpec, bad_rows: str, **where: Any
) -> dict[str, np.ndarray]:
    """One partition's outputs, its rows checked first (``where``: see `locate`).

    ``check`` is the graph's `check_of`. ``bad_rows="error"``: an
    [`InvalidPointError`][hyp2onnx.errors.InvalidPointError] naming the bad rows (refused by
    the check, failing in the graph or flagged by it, `evaluate`) where they lie in
    the whole data; ``"null"``: null outputs for them (`with_nulls`).
    """
    from ..errors import InvalidPointError

    if bad_rows == "null":
        return with_nulls(sess, X, check, spec)
    try:
        return evaluate(sess, X, check)
    except InvalidPointError as exc:
        raise InvalidPointError(locate(str(exc), **where)) from None


@dataclass(frozen=True)
class OutputSpec:
    """What a hyp2onnx graph returns, read from the graph itself (what it takes: `check_of`)."""

    #: (name, numpy dtype, columns or None for a vector), in the graph's order
    outputs: tuple[tuple[str, np.dtype, int | None], ...]
    classes: tuple | None

    @classmethod
    def of(cls, blob: bytes) -> OutputSpec:
        model = onnx.load_from_string(blob)
        props = {p.key: p.value for p in model.metadata_props}
        if "hyp2onnx.n_features_in" not in props:
            raise ValueError(
                "this ONNX model has no hyp2onnx metadata: score graphs exported by "
                "hyp2onnx.to_onnx / save_onnx."
            )
        outputs = []
        for o in model.graph.output:
            dims = o.type.tensor_type.shape.dim
            width = int(dims[1].dim_value) if len(dims) == 2 else None
            elem = o.type.tensor_type.elem_type
            dtype = np.dtype(object) if elem == onnx.TensorProto.STRING else numpy_dtype(elem)
            if dtype is None or len(dims) > 2:
                raise ValueError(
                    f"the graph's output {o.name!r} ({onnx.helper.printable_type(o.type)}) is not "
                    "a vector or matrix of numbers, booleans or strings, which the scorers return "
                    "as columns."
                )
            outputs.append((o.name, dtype, width))
        classes = json.loads(props["hyp2onnx.classes"])
        return cls(
            outputs=tuple(outputs),
            classes=None if classes is None else tuple(classes),
        )

    def column_names(self, prefix: str = "") -> dict[str, list[str]]:
        """Table columns of every output: ``label``, ``probability_<i>``, ``variable[_<j>]``."""
        names = {}
        for name, _, width in self.outputs:
            if width is None or (width == 1 and name != "probabilities"):
                names[name] = [prefix + name]
            else:
                stem = "probability" if name == "probabilities" else name
                names[name] = [f"{prefix}{stem}_{i}" for i in range(width)]
        return names

    def table_columns(self, existing: list[str], prefix: str = "") -> dict[str, list[str]]:
        """`column_names` for a table with columns ``existing``; refuses names already taken."""
        names = self.column_names(prefix)
        clash = sorted(set(existing) & {col for cols in names.values() for col in cols})
        if clash:
            raise ValueError(
                f"the DataFrame already has columns {clash}; pass output_prefix=... to name the "
                "outputs apart."
            )
        return names

    def empty_columns(self, prefix: str = "") -> dict[str, np.ndarray]:
        """Zero-row columns of the right dtypes (a DataFrame's metadata)."""
        names = self.column_names(prefix)
        dtypes = {name: dtype for name, dtype, _ in self.outputs}
        return {col: np.empty(0, dtypes[out]) for out, cols in names.items() for col in cols}


def columns_of(result: dict[str, np.ndarray], names: dict[str, list[str]]) -> dict[str, np.ndarray]:
    """One 1-D array per table column, from a graph's outputs."""
    columns = {}
    for out, cols in names.items():
        value = result[out]
        if value.ndim == 1:
            columns[cols[0]] = value
        else:
            for i, col in enumerate(cols):
                columns[col] = value[:, i]
    return columns
