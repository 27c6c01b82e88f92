"""What the library and the command line promise on bad input, interruption and memory.

One test per broken promise found by trying hyp2onnx as a new user would
(docs/guarantees.md lists each promise with the test that proves it).
Commands run in-process through ``main(argv)`` unless the point is how
the process itself ends (a crash signal, SIGTERM), which only a
subprocess shows.
"""

from __future__ import annotations

import csv
import os
import pickle
import re
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from _cli import CLI, assert_usage_error, cli, cli_process
from _data import labels, points, targets
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.tree import DecisionTreeClassifier

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.cli.predict import SCORING_BUDGET, chunk_rows_for
from hyp2onnx.errors import InvalidPointError
from hyp2onnx.export import MIN_OPSET, max_opset, read_metadata, to_onnx
from hyp2onnx.verification import run_onnx, verify

pytestmark = pytest.mark.filterwarnings("ignore:.*exported with its own \\(Euclidean\\) thresholds")


def files_in(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Small models, graphs and data shared by the tests (never modified by them)."""
    folder = tmp_path_factory.mktemp("made")
    X, k = points(300, 3, seed=40)
    y = labels(k, 3, seed=40)
    rf = h.HyperbolicRandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, y)
    plain = DecisionTreeClassifier(max_depth=4, random_state=0).fit(k, y)
    for name, obj in [("rf", rf), ("plain", plain)]:
        with (folder / f"{name}.pkl").open("wb") as f:
            pickle.dump(obj, f)
    np.save(folder / "X.npy", X)
    h.save_onnx(rf, folder / "rf32.onnx")
    h.save_onnx(rf, folder / "rf64.onnx", dtype="float64")
    return {"folder": folder, "X": X, "k": k, "y": y, "rf": rf, "plain": plain}


# -- silent wrong answers -------------------------------------------------------------


@pytest.mark.parametrize("bad", [9, 4, -5, 2.5, 2.0, True, "1"])
def test_timelike_dim_outside_the_columns_or_not_an_integer_is_refused(made, bad):
    with pytest.raises(ValueError, match="timelike_dim"):
        to_onnx(made["plain"], input_geometry="hyperboloid", timelike_dim=bad)


@pytest.mark.parametrize("timelike_dim", [0, 2, -1, -4])
def test_every_valid_timelike_dim_exports_the_right_graph(made, timelike_dim):
    k = made["k"]
    X = geometry.from_klein(k, "hyperboloid", -1.0, timelike_dim)
    onx = to_onnx(made["plain"], input_geometry="hyperboloid", timelike_dim=timelike_dim)
    got = run_onnx(onx, X)
    np.testing.assert_array_equal(got["label"], made["plain"].predict(k.astype(np.float32)))


@pytest.mark.parametrize("bad", ["9", "4", "-5", "2.5"])
def test_convert_refuses_a_timelike_dim_outside_the_columns(made, tmp_path, bad):
    out = tmp_path / "out.onnx"
    code, _, err = cli(
        "convert",
        made["folder"] / "plain.pkl",
        "--geometry",
        "hyperboloid",
        "--timelike-dim",
        bad,
        "-o",
        out,
    )
    assert code == 2 and "Traceback" not in err and not out.exists()


@pytest.mark.parametrize("header", [False, True])
def test_a_csv_starting_with_a_byte_order_mark_keeps_its_first_row(made, tmp_path, header):
    X = made["X"][:10]
    text = ("x0,x1,x2,x3\n" if header else "") + "".join(
        ",".join(repr(float(v)) for v in row) + "\n" for row in X
    )
    data = tmp_path / "bom.csv"
    data.write_bytes(b"\xef\xbb\xbf" + text.encode())
    out = tmp_path / "p.csv"
    code, stdout, err = cli("predict", made["folder"] / "rf64.onnx", data, "-o", out)
    assert code == 0, err
    rows = list(csv.reader(out.open()))
    assert len(rows) == 11 and "(10 rows)" in stdout
    np.testing.assert_array_equal([int(r[0]) for r in rows[1:]], made["rf"].predict(X))


def _far_points(made) -> np.ndarray:
    """Hyperboloid points at hyperbolic radius 95: x_0 ~ 1e41 overflows float32, not float64."""
    direction = made["k"][:5] / np.linalg.norm(made["k"][:5], axis=1, keepdims=True)
    return np.hstack([np.cosh(95.0) * np.ones((5, 1)), np.sinh(95.0) * direction])


def test_values_float32_cannot_hold_are_refused_not_cast_to_infinity(made, tmp_path):
    far = _far_points(made)
    graph32 = onnx.load(made["folder"] / "rf32.onnx")
    with pytest.raises(InvalidPointError, match="float32"):
        run_onnx(graph32, far)
    with pytest.raises(InvalidPointError, match="float32"):
        verify(made["rf"], graph32, far)
    np.save(tmp_path / "far.npy", far)
    out = tmp_path / "far.csv"
    code, _, err = cli("predict", made["folder"] / "rf32.onnx", tmp_path / "far.npy", "-o", out)
    assert_usage_error(code, err, match="float64")
    assert files_in(tmp_path) == {"far.npy"}
    # A float64 graph holds them, and answers as the model does.
    graph64 = onnx.load(made["folder"] / "rf64.onnx")
    np.testing.assert_array_equal(run_onnx(graph64, far)["label"], made["rf"].predict(far))


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_predict_without_the_manifold_check_still_refuses_nan_and_infinity(made, tmp_path, value):
    X = made["X"][:20].copy()
    X[7, 1] = value
    np.save(tmp_path / "bad.npy", X)
    out = tmp_path / "bad.csv"
    code, _, err = cli(
        "predict",
        made["folder"] / "rf64.onnx",
        tmp_path / "bad.npy",
        "-o",
        out,
        "--no-manifold-check",
    )
    assert_usage_error(code, err, match="rows 7")
    assert not out.exists()
    with pytest.raises(InvalidPointError, match="NaN or infinity"):
        run_onnx(onnx.load(made["folder"] / "rf64.onnx"), X)


# -- skl2onnx ---------------------------------------------------------------------------


class PoincareToHyperboloid(TransformerMixin, BaseEstimator):
    """A user's own preprocessing step, with its own skl2onnx converter (below)."""

    def fit(self, X, y=None):
        return self

    def transform(self, X):
        return geometry.from_klein(geometry.to_klein(X, "poincare"), "hyperboloid")


def _poincare_to_hyperboloid_converter(scope, operator, container):
    from skl2onnx.algebra.onnx_ops import (
        OnnxAdd,
        OnnxConcat,
        OnnxDiv,
        OnnxMul,
        OnnxReduceSum,
        OnnxSub,
    )

    opv = container.target_opset
    p = operator.inputs[0]
    dtype = np.float32 if p.type.__class__.__name__ == "FloatTensorType" else np.float64
    squares = OnnxMul(p, p, op_version=opv)
    s = OnnxReduceSum(squares, np.array([1], dtype=np.int64), keepdims=1, op_version=opv)
    one = np.array([1.0], dtype=dtype)
    denominator = OnnxSub(one, s, op_version=opv)
    x0 = OnnxDiv(OnnxAdd(one, s, op_version=opv), denominator, op_version=opv)
    xs = OnnxDiv(
        OnnxMul(p, np.array([2.0], dtype=dtype), op_version=opv), denominator, op_version=opv
    )
    OnnxConcat(x0, xs, axis=1, op_version=opv, output_names=operator.outputs[:1]).add_to(
        scope, container
    )


def _poincare_to_hyperboloid_shape(operator):
    n, d = operator.inputs[0].get_first_dimension(), operator.inputs[0].get_second_dimension()
    operator.outputs[0].type = operator.inputs[0].type.__class__([n, d + 1 if d else None])


@pytest.fixture(scope="module")
def pipelines():
    from skl2onnx import update_registered_converter

    h.register_skl2onnx_converters()  # the documented call; import hyp2onnx does not
    update_registered_converter(
        PoincareToHyperboloid,
        "TestPoincareToHyperboloid",
        _poincare_to_hyperboloid_shape,
        _poincare_to_hyperboloid_converter,
    )
    X, k = points(300, 2, "poincare", seed=41)
    y = np.array(["=cmd", "plain", "-1"])[labels(k, 3, seed=41)]
    out = {}
    for name, model in [
        ("forest", h.HyperbolicRandomForestClassifier(n_estimators=3, max_depth=4, random_state=0)),
        ("xgb", h.HyperbolicXGBClassifier(n_estimators=3, max_depth=3)),
    ]:
        steps = [("identity", FunctionTransformer()), ("to_hyperboloid", PoincareToHyperboloid())]
        pipe = Pipeline([*steps, ("model", model)])
        out[name] = pipe.fit(X, y)
    return out, X


@pytest.mark.parametrize("name", ["forest", "xgb"])
@pytest.mark.parametrize(
    "options",
    [
        None,
        {"zipmap": False},
        {"zipmap": "columns"},
        {"nocl": True},
        {"zipmap": False, "nocl": True},
        {"zipmap": False, "output_class_labels": True},
        {"zipmap": False, "encoding": "standard"},
    ],
    ids=str,
)
def test_skl2onnx_converts_classifier_pipelines_with_its_usual_options(pipelines, name, options):
    import onnxruntime as ort
    import skl2onnx

    pipes, P = pipelines
    pipe = pipes[name]
    model = pipe.steps[-1][1]
    P64 = P.astype(np.float64)
    onx = skl2onnx.to_onnx(pipe, P64[:1], options={id(model): options} if options else None)
    session = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    got = dict(zip([o.name for o in session.get_outputs()], session.run(None, {"X": P64})))
    options = options or {}
    classes = model.classes_
    want_label = pipe.predict(P64)
    if options.get("nocl"):
        want_label = np.searchsorted(classes, want_label)
    want_proba = pipe.predict_proba(P64)
    label = got.pop("output_label" if options.get("zipmap", True) is not False else "label")
    np.testing.assert_array_equal(label, want_label)
    zipmap = options.get("zipmap", True)
    if zipmap is True:
        keys = np.arange(len(classes)) if options.get("nocl") else classes
        proba = np.array([[row[c] for c in keys] for row in got["output_probability"]])
        np.testing.assert_allclose(proba, want_proba, rtol=1e-6)  # ZipMap holds float32
    elif zipmap == "columns":
        proba = np.column_stack([got[f"s{c}"] for c in classes])
        np.testing.assert_allclose(proba, want_proba, rtol=1e-6)
    else:
        np.testing.assert_allclose(
            got["probabilities"], want_proba, rtol=1e-6 if name == "xgb" else 0
        )
        if options.get("output_class_labels"):
            np.testing.assert_array_equal(got["class_labels"], classes)


def test_skl2onnx_refuses_options_it_does_not_know(made):
    import skl2onnx

    h.register_skl2onnx_converters()

    with pytest.raises(NameError, match="not in"):
        skl2onnx.to_onnx(made["rf"], made["X"][:1], options={id(made["rf"]): {"zipmapp": False}})


# -- opsets ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def opset_models():
    X, k = points(200, 3, "poincare", seed=42)
    y = labels(k, 3, seed=42)
    return X, [
        h.HyperbolicRandomForestClassifier(
            n_estimators=2, max_depth=3, input_geometry="poincare", random_state=0
        ).fit(X, y),
        h.HyperbolicHouseholderTreeClassifier(max_depth=3, input_geometry="poincare").fit(X, y),
    ]


@pytest.mark.parametrize("opset", range(MIN_OPSET, max_opset() + 1))
def test_every_accepted_opset_exports_graphs_that_run_and_agree(opset_models, opset):
    X, models = opset_models
    for model in models:
        for encoding in ("exact", "compat", "standard"):
            onx = to_onnx(model, encoding=encoding, target_opset=opset)
            assert {o.domain: o.version for o in onx.opset_import}[""] == opset
            assert verify(model, onx, X).ok, (type(model).__name__, encoding)


@pytest.mark.parametrize("opset", [MIN_OPSET - 1, max_opset() + 1, 15.5, True])
def test_opsets_outside_the_range_are_refused_with_the_range(made, opset):
    with pytest.raises(ValueError, match=f"between {MIN_OPSET} and {max_opset()}|integer"):
        to_onnx(made["rf"], target_opset=opset)


def test_convert_accepts_every_opset_and_refuses_the_others(made, tmp_path):
    for opset in range(MIN_OPSET, max_opset() + 1):
        out = tmp_path / f"o{opset}.onnx"
        code, _, err = cli(
            "convert",
            made["folder"] / "rf.pkl",
            "--opset",
            opset,
            "-o",
            out,
            "--encoding",
            "standard",
        )
        assert code == 0 and out.exists(), err
    for opset in (MIN_OPSET - 1, max_opset() + 1):
        code, _, err = cli(
            "convert", made["folder"] / "rf.pkl", "--opset", opset, "-o", tmp_path / "bad.onnx"
        )
        assert code == 2 and "Traceback" not in err and not (tmp_path / "bad.onnx").exists()


# -- odd label sets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model",
    [
        h.HyperbolicXGBClassifier(n_estimators=2),
        h.HyperbolicLGBMClassifier(n_estimators=2, verbose=-1),
    ],
    ids=["xgboost", "lightgbm"],
)
def test_single_class_boosting_models_are_refused_at_export(made, model, tmp_path):
    model.fit(made["X"], np.full(len(made["X"]), 7))
    for encoding in ("exact", "compat", "standard"):
        with pytest.raises(ValueError, match="two classes"):
            to_onnx(model, encoding=encoding)
    with (tmp_path / "one.pkl").open("wb") as f:
        pickle.dump(model, f)
    code, _, err = cli("convert", tmp_path / "one.pkl")
    assert_usage_error(code, err, match="two classes")
    assert files_in(tmp_path) == {"one.pkl"}


