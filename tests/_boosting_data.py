"""Data and scaffolding for the XGBoost and LightGBM tests: hyperbolic points whose Klein
coordinates repeat and nearly repeat, the hard case for threshold placement.
"""

from __future__ import annotations

import numpy as np
import pytest

from hyp2onnx import UnsupportedModelError, ir, to_onnx
from hyp2onnx.correction.midpoints import correct_tree
from hyp2onnx.geometry import from_klein
from hyp2onnx.ir.trees import as_compared

GEOMETRIES = ("hyperboloid", "poincare", "klein")


def klein_with_ties(n: int, d: int = 2, *, seed: int = 0) -> np.ndarray:
    """Unit-ball Klein points on a coarse grid, many nudged by one float64 or float32 ulp.

    Values repeat (the grid), differ by one float64 ulp (equal once cast to
    float32) or by one float32 ulp (distinct in float32, nearly equal).
    Every coordinate lies in [-0.6, 0.6], so for d = 2 the points are well
    inside the ball.
    """
    rng = np.random.default_rng(seed)
    k = rng.choice(np.linspace(-0.6, 0.6, 13), size=(n, d))
    nudge = rng.integers(0, 5, size=(n, d))
    k32 = k.astype(np.float32)
    k = np.select(
        [nudge == 1, nudge == 2, nudge == 3, nudge == 4],
        [
            np.nextafter(k, np.inf),
            np.nextafter(k, -np.inf),
            np.nextafter(k32, np.float32(np.inf)).astype(np.float64),
            np.nextafter(k32, np.float32(-np.inf)).astype(np.float64),
        ],
        k,
    )
    return k


def labels(k: np.ndarray, task: str, *, seed: int = 0) -> np.ndarray:
    """Noisy targets: 'binary' and 'multiclass' labels, or 'regression' values."""
    rng = np.random.default_rng(seed + 1)
    if task == "regression":
        return np.sin(3.0 * k[:, 0]) + k[:, 1] + 0.1 * rng.normal(size=k.shape[0])
    score = k[:, 0] + 0.5 * k[:, 1] + 0.15 * rng.normal(size=k.shape[0])
    if task == "binary":
        return (score > 0).astype(np.int64)
    if task == "multiclass":
        return np.digitize(score, [-0.25, 0.2])
    raise ValueError(task)


def as_points(k: np.ndarray, geometry: str) -> np.ndarray:
    """Klein points in the requested model of hyperbolic space (curvature -1)."""
    return from_klein(k, geometry)


def probe_points(
    thresholds: np.ndarray, features: np.ndarray, d: int, *, seed: int = 0
) -> np.ndarray:
    """Klein points with one coordinate at, just below and just above each threshold.

    Neighbours are taken one float32 ulp and one float64 ulp away, so both
    XGBoost's and LightGBM's comparisons are probed where they flip.
    """
    rng = np.random.default_rng(seed)
    t = np.asarray(thresholds, dtype=np.float64)
    t32 = t.astype(np.float32)
    values = np.concatenate(
        [
            t,
            np.nextafter(t, np.inf),
            np.nextafter(t, -np.inf),
            np.nextafter(t32, np.float32(np.inf)).astype(np.float64),
            np.nextafter(t32, np.float32(-np.inf)).astype(np.float64),
        ]
    )
    feats = np.tile(features, 5)
    k = rng.uniform(-0.6, 0.6, size=(values.shape[0], d))
    k[np.arange(values.shape[0]), feats] = values
    return k[np.linalg.norm(k, axis=1) < 0.99]


#: The fitted pairs the booster tests share: task, input geometry, tree space.
FITTED_CASES = [
    (task, geometry, space)
    for task in ("binary", "multiclass", "regression")
    for geometry in GEOMETRIES
    for space in ("klein", "ranks")
]


def native_output(model, Xk):
    """Probabilities of a classifier, values of a regressor."""
    return model.predict_proba(Xk) if hasattr(model, "predict_proba") else model.predict(Xk)


def ir_output(model, X):
    """The same, computed from the model's IR (`hyp2onnx.ir.predict_output`)."""
    out = ir.predict_output(model.to_ir().ensemble, model.to_klein(X))
    return out if hasattr(model, "predict_proba") else out[:, 0]


def fitted_pair(case, tasks, params, ranks):
    """A hyperbolic booster and the same library model fitted without correction, on
    what the hyperbolic one's learner saw: Klein coordinates, or their ranks
    (``ranks(seen)``, the library's rank space). Returns ``(model, plain, X, y, seen)``."""
    task, geometry, space = case
    hyperbolic, native = tasks[task]
    k = klein_with_ties(300, seed=len(task))
    y = labels(k, task)
    X = as_points(k, geometry)
    model = hyperbolic(input_geometry=geometry, tree_space=space, **params).fit(X, y)
    seen = model.to_klein(X)
    if space != "klein":
        seen = ranks(seen)
    plain = native(**params).fit(seen, y)
    return model, plain, X, y, seen


