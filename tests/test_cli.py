"""The ``hyp2onnx`` command line, driven as a user drives it: each command in a process.

Most commands run as ``python -m hyp2onnx.cli ARGS`` in a child forked from
one runner (`_cli.CommandRunner`, ``tests/_cli_runner.py``) that imported
the command line, scikit-learn, XGBoost, LightGBM and skops once: a fresh
interpreter spends most of a short command on those imports. Each child is
still a process of its own, with its own exit status, stdout, stderr and
working folder, and runs the package's ``__main__`` as ``-m`` does.

A few run as fresh processes, so the real entry points stay covered: the
installed ``hyp2onnx`` script, ``examples/quickstart.py`` (in its own test), a command with
pyarrow blocked before anything is imported (which a preloaded
interpreter cannot do), and the commands in ``TWINS`` a second time as a
fresh ``python -m hyp2onnx.cli``, whose outputs must equal the forked
ones byte for byte. The commands of the first batch need only the files
made in-process here (models, data); each of the second reads a graph
that one of the first writes, and starts once that one has ended. Each
test then checks one command's output, exit status and files, waiting only
for the commands it reads (`Runs`), so that no test's setup waits for all.
"""

from __future__ import annotations

import datetime
import json
import pickle
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from _cli import CLI, CommandRunner, Done

import hyp2onnx
from hyp2onnx.cli import main
from hyp2onnx.geometry import from_klein
from hyp2onnx.verification import run_onnx

ROOT = Path(__file__).resolve().parents[1]
N_ROWS = 120
EXIT_OK, EXIT_DISAGREE, EXIT_USAGE = 0, 1, 2
KEEP = b"an existing file that must survive"
Work = tuple[Path, dict[str, Any]]  # the folder of files, and the objects they hold


# -- files ----------------------------------------------------------------------


def _klein(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * np.tanh(rng.uniform(0.0, 2.5, size=(n, 1)))


def _labels(k: np.ndarray) -> np.ndarray:
    return (k[:, 0] > 0).astype(int) + (k[:, 1] > 0.2).astype(int)


def _pickle(obj: Any, path: Path) -> None:
    with path.open("wb") as f:
        pickle.dump(obj, f)


def _make_files(work: Path) -> dict[str, Any]:
    """Models and data for every command; returns the in-process objects tests compare with."""
    import lightgbm
    import skops.io as sio
    import xgboost
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    k = _klein(N_ROWS, 3, seed=0)
    X, y = from_klein(k, "hyperboloid"), _labels(k)
    P = from_klein(k, "poincare", -0.5)
    target = np.sin(3 * k[:, 0]) + k[:, 1]

    np.save(work / "X.npy", X)
    np.savetxt(work / "X.csv", X, delimiter=",", header="x0,x1,x2,x3", comments="")
    np.save(work / "P.npy", P)
    np.save(work / "Xwide.npy", np.hstack([X, X[:, :1]]))
    off = X.copy()
    off[100, 0] += 1.0  # one row off the hyperboloid, in the second 64-row chunk
    np.save(work / "Xoff.npy", off)

    small = {"n_estimators": 3, "max_depth": 3}
    rf = hyp2onnx.HyperbolicRandomForestClassifier(**small, random_state=0).fit(X, y)
    other = hyp2onnx.HyperbolicRandomForestClassifier(**small, random_state=1).fit(X, y[::-1])
    reg = hyp2onnx.HyperbolicDecisionTreeRegressor(
        max_depth=4, input_geometry="poincare", curvature=-0.5
    ).fit(P, target)
    xgb = hyp2onnx.HyperbolicXGBClassifier(**small).fit(X, y)
    lgb = hyp2onnx.HyperbolicLGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1).fit(X, y)
    for name, model in [("rf", rf), ("other", other), ("reg", reg), ("xgb", xgb), ("lgb", lgb)]:
        _pickle(model, work / f"{name}.pkl")
    sio.dump(rf, work / "rf.skops")
    sio.dump({"model": rf, "when": datetime.date(2024, 1, 1)}, work / "untrusted.skops")

    plain = DecisionTreeClassifier(max_depth=3, random_state=0).fit(k, y)
    _pickle(plain, work / "plain.pkl")
    xgboost.XGBRegressor(n_estimators=3, max_depth=3).fit(k, target).save_model(
        str(work / "plain_xgb.json")
    )
    booster = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1).fit(k, y).booster_
    booster.save_model(str(work / "plain_lgb.txt"))

    _pickle(hyp2onnx.HyperbolicRandomForestClassifier(), work / "unfitted.pkl")
    (work / "garbage.pkl").write_bytes(b"this is not a pickle")
    _pickle(LogisticRegression().fit(k, y), work / "logreg.pkl")
    (work / "exists.onnx").write_bytes(KEEP)
    (work / "exists.csv").write_bytes(KEEP)
    return {"X": X, "k": k, "P": P, "rf": rf, "reg": reg, "xgb": xgb, "lgb": lgb}


