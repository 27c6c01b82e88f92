"""The hyperbolic estimators: correction keeps training routing, scikit-learn conventions hold."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils._param_validation import InvalidParameterError

from hyp2onnx import (
    HyperbolicDecisionTreeClassifier,
    HyperbolicDecisionTreeRegressor,
    HyperbolicEstimator,
    HyperbolicRandomForestClassifier,
    HyperbolicRandomForestRegressor,
    InvalidPointError,
    UnsupportedModelError,
    geometry,
    ir,
)
from hyp2onnx.estimators._base import GEOMETRY_DEFAULTS
from tests._data import labels, points, targets


@dataclass(frozen=True)
class Case:
    """A hyperbolic estimator and the plain scikit-learn model it wraps, equally configured."""

    name: str
    hyperbolic: Callable[..., Any]  # (**geometry_params) -> unfitted hyperbolic estimator
    plain: Callable[[], Any]  # () -> unfitted scikit-learn estimator
    forest: bool

    @property
    def classifier(self) -> bool:
        return is_classifier(self.plain())


TREE = {"max_depth": 6, "random_state": 0}
FOREST = {"n_estimators": 4, "max_depth": 6, "random_state": 0, "n_jobs": 1}
KLEIN = {"tree_space": "klein"}

CASES = [
    Case(
        "tree-classifier",
        lambda **g: HyperbolicDecisionTreeClassifier(**TREE, **g),
        lambda: DecisionTreeClassifier(**TREE),
        False,
    ),
    Case(
        "tree-regressor",
        lambda **g: HyperbolicDecisionTreeRegressor(**TREE, **g),
        lambda: DecisionTreeRegressor(**TREE),
        False,
    ),
    Case(
        "forest-classifier",
        lambda **g: HyperbolicRandomForestClassifier(**FOREST, **g),
        lambda: RandomForestClassifier(**FOREST),
        True,
    ),
    Case(
        "forest-regressor",
        lambda **g: HyperbolicRandomForestRegressor(**FOREST, **g),
        lambda: RandomForestRegressor(**FOREST),
        True,
    ),
    # Extra trees draw thresholds uniformly in the space their learner sees, so they
    # match plain extra trees on Klein coordinates when fitted on those.
    Case(
        "extra-trees-classifier",
        lambda **g: HyperbolicEstimator(ExtraTreesClassifier(**FOREST), **{**KLEIN, **g}),
        lambda: ExtraTreesClassifier(**FOREST),
        True,
    ),
    Case(
        "extra-trees-regressor-bootstrap",
        lambda **g: HyperbolicEstimator(
            ExtraTreesRegressor(**FOREST, bootstrap=True), **{**KLEIN, **g}
        ),
        lambda: ExtraTreesRegressor(**FOREST, bootstrap=True),
        True,
    ),
]
BEST_SPLIT = [c for c in CASES if "extra" not in c.name]  # deterministic midpoint thresholds
by_name = pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])


def target(case: Case, k: np.ndarray, seed: int = 0) -> np.ndarray:
    return labels(k, seed=seed) if case.classifier else targets(k, seed=seed)


def trees_of(model: Any) -> list[Any]:
    return list(model.estimators_) if hasattr(model, "estimators_") else [model]


def bootstrap_rows(plain: Any, n: int) -> list[np.ndarray]:
    """Rows each tree of a fitted plain model was grown on (all rows unless bootstrapped)."""
    if getattr(plain, "bootstrap", False):
        return [np.unique(s) for s in plain.estimators_samples_]
    return [np.arange(n)] * len(trees_of(plain))


def assert_same_routing(hyp: Any, plain: Any, X32: np.ndarray, y: np.ndarray) -> None:
    """Same tree shapes; every tree sends its own training rows to the same leaves."""
    hyp_trees, plain_trees = trees_of(hyp.estimator_), trees_of(plain)
    assert len(hyp_trees) == len(plain_trees)
    moved = 0
    for h, p, rows in zip(hyp_trees, plain_trees, bootstrap_rows(plain, len(y)), strict=True):
        np.testing.assert_array_equal(h.tree_.feature, p.tree_.feature)
        np.testing.assert_array_equal(h.tree_.children_left, p.tree_.children_left)
        np.testing.assert_array_equal(h.tree_.children_right, p.tree_.children_right)
        np.testing.assert_array_equal(h.apply(X32[rows]), p.apply(X32[rows]))
        moved += int(np.sum(h.tree_.threshold != p.tree_.threshold))
    assert moved > 0, "the correction moved no threshold"


# -- the correction keeps every tree's training routing ---------------------------------


@by_name
def test_each_tree_routes_its_training_rows_as_before(case: Case) -> None:
    X, k = points(700, 3, "hyperboloid", curvature=-1.7, seed=1)
    y = target(case, k)
    hyp = case.hyperbolic(curvature=-1.7).fit(X, y)
    Xk = hyp.to_klein(X)
    np.testing.assert_allclose(Xk, k, atol=1e-12)
    X32 = Xk.astype(np.float32)
    plain = case.plain().fit(X32, y)
    assert_same_routing(hyp, plain, X32, y)
    assert hyp.correction_.n_moved > 0.5 * hyp.correction_.n_splits
    assert hyp.correction_.n_unreached == 0
    if not case.forest:
        # A single tree's training predictions never change.
        np.testing.assert_array_equal(hyp.predict(X), plain.predict(X32))
        if case.classifier:
            np.testing.assert_array_equal(hyp.predict_proba(X), plain.predict_proba(X32))
    # estimator_ is the corrected native model; our predict is its predict on Klein coordinates.
    np.testing.assert_array_equal(hyp.predict(X), hyp.estimator_.predict(X32))


def assert_node_midpoints(hyp: Any, plain: Any, X32: np.ndarray) -> None:
    """Brute force on each tree: the rows that reached a node, their two nearest values.

    The corrected threshold is their Einstein midpoint, strictly between them.
    """
    checked = 0
    for h, p, rows in zip(
        trees_of(hyp.estimator_), trees_of(plain), bootstrap_rows(plain, len(X32)), strict=True
    ):
        path = p.decision_path(X32[rows]).tocsc()
        for node in np.flatnonzero(p.tree_.feature >= 0):
            values = X32[rows][path[:, node].nonzero()[0], p.tree_.feature[node]].astype(np.float64)
            old = p.tree_.threshold[node]
            L, R = values[values <= old].max(), values[values > old].min()
            new = h.tree_.threshold[node]
            assert L < new < R
            assert new == geometry.einstein_midpoint(np.array([L]), np.array([R]))[0]
            checked += 1
    assert checked > 10


@by_name
def test_einstein_thresholds_sit_at_node_midpoints(case: Case) -> None:
    X, k = points(400, 2, "poincare", seed=2)
    y = target(case, k)
    hyp = case.hyperbolic(input_geometry="poincare").fit(X, y)
    X32 = hyp.to_klein(X).astype(np.float32)
    assert_node_midpoints(hyp, case.plain().fit(X32, y), X32)


@pytest.mark.parametrize("case", BEST_SPLIT, ids=[c.name for c in BEST_SPLIT])
def test_arithmetic_midpoint_equals_scikit_learn_thresholds(case: Case) -> None:
    X, k = points(500, 3, "hyperboloid", seed=3)
    y = target(case, k)
    hyp = case.hyperbolic(midpoint="arithmetic").fit(X, y)
    X32 = hyp.to_klein(X).astype(np.float32)
    plain = case.plain().fit(X32, y)
    assert hyp.correction_.n_moved == 0 and hyp.correction_.n_splits > 20
    for h, p in zip(trees_of(hyp.estimator_), trees_of(plain), strict=True):
        np.testing.assert_array_equal(h.tree_.threshold, p.tree_.threshold)
    np.testing.assert_array_equal(hyp.predict(X), plain.predict(X32))


@by_name
def test_all_three_input_models_give_the_same_model(case: Case) -> None:
    curvature, timelike_dim = -2.5, 1
    # float32-valued Klein coordinates: every model's round trip casts back exactly.
    X_all, k = points(500, 3, "klein", curvature=curvature, seed=4, max_radius=5.0, float32=True)
    y = target(case, k)
    test_k = points(200, 3, "klein", seed=5, max_radius=6.0)[1]
    fitted, predictions = [], []
    for name in ("hyperboloid", "poincare", "klein"):
        X = geometry.from_klein(k, name, curvature, timelike_dim)
        hyp = case.hyperbolic(input_geometry=name, curvature=curvature, timelike_dim=timelike_dim)
        hyp.fit(X, y)
        assert hyp.n_features_in_ == (4 if name == "hyperboloid" else 3)
        fitted.append(hyp)
        X_test = geometry.from_klein(test_k, name, curvature, timelike_dim)
        out = [hyp.predict(X_test)]
        if case.classifier:
            out.append(hyp.predict_proba(X_test))
        predictions.append(out)
    reference = fitted[0]
    for other, preds in zip(fitted[1:], predictions[1:], strict=True):
        for a, b in zip(trees_of(reference.estimator_), trees_of(other.estimator_), strict=True):
            np.testing.assert_array_equal(a.tree_.feature, b.tree_.feature)
            np.testing.assert_array_equal(a.tree_.threshold, b.tree_.threshold)
        for a, b in zip(predictions[0], preds, strict=True):
            np.testing.assert_array_equal(a, b)


@by_name
def test_ties_and_repeated_values(case: Case) -> None:
    X, k = points(600, 2, "klein", seed=6, max_radius=1.5)
    k = np.round(k, 1)  # 19 distinct values per coordinate, all still inside the ball
    k = np.concatenate([k, k[:200]])  # and exact duplicate rows
    y = target(case, k)
    hyp = case.hyperbolic(input_geometry="klein").fit(k, y)
    X32 = k.astype(np.float32)
    plain = case.plain().fit(X32, y)
    assert_same_routing(hyp, plain, X32, y)
    assert_node_midpoints(hyp, plain, X32)


@by_name
def test_points_far_from_the_origin(case: Case) -> None:
    # Hyperbolic radius up to 12: Klein coordinates within 1e-10 of the boundary;
    # near the axes they round to +-1 in float32 (what scikit-learn trains on).
    k = points(600, 2, "klein", seed=7, max_radius=12.0)[1]
    axes = np.tanh(np.array([[12.0, 0.0], [-12.0, 0.0], [0.0, 11.0], [0.0, -10.0], [9.0, 0.0]]))
    k = np.concatenate([k, axes, -axes[::-1] * 0.9999999])
    X = geometry.from_klein(k, "hyperboloid")
    assert np.sum(np.abs(k.astype(np.float32)) == 1.0) >= 4
    y = target(case, k)
    # Fitted on Klein coordinates, as the plain learner is (the default, ranks,
    # separates more of these points: see test_far.py).
    hyp = case.hyperbolic(**KLEIN).fit(X, y)
    X32 = hyp.to_klein(X).astype(np.float32)
    plain = case.plain().fit(X32, y)
    assert_same_routing(hyp, plain, X32, y)
    for tree in trees_of(hyp.estimator_):
        assert np.all(np.abs(tree.tree_.threshold[tree.tree_.feature >= 0]) <= 1.0)
    if not case.forest:
        np.testing.assert_array_equal(hyp.predict(X), plain.predict(X32))


# -- sample weights -------------------------------------------------------------


@by_name
def test_zero_weights_equal_dropped_rows(case: Case) -> None:
    X, k = points(600, 3, "hyperboloid", seed=8)
    y = target(case, k)
    w = np.ones(len(y))
    w[::3] = 0.0
    weighted = case.hyperbolic().fit(X, y, sample_weight=w)
    X32 = weighted.to_klein(X).astype(np.float32)
    plain = case.plain().fit(X32, y, sample_weight=w)
    # Same trees as scikit-learn with the same weights, same routing of each tree's rows.
    for h, p, rows in zip(
        trees_of(weighted.estimator_), trees_of(plain), bootstrap_rows(plain, len(y)), strict=True
    ):
        rows = rows[w[rows] > 0]
        np.testing.assert_array_equal(h.tree_.feature, p.tree_.feature)
        np.testing.assert_array_equal(h.apply(X32[rows]), p.apply(X32[rows]))
    if not case.forest or "extra-trees-classifier" == case.name:
        # Without bootstrap draws, a zero weight is a dropped row: identical thresholds.
        dropped = case.hyperbolic().fit(X[w > 0], y[w > 0])
        for a, b in zip(trees_of(weighted.estimator_), trees_of(dropped.estimator_), strict=True):
            np.testing.assert_array_equal(a.tree_.threshold, b.tree_.threshold)


@pytest.mark.parametrize("case", [c for c in CASES if not c.forest], ids=lambda c: c.name)
def test_weights_reach_the_native_model(case: Case) -> None:
    X, k = points(500, 2, "hyperboloid", seed=9)
    y = target(case, k)
    w = np.random.default_rng(0).uniform(0.1, 5.0, len(y))
    hyp = case.hyperbolic().fit(X, y, sample_weight=w)
    X32 = hyp.to_klein(X).astype(np.float32)
    weighted = case.plain().fit(X32, y, sample_weight=w)
    unweighted = case.plain().fit(X32, y)
    np.testing.assert_array_equal(hyp.predict(X), weighted.predict(X32))
    assert not np.array_equal(hyp.estimator_.tree_.value, unweighted.tree_.value)
    np.testing.assert_allclose(hyp.estimator_.tree_.weighted_n_node_samples[0], w.sum())


def test_negative_weights_keep_their_rows_routed() -> None:
    """scikit-learn's splitter keeps every row of non-zero weight, negative ones too."""
    X, k = points(300, 2, "klein", seed=10)
    y = targets(k)
    w = np.random.default_rng(1).uniform(0.5, 1.0, len(y))
    w[::10] = -0.05
    hyp = HyperbolicDecisionTreeRegressor(input_geometry="klein", **TREE).fit(X, y, sample_weight=w)
    plain = DecisionTreeRegressor(**TREE).fit(X.astype(np.float32), y, sample_weight=w)
    X32 = X.astype(np.float32)
    np.testing.assert_array_equal(hyp.estimator_.apply(X32), plain.apply(X32))
    np.testing.assert_array_equal(hyp.predict(X), plain.predict(X.astype(np.float32)))


