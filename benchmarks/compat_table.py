"""Which runtimes run which exported graphs: the compatibility table, measured.

For each graph variant (encodings fast, exact, compat and standard; the standard
encoding also without row blocks, ``hyp2onnx.edge.without_row_blocks``;
and each encoding as an ``.ort`` file) this script exports a random-forest
classifier and regressor, runs them in every runtime that is installed
here, one thread each, on random rows, rows at every threshold and its
float neighbours, and far rows (more than 1024 in all, so the row-block
``Loop`` runs), and records for each cell:

* ``agrees``: labels equal to the Python model's, values within
  ``hyp2onnx.verify``'s tolerance (for these forests: bit for bit, or 1e-5
  for compat);
* ``runs``: the graph runs but labels or values differ (how much is noted);
* ``fails``: loading or running raised (the error's first line is noted);
* ``not installed`` / ``n/a``: the runtime is missing here, or cannot read
  the format (only onnxruntime reads ``.ort``).

A second table runs every model kind (scikit-learn trees and forests,
XGBoost, LightGBM, CatBoost, oblique trees, rotation and isolation
forests) in its standard-encoding graph, float32 and float64 input, in the
runtimes without ``ai.onnx.ml`` operators and in onnxruntime, on held-out
rows drawn like the training rows (4-dimensional wrapped-normal mixtures),
rows at thresholds and far rows, and counts the differences of each kind of
row apart.

It writes ``docs/compatibility.md`` (the tables, versions, date) and
``hyp2onnx/cli/runtimes.json``, which ``hyp2onnx inspect`` reads to say where
a graph is known to run. Runtimes: onnxruntime (Python), onnxruntime-node and
onnxruntime-web's WebAssembly backend (examples/js, installed there with
``npm ci`` if missing), onnx's ReferenceEvaluator (as is, and with
hyp2onnx's GatherElements), OpenVINO and tract (``pip install -e
'.[compat-table]'``).

    python benchmarks/compat_table.py            # -> docs/compatibility.md, runtimes.json
    python benchmarks/compat_table.py --quick    # smaller models, into a temporary folder
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import math
import platform
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx

import hyp2onnx as h
from hyp2onnx import edge, geometry
from hyp2onnx.cli._runtimes import NETWORK_KINDS, network_kind
from hyp2onnx.export import read_metadata
from hyp2onnx.verification import (
    ANOMALY_SCORE_ATOL,
    default_rtol,
    default_tolerance,
    reference_evaluator,
)
from hyp2onnx.verification import _python_outputs as python_outputs_for_verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import md_table, note, steps

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "examples" / "js"
DOC = ROOT / "docs" / "compatibility.md"
DATA = ROOT / "hyp2onnx" / "cli" / "runtimes.json"

Outputs = dict[str, np.ndarray]
Runner = Callable[[Path, np.ndarray], Outputs]


@dataclass(frozen=True)
class Variant:
    """One kind of exported graph: an encoding, with or without row blocks, .onnx or .ort."""

    key: str
    encoding: str
    row_blocks: bool = True
    ort_format: bool = False
    dtype: str = "float32"

    @property
    def label(self) -> str:
        text = f"`{self.encoding}`"
        if not self.row_blocks:
            text += ", no row blocks"
        if self.dtype != "float32":
            text += f", {self.dtype} input"
        return text + (" (.ort)" if self.ort_format else "")


VARIANTS = [
    Variant("fast", "fast"),
    Variant("exact", "exact"),
    Variant("compat", "compat"),
    Variant("standard", "standard"),
    Variant("standard-float64", "standard", dtype="float64"),
    Variant("exact-no-row-blocks", "exact", row_blocks=False),
    Variant("fast-ort", "fast", ort_format=True),
    Variant("exact-ort", "exact", ort_format=True),
    Variant("compat-ort", "compat", ort_format=True),
    Variant("standard-ort", "standard", ort_format=True),
]


@dataclass
class Runtime:
    """A runtime column: how to run a graph file, and what it is."""

    key: str
    name: str
    version: str | None  #: None: not installed here
    run: Runner | None
    reads_ort: bool = False
    ml_ops: bool = True  #: has the ai.onnx.ml tree operators
    note: str = ""


# -- data and models -------------------------------------------------------------------


def make_models(quick: bool) -> tuple[dict[str, Any], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A forest classifier and regressor on hyperboloid points, the rows to score
    (float64) and which of them sit at a threshold."""
    rng = np.random.default_rng(0)

    def klein(n: int, radius: float) -> np.ndarray:
        d = rng.normal(size=(n, 3))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        return d * np.tanh(rng.uniform(0, radius, size=(n, 1)))

    k = klein(2000, 3.0)
    X = geometry.from_klein(k, "hyperboloid")
    angle = np.arctan2(k[:, 1], k[:, 0])
    y_clf = np.floor((angle + np.pi) / (2 * np.pi) * 3).astype(int) % 3
    y_reg = np.sin(3 * k[:, 0]) + np.arctanh(np.clip(k, -0.999, 0.999)).sum(axis=1)
    size = {"n_estimators": 4 if quick else 20, "max_depth": 4 if quick else 8}
    models = {
        "classifier": h.HyperbolicRandomForestClassifier(**size, random_state=0).fit(X, y_clf),
        "regressor": h.HyperbolicRandomForestRegressor(**size, random_state=0).fit(X, y_reg),
    }
    rows, at_threshold = {}, {}
    for name, model in models.items():
        ens = model.to_ir().ensemble
        internal = np.flatnonzero(ens.feature >= 0)
        pick = rng.choice(internal, size=min(internal.size, 150 if quick else 300), replace=False)
        at = k[rng.integers(0, len(k), size=3 * pick.size)] * 0.5
        t32 = ens.threshold[pick].astype(np.float32)
        values = np.concatenate(
            [t32, np.nextafter(t32, np.float32(-1)), np.nextafter(t32, np.float32(1))]
        )
        at[np.arange(at.shape[0]), np.tile(ens.feature[pick], 3)] = values
        at = at[np.linalg.norm(at, axis=1) < 1]
        all_k = np.concatenate([klein(600, 3.0), at, klein(200, 12.0)])
        rows[name] = geometry.from_klein(all_k, "hyperboloid")
        at_threshold[name] = np.repeat([False, True, False], [600, len(at), 200])
    return models, rows, at_threshold


