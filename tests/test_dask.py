"""hyp2onnx.dask on a real LocalCluster (2 worker processes, 1 thread each).

The oracle for training is the single-machine correction
(:func:`hyp2onnx.ensemble_thresholds.correct_trees`) of the very booster the
cluster trained, on all its training rows gathered in this process: the
distributed thresholds must equal it bit for bit. Data: Klein values on a
grid with one-ulp nudges (ties and near-ties at every threshold), partitioned
unevenly, with zero-weight rows. Scoring is checked against onnxruntime run
on the whole array in this process.
"""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

pytest.importorskip("distributed", reason="the 'dask' extra is not installed")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import hyp2onnx  # noqa: E402
import hyp2onnx.dask as hdask  # noqa: E402
from _boosting_data import as_points, klein_with_ties, labels  # noqa: E402
from hyp2onnx import _scoring  # noqa: E402
from hyp2onnx.ensemble_thresholds import correct_trees  # noqa: E402
from hyp2onnx.estimators import backend_for  # noqa: E402
from hyp2onnx.verify import run_onnx  # noqa: E402

CHUNKS = (700, 300, 1200, 800)  # uneven partitions, 3000 rows


@pytest.fixture(scope="module")
def client():
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster, Client(cluster) as c:
        yield c


def _data(task: str, seed: int = 3):
    k = klein_with_ties(sum(CHUNKS), 2, seed=seed)
    y = labels(k, task, seed=seed)
    if task == "multiclass":
        y = np.array(["setosa", "versicolor", "virginica"])[y]  # string labels
    w = np.where(np.random.default_rng(seed).random(k.shape[0]) < 0.1, 0.0, 1.0)
    return k, as_points(k, "hyperboloid"), y, w


def _native_params(name: str) -> dict:
    if "XGB" in name:
        return dict(n_estimators=8, max_depth=4, max_bin=16, n_jobs=1)
    return dict(n_estimators=8, num_leaves=9, min_child_samples=3, max_bin=16, verbose=-1)


CASES = [
    ("HyperbolicDaskXGBClassifier", "multiclass"),
    ("HyperbolicDaskXGBRegressor", "regression"),
    ("HyperbolicDaskLGBMClassifier", "binary"),
    ("HyperbolicDaskLGBMRegressor", "regression"),
]


def _train(name: str, task: str, client):
    k, X, y, w = _data(task)
    recorded = {}
    original = hdask.correct_from_bounds

    def record(trees, layout, bounds, **kwargs):
        recorded.update(trees=trees, bounds=bounds, kwargs=kwargs)
        recorded["result"] = original(trees, layout, bounds, **kwargs)
        return recorded["result"]

    hdask.correct_from_bounds = record
    try:
        model = getattr(hdask, name)(client=client, **_native_params(name))
        model.fit(
            da.from_array(X, chunks=(CHUNKS, -1)),
            da.from_array(y, chunks=(CHUNKS,)),
            sample_weight=da.from_array(w, chunks=(CHUNKS,)),
        )
    finally:
        hdask.correct_from_bounds = original
    return model, recorded, (k, X, y, w)


@pytest.fixture(scope="module")
def models(client):
    """Each model trained once, when a test first asks for it."""
    cache = {}

    def get(name: str):
        if name not in cache:
            cache[name] = _train(name, dict(CASES)[name], client)
        return cache[name]

    return get


@pytest.fixture(params=[c[0] for c in CASES])
def trained(request, models):
    return models(request.param)


def test_thresholds_bit_identical_to_the_single_machine_correction(trained):
    model, recorded, (_, X, _, w) = trained
    backend = backend_for(model.estimator_)
    rows = np.flatnonzero(w > 0)
    want, want_report = correct_trees(
        recorded["trees"],
        np.ascontiguousarray(model.to_klein(X), dtype=backend.compare_dtype),  # the rows it saw
        [rows] * len(recorded["trees"]),
        op=backend.op,
        threshold_dtype=backend.threshold_dtype,
        midpoint="einstein",
    )
    got, report = recorded["result"]
    assert report == want_report == model.correction_
    assert report.n_moved > 0
    stored = backend.read_trees(model.estimator_)  # the booster holds them
    for g, w_, s in zip(got, want, stored, strict=True):
        np.testing.assert_array_equal(g.view(np.int64), w_.view(np.int64))
        internal = s.feature >= 0
        np.testing.assert_array_equal(s.threshold[internal], w_[internal])
    # What reached the driver: 2 * leaves * split features, in the comparison dtype.
    bounds = recorded["bounds"]
    assert bounds.low.dtype == np.dtype(backend.compare_dtype)
    assert bounds.low.shape[0] == sum(int((t.feature < 0).sum()) for t in recorded["trees"])


