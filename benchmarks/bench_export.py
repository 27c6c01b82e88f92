"""Exported graphs against their peers: throughput, single-row latency, conversion time.

For every model below, the hyp2onnx graphs (``fast``, the default;
``exact``, bit for bit; ``compat``; ``standard``) taking float32 hyperboloid
points are timed against the
*peer*: the plain graph of the same trees fed float32 Klein coordinates
computed beforehand (no projection in the graph), made by skl2onnx for
scikit-learn models and by onnxmltools for XGBoost and LightGBM, which is
what a user without hyp2onnx would run. Models (16 Klein features, trained
on 20k rows):

* a decision tree, depth 8, 8 classes; random forests of 100 depth-8 trees
  (binary, 8 classes, regressor) and of 100 unlimited-depth trees (8
  classes): hyp2onnx's hyperbolic estimators;
* XGBoost and LightGBM, 100 rounds (depth 6 / 31 leaves), 8 classes
  (800 trees) and regressors: plain boosters trained on the Klein
  coordinates and exported with ``input_geometry="hyperboloid"`` (the same
  graph as a hyperbolic booster's, without the minutes of threshold
  correction).

Throughput is rows per second on one batch, latency the time of a
single-row call; both at each thread count of ``--threads`` (default: 1
and every core; the results file records the CPU model and core count). All
graphs of a model and thread count are timed in turn within each round and
the table gives medians over the rounds, with ratios to the peer measured
in the same run. ``--large`` measures instead a forest whose graph exceeds
2 GiB (external data): conversion time, file sizes and session load time
against skl2onnx.

    python benchmarks/bench_export.py [--quick] [--threads 1,2,4,8,16]
        [--encodings fast,exact] [--models "RF binary,RF regressor"]
        [--test-rows N] [--repeats N] [--single-calls N]
        [--large [--large-trees N]]

``--models`` times only the models named (row labels, comma-separated) and
replaces their rows in an existing results file, keeping the other rows and
adding a line that says when and under what load the replaced rows were
measured (the columns, thread counts and encodings must match).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

import hyp2onnx as h
from hyp2onnx import geometry

DIM = 16
ENCODINGS = ("fast", "exact", "compat", "standard")


def cpu_model() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), or the platform's processor string."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def session(model: Any, threads: int = 1) -> ort.InferenceSession:
    """An onnxruntime CPU session with ``threads`` intra-op threads."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # no warnings about skl2onnx's declared output shapes
    source = model if isinstance(model, (bytes, str)) else model.SerializeToString()
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def time_graphs(
    graphs: dict[str, tuple[Any, np.ndarray]],
    X: np.ndarray | None = None,
    *,
    repeats: int,
    single_calls: int,
    threads: int = 1,
) -> dict[str, tuple[float, float]]:
    """Median rows/s of the full batch and µs per single-row call, graphs interleaved.

    ``graphs`` maps a name to (model, its input batch). Each of ``repeats``
    rounds runs every graph's batch once, then every graph's single-row
    calls; the medians over rounds are returned. With several threads each
    timed batch follows an untimed one of the same graph: the previous
    graph's threads may still be spinning on the same cores.
    """
    sessions = {name: (session(model, threads), x) for name, (model, x) in graphs.items()}
    batch: dict[str, list[float]] = {name: [] for name in graphs}
    single: dict[str, list[float]] = {name: [] for name in graphs}
    for s, x in sessions.values():  # warm-up: first-run allocations
        s.run(None, {"X": x[:1]})
        s.run(None, {"X": x})
    for _ in range(repeats):
        for name, (s, x) in sessions.items():
            if threads > 1:
                s.run(None, {"X": x})
            t = time.perf_counter()
            s.run(None, {"X": x})
            batch[name].append(len(x) / (time.perf_counter() - t))
        for name, (s, x) in sessions.items():
            one = {"X": x[:1]}
            t = time.perf_counter()
            for _ in range(single_calls):
                s.run(None, one)
            single[name].append((time.perf_counter() - t) / single_calls * 1e6)
    return {
        name: (statistics.median(batch[name]), statistics.median(single[name])) for name in graphs
    }


