"""What every registered estimator's ``fit`` promises (issue 39, items 2, 3 and 8).

Every estimator of the registry (`hyp2onnx.estimators._registry.BACKENDS`)
and every estimator of no backend (the MLPs, the isolation and rotation
forests, `HyperbolicEstimator`) is enumerated, so that a new one is
checked without being named here:

- a NaN, infinite or (unless its backend defines them) negative sample
  weight is refused with the shared message naming the row;
- a refused fit leaves an unfitted model unfitted (``NotFittedError``) and
  a fitted one with its previous predictions;
- ``warm_start=True`` either continues the previous fit, as the library
  does (the MLPs, checked against scikit-learn's own MLP on the same Klein
  coordinates), or is refused with a clear error; never silently ignored;
- ``partial_fit`` exists exactly where the wrapped library has it, and
  follows scikit-learn's rules and arithmetic.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from _data import labels, points, targets
from sklearn.base import is_classifier, is_outlier_detector
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.tree import DecisionTreeClassifier

import hyp2onnx.estimators as E
from hyp2onnx.errors import InvalidPointError, UnsupportedModelError
from hyp2onnx.estimators._registry import BACKENDS, backend_for

#: Estimators of no backend held to another contract: a base class, and the region tree (a
#: reading of a network, which takes no sample weights; tests/test_region_tree_estimator.py).
_NOT_ESTIMATORS = {"HyperbolicTreeModel", "RegionTree"}

NAMES = sorted(
    [name for spec in BACKENDS for name in spec.estimators]
    + [name for name in E._OWN if name not in _NOT_ESTIMATORS]
)

#: Keep every fit small: a few trees, a few epochs, quiet libraries.
_SMALL = {
    "n_estimators": 3,
    "max_iter": 30,
    "hidden_layer_sizes": (6,),
    "verbose": 0,
    "random_state": 0,
}


def make(name: str, **params):
    """A small instance of the estimator ``name`` with ``params``."""
    cls = getattr(E, name)
    if name == "HyperbolicEstimator":
        return cls(DecisionTreeClassifier(random_state=0), **params)
    taken = inspect.signature(cls).parameters
    small = {k: v for k, v in _SMALL.items() if k in taken}
    if "LGBM" in name:
        small["verbose"] = -1
    return cls(**small, **params)


def data(estimator, n: int = 60, d: int = 2, seed: int = 1):
    """Points, and labels / targets / None as the estimator learns."""
    X, k = points(n, d, seed=seed, max_radius=2.0)
    if is_outlier_detector(estimator):
        return X, None
    return X, (labels(k, 3, seed=seed) if is_classifier(estimator) else targets(k, seed=seed))


def fit(estimator, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", UserWarning)
        return estimator.fit(X, y, **kwargs)


def outputs(estimator, X):
    return estimator.predict(X)


def negative_weights_defined(estimator) -> bool:
    """Whether the estimator's backend declares negative weights meaningful (the policy)."""
    if not hasattr(estimator, "_make_estimator") or isinstance(
        estimator, E.HyperbolicIsolationForest
    ):
        return False
    if type(estimator).__module__.endswith("_rotation"):
        return False
    native = estimator._make_estimator()
    return backend_for(native).takes_negative_weights(native)


def weighted(name: str):
    """An estimator that takes sample weights (the isolation forest: scikit-learn's splits)."""
    if name == "HyperbolicIsolationForest":
        return make(name, splits="axis", threshold_law="klein")
    return make(name)


# -- sample weights ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["negative", "NaN", "infinite"])
@pytest.mark.parametrize("name", NAMES)
def test_bad_weights_are_refused_with_the_row_named(name: str, kind: str) -> None:
    estimator = weighted(name)
    X, y = data(estimator)
    w = np.ones(X.shape[0])
    w[7] = {"negative": -0.5, "NaN": np.nan, "infinite": np.inf}[kind]
    if kind == "negative" and negative_weights_defined(estimator):
        fit(estimator, X, y, sample_weight=w)  # defined by the library: accepted
        return
    with pytest.raises(
        ValueError, match=rf"^sample_weight must be finite.*found {kind} at row 7\.$"
    ):
        fit(estimator, X, y, sample_weight=w)
    with pytest.raises(NotFittedError):
        estimator.predict(X)


