"""An emitted graph made a checked ONNX model with hyp2onnx's metadata (`._metadata`), written.

Every exporter ends here (`finish_model`): the estimators' graphs
(`_compile`) and HyperDT's (`hyperdt`). A graph past protobuf's
2 GiB is checked and written with external data.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import helper
from onnx.external_data_helper import (
    convert_model_to_external_data,
    set_external_data,
    uses_external_data,
)

from .._atomic import atomic_write, output_target
from .._version import __version__ as _version
from ..blocks import describe_blocks
from ..ir import Model, Task
from ._metadata import tree_metadata, write_metadata

#: Largest serialized protobuf message (2 GiB); larger graphs need external data.
PROTOBUF_LIMIT = (1 << 31) - 1


def finish_model(
    graph: onnx.GraphProto,
    ir_model: Model,
    *,
    opset: int,
    extra_opsets: list[onnx.OperatorSetIdProto],
    encoding: str,
    dtype: str,
    extra_metadata: dict[str, str] | None = None,
) -> onnx.ModelProto:
    """Wrap ``graph`` in a model with its opsets, doc string and metadata; check it."""
    return wrap_model(
        graph,
        opsets=[helper.make_opsetid("", opset), *extra_opsets],
        doc_string=_doc_string(ir_model, encoding),
        metadata=tree_metadata(ir_model, encoding, dtype, extra_metadata or {}),
    )


def wrap_model(
    graph: onnx.GraphProto,
    *,
    opsets: list[onnx.OperatorSetIdProto],
    doc_string: str,
    metadata: dict[str, str],
) -> onnx.ModelProto:
    """The checked model of ``graph``: its opsets, the lowest IR version they allow, the doc
    string, and ``metadata`` under hyp2onnx's prefix (`._metadata`)."""
    onnx_model = helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name="hyp2onnx",
        producer_version=_version,
        ir_version=helper.find_min_ir_version_for(opsets),
        doc_string=doc_string,
    )
    write_metadata(onnx_model, metadata)
    check_model(onnx_model)
    return onnx_model


def check_model(onnx_model: onnx.ModelProto) -> None:
    """onnx's full check; a graph over 2 GiB is checked as written with external data."""
    if not needs_external_data(onnx_model):
        onnx.checker.check_model(onnx_model, full_check=True)
        return
    with tempfile.TemporaryDirectory(prefix="hyp2onnx-check-") as folder:
        path = Path(folder) / "model.onnx"
        save_with_external_data(onnx_model, path, overwrite=True)
        onnx.checker.check_model(str(path), full_check=True)


def _doc_string(ir_model: Model, encoding: str) -> str:
    space = ir_model.space
    what = "labels and class probabilities" if ir_model.ensemble.is_classifier else "values"
    if ir_model.task == Task.ANOMALY:
        what = "labels (+1 inlier, -1 outlier), anomaly scores and summed path lengths"
    if space.blocks is not None:
        return (
            f"{ir_model.estimator_class} ({ir_model.backend}, {ir_model.ensemble.n_trees} "
            f"trees) exported by hyp2onnx {_version}. Input X: rows of {space.n_input_features} "
            f"columns, blocks {describe_blocks(space.blocks)} (categorical columns as integer "
            f"codes). Outputs: {what}. Encoding: {encoding}."
        )
    return (
        f"{ir_model.estimator_class} ({ir_model.backend}, {ir_model.ensemble.n_trees} trees) "
        f"exported by hyp2onnx {_version}. Input X: points in the {space.geometry} model of "
        f"hyperbolic space of curvature {space.curvature:g}"
        + (f", timelike column {space.timelike_dim}" if space.geometry == "hyperboloid" else "")
        + f", {space.n_input_features} columns. Outputs: {what}. Encoding: {encoding}."
    )


def needs_external_data(onnx_model: onnx.ModelProto) -> bool:
    """Whether the model is too large for one protobuf file (2 GiB) and needs external data."""
    return onnx_model.ByteSize() > PROTOBUF_LIMIT


def external_data_path(path: str | os.PathLike) -> Path:
    """Where the tensors of ``path`` go when it is written with external data: ``PATH.data``."""
    path = Path(path)
    return path.with_name(path.name + ".data")


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Initializers and tensor attributes of ``graph`` and of its subgraphs."""
    yield from graph.initializer
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                yield attr.t
            elif attr.type == onnx.AttributeProto.TENSORS:
                yield from attr.tensors
            elif attr.type == onnx.AttributeProto.GRAPH:
                yield from _tensors(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _tensors(sub)


def save_with_external_data(onnx_model: onnx.ModelProto, path: Path, *, overwrite: bool) -> None:
    """Write ``path`` and ``PATH.data`` together; ``onnx_model`` is left as it was."""
    data_path = external_data_path(path)
    if not overwrite:
        for target in (path, data_path):
            if target.exists():
                raise FileExistsError(f"{target} exists; not overwritten")
    convert_model_to_external_data(
        onnx_model, all_tensors_to_one_file=True, location=data_path.name, convert_attribute=True
    )
    moved = [
        t for t in _tensors(onnx_model.graph) if uses_external_data(t) and t.HasField("raw_data")
    ]
    raw = [t.raw_data for t in moved]
    placed: list[Path] = []
    data_target = output_target(data_path)
    try:
        with atomic_write(data_path, overwrite=overwrite) as f:
            for tensor, data in zip(moved, raw):
                set_external_data(tensor, data_path.name, offset=f.tell(), length=len(data))
                f.write(data)
                tensor.ClearField("raw_data")
        if not data_target.stream:  # a FIFO or device is never removed
            placed.append(data_target.target)
        with atomic_write(path, overwrite=overwrite) as f:
            f.write(onnx_model.SerializeToString())
    except BaseException:
        for target in placed:
            target.unlink(missing_ok=True)
        raise
    finally:  # back to the tensors held in memory
        for tensor, data in zip(moved, raw):
            tensor.raw_data = data
            tensor.ClearField("data_location")
            tensor.ClearField("external_data")