def test_single_class_scikit_learn_models_export_exactly(made):
    model = h.HyperbolicRandomForestClassifier(n_estimators=2, random_state=0)
    model.fit(made["X"], np.full(len(made["X"]), "only"))
    for encoding in ("exact", "compat", "standard"):
        onx = to_onnx(model, encoding=encoding)
        assert verify(model, onx, made["X"]).ok
        assert run_onnx(onx, made["X"])["probabilities"].shape == (len(made["X"]), 1)


# -- tolerances -------------------------------------------------------------------------------------


def test_convert_check_is_relative_for_large_values(tmp_path):
    X, k = points(300, 3, seed=43)
    model = h.HyperbolicRandomForestRegressor(n_estimators=10, max_depth=5, random_state=0)
    model.fit(X, 1000.0 + 300.0 * targets(k))
    with (tmp_path / "reg.pkl").open("wb") as f:
        pickle.dump(model, f)
    np.save(tmp_path / "X.npy", X)
    report = verify(model, to_onnx(model, encoding="compat"), X)
    assert report.ok and report.max_abs_diff["variable"] > 1e-5  # beyond the old absolute bound
    compat = [
        "convert",
        tmp_path / "reg.pkl",
        "--encoding",
        "compat",
        "--check",
        tmp_path / "X.npy",
    ]
    code, stdout, err = cli(*compat)
    assert code == 0 and "OK" in stdout, err
    strict = tmp_path / "strict.onnx"
    code, _, _ = cli(*compat, "--atol", "1e-9", "-o", strict)
    assert code == 1 and not strict.exists()
    code, _, _ = cli(*compat, "--atol", "0", "--rtol", "1e-5", "-o", strict)
    assert code == 0 and strict.exists()


