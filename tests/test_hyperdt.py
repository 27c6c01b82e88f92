"""HyperDT (PyPI hyperdt 0.0.3) models exported to ONNX, checked against HyperDT's own predict.

The oracle is HyperDT itself: its ``predict``/``predict_proba`` on held-out
points and on adversarial rows placed at, and a few ulps beside, every
split's boundary ``sin(theta) x_d = cos(theta) x_t`` (on the hyperboloid,
then nudged in ``x_d`` and ``x_t``). Fitting HyperDT is slow (its split
search is quadratic), so the data are small.
"""

from __future__ import annotations

from pathlib import Path

import joblib
import numpy as np
import pytest
from _cli import cli_process

import hyp2onnx
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.errors import UnsupportedModelError
from hyp2onnx.hyperdt import boundary_rows, predict_reference, read_hyperdt, split_columns
from hyp2onnx.verification import run_onnx

hyperdt_tree = pytest.importorskip(
    "hyperdt.tree", reason="hyperdt==0.0.3 (extra 'bench') is not installed"
)
hyperdt_ensemble = pytest.importorskip(
    "hyperdt.ensemble", reason="hyperdt==0.0.3 (extra 'bench') is not installed"
)

N_TRAIN = 160


def _data(seed: int = 0, n: int = N_TRAIN, timelike_dim: int = 0):
    X, y = make_wrapped_normal_mixture(n, 2, 4, random_state=seed)
    if timelike_dim != 0:
        X = np.roll(X, timelike_dim, axis=1)
    return X, y


def _fit(kind: str, *, timelike_dim: int = 0, seed: int = 0, **params):
    X, y = _data(seed, timelike_dim=timelike_dim)
    forest = dict(n_estimators=4, n_jobs=1, random_state=seed)
    make = {
        "tree_classifier": lambda: hyperdt_tree.HyperbolicDecisionTreeClassifier(
            max_depth=3, timelike_dim=timelike_dim, **params
        ),
        "tree_regressor": lambda: hyperdt_tree.HyperbolicDecisionTreeRegressor(
            max_depth=3, timelike_dim=timelike_dim, **params
        ),
        "forest_classifier": lambda: hyperdt_ensemble.HyperbolicRandomForestClassifier(
            max_depth=3, timelike_dim=timelike_dim, **forest, **params
        ),
        "forest_regressor": lambda: hyperdt_ensemble.HyperbolicRandomForestRegressor(
            max_depth=3, timelike_dim=timelike_dim, **forest, **params
        ),
    }
    target = y if kind.endswith("classifier") else np.round(np.sin(3.0 * X[:, 1]) + y, 1)
    return make[kind]().fit(X, target)


KINDS = ["tree_classifier", "tree_regressor", "forest_classifier", "forest_regressor"]


@pytest.mark.parametrize("kind", KINDS)
def test_graph_routes_every_row_as_hyperdt(kind: str) -> None:
    model = _fit(kind)
    held_out, _ = _data(seed=7, n=400)
    adversarial = boundary_rows(model, seed=1)
    assert adversarial.shape[0] > 1024  # the exact encoding's row blocks (a Loop) are used too
    X = np.vstack([held_out, adversarial])
    for encoding in ("exact", "standard"):
        onnx_model = hyp2onnx.to_onnx(model, dtype="float64", encoding=encoding)
        report = hyp2onnx.verify(model, onnx_model, X)
        assert report.ok, (encoding, report)
        assert report.atol == 0.0  # bit for bit
        if report.label_mismatches is not None:
            assert report.label_mismatches == 0
    # (opset 15: ReduceMax/ReduceMin take axes as an attribute before 18.)
    # The oracle is HyperDT itself, independent of the graph; the numpy
    # reference of what was read from the model must match it too.
    got = run_onnx(hyp2onnx.to_onnx(model, dtype="float64", target_opset=15), X)
    reference = predict_reference(read_hyperdt(model), X)
    if kind.endswith("classifier"):
        for out in (got, reference):
            np.testing.assert_array_equal(out["label"], model.predict(X))
            np.testing.assert_array_equal(out["probabilities"], model.predict_proba(X))
    else:
        for out in (got, reference):
            np.testing.assert_array_equal(out["variable"][:, 0], model.predict(X))


