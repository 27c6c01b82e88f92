"""Hyperbolic XGBoost models: exact corrected thresholds inside the booster."""

from __future__ import annotations

import json
import pickle
import warnings

import _boosting_data as boosting
import numpy as np
import pytest
import xgboost as xgb
from _boosting_data import KLEIN, as_points, ir_output, klein_with_ties, labels, native_output
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from hyp2onnx import (
    HyperbolicXGBClassifier,
    HyperbolicXGBRegressor,
    UnsupportedModelError,
    ir,
    to_onnx,
)
from hyp2onnx.correction.midpoints import correct_tree
from hyp2onnx.correction.tree_space import TreeSpace
from hyp2onnx.estimators import HyperbolicEstimator
from hyp2onnx.estimators._xgboost import XGBoostBackend, _ubj_load
from hyp2onnx.ir.trees import apply, as_compared

PARAMS = dict(n_estimators=6, max_depth=4, learning_rate=0.5, n_jobs=1, random_state=0)
TASKS = boosting.booster_tasks(
    HyperbolicXGBClassifier, HyperbolicXGBRegressor, xgb.XGBClassifier, xgb.XGBRegressor
)

#: A hyperbolic model and the same XGBoost model fitted without correction, on Klein
#: coordinates or their ranks (the default), whose ties-and-near-ties data float32
#: cannot separate, so its ``estimator_`` reads split indices.
fitted = boosting.fitted_fixture(
    TASKS, PARAMS, lambda seen: TreeSpace.fit(seen, "ranks", "float32").transform(seen)
)


def test_training_predictions_unchanged(fitted):
    boosting.assert_training_predictions_unchanged(fitted)


def test_thresholds_moved_to_the_reference_correction(fitted):
    boosting.assert_reference_thresholds(fitted, XGBoostBackend())


def test_ir_reproduces_xgboost(fitted):
    model, _, X, _, _ = fitted
    k = boosting.threshold_probes(model)
    Xt = as_points(k, model.input_geometry)
    native = native_output(model.estimator_, model._tree_input(Xt))
    np.testing.assert_allclose(ir_output(model, Xt), native, atol=1e-6, rtol=0)
    if not hasattr(model, "predict_proba"):  # float32 sums in XGBoost's order: bit for bit
        np.testing.assert_array_equal(ir_output(model, Xt), model.predict(Xt))


def test_hist_thresholds_equal_training_values():
    """``hist`` cuts are training values: ``<`` routes them right, ``<=`` would not."""
    k = klein_with_ties(400, seed=5)
    y = labels(k, "regression")
    params = dict(PARAMS, tree_method="hist", n_estimators=10)
    model = HyperbolicXGBRegressor(input_geometry="klein", **KLEIN, **params).fit(k, y)
    plain = xgb.XGBRegressor(**params).fit(k, y)
    Xc = as_compared(k, "float32")
    trees = XGBoostBackend().read_trees(plain)
    on_value = [np.isin(t.threshold[t.feature >= 0], Xc).any() for t in trees]
    assert all(on_value)
    # Treating the test as <= sends the rows at a cut to the other side.
    assert any(not np.array_equal(apply(t, Xc, "<"), apply(t, Xc, "<=")) for t in trees)
    np.testing.assert_array_equal(model.predict(k), plain.predict(k))
    assert model.correction_.n_moved > 0


def test_multi_output_regression():
    """A 2-D y (or several quantiles): one tree per target and round, summed per target."""
    k = klein_with_ties(300, seed=16)
    Y = np.column_stack([labels(k, "regression"), k[:, 0] - 2 * k[:, 1]])
    X = as_points(k, "hyperboloid")
    model = HyperbolicXGBRegressor(**KLEIN, **PARAMS).fit(X, Y)
    plain = xgb.XGBRegressor(**PARAMS).fit(model.to_klein(X), Y)
    np.testing.assert_array_equal(model.predict(X), plain.predict(model.to_klein(X)))
    assert model.correction_.n_moved > 0
    ensemble = model.to_ir().ensemble
    assert ensemble.n_outputs == 2 and set(ensemble.tree_target) == {0, 1}
    Xt = as_points(klein_with_ties(300, seed=17), "hyperboloid")
    scores = ir.predict_output(ensemble, model.to_klein(Xt))
    np.testing.assert_array_equal(scores, model.predict(Xt))
    quantiles = HyperbolicXGBRegressor(
        objective="reg:quantileerror", quantile_alpha=[0.2, 0.8], **PARAMS
    ).fit(X, Y[:, 0])
    np.testing.assert_array_equal(
        ir.predict_output(quantiles.to_ir().ensemble, quantiles.to_klein(Xt)),
        quantiles.predict(Xt),
    )


def test_string_labels_and_classes():
    boosting.assert_string_labels(HyperbolicXGBClassifier, PARAMS)