def test_verify_counts_values_beyond_atol_plus_rtol(made):
    X, k = points(200, 2, seed=44)
    model = h.HyperbolicDecisionTreeRegressor(max_depth=4).fit(X, 5000.0 * targets(k))
    onx = to_onnx(model, encoding="compat")
    got = run_onnx(onx, X)["variable"][:, 0].astype(np.float64)
    want = model.predict(X.astype(np.float32))
    delta = np.abs(got - want)
    rtol = float(np.median(delta / np.abs(want)))
    report = verify(model, onx, X, atol=0.0, rtol=rtol)
    assert report.beyond_tolerance["variable"] == int(np.sum(delta > rtol * np.abs(want)))
    assert not report.ok and verify(model, onx, X, atol=0.0, rtol=2 * delta.max()).ok


# -- crashes and tracebacks ------------------------------------------------------------------------


def _damaged_native_files(folder: Path) -> list[Path]:
    import lightgbm
    import xgboost

    X, k = points(200, 3, seed=45)
    y = labels(k, 3, seed=45)
    xgb = xgboost.XGBClassifier(n_estimators=3, max_depth=3).fit(k, y)
    lgb = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1).fit(k, y)
    xgb.save_model(folder / "m.ubj")
    xgb.save_model(folder / "m.json")
    lgb.booster_.save_model(str(folder / "m.txt"))
    damaged = []
    for suffix, cut in [(".ubj", 200), (".json", 3000), (".txt", 1500)]:
        data = (folder / f"m{suffix}").read_bytes()
        path = folder / f"cut{cut}{suffix}"
        path.write_bytes(data[:cut])
        damaged.append(path)
    return damaged


