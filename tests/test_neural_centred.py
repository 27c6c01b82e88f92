"""Centred networks (issue 42, part 1): the same answer wherever the embedding put its origin.

Oracles independent of the code under test: a random Lorentz matrix built
here from its definition (`_data.random_isometry`); the centring matrix
computed again in 80-digit decimals (the Lorentzian centroid, the boost,
the log map and a Jacobi eigen-solver, all written here with `decimal`);
the network's own pre-activations for the signs of `explain`'s half-spaces;
onnxruntime for the graphs.
"""

from __future__ import annotations

import math
import warnings
from decimal import Decimal, getcontext

import numpy as np
import pytest
from _data import isometric_copy, labels, points, random_isometry, targets
from sklearn.exceptions import ConvergenceWarning

import hyp2onnx
from hyp2onnx.errors import FarPointError, FarPointWarning
from hyp2onnx.verification import run_onnx

U = 2.0**-53


def _fit(model, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y, **kwargs)


def _mlp(cls=hyp2onnx.HyperbolicMLPClassifier, **params):
    return cls(**{"hidden_layer_sizes": (12, 12), "max_iter": 120, "random_state": 0, **params})


def _cluster(n, d, centre_radius, seed, spread=1.5):
    """Hyperboloid rows around a point at ``centre_radius`` (a cluster far from the origin)."""
    X, k = points(n, d, seed=seed, max_radius=spread)
    G = random_isometry(d, centre_radius, np.random.default_rng(seed + 100))
    return isometric_copy(X, G), k


# -- isometry ---------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 4])
def test_centred_predictions_do_not_depend_on_where_the_origin_is(d):
    """Fit on ``X`` and on ``G X`` (``G`` a rotation and a boost of rapidity 3): the centred
    networks see the same inputs up to rounding, and their labels differ only on rows within
    that rounding of a tie. The network on Klein coordinates (``centre="origin"``) does not."""
    X, k = points(400, d, seed=d, max_radius=2.5)
    y = labels(k, 3, seed=d)
    G = random_isometry(d, 3.0, np.random.default_rng(d))
    Y = isometric_copy(X, G)
    train, test = slice(0, 250), slice(250, None)
    a, b = _fit(_mlp(), X[train], y[train]), _fit(_mlp(), Y[train], y[train])
    # The centring's rounding: frame coordinates carry about 2^-53 x_0 L_00 (the frames' own
    # bound, hyp2onnx.estimators._rotation.check_frame_precision), a few such terms per sum.
    scale = max(float((Z[:, 0] * m.centring_[0, 0]).max()) for Z, m in ((X, a), (Y, b)))
    inputs = np.abs(a.network_input(X) - b.network_input(Y)).max()
    assert inputs <= 16 * (d + 1) * U * scale
    # The standardisation is a function of those inputs: the same up to their rounding.
    assert np.abs(a.input_offset_ - b.input_offset_).max() <= 16 * (d + 1) * U * scale
    assert np.abs(a.input_scale_ / b.input_scale_ - 1).max() <= 1e-9
    # Training amplifies the inputs' difference (Adam, 120 epochs) but stays far below 1e-6;
    # a label can change only where the first model's top two logits are within twice it.
    za, zb = a.decision_function(X[test]), b.decision_function(Y[test])
    drift = float(np.abs(za - zb).max())
    assert drift <= 1e-6
    top = np.sort(za, axis=1)
    near = int((top[:, -1] - top[:, -2] <= 2 * drift).sum())
    differ = int((a.predict(X[test]) != b.predict(Y[test])).sum())
    assert differ <= near
    # The control: Klein coordinates change under G, and so do many labels.
    o1 = _fit(_mlp(centre="origin"), X[train], y[train])
    o2 = _fit(_mlp(centre="origin"), Y[train], y[train])
    assert (o1.predict(X[test]) != o2.predict(Y[test])).sum() > 10 * (near + 1)


# -- the centring matrix against 80-digit decimals ------------------------------------------------


