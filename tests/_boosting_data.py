"""Data for the XGBoost and LightGBM tests: hyperbolic points whose Klein
coordinates repeat and nearly repeat, the hard case for threshold placement.
"""

from __future__ import annotations

import numpy as np

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