def test_damaged_xgboost_and_lightgbm_files_give_one_error_not_a_crash(tmp_path):
    """XGBoost segfaults on a truncated .ubj, LightGBM aborts on a damaged .txt: not our process."""
    damaged = _damaged_native_files(tmp_path)
    for path in damaged:
        code, stdout, err = cli("convert", path, "--geometry", "hyperboloid")
        assert_usage_error(code, err, match=path.name)
        assert stdout == ""
    # The whole command, as a process: ends with exit status 2, not a signal.
    result = cli_process("convert", damaged[0].name, "--geometry", "hyperboloid", cwd=tmp_path)
    assert_usage_error(result.returncode, result.stderr, match="crashed reading it: SIGSEGV")
    assert not list(tmp_path.glob("*.onnx")) and not list(tmp_path.glob(".*"))


@pytest.mark.parametrize(
    "args",
    [
        ["convert", "."],
        ["convert", "/"],
        ["convert", ".."],
        ["predict", "{rf}", "/"],
        ["predict", "{rf}", "."],
        ["verify", ".", "{rf}", "--data", "."],
        ["inspect", "/"],
    ],
    ids=lambda a: " ".join(a),
)
def test_folders_given_as_files_are_usage_errors(made, args):
    code, _, err = cli(*[a.format(rf=made["folder"] / "rf32.onnx") for a in args])
    assert_usage_error(code, err)