# -- running --------------------------------------------------------------------


def _entry_point() -> str:
    script = Path(sys.executable).with_name("hyp2onnx")
    assert script.exists(), "the hyp2onnx console script is not installed: pip install -e ."
    return str(script)


BLOCK_PYARROW = (
    "import sys; sys.modules['pyarrow'] = None; from hyp2onnx.cli import main; "
    "sys.exit(main(sys.argv[1:]))"
)

PLAIN = ["--geometry", "hyperboloid", "--check", "X.npy"]  # a plain Klein model's options

FIRST: dict[str, list[str]] = {
    # round trips: train -> file -> convert (checked)
    "convert_xgb": ["convert", "xgb.pkl", "--check", "X.npy"],
    "convert_lgb": ["convert", "lgb.pkl", "--check", "X.npy"],
    "convert_rf": ["convert", "rf.pkl", "--check", "X.npy"],
    "convert_skops": ["convert", "rf.skops", "-o", "rf_skops.onnx", "--check", "X.csv"],
    "convert_reg": [
        "convert",
        "reg.pkl",
        "--encoding",
        "compat",
        "--dtype",
        "float64",
        "--check",
        "P.npy",
    ],
    "convert_plain": ["convert", "plain.pkl", *PLAIN],
    "convert_plain_xgb": ["convert", "plain_xgb.json", *PLAIN],
    "convert_plain_lgb": ["convert", "plain_lgb.txt", *PLAIN],
    # convert errors
    "missing": ["convert", "missing.pkl"],
    "garbage": ["convert", "garbage.pkl"],
    "unfitted": ["convert", "unfitted.pkl"],
    "unsupported": ["convert", "logreg.pkl"],
    "no_geometry": ["convert", "plain.pkl", "-o", "no_geometry.onnx"],
    "contradiction": ["convert", "rf.pkl", "-o", "contradiction.onnx", "--geometry", "klein"],
    "untrusted": ["convert", "untrusted.skops"],
    "exists": ["convert", "rf.pkl", "-o", "exists.onnx"],
    "check_off": ["convert", "rf.pkl", "-o", "check_off.onnx", "--check", "Xoff.npy"],
    "debug": ["convert", "garbage.pkl", "--debug"],
    "inspect_not_onnx": ["inspect", "rf.pkl"],
    # what click itself answers
    "unknown_option": ["convert", "rf.pkl", "--no-such-option"],
    "convert_help": ["convert", "--help"],
}

SECOND: dict[str, list[str]] = {
    "verify_xgb": ["verify", "xgb.pkl", "xgb.onnx", "--data", "X.npy"],
    "verify_lgb": ["verify", "lgb.pkl", "lgb.onnx", "--data", "X.npy"],
    "verify_rf": ["verify", "rf.pkl", "rf.onnx", "--data", "X.csv"],
    "verify_skops_json": ["verify", "rf.skops", "rf_skops.onnx", "--data", "X.npy", "--json"],
    "verify_mismatch": ["verify", "other.pkl", "rf.onnx", "--data", "X.npy"],
    "verify_wrong_model": ["verify", "rf.pkl", "xgb.onnx", "--data", "X.npy"],
    "predict_rf": ["predict", "rf.onnx", "X.csv", "-o", "rf.csv", "--chunk-rows", "50"],
    "predict_xgb": ["predict", "xgb.onnx", "X.npy", "-o", "xgb.csv"],
    "predict_lgb": ["predict", "lgb.onnx", "X.npy"],
    "predict_reg": ["predict", "reg.onnx", "P.npy", "-o", "reg.csv", "--chunk-rows", "33"],
    "predict_width": ["predict", "rf.onnx", "Xwide.npy", "-o", "width.csv"],
    "predict_off": ["predict", "rf.onnx", "Xoff.npy", "-o", "off.csv", "--chunk-rows", "64"],
    "predict_exists": ["predict", "rf.onnx", "X.npy", "-o", "exists.csv"],
    "inspect_rf": ["inspect", "rf.onnx"],
    "inspect_lgb_json": ["inspect", "lgb.onnx", "--json"],
}