def klein_data(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * np.tanh(rng.uniform(0, 3, size=(n, 1)))


def _classes(k: np.ndarray, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    return np.argmax(k[:, :n_classes] + 0.3 * rng.normal(size=(len(k), n_classes)), axis=1)


def _target(k: np.ndarray) -> np.ndarray:
    return np.sin(3 * k[:, 0]) + k[:, 1]


def _timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


def _with_its_input(graph: Any, X32: np.ndarray) -> tuple[Any, np.ndarray]:
    """The graph and the test points in the dtype it declares (float64 for models
    compared in float64, such as LightGBM's, whose default graph takes doubles)."""
    elem = graph.graph.input[0].type.tensor_type.elem_type
    return graph, X32.astype(np.float64) if elem == 11 else X32  # 11: TensorProto.DOUBLE


def klein_twin(model: Any) -> Any:
    """The hyperbolic model's scikit-learn estimator with the Klein thresholds hyp2onnx exports.

    When float32 cannot separate some split's two nearest training values
    (the bench's points reach radius 3), the fitted ``model.estimator_``
    reads split indices, not Klein coordinates (see
    `hyp2onnx.correction.tree_space`): fed Klein values, every row goes the same
    way and a "peer" made from it is both wrong and fast. The twin has the
    same trees with the Klein thresholds hyp2onnx exports: what a user
    converting a plain forest on Klein coordinates would run.
    """
    import copy

    from hyp2onnx.export import describe

    ensemble = describe(model).ensemble
    twin = copy.deepcopy(model.estimator_)
    for tree, root in zip(getattr(twin, "estimators_", [twin]), ensemble.roots):
        nodes = slice(int(root), int(root) + tree.tree_.node_count)
        split = ensemble.feature[nodes] >= 0
        if not np.array_equal(split, tree.tree_.feature >= 0):
            raise RuntimeError("the exported trees do not line up with the fitted ones")
        tree.tree_.threshold[split] = ensemble.threshold[nodes][split]
    return twin


def _check_peer(peer: Any, k32: np.ndarray, exact: Any, X: np.ndarray, label: str) -> None:
    """Stop if the peer and the exact graph disagree on more than 0.1% of labels or values."""
    a = session(peer).run(None, {"X": k32})[0].ravel()
    b = session(exact).run(None, {"X": X})[0].ravel()
    if a.dtype.kind == "f":
        agree = np.mean(np.abs(a - b) <= 1e-4 * (1 + np.abs(b)))
    else:
        agree = np.mean(a == b)
    if agree < 0.999:
        raise RuntimeError(
            f"{label}: the peer agrees with the exact graph on only {agree:.1%} of rows"
        )


def up_to_tree_operator(graph: Any) -> Any:
    """The exact graph cut after its tree operator: projection plus per-tree outputs.

    The operator runs inside the row blocks (a ``Loop`` body, and for small
    models also an ``If`` branch); here it is applied once to the whole
    batch, as the peer's operator is. Timed against the peer, it shows the
    ceiling of the exact graph on this runtime: what is left after it is
    the ordered sum, the blocks and the outputs.
    """
    import onnx
    from onnx import TensorProto, helper

    from hyp2onnx._runtime import all_nodes

    every = all_nodes(graph.graph)
    operator = onnx.NodeProto()
    operator.CopyFrom(next(n for n in every if n.op_type.startswith("TreeEnsemble")))
    blocks = {n.output[0]: n for n in every if n.op_type == "SequenceAt"}
    splits = {n.output[0]: n.input[0] for n in every if n.op_type == "SplitToSequence"}
    source = operator.input[0]
    if source in blocks:  # the Loop body's block: read the rows it was split from
        source = splits[blocks[source].input[0]]
    operator.input[0] = source
    needed, kept = {source}, []
    for node in reversed(graph.graph.node):  # the top-level nodes that compute the rows
        if any(o in needed for o in node.output):
            kept.append(node)
            needed.update(node.input)
    cut = onnx.ModelProto()
    cut.CopyFrom(graph)
    del cut.graph.node[:]
    cut.graph.node.extend([*reversed(kept), operator])
    elem = TensorProto.DOUBLE if operator.op_type == "TreeEnsemble" else TensorProto.FLOAT
    del cut.graph.output[:]
    cut.graph.output.append(helper.make_tensor_value_info(operator.output[0], elem, None))
    return cut


def _skl2onnx_peer(estimator: Any, k32: np.ndarray, classifier: bool) -> Any:
    import skl2onnx

    options = {"zipmap": False} if classifier else None
    return skl2onnx.to_onnx(estimator, k32[:1], options=options)


def _onnxmltools_peer(estimator: Any, library: str) -> Any:
    try:
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType
    except ImportError:
        sys.exit("onnxmltools is missing: pip install 'hyp2onnx[bench]'")
    types = [("X", FloatTensorType([None, DIM]))]
    if library == "xgboost":
        return onnxmltools.convert_xgboost(estimator, initial_types=types, target_opset=15)
    return onnxmltools.convert_lightgbm(
        estimator, initial_types=types, target_opset=15, zipmap=False
    )


def model_specs(n_trees: int, quick: bool) -> list[tuple[str, Callable[..., Any]]]:
    """(row label, fit(k_train, X_train, rng) -> (model to export, to_onnx kwargs, peer factory))."""
    import lightgbm
    import xgboost

    depth8 = {"max_depth": 8, "random_state": 0, "n_jobs": 2}
    # one training thread: OpenMP's busy waiting makes a shared 2-core machine crawl
    rounds = {"n_estimators": n_trees, "n_jobs": 1, "random_state": 0}

    def hyperbolic(cls: Any, n_classes: int, **params: Any) -> Callable[..., Any]:
        def fit(k, X, rng):
            y = _classes(k, n_classes, rng) if n_classes else _target(k)
            model = cls(**params).fit(X, y)
            return model, {}, lambda k32: _skl2onnx_peer(klein_twin(model), k32, bool(n_classes))

        return fit

    def booster(cls: Any, library: str, n_classes: int, **params: Any) -> Callable[..., Any]:
        def fit(k, X, rng):
            y = _classes(k, n_classes, rng) if n_classes else _target(k)
            model = cls(**params).fit(k, y)
            return (
                model,
                {"input_geometry": "hyperboloid"},
                lambda k32: _onnxmltools_peer(model, library),
            )

        return fit

    return [
        (
            "tree, 8 classes",
            hyperbolic(h.HyperbolicDecisionTreeClassifier, 8, max_depth=8, random_state=0),
        ),
        (
            "RF binary",
            hyperbolic(h.HyperbolicRandomForestClassifier, 2, n_estimators=n_trees, **depth8),
        ),
        (
            "RF 8 classes",
            hyperbolic(h.HyperbolicRandomForestClassifier, 8, n_estimators=n_trees, **depth8),
        ),
        (
            "RF regressor",
            hyperbolic(h.HyperbolicRandomForestRegressor, 0, n_estimators=n_trees, **depth8),
        ),
        (
            "RF 8 classes, unlimited depth",
            hyperbolic(
                h.HyperbolicRandomForestClassifier,
                8,
                n_estimators=n_trees,
                random_state=0,
                n_jobs=2,
            ),
        ),
        (  # pure leaves: vote counts, sums exact in any order, no guard
            "RF binary, unlimited depth",
            hyperbolic(
                h.HyperbolicRandomForestClassifier,
                2,
                n_estimators=n_trees,
                random_state=0,
                n_jobs=2,
            ),
        ),
        ("XGBoost 8 classes", booster(xgboost.XGBClassifier, "xgboost", 8, max_depth=6, **rounds)),
        (
            "LightGBM 8 classes",
            booster(lightgbm.LGBMClassifier, "lightgbm", 8, verbose=-1, **rounds),
        ),
        ("XGBoost regressor", booster(xgboost.XGBRegressor, "xgboost", 0, max_depth=6, **rounds)),
        (
            "LightGBM regressor",
            booster(lightgbm.LGBMRegressor, "lightgbm", 0, verbose=-1, **rounds),
        ),
    ]


def pick_models(value: str, known: list[str]) -> list[str]:
    """The row labels named in ``value``, comma-separated.

    A label may hold a comma itself ("RF 8 classes, unlimited depth"): at each
    point the longest known label is taken.
    """
    picked, rest = [], value.strip()
    longest_first = sorted(known, key=len, reverse=True)
    while rest:
        label = next((k for k in longest_first if rest == k or rest.startswith(k + ",")), None)
        if label is None:
            sys.exit(f"unknown model at {rest!r}; known: {known}")
        picked.append(label)
        rest = rest[len(label) + 1 :].strip()
    return picked


def run_speed(args: argparse.Namespace, out: Path) -> None:
    quick = args.quick
    n_train, n_test, n_trees, repeats, calls = (
        (2_000, 2_000, 10, 2, 50) if quick else (20_000, 50_000, 100, 5, 500)
    )
    n_test = args.test_rows or n_test
    repeats = args.repeats or repeats
    calls = args.single_calls or calls
    all_cores = os.cpu_count() or 1
    thread_counts = sorted(set(args.threads)) if args.threads else sorted({1, all_cores})
    encodings = [e for e in ENCODINGS if e in args.encodings]
    rng = np.random.default_rng(0)
    k_train = klein_data(n_train, DIM, rng)
    X_train = geometry.from_klein(k_train, "hyperboloid")
    k_test = klein_data(n_test, DIM, rng)
    X32 = geometry.from_klein(k_test, "hyperboloid").astype(np.float32)
    k32 = (X32[:, 1:].astype(np.float64) / X32[:, :1]).astype(
        np.float32
    )  # Klein, from the same points

    headers = ["model", "graph", "conversion, s"]
    for threads in thread_counts:
        tag = f"{threads} thread" + ("s" if threads > 1 else "")
        headers += [f"rows/s, {tag}", "vs peer", f"1-row µs, {tag}", "vs peer"]
    rows: list[list[str]] = []
    started = time.perf_counter()
    specs = model_specs(n_trees, quick)
    if args.models:
        args.models = pick_models(args.models, [label for label, _ in specs])
    for index, (label, fit) in enumerate(steps(specs, "models", unit="models")):
        if args.models and label not in args.models:
            continue
        # each model's labels from its own generator: the same model whichever others run
        labels_rng = np.random.default_rng([0, index])
        (model, kwargs, make_peer), t_fit = _timed(lambda: fit(k_train, X_train, labels_rng))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # plain boosters: "exported with its own thresholds"
            graphs: dict[str, tuple[Any, np.ndarray]] = {}
            convert: dict[str, float] = {}
            graphs["peer"], convert["peer"] = _timed(lambda: (make_peer(k32), k32))
            for encoding in encodings:
                graphs[encoding], convert[encoding] = _timed(
                    lambda: _with_its_input(h.to_onnx(model, encoding=encoding, **kwargs), X32)
                )
        _check_peer(*graphs["peer"], *graphs[encodings[0]], label)
        if (
            "exact" in graphs
            and args.cut
            and not any(n.op_type.startswith("TreeEnsemble") for n in graphs["exact"][0].graph.node)
        ):
            # the operator runs in row blocks (not for a single tree, which has none)
            graphs["exact, up to its tree operator"] = (
                up_to_tree_operator(graphs["exact"][0]),
                graphs["exact"][1],
            )
        timing = {
            threads: time_graphs(graphs, repeats=repeats, single_calls=calls, threads=threads)
            for threads in thread_counts
        }
        for name in graphs:
            cells = [label, name, f"{convert[name]:.2f}" if name in convert else "-"]
            for threads in thread_counts:
                rate, latency = timing[threads][name]
                peer_rate, peer_latency = timing[threads]["peer"]
                cells += [
                    f"{rate / 1e3:,.0f}k",
                    f"{rate / peer_rate:.2f}x",
                    f"{latency:.1f}",
                    f"{latency / peer_latency:.2f}x",
                ]
            rows.append(cells)
        print(text_table(headers, rows[-len(graphs) :]))
        print(f"(fit {t_fit:.1f} s)\n", flush=True)
        del graphs, timing
        gc.collect()
    elapsed = time.perf_counter() - started
    if args.models and (out / "export.md").exists():
        merged = _merge_rows(out / "export.md", headers, rows, args.models)
        footer = f"Rows of {', '.join(args.models)} re-measured with `--models`: "
        # an earlier rerun of the same models: its rows were just replaced, so is its line
        while merged and merged[-1].startswith(footer):
            merged = merged[:-1]
            while merged and not merged[-1]:
                merged = merged[:-1]
        merged += ["", footer + environment() + f" Those models: {elapsed / 60:.1f} min."]
        write(out / "export.md", "\n".join(merged))
        return

    md = [
        "# Exported graphs against their peers",
        "",
        f"Each model's hyp2onnx graphs (float32 hyperboloid input) against its peer, the plain "
        f"graph of the same trees fed float32 Klein coordinates computed beforehand (skl2onnx for "
        f"scikit-learn, onnxmltools for XGBoost and LightGBM). {n_trees} trees (boosters: "
        f"{n_trees} rounds, so 8 classes make {8 * n_trees} trees), depth 8 (boosters depth 6 / "
        f"31 leaves), {DIM} Klein features, trained on {n_train:,} rows; throughput on one batch "
        f"of {n_test:,} rows and the time of a single-row call, at "
        f"{', '.join(map(str, thread_counts))} onnxruntime threads on {cpu_model()} "
        f"({all_cores} cores); medians of {repeats} rounds in which every graph runs in turn "
        "(with several threads, each timed batch after an untimed one); "
        "ratios to the peer from the same rounds. Conversion: `hyp2onnx.to_onnx` or the peer's "
        "converter, seconds.",
        "",
        md_table(headers, rows, align="ll" + "r" * (len(headers) - 2)),
        "",
        environment() + f" Whole run: {elapsed / 60:.1f} min.",
    ]
    write(out / "export.md", "\n".join(md))


def _merge_rows(
    path: Path, headers: list[str], rows: list[list[str]], models: list[str]
) -> list[str]:
    """The lines of the results file ``path`` with the rows of ``models`` replaced by ``rows``.

    Rows keep the file's order; a model the file lacks is added after the
    table's last row. The file's header must be ``headers``.
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    header = "| " + " | ".join(headers) + " |"
    if header not in lines:
        sys.exit(f"{path}: its table has other columns; rerun every model instead of --models")
    fresh: dict[str, list[str]] = {}
    for row in rows:
        fresh.setdefault(row[0], []).append("| " + " | ".join(row) + " |")
    out: list[str] = []
    for line in lines:
        cells = line.split(" | ")
        model = cells[0][2:] if line.startswith("| ") else None
        if model in models:
            if model in fresh:  # the model's new rows, once, where its old ones were
                out.extend(fresh.pop(model))
            continue
        out.append(line)
    table_end = max(i for i, line in enumerate(out) if line.startswith("| ")) + 1
    added = [line for model_rows in fresh.values() for line in model_rows]
    return out[:table_end] + added + out[table_end:]


def _address_limit() -> str:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return "none" if soft == resource.RLIM_INFINITY else f"{soft / 2**30:.1f} GiB"


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type (a MemoryError has no message)."""
    return (str(exc).splitlines() or [type(exc).__name__])[0][:80]


def run_large(args: argparse.Namespace, out: Path) -> None:
    """A forest whose exact graph exceeds 2 GiB: conversion, files and session load vs skl2onnx."""

    from hyp2onnx.export import external_data_path, save_onnx

    n_trees, n_train = args.large_trees, args.large_rows
    rng = np.random.default_rng(0)
    k = klein_data(n_train, DIM, rng)
    X = geometry.from_klein(k, "hyperboloid")
    y = _classes(k, 2, rng)
    model, t_fit = (
        _timed(
            lambda: h.HyperbolicRandomForestClassifier(
                n_estimators=n_trees, random_state=0, n_jobs=-1
            ).fit(X, y)
        )
        if args.large_model is None or not Path(args.large_model).exists()
        else (None, 0.0)
    )
    if model is None:
        import joblib

        model = joblib.load(args.large_model)
        print(f"loaded the fitted forest from {args.large_model}")
    elif args.large_model is not None:
        import joblib

        joblib.dump(model, args.large_model)
    n_nodes = sum(t.tree_.node_count for t in model.estimator_.estimators_)
    print(
        f"fit {n_trees} unlimited-depth trees on {n_train:,} rows: {t_fit:.0f} s, {n_nodes:,} nodes"
    )
    headers = (
        "system",
        "conversion, s",
        "writing, s",
        ".onnx size",
        "data file size",
        "session load, s",
        "result",
    )
    rows = []
    folder = Path(tempfile.mkdtemp(prefix="hyp2onnx-large-", dir=args.large_dir))
    x1 = X[:1].astype(np.float32)

    def measure(
        name: str, convert: Callable[[], Any], save: Callable[[Any, Path], None], feed: np.ndarray
    ):
        path = folder / f"{name}.onnx"
        started = time.perf_counter()
        try:
            onnx_model, t_convert = _timed(convert)
        except Exception as exc:  # report what the converter says, and when
            failed_after = f"{time.perf_counter() - started:.0f} (failed)"
            rows.append(
                (name, failed_after, "-", "-", "-", "-", f"conversion failed: {_first_line(exc)}")
            )
            print(rows[-1], flush=True)
            return
        try:
            _, t_write = _timed(lambda: save(onnx_model, path))  # noqa: F821 (called before the del below)
        except Exception as exc:
            rows.append(
                (
                    name,
                    f"{t_convert:.0f}",
                    "-",
                    "-",
                    "-",
                    "-",
                    f"writing failed: {_first_line(exc)}",
                )
            )
            print(rows[-1], flush=True)
            return
        del onnx_model
        gc.collect()
        data = external_data_path(path)
        data_size = f"{data.stat().st_size / 2**30:.2f} GiB" if data.exists() else "none"
        s, t_load = _timed(lambda: session(str(path)))
        float64 = s.get_inputs()[0].type == "tensor(double)"  # far points need float64 input
        s.run(None, {"X": feed.astype(np.float64 if float64 else np.float32)})
        rows.append(
            (
                name,
                f"{t_convert:.0f}",
                f"{t_write:.0f}",
                f"{path.stat().st_size / 2**30:.2f} GiB",
                data_size,
                f"{t_load:.1f}",
                "runs",
            )
        )
        print(rows[-1], flush=True)
        del s
        for p in (path, data):
            p.unlink(missing_ok=True)

    def plain_save(onnx_model: Any, path: Path) -> None:
        path.write_bytes(onnx_model.SerializeToString())

    measure("hyp2onnx exact", lambda: h.to_onnx(model), lambda m, p: save_onnx(m, p), x1)
    measure(
        "skl2onnx",
        lambda: _skl2onnx_peer(klein_twin(model), k[:1].astype(np.float32), True),
        plain_save,
        x1[:, 1:] / x1[:, :1],
    )
    folder.rmdir()
    print(text_table(headers, rows))
    md = [
        "# A forest past one protobuf's 2 GiB",
        "",
        f"{n_trees} trees of unlimited depth, binary, {DIM} Klein features, {n_train:,} training "
        f"rows ({n_nodes:,} nodes; {f'fit {t_fit:.0f} s' if t_fit else 'fitted by an earlier run'}). "
        f"Address space limited to {_address_limit()} for this run. One protobuf cannot exceed "
        "2 GiB; hyp2onnx writes a larger graph as `.onnx` plus `.onnx.data` (onnx's external "
        "data), and past 30 million nodes its exact graph uses the opset-5 `TreeEnsemble`, whose "
        "splits and leaf weights are tensors (about 26 bytes a node against about 30 in the "
        "legacy operator's attribute lists).",
        "",
        md_table(headers, rows, align="l" + "r" * 5 + "l"),
        "",
        environment(),
    ]
    write(out / "export_large.md", "\n".join(md))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--large", action="store_true", help="only the >2 GiB forest")
    parser.add_argument("--large-trees", type=int, default=2000, help="trees of the large forest")
    parser.add_argument("--large-rows", type=int, default=50_000, help="its training rows")
    parser.add_argument("--large-dir", default=None, help="folder for its files (default: temp)")
    parser.add_argument(
        "--large-model",
        default=None,
        help="pickle of the fitted large forest: loaded if it exists, else written",
    )
    parser.add_argument(
        "--threads",
        type=lambda v: [int(t) for t in v.split(",")],
        default=None,
        help="onnxruntime thread counts, e.g. 1,2,4,8,16 (default: 1 and every core)",
    )
    parser.add_argument(
        "--encodings",
        type=lambda v: v.split(","),
        default=list(ENCODINGS),
        help=f"hyp2onnx encodings to time (default: {','.join(ENCODINGS)})",
    )
    parser.add_argument(
        "--test-rows", type=int, default=None, help="rows of the timed batch (default 50,000)"
    )
    parser.add_argument("--repeats", type=int, default=None, help="timing rounds (default 5)")
    parser.add_argument(
        "--single-calls", type=int, default=None, help="single-row calls a round (default 500)"
    )
    parser.add_argument(
        "--cut", action="store_true", help="also time the exact graph cut after its tree operator"
    )
    parser.add_argument(
        "--models",
        default=None,
        help="only these models (row labels, comma-separated; a label may hold a comma, "
        "as 'RF 8 classes, unlimited depth'); their rows replace the old ones in the "
        "results file",
    )
    args = parser.parse_args(argv)
    out = output_dir(args)
    if args.large:
        run_large(args, out)
    else:
        run_speed(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
