"""Every training backend, one line each. Add a backend here, nowhere else.

A line says what hyp2onnx must know before importing the backend, by
keyword: the module (``._name`` under `hyp2onnx.estimators`, or a package's
own module in full, added with `register_backend`) that defines the backend class and
its hyperbolic estimators, the library its native models come from (the
top-level package of their classes), the pip extra that installs it, the
estimator classes the module defines, the native model files its
backend reads, and what the command line must know about the library
before importing it (whether a damaged model can crash its process, the
exception it refuses a damaged model with). Nothing here imports a library: a backend module is imported
the first time one of its estimators or models is used, so ``import
hyp2onnx`` costs no XGBoost, LightGBM or CatBoost.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from ..errors import MissingExtraError, UnsupportedModelError
from ._interface import Backend

__all__ = [
    "BACKENDS",
    "BackendSpec",
    "backend_for",
    "estimator_class",
    "file_backend",
    "fragile_libraries",
    "model_suffixes",
    "refusing_library",
    "register_backend",
]


@dataclass(frozen=True, kw_only=True)
class BackendSpec:
    """One backend, as the registry lists it (see the module doc), by keyword."""

    module: str  #: ``._name`` under `hyp2onnx.estimators`, or a package's own module in full
    backend: str  #: name of the `Backend` subclass in ``module``
    library: str
    extra: str | None  #: None: the library is a core dependency
    estimators: tuple[str, ...]
    formats: tuple[str, ...] = ()  #: native model-file suffixes, read by ``Backend.load_file``
    #: The library as messages write it ("XGBoost"); empty: ``library``.
    title: str = ""
    #: A damaged model can crash the library's process: its native files are read in a
    #: child first (``Backend.check_file``), and so are pickles and ``.skops`` files that
    #: may hold its models, whose models the child hands to ``Backend.exercise``.
    crashes_on_damage: bool = False
    #: The exception the library raises refusing a damaged model of its own, as
    #: ``module.QualName`` of its class (where the library defines it, maybe a private module).
    refusal_error: str | None = None

    @property
    def shown(self) -> str:
        """The library's name in messages."""
        return self.title or self.library

    def load(self, what: str | None = None) -> type[Backend]:
        """The backend class, importing its module (and library) now.

        Raises [`MissingExtraError`][hyp2onnx.errors.MissingExtraError] naming the extra if the library is
        not installed; ``what`` is the thing that needed it, for the message.
        """
        try:
            module = importlib.import_module(self.module, package=__package__)
        except ModuleNotFoundError as exc:
            if self.extra is None or (exc.name or "").partition(".")[0] != self.library:
                raise
            raise MissingExtraError(
                f"{what or self.library + ' models'} need{'s' if what else ''} the "
                f"{self.library} package, which is not installed: "
                f"pip install 'hyp2onnx[{self.extra}]'"
            ) from exc
        return getattr(module, self.backend)


BACKENDS: tuple[BackendSpec, ...] = (
    BackendSpec(
        module="._sklearn",
        backend="SklearnBackend",
        library="sklearn",
        extra=None,
        estimators=(
            "HyperbolicDecisionTreeClassifier",
            "HyperbolicDecisionTreeRegressor",
            "HyperbolicRandomForestClassifier",
            "HyperbolicRandomForestRegressor",
        ),
    ),
    BackendSpec(
        module="._xgboost",
        backend="XGBoostBackend",
        library="xgboost",
        extra="xgboost",
        estimators=("HyperbolicXGBClassifier", "HyperbolicXGBRegressor"),
        formats=(".json", ".ubj"),
        title="XGBoost",
        crashes_on_damage=True,
    ),
    BackendSpec(
        module="._lightgbm",
        backend="LightGBMBackend",
        library="lightgbm",
        extra="lightgbm",
        estimators=("HyperbolicLGBMClassifier", "HyperbolicLGBMRegressor"),
        formats=(".txt",),
        title="LightGBM",
        crashes_on_damage=True,
    ),
    BackendSpec(
        module="._householder",
        backend="HouseholderBackend",
        library="hyp2onnx",
        extra=None,
        estimators=("HyperbolicHouseholderTreeClassifier", "HyperbolicHouseholderTreeRegressor"),
    ),
    BackendSpec(
        module="._catboost",
        backend="CatBoostBackend",
        library="catboost",
        extra="catboost",
        estimators=("HyperbolicCatBoostClassifier", "HyperbolicCatBoostRegressor"),
        formats=(".cbm",),
        title="CatBoost",
        crashes_on_damage=True,
        refusal_error="_catboost.CatBoostError",
    ),
)


def register_backend(spec: BackendSpec) -> None:
    """Add a backend defined outside hyp2onnx (its ``module`` an absolute name): the
    second step of adding a backend, for a package that cannot add its line above.

    Fitting and exporting its models then find it (`backend_for`, `estimator_class`);
    a backend registered twice, or one naming an estimator or library already
    registered, is refused.
    """
    global BACKENDS
    if spec.module.startswith("."):
        raise ValueError(
            f"a backend registered from outside names its module in full, got {spec.module!r}"
        )
    taken = {name for other in BACKENDS for name in other.estimators}
    clash = sorted(taken & set(spec.estimators))
    if clash or any(other.library == spec.library for other in BACKENDS):
        raise ValueError(
            f"the backend {spec.backend} clashes with a registered one: "
            f"{', '.join(clash) if clash else 'library ' + spec.library}"
        )
    BACKENDS = (*BACKENDS, spec)


def estimator_class(name: str) -> type:
    """The hyperbolic estimator class ``name``, importing its backend module."""
    for spec in BACKENDS:
        if name in spec.estimators:
            backend = spec.load(name)
            return getattr(importlib.import_module(backend.__module__), name)
    raise AttributeError(name)


def file_backend(suffix: str) -> BackendSpec | None:
    """The backend that reads native model files ending in ``suffix``, or None."""
    return next((spec for spec in BACKENDS if suffix.lower() in spec.formats), None)


def model_suffixes() -> dict[str, BackendSpec]:
    """Every native model-file suffix registered now, and its backend."""
    return {suffix: spec for spec in BACKENDS for suffix in spec.formats}


def fragile_libraries() -> tuple[BackendSpec, ...]:
    """The backends whose library a damaged model can crash (``crashes_on_damage``)."""
    return tuple(spec for spec in BACKENDS if spec.crashes_on_damage)


def refusing_library(exc: BaseException) -> BackendSpec | None:
    """The backend whose library raised ``exc`` refusing a damaged model, or None."""
    name = f"{type(exc).__module__}.{type(exc).__qualname__}"
    return next((spec for spec in BACKENDS if spec.refusal_error == name), None)


def backend_for(estimator: Any) -> Backend:
    """The backend for ``estimator``, or an error listing what is supported.

    Only the backend of the estimator's own library is imported.
    """
    library = type(estimator).__module__.partition(".")[0]
    for spec in BACKENDS:
        if spec.library == library:
            backend = spec.load()
            if backend.handles(estimator):
                return backend()
    names = []
    for spec in BACKENDS:
        try:
            names += spec.load().supported()
        except MissingExtraError:
            names.append(f"{spec.library} models (pip install 'hyp2onnx[{spec.extra}]')")
    raise UnsupportedModelError(
        f"{type(estimator).__module__}.{type(estimator).__name__} is not a supported tree "
        f"model. Supported: {', '.join(names)}."
    )
