"""Exported XGBoost and LightGBM graphs against their Python models.

Exact encoding: identical labels; regression values bit-identical (XGBoost
and LightGBM); LightGBM probabilities within 1e-15 (its logistic/softmax use
the C library's exp, the graph the runtime's, which differs in the last bit),
XGBoost probabilities within 1e-6 (its own arithmetic is float32). Compat: float32 graphs whose
labels may differ only at near-ties (LightGBM compares in float64).
"""

from __future__ import annotations

import warnings

import lightgbm
import numpy as np
import pytest
import xgboost
from _data import labels, points, targets
from test_export import adversarial_klein

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.export import to_onnx
from hyp2onnx.verification import reference_evaluator, run_onnx

CASES = {
    "xgb_binary": (h.HyperbolicXGBClassifier, 2),
    "xgb_multi": (h.HyperbolicXGBClassifier, 4),
    "xgb_reg": (h.HyperbolicXGBRegressor, 0),
    "lgbm_binary": (h.HyperbolicLGBMClassifier, 2),
    "lgbm_multi": (h.HyperbolicLGBMClassifier, 4),
    "lgbm_reg": (h.HyperbolicLGBMRegressor, 0),
}
#: Probabilities only: regression values are compared for equality.
TOLERANCE = {"xgb": 1e-6, "lgbm": 1e-15}


def _model(name, geometry_name, curvature=-1.0, timelike_dim=0):
    cls, n_classes = CASES[name]
    X, k = points(500, 3, geometry_name, curvature=curvature, seed=21, timelike_dim=timelike_dim)
    y = labels(k, n_classes) if n_classes else targets(k)
    params = dict(
        n_estimators=15,
        max_depth=4,
        input_geometry=geometry_name,
        curvature=curvature,
        n_jobs=1,
        timelike_dim=timelike_dim,
    )
    if name.startswith("lgbm"):
        params["verbose"] = -1
    return cls(**params).fit(X, y), X, k


def _compare(model, onx, X, atol):
    dtype = np.float32 if onx.graph.input[0].type.tensor_type.elem_type == 1 else np.float64
    Xt = X.astype(dtype)
    got = run_onnx(onx, Xt)
    if "label" in got:
        np.testing.assert_array_equal(got["label"], model.predict(Xt))
        np.testing.assert_allclose(got["probabilities"], model.predict_proba(Xt), rtol=0, atol=atol)
    else:
        np.testing.assert_array_equal(got["variable"][:, 0], model.predict(Xt))


@pytest.mark.parametrize("geometry_name", ["hyperboloid", "poincare", "klein"])
@pytest.mark.parametrize("name", list(CASES))
def test_exact_parity(name, geometry_name):
    model, X, k = _model(name, geometry_name, curvature=-1.7)
    X_adv = geometry.from_klein(adversarial_klein(model, k), geometry_name, -1.7)
    far = 7.0 if geometry_name == "klein" else 12.0
    X_far, _ = points(100, 3, geometry_name, curvature=-1.7, seed=22, max_radius=far)
    X_all = np.concatenate([X, X_adv, X_far])
    for dtype in ("float32", "float64"):
        onx = to_onnx(model, dtype=dtype, encoding="exact")
        _compare(model, onx, X_all, TOLERANCE[name.split("_")[0]])
        # the float32 graph's user holds float32 (verify runs the model on the data as held)
        assert h.verify(model, onx, X_all.astype(dtype)).ok
        # The default graph: the same labels, values within its recorded bound.
        assert h.verify(model, to_onnx(model, dtype=dtype), X_all.astype(dtype)).ok


@pytest.mark.parametrize("timelike_dim", [2, -1])
@pytest.mark.parametrize("name", ["xgb_multi", "lgbm_binary", "lgbm_reg"])
def test_timelike_dim_and_curvature(name, timelike_dim):
    """The timelike coordinate elsewhere than column 0, at curvature -0.3."""
    model, X, k = _model(name, "hyperboloid", curvature=-0.3, timelike_dim=timelike_dim)
    X_adv = geometry.from_klein(adversarial_klein(model, k), "hyperboloid", -0.3, timelike_dim)
    X_all = np.concatenate([X, X_adv])
    for dtype in ("float32", "float64"):
        onx = to_onnx(model, dtype=dtype, encoding="exact")
        _compare(model, onx, X_all, TOLERANCE[name.split("_")[0]])
        # The default graph: the same labels, values within its recorded bound.
        assert h.verify(model, to_onnx(model, dtype=dtype), X_all.astype(dtype)).ok


@pytest.mark.parametrize("name", list(CASES))
def test_compat_parity(name):
    model, X, _ = _model(name, "hyperboloid")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        onx = to_onnx(model, encoding="compat")
    announced = any(issubclass(w.category, h.CompatRoutingWarning) for w in caught)
    assert announced == name.startswith("lgbm")  # float64 comparisons only
    got = run_onnx(onx, X)
    X32 = X.astype(np.float32)
    if "label" in got:
        proba = model.predict_proba(X32)
        np.testing.assert_allclose(got["probabilities"], proba, atol=1e-5)
        differs = got["label"] != model.predict(X32)
        top2 = np.sort(proba, axis=1)[:, -2:]
        assert np.all(top2[differs, 1] - top2[differs, 0] < 1e-4)
    else:
        np.testing.assert_allclose(got["variable"][:, 0], model.predict(X32), atol=1e-5)


@pytest.mark.parametrize("name", ["xgb_multi", "lgbm_multi", "lgbm_reg"])
def test_reference_evaluator(name):
    model, X, _ = _model(name, "poincare")
    onx = to_onnx(model)
    ort_out = run_onnx(onx, X[:60])
    ref = reference_evaluator(onx).run(None, {"X": X[:60].astype(np.float32)})
    for output, value in zip(onx.graph.output, ref, strict=True):
        if value.dtype.kind == "f":
            np.testing.assert_allclose(value, ort_out[output.name], rtol=0, atol=1e-6)
        else:
            np.testing.assert_array_equal(value, ort_out[output.name])


def test_plain_boosters_trained_on_klein():
    _, k = points(400, 2, seed=23)
    xgb = xgboost.XGBClassifier(n_estimators=10, max_depth=3).fit(k, labels(k, 3))
    lgbm = lightgbm.LGBMRegressor(n_estimators=10, verbose=-1).fit(k, targets(k))
    P = geometry.from_klein(k, "poincare")
    for plain in (xgb, lgbm):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            onx = to_onnx(plain, input_geometry="poincare")
        held = P.astype(
            np.float32 if onx.graph.input[0].type.tensor_type.elem_type == 1 else np.float64
        )
        assert h.verify(plain, onx, held).ok


def test_lightgbm_exact_is_rejected_by_skl2onnx_with_a_way_out():
    import skl2onnx

    h.register_skl2onnx_converters()  # the documented call; import hyp2onnx does not

    model, X, _ = _model("lgbm_binary", "hyperboloid")
    with pytest.raises(RuntimeError, match="compat"):
        skl2onnx.to_onnx(model, X[:1].astype(np.float32))
    with pytest.warns(h.CompatRoutingWarning):
        onx = skl2onnx.to_onnx(
            model,
            X[:1].astype(np.float32),
            target_opset={"": 17, "ai.onnx.ml": 3},
            options={id(model): {"encoding": "compat", "zipmap": False}},
        )
    np.testing.assert_allclose(
        run_onnx(onx, X)["probabilities"], model.predict_proba(X.astype(np.float32)), atol=1e-5
    )
