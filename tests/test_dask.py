"""hyp2onnx.dask on a real LocalCluster (2 worker processes, 1 thread each).

The oracle for training is the single-machine estimator with
``tree_space="klein"`` correcting the very booster the cluster trained, on
all its training rows gathered in this process: the distributed thresholds
must equal its thresholds bit for bit. Data: Klein values on a
grid with one-ulp nudges (ties and near-ties at every threshold), partitioned
unevenly, with zero-weight rows. Scoring is checked against onnxruntime run
on the whole array in this process, on one thread as the workers run.
"""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import warnings

import numpy as np
import onnx
import pytest

pytest.importorskip("distributed", reason="the 'dask' extra is not installed")

import dask
import dask.array as da
import dask.dataframe as dd
import pandas as pd
from _boosting_data import as_points, klein_with_ties, labels
from test_far import DIRECTION_D8, klein, ray, session, threshold_rows

import hyp2onnx
import hyp2onnx.dask as hdask
from hyp2onnx.correction import _correct as _correction
from hyp2onnx.correction.summaries import summarise
from hyp2onnx.correction.tree_space import TreeSpace
from hyp2onnx.distributed import _scoring
from hyp2onnx.estimators import backend_for
from hyp2onnx.verification import run_onnx

CHUNKS = (700, 300, 1200, 800)  # uneven partitions, 3000 rows
#: The workers' sessions run on one thread (predict's default). The default (fast)
#: graph adds the trees in the order onnxruntime's threads take them, so the oracle
#: runs on one thread too: then every value must agree bit for bit, in any batch.
ONE_THREAD = 1


def _data(task: str, seed: int = 3):
    k = klein_with_ties(sum(CHUNKS), 2, seed=seed)
    y = labels(k, task, seed=seed)
    if task == "multiclass":
        y = np.array(["setosa", "versicolor", "virginica"])[y]  # string labels
    w = np.where(np.random.default_rng(seed).random(k.shape[0]) < 0.1, 0.0, 1.0)
    return k, as_points(k, "hyperboloid"), y, w


def _held(graph, X):
    """X as the user of ``graph`` holds it: in the graph's input type.

    verify runs the model on the data as held. These points lie one float32 ulp
    apart at the thresholds, which the cast to float32 moves across them, so a
    float32 graph is checked on float32 points (as the parity tests do).
    """
    elem = graph.graph.input[0].type.tensor_type.elem_type
    return X.astype(np.float32 if elem == onnx.TensorProto.FLOAT else np.float64)


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
    original, correct = _correction.correct_from_summary, hdask._DaskModel._correct_distributed

    def record(trees, summary, **kwargs):
        recorded.update(trees=trees, summary=summary, kwargs=kwargs)
        recorded["result"] = original(trees, summary, **kwargs)
        return recorded["result"]

    def record_booster(self, backend, fitted, Xt, y, sample_weight, **context):
        # The booster as trained, and the labels it saw, before the correction.
        recorded.update(fitted=copy.deepcopy(fitted), y_train=y.compute())
        return correct(self, backend, fitted, Xt, y, sample_weight, **context)

    _correction.correct_from_summary = record
    hdask._DaskModel._correct_distributed = record_booster
    try:
        model = getattr(hdask, name)(client=client, **_native_params(name))
        model.fit(
            da.from_array(X, chunks=(CHUNKS, -1)),
            da.from_array(y, chunks=(CHUNKS,)),
            sample_weight=da.from_array(w, chunks=(CHUNKS,)),
        )
    finally:
        _correction.correct_from_summary = original
        hdask._DaskModel._correct_distributed = correct
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


def test_thresholds_bit_identical_to_the_single_machine_estimator(trained):
    model, recorded, (_, X, _, w) = trained
    name = type(model).__name__.replace("Dask", "")
    single = getattr(hyp2onnx, name)(tree_space="klein", **_native_params(name))
    fitted = recorded["fitted"]
    backend = backend_for(fitted)
    # What the single-machine fit does after training, on the same booster and rows.
    Xk = model.to_klein(X)
    space = TreeSpace.fit(Xk[w != 0], "klein", backend.compare_dtype, backend.zero_band)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # splits with one empty side warn in both
        (want_model, want_report, want_index, want_dtype), _ = single._correct(
            backend, fitted, space.transform(Xk), recorded["y_train"], w, space
        )
    assert model.correction_ == want_report
    assert model.correction_.n_moved > 0
    assert model.tree_space == "quantiles" and model.tree_space_ == "klein"  # near the origin
    assert model.split_index_ is None and want_index is None
    assert model.input_dtype_ == want_dtype
    got_report = recorded["result"][1]
    assert got_report.n_splits == want_report.n_splits
    stored = backend.read_trees(model.estimator_)  # the booster holds them
    want = backend.read_trees(want_model)
    for got_tree, want_tree in zip(stored, want, strict=True):
        np.testing.assert_array_equal(
            got_tree.threshold.view(np.int64), want_tree.threshold.view(np.int64)
        )
    for got_t, want_t in zip(recorded["result"][0], want, strict=True):
        internal = want_t.feature >= 0
        np.testing.assert_array_equal(
            got_t[internal].view(np.int64), want_t.threshold[internal].view(np.int64)
        )
    # What reached the driver: 4 numbers per split, in the comparison dtype.
    summary = recorded["summary"]
    assert summary.largest_left.dtype == np.dtype(backend.compare_dtype)
    n_splits = sum(int((t.feature >= 0).sum()) for t in recorded["trees"])
    assert summary.largest_left.shape == (n_splits,)
    assert summary.nbytes == 4 * n_splits * np.dtype(backend.compare_dtype).itemsize


