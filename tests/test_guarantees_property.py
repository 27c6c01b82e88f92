"""Property test of the contract on bad input, for the API and every command.

Hypothesis generates what a user might hand over to ``convert``, ``verify``,
``inspect`` and ``predict``: arrays with NaN,
infinities, huge and tiny values, odd shapes and dtypes; data and model
files of every supported format, damaged; odd label sets; every parameter
value the commands accept. The contract: a correct answer, or exit status
2 (a ValueError in Python) with one or two ``error:`` lines, no
traceback, no crash signal and no file left behind.

Commands run in-process through ``main(argv)`` (fast); a few damaged files
also go through a real process, where only a crash signal would show.
Example counts are kept small so the whole file runs in well under a
minute.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import pickle
import stat
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from _cli import CLI, assert_usage_error, cli
from _data import coded_model, isometric_copy, labels, points, random_isometry
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hyp2onnx as h
from hyp2onnx.export import MIN_OPSET, max_opset
from hyp2onnx.geometry import CENTRED_RADIUS
from hyp2onnx.verification import run_onnx, verify

SETTINGS = dict(
    deadline=None,
    derandomize=True,  # the same examples every run: a failure here is reproducible
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
pytestmark = pytest.mark.filterwarnings("ignore:.*exported with its own \\(Euclidean\\) thresholds")


def assert_contract(code: int, err: str, folder: Path, before: set[str], output: Path | None):
    """Exit 0/1 with the output as the command says, or 2 explained in one or two lines."""
    event(f"exit status {code}")  # --hypothesis-show-statistics: both outcomes occur
    assert "Traceback" not in err and "unexpected" not in err, err
    assert code in (0, 1, 2), (code, err)
    left = {p.name for p in folder.iterdir()} - before
    if code == 0:
        assert left <= ({output.name} if output is not None else set()), left
        return
    if code == 2:
        assert_usage_error(code, err)
    assert not left, left  # nothing written on failure, no temporary file either


# -- shared files ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict:
    import lightgbm
    import skops.io as sio
    import xgboost
    from sklearn.tree import DecisionTreeRegressor

    folder = tmp_path_factory.mktemp("world")
    X, k = points(200, 3, seed=50)
    y = labels(k, 3, seed=50)
    rf = h.HyperbolicRandomForestClassifier(n_estimators=3, max_depth=4, random_state=0).fit(X, y)
    odd = np.array(["=SUM(A1)", "-x", "b, c"])[y]
    rf_odd = h.HyperbolicDecisionTreeClassifier(max_depth=4, random_state=0).fit(X, odd)
    reg = h.HyperbolicDecisionTreeRegressor(max_depth=4, random_state=0).fit(X, 1e3 * k[:, 0])
    graphs = {}
    for name, model, kwargs in [
        ("rf32", rf, {}),
        ("rf64", rf, {"dtype": "float64"}),
        ("rf_std", rf, {"encoding": "standard"}),
        ("odd", rf_odd, {"dtype": "float64"}),
        ("reg", reg, {"encoding": "compat"}),
    ]:
        h.save_onnx(model, folder / f"{name}.onnx", **kwargs)
        graphs[name] = model
    for name, model in [("rf", rf), ("reg", reg)]:
        with (folder / f"{name}.pkl").open("wb") as f:
            pickle.dump(model, f)
    sio.dump(rf, folder / "rf.skops")
    with (folder / "plain.pkl").open("wb") as f:
        pickle.dump(DecisionTreeRegressor(max_depth=3, random_state=0).fit(k, k[:, 1]), f)
    xgb = xgboost.XGBClassifier(n_estimators=2, max_depth=2).fit(k, y)
    xgb.save_model(folder / "plain.json")
    xgb.save_model(folder / "plain.ubj")
    lightgbm.LGBMClassifier(n_estimators=2, num_leaves=4, verbose=-1).fit(k, y).booster_.save_model(
        str(folder / "plain.txt")
    )
    np.save(folder / "X.npy", X)
    np.savetxt(folder / "X.csv", X, delimiter=",")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({f"x{i}": X[:, i] for i in range(X.shape[1])}), folder / "X.parquet")
    return {"folder": folder, "X": X, "graphs": graphs, "rf": rf}


# -- arrays --------------------------------------------------------------------------------------

SPECIAL = [np.nan, np.inf, -np.inf, 1e300, -1e300, 3.5e38, 1e-320, -1e-320, 0.0, -0.0, 1e20]


@st.composite
def point_arrays(draw, n_columns: int = 4) -> np.ndarray:
    """Mostly valid hyperboloid points with special values put in, or arbitrary arrays."""
    kind = draw(st.sampled_from(["points", "points", "arbitrary", "shape"]))
    if kind == "shape":
        shape = draw(st.sampled_from([(0,), (4,), (0, 4), (3, 0), (2, 3), (2, 5), (1, 2, 4)]))
        dtype = draw(st.sampled_from([np.float64, np.int64, np.bool_, np.complex128, np.float16]))
        return np.zeros(shape, dtype=dtype) + (1 if dtype is not np.bool_ else True)
    if kind == "arbitrary":
        dtype = draw(st.sampled_from([np.float64, np.float32, np.int64, np.int8]))
        return draw(hnp.arrays(dtype, (draw(st.integers(1, 6)), n_columns)))
    n = draw(st.integers(1, 12))
    X, _ = points(
        n,
        n_columns - 1,
        seed=draw(st.integers(0, 1000)),
        max_radius=draw(st.sampled_from([0.1, 3.0, 30.0, 95.0])),
    )
    for _ in range(draw(st.integers(0, 3))):
        X[draw(st.integers(0, n - 1)), draw(st.integers(0, n_columns - 1))] = draw(
            st.sampled_from(SPECIAL)
        )
    return X.astype(draw(st.sampled_from([np.float64, np.float64, np.float32])))


@settings(max_examples=40, **SETTINGS)
@given(X=point_arrays())
def test_the_api_answers_as_the_model_or_refuses(world, X):
    rf = world["rf"]
    for name in ("rf32", "rf64"):
        graph = onnx.load(world["folder"] / f"{name}.onnx")
        dtype = np.float32 if name == "rf32" else np.float64
        try:
            report = verify(rf, graph, X)
        except ValueError:
            refused = True
        else:
            refused = False
            assert report.ok, report
        try:
            got = run_onnx(graph, X)
        except ValueError:
            continue
        # The graph ran: the values were finite in its dtype. Where the model takes them
        # too, the labels agree (verify checked the probabilities).
        if not refused:
            np.testing.assert_array_equal(got["label"], rf.predict(np.asarray(X).astype(dtype)))


# -- predict ------------------------------------------------------------------------------------


def _write_data(folder: Path, X: np.ndarray, fmt: str) -> Path:
    path = folder / f"data{fmt.split('-')[0]}"
    if fmt == ".npy":
        np.save(path, X)
    elif fmt.startswith(".csv"):
        body = "".join(
            ",".join(repr(v) for v in np.atleast_1d(row).tolist()) + "\n"
            for row in np.atleast_2d(X.astype(np.float64))
        )
        text = ("a,b,c,d\n" if fmt == ".csv-header" else "") + body
        path.write_bytes((b"\xef\xbb\xbf" if fmt == ".csv-bom" else b"") + text.encode())
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        X2 = np.atleast_2d(X.astype(np.float64))
        pq.write_table(pa.table({f"x{i}": X2[:, i] for i in range(X2.shape[1])}), path)
    return path


@settings(max_examples=40, **SETTINGS)
@given(
    X=point_arrays(),
    fmt=st.sampled_from([".npy", ".csv", ".csv-header", ".csv-bom", ".parquet"]),
    graph=st.sampled_from(["rf32", "rf64", "rf_std", "odd", "reg"]),
    chunk_rows=st.sampled_from([1, 3, 65536]),
    no_check=st.booleans(),
)
def test_predict_writes_the_right_rows_or_refuses_cleanly(
    world, X, fmt, graph, chunk_rows, no_check
):
    if fmt != ".npy" and (X.ndim != 2 or X.shape[1] == 0 or X.dtype.kind == "c"):
        X = np.zeros((1, 4))  # other formats cannot hold these shapes/dtypes
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        data = _write_data(folder, X, fmt)
        before = {p.name for p in folder.iterdir()}
        out = folder / "p.csv"
        args = [
            "predict",
            world["folder"] / f"{graph}.onnx",
            data,
            "-o",
            out,
            "--chunk-rows",
            str(chunk_rows),
        ]
        code, _, err = cli(*args, *(["--no-manifold-check"] if no_check else []))
        assert_contract(code, err, folder, before, out)
        if graph in ("rf32", "rf64"):  # verify reads the same file: agrees, or refuses it
            v_code, _, v_err = cli(
                "verify",
                world["folder"] / "rf.pkl",
                world["folder"] / f"{graph}.onnx",
                "--data",
                data,
            )
            assert_contract(v_code, v_err, folder, before | {out.name}, None)
            assert v_code in (0, 2), v_err
        if code != 0:
            return
        with out.open(newline="") as f:
            rows = list(csv.reader(f))[1:]
        assert len(rows) == len(X)
        model = world["graphs"][graph]
        dtype = np.float32 if graph in ("rf32", "rf_std", "reg") else np.float64
        Xt = np.asarray(X, dtype=np.float64).astype(dtype)
        if no_check:
            return  # off-manifold rows were scored as asked; only finite ones got in
        if graph == "reg":
            np.testing.assert_allclose([float(r[0]) for r in rows], model.predict(Xt), rtol=1e-5)
        else:
            want = [("'" + s if s[:1] in "=+-@" else s) for s in map(str, model.predict(Xt))]
            assert [r[0] for r in rows] == want


# -- convert: every parameter value ------------------------------------------------------------


@settings(max_examples=30, **SETTINGS)
@given(
    dtype=st.sampled_from(["float32", "float64"]),
    encoding=st.sampled_from(["exact", "compat", "standard"]),
    opset=st.one_of(st.none(), st.integers(MIN_OPSET - 2, max_opset() + 2)),
    geometry=st.sampled_from([None, "hyperboloid", "poincare", "klein"]),
    curvature=st.sampled_from([None, -1.0, -0.25, -1e-300, -1e300, 0.0, 2.0]),
    timelike_dim=st.sampled_from([None, 0, 1, -1, 3, 4, -5, 100]),
    row_blocks=st.booleans(),
    model=st.sampled_from(["rf.pkl", "plain.pkl", "reg.pkl"]),
)
def test_convert_takes_every_parameter_value_or_refuses(
    world, dtype, encoding, opset, geometry, curvature, timelike_dim, row_blocks, model
):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        before: set[str] = set()
        out = folder / "m.onnx"
        args = [
            "convert",
            world["folder"] / model,
            "-o",
            out,
            "--dtype",
            dtype,
            "--encoding",
            encoding,
        ]
        for option, value in [
            ("--opset", opset),
            ("--geometry", geometry),
            ("--curvature", curvature),
            ("--timelike-dim", timelike_dim),
        ]:
            if value is not None:
                args += [option, str(value)]
        if not row_blocks:
            args.append("--no-row-blocks")
        if geometry in (None, "hyperboloid") and model != "plain.pkl":
            args += ["--check", world["folder"] / "X.npy"]  # the data fits the hyperbolic models
        code, _, err = cli(*args)
        if code == 0:
            assert out.exists()
        assert_contract(code, err, folder, before, out)
        assert code in (0, 2), err  # --check never disagrees with a graph hyp2onnx wrote


# -- damaged files of every format -----------------------------------------------------------------

FILES = {
    # file: the command that reads it
    "rf.pkl": ["convert", "{f}", "-o", "{out}.onnx"],
    "rf.skops": ["convert", "{f}", "-o", "{out}.onnx"],
    "plain.json": ["convert", "{f}", "--geometry", "klein", "-o", "{out}.onnx"],
    "plain.ubj": ["convert", "{f}", "--geometry", "klein", "-o", "{out}.onnx"],
    "plain.txt": ["convert", "{f}", "--geometry", "klein", "-o", "{out}.onnx"],
    "rf32.onnx": ["predict", "{f}", "{X}", "-o", "{out}.csv"],
    "rf64.onnx": ["verify", "{m}", "{f}", "--data", "{X}"],
    "rf_std.onnx": ["inspect", "{f}"],
    "reg.pkl": ["verify", "{f}", "{r}", "--data", "{X}"],
    "X.npy": ["predict", "{g}", "{f}", "-o", "{out}.csv"],
    "X.csv": ["predict", "{g}", "{f}", "-o", "{out}.csv"],
    "X.parquet": ["predict", "{g}", "{f}", "-o", "{out}.csv"],
}
NATIVE = {"plain.json", "plain.ubj", "plain.txt"}  # each read costs a child process


@st.composite
def damaged(draw, names: list[str]) -> tuple[str, bytes]:
    name = draw(st.sampled_from(names))
    return (
        name,
        draw(st.sampled_from(["truncate", "flip", "insert", "zero"])),
        draw(st.floats(0.0, 1.0)),
        draw(st.binary(min_size=1, max_size=8)),
    )


def _damage(data: bytes, how: str, where: float, junk: bytes) -> bytes:
    i = min(int(where * len(data)), len(data) - 1)
    if how == "truncate":
        return data[:i]
    if how == "flip":
        return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]
    if how == "insert":
        return data[:i] + junk + data[i:]
    return b"\x00" * len(data)


def _damaged_command(world, folder: Path, case) -> tuple[list[str], Path]:
    name, how, where, junk = case
    path = folder / f"damaged{Path(name).suffix}"
    path.write_bytes(_damage((world["folder"] / name).read_bytes(), how, where, junk))
    out = folder / "out"
    command = [
        part.format(
            f=path,
            out=out,
            X=world["folder"] / "X.npy",
            g=world["folder"] / "rf64.onnx",
            m=world["folder"] / "rf.pkl",
            r=world["folder"] / "reg.onnx",
        )
        for part in FILES[name]
    ]
    return command, path


def _check_damaged(code: int, err: str, folder: Path, command: list[str]) -> None:
    before = {p.name for p in folder.iterdir() if not p.name.startswith("out.")}
    output = Path(command[command.index("-o") + 1]) if "-o" in command else None
    assert_contract(code, err, folder, before, output)


def _run_damaged(world, case) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        command, _ = _damaged_command(world, folder, case)
        code, _, err = cli(*command)
        _check_damaged(code, err, folder, command)


@settings(max_examples=40, **SETTINGS)
@given(case=damaged(sorted(set(FILES) - NATIVE)))
def test_damaged_files_give_an_answer_or_one_error(world, case):
    _run_damaged(world, case)


@settings(max_examples=4, **SETTINGS)
@given(case=damaged(sorted(NATIVE)))
def test_damaged_native_model_files_give_an_answer_or_one_error(world, case):
    _run_damaged(world, case)


@settings(max_examples=3, **SETTINGS)
@given(case=damaged(sorted(NATIVE | {"rf32.onnx", "X.npy"})))
def test_no_damaged_file_ends_the_process_with_a_signal(world, case):
    """The same, through a real process: a crash would show as a negative return code."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        command, _ = _damaged_command(world, folder, case)
        done = subprocess.run(
            [*CLI, *command],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
            cwd=folder,
        )
        assert done.returncode >= 0, (case, done.returncode, done.stderr[-500:])
        _check_damaged(done.returncode, done.stderr, folder, command)


