"""The exported graph against the Python model: numbers, not smoke.

Exact encoding: labels identical and probabilities/values bit-identical for
scikit-learn models, for float32 and float64 input, on random rows, rows on
and one float step either side of every threshold, far points and exact
vote ties. Compat encoding: float32 routing exact, float32 sums, labels may
differ only where the model's top two probabilities tie.
"""

from __future__ import annotations

import os
import warnings

import _oracle as oracle
import numpy as np
import onnx
import pytest
from _data import all_nodes, assert_graph_answers_as_model, labels, points, targets
from sklearn.ensemble import ExtraTreesClassifier, RandomForestRegressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.export import read_metadata, save_onnx, to_onnx
from hyp2onnx.verification import reference_evaluator, run_onnx

GEOMETRIES = ["hyperboloid", "poincare", "klein"]


def _estimators():
    return {
        "tree_clf": (h.HyperbolicDecisionTreeClassifier(max_depth=6, random_state=0), "clf"),
        "tree_reg": (h.HyperbolicDecisionTreeRegressor(max_depth=6, random_state=0), "reg"),
        "forest_clf": (
            h.HyperbolicRandomForestClassifier(n_estimators=7, max_depth=6, random_state=0),
            "clf",
        ),
        "forest_reg": (
            h.HyperbolicRandomForestRegressor(n_estimators=5, max_depth=6, random_state=0),
            "reg",
        ),
        "extra_clf": (
            h.HyperbolicEstimator(ExtraTreesClassifier(n_estimators=4, random_state=0)),
            "clf",
        ),
    }


def adversarial_klein(model, k_base: np.ndarray, *, steps: int = 2) -> np.ndarray:
    """Klein rows reaching each split with its tested value on the threshold and on the
    threshold's float32 and float64 neighbours (``_oracle.probe_rows``, both precisions)."""
    native = oracle.native(model)
    return np.concatenate(
        [
            oracle.probe_rows(native, k_base, dtype, steps=steps).k
            for dtype in (np.float32, np.float64)
        ]
    )


def _assert_default(model, onx, X):
    """The default graph: labels exactly the model's, values within the bound it records
    (a forest of more than two classes gives its probabilities rounded once to float32)."""
    got = run_onnx(onx, X)
    Xt = X.astype(np.float32 if onx.graph.input[0].type.tensor_type.elem_type == 1 else np.float64)
    np.testing.assert_array_equal(got["label"], model.predict(Xt))
    report = h.verify(model, onx, X)
    assert report.ok and report.label_mismatches == 0, report


def _fit(est, kind, X, k, *, n_classes=3, seed=0):
    y = labels(k, n_classes, seed=seed) if kind == "clf" else targets(k, seed=seed)
    return est.fit(X, y)


@pytest.mark.parametrize("geometry_name", GEOMETRIES)
@pytest.mark.parametrize("name", list(_estimators()))
def test_exact_parity_random_and_adversarial(name, geometry_name):
    est, kind = _estimators()[name]
    est.set_params(input_geometry=geometry_name, curvature=-2.5)
    X, k = points(400, 3, geometry_name, curvature=-2.5, seed=3)
    model = _fit(est, kind, X, k)
    k_adv = adversarial_klein(model, k)
    X_adv = geometry.from_klein(k_adv, geometry_name, -2.5)
    # Far points: radius 12 (float32 Klein input cannot hold more than ~8: |k| rounds to 1).
    far = 7.0 if geometry_name == "klein" else 12.0
    X_far, _ = points(200, 3, geometry_name, curvature=-2.5, seed=4, max_radius=far)
    X_all = np.concatenate([X, X_adv, X_far])
    for dtype in ("float32", "float64"):
        onx = to_onnx(model, dtype=dtype, encoding="exact")  # values bit for bit
        assert_graph_answers_as_model(model, onx, X_all)
        # verify runs the model on the data as held: the float32 graph's user holds float32.
        assert h.verify(model, onx, X_all.astype(dtype)).ok
        # The default graph: the same labels, values within its recorded bound.
        assert h.verify(model, to_onnx(model, dtype=dtype), X_all.astype(dtype)).ok


