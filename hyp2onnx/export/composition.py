"""Put an ONNX encoder in front of a hyp2onnx graph: one graph from raw inputs to labels.

Users' hyperbolic points usually come from a neural encoder (a graph network,
Poincare embeddings, a geoopt model), and in deployment a new entity goes
through the encoder first. `compose` joins the encoder's graph and the
model's graph into one:

- the encoder's inputs are the composed graph's inputs, the model's outputs
  its outputs (plus ``on_manifold``, see below);
- every other name of the encoder (nodes, initializers, value infos, the
  names inside ``If``/``Loop`` bodies) gets a prefix, and any name left in
  common with the model's graph is an error, never a silent rename;
- opset imports are merged domain by domain, ``ai.onnx.ml`` included
  (``onnx.compose.merge_models`` drops it when one side holds a tree
  operator, onnx#4474, so this merge is written here);
- a float32 encoder in front of a float64 model gets a ``Cast`` (exact: the
  precision was lost where the encoder computed in float32), a float64
  encoder in front of a float32 model a rounding ``Cast``; either is said in
  the metadata (``encoder_precision``), and the rounding one in a warning;
- the metadata keeps the model's and adds the encoder's sha256, the name of
  the output that holds the points and their geometry.

A plain hyp2onnx graph cannot refuse a point off the manifold: its callers
check the points before they run it. Inside a composed graph nobody sees the
encoder's points, so the graph checks them itself (the test of
[check_points][hyp2onnx.geometry.check_points]) and returns the boolean
``on_manifold`` [N]; rows where it is false get NaN probabilities and
values, and hyp2onnx's own runners (``verify``, ``run_onnx``, ``hyp2onnx
predict``) refuse them with the rows named.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import onnx
from onnx import TensorProto, helper, version_converter

from .._feeds import numpy_dtype
from ..emit._graph import GraphBuilder
from ..errors import warn_user
from ..geometry import DEFAULT_RTOL, curvature_radius
from ._compile import MIN_OPSET, max_opset
from ._kinds import to_onnx
from ._metadata import GraphMetadata, composed_metadata, read_metadata, write_metadata
from ._model_file import check_model

__all__ = [
    "DEFAULT_PREFIX",
    "ON_MANIFOLD",
    "compose",
    "encoder_of",
    "encoder_sha256",
    "is_composed",
]

#: Prefix of the encoder's names inside a composed graph.
DEFAULT_PREFIX = "encoder/"
#: The composed graph's extra output: whether each row's encoder point is on the manifold.
ON_MANIFOLD = "on_manifold"
#: The stage of the nodes compose adds (`GraphBuilder` names them ``compose/...``); no name of
#: the encoder or the model may start with ``_STAGE``.
_NODES = "compose"
_STAGE = _NODES + "/"


def _float_name(elem: int | None) -> str | None:
    """``"float32"`` or ``"float64"`` for those ONNX element types (onnx's table), else None:
    the points of an encoder, and a model's input, are one of the two."""
    dtype = None if elem is None else numpy_dtype(elem)
    return dtype.name if dtype is not None and dtype.name in ("float32", "float64") else None


_DEFAULT_DOMAINS = ("", "ai.onnx")


def encoder_sha256(encoder: onnx.ModelProto | str | os.PathLike[str]) -> str:
    """sha256 of an encoder: of its file's bytes for a path, else of its serialization.

    For a path this is what ``sha256sum`` prints for the file (external data
    files are not included); a loaded model is hashed as protobuf's
    deterministic serialization.
    """
    if isinstance(encoder, onnx.ModelProto):
        return hashlib.sha256(encoder.SerializeToString(deterministic=True)).hexdigest()
    with open(os.fspath(encoder), "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def is_composed(metadata: GraphMetadata) -> bool:
    """Whether a graph's hyp2onnx metadata (`read_metadata`) is a composed graph's."""
    return metadata.is_composed


@dataclass(frozen=True)
class _Encoder:
    model: onnx.ModelProto
    sha256: str
    output: str
    dtype: str  #: the output's element type, float32 or float64
    width: int | None  #: the output's number of columns, None where the graph leaves it open


def _load_encoder(
    encoder: onnx.ModelProto | str | os.PathLike[str], output: str | None
) -> _Encoder:
    if isinstance(encoder, onnx.ModelProto):
        model = encoder
    elif isinstance(encoder, (str, os.PathLike)):
        try:
            model = onnx.load(os.fspath(encoder))
        except OSError:
            raise
        except Exception as exc:  # protobuf's DecodeError and the like
            raise ValueError(
                f"{os.fspath(encoder)} is not a readable ONNX model ({type(exc).__name__})"
            ) from exc
    else:
        raise TypeError(
            f"encoder must be an onnx.ModelProto or the path of an .onnx file, got "
            f"{type(encoder).__name__}."
        )
    names = [o.name for o in model.graph.output]
    if output is None:
        if len(names) != 1:
            raise ValueError(
                f"the encoder has {len(names)} outputs ({', '.join(names) or 'none'}): name the "
                "one that holds the hyperbolic points with output= (--encoder-output)."
            )
        output = names[0]
    if output not in names:
        raise ValueError(
            f"the encoder has no output {output!r}; its outputs are: {', '.join(names)}."
        )
    value = next(o for o in model.graph.output if o.name == output)
    elem, dims = _type_of(value)
    if _float_name(elem) is None or dims is None or len(dims) != 2 or dims[1] <= 0:
        inferred = _inferred_output(model, output)
        if inferred is not None:
            elem, dims = _type_of(inferred)
    name = _float_name(elem)
    if name is None:
        found = TensorProto.DataType.Name(elem) if elem else "an unknown type"
        raise ValueError(
            f"the encoder's output {output!r} holds {found}; hyperbolic points must be float32 "
            "or float64."
        )
    if dims is not None and len(dims) != 2:
        raise ValueError(
            f"the encoder's output {output!r} has rank {len(dims)}; the points must be a 2-D "
            "tensor (rows, coordinates)."
        )
    width = dims[1] if dims is not None and dims[1] > 0 else None
    digest = encoder_sha256(encoder if isinstance(encoder, (str, os.PathLike)) else model)
    return _Encoder(model, digest, output, name, width)


def _type_of(value: onnx.ValueInfoProto) -> tuple[int | None, list[int] | None]:
    """Element type and dims (0 where unknown) of a tensor value info; None where absent."""
    tensor = value.type.tensor_type
    elem = tensor.elem_type or None
    if not tensor.HasField("shape"):
        return elem, None
    return elem, [d.dim_value if d.HasField("dim_value") else 0 for d in tensor.shape.dim]


def _width_of(value: onnx.ValueInfoProto) -> str:
    _, dims = _type_of(value)
    return str(dims[1]) if dims is not None and len(dims) == 2 and dims[1] > 0 else ""


def _inferred_output(model: onnx.ModelProto, output: str) -> onnx.ValueInfoProto | None:
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is a help here, not a requirement
        return None
    for value in [*inferred.graph.output, *inferred.graph.value_info]:
        if value.name == output and value.type.tensor_type.elem_type:
            return value
    return None


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {
        ("" if o.domain in _DEFAULT_DOMAINS else o.domain): o.version for o in model.opset_import
    }


def _model_graph(
    model_or_graph: Any,
    encoder: _Encoder,
    *,
    dtype: str | None,
    encoding: str,
    target_opset: int | None,
    name: str | None,
    stated: dict[str, Any],
) -> onnx.ModelProto:
    """The hyp2onnx graph to put behind the encoder: given, or exported here."""
    graph: onnx.ModelProto | None = None
    if isinstance(model_or_graph, onnx.ModelProto):
        graph = model_or_graph
    elif isinstance(model_or_graph, (str, os.PathLike)):
        graph = onnx.load(os.fspath(model_or_graph))
    if graph is not None:
        metadata = read_metadata(graph)  # ValueError if not hyp2onnx's
        if is_composed(metadata):
            raise ValueError("this graph has an encoder already; compose the plain model graph.")
        given = {"dtype": dtype, "target_opset": target_opset, "name": name}
        given["encoding"] = None if encoding == "fast" else encoding
        extra = [k for k, v in given.items() if v is not None]
        if extra:
            raise ValueError(
                f"{', '.join(extra)} apply to exporting a fitted model; this graph is exported "
                "already (export it again with them, or pass the fitted model)."
            )
        for key, value in stated.items():
            if value is not None and value != metadata[key]:
                raise ValueError(
                    f"{key}={value!r} contradicts the graph's {key}={metadata[key]!r}: the "
                    "encoder's points must be in the convention the model was exported for."
                )
        return graph
    if dtype is None and encoder.dtype == "float64":
        dtype = "float64"  # no rounding at the junction; float32 stays the model's choice
    if target_opset is None:
        own = _opsets(encoder.model).get("", 0)
        target_opset = own if MIN_OPSET <= own <= max_opset() else None
    return to_onnx(
        model_or_graph,
        dtype=dtype,  # type: ignore[arg-type]
        encoding=encoding,
        target_opset=target_opset,
        name=name,
        **stated,
    )


def _same_opsets(
    enc: onnx.ModelProto, graph: onnx.ModelProto
) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """Both models at one ai.onnx opset (the newer), other domains checked for agreement."""
    a, b = _opsets(enc), _opsets(graph)
    for domain in sorted(set(a) & set(b) - {""}):
        if a[domain] != b[domain]:
            raise ValueError(
                f"the encoder imports {domain} opset {a[domain]} and the model graph opset "
                f"{b[domain]}: one graph can import only one version of a domain."
            )
    va, vb = a.get("", 0), b.get("", 0)
    if va == vb or not (va and vb):
        return enc, graph
    older, newer = ("encoder", vb) if va < vb else ("model graph", va)
    try:
        if va < vb:
            enc = version_converter.convert_version(enc, vb)
        else:
            graph = version_converter.convert_version(graph, va)
    except Exception as exc:
        raise ValueError(
            f"the encoder uses ai.onnx opset {va} and the model graph opset {vb}, and the "
            f"{older} could not be converted to opset {newer} ({str(exc).splitlines()[0]}). "
            f"Export the model with target_opset={va}."
        ) from exc
    return enc, graph


# --- renaming -----------------------------------------------------------------------------


def _rename_graph(graph: onnx.GraphProto, rename: Callable[[str], str]) -> None:
    """Apply ``rename`` to every tensor and node name of ``graph`` and its subgraphs, in place."""
    for value in [*graph.input, *graph.output, *graph.value_info]:
        value.name = rename(value.name)
    for tensor in graph.initializer:
        tensor.name = rename(tensor.name)
    for sparse in graph.sparse_initializer:
        sparse.values.name = rename(sparse.values.name)
        sparse.indices.name = rename(sparse.indices.name)
    for node in graph.node:
        if node.name:
            node.name = rename(node.name)
        for field in (node.input, node.output):
            for i, tensor_name in enumerate(field):
                field[i] = rename(tensor_name)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                attr.g.name = rename(attr.g.name)
                _rename_graph(attr.g, rename)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    sub.name = rename(sub.name)
                    _rename_graph(sub, rename)


def _names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor name defined or used in ``graph`` and its subgraphs ("" excluded)."""
    out: set[str] = set()
    out.update(v.name for v in [*graph.input, *graph.output, *graph.value_info])
    out.update(t.name for t in graph.initializer)
    for node in graph.node:
        out.update(node.input)
        out.update(node.output)
        for attr in node.attribute:
            for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
                out |= _names(sub)
    out.discard("")
    return out


def _used(node: onnx.NodeProto) -> set[str]:
    """Names a node reads, its subgraphs' outer-scope reads included."""
    used = set(node.input)
    for attr in node.attribute:
        for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else attr.graphs:
            inner = {v.name for v in sub.input} | {t.name for t in sub.initializer}
            for child in sub.node:
                inner.update(child.output)
            used |= {n for child in sub.node for n in _used(child)} - inner
    return used


def _prune(graph: onnx.GraphProto, keep: str) -> list[onnx.NodeProto]:
    """The nodes of ``graph`` that ``keep`` depends on, in their order."""
    needed = {keep}
    kept = []
    for node in reversed(graph.node):
        if needed & set(node.output):
            kept.append(node)
            needed |= _used(node)
    return kept[::-1]


def _replace_input(graph: onnx.GraphProto, old: str, new: str) -> None:
    """Call ``old`` ``new`` everywhere in ``graph`` (subgraphs included)."""

    def rename(name: str) -> str:
        return new if name == old else name

    _rename_graph(graph, rename)


# --- the check and the junction -----------------------------------------------------------


def _at_most(builder: GraphBuilder, a: str, b: str) -> str:
    """``a <= b``, false where either is NaN (``LessOrEqual`` from opset 16 on)."""
    if builder.opset >= 16:
        return builder.op(_NODES, "LessOrEqual", [a, b])
    less = builder.op(_NODES, "Less", [a, b])
    return builder.op(_NODES, "Or", [less, builder.op(_NODES, "Equal", [a, b])])


def _emit_check(
    builder: GraphBuilder, points: str, metadata: GraphMetadata, width: int, dtype: str, rtol: float
) -> str:
    """``on_manifold`` [N] (bool) of ``points`` (in ``dtype``): the test of ``check_points``.

    Hyperboloid: ``x_0 > 0`` and ``|x_0^2 - |x_s|^2 - R^2| <= rtol (x_0^2 + |x_s|^2)``,
    written as its two one-sided halves, each a linear function of the
    squared coordinates (one ``MatMul`` against a ``[D, 1]`` column):
    ``(1 - rtol) x_0^2 - (1 + rtol) |x_s|^2 <= R^2`` and
    ``(1 + rtol) x_0^2 - (1 - rtol) |x_s|^2 >= R^2``. Ball models:
    ``|p|^2 / R^2 < 1``. An infinite coordinate makes one half infinite on
    its wrong side (or NaN), and NaN fails every comparison, so rows holding
    either are off the manifold; so are rows whose squares overflow ``dtype``
    (float32: coordinates past about 1.8e19, a radius of about 44 R).
    Reduction order does not matter here: the tolerance is far above the
    rounding of either precision.
    """
    R = curvature_radius(metadata.curvature)
    squares = builder.op(_NODES, "Mul", [points, points])
    if metadata.input_geometry == "hyperboloid":
        t = metadata.timelike_dim % width
        timelike = np.arange(width) == t
        below = np.where(timelike, 1.0 - rtol, -(1.0 + rtol))[:, None]
        above = np.where(timelike, 1.0 + rtol, -(1.0 - rtol))[:, None]
        r2 = builder.const(_NODES, "R2", R * R, dtype)
        low = builder.op(_NODES, "MatMul", [squares, builder.const(_NODES, "below", below, dtype)])
        high = builder.op(_NODES, "MatMul", [squares, builder.const(_NODES, "above", above, dtype)])
        x0 = builder.columns(_NODES, points, t, t + 1, "timelike")
        ok = builder.op(
            _NODES,
            "And",
            [
                builder.op(
                    _NODES, "And", [_at_most(builder, low, r2), _at_most(builder, r2, high)]
                ),
                builder.op(_NODES, "Greater", [x0, builder.const(_NODES, "zero", 0.0, dtype)]),
            ],
        )
    else:
        norm = builder.op(
            _NODES,
            "MatMul",
            [squares, builder.const(_NODES, "inverse_R2", np.full((width, 1), 1 / R**2), dtype)],
        )
        ok = builder.op(_NODES, "Less", [norm, builder.const(_NODES, "one", 1.0, dtype)])
    return builder.op(
        _NODES,
        "Squeeze",
        [ok, builder.const(_NODES, "squeeze_axis", [1], np.int64)],
        outputs=[ON_MANIFOLD],
    )


def _precision_note(encoder_dtype: str, model_dtype: str, output: str) -> str:
    if encoder_dtype == model_dtype:
        return f"none: the encoder's output {output!r} and the model's input are both {model_dtype}"
    if encoder_dtype == "float32":
        return (
            f"the encoder computes its output {output!r} in float32 (about 7 significant "
            "digits; Klein coordinates of points past a hyperbolic radius of about 8.3 R "
            "collapse onto one float32 value); the Cast to the model's float64 input is exact, "
            "so the model routes exactly the points the encoder gives, at float32's resolution"
        )
    return (
        f"the encoder's float64 output {output!r} is rounded to float32 at the junction "
        "(a Cast in front of the model's float32 input): points within a float32 step of a "
        "split may take its other side; export the model with dtype='float64' to keep them"
    )


def compose(
    encoder: onnx.ModelProto | str | os.PathLike[str],
    model_or_graph: Any,
    *,
    output: str | None = None,
    prefix: str = DEFAULT_PREFIX,
    input_geometry: str | None = None,
    curvature: float | None = None,
    timelike_dim: int | None = None,
    dtype: Literal["float32", "float64"] | None = None,
    encoding: str = "fast",
    target_opset: int | None = None,
    name: str | None = None,
    check_manifold: bool = True,
) -> onnx.ModelProto:
    """One ONNX graph: ``encoder`` (raw inputs -> hyperbolic points) then the model.

    ``encoder`` is an ONNX model (or its path) whose output ``output``
    (needed when it has several) holds points ``[N, D]`` in the model's
    input convention: ``input_geometry``, ``curvature`` and
    ``timelike_dim`` as for `hyp2onnx.to_onnx` (a hyperbolic
    estimator knows its own; a plain Klein model needs them; for
    ``hyp2onnx.conventions`` objects pass ``**convention.kwargs()``).
    ``model_or_graph`` is a fitted model, exported here with ``dtype``
    (default: float64 behind a float64 encoder, else the model's own),
    ``encoding`` and ``target_opset`` (default: the encoder's opset), or a
    hyp2onnx graph (loaded, or a path), used as exported.

    The encoder's names get ``prefix``; a clash with a name of the model's
    graph raises ValueError. A dtype difference between the encoder's output
    and the model's input inserts a ``Cast`` and warns what precision is
    lost and where (also in the metadata, ``encoder_precision``). With
    ``check_manifold`` (default) the graph also returns ``on_manifold``
    [N] and NaN values on rows whose encoder point is off the manifold
    (module docstring). Returns the checked model; write it with
    `hyp2onnx.save_onnx`, which uses external data past 2 GiB.
    """
    if not isinstance(prefix, str) or not prefix:
        raise ValueError(f"prefix must be a non-empty string, got {prefix!r}.")
    enc = _load_encoder(encoder, output)
    stated = dict(input_geometry=input_geometry, curvature=curvature, timelike_dim=timelike_dim)
    exported = _model_graph(
        model_or_graph,
        enc,
        dtype=dtype,
        encoding=encoding,
        target_opset=target_opset,
        name=name,
        stated=stated,
    )
    composed = _join(enc, exported, prefix=prefix, name=name, check_manifold=check_manifold)
    check_model(composed)
    return composed


def _join(
    enc: _Encoder, exported: onnx.ModelProto, *, prefix: str, name: str | None, check_manifold: bool
) -> onnx.ModelProto:
    """The two graphs as one model (`compose` after its arguments are read)."""
    metadata = read_metadata(exported)
    _check_width(enc, metadata)
    enc_model, exported = _same_opsets(enc.model, exported)
    part = _encoder_part(enc_model, enc.output, prefix)
    model_graph = onnx.GraphProto()
    model_graph.CopyFrom(exported.graph)
    _check_clashes(part, model_graph, prefix)
    model_elem, _ = _type_of(exported.graph.input[0])
    model_dtype = _float_name(model_elem) or "float64"
    builder = GraphBuilder(_opsets(exported).get("", 0) or _opsets(enc_model).get("", 0))
    note = _precision_note(enc.dtype, model_dtype, enc.output)
    points = _junction(builder, enc, part.junction, model_dtype, metadata.n_features_in, note)
    _replace_input(model_graph, exported.graph.input[0].name, points)
    before, after = builder.nodes, []
    if check_manifold:
        ok = _emit_check(
            builder, points, metadata, metadata.n_features_in, model_dtype, DEFAULT_RTOL
        )
        before, after = list(builder.nodes), _guard_outputs(builder, model_graph, ok)
    outputs = list(model_graph.output)
    if check_manifold:
        outputs.append(helper.make_tensor_value_info(ON_MANIFOLD, TensorProto.BOOL, ["N"]))
    graph = helper.make_graph(
        [*part.nodes, *before, *model_graph.node, *after],
        name or model_graph.name,
        part.inputs,
        outputs,
        [*part.graph.initializer, *builder.initializers, *model_graph.initializer],
        value_info=[*part.graph.value_info, *model_graph.value_info],
        sparse_initializer=[*part.graph.sparse_initializer, *model_graph.sparse_initializer],
    )
    composed = _as_model(graph, enc_model, exported, enc, part)
    _record(composed, enc, part, metadata, prefix=prefix, note=note, checked=check_manifold)
    return composed


def _record(
    composed: onnx.ModelProto,
    enc: _Encoder,
    part: _Part,
    metadata: GraphMetadata,
    *,
    prefix: str,
    note: str,
    checked: bool,
) -> None:
    """Add the encoder's metadata to the model graph's, which ``composed`` carries."""
    entries = composed_metadata(
        metadata,
        sha256=enc.sha256,
        output=enc.output,
        output_dtype=enc.dtype,
        inputs=[v.name for v in part.inputs],
        n_features_in=_width_of(part.inputs[0]) if part.inputs else "",
        prefix=prefix,
        precision=note,
        manifold_rtol=DEFAULT_RTOL if checked else None,
    )
    write_metadata(composed, entries)


@dataclass(frozen=True)
class _Part:
    """The encoder's graph, renamed, and what the composed graph takes from it."""

    graph: onnx.GraphProto  #: every name but the inputs' prefixed
    inputs: list[onnx.ValueInfoProto]  #: the composed graph's inputs
    junction: str  #: the (renamed) output that holds the points
    nodes: list[onnx.NodeProto]  #: the nodes that output needs


def _encoder_part(enc_model: onnx.ModelProto, output: str, prefix: str) -> _Part:
    """The encoder's inputs keep their names; every other name gets ``prefix``."""
    graph = onnx.GraphProto()
    graph.CopyFrom(enc_model.graph)
    initialized = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in initialized]
    interface = {v.name for v in inputs}

    def rename(name: str) -> str:
        return name if name in interface or name == "" else prefix + name

    _rename_graph(graph, rename)
    junction = rename(output)  # the encoder's input itself, for a pass-through
    return _Part(graph, inputs, junction, _prune(graph, junction))


def _check_width(enc: _Encoder, metadata: GraphMetadata) -> None:
    want = metadata.n_features_in
    if enc.width is None or enc.width == want:
        return
    geometry = metadata.input_geometry
    what = (
        f"hyperboloid points of {want} columns (d + 1, timelike column {metadata['timelike_dim']})"
        if geometry == "hyperboloid"
        else f"{geometry} points of {want} columns"
    )
    raise ValueError(
        f"the encoder's output {enc.output!r} has {enc.width} columns; the model takes "
        f"{what}. Pass the output that holds the points, or a model fitted on them."
    )


def _check_clashes(part: _Part, model_graph: onnx.GraphProto, prefix: str) -> None:
    """ValueError for a name in both graphs, or one the junction's nodes would take."""
    interface = {v.name for v in part.inputs}
    outputs = {o.name for o in model_graph.output}
    named_as_outputs = interface & (outputs | {ON_MANIFOLD})
    if named_as_outputs:
        raise ValueError(
            f"the encoder's input(s) {', '.join(sorted(named_as_outputs))} have the name of a "
            "model output: rename them in the encoder."
        )
    model_names = _names(model_graph) - {model_graph.input[0].name}
    enc_names = _names(part.graph)
    ours = {ON_MANIFOLD} | {n for n in enc_names | model_names if n.startswith(_STAGE)}
    clash = sorted((enc_names & model_names) | (ours & (enc_names | model_names)))
    if clash:
        raise ValueError(
            f"names in both the encoder (after the prefix {prefix!r}) and the model graph: "
            f"{', '.join(clash[:5])}{', ...' if len(clash) > 5 else ''}; pass another prefix=."
        )


def _junction(
    builder: GraphBuilder, enc: _Encoder, junction: str, model_dtype: str, width: int, note: str
) -> str:
    """The name the model reads the points from: a Cast where the dtypes differ (with a
    warning), a width guard where the encoder leaves the width open."""
    points = junction
    if enc.dtype != model_dtype:
        if enc.dtype == "float64":  # a rounding Cast; widening float32 is exact: no warning
            warn_user(f"compose: precision lost: {note}.")
        to = helper.np_dtype_to_tensor_dtype(np.dtype(model_dtype))
        points = builder.op(_NODES, "Cast", [junction], to=to)
    if enc.width is None:
        # The graph cannot tell the width before it runs: a Gather of the model's
        # columns from a wider output would read the wrong ones. Adding a [1, D] zero
        # row makes any other width a runtime error instead.
        zeros = builder.const(_NODES, "width_guard", np.zeros((1, width)), model_dtype)
        points = builder.op(_NODES, "Add", [points, zeros])
    return points


def _guard_outputs(
    builder: GraphBuilder, model_graph: onnx.GraphProto, ok: str
) -> list[onnx.NodeProto]:
    """NaN for the float outputs of rows off the manifold; the nodes that write them."""
    first = len(builder.nodes)
    wide = builder.op(
        _NODES, "Unsqueeze", [ok, builder.const(_NODES, "unsqueeze_axis", [1], np.int64)]
    )
    for out in model_graph.output:
        elem, dims = _type_of(out)
        dtype = _float_name(elem)
        if dtype is None:
            continue
        final, raw = out.name, f"{_STAGE}{out.name}_unchecked"
        _replace_input(model_graph, final, raw)  # its producer now writes ``raw``
        out.name = final  # the graph output keeps its name; Where writes it
        nan = builder.const(_NODES, "nan", np.nan, dtype)
        mask = ok if dims is not None and len(dims) == 1 else wide
        builder.op(_NODES, "Where", [mask, raw, nan], outputs=[final])
    return builder.nodes[first:]


def _as_model(
    graph: onnx.GraphProto,
    enc_model: onnx.ModelProto,
    exported: onnx.ModelProto,
    enc: _Encoder,
    part: _Part,
) -> onnx.ModelProto:
    """The composed graph as a model: both sides' opsets, the newer IR version, the
    encoder's functions and the model graph's metadata."""
    opsets = {**_opsets(enc_model), **_opsets(exported)}
    composed = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid(d, v) for d, v in sorted(opsets.items())],
        producer_name=exported.producer_name,
        producer_version=exported.producer_version,
        ir_version=max(enc_model.ir_version, exported.ir_version),
        doc_string=(
            f"{exported.doc_string} Composed with an encoder (sha256 {enc.sha256}) whose "
            f"output {enc.output!r} gives the model's points; inputs: "
            f"{', '.join(v.name for v in part.inputs)}."
        ),
    )
    composed.functions.extend(enc_model.functions)
    composed.metadata_props.extend(exported.metadata_props)
    return composed


