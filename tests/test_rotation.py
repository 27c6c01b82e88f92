"""Hyperbolic rotation forests (issue 26): frames, splits, thresholds, export, isometries.

The oracles do not use the code under test: Lorentz matrices are checked
against ``J``, splits against flatness (an SVD of points found on their
boundary by bisection), thresholds against the Einstein-midpoint identity
in rapidities, the graph against the Python model on rows placed at every
frame threshold, and the estimator against its own fit on an isometric
copy of the data.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _cli import convert_and_verify, predicted_lines
from _data import isometric_copy, random_isometry
from sklearn.base import clone
from sklearn.model_selection import train_test_split

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.ir import predict_output
from hyp2onnx.ir.frames import frame_features

ROOT = Path(__file__).resolve().parent.parent
J = lambda d: np.diag([-1.0] + [1.0] * d)


def _mixture(n: int, d: int, *, seed: int = 0, geometry: str = "hyperboloid"):
    X, y = make_wrapped_normal_mixture(n, d, 4, random_state=seed, geometry=geometry)
    return train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)


def _klein_frames_forest(rotation: str, n_estimators: int, max_depth: int):
    """A rotation forest routing on frames, on Klein input."""
    return h.HyperbolicRotationForestClassifier(
        n_estimators=n_estimators,
        max_depth=max_depth,
        rotation=rotation,
        input_geometry="klein",
        routing="frames",
        random_state=0,
    )


@pytest.mark.parametrize("rotation", ["pca", "haar", "identity"])
@pytest.mark.parametrize("d", [2, 5])
def test_every_frame_is_a_lorentz_isometry(rotation: str, d: int) -> None:
    Xtr, _, ytr, _ = _mixture(300, d)
    Xtr = isometric_copy(
        Xtr, random_isometry(d, 2.0, np.random.default_rng(1))
    )  # data away from the origin: real boosts
    model = h.HyperbolicRotationForestClassifier(
        n_estimators=8, max_depth=2, rotation=rotation, group_size=2, random_state=0
    ).fit(Xtr, ytr)
    for M in model.frames_:
        scale = max(1.0, float(np.abs(M).max()) ** 2)
        assert np.abs(M.T @ J(d) @ M - J(d)).max() <= 1e-12 * scale
        assert M[0, 0] >= 1.0
        assert M[0, 0] > 1.5  # boosted: the centre is not the origin


def _bisect(f, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Neighbouring points on the segment with ``f(lo)`` true and ``f(hi)`` false."""
    a, b = 0.0, 1.0
    for _ in range(200):
        m = a / 2 + b / 2
        if m in (a, b):
            break
        if f(lo + m * (hi - lo)):
            a = m
        else:
            b = m
    return lo + a * (hi - lo), lo + b * (hi - lo)


def _splits(model, n_trees: int = 3):
    """(tree, frame column, Klein threshold) of the first trees' splits, from the IR."""
    ensemble = model.to_ir().ensemble
    d = ensemble.n_features
    for t, (start, stop) in enumerate(ensemble.tree_bounds()[:n_trees]):
        for j in range(start, stop):
            if ensemble.feature[j] >= 0:
                yield t, int(ensemble.feature[j]) - t * d, float(ensemble.threshold[j])


@pytest.mark.parametrize("rotation", ["pca", "haar"])
def test_each_split_is_one_flat_hyperplane_in_klein_coordinates(rotation: str) -> None:
    d = 3
    Xtr, _, ytr, _ = _mixture(300, d, geometry="klein")
    model = _klein_frames_forest(rotation, 3, 3).fit(Xtr, ytr)
    rng = np.random.default_rng(0)
    checked = 0
    for t, column, threshold in _splits(model):
        side = lambda p: model.frame_coordinates(p[None, :], t)[0, column] <= threshold
        boundary = []
        while len(boundary) < 3 * d:
            p, q = Xtr[rng.integers(len(Xtr), size=2)]
            if side(p) == side(q):
                continue
            lo, hi = (p, q) if side(p) else (q, p)
            boundary.append(_bisect(side, lo, hi)[0])
        # Points of one hyperplane: [k, 1] has rank d (its normal is the null vector).
        A = np.hstack([np.array(boundary), np.ones((len(boundary), 1))])
        s = np.linalg.svd(A, compute_uv=False)
        assert s[-1] <= 1e-9 * s[0], (t, column, s)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("tree_space", ["ranks", "klein"])
