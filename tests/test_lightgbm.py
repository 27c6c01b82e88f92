"""Hyperbolic LightGBM models: exact corrected thresholds inside the booster."""

from __future__ import annotations

import pickle
import warnings

import _boosting_data as boosting
import lightgbm as lgb
import numpy as np
import pytest
from _boosting_data import KLEIN, as_points, ir_output, klein_with_ties, labels, native_output
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

from hyp2onnx import (
    HyperbolicLGBMClassifier,
    HyperbolicLGBMRegressor,
    UnsupportedModelError,
)
from hyp2onnx.correction.midpoints import correct_tree
from hyp2onnx.correction.tree_space import TreeSpace
from hyp2onnx.estimators._lightgbm import ZERO_THRESHOLD, LightGBMBackend, _Tree

PARAMS = dict(
    n_estimators=6,
    num_leaves=8,
    learning_rate=0.5,
    min_child_samples=5,
    n_jobs=1,
    random_state=0,
    verbose=-1,
)
TASKS = boosting.booster_tasks(
    HyperbolicLGBMClassifier, HyperbolicLGBMRegressor, lgb.LGBMClassifier, lgb.LGBMRegressor
)

#: A hyperbolic model and the same LightGBM model fitted without correction, on Klein
#: coordinates or their ranks in LightGBM's rank space.
fitted = boosting.fitted_fixture(
    TASKS,
    PARAMS,
    lambda seen: TreeSpace.fit(seen, "ranks", "float64", ZERO_THRESHOLD).transform(seen),
)


def test_training_predictions_unchanged(fitted):
    boosting.assert_training_predictions_unchanged(fitted)


def test_thresholds_moved_to_the_reference_correction(fitted):
    boosting.assert_reference_thresholds(fitted, LightGBMBackend())


def test_ir_reproduces_lightgbm(fitted):
    model, _, X, _, _ = fitted
    k = boosting.threshold_probes(
        model,
        # LightGBM's zero band |x| <= 1e-35, and just outside it.
        np.array([[0.0, 0.1], [-0.0, -0.1], [0.1, 0.0], [1e-36, -1e-36], [-1e-36, 0.3]]),
        np.array([[ZERO_THRESHOLD, -ZERO_THRESHOLD], [2e-35, -2e-35], [-0.3, 1e-35]]),
    )
    Xt = as_points(k, model.input_geometry)
    native = native_output(model.estimator_, model.to_klein(Xt))
    np.testing.assert_allclose(ir_output(model, Xt), native, atol=1e-12, rtol=0)
    if not hasattr(model, "predict_proba"):  # float64 sums in LightGBM's order: bit for bit
        np.testing.assert_array_equal(ir_output(model, Xt), native)


def test_string_labels_and_classes():
    boosting.assert_string_labels(HyperbolicLGBMClassifier, PARAMS)


def test_eval_set_in_hyperbolic_coordinates_and_early_stopping():
    k, y, kv, yv = boosting.early_stopping_data()
    params = dict(PARAMS, n_estimators=40)
    stop = [lgb.early_stopping(2, verbose=False)]
    with warnings.catch_warnings():  # LightGBM 4.7 prefers eval_X/eval_y; both are mapped
        warnings.simplefilter("ignore", lgb.basic.LGBMDeprecationWarning)
        model = HyperbolicLGBMClassifier(**params).fit(
            as_points(k, "hyperboloid"),
            y,
            eval_set=[(as_points(kv, "hyperboloid"), yv)],
            callbacks=stop,
        )
    best = model.estimator_.best_iteration_
    assert 0 < best < 40 and model.estimator_.booster_.best_iteration == best
    assert model.to_ir().ensemble.n_trees == best
    Xt = as_points(klein_with_ties(300, seed=10), "hyperboloid")
    np.testing.assert_allclose(ir_output(model, Xt), model.predict_proba(Xt), atol=1e-12, rtol=0)
    # LightGBM's own eval_X/eval_y take hyperbolic points too (LightGBM 4.7 does not
    # encode eval_y labels itself, so these are the integer labels).
    model = HyperbolicLGBMClassifier(**params).fit(
        as_points(k, "hyperboloid"),
        (y == "yes").astype(int),
        eval_X=(as_points(kv, "hyperboloid"),),
        eval_y=((yv == "yes").astype(int),),
        callbacks=stop,
    )
    assert model.estimator_.best_iteration_ < 40


