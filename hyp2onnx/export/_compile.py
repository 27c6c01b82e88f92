"""Compile a fitted hyperbolic tree model into one ONNX graph.

The graph takes raw points ``X`` [N, D] in the model's input geometry,
projects the columns the trees read to Klein coordinates, evaluates the
ensemble and returns ``label`` + ``probabilities`` (classifiers) or
``variable`` (regressors). See :mod:`hyp2onnx.emit.trees` for the two
encodings.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
from onnx import helper
from onnx.external_data_helper import (
    convert_model_to_external_data,
    set_external_data,
    uses_external_data,
)

from .._atomic import atomic_write, output_target
from .._version import __version__ as _version
from ..blocks import blocks_from_json, blocks_to_json, describe_blocks
from ..emit import ENCODINGS
from ..emit import encoding as _encoding
from ..emit._graph import ML_DOMAIN, GraphBuilder, onnx_type
from ..emit.fast import Guarded, Link, Refine
from ..emit.frames import emit_frames, frame_chain, remap_frames
from ..emit.isolation import emit_oblique_walk, emit_perfect_walk, perfect_applies, walk_applies
from ..emit.oblique import emit_normals, remap_projection
from ..emit.outputs import emit_outputs
from ..emit.projection import emit_projection, projection_dtype
from ..emit.trees import plan_trees, remap_features
from ..errors import CompatRoutingWarning, UnsupportedModelError
from ..geometry import GEOMETRIES, check_timelike_dim, curvature_radius
from ..ir import InputSpace, Model
from ._kinds import kind_of

#: ai.onnx opset used unless ``target_opset`` says otherwise.
DEFAULT_OPSET = 18
#: The oldest ai.onnx opset hyp2onnx emits (the newest is :func:`max_opset`).
MIN_OPSET = 13
_META_PREFIX = "hyp2onnx."
#: Largest serialized protobuf message (2 GiB); larger graphs need external data.
PROTOBUF_LIMIT = (1 << 31) - 1
#: Encodings whose emitter takes a rotation forest's frame chain as a map of
#: row blocks (``features=``) rather than the whole batch's frame coordinates.
FUSED_FRAMES = ("fast", "exact")


def check_opset(target_opset: Any) -> int:
    """``target_opset`` (None: :data:`DEFAULT_OPSET`) if hyp2onnx can emit it, else ValueError.

    Every opset from :data:`MIN_OPSET` to the newest the installed onnx
    knows is emitted with the operators that opset has (``tests`` export
    and run each one).
    """
    if target_opset is None:
        return DEFAULT_OPSET
    newest = max_opset()
    if isinstance(target_opset, (bool, np.bool_)) or not isinstance(
        target_opset, (int, np.integer)
    ):
        raise ValueError(f"target_opset must be an integer, got {target_opset!r}.")
    if not MIN_OPSET <= target_opset <= newest:
        raise ValueError(
            f"target_opset must be between {MIN_OPSET} and {newest} (the newest this onnx "
            f"{onnx.__version__} knows), got {target_opset}."
        )
    return int(target_opset)


def max_opset() -> int:
    """The newest ai.onnx opset the installed onnx package defines."""
    return int(onnx.defs.onnx_opset_version())


def describe(
    model: Any,
    *,
    input_geometry: str | None = None,
    curvature: float | None = None,
    timelike_dim: int | None = None,
) -> Model:
    """The :class:`~hyp2onnx.ir.Model` of a hyperbolic estimator or a plain Klein model.

    A plain fitted scikit-learn / XGBoost / LightGBM tree model trained on
    unit-ball Klein coordinates needs ``input_geometry`` (and ``curvature``,
    ``timelike_dim`` if not the defaults); its thresholds are used as they
    are, not corrected.
    """
    from ..estimators import backend_for

    stated = {
        "input_geometry": input_geometry,
        "curvature": curvature,
        "timelike_dim": timelike_dim,
    }
    if kind_of(model) == "hyperbolic":
        for key, value in stated.items():
            if value is not None and value != getattr(model, key):
                raise ValueError(
                    f"{key}={value!r} contradicts the model's own {key}={getattr(model, key)!r}; "
                    "leave it out for hyperbolic estimators."
                )
        return model.to_ir()
    backend = backend_for(model)
    if input_geometry is None:
        raise ValueError(
            f"{type(model).__name__} is a plain Euclidean model: state the geometry of the "
            "points it will receive with input_geometry='hyperboloid', 'poincare' or 'klein' "
            "(it must have been trained on their unit-ball Klein coordinates)."
        )
    if input_geometry not in GEOMETRIES:
        raise ValueError(f"input_geometry must be one of {GEOMETRIES}, got {input_geometry!r}.")
    try:
        ensemble = backend.to_ensemble(model)
    except (AttributeError, ValueError) as exc:
        raise UnsupportedModelError(
            f"{type(model).__name__} does not look fitted ({exc}); fit it before exporting."
        ) from exc
    if ensemble.categories is not None:
        raise UnsupportedModelError(
            f"{type(model).__name__} has categorical splits, so some of its columns are not "
            "Klein coordinates. Train a hyp2onnx estimator with input_blocks=[..., "
            "Categorical(n)] to export categorical columns."
        )
    warnings.warn(
        f"{type(model).__name__} is exported with its own (Euclidean) thresholds; train a "
        "hyp2onnx estimator to get Einstein-midpoint thresholds.",
        stacklevel=3,
    )
    n_input = ensemble.n_features + (1 if input_geometry == "hyperboloid" else 0)
    space = InputSpace(
        geometry=input_geometry,
        curvature=-1.0 if curvature is None else float(curvature),
        timelike_dim=(
            0 if timelike_dim is None else check_timelike_dim(timelike_dim, n_input, input_geometry)
        ),
        n_input_features=n_input,
    )
    return Model(ensemble, space, backend.name, type(model).__name__)


def to_onnx(
    model: Any,
    *,
    dtype: Literal["float32", "float64"] | None = None,
    encoding: str = "fast",
    target_opset: int | None = None,
    name: str | None = None,
    input_geometry: str | None = None,
    curvature: float | None = None,
    timelike_dim: int | None = None,
) -> onnx.ModelProto:
    """Export ``model`` to an ONNX model taking raw hyperbolic points.

    ``dtype`` is the input tensor type; by default (None) the precision the
    model needs (:func:`input_dtype`): float64 for a model whose splits
    float32 cannot resolve (points far from the origin), float32 otherwise.
    ``encoding`` is one of :data:`hyp2onnx.emit.ENCODINGS`: ``"fast"``
    (default) routes every row as the Python model does and gives its labels
    exactly, exact ties included, with values within a stated bound (the
    runtime adds the trees in its own order; the bound is in the graph's
    metadata, see :mod:`hyp2onnx.emit.fast`); ``"exact"`` also reproduces
    its values bit for bit (probabilities: bit for bit for float64 sums
    without a link function, within 1e-15 with a logistic or softmax, 1e-6
    for XGBoost), slower on many cores; ``"compat"``
    uses the legacy opset-1 operator with float32 thresholds and sums for
    older runtimes (a :class:`~hyp2onnx.errors.CompatRoutingWarning` says
    when it cannot route exactly); ``"standard"`` gives the exact outputs
    without any ai.onnx.ml operator (see ``docs/export.md``). ``target_opset``
    is the ai.onnx opset (:func:`check_opset`: 13 to the newest the installed
    onnx knows). The other keywords are for plain Klein models (:func:`describe`).
    Models of the original HyperDT (``hyperdt`` 0.0.3) are accepted too and
    reproduced as HyperDT computes them (:mod:`hyp2onnx.hyperdt`).
    """
    if dtype not in (None, "float32", "float64"):
        raise ValueError(f"dtype must be 'float32', 'float64' or None, got {dtype!r}.")
    entry = _encoding(encoding)
    opset = check_opset(target_opset)
    if kind_of(model) == "hyperdt":
        from . import hyperdt

        _no_stated_geometry(model, input_geometry, curvature, timelike_dim)
        # The dtype rule of plain models: the precision they compare in. HyperDT
        # compares float64 products and keeps no training rows to show that
        # float32 input routes them alike (far points a few 1e-7 apart in angle
        # do not), so float64.
        if dtype == "float32":
            warnings.warn(
                "HyperDT compares its splits in float64: float32 input moves points near "
                "a split's plane (far points close in angle) to its other side, and labels "
                "there will differ from HyperDT's on float64 input. Use dtype='float64' "
                "(the default here).",
                stacklevel=2,
            )
        return hyperdt.compile_hyperdt(
            model, dtype=dtype or "float64", encoding=encoding, opset=opset, name=name
        )
    described = describe(
        model, input_geometry=input_geometry, curvature=curvature, timelike_dim=timelike_dim
    )
    needed = input_dtype(described)
    if dtype is None:
        dtype = needed
    elif dtype == "float32" and needed == "float64":
        warnings.warn(
            "float32 cannot separate some of this model's splits (points far from the "
            "origin, or categorical codes from 2**24 on): float32 input loses them, and "
            "labels near those splits will differ "
            "from the model's on float64 input. Use dtype='float64' (the default here).",
            stacklevel=2,
        )
    if entry.float32 and needed == "float64":
        warnings.warn(
            f"the {encoding} encoding compares in float32, which cannot separate some of this "
            "model's splits (points far from the origin): labels near them will differ from "
            "the model's. Use the default encoding ('fast'), or 'exact' or 'standard'.",
            stacklevel=2,
        )
    return compile_model(described, dtype=dtype, encoding=encoding, opset=opset, name=name)


def _no_stated_geometry(model: Any, *stated: Any) -> None:
    if any(v is not None for v in stated):
        raise ValueError(
            f"{type(model).__name__} (HyperDT) records its own geometry: leave out "
            "input_geometry, curvature and timelike_dim."
        )


def input_dtype(described: Model) -> Literal["float32", "float64"]:
    """The graph input dtype that keeps what the model separates.

    float64 if float32 cannot separate some split's two nearest training
    rows (hyperbolic estimators record this when fitted, see
    :mod:`hyp2onnx.correction.tree_space`), else float32; for models that do not
    record it (plain tree models, HyperDT's), the precision they compare in.
    Categorical codes count too: float32 holds every integer up to 2**24
    only, so a membership split with a code from 2**24 on would see a
    neighbouring code (2**24 + 1 reads as 2**24) as its own: float64.
    A plain model given points it must first project (not unit-ball Klein
    points) needs float64 too: in Python the projection of the user's float64
    points is rounded to the model's precision after it, not before.
    """
    needed = described.input_dtype or described.ensemble.compare_dtype
    space = described.space
    if described.input_dtype is None and not (
        space.geometry == "klein" and space.curvature == -1.0
    ):
        return "float64"
    categories = described.ensemble.categories
    if categories is not None and categories.largest_code() >= FLOAT32_EXACT_CODES:
        return "float64"
    return needed


#: Integer codes below this are exact in float32, and no larger integer rounds to one of them.
FLOAT32_EXACT_CODES = 1 << 24


def compile_model(
    described: Model,
    *,
    dtype: str,
    encoding: str,
    opset: int,
    name: str | None = None,
    legacy_only: bool = False,
) -> onnx.ModelProto:
    """Emit, check and return the ONNX model for an IR model.

    ``legacy_only`` restricts the tree operator to ai.onnx.ml opset 1 (for
    hosts that cannot import opset 5) and raises ValueError if it cannot.
    """
    space = described.space
    how = _encoding(encoding)
    if how.value_bound and described.metadata.get("task") == "anomaly":
        # Labels of isolation forests compare the summed path lengths with a
        # threshold, so the sums keep the exact encoding's order (bound 0).
        encoding, how = "exact", _encoding("exact")
    if described.ensemble.categories is not None and not how.categories:
        able = [e.name for e in ENCODINGS.values() if e.categories]
        raise UnsupportedModelError(
            f"the {encoding} encoding has no set-membership node for categorical splits; "
            f"use encoding={' or '.join(map(repr, able))}."
        )
    oblique = described.ensemble.projection is not None
    framed = described.ensemble.frames is not None  # rotation forests (emit/frames.py)
    remap = remap_frames if framed else remap_projection if oblique else remap_features
    ensemble, used = remap(described.ensemble)
    oblique = oblique or framed  # both compute float64 features of the Klein coordinates
    # Oblique isolation forests: a level-by-level walk, standard operators only.
    walk = (
        described.metadata.get("task") == "anomaly" and not how.float32 and walk_applies(ensemble)
    )
    plan = None
    if how.tree_operator and not walk:
        plan = plan_trees(ensemble, encoding, legacy_only=legacy_only)
    # Oblique splits project float64 Klein coordinates, whatever the encoding.
    compare = "float32" if how.float32 and not oblique else ensemble.compare_dtype
    if how.float32:
        _warn_if_compat_misroutes(described, dtype)
    k_dtype = projection_dtype(space, dtype, compare)

    g = GraphBuilder(opset)
    g.reserve("X", "label", "probabilities", "variable", "scores", "path_length")
    k = emit_projection(g, "X", space, used, input_dtype=dtype, dtype=k_dtype)
    scores: str | Guarded
    if walk:
        # Perfect binary tree tables where they stay small (the default forests),
        # else the node walk: the same routing and sums, bit for bit.
        walker = emit_perfect_walk if perfect_applies(ensemble) else emit_oblique_walk
        scores = walker(g, k, ensemble)
    else:
        emit_kwargs: dict[str, Any] = {"plan": plan} if plan else {}
        if ensemble.projection is not None:
            k, k_dtype, ensemble = emit_normals(g, k, k_dtype, ensemble)
        elif ensemble.frames is not None and how.name in FUSED_FRAMES:
            # Frame coordinates computed, routed and summed block by block.
            emit_kwargs["features"], ensemble = frame_chain(g, k_dtype, ensemble)
        elif ensemble.frames is not None:
            k, k_dtype, ensemble = emit_frames(g, k, k_dtype, ensemble)
        scores = how.emit_function()(g, k, k_dtype, ensemble, **emit_kwargs)
    out_dtype = "float32" if how.float32 else ensemble.sum_dtype
    extra_metadata: dict[str, str] = {}
    refine: Refine | None = None
    to_probabilities: Link | None = None
    if described.metadata.get("task") == "anomaly":  # isolation forests
        from ..emit.isolation import emit_anomaly_outputs

        assert isinstance(scores, str)  # value-bound encodings were replaced by exact above
        outputs = emit_anomaly_outputs(g, scores, described.metadata, out_dtype)
    else:
        # how.value_bound: sums in the runtime's order (hyp2onnx.emit.fast), whose
        # emitter returns them as Guarded; the other emitters return the name.
        if isinstance(scores, Guarded):
            extra_metadata = {"value_bound": repr(scores.bound), "tie_margin": repr(scores.margin)}
            refine, to_probabilities = scores.refine, scores.to_probabilities
            scores = scores.scores
        outputs = emit_outputs(
            g, scores, ensemble, out_dtype, refine=refine, to_probabilities=to_probabilities
        )

    graph = helper.make_graph(
        g.nodes,
        name or f"hyp2onnx_{described.estimator_class}",
        [helper.make_tensor_value_info("X", onnx_type(dtype), ["N", space.n_input_features])],
        outputs,
        g.initializers,
    )
    extra = [] if plan is None else [helper.make_opsetid(ML_DOMAIN, plan.ml_opset)]
    return finish_model(
        graph,
        described,
        opset=opset,
        extra_opsets=extra,
        encoding=encoding,
        dtype=dtype,
        extra_metadata=extra_metadata,
    )


def finish_model(
    graph: onnx.GraphProto,
    described: Model,
    *,
    opset: int,
    extra_opsets: list[onnx.OperatorSetIdProto],
    encoding: str,
    dtype: str,
    extra_metadata: dict[str, str] | None = None,
) -> onnx.ModelProto:
    """Wrap ``graph`` in a model with its opsets, doc string and metadata; check it."""
    opsets = [helper.make_opsetid("", opset), *extra_opsets]
    onnx_model = helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name="hyp2onnx",
        producer_version=_version,
        ir_version=helper.find_min_ir_version_for(opsets),
        doc_string=_doc_string(described, encoding),
    )
    _write_metadata(onnx_model, described, encoding, dtype, extra_metadata or {})
    check_model(onnx_model)
    return onnx_model


def compat_routes_exactly(described: Model, dtype: str) -> bool:
    """Whether the compat graph routes every input exactly as the model does.

    The legacy operator compares float32 values with float32 thresholds
    (rounded toward -inf for ``<=``, +inf for ``<``). That is exact when
    the model itself compares float32 values (scikit-learn, XGBoost), and
    for float64 comparisons only when the compared values are float32
    already: float32 input in the Klein ball at curvature -1 (the input is
    then the Klein coordinate). Oblique projections are float64 sums: never.
    """
    ensemble, space = described.ensemble, described.space
    if ensemble.projection is not None or ensemble.frames is not None:
        return False
    if ensemble.compare_dtype == "float32":
        return True
    return (
        dtype == "float32"
        and space.geometry == "klein"
        and curvature_radius(space.curvature) == 1.0
    )


def _warn_if_compat_misroutes(described: Model, dtype: str) -> None:
    if compat_routes_exactly(described, dtype):
        return
    if described.ensemble.projection is not None or described.ensemble.frames is not None:
        what = "compares each oblique split's float64 projection rounded to float32"
    else:
        what = (
            f"rounds the Klein coordinates that {described.backend} compares in float64 to "
            "float32 (exact only for float32 input in the Klein ball at curvature -1)"
        )
    warnings.warn(
        f"The compat encoding {what}: rows within a float32 step of a threshold may go the "
        "other way than in the Python model, changing labels and probabilities there. Use "
        "the default encoding ('fast'; or 'exact', 'standard') for the model's own routing.",
        CompatRoutingWarning,
        stacklevel=4,
    )


def check_model(onnx_model: onnx.ModelProto) -> None:
    """onnx's full check; a graph over 2 GiB is checked as written with external data."""
    if not needs_external_data(onnx_model):
        onnx.checker.check_model(onnx_model, full_check=True)
        return
    with tempfile.TemporaryDirectory(prefix="hyp2onnx-check-") as folder:
        path = Path(folder) / "model.onnx"
        _save_with_external_data(onnx_model, path, overwrite=True)
        onnx.checker.check_model(str(path), full_check=True)


def _doc_string(described: Model, encoding: str) -> str:
    space = described.space
    what = "labels and class probabilities" if described.ensemble.is_classifier else "values"
    if described.metadata.get("task") == "anomaly":
        what = "labels (+1 inlier, -1 outlier), anomaly scores and summed path lengths"
    if space.blocks is not None:
        return (
            f"{described.estimator_class} ({described.backend}, {described.ensemble.n_trees} "
            f"trees) exported by hyp2onnx {_version}. Input X: rows of {space.n_input_features} "
            f"columns, blocks {describe_blocks(space.blocks)} (categorical columns as integer "
            f"codes). Outputs: {what}. Encoding: {encoding}."
        )
    return (
        f"{described.estimator_class} ({described.backend}, {described.ensemble.n_trees} trees) "
        f"exported by hyp2onnx {_version}. Input X: points in the {space.geometry} model of "
        f"hyperbolic space of curvature {space.curvature:g}"
        + (f", timelike column {space.timelike_dim}" if space.geometry == "hyperboloid" else "")
        + f", {space.n_input_features} columns. Outputs: {what}. Encoding: {encoding}."
    )


def _write_metadata(
    onnx_model: onnx.ModelProto, described: Model, encoding: str, dtype: str, extra: dict[str, str]
) -> None:
    space, ensemble = described.space, described.ensemble
    classes = None if ensemble.classes is None else np.asarray(ensemble.classes).tolist()
    entries = {
        "input_geometry": space.geometry,
        "curvature": repr(float(space.curvature)),
        "timelike_dim": str(space.timelike_dim),
        "n_features_in": str(space.n_input_features),
        "backend": described.backend,
        "estimator_class": described.estimator_class,
        "task": described.metadata.get("task")
        or ("classification" if ensemble.is_classifier else "regression"),
        "classes": json.dumps(classes),
        "n_trees": str(ensemble.n_trees),
        "n_nodes": str(ensemble.n_nodes),  # for `inspect`: walked trees have no tree operator
        "encoding": encoding,
        "input_dtype": dtype,
        # What the verification tolerance follows from (hyp2onnx.verify.default_tolerance).
        "sum_dtype": ensemble.sum_dtype,
        "post_transform": ensemble.post_transform,
        "version": _version,
    }
    if space.blocks is not None:
        entries["blocks"] = blocks_to_json(space.blocks)
    entries.update({k: v for k, v in described.metadata.items() if k not in entries})
    # value_bound (fast encoding): how far any raw score may be from the exact
    # one; tie_margin: rows whose top two probabilities are closer get exact scores.
    entries.update(extra)
    for key, value in entries.items():
        prop = onnx_model.metadata_props.add()
        prop.key, prop.value = _META_PREFIX + key, value


def read_metadata(model_or_path: onnx.ModelProto | str | os.PathLike) -> dict[str, Any]:
    """The hyp2onnx metadata of an exported model, with values parsed.

    Raises :class:`ValueError` if the model carries no hyp2onnx metadata.
    """
    onnx_model = (
        model_or_path
        if isinstance(model_or_path, onnx.ModelProto)
        else onnx.load(os.fspath(model_or_path), load_external_data=False)
    )
    raw = {
        p.key[len(_META_PREFIX) :]: p.value
        for p in onnx_model.metadata_props
        if p.key.startswith(_META_PREFIX)
    }
    if not raw:
        raise ValueError("this ONNX model has no hyp2onnx metadata (was it exported by hyp2onnx?)")
    parsed: dict[str, Any] = dict(raw)
    parsed["curvature"] = float(raw["curvature"])
    for key in ("timelike_dim", "n_features_in", "n_trees"):
        parsed[key] = int(raw[key])
    try:
        parsed["classes"] = json.loads(raw["classes"])
        parsed["blocks"] = blocks_from_json(raw["blocks"]) if "blocks" in raw else None
    except RecursionError:
        from ..errors import DamagedMetadataError

        raise DamagedMetadataError(
            "this ONNX model's hyp2onnx metadata (classes or blocks) is nested too deeply to "
            "read: the file is damaged or was not written by hyp2onnx"
        ) from None
    for key in ("value_bound", "tie_margin"):
        if key in raw:
            parsed[key] = float(raw[key])
    parsed["doc_string"] = onnx_model.doc_string
    return parsed


def needs_external_data(onnx_model: onnx.ModelProto) -> bool:
    """Whether the model is too large for one protobuf file (2 GiB) and needs external data."""
    return onnx_model.ByteSize() > PROTOBUF_LIMIT


def external_data_path(path: str | os.PathLike) -> Path:
    """Where the tensors of ``path`` go when it is written with external data: ``PATH.data``."""
    path = Path(path)
    return path.with_name(path.name + ".data")


def save_onnx(
    model: Any,
    path: str | os.PathLike,
    *,
    overwrite: bool = True,
    external_data: bool | None = None,
    **to_onnx_kwargs: Any,
) -> onnx.ModelProto:
    """Export with :func:`to_onnx` and write ``path`` atomically.

    The file appears complete or not at all: it is written to a temporary
    file in the same folder and renamed. With ``overwrite=False`` an
    existing ``path`` raises :class:`FileExistsError`.

    A graph over 2 GiB cannot be one protobuf: it is written as ``path``
    plus ``PATH.data`` holding its tensors, initializers and tensor
    attributes alike (onnx's external data; ``onnx.load(path)`` and
    onnxruntime's ``InferenceSession(path)`` read both). ``external_data``
    ``None`` decides by size; ``True`` or ``False`` force it. The data file
    is moved into place first, and on any failure neither file is left.
    """
    onnx_model = model if isinstance(model, onnx.ModelProto) else to_onnx(model, **to_onnx_kwargs)
    if external_data is None:
        external_data = needs_external_data(onnx_model)
    if not external_data:
        with atomic_write(path, overwrite=overwrite) as f:
            f.write(onnx_model.SerializeToString())
        return onnx_model
    _save_with_external_data(onnx_model, Path(path), overwrite=overwrite)
    return onnx_model


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


def _save_with_external_data(onnx_model: onnx.ModelProto, path: Path, *, overwrite: bool) -> None:
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