def test_eval_set_in_hyperbolic_coordinates_and_early_stopping():
    k, y, kv, yv = boosting.early_stopping_data()
    params = dict(PARAMS, n_estimators=40, early_stopping_rounds=2)
    model = HyperbolicXGBClassifier(**params).fit(
        as_points(k, "hyperboloid"), y, eval_set=[(as_points(kv, "hyperboloid"), yv)], verbose=False
    )
    best = model.estimator_.best_iteration
    assert best < 39
    ensemble = model.to_ir().ensemble
    assert ensemble.n_trees == best + 1
    Xt = as_points(klein_with_ties(300, seed=10), "hyperboloid")
    np.testing.assert_allclose(ir_output(model, Xt), model.predict_proba(Xt), atol=1e-6, rtol=0)
    with pytest.raises(ValueError, match="not seen"):
        HyperbolicXGBClassifier(**params).fit(
            as_points(k, "hyperboloid"), y, eval_set=[(as_points(kv, "hyperboloid"), yv + "!")]
        )


def test_sample_weight():
    k = klein_with_ties(300, seed=4)
    y = labels(k, "binary")
    w = np.random.default_rng(2).choice([0.0, 0.5, 2.0], size=300)
    model = HyperbolicXGBClassifier(input_geometry="klein", **KLEIN, **PARAMS).fit(
        k, y, sample_weight=w
    )
    plain = xgb.XGBClassifier(**PARAMS).fit(k, y, sample_weight=w)
    seen = w > 0
    np.testing.assert_array_equal(model.predict_proba(k[seen]), plain.predict_proba(k[seen]))
    Xc = as_compared(k[seen], "float32")
    backend = XGBoostBackend()
    for a, b in zip(backend.read_trees(model.estimator_), backend.read_trees(plain), strict=True):
        want, _ = correct_tree(b, Xc, op="<", threshold_dtype="float32")
        np.testing.assert_array_equal(a.threshold, want)


def test_clone_get_params_and_pickle():
    model = HyperbolicXGBRegressor(input_geometry="poincare", max_depth=3, n_estimators=4, eta=0.3)
    params = model.get_params()
    assert params["max_depth"] == 3 and params["eta"] == 0.3
    assert params["override_subsample"] is True
    twin = clone(model)
    assert twin.get_params() == params
    twin.set_params(max_depth=2, max_bin=32, nthread=1)
    assert twin.get_params()["max_bin"] == 32 and twin.get_params()["nthread"] == 1
    k = klein_with_ties(200, seed=6)
    X = as_points(k, "poincare")
    twin.fit(X, labels(k, "regression"))
    assert twin.estimator_.get_params()["nthread"] == 1
    again = pickle.loads(pickle.dumps(twin))
    np.testing.assert_array_equal(again.predict(X), twin.predict(X))
    with pytest.raises(TypeError, match="unexpected keyword"):
        HyperbolicXGBRegressor(predict=1)


def test_subsampling_override_and_warning():
    k = klein_with_ties(300, seed=11)
    y = labels(k, "binary")
    model = HyperbolicXGBClassifier(input_geometry="klein", subsample=0.5, **KLEIN, **PARAMS)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(k, y)
    assert model.subsample == 0.5 and model.estimator_.get_params()["subsample"] == 1.0
    plain = xgb.XGBClassifier(subsample=1.0, **PARAMS).fit(k, y)
    np.testing.assert_array_equal(model.predict_proba(k), plain.predict_proba(k))
    with pytest.warns(UserWarning, match="approximate"):
        HyperbolicXGBClassifier(
            input_geometry="klein", subsample=0.5, override_subsample=False, **PARAMS
        ).fit(k, y)


def test_categorical_rejected():
    k = klein_with_ties(200, seed=12)
    y = labels(k, "binary")
    with pytest.raises(UnsupportedModelError, match="categorical"):
        HyperbolicXGBClassifier(
            input_geometry="klein", enable_categorical=True, feature_types=["c", "q"], **PARAMS
        ).fit(k, y)
    codes = np.column_stack([np.arange(200) % 4, k[:, 1]])
    native = xgb.XGBClassifier(
        enable_categorical=True, feature_types=["c", "q"], tree_method="hist", **PARAMS
    ).fit(codes, (codes[:, 0] % 2 == 0).astype(int))
    boosting.assert_categorical_refused_on_export(native, XGBoostBackend())


