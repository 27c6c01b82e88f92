"""``hyp2onnx inspect``: what an exported graph takes, returns, contains and runs in."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click

from .._feeds import numpy_dtype
from ._common import (
    EXIT_CODES_HELP,
    EXIT_OK,
    InputError,
    debug_option,
    describe_contents,
    existing_file,
    run,
    subcommand,
)
from ._models import load_onnx
from ._runtimes import network_kind, runtimes_for, runtimes_for_kind

if TYPE_CHECKING:
    from ..export._metadata import GraphMetadata

__all__ = ["Inspection", "command", "inspect_file"]

_TREE_OPS = {"TreeEnsemble", "TreeEnsembleRegressor", "TreeEnsembleClassifier"}
_DOMAIN_NAMES = {"": "ai.onnx", "ai.onnx": "ai.onnx"}


@dataclass(frozen=True)
class Inspection:
    """Everything ``inspect`` reports about one ONNX file."""

    file: str
    file_size: int
    producer: str
    ir_version: int
    opsets: dict[str, int]
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    operators: dict[str, int]  #: "domain/OpType" -> count, subgraphs included
    #: nodes (splits and leaves) of the model's trees, from hyp2onnx's metadata (graphs
    #: without it: counted in the graph's tree operators)
    tree_nodes: int
    hyp2onnx: GraphMetadata | None  #: hyp2onnx's metadata; None if not exported by it
    runtimes: list[str] = field(default_factory=list)

    exit_code = EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """Every field as JSON-ready values; the metadata as the keys the graph carries."""
        meta = None if self.hyp2onnx is None else self.hyp2onnx.to_dict()
        return asdict(replace(self, hyp2onnx=cast(Any, meta)))

    def __str__(self) -> str:
        meta = self.hyp2onnx
        rows: list[tuple[str, str]] = [("file", f"{self.file} ({_size(self.file_size)})")]
        if meta is None:
            rows.append(("exported by", f"{self.producer or 'unknown'} (no hyp2onnx metadata)"))
        else:
            rows.append(
                (
                    "exported by",
                    f"hyp2onnx {meta['version']} from {meta['estimator_class']} "
                    f"({meta['backend']} backend)",
                )
            )
            task = meta["task"]
            if meta["classes"] is not None:
                task += f", classes {meta['classes']}"
            rows.append(("task", task))
            geometry = f"{meta['input_geometry']}, curvature {meta['curvature']:g}"
            if meta["input_geometry"] == "hyperboloid":
                geometry += f", timelike column {meta['timelike_dim']}"
            if meta.get("blocks") is not None:
                from ..blocks import describe_blocks

                geometry = f"blocks {describe_blocks(meta['blocks'])}"
            rows.append(("geometry", geometry))
            if meta.is_composed:  # hyp2onnx.compose: the points come from an encoder
                rows.append(
                    (
                        "encoder",
                        f"output {meta['encoder_output']!r} ({meta['encoder_output_dtype']}) "
                        f"gives the points, sha256 {meta['encoder_sha256'][:16]}...; "
                        f"precision lost: {meta['encoder_precision']}",
                    )
                )
        for label, values in (("inputs", self.inputs), ("outputs", self.outputs)):
            for i, v in enumerate(values):
                rows.append((label if i == 0 else "", f"{v['name']}  {v['type']} {_shape(v)}"))
        if meta is not None and meta.kind != "trees":  # a network or its region tree
            rows.append(("network", describe_contents(meta)))
        else:
            trees = f"{self.tree_nodes} tree nodes"
            if meta is not None:
                trees = f"{meta.n_trees} trees, " + trees
            rows.append(("trees", trees))
        if meta is not None:
            rows.append(("encoding", f"{meta['encoding']}, input {meta['input_dtype']}"))
            if "value_bound" in meta:
                rows.append(("values", _values(meta)))
        rows.append(("opsets", ", ".join(f"{d} {v}" for d, v in self.opsets.items())))
        ops = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in self.operators.items())
        rows.append(("operators", ops))
        rows.append(("runs in", "; ".join(self.runtimes) if self.runtimes else "unknown"))
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _values(meta: GraphMetadata) -> str:
    """How the graph's values relate to the model's (graphs that record a value bound)."""
    bound = meta["value_bound"]
    if bound == 0:
        return "the exact encoding's (nothing to reorder)"
    how = "sums in the runtime's order"
    if meta.get("values_rounded_to"):
        how = f"double sums in the runtime's order, rounded once to {meta['values_rounded_to']}"
    labels = "; labels exact" if meta["classes"] is not None else ""
    short = meta.get("short_batch_rows")
    if short:  # batches of up to that many rows take the exact scores
        how = f"batches of up to {short} rows: the exact encoding's; longer ones: {how}"
    return f"{how}, within {bound:.3g} of the model's{labels}"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024**2:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024**2:.1f} MiB"


def _shape(value: dict[str, Any]) -> str:
    if value["shape"] is None:
        return "(unknown shape)"
    return "[" + ", ".join("?" if d is None else str(d) for d in value["shape"]) + "]"


def _value_info(info: Any) -> dict[str, Any]:
    from onnx import TensorProto

    kind = info.type.WhichOneof("value")
    if kind != "tensor_type":
        return {"name": info.name, "type": kind or "unknown", "shape": None}
    tensor = info.type.tensor_type
    dtype = numpy_dtype(tensor.elem_type)  # numpy's name; else ONNX's (string, bfloat16, ...)
    elem = TensorProto.DataType.Name(tensor.elem_type).lower() if dtype is None else dtype.name
    shape = None
    if tensor.HasField("shape"):
        shape = [_dim(d) for d in tensor.shape.dim]
    return {"name": info.name, "type": elem, "shape": shape}


def _dim(d: Any) -> str | int | None:
    """A dimension's name, size, or None when unknown."""
    if d.HasField("dim_param"):
        return d.dim_param
    return d.dim_value if d.HasField("dim_value") else None