#: Commands run a second time as a fresh ``python -m hyp2onnx.cli``, under NAME + FRESH:
#: the outputs must be the same, byte for byte (exit 0 and 2, stdout and stderr, a traceback).
TWINS = ["debug", "unknown_option", "convert_help", "inspect_rf"]
FRESH = "_fresh"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Work:
    folder = tmp_path_factory.mktemp("cli")
    return folder, _make_files(folder)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CommandRunner]:
    """Started before the files are made (``runs`` asks for it first), so that its imports
    run meanwhile."""
    with CommandRunner(tmp_path_factory.mktemp("cli_streams")) as started:
        yield started


#: Files whose commands start first: the longest, as loading an XGBoost or LightGBM pickle
#: reads it in a child process first.
SLOW = {"xgb.pkl", "lgb.pkl"}

#: The command of the first batch that writes each graph the second batch reads.
WRITERS = {
    "rf.onnx": "convert_rf",
    "rf_skops.onnx": "convert_skops",
    "reg.onnx": "convert_reg",
    "xgb.onnx": "convert_xgb",
    "lgb.onnx": "convert_lgb",
}


def _submit(
    runner: CommandRunner,
    name: str,
    argv: list[str],
    folder: Path,
    *,
    fresh: bool = False,
    priority: int = 0,
) -> None:
    priority = max(priority, int(bool(SLOW & set(argv))))
    runner.submit(name, argv, folder, fresh=fresh, priority=priority)
    if name in TWINS:
        runner.submit(name + FRESH, [*CLI, *argv], folder, fresh=True)


class Runs(Mapping[str, Done]):
    """Every command's result, waited for when a test first asks for it, so that each test
    waits only for the commands it reads (and those queued before them).

    A command of the second batch is submitted once the commands that write
    the graphs it reads have ended, ahead of the first batch's waiting
    commands, so that the module's first tests (the round trips) wait for
    their own chains rather than for every command.
    """

    def __init__(
        self, runner: CommandRunner, folder: Path, second: dict[str, tuple[list[str], bool]]
    ) -> None:
        self._runner, self._folder, self._second = runner, folder, second
        self._ended: set[str] = set()
        self._names = [*runner.names, *second, *(n + FRESH for n in second if n in TWINS)]
        self._submit_ready()

    def _submit_ready(self) -> None:
        for name, (argv, fresh) in list(self._second.items()):
            if {WRITERS[a] for a in argv if a in WRITERS} <= self._ended:
                del self._second[name]
                _submit(self._runner, name, argv, self._folder, fresh=fresh, priority=2)

    def __getitem__(self, name: str) -> Done:
        if name not in self._names:
            raise KeyError(name)
        while (done := self._runner.result(name)) is None:
            self._ended.add(self._runner.next_done())
            self._submit_ready()
        return done

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def finish(self) -> None:
        """Wait for every command; then `CommandRunner.finish`'s checks of the runner."""
        for name in self._names:
            self[name]
        self._runner.finish()


@pytest.fixture(scope="module")
def runs(runner: CommandRunner, work: Work) -> Iterator[Runs]:
    """Every command, submitted; a command of the second batch starts once the commands that
    write the graphs it reads have ended. Leaving checks that the runner printed nothing."""
    folder, _ = work
    entry_point = [_entry_point(), "convert", "rf.pkl", "-o", "entry.onnx"]
    runner.submit("entry_point", entry_point, folder, fresh=True)
    for name, args in FIRST.items():
        _submit(runner, name, args, folder)

    second = {name: (args, False) for name, args in SECOND.items()}
    (folder / "any.parquet").write_bytes(b"PAR1")  # never read: pyarrow is blocked first
    blocked = [sys.executable, "-c", BLOCK_PYARROW, "predict", "rf.onnx", "any.parquet"]
    second["parquet_missing"] = ([*blocked, "-o", "pq.csv"], True)
    if _has_pyarrow():
        _write_parquet(folder)
        second["predict_parquet"] = (["predict", "rf.onnx", "X.parquet", "-o", "pq_ok.csv"], False)
    every = Runs(runner, folder, second)
    yield every
    every.finish()