# -- scikit-learn conventions ----------------------------------------------------


WRAPPED = [
    (HyperbolicDecisionTreeClassifier, DecisionTreeClassifier),
    (HyperbolicDecisionTreeRegressor, DecisionTreeRegressor),
    (HyperbolicRandomForestClassifier, RandomForestClassifier),
    (HyperbolicRandomForestRegressor, RandomForestRegressor),
]


@pytest.mark.parametrize(("cls", "native"), WRAPPED, ids=[c.__name__ for c, _ in WRAPPED])
def test_every_parameter_round_trips(cls: type, native: type) -> None:
    defaults = cls().get_params(deep=False)
    assert set(defaults) == set(GEOMETRY_DEFAULTS) | set(native().get_params(deep=False))
    for name, value in GEOMETRY_DEFAULTS.items():
        assert defaults[name] == value
    for name, value in native().get_params(deep=False).items():
        assert defaults[name] == value
    # Each parameter, set to a marker, comes back from get_params and from a clone.
    markers = {name: f"marker-{i}" for i, name in enumerate(defaults)}
    est = cls(**markers)
    assert est.get_params(deep=False) == markers
    assert clone(est).get_params(deep=False) == markers
    est = cls()
    for name, marker in markers.items():
        assert est.set_params(**{name: marker}) is est
        assert getattr(est, name) == marker
    assert clone(est).get_params(deep=False) == markers
    with pytest.raises(TypeError):
        cls(3)  # keyword-only, like scikit-learn's own


