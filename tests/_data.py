"""Small generators of valid hyperbolic test data, shared by the test modules
(and `all_nodes`, to look inside exported graphs).

Points are drawn in unit-ball Klein coordinates (what the trees see) and
mapped to the requested model with `hyp2onnx.geometry.from_klein`, so
every generator returns both the input points and their exact Klein
coordinates.
"""

from __future__ import annotations

import numpy as np

from hyp2onnx import geometry
from hyp2onnx._runtime import all_nodes  # noqa: F401  (re-exported for the tests)


def klein_points(
    n: int,
    d: int,
    *,
    seed: int = 0,
    max_radius: float = 3.0,
    float32: bool = False,
) -> np.ndarray:
    """``n`` unit-ball Klein points in ``d`` dimensions.

    Directions are uniform, hyperbolic distances from the origin uniform in
    ``[0, max_radius]`` (in units of ``R``; the Klein norm is ``tanh`` of it).
    With ``float32=True`` every coordinate is a float32 value, so any model's
    round trip casts back to exactly the same float32 Klein coordinates.
    """
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    k = direction * np.tanh(rng.uniform(0.0, max_radius, size=(n, 1)))
    if float32:
        k = k.astype(np.float32).astype(np.float64)
        norm = np.linalg.norm(k, axis=1)
        k[norm >= 1.0] = 0.0  # a float32 round-up onto the boundary: move it to the origin
    return k


def points(
    n: int,
    d: int,
    geometry_name: str = "hyperboloid",
    *,
    curvature: float = -1.0,
    timelike_dim: int = 0,
    seed: int = 0,
    max_radius: float = 3.0,
    float32: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Points in ``geometry_name`` and their unit-ball Klein coordinates."""
    k = klein_points(n, d, seed=seed, max_radius=max_radius, float32=float32)
    return geometry.from_klein(k, geometry_name, curvature, timelike_dim), k


def labels(k: np.ndarray, n_classes: int = 3, *, seed: int = 0, noise: float = 0.1) -> np.ndarray:
    """Integer class labels learnable from Klein coordinates, with some label noise."""
    rng = np.random.default_rng(seed + 1)
    angle = np.arctan2(k[:, 1], k[:, 0]) if k.shape[1] > 1 else np.pi * k[:, 0]
    y = np.floor((angle + np.pi) / (2 * np.pi) * n_classes).astype(np.int64) % n_classes
    flip = rng.random(k.shape[0]) < noise
    y[flip] = rng.integers(0, n_classes, size=int(flip.sum()))
    return y


def targets(k: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """A smooth regression target of the Klein coordinates plus noise."""
    rng = np.random.default_rng(seed + 2)
    rapidity = np.arctanh(np.clip(k, -0.999, 0.999)).sum(axis=1)
    return np.sin(3 * k[:, 0]) + rapidity + 0.1 * rng.normal(size=k.shape[0])


def random_isometry(d: int, rapidity: float, rng: np.random.Generator) -> np.ndarray:
    """A Haar rotation, then a boost of ``rapidity`` along a random direction: a Lorentz
    matrix of H^d built here from its definition, independently of hyp2onnx's own."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    rotation = np.eye(d + 1)
    rotation[1:, 1:] = q * np.sign(np.diag(r))
    n = rng.standard_normal(d)
    n /= np.linalg.norm(n)
    boost = np.eye(d + 1)
    boost[0, 0] = np.cosh(rapidity)
    boost[0, 1:] = boost[1:, 0] = np.sinh(rapidity) * n
    boost[1:, 1:] += (np.cosh(rapidity) - 1.0) * np.outer(n, n)
    return boost @ rotation


def isometric_copy(X: np.ndarray, G: np.ndarray) -> np.ndarray:
    """Hyperboloid rows ``X`` moved by ``G``, ``x_0`` recomputed (rounding drift)."""
    Y = X @ G.T
    Y[:, 0] = np.sqrt(1.0 + np.einsum("ij,ij->i", Y[:, 1:], Y[:, 1:]))
    return Y