# -- refused fits -------------------------------------------------------------------------


def _off_manifold(X: np.ndarray, row: int) -> np.ndarray:
    X = X.copy()
    X[row, 0] *= 1.5  # x_0 too large for the spacelike part: off the hyperboloid
    return X


@pytest.mark.parametrize("name", NAMES)
def test_a_refused_fit_leaves_no_half_fitted_model(name: str) -> None:
    estimator = weighted(name)
    X, y = data(estimator)
    with pytest.raises(InvalidPointError):
        fit(estimator, _off_manifold(X, 5), y)
    with pytest.raises(NotFittedError):
        estimator.predict(X)

    fit(estimator, X, y)
    before = outputs(estimator, X)
    # A refit on points of another dimension, refused late (after reading the columns),
    # then one refused for its weights: the first fit stays whole.
    X3, y3 = data(estimator, d=3, seed=2)
    with pytest.raises(InvalidPointError):
        fit(estimator, _off_manifold(X3, 9), y3)
    with pytest.raises(ValueError, match="found NaN at row 2"):
        fit(estimator, X3, y3, sample_weight=np.where(np.arange(X3.shape[0]) == 2, np.nan, 1.0))
    assert estimator.n_features_in_ == X.shape[1]
    np.testing.assert_array_equal(outputs(estimator, X), before)


def test_a_classifier_refused_for_one_class_is_not_fitted() -> None:
    """The issue's case: one class is refused, and ``predict`` then says not fitted."""
    estimator = make("HyperbolicMLPClassifier")
    X, _ = data(estimator)
    with pytest.raises(ValueError, match="at least two classes"):
        fit(estimator, X, np.zeros(X.shape[0]))
    with pytest.raises(NotFittedError):
        estimator.predict(X)


# -- warm starts ----------------------------------------------------------------------------


def _continues(name: str) -> bool:
    return name.startswith("HyperbolicMLP")


@pytest.mark.parametrize("name", NAMES)
def test_warm_start_continues_or_is_refused(name: str) -> None:
    try:
        estimator = make(name, warm_start=True)
    except TypeError as exc:  # no such parameter: refused at once, by name
        assert "warm_start" in str(exc)
        return
    X, y = data(estimator)
    if _continues(name):
        first = fit(estimator, X, y).coefs_[0].copy()
        second = fit(estimator, X, y).coefs_[0]
        assert not np.array_equal(first, second)  # went on from the first fit
        return
    with pytest.raises(UnsupportedModelError, match="warm_start=True"):
        fit(estimator, X, y)
    with pytest.raises(NotFittedError):
        estimator.predict(X)


@pytest.mark.parametrize("name", NAMES)
def test_booster_continuation_parameters_are_refused(name: str) -> None:
    """``xgb_model`` / ``init_model`` continue a booster: refused like ``warm_start``."""
    estimator = make(name)
    native = getattr(estimator, "_make_estimator", None)
    if native is None or isinstance(estimator, E.HyperbolicIsolationForest):
        return
    taken = inspect.signature(type(native()).fit).parameters
    for param in ("xgb_model", "init_model"):
        if param in taken:
            X, y = data(estimator)
            with pytest.raises(UnsupportedModelError, match=param):
                fit(estimator, X, y, **{param: "previous.model"})


def _native_input(ours, X):
    """What scikit-learn's network inside ``ours`` reads: the centred Klein coordinates,
    standardised by the fitted offset and scale (the same float64 operations as ``fit``)."""
    return (ours.network_input(X) - ours.input_offset_) / ours.input_scale_


def _oracle(cls, **params):
    return cls(hidden_layer_sizes=(6,), max_iter=30, random_state=0, **params)