def test_native_parameters_reach_the_fitted_model() -> None:
    X, k = points(400, 3, "hyperboloid", seed=11)
    y = labels(k)
    hyp = HyperbolicRandomForestClassifier(
        n_estimators=3, max_depth=2, min_samples_leaf=7, criterion="entropy", random_state=5
    ).fit(X, y)
    assert len(hyp.estimator_.estimators_) == 3
    assert hyp.estimator_.criterion == "entropy" and hyp.estimator_.random_state == 5
    for tree in hyp.estimator_.estimators_:
        assert tree.get_depth() <= 2
        leaves = tree.tree_.feature < 0
        assert tree.tree_.n_node_samples[leaves].min() >= 7
    # The geometry parameters are not passed to scikit-learn.
    assert "curvature" not in hyp.estimator_.get_params()


def test_invalid_parameters_use_scikit_learns_messages() -> None:
    X, k = points(50, 2, "hyperboloid", seed=12)
    y = labels(k)
    bad = [
        ({"max_depth": -1}, "The 'max_depth' parameter of HyperbolicDecisionTreeClassifier"),
        ({"midpoint": "median"}, "The 'midpoint' parameter of HyperbolicDecisionTreeClassifier"),
        ({"curvature": 1.0}, "The 'curvature' parameter"),
        ({"input_geometry": "sphere"}, "The 'input_geometry' parameter"),
        ({"check_manifold": "yes"}, "The 'check_manifold' parameter"),
    ]
    for params, message in bad:
        with pytest.raises(InvalidParameterError, match=message):
            HyperbolicDecisionTreeClassifier(**params).fit(X, y)
    with pytest.raises(InvalidParameterError, match="'estimator' parameter of HyperbolicEstimator"):
        HyperbolicEstimator(estimator="tree").fit(X, y)


