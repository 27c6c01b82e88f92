"""Hyperbolic MLPs and their region trees: the Python model, the graphs, the tree, explain.

Oracles independent of the code under test: the network's forward pass in
plain Python floats (left-to-right sums over ``coefs_``), activation patterns
brute-forced on a dense grid of the Klein disk with numpy's own product, and
the hyperboloid's geometry from its definitions (geodesics as combinations
of two points with ``sinh`` weights). The fixtures' networks read Klein coordinates
(``centre="origin"``), which these oracles take; tests/test_neural_centred.py holds the
centred networks (the default) to the same graphs.
"""

from __future__ import annotations

import io
import pickle
import subprocess
import sys
import warnings

import numpy as np
import onnxruntime as ort
import pytest
from _cli import cli
from _data import labels, points, targets
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

import hyp2onnx
from hyp2onnx.verification import run_onnx


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


@pytest.fixture(scope="module")
def four_classes():
    X, k = points(800, 2, seed=3, max_radius=2.5)
    y = labels(k, 4, seed=3)
    model = hyp2onnx.HyperbolicMLPClassifier(
        hidden_layer_sizes=(16, 16), max_iter=150, random_state=0, centre="origin"
    )
    return _fit(model, X[:500], y[:500]), X, y


@pytest.fixture(scope="module")
def two_classes():
    X, k = points(600, 3, seed=4, max_radius=2.5)
    y = np.where(labels(k, 2, seed=4) == 1, "b", "a")
    model = hyp2onnx.HyperbolicMLPClassifier(
        hidden_layer_sizes=(12, 8), max_iter=150, random_state=1, centre="origin"
    )
    return _fit(model, X[:400], y[:400]), X, y


# -- an independent oracle -------------------------------------------------------------------


def oracle_logits(coefs, intercepts, k):
    """The forward pass in plain Python floats: each sum left to right, then the bias."""
    out = []
    for row in k:
        a = [float(v) for v in row]
        for i, (W, b) in enumerate(zip(coefs, intercepts)):
            z = []
            for j in range(W.shape[1]):
                s = a[0] * float(W[0, j])
                for f in range(1, len(a)):
                    s = s + a[f] * float(W[f, j])
                z.append(s + float(b[j]))
            a = z if i == len(coefs) - 1 else [max(v, 0.0) for v in z]
        out.append(a)
    return np.array(out)


def to_hyperboloid(k):
    x0 = 1.0 / np.sqrt(1.0 - np.einsum("ij,ij->i", k, k))
    return np.concatenate([x0[:, None], k * x0[:, None]], axis=1)


def bisect(f, a, b, steps=70):
    """Klein rows on both sides of where the bool ``f`` changes along ``a -> b`` (row by row)."""
    lo, hi = a.copy(), b.copy()
    flo = f(lo)
    for _ in range(steps):
        mid = (lo + hi) / 2.0
        same = f(mid) == flo
        lo = np.where(same[:, None], mid, lo)
        hi = np.where(same[:, None], hi, mid)
    return np.concatenate([lo, hi])


def hard_rows(model, X, seed=0, n=60):
    """Held-out rows, rows at radius 10 to 15, rows where a hidden unit's computed
    pre-activation changes sign and rows where the label changes (both sides, one ulp apart
    along the segment), and rows whose first-layer pre-activation is exactly 0."""
    rng = np.random.default_rng(seed)
    k = model.to_klein(X)
    net = model.network()
    i, j = rng.integers(0, len(k), (2, n))
    a, b = k[i], k[j]
    pa, pb = net.pattern(a), net.pattern(b)
    unit = np.array([rng.choice(np.flatnonzero(r)) if r.any() else 0 for r in pa != pb])
    kink = bisect(lambda q: net.pattern(q)[np.arange(len(q)) % n, unit], a, b)
    la = model.predict(to_hyperboloid(a))
    tie = bisect(lambda q: model.predict(to_hyperboloid(q)) == la[np.arange(len(q)) % n], a, b)
    v = rng.standard_normal((100, k.shape[1]))
    r = rng.uniform(10.0, 15.0, 100)
    far = np.concatenate(
        [np.cosh(r)[:, None], np.sinh(r)[:, None] * v / np.linalg.norm(v, axis=1, keepdims=True)],
        axis=1,
    )
    return np.concatenate(
        [X, far, to_hyperboloid(kink), to_hyperboloid(tie), to_hyperboloid(zero_rows(net))]
    )


