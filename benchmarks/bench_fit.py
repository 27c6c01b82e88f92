"""Fit time and peak memory of every hyperbolic estimator against its plain library.

Both sides fit the same precomputed unit-ball Klein coordinates (float64,
``x_s / x_0`` of an 8-class ``make_wrapped_normal_mixture``), with the same
parameters and threads: the hyperbolic estimator with
``input_geometry="klein"`` (it also validates the points, maps them to its
``tree_space``, moves every threshold to its Einstein midpoint and decides
the input dtype), the library on the coordinates themselves. Pairs:

- decision tree, random forest, extra trees, XGBoost, LightGBM, CatBoost:
  the wrapped class with the same parameters; extra trees also with
  ``tree_space="klein"`` (the default "ranks" draws each random threshold
  between two ranks, so it grows another, bushier forest than the library's);
- oblique (HHCART) tree: hyp2onnx's own Euclidean HHCART tree
  (``HouseholderTreeClassifier``, the class the hyperbolic one wraps: the same
  node search by scikit-learn's splitter, thresholds at arithmetic midpoints),
  since no library grows HHCART trees; ``--oblique-vs-axis`` measures it
  against one axis-parallel scikit-learn tree instead (the oblique search's
  own cost, about 23x);
- isolation forest: scikit-learn's ``IsolationForest``, against the default
  (centred splits, grown by hyp2onnx) and against ``splits="axis",
  threshold_law="klein"`` (which is scikit-learn's forest, same draws);
- rotation forest: as many scikit-learn trees of the same depth, each on the
  coordinates times a random orthogonal matrix;
- MLP: scikit-learn's ``MLPClassifier``.

Times are wall-clock, the two sides interleaved, best of ``--repeats``.
Peak memory is measured in a forked child per fit (before any fit in the
parent): its peak resident memory (``ru_maxrss``) minus its resident
memory when the fit starts. A profile splits the hyperbolic fit of three
estimators into its stages, by timers around each stage (cProfile's own
figures, also given, inflate Python-heavy stages by its per-call cost).

    python benchmarks/bench_fit.py [--quick] [--sizes 10000 100000] [--dims 2 8 16]
        [--threads 1 2] [--repeats 3] [--trees 20] [--only NAME ...]
        [--large 100000 --large-dims 8 --skip "oblique tree"] [--oblique-vs-axis]
        [--name fit.md]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import resource
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.estimators._householder import HouseholderTreeClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, write

Factory = Callable[[], Any]


class RotatedTrees:
    """``n`` scikit-learn trees, each fitted on the points times its own random rotation."""

    def __init__(self, n: int, max_depth: int, seed: int = 0) -> None:
        self.n, self.max_depth, self.seed = n, max_depth, seed

    def fit(self, X: np.ndarray, y: np.ndarray) -> RotatedTrees:
        from sklearn.tree import DecisionTreeClassifier

        rng = np.random.default_rng(self.seed)
        self.trees_ = []
        for t in range(self.n):
            q, _ = np.linalg.qr(rng.normal(size=(X.shape[1], X.shape[1])))
            tree = DecisionTreeClassifier(max_depth=self.max_depth, random_state=t)
            self.trees_.append((q, tree.fit(X @ q, y)))
        return self


def pairs(
    threads: int, trees: int, oblique_vs_axis: bool = False
) -> dict[str, tuple[Factory, Factory]]:
    """Each estimator: (hyperbolic, plain library), both unfitted, same parameters;
    ``oblique_vs_axis``: the oblique tree against an axis-parallel tree."""
    import catboost
    import lightgbm
    import xgboost
    from sklearn import ensemble, neural_network, tree

    k = {"input_geometry": "klein"}
    forest = {"n_estimators": trees, "max_depth": 10, "random_state": 0, "n_jobs": threads}
    boost = {"n_estimators": trees, "random_state": 0, "n_jobs": threads}
    cat = {"iterations": trees, "depth": 6, "thread_count": threads, "verbose": 0}
    cat["allow_writing_files"] = False  # no catboost_info folder
    iso = {"random_state": 0, "n_jobs": threads}
    mlp = {"hidden_layer_sizes": (32,), "max_iter": 20, "random_state": 0}
    return {
        "decision tree": (
            lambda: h.HyperbolicDecisionTreeClassifier(max_depth=10, random_state=0, **k),
            lambda: tree.DecisionTreeClassifier(max_depth=10, random_state=0),
        ),
        "random forest": (
            lambda: h.HyperbolicRandomForestClassifier(**forest, **k),
            lambda: ensemble.RandomForestClassifier(**forest),
        ),
        "extra trees": (
            lambda: h.HyperbolicEstimator(ensemble.ExtraTreesClassifier(**forest), **k),
            lambda: ensemble.ExtraTreesClassifier(**forest),
        ),
        # The default tree space draws each random threshold uniformly between two
        # ranks, not two Klein values: another (bushier) forest than the library's.
        # On Klein values both grow the same trees, so this row is the correction's cost.
        "extra trees, klein": (
            lambda: h.HyperbolicEstimator(
                ensemble.ExtraTreesClassifier(**forest), tree_space="klein", **k
            ),
            lambda: ensemble.ExtraTreesClassifier(**forest),
        ),
        "XGBoost": (
            lambda: h.HyperbolicXGBClassifier(max_depth=6, **boost, **k),
            lambda: xgboost.XGBClassifier(max_depth=6, **boost),
        ),
        "LightGBM": (
            lambda: h.HyperbolicLGBMClassifier(verbose=-1, **boost, **k),
            lambda: lightgbm.LGBMClassifier(verbose=-1, **boost),
        ),
        "CatBoost": (
            lambda: h.HyperbolicCatBoostClassifier(random_seed=0, **cat, **k),
            lambda: catboost.CatBoostClassifier(random_seed=0, **cat),
        ),
        "oblique tree": (
            lambda: h.HyperbolicHouseholderTreeClassifier(max_depth=6, random_state=0, **k),
            (lambda: tree.DecisionTreeClassifier(max_depth=6, random_state=0))
            if oblique_vs_axis
            else (lambda: HouseholderTreeClassifier(max_depth=6, random_state=0)),
        ),
        "isolation forest": (
            lambda: h.HyperbolicIsolationForest(n_estimators=5 * trees, **iso, **k),
            lambda: ensemble.IsolationForest(n_estimators=5 * trees, **iso),
        ),
        "isolation forest, axis": (
            lambda: h.HyperbolicIsolationForest(
                n_estimators=5 * trees, splits="axis", threshold_law="klein", **iso, **k
            ),
            lambda: ensemble.IsolationForest(n_estimators=5 * trees, **iso),
        ),
        "rotation forest": (
            lambda: h.HyperbolicRotationForestClassifier(
                n_estimators=trees, max_depth=10, random_state=0, n_jobs=threads, **k
            ),
            lambda: RotatedTrees(trees, max_depth=10),
        ),
        "MLP": (
            lambda: h.HyperbolicMLPClassifier(**mlp, **k),
            lambda: neural_network.MLPClassifier(**mlp),
        ),
    }


def klein_data(n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Klein coordinates of an 8-class wrapped-normal mixture, and its labels."""
    X, y = make_wrapped_normal_mixture(n, d, 8, random_state=0)
    return X[:, 1:] / X[:, :1], y


