"""Inference speed: the Python estimator, the exported graphs in onnxruntime, and plain skl2onnx.

Three models trained on 20,000 rows of wrapped-normal mixtures in d = 16
(``hyp2onnx.datasets``): a depth-8 tree (8 classes) and 100-tree depth-8
random forests (2 and 8 classes). On 100,000 further rows of the same
mixture, for each model:

* the hyp2onnx estimator's ``predict_proba`` in Python (float64 hyperboloid
  input; scikit-learn with ``n_jobs=1``);
* the exported graph (``hyp2onnx.to_onnx``) in onnxruntime: the default
  (fast), exact and compat encodings, fed the float32 hyperboloid points in
  the dtype each graph declares (widened exactly for a float64 graph);
* skl2onnx's plain Euclidean graph of the same (corrected) trees, fed
  float32 Klein coordinates computed beforehand: the floor without the
  projection;
* the same plain graph behind a numpy projection of the float32 hyperboloid
  rows (``x[:, 1:] / x[:, :1]``): what a user without hyp2onnx's graph runs.

Throughput is rows per second on the 100k-row batch, latency the time of a
single-row call; onnxruntime uses one thread. Every system is timed once
per round (the graphs by ``bench_export.time_graphs``) and the table gives
medians over the rounds. "labels ≠ Python" counts rows whose label differs
from the Python model's on the same float32 points.

    python benchmarks/bench_inference.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import skl2onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write
from bench_export import klein_twin, session, time_graphs

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture

DIM = 16


def python_timing(model, X: np.ndarray, *, single_calls: int) -> tuple[float, float]:
    """Rows/s of one ``predict_proba`` on ``X`` and µs per single-row call (mean of the calls)."""
    t = time.perf_counter()
    model.predict_proba(X)
    rate = len(X) / (time.perf_counter() - t)
    one = X[:1]
    t = time.perf_counter()
    for _ in range(single_calls):
        model.predict_proba(one)
    return rate, (time.perf_counter() - t) / single_calls * 1e6


def projected_timing(onnx_model, X32: np.ndarray, *, single_calls: int) -> tuple[float, float]:
    """The same for numpy's Klein projection of float32 hyperboloid rows, then the plain graph."""
    s = session(onnx_model)

    def run(x: np.ndarray) -> None:
        s.run(None, {"X": x[:, 1:] / x[:, :1]})

    run(X32[:1])
    t = time.perf_counter()
    run(X32)
    rate = len(X32) / (time.perf_counter() - t)
    one = X32[:1]
    t = time.perf_counter()
    for _ in range(single_calls):
        run(one)
    return rate, (time.perf_counter() - t) / single_calls * 1e6


def interleaved(
    model, graphs: dict, X32: np.ndarray, X64: np.ndarray, *, rounds: int, calls: int, py_calls: int
) -> dict[str, tuple[float, float]]:
    """Median (rows/s, µs per row call) of every system over ``rounds`` interleaved rounds.

    Each round times the graphs once with ``bench_export.time_graphs``, then
    the Python estimator, then numpy projection + the plain skl2onnx graph.
    """
    samples: dict[str, list[tuple[float, float]]] = {}
    model.predict_proba(X64[:1])  # warm-up
    for _ in range(rounds):
        for name, value in time_graphs(graphs, X32, repeats=1, single_calls=calls).items():
            samples.setdefault(name, []).append(value)
        samples.setdefault("Python estimator", []).append(
            python_timing(model, X64, single_calls=py_calls)
        )
        samples.setdefault("numpy projection, then skl2onnx", []).append(
            projected_timing(graphs["skl2onnx, Klein input"][0], X32, single_calls=calls)
        )
    return {
        name: (statistics.median(v[0] for v in values), statistics.median(v[1] for v in values))
        for name, values in samples.items()
    }


def _as_declared(onnx_model, x32: np.ndarray, x64: np.ndarray) -> np.ndarray:
    """The float32 points as the graph's input type (float64 graphs: the same values, widened)."""
    double = onnx_model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    return x64 if double else x32


