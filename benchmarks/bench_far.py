"""Far from the origin: does every backend separate what float64 geometry separates?

The ray test: points on one geodesic ray from the origin
(``hyp2onnx.datasets.make_geodesic_ray``), distance from the origin uniform
in ``r0 +- 0.5``, label ``r > r0``; 6,000 training and 2,000 test rows,
float64 hyperboloid input, 20 trees of depth 6 (``random_state=0``). The
split hyperplanes that cross the ray near ``r0`` lie about ``e^{-2 r0}``
apart in Klein coordinates. For each backend (scikit-learn forest, XGBoost,
LightGBM) and tree space (``ranks``, the default; ``rapidity``; ``klein``,
the paper's design), for rays at angle 0, 0.3 and pi/4 from the first axis
(d = 2) and along a random direction in d = 8, and r0 = 2 .. 16:

* test accuracy of the Python model;
* label differences between the Python model and the exported graph
  (exact encoding, float64 input, onnxruntime) on the test rows and on
  rows placed on every split's threshold and one ulp either side of it;
* how far out each configuration is reliable: the largest r0 up to which
  every accuracy is at least 0.99.

The Dask estimators (``hyp2onnx.dask``, XGBoost and LightGBM) run the
same cells on a 2-worker LocalCluster (1 thread each, the rows in 3
partitions), in tree spaces ``quantiles`` (their default: Klein coordinates
within a distance of 5 of the origin, each feature's bucket among a merged
quantile sketch of its values farther out) and ``klein``.

Second table (input precision): a forest with the default tree space (ranks),
trained on float64 points given in each input geometry, scores test points
given as float64 or rounded to float32, and hyperboloid points whose x_0 is
recomputed from the float32 spacelike coordinates (what a projection using
only spacelike coordinates, the leave-one-out form of docs/math.md,
"Rapidity coordinates", would see).

    python benchmarks/bench_far.py [--quick] [--radii 2 ... 16] [--jobs 2] [--no-dask | --dask-only]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

from hyp2onnx import (
    HyperbolicLGBMClassifier,
    HyperbolicRandomForestClassifier,
    HyperbolicXGBClassifier,
    to_onnx,
)
from hyp2onnx.datasets import make_geodesic_ray
from hyp2onnx.geometry import from_klein

BACKENDS = {
    "scikit-learn forest": lambda **kw: HyperbolicRandomForestClassifier(
        n_estimators=20, max_depth=6, random_state=0, n_jobs=1, **kw
    ),
    "XGBoost": lambda **kw: HyperbolicXGBClassifier(
        n_estimators=20, max_depth=6, random_state=0, n_jobs=1, **kw
    ),
    "LightGBM": lambda **kw: HyperbolicLGBMClassifier(
        n_estimators=20, max_depth=6, random_state=0, n_jobs=1, verbose=-1, **kw
    ),
}
SPACES = ("ranks", "rapidity", "klein")
#: The Dask estimators (class name in hyp2onnx.dask) and their tree spaces.
DASK_BACKENDS = {
    "XGBoost on Dask": ("HyperbolicDaskXGBClassifier", {"n_jobs": 1}),
    "LightGBM on Dask": ("HyperbolicDaskLGBMClassifier", {"verbose": -1}),
}
DASK_SPACES = ("quantiles", "klein")
#: The default tree space of each backend.
DEFAULT = {
    "scikit-learn forest": "ranks",
    "XGBoost": "ranks",
    "LightGBM": "ranks",
    "XGBoost on Dask": "quantiles",
    "LightGBM on Dask": "quantiles",
}
GOAL = 0.99


def directions() -> dict[str, np.ndarray]:
    """Ray directions: angles from the first axis in d = 2, and a random one in d = 8."""
    out = {
        f"angle {name}": np.array([np.cos(a), np.sin(a)])
        for name, a in (("0", 0.0), ("0.3", 0.3), ("pi/4", np.pi / 4))
    }
    out["random, d = 8"] = np.random.default_rng(8).normal(size=8)
    return out


def threshold_rows(model, Xk_test: np.ndarray, n_max: int, rng) -> np.ndarray:
    """Hyperboloid rows whose split feature is a threshold, or one ulp either side of it."""
    ensemble = model.to_ir().ensemble
    nodes = np.flatnonzero(ensemble.feature >= 0)
    nodes = rng.choice(nodes, size=min(n_max, nodes.size), replace=False)
    dt = np.dtype(ensemble.compare_dtype).type
    rows = []
    for node in nodes:
        f, t = ensemble.feature[node], dt(ensemble.threshold[node])
        base = Xk_test[rng.integers(Xk_test.shape[0])]
        for value in (np.nextafter(t, dt(-np.inf)), t, np.nextafter(t, dt(np.inf))):
            k = base.copy()
            k[f] = float(value)
            if np.sum(k * k) < 1.0:
                rows.append(k)
    if not rows:
        return np.empty((0, Xk_test.shape[1] + 1))
    return from_klein(np.array(rows), "hyperboloid")


def graph_labels(model, X: np.ndarray, dtype: str = "float64") -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = to_onnx(model, dtype=dtype)
    session = ort.InferenceSession(graph.SerializeToString(), options)
    return session.run(["label"], {"X": X.astype(dtype)})[0]


def ray_cell(backend: str, space: str, dname: str, r0: float, n_train: int, n_test: int):
    u = directions()[dname]
    X, y = make_geodesic_ray(n_train, r0, u, random_state=1)
    Xt, yt = make_geodesic_ray(n_test, r0, u, random_state=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = BACKENDS[backend](tree_space=space).fit(X, y)
    predicted = model.predict(Xt)
    rng = np.random.default_rng(3)
    probe = np.concatenate([Xt, threshold_rows(model, model.to_klein(Xt), 100, rng)])
    differences = int(np.sum(graph_labels(model, probe) != model.predict(probe)))
    return float(np.mean(predicted == yt)), differences, probe.shape[0]


def dask_ray_cell(client, backend: str, space: str, dname: str, r0: float, n_train, n_test):
    """`ray_cell` for a Dask estimator on ``client`` (the rows in 3 partitions)."""
    import dask.array as da

    import hyp2onnx.dask as hdask

    name, extra = DASK_BACKENDS[backend]
    u = directions()[dname]
    X, y = make_geodesic_ray(n_train, r0, u, random_state=1)
    Xt, yt = make_geodesic_ray(n_test, r0, u, random_state=2)
    chunk = -(-n_train // 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = getattr(hdask, name)(
            client=client, tree_space=space, n_estimators=20, max_depth=6, random_state=0, **extra
        ).fit(da.from_array(X, chunks=(chunk, -1)), da.from_array(y, chunks=chunk))
    predicted = model.predict(Xt)
    rng = np.random.default_rng(3)
    probe = np.concatenate([Xt, threshold_rows(model, model.to_klein(Xt), 100, rng)])
    differences = int(np.sum(graph_labels(model, probe) != model.predict(probe)))
    return float(np.mean(predicted == yt)), differences, probe.shape[0]


def dask_cells(tasks: list[tuple], *, processes: bool = True) -> dict:
    """Every Dask cell, in this process, on one 2-worker LocalCluster (of worker processes,
    or of threads in this process with ``processes=False``)."""
    import logging

    from distributed import Client, LocalCluster

    logging.getLogger("distributed").setLevel(logging.ERROR)
    results = {}
    started = time.perf_counter()
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        for i, task in enumerate(steps(tasks, "Dask cells", unit="cells"), start=1):
            results[task] = dask_ray_cell(client, *task[1:])
            if i % max(1, len(tasks) // 10) == 0 or i == len(tasks):
                print(
                    f"  {i}/{len(tasks)} Dask cells, {time.perf_counter() - started:.0f} s",
                    flush=True,
                )
    return results


def reliable_to(radii: list[float], accuracies: list[float]) -> str:
    best = None
    for r, a in zip(radii, accuracies):
        if a < GOAL:
            break
        best = r
    return "-" if best is None else f"{best:g}"


def precision_cell(geometry: str, variant: str, dname: str, r0: float, n_train: int, n_test: int):
    u = directions()[dname]
    X, y = make_geodesic_ray(n_train, r0, u, geometry=geometry, random_state=1)
    Xt, yt = make_geodesic_ray(n_test, r0, u, geometry=geometry, random_state=2)
    model = BACKENDS["scikit-learn forest"](input_geometry=geometry).fit(X, y)
    if variant == "float32":
        Xt = Xt.astype(np.float32).astype(np.float64)
    elif variant == "float32, x0 recomputed":
        spacelike = Xt[:, 1:].astype(np.float32).astype(np.float64)
        Xt = np.concatenate([np.sqrt(1.0 + np.sum(spacelike**2, axis=1))[:, None], spacelike], 1)
    keep = np.sum(Xt[:, 1:] ** 2, axis=1) < (1.0 if geometry != "hyperboloid" else np.inf)
    # A float32 Poincare/Klein point may round onto the boundary: count it as wrong.
    correct = np.zeros(n_test, dtype=bool)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.set_params(check_manifold=False)
        correct[keep] = model.predict(Xt[keep]) == yt[keep]
    return (float(np.mean(correct)),)


def run_task(task: tuple) -> tuple:
    kind, *args = task
    return task, (ray_cell if kind == "ray" else precision_cell)(*args)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--radii", type=float, nargs="+", default=list(range(2, 17)))
    parser.add_argument(
        "--jobs", type=int, help="worker processes (default 2; 1 runs the cells in this process)"
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--no-dask", action="store_true", help="leave the Dask rows out")
    which.add_argument(
        "--dask-only", action="store_true", help="only the Dask rows (written to far_dask.md)"
    )
    args = parser.parse_args(argv)
    n_train, n_test = 6000, 2000
    dirs = directions()
    if args.quick:
        # Every backend, tree space, Dask estimator and precision variant once: one
        # ray, one radius, the cells in this process (a pool's start would outlast them)
        args.radii, n_train, n_test = [10.0], 1500, 500
        dirs = {k: dirs[k] for k in ("angle pi/4",)}
    if args.jobs is None:
        args.jobs = 1 if args.quick else 2
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}.")
    out = output_dir(args)
    variants = {
        "hyperboloid": ("float64", "float32", "float32, x0 recomputed"),
        "poincare": ("float64", "float32"),
        "klein": ("float64", "float32"),
    }
    precision_dirs = [k for k in ("angle 0", "angle pi/4", "random, d = 8") if k in dirs]
    tasks = [
        ("ray", backend, space, dname, r0, n_train, n_test)
        for dname in dirs
        for backend in BACKENDS
        for space in SPACES
        for r0 in args.radii
    ] + [
        ("precision", geometry, variant, dname, r0, n_train, n_test)
        for dname in precision_dirs
        for geometry, vs in variants.items()
        for variant in vs
        for r0 in args.radii
    ]
    if args.dask_only:
        tasks = []
    dask_tasks = (
        []
        if args.no_dask
        else [
            ("dask", backend, space, dname, r0, n_train, n_test)
            for dname in dirs
            for backend in DASK_BACKENDS
            for space in DASK_SPACES
            for r0 in args.radii
        ]
    )
    started = time.perf_counter()
    # --quick: worker threads, as starting two worker processes would take most of its time
    # (the suite's Dask tests run on worker processes)
    results = dask_cells(dask_tasks, processes=not args.quick) if dask_tasks else {}
    with ProcessPoolExecutor(max_workers=args.jobs) if args.jobs > 1 else nullcontext() as pool:
        done = map(run_task, tasks) if pool is None else pool.map(run_task, tasks, chunksize=1)
        for i, (task, result) in enumerate(steps(done, "cells", len(tasks), "cells"), start=1):
            results[task] = result
            if i % max(1, len(tasks) // 20) == 0 or i == len(tasks):
                print(
                    f"  {i}/{len(tasks)} cells, {time.perf_counter() - started:.0f} s", flush=True
                )
    elapsed = time.perf_counter() - started

    sections, summary_rows = [], []
    configurations = [] if args.dask_only else [("ray", b, s) for b in BACKENDS for s in SPACES]
    if dask_tasks:
        configurations += [("dask", b, s) for b in DASK_BACKENDS for s in DASK_SPACES]
    for dname in dirs:
        rows = []
        for kind, backend, space in configurations:
            cells = [
                results[(kind, backend, space, dname, r0, n_train, n_test)] for r0 in args.radii
            ]
            accs = [c[0] for c in cells]
            diffs, probes = sum(c[1] for c in cells), sum(c[2] for c in cells)
            reach = reliable_to(args.radii, accs)
            name = space + (" (default)" if DEFAULT[backend] == space else "")
            rows.append(
                [backend, name]
                + [f"{a:.3f}" if a >= GOAL else f"**{a:.3f}**" for a in accs]
                + [reach, f"{diffs} / {probes}"]
            )
            summary_rows.append([dname, backend, name, reach, f"{min(accs):.3f}", diffs])
        headers = (
            ["backend", "tree space"]
            + [f"r0={r:g}" for r in args.radii]
            + ["reliable to r0", "graph label differences"]
        )
        sections.append(
            f"### Ray at {dname}\n\n" + md_table(headers, rows, "ll" + "r" * (len(headers) - 2))
        )

    precision_rows = []
    for dname in [] if args.dask_only else precision_dirs:
        for geometry, vs in variants.items():
            for variant in vs:
                accs = [
                    results[("precision", geometry, variant, dname, r0, n_train, n_test)][0]
                    for r0 in args.radii
                ]
                precision_rows.append(
                    [dname, geometry, variant]
                    + [f"{a:.3f}" if a >= GOAL else f"**{a:.3f}**" for a in accs]
                    + [reliable_to(args.radii, accs)]
                )

    summary_headers = [
        "ray",
        "backend",
        "tree space",
        "reliable to r0",
        "min accuracy",
        "graph label differences",
    ]
    print(text_table(summary_headers, summary_rows))
    precision_headers = (
        ["ray", "input geometry", "test input"]
        + [f"r0={r:g}" for r in args.radii]
        + ["reliable to r0"]
    )
    print(text_table(precision_headers, precision_rows))
    text = "\n\n".join(
        [
            "# Far from the origin: the ray test" + (", Dask estimators" if args.dask_only else ""),
            __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0],
            f"Accuracy below {GOAL} in bold. {n_train} training and {n_test} test rows. "
            f"{len(tasks) + len(dask_tasks)} cells in {elapsed:.0f} s "
            + (f"with {args.jobs} workers " if args.jobs > 1 else "in one process ")
            + "(Dask cells: one 2-worker LocalCluster"
            + (" of threads). " if args.quick else "). ")
            + environment(),
            "## Accuracy by backend and tree space (Python model; the graph's labels equal "
            "the Python model's wherever the last column says 0)",
            *sections,
            "## Input precision (scikit-learn forest, default tree space, trained on float64 "
            "points of that geometry; a float32 point that rounds onto the ball's boundary "
            "counts as wrong)",
            md_table(precision_headers, precision_rows, "lll" + "r" * (len(precision_headers) - 3)),
        ]
    )
    write(out / ("far_dask.md" if args.dask_only else "far.md"), text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