def fit_seconds(make: Factory, X: np.ndarray, y: np.ndarray, threads: int) -> float:
    """Wall time of one fit, BLAS and OpenMP pools limited to ``threads``."""
    model = make()
    with threadpool_limits(threads):
        start = time.perf_counter()
        model.fit(X, y)
        return time.perf_counter() - start


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_bytes(make: Factory, X: np.ndarray, y: np.ndarray, threads: int) -> int:
    """Peak resident memory a fit adds, measured in a forked child (-1 if it failed)."""
    read, written = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: fit, report, leave without cleanup
        code = 1
        try:
            os.close(read)
            start = _rss()
            fit_seconds(make, X, y, threads)
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - start
            os.write(written, str(peak).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(written)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return int(text) if text else -1


def measure(
    args: argparse.Namespace, done: Callable[[list[dict[str, Any]]], None]
) -> list[dict[str, Any]]:
    """Every pair at every size, dimension and thread count: memory first (forked
    children, before the parent fits anything), then interleaved times; ``done``
    gets the rows measured so far after each."""
    rows: list[dict[str, Any]] = []
    for n, d, t in configs(args):
        X, y = klein_data(n, d)
        for name, (hyper, plain) in pairs(t, args.trees, args.oblique_vs_axis).items():
            if (args.only and name not in args.only) or (n >= args.large and name in args.skip):
                continue
            memory = (n, d, t) in memory_configs(args)
            rows.append(
                {
                    "n": n,
                    "d": d,
                    "threads": t,
                    "name": name,
                    "peak": [peak_bytes(f, X, y, t) for f in (plain, hyper)] if memory else None,
                }
            )
    for row in steps(rows, "fits", unit="pairs"):
        X, y = klein_data(row["n"], row["d"])
        hyper, plain = pairs(row["threads"], args.trees, args.oblique_vs_axis)[row["name"]]
        for make in (plain, hyper):  # imports and first-call costs out of the way
            fit_seconds(make, X[:300], y[:300], row["threads"])
        times: list[list[float]] = [[], []]
        for _ in range(args.repeats):
            for side, make in enumerate((plain, hyper)):
                times[side].append(fit_seconds(make, X, y, row["threads"]))
        row["seconds"] = [min(s) for s in times]
        print(row["n"], row["d"], row["threads"], row["name"], row["seconds"], row["peak"])
        done([r for r in rows if "seconds" in r])
    return rows


def configs(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    """(rows, d, threads) to measure: every dimension below ``--large`` rows, the
    ``--large-dims`` from there on."""
    return [
        (n, d, t)
        for n in args.sizes
        for d in (args.dims if n < args.large else args.large_dims)
        for t in args.threads
    ]


def memory_configs(args: argparse.Namespace) -> set[tuple[int, int, int]]:
    """Where peak memory is measured: each size, at the middle dimension, one thread."""
    d = args.dims[len(args.dims) // 2]
    return {(n, d, args.threads[0]) for n in args.sizes if (n, d, args.threads[0]) in configs(args)}


# -- where the hyperbolic fit's time goes -------------------------------------


@contextlib.contextmanager
def stage_timers() -> Iterator[dict[str, float]]:
    """Wrap each stage of ``HyperbolicTreeModel.fit`` in a timer; yield the totals."""
    from hyp2onnx.estimators import _base
    from hyp2onnx.estimators._registry import backend_for

    totals: dict[str, float] = {}
    patched: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, attr: str, stage: str) -> None:
        original = owner.__dict__[attr]

        def timed(*a: Any, **kw: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*a, **kw)
            finally:
                totals[stage] = totals.get(stage, 0.0) + time.perf_counter() - start

        patched.append((owner, attr, original))
        setattr(owner, attr, timed)

    model = _base.HyperbolicTreeModel
    wrap(model, "_features", "Klein coordinates, checks")
    wrap(model, "_tree_space", "tree space")
    wrap(model, "_float32_keeps_outputs", "float32 check")
    wrap(_base, "correct", "threshold correction")
    for backend_name in ("sklearn", "xgboost", "lightgbm"):
        backend = type(backend_for(_native(backend_name)))
        for cls in backend.__mro__:
            for attr, stage in (
                ("fit", "library fit (and model parse)"),
                ("training_rows", "training rows"),
                ("read_trees", "read trees"),
                ("write_thresholds", "write thresholds"),
            ):
                if attr in cls.__dict__ and (cls, attr) not in {(o, a) for o, a, _ in patched}:
                    wrap(cls, attr, stage)
    try:
        yield totals
    finally:
        for owner, attr, original in reversed(patched):
            setattr(owner, attr, original)


def _native(name: str) -> Any:
    from sklearn.tree import DecisionTreeClassifier

    if name == "xgboost":
        import xgboost

        return xgboost.XGBClassifier()
    if name == "lightgbm":
        import lightgbm

        return lightgbm.LGBMClassifier()
    return DecisionTreeClassifier()


def profile(n: int, d: int, trees: int) -> list[list[Any]]:
    """Stage times of three hyperbolic fits (timers, then cProfile's cumulative times)."""
    X, y = klein_data(n, d)
    rows = []
    for name in ("random forest", "XGBoost", "LightGBM"):
        hyper, _ = pairs(1, trees)[name]
        hyper().fit(X[:500], y[:500])  # imports and first-call costs out of the way
        with stage_timers() as totals:
            start = time.perf_counter()
            hyper().fit(X, y)
            total = time.perf_counter() - start
        profiler = cProfile.Profile()
        profiler.enable()
        hyper().fit(X, y)
        profiler.disable()
        cumulative = _cumulative(pstats.Stats(profiler))
        for stage, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
            rows.append([name, stage, f"{seconds:.3f}", f"{100 * seconds / total:.0f}%"])
        rows.append([name, "whole fit", f"{total:.3f}", "100%"])
        rows.append([name, "cProfile: float32 check / correction", cumulative, ""])
    return rows


def _cumulative(stats: pstats.Stats) -> str:
    """cProfile's cumulative seconds of the float32 check and of the correction."""
    found = {"_float32_keeps_outputs": 0.0, "correct": 0.0}
    for (path, _, function), entry in stats.stats.items():  # type: ignore[attr-defined]
        if function in found and "hyp2onnx" in path:
            found[function] = max(found[function], entry[3])
    return " / ".join(f"{v:.3f} s" for v in found.values())


# -- report ---------------------------------------------------------------------


def _mb(b: int) -> str:
    return f"{b / 2**20:.0f}" if b >= 0 else "failed"


def report(rows: list[dict[str, Any]], split: list[list[Any]], args: argparse.Namespace) -> str:
    env, load = environment(), os.getloadavg()
    out = [
        "# Fit time and memory against the plain library"
        + (f": {args.title}" if args.title else ""),
        "",
        f"Generated by `benchmarks/bench_fit.py{' --quick' if args.quick else ''}`. " + env,
        f"Load average at the end: {load[0]:.1f} (1 min), {load[1]:.1f} (5 min), on a shared "
        "machine: each side's best of "
        f"{args.repeats} interleaved runs; ratios are what to read.",
        "",
        "Both sides fit the same float64 Klein coordinates (8-class wrapped-normal mixture) "
        f"with the same parameters; forests and boosters grow {args.trees} trees (rounds); "
        "isolation forests five times as many; forests depth 10, XGBoost and CatBoost depth 6, the oblique tree depth 6 against "
        + (
            "one axis-parallel scikit-learn tree"
            if args.oblique_vs_axis
            else "the Euclidean HHCART tree it wraps (no library grows HHCART trees)"
        )
        + ", the rotation forest against as many scikit-learn trees on "
        "randomly rotated coordinates, the MLP 32 hidden units, 20 epochs. "
        f"From {args.large:,} rows: d = {', '.join(map(str, args.large_dims))} only"
        + (f", without {', '.join(args.skip)}" if args.skip else "")
        + " (the machine's time).",
        "",
    ]
    headers = ["estimator", "library s", "hyp2onnx s", "time ratio"]
    for n in args.sizes:
        for d in args.dims:
            for t in args.threads:
                group = [r for r in rows if (r["n"], r["d"], r["threads"]) == (n, d, t)]
                if not group:
                    continue
                memory = group[0]["peak"] is not None
                head = headers + (["library MB", "hyp2onnx MB", "memory ratio"] if memory else [])
                table = [_row(r, memory) for r in group]
                out += [f"## {n:,} rows, d = {d}, {t} thread{'s' if t > 1 else ''}", ""]
                out += [md_table(head, table), ""]
    out += [
        "## Where the hyperbolic fit's time goes",
        "",
        f"{args.profile_rows:,} rows, d = {args.dims[len(args.dims) // 2]}, one thread, "
        f"{args.trees} trees (rounds). Timers around each stage; cProfile's cumulative "
        "times of the same stages, in a second fit, show how much its per-call cost "
        "inflates Python-heavy stages.",
        "",
        md_table(["estimator", "stage", "seconds", "share"], split),
        "",
    ]
    return "\n".join(out)


def _row(r: dict[str, Any], memory: bool) -> list[str]:
    plain, hyper = r["seconds"]
    row = [r["name"], f"{plain:.3f}", f"{hyper:.3f}", f"{hyper / plain:.2f}x"]
    if memory:
        p, q = r["peak"]
        row += [_mb(p), _mb(q), f"{q / p:.2f}x" if p > 0 and q >= 0 else "n/a"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8, 16])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trees", type=int, default=20, help="trees of forests and boosters")
    parser.add_argument("--profile-rows", type=int, default=40_000)
    parser.add_argument("--only", nargs="+", default=None, help="estimator names to run")
    parser.add_argument(
        "--large", type=int, default=100_000, help="from this many rows: --large-dims, --skip"
    )
    parser.add_argument("--large-dims", type=int, nargs="+", default=[8])
    parser.add_argument("--skip", nargs="+", default=["oblique tree"], help="estimator names")
    parser.add_argument(
        "--oblique-vs-axis",
        action="store_true",
        help="the oblique tree against one scikit-learn tree (the oblique search's cost)",
    )
    parser.add_argument("--name", default="fit.md", help="results file name in the output folder")
    parser.add_argument("--title", default="", help="what sets this run apart, after the title")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.dims, args.threads = [800], [2], [1]
        args.repeats, args.trees, args.profile_rows = 1, 3, 800
    out = output_dir(args)
    split = profile(args.profile_rows, args.dims[len(args.dims) // 2], args.trees)
    rows = measure(args, lambda done: (out / args.name).write_text(report(done, split, args)))
    text = report(rows, split, args)
    print(text)
    write(out / args.name, text)


if __name__ == "__main__":
    main()
