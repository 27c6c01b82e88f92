"""HyperbolicIsolationForest: its laws against closed forms, its geometry, its exact export.

The oracles are independent of hyp2onnx's code: scikit-learn's own
``IsolationForest`` (parity), a closed form for three points on a line
(the distance law), scipy's Spearman correlation under random isometries
built here (invariance), the Minkowski form written out here (Lorentz
matrices), onnxruntime's routing of the training rows (leaf sizes) and
rows placed on every threshold and one ulp either side (export).
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _cli import convert_and_verify, predicted_lines
from _data import isometric_copy, random_isometry
from scipy.stats import spearmanr

import hyp2onnx as h
from hyp2onnx.estimators import _isolation
from hyp2onnx.estimators import _isolation_growth as growth
from hyp2onnx.verification import ANOMALY_SCORE_ATOL, run_onnx

ROOT = Path(__file__).resolve().parent.parent
DESIGNS = [("axis", "klein"), ("axis", "distance"), ("centred", "distance"), ("centred", "klein")]


def _exp_origin(v: np.ndarray) -> np.ndarray:
    r = np.linalg.norm(v, axis=1, keepdims=True)
    return np.concatenate([np.cosh(r), np.sinh(r) * v / np.where(r > 0, r, 1.0)], axis=1)


def _points(n: int, d: int, seed: int, spread: float = 1.5) -> np.ndarray:
    """Hyperboloid points: clusters at distance 1 .. 3 from the origin plus scattered ones."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, d))
    centres *= rng.uniform(1, 3, (4, 1)) / np.linalg.norm(centres, axis=1, keepdims=True)
    v = centres[rng.integers(0, 4, n)] + 0.3 * rng.standard_normal((n, d))
    v[: n // 20] = rng.standard_normal((n // 20, d)) * spread
    return _exp_origin(v)


# -- scikit-learn parity ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"max_features": 0.5, "bootstrap": True, "contamination": 0.1},
        {"max_samples": 100, "max_features": 2, "contamination": 0.05, "n_estimators": 30},
    ],
)
def test_axis_klein_law_gives_scikit_learns_scores_exactly(params: dict) -> None:
    from sklearn.ensemble import IsolationForest

    X = _points(600, 3, 0)
    k = X[:, 1:] / X[:, :1]  # Klein coordinates, written out
    ours = h.HyperbolicIsolationForest(
        splits="axis", threshold_law="klein", random_state=4, **params
    )
    theirs = IsolationForest(random_state=4, **params)
    ours.fit(X)
    theirs.fit(k)
    probe = _points(300, 3, 1)
    kp = probe[:, 1:] / probe[:, :1]
    assert np.array_equal(ours.score_samples(probe), theirs.score_samples(kp))
    assert np.array_equal(ours.decision_function(probe), theirs.decision_function(kp))
    assert np.array_equal(ours.predict(probe), theirs.predict(kp))
    assert np.array_equal(ours.predict(X), theirs.predict(k))
    assert ours.offset_ == theirs.offset_


# -- the distance law: a closed form ----------------------------------------------------------


@pytest.mark.parametrize("splits", ["axis", "centred"])
def test_three_collinear_points_in_h1_follow_the_distance_law(splits: str) -> None:
    """Points at distances 0, 0.5 and 3 along H^1 (moved by a boost of 1.3): the first split
    falls in the gap g1 next to an end point with probability g1 / (g1 + g2) and isolates
    it at depth 1, else at depth 2: E[h] = 1 + g2 / (g1 + g2) (no leaf holds two rows twice)."""
    t = np.array([3.0, 0.5, 0.0]) + 1.3
    X = np.stack([np.cosh(t), np.sinh(t)], axis=1)
    n_trees = 4000
    model = h.HyperbolicIsolationForest(
        splits=splits, threshold_law="distance", n_estimators=n_trees, max_samples=3, random_state=0
    ).fit(X)
    depth = model.path_length(X) / n_trees
    g1, g2 = 2.5, 0.5
    sigma = 0.5 / np.sqrt(n_trees)  # Bernoulli standard deviation at most
    assert abs(depth[0] - (1 + g2 / (g1 + g2))) < 4 * sigma
    assert abs(depth[2] - (1 + g1 / (g1 + g2))) < 4 * sigma
    assert abs(depth[1] - 2.0) < 1e-12  # the middle point always needs two splits


