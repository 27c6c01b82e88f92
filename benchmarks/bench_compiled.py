"""The compiled scorer (lleaves) against the default ONNX graph: throughput, agreement.

For each model below, ``hyp2onnx.export.compiled.compile_model_lleaves`` and
the default graph of ``to_onnx`` score the same float32 hyperboloid points
(the compiled scorer reads them as float64, as the Python model does) at one
thread, interleaved, best of the rounds. Columns: the graph's and the
scorer's rows/s on one batch (the scorer's projection ``x_s / x_0``, the
compiled trees, the link and labels all included; no manifold check, which
the graph does not make either), their
ratio, the compiled trees alone, the compile time (a cache hit loads in
milliseconds), and the agreement with the Python model: labels differing
and the largest value difference, against verify's bound.

Models (16 Klein features, like ``bench_export.py``): LightGBM 8 classes
(100 rounds, 800 trees) and regressor (100 trees), plain models on Klein
coordinates exported with ``input_geometry="hyperboloid"``. A scikit-learn
forest of 100 depth-8 trees is left out: its one block of 100 trees of 255
nodes was still compiling after 25 minutes (docs/export.md, "Compiled
scoring").

    python benchmarks/bench_compiled.py [--quick] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write
from bench_export import DIM, _classes, _target, _with_its_input, klein_data, session

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.verification import verify

GEOMETRY = {"input_geometry": "hyperboloid"}


def models(n_trees: int) -> list[tuple[str, Any, bool]]:
    """(label, unfitted model, classifier)."""
    import lightgbm

    rounds = {"n_estimators": n_trees, "n_jobs": 1, "random_state": 0, "verbose": -1}
    return [
        ("LightGBM 8 classes", lightgbm.LGBMClassifier(**rounds), True),
        ("LightGBM regressor", lightgbm.LGBMRegressor(**rounds), False),
    ]


def best_rates(calls: dict[str, Any], n_rows: int, rounds: int) -> dict[str, float]:
    """Best rows/s of each call over ``rounds`` rounds, the calls interleaved."""
    best = dict.fromkeys(calls, 0.0)
    for call in calls.values():
        call()  # warm-up
    for _ in range(rounds):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            best[name] = max(best[name], n_rows / (time.perf_counter() - start))
    return best


def main(argv: list[str] | None = None) -> int:
    from hyp2onnx.export.compiled import compile_model_lleaves

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--rounds", type=int, default=None, help="timing rounds (default 7)")
    args = parser.parse_args(argv)
    out = output_dir(args)
    n_train, n_test, n_trees, rounds = (
        (1_000, 1_000, 5, 1) if args.quick else (20_000, 50_000, 100, 7)
    )
    rounds = args.rounds or rounds
    rng = np.random.default_rng(0)
    k_train = klein_data(n_train, DIM, rng)
    X = geometry.from_klein(klein_data(n_test, DIM, rng), "hyperboloid").astype(np.float32)
    X64 = X.astype(np.float64)
    load = os.getloadavg()[0]
    headers = [
        "model",
        "graph rows/s",
        "compiled rows/s",
        "compiled vs graph",
        "compiled trees alone vs graph",
        "compile, s",
        "labels differing",
        "largest value difference (bound)",
    ]
    rows = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as cache:
        for label, model, classifier in steps(models(n_trees), "models", unit="models"):
            y = _classes(k_train, 8, rng) if classifier else _target(k_train)
            model.fit(k_train, y)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # plain models: "exported with its own thresholds"
                graph, fed = _with_its_input(h.to_onnx(model, **GEOMETRY), X)
                start = time.perf_counter()
                scorer = compile_model_lleaves(model, cache_dir=cache, **GEOMETRY)
                compile_s = time.perf_counter() - start
            s = session(graph)
            k = X64[:, 1:] / X64[:, :1]
            rates = best_rates(
                {
                    "graph": lambda: s.run(None, {"X": fed}),
                    "compiled": lambda: scorer.predict_outputs(X64, check=False),
                    "trees": lambda: scorer.raw_scores(k),
                },
                len(X),
                rounds,
            )
            report = verify(model, scorer, X64)
            mismatches = "-" if report.label_mismatches is None else str(report.label_mismatches)
            diff = max(report.max_abs_diff.values())
            rows.append(
                [
                    label,
                    f"{rates['graph'] / 1e3:,.0f}k",
                    f"{rates['compiled'] / 1e3:,.0f}k",
                    f"{rates['compiled'] / rates['graph']:.2f}x",
                    f"{rates['trees'] / rates['graph']:.2f}x",
                    f"{compile_s:.1f}",
                    mismatches,
                    f"{diff:.2g} ({report.atol:.2g})",
                ]
            )
            print(text_table(headers, rows[-1:]), flush=True)
    elapsed = time.perf_counter() - started
    md = [
        "# The compiled scorer (lleaves) against the default ONNX graph",
        "",
        f"{n_trees} trees or rounds (8 classes: {8 * n_trees} trees), {DIM} Klein features, "
        f"trained on {n_train:,} rows; throughput on one batch of {n_test:,} float32 "
        "hyperboloid points at one thread (onnxruntime: one intra-op thread; lleaves: "
        f"n_jobs=1), best of {rounds} rounds in which each runs in turn. Compiled: numpy's "
        "projection (no manifold check, as in the graph), the compiled trees, the link and "
        "labels; "
        "'trees alone': the compiled trees on Klein coordinates computed beforehand. "
        "Compile: lleaves' compilation with an empty cache. Agreement: `hyp2onnx.verify` "
        "of the scorer against the Python model on the same points (its bound: the exact "
        "encoding's tolerance).",
        "",
        md_table(headers, rows, align="l" + "r" * (len(headers) - 1)),
        "",
        environment() + f" Load average at the start: {load:.2f}. Run: {elapsed / 60:.1f} min.",
    ]
    write(out / "compiled.md", "\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
