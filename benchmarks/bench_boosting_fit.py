"""Fit time of hyperbolic XGBoost/LightGBM models against the plain libraries.

Each case fits the plain library model on unit-ball Klein points (float64,
as a user would hold them) and the hyperbolic model on the same points
(``input_geometry="klein"``: validation, projection, fit, correction and
write-back). The correction is also timed on its own, stage by stage, on a
plain fitted model: reading the trees (XGBoost: UBJSON parse; LightGBM:
model text), finding every split's nearest training values and placing the
thresholds, and writing them back (XGBoost: ``load_model``; LightGBM: a new
Booster from the rewritten text). Runs are interleaved; the table shows
medians.

Target (issue 3): at 100k rows and 100 trees the correction adds at most
15% to the plain fit.

    python benchmarks/bench_boosting_fit.py [--rows 100000] [--trees 100] [--dim 4]
        [--repeats 5] [--jobs 2] [--clock wall|cpu]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import lightgbm as lgb
import numpy as np
import xgboost as xgb
from _report import steps

from hyp2onnx import (
    HyperbolicLGBMClassifier,
    HyperbolicLGBMRegressor,
    HyperbolicXGBClassifier,
    HyperbolicXGBRegressor,
)
from hyp2onnx.estimators import backend_for


def make_data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Klein points (hyperbolic radius uniform in [0, 4]), 3-class labels and a target."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    k = direction * np.tanh(rng.uniform(0.0, 4.0, size=(n, 1)))
    angle = np.arctan2(k[:, 1], k[:, 0])
    labels = np.floor((angle + np.pi) / (2 * np.pi) * 3).astype(np.int64) % 3
    flip = rng.random(n) < 0.1
    labels[flip] = rng.integers(0, 3, size=int(flip.sum()))
    target = np.sin(3 * k[:, 0]) + np.arctanh(np.clip(k[:, 1], -0.999, 0.999))
    target += 0.1 * rng.normal(size=n)
    return k, labels, target


def timed(call: Callable[[], object], clock: Callable[[], float]) -> float:
    start = clock()
    call()
    return clock() - start


def correction_stages(plain: object, Xk: np.ndarray, y: np.ndarray, clock) -> dict:
    """Seconds spent reading, correcting and writing back, on a fitted plain model."""
    backend = backend_for(plain)
    start = clock()
    trees = backend.read_trees(plain)
    rows = backend.training_rows(plain, y, None)
    read = clock()
    Xc = np.ascontiguousarray(Xk, dtype=backend.compare_dtype)
    thresholds, _ = backend.correct(trees, Xc, rows, midpoint="einstein")
    correct = clock()
    backend.write_thresholds(plain, thresholds)
    write = clock()
    return {"read": read - start, "correct": correct - read, "write": write - correct}


def bench(name: str, plain_cls, hyper_cls, params: dict, Xk, y, repeats: int, clock) -> dict:
    plain = lambda: plain_cls(**params).fit(Xk, y)
    hyper = lambda: hyper_cls(input_geometry="klein", **params).fit(Xk, y)
    plain(), hyper()  # warm up both paths once
    t_plain, t_hyper, stages = [], [], []
    for _ in range(repeats):
        t_plain.append(timed(plain, clock))
        t_hyper.append(timed(hyper, clock))
        stages.append(correction_stages(plain(), Xk, y, clock))
    med = statistics.median
    return {
        "case": name,
        "plain": med(t_plain),
        "hyper": med(t_hyper),
        **{key: med(s[key] for s in stages) for key in ("read", "correct", "write")},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--dim", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall time, or this process's CPU time (steadier on a busy machine; "
        "compare like with like only with --jobs 1)",
    )
    args = parser.parse_args(argv)
    clock = time.perf_counter if args.clock == "wall" else time.process_time

    Xk, labels, target = make_data(args.rows, args.dim)
    binary = (labels == 0).astype(np.int64)
    common = dict(n_estimators=args.trees, n_jobs=args.jobs, random_state=0)
    xgb_params = dict(common, tree_method="hist")
    lgb_params = dict(common, verbose=-1)
    cases = [
        ("xgboost binary", xgb.XGBClassifier, HyperbolicXGBClassifier, xgb_params, binary),
        ("xgboost 3-class", xgb.XGBClassifier, HyperbolicXGBClassifier, xgb_params, labels),
        ("xgboost regression", xgb.XGBRegressor, HyperbolicXGBRegressor, xgb_params, target),
        ("lightgbm binary", lgb.LGBMClassifier, HyperbolicLGBMClassifier, lgb_params, binary),
        ("lightgbm 3-class", lgb.LGBMClassifier, HyperbolicLGBMClassifier, lgb_params, labels),
        ("lightgbm regression", lgb.LGBMRegressor, HyperbolicLGBMRegressor, lgb_params, target),
    ]
    print(
        f"{args.rows} rows, {args.dim} Klein dims, {args.trees} boosting rounds, "
        f"n_jobs={args.jobs}, median of {args.repeats} ({args.clock} seconds)"
    )
    header = (
        f"{'case':<20} {'plain fit':>9} {'hyperbolic':>10} {'overhead':>8}   "
        f"{'read':>6} {'correct':>7} {'write':>6} {'correction':>10}"
    )
    print(header)
    print("-" * len(header))
    for name, plain_cls, hyper_cls, params, y in steps(cases, "cases"):
        r = bench(name, plain_cls, hyper_cls, params, Xk, y, args.repeats, clock)
        total = r["read"] + r["correct"] + r["write"]
        print(
            f"{r['case']:<20} {r['plain']:>9.3f} {r['hyper']:>10.3f} "
            f"{r['hyper'] / r['plain'] - 1:>8.1%}   {r['read']:>6.3f} {r['correct']:>7.3f} "
            f"{r['write']:>6.3f} {total / r['plain']:>10.1%}"
        )


if __name__ == "__main__":
    main()