def test_thresholds_sit_at_the_einstein_midpoint_in_frame_coordinates(tree_space: str) -> None:
    Xtr, _, ytr, _ = _mixture(400, 4)
    Xtr = isometric_copy(Xtr, random_isometry(4, 1.5, np.random.default_rng(2)))
    model = h.HyperbolicRotationForestClassifier(
        n_estimators=4, max_depth=4, tree_space=tree_space, random_state=0
    ).fit(Xtr, ytr)
    checked = 0
    for t, tree in enumerate(model.estimators_):
        kf = model.frame_coordinates(Xtr, t)
        reads = kf if model.split_indices_[t] is None else model.split_indices_[t].transform(kf)
        paths = tree.decision_path(reads).tocsc()
        native = tree.tree_
        thresholds = native.threshold
        if model.split_indices_[t] is not None:
            thresholds = model.split_indices_[t].klein_thresholds(native.feature, thresholds)
        for j in np.flatnonzero(native.children_left >= 0):
            rows = paths[:, j].nonzero()[0]
            f, threshold = native.feature[j], thresholds[j]
            values = kf[rows, f]
            went_left = np.isin(rows, paths[:, native.children_left[j]].nonzero()[0])
            low, high = values[went_left].max(), values[~went_left].min()
            assert low <= threshold < high
            gap = (np.arctanh(threshold) - np.arctanh(low)) - (
                np.arctanh(high) - np.arctanh(threshold)
            )
            # Trees comparing float32 values keep a threshold anywhere in its float32 step.
            step = (
                1e-15
                if model.split_indices_[t] is not None
                else abs(np.spacing(np.float32(threshold)))
            )
            assert abs(gap) <= 2 * step / (1 - threshold**2) + 1e-15, (t, j, low, threshold, high)
            checked += 1
    assert checked >= 20


def _op_types(graph) -> set[str]:
    """Every node's op type, in subgraphs (If branches, Loop bodies) too."""
    out = set()
    for node in graph.node:
        out.add(node.op_type)
        for attribute in node.attribute:
            if attribute.g.node:
                out |= _op_types(attribute.g)
    return out


def _rows_at_thresholds(model, rng: np.random.Generator, n_splits: int = 60) -> np.ndarray:
    """Klein rows whose frame coordinate is the nearest on each side of split thresholds,
    and every row one ulp away in each coordinate."""
    ensemble = model.to_ir().ensemble
    internal = np.flatnonzero(ensemble.feature >= 0)
    chosen = rng.choice(internal, size=min(n_splits, internal.size), replace=False)
    rows = []
    base = model.to_klein(model._fit_points)
    for j in chosen:
        column, threshold = int(ensemble.feature[j]), float(ensemble.threshold[j])
        value = lambda p: frame_features(p[None, :], ensemble.frames)[0, column]
        for _ in range(50):
            p, q = base[rng.integers(len(base), size=2)]
            if (value(p) <= threshold) != (value(q) <= threshold):
                break
        else:
            continue
        lo, hi = (p, q) if value(p) <= threshold else (q, p)
        for point in _bisect(lambda x: value(x) <= threshold, lo, hi):
            rows.append(point)
            for f in range(point.size):
                for direction in (-np.inf, np.inf):
                    moved = point.copy()
                    moved[f] = np.nextafter(moved[f], direction)
                    rows.append(moved)
    return np.array(rows)


@pytest.mark.parametrize("encoding", ["fast", "exact", "standard"])
@pytest.mark.parametrize("rotation", ["pca", "haar"])
def test_rows_at_every_frame_threshold_and_one_ulp_either_side(
    rotation: str, encoding: str
) -> None:
    Xtr, Xte, ytr, _ = _mixture(400, 3, geometry="klein")
    model = _klein_frames_forest(rotation, 6, 4).fit(Xtr, ytr)
    model._fit_points = Xtr
    rows = _rows_at_thresholds(model, np.random.default_rng(1))
    assert rows.shape[0] >= 300
    onx = h.to_onnx(model, encoding=encoding, dtype="float64")  # the rows are float64 ulps apart
    assert "MatMul" not in _op_types(onx.graph)
    # Up to 1024 rows take the graph's short path, more its Loop over row blocks: both.
    for batch in (np.vstack([rows, Xte])[:1024], np.vstack([rows, Xte, rows])):
        report = h.verify(model, onx, batch)
        assert report.ok and report.label_mismatches == 0, str(report)
    # A float32 graph, given float32 rows, routes them as the model does those rows.
    rows32 = np.unique(rows.astype(np.float32), axis=0).astype(np.float64)
    report = h.verify(model, h.to_onnx(model, encoding=encoding, dtype="float32"), rows32)
    assert report.ok and report.label_mismatches == 0, str(report)
    # The IR reproduces the Python model (it is what the graph is built from).
    ensemble = model.to_ir().ensemble
    assert np.array_equal(predict_output(ensemble, rows), model.predict_proba(rows))


