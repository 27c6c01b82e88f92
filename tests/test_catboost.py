"""CatBoost backend: symmetric trees, float32 borders shared per feature.

The oracle for CatBoost's routing is written here from its JSON model alone
(a row sets bit ``j`` of its leaf index iff ``float32(x) > border_j``) and
checked against CatBoost's own raw predictions; the exported graphs are
checked against the Python model in onnxruntime on rows lying on and one
float32 ulp either side of every border.
"""

from __future__ import annotations

import ctypes
import json
import pickle
import struct
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from _cli import assert_usage_error, cli, cli_process
from catboost import CatBoostClassifier, CatBoostRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

import hyp2onnx as h
from hyp2onnx.cli import main
from hyp2onnx.emit import ENCODINGS
from hyp2onnx.verification import run_onnx

KINDS = {
    "multiclass": (h.HyperbolicCatBoostClassifier, lambda k: (k[:, 0] > 0.1) + (k[:, 1] > -0.2)),
    "binary": (
        h.HyperbolicCatBoostClassifier,
        lambda k: np.where(k[:, 0] + k[:, 2] > 0, "yes", "no"),
    ),
    "regression": (
        h.HyperbolicCatBoostRegressor,
        lambda k: np.sin(3 * k[:, 0]) + k[:, 1] * k[:, 2],
    ),
}
PARAMS = {"iterations": 15, "depth": 4, "verbose": 0, "random_seed": 0, "thread_count": 1}