@pytest.mark.parametrize(
    "sizes, rows_per_summary",
    [("known", hdask.ROWS_PER_SUMMARY), ("known", 500), ("unknown", 500)],
)
def test_summary_of_partitions_some_empty_or_one_sided(trained, client, sizes, rows_per_summary):
    """An empty partition, and tiny partitions whose rows reach few leaves, summarise on
    the cluster to the summary of all rows in one piece, whether a worker's partitions
    are searched together or in several groups, and when the partitions' lengths are
    unknown (as from a DataFrame)."""
    model, _, (_, X, y, w) = trained
    backend = backend_for(model.estimator_)
    Xk = model.to_klein(X)
    order = np.argsort(Xk[:, 0], kind="stable")  # partitions of neighbouring points
    Xk, y, w = Xk[order], y[order], w[order]
    chunks = (0, 3, 1, 600, 700, Xk.shape[0] - 1304)
    Xd, yd, wd = (
        da.from_array(Xk, chunks=(chunks, -1)),
        da.from_array(y, chunks=(chunks,)),
        da.from_array(w, chunks=(chunks,)),
    )
    if sizes == "unknown":
        Xd, yd, wd = (v.to_dask_dataframe().to_dask_array() for v in (Xd, yd, wd))
        assert np.isnan(Xd.chunks[0][0])
    summary = hdask.distributed_summary(
        client, backend, model.estimator_, Xd, yd, wd, rows_per_summary=rows_per_summary
    )
    trees = backend.read_trees(model.estimator_)
    want = summarise(trees, np.asarray(Xk[w > 0], dtype=backend.compare_dtype), backend.op)
    for name in ("largest_left", "smallest_right", "below", "above"):
        np.testing.assert_array_equal(getattr(summary, name), getattr(want, name))


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
    held = _held(hyp2onnx.to_onnx(model), X)
    np.save(tmp_path / "X.npy", held[:500])
    out = tmp_path / "model.onnx"
    assert main(["convert", str(path), "-o", str(out), "--check", str(tmp_path / "X.npy")]) == 0
    assert hyp2onnx.verify(model, out, held).ok


@pytest.mark.parametrize("name", ["HyperbolicDaskXGBClassifier", "HyperbolicDaskLGBMRegressor"])
def test_skops_file_of_a_dask_model_converts(models, name, tmp_path, capsys):
    """A Dask model saved with skops loads like its single-machine twin; other types stay
    refused."""
    import fractions

    import skops.io as sio

    from hyp2onnx.cli import main

    model, _, (_, X, _, _) = models(name)
    path = tmp_path / "model.skops"
    sio.dump(model, path)
    held = _held(hyp2onnx.to_onnx(model), X)
    np.save(tmp_path / "X.npy", held[:500])
    out = tmp_path / "model.onnx"
    assert main(["convert", str(path), "-o", str(out), "--check", str(tmp_path / "X.npy")]) == 0
    assert hyp2onnx.verify(model, out, held).ok
    sio.dump({"model": model, "odd": fractions.Fraction(1, 3)}, tmp_path / "odd.skops")
    assert main(["convert", str(tmp_path / "odd.skops"), "-o", str(tmp_path / "odd.onnx")]) == 2
    assert "fractions.Fraction" in capsys.readouterr().err


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
    graph = hyp2onnx.to_onnx(model)
    assert hyp2onnx.verify(model, graph, _held(graph, X)).ok


