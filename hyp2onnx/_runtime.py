"""The one place hyp2onnx loads graphs, builds onnxruntime sessions and walks subgraphs.

Everything that runs a graph (``verify``, the command line, the Dask and
Spark scorers, the benchmarks) builds its session here, so the execution
provider and thread settings are chosen once. onnx and onnxruntime are
imported on first use: ``import hyp2onnx`` loads neither.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

__all__ = ["all_nodes", "load", "session"]


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
    if threads is not None:
        options.intra_op_num_threads = int(threads)
    if inter_op_threads is not None:
        options.inter_op_num_threads = int(inter_op_threads)
    blob = graph if isinstance(graph, bytes) else graph.SerializeToString()
    return ort.InferenceSession(blob, options, providers=["CPUExecutionProvider"])


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
