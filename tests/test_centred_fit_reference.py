"""Isolation trees grown here by a reference that does every node from scratch, one at a time.

The estimator grows all nodes of a level of all trees at once (segment
sums over rows ordered by node, per-tree draws for a level's nodes
together, a vectorised retry of the nodes a direction did not split). The
reference below grows each tree breadth first, node by node, in plain
loops, with the same random draws and the fit's arithmetic conventions (a
node's sums in ``np.add.reduceat``'s order, a row's in feature order), so
every fitted tree must equal it bit for bit: thresholds, normals,
children, counts and depths, near the origin and up to the radius the
centred design supports (``CENTRED_RADIUS``), with rows at the origin,
repeated rows, rows an ulp apart (which make retries), both threshold laws
and subsets of the directions. The public geometry functions are held to
the design's written-out arithmetic bit for bit, and the fit's centroids
and moves to them to rounding.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.estimators import _isolation_growth as growth
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


# -- the fit's per-node arithmetic, one node at a time ------------------------------------------
# The fit's conventions: a node's sums over its rows in np.add.reduceat's order, a row's sums
# over its features in feature order (what the graph's projection adds), norms scaled where
# their squares would leave float64's range.


def _fdot(a, b):
    """Row-wise ``a . b`` of ``[n, d]`` arrays, added in feature order."""
    out = a[:, 0] * b[:, 0]
    for f in range(1, a.shape[1]):
        out += a[:, f] * b[:, f]
    return out


def _fnorm(v):
    """``|v|`` of one vector, its squares added in feature order (scaled out of range)."""
    norm = math.sqrt(float(_fdot(v[None], v[None])[0]))
    if 1e-150 < norm < 1e150:
        return norm
    scale = float(np.abs(v).max(initial=0.0))
    if scale == 0 or not math.isfinite(scale):
        return math.inf if math.isinf(scale) else scale * norm
    w = v / scale
    return scale * math.sqrt(float(_fdot(w[None], w[None])[0]))


def _node_sum(v):
    """A node's sum over its rows, in the order np.add.reduceat adds each term's row
    vector (the fit holds its terms feature-major, each a contiguous row)."""
    if v.ndim == 1:
        return np.add.reduceat(v, [0])[0]
    return np.add.reduceat(np.ascontiguousarray(v.T), [0], axis=1)[:, 0]


def _fit_centroid(x):
    m = _node_sum(x)
    m0, ms = float(m[0]), m[1:]
    s = _fnorm(ms)
    if s > 0:
        spatial = _norms(x[:, 1:])
        with np.errstate(divide="ignore", invalid="ignore"):
            unit = x[:, 1:] / spatial[:, None]
            inverse = 1.0 / (x[:, 0] + spatial)
            diff = unit - ms / s
            gap = _fdot(diff, diff) * spatial / 2.0 + inverse
        lower = float(_node_sum(np.where(spatial > 0, gap, x[:, 0])))
    else:
        lower = m0
    mu_s = ms / (math.sqrt(lower) * math.sqrt(m0 + s))
    return np.concatenate([[np.hypot(1.0, _fnorm(mu_s))], mu_s])  # numpy's hypot, as the fit


def _fit_moved(x, mu):
    """The rows' Klein coordinates after the Mobius move of ``mu`` to the origin."""
    a = mu[1:] / (1.0 + mu[0])
    ta = 2.0 / (1.0 + mu[0])
    b = x[:, 1:] / (1.0 + x[:, :1])
    tb = 2.0 / (1.0 + x[:, 0])
    diff = b - a
    dd = _fdot(diff, diff)
    z0 = 2.0 * (dd / ta / tb) + 1.0
    y = (diff * ta - dd[:, None] * a) / (ta * tb + dd)[:, None]
    return y * (1.0 + z0)[:, None] / z0[:, None]


def _draw(lo: float, hi: float, law: str, u: float) -> float:
    if law == "klein":
        t = lo + (hi - lo) * u
    else:
        a = np.arctanh(np.array([max(lo, -1.0 + 1e-16)]))[0]
        b = np.arctanh(np.array([min(hi, 1.0 - 1e-16)]))[0]
        t = float(np.tanh(np.array([a + (b - a) * u]))[0])
    return min(max(t, lo), float(np.nextafter(hi, -np.inf)))