def python_outputs(model: Any, X: np.ndarray) -> Outputs:
    """What the Python model returns, named as the graph's outputs."""
    if hasattr(model, "predict_proba"):
        return {"label": np.asarray(model.predict(X)), "probabilities": model.predict_proba(X)}
    return {"variable": np.asarray(model.predict(X)).reshape(len(X), -1)}


# -- runtimes -------------------------------------------------------------------------


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _named(names: list[str], values: list[Any]) -> Outputs:
    return {n: np.asarray(v) for n, v in zip(names, values, strict=True)}


def onnxruntime_python() -> Runtime:
    """onnxruntime's Python package, CPU, one thread (reads .ort files too)."""
    import onnxruntime as ort

    def run(path: Path, X: np.ndarray) -> Outputs:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        out = session.run(None, {session.get_inputs()[0].name: X})
        return _named([o.name for o in session.get_outputs()], out)

    return Runtime("onnxruntime", "onnxruntime (Python)", ort.__version__, run, reads_ort=True)


def _reference(fixed: bool) -> Runtime:
    """onnx's ReferenceEvaluator, as is or with hyp2onnx's GatherElements."""
    from onnx.reference import ReferenceEvaluator

    def run(path: Path, X: np.ndarray) -> Outputs:
        model = onnx.load(str(path))
        session = reference_evaluator(model) if fixed else ReferenceEvaluator(model)
        out = session.run(None, {model.graph.input[0].name: X})
        return _named([o.name for o in model.graph.output], out)

    if fixed:
        return Runtime(
            "onnx-reference-fixed",
            "onnx ReferenceEvaluator + hyp2onnx's GatherElements",
            onnx.__version__,
            run,
            note="`hyp2onnx.verification.reference_evaluator`: onnx's evaluator with a "
            "GatherElements that follows the operator's definition beyond 64 table rows",
        )
    return Runtime("onnx-reference", "onnx ReferenceEvaluator", onnx.__version__, run)


def openvino_runtime() -> Runtime:
    """OpenVINO on the CPU, one thread, float32 precision, if installed."""
    version = _version("openvino")
    if version is None:
        return Runtime(
            "openvino",
            "OpenVINO (CPU)",
            None,
            None,
            ml_ops=False,
            note="not installed: `pip install -e '.[compat-table]'`",
        )
    import openvino as ov

    def run(path: Path, X: np.ndarray) -> Outputs:
        core = ov.Core()
        compiled = core.compile_model(
            core.read_model(str(path)),
            "CPU",
            {"INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "f32"},
        )
        result = compiled([X])
        return {o.get_any_name(): np.asarray(result[o]) for o in compiled.outputs}

    return Runtime(
        "openvino",
        "OpenVINO (CPU)",
        version,
        run,
        ml_ops=False,
        note="computes float64 tensors in float32 on the CPU",
    )


def tract_runtime() -> Runtime:
    """tract's Python bindings, if installed, with the input's shape and type fixed."""
    version = _version("tract")
    if version is None:
        return Runtime(
            "tract",
            "tract",
            None,
            None,
            ml_ops=False,
            note="not installed: `pip install -e '.[compat-table]'`",
        )
    import tract

    def run(path: Path, X: np.ndarray) -> Outputs:
        model = tract.onnx().load(str(path))
        kind = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}[X.dtype]
        model.set_input_fact(0, f"{X.shape[0]},{X.shape[1]},{kind}")
        out = model.into_model().into_runnable().run([X])
        names = [o.name for o in onnx.load(str(path)).graph.output]  # tract names nodes
        return _named(names, [o.to_numpy() for o in out])

    return Runtime("tract", "tract", version, run, ml_ops=False)


def _js_problem() -> str | None:
    """Why the JavaScript runtimes cannot run here, or None (installing them if needed)."""
    spec = importlib.util.spec_from_file_location("npm_install", JS / "npm_install.py")
    npm_install = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(npm_install)
    try:
        done = npm_install.npm_ci(600)
    except FileNotFoundError:
        return "not installed: node and npm are needed"
    except subprocess.TimeoutExpired:
        return "not installed: npm ci did not finish in 600 s"
    if done is not None and done.returncode != 0:
        return "not installed: npm ci failed: " + first_line(done.stderr)
    return None