def test_identity_frames_reproduce_the_hyperbolic_random_forest_bit_for_bit() -> None:
    Xtr, Xte, ytr, _ = _mixture(500, 6)
    same = dict(n_estimators=15, max_depth=6, random_state=3)
    forest = h.HyperbolicRandomForestClassifier(**same).fit(Xtr, ytr)
    rotation = h.HyperbolicRotationForestClassifier(
        **same, centre="origin", rotation="identity", bootstrap=True, max_features="sqrt"
    ).fit(Xtr, ytr)
    for M in rotation.frames_:
        assert np.array_equal(M, np.eye(7))
    assert np.array_equal(rotation.predict_proba(Xte), forest.predict_proba(Xte))
    assert np.array_equal(rotation.predict(Xte), forest.predict(Xte))
    # ... and the regressor, with sample weights
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(ytr))
    target = ytr.astype(float) + Xtr[:, 1]
    forest = h.HyperbolicRandomForestRegressor(**same).fit(Xtr, target, sample_weight=w)
    rotation = h.HyperbolicRotationForestRegressor(
        **same, centre="origin", rotation="identity", bootstrap=True, max_features=1.0
    ).fit(Xtr, target, sample_weight=w)
    assert np.array_equal(rotation.predict(Xte), forest.predict(Xte))


def test_each_tree_is_what_the_public_fit_grows_on_its_frame() -> None:
    """The fit's shortcuts (one pass for ranks, the trees' own _fit unchecked) change nothing.

    Oracle: scikit-learn's public ``fit`` on the tree space of each tree's
    frame coordinates, with the tree's seed; the correction moves thresholds
    only, so every other array of the tree must be the same.
    """
    from sklearn.tree import DecisionTreeClassifier

    from hyp2onnx.correction import TreeSpace

    Xtr, _, ytr, _ = _mixture(400, 5, seed=2)
    Xtr = np.concatenate([Xtr, Xtr[:40]])  # tied values: ranks shared by several rows
    ytr = np.concatenate([ytr, ytr[:40]])
    model = h.HyperbolicRotationForestClassifier(n_estimators=4, max_depth=5, random_state=1)
    model.fit(Xtr, ytr)
    for t, tree in enumerate(model.estimators_):
        kf = model.frame_coordinates(Xtr, t)
        space = TreeSpace.fit(kf, "ranks", "float32")
        ranks = space.transform(kf)
        fitted, at_once = TreeSpace.fit_transform(kf, "ranks", "float32")
        assert np.array_equal(at_once, ranks)
        assert all(np.array_equal(a, b) for a, b in zip(fitted.klein, space.klein, strict=True))
        public = DecisionTreeClassifier(max_depth=5, random_state=tree.random_state)
        public.fit(ranks, np.unique(ytr, return_inverse=True)[1])
        for name in ("feature", "children_left", "children_right", "value", "n_node_samples"):
            assert np.array_equal(getattr(tree.tree_, name), getattr(public.tree_, name)), name


def test_pca_frames_follow_an_isometry_of_the_data() -> None:
    """One PCA group: the frames are functions of the data, so an isometric copy
    (boost of 3) gets the same frame coordinates and the same predictions."""
    d = 4
    Xtr, Xte, ytr, yte = _mixture(600, d, seed=4)
    G = random_isometry(d, 3.0, np.random.default_rng(5))
    params = dict(n_estimators=10, max_depth=5, rotation="pca", group_size=d, random_state=0)
    model = h.HyperbolicRotationForestClassifier(**params).fit(Xtr, ytr)
    moved = h.HyperbolicRotationForestClassifier(**params).fit(isometric_copy(Xtr, G), ytr)
    for t in range(3):
        assert np.allclose(
            model.frame_coordinates(Xte, t),
            moved.frame_coordinates(isometric_copy(Xte, G), t),
            atol=1e-7,
        )
    agree = np.mean(model.predict(Xte) == moved.predict(isometric_copy(Xte, G)))
    assert agree >= 0.98
    assert abs(model.score(Xte, yte) - moved.score(isometric_copy(Xte, G), yte)) <= 0.02


def test_haar_accuracy_holds_on_isometric_copies() -> None:
    """The law of Haar frames around data centroids does not see an isometry: the
    mean accuracy over seeds moves little, where axis-parallel trees lose."""
    d = 2
    ours, copy = [], []
    for seed in range(4):
        Xtr, Xte, ytr, yte = _mixture(400, d, seed=seed)
        G = random_isometry(d, 3.0, np.random.default_rng(10 + seed))
        make = lambda: h.HyperbolicRotationForestClassifier(
            n_estimators=20, max_depth=3, rotation="haar", random_state=seed
        )
        ours.append(make().fit(Xtr, ytr).score(Xte, yte))
        copy.append(make().fit(isometric_copy(Xtr, G), ytr).score(isometric_copy(Xte, G), yte))
    assert abs(np.mean(ours) - np.mean(copy)) <= 0.04, (ours, copy)