def test_training_rows_keep_their_side(trained):
    """The corrected booster routes its training rows as before: training predictions agree
    with the leaf values' own reading of them through the exported graph."""
    model, _, (_, X, y, w) = trained
    graph = hyp2onnx.to_onnx(model, dtype="float64")
    report = hyp2onnx.verify(model, graph, X)
    assert report.ok, report
    if hasattr(model, "classes_"):
        assert set(model.classes_) == set(np.unique(y))


def test_dask_and_numpy_predictions_agree(trained, client):
    model, _, (_, X, _, _) = trained
    Xd = da.from_array(X, chunks=(CHUNKS, -1))
    got = model.predict(Xd)
    assert isinstance(got, da.Array)
    np.testing.assert_array_equal(got.compute(), model.predict(X))
    if hasattr(model, "predict_proba"):
        proba = model.predict_proba(Xd)
        assert isinstance(proba, da.Array) and proba.shape[1] == len(model.classes_)
        np.testing.assert_array_equal(proba.compute(), model.predict_proba(X))
    klein = model.to_klein(Xd)
    assert isinstance(klein, da.Array)
    np.testing.assert_array_equal(klein.compute(), model.to_klein(X))


def test_pickle_clone_and_convert(trained, client, tmp_path):
    from sklearn.base import clone

    from hyp2onnx.cli import main

    model, _, (_, X, _, _) = trained
    assert model.get_params()["client"] is client
    twin = clone(model)
    assert twin.client is client and twin.get_params()["n_estimators"] == 8
    assert not hasattr(twin, "estimator_")
    loaded = pickle.loads(pickle.dumps(model))
    assert loaded.client is None and model.client is client
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(model))
    np.save(tmp_path / "X.npy", X[:500])
    out = tmp_path / "model.onnx"
    assert main(["convert", str(path), "-o", str(out), "--check", str(tmp_path / "X.npy")]) == 0
    assert hyp2onnx.verify(model, out, X).ok


def test_dataframe_input_records_feature_names(client):
    k, X, y, _ = _data("binary", seed=4)
    columns = ["t", "a", "b"]
    frame = dd.from_pandas(pd.DataFrame(X, columns=columns), npartitions=3)
    target = dd.from_pandas(pd.Series(y), npartitions=3)
    model = hdask.HyperbolicDaskXGBClassifier(client=client, **_native_params("XGB"))
    model.fit(frame, target)
    assert model.n_features_in_ == 3 and list(model.feature_names_in_) == columns
    got = model.predict(frame).compute()
    np.testing.assert_array_equal(got, model.predict(pd.DataFrame(X, columns=columns)))


def test_early_stopping_on_a_hyperbolic_eval_set(client):
    k, X, y, _ = _data("binary", seed=5)
    Xd, yd = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    model = hdask.HyperbolicDaskXGBClassifier(
        client=client, n_estimators=40, max_depth=3, early_stopping_rounds=2, n_jobs=1
    )
    noise = np.random.default_rng(0).integers(0, 2, 1000)  # no signal: the eval loss soon rises
    model.fit(Xd, yd, eval_set=[(Xd[:1000], da.from_array(noise, chunks=1000))], verbose=False)
    assert model.estimator_.best_iteration < 39
    assert hyp2onnx.verify(model, hyp2onnx.to_onnx(model), X).ok


def test_bad_input_is_refused(client):
    k, X, y, _ = _data("binary")
    model = hdask.HyperbolicDaskLGBMClassifier(client=client, n_estimators=2, verbose=-1)
    with pytest.raises(TypeError, match="dask array or dask DataFrame"):
        model.fit(X, y)
    with pytest.raises(ValueError, match="rows"):
        model.fit(da.from_array(X, chunks=1000), da.from_array(y[:-1], chunks=1000))
    off = X.copy()
    off[5, 0] = 0.5  # off the hyperboloid
    with pytest.raises(hyp2onnx.InvalidPointError):
        model.fit(da.from_array(off, chunks=1000), da.from_array(y, chunks=1000))
    with pytest.raises(hyp2onnx.UnsupportedModelError, match="zero_as_missing"):
        hdask.HyperbolicDaskLGBMClassifier(client=client, zero_as_missing=True).fit(
            da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
        )
    # Each worker holds one class only (partitions pinned to workers): LightGBM's
    # per-worker label encoding would disagree.
    order = np.argsort(y, kind="stable")
    half = X.shape[0] // 2
    pinned = [
        client.persist((da.from_array(X[order][part]), da.from_array(y[order][part])), workers=w)
        for part, w in zip([slice(None, half), slice(half, None)], client.scheduler_info()["workers"])
    ]
    with pytest.raises(ValueError, match="every class"):
        hdask.HyperbolicDaskLGBMClassifier(client=client, n_estimators=2, verbose=-1).fit(
            da.concatenate([p[0] for p in pinned]), da.concatenate([p[1] for p in pinned])
        )