def encoder_of(composed: onnx.ModelProto) -> tuple[onnx.ModelProto, str]:
    """The encoder part of a composed graph, as its own model, and its output's name there.

    What ``verify`` runs when it is not given the encoder file: the nodes
    of the composed graph that the encoder's output depends on, with the
    initializers they read (names prefixed as in the composed graph).
    """
    metadata = read_metadata(composed)
    if not is_composed(metadata):
        raise ValueError("this graph has no encoder (it was not made by hyp2onnx.compose).")
    output = metadata["encoder_output"]
    passed_through = output in json.loads(metadata["encoder_inputs"])
    junction = output if passed_through else metadata["encoder_prefix"] + output
    graph = composed.graph
    nodes = _prune(graph, junction)
    read = {name for node in nodes for name in _used(node)}
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(metadata["encoder_output_dtype"]))
    part = helper.make_graph(
        nodes,
        "encoder",
        list(graph.input),
        [helper.make_tensor_value_info(junction, elem, None)],
        [t for t in graph.initializer if t.name in read],
        sparse_initializer=[s for s in graph.sparse_initializer if s.values.name in read],
    )
    model = helper.make_model(
        part, opset_imports=list(composed.opset_import), ir_version=composed.ir_version
    )
    model.functions.extend(composed.functions)
    return model, junction