# -- invariance under isometries --------------------------------------------------------------


def test_centred_ranking_is_invariant_under_random_isometries() -> None:
    """The two forests draw with different seeds, so only Monte Carlo noise separates their
    rankings; the threshold still fails a frame boosted to nine tenths of the centroid."""
    rng = np.random.default_rng(3)
    X = _points(400, 3, 2)
    moved = isometric_copy(X, random_isometry(3, 3.0, rng))
    kw = {"n_estimators": 1000, "max_samples": 64}
    before = h.HyperbolicIsolationForest(splits="centred", random_state=0, **kw).fit(X)
    after = h.HyperbolicIsolationForest(splits="centred", random_state=1, **kw).fit(moved)
    rho = spearmanr(before.score_samples(X), after.score_samples(moved)).statistic
    assert rho >= 0.98, rho


def test_axis_ranking_is_not_invariant() -> None:
    """The contrast that shows the invariance test has power: Klein axes see the boost."""
    rng = np.random.default_rng(3)
    X = _points(400, 3, 2)
    moved = isometric_copy(X, random_isometry(3, 3.0, rng))
    kw = {"n_estimators": 500, "max_samples": 64, "splits": "axis"}
    before = h.HyperbolicIsolationForest(random_state=0, **kw).fit(X)
    after = h.HyperbolicIsolationForest(random_state=1, **kw).fit(moved)
    assert spearmanr(before.score_samples(X), after.score_samples(moved)).statistic < 0.95


def test_every_split_maps_its_drawn_hyperplane_back_by_a_lorentz_boost(monkeypatch) -> None:
    """Each centred split is ``n = M^T (-s, u)``: the hyperplane drawn in the node's frame,
    mapped back by the boost ``M`` taking the node's centroid to the origin. The fit forms
    ``n`` without the matrix; every one it forms is checked against the matrix, and the
    matrix against the Minkowski form written out here."""
    used: list[tuple[np.ndarray, ...]] = []
    original = growth.boosted_normal

    def recording(mu: np.ndarray, u: np.ndarray, s: np.ndarray):
        n0, ns = original(mu, u, s)
        used.append((mu.copy(), u.copy(), np.array(s), n0.copy(), ns.copy()))
        return n0, ns

    monkeypatch.setattr(growth, "boosted_normal", recording)
    X = _points(500, 4, 5, spread=4.0)  # some points 8 or more from the origin
    h.HyperbolicIsolationForest(splits="centred", n_estimators=20, random_state=0).fit(X)
    J = np.diag([-1.0, 1, 1, 1, 1])
    e0 = np.eye(5)[0]
    checked = 0
    for mu, u, s, n0, ns in used:
        for j in np.flatnonzero(np.isfinite(s)):
            M = _isolation.lorentz_boost_to_origin(mu[:, j])
            scale = max(1.0, float(np.abs(M).max()) ** 2)
            assert np.abs(M.T @ J @ M - J).max() <= 1e-13 * scale
            assert np.abs(M @ mu[:, j] - e0).max() <= 1e-13 * scale
            want = M.T @ np.r_[-s[j], u[:, j]]
            got = np.r_[n0[j], ns[:, j]]
            assert np.abs(got - want).max() <= 1e-13 * scale * max(1.0, abs(s[j]))
            checked += 1
    assert checked > 20 * 20  # one per internal node at least


# -- exact export -----------------------------------------------------------------------------