def _dec_centring(X):
    """``L = diag(1, R) B`` of hyperboloid rows ``X`` (``x_0`` recomputed), in 80 digits."""
    getcontext().prec = 80
    rows = [[Decimal(float(v)) for v in r[1:]] for r in X]
    x = [[(1 + sum(v * v for v in s)).sqrt(), *s] for s in rows]
    d = len(rows[0])
    m = [sum(r[j] for r in x) for j in range(d + 1)]
    scale = (m[0] * m[0] - sum(v * v for v in m[1:])).sqrt()
    mu = [v / scale for v in m]
    B = [[Decimal(0)] * (d + 1) for _ in range(d + 1)]
    B[0][0] = mu[0]
    for i in range(d):
        B[0][1 + i] = B[1 + i][0] = -mu[1 + i]
        for j in range(d):
            B[1 + i][1 + j] = (1 if i == j else 0) + mu[1 + i] * mu[1 + j] / (1 + mu[0])
    logs = []
    for r in x:
        moved = [sum(B[i][j] * r[j] for j in range(d + 1)) for i in range(d + 1)]
        norm = sum(v * v for v in moved[1:]).sqrt()
        dist = (moved[0] + (moved[0] * moved[0] - 1).sqrt()).ln()
        logs.append([v * dist / norm if norm else Decimal(0) for v in moved[1:]])
    mean = [sum(v[j] for v in logs) / len(logs) for j in range(d)]
    c = [[v[j] - mean[j] for j in range(d)] for v in logs]
    C = [[sum(r[i] * r[j] for r in c) for j in range(d)] for i in range(d)]
    values, vectors = _jacobi(C)
    order = sorted(range(d), key=lambda j: -values[j])
    R = []
    for j in order:
        axis = [vectors[i][j] for i in range(d)]
        skew = sum(sum(r[i] * axis[i] for i in range(d)) ** 3 for r in c)
        R.append([-a for a in axis] if skew < 0 else axis)
    L = [B[0]] + [
        [sum(R[i][a] * B[1 + a][j] for a in range(d)) for j in range(d + 1)] for i in range(d)
    ]
    gaps = [values[order[i]] - values[order[i + 1]] for i in range(d - 1)]
    return (
        np.array([[float(v) for v in row] for row in L]),
        float(min(gaps)),
        float(values[order[0]]),
    )


def _jacobi(A):
    """Eigenvalues and eigenvector columns of a symmetric Decimal matrix (cyclic Jacobi)."""
    n = len(A)
    A = [row[:] for row in A]
    V = [[Decimal(1 if i == j else 0) for j in range(n)] for i in range(n)]
    for _ in range(60):
        off = sum(A[i][j] ** 2 for i in range(n) for j in range(n) if i != j)
        if off < Decimal(10) ** -150:
            break
        for p in range(n):
            for q in range(p + 1, n):
                if A[p][q] == 0:
                    continue
                theta = (A[q][q] - A[p][p]) / (2 * A[p][q])
                sign = 1 if theta >= 0 else -1
                t = sign / (abs(theta) + (theta * theta + 1).sqrt())
                cos = 1 / (t * t + 1).sqrt()
                sin = t * cos
                for k in range(n):
                    akp, akq = A[k][p], A[k][q]
                    A[k][p], A[k][q] = cos * akp - sin * akq, sin * akp + cos * akq
                for k in range(n):
                    apk, aqk = A[p][k], A[q][k]
                    A[p][k], A[q][k] = cos * apk - sin * aqk, sin * apk + cos * aqk
                for k in range(n):
                    vkp, vkq = V[k][p], V[k][q]
                    V[k][p], V[k][q] = cos * vkp - sin * vkq, sin * vkp + cos * vkq
    return [A[i][i] for i in range(n)], V


