"""Deploy exported graphs beyond onnxruntime's Python package.

* [`to_ort`][hyp2onnx.export.edge.to_ort] converts a graph to onnxruntime's ``.ort`` format (what
  onnxruntime's mobile and minimal builds load) with onnxruntime's own tool,
  ``onnxruntime.tools.convert_onnx_models_to_ort``, and writes beside it the
  ``required_operators.config`` that a minimal build's
  ``--include_ops_by_config`` takes.
* [`without_row_blocks`][hyp2onnx.export.edge.without_row_blocks] removes the exact encoding's row-block
  ``Loop`` (and its sequence operators) from a graph, for a runtime with the
  tree operators but without sequence operators. (The standard encoding,
  for runtimes such as OpenVINO and tract, has no row blocks.)

The ``.ort`` file is what the tool writes with its ``Fixed`` optimization
style at its default level (``all``, less the x86-only NCHWc layout
transformer): the optimizations are applied once, when converting, so
the device needs no optimizer. The tests check that the ``.ort`` file gives
the same outputs as the ``.onnx`` graph, bit for bit.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import onnx

from .. import _runtime
from .._atomic import atomic_write, output_target

__all__ = [
    "OrtPackage",
    "config_path_for",
    "has_row_blocks",
    "ort_package",
    "required_operators",
    "to_ort",
    "without_row_blocks",
    "write_all",
]

#: What onnxruntime's tool appends to a model's name for the operator list
#: (``required_operators.config`` for a folder of models, ``MODEL.required_operators.config``
#: for one model; ``Fixed`` style, level ``all``).
CONFIG_SUFFIX = ".required_operators.config"

_SEQUENCE_OPS = {
    "SplitToSequence",
    "SequenceAt",
    "SequenceInsert",
    "SequenceEmpty",
    "SequenceConstruct",
    "SequenceLength",
    "ConcatFromSequence",
}


@dataclass(frozen=True)
class OrtPackage:
    """An ``.ort`` model and its operator list, in memory."""

    ort: bytes  #: the ``.ort`` file's bytes
    config: str  #: the ``required_operators.config`` file's text
    operators: dict[str, dict[int, list[str]]]  #: domain -> opset -> operator types


def config_path_for(ort_path: str | os.PathLike) -> Path:
    """Where the operator list of ``ort_path`` goes: ``MODEL.required_operators.config``."""
    path = Path(ort_path)
    return path.with_name(path.stem + CONFIG_SUFFIX)


@contextlib.contextmanager
def _quiet_ort_tool():
    """Import onnxruntime's converter without its side effects on logging and stdout.

    Its logger module calls ``logging.basicConfig`` on import (a handler on
    the root logger) and the converter prints progress lines: both are
    undone or captured here.
    """
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from onnxruntime.tools import convert_onnx_models_to_ort as tool
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    with contextlib.redirect_stdout(io.StringIO()):
        yield tool


def required_operators(config: str) -> dict[str, dict[int, list[str]]]:
    """Parse a ``required_operators.config`` text: domain -> opset -> operator types."""
    out: dict[str, dict[int, list[str]]] = {}
    for line in config.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        domain, opset, ops = line.split(";", 2)
        out.setdefault(domain, {})[int(opset)] = [op for op in ops.split(",") if op]
    return out


def ort_package(
    onnx_model_or_path: onnx.ModelProto | str | os.PathLike, *, name: str = "model"
) -> OrtPackage:
    """Convert a graph to the ``.ort`` format in memory (nothing written but temporary files).

    ``name`` is the model's file name without suffix, as the operator list's
    header comment names ``NAME.ort``.
    """
    model = _runtime.load(onnx_model_or_path)
    with tempfile.TemporaryDirectory(prefix="hyp2onnx-ort-") as tmp, _quiet_ort_tool() as tool:
        source = Path(tmp) / f"{name}.onnx"
        source.write_bytes(model.SerializeToString())
        try:
            tool.convert_onnx_models_to_ort(
                source, optimization_styles=[tool.OptimizationStyle.Fixed]
            )
        except Exception as exc:  # onnxruntime raises its own exception types
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ValueError(f"onnxruntime could not convert the graph to .ort: {first}") from exc
        ort_file, config_file = source.with_suffix(".ort"), config_path_for(source)
        if not ort_file.is_file() or not config_file.is_file():
            raise ValueError(
                f"onnxruntime's converter wrote no {ort_file.name} and {config_file.name}; "
                "its output names may have changed in this onnxruntime version"
            )
        config = config_file.read_text().replace(str(ort_file), ort_file.name)
        return OrtPackage(ort_file.read_bytes(), config, required_operators(config))


def write_all(contents: Mapping[Path, bytes], *, overwrite: bool) -> None:
    """Write several files, each atomically; on any failure remove those written here.

    With ``overwrite=False`` an existing file raises `FileExistsError`
    before anything is written.
    """
    if not overwrite:
        for path in contents:
            out = output_target(path)
            if out.exists and not out.stream:
                raise FileExistsError(f"{path} exists; not overwritten")
    written: list[Path] = []
    try:
        for path, data in contents.items():
            out = output_target(path)
            with atomic_write(path, overwrite=overwrite) as f:
                f.write(data)
            if not out.stream:  # a FIFO or device is never removed
                written.append(out.target)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise


def to_ort(
    onnx_model_or_path: onnx.ModelProto | str | os.PathLike,
    output: str | os.PathLike,
    *,
    overwrite: bool = False,
) -> tuple[Path, Path]:
    """Write the graph as an ``.ort`` file and its ``required_operators.config``.

    ``output`` is the ``.ort`` file, or an existing folder, which then gets
    ``MODEL.ort`` (named after the input file, ``model.ort`` for an
    in-memory model). The operator list goes beside it as
    ``MODEL.required_operators.config``. Both files appear complete or not
    at all; existing ones are replaced only with ``overwrite=True``.
    Returns the two paths.
    """
    output = Path(output)
    if output.is_dir():
        stem = (
            Path(os.fspath(onnx_model_or_path)).stem
            if not isinstance(onnx_model_or_path, onnx.ModelProto)
            else "model"
        )
        output = output / f"{stem}.ort"
    elif output.suffix.lower() != ".ort":
        raise ValueError(f"{output}: an .ort file name or an existing folder is needed")
    config_path = config_path_for(output)
    if not overwrite:
        for path in (output, config_path):
            if path.exists():
                raise FileExistsError(f"{path} exists; not overwritten")
    package = ort_package(onnx_model_or_path, name=output.stem)
    write_all({output: package.ort, config_path: package.config.encode()}, overwrite=overwrite)
    return output, config_path


def has_row_blocks(onnx_model: onnx.ModelProto) -> bool:
    """Whether the graph processes rows in blocks (a ``Loop`` over sequence operators)."""
    graph = onnx_model.graph
    return any(_is_row_block_if(node) for node in graph.node) or bool(_row_block_loops(graph))


def _row_block_loops(
    graph: onnx.GraphProto,
) -> list[tuple[onnx.NodeProto, onnx.NodeProto, str]]:
    """Each top-level row-block ``Loop``, its ``ConcatFromSequence`` and the rows it splits.

    The pattern `hyp2onnx.emit.trees._row_block_loop` writes:
    ``SplitToSequence(x)`` -> ``Loop`` whose body reads a block with
    ``SequenceAt`` and appends its result with ``SequenceInsert`` ->
    ``ConcatFromSequence``.
    """
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    found = []
    for node in graph.node:
        if node.op_type != "Loop" or node.domain not in ("", "ai.onnx") or len(node.output) != 1:
            continue
        body = next((a.g for a in node.attribute if a.name == "body"), None)
        reads = [n for n in body.node if n.op_type == "SequenceAt"] if body is not None else []
        joins = consumers.get(node.output[0], [])
        if len(reads) != 1 or len(joins) != 1 or joins[0].op_type != "ConcatFromSequence":
            continue
        split = producer.get(reads[0].input[0])
        if split is None or split.op_type != "SplitToSequence":
            continue
        found.append((node, joins[0], split.input[0]))
    return found


def _inline_row_block_loop(loop: onnx.NodeProto, rows: str, joined: str) -> list[onnx.NodeProto]:
    """The Loop body's nodes applied once to all of ``rows``, writing ``joined``."""
    body = next(a.g for a in loop.attribute if a.name == "body")
    block = next(n for n in body.node if n.op_type == "SequenceAt").output[0]
    result = next(n for n in body.node if n.op_type == "SequenceInsert").input[1]
    nodes = []
    for node in body.node:
        if node.op_type in ("SequenceAt", "SequenceInsert") or (
            node.op_type == "Identity" and node.output[0] == body.output[0].name
        ):
            continue
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        for field in (copy.input, copy.output):
            for i, name in enumerate(field):
                field[i] = rows if name == block else joined if name == result else name
        nodes.append(copy)
    return nodes


