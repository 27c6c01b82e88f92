"""Hyperbolic tree estimators with scikit-learn's API."""

from ._base import HyperbolicTreeModel
from ._registry import BACKENDS, backend_for
from ._sklearn_models import (
    HyperbolicDecisionTreeClassifier,
    HyperbolicDecisionTreeRegressor,
    HyperbolicEstimator,
    HyperbolicRandomForestClassifier,
    HyperbolicRandomForestRegressor,
)

__all__ = [
    "BACKENDS",
    "HyperbolicDecisionTreeClassifier",
    "HyperbolicDecisionTreeRegressor",
    "HyperbolicEstimator",
    "HyperbolicRandomForestClassifier",
    "HyperbolicRandomForestRegressor",
    "HyperbolicTreeModel",
    "backend_for",
]