# -- overflow, large codes and far points through verify (issue 23) ------------------------------
#
# Oracles written here in plain numpy: a hyperboloid row is on the manifold iff
# x_0^2 - |x_s|^2 = 1 holds to 1e-5 on the row divided by its largest value (no
# square overflows); a code is valid iff it is an integer in [0, 2**31).


def _off_hyperboloid(X: np.ndarray) -> np.ndarray:
    m = np.abs(X).max(axis=1, keepdims=True)
    m[m == 0] = 1.0
    Y = X / m
    with np.errstate(over="ignore", divide="ignore"):
        r2 = (1.0 / m[:, 0]) ** 2
    q = Y[:, 0] ** 2 - (Y[:, 1:] ** 2).sum(axis=1)
    return (X[:, 0] <= 0) | ~(np.abs(q - r2) <= 1e-5 * (Y**2).sum(axis=1))


@st.composite
def overflowing_arrays(draw) -> np.ndarray:
    """Valid points with some rows replaced by finite rows whose squares overflow float64."""
    n = draw(st.integers(1, 6))
    X, _ = points(n, 3, seed=draw(st.integers(0, 1000)))
    for _ in range(draw(st.integers(1, 3))):
        scale = 10.0 ** draw(st.floats(154.5, 308.0))
        row = [scale * draw(st.floats(0.0, 1.0)) for _ in range(4)]
        row[0] = scale  # x_0 the largest or as large: passes the x_0 > 0 test
        X[draw(st.integers(0, n - 1))] = row
    return X