def _is_row_block_if(node: onnx.NodeProto) -> bool:
    if node.op_type != "If" or node.domain not in ("", "ai.onnx"):
        return False
    branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
    if set(branches) != {"then_branch", "else_branch"} or len(node.output) != 1:
        return False
    return any(n.op_type in _SEQUENCE_OPS for n in branches["else_branch"].node) and not any(
        n.op_type in _SEQUENCE_OPS | {"Loop"} for n in branches["then_branch"].node
    )


def _inputs_used(graph: onnx.GraphProto) -> set[str]:
    """Every name read by a node of ``graph`` or of its subgraphs."""
    used: set[str] = set()
    for node in graph.node:
        used.update(node.input)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                used |= _inputs_used(attr.g) | {o.name for o in attr.g.output}
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    used |= _inputs_used(g) | {o.name for o in g.output}
    return used


def _inlined(graph: onnx.GraphProto) -> list[onnx.NodeProto] | None:
    """``graph``'s nodes with its top-level row-block Loops and Ifs inlined; None if none."""
    # keyed by output names, which are unique in a graph (protobuf wrappers' ids need not be)
    found = _row_block_loops(graph)
    loops = {loop.output[0]: (rows, join.output[0]) for loop, join, rows in found}
    joins = {join.output[0] for _, join, _ in found}
    nodes: list[onnx.NodeProto] = []
    changed = False
    for node in graph.node:
        if node.op_type == "Loop" and node.output[0] in loops:
            changed = True
            nodes.extend(_inline_row_block_loop(node, *loops[node.output[0]]))
            continue
        if node.op_type == "ConcatFromSequence" and node.output[0] in joins:
            continue  # its output is now written by the inlined body
        if not _is_row_block_if(node):
            nodes.append(node)
            continue
        changed = True
        nodes.extend(_whole_batch_branch(node))
    return nodes if changed else None