@pytest.mark.parametrize("content", [b"", b"\x00", b"\n\x00"], ids=["empty", "nul", "newline-nul"])
def test_inspect_and_predict_refuse_an_onnx_file_with_no_graph(made, tmp_path, content):
    graph = tmp_path / "empty.onnx"
    graph.write_bytes(content)
    code, stdout, err = cli("inspect", graph)
    assert_usage_error(code, err, match="ONNX")
    assert stdout == ""
    code, _, err = cli("predict", graph, made["folder"] / "X.npy", "-o", tmp_path / "p.csv")
    assert_usage_error(code, err)
    assert files_in(tmp_path) == {"empty.onnx"}


def test_main_turns_an_unanticipated_error_into_one_line(monkeypatch):
    from hyp2onnx.cli import inspect as inspect_command

    def broken(path):
        raise KeyError("a bug")

    monkeypatch.setattr(inspect_command, "inspect_file", broken)
    code, _, err = cli("inspect", "any.onnx")
    assert code == 2 and err.startswith("error: unexpected KeyError") and "Traceback" not in err


# -- resources and interruption -----------------------------------------------------------------------


def test_predict_sizes_chunks_from_the_graph_and_scores_identically(made, tmp_path):
    X, k = points(400, 3, seed=46)
    model = h.HyperbolicRandomForestClassifier(n_estimators=60, max_depth=6, random_state=0)
    model.fit(X, labels(k, 8, seed=46))
    onx = to_onnx(model, encoding="standard", dtype="float64")
    metadata = read_metadata(onx)
    rows = chunk_rows_for(onx, metadata, 10**9)
    assert rows * (48 * 60 * 8 + 4096) <= SCORING_BUDGET < (rows + 1) * (48 * 60 * 8 + 4096)
    assert chunk_rows_for(onx, metadata, 50) == 50  # a smaller request is kept
    exact = read_metadata(to_onnx(model))
    assert chunk_rows_for(onx, exact, 10**9) > rows  # the exact encoding is narrower per row
    h.save_onnx(onx, tmp_path / "std.onnx")
    np.save(tmp_path / "X.npy", X)
    for chunk in ("7", "65536"):
        out = tmp_path / f"p{chunk}.csv"
        code, _, err = cli(
            "predict", tmp_path / "std.onnx", tmp_path / "X.npy", "-o", out, "--chunk-rows", chunk
        )
        assert code == 0, err
    assert (tmp_path / "p7.csv").read_text() == (tmp_path / "p65536.csv").read_text()
    rows = list(csv.reader((tmp_path / "p7.csv").open()))[1:]
    np.testing.assert_array_equal([int(r[0]) for r in rows], model.predict(X))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_terminated_predict_leaves_no_file_behind(made, tmp_path, signum):
    # 600k rows scored 10 at a time: 60k graph calls, many seconds even on a quiet machine,
    # so the signal always lands while predict is writing (it is ended right after).
    big = np.repeat(made["X"], 2000, axis=0)
    np.save(tmp_path / "big.npy", big)
    out = tmp_path / "big.csv"
    process = subprocess.Popen(
        [
            *CLI,
            "predict",
            str(made["folder"] / "rf32.onnx"),
            "big.npy",
            "-o",
            "big.csv",
            "--chunk-rows",
            "10",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        # A run under nohup ignores SIGHUP, and the CLI rightly keeps an ignored
        # signal ignored: give the child the default disposition the test is about.
        preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".big.csv.*")) and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    assert list(tmp_path.glob(".big.csv.*")), "predict never started writing"
    process.send_signal(signum)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, err
    assert "terminated by" in err and "Traceback" not in err
    assert files_in(tmp_path) == {"big.npy"} and not out.exists()