def test_grid_search_over_max_depth() -> None:
    X, k = points(450, 2, "hyperboloid", seed=13)
    y = labels(k, noise=0.0)
    search = GridSearchCV(
        HyperbolicDecisionTreeClassifier(random_state=0), {"max_depth": [1, 4, 8]}, cv=3
    ).fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert scores[0] < scores[1]  # depth reaches the native trees
    assert search.best_params_["max_depth"] in (4, 8)
    assert search.best_estimator_.max_depth == search.best_params_["max_depth"]
    assert search.best_estimator_.estimator_.get_depth() <= search.best_params_["max_depth"]
    np.testing.assert_array_equal(search.predict(X), search.best_estimator_.predict(X))
    # The same search over the wrapper's nested parameter.
    nested = GridSearchCV(
        HyperbolicEstimator(DecisionTreeClassifier(random_state=0)),
        {"estimator__max_depth": [1, 4, 8]},
        cv=3,
    ).fit(X, y)
    np.testing.assert_array_equal(nested.cv_results_["mean_test_score"], scores)


def test_string_class_labels() -> None:
    X, k = points(400, 2, "poincare", seed=14)
    names = np.array(["east", "north", "west"])
    y = names[labels(k)]
    for hyp in (
        HyperbolicDecisionTreeClassifier(input_geometry="poincare", **TREE),
        HyperbolicRandomForestClassifier(input_geometry="poincare", **FOREST),
        HyperbolicEstimator(ExtraTreesClassifier(**FOREST), input_geometry="poincare"),
    ):
        hyp.fit(X, y)
        np.testing.assert_array_equal(hyp.classes_, names)
        pred = hyp.predict(X)
        assert set(pred) <= set(names)
        proba = hyp.predict_proba(X)
        np.testing.assert_array_equal(names[proba.argmax(axis=1)], pred)
        assert hyp.score(X, y) == np.mean(pred == y) > 0.7


