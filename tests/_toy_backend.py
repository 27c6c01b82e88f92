"""A toy tree library and its hyp2onnx backend, defined outside the package.

Step one of adding a backend (docs/layout.md, "Adding a backend"): one file
with the native model, a `Backend` subclass and its hyperbolic estimator.
Step two is its registry line; a package outside hyp2onnx adds it with
`hyp2onnx.estimators.register_backend` (tests/test_toy_backend.py).

The native model is a regression stump: one split on the feature and
threshold of least squared error (the midpoint of two neighbouring values),
two leaf means; a row goes left iff ``x <= threshold``. Its native files
(``.stump``, JSON) are read through the backend, as the command line reads
XGBoost's: ``check_file`` first (a file naming "crash" stands in for one
that would crash a native library), then ``load_file``; a NaN threshold is
a damaged stump, which ``exercise`` and ``StumpError`` report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from hyp2onnx.estimators._base import WrappedParamsModel
from hyp2onnx.estimators._interface import Backend
from hyp2onnx.estimators._probe import UnreadableFileError
from hyp2onnx.ir import Ensemble
from hyp2onnx.ir.trees import TreeArrays


class StumpRegressor(RegressorMixin, BaseEstimator):
    """One split of least squared error, two leaf means."""

    def __init__(self, min_leaf: int = 1) -> None:
        self.min_leaf = min_leaf

    def fit(self, X: np.ndarray, y: np.ndarray) -> StumpRegressor:
        best = (np.inf, 0, 0.0)
        for f in range(X.shape[1]):
            order = np.argsort(X[:, f], kind="stable")
            xs, ys = X[order, f], y[order]
            left = np.cumsum(ys)[:-1]
            count = np.arange(1, len(ys))
            right = ys.sum() - left
            sse = -(left**2 / count + right**2 / (len(ys) - count))
            ok = (xs[1:] > xs[:-1]) & (count >= self.min_leaf) & (len(ys) - count >= self.min_leaf)
            if ok.any():
                i = int(np.flatnonzero(ok)[np.argmin(sse[ok])])
                if sse[i] < best[0]:
                    best = (sse[i], f, (xs[i] + xs[i + 1]) / 2)
        _, self.feature_, self.threshold_ = best
        self.values_ = self._means(X, y)
        self.n_features_in_ = X.shape[1]
        return self

    def _means(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        left = X[:, self.feature_] <= self.threshold_
        return np.array([y[left].mean(), y[~left].mean()])

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.where(X[:, self.feature_] <= self.threshold_, *self.values_)


class StumpError(Exception):
    """What the toy library raises refusing a damaged stump of its own."""


def save_stump(model: StumpRegressor, path: Path) -> None:
    """The toy library's native file: the fitted stump as JSON."""
    fields = ("feature_", "threshold_", "n_features_in_")
    facts = {name: getattr(model, name) for name in fields}
    path.write_text(json.dumps({**facts, "values_": model.values_.tolist()}))


def load_stump(path: Path) -> StumpRegressor:
    """A fitted stump from `save_stump`'s file; `StumpError` if it is no stump."""
    facts = json.loads(path.read_text())
    model = StumpRegressor()
    try:
        model.feature_ = int(facts["feature_"])
        model.threshold_ = float(facts["threshold_"])
        model.n_features_in_ = int(facts["n_features_in_"])
        model.values_ = np.asarray(facts["values_"], dtype=np.float64)
    except (KeyError, TypeError, ValueError) as exc:
        raise StumpError(f"not a stump: {exc}") from exc
    return model


class StumpBackend(Backend):
    name = "stump"
    op = "<="
    compare_dtype = "float64"
    threshold_dtype = "float64"
    native = (StumpRegressor,)

    @classmethod
    def load_file(cls, path: Path) -> Any:
        return load_stump(path)

    @classmethod
    def check_file(cls, path: Path) -> None:
        if b"crash" in path.read_bytes():
            raise UnreadableFileError("not a readable stump file (the toy library would crash)")

    @classmethod
    def exercise(cls, obj: Any) -> bool:
        if not isinstance(obj, StumpRegressor):
            return False
        if not np.isfinite(obj.threshold_):
            raise StumpError("the threshold is NaN")
        return True

    def fit(self, estimator: Any, Xk: Any, y: Any, sample_weight: Any, **fit_params: Any) -> Any:
        if sample_weight is not None:
            raise ValueError("the toy stump takes no sample weights")
        return estimator.fit(np.asarray(Xk, dtype=np.float64), y)

    def training_rows(self, fitted: Any, y: Any, sample_weight: Any) -> list[np.ndarray]:
        return [np.arange(len(y))]

    def read_trees(self, fitted: Any) -> list[TreeArrays]:
        return [
            TreeArrays(
                np.array([fitted.feature_, -1, -1]),
                np.array([fitted.threshold_, 0.0, 0.0]),
                np.array([1, -1, -1]),
                np.array([2, -1, -1]),
            )
        ]

    def write_thresholds(self, fitted: Any, thresholds: list[np.ndarray]) -> Any:
        fitted.threshold_ = float(thresholds[0][0])
        return fitted

    def to_ensemble(self, fitted: Any) -> Ensemble:
        values = np.array([[0.0], [fitted.values_[0]], [fitted.values_[1]]])
        return self.ensemble(
            self.read_trees(fitted),
            [values],
            n_features=int(fitted.n_features_in_),
            aggregate="sum",
            base_values=np.zeros(1),
            post_transform="identity",
            sum_dtype="float64",
            classes=None,
        )


class HyperbolicStumpRegressor(RegressorMixin, WrappedParamsModel):
    """A hyperbolic regression stump: the toy library's model on Klein coordinates."""

    _wrapped = StumpRegressor
