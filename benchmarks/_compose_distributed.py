"""``bench_compose.py --distributed``: a composed graph scored on Dask from raw columns.

The encoder (`bench_compose.id_encoder`: an int64 entity id into an
embedding table, a bool flag through ``Where``, float32 features through a
linear layer, then the exponential map onto H^8) sits in front of a random
forest classifier (8 classes) fitted on its points. N rows of raw columns
are generated on a 2-worker ``LocalCluster`` (1 thread each) and held there;
two systems score them on the same workers:

* **composed**: `hyp2onnx.dask.predict` of ``hyp2onnx.compose(encoder, forest)``
  on the dask arrays by input name (one session per worker; rows checked
  against the inputs' types, the graph's ``on_manifold`` refusing points
  off the hyperboloid);
* **in turn**: the encoder's session run per partition (``map_blocks``,
  its session cached per worker the same way), then `hyp2onnx.dask.predict`
  of the forest's own graph on those points (rows checked on the
  hyperboloid in numpy): what a user runs without ``compose``.

Each system's outputs are summed on the workers (the label and every
probability), so only a few numbers reach this process; rows/s is N over
the wall time of that compute. Rounds alternate the order of the systems.
"driver peak MB" is this process's peak resident set size during a
system's computes (Linux ``VmHWM``, reset before each). "labels ≠" counts
rows whose labels differ between the systems (computed on the workers).
"""

from __future__ import annotations

import statistics
import time
import warnings

import numpy as np
from _report import environment, md_table, output_dir, steps, text_table, write
from bench_distributed import peak_rss_mb, reset_peak

import hyp2onnx as h

N_ENTITIES, N_FEATURES = 10_000, 8


def raw_block(index: int, n: int) -> dict[str, np.ndarray]:
    """One partition of raw columns, made on a worker."""
    rng = np.random.default_rng(1_000 + index)
    return {
        "ids": rng.integers(0, N_ENTITIES, n),
        "flag": rng.random(n) < 0.5,
        "x": rng.normal(size=(n, N_FEATURES)).astype(np.float32),
    }


def raw_arrays(client, n: int, block: int) -> dict:
    """Dask arrays of N rows of raw columns by input name, persisted on the workers."""
    import dask
    import dask.array as da
    from distributed import wait

    sizes = [min(block, n - start) for start in range(0, n, block)]
    blocks = [dask.delayed(raw_block)(i, m) for i, m in enumerate(sizes)]
    shapes = {"ids": ((), np.int64), "flag": ((), np.bool_), "x": ((N_FEATURES,), np.float32)}
    arrays = {
        name: da.concatenate(
            [
                da.from_delayed(b[name], shape=(m, *extra), dtype=dtype)
                for b, m in zip(blocks, sizes, strict=True)
            ]
        )
        for name, (extra, dtype) in shapes.items()
    }
    names = list(arrays)
    persisted = client.persist([arrays[name] for name in names])
    wait(persisted)
    return dict(zip(names, persisted, strict=True))


def encode_block(blob: bytes, key: str, ids, flag, x) -> np.ndarray:
    """The encoder on one partition, its session cached in the worker process."""
    from hyp2onnx.distributed import _scoring

    session = _scoring.session(key, blob, 1)
    return session.run(["points"], {"ids": ids, "flag": flag, "x": x})[0]


def in_turn(encoder_blob: bytes, graph, arrays: dict) -> dict:
    """The encoder per partition, then the model graph's scorer on its points."""
    import dask
    import dask.array as da

    import hyp2onnx.dask as hdask
    from hyp2onnx.distributed import _scoring

    shipped = dask.delayed(encoder_blob, pure=True)
    key = _scoring.graph_key(encoder_blob)
    parts = [
        da.from_delayed(
            dask.delayed(encode_block, pure=True)(shipped, key, i, f, x),
            shape=(m, 9),
            dtype=np.float32,
        )
        for i, f, x, m in zip(
            arrays["ids"].to_delayed().ravel(),
            arrays["flag"].to_delayed().ravel(),
            arrays["x"].to_delayed().ravel(),
            arrays["ids"].chunks[0],
            strict=True,
        )
    ]
    return hdask.predict(graph, da.concatenate(parts))


def _models(id_encoder, quick: bool):
    """The encoder, a forest fitted on its points, and the composed graph."""
    import onnxruntime as ort

    enc = id_encoder(N_ENTITIES, N_FEATURES)
    train = raw_block(-1, 2_000 if quick else 20_000)
    points = ort.InferenceSession(enc.SerializeToString()).run(["points"], train)[0]
    k = points[:, 1:].astype(np.float64) / points[:, :1]
    classes = np.argmax(k @ np.random.default_rng(2).normal(size=(k.shape[1], 8)), axis=1)
    n_trees, depth = (10, 4) if quick else (100, 8)
    forest = h.HyperbolicRandomForestClassifier(
        n_estimators=n_trees, max_depth=depth, random_state=0
    )
    graph = h.to_onnx(forest.fit(points.astype(np.float64), classes))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a precision note where the model takes float64
        composed = h.compose(enc, graph)
    return enc, graph, composed, (n_trees, depth)


