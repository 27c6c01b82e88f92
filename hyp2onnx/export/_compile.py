"""Compile a fitted hyperbolic tree model into one ONNX graph.

The graph takes raw points ``X`` [N, D] in the model's input geometry,
projects the columns the trees read to Klein coordinates, evaluates the
ensemble and returns ``label`` + ``probabilities`` (classifiers) or
``variable`` (regressors). Which graph a model gets is decided in
`hyp2onnx.emit.strategy.choose_graph`.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import onnx
from onnx import helper

from ..emit import Encoding
from ..emit import encoding as _encoding
from ..emit._graph import ML_DOMAIN, GraphBuilder
from ..emit.fast import Guarded, ShortBatches
from ..emit.isolation import emit_anomaly_outputs
from ..emit.outputs import emit_outputs
from ..emit.projection import emit_projection, emit_whole_rows
from ..emit.strategy import GraphOverrides, choose_graph, emit_trees
from ..errors import CompatRoutingWarning, DamagedModelError, UnsupportedModelError, warn_user
from ..estimators import backend_for
from ..geometry import GEOMETRIES, check_timelike_dim, curvature_radius
from ..ir import Ensemble, InputSpace, Model, Task
from . import hyperdt
from ._model_file import (
    finish_model,
)

#: ai.onnx opset used unless ``target_opset`` says otherwise.
DEFAULT_OPSET = 18
#: The oldest ai.onnx opset hyp2onnx emits (the newest is `max_opset`).
MIN_OPSET = 13


def check_opset(target_opset: Any) -> int:
    """``target_opset`` (None: `DEFAULT_OPSET`) if hyp2onnx can emit it, else ValueError.

    Every opset from `MIN_OPSET` to the newest the installed onnx
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
    """The `Model` of a hyperbolic estimator or a plain Klein model.

    A plain fitted scikit-learn / XGBoost / LightGBM tree model trained on
    unit-ball Klein coordinates needs ``input_geometry`` (and ``curvature``,
    ``timelike_dim`` if not the defaults); its thresholds are used as they
    are, not corrected.
    """
    if is_hyperbolic_estimator(model):
        stated = {
            "input_geometry": input_geometry,
            "curvature": curvature,
            "timelike_dim": timelike_dim,
        }
        for key, value in stated.items():
            if value is not None and value != getattr(model, key):
                raise ValueError(
                    f"{key}={value!r} contradicts the model's own {key}={getattr(model, key)!r}; "
                    "leave it out for hyperbolic estimators."
                )
        return model.to_ir()
    return _plain_model(
        model, input_geometry=input_geometry, curvature=curvature, timelike_dim=timelike_dim
    )


def is_hyperbolic_estimator(model: Any) -> bool:
    """Whether ``model`` is one of hyp2onnx's hyperbolic tree estimators."""
    # Imported here, not at the top: the estimators' base imports scikit-learn, which the
    # scoring commands (inspect, predict), reaching this module through the export
    # package, must not load (tests/test_layout.py).
    from ..estimators._base import HyperbolicTreeModel

    return isinstance(model, HyperbolicTreeModel)


