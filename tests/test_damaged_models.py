"""Damaged model files: refused with one clear error, or exported into a graph that agrees.

A model file that breaks an invariant of its own format (CatBoost borders
out of order, a child outside its tree, a NaN threshold) may still load
and predict in its library; a graph of it then disagrees with that
prediction. Such files must be refused, naming what is wrong. The byte
flips here go through the CatBoost model that ``.cbm`` files, pickles and
``.skops`` files hold, each read by its own library (``_byte_flips.py``,
in a child process: CatBoost crashes its process on some damaged trees).
"""

from __future__ import annotations

import json
import pickle
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _cli import CLI, assert_usage_error, cli

import hyp2onnx as h
from hyp2onnx.errors import DamagedModelError

catboost = pytest.importorskip("catboost")

FLIPS = Path(__file__).with_name("_byte_flips.py")
PARAMS = {"iterations": 4, "depth": 3, "verbose": 0, "random_seed": 0, "thread_count": 1}


def _klein_of(X: np.ndarray) -> np.ndarray:
    return X[:, 1:] / X[:, :1]


def _hyperboloid(k: np.ndarray) -> np.ndarray:
    x0 = 1.0 / np.sqrt(1.0 - np.sum(k * k, axis=1, keepdims=True))
    return np.hstack([x0, k * x0])


def _borders(native: Any, folder: Path) -> list[tuple[int, np.ndarray]]:
    native.save_model(str(folder / "model.json"), format="json")
    spec = json.loads((folder / "model.json").read_text())
    return [
        (f["flat_feature_index"], np.asarray(f["borders"], dtype=np.float32))
        for f in spec["features_info"]["float_features"]
    ]


def _around_borders(native: Any, folder: Path, base: np.ndarray) -> np.ndarray:
    """Klein rows on, and one float32 step either side of, every border."""
    rows = []
    for feature, borders in _borders(native, folder):
        for b in borders:
            for v in (np.nextafter(b, np.float32(-1)), b, np.nextafter(b, np.float32(1))):
                row = base[len(rows) % base.shape[0]] * 0.5
                row[feature] = float(v)
                rows.append(row)
    return np.array(rows)


def test_out_of_order_borders_are_refused_naming_the_feature(tmp_path: Path) -> None:
    """The issue's case: two borders of feature 1 of a 30-tree multiclass .cbm overwritten
    (8 bytes), out of order. CatBoost loads it and predicts; the graph compared each border
    directly and disagreed with CatBoost's binary search over the borders (4 of 200 rows).
    Before the fix, convert wrote the graph with exit 0."""
    X, y = h.datasets.make_wrapped_normal_mixture(600, 3, 3, random_state=0)
    k = _klein_of(X)
    plain = catboost.CatBoostClassifier(
        **{**PARAMS, "iterations": 30, "depth": 4}, allow_writing_files=False
    )
    plain.fit(k, y)
    plain.save_model(str(tmp_path / "model.cbm"))
    borders = dict(_borders(plain, tmp_path))[1]
    blob = bytearray((tmp_path / "model.cbm").read_bytes())
    at = blob.find(borders[7].tobytes() + borders[8].tobytes())
    assert at > 0 and blob.count(borders[7].tobytes() + borders[8].tobytes()) == 1
    blob[at : at + 8] = struct.pack("<ff", 1.27e-30, 42498.6)
    (tmp_path / "bad.cbm").write_bytes(bytes(blob))
    damaged = catboost.CatBoostClassifier()
    damaged.load_model(str(tmp_path / "bad.cbm"))
    damaged.predict_proba(k)  # CatBoost reads it
    code, out, err = cli("convert", tmp_path / "bad.cbm", "--geometry", "hyperboloid")
    assert_usage_error(code, err, match="bad.cbm: the CatBoost model is damaged: the borders of")
    assert "feature 1 " in err and "borders[8] = 42498.6" in err
    assert out == "" and not (tmp_path / "bad.onnx").exists()
    with pytest.raises(DamagedModelError, match="borders of feature 1 "):
        h.to_onnx(damaged, input_geometry="klein")


def _tree(**changed: Any) -> Any:
    """A fitted one-tree forest whose first internal node has ``changed`` arrays' entries."""
    from sklearn.ensemble import RandomForestClassifier

    X, y = h.datasets.make_wrapped_normal_mixture(100, 2, 2, random_state=1)
    forest = RandomForestClassifier(n_estimators=2, max_depth=3, random_state=0)
    forest.fit(_klein_of(X), y)
    state = forest.estimators_[1].tree_.__getstate__()
    nodes = state["nodes"].copy()
    for name, value in changed.items():
        nodes[name][0] = value
    state["nodes"] = nodes
    forest.estimators_[1].tree_.__setstate__(state)
    return forest


