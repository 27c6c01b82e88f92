"""The standard-operator encoding: no ai.onnx.ml, same outputs as the exact encoding.

Both tree walks (perfect layout and child pointers) are checked against the
exact encoding bit for bit, for every backend, on random, threshold-adjacent
and far rows, in onnxruntime and in the reference evaluator.
"""

from __future__ import annotations

import numpy as np
import pytest
from _data import labels, points, targets
from test_export import adversarial_klein

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.emit import standard
from hyp2onnx.export import to_onnx
from hyp2onnx.verify import reference_evaluator, run_onnx


def _models():
    return {
        "tree_clf": (h.HyperbolicDecisionTreeClassifier(max_depth=5, random_state=0), 3),
        "forest_clf": (h.HyperbolicRandomForestClassifier(n_estimators=4, random_state=0), 2),
        "forest_reg": (
            h.HyperbolicRandomForestRegressor(n_estimators=3, max_depth=6, random_state=0),
            0,
        ),
        "xgb_multi": (h.HyperbolicXGBClassifier(n_estimators=6, max_depth=3, n_jobs=1), 4),
        "lgbm_binary": (h.HyperbolicLGBMClassifier(n_estimators=6, verbose=-1, n_jobs=1), 2),
        "lgbm_reg": (h.HyperbolicLGBMRegressor(n_estimators=6, verbose=-1, n_jobs=1), 0),
    }


@pytest.fixture(params=["perfect", "pointer"])
def strategy(request, monkeypatch):
    monkeypatch.setattr(standard, "choose_strategy", lambda depth: request.param)
    return request.param


@pytest.mark.parametrize(
    "geometry_name, curvature", [("hyperboloid", -1.0), ("poincare", -0.6), ("klein", -2.5)]
)
@pytest.mark.parametrize("name", list(_models()))
def test_standard_equals_exact(name, geometry_name, curvature, strategy):
    model, n_classes = _models()[name]
    model.set_params(input_geometry=geometry_name, curvature=curvature)
    X, k = points(400, 3, geometry_name, curvature=curvature, seed=31)
    model.fit(X, labels(k, n_classes) if n_classes else targets(k))
    far = 7.0 if geometry_name == "klein" else 12.0  # float32 Klein input holds ~8 at most
    X_all = np.concatenate(
        [
            X,
            geometry.from_klein(adversarial_klein(model, k), geometry_name, curvature),
            points(100, 3, geometry_name, curvature=curvature, seed=32, max_radius=far)[0],
        ]
    )
    for dtype in ("float32", "float64"):
        onx = to_onnx(model, encoding="standard", dtype=dtype)
        assert all(o.domain in ("", "ai.onnx") for o in onx.opset_import)
        assert all(node.domain in ("", "ai.onnx") for node in onx.graph.node)
        exact = to_onnx(model, dtype=dtype, encoding="exact")
        got, want = run_onnx(onx, X_all), run_onnx(exact, X_all)
        for output in want:
            np.testing.assert_array_equal(got[output], want[output])
        assert h.verify(
            model, onx, X_all.astype(dtype)
        ).ok  # the float32 graph's user holds float32 (verify runs the model on the data as held)
        ref = reference_evaluator(onx).run(None, {"X": X_all[:80].astype(dtype)})
        for output, value in zip(onx.graph.output, ref, strict=True):
            if value.dtype.kind == "f":  # the runtimes' exp may differ in the last bit
                np.testing.assert_allclose(value, got[output.name][:80], rtol=0, atol=1e-6)
            else:
                np.testing.assert_array_equal(value, got[output.name][:80])


def test_deep_trees_choose_pointer_walk():
    X, k = points(2000, 2, seed=33)
    deep = h.HyperbolicDecisionTreeRegressor(random_state=0).fit(X, targets(k))  # fully grown
    shallow = h.HyperbolicDecisionTreeRegressor(max_depth=6).fit(X, targets(k))
    assert deep.estimator_.get_depth() > standard.PERFECT_MAX_DEPTH
    assert [g.strategy for g in standard.plan_groups(deep.to_ir().ensemble)] == ["pointer"]
    assert [g.strategy for g in standard.plan_groups(shallow.to_ir().ensemble)] == ["perfect"]
    onx = to_onnx(deep, encoding="standard")
    np.testing.assert_array_equal(
        run_onnx(onx, X)["variable"][:, 0], deep.predict(X.astype(np.float32))
    )


def test_single_leaf_trees():
    X, k = points(50, 2, seed=34)
    model = h.HyperbolicRandomForestRegressor(n_estimators=3, max_depth=1, random_state=0)
    model.fit(X, np.full(50, 2.5))  # constant target: every tree is one leaf
    got = run_onnx(to_onnx(model, encoding="standard"), X)["variable"][:, 0]
    np.testing.assert_array_equal(got, model.predict(X.astype(np.float32)))