@pytest.mark.parametrize(("d", "radius"), [(2, 0.0), (2, 8.0), (3, 12.0), (2, 14.5)])
def test_centring_matrix_matches_80_digit_decimals(d, radius):
    """Clusters up to radius 16 (centre at ``radius``, rows 1.5 around it): every entry of
    ``centring_`` within the float64 bound of the 80-digit matrix. The bound: the boost's
    entries carry a few ulps of ``cosh r_mu``; float64 holds the centroid itself only to
    about ``u cosh r_mu`` in hyperbolic distance, which moves every log-map vector by as much,
    and the principal axes by that times ``lambda_max / gap`` (the eigenvector perturbation
    bound); the rows of ``R B`` multiply it by the boost's size again."""
    X, k = _cluster(60, d, radius, seed=int(radius) + d)
    y = labels(k, 2, seed=d)
    model = _fit(_mlp(max_iter=5), X, y)
    want, gap, top = _dec_centring(X)
    size = np.abs(want).max()
    bound = 64 * U * size**2 * (1.0 + top / gap) * (d + 1)
    assert np.abs(model.centring_ - want).max() <= bound
    J = np.diag([-1.0] + [1.0] * d)  # and it is a Lorentz matrix, to the same precision
    assert np.abs(model.centring_.T @ J @ model.centring_ - J).max() <= bound * size


# -- graphs against the model, far points included ---------------------------------------------


def _far_rows(model, d, n, seed):
    """Rows at hyperbolic radius 10 to 15 from the training centroid, in every direction."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    r = rng.uniform(10.0, 15.0, (n, 1))
    local = np.concatenate([np.cosh(r), np.sinh(r) * v], axis=1)
    return isometric_copy(local, np.linalg.inv(model.centring_))


def _tie_rows(model, X, n, seed):
    """Pairs of rows one bisection step apart where the model's label changes."""
    rng = np.random.default_rng(seed)
    k = model.to_klein(X)
    i, j = rng.integers(0, len(k), (2, n))
    lo, hi = k[i], k[j]
    first = model.predict(_hyper(lo))
    keep = model.predict(_hyper(hi)) != first
    lo, hi, first = lo[keep], hi[keep], first[keep]
    for _ in range(60):
        mid = (lo + hi) / 2
        same = model.predict(_hyper(mid)) == first
        lo = np.where(same[:, None], mid, lo)
        hi = np.where(same[:, None], hi, mid)
    return _hyper(np.concatenate([lo, hi]))


def _hyper(k):
    x0 = 1.0 / np.sqrt(1.0 - (k * k).sum(axis=1, keepdims=True))
    return np.concatenate([x0, k * x0], axis=1)


@pytest.fixture(scope="module")
def centred():
    X, k = _cluster(700, 2, 6.0, seed=7, spread=2.5)
    y = labels(k, 4, seed=7)
    return _fit(_mlp(hidden_layer_sizes=(16, 16), max_iter=150), X[:500], y[:500]), X


def test_graphs_match_the_centred_model_at_far_points_and_ties(centred):
    model, X = centred
    with warnings.catch_warnings():
        warnings.simplefilter("error", FarPointWarning)  # radius 15 is within the guarantee
        rows = np.concatenate([X[500:], _far_rows(model, 2, 200, 1), _tie_rows(model, X, 80, 2)])
        want = model.predict(rows)
        logits = model.decision_function(rows)
    assert model.centring_[0, 0] > 100  # the centroid is far from the origin
    for encoding in ("fast", "exact"):
        graph = hyp2onnx.to_onnx(model, encoding=encoding)
        got = run_onnx(graph, rows)
        assert np.array_equal(got["label"], want), encoding
        report = hyp2onnx.verify(model, graph, rows)
        assert report.ok and report.label_mismatches == 0, report
    tree = hyp2onnx.region_tree(model, X[:500])
    got = run_onnx(hyp2onnx.to_onnx(tree), rows)
    assert np.array_equal(got["label"], want)
    assert np.array_equal(tree.predict(rows), want)
    assert np.isfinite(logits).all()


def test_regressor_graph_values_bit_for_bit_with_exact_encoding():
    X, k = _cluster(400, 3, 5.0, seed=3)
    y = targets(k, seed=3)
    model = _fit(_mlp(hyp2onnx.HyperbolicMLPRegressor), X[:300], y[:300])
    rows = np.concatenate([X[300:], _far_rows(model, 3, 60, 4)])
    got = run_onnx(hyp2onnx.to_onnx(model, encoding="exact"), rows)["variable"]
    assert np.array_equal(got.reshape(-1), model.predict(rows))
    graph = hyp2onnx.to_onnx(model)
    bound = float(hyp2onnx.read_metadata(graph)["value_bound"])
    fast = run_onnx(graph, rows)["variable"].reshape(-1)
    assert np.abs(fast - model.predict(rows)).max() <= bound