def _measure(client, systems: dict, rounds: int) -> tuple[dict, dict]:
    """Seconds per round and driver peak MB of each system, in alternating order."""
    import dask

    seconds: dict = {s: [] for s in systems}
    peaks: dict = {s: 0.0 for s in systems}
    order = list(systems)
    for r in range(rounds):
        for name in order[r % 2 :] + order[: r % 2]:
            reset_peak()
            start = time.perf_counter()
            dask.compute(*systems[name])
            seconds[name].append(time.perf_counter() - start)
            peaks[name] = max(peaks[name], peak_rss_mb())
    return seconds, peaks


def run_distributed(args, id_encoder) -> None:
    """Measure and write compose_distributed.md."""
    import dask
    from distributed import Client, LocalCluster

    import hyp2onnx.dask as hdask

    quick = args.quick
    sizes = args.rows or ([10_000] if quick else [1_000_000])
    block, rounds = (5_000, 1) if quick else (250_000, 3)
    rounds = getattr(args, "rounds", None) or rounds
    enc, graph, composed, (n_trees, depth) = _models(id_encoder, quick)
    rows = []
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        for n in steps(sizes, "Dask", unit="sizes"):
            arrays = raw_arrays(client, n, block)
            ours = hdask.predict(composed, arrays)
            theirs = in_turn(enc.SerializeToString(), graph, arrays)

            def sums(out):
                return [out["label"].sum(), out["probabilities"].sum()]

            (differ,) = dask.compute((ours["label"] != theirs["label"]).sum())
            seconds, peaks = _measure(
                client, {"composed": sums(ours), "in turn": sums(theirs)}, rounds
            )
            c, t = statistics.median(seconds["composed"]), statistics.median(seconds["in turn"])
            ratios = [b / a for a, b in zip(seconds["composed"], seconds["in turn"], strict=True)]
            rows.append(
                [
                    f"{n:,}",
                    f"{n / c:,.0f}",
                    f"{n / t:,.0f}",
                    f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})",
                    f"{peaks['composed']:.0f}",
                    f"{peaks['in turn']:.0f}",
                    int(differ),
                ]
            )
            client.cancel(list(arrays.values()))
    spark_rows = []
    if getattr(args, "spark", False):
        from _compose_spark import run_spark

        for n in steps(sizes, "Spark", unit="sizes"):
            spark_rows.append(run_spark(enc, graph, composed, n, block, rounds))
    headers = [
        "rows",
        "composed rows/s",
        "in turn rows/s",
        "composed / in turn (throughput)",
        "driver peak MB, composed",
        "driver peak MB, in turn",
        "labels ≠",
    ]
    print(text_table(headers, rows))
    text = (
        "# Composed graphs on Dask: raw columns in, labels out\n\n"
        + "Generated by `benchmarks/bench_compose.py --distributed`"
        + (" (--quick)" if quick else "")
        + f". {environment()}\n\n"
        + f"Encoder: an int64 id into a {N_ENTITIES:,}-row embedding table, a bool flag "
        + f"(Where), {N_FEATURES} float32 features through a linear layer, then the "
        + f"exponential map onto H^8 (float32). Model: a random forest classifier of {n_trees} "
        + f"trees of depth {depth}, 8 classes. A 2-worker LocalCluster (1 thread each); "
        + f"partitions of {block:,} rows held on the workers; {rounds} round(s), alternating "
        + "the order; rows/s from the median round, the ratio the median of the rounds' own "
        + "ratios (min–max in brackets; above 1: composed faster). See "
        + "`benchmarks/_compose_distributed.py` for what each system runs.\n\n"
        + md_table(headers, rows, "rrrrrrr")
        + "\n"
        + _spark_section(headers, spark_rows, block, rounds)
    )
    write(output_dir(args) / "compose_distributed.md", text)


def _spark_section(headers: list, rows: list, block: int, rounds: int) -> str:
    """The Spark table of compose_distributed.md (empty without ``--spark``)."""
    if not rows:
        return ""
    print(text_table(headers, rows))
    return (
        "\n## On Spark\n\n"
        + "The same raw columns as Spark columns (`ids` long, `flag` boolean, `x_0` ... `x_7` "
        + f"float) in a cached `local[2]` DataFrame, partitions of {block:,} rows; composed: "
        + "`hyp2onnx.spark.predict` of the composed graph; in turn: the encoder in "
        + "`mapInPandas`, then `hyp2onnx.spark.predict` of the forest's graph. Spark sums "
        + f"the labels and probabilities; {rounds} round(s), alternating. Driver peak: this "
        + "Python process (the JVM apart). See `benchmarks/_compose_spark.py`.\n\n"
        + md_table(headers, rows, "rrrrrrr")
        + "\n"
    )
