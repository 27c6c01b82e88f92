"""The compiled scorer (lleaves): the Python model's routing, labels and values.

Every model is scored on its training rows with one-ulp grid ties and on
every split's threshold and its float32/float64 neighbours (the independent
oracle's ``probe_rows``): labels must be the model's exactly and values
within the bound the scorer states (0 for sums without a link; verify's
default tolerance otherwise), through ``hyp2onnx.verify`` as a graph is
checked. Skipped, with the reason, where lleaves is not installed.
"""

from __future__ import annotations

import pickle
import sys

import _oracle as oracle
import numpy as np
import pytest
from _boosting_data import klein_with_ties
from _data import klein_points, labels, targets

import hyp2onnx as h
from hyp2onnx.errors import MissingExtraError, UnsupportedModelError
from hyp2onnx.export import compiled
from hyp2onnx.verification import verify

pytest.importorskip("lleaves", reason="lleaves is not installed: pip install 'hyp2onnx[compiled]'")

KLEIN = dict(input_geometry="klein")
BOOST = dict(n_estimators=12, n_jobs=1, **KLEIN)
MODELS = {
    "lgbm_multi": lambda: h.HyperbolicLGBMClassifier(num_leaves=8, verbose=-1, **BOOST),
    "lgbm_binary": lambda: h.HyperbolicLGBMClassifier(num_leaves=8, verbose=-1, **BOOST),
    "lgbm_reg": lambda: h.HyperbolicLGBMRegressor(num_leaves=8, verbose=-1, **BOOST),
    # the other backends, written as LightGBM model text
    "rf_multi": lambda: h.HyperbolicRandomForestClassifier(
        n_estimators=8, max_depth=5, random_state=0, **KLEIN
    ),
    "rf_reg": lambda: h.HyperbolicRandomForestRegressor(
        n_estimators=8, max_depth=5, random_state=0, **KLEIN
    ),
    "catboost_multi": lambda: h.HyperbolicCatBoostClassifier(
        iterations=8, depth=3, verbose=0, thread_count=1, random_seed=0, **KLEIN
    ),
}


def _rows() -> np.ndarray:
    ties = klein_with_ties(300, 3, seed=42)
    return np.concatenate([klein_points(300, 3, seed=41), ties[np.sum(ties**2, axis=1) < 0.98]])


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("compiled")


@pytest.fixture(scope="module", params=list(MODELS))
def fitted(request, cache):
    name = request.param
    k = _rows()
    if name.endswith("_reg"):
        y = targets(k)
    else:
        y = labels(k, 2 if name.endswith("binary") else 3)
    model = MODELS[name]().fit(k, y)
    rows = [k]
    if not name.startswith("catboost"):  # the oracle reads scikit-learn, XGBoost, LightGBM
        rows.append(oracle.probe_rows(oracle.native(model), k, np.float64).k)
    return name, model, np.concatenate(rows), compiled.compile_model_lleaves(model, cache_dir=cache)


def test_labels_exact_and_values_within_the_bound(fitted) -> None:
    name, model, rows, scorer = fitted
    report = verify(model, scorer, rows)
    assert report.ok, f"{name}: {report}"
    assert report.label_mismatches in (0, None)
    if scorer.model.ensemble.post_transform == "identity":
        assert report.atol == 0.0 and max(report.max_abs_diff.values()) == 0.0  # bit for bit
    # the raw sums are the model's own, in tree order, whatever the link
    from hyp2onnx.ir import predict_scores

    e = scorer.model.ensemble
    dt = np.dtype(e.sum_dtype)
    raw = scorer.raw_scores(rows)
    if e.aggregate == "mean":
        raw = raw / dt.type(e.n_trees)
    got = (raw + e.base_values.astype(dt)).astype(np.float64)
    assert np.array_equal(got, predict_scores(e, rows)), name


def test_the_cache_is_keyed_by_the_model(fitted, cache) -> None:
    name, model, rows, scorer = fitted
    assert (cache / f"{scorer.key}.o").is_file()
    compiled._LOADED.clear()  # a new process: loads the machine code, compiles nothing
    again = compiled.compile_model_lleaves(model, cache_dir=cache)
    assert again.key == scorer.key
    a, b = scorer.predict_outputs(rows[:50]), again.predict_outputs(rows[:50])
    assert all(np.array_equal(a[key], b[key]) for key in a)
    # pickled (a Dask or Spark worker): compiled or loaded there on first use
    copy = pickle.loads(pickle.dumps(scorer))
    assert copy._booster is None
    c = copy.predict_outputs(rows[:50])
    assert all(np.array_equal(a[key], c[key]) for key in a)