@pytest.mark.parametrize("geometry_name", GEOMETRIES)
def test_adversarial_rows_reach_every_split_at_its_threshold(geometry_name):
    """Probe rows reach every split on both sides of its flip point in Klein input;
    mapped to another geometry they land within rounding of it, and still route exactly."""
    X, k = points(300, 2, geometry_name, seed=5)
    model = h.HyperbolicDecisionTreeClassifier(max_depth=5, input_geometry=geometry_name).fit(
        X, labels(k, 3)
    )
    native = oracle.native(model)
    k_seen = model.to_klein(X)
    for dtype in ("float32", "float64"):
        probes = oracle.probe_rows(native, k_seen, np.dtype(dtype).type)
        assert oracle.probe_coverage(native, probes) == 1.0
        X_adv = geometry.from_klein(probes.k, geometry_name)
        if geometry_name == "klein":  # unchanged: the rows sit on the thresholds
            np.testing.assert_array_equal(model.to_klein(X_adv.astype(dtype)), probes.k)
        else:  # within a few float steps of them
            np.testing.assert_allclose(model.to_klein(X_adv), probes.k, rtol=0, atol=1e-15)
        assert_graph_answers_as_model(model, to_onnx(model, dtype=dtype), X_adv)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("encoding", ["exact", "standard", "compat"])
def test_exact_vote_ties_keep_labels(encoding, dtype):
    """Tiny fully grown forests tie on many rows; argmax must break ties like numpy.

    compat sums in float32, so there only the ties themselves may break otherwise.
    """
    X, k = points(300, 2, seed=6)
    y = labels(k, 2, noise=0.4)
    model = h.HyperbolicRandomForestClassifier(n_estimators=2, random_state=1).fit(X, y)
    X_test, _ = points(3000, 2, seed=7)
    proba = model.predict_proba(X_test.astype(dtype))
    tied = proba[:, 0] == proba[:, 1]
    assert np.sum(tied) > 50  # the test needs ties to mean anything
    onx = to_onnx(model, encoding=encoding, dtype=dtype)
    if encoding != "compat":
        assert_graph_answers_as_model(model, onx, X_test)
        return
    got = run_onnx(onx, X_test)
    np.testing.assert_allclose(got["probabilities"], proba, rtol=0, atol=1e-7)
    np.testing.assert_array_equal(got["label"][~tied], model.predict(X_test.astype(dtype))[~tied])


@pytest.mark.parametrize("timelike_dim", [0, 2, -1])
def test_timelike_dim_and_curvature(timelike_dim):
    X, k = points(300, 3, curvature=-0.3, timelike_dim=timelike_dim, seed=8)
    model = h.HyperbolicRandomForestRegressor(
        n_estimators=3, max_depth=5, curvature=-0.3, timelike_dim=timelike_dim, random_state=0
    ).fit(X, targets(k))
    for dtype in ("float32", "float64"):
        assert_graph_answers_as_model(model, to_onnx(model, dtype=dtype), X)


@pytest.mark.parametrize("name", ["forest_clf", "forest_reg", "tree_clf"])
def test_compat_routes_exactly_and_differs_only_at_ties(name):
    est, kind = _estimators()[name]
    X, k = points(400, 3, seed=9)
    model = _fit(est, kind, X, k)
    X_all = np.concatenate([X, geometry.from_klein(adversarial_klein(model, k), "hyperboloid")])
    onx = to_onnx(model, encoding="compat")
    got = run_onnx(onx, X_all)
    X32 = X_all.astype(np.float32)
    if kind == "reg":
        np.testing.assert_allclose(got["variable"][:, 0], model.predict(X32), rtol=1e-6, atol=1e-6)
    else:
        proba = model.predict_proba(X32)
        np.testing.assert_allclose(got["probabilities"], proba, atol=1e-6)
        top2 = np.sort(proba, axis=1)[:, -2:]
        differs = got["label"] != model.predict(X32)
        assert np.all(top2[differs, 1] - top2[differs, 0] < 1e-6)