def _whole_batch_branch(node: onnx.NodeProto) -> list[onnx.NodeProto]:
    """A row-block ``If``'s whole-batch branch, writing the ``If``'s output."""
    whole = next(a.g for a in node.attribute if a.name == "then_branch")
    result = whole.output[0].name
    inner = list(whole.node)
    producers = [n for n in inner if result in n.output]
    if producers:
        out = producers[0].output
        out[list(out).index(result)] = node.output[0]
    else:  # the branch hands an outer value through
        inner.append(onnx.helper.make_node("Identity", [result], [node.output[0]]))
    return inner


def _keep_live(graph: onnx.GraphProto, nodes: list[onnx.NodeProto]) -> None:
    """Set ``graph``'s nodes to ``nodes`` less what no output needs (the removed branch,
    the ``If``'s condition), with the initializers and value infos still read."""
    keep = {o.name for o in graph.output}
    live: list[onnx.NodeProto] = []
    for node in reversed(nodes):
        if any(o in keep for o in node.output) or not node.output:
            live.append(node)
            keep.update(node.input)
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    keep |= _inputs_used(attr.g)
    del graph.node[:]
    graph.node.extend(reversed(live))
    used = _inputs_used(graph) | {o.name for o in graph.output}
    initializers = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    value_info = [v for v in graph.value_info if v.name in used]
    del graph.value_info[:]
    graph.value_info.extend(value_info)


def without_row_blocks(onnx_model: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph computing all rows at once, with no ``Loop`` or sequence operators.

    hyp2onnx's exact graphs score rows in blocks (``Loop`` over
    ``SplitToSequence``, nested for the tree operator's blocks and its sums'),
    which is faster in onnxruntime and keeps the memory of a call bounded;
    small models and oblique projections put them behind an ``If`` whose
    other branch takes batches of at most 1024 rows at once. This computes
    every batch in one piece instead (the ``If``'s whole-batch branch, or
    the ``Loop`` bodies applied to all rows): every batch size gives
    the same outputs as before, bit for bit, but large batches take memory
    in proportion to their rows (split them yourself).
    OpenVINO and tract, which have no sequence operators, need this form.
    Returns a new model; ``onnx_model`` is not changed.
    """
    model = onnx.ModelProto()
    model.CopyFrom(onnx_model)
    graph = model.graph
    nodes = _inlined(graph)
    if nodes is None:
        return model
    _keep_live(graph, nodes)
    if _row_block_loops(graph):  # a Loop that was nested in the one inlined (the sums' blocks)
        return without_row_blocks(model)
    onnx.checker.check_model(model, full_check=True)
    return model