def _plain_model(
    model: Any, *, input_geometry: str | None, curvature: float | None, timelike_dim: int | None
) -> Model:
    """The IR model of a plain tree model trained on unit-ball Klein coordinates."""
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
    except DamagedModelError:
        raise  # fitted, but damaged: its own message says where
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
    warn_user(
        f"{type(model).__name__} is exported with its own (Euclidean) thresholds; train a "
        "hyp2onnx estimator to get Einstein-midpoint thresholds."
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
    return Model(
        ensemble=ensemble,
        space=space,
        backend=backend.name,
        estimator_class=type(model).__name__,
    )


def compile_trees(
    model: Any,
    *,
    dtype: str | None,
    encoding: str,
    opset: int,
    name: str | None = None,
    **stated: Any,
) -> onnx.ModelProto:
    """The graph of a hyperbolic tree estimator or a plain Klein tree model (`describe`),
    its input dtype the one the model needs unless ``dtype`` says otherwise; the graph
    itself is chosen by `hyp2onnx.emit.strategy.choose_graph`."""
    spec = _encoding(encoding)
    ir_model = describe(model, **stated)
    graph_dtype = _checked_input_dtype(ir_model, dtype, spec)
    return compile_model(ir_model, dtype=graph_dtype, encoding=encoding, opset=opset, name=name)


def compile_hyperdt(model: Any, /, **options: Any) -> onnx.ModelProto:
    """The graph of a model of the original HyperDT, which records its own geometry
    (``options``: `compile_trees`'s, the geometry left unstated)."""
    stated = [options.pop(key, None) for key in ("input_geometry", "curvature", "timelike_dim")]
    _encoding(options["encoding"])
    _no_stated_geometry(model, *stated)
    return _hyperdt_to_onnx(model, **options)


def _hyperdt_to_onnx(
    model: Any, *, dtype: str | None, encoding: str, opset: int, name: str | None
) -> onnx.ModelProto:
    """A HyperDT model's graph, its input float64 unless asked otherwise (with a warning)."""
    # The dtype rule of plain models: the precision they compare in. HyperDT
    # compares float64 products and keeps no training rows to show that
    # float32 input routes them alike (far points a few 1e-7 apart in angle
    # do not), so float64.
    if dtype == "float32":
        warn_user(
            "HyperDT compares its splits in float64: float32 input moves points near "
            "a split's plane (far points close in angle) to its other side, and labels "
            "there will differ from HyperDT's on float64 input. Use dtype='float64' "
            "(the default here)."
        )
    return hyperdt.compile_hyperdt(
        model, dtype=dtype or "float64", encoding=encoding, opset=opset, name=name
    )


def _checked_input_dtype(ir_model: Model, dtype: str | None, spec: Encoding) -> str:
    """``dtype``, or the one the model needs (None); warns where float32 loses splits."""
    needed = input_dtype(ir_model)
    if dtype is None:
        dtype = needed
    elif dtype == "float32" and needed == "float64":
        warn_user(
            "float32 cannot separate some of this model's splits (points far from the "
            "origin, or categorical codes from 2**24 on): float32 input loses them, and "
            "labels near those splits will differ "
            "from the model's on float64 input. Use dtype='float64' (the default here)."
        )
    if spec.float32 and needed == "float64":
        warn_user(
            f"the {spec.name} encoding compares in float32, which cannot separate some of this "
            "model's splits (points far from the origin): labels near them will differ from "
            "the model's. Use the default encoding ('fast'), or 'exact' or 'standard'."
        )
    return dtype


def _no_stated_geometry(model: Any, *stated: Any) -> None:
    if any(v is not None for v in stated):
        raise ValueError(
            f"{type(model).__name__} (HyperDT) records its own geometry: leave out "
            "input_geometry, curvature and timelike_dim."
        )


def input_dtype(ir_model: Model) -> Literal["float32", "float64"]:
    """The graph input dtype that keeps what the model separates.

    float64 if float32 cannot separate some split's two nearest training
    rows (hyperbolic estimators record this when fitted, see
    `hyp2onnx.correction.tree_space`), else float32; for models that do not
    record it (plain tree models, HyperDT's), the precision they compare in.
    Categorical codes count too: float32 holds every integer up to ``2**24``
    only, so a membership split with a code from ``2**24`` on would see a
    neighbouring code (``2**24 + 1`` reads as ``2**24``) as its own: float64.
    A plain model given points it must first project (not unit-ball Klein
    points) needs float64 too: in Python the projection of the user's float64
    points is rounded to the model's precision after it, not before.
    """
    needed = ir_model.input_dtype or ir_model.ensemble.compare_dtype
    space = ir_model.space
    if ir_model.input_dtype is None and not (space.geometry == "klein" and space.curvature == -1.0):
        return "float64"
    categories = ir_model.ensemble.categories
    if categories is not None and categories.largest_code() >= FLOAT32_EXACT_CODES:
        return "float64"
    return needed


#: Integer codes below this are exact in float32, and no larger integer rounds to one of them.
FLOAT32_EXACT_CODES = 1 << 24


def compile_model(
    ir_model: Model,
    *,
    dtype: str,
    encoding: str,
    opset: int,
    name: str | None = None,
    legacy_only: bool = False,
    overrides: GraphOverrides | None = None,
) -> onnx.ModelProto:
    """Emit, check and return the ONNX model for an IR model.

    The graph is the one `hyp2onnx.emit.strategy.choose_graph` chooses
    for ``encoding`` (with ``overrides``, `GraphOverrides`: the variants tests and
    benchmarks build). ``legacy_only`` restricts the tree operator to ai.onnx.ml
    opset 1 (for hosts that cannot import opset 5) and raises ValueError if it cannot.
    """
    strategy = choose_graph(
        ir_model, encoding=encoding, input_dtype=dtype, legacy_only=legacy_only, overrides=overrides
    )
    if strategy.encoding.float32:
        _warn_if_compat_misroutes(ir_model, dtype)
    space = ir_model.space
    builder = GraphBuilder(opset)
    builder.reserve("X", *GRAPH_OUTPUTS)
    k_dtype = strategy.klein_dtype
    if strategy.ones_column is None:
        k = emit_projection(builder, "X", space, strategy.used, input_dtype=dtype, dtype=k_dtype)
    else:
        # x_0 by Slice: X e_0 (a MatMul) measured no faster here at d = 16 and 0.5 to 1 us
        # slower a single-row call, and OpenVINO may run MatMul in bfloat16.
        k = emit_whole_rows(builder, "X", space, input_dtype=dtype, dtype=k_dtype, matmul=False)
    scores, ensemble = emit_trees(builder, k, k_dtype, strategy)
    out_dtype = "float32" if strategy.encoding.float32 else ensemble.sum_dtype
    if strategy.task == Task.ANOMALY:
        assert isinstance(scores, str)  # choose_graph gives isolation forests exact sums
        outputs = emit_anomaly_outputs(builder, scores, ir_model.metadata, out_dtype)
        bounds: dict[str, str] = {}
    else:
        outputs, bounds = _model_outputs(builder, scores, ensemble, out_dtype)
    graph = builder.points_graph(
        name or f"hyp2onnx_{ir_model.estimator_class}", dtype, space.n_input_features, outputs
    )
    plan = strategy.operator
    return finish_model(
        graph,
        ir_model,
        opset=opset,
        extra_opsets=[] if plan is None else [helper.make_opsetid(ML_DOMAIN, plan.ml_opset)],
        encoding=strategy.encoding.name,
        dtype=dtype,
        extra_metadata=bounds,
    )


#: Every name a graph may output (reserved, so that no node takes one).
GRAPH_OUTPUTS = ("label", "probabilities", "variable", "scores", "path_length")


def _model_outputs(
    builder: GraphBuilder, scores: str | Guarded | ShortBatches, ensemble: Ensemble, dtype: str
) -> tuple[list[onnx.ValueInfoProto], dict[str, str]]:
    """Labels and probabilities, or values, and the fast encoding's bound and margin.

    The fast encoding's emitter returns its scores as
    `Guarded` (sums in the runtime's order, their
    bound and the label guard), or as `ShortBatches` (those for long
    batches, the exact scores for short ones: `_short_or_long`); the others
    return the scores' name.
    """
    if isinstance(scores, ShortBatches):
        return _short_or_long(builder, scores, ensemble, dtype)
    if not isinstance(scores, Guarded):
        return emit_outputs(builder, scores, ensemble, dtype), {}
    bounds = {"value_bound": repr(scores.bound), "tie_margin": repr(scores.margin)}
    if scores.rounded_to is not None:
        # double sums rounded once to this type; value_bound covers the rounding
        bounds["values_rounded_to"] = scores.rounded_to
    outputs = emit_outputs(
        builder,
        scores.scores,
        ensemble,
        dtype,
        refine=scores.refine,
        to_probabilities=scores.to_probabilities,
    )
    return outputs, bounds


def _short_or_long(
    builder: GraphBuilder, split: ShortBatches, ensemble: Ensemble, dtype: str
) -> tuple[list[onnx.ValueInfoProto], dict[str, str]]:
    """The outputs behind an ``If`` on the batch size: up to ``split.rows`` rows from the
    exact scores, longer batches from the fast scores and their guard.

    Each branch builds the whole of its outputs (link, guard, labels), so a short
    batch runs none of the fast encoding's nodes. The metadata records the
    crossover and each side's bound: ``value_bound`` and ``tie_margin`` are the
    long batches' (the larger), ``short_batch_value_bound`` the short ones' (0).
    """
    rows = builder.n_rows("short_batch", split.k)
    limit = builder.const("short_batch", "short_batch_rows", [split.rows], np.int64)
    short = builder.op("short_batch", "LessOrEqual", [rows, limit])
    branches: list[onnx.GraphProto] = []
    bounds: dict[str, str] = {}
    infos: list[onnx.ValueInfoProto] = []
    for label, make in (("short_batch", split.short), ("long_batch", split.long)):
        branch = builder.child()
        infos, bounds = _model_outputs(branch, make(branch), ensemble, dtype)
        outputs = []
        for info in infos:  # the graph's output names belong to the If's outputs
            inner = branch.rename(info.name, branch.unique(f"{label}/{info.name}"))
            elem = info.type.tensor_type.elem_type
            outputs.append(helper.make_tensor_value_info(inner, elem, None))
        branches.append(helper.make_graph(branch.nodes, label, [], outputs))
    builder.op(
        "short_batch",
        "If",
        [short],
        outputs=[info.name for info in infos],
        then_branch=branches[0],
        else_branch=branches[1],
    )
    bounds |= {"short_batch_rows": str(split.rows), "short_batch_value_bound": repr(0.0)}
    return infos, bounds


def compat_routes_exactly(ir_model: Model, dtype: str) -> bool:
    """Whether the compat graph routes every input exactly as the model does.

    The legacy operator compares float32 values with float32 thresholds
    (rounded toward -inf for ``<=``, +inf for ``<``). That is exact when
    the model itself compares float32 values (scikit-learn, XGBoost), and
    for float64 comparisons only when the compared values are float32
    already: float32 input in the Klein ball at curvature -1 (the input is
    then the Klein coordinate). Oblique projections are float64 sums: never.
    """
    ensemble, space = ir_model.ensemble, ir_model.space
    if ensemble.projection is not None or ensemble.frames is not None:
        return False
    if ensemble.compare_dtype == "float32":
        return True
    return (
        dtype == "float32"
        and space.geometry == "klein"
        and curvature_radius(space.curvature) == 1.0
    )


def _warn_if_compat_misroutes(ir_model: Model, dtype: str) -> None:
    if compat_routes_exactly(ir_model, dtype):
        return
    if ir_model.ensemble.projection is not None or ir_model.ensemble.frames is not None:
        what = "compares each oblique split's float64 projection rounded to float32"
    else:
        what = (
            f"rounds the Klein coordinates that {ir_model.backend} compares in float64 to "
            "float32 (exact only for float32 input in the Klein ball at curvature -1)"
        )
    warn_user(
        f"The compat encoding {what}: rows within a float32 step of a threshold may go the "
        "other way than in the Python model, changing labels and probabilities there. Use "
        "the default encoding ('fast'; or 'exact', 'standard') for the model's own routing.",
        CompatRoutingWarning,
    )