def test_reference_evaluator_agrees_with_onnxruntime():
    X, k = points(150, 3, "poincare", curvature=-0.7, seed=10)
    for est, kind in _estimators().values():
        est.set_params(input_geometry="poincare", curvature=-0.7)
        model = _fit(est, kind, X, k)
        for encoding in ("exact", "compat"):
            onx = to_onnx(model, encoding=encoding)
            ort_out = run_onnx(onx, X)
            ref_out = reference_evaluator(onx).run(None, {"X": X.astype(np.float32)})
            for name, ref in zip([o.name for o in onx.graph.output], ref_out, strict=True):
                if encoding == "exact":
                    np.testing.assert_array_equal(ref, ort_out[name])
                else:
                    np.testing.assert_allclose(ref, ort_out[name], atol=1e-6)


def test_graph_reads_only_used_features_and_checks():
    X, k = points(400, 16, seed=11)
    model = h.HyperbolicDecisionTreeClassifier(max_depth=2).fit(X, labels(k, 3))
    onx = to_onnx(model)
    onnx.checker.check_model(onx, full_check=True)
    gathers = [n for n in onx.graph.node if n.name == "klein/Gather"]
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in onx.graph.initializer}
    used = model.to_ir().ensemble.used_features()
    np.testing.assert_array_equal(inits[gathers[0].input[1]], used + 1)  # spacelike columns
    assert len(used) <= 3
    assert all(n.name.split("/")[0] in {"klein", "trees", "output"} for n in onx.graph.node)


def test_export_is_deterministic_and_carries_metadata(tmp_path):
    X, k = points(300, 2, seed=12)
    y = np.array(["leaf", "root", "mid"])[labels(k, 3)]
    model = h.HyperbolicRandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    first, second = to_onnx(model), to_onnx(model)
    assert first.SerializeToString() == second.SerializeToString()
    meta = read_metadata(first)
    assert meta["input_geometry"] == "hyperboloid" and meta["curvature"] == -1.0
    assert meta["classes"] == ["leaf", "mid", "root"]
    assert meta["backend"] == "sklearn" and meta["encoding"] == "fast"  # the default
    assert meta["value_bound"] >= 0.0 and meta["tie_margin"] >= 0.0
    assert meta["n_features_in"] == 3 and meta["n_trees"] == 3
    assert "hyperboloid" in meta["doc_string"]
    path = tmp_path / "m.onnx"
    save_onnx(model, path)
    assert read_metadata(path)["estimator_class"] == "HyperbolicRandomForestClassifier"
    with pytest.raises(FileExistsError):
        save_onnx(model, path, overwrite=False)
    assert [p.name for p in tmp_path.iterdir()] == ["m.onnx"]  # no temporary file left
    umask = os.umask(0o022)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's owner-only 0600
    _assert_default(model, onnx.load(path), X)
    assert_graph_answers_as_model(model, to_onnx(model, encoding="exact"), X)


def test_empty_batch_and_single_row():
    X, k = points(300, 2, seed=13)
    model = h.HyperbolicRandomForestClassifier(n_estimators=3, random_state=0).fit(X, labels(k))
    got = run_onnx(to_onnx(model), X[:0])
    assert got["label"].shape == (0,) and got["probabilities"].shape == (0, 3)
    _assert_default(model, to_onnx(model), X[:1])
    assert_graph_answers_as_model(model, to_onnx(model, encoding="exact"), X[:1])


def test_large_batch_crosses_row_blocks():
    X, k = points(500, 3, seed=14)
    model = h.HyperbolicRandomForestClassifier(n_estimators=5, random_state=0).fit(X, labels(k))
    X_big, _ = points(5000, 3, seed=15)  # several blocks of CHUNK_ROWS and a partial one
    assert_graph_answers_as_model(model, to_onnx(model, encoding="exact"), X_big)
    _assert_default(model, to_onnx(model), X_big)