@pytest.mark.parametrize(
    ("changed", "match"),
    [
        ({"threshold": np.nan}, "tree 1, node 0 has threshold nan"),
        ({"threshold": np.inf}, "tree 1, node 0 has threshold inf"),
        ({"left_child": 1000}, "tree 1, node 0 has a child outside its tree"),
        ({"right_child": 1}, "tree 1, node 1 is reached from two places"),
        ({"feature": 7}, "tree 1, node 0 has a feature index beyond the last (1)"),
    ],
)
def test_broken_tree_invariants_are_refused_where_they_are_read(
    changed: dict[str, Any], match: str
) -> None:
    """The one check on every backend's trees (the Ensemble's): before it, a NaN or
    infinite threshold exported into a graph, and a broken link read as "not fitted"."""
    with pytest.raises(DamagedModelError, match=re.escape(f"the model is damaged: {match}")):
        h.to_onnx(_tree(**changed), input_geometry="klein")


def test_a_nan_leaf_value_is_refused() -> None:
    from sklearn.tree import DecisionTreeRegressor

    X, _ = h.datasets.make_wrapped_normal_mixture(100, 2, 2, random_state=1)
    tree = DecisionTreeRegressor(max_depth=2, random_state=0).fit(_klein_of(X), X[:, 1])
    tree.tree_.value[-1, 0, 0] = np.nan
    with pytest.raises(DamagedModelError, match=r"node \d+ has leaf value \[nan\]"):
        h.to_onnx(tree, input_geometry="klein")