def _directions(rng, c, d, n_directions):
    """A level's draws for its ``c`` pending nodes: directions, then uniforms."""
    if n_directions >= d:
        u = rng.standard_normal((c, d))
    else:
        axes = np.argsort(rng.random_sample((c, d)), axis=1)[:, :n_directions]
        g = rng.standard_normal((c, n_directions))
        u = np.zeros((c, d))
        for i in range(c):
            u[i, axes[i]] = g[i]
    return u, rng.random_sample(c)


def _centred_node(k, x, u, q, law):
    """One centred node, from scratch, for its drawn direction ``u`` and uniform ``q``:
    ``(0, threshold, normal, goes_left)``, or None if they do not split it."""
    mu = _fit_centroid(x)
    k_moved = _fit_moved(x, mu)
    norm = _fnorm(u)
    if norm == 0:
        return None
    u = u / norm
    p_moved = _fdot(k_moved, np.broadcast_to(u, k_moved.shape))
    lo, hi = float(p_moved.min()), float(p_moved.max())
    if not lo < hi:
        return None
    s = _draw(max(lo, -1.0), min(hi, 1.0), law, q) if -1.0 < lo and hi < 1.0 else lo / 2 + hi / 2
    along = float(_fdot(mu[None, 1:], u[None])[0])
    n0 = -s * mu[0] - along
    ns = u + mu[1:] * (s + along / (1.0 + mu[0]))
    scale = _fnorm(ns)
    w, tau = ns / scale, -n0 / scale
    p = _fdot(k, np.broadcast_to(w, k.shape))
    p_lo, p_hi = float(p.min()), float(p.max())
    if not p_lo < p_hi:
        return None
    tau = min(max(tau, p_lo), float(np.nextafter(p_hi, -np.inf)))
    return 0, tau, w, p <= tau


def _centred_level(k, x, level, stream, law, n_directions):
    """A level's centred splits: the pending nodes draw together, up to TRIES times."""
    found = [None] * len(level)
    pending = list(range(len(level)))
    for attempt in range(TRIES):
        u, q = _directions(stream(attempt), len(pending), k.shape[1], n_directions)
        for i, j in enumerate(pending):
            rows = level[j][1]
            found[j] = _centred_node(k[rows], x[rows], u[i], q[i], law)
        pending = [j for j in pending if found[j] is None]
        if not pending:
            break
    return found


def _axis_level(k, level, features, stream, law):
    """A level's axis splits: per node a varying feature and a threshold (two uniforms)."""
    u = stream(0).random_sample((len(level), 2))
    found = []
    for i, (_, rows) in enumerate(level):
        sub = k[rows][:, features]
        lo, hi = sub.min(axis=0), sub.max(axis=0)
        varying = np.flatnonzero(lo < hi)
        if varying.size == 0:
            found.append(None)
            continue
        j = varying[min(int(u[i, 0] * varying.size), varying.size - 1)]
        t = _draw(float(lo[j]), float(hi[j]), law, float(u[i, 1]))
        found.append((int(features[j]), t, None, k[rows, features[j]] <= t))
    return found


def _reference_tree(k, x, *, split_level, max_depth):
    """Breadth first, left child first: the estimator's node order and draw order.
    ``split_level(level, depth)`` gives each node's ``(feature, threshold, normal, goes_left)``
    or None, for the level's nodes ``[(node, rows)]``."""
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

    level = [(new(k.shape[0], 0), np.arange(k.shape[0]))]
    for level_depth in range(max_depth):
        level = [(node, rows) for node, rows in level if rows.size > 1]
        if not level:
            break
        children = []
        for (node, rows), found in zip(level, split_level(level, level_depth), strict=True):
            if found is None:
                continue
            feature[node], threshold[node], w, goes_left = found
            if w is not None:
                normal[node] = w
            lc = new(int(goes_left.sum()), level_depth + 1)
            rc = new(int((~goes_left).sum()), level_depth + 1)
            left[node], right[node] = lc, rc
            children += [(lc, rows[goes_left]), (rc, rows[~goes_left])]
        level = children
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


def _subsample(rng, n, psi, bootstrap):
    if bootstrap:
        return rng.randint(0, n, psi)
    if 4 * psi > n:
        return np.sort(rng.choice(n, psi, replace=False))
    drawn: list[int] = []
    while len(set(drawn)) < psi:
        drawn += rng.randint(0, n, psi if drawn else 2 * psi).tolist()
    first = list(dict.fromkeys(drawn))[:psi]  # the first psi distinct draws
    return np.sort(np.array(first))