def test_bad_input_is_refused(client):
    k, X, y, _ = _data("binary")
    model = hdask.HyperbolicDaskLGBMClassifier(client=client, n_estimators=2, verbose=-1)
    assert model.tree_space == "quantiles"  # the default here; ranks would gather every value
    with pytest.raises(ValueError, match="not input_blocks"):
        hdask.HyperbolicDaskXGBRegressor(client=client, input_blocks=[("klein", 3)]).fit(
            da.from_array(X, chunks=1000), da.from_array(k[:, 0], chunks=1000)
        )
    for space in ("ranks", "rapidity"):
        with pytest.raises(ValueError, match="'quantiles' \\(the default\\) or 'klein'"):
            hdask.HyperbolicDaskXGBRegressor(client=client, tree_space=space).fit(
                da.from_array(X, chunks=1000), da.from_array(k[:, 0], chunks=1000)
            )
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
    half = int(np.count_nonzero(y == y[order[0]]))  # one class per worker, exactly
    pinned = [
        client.persist((da.from_array(X[order][part]), da.from_array(y[order][part])), workers=w)
        for part, w in zip(
            [slice(None, half), slice(half, None)], client.scheduler_info()["workers"]
        )
    ]
    with pytest.raises(ValueError, match="every class"):
        hdask.HyperbolicDaskLGBMClassifier(client=client, n_estimators=2, verbose=-1).fit(
            da.concatenate([p[0] for p in pinned]), da.concatenate([p[1] for p in pinned])
        )


def test_missing_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r"hyp2onnx\[dask\]"):
        hdask._dask()


def test_import_is_lazy_and_a_missing_booster_names_its_extra():
    """``import hyp2onnx.dask`` loads neither Dask nor a booster library; each estimator
    loads only its own, and names the extra when it is missing (fresh interpreter)."""
    code = (
        "import sys; sys.modules['lightgbm'] = None\n"
        "import hyp2onnx.dask as hdask\n"
        "heavy = ('dask', 'distributed', 'xgboost', 'lightgbm')\n"
        "print(*(m for m in heavy if sys.modules.get(m) is not None))\n"
        "try:\n"
        "    hdask.HyperbolicDaskLGBMClassifier\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "print(hdask.HyperbolicDaskXGBRegressor().tree_space)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == [
        "",
        "MissingExtraError HyperbolicLGBMClassifier needs the lightgbm package, which is not "
        "installed: pip install 'hyp2onnx[lightgbm]'",
        "quantiles",
    ]


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
    want = run_onnx(onnx_model, X, threads=ONE_THREAD)
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
    want = run_onnx(onnx_model, X, threads=ONE_THREAD)
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


class _Allocator:
    """Records the glibc calls of hdask._reusing_freed_memory."""

    def __init__(self):
        self.calls = []

    def mallopt(self, param, value):
        self.calls.append(("mallopt", param, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"MALLOC_TRIM_THRESHOLD_": "65536"},
        {"MALLOC_TRIM_THRESHOLD_": "65536", "MALLOC_MMAP_THRESHOLD_": "262144"},
    ],
)
def test_freed_memory_is_reused_during_the_search_then_returned(monkeypatch, environ):
    """Under Dask's MALLOC_TRIM_THRESHOLD_ the search raises glibc's thresholds, and puts
    the environment's values back afterwards (also on error); without it, no call."""
    libc, real = _Allocator(), hdask._glibc
    monkeypatch.setattr(hdask, "_glibc", lambda: libc)
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match="inside"):
        with hdask._reusing_freed_memory():
            raise RuntimeError("inside")
    if not environ:
        assert libc.calls == []
        return
    mmap = int(environ.get("MALLOC_MMAP_THRESHOLD_", 128 * 1024))
    assert libc.calls == [
        ("mallopt", -3, 32 << 20),
        ("mallopt", -1, 1 << 30),
        ("mallopt", -3, mmap),
        ("mallopt", -1, 65536),
        ("malloc_trim", 0),
    ]
    if real() is not None:  # the real one, on glibc: runs as is
        monkeypatch.undo()
        monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
        with hdask._reusing_freed_memory():
            np.ones(1 << 20).sum()


# -- bad rows: refused with their global row numbers, or null outputs -----------------------


def _bad_points(X):
    """X with NaN, infinity, an off-manifold row, a negative-sheet row, at known rows."""
    bad = X.copy()
    rows = {10: np.nan, 701: np.inf, 1502: "off", 2999: "sheet"}
    for row, kind in rows.items():
        if kind == "off":
            bad[row, 0] += 0.5
        elif kind == "sheet":
            bad[row, 0] = -bad[row, 0]
        else:
            bad[row, 1] = kind
    return bad, sorted(rows)