def test_far_frames_ask_for_float64_input() -> None:
    d = 2
    Xtr, _, ytr, _ = _mixture(400, d, seed=1)
    far = isometric_copy(
        Xtr, random_isometry(d, 9.0, np.random.default_rng(3))
    )  # about 9 from the origin: float32 loses splits
    model = h.HyperbolicRotationForestClassifier(n_estimators=5, random_state=0).fit(far, ytr)
    assert model.input_dtype_ == "float64"
    with pytest.warns(UserWarning, match="float32 cannot separate"):
        h.to_onnx(model, dtype="float32")
    onx = h.to_onnx(model)
    assert onx.graph.input[0].type.tensor_type.elem_type == 11  # double
    assert h.verify(model, onx, far).label_mismatches == 0
    near = h.HyperbolicRotationForestClassifier(n_estimators=5, random_state=0).fit(Xtr, ytr)
    assert near.input_dtype_ == "float32"


def test_graph_computes_only_the_frame_columns_trees_read() -> None:
    Xtr, _, ytr, _ = _mixture(300, 8)
    model = h.HyperbolicRotationForestClassifier(
        n_estimators=4, max_depth=2, routing="frames", random_state=0
    )
    model.fit(Xtr, ytr)
    ensemble = model.to_ir().ensemble
    read = np.unique(ensemble.feature[ensemble.feature >= 0])
    assert read.size <= 4 * 3 < ensemble.frames.n_columns == 4 * 8
    onx = h.to_onnx(model)
    (constant,) = [t for t in onx.graph.initializer if t.name == "frames/constant"]
    # one sum per numerator read, and one denominator per frame those belong to
    assert list(constant.dims) == [read.size + len(set(read // 8)), 1]


def test_regressor_exports_exactly() -> None:
    Xtr, Xte, ytr, _ = _mixture(400, 3)
    target = ytr + np.sin(3 * Xtr[:, 1])
    model = h.HyperbolicRotationForestRegressor(n_estimators=6, max_depth=5, random_state=0)
    model.fit(Xtr, target)
    report = h.verify(model, h.to_onnx(model, encoding="exact"), Xte)
    assert report.ok and report.max_abs_diff["variable"] == 0.0, str(report)


def test_parameters_clone_and_validate() -> None:
    model = h.HyperbolicRotationForestClassifier(n_estimators=3, rotation="haar", max_depth=2)
    assert clone(model).get_params() == model.get_params()
    Xtr, _, ytr, _ = _mixture(100, 2)
    with pytest.raises(ValueError, match="rotation"):
        h.HyperbolicRotationForestClassifier(rotation="random").fit(Xtr, ytr)
    with pytest.raises(ValueError, match="bootstrap"):
        h.HyperbolicRotationForestClassifier(max_samples=0.5).fit(Xtr, ytr)
    fitted = h.HyperbolicRotationForestClassifier(n_estimators=3, n_jobs=2, random_state=0)
    serial = clone(fitted).set_params(n_jobs=None)
    assert np.array_equal(
        fitted.fit(Xtr, ytr).predict_proba(Xtr), serial.fit(Xtr, ytr).predict_proba(Xtr)
    )


def test_convert_verify_and_predict_on_the_command_line(tmp_path: Path) -> None:
    Xtr, Xte, ytr, _ = _mixture(300, 3)
    model = h.HyperbolicRotationForestClassifier(n_estimators=8, max_depth=4, random_state=0)
    model.fit(Xtr, ytr)
    (tmp_path / "forest.pkl").write_bytes(pickle.dumps(model))
    np.save(tmp_path / "X.npy", Xte)
    out = convert_and_verify(tmp_path / "forest.pkl", tmp_path / "f.onnx", tmp_path / "X.npy")
    assert "labels agree on 100.0000% (0 differ)" in out, out
    lines = predicted_lines(tmp_path / "f.onnx", tmp_path / "X.npy", tmp_path / "p.csv")
    labels = np.array([int(float(line.split(",")[0])) for line in lines[1:]])
    assert np.array_equal(labels, model.predict(Xte))


def test_the_estimators_are_public_and_lazy() -> None:
    code = (
        "import sys, hyp2onnx\n"
        "assert 'sklearn' not in sys.modules\n"
        "print(hyp2onnx.HyperbolicRotationForestClassifier.__name__,"
        " hyp2onnx.HyperbolicRotationForestRegressor.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "HyperbolicRotationForestClassifier",
        "HyperbolicRotationForestRegressor",
    ]
    assert "HyperbolicRotationForestClassifier" in h.__all__


def test_quick_benchmark_writes_its_tables(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_rotation.py"), "--quick"]
        + ["--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / "rotation.md").read_text(encoding="utf-8")
    assert text.startswith("# ") and "| d |" in text
    assert (tmp_path / "rotation.json").stat().st_size > 100
