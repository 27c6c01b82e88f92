"""Oblique (HHCART) hyperbolic trees: training, threshold correction and exact export.

The exported graph must route every row as the Python model does, including
rows whose projection onto a split's normal is the threshold or one float
step from it; the Einstein correction must keep every training row on its
side; and on the paper's 8-class wrapped-normal mixtures the oblique tree
must predict every class and score at least the axis-parallel tree.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _data import all_nodes, assert_graph_answers_as_model, labels, points, targets
from onnx.reference import ReferenceEvaluator
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split
from sklearn.utils.estimator_checks import parametrize_with_checks

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.correction.midpoints import place_thresholds
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.estimators._householder import HouseholderTreeClassifier
from hyp2onnx.export import compile_model, read_metadata, to_onnx
from hyp2onnx.ir import Ensemble, InputSpace, Model, predict_output, predict_scores
from hyp2onnx.ir.projection import project
from hyp2onnx.verification import run_onnx

GEOMETRIES = ["hyperboloid", "poincare", "klein"]
KINDS = {
    "clf": h.HyperbolicHouseholderTreeClassifier,
    "reg": h.HyperbolicHouseholderTreeRegressor,
}


def _fit(kind: str, X: np.ndarray, k: np.ndarray, **params):
    y = labels(k, 4) if kind == "clf" else targets(k)
    return KINDS[kind](max_depth=5, random_state=0, **params).fit(X, y)


def threshold_klein(model, k_base: np.ndarray, *, steps: int = 6) -> np.ndarray:
    """Klein rows whose projection on each split's normal is within a few float steps of its threshold.

    For each split, a base row is moved along the coordinate with the largest
    weight to where its projection meets the threshold, then stepped one
    float64 value at a time either side, so that the projections straddle
    the threshold at neighbouring representable values.
    """
    tree = model.tree_
    rng = np.random.default_rng(2)
    rows = []
    for node in np.flatnonzero(~tree.is_leaf):
        w, t = tree.normal[node], tree.threshold[node]
        f = int(np.argmax(np.abs(w)))
        for base in k_base[rng.integers(0, len(k_base), size=3)] * 0.5:
            p = project(base[None], w[:, None])[0, 0]
            centre = base[f] + (t - p) / w[f]
            values = [centre]
            for direction in (-np.inf, np.inf):
                v = centre
                for _ in range(steps):
                    v = np.nextafter(v, direction)
                    values.append(v)
            block = np.repeat(base[None], len(values), axis=0)
            block[:, f] = values
            rows.append(block)
    k = np.concatenate(rows)
    return k[geometry.sum_of_squares(k) < 1.0]


def _assert_exact(model, onx, X):
    """The graph answers as the model, and onnx's reference evaluator as onnxruntime."""
    got, Xt = assert_graph_answers_as_model(model, onx, X)
    reference = ReferenceEvaluator(onx).run(None, {"X": Xt})
    for output, value in zip(onx.graph.output, reference, strict=True):
        np.testing.assert_array_equal(value, got[output.name])


# -- export parity ---------------------------------------------------------------


