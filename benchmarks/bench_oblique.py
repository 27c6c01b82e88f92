"""Oblique (HHCART) hyperbolic trees against the axis-parallel tree, and the cost of exactness.

1. Accuracy on the paper's benchmark: 8-class mixtures of wrapped normals,
   1000 points, depth-3 trees, 80/20 split, several seeds, d = 2, 4, 8, 16:
   ``HyperbolicDecisionTreeClassifier`` (axis-parallel, Fast-HyperDT) against
   ``HyperbolicHouseholderTreeClassifier`` with ``directions="hhcart"``
   (HHCART's class-scatter reflections) and ``"hhcart+fisher"`` (the
   default: also Fisher discriminant directions). Mean test accuracy, the
   share of seeds where the oblique tree scores at least the axis tree, and
   median fit time. The same for regression (test MSE) with ``--regression``.
2. The projection stage of the exported graph: the fixed-order Mul/Add chain
   the exporter emits against a single MatMul, on 100k rows (one
   onnxruntime thread): rows per second, single-row latency, and how many
   projections MatMul computes differently from the Python model.

    python benchmarks/bench_oblique.py [--quick] [--seeds N] [--regression] [--out DIR]

Writes its tables to ``oblique.md`` in ``benchmarks/results/`` (``--quick``: a
temporary folder).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

import numpy as np
import onnxruntime as ort
from _report import add_output_args, environment, output_dir, steps, write
from onnx import helper
from sklearn.metrics import mean_squared_error
from sklearn.model_selection import train_test_split

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.emit import strategy as export
from hyp2onnx.emit._graph import GraphBuilder
from hyp2onnx.emit.oblique import emit_normals, remap_projection
from hyp2onnx.ir.projection import project

DIMS = (2, 4, 8, 16)


def models(task: str) -> dict:
    if task == "classification":
        return {
            "axis": lambda: h.HyperbolicDecisionTreeClassifier(max_depth=3, random_state=0),
            "hhcart": lambda: h.HyperbolicHouseholderTreeClassifier(
                max_depth=3, directions="hhcart", random_state=0
            ),
            "hhcart+fisher": lambda: h.HyperbolicHouseholderTreeClassifier(
                max_depth=3, random_state=0
            ),
        }
    return {
        "axis": lambda: h.HyperbolicDecisionTreeRegressor(max_depth=3, random_state=0),
        "hhcart": lambda: h.HyperbolicHouseholderTreeRegressor(
            max_depth=3, directions="hhcart", random_state=0
        ),
        "hhcart+fisher": lambda: h.HyperbolicHouseholderTreeRegressor(max_depth=3, random_state=0),
    }


def accuracy_table(task: str, seeds: int) -> None:
    makers = models(task)
    metric = "accuracy %" if task == "classification" else "test MSE"
    print(f"\n{task}: 8-class wrapped-normal mixtures, 1000 points, depth 3, 80/20, {seeds} seeds")
    header = f"{'d':>3} " + " ".join(f"{name + ' ' + metric:>22}" for name in makers)
    header += "  seeds oblique >= axis   " + " ".join(f"{'fit ms ' + n:>18}" for n in makers)
    print(header)
    for d in steps(DIMS, f"dims, {task}", unit="dims"):
        scores = {name: [] for name in makers}
        times = {name: [] for name in makers}
        for seed in range(seeds):
            X, y = make_wrapped_normal_mixture(
                1000, d, 8, regression=task == "regression", random_state=seed
            )
            X_train, X_test, y_train, y_test = train_test_split(
                X, y, test_size=0.2, random_state=seed
            )
            for name, make in makers.items():
                t = time.perf_counter()
                model = make().fit(X_train, y_train)
                times[name].append(time.perf_counter() - t)
                pred = model.predict(X_test)
                if task == "classification":
                    scores[name].append(100.0 * np.mean(pred == y_test))
                else:
                    scores[name].append(mean_squared_error(y_test, pred))
        axis = np.array(scores["axis"])
        better = (lambda a: a >= axis) if task == "classification" else (lambda a: a <= axis)
        digits = 2 if task == "classification" else 4
        row = f"{d:>3} " + " ".join(
            f"{np.mean(s):>{16 - digits}.{digits}f} ± {np.std(s):>{3 + digits}.{digits}f}"
            for s in scores.values()
        )
        wins = " / ".join(
            f"{int(better(np.array(scores[n])).sum())}" for n in makers if n != "axis"
        )
        row += f"  {wins:>23}  " + " ".join(
            f"{1000 * statistics.median(t):>18.1f}" for t in times.values()
        )
        print(row)


def _session(model) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _projection_graph(ensemble, matmul: bool):
    """A graph K [N, d] (double) -> P [N, m]: the exporter's chain, or one MatMul."""
    g = GraphBuilder(18)
    g.reserve("K", "P")
    if matmul:
        out, _, _ = _emit_normals_matmul(g, "K", "float64", ensemble)
    else:
        out, _, _ = emit_normals(g, "K", "float64", ensemble)
    g.rename(out, "P")
    d, m = ensemble.projection.shape
    graph = helper.make_graph(
        g.nodes,
        "projection",
        [helper.make_tensor_value_info("K", 11, ["N", d])],
        [helper.make_tensor_value_info("P", 11, ["N", m])],
        g.initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def _time(session: ort.InferenceSession, feeds: dict, *, repeats: int, single: dict, calls: int):
    batch, one = [], []
    session.run(None, single)
    for _ in range(repeats):
        t = time.perf_counter()
        session.run(None, feeds)
        batch.append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in range(calls):
            session.run(None, single)
        one.append((time.perf_counter() - t) / calls)
    return statistics.median(batch), statistics.median(one)


def projection_cost(n_rows: int, repeats: int) -> None:
    print(f"\nprojection stage, {n_rows} rows, one onnxruntime thread (median of {repeats})")
    print(
        f"{'d':>3} {'splits':>6} {'graph':>14} {'rows/s':>12} {'1-row µs':>9} "
        f"{'P differs from Python':>22}"
    )
    for d in DIMS:
        X, y = make_wrapped_normal_mixture(4000, d, 8, random_state=0)
        model = h.HyperbolicHouseholderTreeClassifier(max_depth=3, random_state=0).fit(X, y)
        ensemble, used = remap_projection(model.to_ir().ensemble)
        normals = ensemble.projection
        X_test, _ = make_wrapped_normal_mixture(n_rows, d, 8, random_state=1)
        k = np.ascontiguousarray(model.to_klein(X_test)[:, used])
        want = project(k, normals)
        for name, matmul in (("Mul/Add chain", False), ("MatMul", True)):
            session = _session(_projection_graph(ensemble, matmul))
            got = session.run(None, {"K": k})[0]
            differs = np.mean(np.any(got != want, axis=1))
            rows_s, single = _time(
                session, {"K": k}, repeats=repeats, single={"K": k[:1]}, calls=2000
            )
            print(
                f"{d:>3} {normals.shape[1]:>6} {name:>14} {n_rows / rows_s:>12,.0f} "
                f"{1e6 * single:>9.1f} {100 * differs:>20.3f} %"
            )

    print("\nwhole exported classifier (hyperboloid float32 input, exact encoding)")
    print(f"{'d':>3} {'graph':>14} {'rows/s':>12} {'1-row µs':>9} {'labels differ':>14}")
    for d in DIMS:
        X, y = make_wrapped_normal_mixture(4000, d, 8, random_state=0)
        model = h.HyperbolicHouseholderTreeClassifier(max_depth=3, random_state=0).fit(X, y)
        X_test = make_wrapped_normal_mixture(n_rows, d, 8, random_state=1)[0].astype(np.float32)
        want = model.predict(X_test)
        for name in ("Mul/Add chain", "MatMul"):
            if name == "MatMul":
                export.emit_normals = _emit_normals_matmul
            try:
                onx = h.to_onnx(model)
            finally:
                export.emit_normals = emit_normals
            session = _session(onx)
            labels = session.run(["label"], {"X": X_test})[0]
            rows_s, single = _time(
                session, {"X": X_test}, repeats=repeats, single={"X": X_test[:1]}, calls=2000
            )
            print(
                f"{d:>3} {name:>14} {n_rows / rows_s:>12,.0f} {1e6 * single:>9.1f} "
                f"{int(np.sum(labels != want)):>14}"
            )


def _emit_normals_matmul(g, k, k_dtype, ensemble):
    """The one-MatMul projection, for comparison only (not exact)."""
    if k_dtype != "float64":
        k = g.cast("oblique", k, np.float64)
    out = g.op("oblique", "MatMul", [k, g.const("oblique", "normals", ensemble.projection)])
    planar = replace(ensemble, projection=None, n_features=int(ensemble.projection.shape[1]))
    return out, "float64", planar


class _Tee(io.StringIO):
    """Keeps what is printed and passes it on to the terminal."""

    def __init__(self, stream: Any) -> None:
        super().__init__()
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(text)
        return super().write(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--regression", action="store_true", help="also the regression table")
    args = parser.parse_args(argv)
    seeds = 3 if args.quick else args.seeds
    kept = _Tee(sys.stdout)
    with contextlib.redirect_stdout(kept):
        accuracy_table("classification", seeds)
        if args.regression:
            accuracy_table("regression", seeds)
        projection_cost(10_000 if args.quick else 100_000, 3 if args.quick else 7)
    intro = __doc__.split("\n\n", 1)[1].rsplit("\n\n", 2)[0]
    text = "\n\n".join(
        [
            "# Oblique (HHCART) trees against the axis-parallel tree, and the projection's cost",
            intro,
            environment(),
            "```text\n" + kept.getvalue().strip("\n") + "\n```",
        ]
    )
    write(output_dir(args) / "oblique.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