def test_sample_and_class_weight():
    k = klein_with_ties(300, seed=4)
    y = labels(k, "multiclass")
    w = np.random.default_rng(2).choice([0.0, 0.5, 2.0], size=300)
    params = dict(PARAMS, class_weight={0: 1.0, 1: 0.0, 2: 3.0})
    model = HyperbolicLGBMClassifier(input_geometry="klein", **KLEIN, **params).fit(
        k, y, sample_weight=w
    )
    plain = lgb.LGBMClassifier(**params).fit(k, y, sample_weight=w)
    seen = (w > 0) & (y != 1)
    np.testing.assert_array_equal(model.predict_proba(k[seen]), plain.predict_proba(k[seen]))
    backend = LightGBMBackend()
    for a, b in zip(backend.read_trees(model.estimator_), backend.read_trees(plain), strict=True):
        np.testing.assert_array_equal(a.threshold, correct_tree(b, k[seen], op="<=")[0])


def test_clone_get_params_and_pickle():
    model = HyperbolicLGBMRegressor(input_geometry="poincare", num_leaves=5, verbose=-1, max_bin=31)
    params = model.get_params()
    assert params["num_leaves"] == 5 and params["max_bin"] == 31 and params["verbose"] == -1
    twin = clone(model)
    assert twin.get_params() == params
    twin.set_params(num_leaves=4, min_data_in_bin=1, n_estimators=5)
    assert twin.get_params()["min_data_in_bin"] == 1
    k = klein_with_ties(200, seed=6)
    X = as_points(k, "poincare")
    twin.fit(X, labels(k, "regression"))
    again = pickle.loads(pickle.dumps(twin))
    np.testing.assert_array_equal(again.predict(X), twin.predict(X))


def test_subsampling_override_aliases_goss_and_warning():
    k = klein_with_ties(300, seed=11)
    y = labels(k, "binary")
    bagged = dict(PARAMS, bagging_fraction=0.5, subsample_freq=1, pos_subsample=0.5)
    model = HyperbolicLGBMClassifier(input_geometry="klein", **KLEIN, **bagged)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(k, y)
    native = model.estimator_.get_params()
    assert native["bagging_fraction"] == native["pos_subsample"] == native["subsample"] == 1.0
    assert model.bagging_fraction == 0.5
    plain = lgb.LGBMClassifier(**PARAMS).fit(k, y)
    np.testing.assert_array_equal(model.predict_proba(k), plain.predict_proba(k))
    with pytest.warns(UserWarning, match="approximate"):
        HyperbolicLGBMClassifier(input_geometry="klein", override_subsample=False, **bagged).fit(
            k, y
        )
    goss = dict(PARAMS, data_sample_strategy="goss")
    with pytest.raises(UnsupportedModelError, match="GOSS"):
        HyperbolicLGBMClassifier(input_geometry="klein", **goss).fit(k, y)
    with pytest.warns(UserWarning, match="approximate"):
        HyperbolicLGBMClassifier(input_geometry="klein", override_subsample=False, **goss).fit(k, y)


def test_categorical_rejected():
    k = klein_with_ties(200, seed=12)
    y = labels(k, "binary")
    with pytest.raises(UnsupportedModelError, match="categorical"):
        HyperbolicLGBMClassifier(input_geometry="klein", **PARAMS).fit(
            k, y, categorical_feature=[0]
        )
    with pytest.raises(UnsupportedModelError, match="categorical"):
        HyperbolicLGBMClassifier(input_geometry="klein", cat_feature=[1], **PARAMS).fit(k, y)
    codes = np.column_stack([np.arange(200) % 6, k[:, 1]])
    native = lgb.LGBMClassifier(**PARAMS).fit(
        codes, (codes[:, 0] % 2 == 0).astype(int), categorical_feature=[0]
    )
    boosting.assert_categorical_refused_on_export(native, LightGBMBackend())


