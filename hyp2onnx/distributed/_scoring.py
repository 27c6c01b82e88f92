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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from .. import _runtime

__all__ = [
    "BAD_ROWS",
    "OutputSpec",
    "RowCheck",
    "bad_row_mask",
    "graph_bytes",
    "graph_key",
    "locate",
    "null_outputs",
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

_NP_TYPES: dict[int, np.dtype] = {
    onnx.TensorProto.FLOAT: np.dtype(np.float32),
    onnx.TensorProto.DOUBLE: np.dtype(np.float64),
    onnx.TensorProto.INT64: np.dtype(np.int64),
    onnx.TensorProto.STRING: np.dtype(object),
}


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


def run(sess: Any, X: np.ndarray) -> dict[str, np.ndarray]:
    """Outputs of ``sess`` on the points ``X`` (cast to the graph's input type), by name."""
    graph_input = sess.get_inputs()[0]
    dtype = np.float32 if graph_input.type == "tensor(float)" else np.float64
    values = sess.run(None, {graph_input.name: np.ascontiguousarray(X, dtype=dtype)})
    return {o.name: v for o, v in zip(sess.get_outputs(), values, strict=True)}


def check_bad_rows(bad_rows: Any) -> str:
    """``bad_rows`` if it is one of `BAD_ROWS`, else a ValueError saying which are."""
    if not isinstance(bad_rows, str) or bad_rows not in BAD_ROWS:
        raise ValueError(
            f"bad_rows must be 'error' (refuse the data, naming the rows) or 'null' (null "
            f"outputs for those rows), got {bad_rows!r}."
        )
    return bad_rows


#: Why a composed graph (hyp2onnx.compose) is refused here.
COMPOSED = (
    "this graph has an encoder in front (hyp2onnx.compose): the Dask and Spark scorers "
    "take hyperbolic points. Score the model's own graph on the encoder's outputs, or "
    "the composed graph with onnxruntime or 'hyp2onnx predict'."
)


@dataclass(frozen=True)
class RowCheck:
    """The checks ``hyp2onnx predict`` makes on a file's rows, for one graph.

    Built from the graph's metadata (geometry, curvature, timelike column or
    input blocks) and input type; picklable, so it travels to the workers.
    ``check_manifold=False`` skips the manifold test only: NaN, infinity,
    values the input type cannot hold and invalid categorical codes are
    refused whatever it says.
    """

    geometry: str
    curvature: float
    timelike_dim: int
    blocks: Any
    dtype: np.dtype
    check_manifold: bool = True

    @classmethod
    def of(cls, blob: bytes, *, check_manifold: bool = True) -> RowCheck:
        from ..export import read_metadata

        model = onnx.load_from_string(blob)
        meta = read_metadata(model)
        if "encoder_sha256" in meta:
            raise ValueError(COMPOSED)
        elem = model.graph.input[0].type.tensor_type.elem_type
        return cls(
            geometry=meta["input_geometry"],
            curvature=meta["curvature"],
            timelike_dim=meta["timelike_dim"],
            blocks=meta["blocks"],
            dtype=np.dtype(np.float64 if elem == onnx.TensorProto.DOUBLE else np.float32),
            check_manifold=bool(check_manifold),
        )

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """``X`` in the graph's input type; [`InvalidPointError`][hyp2onnx.errors.InvalidPointError] naming the rows of
        ``X`` (numbered from 0) the model would refuse."""
        from ..geometry import check_points, check_representable

        if self.blocks is not None:
            from ..blocks import to_features

            to_features(X, self.blocks, check=self.check_manifold)  # codes always checked
        elif self.check_manifold:
            check_points(X, self.geometry, self.curvature, self.timelike_dim)
        return check_representable(X, self.dtype)


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
    """The dtype of an output that may hold nulls: floats stay, int64 labels become
    float64 (NaN; exact up to 2**53), strings stay objects (None)."""
    return dtype if dtype.kind in "fO" else np.dtype(np.float64)


def null_outputs(
    sess: Any, X: np.ndarray, bad: np.ndarray, spec: OutputSpec
) -> dict[str, np.ndarray]:
    """`run` on the rows of ``X`` not marked ``bad``; the others get NaN (None for
    string labels), in the dtypes of `null_dtype`."""
    good = ~bad
    result = run(sess, X[good]) if good.any() else None
    outputs = {}
    for name, dtype, width in spec.outputs:
        shape = (X.shape[0],) if width is None else (X.shape[0], width)
        kind = null_dtype(dtype)
        full = np.full(shape, None if kind is object else np.nan, dtype=kind)
        if result is not None:
            full[good] = result[name]
        outputs[name] = full
    return outputs


def score(
    sess: Any, X: np.ndarray, check: RowCheck, spec: OutputSpec, bad_rows: str, **where: Any
) -> dict[str, np.ndarray]:
    """One partition's outputs, its rows checked first (``where``: see `locate`).

    ``bad_rows="error"``: an [`InvalidPointError`][hyp2onnx.errors.InvalidPointError] naming the bad rows
    where they lie in the whole data; ``"null"``: null outputs for them.
    """
    from ..errors import InvalidPointError

    if bad_rows == "null":
        return null_outputs(sess, X, bad_row_mask(X, check), spec)
    try:
        X = check(X)
    except InvalidPointError as exc:
        raise InvalidPointError(locate(str(exc), **where)) from None
    return run(sess, X)


@dataclass(frozen=True)
class OutputSpec:
    """What a hyp2onnx graph takes and returns, read from the graph itself."""

    n_features: int
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
        if "hyp2onnx.encoder_sha256" in props:
            raise ValueError(COMPOSED)
        outputs = []
        for o in model.graph.output:
            dims = o.type.tensor_type.shape.dim
            width = int(dims[1].dim_value) if len(dims) == 2 else None
            outputs.append((o.name, _NP_TYPES[o.type.tensor_type.elem_type], width))
        classes = json.loads(props["hyp2onnx.classes"])
        return cls(
            n_features=int(props["hyp2onnx.n_features_in"]),
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

    def table_columns(
        self, existing: list[str], points: list[str], prefix: str = ""
    ) -> dict[str, list[str]]:
        """`column_names` for a table with columns ``existing``, whose ``points`` columns
        are scored; refuses unknown point columns, a wrong count and names already taken."""
        missing = [c for c in points if c not in existing]
        if missing:
            raise ValueError(f"columns {missing} are not in the DataFrame.")
        if len(points) != self.n_features:
            raise ValueError(
                f"{len(points)} point columns given; the graph takes {self.n_features}."
            )
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
