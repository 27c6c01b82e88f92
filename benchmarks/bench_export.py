"""Conversion time, onnxruntime throughput and latency of exported graphs.

Compares, on one forest (100 trees, depth 8, 16 Klein features, trained on
20k rows) and in one run so that ratios are meaningful on a noisy machine:

* conversion time: ``hyp2onnx.to_onnx`` vs ``skl2onnx.to_onnx`` on the
  corrected scikit-learn forest;
* 100k-row throughput and single-row latency (one onnxruntime thread) of the
  exact, compat and standard graphs vs skl2onnx's plain Euclidean graph,
  for a binary and an 8-class forest and a regressor (ANCHORS.md measured
  hummingbird's standard-operator graph of such a forest at 0.35x of the
  TreeEnsemble graph);
* the cost of the projection nodes: the same trees fed hyperboloid points
  (Gather, Gather, Div in the graph) vs Klein points (no projection).

Timings are medians of interleaved repetitions. ``--quick`` shrinks
everything for a smoke test.

    python benchmarks/bench_export.py [--quick]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np
import onnxruntime as ort
import skl2onnx

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.export import compile_model, describe
from hyp2onnx.ir import InputSpace


def session(model) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def time_graphs(graphs: dict, X: np.ndarray, *, repeats: int, single_calls: int) -> dict:
    """Median rows/s over ``repeats`` interleaved full-batch runs, median µs per single-row call."""
    sessions = {name: (session(model), x) for name, (model, x) in graphs.items()}
    batch = {name: [] for name in graphs}
    single = {name: [] for name in graphs}
    for s, x in sessions.values():
        s.run(None, {"X": x[:1]})
    for _ in range(repeats):
        for name, (s, x) in sessions.items():
            t = time.perf_counter()
            s.run(None, {"X": x})
            batch[name].append(len(x) / (time.perf_counter() - t))
        for name, (s, x) in sessions.items():
            one = {"X": x[:1]}
            t = time.perf_counter()
            for _ in range(single_calls):
                s.run(None, one)
            single[name].append((time.perf_counter() - t) / single_calls * 1e6)
    return {name: (float(np.median(batch[name])), float(np.median(single[name]))) for name in graphs}


def klein_data(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * np.tanh(rng.uniform(0, 3, size=(n, 1)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke test")
    args = parser.parse_args()
    n_train, n_test, n_trees, repeats, calls = (
        (2000, 5000, 10, 2, 50) if args.quick else (20_000, 100_000, 100, 5, 2000)
    )
    rng = np.random.default_rng(0)
    k_train, k_test = klein_data(n_train, 16, rng), klein_data(n_test, 16, rng)
    X_train = geometry.from_klein(k_train, "hyperboloid")
    X_test = geometry.from_klein(k_test, "hyperboloid").astype(np.float32)
    k32 = k_test.astype(np.float32)

    print(f"forest: {n_trees} trees, max_depth 8, 16 Klein features; {n_test} test rows; 1 thread\n")
    rows = []
    for label, n_classes in (("binary", 2), ("8-class", 8), ("regressor", 0)):
        if n_classes:
            y = np.argmax(k_train[:, :n_classes] + 0.3 * rng.normal(size=(n_train, n_classes)), axis=1)
            cls = h.HyperbolicRandomForestClassifier
        else:
            y = np.sin(3 * k_train[:, 0]) + k_train[:, 1]
            cls = h.HyperbolicRandomForestRegressor
        model = cls(n_estimators=n_trees, max_depth=8, random_state=0, n_jobs=2).fit(X_train, y)

        t = time.perf_counter()
        exact = h.to_onnx(model)
        t_ours = time.perf_counter() - t
        compat = h.to_onnx(model, encoding="compat")
        standard = h.to_onnx(model, encoding="standard")
        options = {"zipmap": False} if n_classes else None
        t = time.perf_counter()
        theirs = skl2onnx.to_onnx(model.estimator_, k32[:1], options=options)
        t_theirs = time.perf_counter() - t
        # Same trees, Klein input: no projection nodes.
        described = describe(model)
        klein_space = replace(described.space, geometry="klein", n_input_features=16)
        assert isinstance(klein_space, InputSpace)
        no_projection = compile_model(
            replace(described, space=klein_space), dtype="float32", encoding="exact", opset=18
        )
        results = time_graphs(
            {
                "skl2onnx (Klein input)": (theirs, k32),
                "hyp2onnx exact": (exact, X_test),
                "hyp2onnx compat": (compat, X_test),
                "hyp2onnx standard (no ai.onnx.ml)": (standard, X_test),
                "exact, Klein input (no projection)": (no_projection, k32),
            },
            X_test,
            repeats=repeats,
            single_calls=calls,
        )
        base_rate, base_lat = results["skl2onnx (Klein input)"]
        print(f"## {label} (conversion: hyp2onnx {t_ours:.3f} s, skl2onnx {t_theirs:.3f} s, "
              f"{t_theirs / t_ours:.1f}x)")
        print(f"{'graph':38s} {'rows/s':>10s} {'vs skl2onnx':>12s} {'1-row µs':>9s}")
        for name, (rate, lat) in results.items():
            print(f"{name:38s} {rate / 1e3:9.0f}k {rate / base_rate:11.2f}x {lat:9.1f}")
        proj_rate = results["hyp2onnx exact"][0] / results["exact, Klein input (no projection)"][0]
        proj_lat = results["hyp2onnx exact"][1] - results["exact, Klein input (no projection)"][1]
        print(f"projection cost: throughput {100 * (1 - proj_rate):+.1f}%, "
              f"single row {proj_lat:+.2f} µs\n")
        rows.append((label, t_ours, t_theirs, results))


if __name__ == "__main__":
    main()