def zero_rows(net, n=20):
    """Klein rows where a first-layer unit's fixed-order pre-activation is exactly 0, or
    within a few ulps of it (k_1 moved ulp by ulp around the solution)."""
    W, b = net.weights[0], net.biases[0]
    rows = []
    for u in range(min(n, W.shape[1])):
        k0 = 0.05 * (u % 5)
        k1 = -(b[u] + k0 * W[0, u]) / W[1, u]
        if abs(k1) > 0.6:
            continue
        for step in range(-4, 5):
            c = np.nextafter(k1, np.inf if step > 0 else -np.inf)
            x = k1
            for _ in range(abs(step)):
                x = np.nextafter(x, c if step else x)
            row = np.zeros(W.shape[0])
            row[0], row[1] = k0, x
            rows.append(row)
    return np.array(rows)


# -- the Python model ------------------------------------------------------------------------


def test_forward_pass_is_the_oracles_bit_for_bit(four_classes, two_classes):
    for model, X, _ in (four_classes, two_classes):
        k = model.to_klein(X[:150])
        want = oracle_logits(model.coefs_, model.intercepts_, k)
        assert np.array_equal(model.decision_function(X[:150]), want)
        if want.shape[1] == 1:
            index = (want[:, 0] > 0).astype(int)
        else:
            index = np.argmax(want, axis=1)
        assert np.array_equal(model.predict(X[:150]), model.classes_[index])


def test_zero_rows_hit_exact_zero(four_classes):
    model, _, _ = four_classes
    net = model.network()
    k = zero_rows(net)
    z = net.forward(k)[1][0]
    assert np.any(z == 0.0)  # the construction reaches the kink itself


def test_estimator_conventions(four_classes):
    model, X, y = four_classes
    params = model.get_params()
    assert params["input_geometry"] == "hyperboloid" and params["activation"] == "relu"
    assert clone(model).get_params()["hidden_layer_sizes"] == (16, 16)
    with pytest.raises(ValueError, match="only 'relu'"):
        hyp2onnx.HyperbolicMLPClassifier(activation="tanh").fit(X[:50], y[:50])
    with pytest.raises(ValueError, match="1d array"):
        hyp2onnx.HyperbolicMLPClassifier().fit(X[:50], np.eye(2)[y[:50] % 2])
    probabilities = model.predict_proba(X[:20])
    assert np.allclose(probabilities.sum(axis=1), 1.0)
    assert probabilities.shape == (20, 4)


# -- the graphs ------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["fast", "exact"])
def test_graph_labels_are_the_models_on_hard_rows(four_classes, two_classes, encoding):
    for model, X, _ in (four_classes, two_classes):
        rows = hard_rows(model, X[400:])
        onnx_model = hyp2onnx.to_onnx(model, encoding=encoding)
        got = run_onnx(onnx_model, rows)
        assert np.array_equal(got["label"], model.predict(rows))
        report = hyp2onnx.verify(model, onnx_model, rows)
        assert report.ok, report
        if encoding == "exact":  # the chain: the logits bit for bit (softmax by the runtime)
            assert report.max_abs_diff["probabilities"] <= 1e-15


def test_fast_graph_rescores_rows_within_its_bound(four_classes):
    model, X, _ = four_classes
    onnx_model = hyp2onnx.to_onnx(model)
    bound = hyp2onnx.read_metadata(onnx_model)["value_bound"]
    assert 0 < bound < 1e-10
    # Rows whose top two logits are equal: the graph must take the first, as numpy does.
    rows = hard_rows(model, X[400:], seed=5)
    logits = model.decision_function(rows)
    top = np.sort(logits, axis=1)
    assert np.any(top[:, -1] - top[:, -2] <= 2 * bound)  # the guard's branch is exercised
    assert np.array_equal(run_onnx(onnx_model, rows)["label"], model.predict(rows))