def _single_tree_graph(model, t: int):
    """The model's tree ``t`` alone, each leaf valued by its node index, as an exact graph."""
    from dataclasses import replace

    from hyp2onnx.export import compile_model
    from hyp2onnx.ir import Ensemble

    described = model.to_ir()
    e = described.ensemble
    arrays, _ = e.tree(t)
    projection = None
    if e.projection is not None:
        used = np.unique(arrays.feature[arrays.feature >= 0])
        projection = e.projection[:, used]
        arrays = arrays._replace(
            feature=np.where(arrays.feature >= 0, np.searchsorted(used, arrays.feature), -1)
        )
    leaf_ids = np.where(arrays.feature < 0, np.arange(arrays.feature.size), 0.0)[:, None]
    one = Ensemble.from_trees(
        [arrays],
        [leaf_ids],
        op=e.op,
        compare_dtype=e.compare_dtype,
        threshold_dtype=e.threshold_dtype,
        n_features=e.n_features,
        aggregate="sum",
        base_values=np.zeros(1),
        post_transform="identity",
        sum_dtype="float64",
        projection=projection,
    )
    # The isolation outputs, with the leaf index as the summed "path length"
    # (centred trees then go through the graph's level-by-level walk).
    single = replace(
        described,
        ensemble=one,
        metadata={**described.metadata, "denominator": "1.0", "path_threshold": "0.0"},
    )
    return compile_model(single, dtype="float64", encoding="exact", opset=18)


@pytest.mark.parametrize(
    ("splits", "law", "bootstrap"),
    [*((s, law, False) for s, law in DESIGNS[:3]), ("centred", "distance", True)],
)
def test_training_rows_routed_through_the_graph_reproduce_every_leaf_size(
    splits, law, bootstrap
) -> None:
    X = _points(800, 3, 7)
    model = h.HyperbolicIsolationForest(
        splits=splits, threshold_law=law, n_estimators=6, bootstrap=bootstrap, random_state=2
    ).fit(X)
    for t, (rows, tree) in enumerate(zip(model.estimators_samples_, model.trees_, strict=True)):
        leaves = run_onnx(_single_tree_graph(model, t), X[rows])["path_length"].astype(np.int64)
        counts = np.bincount(leaves, minlength=tree.n_node_samples.size)
        assert np.array_equal(counts[tree.is_leaf], tree.n_node_samples[tree.is_leaf]), t
        assert counts[~tree.is_leaf].sum() == 0


def _probes(model, k: np.ndarray) -> np.ndarray:
    """Klein rows whose tested value is every threshold and its float32/float64 neighbours."""
    rng = np.random.default_rng(0)
    out = []
    for tree in model.trees_:
        internal = np.flatnonzero(~tree.is_leaf)
        for j in rng.choice(internal, min(20, internal.size), replace=False):
            base = k[rng.integers(k.shape[0])].copy()
            t = tree.threshold[j]
            if tree.normal is None:
                f = tree.feature[j]
                t32 = np.float32(t)
                values = {
                    t,
                    np.nextafter(t, 2),
                    np.nextafter(t, -2),
                    float(t32),
                    float(np.nextafter(t32, np.float32(2))),
                    float(np.nextafter(t32, np.float32(-2))),
                }
                for v in values:
                    row = base.copy()
                    row[f] = v
                    out.append(row)
            else:
                w = tree.normal[j]
                f = int(np.argmax(np.abs(w)))
                row = base.copy()
                row[f] += (t - row @ w) / w[f]
                for step in range(-3, 4):  # walk the moved coordinate across the threshold
                    probe = row.copy()
                    probe[f] = row[f]
                    for _ in range(abs(step)):
                        probe[f] = np.nextafter(probe[f], np.sign(step) * 2)
                    out.append(probe)
    P = np.array(out)
    return P[np.einsum("ij,ij->i", P, P) < 1]


@pytest.mark.parametrize(("splits", "law"), DESIGNS)
@pytest.mark.parametrize("encoding", ["exact", "standard"])
def test_graph_routes_like_the_model_at_thresholds_and_one_ulp_either_side(
    splits, law, encoding
) -> None:
    X = _points(1000, 3, 9)
    k = X[:, 1:] / X[:, :1]
    model = h.HyperbolicIsolationForest(
        splits=splits,
        threshold_law=law,
        n_estimators=25,
        contamination=0.1,
        input_geometry="klein",
        random_state=0,
    ).fit(k)
    P = np.vstack([k, _probes(model, k)])
    got = run_onnx(h.to_onnx(model, encoding=encoding), P)
    assert np.array_equal(got["path_length"], model.path_length(P))
    assert np.array_equal(got["label"], model.predict(P))
    assert np.abs(got["scores"] - model.score_samples(P)).max() <= ANOMALY_SCORE_ATOL
    if splits == "centred":  # some probes do sit on a threshold: exactness is exercised
        tested = [
            np.isin(P @ tr.normal[~tr.is_leaf].T, tr.threshold[~tr.is_leaf]).any()
            for tr in model.trees_
        ]
        assert any(tested)