def test_missing_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"hyp2onnx\[dask\]"):
        hdask._dask()


# -- scoring exported graphs ---------------------------------------------------------------


@pytest.fixture(params=["HyperbolicDaskXGBClassifier", "HyperbolicDaskLGBMRegressor"])
def graph(request, models):
    model, _, (_, X, _, _) = models(request.param)
    return hyp2onnx.to_onnx(model), X


def test_predict_array_one_session_per_worker(graph, client):
    onnx_model, X = graph
    before = client.run(_scoring.sessions_created)
    out = hdask.predict(onnx_model, da.from_array(X, chunks=250))  # 12 partitions
    computed = dask.compute(out)[0]
    want = run_onnx(onnx_model, X)
    assert set(computed) == set(want)
    for name, value in want.items():
        assert isinstance(out[name], da.Array)
        np.testing.assert_array_equal(computed[name], value)
    dask.compute(out)  # again: the sessions are reused
    after = client.run(_scoring.sessions_created)
    created = [after[w] - before[w] for w in after]
    assert all(c <= 1 for c in created) and sum(created) >= 1


def test_predict_dataframe_appends_columns(graph, client):
    onnx_model, X = graph
    spec = _scoring.OutputSpec.of(onnx_model.SerializeToString())
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    frame["id"] = np.arange(X.shape[0])
    ddf = dd.from_pandas(frame, npartitions=4)
    points = [f"x{i}" for i in range(X.shape[1])]
    scored = hdask.predict(onnx_model, ddf, columns=points).compute()
    want = run_onnx(onnx_model, X)
    np.testing.assert_array_equal(scored["id"], frame["id"])
    for out, cols in spec.column_names().items():
        value = want[out].reshape(X.shape[0], -1)
        for i, col in enumerate(cols):
            np.testing.assert_array_equal(scored[col].to_numpy(), value[:, i])
    first = next(iter(spec.column_names().values()))[0]
    with pytest.raises(ValueError, match="output_prefix"):
        hdask.predict(onnx_model, ddf.rename(columns={"id": first}), columns=points)
    prefixed = hdask.predict(onnx_model, ddf, columns=points, output_prefix="p_")
    assert f"p_{first}" in prefixed.columns
    with pytest.raises(ValueError, match="graph takes"):
        hdask.predict(onnx_model, ddf, columns=points[:-1])


def test_predict_refuses_foreign_graphs_and_widths(graph):
    onnx_model, X = graph
    with pytest.raises(ValueError, match="graph takes"):
        hdask.predict(onnx_model, da.from_array(X[:, :-1], chunks=500))
    with pytest.raises(TypeError, match="ModelProto"):
        hdask.predict(42, da.from_array(X, chunks=500))
    stripped = onnx_model.__class__()
    stripped.CopyFrom(onnx_model)
    del stripped.metadata_props[:]
    with pytest.raises(ValueError, match="metadata"):
        hdask.predict(stripped, da.from_array(X, chunks=500))


def test_forests_train_through_joblibs_dask_backend(client):
    """The documented route for scikit-learn forests: joblib's Dask backend grows the
    trees on the workers; the correction then runs here, as for any forest."""
    import joblib

    k, X, y, _ = _data("binary", seed=6)
    with joblib.parallel_backend("dask"):
        forest = hyp2onnx.HyperbolicRandomForestClassifier(
            n_estimators=6, max_depth=4, random_state=0, n_jobs=2
        ).fit(X, y)
    same = hyp2onnx.HyperbolicRandomForestClassifier(
        n_estimators=6, max_depth=4, random_state=0, n_jobs=1
    ).fit(X, y)
    for grown, local in zip(forest.estimator_.estimators_, same.estimator_.estimators_):
        np.testing.assert_array_equal(grown.tree_.threshold, local.tree_.threshold)
        np.testing.assert_array_equal(grown.tree_.value, local.tree_.value)