def test_far_rows_are_refused_in_fit_and_named_in_predict(centred):
    """Past ``x_0 L_00 = cosh(17)^2`` (the frames' radius) float64 cannot hold the centred
    coordinates: training rows there are refused, rows to predict named in a warning."""
    far, k = _cluster(40, 2, 18.0, seed=8, spread=0.5)  # centroid and rows near radius 18
    with pytest.raises(
        FarPointError, match=r"training row\(s\) lie too far .*rows \d+ \(radius 1[78]"
    ):
        _fit(_mlp(), far, labels(k, 2, seed=8))
    _fit(_mlp(centre="origin"), far, labels(k, 2, seed=8))  # Klein coordinates: no frame
    model, X = centred
    r = 30.0  # beyond the centroid (radius about 6): x_0 L_00 is about 1e15
    beyond = np.array([[np.cosh(r), -np.sinh(r), 0.0]])
    with pytest.warns(FarPointWarning, match=r"rows 1 \(radius 30"):
        model.predict(np.concatenate([X[:1], beyond]))


# -- explain: half-spaces in the point's own coordinates -------------------------------------


def test_explain_gives_half_spaces_in_the_points_own_coordinates(centred):
    """Each half-space's sign on a row's Klein coordinates is the sign of the network's own
    pre-activation there (the normal mapped by ``L^T``), and ``contains`` holds its row."""
    model, X = centred
    tree = hyp2onnx.region_tree(model, X[:100])
    net = model.network()
    checked = 0
    for x in X[500:560]:
        region = tree.explain(x)
        k = model.to_klein(x[None, :])
        assert region.contains(k)[0]
        others = model.to_klein(X[560:])
        s = others @ region.klein_normals.T + region.klein_offsets
        # the region's collapsed pre-activations, evaluated on the centred inputs
        z = (
            model.network_input(X[560:]) @ _collapsed(net, region.pattern)[0]
            + _collapsed(net, region.pattern)[1]
        )
        clear = np.abs(z) > 1e-9 * (1 + np.abs(z).max())
        assert np.array_equal(np.sign(s[clear]), np.sign(z[clear]))
        checked += int(clear.sum())
    assert checked > 1000


def test_certified_regions_of_a_centred_network_lie_around_its_centroid():
    """A centred network's tree holds the regions of the points it is built from, and
    ``certify_radius`` is measured from the network's origin, the training centroid: each
    witness is a network input within the radius whose pattern is its region's, and the tree
    answers as the network on rows near the centroid."""
    X, k = _cluster(400, 2, 6.0, seed=11, spread=1.2)
    y = labels(k, 3, seed=11)
    model = _fit(_mlp(hidden_layer_sizes=(8, 8)), X[:300], y[:300])
    plain = hyp2onnx.region_tree(model, X[:20])
    assert plain.covered(X[:20]).all()  # the regions of the points it was built from
    tree = hyp2onnx.region_tree(model, X[:20], certify_radius=1.2, max_certified=200)
    assert tree.n_certified_ > 0
    certified = ~np.isnan(tree.witnesses_[:, 0])
    w = tree.witnesses_[certified]
    assert np.all(np.linalg.norm(w, axis=1) < math.tanh(1.2))
    net = model.network()
    assert np.array_equal(net.pattern(w), tree.tree_.patterns[certified])
    assert np.array_equal(tree.predict(X[300:]), model.predict(X[300:]))
    assert (
        tree.covered(X[300:]).mean() > hyp2onnx.region_tree(model, X[:20]).covered(X[300:]).mean()
    )


def _collapsed(net, pattern):
    from hyp2onnx.ir.network import collapse

    c = collapse(net, pattern)
    return np.concatenate(c.weights[:-1], axis=1), np.concatenate(c.offsets[:-1])


# -- standardised inputs, folded into the first layer --------------------------------------