@pytest.mark.parametrize("timelike_dim", [0, -1])
def test_fast_graph_carries_the_bias_on_the_timelike_column(four_classes, timelike_dim):
    """Hyperboloid rows are divided by ``x_0`` whole, so the first layer's bias rides on the
    column of ones where the timelike column was: first or last, near ties included."""
    model, X, y = four_classes
    rows = hard_rows(model, X[400:], seed=5)
    if timelike_dim == -1:
        X, rows = np.roll(X, -1, axis=1), np.roll(rows, -1, axis=1)
        model = _fit(clone(model).set_params(timelike_dim=-1), X[:500], y[:500])
    onnx_model = hyp2onnx.to_onnx(model)
    ops = [node.op_type for node in onnx_model.graph.node]
    assert ops[:3] == ["MatMul", "Div", "Gemm"]  # x_0 = X e_t, one Div of the whole row
    logits = model.decision_function(rows)
    top = np.sort(logits, axis=1)
    assert np.any(top[:, -1] - top[:, -2] == 0.0)  # exact ties: only the rescoring gets them
    got = run_onnx(onnx_model, rows)
    assert np.array_equal(got["label"], model.predict(rows))
    report = hyp2onnx.verify(model, onnx_model, rows)
    assert report.ok and report.max_abs_diff["probabilities"] <= 1e-12, report


def test_fast_graph_rescores_rows_off_the_unit_cube(four_classes):
    """Rows no point gives (``|x_f| > x_0``, so ``|k_f| > 1``) get the chain's labels too:
    the bound grows with ``|k_f|``, and the graph scales its margin by the batch's largest
    ``|k_f|``, here a negative coordinate (run in onnxruntime directly: hyp2onnx's runners
    refuse such rows)."""
    model, _, _ = four_classes
    net = model.network()
    rng = np.random.default_rng(9)
    a, b = -rng.uniform(0.0, 4e4, (2, 80, 2))  # the largest |k_f| is a negative k_f
    first = np.argmax(net.logits(a), axis=1)
    k = bisect(lambda q: np.argmax(net.logits(q), axis=1) == first[np.arange(len(q)) % 80], a, b)
    rows = np.concatenate([np.ones((len(k), 1)), k], axis=1)  # x_0 = 1: X / x_0 is k itself
    want = model.classes_[np.argmax(oracle_logits(model.coefs_, model.intercepts_, k), axis=1)]
    onnx_model = hyp2onnx.to_onnx(model)
    session = ort.InferenceSession(onnx_model.SerializeToString())
    label, _ = session.run(["label", "probabilities"], {"X": rows})
    assert len(np.unique(first)) > 1 and np.array_equal(label, want)


@pytest.mark.parametrize("n_classes", [8, 10])
def test_fast_graph_guard_with_many_classes(n_classes):
    """Up to 8 classes the guard takes every pair's gap in one MatMul, beyond it each logit
    against the largest: both must flag the rows that only the rescoring gets right."""
    X, k = points(900, 2, seed=11, max_radius=2.5)
    y = labels(k, n_classes, seed=11)
    model = hyp2onnx.HyperbolicMLPClassifier(hidden_layer_sizes=(12,), max_iter=100, random_state=0)
    model = _fit(model, X[:600], y[:600])
    assert len(model.classes_) == n_classes
    onnx_model = hyp2onnx.to_onnx(model)
    ops = {node.op_type for node in onnx_model.graph.node}
    assert ("GreaterOrEqual" in ops) == (n_classes > 8)
    rows = hard_rows(model, X[600:], seed=2)
    top = np.sort(model.decision_function(rows), axis=1)
    bound = hyp2onnx.read_metadata(onnx_model)["value_bound"]
    assert np.any(top[:, -1] - top[:, -2] <= 2 * bound)  # the guard's branch is exercised
    assert np.array_equal(run_onnx(onnx_model, rows)["label"], model.predict(rows))


@pytest.mark.parametrize(
    ("geometry", "curvature", "timelike_dim"),
    [
        ("poincare", -2.0, 0),
        ("klein", -0.5, 0),
        ("hyperboloid", -1.0, 0),
        ("hyperboloid", -3.0, 1),  # the spacelike columns are not one run: Gather
        ("hyperboloid", -1.0, 2),  # the last column: Slice
    ],
)
def test_geometries_and_a_regressor_verify(geometry, curvature, timelike_dim):
    X, k = points(300, 2, geometry, curvature=curvature, timelike_dim=timelike_dim, seed=7)
    model = _fit(
        hyp2onnx.HyperbolicMLPRegressor(
            hidden_layer_sizes=(8,),
            max_iter=100,
            random_state=0,
            input_geometry=geometry,
            curvature=curvature,
            timelike_dim=timelike_dim,
        ),
        X,
        np.stack([targets(k), targets(k, seed=1)], axis=1),
    )
    for encoding in ("fast", "exact"):
        onnx_model = hyp2onnx.to_onnx(model, encoding=encoding)
        assert hyp2onnx.verify(model, onnx_model, X).ok
    tree = hyp2onnx.region_tree(model, X)
    report = hyp2onnx.verify(tree, hyp2onnx.to_onnx(tree), X)
    assert report.ok and report.max_abs_diff["variable"] == 0.0