def test_formula_like_labels_are_escaped_in_prediction_csvs(tmp_path):
    X, k = points(300, 2, seed=47)
    names = np.array(["=1+1", "+cmd", "-2", "@SUM(A1)", "\tx", "\rz", "plain, with comma"])
    y = names[labels(k, len(names), seed=47, noise=0.0)]
    model = h.HyperbolicDecisionTreeClassifier(random_state=0).fit(X, y)
    h.save_onnx(model, tmp_path / "m.onnx", dtype="float64")
    np.save(tmp_path / "X.npy", X)
    code, _, err = cli("predict", tmp_path / "m.onnx", tmp_path / "X.npy", "-o", tmp_path / "p.csv")
    assert code == 0, err
    with (tmp_path / "p.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    got = [r[0] for r in rows[1:]]
    want = model.predict(X)
    escaped = ["'" + s if s[0] in "=+-@\t\r" else s for s in want]
    assert got == escaped
    assert {s for s in got if s} and all(
        not s.startswith(("=", "+", "-", "@", "\t", "\r")) for s in got
    )
    assert rows[0][1:] == [f"probability_{c}" for c in model.classes_]  # headers never start so


def test_an_output_that_cannot_be_created_is_named_not_its_temporary_file(made, tmp_path):
    """The write goes through a temporary file beside the output; the error names the output."""
    unwritable = [tmp_path / "no-folder" / "x.csv"]
    if Path("/proc").is_dir():
        unwritable.append(Path("/proc/x.csv"))  # a folder where no file can be created
    for path in unwritable:
        f = made["folder"]
        code, _, err = cli("predict", f / "rf32.onnx", f / "X.npy", "-o", path, "--force")
        assert_usage_error(code, err, match=f"{path}:")
        assert ".tmp" not in err and f".{path.name}." not in err, err
        with pytest.raises(OSError, match=re.escape(str(path))) as raised:
            h.save_onnx(made["rf"], path)
        assert ".tmp" not in str(raised.value)


def test_a_symbolic_link_is_written_through_and_a_fifo_is_never_replaced(made, tmp_path):
    """The API's atomic writes follow the CLI's rule: only a regular file is replaced."""
    (tmp_path / "target.onnx").write_bytes(b"old")
    (tmp_path / "link.onnx").symlink_to("target.onnx")
    h.save_onnx(made["rf"], tmp_path / "link.onnx")
    assert (tmp_path / "link.onnx").is_symlink()
    assert onnx.load(str(tmp_path / "target.onnx")).graph.input
    (tmp_path / "dangling.onnx").symlink_to("nowhere.onnx")
    with pytest.raises(OSError, match="dangling.onnx: is a symbolic link to nowhere.onnx"):
        h.save_onnx(made["rf"], tmp_path / "dangling.onnx")
    assert not (tmp_path / "nowhere.onnx").exists()
    os.mkfifo(tmp_path / "fifo")
    received: list[bytes] = []

    def read() -> None:
        with open(tmp_path / "fifo", "rb") as f:
            received.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    h.save_onnx(made["rf"], tmp_path / "fifo", overwrite=False)  # nothing is replaced
    reader.join(10)
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)
    assert onnx.load_from_string(received[0]).graph.input