def _kink_rows(model, X, n, seed):
    """Rows one bisection step either side of where a first-layer unit's computed
    pre-activation changes sign (the folded layer's boundaries)."""
    rng = np.random.default_rng(seed)
    net, k = model.network(), model.to_klein(X)
    i, j = rng.integers(0, len(k), (2, n))
    lo, hi = k[i], k[j]
    first = lambda q: net.forward(model.network_input(_hyper(q)))[1][0] > 0
    flo, fhi = first(lo), first(hi)
    unit = np.argmax(flo != fhi, axis=1)
    keep = (flo != fhi).any(axis=1)
    lo, hi, unit = lo[keep], hi[keep], unit[keep]
    side = flo[keep, unit]
    for _ in range(60):
        mid = (lo + hi) / 2
        same = first(mid)[np.arange(len(mid)), unit] == side
        lo = np.where(same[:, None], mid, lo)
        hi = np.where(same[:, None], hi, mid)
    return _hyper(np.concatenate([lo, hi]))


def _exact_first_layer(model, kp):
    """The unfolded first layer, ``((k' - offset) / scale) W + b``, in exact rationals."""
    from fractions import Fraction

    W, b = model.coefs_[0], model.intercepts_[0]
    o, s = model.input_offset_, model.input_scale_
    out = np.empty((len(kp), W.shape[1]))
    for r, row in enumerate(kp):
        z = [(Fraction(row[i]) - Fraction(o[i])) / Fraction(s[i]) for i in range(len(row))]
        for u in range(W.shape[1]):
            out[r, u] = float(
                sum((z[i] * Fraction(W[i, u]) for i in range(len(z))), Fraction(b[u]))
            )
    return out


def test_the_folded_network_is_the_standardised_one_to_rounding(centred):
    """The model (the folded network on ``k'``) against scikit-learn's weights on ``(k' -
    offset) / scale``: the first layer within the fold's and the sum's rounding of its exact
    rational value, on held-out rows, rows at radius 10 to 15 from the centroid (inputs at
    the ball's edge, far from the training mean), and rows either side of a first-layer kink
    and of a label tie; the labels those of scikit-learn's forward pass except on rows within
    the logits' difference of a tie. Planted: the bias folded with the unscaled weights, the
    weights multiplied by the scale."""
    model, X = centred
    rows = np.concatenate(
        [
            X[500:],
            _far_rows(model, 2, 100, 5),
            _kink_rows(model, X, 60, 6),
            _tie_rows(model, X, 40, 7),
        ]
    )
    kp = model.network_input(rows)
    net = model.network()
    got = net.forward(kp)[1][0]
    want = _exact_first_layer(model, kp)
    W_f, o = net.weights[0], model.input_offset_
    d = kp.shape[1]
    size = np.abs(kp) @ np.abs(W_f) + np.abs(o) @ np.abs(W_f) + np.abs(model.intercepts_[0])
    assert np.all(np.abs(got - want) <= 4 * (d + 3) * U * size)
    # The whole network: scikit-learn's weights on the standardised rows (numpy's products).
    a = (kp - o) / model.input_scale_
    for W, b in zip(model.coefs_[:-1], model.intercepts_[:-1], strict=True):
        a = np.maximum(a @ W + b, 0.0)
    unfolded = a @ model.coefs_[-1] + model.intercepts_[-1]
    logits = model.decision_function(rows)
    drift = float(np.abs(logits - unfolded).max())
    assert drift <= 1e-12 * (1 + np.abs(unfolded).max())
    top = np.sort(unfolded, axis=1)
    near = top[:, -1] - top[:, -2] <= 2 * drift
    theirs = model.classes_[np.argmax(unfolded, axis=1)]
    assert np.array_equal(model.predict(rows)[~near], theirs[~near])
    assert near.sum() < len(rows) / 4  # the tie rows are half of the last block at most