def test_predict_refuses_bad_rows_naming_their_global_rows(models, client):
    model, _, (_, X, _, _) = models("HyperbolicDaskXGBClassifier")
    graph = hyp2onnx.to_onnx(model, dtype="float64")
    bad, rows = _bad_points(X)
    for wrong in rows:  # one bad row at a time: each is refused, named by its global row
        one = X.copy()
        one[wrong] = bad[wrong]
        with pytest.raises(hyp2onnx.InvalidPointError, match=rf"\(rows {wrong}\)"):
            dask.compute(hdask.predict(graph, da.from_array(one, chunks=(CHUNKS, -1))))
    frame = pd.DataFrame(bad, columns=["t", "a", "b"], index=np.arange(X.shape[0]) + 5000)
    # Whichever partition Dask reports first, it names its own bad rows by index.
    with pytest.raises(
        hyp2onnx.InvalidPointError,
        match=r"of partition \d+; index ((5010|5701|6502|7999)(, )?)+\)",
    ):
        hdask.predict(graph, dd.from_pandas(frame, npartitions=4)).compute()
    with pytest.raises(TypeError, match="not numeric: a"):
        hdask.predict(graph, dd.from_pandas(frame.astype({"a": str}), npartitions=2))
    with pytest.raises(ValueError, match="bad_rows must be 'error'"):
        hdask.predict(graph, da.from_array(X, chunks=500), bad_rows="drop")
    # check_manifold=False skips the manifold only: NaN and infinity are still refused.
    lax = hdask.predict(graph, da.from_array(bad[1500:], chunks=500), check_manifold=False)
    assert lax["label"].shape == (1500,) and len(lax["label"].compute()) == 1500  # off, sheet
    with pytest.raises(hyp2onnx.InvalidPointError, match=r"NaN or infinity \(rows 10\)"):
        dask.compute(
            hdask.predict(graph, da.from_array(bad[:500], chunks=250), check_manifold=False)
        )


def test_predict_gives_null_outputs_for_bad_rows_on_request(models, client):
    model, _, (_, X, _, _) = models("HyperbolicDaskXGBClassifier")
    graph = hyp2onnx.to_onnx(model, dtype="float64")
    bad, rows = _bad_points(X)
    good = np.setdiff1d(np.arange(X.shape[0]), rows)
    want = run_onnx(graph, X[good], threads=ONE_THREAD)
    out = dask.compute(
        hdask.predict(graph, da.from_array(bad, chunks=(CHUNKS, -1)), bad_rows="null")
    )[0]
    for name, value in out.items():
        nulls = pd.isna(value).reshape(X.shape[0], -1).all(axis=1)
        np.testing.assert_array_equal(np.flatnonzero(nulls), rows)
        np.testing.assert_array_equal(value[good].astype(want[name].dtype), want[name])
    frame = pd.DataFrame(bad, columns=["t", "a", "b"])
    scored = hdask.predict(graph, dd.from_pandas(frame, npartitions=4), bad_rows="null").compute()
    np.testing.assert_array_equal(np.flatnonzero(scored["label"].isna()), rows)
    np.testing.assert_array_equal(
        scored["label"].to_numpy()[good].astype(str), want["label"].astype(str)
    )


def test_fit_and_model_predict_name_bad_rows_by_global_row(client):
    k, X, y, _ = _data("binary", seed=7)
    bad = X.copy()
    bad[1750, 0] += 0.5  # partition 2 (rows 1000 .. 2199), its row 750
    model = hdask.HyperbolicDaskXGBClassifier(client=client, **_native_params("XGB"))
    with pytest.raises(hyp2onnx.InvalidPointError, match=r"\(rows 1750\)"):
        model.fit(da.from_array(bad, chunks=(CHUNKS, -1)), da.from_array(y, chunks=(CHUNKS,)))
    model.fit(da.from_array(X, chunks=(CHUNKS, -1)), da.from_array(y, chunks=(CHUNKS,)))
    for method in ("predict", "predict_proba", "to_klein"):
        with pytest.raises(hyp2onnx.InvalidPointError, match=r"\(rows 1750\)"):
            getattr(model, method)(da.from_array(bad, chunks=(CHUNKS, -1))).compute()
    # Partition sizes unknown (from a DataFrame): the partition and its row.
    unknown = dd.from_pandas(pd.DataFrame(bad), npartitions=3).to_dask_array()
    with pytest.raises(hyp2onnx.InvalidPointError, match=r"\(rows 750 of partition 1\)"):
        model.predict(unknown).compute()


