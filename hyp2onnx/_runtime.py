"""The one place hyp2onnx loads graphs, builds onnxruntime sessions and walks subgraphs.

Everything that runs a graph (``verify``, the command line, the Dask and
Spark scorers, the benchmarks) builds its session here, so the execution
provider and thread settings are chosen once. onnx and onnxruntime are
imported on first use: ``import hyp2onnx`` loads neither.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from .errors import GraphRunError

if TYPE_CHECKING:
    import numpy as np
    import onnx

__all__ = ["all_nodes", "load", "run", "session"]

#: onnxruntime's log level for our sessions: fatal messages only. A node failing on the
#: data (an encoder's Gather given an id out of range) is logged at level 3 (error) to
#: stderr, in colour, beside the one ``error:`` line that reports it; `run` says it.
_LOG_FATAL_ONLY = 4
#: Failing rows `run` looks for by bisecting the batch, at most.
_MAX_ROWS_FOUND = 10


def load(onnx_model_or_path: onnx.ModelProto | str | os.PathLike[str]) -> onnx.ModelProto:
    """``onnx_model_or_path`` itself if it is a loaded model, else the model in that file."""
    import onnx

    if isinstance(onnx_model_or_path, onnx.ModelProto):
        return onnx_model_or_path
    return onnx.load(os.fspath(onnx_model_or_path))


def session(
    graph: onnx.ModelProto | bytes,
    *,
    threads: int | None = None,
    inter_op_threads: int | None = None,
) -> Any:
    """An onnxruntime CPU session of ``graph`` (a model or its serialized bytes).

    ``threads`` sets onnxruntime's intra-op pool (None: one per core, its
    default); ``inter_op_threads`` the pool that runs independent nodes.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = _LOG_FATAL_ONLY
    if threads is not None:
        options.intra_op_num_threads = int(threads)
    if inter_op_threads is not None:
        options.inter_op_num_threads = int(inter_op_threads)
    blob = graph if isinstance(graph, bytes) else graph.SerializeToString()
    return ort.InferenceSession(blob, options, providers=["CPUExecutionProvider"])


def run(
    session: Any,
    feeds: dict[str, np.ndarray],
    *,
    first_row: int = 0,
    outputs: list[str] | None = None,
) -> list[np.ndarray]:
    """``session.run(outputs, feeds)``; a failure inside the graph raised as `GraphRunError`.

    A graph fails on the data when a node cannot compute on it (an
    encoder's ``Gather`` given an id beyond its table): an error in the
    data, not in hyp2onnx. When every input's first axis is the rows, the
    batch is bisected to find the failing rows (numbered from
    ``first_row``), and each input is swapped for a passing row's to find
    which input makes them fail.
    """
    try:
        return list(session.run(outputs, feeds))
    except Exception as exc:
        if not type(exc).__module__.startswith("onnxruntime"):
            raise
        raise _explained(session, feeds, exc, first_row) from None


def _fails(session: Any, feeds: dict[str, np.ndarray]) -> bool:
    try:
        session.run(None, feeds)
    except Exception as exc:
        if not type(exc).__module__.startswith("onnxruntime"):
            raise
        return True
    return False


def _bisect(session: Any, feeds: dict[str, np.ndarray], n: int) -> tuple[list[int], int | None]:
    """Rows that fail alone (the first `_MAX_ROWS_FOUND`), and one row that passes (or None)."""
    import numpy as np

    found: list[int] = []
    passing: list[int] = []

    def search(rows: np.ndarray) -> None:
        if rows.size == 1:
            found.append(int(rows[0]))
            return
        for part in np.array_split(rows, 2):
            if len(found) >= _MAX_ROWS_FOUND:
                return
            if _fails(session, {k: v[part] for k, v in feeds.items()}):
                search(part)
            elif not passing:
                passing.append(int(part[0]))

    search(np.arange(n))
    return found, (passing[0] if passing else None)


def _explained(
    session: Any, feeds: dict[str, Any], exc: Exception, first_row: int
) -> GraphRunError:
    """The `GraphRunError` for ``exc``, with the failing rows and input where they can be found."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = text.replace("Non-zero status code returned while running ", "")
    sizes = {int(v.shape[0]) if getattr(v, "ndim", 0) else -1 for v in feeds.values()}
    rows: list[int] = []
    names = list(feeds)
    if len(sizes) == 1 and (n := sizes.pop()) > 1:
        rows, passing = _bisect(session, feeds, n)
        if rows and passing is not None and len(names) > 1:
            one = {k: v[[rows[0]]] for k, v in feeds.items()}
            names = [
                k for k in feeds if not _fails(session, {**one, k: feeds[k][[passing]]})
            ] or names
    what = "input " + ", ".join(repr(k) for k in names)
    if rows:
        more = " and maybe more" if len(rows) >= _MAX_ROWS_FOUND else ""
        listed = ", ".join(str(first_row + r) for r in rows)
        problem = f"row(s) {listed}{more} of {what} make the graph fail ({text})"
    else:
        problem = f"the graph fails on {what} ({text})"
    fix = "check those values: an encoder in front of the model cannot compute on them"
    return GraphRunError(problem, fix, names, [first_row + r for r in rows])


def all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Every node of ``graph`` and of its subgraphs (Loop bodies, If branches), in order."""
    import onnx

    out = []
    for node in graph.node:
        out.append(node)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                out.extend(all_nodes(attr.g))
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    out.extend(all_nodes(sub))
    return out