def test_graphs_take_empty_and_single_row_batches(two_classes):
    model, X, _ = two_classes
    tree = hyp2onnx.region_tree(model, X[:400])
    for onnx_model in (hyp2onnx.to_onnx(model), hyp2onnx.to_onnx(tree)):
        assert run_onnx(onnx_model, X[:0])["label"].shape == (0,)
        assert run_onnx(onnx_model, X[:1])["label"][0] == model.predict(X[:1])[0]


def test_export_refuses_what_it_cannot_do(four_classes):
    model, _, _ = four_classes
    with pytest.raises(ValueError, match="encoding must be one of"):
        hyp2onnx.to_onnx(model, encoding="compat")
    with pytest.raises(ValueError, match="records its own geometry"):
        hyp2onnx.to_onnx(model, input_geometry="klein")
    with pytest.raises(hyp2onnx.UnsupportedModelError, match="fitted HyperbolicMLP"):
        hyp2onnx.region_tree(object(), np.zeros((1, 3)))


# -- the region tree -------------------------------------------------------------------------


def grid(n=121):
    t = np.linspace(-0.995, 0.995, n)
    k = np.stack(np.meshgrid(t, t), axis=-1).reshape(-1, 2)
    return k[np.einsum("ij,ij->i", k, k) < 0.99]


def oracle_patterns(model, k):
    """Hidden-unit signs by numpy's own products, and each row's smallest |pre-activation|;
    ``k`` the network inputs, standardised here as scikit-learn's network read them."""
    if getattr(model, "input_offset_", None) is not None:
        k = (k - model.input_offset_) / model.input_scale_
    a, signs, least = k, [], np.full(len(k), np.inf)
    for W, b in zip(model.coefs_[:-1], model.intercepts_[:-1]):
        z = a @ W + b
        signs.append(z > 0)
        least = np.minimum(least, np.abs(z).min(axis=1))
        a = np.maximum(z, 0)
    return np.concatenate(signs, axis=1), least


def test_tree_leaves_are_the_brute_force_regions_of_a_grid(four_classes):
    model, _, _ = four_classes
    k = grid()
    tree = hyp2onnx.region_tree(model, to_hyperboloid(k))
    want, least = oracle_patterns(model, k)
    clear = least > 1e-9  # rows further than any rounding from every boundary
    leaf = tree.apply(to_hyperboloid(k))
    assert np.all(leaf >= 0)  # built from the grid: every grid row is covered
    assert np.array_equal(tree.tree_.patterns[leaf[clear]], want[clear])
    assert {r.tobytes() for r in want[clear]} <= {r.tobytes() for r in tree.tree_.patterns}
    assert tree.n_regions_ <= tree.max_regions_ == 2**32