def test_bad_sample_weights_are_refused_naming_their_global_rows(client):
    """XGBoost gave "Ring allreduce" (negative) or a quantile.cc check (all zero) on the
    cluster; the weights are checked first, their rows named as in the whole array."""
    k, X, y, _ = _data("binary", seed=7)
    Xd, yd = da.from_array(X, chunks=(CHUNKS, -1)), da.from_array(y, chunks=(CHUNKS,))
    model = hdask.HyperbolicDaskXGBClassifier(client=client, **_native_params("XGB"))
    for value, match in [
        (-1.0, r"negative at row 1750\b"),
        (np.nan, r"NaN at row 1750\b"),
        (np.inf, r"infinite at row 1750\b"),
    ]:
        w = np.ones(len(y))
        w[1750] = value  # partition 2, its row 750
        with pytest.raises(ValueError, match=match):
            model.fit(Xd, yd, sample_weight=da.from_array(w, chunks=(CHUNKS,)))
    with pytest.raises(ValueError, match="every weight is zero"):
        model.fit(Xd, yd, sample_weight=da.zeros(len(y), chunks=(CHUNKS,)))
    # LightGBM defines negative weights (they scale gradients): accepted there.
    w = np.ones(len(y))
    w[1750] = -1.0
    lgbm = hdask.HyperbolicDaskLGBMClassifier(client=client, n_estimators=2, verbose=-1)
    lgbm.fit(Xd, yd, sample_weight=da.from_array(w, chunks=(CHUNKS,)))


def test_missing_labels_and_weights_that_are_not_numbers_name_their_global_rows(client):
    """Round 5 (issue 39, re-test): NaN labels gave scikit-learn's "Input y contains NaN"
    without rows, None or <NA> labels "boolean value of NA is ambiguous", a NaN or infinite
    regression target XGBoost's "Label contains NaN" from the cluster, and None or <NA>
    weights "Parameters of such types are not supported by isfinite"."""
    k, X, y, _ = _data("binary", seed=7)
    Xd = da.from_array(X, chunks=(CHUNKS, -1))
    frame = dd.from_pandas(pd.DataFrame(X, columns=["x0", "x1", "x2"]), npartitions=3)
    clf = hdask.HyperbolicDaskXGBClassifier(client=client, **_native_params("XGB"))
    reg = hdask.HyperbolicDaskLGBMRegressor(client=client, n_estimators=2, verbose=-1)
    nan = y.astype(float)
    nan[[5, 1750]] = np.nan
    with pytest.raises(ValueError, match=r"y holds missing labels .* at rows 5, 1750;"):
        clf.fit(Xd, da.from_array(nan, chunks=(CHUNKS,)))
    for labels_ in (pd.Series(y, dtype="Int64"), pd.Series(y.astype(str), dtype=object)):
        labels_[[5, 2999]] = None
        with pytest.raises(ValueError, match=r"y holds missing labels .* at rows 5, 2999;"):
            clf.fit(frame, dd.from_pandas(labels_, npartitions=3))
    for bad in (np.nan, np.inf):
        target = k[:, 0].copy()
        target[1750] = bad
        with pytest.raises(ValueError, match=r"y holds missing targets .* at row 1750;"):
            reg.fit(Xd, da.from_array(target, chunks=(CHUNKS,)))
    target = pd.Series(k[:, 0], dtype="Float64")
    target[9] = pd.NA
    with pytest.raises(ValueError, match=r"y holds missing targets .* at row 9;"):
        reg.fit(frame, dd.from_pandas(target, npartitions=3))
    w = pd.Series(np.ones(len(y)), dtype="Float64")
    w[[11, 2000]] = pd.NA
    with pytest.raises(ValueError, match=r"found null at rows 11, 2000\."):
        clf.fit(
            frame,
            dd.from_pandas(pd.Series(y), npartitions=3),
            sample_weight=dd.from_pandas(w, npartitions=3),
        )
    w = pd.Series(np.ones(len(y)), dtype=object)
    w[12] = "heavy"
    with pytest.raises(ValueError, match=r"sample_weight must hold numbers; it holds 'heavy'"):
        clf.fit(
            frame,
            dd.from_pandas(pd.Series(y), npartitions=3),
            sample_weight=dd.from_pandas(w, npartitions=3),
        )


# -- LightGBM: classes per worker checked before training; no training can hang ----------


def _pinned(client, X, y, split):
    """X and y in two partitions, persisted on one worker each: rows ``split`` on the first."""
    workers = list(client.scheduler_info()["workers"])
    parts = [
        client.persist((da.from_array(X[rows]), da.from_array(y[rows])), workers=[w])
        for rows, w in zip(split, workers)
    ]
    return da.concatenate([p[0] for p in parts]), da.concatenate([p[1] for p in parts])


def test_lightgbm_refuses_a_worker_without_a_class_before_training(client):
    """After earlier fits on the same client LightGBM itself failed with 'Socket recv
    error' or hung; the classes are now checked per worker before it starts."""
    k, X, y, _ = _data("multiclass", seed=8)
    params = dict(n_estimators=2, num_leaves=4, verbose=-1)
    hdask.HyperbolicDaskLGBMClassifier(client=client, **params).fit(
        da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    )  # an earlier fit on this client
    lacking = np.flatnonzero(y != "virginica")[:1000]  # the first worker: two classes only
    rest = np.setdiff1d(np.arange(y.size), lacking)
    Xd, yd = _pinned(client, X, y, [lacking, rest])
    with pytest.raises(ValueError, match=r"worker \S+ hold no rows of the classes \['virginica'\]"):
        hdask.HyperbolicDaskLGBMClassifier(client=client, fit_timeout=120, **params).fit(Xd, yd)