def test_zero_as_missing_and_zero_band():
    k = klein_with_ties(200, seed=13)
    y = labels(k, "binary")
    with pytest.raises(UnsupportedModelError, match="zero_as_missing"):
        HyperbolicLGBMClassifier(input_geometry="klein", zero_as_missing=True, **PARAMS).fit(k, y)

    def tree(threshold: float, decision_type: int) -> _Tree:
        block = (
            "Tree=0\nnum_leaves=2\nnum_cat=0\nsplit_feature=0\n"
            f"threshold={threshold!r}\ndecision_type={decision_type}\nleft_child=-1\n"
            "right_child=-2\nleaf_value=0.5 -0.5\nis_linear=0\nshrinkage=1\n\n\n"
        )
        return _Tree(0, block)

    zero, default_left = 1 << 2, 2
    nan = 2 << 2
    agreeing = [(0.5, zero | default_left), (-0.5, zero), (0.5, 0), (-1e-36, nan)]
    for threshold, decision_type in agreeing:
        t = tree(threshold, decision_type)  # agrees with x <= t on the whole zero band
        t.check_zero_band(t.threshold, 0)
    disagreeing = [(0.5, zero), (-0.5, zero | default_left), (1e-36, zero | default_left)]
    for threshold, decision_type in disagreeing:
        t = tree(threshold, decision_type)
        with pytest.raises(UnsupportedModelError, match="zero_as_missing"):
            t.check_zero_band(t.threshold, 0)
    assert tree(0.5, 0).with_thresholds(np.array([0.1])).count("threshold=0.1\n") == 1


def test_unsupported_objectives():
    k = klein_with_ties(200, seed=14)
    with pytest.raises(UnsupportedModelError, match="poisson"):
        HyperbolicLGBMRegressor(input_geometry="klein", objective="poisson", **PARAMS).fit(
            k, np.abs(labels(k, "regression"))
        )
    with pytest.raises(UnsupportedModelError, match="sigmoid"):
        HyperbolicLGBMClassifier(input_geometry="klein", sigmoid=2.0, **PARAMS).fit(
            k, labels(k, "binary")
        )
    with pytest.raises(UnsupportedModelError, match="init_score"):
        HyperbolicLGBMRegressor(input_geometry="klein", **PARAMS).fit(
            k, labels(k, "regression"), init_score=np.zeros(200)
        )


def test_dart_and_single_leaf_trees():
    k = klein_with_ties(200, seed=15)
    y = labels(k, "regression")
    model = HyperbolicLGBMRegressor(input_geometry="klein", boosting_type="dart", **PARAMS)
    model.fit(k, y)
    np.testing.assert_array_equal(ir_output(model, k), model.predict(k))
    stumps = HyperbolicLGBMRegressor(input_geometry="klein", **dict(PARAMS, min_child_samples=500))
    stumps.fit(k, y)
    assert stumps.correction_.n_splits == 0
    np.testing.assert_array_equal(ir_output(stumps, k), stumps.predict(k))


# scikit-learn's generic checks use random Euclidean data: a Klein ball of radius 1000 holds it.
# (An extra keyword such as verbose=-1 is not a signature parameter, which one check forbids.)
BALL = {"input_geometry": "klein", "curvature": -1e-6, "n_jobs": 1}


@parametrize_with_checks(
    [
        HyperbolicLGBMClassifier(n_estimators=5, **BALL),
        HyperbolicLGBMRegressor(n_estimators=20, **BALL),
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_tree_lines_are_found_as_the_line_anchored_regex_finds_them():
    """`_tree_starts` skips the regex's per-line tries; it finds exactly what
    ``(?m)^Tree=\\d+$`` finds: not mid-line, not with a suffix, at the text's start."""
    import re

    from hyp2onnx.estimators._lightgbm import _tree_starts

    text = (
        "Tree=0\nx=1\nxTree=1\nTree=2a\nTree=3\r\nTree=4\n Tree=5\nTree=\nTree=6\n"
        "end of trees\nTree=7\n"
    )
    end = text.find("end of trees")
    want = [m.start() for m in re.finditer(r"(?m)^Tree=\d+$", text[:end])]
    assert _tree_starts(text, end) == want == [0, text.find("Tree=4"), text.find("Tree=6")]