@pytest.fixture(scope="module")
def flip_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small multiclass CatBoost model as a .cbm file, a pickle and a .skops file, the
    rows to compare on, and the byte flips to write over its CatBoost model."""
    import skops.io as sio

    folder = tmp_path_factory.mktemp("flips")
    X, y = h.datasets.make_wrapped_normal_mixture(200, 2, 3, random_state=0)
    model = h.HyperbolicCatBoostClassifier(**PARAMS, tree_space="klein").fit(X, y)
    native = model.estimator_
    native.save_model(str(folder / "model.cbm"))
    cbm = (folder / "model.cbm").read_bytes()
    (folder / "model.pkl").write_bytes(pickle.dumps(model))
    sio.dump(model, folder / "model.skops")
    with zipfile.ZipFile(folder / "model.skops") as z:
        (member,) = [i.filename for i in z.infolist() if z.read(i.filename) == cbm]
    at = {"cbm": 0, "pkl": (folder / "model.pkl").read_bytes().find(cbm), "member": member}
    assert at["pkl"] > 0
    (folder / "at.json").write_text(json.dumps(at))
    k = _klein_of(X)
    klein = np.vstack([k, _around_borders(native, folder, k)])
    np.save(folder / "klein.npy", klein)
    np.save(folder / "rows.npy", _hyperboloid(klein))
    # Where the trees live: the borders (float32, per feature) and the leaf values (float64).
    blocks = [np.asarray(b, np.float32).tobytes() for _, b in _borders(native, folder)]
    blocks.append(np.asarray(native.get_leaf_values(), np.float64).tobytes())
    regions = [(4, len(cbm))] + [(cbm.find(b), cbm.find(b) + len(b)) for b in blocks]
    assert all(a >= 4 for a, _ in regions)
    # One byte changed, or 4 or 8 random bytes written (a float32, a float64): anywhere
    # after the 4-byte magic (a third of them), or in the borders or the leaf values.
    rng = np.random.default_rng(39)
    flips = []
    for n in range(N_FLIPS):
        size = int(rng.choice([1, 4, 8]))
        lo, hi = regions[0] if n % 3 == 0 else regions[1 + int(rng.integers(len(regions) - 1))]
        offset = int(rng.integers(lo, hi - size))
        flips.append([offset, rng.integers(0, 256, size, dtype=np.uint8).tobytes().hex()])
    (folder / "flips.json").write_text(json.dumps(flips))
    return folder


N_FLIPS = 24


def _run_flips(folder: Path, kind: str) -> dict[int, str]:
    """Every flip's outcome; a flip whose child died (CatBoost crashed) is ``crashed``."""
    results: dict[int, str] = {}
    log = folder / f"{kind}.log"
    start = 0
    while start < N_FLIPS:
        done = subprocess.run(
            [sys.executable, str(FLIPS), str(folder), kind, str(start)],
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
        lines = log.read_text().splitlines() if log.exists() else []
        for line in lines:
            i, _, what = line.partition(" ")
            if i != "start":
                results[int(i)] = what
        if done.returncode == 0:
            break
        assert done.returncode < 0, done.stderr  # only a crash may end it early
        started = int(lines[-1].split()[1])
        results[started] = "crashed"
        start = started + 1
    return results


@pytest.mark.parametrize("kind", ["cbm", "pkl", "skops"])
def test_byte_flips_are_refused_or_agree(flip_folder: Path, kind: str) -> None:
    """Each damaged file, read as its library reads it: refused (by the library, or by
    hyp2onnx with one of its errors) or exported into a graph that agrees with the
    library's predict_proba on rows on and beside every border. Never a silent
    disagreement, never an internal error."""
    results = _run_flips(flip_folder, kind)
    assert sorted(results) == list(range(N_FLIPS)), results
    wrong = {i: r for i, r in results.items() if r.startswith(("disagree", "bug"))}
    assert not wrong, wrong
    # The family reaches both sides: files that export and agree, and files refused.
    kinds = {r.split()[0] for r in results.values()}
    assert "agree" in kinds and kinds & {"library", "refused", "crashed"}, results


def test_a_pickled_tree_linking_outside_itself_is_refused(tmp_path: Path) -> None:
    """scikit-learn restores a pickled tree's nodes unchecked, and its ``predict`` follows
    them: the command line asks the backend (``SklearnBackend.check_loaded``) first."""
    from sklearn.tree import DecisionTreeRegressor

    k = np.random.default_rng(3).uniform(-0.5, 0.5, (60, 2))
    hyperbolic = h.HyperbolicDecisionTreeRegressor(max_depth=3).fit(_hyperboloid(k), k[:, 0])
    for model in (DecisionTreeRegressor(max_depth=3).fit(k, k[:, 0]), hyperbolic):
        tree = getattr(model, "estimator_", model).tree_
        state = tree.__getstate__()
        state["nodes"] = state["nodes"].copy()
        state["nodes"]["left_child"][0] = 0  # the root is its own child: a cycle
        tree.__setstate__(state)
        (tmp_path / "cycle.pkl").write_bytes(pickle.dumps(model))
        plain = [] if model is hyperbolic else ["--geometry", "klein"]
        code, out, err = cli("convert", tmp_path / "cycle.pkl", *plain)
        assert_usage_error(code, err, match="cycle.pkl: holds a damaged scikit-learn tree (its")
        assert out == ""


# -- cut LightGBM model files -----------------------------------------------------------------


@pytest.fixture(scope="module")
def lightgbm_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small LightGBM classifier's model text, as ``save_model`` writes it."""
    import lightgbm

    folder = tmp_path_factory.mktemp("lightgbm")
    X, y = h.datasets.make_wrapped_normal_mixture(200, 2, 3, random_state=0)
    model = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1)
    model.fit(_klein_of(X), y).booster_.save_model(str(folder / "model.txt"))
    return folder / "model.txt"


