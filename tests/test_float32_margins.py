"""The float32 check of ``fit`` searches only the splits a training row can cross.

Every training row that reaches a split lies at or below its nearest value on
the left, or at or above its nearest value on the right, so a split whose two
neighbours stay on their sides when moved as far as rounding moved any row
cannot route a training row apart (`hyp2onnx.ir.crossings.splits_in_reach`).

Oracle: the kept reference ``old_float32_keeps_outputs`` (the library's own
``predict`` on every training row and on its float32 rounding), on training
sets whose neighbours are one float32 step apart (rounding the hyperboloid
input moves Klein values by about that much, so rows do cross), a few steps
apart, and with rows of zero weight, which no split's neighbours account for,
sitting on the thresholds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _fit_reference import old_float32_keeps_outputs

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.ir.crossings import Margins, Splits, splits_in_reach

MODELS: dict[str, Callable[[], Any]] = {
    "tree": lambda: h.HyperbolicDecisionTreeClassifier(random_state=0),
    "xgboost": lambda: h.HyperbolicXGBClassifier(n_estimators=3, max_depth=8, n_jobs=1),
    "lightgbm": lambda: h.HyperbolicLGBMClassifier(
        n_estimators=3, num_leaves=255, min_child_samples=1, min_data_in_bin=1, verbose=-1
    ),
}


def _close_pairs(steps: int, n_pairs: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Hyperboloid points on one axis: Klein values ``v`` (class 0) and ``v`` moved up by
    ``steps`` float32 steps (class 1), so that every tree splits between each pair."""
    v = np.random.default_rng(steps).uniform(-0.9, 0.9, n_pairs).astype(np.float32)
    w = v.copy()
    for _ in range(steps):
        w = np.nextafter(w, np.float32(1))
    k = np.zeros((2 * n_pairs, 2))
    k[:, 0] = np.concatenate([v, w])
    y = np.repeat([0, 1], n_pairs)
    return geometry.from_klein(k), y


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("steps", [1, 64])
def test_the_decision_is_the_reference_one(name: str, steps: int) -> None:
    X, y = _close_pairs(steps)
    model = MODELS[name]().fit(X, y)
    keeps = old_float32_keeps_outputs(model, X)
    assert model.input_dtype_ == ("float32" if keeps else "float64")
    # The cases are what they say: one step apart, rounding moves rows across.
    assert keeps == (steps > 1)


def test_rows_of_zero_weight_on_a_threshold_are_searched() -> None:
    """Rows of zero weight reach splits whose neighbours do not count them: the check
    must not trust the margins then."""
    k = np.zeros((40, 2))
    k[:, 0] = np.repeat([0.2, 0.3], 20)
    y = np.repeat([0, 1], 20)
    make = lambda: h.HyperbolicDecisionTreeClassifier(random_state=0)
    t = make().fit(geometry.from_klein(k), y).estimator_.tree_.threshold[0]
    # Rows at the two float32 values around the threshold (what the tree compares),
    # off the axis by various amounts, so that rounding moves each its own way.
    below = np.float32(t)
    if float(below) > float(t):
        below = np.nextafter(below, np.float32(-1))
    rng = np.random.default_rng(0)
    on = np.zeros((200, 2))
    on[:, 0] = rng.choice([below, np.nextafter(below, np.float32(1))], 200)
    on[:, 1] = rng.uniform(-0.5, 0.5, 200)
    X = geometry.from_klein(np.concatenate([k, on]))
    y = np.concatenate([y, np.arange(on.shape[0]) % 2])
    w = np.concatenate([np.ones(40), np.zeros(on.shape[0])])
    model = make().fit(X, y, sample_weight=w)
    assert model.estimator_.tree_.threshold[0] == t  # zero weights moved nothing
    assert not old_float32_keeps_outputs(model, X)
    assert model.input_dtype_ == "float64"


def _one_split(lo: float, hi: float, t: float) -> Splits:
    one = np.array([0])
    return Splits(
        np.array([0, -1, -1]),
        np.array([t, 0.0, 0.0]),
        np.zeros(3, bool),
        Margins(one, np.array([t]), np.array([lo]), np.array([hi])),
    )


def test_a_split_is_in_reach_only_within_the_rows_move() -> None:
    t = 0.5
    lo, hi = t - 2**-30, t + 2**-30
    near = lambda s, step, op="<=": (
        splits_in_reach(s, np.array([step]), op=op, compare_dtype="float64").feature.size
    )
    assert near(_one_split(lo, hi, t), 2**-31) == 0
    assert near(_one_split(lo, hi, t), 2**-29) == 1
    # Short of the threshold stays left; up to it (rounded up) crosses "<".
    assert near(_one_split(lo, np.inf, t), 2**-31) == 0
    assert near(_one_split(lo, np.inf, t), 2**-31, "<") == 0
    assert near(_one_split(lo, np.inf, t), 2**-30, "<") == 1
    # Rows on the right move down across it as well.
    assert near(_one_split(-np.inf, hi, t), 2**-31) == 0
    assert near(_one_split(-np.inf, hi, t), 2**-29) == 1
    # No row on a side: nothing there to cross, however far rows moved.
    assert near(_one_split(-np.inf, np.inf, t), np.inf) == 0
    assert near(_one_split(lo, np.inf, t), np.inf) == 1
    # Rounded as compared: float32 reads lo + step as the threshold's own value.
    t32 = float(np.float32(t))
    assert (
        splits_in_reach(
            _one_split(t32 - 2**-40, np.inf, t32),
            np.array([2**-41]),
            op="<",
            compare_dtype="float32",
        ).feature.size
        == 1
    )


def test_margins_that_miss_a_split_search_them_all() -> None:
    s = _one_split(0.1, 0.9, 0.5)
    two = Splits(np.array([0, 0, -1]), np.array([0.5, 0.7, 0.0]), np.zeros(3, bool), s.margins)
    assert splits_in_reach(two, np.array([0.0]), op="<=", compare_dtype="float64") is two
    member = Splits(
        np.array([0, 1, -1]), np.array([0.5, 3.0, 0.0]), np.array([False, True, False]), s.margins
    )
    kept = splits_in_reach(member, np.array([0.0]), op="<=", compare_dtype="float64")
    assert kept.feature.tolist() == [1] and kept.member.tolist() == [True]