@pytest.mark.parametrize("geometry_name", GEOMETRIES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_exact_parity_random_and_threshold_rows(kind, geometry_name):
    X, k = points(400, 3, geometry_name, curvature=-2.5, seed=3)
    model = _fit(kind, X, k, input_geometry=geometry_name, curvature=-2.5)
    X_adv = geometry.from_klein(threshold_klein(model, k), geometry_name, -2.5)
    far = 7.0 if geometry_name == "klein" else 12.0
    X_far, _ = points(200, 3, geometry_name, curvature=-2.5, seed=4, max_radius=far)
    X_all = np.concatenate([X, X_adv, X_far])
    for dtype in ("float32", "float64"):
        onx = to_onnx(model, dtype=dtype)
        _assert_exact(model, onx, X_all)
        report = h.verify(
            model, onx, X_all.astype(dtype)
        )  # the float32 graph's user holds float32 (verify runs the model on the data as held)
        assert report.ok and report.atol == 0.0


@pytest.mark.parametrize("kind", list(KINDS))
def test_rows_on_both_sides_of_every_threshold_route_exactly(kind):
    """Unit-ball Klein input reaches the projection unchanged: rows sit at the thresholds."""
    X, k = points(400, 4, "klein", seed=5)
    model = _fit(kind, X, k, input_geometry="klein")
    k_adv = threshold_klein(model, k)
    tree = model.tree_
    feature, normals = tree.columns()
    p = project(k_adv, normals)
    internal = np.flatnonzero(~tree.is_leaf)
    t = tree.threshold[internal]
    gap = np.abs(p[:, feature[internal]] - t) / np.spacing(np.abs(t) + 1e-300)
    assert np.sum(gap == 0) >= 1  # some projections equal a threshold exactly ...
    assert np.sum((gap > 0) & (gap <= 2)) >= len(internal)  # ... many within two float steps
    _assert_exact(model, to_onnx(model, dtype="float64"), k_adv)
    _assert_exact(model, to_onnx(model, dtype="float32"), k_adv)


@pytest.mark.parametrize("timelike_dim", [1, -1])
def test_timelike_dim_and_curvature(timelike_dim):
    X, k = points(300, 3, curvature=-0.3, timelike_dim=timelike_dim, seed=8)
    model = _fit("clf", X, k, curvature=-0.3, timelike_dim=timelike_dim)
    X_adv = geometry.from_klein(threshold_klein(model, k), "hyperboloid", -0.3, timelike_dim)
    for dtype in ("float32", "float64"):
        _assert_exact(model, to_onnx(model, dtype=dtype), np.concatenate([X, X_adv]))


@pytest.mark.parametrize("kind", list(KINDS))
def test_large_batches_cross_row_blocks(kind):
    X, k = points(400, 3, "poincare", seed=15)
    model = _fit(kind, X, k, input_geometry="poincare")
    X_big, k_big = points(3000, 3, "poincare", seed=16)  # blocks of 1024 rows and a partial one
    X_adv = geometry.from_klein(threshold_klein(model, k_big), "poincare")
    _assert_exact(model, to_onnx(model, dtype="float64"), np.concatenate([X_big, X_adv]))


def test_graph_projects_with_mul_and_add_in_feature_order():
    X, k = points(300, 5, seed=6)
    model = _fit("clf", X, k)
    onx = to_onnx(model)
    ops = [n.op_type for n in all_nodes(onx.graph) if n.name.startswith("oblique/")]
    assert "MatMul" not in ops and "Gemm" not in ops
    # The chain appears twice: for a whole small batch and per block of rows.
    assert ops.count("Mul") == 2 * 5 and ops.count("Add") == 2 * 4
    meta = read_metadata(onx)
    assert meta["backend"] == "hhcart" and meta["n_trees"] == 1
    assert meta["estimator_class"] == "HyperbolicHouseholderTreeClassifier"


def test_ir_reference_matches_the_model():
    X, k = points(500, 3, "poincare", seed=7)
    for kind in KINDS:
        model = _fit(kind, X, k, input_geometry="poincare")
        ensemble = model.to_ir().ensemble
        k_model = model.to_klein(X)
        if kind == "clf":
            np.testing.assert_array_equal(predict_output(ensemble, k_model), model.predict_proba(X))
        else:
            np.testing.assert_array_equal(predict_scores(ensemble, k_model)[:, 0], model.predict(X))


def test_unused_klein_features_are_not_projected():
    """A normal's zero weights drop their Klein feature from the graph, exactly."""
    normals = np.array([[0.6, 0.0], [0.0, 0.0], [0.8, 1.0]])  # feature 1 never weighs
    ensemble = Ensemble(
        feature=np.array([0, 1, -1, -1, -1]),
        threshold=np.array([0.1, -0.2, 0.0, 0.0, 0.0]),
        left=np.array([1, 2, -1, -1, -1]),
        right=np.array([4, 3, -1, -1, -1]),
        value=np.array([[0, 0], [0, 0], [1.0, 0], [0.25, 0.75], [0, 1.0]]),
        roots=np.array([0]),
        op="<=",
        compare_dtype="float64",
        threshold_dtype="float64",
        n_features=3,
        aggregate="sum",
        base_values=np.zeros(2),
        post_transform="identity",
        classes=np.array([3, 7]),
        projection=normals,
    )
    np.testing.assert_array_equal(ensemble.used_features(), [0, 2])
    described = Model(ensemble, InputSpace("klein", -1.0, 0, 3), "hhcart", "handmade")
    onx = compile_model(described, dtype="float64", encoding="exact", opset=18)
    gather = next(n for n in onx.graph.node if n.op_type == "Gather" and n.name.startswith("klein"))
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onx.graph.initializer}
    np.testing.assert_array_equal(inits[gather.input[1]], [0, 2])
    _, k = points(2000, 3, "klein", seed=8)
    k[:50, 0] = 0.1 / 0.6 - k[:50, 2] * 0.8 / 0.6  # near the first threshold
    got = run_onnx(onx, k)
    np.testing.assert_array_equal(got["probabilities"], predict_output(ensemble, k))
    with pytest.raises(ValueError, match="projection"):
        Ensemble(**{**ensemble.__dict__, "projection": normals[:2]})