@settings(max_examples=40, **SETTINGS)
@given(X=overflowing_arrays())
def test_overflowing_finite_points_are_refused_by_verify_unless_on_the_manifold(world, X):
    rf = world["rf"]
    off = _off_hyperboloid(X).any()
    for name in ("rf32", "rf64"):
        graph = onnx.load(world["folder"] / f"{name}.onnx")
        try:
            report = verify(rf, graph, X)
        except ValueError:
            continue
        assert not off, f"verify answered for rows off the hyperboloid: {X!r}"
        assert report.ok, report
    if not off:  # then the Klein coordinates stay in the ball, up to the tolerance
        k = h.geometry.to_klein(X)
        assert ((k**2).sum(axis=1) <= (1 + 1e-5) / (1 - 1e-5)).all()


#: Codes around float32's exact-integer limit and around the 32-bit limit, and invalid ones.
NEAR_CODES = [
    *range((1 << 24) - 2, (1 << 24) + 4),
    *range((1 << 31) - 3, (1 << 31) + 2),
    -1,
    2.5,
    0,
    1,
]


@pytest.fixture(scope="module")
def coded_models() -> dict:
    X, k = points(300, 2, seed=21)
    rng = np.random.default_rng(21)
    out = {}
    for name, codes in [
        ("lgbm_2_24", [(1 << 24) - 1, 1 << 24, (1 << 24) + 1, (1 << 24) + 3]),
        ("tree_2_31", [0, (1 << 31) - 2, (1 << 31) - 1]),
    ]:
        # LightGBM writes a 2**31-bit set for code 2**31 - 1: scikit-learn splits codes as numbers
        learner = "lightgbm" if name.startswith("lgbm") else "sklearn"
        model, rows = coded_model(
            X, k, codes, codes[1], rng, seed=21, learner=learner, n_estimators=4
        )
        out[name] = (model, h.to_onnx(model), rows)
    return out


