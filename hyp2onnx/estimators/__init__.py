"""Hyperbolic tree estimators with scikit-learn's API.

The classes are imported on first use (module ``__getattr__``): each
backend's estimators live in that backend's module, listed in
`_registry`, so using scikit-learn forests never imports XGBoost.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import _registry
from ._registry import backend_for, estimator_class, register_backend

#: Estimators that belong to no single backend, and their modules.
_OWN = {
    "HyperbolicTreeModel": "_base",
    "HyperbolicEstimator": "_base",
    "HyperbolicIsolationForest": "_isolation",
    "HyperbolicRotationForestClassifier": "_rotation",
    "HyperbolicRotationForestRegressor": "_rotation",
    "HyperbolicMLPClassifier": "_mlp",
    "HyperbolicMLPRegressor": "_mlp",
    "RegionTree": "_regions",
}

#: What reads a fitted MLP as regions, beside its estimator: the builder and explain's result.
_REGIONS = ("region_tree", "Region")

__all__ = sorted(
    [
        "BACKENDS",
        "backend_for",
        "register_backend",
        "own_types",
        *_REGIONS,
        *_OWN,
        *(name for spec in _registry.BACKENDS for name in spec.estimators),
    ]
)


def own_types() -> list[type]:
    """The estimators that belong to no backend, and the classes their fitted state holds.

    What a ``.skops`` file of one of them may contain beyond skops' default
    types (the CLI's trusted list; the backends add their own).
    """
    from sklearn.neural_network._stochastic_optimizers import AdamOptimizer, SGDOptimizer

    from ._isolation import IsolationTree

    # a network fitted by a stochastic solver keeps scikit-learn's optimiser
    return [__getattr__(name) for name in _OWN] + [IsolationTree, AdamOptimizer, SGDOptimizer]


def __getattr__(name: str) -> Any:
    if name == "BACKENDS":  # read when asked: a package may have registered its own since
        return _registry.BACKENDS
    if name in _REGIONS:
        return getattr(importlib.import_module(f"{__name__}._regions"), name)
    if name in _OWN:
        return getattr(importlib.import_module(f"{__name__}.{_OWN[name]}"), name)
    try:
        return estimator_class(name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