def _klein(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    k = rng.normal(size=(n, d))
    return k / np.linalg.norm(k, axis=1, keepdims=True) * rng.uniform(0, 0.95, (n, 1))


def _hyperboloid(k: np.ndarray) -> np.ndarray:
    x0 = 1.0 / np.sqrt(1.0 - np.sum(k * k, axis=1, keepdims=True))
    return np.hstack([x0, k * x0])


def _json(model: Any, tmp_path: Path) -> dict[str, Any]:
    path = tmp_path / "model.json"
    model.save_model(str(path), format="json")
    return json.loads(path.read_text())


def _oracle_raw(model_json: dict[str, Any], leaf_values: np.ndarray, k: np.ndarray) -> np.ndarray:
    """CatBoost's raw score from its JSON model: leaf index bits ``float32(x) > border``."""
    scale, bias = model_json["scale_and_bias"]
    bias = np.atleast_1d(bias)
    total = np.zeros((k.shape[0], bias.size))
    start = 0
    for tree in model_json["oblivious_trees"]:
        leaf = np.zeros(k.shape[0], dtype=np.int64)
        for j, split in enumerate(tree["splits"]):
            x = k[:, split["float_feature_index"]].astype(np.float32)
            leaf |= (x > np.float32(split["border"])).astype(np.int64) << j
        n = (1 << len(tree["splits"])) * bias.size
        total += leaf_values[start : start + n].reshape(-1, bias.size)[leaf]
        start += n
    return scale * total + bias


def _around_borders(model: Any, tmp_path: Path, base: np.ndarray) -> np.ndarray:
    """Klein rows on, and one float32 ulp either side of, every border the trees use."""
    rows = []
    for tree in _json(model, tmp_path)["oblivious_trees"]:
        for split in tree["splits"]:
            b = np.float32(split["border"])
            for v in (np.nextafter(b, np.float32(-2)), b, np.nextafter(b, np.float32(2))):
                row = base[len(rows) % base.shape[0]] * 0.5
                row[split["float_feature_index"]] = float(v)
                rows.append(row)
    return np.array(rows)


@pytest.fixture(scope="module", params=list(KINDS))
def fitted(request: pytest.FixtureRequest) -> tuple[str, Any, np.ndarray, np.ndarray]:
    cls, target = KINDS[request.param]
    k = _klein(600, 3, seed=len(request.param))
    X = _hyperboloid(k)
    return request.param, cls(**PARAMS).fit(X, target(k)), X, k


def test_routing_oracle_matches_catboost(fitted: Any, tmp_path: Path) -> None:
    _, model, _, k = fitted
    native = model.estimator_
    rows = np.vstack([k, _around_borders(native, tmp_path, k)])
    raw = native.predict(rows, prediction_type="RawFormulaVal").reshape(rows.shape[0], -1)
    got = _oracle_raw(_json(native, tmp_path), native.get_leaf_values(), rows)
    np.testing.assert_array_equal(got, raw)


def test_correction_keeps_every_training_prediction(fitted: Any) -> None:
    kind, model, X, k = fitted
    cls, target = KINDS[kind]
    plain = (CatBoostClassifier if "Classifier" in cls.__name__ else CatBoostRegressor)(
        **PARAMS, allow_writing_files=False
    ).fit(k, target(k))
    assert model.correction_.n_moved > 0
    if kind == "regression":
        np.testing.assert_array_equal(model.predict(X), plain.predict(k))
    else:
        np.testing.assert_array_equal(model.predict_proba(X), plain.predict_proba(k))
        np.testing.assert_array_equal(model.predict(X), plain.predict(k).reshape(-1))


@pytest.mark.parametrize("encoding", list(ENCODINGS))
def test_graphs_agree_on_and_around_every_border(
    fitted: Any, encoding: str, tmp_path: Path
) -> None:
    kind, model, X, k = fitted
    # Rows placed exactly: the graph of a Klein-input model compares them as given.
    cls, target = KINDS[kind]
    klein_model = cls(**PARAMS, input_geometry="klein").fit(k, target(k))
    rows = np.vstack([k, _around_borders(klein_model.estimator_, tmp_path, k)])
    for dtype in ("float32", "float64"):
        onx = h.to_onnx(klein_model, encoding=encoding, dtype=dtype)
        report = h.verify(klein_model, onx, rows)
        assert report.ok, report
    onx = h.to_onnx(model, encoding=encoding)
    report = h.verify(model, onx, X)
    assert report.ok, report
    if encoding == "fast" and kind == "regression":
        # float64 sums in the runtime's order: within the bound the graph records
        assert report.max_abs_diff["variable"] <= h.read_metadata(onx)["value_bound"]
    elif encoding != "compat" and kind == "regression":
        assert report.max_abs_diff["variable"] == 0.0  # float64 sums in CatBoost's order


def test_graph_routes_a_border_row_as_catboost_does(tmp_path: Path) -> None:
    k = _klein(300, 2, seed=3)
    model = h.HyperbolicCatBoostRegressor(**PARAMS, input_geometry="klein").fit(k, k[:, 0])
    rows = _around_borders(model.estimator_, tmp_path, k)
    want = model.estimator_.predict(rows)
    # The exact graph adds the trees in CatBoost's order: every value bit for bit.
    got = run_onnx(h.to_onnx(model, dtype="float64", encoding="exact"), rows)["variable"][:, 0]
    np.testing.assert_array_equal(got, want)
    # The default graph routes the same way and adds in the runtime's order: within
    # its recorded bound, far below what a row sent to another leaf of a tree moves.
    onx = h.to_onnx(model, dtype="float64")
    bound = h.read_metadata(onx)["value_bound"]
    leaves = np.split(
        np.asarray(model.estimator_.get_leaf_values()),
        np.cumsum(model.estimator_.get_tree_leaf_counts())[:-1],
    )
    moved = min(np.diff(np.unique(v)).min() for v in leaves if np.unique(v).size > 1)
    assert 0 < bound < moved / 1000
    got = run_onnx(onx, rows)["variable"][:, 0]
    assert np.max(np.abs(got - want)) <= bound


def test_plain_catboost_file_converts_from_the_command_line(tmp_path: Path) -> None:
    k = _klein(300, 3, seed=5)
    X = _hyperboloid(k)
    plain = CatBoostClassifier(**PARAMS, allow_writing_files=False).fit(k, k[:, 0] > 0)
    plain.save_model(str(tmp_path / "model.cbm"))
    np.save(tmp_path / "X.npy", X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # exported with its own (Euclidean) thresholds
        code = main(
            [
                "convert",
                str(tmp_path / "model.cbm"),
                "--geometry",
                "hyperboloid",
                "--check",
                str(tmp_path / "X.npy"),
            ]
        )
    assert code == 0
    labels = run_onnx(onnx.load(str(tmp_path / "model.onnx")), X)
    np.testing.assert_array_equal(labels["label"], plain.predict(k).reshape(-1))


def test_plain_multiclass_catboost_file_converts_and_verifies(tmp_path: Path) -> None:
    """CatBoost's multiclass predict returns shape (n, 1); the check compares labels as rows."""
    k = _klein(300, 3, seed=6)
    X = _hyperboloid(k)
    y = (k[:, 0] > 0.1).astype(int) + (k[:, 1] > -0.2)  # three classes
    plain = CatBoostClassifier(**PARAMS, allow_writing_files=False).fit(k, y)
    assert plain.predict(k[:3]).shape == (3, 1)
    plain.save_model(str(tmp_path / "model.cbm"))
    np.save(tmp_path / "X.npy", X)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # exported with its own (Euclidean) thresholds
        args = ["--geometry", "hyperboloid"]
        assert (
            main(
                ["convert", str(tmp_path / "model.cbm"), *args, "--check", str(tmp_path / "X.npy")]
            )
            == 0
        )
        assert (
            main(
                [
                    "verify",
                    str(tmp_path / "model.cbm"),
                    str(tmp_path / "model.onnx"),
                    "--data",
                    str(tmp_path / "X.npy"),
                ]
            )
            == 0
        )
    report = h.verify(plain, tmp_path / "model.onnx", X)
    assert report.ok and report.label_mismatches == 0


def test_a_broken_cbm_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.cbm").write_bytes(b"not a model")
    assert main(["convert", str(tmp_path / "bad.cbm"), "--geometry", "klein"]) == 2
    assert "bad.cbm: not a catboost model file" in capsys.readouterr().err
    assert not (tmp_path / "bad.onnx").exists()


def test_damaged_cbm_files_give_only_our_error(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """CatBoost logs "There are invalid params ..." to stderr itself for some damaged
    files; the command's stderr must hold only its error and fix lines."""
    k = _klein(100, 2, seed=7)
    CatBoostClassifier(**PARAMS, allow_writing_files=False).fit(k, k[:, 0] > 0).save_model(
        str(tmp_path / "model.cbm")
    )
    blob = (tmp_path / "model.cbm").read_bytes()
    damaged = tmp_path / "bad.cbm"
    refused = 0
    # Bytes flipped in the header and the parameters' JSON, where CatBoost logs and
    # refuses (some flips in the trees' flatbuffers crash CatBoost itself, not tested here).
    for at in range(135, 1500, 135):
        data = bytearray(blob)
        data[at] ^= 0xFF
        damaged.write_bytes(bytes(data))
        code = main(["convert", str(damaged), "--geometry", "klein", "--force"])
        lines = [line for line in capfd.readouterr().err.splitlines() if line.strip()]
        if code == 2:
            refused += 1
            assert lines[0].startswith("error: ") and len(lines) <= 2, lines
            assert all(line.startswith(("error: ", "  fix: ")) for line in lines), lines
    assert refused >= 5


def _with_nan_leaf(blob: bytes, leaf: float) -> bytes:
    """``blob`` with the first copy of the float64 leaf value ``leaf`` made NaN."""
    at = blob.find(struct.pack("<d", leaf))
    assert at > 0, "leaf value not found in the file"
    return blob[:at] + struct.pack("<d", float("nan")) + blob[at + 8 :]


def test_a_nan_leaf_is_a_damaged_file_not_an_internal_error(tmp_path: Path) -> None:
    """CatBoost loads such a file, then refuses to write it out ("JSON writer: invalid float
    value: nan"): that was "unexpected CatBoostError ... report the traceback"."""
    k = _klein(100, 2, seed=7)
    plain = CatBoostClassifier(**PARAMS, allow_writing_files=False).fit(k, k[:, 0] > 0)
    plain.save_model(str(tmp_path / "model.cbm"))
    blob = (tmp_path / "model.cbm").read_bytes()
    (tmp_path / "nan.cbm").write_bytes(_with_nan_leaf(blob, plain.get_leaf_values()[0]))
    code, out, err = cli("convert", tmp_path / "nan.cbm", "--geometry", "klein")
    assert_usage_error(code, err, match="nan.cbm: not a catboost model file, or a damaged one")
    assert "invalid float value: nan" in err and out == ""
    # A hyperbolic estimator's pickle holding such a model.
    model = h.HyperbolicCatBoostClassifier(**PARAMS).fit(_hyperboloid(k), k[:, 0] > 0)
    leaf = model.estimator_.get_leaf_values()[0]
    (tmp_path / "nan.pkl").write_bytes(_with_nan_leaf(pickle.dumps(model), leaf))
    code, out, err = cli("convert", tmp_path / "nan.pkl")
    assert_usage_error(code, err, match="nan.pkl: holds a damaged CatBoost model (")
    # The same model in a .skops file (a zip; the CatBoost model is one member's bytes).
    import zipfile

    import skops.io as sio

    sio.dump(model, tmp_path / "model.skops")
    with (
        zipfile.ZipFile(tmp_path / "model.skops") as source,
        zipfile.ZipFile(tmp_path / "nan.skops", "w") as damaged,
    ):
        found = 0
        for item in source.infolist():
            data = source.read(item.filename)
            if struct.pack("<d", leaf) in data:
                data, found = _with_nan_leaf(data, leaf), found + 1
            damaged.writestr(item, data)
    assert found == 1
    code, out, err = cli("convert", tmp_path / "nan.skops")
    assert_usage_error(code, err, match="nan.skops: holds a damaged CatBoost model (")
    assert not list(tmp_path.glob("*.onnx"))
    # In Python, without the command's child process: an error saying so.
    loaded = CatBoostClassifier()
    loaded.load_model(str(tmp_path / "nan.cbm"))
    with pytest.raises(h.UnsupportedModelError, match="^the CatBoost model is damaged.*nan"):
        h.to_onnx(loaded, input_geometry="klein")


def test_a_cbm_file_that_crashes_catboost_is_one_error(tmp_path: Path) -> None:
    """With this byte flipped (in the trees' split table of this model, for the catboost
    version these tests pin) CatBoost crashes its process loading the file: main's convert
    died with exit 139. Whatever CatBoost does with it, the command answers or refuses."""
    X, y = h.datasets.make_wrapped_normal_mixture(200, 2, 3, random_state=0)
    params = {"iterations": 10, "depth": 3, "verbose": 0, "random_seed": 0, "thread_count": 1}
    model = h.HyperbolicCatBoostClassifier(**params).fit(X, y)
    model.estimator_.save_model(str(tmp_path / "model.cbm"))
    blob = bytearray((tmp_path / "model.cbm").read_bytes())
    blob[9407] ^= 0xFF
    (tmp_path / "bad.cbm").write_bytes(bytes(blob))
    done = cli_process("convert", "bad.cbm", "--geometry", "hyperboloid", cwd=tmp_path)
    assert_usage_error(done.returncode, done.stderr, match="bad.cbm: ")
    assert "damaged" in done.stderr, done.stderr
    assert not (tmp_path / "bad.onnx").exists()


class _CrashOnLoad:
    """Unpickling this reads address 0: the process dies with SIGSEGV, as CatBoost's own
    loading does on some damaged trees."""

    def __reduce__(self) -> tuple:
        return (ctypes.string_at, (0,))


def test_a_pickle_naming_catboost_that_crashes_is_one_error(tmp_path: Path) -> None:
    """Pickles holding CatBoost models are read in a child first, as XGBoost's are: the
    crash ends the child, and the command says the file is damaged (exit 2, not 139)."""
    with (tmp_path / "crash.pkl").open("wb") as f:
        pickle.dump({"catboost": _CrashOnLoad()}, f)
    done = cli_process("convert", "crash.pkl", cwd=tmp_path)
    assert_usage_error(done.returncode, done.stderr, match="crash.pkl: damaged pickle/joblib file")
    assert "crashed (SIGSEGV)" in done.stderr
    assert not list(tmp_path.glob("*.onnx")) and not list(tmp_path.glob(".*"))


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"grow_policy": "Depthwise"}, "SymmetricTree"),
        ({"cat_features": [0]}, "cat_features"),
        ({"loss_function": "Poisson"}, "Poisson"),
    ],
)
def test_unsupported_settings_are_refused(params: dict[str, Any], match: str) -> None:
    k = _klein(100, 2, seed=1)
    with pytest.raises(h.UnsupportedModelError, match=match):
        h.HyperbolicCatBoostRegressor(**PARAMS, **params).fit(_hyperboloid(k), np.abs(k[:, 0]))