@settings(max_examples=30, **SETTINGS)
@given(
    name=st.sampled_from(["lgbm_2_24", "tree_2_31"]),
    rows=st.lists(st.integers(0, 299), min_size=1, max_size=8),
    codes=st.lists(st.sampled_from(NEAR_CODES), min_size=8, max_size=8),
)
def test_codes_around_2_24_and_2_31_verify_with_the_default_dtype(coded_models, name, rows, codes):
    model, graph, X = coded_models[name]
    Q = X[rows].copy()
    Q[:, -1] = codes[: len(rows)]
    valid = all(0 <= c < 2**31 and c == int(c) for c in codes[: len(rows)])
    try:
        report = verify(model, graph, Q)
    except ValueError as exc:
        assert not valid, exc  # the model's own codes are never refused
        return
    assert valid, f"verify answered for invalid codes {codes[: len(rows)]}"
    assert report.ok, report


@pytest.fixture(scope="module")
def far_model() -> tuple:
    """A model on far points (radius 12, angles 2e-8 apart) that float32 cannot separate."""
    n = 120
    rho = np.full(n, 12.0)
    theta = 0.7 + np.arange(n) * 2e-8
    k = np.tanh(rho)[:, None] * np.column_stack([np.cos(theta), np.sin(theta)])
    X = h.geometry.from_klein(k)
    y = (np.arange(n) // 3) % 2
    models = [h.HyperbolicDecisionTreeClassifier(max_depth=10, random_state=0).fit(X, y)]
    try:
        from hyperdt.tree import HyperbolicDecisionTreeClassifier as HyperDT
    except ImportError:  # the 'bench' extra
        pass
    else:
        models.append(HyperDT(max_depth=10).fit(X, y))
    return [(model, h.to_onnx(model)) for model in models], X


@settings(max_examples=25, **SETTINGS)
@given(rows=st.lists(st.integers(0, 119), min_size=1, max_size=10), jitter=st.floats(-1e-8, 1e-8))
def test_far_points_verify_with_the_default_dtype(far_model, rows, jitter):
    models, X = far_model
    theta = np.arctan2(X[rows, 2], X[rows, 1]) + jitter
    k = np.linalg.norm(X[rows, 1:] / X[rows, :1], axis=1)[:, None] * np.column_stack(
        [np.cos(theta), np.sin(theta)]
    )
    Q = np.vstack([X[rows], h.geometry.from_klein(k)])
    for model, graph in models:
        assert h.read_metadata(graph)["input_dtype"] == "float64", type(model)
        assert verify(model, graph, Q).ok


# -- output paths of every file kind (issue 31) -----------------------------------------------
#
# The oracle, written from the documented rule (docs/cli.md): only a regular file is ever
# replaced, through a symbolic link to it if one is given; a FIFO or character device is
# written in place; anything else is refused and left as it was. Every node is made in a
# temporary folder: the system's own /dev/null is never touched (CI runs as root).

OUTPUT_KINDS = ["regular", "missing", "link", "dangling", "fifo", "device", "folder"]


@pytest.fixture(scope="module")
def reference_outputs(world, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Each command's output written to a plain new file, and whether device nodes work here."""
    folder = tmp_path_factory.mktemp("reference")
    f = world["folder"]
    out = {}
    for name, args in {
        "predict": ["predict", f / "rf32.onnx", f / "X.npy", "-o"],
        "convert": ["convert", f / "rf.pkl", "-o"],
    }.items():
        code, _, err = cli(*args, folder / f"{name}.out")
        assert code == 0, err
        out[name] = (args, (folder / f"{name}.out").read_bytes())
    try:  # a copy of the null device: needs root (CI) and a folder not mounted nodev
        os.mknod(folder / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
        with open(folder / "null", "wb") as null:
            null.write(b"x")
        devices = True
    except OSError:
        devices = False
    return {"commands": out, "devices": devices}


def _make_output(folder: Path, kind: str) -> Path:
    path = folder / "out"
    if kind == "regular":
        path.write_bytes(b"old")
    elif kind == "link":
        (folder / "target").write_bytes(b"old")
        path.symlink_to("target")
    elif kind == "dangling":
        path.symlink_to("nowhere")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    elif kind == "folder":
        path.mkdir()
        (path / "inside").write_bytes(b"old")
    return path


def _snapshot(folder: Path) -> dict:
    """Every entry's kind, link target and content (files) or device number."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = os.lstat(p)
        kind = stat.S_IFMT(st.st_mode)
        detail: object = None
        if stat.S_ISLNK(st.st_mode):
            detail = os.readlink(p)
        elif stat.S_ISREG(st.st_mode):
            detail = p.read_bytes()
        elif stat.S_ISCHR(st.st_mode):
            detail = st.st_rdev
        out[p.relative_to(folder)] = (kind, detail)
    return out


def _wake_fifo_reader(path: Path) -> None:
    """Open ``path`` (a FIFO) for writing without blocking, then close it: a reader still
    waiting in ``open`` gets end of file. A blocking open would wait for ever when the
    reader had already read and closed, between ``f.read()`` and recording it (the
    suite once hung there); then no reader waits and the open fails, as it should."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader has it open
        return
    os.close(fd)


@settings(max_examples=30, **SETTINGS)
@given(
    kind=st.sampled_from(OUTPUT_KINDS),
    command=st.sampled_from(["predict", "convert"]),
    force=st.booleans(),
)
def test_output_paths_of_every_kind_are_written_as_documented(
    reference_outputs, kind, command, force
):
    if kind == "device" and not reference_outputs["devices"]:
        event("device nodes not available here")
        return
    args, expected = reference_outputs["commands"][command]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = _make_output(folder, kind)
        before = _snapshot(folder)
        received: list[bytes] = []
        reader = None
        if kind == "fifo":  # a reader, as a user's `cat out` would be

            def read() -> None:
                with open(path, "rb") as f:
                    received.append(f.read())

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
        code, stdout, err = cli(*args, path, *(["--force"] if force else []))
        if reader is not None:
            if reader.is_alive() and not received:  # the command never opened it: let go
                _wake_fifo_reader(path)
            reader.join(5)
        after = _snapshot(folder)
        event(f"{kind}: exit {code}")
        assert "Traceback" not in err and ".tmp" not in err, err
        if kind in ("dangling", "folder") or (kind in ("regular", "link") and not force):
            assert_usage_error(code, err, match=str(path))
            assert after == before  # nothing replaced, nothing created
            return
        assert code == 0, err
        if kind in ("fifo", "device"):
            assert after == before  # still the same node, nothing beside it
            assert stdout == ""  # the report goes to stderr beside a stream
            assert "wrote" in err
            if kind == "fifo":
                assert received == [expected]
            return
        written = folder / ("target" if kind == "link" else "out")
        assert written.read_bytes() == expected
        assert stat.S_ISREG(os.lstat(written).st_mode)
        if kind == "link":
            assert os.readlink(path) == "target"  # the link stays a link to the same file
        assert {p.name for p in folder.iterdir()} == {p.name for p in before} | {"out"}


# -- byte flips through whole CatBoost files and pickles, in a child process (issue 31) -----
#
# CatBoost loads some damaged .cbm files and then crashes its process in the JSON export or
# in predict: the commands read such files in a child first. Each example runs its commands
# in one child process (a crash there is a negative return code, not the end of this run).

_CHILD = """
import contextlib, io, json, sys
from hyp2onnx.cli import main
for command in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(command)
    print(json.dumps([code, err.getvalue()]), flush=True)
"""


@pytest.fixture(scope="module")
def catboost_files(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from catboost import CatBoostClassifier

    folder = tmp_path_factory.mktemp("catboost")
    X, k = points(200, 3, seed=51)
    y = labels(k, 3, seed=51)
    params = {"iterations": 8, "depth": 3, "verbose": 0, "random_seed": 0, "thread_count": 1}
    CatBoostClassifier(**params, allow_writing_files=False).fit(k, y).save_model(
        str(folder / "plain.cbm")
    )
    model = h.HyperbolicCatBoostClassifier(**params).fit(X, y)
    with (folder / "model.pkl").open("wb") as f:
        pickle.dump(model, f)
    np.save(folder / "X.npy", X[:50])
    return {"folder": folder}


@settings(max_examples=2, **SETTINGS)
@given(
    cases=st.lists(
        st.tuples(
            st.sampled_from(["plain.cbm", "model.pkl"]),
            st.sampled_from(["flip", "flip", "flip", "truncate", "insert", "zero"]),
            st.floats(0.0, 1.0),
            st.binary(min_size=1, max_size=8),
        ),
        min_size=2,
        max_size=2,
    )
)
def test_damaged_catboost_files_give_an_answer_or_one_error_in_a_child(catboost_files, cases):
    source = catboost_files["folder"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        commands = []
        for i, (name, how, where, junk) in enumerate(cases):
            case = folder / str(i)
            case.mkdir()
            path = case / f"damaged{Path(name).suffix}"
            path.write_bytes(_damage((source / name).read_bytes(), how, where, junk))
            geometry = ["--geometry", "hyperboloid"] if name.endswith(".cbm") else []
            check = ["--check", str(source / "X.npy"), "-o", str(case / "out.onnx")]
            commands.append(["convert", str(path), *geometry, *check])
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(commands)],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        results = [json.loads(line) for line in done.stdout.splitlines()]
        crashed = cases[len(results)] if len(results) < len(cases) else None
        assert done.returncode == 0, (done.returncode, crashed, done.stderr[-500:])
        for (name, how, *_), (code, err), command in zip(cases, results, commands):
            case = Path(command[-1]).parent
            assert_contract(code, err, case, {Path(command[1]).name}, Path(command[-1]))
            event(f"{name} {how}: exit {code}")


# -- far training sets for every centred design -------------------------------------------------
#
# Isolation and rotation forests centre their work on Lorentzian centroids, so moving the
# training set by an isometry must leave their answers as they were, while every row lies
# within CENTRED_RADIUS (17) of the origin; beyond it the isolation forest warns and the
# rotation forest refuses, naming the rows, and neither answers blankly. The isometries are
# built in tests/_data.py from their definitions.


def _rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(np.argsort(np.argsort(a)), np.argsort(np.argsort(b)))[0, 1])


def _far_copy(d: int, seed: int, rapidity: float, n: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Points near the origin, their copy moved by a random isometry, and whether it
    keeps orientation (``det > 0``: a boost and a rotation, no reflection)."""
    X, _ = points(n, d, seed=seed, max_radius=2.0)
    G = random_isometry(d, rapidity, np.random.default_rng(seed))
    return X, isometric_copy(X, G), bool(np.linalg.det(G) > 0)


@settings(max_examples=6, **SETTINGS)
@given(d=st.integers(1, 3), seed=st.integers(0, 1000), rapidity=st.floats(0.0, 22.0))
def test_far_training_sets_keep_the_isolation_forests_scores(d, seed, rapidity):
    X, Y, oriented = _far_copy(d, seed, rapidity, 120)
    if not oriented and d == 1:  # Y is then a boost of X reflected: fit on that, to compare
        X = X * np.array([1.0, -1.0])
        oriented = True
    radius = np.arcsinh(np.linalg.norm(Y[:, 1:], axis=1))
    params = dict(n_estimators=40, max_samples=64, random_state=seed)
    before = h.HyperbolicIsolationForest(**params).fit(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", h.FarPointWarning)
        after = h.HyperbolicIsolationForest(**params).fit(Y)
    far = [w for w in caught if issubclass(w.category, h.FarPointWarning)]
    beyond = int(np.sum(radius > CENTRED_RADIUS))
    if beyond:  # named, with their radius
        assert len(far) == 1 and str(far[0].message).startswith(f"{beyond} training row(s)")
        worst = int(np.argmax(radius))
        assert f"{worst} (radius {radius[worst]:.2f})" in str(far[0].message)
    else:
        assert not far
    scores = after.score_samples(Y)
    assert np.isfinite(scores).all()
    if d > 1 or not beyond:  # never blank (on a line, rows past 18.7 share one Klein point)
        assert np.unique(scores).size > 10
    if radius.max() <= 13.0 and d == 1 and oriented:  # boosts of a line commute: same trees
        event("the same trees")
        assert np.array_equal(before.path_length(X), after.path_length(Y))
    elif not beyond:  # the law of the trees is the same: the ranking holds
        event("the same ranking")
        assert _rank_correlation(before.score_samples(X), scores) > 0.8
    else:
        event("rows beyond radius 17")


@settings(max_examples=12, **SETTINGS)
@given(d=st.integers(1, 3), seed=st.integers(0, 1000), rapidity=st.floats(0.0, 24.0))
def test_far_training_sets_keep_the_rotation_forests_predictions(d, seed, rapidity):
    X, Y, _ = _far_copy(d, seed, rapidity, 300)
    y = labels(X[:, 1:] / X[:, :1], 3, seed=seed)
    radius = np.arcsinh(np.linalg.norm(Y[:, 1:], axis=1))
    params = dict(n_estimators=5, max_depth=4, random_state=seed)  # group_size 3 >= d
    before = h.HyperbolicRotationForestClassifier(**params).fit(X[:200], y[:200])
    try:
        after = h.HyperbolicRotationForestClassifier(**params).fit(Y[:200], y[:200])
    except h.FarPointError as e:
        event("refused")
        # every frame centre is a centroid of training rows, so it lies within their radius
        assert radius[:200].max() > CENTRED_RADIUS, e
        named = np.asarray(e.rows)
        assert named.size and np.allclose(radius[named], e.radii)
        assert np.all(np.cosh(radius[named]) * np.cosh(radius[:200].max()) > np.cosh(17.0) ** 2)
        return
    event("fitted")
    assert all(np.isfinite(M).all() for M in after.frames_)
    same = before.predict(X[200:]) == after.predict(Y[200:])
    assert same.mean() >= 0.97, (same.mean(), radius.max())


# -- margins swept around each backend's decision point ---------------------------------------
#
# Each library's predict decides on its own quantity (docs/math.md, "How each backend turns
# scores into labels"): XGBoost's binary label is p > 0.5 of its float32 sigmoid, LightGBM's
# the argmax of [1 - p, p] of its float64 sigmoid, CatBoost's the sign of the raw score or its
# first largest raw score, scikit-learn's the first largest probability. Leaf values set
# through each library's own model (tests/_margins.py) put every row's score at, and one ulp
# around, that decision point; the graph's labels must be the library's, in every encoding
# that promises exact labels. Trees 0 and 1 add A and -A before the swept leaves of the last
# tree: in the library's order the sum is the swept value exactly, in another order it is
# not, so the graphs must add in the library's order (or rescore, tests/test_fast.py shows
# the guard at work where the runtime's order differs).

#: Decision points of the binary rules: the margins above which the label is 1.
XGB_THRESHOLD = 1.5 * 2.0**-24
LGBM_THRESHOLD = 1.5 * 2.0**-53
LABEL_ENCODINGS = ("fast", "exact", "standard")


def _ulps(center: float, offsets: np.ndarray, dtype: str) -> np.ndarray:
    """``center`` moved by each of ``offsets`` ulps of ``dtype`` (through zero too)."""
    one = np.dtype(dtype).type
    out = []
    for k in offsets.tolist():
        x = one(center)
        for _ in range(abs(k)):
            x = np.nextafter(x, one(np.inf if k > 0 else -np.inf))
        out.append(x)
    return np.array(out, dtype=np.float64)


@pytest.fixture(scope="module")
def margin_models() -> dict:
    from _margins import set_leaves  # noqa: F401  (imported here: fails early if missing)

    X, k = points(400, 2, seed=31)
    y2, y3 = labels(k, 2, seed=31), labels(k, 3, seed=31)
    boosters = {
        "xgboost": lambda: h.HyperbolicXGBClassifier(n_estimators=3, max_depth=4, n_jobs=1),
        "lightgbm": lambda: h.HyperbolicLGBMClassifier(
            n_estimators=3, num_leaves=16, min_child_samples=2, verbose=-1, n_jobs=1
        ),
        "catboost": lambda: h.HyperbolicCatBoostClassifier(
            iterations=3, depth=4, verbose=0, thread_count=1
        ),
        "forest": lambda: h.HyperbolicRandomForestClassifier(
            n_estimators=3, max_depth=4, random_state=0
        ),
    }
    models = {}
    for name, make in boosters.items():
        models[name, 2] = make().fit(X, y2)
        models[name, 3] = make().fit(X, y3)
    return models, X


def _labels_agree(model, X: np.ndarray) -> None:
    want = np.asarray(model.predict(X))
    for encoding in LABEL_ENCODINGS:
        got = run_onnx(h.to_onnx(model, encoding=encoding), X)["label"]
        differ = np.flatnonzero(got != want)
        assert differ.size == 0, (encoding, differ.size, differ[:5])


@pytest.mark.parametrize("center", ["threshold", "-threshold", 0.0, 1e-6, -1e-6])
@pytest.mark.parametrize("backend", ["xgboost", "lightgbm", "catboost"])
@settings(max_examples=3, **SETTINGS)
@given(shift=st.integers(-8, 8), big=st.sampled_from([1.0, 0.0, 0.75, 3.0, 2.0**-20]))
def test_binary_labels_follow_the_library_around_its_threshold(
    margin_models, backend, center, shift, big
):
    """The last tree's leaves run through ``center`` in one-ulp steps (the leaf count, 8 to
    16, either side of it, moved by ``shift``): the library's threshold, zero, and +-1e-6."""
    from _margins import set_leaves

    models, X = margin_models
    model = copy.deepcopy(models[backend, 2])
    threshold = {"xgboost": XGB_THRESHOLD, "lightgbm": LGBM_THRESHOLD}.get(backend, 0.0)
    if isinstance(center, str):
        center = -threshold if center.startswith("-") else threshold
    dtype = "float32" if backend == "xgboost" else "float64"

    def values(tree: int, column: int, n: int) -> np.ndarray:
        if tree < 2:
            return np.full(n, big if tree == 0 else -big)
        return _ulps(center, np.arange(n) - n // 2 + shift, dtype)

    set_leaves(model, values)
    _labels_agree(model, X)


@settings(max_examples=4, **SETTINGS)
@example(shift=0, spread=1)
@given(shift=st.integers(-8, 8), spread=st.integers(0, 3))
def test_binary_forest_labels_follow_scikit_learn_at_one_half(margin_models, shift, spread):
    """scikit-learn's label is the first class of highest averaged fraction: class-1
    fractions ``p`` one ulp at a time through 1/2 (class 0 holds ``1 - p``, exact there),
    each tree shifted by ``spread`` ulps from the one before."""
    from _margins import set_leaves

    models, X = margin_models
    model = copy.deepcopy(models["forest", 2])

    def values(tree: int, column: int, n: int) -> np.ndarray:
        p1 = _ulps(0.5, np.arange(n) - n // 2 + shift + spread * (tree - 1), "float64")
        return p1 if column == 1 else 1.0 - p1

    set_leaves(model, values)
    _labels_agree(model, X)


@pytest.mark.parametrize("swept", [1, 2])
@pytest.mark.parametrize("backend", ["xgboost", "lightgbm", "catboost", "forest"])
@settings(max_examples=3, **SETTINGS)
@example(base=0.3, other=0, shift=0, big=1.0)  # two classes one ulp apart: one probability
@example(base=7.0, other=-1, shift=3, big=0.75)
@given(
    base=st.sampled_from([0.3, 0.0, -2.5, 1e-6, 7.0, 0.5]),
    other=st.integers(-1, 1),
    shift=st.integers(-8, 8),
    big=st.sampled_from([1.0, 0.0, 0.75, 3.0]),
)
def test_multiclass_labels_follow_the_library_at_near_ties(
    margin_models, backend, base, swept, other, shift, big
):
    """Class ``swept``'s score runs through ``base`` in one-ulp steps; the other two classes
    score ``base``, the one after ``swept`` ``other`` ulps off: exact ties, and ties one ulp
    apart, with the larger score after the smaller (a first-of-equal-probabilities rule
    would pick the earlier class there)."""
    from _margins import set_leaves

    models, X = margin_models
    model = copy.deepcopy(models[backend, 3])
    dtype = "float32" if backend == "xgboost" else "float64"
    # A forest's or CatBoost's tree holds every class; XGBoost and LightGBM grow a tree per
    # class and round, round by round. Three rounds either way.
    per_class = 1 if backend in ("forest", "catboost") else 3

    def values(tree: int, column: int, n: int) -> np.ndarray:
        round_ = tree // per_class
        if round_ < 2:
            return np.full(n, big if round_ == 0 else -big)
        if column == swept:
            return _ulps(base, np.arange(n) - n // 2 + shift, dtype)
        return np.full(
            n, _ulps(base, np.array([other if column == (swept + 1) % 3 else 0]), dtype)[0]
        )

    set_leaves(model, values)
    _labels_agree(model, X)


@pytest.fixture(scope="module")
def graph_exp():
    """onnxruntime running the graph's `exp_correctly_rounded` on a float64 vector."""
    from onnx import TensorProto, helper

    from hyp2onnx._runtime import session
    from hyp2onnx.emit._graph import GraphBuilder
    from hyp2onnx.emit.outputs import exp_correctly_rounded

    g = GraphBuilder(17)
    g.rename(exp_correctly_rounded(g, "x"), "y")
    vector = lambda name: helper.make_tensor_value_info(name, TensorProto.DOUBLE, [None])
    graph = helper.make_graph(g.nodes, "exp", [vector("x")], [vector("y")], g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return lambda x: session(model, threads=1).run(None, {"x": x})[0]


@settings(max_examples=20, **SETTINGS)
@given(
    x=hnp.arrays(np.float64, 64, elements=st.floats(-708.0, 0.0)),
    k=st.integers(1, 199),
    n=st.integers(18, 61),
)
def test_the_graphs_exp_is_correctly_rounded(graph_exp, x, k, n):
    """Shifts anywhere in [-708, 0] (normal results) and those near ties make
    (``-k 2**-n``): the graph's exponentials for rows near a tie equal the correctly
    rounded ones (60-digit decimal); far below, 0."""
    import decimal

    # also far below -745, where x N / ln 2 passes 2**51 (the rounding's exact range)
    x = np.append(x, [-k * 2.0**-n, -(k + 0.5) * 2.0**-n, -1e15, -1e300])
    with decimal.localcontext(decimal.Context(prec=60)):
        want = np.array([float(decimal.Decimal(float(v)).exp()) for v in x])
    np.testing.assert_array_equal(graph_exp(x), want)