#: Tests comparing with the plain library on Klein coordinates fit there too (the
#: default fits on ranks: see test_far.py and `fitted_fixture`).
KLEIN = {"tree_space": "klein"}


def booster_tasks(classifier, regressor, plain_classifier, plain_regressor) -> dict:
    """Task -> (hyperbolic estimator, the library's own), as `fitted_pair` takes them."""
    return {
        "binary": (classifier, plain_classifier),
        "multiclass": (classifier, plain_classifier),
        "regression": (regressor, plain_regressor),
    }


def fitted_fixture(tasks, params, ranks):
    """A module fixture: for each of `FITTED_CASES`, a hyperbolic model and the same
    library model fitted without correction (`fitted_pair`), on what the hyperbolic
    one's learner saw: Klein coordinates, or their ranks (the default)."""

    @pytest.fixture(scope="module", params=FITTED_CASES, ids=str)
    def fitted(request):
        return fitted_pair(request.param, tasks, params, ranks)

    return fitted


def assert_training_predictions_unchanged(fitted) -> None:
    """The correction moves no training row: the hyperbolic model predicts as the plain
    one on what its learner saw."""
    model, plain, X, _, seen = fitted
    np.testing.assert_array_equal(native_output(model, X), native_output(plain, seen))
    np.testing.assert_array_equal(model.predict(X), plain.predict(seen))


def assert_reference_thresholds(fitted, backend) -> None:
    """The model's trees are the plain model's (same splits and children) with the
    reference correction's thresholds (`correct_tree` on the Klein rows as ``backend``'s
    library compares them), exact through the library's model format; some moved, as
    many as the model's report counts. Skipped where the learner saw ranks."""
    model, plain, X, _, _ = fitted
    if model.tree_space != "klein":
        pytest.skip("the learner's thresholds are ranks, not Klein values")
    Xc = as_compared(model.to_klein(X), backend.compare_dtype)
    op, threshold_dtype = backend.op, backend.threshold_dtype
    ours, theirs = backend.read_trees(model.estimator_), backend.read_trees(plain)
    moved = 0
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a.feature, b.feature)
        np.testing.assert_array_equal(a.left, b.left)
        np.testing.assert_array_equal(a.right, b.right)
        want, _ = correct_tree(b, Xc, op=op, threshold_dtype=threshold_dtype, midpoint="einstein")
        np.testing.assert_array_equal(a.threshold, want)
        moved += int(np.sum(a.threshold != b.threshold))
    assert moved > 0 and model.correction_.n_moved == moved


def threshold_probes(model, *more: np.ndarray) -> np.ndarray:
    """Klein rows to score: tied and nearly tied rows, rows at and one ulp either side of
    every threshold of the model's IR (`probe_points`), and ``more``."""
    ensemble = model.to_ir().ensemble
    internal = ensemble.feature >= 0
    return np.concatenate(
        [
            klein_with_ties(500, seed=99),
            probe_points(ensemble.threshold[internal], ensemble.feature[internal], 2),
            *more,
        ]
    )


def assert_string_labels(classifier, params) -> None:
    """String labels come back as the classes, in the IR too, and ``predict`` is the most
    probable class."""
    k = klein_with_ties(300, seed=3)
    y = np.array(["cat", "dog", "emu"])[labels(k, "multiclass")]
    X = as_points(k, "poincare")
    model = classifier(input_geometry="poincare", **params).fit(X, y)
    assert model.classes_.tolist() == ["cat", "dog", "emu"]
    assert set(model.predict(X)) <= {"cat", "dog", "emu"}
    proba = model.predict_proba(X)
    np.testing.assert_array_equal(model.predict(X), model.classes_[proba.argmax(axis=1)])
    assert model.to_ir().ensemble.classes.tolist() == ["cat", "dog", "emu"]
    assert model.score(X, y) > 0.6


def assert_categorical_refused_on_export(native, backend) -> None:
    """A plain model's categorical splits are read (input blocks use them), but its
    columns are Klein coordinates, which categorical codes are not: refused on export."""
    assert any(t.categories is not None for t in backend.read_trees(native))
    with pytest.raises(UnsupportedModelError, match="Categorical"):
        to_onnx(native, input_geometry="klein")


def early_stopping_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Klein training rows and their labels ("yes"/"no"), and validation rows whose labels
    are noise, so that early stopping ends the boosting soon: ``k, y, kv, yv``."""
    k = klein_with_ties(300, seed=8)
    y = np.where(labels(k, "binary") == 1, "yes", "no")
    kv = klein_with_ties(200, seed=9)
    yv = np.where(np.random.default_rng(0).random(200) < 0.5, "yes", "no")
    return k, y, kv, yv