@pytest.mark.parametrize("classifier", [True, False])
def test_mlp_warm_start_follows_scikit_learn_on_klein_coordinates(classifier: bool) -> None:
    """Two warm fits (the second weighted) give scikit-learn's losses and weights, bit for bit."""
    name = "HyperbolicMLPClassifier" if classifier else "HyperbolicMLPRegressor"
    ours = make(name, warm_start=True)
    X, y = data(ours, n=120)
    w = np.linspace(0.5, 2.0, X.shape[0])
    oracle = _oracle(MLPClassifier if classifier else MLPRegressor, warm_start=True)
    fit(ours, X, y)
    k = _native_input(ours, X)
    fit(oracle, k, y)
    # A refused warm refit in between changes nothing.
    with pytest.raises(ValueError, match="found negative at row 3"):
        fit(ours, X, y, sample_weight=np.where(np.arange(X.shape[0]) == 3, -1.0, 1.0))
    fit(ours, X, y, sample_weight=w)
    fit(oracle, k, y, sample_weight=w)
    assert ours.estimator_.loss_curve_ == oracle.loss_curve_
    for a, b in zip(
        ours.coefs_ + ours.intercepts_, oracle.coefs_ + oracle.intercepts_, strict=True
    ):
        np.testing.assert_array_equal(a, b)
    assert ours.n_iter_ == oracle.n_iter_


def test_a_refit_refused_inside_scikit_learn_leaves_the_previous_network_whole() -> None:
    """scikit-learn refuses an early-stopping split too small only after it has set up a
    new optimizer: the refused warm refit must not reach the fitted network, so the next
    ``partial_fit`` goes on from the first fit's optimizer and random state, as the oracle's."""
    ours = make("HyperbolicMLPClassifier", warm_start=True)
    X, y = data(ours, n=120)
    oracle = _oracle(MLPClassifier, warm_start=True)
    fit(ours, X, y)
    k = _native_input(ours, X)
    fit(oracle, k, y)
    ours.set_params(early_stopping=True, validation_fraction=0.1)
    with pytest.raises(ValueError):
        fit(ours, X[:10], y[:10])
    ours.set_params(early_stopping=False)
    ours.partial_fit(X, y)
    oracle.partial_fit(k, y)
    for a, b in zip(ours.coefs_, oracle.coefs_, strict=True):
        np.testing.assert_array_equal(a, b)


# -- partial_fit ----------------------------------------------------------------------------


def _library_class(estimator):
    """The library class whose ``partial_fit`` the estimator would follow."""
    if hasattr(estimator, "_wrapped") and estimator._wrapped is not None:
        return estimator._wrapped
    return type(estimator._make_estimator())


@pytest.mark.parametrize("name", NAMES)
def test_partial_fit_exists_where_the_library_has_it(name: str) -> None:
    estimator = make(name)
    assert hasattr(estimator, "partial_fit") == hasattr(_library_class(estimator), "partial_fit")


def test_mlp_partial_fit_follows_scikit_learn() -> None:
    ours = make("HyperbolicMLPClassifier")
    X, y = data(ours, n=120)
    classes = np.unique(y)
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        ours.partial_fit(X, y)
    with pytest.raises(NotFittedError):
        ours.predict(X)
    oracle = _oracle(MLPClassifier)
    ours.partial_fit(X[:60], y[:60], classes=classes)
    k = _native_input(ours, X)
    oracle.partial_fit(k[:60], y[:60], classes=classes)
    before = ours.predict(X)
    with pytest.raises(ValueError):  # a class not declared on the first call
        ours.partial_fit(X[60:], np.where(y[60:] == 0, 7, y[60:]))
    np.testing.assert_array_equal(ours.predict(X), before)
    ours.partial_fit(X[60:], y[60:], sample_weight=np.full(60, 2.0))
    oracle.partial_fit(k[60:], y[60:], sample_weight=np.full(60, 2.0))
    for a, b in zip(ours.coefs_, oracle.coefs_, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not hasattr(make("HyperbolicMLPClassifier", solver="lbfgs"), "partial_fit")


def test_mlp_regressor_partial_fit_follows_scikit_learn() -> None:
    ours = make("HyperbolicMLPRegressor")
    X, y = data(ours, n=120)
    oracle = _oracle(MLPRegressor)
    for part in (slice(0, 60), slice(60, 120)):
        ours.partial_fit(X[part], y[part])
        oracle.partial_fit(_native_input(ours, X[part]), y[part])
    for a, b in zip(ours.coefs_, oracle.coefs_, strict=True):
        np.testing.assert_array_equal(a, b)