def test_certified_regions_hold_their_witnesses_and_cover_the_ball(four_classes, capsys):
    """Regions added by ``certify_radius`` are sound (each witness lies in the ball and the
    oracle's forward pass gives it the region's pattern, one X did not reach) and, at d = 2,
    cover the regions a dense grid of the ball finds that a few points missed. Planted: the
    witness's pattern check dropped (with the programs' sides reversed), the radius check
    dropped, one flip in two skipped."""
    _, X, y = four_classes
    small = hyp2onnx.HyperbolicMLPClassifier(
        hidden_layer_sizes=(8, 8), max_iter=150, random_state=0
    )
    model = _fit(small, X[:500], y[:500])  # fewer units: fewer candidate patterns to solve for
    radius = 2.0  # hyperbolic; Klein radius tanh(2) = 0.964
    few = X[:40]
    plain = hyp2onnx.region_tree(model, few)
    tree = hyp2onnx.region_tree(model, few, certify_radius=radius)
    assert tree.n_certified_ > 0 and tree.n_regions_ == plain.n_regions_ + tree.n_certified_
    certified = ~np.isnan(tree.witnesses_[:, 0])
    assert certified.sum() == tree.n_certified_ and np.all(tree.counts_[certified] == 0)
    assert tree.counts_.sum() == len(few) and np.all(tree.counts_[~certified] > 0)
    witnesses = tree.witnesses_[certified]
    assert np.all(np.einsum("ij,ij->i", witnesses, witnesses) < np.tanh(radius) ** 2)
    want, _ = oracle_patterns(model, witnesses)
    assert np.array_equal(tree.tree_.patterns[certified], want)
    reached = {r.tobytes() for r in plain.tree_.patterns}
    assert not reached & {r.tobytes() for r in want}
    k = grid()
    k = k[np.einsum("ij,ij->i", k, k) < np.tanh(radius) ** 2]
    inside, least = oracle_patterns(model, k)
    clear = least > 1e-9
    held = {r.tobytes() for r in tree.tree_.patterns}
    found = np.array([r.tobytes() in held for r in inside[clear]])
    before = np.array([r.tobytes() in reached for r in inside[clear]])
    assert before.mean() < 0.95 and found.mean() >= 0.999, (before.mean(), found.mean())
    assert np.array_equal(tree.predict(to_hyperboloid(k)), model.predict(to_hyperboloid(k)))
    assert hyp2onnx.verify(tree, hyp2onnx.to_onnx(tree), to_hyperboloid(k)).ok
    for bad in (0.0, -1.0, float("nan"), True, "2"):
        with pytest.raises(ValueError, match="certify_radius"):
            hyp2onnx.region_tree(model, few, certify_radius=bad)
    capped = hyp2onnx.region_tree(model, few, certify_radius=radius, max_certified=3, verbose=1)
    assert capped.n_certified_ == 3
    assert "region_tree: round 1, " in capsys.readouterr().err


