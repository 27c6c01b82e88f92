"""skl2onnx converts the hyperbolic MLPs and their region trees after the documented call.

Before: ``skl2onnx.to_onnx(mlp, X[:2])`` raised ``MissingShapeCalculator``:
`register_skl2onnx_converters` registered the tree estimators only. Each
converted graph is compared with the model's own ``predict`` (and
``predict_proba``, ``covered``, ``apply``) on its training points and on
points far from them.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import hyp2onnx as h

skl2onnx = pytest.importorskip("skl2onnx")


def _points() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = h.datasets.make_wrapped_normal_mixture(300, 2, 3, random_state=0)
    far, _ = h.datasets.make_wrapped_normal_mixture(100, 2, 3, random_state=1, noise_std=3.0)
    return X, y, np.vstack([X, far])


@pytest.fixture(scope="module")
def models() -> dict[str, Any]:
    X, y, _ = _points()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter: not converged
        clf = h.HyperbolicMLPClassifier(hidden_layer_sizes=(6,), max_iter=150, random_state=0)
        reg = h.HyperbolicMLPRegressor(hidden_layer_sizes=(6,), max_iter=150, random_state=0)
        clf.fit(X, 10 * y + 5)  # classes 5, 15, 25: labels are not their indices
        reg.fit(X, X[:, 1] * X[:, 2])
    h.register_skl2onnx_converters()
    return {
        "mlp_classifier": clf,
        "mlp_regressor": reg,
        "region_classifier": h.region_tree(clf, X),
        "region_regressor": h.region_tree(reg, X[:150]),  # some rows uncovered
    }


def _run(onx: Any, X: np.ndarray) -> dict[str, Any]:
    import onnxruntime as ort

    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {session.get_inputs()[0].name: X}), strict=True))


@pytest.mark.parametrize(
    "name", ["mlp_classifier", "mlp_regressor", "region_classifier", "region_regressor"]
)
def test_skl2onnx_converts_networks_and_region_trees(models: dict[str, Any], name: str) -> None:
    model = models[name]
    _, _, P = _points()
    got = _run(skl2onnx.to_onnx(model, P[:2]), P)  # the call: default options
    if "classifier" in name:
        np.testing.assert_array_equal(got["output_label"], model.predict(P))
        proba = np.array([[row[c] for c in model.classes_] for row in got["output_probability"]])
        np.testing.assert_allclose(proba, model.predict_proba(P), rtol=1e-6)  # ZipMap: float32
    else:
        np.testing.assert_allclose(got["variable"][:, 0], model.predict(P), rtol=1e-12)
    if name.startswith("region"):
        np.testing.assert_array_equal(got["covered"], model.covered(P))
        np.testing.assert_array_equal(got["region"], model.apply(P))
        if name == "region_regressor":
            assert 0 < got["covered"].sum() < len(P)


@pytest.mark.parametrize("name", ["mlp_classifier", "region_classifier"])
def test_classifier_options_on_networks(models: dict[str, Any], name: str) -> None:
    model = models[name]
    _, _, P = _points()
    plain = _run(skl2onnx.to_onnx(model, P[:2], options={id(model): {"zipmap": False}}), P)
    np.testing.assert_array_equal(plain["label"], model.predict(P))
    np.testing.assert_allclose(plain["probabilities"], model.predict_proba(P), rtol=1e-12)
    options = {id(model): {"zipmap": False, "nocl": True, "encoding": "exact"}}
    indices = _run(skl2onnx.to_onnx(model, P[:2], options=options), P)
    np.testing.assert_array_equal(
        indices["label"], np.searchsorted(model.classes_, model.predict(P))
    )
    options = {id(model): {"zipmap": False, "output_class_labels": True}}
    labelled = _run(skl2onnx.to_onnx(model, P[:2], options=options), P)
    np.testing.assert_array_equal(labelled["class_labels"], model.classes_)
    with pytest.raises(RuntimeError, match="encoding must be one of"):
        skl2onnx.to_onnx(model, P[:2], options={id(model): {"encoding": "compat"}})


def test_every_exportable_estimator_class_is_registered() -> None:
    """What hyp2onnx.to_onnx exports, skl2onnx converts: every hyperbolic estimator, the
    MLPs and region trees."""
    from hyp2onnx.estimators._mlp import HyperbolicMLPClassifier, HyperbolicMLPRegressor
    from hyp2onnx.estimators._regions import RegionTree

    registered = set(h.register_skl2onnx_converters())
    assert {HyperbolicMLPClassifier, HyperbolicMLPRegressor, RegionTree} <= registered
    from skl2onnx._supported_operators import sklearn_operator_name_map

    assert registered <= set(sklearn_operator_name_map)