@pytest.mark.parametrize("walk", ["perfect trees", "nodes"])
@pytest.mark.parametrize(
    ("d", "params"),
    [(1, {}), (2, {}), (8, {}), (3, {"max_samples": 1}), (3, {"max_samples": 2})],
)
def test_both_walks_of_centred_trees_route_like_the_model(walk, d, params, monkeypatch) -> None:
    """The walk on perfect binary trees (the default) and the node walk it falls back to.

    Leaves sit at many depths (the perfect layout pads below them); d = 1 reads
    one Klein column; one training row gives trees that are a single leaf.
    """
    from hyp2onnx._runtime import all_nodes
    from hyp2onnx.emit import isolation as emit_isolation

    if walk == "nodes":  # no forest fits: every one takes the node walk
        monkeypatch.setattr(emit_isolation, "PERFECT_MAX_ENTRIES", 0)
    X = _points(1200, d, 11)
    k = X[:, 1:] / X[:, :1]
    model = h.HyperbolicIsolationForest(
        n_estimators=12, contamination=0.1, input_geometry="klein", random_state=3, **params
    ).fit(k)
    graph = h.to_onnx(model)
    ops = {node.op_type for node in all_nodes(graph.graph)}
    deep = any(tree.n_node_samples.size > 1 for tree in model.trees_)
    assert ("GatherElements" in ops) == (walk == "perfect trees" and deep)
    P = np.vstack([k, _probes(model, k)]) if deep else k
    got = run_onnx(graph, P)
    assert np.array_equal(got["path_length"], model.path_length(P))
    assert np.array_equal(got["label"], model.predict(P))


def test_labels_are_decided_on_summed_path_lengths() -> None:
    X = _points(600, 3, 4)
    model = h.HyperbolicIsolationForest(contamination=0.1, random_state=0).fit(X)
    S = model.path_length(X)
    assert np.array_equal(model.predict(X) == -1, S < model.path_threshold_)
    assert np.array_equal(model.predict(X) == -1, model.decision_function(X) < 0)
    # The boundary: the threshold itself is an inlier, the float below it an outlier.
    edge = np.array([model.path_threshold_, np.nextafter(model.path_threshold_, 0)])
    scores = _isolation._scores(edge, model._denominator)
    assert scores[0] - model.offset_ >= 0 > scores[1] - model.offset_


def test_convert_verify_and_predict_on_the_command_line(tmp_path: Path) -> None:
    X = _points(400, 3, 6)
    model = h.HyperbolicIsolationForest(n_estimators=20, contamination=0.1, random_state=0).fit(X)
    (tmp_path / "forest.pkl").write_bytes(pickle.dumps(model))
    np.save(tmp_path / "X.npy", X)
    out = convert_and_verify(tmp_path / "forest.pkl", tmp_path / "forest.onnx", tmp_path / "X.npy")
    assert "labels agree on 100.0000% (0 differ)" in out, out
    lines = predicted_lines(tmp_path / "forest.onnx", tmp_path / "X.npy", tmp_path / "p.csv")
    assert lines[0] == "label,score,path_length"
    table = np.array([[float(v) for v in line.split(",")] for line in lines[1:]])
    assert np.array_equal(table[:, 0], model.predict(X))
    assert np.array_equal(table[:, 2], model.path_length(X))
    assert h.read_metadata(tmp_path / "forest.onnx")["task"] == "anomaly"


