"""``.skops`` files of the estimators that belong to no backend load in the command line.

Isolation and rotation forests hold hyp2onnx types of their own (the
estimator, ``IsolationTree``), and networks fitted by a stochastic solver
hold scikit-learn's optimiser, which the trusted list of
`hyp2onnx.cli._models.trusted_types` must name; before it did, their
files were refused with a fix ("save only the fitted estimator") that the
user had already followed.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np
import pytest
from _cli import assert_usage_error, cli, convert_and_verify

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.verification import ANOMALY_SCORE_ATOL

sio = pytest.importorskip(
    "skops.io", reason="skops is not installed (pip install skops): the CLI's .skops files"
)

MODELS = {
    "isolation": lambda: h.HyperbolicIsolationForest(n_estimators=5, random_state=0),
    "rotation classifier": lambda: h.HyperbolicRotationForestClassifier(
        n_estimators=4, max_depth=4, random_state=0
    ),
    "rotation regressor": lambda: h.HyperbolicRotationForestRegressor(
        n_estimators=4, max_depth=4, random_state=0
    ),
    # a stochastic solver keeps its optimiser (scikit-learn's AdamOptimizer / SGDOptimizer)
    "mlp adam": lambda: h.HyperbolicMLPClassifier(
        hidden_layer_sizes=(8,), max_iter=20, random_state=0
    ),
    "mlp sgd regressor": lambda: h.HyperbolicMLPRegressor(
        hidden_layer_sizes=(8,), solver="sgd", max_iter=20, random_state=0
    ),
}


@pytest.mark.parametrize("name", MODELS)
def test_skops_file_converts_checks_and_verifies(name: str, tmp_path: Path) -> None:
    X, y = make_wrapped_normal_mixture(n_samples=300, n_features=3, n_classes=3, random_state=0)[:2]
    model = MODELS[name]()
    model.fit(X, y.astype(float) if "regressor" in name else y)
    sio.dump(model, tmp_path / "model.skops")
    np.save(tmp_path / "X.npy", X)

    out = convert_and_verify(tmp_path / "model.skops", tmp_path / "m.onnx", tmp_path / "X.npy")
    assert out.startswith("OK"), out
    if name == "isolation":  # the scores' tolerance is their own bound, not atol's 0
        assert f"(tolerance {ANOMALY_SCORE_ATOL:.3g})" in out.split("scores")[-1], out


def test_other_types_in_the_file_are_still_refused(tmp_path: Path) -> None:
    X = make_wrapped_normal_mixture(n_samples=100, n_features=2, n_classes=2, random_state=0)[0]
    forest = h.HyperbolicIsolationForest(n_estimators=3, random_state=0).fit(X)
    sio.dump({"model": forest, "when": datetime.date(2024, 1, 1)}, tmp_path / "odd.skops")
    code, _, err = cli("convert", tmp_path / "odd.skops", "-o", tmp_path / "odd.onnx")
    assert_usage_error(code, err, match="trusted list")
    assert not (tmp_path / "odd.onnx").exists()