def test_column_y_warns_and_multi_output_classification_is_refused() -> None:
    X, k = points(200, 2, "hyperboloid", seed=15)
    y = labels(k)
    with pytest.warns(DataConversionWarning, match="column-vector y"):
        column = HyperbolicDecisionTreeClassifier(**TREE).fit(X, y[:, None])
    flat = HyperbolicDecisionTreeClassifier(**TREE).fit(X, y)
    np.testing.assert_array_equal(column.predict(X), flat.predict(X))
    with pytest.raises(ValueError, match="y should be a 1d array"):
        HyperbolicDecisionTreeClassifier().fit(X, np.stack([y, y], axis=1))


def test_multi_output_regression() -> None:
    X, k = points(300, 2, "hyperboloid", seed=16)
    Y = np.stack([targets(k), k[:, 0]], axis=1)
    hyp = HyperbolicRandomForestRegressor(**FOREST).fit(X, Y)
    X32 = hyp.to_klein(X).astype(np.float32)
    plain = RandomForestRegressor(**FOREST).fit(X32, Y)
    assert hyp.predict(X).shape == (300, 2) and hyp.n_outputs_ == 2
    assert_same_routing(hyp, plain, X32, Y[:, 0])


def test_estimator_type_follows_the_wrapped_model() -> None:
    assert is_classifier(HyperbolicEstimator(ExtraTreesClassifier()))
    assert is_regressor(HyperbolicEstimator(ExtraTreesRegressor()))
    assert is_classifier(HyperbolicDecisionTreeClassifier())
    assert is_regressor(HyperbolicRandomForestRegressor())
    assert not hasattr(HyperbolicEstimator(ExtraTreesRegressor()), "predict_proba")
    X, k = points(200, 2, "hyperboloid", seed=17)
    y = targets(k)
    hyp = HyperbolicEstimator(ExtraTreesRegressor(n_estimators=3, random_state=0)).fit(X, y)
    X32 = hyp.to_klein(X).astype(np.float32)
    assert hyp.score(X, y) == pytest.approx(hyp.estimator_.score(X32, y))


def test_unsupported_wrapped_model() -> None:
    X, k = points(100, 2, "hyperboloid", seed=18)
    with pytest.raises(UnsupportedModelError, match="LogisticRegression is not a supported tree"):
        HyperbolicEstimator(LogisticRegression()).fit(X, labels(k))


