"""Centred isolation trees, grown here by a reference written from the public geometry.

The estimator grows its centred trees from per-row terms computed once per
tree (norms, unit vectors, Poincare-ball coordinates), each node doing only
what depends on the node. The reference below does every node from scratch
with the public functions, in the order the design is written
(`lorentzian_centroid`, `lorentz_boost_to_origin`, `move_to_origin`,
`project`), with the same random draws. Every fitted tree must equal it bit
for bit: thresholds, normals, children, counts and depths, near the origin
and up to the radius the centred design supports (``CENTRED_RADIUS``), with
rows at the origin, repeated rows, both threshold laws and subsets of the
directions.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import hyp2onnx as h
from hyp2onnx.estimators._isolation import lorentz_boost_to_origin
from hyp2onnx.geometry import (
    lorentzian_centroid,
    move_to_origin,
    to_klein,
    unit_hyperboloid,
)
from hyp2onnx.ir.projection import project

TRIES = 4


def _draw(lo: float, hi: float, law: str, rng: np.random.RandomState) -> float:
    u = rng.uniform()
    if law == "klein":
        t = lo + (hi - lo) * u
    else:
        a, b = math.atanh(max(lo, -1.0 + 1e-16)), math.atanh(min(hi, 1.0 - 1e-16))
        t = math.tanh(a + (b - a) * u)
    return min(max(t, lo), float(np.nextafter(hi, -np.inf)))


def _split(k, x, law, n_directions, rng):
    """One node, from scratch: ``(threshold, normal, goes_left)`` or None."""
    d = k.shape[1]
    mu = lorentzian_centroid(x)
    M = lorentz_boost_to_origin(mu)
    moved, _ = move_to_origin(x, mu)
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
        p = project(k, w[:, None])[:, 0]
        p_lo, p_hi = float(p.min()), float(p.max())
        if not p_lo < p_hi:
            continue
        tau = min(max(tau, p_lo), float(np.nextafter(p_hi, -np.inf)))
        return tau, w, p <= tau
    return None


def _reference_tree(k, x, *, law, max_depth, n_directions, rng):
    """Depth-first, left child first: the estimator's node order and draw order."""
    d = k.shape[1]
    threshold, normal, left, right, count, depth = [], [], [], [], [], []

    def new(n: int, level: int) -> int:
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
        split = _split(k[rows], x[rows], law, n_directions, rng)
        if split is None:
            continue
        threshold[node], normal[node], goes_left = split
        lc = new(int(goes_left.sum()), depth[node] + 1)
        rc = new(int((~goes_left).sum()), depth[node] + 1)
        left[node], right[node] = lc, rc
        stack.append((rc, rows[~goes_left]))
        stack.append((lc, rows[goes_left]))
    return {
        "threshold": np.array(threshold),
        "normal": np.array(normal),
        "left": np.array(left),
        "right": np.array(right),
        "n_node_samples": np.array(count),
        "depth": np.array(depth),
    }


def _data(n: int, d: int, seed: int, radius: float) -> np.ndarray:
    """Hyperboloid rows: a cluster whose centre lies at ``radius``, scattered rows, the origin."""
    rng = np.random.default_rng(seed)
    centre = rng.standard_normal(d)
    centre *= radius / np.linalg.norm(centre)
    v = centre + rng.standard_normal((n, d)) * rng.uniform(0.05, 1.5, (n, 1))
    v[:3] = 0.0  # rows at the origin: no direction of their own
    v[3:6] = v[6]  # repeated rows
    r = np.linalg.norm(v, axis=1, keepdims=True)
    xs = np.sinh(r) * v / np.where(r > 0, r, 1.0)
    return np.concatenate([np.sqrt(1.0 + np.einsum("ij,ij->i", xs, xs))[:, None], xs], axis=1)


CASES = [
    # (d, data seed, radius, estimator parameters)
    (2, 0, 1.0, {"threshold_law": "distance"}),
    (2, 1, 16.0, {"threshold_law": "klein", "bootstrap": True}),
    (5, 2, 2.0, {"threshold_law": "klein", "max_features": 2}),
    (5, 3, 15.5, {"threshold_law": "distance", "max_features": 3, "bootstrap": True}),
    (5, 4, 9.0, {"threshold_law": "distance"}),
]


@pytest.mark.parametrize(("d", "seed", "radius", "params"), CASES)
def test_every_centred_tree_is_the_reference_trees_bit_for_bit(d, seed, radius, params) -> None:
    X = _data(160, d, seed, radius)
    model = h.HyperbolicIsolationForest(
        splits="centred", n_estimators=6, max_samples=128, random_state=seed, **params
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", h.FarPointWarning)
        model.fit(X)
    k = to_klein(X, "hyperboloid")
    x = unit_hyperboloid(X, "hyperboloid")
    seeds = np.random.RandomState(seed).randint(np.iinfo(np.int32).max, size=6)
    n_directions = params.get("max_features", d)
    for t, tree_seed in enumerate(seeds):
        rng = np.random.RandomState(tree_seed)
        if params.get("bootstrap"):
            rows = rng.randint(0, X.shape[0], 128)
        else:
            rows = np.sort(rng.choice(X.shape[0], 128, replace=False))
        np.testing.assert_array_equal(model.estimators_samples_[t], rows)
        expected = _reference_tree(
            k[rows],
            x[rows],
            law=params["threshold_law"],
            max_depth=7,
            n_directions=n_directions,
            rng=rng,
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