def test_a_training_past_fit_timeout_is_cancelled_with_a_clear_error(client):
    import time

    k, X, y, _ = _data("binary", seed=9)
    Xd, yd = da.from_array(X, chunks=1000), da.from_array(y, chunks=1000)
    slow = hdask.HyperbolicDaskLGBMClassifier(
        client=client, n_estimators=40, num_leaves=31, verbose=-1, fit_timeout=0.05
    )
    with pytest.raises(TimeoutError, match=r"fit_timeout=0.05 s.*restart the workers"):
        slow.fit(Xd, yd)
    for _ in range(600):  # the workers finish what they run; then the client trains again
        if not any(client.processing().values()):
            break
        time.sleep(0.1)
    model = hdask.HyperbolicDaskLGBMClassifier(client=client, n_estimators=2, verbose=-1)
    assert model.fit(Xd, yd).fit_timeout == 3600.0
    with pytest.raises(ValueError, match="fit_timeout"):
        hdask.HyperbolicDaskLGBMClassifier(client=client, fit_timeout=-1).fit(Xd, yd)


# -- far from the origin: the "quantiles" tree space ---------------------------------------

FAR_PARAMS = {
    "XGB": dict(n_estimators=8, max_depth=6, random_state=0, n_jobs=1),
    "LGBM": dict(n_estimators=8, max_depth=6, random_state=0, verbose=-1),
}
FAR_DIRECTIONS = {
    "axis": np.array([1.0, 0.0]),
    "angle0.3": np.array([np.cos(0.3), np.sin(0.3)]),
    "d8": DIRECTION_D8,  # a random direction in d = 8
}


def _fit_far(name: str, X, y, client, chunks=700, **params):
    """A Dask model fitted on ``X``, with the booster as trained and the bucket map."""
    recorded = {}
    correct = hdask._DaskModel._correct_distributed

    def record(self, backend, fitted, Xt, y, sample_weight, *, client, quantile_map):
        recorded.update(fitted=copy.deepcopy(fitted), qmap=quantile_map)
        return correct(
            self, backend, fitted, Xt, y, sample_weight, client=client, quantile_map=quantile_map
        )

    hdask._DaskModel._correct_distributed = record
    try:
        kind = "XGB" if "XGB" in name else "LGBM"
        model = getattr(hdask, name)(client=client, **{**FAR_PARAMS[kind], **params})
        model.fit(da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=chunks))
    finally:
        hdask._DaskModel._correct_distributed = correct
    return model, recorded


def _leaves(native, X):
    if hasattr(native, "get_booster"):
        return native.apply(X)
    return native.predict(X, pred_leaf=True)


def _assert_training_rows_keep_their_leaves(model, recorded, X):
    """Oracle: the booster as trained, reading its buckets, sends every training row to the
    leaf the corrected model (Klein thresholds or split indices) sends it to."""
    buckets = recorded["qmap"].transform(model.to_klein(X))
    np.testing.assert_array_equal(
        _leaves(model.estimator_, model._tree_input(X)), _leaves(recorded["fitted"], buckets)
    )


@pytest.mark.parametrize("direction", list(FAR_DIRECTIONS))
@pytest.mark.parametrize("name", ["HyperbolicDaskXGBClassifier", "HyperbolicDaskLGBMClassifier"])
def test_far_rays_on_the_cluster(client, name, direction):
    """The ray test at r0 = 14 (distances 13.5 to 14.5): accuracy >= 0.99, and the exported
    graph gives the model's label on every test point and on every threshold and one ulp
    either side."""
    X, y = ray(3000, 14.0, FAR_DIRECTIONS[direction], seed=1)
    Xt, yt = ray(1000, 14.0, FAR_DIRECTIONS[direction], seed=2)
    model, recorded = _fit_far(name, X, y, client)
    assert model.tree_space_ == "quantiles" and model.input_dtype_ == "float64"
    predicted = model.predict(Xt)
    assert np.mean(predicted == yt) >= 0.99
    probe = np.concatenate([Xt, threshold_rows(model, klein(Xt))])
    labels = session(model).run(["label"], {"X": probe})[0]
    np.testing.assert_array_equal(labels, model.predict(probe))
    _assert_training_rows_keep_their_leaves(model, recorded, X)


