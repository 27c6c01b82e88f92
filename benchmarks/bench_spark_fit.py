"""Training on Spark: hyp2onnx's Spark XGBoost estimator against ``xgboost.spark``.

``hyp2onnx.spark.HyperbolicSparkXGBClassifier`` fits hyperboloid points;
``xgboost.spark.SparkXGBClassifier`` fits the same points' Klein
coordinates, precomputed, with the same parameters. Both read a cached
DataFrame built on the executors (a ``local[2]`` session, 4 partitions,
``num_workers=2``). Sides interleave; each row reports the best wall time of
the repeats and the CPU seconds of this Python process in that run, the
driver's share (validation, the summary's reduction, the threshold
placement; the executors' Python work runs in Spark's worker processes).

hyp2onnx's extra work is the projection ``x_s / x_0`` (a pass over the
points, cached for the training), the checks of labels and weights, and the
threshold correction (a map over the partitions of per-partition summaries,
merged on the driver).

    python benchmarks/bench_spark_fit.py [--quick] [--rows 100000 1000000] [--repeats 3]
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import output_dir, steps, text_table, write
from bench_distributed_fit import CLASSES, DIM, PARAMS, block, cpu_seconds, parse_sizes, report

TITLE = "# Training on Spark: hyp2onnx against xgboost.spark"
PARTITIONS = 4
HEADERS = ["rows", "fit", "wall s", "ratio", "driver CPU s"]


def session() -> Any:
    """A ``local[2]`` session whose Python workers run this interpreter."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    here = str(Path(__file__).resolve().parent)  # the workers build the rows with `block`
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    return (
        SparkSession.builder.master("local[2]")
        .appName("hyp2onnx-spark-fit-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.executorEnv.PYTHONPATH", path)
        .config("spark.driver.memory", "4g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )


def frame(spark: Any, n: int, klein: bool) -> tuple[Any, list[str]]:
    """``n`` rows (points, or their Klein coordinates) and a label, made on the
    executors in `PARTITIONS` partitions, cached; the feature column names."""
    import pandas as pd

    sizes = [n // PARTITIONS + (i < n % PARTITIONS) for i in range(PARTITIONS)]
    width = DIM + (0 if klein else 1)
    names = [f"{'k' if klein else 'p'}_{i}" for i in range(width)]
    schema = ", ".join(f"{c} double" for c in names) + ", label double"

    def make(batches: Any) -> Any:
        for batch in batches:
            for index in batch["id"]:
                values = block(int(index), sizes[int(index)], klein)
                yield pd.DataFrame(values, columns=[*names, "label"])

    df = spark.range(PARTITIONS, numPartitions=PARTITIONS).mapInPandas(make, schema).cache()
    df.count()
    return df, names


def sides(data: dict[str, tuple[Any, list[str]]]) -> dict[str, Callable[[], Any]]:
    """The library's fit on Klein coordinates and hyp2onnx's on the points."""
    from xgboost.spark import SparkXGBClassifier

    from hyp2onnx.spark import HyperbolicSparkXGBClassifier

    klein, k_columns = data["klein"]
    points, p_columns = data["points"]
    params = {**PARAMS, "tree_method": "hist", "num_workers": 2}
    return {
        "xgboost.spark on Klein": lambda: SparkXGBClassifier(
            features_col=k_columns, label_col="label", **params
        ).fit(klein),
        "hyp2onnx": lambda: HyperbolicSparkXGBClassifier(
            featuresCol=p_columns, labelCol="label", **params
        ).fit(points),
    }


def run(spark: Any, n: int, repeats: int) -> list[list[Any]]:
    """One table row per side at ``n`` rows."""
    data = {"klein": frame(spark, n, klein=True), "points": frame(spark, n, klein=False)}
    fits = sides(data)
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeats):  # interleaved: each side once per round
        for name, fit in fits.items():
            here, started = cpu_seconds(), time.perf_counter()
            fit()
            got = (time.perf_counter() - started, cpu_seconds() - here)
            if name not in best or got[0] < best[name][0]:
                best[name] = got
    base = best["xgboost.spark on Klein"][0]
    rows = [
        [f"{n:,}", name, f"{wall:.2f}", f"{wall / base:.2f}x", f"{here:.2f}"]
        for name, (wall, here) in best.items()
    ]
    print(text_table(HEADERS, rows), flush=True)
    for df, _ in data.values():
        df.unpersist()
    return rows


def main(argv: list[str] | None = None) -> int:
    args, rows_list, repeats = parse_sizes(__doc__, argv)
    spark = session()
    spark.sparkContext.setLogLevel("ERROR")
    table: list[list[Any]] = []
    try:
        for n in steps(rows_list, "sizes", unit="sizes"):
            table += run(spark, n, repeats)
    finally:
        spark.stop()
    setting = (
        f"{PARAMS['n_estimators']} rounds of depth {PARAMS['max_depth']}, d = {DIM}, "
        f"{CLASSES} classes, {PARTITIONS} partitions; best wall time of {repeats} "
        "interleaved runs."
    )
    text = report(TITLE, __doc__, setting, HEADERS, table, quick=args.quick)
    write(output_dir(args) / "spark_fit.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
