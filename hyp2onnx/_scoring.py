"""Running an exported graph inside workers (Dask, Spark): one session per process.

A worker process scores many partitions with the same graph, so its
onnxruntime session is built once and kept, keyed by the graph's hash and
the thread count (a few graphs at most, least recently used dropped).
Sessions are safe to share between a worker's threads. The graph's bytes
are only read when the process has no session for it yet.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from . import _runtime

__all__ = ["OutputSpec", "graph_bytes", "graph_key", "run", "session", "sessions_created"]

#: Sessions one process keeps (different graphs or thread counts).
_MAX_SESSIONS = 4
_LOCK = threading.Lock()
_SESSIONS: OrderedDict[tuple[str, int], Any] = OrderedDict()
_CREATED = [0]

_NP_TYPES = {
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
        """:meth:`column_names` for a table with columns ``existing``, whose ``points`` columns
        are scored; refuses unknown point columns, a wrong count and names already taken."""
        missing = [c for c in points if c not in existing]
        if missing:
            raise ValueError(f"columns {missing} are not in the DataFrame.")
        if len(points) != self.n_features:
            raise ValueError(f"{len(points)} point columns given; the graph takes {self.n_features}.")
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