@pytest.mark.parametrize("regressor", [False, True])
@pytest.mark.parametrize("short_path", [True, False])
def test_the_tree_operator_runs_inside_the_row_blocks(regressor, short_path, monkeypatch):
    """The operator sits in the row-block Loop: a whole-batch call would make
    onnxruntime keep a score per tree, row and thread (2 GB for 500k rows at 2
    threads). Small models also give short batches an If branch with their own
    copy; larger ones keep a single copy of the trees."""
    from hyp2onnx.emit import strategy, trees

    if not short_path:
        monkeypatch.setattr(strategy, "SHORT_PATH_MAX_NODES", 0)
    monkeypatch.setattr(trees, "OPERATOR_BLOCK_ROWS", 2048)  # 2100 rows: two operator blocks
    X, k = points(400, 3, seed=17)
    cls = h.HyperbolicRandomForestRegressor if regressor else h.HyperbolicRandomForestClassifier
    model = cls(n_estimators=4, max_depth=4, random_state=0).fit(
        X, targets(k) if regressor else labels(k)
    )
    # The exact graph keeps a score per tree; the fast one's operator adds the trees itself.
    onx = to_onnx(model, encoding="exact")
    top = [n.op_type for n in onx.graph.node]
    inside = [n.op_type for n in all_nodes(onx.graph) if n.op_type.startswith("TreeEnsemble")]
    assert not any(op.startswith("TreeEnsemble") for op in top)
    assert ("If" in top, "Loop" in top, len(inside)) == (
        (True, False, 2) if short_path else (False, True, 1)
    )
    loops = [n for n in all_nodes(onx.graph) if n.op_type == "Loop"]
    assert len(loops) == 2  # the operator's blocks, and the sums' blocks inside each
    for n in (1, 1024, 1025, 2100):  # one row, one full block, blocks and a partial one
        X_test, _ = points(n, 3, seed=18)
        assert_graph_answers_as_model(model, onx, X_test)
    assert all(v.shape[0] == 0 for v in run_onnx(onx, X[:0]).values())


def test_plain_klein_model_needs_geometry():
    _, k = points(300, 2, seed=16)
    plain = DecisionTreeClassifier(max_depth=4).fit(k, labels(k))
    with pytest.raises(ValueError, match="input_geometry"):
        to_onnx(plain)
    with pytest.warns(UserWarning, match="Euclidean"):
        onx = to_onnx(plain, input_geometry="poincare", curvature=-4.0)
    P = geometry.from_klein(k, "poincare", -4.0)
    got = run_onnx(onx, P)
    np.testing.assert_array_equal(
        got["label"], plain.predict(geometry.to_klein(P.astype(np.float32), "poincare", -4.0))
    )
    assert h.verify(plain, onx, P).ok


def test_bad_requests_raise_clear_errors():
    X, k = points(100, 2, seed=17)
    with pytest.raises(NotFittedError):
        to_onnx(h.HyperbolicDecisionTreeClassifier())
    with pytest.raises(h.UnsupportedModelError, match="Supported"):
        to_onnx(LogisticRegression().fit(k, labels(k)), input_geometry="klein")
    model = h.HyperbolicDecisionTreeClassifier().fit(X, labels(k))
    with pytest.raises(ValueError, match="dtype"):
        to_onnx(model, dtype="float16")
    with pytest.raises(ValueError, match="encoding"):
        to_onnx(model, encoding="fastest")
    with pytest.raises(ValueError, match="contradicts"):
        to_onnx(model, input_geometry="klein")
    with pytest.raises(ValueError, match="shape"):
        h.verify(model, to_onnx(model), X[:, :2])


def test_skl2onnx_converts_estimators_and_pipelines():
    import skl2onnx

    h.register_skl2onnx_converters()  # the documented call; import hyp2onnx does not
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import FunctionTransformer

    X, k = points(400, 3, seed=18)
    model = h.HyperbolicRandomForestClassifier(n_estimators=4, random_state=0).fit(X, labels(k))
    onx = skl2onnx.to_onnx(model, X[:1].astype(np.float32), options={id(model): {"zipmap": False}})
    assert_graph_answers_as_model(model, onx, X)
    compat = skl2onnx.to_onnx(
        model,
        X[:1].astype(np.float32),
        target_opset={"": 17, "ai.onnx.ml": 3},
        options={id(model): {"encoding": "compat", "zipmap": False}},
    )
    assert np.array_equal(run_onnx(compat, X)["label"], model.predict(X.astype(np.float32)))
    pipe = Pipeline(
        [
            ("identity", FunctionTransformer()),
            ("forest", h.HyperbolicRandomForestRegressor(n_estimators=3, random_state=0)),
        ]
    ).fit(X, targets(k))
    onx = skl2onnx.to_onnx(pipe, X[:1])
    np.testing.assert_array_equal(run_onnx(onx, X)["variable"][:, 0], pipe.predict(X))