@pytest.mark.parametrize("name", ["HyperbolicDaskXGBRegressor", "HyperbolicDaskLGBMRegressor"])
def test_far_regressors_on_the_cluster(client, name):
    X, _ = ray(2000, 14.0, DIRECTION_D8, seed=5)
    target = np.arccosh(X[:, 0])
    model, recorded = _fit_far(name, X, target, client, learning_rate=0.5)
    assert model.tree_space_ == "quantiles"
    probe = np.concatenate([X[:300], threshold_rows(model, klein(X))])
    values = session(model).run(["variable"], {"X": probe})[0].ravel()
    np.testing.assert_allclose(values, model.predict(probe), rtol=1e-6, atol=1e-6)
    assert np.mean(np.abs(model.predict(X) - target)) < 0.05
    _assert_training_rows_keep_their_leaves(model, recorded, X)


def test_far_buckets_merged_by_a_small_sketch_still_route_as_the_graph(client, monkeypatch):
    """More distinct values than the sketch keeps (64 edges for 3000 rows): the map merges
    values, the booster cannot split inside a bucket, and still every training row keeps
    its leaf and the graph routes every row as the model."""
    monkeypatch.setattr(hdask, "SKETCH_SIZE", 64)
    X, y = ray(3000, 14.0, DIRECTION_D8, seed=1)
    model, recorded = _fit_far("HyperbolicDaskXGBClassifier", X, y, client)
    assert all(e.size <= 64 for e in recorded["qmap"].edges)
    _assert_training_rows_keep_their_leaves(model, recorded, X)
    probe = np.concatenate([X[:500], threshold_rows(model, klein(X))])
    labels = session(model).run(["label"], {"X": probe})[0]
    np.testing.assert_array_equal(labels, model.predict(probe))
    assert np.mean(model.predict(X) == y) > 0.9  # 64 buckets still resolve the ray


@pytest.mark.parametrize("name", ["HyperbolicDaskXGBClassifier", "HyperbolicDaskLGBMClassifier"])
def test_near_the_origin_quantiles_is_the_klein_model(client, name, monkeypatch):
    """Within a distance of 5 of the origin the default space fits Klein coordinates: the
    booster sees exactly what "klein" gives it, and is corrected the same way (ray at
    r0 = 4.4, up to 4.9). XGBoost's Dask training is deterministic: the models are equal
    bit for bit (LightGBM's depends on which worker holds which partition)."""
    X, y = ray(2000, 4.4, DIRECTION_D8, seed=3)
    kind = "XGB" if "XGB" in name else "LGBM"
    cls = getattr(hdask, name)
    seen = []
    train = cls._train

    def record(native, client, Xk, *args):
        seen.append(Xk.compute())
        return train(native, client, Xk, *args)

    monkeypatch.setattr(cls, "_train", staticmethod(record))
    models = [
        cls(client=client, tree_space=space, **FAR_PARAMS[kind]).fit(
            da.from_array(X, chunks=(700, -1)), da.from_array(y, chunks=700)
        )
        for space in ("quantiles", "klein")
    ]
    assert [m.tree_space_ for m in models] == ["klein", "klein"]
    np.testing.assert_array_equal(seen[0].view(np.int64), seen[1].view(np.int64))
    np.testing.assert_array_equal(seen[0], klein(X))
    if kind == "XGB":
        backend = backend_for(models[0].estimator_)
        got, want = (backend.read_trees(m.estimator_) for m in models)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a.threshold.view(np.int64), b.threshold.view(np.int64))
        assert models[0].correction_ == models[1].correction_
        np.testing.assert_array_equal(models[0].predict_proba(X), models[1].predict_proba(X))
    # Just past the radius, the buckets.
    Xf, yf = ray(500, 5.2, DIRECTION_D8, seed=3)
    far = cls(client=client, **FAR_PARAMS[kind]).fit(
        da.from_array(Xf, chunks=(250, -1)), da.from_array(yf, chunks=250)
    )
    assert far.tree_space_ == "quantiles"


def test_isolation_forest_graphs_score_on_dask(client):
    # Labels, scores and path lengths of an isolation forest, partition by partition.
    from hyp2onnx.verification import run_onnx

    X = as_points(klein_with_ties(1500, 2, seed=5), "hyperboloid")
    model = hyp2onnx.HyperbolicIsolationForest(n_estimators=20, random_state=0).fit(X)
    graph = hyp2onnx.to_onnx(model)
    out = hdask.predict(graph, da.from_array(X, chunks=(400, -1)))
    got = {name: value.compute() for name, value in out.items()}
    assert set(got) == {"label", "scores", "path_length"}
    np.testing.assert_array_equal(got["label"].ravel(), model.predict(X))
    want = run_onnx(graph, X, threads=1)
    for name in ("scores", "path_length"):
        np.testing.assert_array_equal(got[name], want[name])