def test_klein_threshold_cannot_route_boundary_rows_as_hyperdt() -> None:
    """Why the graph computes HyperDT's products: x_d/x_t < cot(theta) misroutes rows.

    For some split, no float64 threshold on the float64 Klein value x_d / x_t
    sends the boundary rows where HyperDT does.
    """
    model = _fit("tree_classifier")
    described = read_hyperdt(model)
    X = boundary_rows(model, seed=1)
    hyperdt_left = split_columns(described, X) < 0  # HyperDT's own test
    klein = X[:, described.columns_feature] / X[:, [described.timelike]]
    inseparable = 0
    for j in range(klein.shape[1]):
        k, left = klein[:, j], hyperdt_left[:, j]
        # A threshold exists iff every left row's value lies below every right row's.
        if left.any() and (~left).any() and k[left].max() >= k[~left].min():
            inseparable += 1
    assert inseparable > 0
    report = hyp2onnx.verify(model, hyp2onnx.to_onnx(model, dtype="float64"), X)
    assert report.label_mismatches == 0


def test_float32_graph_matches_hyperdt_on_float32_points() -> None:
    model = _fit("forest_classifier")
    X = boundary_rows(model, seed=1).astype(np.float32)
    report = hyp2onnx.verify(model, hyp2onnx.to_onnx(model, dtype="float32"), X)
    assert report.ok and report.label_mismatches == 0


@pytest.mark.parametrize("timelike_dim", [-1, 1])
def test_timelike_column_elsewhere(timelike_dim: int) -> None:
    model = _fit("tree_classifier", timelike_dim=timelike_dim)
    X = np.vstack([_data(3, 200, timelike_dim)[0], boundary_rows(model, seed=1)])
    onnx_model = hyp2onnx.to_onnx(model)
    assert hyp2onnx.read_metadata(onnx_model)["timelike_dim"] == timelike_dim % 3
    assert hyp2onnx.verify(model, onnx_model, X.astype(np.float32)).ok


def test_sparse_minkowski_dot_product() -> None:
    model = _fit("tree_classifier", dot_product="sparse_minkowski", skip_hyperboloid_check=True)
    X = np.vstack([_data(3, 200)[0], boundary_rows(model, seed=1)])
    report = hyp2onnx.verify(model, hyp2onnx.to_onnx(model, dtype="float64"), X)
    assert report.ok, report


def test_forest_label_is_hyperdts_vote_not_the_most_probable_class() -> None:
    """HyperDT's forest label is the mode of its trees' labels (smallest on a tie)."""
    X, y = _data(1, 120)
    rng = np.random.default_rng(1)  # noisy labels: the trees disagree
    y = np.where(rng.random(120) < 0.3, rng.integers(0, 4, 120), y)
    model = hyperdt_ensemble.HyperbolicRandomForestClassifier(
        n_estimators=6, max_depth=2, n_jobs=1, random_state=0
    ).fit(X, y)
    grid, _ = _data(9, 3000)
    got = run_onnx(hyp2onnx.to_onnx(model, dtype="float64"), grid)
    np.testing.assert_array_equal(got["label"], model.predict(grid))
    by_probability = model.classes_[np.argmax(model.predict_proba(grid), axis=1)]
    assert np.any(by_probability != model.predict(grid))  # so the vote is really reproduced


def test_metadata_and_single_leaf_tree() -> None:
    X, _ = _data(0, 40)
    model = hyperdt_tree.HyperbolicDecisionTreeClassifier(
        curvature=2.0, skip_hyperboloid_check=True
    )
    model.fit(X / np.sqrt(2.0), np.full(40, 3))  # one class: the root is a leaf
    onnx_model = hyp2onnx.to_onnx(model)
    meta = hyp2onnx.read_metadata(onnx_model)
    assert (meta["backend"], meta["input_geometry"], meta["curvature"]) == (
        "hyperdt",
        "hyperboloid",
        -2.0,
    )
    assert meta["estimator_class"] == "HyperbolicDecisionTreeClassifier"
    got = run_onnx(onnx_model, X)
    np.testing.assert_array_equal(got["label"], model.predict(X))