def test_another_model_has_another_key() -> None:
    k = _rows()
    one = h.HyperbolicLGBMRegressor(num_leaves=8, verbose=-1, **BOOST).fit(k, targets(k))
    two = h.HyperbolicLGBMRegressor(num_leaves=8, verbose=-1, **BOOST).fit(k, targets(k) + 1)
    texts = [compiled.lightgbm_model_text(h.export.describe(m).ensemble) for m in (one, two)]
    keys = {compiled.model_key(t, block=12) for t in texts}
    assert len(keys) == 2


def test_unsupported_models_are_refused(cache) -> None:
    k = _rows()
    model = h.HyperbolicHouseholderTreeClassifier(max_depth=3, random_state=0, **KLEIN)
    model.fit(k, labels(k, 2))
    with pytest.raises(UnsupportedModelError, match="axis-aligned"):
        compiled.compile_model_lleaves(model, cache_dir=cache)
    # float32 sums (XGBoost): lleaves' float32 code is not XGBoost's bit for bit
    xgb = h.HyperbolicXGBClassifier(max_depth=3, **BOOST).fit(k, labels(k, 2))
    with pytest.raises(UnsupportedModelError, match="float32"):
        compiled.compile_model_lleaves(xgb, cache_dir=cache)


def test_without_lleaves_the_error_names_the_extra(monkeypatch, cache) -> None:
    monkeypatch.setitem(sys.modules, "lleaves", None)
    k = _rows()
    model = h.HyperbolicLGBMRegressor(num_leaves=4, verbose=-1, **BOOST).fit(k, targets(k))
    with pytest.raises(MissingExtraError, match=r"hyp2onnx\[compiled\]"):
        compiled.compile_model_lleaves(model, cache_dir=cache)


def test_predict_scores_with_the_compiled_trees(tmp_path, cache, monkeypatch) -> None:
    """``hyp2onnx predict OUT DATA --compiled MODEL``: the CSV the graph writes, from the
    compiled trees; a model file the graph did not come from is refused, nothing written."""
    import joblib
    import onnx
    from _cli import assert_usage_error, cli

    monkeypatch.setenv("HYP2ONNX_CACHE", str(cache))
    k = _rows()
    model = MODELS["lgbm_multi"]().fit(k, labels(k, 3))
    other = MODELS["lgbm_multi"]().fit(k, labels(k, 3, seed=5))
    for name, m in (("model.pkl", model), ("other.pkl", other)):
        joblib.dump(m, tmp_path / name)
    onnx.save(h.to_onnx(model, dtype="float64"), tmp_path / "model.onnx")
    np.save(tmp_path / "X.npy", k)
    args = ["predict", tmp_path / "model.onnx", tmp_path / "X.npy", "--chunk-rows", "100"]
    code, _, err = cli(*args, "-o", tmp_path / "graph.csv")
    assert code == 0, err
    code, _, err = cli(*args, "-o", tmp_path / "compiled.csv", "--compiled", tmp_path / "model.pkl")
    assert code == 0, err
    graph = np.loadtxt(tmp_path / "graph.csv", delimiter=",", skiprows=1)
    mine = np.loadtxt(tmp_path / "compiled.csv", delimiter=",", skiprows=1)
    assert np.array_equal(mine[:, 0], graph[:, 0])  # labels
    assert np.max(np.abs(mine[:, 1:] - graph[:, 1:])) <= 1e-15
    code, _, err = cli(*args, "-o", tmp_path / "bad.csv", "--compiled", tmp_path / "other.pkl")
    assert_usage_error(code, err, match="do not give the graph's outputs")
    assert not (tmp_path / "bad.csv").exists()


def test_dask_scores_with_the_compiled_trees(cache) -> None:
    """``hyp2onnx.dask.predict(graph, data, compiled=scorer)``: the graph's outputs from the
    compiled trees in every partition; a scorer of another model is refused."""
    dask_array = pytest.importorskip("dask.array", reason="dask is not installed")
    from hyp2onnx.dask import predict

    k = _rows()
    model = MODELS["rf_multi"]().fit(k, labels(k, 3))
    other = MODELS["rf_multi"]().fit(k, labels(k, 3, seed=5))
    graph = h.to_onnx(model, dtype="float64")
    scorer = compiled.compile_model_lleaves(model, cache_dir=cache)
    data = dask_array.from_array(k, chunks=(100, k.shape[1]))
    got = predict(graph, data, compiled=scorer)
    label, p = (got[name].compute(scheduler="threads") for name in ("label", "probabilities"))
    assert np.array_equal(label, model.predict(k))
    assert np.array_equal(p, model.predict_proba(k))  # bit for bit, as the exact graph
    with pytest.raises(ValueError, match="not the graph's model"):
        predict(graph, data, compiled=compiled.compile_model_lleaves(other, cache_dir=cache))
