"""Beyond one machine: the distributed threshold correction and distributed scoring.

Correction. One XGBoost booster (100 trees, depth 6, on d = 8 Klein
features of a wrapped-normal mixture; trained on 100k rows) is corrected
against N rows of the same distribution two ways:

* single machine: `hyp2onnx.correction.shared_rows.correct_trees` on all N
  rows in this process (what ``fit`` runs);
* distributed: `hyp2onnx.dask.distributed_summary` (each partition
  summarised where it lies: every split's nearest values either side, by the
  single-machine search; tree reduce on the workers) and
  `hyp2onnx.correction.summaries.correct_from_summary` on a 2-worker
  LocalCluster (1 thread each), the rows already in the workers' memory.

Both must give the same thresholds bit for bit (checked). The booster was not
grown on those N rows, which changes neither method's work. "bytes to the
driver" is the size of the one summary that reaches this process. Peak
memory is the peak resident set size during the correction alone (reset
before it through /proc/self/clear_refs, read from VmHWM): of this process
for the single-machine path (the rows it holds included), of each worker for
the distributed one (its partitions included).

Far points on Dask (tree space "quantiles"). The same mixture moved 10
further from the origin along each point's ray (distances about 10 to 14):
the quantile sketch of the N rows (`hyp2onnx.dask.distributed_sketch`,
merged on the workers), then the correction of an XGBoost booster trained
on the buckets of 100k rows (the Klein trees of
`hyp2onnx.correction.quantiles.QuantileMap.klein_trees`, searched on the
float64 Klein rows), against the single-machine search of the same Klein
trees on all N rows in this process. "bytes to the driver": the sketch and
the summary.

Spark correction. The summary of the first booster's splits on N rows held
in a cached Spark DataFrame (``local[2]``, the estimator's projected columns,
generated on the executors), as ``HyperbolicSparkXGBClassifier.fit`` runs it
(`hyp2onnx.spark.distributed_summary`: ``mapInPandas`` per partition,
``treeReduce`` on the executors), against the single-machine correction.

Scoring. The exported graph of a hyperbolic XGBoost classifier (100 trees,
depth 6, 4 classes) scores N hyperboloid points: onnxruntime in this
process (1 and 2 threads), `hyp2onnx.dask.predict` on the 2-worker
cluster (points already in the workers' memory), and
`hyp2onnx.spark.predict` on Spark ``local[2]`` (points in a cached
DataFrame; results written to Spark's no-op sink). Peak memory per worker:
the same measure over the scoring phase.

    python benchmarks/bench_distributed.py [--quick [--spark]] [--rows 1000000 10000000] [--no-spark]

``--quick`` (the test suite's smoke run) leaves Spark out unless ``--spark``,
runs on a few thousand rows and does not restart the workers between parts.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

import hyp2onnx as h
from hyp2onnx.correction.shared_rows import correct_trees
from hyp2onnx.correction.summaries import correct_from_summary
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.estimators import backend_for
from hyp2onnx.geometry import to_klein
from hyp2onnx.verification import run_onnx

DIM = 8
CLASSES = 4
BLOCK = 250_000  # rows per partition


def block_points(index: int, n: int) -> np.ndarray:
    """Partition ``index`` of the data set: ``n`` hyperboloid points (deterministic)."""
    X, _ = make_wrapped_normal_mixture(n, DIM, CLASSES, random_state=1000 + index)
    return X


def block_klein(index: int, n: int) -> np.ndarray:
    return to_klein(block_points(index, n))


def sizes_of(n: int, block: int) -> list[int]:
    return [block] * (n // block) + ([n % block] if n % block else [])


def reset_peak() -> bool:
    """Start a new peak resident set size for this process (Linux); False if unsupported."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_rss_mb() -> float:
    """Peak resident set size of this process, MB (since `reset_peak` where it works)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def distributed_array(client, sizes: list[int], make, width: int):
    """A dask array whose partitions are built on the workers, persisted there."""
    import dask
    import dask.array as da

    parts = [
        da.from_delayed(dask.delayed(make)(i, n), shape=(n, width), dtype=np.float64)
        for i, n in enumerate(sizes)
    ]
    array = client.persist(da.concatenate(parts))
    from distributed import wait

    wait(array)
    return array


def cpu_seconds() -> float:
    """User + system CPU time of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def warm_up() -> None:
    """Import on a worker what the correction runs (as a fit's workers have, having trained)."""
    import hyp2onnx.correction.summaries
    import hyp2onnx.dask
    import hyp2onnx.estimators._xgboost  # noqa: F401