def _tree_nodes(node: Any) -> int:
    attrs = {a.name: a for a in node.attribute}
    if node.op_type == "TreeEnsemble":  # opset 5: splits and leaves are listed apart
        return len(attrs["nodes_featureids"].ints) + len(attrs["leaf_targetids"].ints)
    return len(attrs["nodes_nodeids"].ints)


def _count_tree_nodes(nodes: list[Any], meta: GraphMetadata | None) -> int:
    """The model's tree nodes as its metadata records them, else those of the graph's tree
    operators: graphs that walk their trees with ``Gather`` (isolation forests, oblique
    trees) have none, and one that holds its trees in both branches of an ``If`` has
    each twice."""
    if meta is not None and meta.n_nodes is not None:
        return meta.n_nodes
    return sum(_tree_nodes(n) for n in nodes if n.op_type in _TREE_OPS)


def inspect_file(path: Path) -> Inspection:
    """Describe the ONNX graph in ``path``."""
    from ..export import read_metadata

    existing_file(path, "ONNX")
    model = load_onnx(path)
    from ..errors import DamagedMetadataError

    try:
        meta: GraphMetadata | None = read_metadata(model)
    except DamagedMetadataError as exc:
        raise InputError(path, str(exc), "re-export the graph with 'hyp2onnx convert'") from exc
    except (ValueError, KeyError):
        meta = None
    from .._runtime import all_nodes

    nodes = all_nodes(model.graph)
    operators = Counter(f"{_DOMAIN_NAMES.get(n.domain, n.domain)}/{n.op_type}" for n in nodes)
    return Inspection(
        file=str(path),
        file_size=path.stat().st_size,
        producer=f"{model.producer_name} {model.producer_version}".strip(),
        ir_version=int(model.ir_version),
        opsets={_DOMAIN_NAMES.get(o.domain, o.domain): int(o.version) for o in model.opset_import},
        inputs=[_value_info(v) for v in model.graph.input],
        outputs=[_value_info(v) for v in model.graph.output],
        operators=dict(sorted(operators.items())),
        tree_nodes=_count_tree_nodes(nodes, meta),
        hyp2onnx=meta,
        runtimes=_runtimes(model, meta),
    )


def _runtimes(model: Any, meta: GraphMetadata | None) -> list[str]:
    """The runtimes this graph is known to run in (docs/compatibility.md's results)."""
    if meta is None:
        return []
    from ..export.edge import has_row_blocks

    kind = network_kind(meta)
    if kind is not None:  # measured as a model kind: networks have no encodings to compare
        return runtimes_for_kind(kind, dtype=meta["input_dtype"])
    return runtimes_for(
        meta["encoding"], row_blocks=has_row_blocks(model), dtype=meta["input_dtype"]
    )


HELP = f"""Describe ONNX graph GRAPH: what it takes and returns and what it contains.

Shows the input geometry and curvature, the classes, the inputs and
outputs with their shapes and types, the operators and opsets, the number
of trees and tree nodes (or the network's layers and regions), the file size, and the runtimes its encoding is
known to run in. --json prints the same as one JSON object.

\b
Examples:
  hyp2onnx inspect forest.onnx
  hyp2onnx inspect forest.onnx --json
  hyp2onnx inspect mlp.onnx

{EXIT_CODES_HELP}
"""


@subcommand("inspect", HELP, "Describe a graph: geometry, inputs/outputs, operators, runtimes.")
@click.argument("onnx_file", metavar="GRAPH", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@debug_option
def command(onnx_file: Path, as_json: bool, debug: bool) -> int:
    def report(result: Inspection) -> None:
        click.echo(json.dumps(result.to_dict(), indent=2) if as_json else str(result))

    return run(lambda: inspect_file(onnx_file), debug=debug, report=report)