def _assert_trees_equal(model, X, x, seed, params, *, split_level) -> None:
    """Each tree of ``model`` against the reference grown with ``split_level`` on the same draws."""
    k = to_klein(X, "hyperboloid")
    n, d = k.shape
    n_samples = model.max_samples_
    seeds = np.random.RandomState(seed).randint(np.iinfo(np.int32).max, size=len(model.trees_))
    n_features = params.get("max_features", d)
    for t, tree_seed in enumerate(seeds):
        rng = np.random.RandomState(tree_seed)

        def stream(depth, attempt, tree_seed=tree_seed):
            """The tree's draws at a level and try: a stream of their own."""
            return np.random.RandomState(growth.stream_seed(tree_seed, depth, attempt))

        rows = _subsample(rng, n, n_samples, params.get("bootstrap", False))
        np.testing.assert_array_equal(model.estimators_samples_[t], rows)
        features = np.arange(d)
        if x is None and n_features < d:
            features = np.sort(rng.choice(d, n_features, replace=False))
        expected = _reference_tree(
            k[rows],
            None if x is None else x[rows],
            split_level=lambda level, depth: split_level(
                k[rows],
                None if x is None else x[rows],
                level,
                features,
                lambda attempt: stream(depth, attempt),
            ),
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
    rows, rows one or two ulps from another and (with ``origin``) rows at the origin."""
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
    if n >= 8:  # rows an ulp or two from another: some directions cannot split them
        near = rng.integers(0, n, n // 4)
        xs[-near.size :] = xs[near]
        xs[-near.size :, 0] = np.nextafter(xs[near, 0], np.inf)
        twice = rng.random(near.size) < 0.5
        xs[-near.size :, 0][twice] = np.nextafter(xs[-near.size :, 0][twice], np.inf)
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
        split_level=lambda kr, xr, level, _, stream: _centred_level(
            kr, xr, level, stream, law, n_directions
        ),
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
        split_level=lambda kr, _, level, features, stream: _axis_level(
            kr, level, features, stream, "distance"
        ),
    )


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


@pytest.mark.parametrize("block", [3, None])
@pytest.mark.parametrize("d", [1, 2, 5])
def test_the_public_centroid_move_and_boost_are_the_written_out_arithmetic(
    d, block, monkeypatch
) -> None:
    """Rows from the origin to radius 30, subsets of 1 to 300 rows, each row's direction
    and a centroid at the origin (rows symmetric about it); the centroid's row terms
    made all at once and 3 rows at a time."""
    if block is not None:
        monkeypatch.setattr(geometry, "_CENTROID_BLOCK", block)
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


@pytest.mark.parametrize("d", [1, 2, 5])
def test_the_fits_centroids_and_moves_are_the_public_ones_to_rounding(d) -> None:
    """The fit computes every node of a level at once, its sums in its own order; its
    centroids and moved rows are the public functions' to rounding, from the origin to
    radius 30 (no cancellation creeps in far out), several nodes side by side."""
    rng = np.random.default_rng(d)
    for radius in [0.0, 0.5, 5.0, 15.0, 17.0, 30.0]:
        sizes = np.array([1, 2, 3, 7, 9, 64, 300])
        x = np.vstack([_data(n, d, n, radius)[rng.permutation(n)] for n in sizes])
        k = x[:, 1:] / x[:, :1]
        starts, seg = growth._segments(sizes)
        t = growth._Terms.of(growth._centred_table(k, x))
        mu = growth._centroids(t, starts, seg)
        moved = growth._moved(t, mu, seg)
        for j, (start, n) in enumerate(zip(starts, sizes)):
            rows = x[start : start + n]
            want = lorentzian_centroid(rows)
            assert np.allclose(mu[:, j], want, rtol=1e-13, atol=1e-13)
            got = moved[:, start : start + n].T
            on = move_to_origin(rows, want)[0]
            # mu itself is known to its rounding, which a far move magnifies by e^r
            assert np.abs(got - on[:, 1:] / on[:, :1]).max() <= 1e-15 * np.exp(max(radius, 1.0))
            # the fit's own arithmetic, node by node, is the reference's bit for bit
            assert _same_bits(mu[:, j], _fit_centroid(rows))
            assert _same_bits(got, _fit_moved(rows, mu[:, j]))


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
        want = _fdot(k, np.broadcast_to(w, k.shape))
        each = np.repeat(w[:, None], k.shape[0], axis=1)  # each row its own normal, as in a level
        assert _same_bits(growth._row_dot(k.T.copy(), each), want)
        assert _same_bits(project(k, w[:, None])[:, 0], want)