def correction_rows(client, model, n: int, rounds: int, block: int) -> tuple[list, dict]:
    """Single-machine vs distributed correction of ``model``'s booster on ``n`` rows."""
    import dask.array as da

    from hyp2onnx.dask import distributed_summary

    backend = backend_for(model.estimator_)
    fitted = model.estimator_
    trees = backend.read_trees(fitted)
    sizes = sizes_of(n, block)
    Xk = distributed_array(client, sizes, block_klein, DIM)
    y = client.persist(da.zeros(n, chunks=(tuple(sizes),)))  # persisted, as in a fit
    local = np.concatenate([block_klein(i, s) for i, s in enumerate(sizes)]).astype(np.float32)
    rows = [np.arange(n)] * len(trees)
    kwargs = dict(op=backend.op, threshold_dtype=backend.threshold_dtype, midpoint="einstein")
    single, dist, nbytes, driver, workers = [], [], 0, 0.0, {}
    cpu_single, cpu_dist = [], []
    for _ in range(rounds):  # interleaved
        reset_peak()
        t, c = time.perf_counter(), cpu_seconds()
        want, _ = correct_trees(trees, local, rows, **kwargs)
        single.append(time.perf_counter() - t)
        cpu_single.append(cpu_seconds() - c)
        driver = max(driver, peak_rss_mb())
        client.run(reset_peak)
        before = sum(client.run(cpu_seconds).values()) + cpu_seconds()
        t = time.perf_counter()
        summary = distributed_summary(client, backend, fitted, Xk, y)
        got, _ = correct_from_summary(trees, summary, **kwargs)
        dist.append(time.perf_counter() - t)
        cpu_dist.append(sum(client.run(cpu_seconds).values()) + cpu_seconds() - before)
        for worker, mb in client.run(peak_rss_mb).items():
            workers[worker] = max(workers.get(worker, 0.0), mb)
        nbytes = summary.nbytes
        identical = all(
            np.array_equal(a.view(np.int64), b.view(np.int64)) for a, b in zip(got, want)
        )
        if not identical:
            raise AssertionError(f"distributed thresholds differ from single-machine at n={n}")
    del Xk, local
    return [single, dist, nbytes, driver, cpu_single, cpu_dist], workers


def far_klein(index: int, n: int) -> np.ndarray:
    """Partition ``index`` of the far data set: the mixture's Klein points moved 10 further
    from the origin along their rays (float64 Klein coordinates)."""
    k = block_klein(index, n)
    norm = np.linalg.norm(k, axis=1, keepdims=True)
    r = np.arctanh(np.minimum(norm, 1 - 1e-16))
    return np.tanh(r + 10.0) * (k / np.where(norm > 0, norm, 1.0))


def far_rows(client, n: int, n_trees: int, rounds: int, block: int) -> list:
    """Sketch + correction of the "quantiles" space on ``n`` far rows, vs one machine."""
    import dask.array as da
    import xgboost

    from hyp2onnx.correction.quantiles import QuantileMap
    from hyp2onnx.dask import distributed_sketch, distributed_summary

    sizes = sizes_of(n, block)
    Xk = distributed_array(client, sizes, far_klein, DIM)
    y = client.persist(da.zeros(n, chunks=(tuple(sizes),)))
    local = np.concatenate([far_klein(i, s) for i, s in enumerate(sizes)])
    Xtrain = far_klein(10_000, 100_000)
    _, ytrain = make_wrapped_normal_mixture(100_000, DIM, CLASSES, random_state=1000 + 10_000)
    single, dist, nbytes = [], [], 0
    for _ in range(rounds):
        t = time.perf_counter()
        sketch = distributed_sketch(client, Xk)
        qmap = QuantileMap.of(sketch)
        t_sketch = time.perf_counter() - t
        fitted = xgboost.XGBClassifier(n_estimators=n_trees, max_depth=6, n_jobs=2)
        fitted.fit(qmap.transform(Xtrain), ytrain)  # untimed: training
        backend = backend_for(fitted)
        trees = qmap.klein_trees(backend.read_trees(fitted), backend.op)
        kwargs = dict(op=backend.op, threshold_dtype="float64", midpoint="einstein")
        t = time.perf_counter()
        want, _ = correct_trees(trees, local, [np.arange(n)] * len(trees), **kwargs)
        single.append(time.perf_counter() - t)
        t = time.perf_counter()
        summary = distributed_summary(client, backend, fitted, Xk, y, trees=trees)
        got, _ = correct_from_summary(trees, summary, **kwargs)
        dist.append(t_sketch + time.perf_counter() - t)
        nbytes = sketch.nbytes + summary.nbytes
        if not all(np.array_equal(a.view(np.int64), b.view(np.int64)) for a, b in zip(got, want)):
            raise AssertionError(f"far distributed thresholds differ at n={n}")
    del Xk, local
    return [single, dist, nbytes, sketch.nbytes]