def test_compat_encoding_and_skl2onnx_limits():
    X, k = points(400, 3, seed=9)
    model = _fit("clf", X, k)
    with pytest.warns(h.CompatRoutingWarning, match="projection"):
        onx = to_onnx(model, encoding="compat")
    got = run_onnx(onx, X)
    np.testing.assert_allclose(
        got["probabilities"], model.predict_proba(X.astype(np.float32)), atol=1e-6
    )
    # The exact graph needs ai.onnx.ml opset 5, which skl2onnx cannot host.
    with pytest.raises(ValueError, match="opset 5"):
        compile_model(model.to_ir(), dtype="float32", encoding="exact", opset=18, legacy_only=True)


# -- training ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(KINDS))
def test_einstein_correction_keeps_training_partition(kind):
    X, k = points(600, 3, seed=10)
    model = _fit(kind, X, k)
    ablation = _fit(kind, X, k, midpoint="arithmetic")
    tree = model.tree_
    assert model.correction_.n_splits == int(np.sum(~tree.is_leaf)) > 5
    # Same splits, same training partition, thresholds elsewhere.
    np.testing.assert_array_equal(tree.normal, ablation.tree_.normal)
    np.testing.assert_array_equal(model.apply(X), ablation.apply(X))
    np.testing.assert_array_equal(model.predict(X), ablation.predict(X))
    assert np.any(tree.threshold != ablation.tree_.threshold)
    # Predict routes each training row where growth put it ...
    leaves = np.flatnonzero(tree.is_leaf)
    counts = np.bincount(model.apply(X), minlength=tree.node_count)
    np.testing.assert_array_equal(counts[leaves], tree.n_node_samples[leaves])
    # ... and each threshold is the Einstein midpoint of the nearest projections.
    feature, normals = tree.columns()
    p = project(model.to_klein(X), normals)
    reached = _rows_per_node(tree, p, feature)
    for node in np.flatnonzero(~tree.is_leaf):
        values = p[reached[node], feature[node]]
        low = values[values <= tree.threshold[node]].max()
        high = values[values > tree.threshold[node]].min()
        want = place_thresholds(np.array([low]), np.array([high]), op="<=")[0]
        assert tree.threshold[node] == want


