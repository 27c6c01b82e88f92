"""Centred isolation trees, grown here by a reference that does every node from scratch.

The estimator grows its centred trees from per-row terms computed once per
tree (norms, unit vectors, Poincare-ball points), each node doing only what
depends on the node. The reference below does every node from scratch with
its own copies of the per-node arithmetic as the design was first written
(the Lorentzian centroid from stable sums, the boost matrix, the Mobius move
to the origin, the projection in feature order), with the same random
draws. Every fitted tree must equal it bit for bit: thresholds, normals,
children, counts and depths, near the origin and up to the radius the
centred design supports (``CENTRED_RADIUS``), with rows at the origin,
repeated rows, both threshold laws and subsets of the directions. The
public geometry functions, which share their arithmetic with the fit, are
held to the same copies.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import hyp2onnx as h
from hyp2onnx.estimators import _isolation
from hyp2onnx.estimators._isolation import lorentz_boost_to_origin
from hyp2onnx.geometry import lorentzian_centroid, move_to_origin, to_klein, unit_hyperboloid
from hyp2onnx.ir.projection import project

TRIES = 4

# -- the per-node arithmetic, written out as the design states it -------------------------------


def _norms(v):
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", v, v))
    redo = ~(norms > 1e-150) | ~(norms < 1e150)
    if not redo.any():
        return norms
    w = v[redo]
    scale = np.abs(w).max(axis=1, initial=0.0)
    safe = np.where((scale > 0) & np.isfinite(scale), scale, 1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = scale * np.sqrt(np.einsum("ij,ij->i", w / safe[:, None], w / safe[:, None]))
    norms[redo] = np.where(np.isinf(scale), np.inf, scaled)
    return norms


def _centroid(x):
    """``m / sqrt(-<m, m>_L)``, ``m_0 - |m_s|`` summed from positive terms row by row."""
    m = x.sum(axis=0)
    ms = m[1:]
    s = math.hypot(*ms)
    if s > 0:
        spatial = _norms(x[:, 1:])
        with np.errstate(divide="ignore", invalid="ignore"):
            unit = x[:, 1:] / spatial[:, None]
            diff = unit - ms / s
            gap = 1.0 / (x[:, 0] + spatial) + spatial * np.einsum("ij,ij->i", diff, diff) / 2.0
        lower = float(np.sum(np.where(spatial > 0, gap, x[:, 0])))
    else:
        lower = float(m[0])
    mu_s = ms / (math.sqrt(lower) * math.sqrt(float(m[0]) + s))
    return np.concatenate([[math.hypot(1.0, *mu_s)], mu_s])


def _boost(mu):
    m0, ms = mu[0], mu[1:]
    d = ms.shape[0]
    M = np.empty((d + 1, d + 1))
    M[0, 0] = m0
    M[0, 1:] = -ms
    M[1:, 0] = -ms
    M[1:, 1:] = np.eye(d) + np.outer(ms, ms) / (1.0 + m0)
    return M


def _move(x, mu):
    """The Mobius translation of ``mu`` to the origin, through the Poincare ball."""
    a = mu[1:] / (1.0 + mu[0])
    ta = 2.0 / (1.0 + mu[0])
    b = x[:, 1:] / (1.0 + x[:, :1])
    tb = 2.0 / (1.0 + x[:, 0])
    diff = b - a
    dd = np.einsum("ij,ij->i", diff, diff)
    ratio = dd / ta / tb
    z0 = 1.0 + 2.0 * ratio
    y = (ta * diff - dd[:, None] * a) / (dd + ta * tb)[:, None]
    moved = np.concatenate([z0[:, None], (1.0 + z0)[:, None] * y], axis=1)
    return moved, 2.0 * np.arcsinh(np.sqrt(ratio))


def _project(k, w):
    out = k[:, 0] * w[0]
    for f in range(1, k.shape[1]):
        out += k[:, f] * w[f]
    return out


def _draw(lo: float, hi: float, law: str, rng: np.random.RandomState) -> float:
    u = rng.uniform()
    if law == "klein":
        t = lo + (hi - lo) * u
    else:
        a, b = math.atanh(max(lo, -1.0 + 1e-16)), math.atanh(min(hi, 1.0 - 1e-16))
        t = math.tanh(a + (b - a) * u)
    return min(max(t, lo), float(np.nextafter(hi, -np.inf)))


def _split(k, x, law, n_directions, rng):
    """One centred node, from scratch: ``(0, threshold, normal, goes_left)`` or None."""
    d = k.shape[1]
    mu = _centroid(x)
    M = _boost(mu)
    moved, _ = _move(x, mu)
    k_moved = moved[:, 1:] / moved[:, :1]
    for _ in range(TRIES):
        u = np.zeros(d)
        axes = np.arange(d) if n_directions >= d else rng.choice(d, n_directions, replace=False)
        u[axes] = rng.standard_normal(axes.size)
        norm = np.linalg.norm(u)
        if norm == 0:
            continue
        u /= norm
        p_moved = k_moved @ u
        lo, hi = float(p_moved.min()), float(p_moved.max())
        if not lo < hi:
            continue
        s = (
            _draw(max(lo, -1.0), min(hi, 1.0), law, rng)
            if -1.0 < lo and hi < 1.0
            else lo / 2 + hi / 2
        )
        n = -s * M[0] + u @ M[1:]
        scale = float(np.linalg.norm(n[1:]))
        w, tau = n[1:] / scale, -n[0] / scale
        p = _project(k, w)
        p_lo, p_hi = float(p.min()), float(p.max())
        if not p_lo < p_hi:
            continue
        tau = min(max(tau, p_lo), float(np.nextafter(p_hi, -np.inf)))
        return 0, tau, w, p <= tau
    return None


def _axis_split(k, features, law, rng):
    """One axis node (``splits="axis"``), from scratch: ``(feature, threshold, goes_left)``."""
    sub = k[:, features]
    lo, hi = sub.min(axis=0), sub.max(axis=0)
    varying = np.flatnonzero(lo < hi)
    if varying.size == 0:
        return None
    j = varying[rng.randint(varying.size)]
    t = _draw(float(lo[j]), float(hi[j]), law, rng)
    return int(features[j]), t, None, k[:, features[j]] <= t


def _reference_tree(k, x, *, split, max_depth):
    """Depth-first, left child first: the estimator's node order and draw order.
    ``split(k_rows, x_rows)`` gives ``(feature, threshold, normal, goes_left)`` or None."""
    d = k.shape[1]
    feature, threshold, normal, left, right, count, depth = [], [], [], [], [], [], []

    def new(n: int, level: int) -> int:
        feature.append(-1)
        threshold.append(0.0)
        normal.append(np.zeros(d))
        left.append(-1)
        right.append(-1)
        count.append(n)
        depth.append(level)
        return len(count) - 1

    stack = [(new(k.shape[0], 0), np.arange(k.shape[0]))]
    while stack:
        node, rows = stack.pop()
        if depth[node] >= max_depth or rows.size <= 1:
            continue
        found = split(k[rows], None if x is None else x[rows])
        if found is None:
            continue
        feature[node], threshold[node], w, goes_left = found
        if w is not None:
            normal[node] = w
        lc = new(int(goes_left.sum()), depth[node] + 1)
        rc = new(int((~goes_left).sum()), depth[node] + 1)
        left[node], right[node] = lc, rc
        stack.append((rc, rows[~goes_left]))
        stack.append((lc, rows[goes_left]))
    arrays = {
        "feature": np.array(feature),
        "threshold": np.array(threshold),
        "normal": np.array(normal),
        "left": np.array(left),
        "right": np.array(right),
        "n_node_samples": np.array(count),
        "depth": np.array(depth),
    }
    if x is None:
        del arrays["normal"]
    return arrays


def _assert_trees_equal(model, X, x, seed, params, *, split) -> None:
    """Each tree of ``model`` against the reference grown with ``split`` on the same draws."""
    k = to_klein(X, "hyperboloid")
    n, d = k.shape
    n_samples = model.max_samples_
    seeds = np.random.RandomState(seed).randint(np.iinfo(np.int32).max, size=len(model.trees_))
    n_features = params.get("max_features", d)
    for t, tree_seed in enumerate(seeds):
        rng = np.random.RandomState(tree_seed)
        if params.get("bootstrap"):
            rows = rng.randint(0, n, n_samples)
        else:
            rows = np.sort(rng.choice(n, n_samples, replace=False))
        np.testing.assert_array_equal(model.estimators_samples_[t], rows)
        features = np.arange(d)
        if x is None and n_features < d:
            features = np.sort(rng.choice(d, n_features, replace=False))
        expected = _reference_tree(
            k[rows],
            None if x is None else x[rows],
            split=lambda kr, xr: split(kr, xr, features, rng),
            max_depth=int(np.ceil(np.log2(n_samples))),
        )
        tree = model.trees_[t]
        assert tree.n_node_samples.size > 20
        for name, want in expected.items():
            got = getattr(tree, name)
            assert got.shape == want.shape, (t, name)
            # bit patterns, so that -0.0 against 0.0 or a NaN would show too
            assert np.array_equal(got.view(np.int64), want.astype(got.dtype).view(np.int64)), (
                f"tree {t}: {name} differs from the reference at "
                f"{np.flatnonzero(got != want)[:5].tolist()}"
            )


def _data(n: int, d: int, seed: int, radius: float, *, origin: bool = True) -> np.ndarray:
    """Hyperboloid rows: a cluster whose centre lies at ``radius``, scattered rows, repeated
    rows and (with ``origin``) rows at the origin."""
    rng = np.random.default_rng(seed)
    centre = rng.standard_normal(d)
    centre *= radius / np.linalg.norm(centre)
    v = centre + rng.standard_normal((n, d)) * rng.uniform(0.05, 1.5, (n, 1))
    if n >= 8:
        v[:3] = v[4]  # repeated rows
        if origin:
            v[3:6] = 0.0  # rows at the origin: no direction of their own
    r = np.linalg.norm(v, axis=1, keepdims=True)
    xs = np.sinh(r) * v / np.where(r > 0, r, 1.0)
    return np.concatenate([np.sqrt(1.0 + np.einsum("ij,ij->i", xs, xs))[:, None], xs], axis=1)


CASES = [
    # (d, data seed, radius, rows at the origin, estimator parameters)
    (2, 0, 1.0, True, {"threshold_law": "distance"}),
    (2, 1, 16.0, False, {"threshold_law": "klein", "bootstrap": True}),
    (5, 2, 2.0, True, {"threshold_law": "klein", "max_features": 2}),
    (5, 3, 15.5, True, {"threshold_law": "distance", "max_features": 3, "bootstrap": True}),
    (5, 4, 9.0, False, {"threshold_law": "distance"}),
]


@pytest.mark.parametrize(("d", "seed", "radius", "origin", "params"), CASES)
def test_every_centred_tree_is_the_reference_trees_bit_for_bit(
    d, seed, radius, origin, params
) -> None:
    X = _data(160, d, seed, radius, origin=origin)
    model = h.HyperbolicIsolationForest(
        splits="centred", n_estimators=6, max_samples=128, random_state=seed, **params
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", h.FarPointWarning)
        model.fit(X)
    law, n_directions = params["threshold_law"], params.get("max_features", d)
    _assert_trees_equal(
        model,
        X,
        unit_hyperboloid(X, "hyperboloid"),
        seed,
        params,
        split=lambda kr, xr, _, rng: _split(kr, xr, law, n_directions, rng),
    )


@pytest.mark.parametrize(
    ("d", "params"), [(2, {}), (5, {"max_features": 3}), (5, {"bootstrap": True})]
)
def test_every_axis_tree_of_the_distance_law_is_the_reference_trees_bit_for_bit(d, params) -> None:
    """The axis design with the distance law grows its trees here too (the Klein law is
    scikit-learn's forest), by the same tree grower."""
    X = _data(160, d, d, 3.0)
    model = h.HyperbolicIsolationForest(
        splits="axis",
        threshold_law="distance",
        n_estimators=6,
        max_samples=128,
        random_state=d,
        **params,
    ).fit(X)
    _assert_trees_equal(
        model,
        X,
        None,
        d,
        params,
        split=lambda kr, _, features, rng: _axis_split(kr, features, "distance", rng),
    )


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


@pytest.mark.parametrize("d", [1, 2, 5])
def test_the_public_centroid_move_and_boost_are_the_written_out_arithmetic(d) -> None:
    """Rows from the origin to radius 30, subsets of 1 to 300 rows, each row's direction
    and a centroid at the origin (rows symmetric about it)."""
    rng = np.random.default_rng(d)
    for radius in [0.0, 0.5, 5.0, 15.0, 17.0, 30.0]:
        for n in [1, 2, 3, 7, 8, 9, 64, 300]:
            x = _data(n, d, n, radius)[rng.permutation(n)]
            mu = lorentzian_centroid(x)
            assert _same_bits(mu, _centroid(x))
            assert _same_bits(lorentz_boost_to_origin(mu), _boost(mu))
            for got, want in zip(move_to_origin(x, mu), _move(x, mu)):
                assert _same_bits(got, want)
    # rows in mirrored pairs: the sum's spatial part is 0, or one coordinate of it is,
    # and the boost then holds signed zeros (0 * -x = -0.0)
    half = _data(4, d, 0, 3.0)
    for flip in (np.r_[1.0, -np.ones(d)], np.r_[1.0, -1.0, np.ones(d - 1)]):
        pairs = np.stack([half, half * flip], axis=1).reshape(-1, d + 1)
        mu = lorentzian_centroid(pairs)
        assert _same_bits(mu, _centroid(pairs))
        assert _same_bits(lorentz_boost_to_origin(mu), _boost(mu))
    mu = np.r_[0.0, 0.0, -np.arange(1.0, d)]
    mu[0] = np.sqrt(1.0 + mu @ mu)
    assert _same_bits(lorentz_boost_to_origin(mu), _boost(mu))


@pytest.mark.parametrize("d", [1, 2, 5, 9])
def test_the_fits_projection_adds_in_feature_order(d) -> None:
    """The split's projection decides which rows go left, and the graph repeats its order;
    a row's last bit matters only beside the threshold, so it is compared here directly."""
    rng = np.random.default_rng(d)
    k = rng.uniform(-1.0, 1.0, (500, d)) * rng.uniform(0.0, 1.0, (500, 1))
    k[:5] = 0.0
    for _ in range(20):
        w = rng.standard_normal(d)
        w /= np.linalg.norm(w)
        want = _project(k, w)
        assert _same_bits(_isolation._project(k, w), want)
        assert _same_bits(project(k, w[:, None])[:, 0], want)