def js_runtime(script: str, key: str, name: str, package: str, problem: str | None) -> Runtime:
    """One of the examples/js scripts, run with node on a .npy file of the rows."""
    if problem is not None:
        return Runtime(key, name, None, None, reads_ort=True, note=problem)
    meta = json.loads((JS / "node_modules" / package / "package.json").read_text())
    node_version = subprocess.run(
        ["node", "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()

    def run(path: Path, X: np.ndarray) -> Outputs:
        with tempfile.TemporaryDirectory(prefix="hyp2onnx-compat-") as tmp:
            data = Path(tmp) / "X.npy"
            np.save(data, X)
            done = subprocess.run(
                ["node", str(JS / script), str(path), str(data)],
                check=False,
                capture_output=True,
                text=True,
                timeout=300,
            )
        if done.returncode != 0:
            raise RuntimeError(done.stderr.strip().removeprefix("error: "))
        return {k: np.asarray(v) for k, v in json.loads(done.stdout).items()}

    return Runtime(
        key,
        name,
        meta["version"],
        run,
        reads_ort=True,
        note=f"examples/js/{script}, Node.js {node_version}",
    )


def all_runtimes() -> list[Runtime]:
    """Every runtime column, installed here or not."""
    problem = _js_problem()
    return [
        onnxruntime_python(),
        js_runtime(
            "predict-node.js", "onnxruntime-node", "onnxruntime-node", "onnxruntime-node", problem
        ),
        js_runtime(
            "predict-web.js",
            "onnxruntime-web-wasm",
            "onnxruntime-web (wasm, in Node.js)",
            "onnxruntime-web",
            problem,
        ),
        _reference(fixed=False),
        _reference(fixed=True),
        openvino_runtime(),
        tract_runtime(),
    ]


# -- one cell -------------------------------------------------------------------------

_NOISE = re.compile(
    r"^(Exception from src/|Check '.*' failed at |FrontEnd API failed|"
    r"Model wasn't fully converted|Failed operations detailed log|Summary:|$)"
)


def first_line(text: str) -> str:
    """The error's first informative line (OpenVINO starts with source locations), shortened.

    OpenVINO's summary line of the operators it lacks is taken where there is one.
    """
    lines = [line.strip().lstrip("-").strip() for line in str(text).strip().splitlines()]
    missing = [line for line in lines if line.startswith("No conversion rule found")]
    useful = missing or [line for line in lines if not _NOISE.match(line)]
    line = (useful or lines or ["(no message)"])[0]
    line = re.sub(r"_\d+\b", "", line)  # OpenVINO's node numbers change from run to run
    cause = re.findall(r"Unimplemented\(\w+\)", str(text))  # tract: the operator it lacks
    if cause and cause[-1] not in line:
        line += f" ... {cause[-1]}"
    return line if len(line) <= 160 else line[:157] + "..."


def compare(got: Outputs, want: Outputs, atol: float, at_threshold: np.ndarray) -> dict[str, Any]:
    """Labels differing and the largest value difference; status agrees or runs."""
    result: dict[str, Any] = {"rows": len(at_threshold)}
    bad = np.zeros(len(at_threshold), dtype=bool)
    for name, value in want.items():
        if name not in got:
            raise KeyError(f"no output {name!r} (got {sorted(got)})")
        mine = np.asarray(got[name])
        off = ~at_threshold
        if name == "label":
            wrong = mine.ravel() != value.ravel()
            result["labels_differ"] = int(wrong.sum())
            result["labels_differ_off_thresholds"] = int(wrong[off].sum())
        else:
            per_row = np.abs(mine.reshape(value.shape).astype(np.float64) - value)
            per_row = per_row.reshape(len(per_row), -1).max(axis=1)
            result["max_abs_diff"] = float(per_row.max())
            result["max_abs_diff_off_thresholds"] = float(per_row[off].max())
            wrong = per_row > atol
        bad |= wrong
    result["tolerance"] = atol
    result["status"] = "runs" if bad.any() else "agrees"
    return result


def run_cell(
    runtime: Runtime, path: Path, model: Any, X: np.ndarray, atol: float, at: np.ndarray
) -> dict:
    """One model's graph in one runtime: agrees, runs (with differences) or fails (error)."""
    try:
        got = runtime.run(path, X)  # type: ignore[misc]
    except Exception as exc:
        return {"status": "fails", "error": first_line(str(exc) or type(exc).__name__)}
    try:
        return compare(got, python_outputs(model, X), atol, at)
    except (KeyError, ValueError) as exc:
        return {"status": "fails", "error": first_line(str(exc))}


def summarize(per_model: dict[str, dict]) -> dict[str, Any]:
    """One cell from the classifier's and regressor's results."""
    statuses = [r["status"] for r in per_model.values()]
    for status in ("fails", "runs", "agrees"):
        if status in statuses:
            worst = status
            break
    return {"status": worst, "models": per_model}


def cell_text(cell: dict[str, Any]) -> str:
    """The table cell: agrees / runs / fails, per model where the models differ."""
    status = cell["status"]
    if status in ("not installed", "n/a"):
        return status
    statuses = {model: r["status"] for model, r in cell["models"].items()}
    names = {"agrees": "**agrees**", "runs": "runs", "fails": "fails"}
    if len(set(statuses.values())) == 1:
        return names[status]
    return "; ".join(f"{model}: {names[st]}" for model, st in statuses.items())


def difference_text(cell: dict[str, Any]) -> str:
    """How the outputs of a cell whose graph runs differ from the Python model's."""
    parts = []
    for model, r in cell["models"].items():
        if r["status"] == "runs":
            what = []
            if r.get("labels_differ"):
                what.append(
                    f"{r['labels_differ']} of {r['rows']} labels differ "
                    f"({r['labels_differ_off_thresholds']} off thresholds)"
                )
            if "max_abs_diff" in r and r["max_abs_diff"] > r["tolerance"]:
                what.append(
                    f"values by up to {r['max_abs_diff']:.2g} "
                    f"({r['max_abs_diff_off_thresholds']:.2g} off thresholds)"
                )
            parts.append(f"{model}: " + ", ".join(what))
    return "; ".join(parts)


# -- every model kind, in the runtimes without ai.onnx.ml ------------------------------

KIND_VARIANTS = ("standard", "standard-float64")
KIND_RUNTIMES = ("onnxruntime", "openvino", "tract")
ROW_KINDS = ("held-out", "at thresholds", "far", "near ties")
#: Near-tie rows: of this many candidates (drawn like the held-out rows), the ones whose top
#: two scores lie closest (quick mode: a tenth of each).
NEAR_TIE_CANDIDATES, NEAR_TIE_ROWS = 200_000, 300


def kind_models(quick: bool) -> dict[str, Any]:
    """One fitted model of every kind, on 4-dimensional wrapped-normal mixtures."""
    from hyp2onnx.datasets import make_wrapped_normal_mixture

    X, y = make_wrapped_normal_mixture(1000 if quick else 5000, 4, 4, random_state=0)
    y_reg = X[:, 1] - X[:, 2]
    n = 5 if quick else 20
    one = {"n_jobs": 1}
    fits: dict[str, tuple[Any, np.ndarray | None]] = {
        "decision tree": (h.HyperbolicDecisionTreeClassifier(max_depth=8, random_state=0), y),
        "RF 4 classes": (
            h.HyperbolicRandomForestClassifier(n_estimators=n, max_depth=8, random_state=0, **one),
            y,
        ),
        "RF regressor": (
            h.HyperbolicRandomForestRegressor(n_estimators=n, max_depth=8, random_state=0, **one),
            y_reg,
        ),
        "XGBoost binary": (h.HyperbolicXGBClassifier(n_estimators=n, max_depth=6, **one), y == 0),
        "XGBoost 4 classes": (h.HyperbolicXGBClassifier(n_estimators=n, max_depth=6, **one), y),
        "XGBoost regressor": (h.HyperbolicXGBRegressor(n_estimators=n, max_depth=6, **one), y_reg),
        "LightGBM 4 classes": (
            h.HyperbolicLGBMClassifier(n_estimators=n, verbose=-1, **one),
            y,
        ),
        "LightGBM regressor": (h.HyperbolicLGBMRegressor(n_estimators=n, verbose=-1, **one), y_reg),
        "CatBoost 4 classes": (
            h.HyperbolicCatBoostClassifier(iterations=n, depth=4, verbose=0, thread_count=1),
            y,
        ),
        "CatBoost regressor": (
            h.HyperbolicCatBoostRegressor(iterations=n, depth=4, verbose=0, thread_count=1),
            y_reg,
        ),
        "oblique tree": (h.HyperbolicHouseholderTreeClassifier(max_depth=6, random_state=0), y),
        "rotation forest": (
            h.HyperbolicRotationForestClassifier(n_estimators=n, random_state=0),
            y,
        ),
        "isolation forest": (h.HyperbolicIsolationForest(n_estimators=n, random_state=0), None),
        "MLP 4 classes": (
            h.HyperbolicMLPClassifier(
                hidden_layer_sizes=(16, 16), max_iter=50 if quick else 300, random_state=0
            ),
            y,
        ),
        "MLP regressor": (
            h.HyperbolicMLPRegressor(
                hidden_layer_sizes=(16,), max_iter=50 if quick else 300, random_state=0
            ),
            y_reg,
        ),
    }
    with warnings.catch_warnings():  # a network may stop before it converges
        warnings.simplefilter("ignore")
        models = {
            name: model.fit(X) if target is None else model.fit(X, target.astype(target.dtype))
            for name, (model, target) in fits.items()
        }
    mlp = models["MLP 4 classes"]
    models["MLP 4 classes, exact chain"] = mlp
    models["MLP region tree"] = h.region_tree(mlp, X)
    models.update(near_tie_models(X, y))
    return models


#: The boosters whose scores the constructed near-tie models set, and their scores' type.
NEAR_TIE_MODELS = {
    "XGBoost 4 classes, near-tie leaves": "float32",
    "LightGBM 4 classes, near-tie leaves": "float64",
    "CatBoost 4 classes, near-tie leaves": "float64",
}


def near_tie_models(X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """One booster per library, one tree per class, whose leaves are set in the library's own
    model (``tests/_margins.py``) so that on every row classes 2 and 3 score close: each
    leaf 0 to 3 ulps, ``2**-11`` to 2 times the graph's near-tie margin
    (``hyp2onnx.emit.outputs.NEAR_TIE``) or ``2**-28`` to ``2**-18`` from a base, the two
    classes on either side; the others 0.5 to 6 below. Float64 scores reach the margin
    (``2**-40``) on no trained model's row that a search could find."""
    sys.path.insert(0, str(ROOT / "tests"))
    from _margins import set_leaves

    from hyp2onnx.emit.outputs import NEAR_TIE

    makers = {
        "XGBoost": lambda: h.HyperbolicXGBClassifier(n_estimators=1, max_depth=6, n_jobs=1),
        "LightGBM": lambda: h.HyperbolicLGBMClassifier(n_estimators=1, verbose=-1, n_jobs=1),
        "CatBoost": lambda: h.HyperbolicCatBoostClassifier(
            iterations=1, depth=6, verbose=0, thread_count=1
        ),
    }
    models = {}
    for (name, dtype), make in zip(NEAR_TIE_MODELS.items(), makers.values(), strict=True):
        rng = np.random.default_rng(0)
        one = np.dtype(dtype).type
        base = one(0.8375)
        low = math.log2(NEAR_TIE[dtype]) - 11

        def values(tree: int, column: int, n: int, rng=rng, one=one, base=base, low=low):
            if column < 2:
                return (base - rng.uniform(0.5, 6.0, n)).astype(one)
            third = n // 3
            ulps = np.arange(n - 2 * third) % 4 * np.spacing(base)
            # about the margin, and about float32's resolution of the scores (2**-24)
            bands = 2.0 ** np.concatenate(
                [rng.uniform(low, low + 12, third), rng.uniform(-28, -18, third)]
            )
            off = np.concatenate([ulps, bands])
            sign = 1.0 if column == 3 else -1.0
            return (base + sign * rng.permutation(off)).astype(one)

        model = make().fit(X, y)
        set_leaves(model, values)
        models[name] = model
    return models


#: The networks' graphs in the kind table: their standard-operator graphs have no
#: ``standard`` encoding of their own (`hyp2onnx.to_onnx` refuses it).
NETWORK_ENCODINGS = dict(zip(NETWORK_KINDS, ("fast", "fast", "exact", "exact"), strict=True))


def kind_rows(model: Any, quick: bool, *, built: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Held-out rows, rows at thresholds (axis-aligned splits only), far rows and near-tie rows,
    and which is which (indices into ROW_KINDS). ``built``: a model whose leaves make every
    row a near tie (`near_tie_models`): the held-out rows, as near ties."""
    from hyp2onnx.datasets import make_wrapped_normal_mixture

    rng = np.random.default_rng(1)
    held_out, _ = make_wrapped_normal_mixture(1000 if quick else 5000, 4, 4, random_state=1)
    if built:
        return held_out, np.full(len(held_out), ROW_KINDS.index("near ties"))
    k = held_out[:, 1:] / held_out[:, :1]
    at = np.empty((0, 4))
    if hasattr(model, "hidden_layer_sizes") or hasattr(model, "network_"):  # MLP, region tree
        at = kink_rows(model, k, rng, 100 if quick else 300)
    elif (ens := model.to_ir().ensemble).projection is None and ens.frames is None:
        internal = np.flatnonzero(ens.feature >= 0)
        pick = rng.choice(internal, size=min(internal.size, 100 if quick else 300), replace=False)
        t32 = ens.threshold[pick].astype(np.float32)
        values = np.concatenate(
            [t32, np.nextafter(t32, np.float32(-1)), np.nextafter(t32, np.float32(1))]
        )
        at = k[rng.integers(0, len(k), size=values.size)] * 0.5
        at[np.arange(at.shape[0]), np.tile(ens.feature[pick], 3)] = values
        at = at[np.linalg.norm(at, axis=1) < 1]
    d = rng.normal(size=(200, 4))
    far = d / np.linalg.norm(d, axis=1, keepdims=True) * np.tanh(rng.uniform(6, 12, size=(200, 1)))
    near = near_tie_rows(model, quick)
    rows = np.concatenate(
        [held_out, geometry.from_klein(np.concatenate([at, far]), "hyperboloid"), near]
    )
    which = np.repeat([0, 1, 2, 3], [len(held_out), len(at), len(far), len(near)])
    return rows, which


def decision_scores(model: Any, X: np.ndarray) -> np.ndarray:
    """What the label is decided on, per class: the booster's raw scores (its softmax's
    input, which the graph's near-tie guard compares), or the probabilities."""
    native = type(getattr(model, "estimator_", None)).__module__.split(".")[0]
    k = model._tree_input(X) if native in ("xgboost", "lightgbm", "catboost") else None
    if native == "xgboost":
        return model.estimator_.predict(k, output_margin=True)
    if native == "lightgbm":
        return model.estimator_.predict(k, raw_score=True)
    if native == "catboost":
        return model.estimator_.predict(k, prediction_type="RawFormulaVal")
    return model.predict_proba(X)


def top_two_gap(scores: np.ndarray) -> np.ndarray:
    """Each row's gap between its two largest scores (a binary margin: its distance from 0)."""
    scores = np.asarray(scores, dtype=np.float64)
    if scores.ndim == 1 or scores.shape[1] == 1:
        return np.abs(scores.ravel())
    top = np.sort(scores, axis=1)
    return top[:, -1] - top[:, -2]


def near_tie_rows(model: Any, quick: bool) -> np.ndarray:
    """Rows built to reach the near-tie paths: of candidates drawn like the held-out rows
    (rounded to float32, so that both input types score the same points), those whose top
    two decision scores lie closest. None for models without labels."""
    from hyp2onnx.datasets import make_wrapped_normal_mixture

    if not hasattr(model, "predict_proba"):
        return np.empty((0, 5))
    scale = 10 if quick else 1
    candidates, _ = make_wrapped_normal_mixture(NEAR_TIE_CANDIDATES // scale, 4, 4, random_state=2)
    candidates = candidates.astype(np.float32).astype(np.float64)
    gap = top_two_gap(decision_scores(model, candidates))
    return candidates[np.argsort(gap, kind="stable")[: NEAR_TIE_ROWS // scale]]


def kink_rows(model: Any, k: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """Klein rows where a first-layer unit's pre-activation is 0, and one float32 step to
    either side along the coordinate solved for: a network's thresholds."""
    network = model.tree_.network if hasattr(model, "tree_") else model.network()
    mlp = model.network_ if hasattr(model, "network_") else model
    W, b = network.weights[0], network.biases[0]
    rows = mlp.network_input(_hyperboloid(k))[rng.integers(0, len(k), size=n)] * 0.5
    unit = rng.integers(0, W.shape[1], size=n)
    f = np.argmax(np.abs(W[:, unit]), axis=0)
    w = W[:, unit].T  # [n, d]
    rest = np.einsum("nd,nd->n", rows, w) - rows[np.arange(n), f] * w[np.arange(n), f]
    solved = (-(b[unit] + rest) / w[np.arange(n), f]).astype(np.float32)
    values = np.concatenate(
        [solved, np.nextafter(solved, np.float32(-1)), np.nextafter(solved, np.float32(1))]
    )
    at = np.tile(rows, (3, 1))
    at[np.arange(3 * n), np.tile(f, 3)] = values
    at = at[np.linalg.norm(at, axis=1) < 1]
    L = getattr(mlp, "centring_", None)
    if L is None:
        return at
    # A centred network's kinks lie in its input k' = Klein(L x): back to the points' own
    # Klein coordinates by L^-1 = J L^T J (within rounding of the kink once centred again).
    J = np.diag([-1.0] + [1.0] * at.shape[1])
    x = _hyperboloid(at) @ (J @ L.T @ J).T
    return x[:, 1:] / x[:, :1]


def _hyperboloid(k: np.ndarray) -> np.ndarray:
    """Hyperboloid rows of unit-ball Klein rows ``k``."""
    x0 = 1.0 / np.sqrt(1.0 - np.einsum("ij,ij->i", k, k))
    return np.concatenate([x0[:, None], k * x0[:, None]], axis=1)


def compare_kinds(
    got: Outputs, want: Outputs, which: np.ndarray, atol: float, rtol: float
) -> dict[str, Any]:
    """Per kind of row: labels that differ, rows with a value beyond tolerance and the largest
    value difference, judged as ``hyp2onnx.verify`` judges (its absolute and relative
    tolerances; an isolation forest's scores get its score tolerance on top)."""
    n = len(which)
    labels_wrong = np.zeros(n, dtype=bool)
    values_wrong = np.zeros(n, dtype=bool)
    largest = np.zeros(n)
    for name, value in want.items():
        value = np.asarray(value)
        mine = np.asarray(got[name]).reshape(value.shape)
        if name == "label":
            labels_wrong |= mine.ravel() != value.ravel()
            continue
        allowed = atol + (ANOMALY_SCORE_ATOL if name == "scores" else 0.0)
        diff = np.abs(mine.astype(np.float64) - value).reshape(n, -1)
        limit = (allowed + rtol * np.abs(value)).reshape(n, -1)
        values_wrong |= (diff > limit).any(axis=1)
        largest = np.maximum(largest, diff.max(axis=1))
    result: dict[str, Any] = {"tolerance": atol, "has_labels": "label" in want}
    for i, row_kind in enumerate(ROW_KINDS):
        these = which == i
        result[row_kind] = {
            "rows": int(these.sum()),
            "labels_differ": int(labels_wrong[these].sum()),
            "values_beyond": int(values_wrong[these].sum()),
            "max_abs_diff": float(largest[these].max()) if these.any() else 0.0,
        }
    result["status"] = "runs" if (labels_wrong | values_wrong).any() else "agrees"
    return result


def near_tie_reach(model: Any, rows: np.ndarray) -> dict[str, Any]:
    """How close the near-tie rows come: their number, the smallest top-two gap of the
    decision scores, and how many lie within the graph's near-tie margin (``NEAR_TIE`` of
    the scores' type: float32 for XGBoost), where the library's softmax is done again."""
    from hyp2onnx.emit.outputs import NEAR_TIE

    gap = top_two_gap(decision_scores(model, rows))
    native = type(getattr(model, "estimator_", None)).__module__.split(".")[0]
    margin = NEAR_TIE["float32" if native == "xgboost" else "float64"]
    return {
        "rows": len(rows),
        "smallest_gap": float(gap.min()),
        "margin": margin,
        "within_margin": int(np.count_nonzero(gap <= margin)),
    }


def measure_kinds(
    quick: bool, work: Path, runtimes: list[Runtime]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every model kind's standard graph in the runtimes of KIND_RUNTIMES; and how close each
    classifier's near-tie rows come (`near_tie_reach`)."""
    chosen = [r for r in runtimes if r.key in KIND_RUNTIMES]
    variants = [v for v in VARIANTS if v.key in KIND_VARIANTS]
    results: dict[str, Any] = {}
    reach: dict[str, Any] = {}
    for name, model in steps(kind_models(quick).items(), "model kinds", unit="kinds"):
        rows, which = kind_rows(model, quick, built=name in NEAR_TIE_MODELS)
        if np.any(which == ROW_KINDS.index("near ties")):
            reach[name] = near_tie_reach(model, rows[which == ROW_KINDS.index("near ties")])
        results[name] = {}
        for variant in variants:
            with warnings.catch_warnings():  # far rows: "float32 cannot separate some splits"
                warnings.simplefilter("ignore")
                encoding = NETWORK_ENCODINGS.get(name, variant.encoding)
                graph = h.to_onnx(model, encoding=encoding, dtype=variant.dtype)
            graph = edge.without_row_blocks(graph)  # no Loop or sequences: what they run
            path = work / f"kind-{variant.key}.onnx"
            h.save_onnx(graph, path)
            metadata = read_metadata(graph)
            if name in NETWORK_ENCODINGS and network_kind(metadata) != name:
                raise RuntimeError(f"hyp2onnx inspect would look {name!r} up as a network kind")
            atol, rtol = default_tolerance(metadata), default_rtol(metadata)
            X = rows.astype(variant.dtype)
            want = python_outputs_for_verify(model, X, metadata)
            cells: dict[str, Any] = {}
            for runtime in chosen:
                if runtime.run is None:
                    cells[runtime.key] = {"status": "not installed"}
                    continue
                try:
                    got = runtime.run(path, X)
                    cells[runtime.key] = compare_kinds(got, want, which, atol, rtol)
                except Exception as exc:
                    cells[runtime.key] = {
                        "status": "fails",
                        "error": first_line(str(exc) or type(exc).__name__),
                    }
                note(
                    f"{name:20s} {variant.key:18s} {runtime.key:12s} "
                    f"{kind_cell_text(cells[runtime.key])}"
                )
            results[name][variant.key] = cells
    return results, reach


def kind_cell_text(cell: dict[str, Any]) -> str:
    """agrees, fails, or per kind of row the labels and values that differ."""
    if cell["status"] == "fails":
        return f"fails: {cell['error']}"
    if cell["status"] != "runs":
        return {"agrees": "**agrees**"}.get(cell["status"], cell["status"])
    parts = []
    for row_kind in ROW_KINDS:
        r = cell.get(row_kind)  # data measured before a kind of row was added lacks it
        if not r or not r["rows"]:
            continue
        what = [f"{r['labels_differ']} of {r['rows']} labels"] if cell["has_labels"] else []
        if r.get("values_beyond"):
            what.append(
                f"{r['values_beyond']} of {r['rows']} rows' values, by up to "
                f"{r['max_abs_diff']:.1g}"
            )
        parts.append(f"{row_kind}: " + (", ".join(what) or "agree"))
    return "runs; " + "; ".join(parts)


# -- the table ------------------------------------------------------------------------


def measure(quick: bool, work: Path) -> dict[str, Any]:
    """Export every variant, run it in every runtime; the results as runtimes.json holds them."""
    models, rows, at_threshold = make_models(quick)
    runtimes = all_runtimes()
    files: dict[tuple[str, str], Path] = {}
    tolerances: dict[tuple[str, str], float] = {}
    for variant in VARIANTS:
        for name, model in models.items():
            graph = h.to_onnx(model, encoding=variant.encoding, dtype=variant.dtype)
            if not variant.row_blocks:
                graph = edge.without_row_blocks(graph)
            path = work / f"{variant.key}-{name}.onnx"
            h.save_onnx(graph, path)
            if variant.ort_format:
                path, _ = edge.to_ort(graph, work / f"{variant.key}-{name}.ort")
            files[variant.key, name] = path
            tolerances[variant.key, name] = default_tolerance(read_metadata(graph))
    results: dict[str, dict[str, Any]] = {}
    for variant in steps(VARIANTS, "runtimes", unit="variants"):
        results[variant.key] = {}
        for runtime in runtimes:
            if runtime.version is None:
                cell: dict[str, Any] = {"status": "not installed"}
            elif variant.ort_format and not runtime.reads_ort:
                cell = {"status": "n/a"}
            else:
                cell = summarize(
                    {
                        name: run_cell(
                            runtime,
                            files[variant.key, name],
                            model,
                            rows[name].astype(variant.dtype),
                            tolerances[variant.key, name],
                            at_threshold[name],
                        )
                        for name, model in models.items()
                    }
                )
            results[variant.key][runtime.key] = cell
            note(f"{variant.key:24s} {runtime.key:22s} {cell_text(cell)}")
    size = next(iter(models.values())).get_params()
    kinds, reach = measure_kinds(quick, work, runtimes)
    return {
        "generated": datetime.date.today().isoformat(),
        "generator": "benchmarks/compat_table.py" + (" --quick" if quick else ""),
        "hyp2onnx": h.__version__,
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "models": {
            name: f"{type(m).__name__}(n_estimators={size['n_estimators']}, "
            f"max_depth={size['max_depth']}), {len(rows[name])} rows "
            f"({int(at_threshold[name].sum())} at thresholds)"
            for name, m in models.items()
        },
        "runtimes": {
            r.key: {
                "name": r.name,
                "version": r.version,
                "ml_ops": r.ml_ops,
                "reads_ort": r.reads_ort,
                "note": r.note,
            }
            for r in runtimes
        },
        "variants": {
            v.key: {
                "encoding": v.encoding,
                "row_blocks": v.row_blocks,
                "dtype": v.dtype,
                "format": "ort" if v.ort_format else "onnx",
                "label": v.label,
            }
            for v in VARIANTS
        },
        "results": results,
        "kinds": kinds,
        "near_ties": reach,
    }


def measure_kinds_only(quick: bool, work: Path) -> dict[str, Any]:
    """The committed data with the table of every model kind measured again (and dated)."""
    data = json.loads(DATA.read_text())
    kinds, reach = measure_kinds(quick, work, all_runtimes())
    flag = " --kinds-only" + (" --quick" if quick else "")
    when = f"`python benchmarks/compat_table.py{flag}` on {datetime.date.today().isoformat()}"
    return {**data, "kinds": kinds, "near_ties": reach, "kinds_generated": when}


def markdown(data: dict[str, Any]) -> str:
    """docs/compatibility.md, made from runtimes.json's data."""
    runtimes = data["runtimes"]
    headers = ["graph"] + [r["name"] for r in runtimes.values()]
    rows = [
        [variant["label"]] + [cell_text(data["results"][key][r]) for r in runtimes]
        for key, variant in data["variants"].items()
    ]
    versions = [[r["name"], r["version"] or "—", r["note"] or ""] for r in runtimes.values()]
    failures, differences = [], []
    for key, variant in data["variants"].items():
        for rkey, cell in data["results"][key].items():
            for model, r in cell.get("models", {}).items():
                if r["status"] == "fails":
                    failures.append([variant["label"], runtimes[rkey]["name"], model, r["error"]])
            if any(r["status"] == "runs" for r in cell.get("models", {}).values()):
                differences.append(
                    [variant["label"], runtimes[rkey]["name"], difference_text(cell)]
                )
    models = "\n".join(f"* {name}: {text}" for name, text in data["models"].items())
    kinds = data.get("kinds", {})
    kind_runtimes = [k for k in KIND_RUNTIMES if k in runtimes]
    kind_rows = [
        [name, data["variants"][variant]["label"]]
        + [kind_cell_text(cells[r]) for r in kind_runtimes]
        for name, per_variant in kinds.items()
        for variant, cells in per_variant.items()
    ]
    kind_table = md_table(
        ["model", "graph"] + [runtimes[r]["name"] for r in kind_runtimes],
        kind_rows,
        "l" * (2 + len(kind_runtimes)),
    )
    kinds_note = ""
    if "kinds_generated" in data:  # measured again alone (--kinds-only)
        kinds_note = f"This table was measured again by {data['kinds_generated']}.\n\n"
    reach_table = md_table(
        ["model", "near-tie rows", "smallest top-two gap", "within the near-tie margin"],
        [
            [
                name,
                r["rows"],
                f"{r['smallest_gap']:.3g}",
                f"{r['within_margin']} (≤ {r['margin']:.3g})",
            ]
            for name, r in data.get("near_ties", {}).items()
        ],
        "lrrr",
    )
    return f"""# Where the exported graphs run

Generated by `python {data["generator"]}` on {data["generated"]}
(hyp2onnx {data["hyp2onnx"]}, Python {data["python"]}, {data["platform"]}):
do not edit by hand. The same results are in `hyp2onnx/cli/runtimes.json`,
which `hyp2onnx inspect` reads to list the runtimes a graph is known to run
in.

Each graph is a random forest exported with `hyp2onnx.to_onnx(model,
encoding=..., dtype="float32")` unless noted, and scored on random rows,
rows at thresholds and their float32 neighbours, and far rows:

{models}

Every runtime runs on one thread. **agrees**: labels equal to the Python
model's and values within `hyp2onnx.verify`'s tolerance (bit for bit;
compat 1e-5); runs: the graph runs but its outputs differ (how much:
below); fails: the runtime could not load or run it (errors below); n/a:
the runtime does not read `.ort` files.

"No row blocks" is `hyp2onnx.edge.without_row_blocks` (`hyp2onnx convert
--no-row-blocks`): all rows at once, without the `Loop` over 1024-row
blocks and its sequence operators. ".ort" is the graph converted by
`hyp2onnx.edge.to_ort` (`hyp2onnx convert --ort`).

{md_table(headers, rows, "l" * len(headers))}

## Runtimes

{md_table(["runtime", "version", "note"], versions, "lll")}

OpenVINO and tract have no `ai.onnx.ml` tree operators and no sequence
operators: of these graphs they run only the standard encoding without
row blocks; how their outputs then differ from the Python model's is
measured below (OpenVINO computes float64 tensors in float32). onnx's own
ReferenceEvaluator fails where a `GatherElements` table has more than 64
rows (its implementation uses `np.choose`).

## Every model kind

{kinds_note}Each kind of model in its standard-encoding graph, where the runtimes
without `ai.onnx.ml` operators run it, beside onnxruntime: held-out rows
drawn like the training rows (4-dimensional wrapped-normal mixtures, 4
classes), rows at a threshold or one float32 step beside it (axis-aligned
splits only), rows at hyperbolic radius 6 to 12, and near-tie rows: of
200,000 candidates drawn like the held-out rows (rounded to float32), the
300 whose two largest decision scores lie closest (raw scores for the
boosters, probabilities otherwise). Trained models' float64 scores come
nowhere near the graph's near-tie margin (`2^-40`; float32 scores:
`2^-12`), so the last three models are boosters of one tree per class whose
leaves are set in the library's own model (`tests/_margins.py`): on every
row classes 2 and 3 score 0 to 6 ulps, up to four times the margin, or
`2^-27` to `2^-17` apart (about float32's resolution of these scores); their
rows are the held-out rows, all near ties. Cells count the labels
that differ from the Python model's on each kind of row, and give the
largest value difference where it exceeds `hyp2onnx.verify`'s tolerance.
Networks have no standard encoding: their graphs use standard operators
only, and they are run as exported (`fast`, or the `exact` chain where the
row says so; a region tree's graph is its only one), and their rows "at
thresholds" are rows where a first-layer unit's pre-activation is 0, or one
float32 step beside it.

{kind_table}

How close the near-tie rows come (the top-two gap of the decision scores;
XGBoost's and LightGBM's multi-class graphs compute their softmax again for
the rows within the margin, [math](math.md#how-each-backend-turns-scores-into-labels)):

{reach_table}

What OpenVINO's CPU plugin does differently, measured with one-node graphs
(these are why its cells differ):

* it computes float64 tensors in float32: a float64 input is rounded to
  float32 before the first node, so float64 graphs route like float32
  ones, and values past float32's range saturate;
* float32 `Div` is not correctly rounded: about a quarter of quotients are
  one unit in the last place away from IEEE division, so a Klein coordinate
  can land one float32 step beside the one the Python model compares
  (tract divides float32 the same way; the standard encoding therefore
  divides in float64 and rounds the quotient, which is exact in tract);
* `Greater(x, NaN)` and `GreaterOrEqual(x, NaN)` are true (IEEE 754: false);
  the standard encoding therefore never compares with NaN (leaves test
  `+inf`);
* on processors with bfloat16 units its default `INFERENCE_PRECISION_HINT`
  is `bf16`, which it applies to matrix operations: the standard graph has
  none and gave the same outputs under both hints; this table sets `f32`.

So in OpenVINO the standard graph serves labels and values on rows away
from thresholds and from ties: labels differ only on rows within a float32
step or two of a threshold (a held-out row can lie there too, by chance),
and on rows whose two largest scores lie within about one float32 ulp of
each other (`2^-24` of the larger). XGBoost's scores are float32 and
OpenVINO adds them as the graph says: on the near-tie leaves above, labels
differed only where the two were at most one ulp apart. LightGBM's and
CatBoost's are float64, which OpenVINO holds in float32: two that round to
one float32 tie, and the first class wins; on the near-tie leaves, labels
differed only below about half a float32 ulp, and agreed on every row a
float32 ulp or more apart. Its values carry float32 rounding, near-tie rows
included: the correctly rounded `exp` of those rows takes its argument
reduction by `Floor`, which float32 arithmetic keeps (the `1.5·2^52`
rounding it replaced gave wrong probabilities on every XGBoost and LightGBM
multi-class row within the near-tie margin, and wrong labels on some: 3 of
the 38 trained XGBoost rows above, 4,604 of 4,803 rows of its near-tie
leaves; now 0 and 1, the one a float32 ulp apart). tract gives the Python model's labels on every row;
its sums of forest probabilities and regression values differ from the
exact encoding's in the last bits (it adds in another order). Where labels must equal
the Python model's on every row, use onnxruntime (any build with
`ai.onnx.ml`, or the standard encoding in a build without it) or tract.

Networks: OpenVINO gives the Python model's labels on every row measured,
kinks included, but one of the 300 near-tie rows (the closest lie `1.6e-7`
apart in probability), with values in float32. tract gives them too, with values
within a few units of 1e-15 (its `exp` and sums). It cannot run a float64
`Gemm` with a bias input ("tensor is F32, accessed as F64" in a constant
pass), so the `fast` graph carries its biases on a column of ones.

## Differences

"Off thresholds": on the random and far rows only.

{
        md_table(["graph", "runtime", "how the outputs differ"], differences, "lll")
        if differences
        else "None."
    }

## Errors

{
        md_table(["graph", "runtime", "model", "first line of the error"], failures, "llll")
        if failures
        else "None."
    }
"""


def main() -> None:
    """Measure and write the page and the data."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="small models; write into a temporary folder unless --out",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for compatibility.md and runtimes.json (default: docs/ and hyp2onnx/cli/)",
    )
    parser.add_argument(
        "--kinds-only",
        action="store_true",
        help="measure only the table of every model kind; keep the first table's results "
        "from the committed runtimes.json",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hyp2onnx-compat-") as tmp:
        if args.kinds_only:
            data = measure_kinds_only(args.quick, Path(tmp))
        else:
            data = measure(args.quick, Path(tmp))
    if args.out is None and args.quick:
        args.out = Path(tempfile.gettempdir()) / "hyp2onnx-compat-quick"
    doc, js = (DOC, DATA) if args.out is None else (args.out / DOC.name, args.out / DATA.name)
    doc.parent.mkdir(parents=True, exist_ok=True)
    from hyp2onnx._atomic import atomic_write

    with atomic_write(js, overwrite=True, binary=False) as f:
        f.write(json.dumps(data, indent=1) + "\n")
    with atomic_write(doc, overwrite=True, binary=False) as f:
        f.write(markdown(data))
    print(f"wrote {doc} and {js}")


if __name__ == "__main__":
    main()