def test_writes_no_training_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    k = _klein(100, 2, seed=2)
    h.HyperbolicCatBoostRegressor(**PARAMS).fit(_hyperboloid(k), k[:, 0])
    assert list(tmp_path.iterdir()) == []


BALL = {"input_geometry": "klein", "curvature": -1e-6}
CHECKED = [
    h.HyperbolicCatBoostClassifier(iterations=5, depth=3, verbose=0, thread_count=1, **BALL),
    h.HyperbolicCatBoostRegressor(iterations=5, depth=3, verbose=0, thread_count=1, **BALL),
]


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """Checks that cannot pass, with the reason."""
    return {
        "check_sample_weight_equivalence_on_dense_data": (
            "CatBoost's bootstrap (Bayesian for classifiers, MVS for regressors) draws "
            "per-row weights at random, so weighting a row is only statistically "
            "equivalent to repeating it"
        )
    }


@parametrize_with_checks(CHECKED, expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator: Any, check: Any) -> None:
    check(estimator)


def test_multiclass_labels_follow_catboosts_raw_scores() -> None:
    """CatBoost labels a row by its first largest raw score; two scores one ulp apart
    round to one softmax probability, where an ArgMax of probabilities takes the first
    class. The rows of two classes repeated under each other's label make such rows."""
    from hyp2onnx.datasets import make_wrapped_normal_mixture

    X, y = make_wrapped_normal_mixture(3000, 3, 4, random_state=0)
    a, b = X[y == 0], X[y == 1]
    X = np.concatenate([X, a, b])
    y = np.concatenate([y, np.ones(len(a), int), np.zeros(len(b), int)])
    model = h.HyperbolicCatBoostClassifier(iterations=50, depth=4, verbose=0, thread_count=1)
    model.fit(X, y)
    want = model.predict(X)
    raw = model.estimator_.predict(model._tree_input(X), prediction_type="RawFormulaVal")
    top = np.sort(raw, axis=1)
    assert np.any((top[:, -1] > top[:, -2]) & (top[:, -1] - top[:, -2] < 1e-15))  # near ties
    for encoding in ("fast", "exact", "standard"):
        got = run_onnx(h.to_onnx(model, encoding=encoding), X)["label"]
        assert np.array_equal(got, want), (encoding, np.flatnonzero(got != want)[:5])


def test_one_parse_per_fit_and_none_stale_after_new_borders(tmp_path: Path) -> None:
    """The backend reads a model's JSON once while it does not change it, and reads it
    again after writing new borders: the trees it reads then are the written ones."""
    from hyp2onnx.estimators._catboost import CatBoostBackend

    k = _klein(300, 3, 7)
    model = CatBoostClassifier(**PARAMS, train_dir=str(tmp_path)).fit(k, k[:, 0] > 0.1)
    backend = CatBoostBackend()
    first = backend.read_trees(model)
    assert backend.read_trees(model)[0] is not first[0]  # new arrays ...
    assert backend._model(model) is backend._model(model)  # ... from one parse
    moved = [t.threshold[:1] for t in first]
    step = np.float32(np.finfo(np.float32).eps)  # every border one step up, still ordered
    moved = [(t.astype(np.float32) * (1 + step)).astype(np.float64) for t in moved]
    backend.write_thresholds(model, moved)
    again = np.array([t.threshold[0] for t in backend.read_trees(model)])
    written = np.array([t[0] for t in moved])
    np.testing.assert_array_equal(again, written)
    on_file = _json(model, tmp_path)["features_info"]["float_features"]
    assert [b for f in on_file for b in f["borders"]] == written.tolist()