def make_spark_klein(index: int, n: int):
    """Partition ``index`` of the Spark data: the estimator's projected columns."""
    import pandas as pd

    from hyp2onnx.distributed import spark as hspark

    k = block_klein(index, n)
    frame = {f"{hspark._K}{i}": k[:, i] for i in range(DIM)}
    frame[hspark._LABEL] = np.zeros(n)
    return pd.DataFrame(frame)


def spark_rows(spark, model, n: int, rounds: int, block: int) -> list:
    """Single-machine vs Spark correction of ``model``'s booster on ``n`` rows."""
    from pyspark.sql import types as T

    from hyp2onnx.distributed import spark as hspark

    backend = backend_for(model.estimator_)
    fitted = model.estimator_
    trees = backend.read_trees(fitted)
    sizes = sizes_of(n, block)
    fields = [T.StructField(f"{hspark._K}{i}", T.DoubleType()) for i in range(DIM)]
    schema = T.StructType([*fields, T.StructField(hspark._LABEL, T.DoubleType())])

    def generate(batches):
        for batch in batches:
            for index in batch["id"]:
                yield make_spark_klein(int(index), sizes[int(index)])

    seeds = spark.range(len(sizes)).repartition(len(sizes))
    df = seeds.mapInPandas(generate, schema).cache()
    df.count()
    local = np.concatenate([block_klein(i, s) for i, s in enumerate(sizes)]).astype(np.float32)
    rows = [np.arange(n)] * len(trees)
    kwargs = dict(op=backend.op, threshold_dtype=backend.threshold_dtype, midpoint="einstein")
    single, dist, nbytes = [], [], 0
    for _ in range(rounds):
        t = time.perf_counter()
        want, _ = correct_trees(trees, local, rows, **kwargs)
        single.append(time.perf_counter() - t)
        t = time.perf_counter()
        summary = hspark.distributed_summary(df, backend, fitted, DIM, False)
        got, _ = correct_from_summary(trees, summary, **kwargs)
        dist.append(time.perf_counter() - t)
        nbytes = summary.nbytes
        if not all(np.array_equal(a.view(np.int64), b.view(np.int64)) for a, b in zip(got, want)):
            raise AssertionError(f"Spark thresholds differ from single-machine at n={n}")
    df.unpersist()
    del local
    return [single, dist, nbytes]


def timing_row(n: int, single: list, dist: list, nbytes: int) -> tuple:
    s, d = statistics.median(single), statistics.median(dist)
    return (
        f"{n:,}",
        f"{s:.2f} ({min(single):.2f}–{max(single):.2f})",
        f"{d:.2f} ({min(dist):.2f}–{max(dist):.2f})",
        f"{d / s:.2f}x",
        f"{nbytes:,}",
        f"{os.getloadavg()[0]:.1f}",
    )


