"""Every kind of model hyp2onnx exports, and the one door to its graph: `to_onnx`.

A `ModelKind` brings what differs from one kind of model to another:

- ``handles``: whether a model is of this kind (`kind_for` asks the kinds of
  `MODEL_KINDS` in order);
- ``geometry``: where the geometry of the input points comes from:
  ``"recorded"`` by the model (hyperbolic estimators, networks; a stated one
  must agree), ``"stated"`` by the caller (plain tree models trained on
  unit-ball Klein coordinates), ``"own"`` (HyperDT's models: hyperboloid
  points, nothing may be stated);
- ``compile``: its graph (trees: `hyp2onnx.emit.strategy.choose_graph`
  decides which; networks and region trees: `._network`; HyperDT:
  `hyp2onnx.export.hyperdt`);
- ``check``: refuse, before any export, a model that cannot be exported
  (unfitted, or a HyperDT model hyp2onnx cannot reproduce);
- ``python_outputs``: the model's own answers on the graph's input rows,
  named as the graph's outputs: what `hyp2onnx.verify` compares.

`to_onnx`, `verify` and the command line reach a model through its kind and
never test which kind it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx

from .._atomic import atomic_write
from ..estimators import backend_for
from ..geometry import to_klein
from ..ir import Task
from . import hyperdt
from ._compile import check_opset, compile_hyperdt, compile_trees, is_hyperbolic_estimator
from ._metadata import GraphMetadata
from ._model_file import needs_external_data, save_with_external_data
from ._network import compile_network, is_network

__all__ = ["MODEL_KINDS", "Kind", "ModelKind", "kind_for", "kind_of", "save_onnx", "to_onnx"]

Kind = Literal["hyperbolic", "plain", "hyperdt", "network"]

#: The model's own outputs on rows, by the graph's output names.
Outputs = dict[str, np.ndarray]


@dataclass(frozen=True)
class ModelKind:
    """What hyp2onnx knows of one kind of model (see the module's docstring)."""

    name: Kind
    geometry: Literal["recorded", "stated", "own"]
    handles: Callable[[Any], bool]
    compile: Callable[..., onnx.ModelProto]
    check: Callable[[Any], None]
    python_outputs: Callable[[Any, np.ndarray, GraphMetadata], Outputs]


def _fitted(model: Any) -> None:
    """scikit-learn's NotFittedError for an unfitted estimator (a region tree is built
    from a fitted network and has no ``fit`` to call)."""
    if hasattr(model, "fit"):
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(model)


def _readable_hyperdt(model: Any) -> None:
    hyperdt.read_hyperdt(model)  # UnsupportedModelError where hyp2onnx cannot reproduce it


def _is_plain(model: Any) -> bool:
    backend_for(model)  # raises UnsupportedModelError, naming what is supported
    return True


@contextmanager
def _trees_in_order(model: Any) -> Iterator[None]:
    """Make a scikit-learn forest add its trees in tree order while it answers.

    With ``n_jobs`` > 1 a forest adds tree probabilities in the order its
    threads finish, so repeated calls differ in the last bit; the graph
    reproduces the ``n_jobs=1`` order (tree order).
    """
    native = getattr(model, "estimator_", model)
    n_jobs = getattr(native, "n_jobs", None)
    if n_jobs in (None, 1) or not hasattr(native, "estimators_"):
        yield
        return
    native.n_jobs = 1
    try:
        yield
    finally:
        native.n_jobs = n_jobs


def _answers(model: Any, points: np.ndarray, task: Task, label: Any = None) -> Outputs:
    """``predict`` (and ``predict_proba``) of an estimator, or an isolation forest's
    labels, scores and path lengths; ``label`` overrides how labels are read."""
    with _trees_in_order(model):
        if task == Task.ANOMALY:
            return {
                "label": np.asarray(model.predict(points)),
                "scores": np.asarray(model.score_samples(points)),
                "path_length": np.asarray(model.path_length(points)),
            }
        if task == Task.CLASSIFICATION:
            return {
                "label": np.asarray(model.predict(points) if label is None else label(points)),
                "probabilities": np.asarray(model.predict_proba(points)),
            }
        return {"variable": np.asarray(model.predict(points))}


def _estimator_outputs(model: Any, X: np.ndarray, metadata: GraphMetadata) -> Outputs:
    return _answers(model, X, metadata["task"])


def _plain_outputs(model: Any, X: np.ndarray, metadata: GraphMetadata) -> Outputs:
    """A plain model answers on the Klein coordinates of the graph's points; its backend
    knows its labels' shape (CatBoost's are ``(n, 1)``)."""
    points = to_klein(
        X, metadata["input_geometry"], metadata["curvature"], metadata["timelike_dim"]
    )
    labels = backend_for(model).labels
    return _answers(model, points, metadata["task"], label=lambda k: labels(model, k))


def _network_outputs(model: Any, X: np.ndarray, metadata: GraphMetadata) -> Outputs:
    """A network's answers; a region tree's also say which rows its regions cover."""
    out = _answers(model, X, metadata["task"])
    if hasattr(model, "covered"):
        out["covered"] = np.asarray(model.covered(X))
    return out


def _hyperdt_outputs(model: Any, X: np.ndarray, metadata: GraphMetadata) -> Outputs:
    return hyperdt.hyperdt_outputs(model, X)


#: The kinds, in the order `kind_for` asks them.
MODEL_KINDS: tuple[ModelKind, ...] = (
    ModelKind("network", "recorded", is_network, compile_network, _fitted, _network_outputs),
    ModelKind(
        "hyperdt", "own", hyperdt.handles, compile_hyperdt, _readable_hyperdt, _hyperdt_outputs
    ),
    ModelKind(
        "hyperbolic",
        "recorded",
        is_hyperbolic_estimator,
        compile_trees,
        _fitted,
        _estimator_outputs,
    ),
    ModelKind("plain", "stated", _is_plain, compile_trees, _fitted, _plain_outputs),
)


def kind_for(model: Any) -> ModelKind:
    """The kind of ``model``; [`UnsupportedModelError`][hyp2onnx.errors.UnsupportedModelError]
    if none (the error lists the supported model classes)."""
    return next(kind for kind in MODEL_KINDS if kind.handles(model))


def kind_of(model: Any) -> Kind:
    """The name of ``model``'s kind (`kind_for`)."""
    return kind_for(model).name


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
    model needs (`input_dtype`): float64 for a model whose splits
    float32 cannot resolve (points far from the origin), float32 otherwise.
    ``encoding`` is one of `hyp2onnx.emit.ENCODINGS`: ``"fast"``
    (default) routes every row as the Python model does and gives its labels
    exactly, exact ties included, with values within a stated bound (the
    runtime adds the trees in its own order; the bound is in the graph's
    metadata, see `hyp2onnx.emit.fast`); ``"exact"`` also reproduces
    its values bit for bit (probabilities: bit for bit for float64 sums
    without a link function, within 1e-15 with a logistic or softmax, 1e-6
    for XGBoost), slower on many cores; ``"compat"``
    uses the legacy opset-1 operator with float32 thresholds and sums for
    older runtimes (a `CompatRoutingWarning` says
    when it cannot route exactly); ``"standard"`` gives the exact outputs
    without any ai.onnx.ml operator (see ``docs/export.md``). ``target_opset``
    is the ai.onnx opset (`check_opset`: 13 to the newest the installed
    onnx knows). The other keywords are for plain Klein models (`describe`).
    Models of the original HyperDT (``hyperdt`` 0.0.3) are accepted too and
    reproduced as HyperDT computes them (`hyp2onnx.hyperdt`). The model's
    kind (`kind_for`) builds the graph.
    """
    if dtype not in (None, "float32", "float64"):
        raise ValueError(f"dtype must be 'float32', 'float64' or None, got {dtype!r}.")
    return kind_for(model).compile(
        model,
        dtype=dtype,
        encoding=encoding,
        opset=check_opset(target_opset),
        name=name,
        input_geometry=input_geometry,
        curvature=curvature,
        timelike_dim=timelike_dim,
    )


def save_onnx(
    model: Any,
    path: str | os.PathLike,
    *,
    overwrite: bool = True,
    external_data: bool | None = None,
    **to_onnx_kwargs: Any,
) -> onnx.ModelProto:
    """Export with `to_onnx` and write ``path`` atomically.

    The file appears complete or not at all: it is written to a temporary
    file in the same folder and renamed. With ``overwrite=False`` an
    existing ``path`` raises `FileExistsError`.

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
    save_with_external_data(onnx_model, Path(path), overwrite=overwrite)
    return onnx_model