def test_not_fitted() -> None:
    X, _ = points(10, 2, "hyperboloid", seed=19)
    hyp = HyperbolicRandomForestClassifier()
    for call in (
        lambda: hyp.predict(X),
        lambda: hyp.predict_proba(X),
        lambda: hyp.predict_log_proba(X),
        lambda: hyp.score(X, np.zeros(10)),
        lambda: hyp.to_klein(X),
        lambda: hyp.feature_importances_,
        lambda: hyp.to_ir(),
        lambda: HyperbolicEstimator(ExtraTreesRegressor()).predict(X),
    ):
        with pytest.raises(NotFittedError):
            call()


def test_predict_checks_columns_and_manifold() -> None:
    X, k = points(200, 3, "hyperboloid", seed=20)
    hyp = HyperbolicDecisionTreeClassifier(**TREE).fit(X, labels(k))
    message = "X has 3 features, but HyperbolicDecisionTreeClassifier is expecting 4"
    with pytest.raises(ValueError, match=message):
        hyp.predict(X[:, :3])
    bad = X[:6].copy()
    bad[2, 0] *= 1.5
    bad[4, 1] += 1.0
    for method in (hyp.predict, hyp.predict_proba, hyp.to_klein):
        message = r"2 row\(s\) are off the hyperboloid.*\(rows 2, 4\)"
        with pytest.raises(InvalidPointError, match=message):
            method(bad)
    nan = X[:5].copy()
    nan[[1, 3], 2] = np.nan
    nan[4, 0] = np.inf
    message = r"3 row\(s\) contain NaN or infinity \(rows 1, 3, 4\)"
    with pytest.raises(InvalidPointError, match=message):
        hyp.predict(nan)
    with pytest.raises(InvalidPointError, match=r"\(rows 1, 3, 4\)"):
        HyperbolicDecisionTreeClassifier(check_manifold=False).fit(nan, labels(k)[:5])
    # Trusted data skips the manifold test.
    trusting = HyperbolicDecisionTreeClassifier(check_manifold=False, **TREE).fit(X, labels(k))
    klein = bad[:, 1:] / bad[:, :1]
    np.testing.assert_array_equal(trusting.predict(bad), hyp.estimator_.predict(klein))
    # fit checks too.
    with pytest.raises(InvalidPointError, match=r"\(rows 2, 4\)"):
        HyperbolicDecisionTreeClassifier().fit(bad, labels(k)[:6])


def test_fitted_attributes() -> None:
    X, k = points(300, 3, "hyperboloid", seed=21)
    y = labels(k)
    hyp = HyperbolicDecisionTreeClassifier(**TREE).fit(X, y)
    assert hyp.n_features_in_ == 4 and hyp.n_outputs_ == 1
    np.testing.assert_array_equal(hyp.classes_, [0, 1, 2])
    np.testing.assert_array_equal(hyp.feature_importances_, hyp.estimator_.feature_importances_)
    assert hyp.feature_importances_.shape == (3,)
    with np.errstate(divide="ignore"):  # pure leaves: log(0)
        np.testing.assert_array_equal(hyp.predict_log_proba(X), np.log(hyp.predict_proba(X)))
    assert isinstance(hyp.estimator_, DecisionTreeClassifier)
    assert hyp.correction_.n_splits == int(np.sum(hyp.estimator_.tree_.feature >= 0))
    # fit returns self; refitting replaces the fitted state.
    again = hyp.fit(X[:100], y[:100])
    assert again is hyp and hyp.estimator_.tree_.n_node_samples[0] == 100


@by_name
def test_ir_reproduces_the_native_predictions(case: Case) -> None:
    X, k = points(400, 3, "hyperboloid", seed=22)
    y = target(case, k)
    hyp = case.hyperbolic().fit(X, y)
    model = hyp.to_ir()
    assert model.space.n_input_features == 4 and model.space.geometry == "hyperboloid"
    assert model.ensemble.n_trees == len(trees_of(hyp.estimator_))
    out = ir.predict_output(model.ensemble, hyp.to_klein(X))
    if case.classifier:
        np.testing.assert_array_equal(out, hyp.predict_proba(X))
        np.testing.assert_array_equal(model.ensemble.classes, hyp.classes_)
    else:
        np.testing.assert_array_equal(out[:, 0], hyp.predict(X))


def test_unreached_split_warning_is_not_raised_for_regular_fits() -> None:
    X, k = points(300, 2, "hyperboloid", seed=23)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        HyperbolicRandomForestClassifier(**FOREST).fit(X, labels(k))