@pytest.mark.parametrize(
    "params", [{}, {"splits": "axis", "threshold_law": "klein"}], ids=["own-trees", "sklearn"]
)
def test_inspect_counts_the_nodes_of_isolation_forests(made, tmp_path, params):
    """Oracle: the Python model's own node arrays. Walked trees have no tree operator (the
    count was 0); trees held in both branches of an If were counted twice."""
    model = h.HyperbolicIsolationForest(n_estimators=3, random_state=0, **params).fit(made["X"])
    h.save_onnx(model, tmp_path / "iso.onnx")
    code, out, err = cli("inspect", tmp_path / "iso.onnx", "--json")
    assert code == 0, err
    import json

    expected = sum(len(tree.left) for tree in model.trees_)
    assert json.loads(out)["tree_nodes"] == expected > 3


def test_an_npz_archive_named_npy_is_refused_as_an_archive(made, tmp_path):
    np.savez(tmp_path / "points", made["X"])  # writes points.npz
    (tmp_path / "points.npz").rename(tmp_path / "points.npy")
    f = made["folder"]
    code, _, err = cli(
        "predict", f / "rf32.onnx", tmp_path / "points.npy", "-o", tmp_path / "p.csv"
    )
    assert_usage_error(code, err, match="points.npy: is a .npz archive of 1 array(s) (arr_0)")
    assert "None" not in err
    assert not (tmp_path / "p.csv").exists()


def test_an_open_descriptor_is_written_in_place_as_a_stream(made, tmp_path):
    """``-o /proc/self/fd/1`` (what ``/dev/stdout`` leads to): the output goes through the
    descriptor, wherever it points, and the report line to stderr. Tested through /proc,
    never /dev/stdout: before the fix a rename over /dev/stdout would replace that link."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("no /proc/self/fd here")
    f = made["folder"]
    command = [*CLI, "predict", str(f / "rf32.onnx"), str(f / "X.npy"), "-o", "/proc/self/fd/1"]
    piped = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0, piped.stderr
    expected = (tmp_path / "expected.csv").resolve()
    code, _, err = cli("predict", f / "rf32.onnx", f / "X.npy", "-o", expected)
    assert code == 0, err
    assert piped.stdout == expected.read_text()  # the CSV alone: no report line in it
    assert "wrote /proc/self/fd/1" in piped.stderr
    # Into a file the caller opened for appending (a shell's >>): appended, not replaced.
    out = tmp_path / "log.csv"
    out.write_text("earlier line\n")
    inode = out.stat().st_ino
    with out.open("a") as appended:
        done = subprocess.run(command, stdout=appended, stderr=subprocess.PIPE, timeout=300)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "earlier line\n" + expected.read_text()
    assert out.stat().st_ino == inode
