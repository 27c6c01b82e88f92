"""``bench_compose.py --distributed --spark``: the same composed graph scored on Spark.

The raw columns of `_compose_distributed.raw_block` (``ids`` long, ``flag``
boolean, ``x_0`` ... ``x_7`` float) are generated in a ``local[2]`` session's
partitions and cached there; two systems score them:

* **composed**: `hyp2onnx.spark.predict` of ``hyp2onnx.compose(encoder, forest)``
  on the raw columns (inputs named by the graph's inputs, one session per
  Python worker, every batch checked as the scorer checks it);
* **in turn**: the encoder's session in ``mapInPandas`` (cached per Python
  worker the same way), then `hyp2onnx.spark.predict` of the forest's own
  graph on its point columns: what a user runs without ``compose``.

Each system's labels and probabilities are summed by Spark, so a few numbers
reach this process; rows/s is N over the wall time of that action. Rounds
alternate the order. "driver peak MB" is this Python process's peak resident
set size during a system's action (the JVM's heap is set apart, 4 GB).
"labels ≠" scores the in-turn output with the composed graph in the same
job and counts the rows whose labels differ.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _compose_distributed import N_FEATURES, raw_block
from bench_distributed import peak_rss_mb, reset_peak

RAW_COLUMNS = ["ids", "flag", *(f"x_{i}" for i in range(N_FEATURES))]
POINT_COLUMNS = [f"p_{i}" for i in range(N_FEATURES + 1)]


def session():
    """A ``local[2]`` Spark session with Arrow batches, as bench_distributed.py starts it."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("hyp2onnx-compose-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    # The Python workers unpickle functions of these modules by name: ship them, so
    # that the benchmark runs without PYTHONPATH naming the benchmarks folder.
    for module in (
        "_report.py",
        "bench_distributed.py",
        "_compose_distributed.py",
        "_compose_spark.py",
    ):
        spark.sparkContext.addPyFile(str(Path(__file__).with_name(module)))
    return spark


def raw_frame(spark, n: int, block: int):
    """N rows of raw columns in partitions of ``block`` rows, made on the executors, cached."""
    import pandas as pd

    sizes = [min(block, n - start) for start in range(0, n, block)]
    schema = "ids long, flag boolean, " + ", ".join(f"x_{i} float" for i in range(N_FEATURES))

    def make(batches):
        for batch in batches:
            for index in batch["id"]:
                raw = raw_block(int(index), sizes[int(index)])
                frame = {"ids": raw["ids"], "flag": raw["flag"]}
                frame.update({f"x_{i}": raw["x"][:, i] for i in range(N_FEATURES)})
                yield pd.DataFrame(frame)

    df = spark.range(len(sizes), numPartitions=len(sizes)).mapInPandas(make, schema).cache()
    df.count()
    return df


def encoded(df, encoder_blob: bytes, *, keep: bool = False):
    """The encoder's points (``p_0`` ... ``p_8``) of every row, by ``mapInPandas``; after
    ``df``'s own columns with ``keep``."""
    import pandas as pd

    from hyp2onnx.distributed import _scoring

    key = _scoring.graph_key(encoder_blob)
    schema = ", ".join(f"{c} float" for c in POINT_COLUMNS)
    if keep:
        schema = df.schema.simpleString()[len("struct<") : -1].replace(":", " ") + ", " + schema

    def encode(batches):
        runner = _scoring.session(key, encoder_blob, 1)
        for batch in batches:
            feeds = {
                "ids": batch["ids"].to_numpy(np.int64),
                "flag": batch["flag"].to_numpy(np.bool_),
                "x": batch[[f"x_{i}" for i in range(N_FEATURES)]].to_numpy(np.float32),
            }
            points = pd.DataFrame(runner.run(["points"], feeds)[0], columns=POINT_COLUMNS)
            yield pd.concat([batch.reset_index(drop=True), points], axis=1) if keep else points

    return df.mapInPandas(encode, schema)


def _sums(out, n_classes: int):
    from pyspark.sql import functions as F

    return [F.sum("label")] + [F.sum(f"probability_{i}") for i in range(n_classes)]


def run_spark(encoder, graph, composed, n: int, block: int, rounds: int) -> list:
    """One table row: rows/s of each system, their ratio, driver peaks, labels ≠."""
    import hyp2onnx.spark as hspark

    spark = session()
    try:
        df = raw_frame(spark, n, block)
        blob = encoder.SerializeToString()
        ours = hspark.predict(composed, df)
        theirs = hspark.predict(graph, encoded(df, blob), columns=POINT_COLUMNS)
        n_classes = sum(1 for c in ours.columns if c.startswith("probability_"))
        systems = {
            "composed": lambda: ours.agg(*_sums(ours, n_classes)).collect(),
            "in turn": lambda: theirs.agg(*_sums(theirs, n_classes)).collect(),
        }
        seconds: dict = {s: [] for s in systems}
        peaks: dict = {s: 0.0 for s in systems}
        order = list(systems)
        for r in range(rounds):
            for name in order[r % 2 :] + order[: r % 2]:
                reset_peak()
                start = time.perf_counter()
                systems[name]()
                seconds[name].append(time.perf_counter() - start)
                peaks[name] = max(peaks[name], peak_rss_mb())
        differ = _labels_differ(hspark, composed, df, blob, graph)
    finally:
        spark.stop()
    c, t = statistics.median(seconds["composed"]), statistics.median(seconds["in turn"])
    ratios = [b / a for a, b in zip(seconds["composed"], seconds["in turn"], strict=True)]
    return [
        f"{n:,}",
        f"{n / c:,.0f}",
        f"{n / t:,.0f}",
        f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})",
        f"{peaks['composed']:.0f}",
        f"{peaks['in turn']:.0f}",
        differ,
    ]


def _labels_differ(hspark, composed, df, blob: bytes, graph) -> int:
    """Rows whose composed label differs from the in-turn one, counted in one Spark job."""
    both = encoded(hspark.predict(composed, df, output_prefix="c_"), blob, keep=True)
    scored = hspark.predict(graph, both, columns=POINT_COLUMNS)
    return int(scored.filter(scored["label"] != scored["c_label"]).count())
