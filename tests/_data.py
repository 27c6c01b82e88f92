"""Small generators of valid hyperbolic test data, shared by the test modules
(and `all_nodes`, to look inside exported graphs; `assert_graph_answers_as_model`).

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


def assert_graph_answers_as_model(model, graph, X: np.ndarray) -> tuple[dict, np.ndarray]:
    """``graph``'s outputs on ``X`` equal ``model``'s ``predict`` (and ``predict_proba``)
    bit for bit, ``X`` cast to the graph's input dtype for both; the outputs and the
    rows as cast."""
    from hyp2onnx.verification import run_onnx

    got = run_onnx(graph, X)
    float32 = graph.graph.input[0].type.tensor_type.elem_type == 1
    Xt = X.astype(np.float32 if float32 else np.float64)
    if "label" in got:
        np.testing.assert_array_equal(got["label"], model.predict(Xt))
        np.testing.assert_array_equal(got["probabilities"], model.predict_proba(Xt))
    else:
        np.testing.assert_array_equal(got["variable"][:, 0], model.predict(Xt))
    return got, Xt


def coded_model(
    X: np.ndarray,
    k: np.ndarray,
    codes: list[int],
    flipped: int,
    rng: np.random.Generator,
    *,
    seed: int,
    learner: str = "lightgbm",
    n_estimators: int = 5,
):
    """A binary classifier on two hyperbolic columns ``X`` (Klein ``k``) and one
    categorical column of ``codes`` drawn by ``rng``: ``labels(k, 2, seed=seed)``,
    flipped where the code is ``flipped``. ``learner="lightgbm"`` splits on sets of
    codes; any other, a scikit-learn tree, splits them as numbers. The fitted model
    and its rows."""
    import hyp2onnx as h
    from hyp2onnx.blocks import Categorical, Hyperbolic

    c = rng.choice(np.array(codes, dtype=np.float64), size=len(X))
    y = labels(k, 2, seed=seed) ^ (c == flipped)
    blocks = [Hyperbolic(2), Categorical(1)]
    if learner == "lightgbm":
        model = h.HyperbolicLGBMClassifier(
            n_estimators=n_estimators,
            num_leaves=4,
            verbose=-1,
            min_data_per_group=5,
            cat_smooth=1.0,
            n_jobs=1,
            input_blocks=blocks,
        )
    else:
        model = h.HyperbolicDecisionTreeClassifier(max_depth=4, random_state=0, input_blocks=blocks)
    rows = np.column_stack([X, c])
    return model.fit(rows, y), rows