def test_linear_programs_agree_with_scipy_linprog():
    """The certifier's programs, solved through highspy, against scipy's ``linprog`` (the
    same HiGHS solver behind another wrapper): the same optimal value on feasible
    programs shaped like the certifier's (margin and least 1-norm, free and bounded
    columns), None where linprog finds none (infeasible, unbounded). Planted: the status
    check dropped, the matrix laid out by rows: each fails it."""
    from scipy.optimize import linprog

    from hyp2onnx.estimators._regions import _LinearPrograms

    programs = _LinearPrograms()
    rng = np.random.default_rng(7)
    kinds = []
    for trial in range(60):
        rows, cols = int(rng.integers(3, 33)), int(rng.integers(2, 6))
        A = rng.normal(size=(rows, cols))
        b = rng.normal(size=rows) + (1.0 if trial % 3 else -2.0)  # a third mostly infeasible
        c = rng.normal(size=cols)
        lower = np.where(rng.random(cols) < 0.3, -np.inf, -rng.uniform(0.5, 2, cols))
        upper = np.where(rng.random(cols) < 0.3, np.inf, rng.uniform(0.5, 2, cols))
        if trial == 1:  # unbounded: x = 0 feasible, a free column no row holds, pulled along
            A[:, 0], lower[0], upper[0], c[0] = 0.0, -np.inf, np.inf, 1.0
            b = np.abs(b) + 1.0
            lower[1:], upper[1:] = np.minimum(lower[1:], 0.0), np.maximum(upper[1:], 0.0)
        want = linprog(c, A_ub=A, b_ub=b, bounds=list(zip(lower, upper)), method="highs")
        got = programs.minimise(c, A, b, lower, upper)
        kinds.append(want.status)
        if want.status != 0:
            assert got is None, (trial, want.status)
            continue
        assert got is not None, trial
        x, value = got
        np.testing.assert_allclose(value, want.fun, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(value, c @ x, rtol=1e-9, atol=1e-9)
        assert (
            np.all(A @ x <= b + 1e-9) and np.all(x >= lower - 1e-12) and np.all(x <= upper + 1e-12)
        )
    assert kinds.count(0) >= 20 and kinds.count(2) >= 10 and 3 in kinds  # each kind met


def test_certifying_writes_nothing_on_stdout():
    """HiGHS announces itself on the process's stdout (once a process) when its log is
    on: a pipeline's output must not carry it. A fresh interpreter, so that no earlier
    solver has printed it already. Planted: highspy.Highs() (which prints while it
    installs its callbacks) in place of the compiled solver."""
    script = (
        "import warnings; import hyp2onnx\n"
        "from hyp2onnx.datasets import make_wrapped_normal_mixture\n"
        "X, y = make_wrapped_normal_mixture(200, 2, 2, random_state=0)\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('ignore')\n"
        "    net = hyp2onnx.HyperbolicMLPClassifier(hidden_layer_sizes=(6,), max_iter=30,\n"
        "                                           random_state=0).fit(X, y)\n"
        "tree = hyp2onnx.region_tree(net, X[:5], certify_radius=2.0, max_certified=3)\n"
        "assert tree.n_certified_ > 0\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""


def test_tree_labels_are_the_networks_and_values_within_the_bound(four_classes):
    model, X, _ = four_classes
    tree = hyp2onnx.region_tree(model, X[:500])
    rows = hard_rows(model, X[500:], seed=2)
    assert np.array_equal(tree.predict(rows), model.predict(rows))
    k = model.to_klein(rows)
    leaf = tree.tree_.leaf(k)
    covered = leaf > 0
    gap = np.abs(tree.tree_.leaf_outputs(k, leaf) - model.decision_function(rows))[covered]
    assert gap.max() <= tree.value_bound_ < 1e-9
    onnx_model = hyp2onnx.to_onnx(tree)
    report = hyp2onnx.verify(tree, onnx_model, rows)
    assert report.ok and report.label_mismatches == 0
    got = run_onnx(onnx_model, rows)
    assert np.array_equal(got["label"], model.predict(rows))
    assert np.array_equal(got["region"], tree.apply(rows))


def test_uncovered_rows_fall_back_to_the_network_and_say_so(four_classes):
    model, X, _ = four_classes
    tree = hyp2onnx.region_tree(model, X[:20])  # few points: few regions
    rest = X[20:]
    covered = tree.covered(rest)
    assert 0 < covered.sum() < len(rest)
    got = run_onnx(hyp2onnx.to_onnx(tree), rest)
    assert np.array_equal(got["covered"], covered)
    assert np.array_equal(got["region"] < 0, ~covered)
    assert np.array_equal(got["label"], model.predict(rest))
    assert np.allclose(got["probabilities"], model.predict_proba(rest), rtol=0, atol=1e-15)


def test_every_node_is_a_geodesic_hyperplane(four_classes):
    """Two points of each node's Klein hyperplane, the geodesic between them on the
    hyperboloid (sinh-weighted combinations), and the node's Minkowski normal: the geodesic
    stays on the normal's hyperplane, and the network's own pre-activation vanishes there."""
    model, X, _ = four_classes
    tree = hyp2onnx.region_tree(model, X[:300])
    e = tree.tree_.ensemble
    internal = np.flatnonzero(e.feature >= 0)
    s = np.linspace(0.0, 1.0, 7)[:, None]
    checked = 0
    for node in internal:
        w = e.projection[:, e.feature[node]]
        c = -e.threshold[node]
        norm = np.linalg.norm(w)
        if norm == 0 or abs(c) >= 0.9 * norm:
            continue  # the hyperplane misses the disk (or nearly)
        foot = -c * w / norm**2
        along = np.array([-w[1], w[0]]) / norm
        half = 0.9 * np.sqrt(1.0 - foot @ foot)
        a, b = to_hyperboloid(np.stack([foot - half * along, foot + half * along]))
        D = np.arccosh(a[0] * b[0] - a[1:] @ b[1:])
        path = (np.sinh((1 - s) * D) * a + np.sinh(s * D) * b) / np.sinh(D)
        region = tree.explain(path[3])  # a point of the boundary: its own region
        n = region.minkowski_normals
        # <n, x>_L = -n_0 x_0 + n_s . x_s for the hyperplane the node tests
        matching = np.flatnonzero(
            np.all(np.isclose(region.klein_normals, w, rtol=1e-9, atol=1e-12), axis=1)
        )
        if not matching.size:
            continue  # the boundary point's own pattern differs in an earlier unit
        normal = n[matching[0]]
        lorentz = -normal[0] * path[:, 0] + path[:, 1:] @ normal[1:]
        assert np.all(np.abs(lorentz) <= 1e-9 * np.abs(normal).sum() * path[:, 0])
        checked += 1
    assert checked >= 10


def test_explain_works_for_every_row(four_classes):
    model, X, _ = four_classes
    tree = hyp2onnx.region_tree(model, X[:20])
    rows = X[20:120]
    covered = tree.covered(rows)
    for x in rows:
        r = tree.explain(x)
        k = model.to_klein(x[None, :])
        assert r.contains(k)[0]
        assert np.allclose(
            k @ r.affine_weights + r.affine_offset,
            model.decision_function(x[None, :]),
            rtol=0,
            atol=1e-12,
        )
        assert np.array_equal(r.pattern, model.activation_pattern(x[None, :])[0])
        assert r.minkowski_normals.shape == (32, 3) and set(np.unique(r.side)) <= {-1, 1}
        if r.covered:
            assert np.array_equal(tree.tree_.patterns[r.region], r.pattern)
        else:
            assert r.region == -1
    assert not covered.all()
    with pytest.raises(ValueError, match="one point"):
        tree.explain(rows[:2])


def test_explain_draws_the_region_in_the_poincare_disk(four_classes):
    pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') is not installed")
    import matplotlib

    matplotlib.use("Agg")
    model, X, _ = four_classes
    tree = hyp2onnx.region_tree(model, X[:200])
    ax = tree.explain(X[300]).plot(resolution=80)
    assert len(ax.lines) > 2


def test_command_line_converts_and_checks(tmp_path, two_classes):
    model, X, _ = two_classes
    tree = hyp2onnx.region_tree(model, X[:400])
    np.save(tmp_path / "sample.npy", X[400:])
    for name, obj in (("mlp", model), ("tree", tree)):
        path = tmp_path / f"{name}.pkl"
        path.write_bytes(pickle.dumps(obj))
        out = tmp_path / f"{name}.onnx"
        code, stdout, err = cli("convert", path, "-o", out, "--check", tmp_path / "sample.npy")
        assert code == 0, err
        # says what the model is (a network records one "tree" for the metadata's sake)
        assert "ReLU network, hidden layers [12, 8]" in stdout and "trees" not in stdout, stdout
        assert ("region tree of" in stdout) == (name == "tree"), stdout
        code, _, err = cli("predict", out, tmp_path / "sample.npy", "-o", tmp_path / f"{name}.csv")
        assert code == 0, err
        code, shown, err = cli("inspect", out)
        assert code == 0 and "hidden layers [12, 8]" in shown, err
        # OpenVINO's differences said as what they are: a region number on a boundary
        assert "values by up to 1)" not in shown and "values by up to 1;" not in shown, shown
        if name == "tree":
            assert "neighbouring region number" in shown, shown
        lines = (tmp_path / f"{name}.csv").read_text().splitlines()
        assert len(lines) == 1 + len(X) - 400


def test_command_line_says_a_model_file_or_data_is_no_graph(tmp_path, two_classes):
    """A model file given as a graph, and data given as an encoder: one error line naming
    what the file is and one fix line, nothing of protobuf's."""
    model, X, _ = two_classes
    (tmp_path / "mlp.pkl").write_bytes(pickle.dumps(model))
    np.save(tmp_path / "sample.npy", X[:20])
    for args, said in (
        (("inspect", tmp_path / "mlp.pkl"), "this is a model file"),
        (("predict", tmp_path / "mlp.pkl", tmp_path / "sample.npy"), "this is a model file"),
        (("convert", tmp_path / "mlp.pkl", "--encoder", tmp_path / "sample.npy"), "not an ONNX"),
    ):
        code, _, err = cli(*args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 2, err
        assert lines[0].startswith("error: ") and said in lines[0], err
        assert lines[1].strip().startswith("fix: ") and "Wire format" not in err, err
    assert not list(tmp_path.glob("*.onnx"))


class _Terminal(io.StringIO):
    """stderr as a terminal (progress bars are drawn only there)."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("terminal", [True, False])
def test_certifying_shows_progress_on_a_terminal_only(two_classes, monkeypatch, terminal):
    """A bar per round with the candidates looked at, the regions certified and the time
    left on a terminal; nothing in a log file. Planted: the bar shown everywhere."""
    model, X, _ = two_classes
    stderr = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    tree = hyp2onnx.region_tree(model, X[:20], certify_radius=1.0, max_certified=3)
    shown = stderr.getvalue()
    if terminal:
        assert "certify, round 1" in shown and "candidates" in shown, shown
        assert tree.n_certified_ > 0 and "certified=" in shown, shown
    else:
        assert shown == "", shown


def test_fitted_state_is_readable(two_classes):
    """The network's loss curve is its own attribute, and a region tree says what it is."""
    model, X, _ = two_classes
    assert model.loss_curve_ == model.estimator_.loss_curve_ and len(model.loss_curve_) > 1
    assert model.best_loss_ == min(model.loss_curve_)
    tree = hyp2onnx.region_tree(model, X[:50])
    said = repr(tree)
    assert said.startswith("RegionTree(HyperbolicMLPClassifier(hidden_layer_sizes=(12, 8))")
    assert f"{tree.n_regions_} regions of at most 2**20" in said, said


def test_uncovered_regressor_rows_get_the_networks_values():
    X, k = points(400, 2, seed=8)
    model = _fit(
        hyp2onnx.HyperbolicMLPRegressor(hidden_layer_sizes=(8, 8), max_iter=100, random_state=0),
        X,
        targets(k),
    )
    tree = hyp2onnx.region_tree(model, X[:15])
    got = run_onnx(hyp2onnx.to_onnx(tree), X)
    uncovered = ~got["covered"]
    assert uncovered.sum() > 10
    want = model.predict(X)[:, None]
    assert np.array_equal(got["variable"][uncovered], want[uncovered])  # the chain, bit for bit
    assert np.abs(got["variable"] - want).max() <= tree.value_bound_


@pytest.mark.parametrize("hidden", [(24,), (3, 30), (6, 5, 4), (24, 4)])
def test_region_tree_graph_takes_every_route_through_its_levels(hidden):
    """A first layer of more than 20 units walks every level (no table of 2**m nodes); a
    small one takes the table, then the second layer's signs at once, then walks any
    third layer level by level."""
    X, k = points(400, 2, seed=9)
    model = _fit(
        hyp2onnx.HyperbolicMLPClassifier(hidden_layer_sizes=hidden, max_iter=60, random_state=0),
        X,
        labels(k, 3, seed=9),
    )
    tree = hyp2onnx.region_tree(model, X[:200])
    got = run_onnx(hyp2onnx.to_onnx(tree), X)
    assert np.array_equal(got["region"], tree.apply(X))
    assert np.array_equal(got["label"], model.predict(X))


def test_an_encoder_composes_in_front_of_networks_and_region_trees(tmp_path):
    """An onnx.helper encoder (a linear map, then the exponential map to the Poincare disk)
    in front of an MLP and of its region tree: one graph, checked by verify."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {
        "W": (0.5 * rng.normal(size=(4, 2))).astype(np.float32),
        "axes": np.array([1], dtype=np.int64),
        "eps": np.array(1e-30, dtype=np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["v"]),
        helper.make_node("Mul", ["v", "v"], ["vv"]),
        helper.make_node("ReduceSum", ["vv", "axes"], ["s"]),
        helper.make_node("Add", ["s", "eps"], ["s_eps"]),
        helper.make_node("Sqrt", ["s_eps"], ["n"]),
        helper.make_node("Tanh", ["n"], ["t"]),
        helper.make_node("Div", ["t", "n"], ["f"]),
        helper.make_node("Mul", ["f", "v"], ["points"]),
    ]
    graph = helper.make_graph(
        nodes,
        "encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("points", TensorProto.FLOAT, ["N", 2])],
        [numpy_helper.from_array(v, n) for n, v in weights.items()],
    )
    encoder = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    raw = rng.normal(size=(600, 4)).astype(np.float32)
    points = run_onnx_plain(encoder, raw)
    y = (points[:, 0] > 0.1).astype(int) + (points[:, 1] > 0).astype(int)
    model = _fit(
        hyp2onnx.HyperbolicMLPClassifier(
            hidden_layer_sizes=(8, 8), max_iter=100, input_geometry="poincare", random_state=0
        ),
        points,
        y,
    )
    for obj in (model, hyp2onnx.region_tree(model, points[:300])):
        composed = hyp2onnx.compose(encoder, obj)
        report = hyp2onnx.verify(obj, composed, raw)
        assert report.ok and report.label_mismatches == 0, report
    assert onnx.checker.check_model(composed) is None


def run_onnx_plain(onnx_model, x):
    import onnxruntime as ort

    session = ort.InferenceSession(
        onnx_model.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})[0]
