"""How the fast graph adds the class values of multi-class scikit-learn forests, side by side.

A scikit-learn classifier's leaf holds a value per class. The fast encoding
can add them in several ways (``hyp2onnx.emit.fast.ClassValues``, chosen with
``hyp2onnx.emit.strategy.GraphOverrides``); this
script times each, with the peer (skl2onnx's graph of the same trees fed
float32 Klein coordinates, as in ``bench_export.py``), in rounds in which
every graph runs in turn, at each thread count of ``--threads``:

* ``average`` (the default): one ai.onnx.ml opset-3 ``TreeEnsembleRegressor``
  with double thresholds and C weights per leaf, dividing by the tree count;
* ``classifier``: the opset-3 ``TreeEnsembleClassifier`` (C weights per
  leaf), then a division;
* ``per_class``: C one-target regressors, one per class;
* ``reduce_sum``: the exact graph's leaf rows and value table, added by
  ``ReduceSum`` in the runtime's order;
* ``exact``: the exact graph (the tree-order sums).

Each variant's labels are checked against the Python model's and its
probabilities against the recorded bound before it is timed; the table
also gives the largest difference from the model's probabilities.

    python benchmarks/bench_multiclass.py [--quick] [--threads 1,2]
        [--test-rows N] [--repeats N] [--single-calls N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write
from bench_export import (
    DIM,
    _classes,
    _skl2onnx_peer,
    _with_its_input,
    cpu_model,
    klein_data,
    klein_twin,
    session,
    time_graphs,
)

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.emit import fast
from hyp2onnx.emit.strategy import GraphOverrides
from hyp2onnx.export import DEFAULT_OPSET, compile_model, describe, input_dtype, read_metadata

VARIANTS = fast.CLASS_VALUE_CHOICES


def _graph_of(model: Any, variant: Any) -> Any:
    """The model's default graph, its class values added as ``variant`` says."""
    described = describe(model)
    return compile_model(
        described,
        dtype=input_dtype(described),
        encoding="fast",
        opset=DEFAULT_OPSET,
        overrides=GraphOverrides(class_values=variant),
    )


def _check(graph: Any, X: np.ndarray, model: Any, label: str) -> tuple[float, float]:
    """Stop unless the graph gives the model's labels and probabilities within its bound;
    returns the largest probability difference and the share of probabilities that
    are the model's rounded to float32 (correctly rounded)."""
    meta = read_metadata(graph)
    got_label, got_p = session(graph, 2).run(None, {"X": X})
    want_p = model.predict_proba(X.astype(np.float64))
    if not np.array_equal(got_label, model.predict(X.astype(np.float64))):
        raise RuntimeError(f"{label}: labels differ from the Python model's")
    differs = float(np.abs(got_p - want_p).max())
    if differs > meta.get("value_bound", 0.0) + 1e-15:
        raise RuntimeError(f"{label}: probabilities {differs:.2g} off, beyond the bound")
    rounded = want_p.astype(np.float32).astype(np.float64)
    return differs, float(np.mean(got_p == rounded))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_output_args(parser)
    parser.add_argument("--threads", type=lambda s: [int(t) for t in s.split(",")])
    parser.add_argument("--test-rows", type=int)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--single-calls", type=int)
    args = parser.parse_args()
    out = output_dir(args)
    quick = args.quick
    n_train, n_test, n_trees, repeats, calls = (
        (2_000, 2_000, 10, 2, 50) if quick else (20_000, 50_000, 100, 5, 500)
    )
    n_test = args.test_rows or n_test
    repeats = args.repeats or repeats
    calls = args.single_calls or calls
    threads = sorted(set(args.threads or [1, 2]))
    rng = np.random.default_rng(0)
    k_train = klein_data(n_train, DIM, rng)
    X_train = geometry.from_klein(k_train, "hyperboloid")
    k_test = klein_data(n_test, DIM, rng)
    X32 = geometry.from_klein(k_test, "hyperboloid").astype(np.float32)
    k32 = (X32[:, 1:].astype(np.float64) / X32[:, :1]).astype(np.float32)
    specs = [("RF 8 classes", {"max_depth": 8}), ("RF 8 classes, unlimited depth", {})]
    if quick:  # the suite runs it: one model
        specs = specs[:1]
    headers = ["model", "graph", "largest p difference", "= float32(p)"]
    for t in threads:
        tag = f"{t} thread" + ("s" if t > 1 else "")
        headers += [f"rows/s, {tag}", "vs peer", f"1-row µs, {tag}", "vs peer"]
    rows: list[list[str]] = []
    started = time.perf_counter()
    for index, (label, params) in enumerate(steps(specs, "models", unit="models")):
        y = _classes(k_train, 8, np.random.default_rng([0, index]))
        model = h.HyperbolicRandomForestClassifier(
            n_estimators=n_trees, random_state=0, n_jobs=2, **params
        ).fit(X_train, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graphs = {"peer": (_skl2onnx_peer(klein_twin(model), k32, True), k32)}
            for variant in VARIANTS:
                graphs[variant] = _with_its_input(_graph_of(model, variant), X32)
        differs = {v: _check(*graphs[v], model, f"{label} {v}") for v in VARIANTS}
        timing = {
            t: time_graphs(graphs, repeats=repeats, single_calls=calls, threads=t) for t in threads
        }
        for name in graphs:
            cells = [label, name]
            if name == "peer":
                cells += ["-", "-"]
            else:
                cells += [f"{differs[name][0]:.1e}", f"{differs[name][1]:.1%}"]
            for t in threads:
                (rate, latency), (peer_rate, peer_latency) = timing[t][name], timing[t]["peer"]
                cells += [
                    f"{rate / 1e3:,.0f}k",
                    f"{rate / peer_rate:.2f}x",
                    f"{latency:.1f}",
                    f"{latency / peer_latency:.2f}x",
                ]
            rows.append(cells)
        print(text_table(headers, rows[-len(graphs) :]), flush=True)
    elapsed = time.perf_counter() - started
    md = [
        "# Multi-class forests: how the fast graph adds the class values",
        "",
        f"hyp2onnx's random forests of {n_trees} trees, 8 classes, {DIM} Klein features, "
        f"trained on {n_train:,} rows (depth 8, and unlimited depth); each way of adding the "
        "leaves' class values (`hyp2onnx.emit.fast.ClassValues`, float32 hyperboloid input "
        "cast to the graph's input type) against the peer, skl2onnx's graph of the same trees "
        f"fed float32 Klein coordinates. Throughput on one batch of {n_test:,} rows and the "
        f"time of a single-row call at {', '.join(map(str, threads))} onnxruntime threads on "
        f"{cpu_model()} ({os.cpu_count()} cores); medians of {repeats} rounds in which every "
        "graph runs in turn. `largest p difference`: the largest difference from the Python "
        "model's probabilities over the batch (every variant's labels are the model's); "
        "the default `average` graph's bound is `2^-24` of the largest class "
        "probability plus the reordering bound.",
        "",
        md_table(headers, rows, align="ll" + "r" * (len(headers) - 2)),
        "",
        "`= float32(p)`: the share of the graph's probabilities equal to the model's "
        "rounded to float32 (rows the guard rescores get the model's own values, which "
        "are float32 values only by chance).",
        "",
        environment() + f" Whole run: {elapsed / 60:.1f} min.",
    ]
    write(out / "multiclass.md", "\n".join(md))


if __name__ == "__main__":
    main()
