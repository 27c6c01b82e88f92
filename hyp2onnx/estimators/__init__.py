"""Hyperbolic tree estimators with scikit-learn's API."""

from ._base import HyperbolicTreeModel
from ._boosting_models import (
    HyperbolicLGBMClassifier,
    HyperbolicLGBMRegressor,
    HyperbolicXGBClassifier,
    HyperbolicXGBRegressor,
)
from ._householder import HyperbolicHouseholderTreeClassifier, HyperbolicHouseholderTreeRegressor
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
    "HyperbolicHouseholderTreeClassifier",
    "HyperbolicHouseholderTreeRegressor",
    "HyperbolicLGBMClassifier",
    "HyperbolicLGBMRegressor",
    "HyperbolicRandomForestClassifier",
    "HyperbolicRandomForestRegressor",
    "HyperbolicTreeModel",
    "HyperbolicXGBClassifier",
    "HyperbolicXGBRegressor",
    "backend_for",
]
