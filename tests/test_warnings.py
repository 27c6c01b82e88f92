"""Warnings point at the user's line, however deep inside hyp2onnx they are raised."""

from __future__ import annotations

import warnings

import numpy as np
from _data import labels, points
from sklearn.tree import DecisionTreeClassifier

import hyp2onnx as h


def _caught(call) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    assert caught, "expected a warning"
    return caught


def test_export_warnings_name_the_callers_line(tmp_path) -> None:
    X, k = points(200, 2, seed=3)
    y = labels(k, 2)
    plain = DecisionTreeClassifier(max_depth=3, random_state=0).fit(k, y)
    booster = h.HyperbolicLGBMClassifier(n_estimators=3, verbose=-1, n_jobs=1).fit(X, y)
    calls = [
        lambda: h.to_onnx(plain, input_geometry="klein"),  # its own thresholds
        lambda: h.to_onnx(booster, encoding="compat"),  # CompatRoutingWarning
        lambda: h.save_onnx(booster, tmp_path / "b.onnx", encoding="compat"),
    ]
    for call in calls:
        for w in _caught(call):
            assert w.filename == __file__, (str(w.message), w.filename)


def test_fit_warnings_name_the_callers_line() -> None:
    X, k = points(50, 2, seed=4)
    forest = h.HyperbolicIsolationForest(n_estimators=2, max_samples=500, random_state=0)
    for w in _caught(lambda: forest.fit(X)):
        assert w.filename == __file__, (str(w.message), w.filename)
    booster = h.HyperbolicXGBClassifier(
        n_estimators=2, subsample=0.5, override_subsample=False, n_jobs=1
    )
    for w in _caught(lambda: booster.fit(X, np.arange(len(X)) % 2)):
        assert w.filename == __file__, (str(w.message), w.filename)