def _rows_per_node(tree, p, feature):
    reached = {0: np.arange(p.shape[0])}
    for node in range(tree.node_count):
        if tree.is_leaf[node]:
            continue
        rows = reached[node]
        left = p[rows, feature[node]] <= tree.threshold[node]
        reached[tree.left[node]], reached[tree.right[node]] = rows[left], rows[~left]
    return reached


def test_predicts_every_class_with_probabilities_on_mixtures():
    X, y = make_wrapped_normal_mixture(1000, 4, 8, random_state=1)
    model = h.HyperbolicHouseholderTreeClassifier(max_depth=6, random_state=0).fit(X, y)
    assert set(model.predict(X)) == set(range(8))
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    leaf_proba = proba[np.argmax(proba.max(axis=1) < 1)]  # an impure leaf: fractions, not 0/1
    assert 0 < leaf_proba.max() < 1


def test_accuracy_at_least_axis_parallel_on_mixtures():
    """The paper's benchmark (8 classes, 1000 points, depth 3, 80/20), mean over seeds."""
    for d in (2, 4, 8, 16):
        axis, oblique = [], []
        for seed in range(5):
            X, y = make_wrapped_normal_mixture(1000, d, 8, random_state=seed)
            X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, random_state=seed)
            axis.append(
                h.HyperbolicDecisionTreeClassifier(max_depth=3, random_state=0)
                .fit(X_tr, y_tr)
                .score(X_te, y_te)
            )
            oblique.append(
                h.HyperbolicHouseholderTreeClassifier(max_depth=3, random_state=0)
                .fit(X_tr, y_tr)
                .score(X_te, y_te)
            )
        assert np.mean(oblique) >= np.mean(axis), (d, np.mean(oblique), np.mean(axis))


def test_regressor_beats_a_constant_and_follows_the_target():
    X, y = make_wrapped_normal_mixture(1000, 4, 8, regression=True, random_state=0)
    model = h.HyperbolicHouseholderTreeRegressor(max_depth=6, random_state=0).fit(X, y)
    assert model.score(X, y) > 0.5
    leaves = model.apply(X)
    for leaf in np.unique(leaves):
        assert model.tree_.value[leaf, 0] == pytest.approx(np.mean(y[leaves == leaf]))


def test_parameters_depth_leaf_size_and_weights():
    X, k = points(500, 3, seed=11)
    y = labels(k, 3)
    model = h.HyperbolicHouseholderTreeClassifier(max_depth=3, min_samples_leaf=20).fit(X, y)
    assert model.get_depth() <= 3 and model.get_n_leaves() <= 8
    assert model.tree_.n_node_samples[model.tree_.is_leaf].min() >= 20
    assert (
        h.HyperbolicHouseholderTreeClassifier(min_samples_split=600).fit(X, y).get_n_leaves() == 1
    )
    # Zero weights drop rows; the tree equals the one grown without them.
    w = np.ones(len(y))
    w[::3] = 0
    weighted = h.HyperbolicHouseholderTreeClassifier(max_depth=4, random_state=1).fit(X, y, w)
    dropped = h.HyperbolicHouseholderTreeClassifier(max_depth=4, random_state=1).fit(
        X[w > 0], y[w > 0]
    )
    np.testing.assert_array_equal(weighted.tree_.threshold, dropped.tree_.threshold)
    with pytest.raises(ValueError, match="(?i)negative"):
        h.HyperbolicHouseholderTreeClassifier().fit(X, y, -w)
    with pytest.raises(ValueError, match="non-zero"):
        h.HyperbolicHouseholderTreeClassifier().fit(X, y, 0 * w)
    # random_state makes fits repeatable; importances sum to one.
    again = clone(weighted).fit(X, y, w)
    np.testing.assert_array_equal(again.tree_.normal, weighted.tree_.normal)
    assert weighted.feature_importances_.sum() == pytest.approx(1.0)