def test_the_estimator_is_public_and_lazy() -> None:
    code = (
        "import sys, hyp2onnx\n"
        "assert 'sklearn' not in sys.modules\n"
        "print(hyp2onnx.HyperbolicIsolationForest.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "HyperbolicIsolationForest"


def test_quick_benchmark_writes_its_tables(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_isolation.py"),
            "--quick",
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / "isolation.md").read_text(encoding="utf-8")
    assert text.startswith("# ")
    tables = [line for line in text.splitlines() if line.startswith("| :---")]
    assert len(tables) == 4
    assert (tmp_path / "isolation.json").exists()


def test_benchmark_skip_speed_keeps_the_speed_section_it_finds(tmp_path: Path, monkeypatch) -> None:
    """``--skip-speed`` measures detection only: the speed table, its rows and the line saying
    when they were measured come from the results already there, twice in a row."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_isolation as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))

    def no_speed(*args, **kwargs):
        raise AssertionError("--skip-speed measured speed")

    fake = {"hierarchy H^2": {"m": {"auc": [0.9, 0.8], "ap": [0.5, 0.4]}}}
    monkeypatch.setattr(bench, "evaluate", lambda datasets, seeds, n_trees: fake)
    monkeypatch.setattr(bench, "speed", no_speed)
    section = (
        f"{bench.SPEED_HEADING} (planted)\n\nMilliseconds on a planted machine.\n\n"
        "| graph | ms | speed vs skl2onnx |\n| :--- | ---: | ---: |\n| a | 1.0 | 1.00 |"
    )
    (tmp_path / "isolation.md").write_text(f"# old\n\n{section}\n", encoding="utf-8")
    (tmp_path / "isolation.json").write_text('{"speed": [["a", "1.0", "1.00"]]}', encoding="utf-8")
    for _ in range(2):
        assert bench.main(["--skip-speed", "--out", str(tmp_path)]) == 0
        text = (tmp_path / "isolation.md").read_text(encoding="utf-8")
        # the run time is the machine's (0 s when quiet, 1 s under load)
        assert re.search(rf"Run time \d+ s\.\n\n{re.escape(section)}$", text.rstrip("\n")), text
        assert "0.850 ± 0.050" in text  # the new detection table
        saved = (tmp_path / "isolation.json").read_text(encoding="utf-8")
        assert '"speed": [\n  [\n   "a"' in saved


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("gensim") is None,
    reason="gensim (extra 'dev') is not installed",
)
def test_hierarchy_example_finds_the_held_out_packages() -> None:
    """examples/isolation_hierarchy.py --quick: each of three packages held out in turn is found
    (mean ROC-AUC of the default forest >= 0.9; 0.977 when written), and the graph verifies."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "isolation_hierarchy.py"), "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "labels agree on 100.0000% (0 differ)" in done.stdout
    mean = next(line for line in done.stdout.splitlines() if line.strip().startswith("mean"))
    auc_ours = float(mean.split()[1])
    assert auc_ours >= 0.9, done.stdout


@pytest.mark.parametrize("bootstrap", [False, True])
def test_sklearn_forests_rows_are_drawn_when_asked_and_survive_pickling(bootstrap) -> None:
    """With scikit-learn's forest the training rows are not kept by ``fit`` but drawn
    again from each tree's seed when asked: the same rows as scikit-learn's own
    ``IsolationForest`` on the Klein coordinates, before and after pickling."""
    from sklearn.ensemble import IsolationForest

    X = _points(600, 3, 11)
    params = {"n_estimators": 7, "max_samples": 100, "bootstrap": bootstrap, "random_state": 5}
    model = h.HyperbolicIsolationForest(splits="axis", threshold_law="klein", **params).fit(X)
    plain = IsolationForest(**params).fit(model.to_klein(X))
    expected = [np.asarray(s) for s in plain.estimators_samples_]
    again = pickle.loads(pickle.dumps(model))
    for got in (model.estimators_samples_, again.estimators_samples_):
        assert len(got) == len(expected)
        assert all(np.array_equal(a, b) for a, b in zip(got, expected, strict=True))
    assert "estimators_samples_" not in vars(model)  # nothing of n rows kept by fit
