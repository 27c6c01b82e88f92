"""Hyperbolic XGBoost and LightGBM models.

Each wraps the library's scikit-learn class: it takes that class's own
parameters by keyword (any extra keyword the library accepts through
``**kwargs`` too, e.g. LightGBM's ``verbose`` or ``max_bin``), fits it on
Klein coordinates and moves every threshold to its Einstein midpoint inside
the native booster, so the booster's own ``predict`` uses them.

All trees of a booster without row subsampling are grown on the same rows,
so the thresholds of all trees are corrected in one pass
(:mod:`hyp2onnx.ensemble_thresholds`), at a small fraction of the boosting time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils import assert_all_finite
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ..ir import Model
from ._base import (
    GEOMETRY_DEFAULTS,
    HyperbolicClassifierMixin,
    HyperbolicTreeModel,
    generate_init,
)
from ._booster import BoosterBackend
from ._lightgbm import LightGBMBackend, _lightgbm
from ._xgboost import XGBoostBackend, _xgboost


_BOOSTING_DOC = """
    Parameters
    ----------
    input_geometry : {{"hyperboloid", "poincare", "klein"}}, default="hyperboloid"
        Model of hyperbolic space the input points are given in. Hyperboloid
        points have ``d + 1`` columns (the timelike one at ``timelike_dim``);
        Poincare and Klein points lie in the ball of radius ``R = 1/sqrt(-K)``.
    curvature : float < 0, default=-1.0
        Curvature ``K`` of the space.
    timelike_dim : int, default=0
        Column of the timelike coordinate ``x_0`` (hyperboloid input only).
    midpoint : {{"einstein", "arithmetic"}}, default="einstein"
        Where each threshold goes between its two nearest training values
        (among the rows that reached the split): the hyperbolic (Einstein)
        midpoint, or the Euclidean one (ablation).
    check_manifold : bool, default=True
        Reject points off the manifold (or outside the ball) in ``fit`` and
        ``predict``. Turn off only for large data known to be valid.
    tree_space : {{"ranks", "rapidity", "klein"}}, default="ranks"
        What the booster is fitted on: the ranks of each Klein coordinate's
        distinct training values (splits as fine as float64 Klein
        coordinates: points far from the origin stay separable), ``artanh``
        of them, or the coordinates themselves (the paper's design).
        Thresholds are Klein thresholds at Einstein midpoints in every case;
        see :mod:`hyp2onnx.tree_space`.
    input_blocks : list or None, default=None
        Input made of blocks (:mod:`hyp2onnx.blocks`): ``[Hyperbolic(2),
        Spherical(2), Euclidean(3), Categorical(1)]`` or a signature
        ``[(-1.0, 2), (0.0, 3), (1.0, 2)]``. Each block gets its own
        midpoint; ``Categorical`` columns get the booster's native
        set-membership splits. ``input_geometry``, ``curvature`` and
        ``timelike_dim`` then stay at their defaults.
    override_subsample : bool, default=True
        Train without row subsampling ({rows} set to 1.0) so that the
        correction sees exactly the rows each tree was grown on and training
        predictions never change. With False the booster subsamples as
        asked and the correction uses all rows, with a warning that it is
        approximate. Column subsampling ({columns}) is harmless either way:
        it changes which features a split may use, not which rows reach it.
    **params
        Every parameter of :class:`{native}`, by keyword.

    Fit parameters such as ``eval_set`` take hyperbolic points, like ``X``.
    Categorical features are declared with ``input_blocks`` only (the
    booster's own categorical options are refused).
"""

_XGB_DOC = dict(
    rows="``subsample``",
    columns="``colsample_bytree``, ``colsample_bylevel``, ``colsample_bynode``",
)
_LGBM_DOC = dict(
    rows="``subsample``/``bagging_fraction`` and its aliases, and their ``pos_``/``neg_`` "
    "variants; GOSS is refused",
    columns="``colsample_bytree``/``feature_fraction``, ``feature_fraction_bynode``",
)


class _BoostingModel(HyperbolicTreeModel):
    """A hyperbolic model around one XGBoost or LightGBM scikit-learn class.

    A subclass sets ``_native`` (the class it wraps), ``_signature_from``
    (further classes whose ``__init__`` keywords ``_native`` accepts through
    ``**kwargs``, e.g. ``XGBModel`` for ``XGBClassifier``) and ``_backend``.
    Its ``__init__`` is generated: the geometry parameters, ``override_subsample``
    and every native keyword, each stored unchanged as scikit-learn requires;
    other keywords are stored too and reported by ``get_params``.
    """

    _native: ClassVar[type]
    _signature_from: ClassVar[tuple[type, ...]] = ()
    _backend: ClassVar[type[BoosterBackend]]
    _native_params: ClassVar[tuple[str, ...]] = ()
    _parameter_constraints: ClassVar[dict] = {
        **HyperbolicTreeModel._parameter_constraints,
        "override_subsample": ["boolean"],
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_native" not in cls.__dict__:
            return
        cls._native_params = generate_init(
            cls,
            (cls._native, *cls._signature_from),
            {**GEOMETRY_DEFAULTS, "override_subsample": True},
            extra=True,
        )

    # -- parameters --------------------------------------------------------

    def _store_extra(self, extra: dict[str, Any]) -> None:
        for name, value in extra.items():
            if name.startswith("_") or hasattr(type(self), name):
                raise TypeError(
                    f"{type(self).__name__} got an unexpected keyword argument {name!r}."
                )
            setattr(self, name, value)
        new = [name for name in extra if name not in self._extra_params]
        self._extra_params = (*self._extra_params, *new)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters of this model, including extra keywords passed on to the booster."""
        params = super().get_params(deep=deep)
        params.update({name: getattr(self, name) for name in self._extra_params})
        return params

    def set_params(self, **params: Any):
        """Set parameters; unknown plain names become extra booster keywords."""
        known = set(self._get_param_names()) | set(self._extra_params)
        extra = {k: v for k, v in params.items() if k not in known and "__" not in k}
        self._store_extra(extra)
        rest = {k: v for k, v in params.items() if k not in extra}
        return super().set_params(**rest) if rest else self

    def _native_template(self) -> Any:
        """The native estimator with this model's parameters as given (for its tags)."""
        params = {name: getattr(self, name) for name in (*self._native_params, *self._extra_params)}
        return self._native(**params)

    def _make_estimator(self) -> Any:
        estimator = self._native_template()
        if self.override_subsample:
            self._backend.disable_row_subsampling(estimator)
        return estimator

    # -- training ------------------------------------------------------------

    def _fit_params(
        self, fit_params: dict[str, Any], to_tree: Callable[[np.ndarray], np.ndarray]
    ) -> dict[str, Any]:
        """Map evaluation points (``eval_set``, LightGBM's ``eval_X``) as the training points."""
        params = dict(fit_params)

        def points(X: Any) -> np.ndarray:
            return to_tree(self._klein(X, reset=False))

        eval_set = params.get("eval_set")
        if eval_set is not None:
            if isinstance(eval_set, tuple) and len(eval_set) == 2 and np.ndim(eval_set[0]) == 2:
                eval_set = [eval_set]
            params["eval_set"] = [
                (points(X), self._eval_labels(y)) for X, y in eval_set
            ]
        eval_X = params.get("eval_X")
        if eval_X is not None:
            params["eval_X"] = (
                tuple(points(X) for X in eval_X) if isinstance(eval_X, tuple) else points(eval_X)
            )
        return params

    def _eval_labels(self, y: Any) -> Any:
        """Hook: evaluation labels as the booster expects them."""
        return y


class _XGBModel(_BoostingModel):
    _backend = XGBoostBackend


class _LGBMModel(_BoostingModel):
    _backend = LightGBMBackend


class HyperbolicXGBClassifier(HyperbolicClassifierMixin, ClassifierMixin, _XGBModel):
    __doc__ = (
        "Hyperbolic XGBoost classifier: XGBoost on Klein coordinates with Einstein-midpoint "
        "thresholds (compared as XGBoost does: ``x < t`` in float32).\n\n    Labels may be "
        "any values (strings too); XGBoost sees them encoded as 0..k-1.\n"
        + _BOOSTING_DOC.format(**{**_XGB_DOC, "native": "xgboost.XGBClassifier"})
    )
    _native = _xgboost().XGBClassifier
    _signature_from = (_xgboost().XGBModel,)

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any):
        """Fit on hyperbolic points ``X`` and labels ``y`` (any values)."""
        y = column_or_1d(y, warn=True)
        assert_all_finite(y, input_name="y")
        check_classification_targets(y)
        self._labels, encoded = np.unique(y, return_inverse=True)
        return super().fit(X, encoded, sample_weight, **fit_params)

    def _classes(self, fitted: Any) -> np.ndarray:
        return self._labels

    def _eval_labels(self, y: Any) -> np.ndarray:
        y = column_or_1d(y)
        index = np.searchsorted(self._labels, y)
        index = np.minimum(index, self._labels.size - 1)
        if np.any(self._labels[index] != y):
            unseen = np.setdiff1d(y, self._labels)
            raise ValueError(f"eval_set has labels {unseen[:5].tolist()} not seen in y.")
        return index

    def predict(self, X: Any) -> np.ndarray:
        """Labels (in ``classes_``) for hyperbolic points ``X``."""
        check_is_fitted(self)
        return self.classes_[self.estimator_.predict(self._tree_input(X))]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order (XGBoost's float32, widened)."""
        return super().predict_proba(X).astype(np.float64)

    def _to_ir(self) -> Model:
        model = super()._to_ir()
        ensemble = dataclasses.replace(model.ensemble, classes=np.asarray(self.classes_))
        return dataclasses.replace(model, ensemble=ensemble)


class HyperbolicXGBRegressor(RegressorMixin, _XGBModel):
    __doc__ = (
        "Hyperbolic XGBoost regressor: XGBoost on Klein coordinates with Einstein-midpoint "
        "thresholds (compared as XGBoost does: ``x < t`` in float32).\n"
        + _BOOSTING_DOC.format(**{**_XGB_DOC, "native": "xgboost.XGBRegressor"})
    )
    _native = _xgboost().XGBRegressor
    _signature_from = (_xgboost().XGBModel,)

    def predict(self, X: Any) -> np.ndarray:
        """Values for hyperbolic points ``X`` (XGBoost's float32, widened exactly)."""
        return super().predict(X).astype(np.float64)


class HyperbolicLGBMClassifier(HyperbolicClassifierMixin, ClassifierMixin, _LGBMModel):
    __doc__ = (
        "Hyperbolic LightGBM classifier: LightGBM on Klein coordinates with Einstein-midpoint "
        "thresholds (compared as LightGBM does: ``x <= t`` in float64).\n"
        + _BOOSTING_DOC.format(**{**_LGBM_DOC, "native": "lightgbm.LGBMClassifier"})
    )
    _native = _lightgbm().LGBMClassifier
    _signature_from = (_lightgbm().LGBMModel,)


class HyperbolicLGBMRegressor(RegressorMixin, _LGBMModel):
    __doc__ = (
        "Hyperbolic LightGBM regressor: LightGBM on Klein coordinates with Einstein-midpoint "
        "thresholds (compared as LightGBM does: ``x <= t`` in float64).\n"
        + _BOOSTING_DOC.format(**{**_LGBM_DOC, "native": "lightgbm.LGBMRegressor"})
    )
    _native = _lightgbm().LGBMRegressor
    _signature_from = (_lightgbm().LGBMModel,)