def test_conventions_labels_errors_and_params():
    X, k = points(300, 2, seed=12)
    y = np.array(["leaf", "root", "mid"])[labels(k, 3)]
    model = h.HyperbolicHouseholderTreeClassifier(max_depth=4, random_state=0)
    with pytest.raises(NotFittedError):
        model.predict(X)
    with pytest.raises(NotFittedError):
        to_onnx(model)
    model.fit(X, y)
    np.testing.assert_array_equal(model.classes_, ["leaf", "mid", "root"])
    assert set(model.predict(X)) <= set(model.classes_)
    got = run_onnx(to_onnx(model), X)
    np.testing.assert_array_equal(got["label"], model.predict(X.astype(np.float32)))
    params = model.get_params()
    assert params["directions"] == "hhcart+fisher" and params["input_geometry"] == "hyperboloid"
    assert clone(model).get_params() == params
    with pytest.raises(ValueError, match="directions"):
        h.HyperbolicHouseholderTreeClassifier(directions="all").fit(X, y)
    with pytest.raises(ValueError, match="criterion"):
        h.HyperbolicHouseholderTreeRegressor(criterion="gini").fit(X, k[:, 0])
    with pytest.raises(h.InvalidPointError):
        model.predict(X * 2)
    with pytest.raises(ValueError, match="features"):
        model.predict(X[:, :2])


def test_pure_hhcart_directions_and_single_feature():
    X, k = points(300, 3, seed=13)
    y = labels(k, 3)
    model = h.HyperbolicHouseholderTreeClassifier(directions="hhcart", max_depth=4).fit(X, y)
    _assert_exact(model, to_onnx(model), X)
    X1, k1 = points(200, 1, "poincare", seed=14)
    one = h.HyperbolicHouseholderTreeRegressor(input_geometry="poincare", max_depth=3)
    one.fit(X1, targets(k1))
    _assert_exact(one, to_onnx(one, dtype="float64"), X1)
    leaf = h.HyperbolicHouseholderTreeClassifier().fit(X, np.zeros(len(X), dtype=int))
    assert leaf.get_n_leaves() == 1
    _assert_exact(leaf, to_onnx(leaf), X)


# -- scikit-learn's own checks ------------------------------------------------------

BALL = {"input_geometry": "klein", "curvature": -1e-6}  # radius 1000: holds the checks' data


@parametrize_with_checks(
    [
        h.HyperbolicHouseholderTreeClassifier(**BALL),
        h.HyperbolicHouseholderTreeRegressor(**BALL),
    ]
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_skops_files_of_oblique_trees_load_with_the_trusted_list(tmp_path):
    """The CLI's .skops loader must trust the oblique tree's fitted node container."""
    import skops.io as sio

    from hyp2onnx.cli._models import load_model

    X, k = points(200, 2, seed=7)
    model = h.HyperbolicHouseholderTreeClassifier(max_depth=3).fit(X, labels(k, 3))
    path = tmp_path / "oblique.skops"
    sio.dump(model, path)
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_oblique_trees_are_fitted_on_klein_coordinates_only():
    # Oblique splits compare projections of all coordinates, which no
    # per-feature tree space keeps: the wrappers take no tree_space, and the
    # generic wrapper refuses any other than "klein".
    assert "tree_space" not in h.HyperbolicHouseholderTreeClassifier().get_params()
    X, k = points(200, 3, seed=5)
    y = labels(k, 3)
    with pytest.raises(ValueError, match="tree_space='klein'"):
        h.HyperbolicEstimator(HouseholderTreeClassifier(max_depth=3)).fit(X, y)
    wrapped = h.HyperbolicEstimator(
        HouseholderTreeClassifier(max_depth=3, random_state=0), tree_space="klein"
    ).fit(X, y)
    own = h.HyperbolicHouseholderTreeClassifier(max_depth=3, random_state=0).fit(X, y)
    np.testing.assert_array_equal(wrapped.estimator_.tree_.threshold, own.tree_.threshold)
    assert wrapped.split_index_ is None and own.input_dtype_ == "float32"  # near the origin