def test_standardisation_is_per_axis_floored_and_deterministic():
    """Per axis of the centred frame: the mean and standard deviation of the training inputs,
    each deviation raised to at least half the largest; refitting gives the same bits. A
    cluster flat along its second axis gets the floor there; a round one its own deviations.
    Planted: the floor dropped (the flat axis blown up)."""
    rng = np.random.default_rng(12)
    G = random_isometry(2, 5.0, np.random.default_rng(13))
    for spreads, floored in (((1.0, 0.05), True), ((1.0, 0.8), False)):
        v = rng.standard_normal((300, 2)) * spreads
        r = np.linalg.norm(v, axis=1, keepdims=True)
        local = np.concatenate([np.cosh(r), np.sinh(r) * v / r], axis=1)
        X = isometric_copy(local, G)
        y = (v[:, 0] > 0).astype(int)
        model = _fit(_mlp(max_iter=5), X, y)
        kp = model.network_input(X)
        assert np.allclose(model.input_offset_, kp.mean(axis=0), rtol=0, atol=1e-14)
        sd = kp.std(axis=0)
        assert sd[0] > sd[1]  # the frame's first axis is the widest
        assert model.input_scale_[0] == pytest.approx(sd[0], rel=1e-12)
        if floored:
            assert model.input_scale_[1] == 0.5 * model.input_scale_[0]
        else:
            assert model.input_scale_[1] == pytest.approx(sd[1], rel=1e-12)
        again = _fit(_mlp(max_iter=5), X, y)
        assert np.array_equal(again.input_offset_, model.input_offset_)
        assert np.array_equal(again.input_scale_, model.input_scale_)
        for a, b in zip(again.network().weights, model.network().weights, strict=True):
            assert np.array_equal(a, b)


# -- warm starts and partial_fit keep the first centring -------------------------------------


def test_warm_start_and_partial_fit_keep_the_first_centring():
    X, k = _cluster(300, 2, 4.0, seed=5)
    y = labels(k, 3, seed=5)
    Y, _ = _cluster(300, 2, 9.0, seed=6)  # elsewhere: a new fit would centre elsewhere
    model = _fit(_mlp(warm_start=True), X, y)
    first = model.centring_.copy()
    _fit(model, Y, y)
    assert np.array_equal(model.centring_, first)
    model.partial_fit(Y, y)
    assert np.array_equal(model.centring_, first)
    fresh = _fit(_mlp(), Y, y)
    assert not np.allclose(fresh.centring_, first)
    stream = _mlp()
    stream.partial_fit(X, y, classes=np.unique(y))
    stream.partial_fit(Y, y)
    assert np.array_equal(stream.centring_, first)
    # ... and its standardisation
    once = _fit(_mlp(), X, y)
    for kept in (model, stream):
        assert np.array_equal(kept.input_offset_, once.input_offset_)
        assert np.array_equal(kept.input_scale_, once.input_scale_)


def test_weighted_rows_centre_as_repeated_rows():
    """A row of weight 3 counts as three rows in the centroid, the scatter and the third
    moments; a row of weight 0 not at all."""
    X, k = _cluster(80, 3, 5.0, seed=9)
    y = labels(k, 2, seed=9)
    w = np.random.default_rng(9).integers(0, 4, X.shape[0])
    weighted = _fit(_mlp(max_iter=5), X, y, sample_weight=w)
    repeated = _fit(_mlp(max_iter=5), X.repeat(w, axis=0), y.repeat(w))
    size = np.abs(repeated.centring_).max()
    assert np.abs(weighted.centring_ - repeated.centring_).max() <= 1e-9 * size
    assert np.abs(weighted.input_offset_ - repeated.input_offset_).max() <= 1e-9
    assert np.abs(weighted.input_scale_ / repeated.input_scale_ - 1).max() <= 1e-9


def test_origin_keeps_the_klein_model():
    X, k = points(200, 2, seed=1)
    y = labels(k, 3, seed=1)
    model = _fit(_mlp(centre="origin"), X, y)
    assert model.centring_ is None
    assert model.input_offset_ is None and model.input_scale_ is None
    assert np.array_equal(model.network_input(X), model.to_klein(X))
    net = model.network()  # no standardisation folded in: scikit-learn's weights as fitted
    for got, want in zip(net.weights + net.biases, model.coefs_ + model.intercepts_, strict=True):
        assert np.array_equal(got, want)
    assert math.isfinite(model.score(X, y))


# -- the command line ----------------------------------------------------------