def test_a_lightgbm_file_cut_in_its_parameters_is_one_error(
    lightgbm_file: Path, tmp_path: Path
) -> None:
    """The issue's case: a LightGBM model file cut to 75% of its bytes, inside its
    ``parameters:`` section. LightGBM loads it, and then crashes when asked for its
    parameters (``LGBM_BoosterGetLoadedParam``, which ``lightgbm.Booster`` asks for
    while it loads a file): its last line has no colon. The child that reads a native
    file first did not ask, so it passed the file, and convert died of SIGSEGV."""
    data = lightgbm_file.read_bytes()
    cut = len(data) * 3 // 4
    assert data.find(b"\nparameters:") < cut < data.find(b"\nend of parameters")
    (tmp_path / "cut.txt").write_bytes(data[:cut])
    done = subprocess.run(
        [*CLI, "convert", "cut.txt", "--geometry", "klein"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert_usage_error(
        done.returncode, done.stderr, match="cut.txt: not a readable LightGBM model file ("
    )
    assert "fix: pass a file written by lightgbm's save_model (.txt)" in done.stderr
    assert done.stdout == "" and [p.name for p in tmp_path.iterdir()] == ["cut.txt"]


def _cuts(data: bytes) -> list[int]:
    """Every 10% of a model text, and either side of each section's first line."""
    cuts = {len(data) * percent // 100 for percent in range(10, 100, 10)}
    for section in (b"\nTree=1", b"\nend of trees", b"\nparameters:", b"\nend of parameters"):
        at = data.find(section)
        cuts |= {at, at + 1, at + len(section), at + len(section) + 2}
    return sorted(cuts)


#: Loads each file named on its command line as ``hyp2onnx convert`` does.
_LOAD_EACH = """
import sys
from pathlib import Path
from hyp2onnx.estimators._lightgbm import LightGBMBackend
for name in sys.argv[1:]:
    backend = LightGBMBackend()
    try:
        backend.parse(LightGBMBackend.load_file(Path(name)))
    except Exception:
        pass
"""


def test_a_cut_lightgbm_file_is_refused_by_the_child_or_loads(
    lightgbm_file: Path, tmp_path: Path
) -> None:
    """Cut at every 10% and beside each section's start: the child refuses the file, or
    loading and reading it as convert does is safe (here in a process of its own, where a
    crash shows as a signal). Before the fix the child passed files cut anywhere in the
    parameters, and loading them crashed."""
    from hyp2onnx.estimators._lightgbm import LightGBMBackend
    from hyp2onnx.estimators._probe import UnreadableFileError

    data = lightgbm_file.read_bytes()
    passed, refused = [], 0
    for cut in _cuts(data):
        path = tmp_path / f"cut{cut}.txt"
        path.write_bytes(data[:cut])
        try:
            LightGBMBackend.check_file(path)
            passed.append(str(path))
        except UnreadableFileError as exc:
            assert str(exc).startswith("not a readable LightGBM model file ("), exc
            refused += 1
    assert refused and passed  # both sides reached: damaged trees, a file ending at a line
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_EACH, *passed],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])


@pytest.mark.filterwarnings("ignore:LGBMClassifier is exported with its own")
def test_the_child_makes_every_native_call_that_loading_a_lightgbm_file_makes(
    lightgbm_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the child does not ask LightGBM, it cannot find crashing: every LightGBM C
    function that loading a file (``load_file``) and exporting its model call on that
    model is one the child calls (``_native_probe.LIGHTGBM_CALLS``)."""
    import lightgbm

    from hyp2onnx.estimators import _native_probe
    from hyp2onnx.estimators._lightgbm import LightGBMBackend

    calls: list[tuple[str, tuple[Any, ...]]] = []

    class Recorder:
        def __getattr__(self, name: str) -> Any:
            function = getattr(library, name)
            return lambda *args: calls.append((name, args)) or function(*args)

    library = lightgbm.basic._LIB
    monkeypatch.setattr(lightgbm.basic, "_LIB", Recorder())
    model = LightGBMBackend.load_file(lightgbm_file)
    h.to_onnx(model, input_geometry="klein")
    handle = model.booster_._handle.value
    on_the_file = {
        name
        for name, args in calls
        if name.endswith(("FromModelfile", "FromString"))
        or (args and getattr(args[0], "value", None) == handle)
    }
    assert {"LGBM_BoosterGetLoadedParam", "LGBM_BoosterSaveModelToString"} <= on_the_file
    assert not on_the_file - set(_native_probe.LIGHTGBM_CALLS)


def test_a_child_that_does_not_finish_is_stopped_with_one_error(
    lightgbm_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged file can make a library loop: the child reading it first is stopped
    after a limit that grows with the file (60 s and 10 s a MB), not ten minutes, and
    convert says so. Here the limit is 1 s, and the child sleeps."""
    from hyp2onnx.estimators import _probe

    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(60)\n")
    monkeypatch.setattr(_probe, "_NATIVE_PROBE", sleeper)
    monkeypatch.setattr(_probe, "CHILD_SECONDS", 1.0)
    monkeypatch.setattr(_probe, "CHILD_SECONDS_PER_MB", 0.0)
    code, out, err = cli("convert", lightgbm_file, "--geometry", "klein", "-o", tmp_path / "m.onnx")
    assert_usage_error(code, err, match="model.txt: LightGBM did not finish reading it in 1 s")
    assert out == "" and not (tmp_path / "m.onnx").exists()
    monkeypatch.undo()
    with (tmp_path / "big.txt").open("wb") as f:
        f.truncate(10**7)
    assert _probe.child_timeout(tmp_path / "big.txt") == 160.0