def _has_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _write_parquet(folder: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    X = np.load(folder / "X.npy")
    table = pa.table({f"x{i}": X[:, i] for i in range(X.shape[1])})
    pq.write_table(table, folder / "X.parquet", row_group_size=50)


def _ok(result: Done) -> str:
    assert result.returncode == EXIT_OK, result.stderr
    return result.stdout


def _error(result: Done, code: int, *needles: str) -> list[str]:
    """The stderr lines of a failed command, after checking its status and message."""
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr
    assert 1 <= len(lines) <= 2, lines
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in result.stderr, result.stderr
    return lines


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    header = path.read_text().splitlines()[0].split(",")
    return header, np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


# -- round trips (the XGBoost and LightGBM ones at the end) ---------------------------


def test_predictions_from_csv_in_chunks_are_exact(runs: Runs, work: Work) -> None:
    folder, objects = work
    _ok(runs["predict_rf"])
    _, table = _read_csv(folder / "rf.csv")  # X.csv in 50-row chunks; float64 written exactly
    X = objects["X"].astype(np.float32)
    graph = run_onnx(onnx.load(folder / "rf.onnx"), X)  # the default graph, whole
    np.testing.assert_array_equal(table[:, 1:], graph["probabilities"])
    np.testing.assert_array_equal(table[:, 0], objects["rf"].predict(X))


def test_quickstart_example_uses_the_cli(tmp_path: Path) -> None:
    """The README's first command runs this example; a fresh process of its own, here rather
    than in the module's setup, so that the setup stays short."""
    quickstart = [sys.executable, str(ROOT / "examples" / "quickstart.py")]
    done = subprocess.run(
        quickstart,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    out = _ok(done)
    assert "check on" in out and ": OK:" in out
    assert "label agreement ONNX/Python: 100.00%" in out
    accuracy = float(re.search(r"accuracy on held-out points: ([0-9.]+)", out).group(1))
    assert accuracy > 0.9


def test_regressor_compat_float64_poincare(runs: Runs, work: Work) -> None:
    folder, objects = work
    out = _ok(runs["convert_reg"])
    assert "compat encoding, float64" in out and "poincare input" in out
    assert "check on P.npy: OK: 120 rows; max |variable difference|" in out
    _ok(runs["predict_reg"])
    header, table = _read_csv(folder / "reg.csv")
    assert header == ["value"]
    np.testing.assert_allclose(table[:, 0], objects["reg"].predict(objects["P"]), atol=1e-5)


def test_skops_round_trip_and_json_report(runs: Runs) -> None:
    assert "wrote rf_skops.onnx" in _ok(runs["convert_skops"])
    report = json.loads(_ok(runs["verify_skops_json"]))
    assert report["ok"] is True and report["rows"] == N_ROWS and report["label_mismatches"] == 0


@pytest.mark.parametrize("name", ["plain", "plain_xgb", "plain_lgb"])
def test_plain_klein_models_with_geometry(runs: Runs, work: Work, name: str) -> None:
    folder, _ = work
    result = runs[f"convert_{name}"]
    out = _ok(result)
    assert "check on X.npy: OK" in out and (folder / f"{name}.onnx").is_file()
    assert "warning: " in result.stderr and "Euclidean" in result.stderr
    meta = hyp2onnx.read_metadata(folder / f"{name}.onnx")
    expected = {"plain": "DecisionTreeClassifier", "plain_xgb": "XGBRegressor"}
    assert meta["estimator_class"] == expected.get(name, "LGBMClassifier")
    assert meta["input_geometry"] == "hyperboloid"


def test_installed_entry_point(runs: Runs, work: Work) -> None:
    folder, _ = work
    assert "wrote entry.onnx" in _ok(runs["entry_point"])
    _ok(runs["convert_rf"])
    assert (folder / "entry.onnx").read_bytes() == (folder / "rf.onnx").read_bytes()


# -- inspect -----------------------------------------------------------------------------


def test_inspect_text(runs: Runs) -> None:
    out = _ok(runs["inspect_rf"])
    for needle in [
        "HyperbolicRandomForestClassifier",
        "classes [0, 1, 2]",
        "hyperboloid, curvature -1, timelike column 0",
        "X  float32 [N, 4]",
        "label  int64 [N]",
        "probabilities  float64 [N, 3]",
        "3 trees",
        "ai.onnx 18",
        "TreeEnsemble",
        "onnxruntime (Python) 1.",
        # the fast graph of a forest of three classes: double sums rounded to float32
        "double sums in the runtime's order, rounded once to float32, within",
        "of the model's; labels exact",
    ]:
        assert needle in out, out


def test_inspect_json(runs: Runs, work: Work) -> None:
    folder, objects = work
    info = json.loads(_ok(runs["inspect_lgb_json"]))
    assert info["file_size"] == (folder / "lgb.onnx").stat().st_size
    assert info["hyp2onnx"]["backend"] == "lightgbm"
    assert info["hyp2onnx"]["n_trees"] == 9  # 3 rounds x 3 classes
    assert info["inputs"] == [{"name": "X", "type": "float32", "shape": ["N", 4]}]
    assert [o["name"] for o in info["outputs"]] == ["label", "probabilities"]
    assert info["tree_nodes"] > 9 and info["opsets"]["ai.onnx"] == 18
    assert any(op.startswith("ai.onnx.ml/TreeEnsemble") for op in info["operators"])
    assert info["runtimes"]


# -- errors ----------------------------------------------------------------------------------


#: convert's failures: the message on stderr and the output that must not appear
ERRORS = {
    "missing": ("missing.pkl: no such model file", "missing.onnx"),
    "garbage": ("garbage.pkl: not a readable pickle/joblib file", "garbage.onnx"),
    "unfitted": (
        "unfitted.pkl: the HyperbolicRandomForestClassifier in it is not fitted",
        "unfitted.onnx",
    ),
    "unsupported": (
        "logreg.pkl: holds a sklearn.linear_model._logistic.LogisticRegression, which hyp2onnx "
        "cannot export",
        "logreg.onnx",
    ),
    "no_geometry": ("plain.pkl: DecisionTreeClassifier is a plain", "no_geometry.onnx"),
    "contradiction": ("--geometry klein contradicts", "contradiction.onnx"),
    "untrusted": (
        "untrusted.skops: holds types outside hyp2onnx's trusted list: datetime.date",
        "untrusted.onnx",
    ),
    "check_off": ("Xoff.npy: 1 row(s) are off the hyperboloid", "check_off.onnx"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_convert_errors_write_nothing(runs: Runs, work: Work, name: str) -> None:
    folder, _ = work
    message, output = ERRORS[name]
    lines = _error(runs[name], EXIT_USAGE, message)
    assert len(lines) == 2 and lines[1].startswith("  fix: ")
    assert not (folder / output).exists()


def test_existing_output_is_kept(runs: Runs, work: Work) -> None:
    folder, _ = work
    _error(runs["exists"], EXIT_USAGE, "exists.onnx: already exists", "--force")
    _error(runs["predict_exists"], EXIT_USAGE, "exists.csv: already exists", "--force")
    assert (folder / "exists.onnx").read_bytes() == KEEP
    assert (folder / "exists.csv").read_bytes() == KEEP


def test_verify_disagreement_exits_1(runs: Runs) -> None:
    result = runs["verify_mismatch"]
    assert result.returncode == EXIT_DISAGREE, result.stderr
    assert result.stdout.startswith("MISMATCH: 120 rows;") and "worst rows" in result.stdout


def test_verify_errors(runs: Runs) -> None:
    _error(
        runs["verify_wrong_model"],
        EXIT_USAGE,
        "xgb.onnx: was exported from a HyperbolicXGBClassifier, but rf.pkl holds a "
        "HyperbolicRandomForestClassifier",
    )


def test_predict_errors_write_nothing(runs: Runs, work: Work) -> None:
    folder, _ = work
    _error(runs["predict_width"], EXIT_USAGE, "Xwide.npy: has 5 columns")
    # the bad row is row 36 of the second 64-row chunk: reported as the file's row 100
    _error(runs["predict_off"], EXIT_USAGE, "Xoff.npy: 1 row(s) are off", "(rows 100)")
    _error(runs["parquet_missing"], EXIT_USAGE, "any.parquet: reading .parquet needs pyarrow")
    _error(
        runs["inspect_not_onnx"],
        EXIT_USAGE,
        "rf.pkl: this is a model file",
        "hyp2onnx convert rf.pkl",
    )
    for name in ("width.csv", "off.csv", "pq.csv"):
        assert not (folder / name).exists()


def test_parquet_data(runs: Runs, work: Work) -> None:
    if "predict_parquet" not in runs:
        pytest.skip("pyarrow is not installed (pip install 'hyp2onnx[parquet]')")
    folder, _ = work
    _ok(runs["predict_parquet"])
    _ok(runs["predict_rf"])
    assert (folder / "pq_ok.csv").read_text() == (folder / "rf.csv").read_text()


def test_debug_shows_traceback(runs: Runs) -> None:
    result = runs["debug"]
    assert result.returncode == EXIT_USAGE
    assert result.stderr.startswith("Traceback") and "joblib.load" in result.stderr
    assert result.stderr.strip().splitlines()[-2].startswith("error: garbage.pkl:")


def test_click_usage_errors_and_help(runs: Runs) -> None:
    _error(runs["unknown_option"], EXIT_USAGE, "No such option", "--no-such-option")
    assert runs["unknown_option"].stderr.splitlines()[1] == "  fix: see 'hyp2onnx convert --help'"
    out = _ok(runs["convert_help"])
    assert out.startswith("Usage: hyp2onnx convert [OPTIONS] MODEL") and "Exit status:" in out


@pytest.mark.parametrize("name", TWINS)
def test_forked_command_answers_as_a_fresh_process(runs: Runs, name: str) -> None:
    """The runner's forked child and a fresh ``python -m hyp2onnx.cli``: the same bytes."""
    forked, fresh = runs[name], runs[name + FRESH]
    assert fresh.args[: len(CLI)] == CLI
    assert (forked.returncode, forked.stdout, forked.stderr) == (
        fresh.returncode,
        fresh.stdout,
        fresh.stderr,
    )


#: The XGBoost and LightGBM round trips wait for the longest chains (each of their
#: commands reads the pickle in a child first): checked last, when they have ended.
@pytest.mark.parametrize("name", ["rf", "xgb", "lgb"])
def test_round_trip_classifiers(runs: Runs, work: Work, name: str) -> None:
    """train -> pickle -> convert --check -> verify -> predict, for every backend."""
    folder, objects = work
    out = _ok(runs[f"convert_{name}"])
    assert "check on X.npy: OK" in out and f"wrote {name}.onnx" in out
    assert (folder / f"{name}.onnx").is_file()
    assert _ok(runs[f"verify_{name}"]).startswith("OK: 120 rows; labels agree on 100.0000%")

    csv = folder / ("X.predictions.csv" if name == "lgb" else f"{name}.csv")
    assert f"({N_ROWS} rows)" in _ok(runs[f"predict_{name}"])
    header, table = _read_csv(csv)
    model = objects[name]
    X32 = objects["X"].astype(np.float32)
    assert header == ["label", *(f"probability_{c}" for c in model.classes_)]
    np.testing.assert_array_equal(table[:, 0], model.predict(X32))
    np.testing.assert_allclose(table[:, 1:], model.predict_proba(X32), rtol=0, atol=1e-6)


def test_no_temporary_files_left(runs: Runs, work: Work) -> None:
    folder, _ = work
    for name in runs:  # once every command has ended
        runs[name]
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


# -- in-process: main(argv) parses like the script -----------------------------------------------


def test_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["convert", "plain.pkl", "--geometry", "poincare", "--curvature", "1"])
    assert code == EXIT_USAGE and "curvature must be negative" in capsys.readouterr().err


@pytest.mark.parametrize("command", [[], ["convert"], ["verify"], ["inspect"], ["predict"]])
def test_help_has_examples_and_exit_codes(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert main([*command, "--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "Examples:" in out and "Exit status:" in out
    assert "1  the ONNX graph disagrees" in out and "2  usage or input error" in out
    if command in ([], ["convert"], ["verify"]):
        assert "pickle" in out and "trust" in out and ".skops" in out