def test_command_line_converts_and_checks_a_centred_network_and_its_tree(tmp_path, centred):
    import pickle

    from _cli import cli

    model, X = centred
    tree = hyp2onnx.region_tree(model, X[:300])
    sample = tmp_path / "sample.npy"
    np.save(sample, X[500:])
    for name, obj in (("mlp", model), ("tree", tree)):
        path = tmp_path / f"{name}.pkl"
        path.write_bytes(pickle.dumps(obj))
        out = tmp_path / f"{name}.onnx"
        code, _, err = cli("convert", path, "-o", out, "--check", sample)
        assert code == 0, err
        code, _, err = cli("predict", out, sample, "-o", tmp_path / f"{name}.csv")
        assert code == 0, err
        got = np.loadtxt(tmp_path / f"{name}.csv", delimiter=",", skiprows=1, usecols=0)
        assert np.array_equal(got, model.predict(X[500:]))


@pytest.mark.parametrize("n", [1, 4095, 4097, 9000])
def test_centring_matrix_in_blocks_is_the_whole_arrays_bit_for_bit(n):
    """`centring_frame` takes the log-map vectors a block of rows at a time (a
    tenth of the memory); each row's by the same operations as the whole array's,
    so the matrix is the one computed on all rows at once, bit for bit, at and
    around the block size, weighted or not."""
    from hyp2onnx.estimators._isolation import lorentz_boost_to_origin
    from hyp2onnx.estimators._mlp import _weighted_axes, centring_frame
    from hyp2onnx.estimators._rotation import _log_at_origin
    from hyp2onnx.geometry import lorentzian_centroid, move_to_origin

    def pca_axes(v):  # the package's, written out whole (it works in place)
        centred = v - v.mean(axis=0)
        vectors = np.linalg.eigh(centred.T @ centred)[1][:, ::-1]
        return vectors * np.where(((centred @ vectors) ** 3).sum(axis=0) < 0, -1.0, 1.0)

    def whole(x, weight):
        mu = lorentzian_centroid(x, weight)
        B = lorentz_boost_to_origin(mu)
        v = _log_at_origin(*move_to_origin(x, mu))
        R = (pca_axes(v) if weight is None else _weighted_axes(v, weight)).T
        return np.vstack([B[:1], R @ B[1:]])

    x, _ = _cluster(n, 5, 6.0, seed=n)
    weight = np.random.default_rng(n).random(n)
    for w in (None, weight):
        assert np.array_equal(centring_frame(x, w), whole(x, w))


@pytest.mark.parametrize("geometry", ["hyperboloid", "klein", "poincare"])
@pytest.mark.parametrize("n", [1, 4097])
def test_training_inputs_made_in_place_are_the_whole_arrays_bit_for_bit(geometry, n):
    """The network's training input is made with few temporaries (points a block at a
    time, in-place centring, squares and division, Klein input not copied) and is,
    bit for bit, the definition computed on whole arrays; the caller's points are
    left as they were."""
    from hyp2onnx.estimators._mlp import centring_frame
    from hyp2onnx.geometry import from_klein, to_klein, unit_hyperboloid
    from hyp2onnx.ir.frames import Frames, frame_features

    x, klein = _cluster(n, 4, 3.0, seed=n)
    X = x if geometry == "hyperboloid" else from_klein(to_klein(x), geometry)
    given = X.copy()
    model = hyp2onnx.HyperbolicMLPClassifier(input_geometry=geometry, max_iter=1)
    got, _, _ = model._training_data(X, (klein[:, 0] > 0).astype(int), None, reset=True)
    L = centring_frame(unit_hyperboloid(X, geometry))
    k = frame_features(to_klein(X, geometry), Frames.from_lorentz([L]))
    offset = k.mean(axis=0)
    deviation = np.sqrt(((k - offset) ** 2).mean(axis=0))
    widest = deviation.max()
    scale = np.maximum(deviation, 0.5 * widest) if widest > 0 else np.ones(k.shape[1])
    assert np.array_equal(model.centring_, L)
    assert np.array_equal(model.input_scale_, scale)
    assert np.array_equal(got, (k - offset) / scale)
    assert np.array_equal(X, given)