def labels_of(onnx_model, x: np.ndarray) -> np.ndarray:
    return session(onnx_model).run(None, {"X": x})[0].ravel()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    args = parser.parse_args(argv)
    n_train, n_test, n_trees, repeats, calls, py_calls = (
        (2_000, 5_000, 10, 2, 50, 10) if args.quick else (20_000, 100_000, 100, 7, 2_000, 200)
    )
    out = output_dir(args)
    specs = (
        (
            "tree, 8 classes",
            8,
            lambda: h.HyperbolicDecisionTreeClassifier(max_depth=8, random_state=0),
        ),
        (
            "forest, binary",
            2,
            lambda: h.HyperbolicRandomForestClassifier(
                n_estimators=n_trees, max_depth=8, random_state=0, n_jobs=2
            ),
        ),
        (
            "forest, 8 classes",
            8,
            lambda: h.HyperbolicRandomForestClassifier(
                n_estimators=n_trees, max_depth=8, random_state=0, n_jobs=2
            ),
        ),
    )
    started = time.perf_counter()
    headers = (
        "model",
        "system",
        f"rows/s ({n_test // 1000}k batch)",
        "vs skl2onnx",
        "1-row call, µs",
        "labels ≠ Python",
    )
    rows = []
    for label, n_classes, make in steps(specs, "models", unit="models"):
        X, y = make_wrapped_normal_mixture(n_train + n_test, DIM, n_classes, random_state=0)
        model = make().fit(X[:n_train], y[:n_train])
        if hasattr(model.estimator_, "n_jobs"):
            model.estimator_.set_params(n_jobs=1)
        X32 = X[n_train:].astype(np.float32)
        X64 = X32.astype(np.float64)  # the same float32 points, for the Python model
        k32 = model.to_klein(X64).astype(np.float32)
        default, exact = h.to_onnx(model), h.to_onnx(model, encoding="exact")
        compat = h.to_onnx(model, encoding="compat")
        graphs = {  # each graph gets the same points in the dtype it declares
            "hyp2onnx default (fast)": (default, _as_declared(default, X32, X64)),
            "hyp2onnx exact": (exact, _as_declared(exact, X32, X64)),
            "hyp2onnx compat": (compat, _as_declared(compat, X32, X64)),
            "skl2onnx, Klein input": (
                skl2onnx.to_onnx(klein_twin(model), k32[:1], options={"zipmap": False}),
                k32,
            ),
        }
        timing = interleaved(
            model, graphs, X32, X64, rounds=repeats, calls=calls, py_calls=py_calls
        )
        reference = model.predict(X64)
        base_rate = timing["skl2onnx, Klein input"][0]
        system_rows = [("Python estimator", *timing["Python estimator"], 0)]
        for name, (onnx_model, x) in graphs.items():
            system_rows.append(
                (name, *timing[name], int(np.sum(labels_of(onnx_model, x) != reference)))
            )
        projected = labels_of(graphs["skl2onnx, Klein input"][0], X32[:, 1:] / X32[:, :1])
        system_rows.append(
            (
                "numpy projection, then skl2onnx",
                *timing["numpy projection, then skl2onnx"],
                int(np.sum(projected != reference)),
            )
        )
        for name, rate, lat, diff in system_rows:
            rows.append(
                (
                    label,
                    name,
                    f"{rate / 1e3:,.0f}k",
                    f"{rate / base_rate:.2f}x",
                    f"{lat:,.1f}",
                    diff,
                )
            )
        print(text_table(headers, rows[-len(system_rows) :]), flush=True)
        print()
    elapsed = time.perf_counter() - started

    md = [
        "# Inference speed",
        "",
        f"Trained on {n_train:,} rows of wrapped-normal mixtures in d = {DIM}; timed on "
        f"{n_test:,} further rows. Tree: depth 8; forests: {n_trees} trees of depth 8. The Python "
        "estimator takes float64 hyperboloid points (scikit-learn, `n_jobs=1`); the hyp2onnx "
        "graphs (the default fast encoding, exact, compat) take the float32 hyperboloid points "
        "in the dtype each declares (widened exactly for float64 graphs); skl2onnx's plain "
        "graph of the same trees "
        "takes float32 Klein coordinates computed beforehand (no projection). onnxruntime with "
        'one thread; medians of interleaved runs. "labels ≠ Python" counts test rows whose '
        "label differs from the Python model's on the same float32 points.",
        "",
        md_table(headers, rows, align="llrrrr"),
        "",
        environment() + f" Whole run: {elapsed / 60:.1f} min.",
    ]
    write(out / "inference.md", "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