def scoring(client, spark, graph, n: int, rounds: int, block: int) -> tuple[dict, dict]:
    """Rows/s of each scoring route on ``n`` points (medians of interleaved rounds)."""
    import dask

    import hyp2onnx.dask as hdask

    sizes = sizes_of(n, block)
    X = np.concatenate([block_points(i, s) for i, s in enumerate(sizes)])
    Xd = distributed_array(client, sizes, block_points, DIM + 1)
    client.run(reset_peak)
    frame = None
    if spark is not None:
        import pandas as pd

        import hyp2onnx.spark as hspark

        columns = [f"x{i}" for i in range(DIM + 1)]
        frame = spark.createDataFrame(pd.DataFrame(X, columns=columns)).repartition(2).cache()
        frame.count()
    times: dict[str, list[float]] = {}

    def clock(name, call):
        t = time.perf_counter()
        call()
        times.setdefault(name, []).append(time.perf_counter() - t)

    want = run_onnx(graph, X, threads=1)["label"]
    # Warm-up, untimed: worker imports, the sessions, Spark's Python workers.
    dask.compute(hdask.predict(graph, Xd))
    if frame is not None:
        hspark.predict(graph, frame, columns).write.format("noop").mode("overwrite").save()
    for _ in range(rounds):
        clock("onnxruntime, this process, 1 thread", lambda: run_onnx(graph, X, threads=1))
        clock("onnxruntime, this process, 2 threads", lambda: run_onnx(graph, X, threads=2))
        out = {}
        clock(
            "hyp2onnx.dask.predict, 2 workers",
            lambda: out.update(dask.compute(hdask.predict(graph, Xd))[0]),
        )
        if not np.array_equal(out["label"], want):
            raise AssertionError("Dask labels differ from onnxruntime's")
        if frame is not None:
            clock(
                "hyp2onnx.spark.predict, local[2]",
                lambda: (
                    hspark.predict(graph, frame, columns)
                    .write.format("noop")
                    .mode("overwrite")
                    .save()
                ),
            )
    if frame is not None:
        frame.unpersist()
    memory = client.run(peak_rss_mb)
    return {k: n / statistics.median(v) for k, v in times.items()}, memory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument(
        "--rows",
        type=int,
        nargs="+",
        default=None,
        help="row counts of the correction runs (default 1M and 10M)",
    )
    parser.add_argument("--score-rows", type=int, default=None, help="rows scored (default 1M)")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 3)")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark route")
    parser.add_argument(
        "--spark", action="store_true", help="include the Spark route in --quick runs"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    rows = args.rows or ([5_000] if quick else [1_000_000, 10_000_000])
    score_rows = args.score_rows or (5_000 if quick else 1_000_000)
    n_trees, n_train, rounds, block = (10, 2_000, 1, 2_500) if quick else (100, 100_000, 3, BLOCK)
    rounds = args.rounds or rounds
    out = output_dir(args)
    started = time.perf_counter()

    from distributed import Client, LocalCluster

    X, y = make_wrapped_normal_mixture(n_train, DIM, CLASSES, random_state=0)
    model = h.HyperbolicXGBClassifier(n_estimators=n_trees, max_depth=6, n_jobs=2).fit(X, y)
    graph = h.to_onnx(model)
    spark = None
    if not args.no_spark and (args.spark or not quick):
        from pyspark.sql import SparkSession

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        t = time.perf_counter()
        spark = (
            SparkSession.builder.master("local[2]")
            .appName("hyp2onnx-bench")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.memory", "4g")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .getOrCreate()
        )
        spark_start = time.perf_counter() - t
    t = time.perf_counter()
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        cluster_start = time.perf_counter() - t
        client.run(warm_up)
        corr_headers = (
            "rows",
            "single machine, s",
            "distributed, s",
            "distributed / single",
            "CPU s, single / distributed",
            "bytes to the driver",
            "peak RSS single machine, MB",
            "peak RSS per worker, MB",
            "load average",
        )
        corr_rows = []
        for n in steps(rows, "correction", unit="sizes"):
            (single, dist, nbytes, driver, cpu_single, cpu_dist), memory = correction_rows(
                client, model, n, rounds, block
            )
            s, d = statistics.median(single), statistics.median(dist)
            spread = (
                f"{s:.2f} ({min(single):.2f}–{max(single):.2f})",
                f"{d:.2f} ({min(dist):.2f}–{max(dist):.2f})",
            )
            cpu = f"{statistics.median(cpu_single):.1f} / {statistics.median(cpu_dist):.1f}"
            corr_rows.append(
                (
                    f"{n:,}",
                    *spread,
                    f"{d / s:.2f}x",
                    cpu,
                    f"{nbytes:,}",
                    f"{driver:,.0f}",
                    " / ".join(f"{m:,.0f}" for m in memory.values()),
                    f"{os.getloadavg()[0]:.1f}",
                )
            )
            print(text_table(corr_headers, corr_rows[-1:]), flush=True)
        far_headers = (
            "rows",
            "single machine, s",
            "Dask (sketch + correction), s",
            "Dask / single",
            "bytes to the driver (sketch + summary)",
            "load average",
        )
        far_table = []
        for n in steps(rows, "far points", unit="sizes"):
            if not quick:  # each memory measure apart from the last one's
                client.restart()
                client.run(warm_up)
            single, dist, nbytes, _ = far_rows(client, n, n_trees, rounds, block)
            far_table.append(timing_row(n, single, dist, nbytes))
            print(text_table(far_headers, far_table[-1:]), flush=True)
        if not quick:
            client.restart()  # scoring's memory apart from the correction's
        rates, memory = scoring(client, spark, graph, score_rows, rounds, block)
    spark_headers = (
        "rows",
        "single machine, s",
        "Spark local[2], s",
        "Spark / single",
        "bytes to the driver",
        "load average",
    )
    spark_table = []
    if spark is not None:
        for n in steps(rows, "Spark", unit="sizes"):
            single, dist, nbytes = spark_rows(spark, model, n, rounds, block)
            spark_table.append(timing_row(n, single, dist, nbytes))
            print(text_table(spark_headers, spark_table[-1:]), flush=True)
        spark.stop()
    base = rates["onnxruntime, this process, 1 thread"]
    score_headers = ("system", "rows/s", "vs 1-thread onnxruntime")
    score_rows_md = [
        (name, f"{rate / 1e3:,.0f}k", f"{rate / base:.2f}x") for name, rate in rates.items()
    ]
    print(text_table(score_headers, score_rows_md))
    elapsed = time.perf_counter() - started
    starts = f"LocalCluster start {cluster_start:.1f} s"
    if spark is not None:
        starts += f", Spark session start {spark_start:.1f} s"

    md = [
        "# Distributed correction and scoring",
        "",
        f"Booster: XGBoost, {n_trees} trees of depth 6 on d = {DIM} Klein features "
        f"({CLASSES}-class wrapped-normal mixture, trained on {n_train:,} rows), corrected "
        "against N further rows of the same distribution: single machine "
        "(`correct_trees`, this process) vs distributed (each partition summarised where it "
        "lies, by the same search, tree reduce, on a 2-worker LocalCluster, 1 thread each, "
        f"rows already in the workers' memory in partitions of {block:,}, modules imported). "
        "Thresholds checked "
        f"bit-identical. Medians of {rounds} interleaved runs (min–max in brackets). Peak "
        "RSS during the correction alone (the rows held included); CPU seconds: this process "
        "(single machine), the workers and this process (distributed), medians; load average "
        "at the end of each row's runs.",
        "",
        md_table(corr_headers, corr_rows),
        "",
        'Far points on Dask (`tree_space="quantiles"`): the mixture moved 10 further '
        "out (distances about 10 to 14); quantile sketch of the N rows merged on the "
        "workers, then the correction of a booster trained on the buckets, searched on "
        "float64 Klein rows; single machine: the same search on all N rows here. "
        "Thresholds checked bit-identical.",
        "",
        md_table(far_headers, far_table),
        "",
        "Spark correction (`HyperbolicSparkXGBClassifier`'s map-reduce: `mapInPandas` per "
        "partition, `treeReduce` on the executors) of the first booster, N rows cached in "
        f"a `local[2]` DataFrame in partitions of {block:,}, vs single machine. Thresholds "
        "checked bit-identical." + ("" if spark_table else " (Spark left out of this run.)"),
        "",
        md_table(spark_headers, spark_table) if spark_table else "",
        "",
        f"Scoring {score_rows:,} hyperboloid points with the exported graph of a hyperbolic "
        f"XGBoost classifier ({n_trees} trees, depth 6, {CLASSES} classes; float32 input). "
        "Dask: 2 workers x 1 thread, one session per worker; Spark: `local[2]`, cached "
        "DataFrame, no-op sink. Peak RSS per Dask worker while scoring"
        + (
            " (workers not restarted: quick run)"
            if quick
            else " (workers restarted after the correction runs)"
        )
        + ": "
        + " / ".join(f"{m:,.0f}" for m in memory.values())
        + " MB.",
        "",
        md_table(score_headers, score_rows_md, align="lrr"),
        "",
        environment() + f" {starts}. Whole run: {elapsed / 60:.1f} min.",
    ]
    write(out / "distributed.md", "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
