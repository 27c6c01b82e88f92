"""Hyperbolic scikit-learn trees and forests, and the generic wrapper."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, MetaEstimatorMixin, RegressorMixin, clone, is_classifier
from sklearn.ensemble import (
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.metrics import accuracy_score, r2_score
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils import get_tags
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import HasMethods

from ._base import GEOMETRY_DEFAULTS, HyperbolicClassifierMixin, HyperbolicTreeModel, WrappedParamsModel

_GEOMETRY_DOC = """
    Parameters
    ----------
    input_geometry : {"hyperboloid", "poincare", "klein"}, default="hyperboloid"
        Model of hyperbolic space the input points are given in. Hyperboloid
        points have ``d + 1`` columns (the timelike one at ``timelike_dim``);
        Poincare and Klein points lie in the ball of radius ``R = 1/sqrt(-K)``.
    curvature : float < 0, default=-1.0
        Curvature ``K`` of the space.
    timelike_dim : int, default=0
        Column of the timelike coordinate ``x_0`` (hyperboloid input only).
    midpoint : {"einstein", "arithmetic"}, default="einstein"
        Where each threshold goes between its two nearest training values:
        the hyperbolic (Einstein) midpoint, or the Euclidean one (ablation;
        identical to scikit-learn's own thresholds for best-split trees).
    check_manifold : bool, default=True
        Reject points off the manifold (or outside the ball) in ``fit`` and
        ``predict``. Turn off only for large data known to be valid.
    tree_space : {"ranks", "rapidity", "klein"}, default="ranks"
        What the wrapped learner is fitted on: the ranks of each Klein
        coordinate's distinct training values (splits as fine as float64
        Klein coordinates, whatever the learner's precision: points far from
        the origin stay separable), ``artanh`` of them, or the coordinates
        themselves (the paper's design). Thresholds are Klein thresholds at
        Einstein midpoints in every case; see :mod:`hyp2onnx.tree_space`.
    input_blocks : list or None, default=None
        Input made of blocks (:mod:`hyp2onnx.blocks`): ``[Hyperbolic(2),
        Spherical(2), Euclidean(3), Categorical(1)]`` or a signature
        ``[(-1.0, 2), (0.0, 3), (1.0, 2)]``; the columns of a row are the
        blocks' columns in order. Each block gets its own midpoint
        (Einstein, angular, arithmetic); categorical codes are split as
        numbers at scikit-learn's thresholds. ``input_geometry``,
        ``curvature`` and ``timelike_dim`` then stay at their defaults.
    **params
        Every parameter of the wrapped scikit-learn class, by keyword
        (``max_depth``, ``n_estimators``, ``random_state``, ...).
"""


def _doc(summary: str, wrapped: type) -> str:
    return (
        f"{summary}\n\n    Fits :class:`sklearn.{wrapped.__module__.split('.')[1]}.{wrapped.__name__}` "
        "on Klein coordinates and moves every threshold to its Einstein midpoint.\n"
        + _GEOMETRY_DOC
    )


class HyperbolicDecisionTreeClassifier(
    HyperbolicClassifierMixin, ClassifierMixin, WrappedParamsModel
):
    __doc__ = _doc("Hyperbolic decision tree classifier (Fast-HyperDT).", DecisionTreeClassifier)
    _wrapped = DecisionTreeClassifier


class HyperbolicDecisionTreeRegressor(RegressorMixin, WrappedParamsModel):
    __doc__ = _doc("Hyperbolic decision tree regressor (Fast-HyperDT).", DecisionTreeRegressor)
    _wrapped = DecisionTreeRegressor


class HyperbolicRandomForestClassifier(
    HyperbolicClassifierMixin, ClassifierMixin, WrappedParamsModel
):
    __doc__ = _doc(
        "Hyperbolic random forest classifier; each tree is corrected on its own bootstrap rows.",
        RandomForestClassifier,
    )
    _wrapped = RandomForestClassifier


class HyperbolicRandomForestRegressor(RegressorMixin, WrappedParamsModel):
    __doc__ = _doc(
        "Hyperbolic random forest regressor; each tree is corrected on its own bootstrap rows.",
        RandomForestRegressor,
    )
    _wrapped = RandomForestRegressor


class HyperbolicEstimator(MetaEstimatorMixin, HyperbolicTreeModel):
    """Make any supported tree model hyperbolic.

    ``estimator`` is an unfitted scikit-learn tree or forest (or any model a
    registered backend handles); a clone of it is fitted on Klein
    coordinates and corrected. Classifier or regressor according to
    ``estimator``.

    Parameters
    ----------
    estimator : estimator instance
        The Euclidean tree model to wrap, e.g. ``ExtraTreesClassifier()``.
    input_geometry, curvature, timelike_dim, midpoint, check_manifold, tree_space, input_blocks
        As for :class:`HyperbolicDecisionTreeClassifier`.
    """

    def __init__(
        self,
        estimator: Any,
        *,
        input_geometry: str = GEOMETRY_DEFAULTS["input_geometry"],
        curvature: float = GEOMETRY_DEFAULTS["curvature"],
        timelike_dim: int = GEOMETRY_DEFAULTS["timelike_dim"],
        midpoint: str = GEOMETRY_DEFAULTS["midpoint"],
        check_manifold: bool = GEOMETRY_DEFAULTS["check_manifold"],
        tree_space: str = GEOMETRY_DEFAULTS["tree_space"],
        input_blocks: Any = GEOMETRY_DEFAULTS["input_blocks"],
    ) -> None:
        self.estimator = estimator
        self.input_geometry = input_geometry
        self.curvature = curvature
        self.timelike_dim = timelike_dim
        self.midpoint = midpoint
        self.check_manifold = check_manifold
        self.tree_space = tree_space
        self.input_blocks = input_blocks

    _parameter_constraints = {
        **HyperbolicTreeModel._parameter_constraints,
        "estimator": [HasMethods(["fit", "predict"])],
    }

    def _make_estimator(self) -> Any:
        return clone(self.estimator)

    def _native_template(self) -> Any:
        return self.estimator

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        wrapped = get_tags(self.estimator)
        tags.estimator_type = wrapped.estimator_type
        tags.classifier_tags = wrapped.classifier_tags
        tags.regressor_tags = wrapped.regressor_tags
        tags.target_tags.required = wrapped.target_tags.required
        if tags.classifier_tags is not None:
            tags.classifier_tags.multi_label = False  # classifiers are single-output
        return tags

    @available_if(lambda self: hasattr(self.estimator, "predict_proba"))
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order."""
        return HyperbolicClassifierMixin.predict_proba(self, X)

    @available_if(lambda self: hasattr(self.estimator, "predict_proba"))
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        return HyperbolicClassifierMixin.predict_log_proba(self, X)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy for classifiers, R^2 for regressors."""
        metric = accuracy_score if is_classifier(self) else r2_score
        return metric(y, self.predict(X), sample_weight=sample_weight)