@pytest.mark.parametrize("missing", [0.0, 0.25])
def test_a_missing_value_other_than_nan_is_refused(missing):
    """XGBoost sends every value equal to ``missing`` to each split's default side;
    the correction and the exported graph compare it like any other value. With
    missing=0.0, a 20-tree model's graph gave probabilities up to 0.31 away from
    its own predict_proba for points with a Klein coordinate exactly 0 (on an axis).
    Refused at fit (hyperbolic estimators) and at export (any XGBoost model)."""
    k = klein_with_ties(300, seed=16)
    y = labels(k, "binary")
    for space in ("klein", "ranks"):
        with pytest.raises(UnsupportedModelError, match=f"missing={missing!r}.*nan"):
            HyperbolicXGBClassifier(
                input_geometry="klein", tree_space=space, missing=missing, **PARAMS
            ).fit(k, y)
    with pytest.raises(UnsupportedModelError, match="missing"):
        HyperbolicXGBRegressor(input_geometry="klein", missing=missing, **PARAMS).fit(
            k, labels(k, "regression")
        )
    native = xgb.XGBClassifier(missing=missing, **PARAMS).fit(k, y)
    with pytest.raises(UnsupportedModelError, match=f"missing={missing!r}"):
        to_onnx(native, input_geometry="klein")
    # A fitted hyperbolic model whose booster was given one afterwards.
    model = HyperbolicXGBClassifier(input_geometry="klein", missing=np.nan, **PARAMS).fit(k, y)
    to_onnx(model)  # NaN (the default) is what Klein coordinates allow
    model.estimator_.set_params(missing=missing)
    with pytest.raises(UnsupportedModelError, match="missing"):
        to_onnx(model)


def test_unsupported_objectives_and_margins():
    k = klein_with_ties(200, seed=13)
    with pytest.raises(UnsupportedModelError, match="count:poisson"):
        HyperbolicXGBRegressor(input_geometry="klein", objective="count:poisson", **PARAMS).fit(
            k, np.abs(labels(k, "regression"))
        )
    with pytest.raises(UnsupportedModelError, match="base_margin"):
        HyperbolicXGBRegressor(input_geometry="klein", **PARAMS).fit(
            k, labels(k, "regression"), base_margin=np.zeros(200)
        )


def test_unreached_splits_keep_threshold_and_warn(monkeypatch):
    k = klein_with_ties(300, seed=14)
    y = labels(k, "binary")
    few = np.flatnonzero(k[:, 0] < 0)  # pretend the trees saw only these rows
    monkeypatch.setattr(
        XGBoostBackend,
        "training_rows",
        lambda self, fitted, y, w: [few] * len(self.read_trees(fitted)),
    )
    with pytest.warns(UserWarning, match="no training row on one side"):
        model = HyperbolicXGBClassifier(input_geometry="klein", **PARAMS).fit(k, y)
    assert model.correction_.n_unreached > 0


def test_generic_wrapper_and_ubjson_reader():
    k = klein_with_ties(200, seed=15)
    y = labels(k, "multiclass")
    model = HyperbolicEstimator(xgb.XGBClassifier(**PARAMS), input_geometry="klein").fit(k, y)
    np.testing.assert_allclose(
        ir.predict_output(model.to_ir().ensemble, k), model.predict_proba(k), atol=1e-6, rtol=0
    )
    booster = model.estimator_.get_booster()
    ubj, text = _ubj_load(booster.save_raw("ubj")), json.loads(booster.save_raw("json"))

    def same(a, b):
        if isinstance(b, dict):
            return set(a) == set(b) and all(same(a[key], b[key]) for key in b)
        if isinstance(a, np.ndarray):
            expected = np.array(b, dtype=np.float64).astype(a.dtype.newbyteorder("="))
            return np.array_equal(a, expected)
        if isinstance(b, list):
            return len(a) == len(b) and all(same(x, z) for x, z in zip(a, b, strict=True))
        return a == b or np.float32(a) == np.float32(b)

    assert same(ubj, text)


# scikit-learn's generic checks use random Euclidean data: a Klein ball of radius 1000 holds it.
BALL = {"input_geometry": "klein", "curvature": -1e-6, "n_estimators": 5, "n_jobs": 1}


@parametrize_with_checks([HyperbolicXGBClassifier(**BALL), HyperbolicXGBRegressor(**BALL)])
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_binary_labels_follow_xgboosts_float32_sigmoid() -> None:
    """XGBoost's label is ``p > 0.5`` of its float32 sigmoid: 1 for margins above
    ``1.5 * 2**-24``, where onnxruntime's Sigmoid still gives exactly 0.5 (up to about
    1.2e-7). Margins of about 1e-7 (a tiny learning rate) land there."""
    from hyp2onnx.datasets import make_wrapped_normal_mixture
    from hyp2onnx.verification import run_onnx

    X, y = make_wrapped_normal_mixture(1000, 3, 2, random_state=0)
    model = HyperbolicXGBClassifier(
        n_estimators=2, learning_rate=1e-7, base_score=0.5, max_depth=3, n_jobs=1
    ).fit(X, y)
    margin = model.estimator_.predict(model._tree_input(X), output_margin=True)
    assert np.any((margin > 1.5 * 2.0**-24) & (margin < 1.2e-7))
    want = model.predict(X)
    for encoding in ("fast", "exact", "standard"):
        got = run_onnx(to_onnx(model, encoding=encoding), X)["label"]
        assert np.array_equal(got, want), (encoding, np.flatnonzero(got != want)[:5])