def test_rotation_forest_graphs_score_on_dask(client):
    # Each tree reads its own frame coordinates; partitions score as one batch does.
    from hyp2onnx.verification import run_onnx

    k = klein_with_ties(1500, 2, seed=6)
    X = as_points(k, "hyperboloid")
    y = (k[:, 0] > 0).astype(np.int64) + (k[:, 1] > 0.1)
    model = hyp2onnx.HyperbolicRotationForestClassifier(
        n_estimators=8, max_depth=6, random_state=0
    ).fit(X, y)
    graph = hyp2onnx.to_onnx(model)
    out = hdask.predict(graph, da.from_array(X, chunks=(400, -1)))
    got = {name: value.compute() for name, value in out.items()}
    np.testing.assert_array_equal(got["label"].ravel(), model.predict(X))
    np.testing.assert_array_equal(
        got["probabilities"], run_onnx(graph, X, threads=1)["probabilities"]
    )


@pytest.mark.parametrize("kind", ["rotation", "isolation"])
def test_rotation_and_isolation_forests_grow_on_the_cluster(client, kind):
    """Their trees are independent: joblib's Dask backend grows them on the workers
    (the task stream shows it), and the fitted forest is the one ``n_jobs=1`` fits."""
    import joblib
    from dask.distributed import get_task_stream

    k = klein_with_ties(1200, 2, seed=7)
    X = as_points(k, "hyperboloid")
    y = (k[:, 0] > 0).astype(np.int64) + (k[:, 1] > 0.1)

    def make(n_jobs):
        if kind == "rotation":
            return hyp2onnx.HyperbolicRotationForestClassifier(
                n_estimators=6, max_depth=5, random_state=0, n_jobs=n_jobs
            )
        return hyp2onnx.HyperbolicIsolationForest(n_estimators=6, random_state=0, n_jobs=n_jobs)

    with get_task_stream(client) as tasks, joblib.parallel_backend("dask"):
        grown = make(2).fit(X, y)
    assert len(tasks.data) >= 2  # the trees went to the workers
    local = make(1).fit(X, y)
    if kind == "rotation":
        np.testing.assert_array_equal(grown.predict_proba(X), local.predict_proba(X))
    else:
        np.testing.assert_array_equal(grown.path_length(X), local.path_length(X))


def test_near_check_decides_as_the_sketch_it_replaces(client):
    """``distributed_near`` (two numbers per partition) says what the quantile sketch's
    ``near()`` said: rows of weight 0 ignored unless every weight is 0, the radius's own
    boundary included."""
    import dask.array as da

    from hyp2onnx.correction.quantiles import NEAR_RADIUS
    from hyp2onnx.dask import distributed_near, distributed_sketch

    rng = np.random.default_rng(3)
    edge = np.tanh(NEAR_RADIUS)
    k = rng.uniform(-0.3, 0.3, (500, 3))
    cases = []
    for far in (edge, np.nextafter(edge, 1.0), 0.9999):
        moved = k.copy()
        moved[137] = [far, 0.0, 0.0]
        weights = np.ones(500)
        for w in (None, weights, np.where(np.arange(500) == 137, 0.0, weights), 0 * weights):
            cases.append((moved, w))
    answers = []
    for Xk, w in cases:
        X = da.from_array(Xk, chunks=(120, 3))
        dw = None if w is None else da.from_array(w, chunks=120)
        sketched = distributed_sketch(client, X, dw).near()
        assert distributed_near(client, X, dw) == sketched
        answers.append(sketched)
    assert True in answers and False in answers


@pytest.mark.parametrize(
    "block",
    [
        np.array([3, 0, -1], dtype=np.int64),
        np.array([True, False]),
        np.array([0.5, np.nan, -np.inf, np.nan], dtype=np.float32),
        np.array([[1.0, np.nan], [np.nan, 2.0]]),
        np.array([1, None, "a", np.nan], dtype=object),
        pd.array([1, None, 3], dtype="Int64"),
        pd.array([0.5, None], dtype="Float64"),
        np.zeros((0,), dtype=np.float64),
    ],
    ids=["int", "bool", "float32", "float-2d", "object", "Int64", "Float64", "empty"],
)
def test_null_labels_are_found_as_pandas_finds_them(block):
    """The numeric fast path of a partition's nulls agrees with pandas' ``isna`` on the boxed
    values, its oracle: NaN in floats, None and <NA> in object and nullable columns."""
    from hyp2onnx.distributed.dask import _nulls

    expected = np.asarray(pd.isna(np.asarray(block, dtype=object)), dtype=bool)
    got = _nulls(block)
    assert got.dtype == bool and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