def test_refusals() -> None:
    X, y = _data(0, 60)
    with pytest.raises(UnsupportedModelError, match="not fitted"):
        hyp2onnx.to_onnx(hyperdt_tree.HyperbolicDecisionTreeClassifier())
    dense = hyperdt_tree.HyperbolicDecisionTreeClassifier(max_depth=2, dot_product="dense").fit(
        X, y
    )
    with pytest.raises(UnsupportedModelError, match="dot_product='sparse'"):
        hyp2onnx.to_onnx(dense)
    tree = hyperdt_tree.HyperbolicDecisionTreeClassifier(max_depth=2).fit(X, y)
    with pytest.raises(ValueError, match="compat"):
        hyp2onnx.to_onnx(tree, encoding="compat")
    with pytest.raises(ValueError, match="records its own geometry"):
        hyp2onnx.to_onnx(tree, input_geometry="hyperboloid")
    labels = np.array(["a", "b", "c", "d"])[y]
    forest = hyperdt_ensemble.HyperbolicRandomForestClassifier(
        n_estimators=2, max_depth=1, n_jobs=1, random_state=0
    ).fit(X, labels)
    with pytest.raises(UnsupportedModelError, match="non-numeric labels"):
        hyp2onnx.to_onnx(forest)
    voter = hyperdt_ensemble.HyperbolicRandomForestClassifier(
        n_estimators=2, max_depth=1, n_jobs=1, random_state=0
    ).fit(X, y > 1)
    with pytest.raises(TypeError):  # HyperDT itself cannot predict boolean labels
        voter.predict(X)
    with pytest.raises(UnsupportedModelError, match=r"boolean labels.*astype\(int\)"):
        hyp2onnx.to_onnx(voter)
    euclidean = hyperdt_tree.DecisionTreeClassifier(max_depth=1).fit(X, y)
    with pytest.raises(UnsupportedModelError):
        hyp2onnx.to_onnx(euclidean, input_geometry="hyperboloid")


def test_cli_converts_and_checks_a_hyperdt_pickle(tmp_path: Path) -> None:
    model = _fit("forest_regressor")
    joblib.dump(model, tmp_path / "hdt.pkl")
    np.save(
        tmp_path / "sample.npy", np.vstack([_data(4, 100)[0], boundary_rows(model, seed=1)[:300]])
    )
    done = cli_process("convert", tmp_path / "hdt.pkl", "--check", tmp_path / "sample.npy")
    assert done.returncode == 0, done.stdout + done.stderr
    meta = hyp2onnx.read_metadata(tmp_path / "hdt.onnx")
    assert meta["estimator_class"] == "HyperbolicRandomForestRegressor"
    done = cli_process(
        "convert", tmp_path / "hdt.pkl", "-o", tmp_path / "again.onnx", "--geometry", "poincare"
    )
    assert done.returncode == 2 and not (tmp_path / "again.onnx").exists()
    assert "records its own" in done.stderr


def test_boundary_rows_lie_at_the_splits() -> None:
    """Each unmoved row is on the hyperboloid and on its split's boundary in Klein terms."""
    model = _fit("tree_classifier")
    described = read_hyperdt(model)
    X = boundary_rows(model, per_split=3, ulps_feature=0, ulps_time=0)
    hyp2onnx.geometry.check_points(X, "hyperboloid", -1.0, 0, rtol=1e-12)
    cot = described.columns_cos / described.columns_sin
    crossing = np.flatnonzero(np.abs(cot) < 1)
    assert X.shape[0] == 3 * crossing.size
    for i, j in enumerate(crossing):
        k = X[3 * i : 3 * i + 3, described.columns_feature[j]] / X[3 * i : 3 * i + 3, 0]
        np.testing.assert_allclose(k, cot[j], rtol=1e-14)


def test_forest_whose_trees_missed_a_class() -> None:
    """HyperDT's predict_proba fails when a bootstrap sample lacks a class; the graph does not."""
    X, y = _data(5, 60)
    y = np.where(np.arange(60) == 0, 9, y)  # class 9: one row, missed by some bootstrap samples
    model = hyperdt_ensemble.HyperbolicRandomForestClassifier(
        n_estimators=6, max_depth=2, n_jobs=1, random_state=0
    ).fit(X, y)
    assert any(len(t.classes_) < len(model.classes_) for t in model.trees)
    with pytest.raises(ValueError):
        model.predict_proba(X)
    rows = np.vstack([X, boundary_rows(model)])
    got = run_onnx(hyp2onnx.to_onnx(model, dtype="float64"), rows)
    np.testing.assert_array_equal(got["label"], model.predict(rows))
    # Each tree's own predict_proba, in the forest's columns, averaged in tree order.
    expected = np.zeros((len(model.trees), rows.shape[0], model.classes_.size))
    for i, tree in enumerate(model.trees):
        expected[i][:, np.searchsorted(model.classes_, tree.classes_)] = tree.predict_proba(rows)
    np.testing.assert_array_equal(got["probabilities"], expected.mean(axis=0))
    assert hyp2onnx.verify(model, hyp2onnx.to_onnx(model), rows).ok
