"""Data and scaffolding for the XGBoost and LightGBM tests: hyperbolic points whose Klein
coordinates repeat and nearly repeat, the hard case for threshold placement.
"""

from __future__ import annotations

import numpy as np

from hyp2onnx import ir
from hyp2onnx.geometry import from_klein

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