def test_sklearn_forest_parity_matches_skl2onnx_routing():
    """skl2onnx rounds thresholds correctly for float32: our compat graph must agree with it."""
    import skl2onnx

    X, k = points(500, 4, "klein", seed=19)
    model = h.HyperbolicRandomForestRegressor(
        input_geometry="klein", n_estimators=5, random_state=0
    ).fit(X, targets(k))
    theirs = skl2onnx.to_onnx(model.estimator_, k[:1].astype(np.float32))
    ours = run_onnx(to_onnx(model, encoding="compat"), X)["variable"]
    np.testing.assert_allclose(ours, run_onnx(theirs, k)["variable"], rtol=1e-6, atol=1e-6)


def test_forest_regressor_n_jobs_is_not_needed_for_exactness():
    """Parity is checked against n_jobs=1 sums (tree order), which the graph reproduces."""
    _, k = points(300, 2, seed=20)
    forest = RandomForestRegressor(n_estimators=20, random_state=0, n_jobs=1).fit(k, targets(k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        onx = to_onnx(forest, input_geometry="klein", dtype="float64", encoding="exact")
    np.testing.assert_array_equal(run_onnx(onx, k)["variable"][:, 0], forest.predict(k))


def test_verify_compares_with_tree_order_sums_for_threaded_forests():
    """A forest with n_jobs=2 adds in thread order; verify uses tree order and restores n_jobs."""
    X, k = points(600, 3, seed=24)
    model = h.HyperbolicRandomForestClassifier(n_estimators=60, n_jobs=2, random_state=0)
    model.fit(X, labels(k, 4, noise=0.3))
    report = h.verify(model, to_onnx(model, encoding="exact"), X)
    assert report.ok and report.max_abs_diff["probabilities"] == 0.0
    assert model.estimator_.n_jobs == 2
    assert h.verify(model, to_onnx(model), X).ok  # the default: within its recorded bound


def test_verify_report_raises_on_disagreement():
    X, k = points(200, 2, seed=25)
    model = h.HyperbolicDecisionTreeRegressor(max_depth=4).fit(X, targets(k))
    onx = to_onnx(model, encoding="compat")  # float32 sums: differences of about 1e-7
    report = h.verify(model, onx, X)
    assert report.raise_if_failed() is report
    strict = h.verify(model, onx, X, atol=0.0)
    assert strict.max_abs_diff["variable"] > 0 and not strict.ok
    with pytest.raises(h.VerificationError, match="MISMATCH"):
        strict.raise_if_failed()


def test_skl2onnx_needs_the_documented_call_in_a_fresh_interpreter():
    """``import hyp2onnx`` registers nothing; ``register_skl2onnx_converters`` does."""
    import subprocess
    import sys

    code = (
        "import numpy as np, skl2onnx, hyp2onnx as h\n"
        "from hyp2onnx.datasets import make_wrapped_normal_mixture\n"
        "X, y = make_wrapped_normal_mixture(60, 2, 2, random_state=0)\n"
        "m = h.HyperbolicDecisionTreeClassifier(max_depth=2).fit(X, y)\n"
        "try:\n"
        "    skl2onnx.to_onnx(m, X[:1].astype(np.float32)); print('converted before')\n"
        "except Exception as exc:\n"
        "    print('refused before:', type(exc).__name__)\n"
        "print(len(h.register_skl2onnx_converters()) >= 10)\n"
        "skl2onnx.to_onnx(m, X[:1].astype(np.float32)); print('converted after')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "refused before: MissingShapeCalculator",
        "True",
        "converted after",
    ]
