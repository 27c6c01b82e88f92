"""Training on a Dask cluster: hyp2onnx's Dask boosters against the libraries' own.

Each hyperbolic Dask estimator (`hyp2onnx.dask`) fits hyperboloid points;
its library's Dask estimator (``xgboost.dask.DaskXGBClassifier``,
``lightgbm.DaskLGBMClassifier``) fits the same points' Klein coordinates,
precomputed, with the same parameters. Both read partitions already in the
workers' memory (a 2-worker ``LocalCluster``, 1 thread each; the points and
their Klein coordinates built on the workers, persisted). Sides interleave;
each row reports the best wall time of the repeats, and the CPU seconds of
that run split into the driver's (this process: validation, the summary's
reduction, the threshold placement) and the workers' (training, the
projection, the per-partition summaries).

hyp2onnx's extra work is the projection ``x_s / x_0`` per partition, the
checks of points, labels and weights, and the distributed threshold
correction (a map-reduce of per-partition summaries). ``tree_space="klein"``
trains on what the library trains on, so its ratio is that extra work. The
default ``"quantiles"`` first asks whether every row lies within radius 5;
here about 1.4% do not (the farthest near 8.5), so it also sketches the
quantiles of every feature, trains on their bucket codes (kept apart where
float32 Klein values would merge) and places the thresholds in float64.

    python benchmarks/bench_distributed_fit.py [--quick] [--rows 100000 1000000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

DIM = 8
CLASSES = 4
PARAMS = {"n_estimators": 20, "max_depth": 6}
TITLE = "# Training on Dask: hyp2onnx against the library's own Dask estimator"


def block(index: int, n: int, klein: bool) -> np.ndarray:
    """Partition ``index``: ``n`` hyperboloid points (or their Klein coordinates), then
    their labels as a last column (deterministic)."""
    from hyp2onnx.datasets import make_wrapped_normal_mixture
    from hyp2onnx.geometry import to_klein

    X, y = make_wrapped_normal_mixture(n, DIM, CLASSES, random_state=1000 + index)
    return np.column_stack([to_klein(X) if klein else X, y])


def persisted(client: Any, n: int, parts: int, klein: bool) -> tuple[Any, Any]:
    """Points (or Klein coordinates) and labels as dask arrays built and kept on the workers."""
    import dask
    import dask.array as da
    from distributed import wait

    width = DIM + (1 if klein else 2)
    sizes = [n // parts + (i < n % parts) for i in range(parts)]
    whole = da.concatenate(
        [
            da.from_delayed(dask.delayed(block)(i, m, klein), shape=(m, width), dtype=np.float64)
            for i, m in enumerate(sizes)
        ]
    )
    X, y = client.persist([whole[:, :-1], whole[:, -1].astype(np.int64)])
    wait([X, y])
    return X, y


def cpu_seconds() -> float:
    """User + system CPU seconds of the calling process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measured(client: Any, fit: Callable[[], Any]) -> tuple[float, float, float]:
    """Wall seconds of ``fit()``, and the CPU seconds it took here and on the workers."""
    workers_before = sum(client.run(cpu_seconds).values())
    here_before, started = cpu_seconds(), time.perf_counter()
    fit()
    wall = time.perf_counter() - started
    here = cpu_seconds() - here_before
    return wall, here, sum(client.run(cpu_seconds).values()) - workers_before


def sides(client: Any, library: str, data: dict[str, tuple[Any, Any]]) -> dict[str, Callable]:
    """The fits compared for ``library``: its own Dask estimator on Klein coordinates and
    hyp2onnx's on the points (each tree space)."""
    import hyp2onnx.dask as hd

    Xk, yk = data["klein"]
    X, y = data["points"]
    if library == "XGBoost":
        from xgboost import dask as dxgb

        def plain() -> Any:
            model = dxgb.DaskXGBClassifier(**PARAMS, tree_method="hist")
            model.client = client
            return model.fit(Xk, yk)

        ours = hd.HyperbolicDaskXGBClassifier
    else:
        import lightgbm

        def plain() -> Any:
            return lightgbm.DaskLGBMClassifier(client=client, **PARAMS, verbose=-1).fit(Xk, yk)

        ours = hd.HyperbolicDaskLGBMClassifier
    extra = {"tree_method": "hist"} if library == "XGBoost" else {"verbose": -1}
    return {
        "library on Klein": plain,
        'hyp2onnx, "klein"': lambda: ours(client=client, tree_space="klein", **PARAMS, **extra).fit(
            X, y
        ),
        'hyp2onnx, "quantiles" (default)': lambda: ours(client=client, **PARAMS, **extra).fit(X, y),
    }


def run(client: Any, n: int, parts: int, repeats: int) -> list[list[Any]]:
    """One table row per library and side at ``n`` rows."""
    data = {
        "klein": persisted(client, n, parts, klein=True),
        "points": persisted(client, n, parts, klein=False),
    }
    rows = []
    for library in ("XGBoost", "LightGBM"):
        fits = sides(client, library, data)
        best: dict[str, tuple[float, float, float]] = {}
        for _ in range(repeats):  # interleaved: each side once per round
            for name, fit in fits.items():
                got = measured(client, fit)
                if name not in best or got[0] < best[name][0]:
                    best[name] = got
        base = best["library on Klein"][0]
        for name, (wall, here, workers) in best.items():
            rows.append(
                [f"{n:,}", library, name, f"{wall:.2f}", f"{wall / base:.2f}x"]
                + [f"{here:.2f}", f"{workers:.2f}"]
            )
        print(text_table(HEADERS, rows[-len(best) :]), flush=True)
    client.cancel([*data["klein"], *data["points"]])
    return rows


HEADERS = ["rows", "library", "fit", "wall s", "ratio", "driver CPU s", "workers CPU s"]


def report(
    title: str, doc: str, setting: str, headers: list[str], table: list[list[Any]], *, quick: bool
) -> str:
    """A results file: title, the script's description (its docstring less the usage
    line), the setting, the table, the machine."""
    return "\n\n".join(
        [
            title,
            doc.split("\n\n", 1)[1].rsplit("\n\n", 1)[0],
            setting + (" Quick mode: a smoke test only." if quick else ""),
            md_table(headers, table),
            environment(),
        ]
    )


def parse_sizes(doc: str, argv: list[str] | None) -> tuple[argparse.Namespace, list[int], int]:
    """The distributed fit benchmarks' options: the arguments, the row counts to
    measure and the repeats (``--quick``: 4,000 rows once)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--rows", type=int, nargs="+", default=None)
    parser.add_argument("--repeats", type=int, default=None)
    args = parser.parse_args(argv)
    rows_list = args.rows or ([4_000] if args.quick else [100_000, 1_000_000])
    return args, rows_list, args.repeats or (1 if args.quick else 3)


def main(argv: list[str] | None = None) -> int:
    args, rows_list, repeats = parse_sizes(__doc__, argv)
    from distributed import Client, LocalCluster

    table: list[list[Any]] = []
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        for n in steps(rows_list, "sizes", unit="sizes"):
            table += run(client, n, parts=4, repeats=repeats)
    setting = (
        f"{PARAMS['n_estimators']} rounds of depth {PARAMS['max_depth']} (LightGBM: "
        f"31 leaves), d = {DIM}, {CLASSES} classes, 4 partitions; best wall time of "
        f"{repeats} interleaved runs."
    )
    text = report(TITLE, __doc__, setting, HEADERS, table, quick=args.quick)
    write(output_dir(args) / "distributed_fit.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
