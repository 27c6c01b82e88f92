"""Short batches: the default graph against its peer at 1 to 16 rows, and the crossover.

The fast encoding's graph sends batches of up to a crossover
(``hyp2onnx.emit.strategy.SHORT_BATCH_ROWS``) to the exact scores through an
``If`` on the batch size, and longer ones to the fast scores and their
near-tie guard. For each model of ``bench_export.py`` this times, at one
onnxruntime thread, interleaved and best of the rounds:

* ``default``: the graph ``to_onnx`` builds;
* ``exact side``: the same graph with every batch sent to the exact scores;
* ``fast side``: every batch sent to the fast scores (the graph before the split);
* ``peer``: the plain graph of the same trees fed float32 Klein coordinates.

It reports the default graph's time per call against the peer's at each batch
size, the batch size up to which the exact side is the faster (the crossover
measured), and the ``If``'s own cost (the default graph against the side it
takes, at 1 row and at the longest batch).

    python benchmarks/bench_short_batches.py [--quick] [--models "RF binary,..."]
        [--sizes 1,2,4,8,16,1000,10000] [--rounds N] [--train-rows N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import (
    add_output_args,
    environment,
    md_table,
    output_dir,
    steps,
    text_table,
    write,
)
from bench_export import (
    DIM,
    _with_its_input,
    klein_data,
    model_specs,
    pick_models,
    session,
)

import hyp2onnx as h
from hyp2onnx import geometry

#: every side of a graph: batches of up to this many rows "short"
ALWAYS = 1 << 40


def variants(model: Any, kwargs: dict[str, Any], X32: np.ndarray) -> dict[str, Any]:
    """The default graph and its two sides, each with its input batch."""
    from hyp2onnx.emit.strategy import GraphOverrides, choose_graph
    from hyp2onnx.export import compile_model, describe, input_dtype

    graphs = {"default": _with_its_input(h.to_onnx(model, **kwargs), X32)}
    described = describe(model, **kwargs)
    dtype = input_dtype(described)
    chosen = choose_graph(described, encoding="fast", input_dtype=dtype)
    if chosen.layout not in (None, "exact"):  # every model with a fast side: both sides
        for name, rows in (("exact side", ALWAYS), ("fast side", 0)):
            overrides = GraphOverrides(short_rows=rows)
            graph = compile_model(
                described, dtype=dtype, encoding="fast", opset=18, overrides=overrides
            )
            graphs[name] = _with_its_input(graph, X32)
    return graphs


def time_sizes(
    graphs: dict[str, tuple[Any, np.ndarray]], sizes: list[int], rounds: int, budget: float
) -> dict[str, dict[int, float]]:
    """Best µs per call of each graph at each batch size, the graphs interleaved per size."""
    sessions = {name: (session(graph), x) for name, (graph, x) in graphs.items()}
    best = {name: dict.fromkeys(sizes, float("inf")) for name in graphs}
    for _ in range(rounds):
        for size in sizes:
            for name, (s, x) in sessions.items():
                feed = {"X": x[:size]}
                s.run(None, feed)
                calls = max(1, int(budget / (2e-6 * size + 2e-5)))
                for _ in range(calls):  # each call timed alone: the least is the unloaded one
                    start = time.perf_counter()
                    s.run(None, feed)
                    took = (time.perf_counter() - start) * 1e6
                    best[name][size] = min(best[name][size], took)
    return best


def node_profile(graph: Any, x: np.ndarray, calls: int) -> tuple[list[tuple[str, float]], float]:
    """The nodes a 1-row call runs, in order, each with its median kernel time in µs,
    and the median time of the whole call, by onnxruntime's profiler at one thread.

    The profiler adds its own cost to every node (a few µs at one row), so the
    times rank the nodes and count them; the timings without it are `time_sizes`'.
    An ``If``'s time holds the nodes of the branch it takes, listed before it.
    """
    import json
    import tempfile

    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.enable_profiling = True
    with tempfile.TemporaryDirectory() as folder:
        options.profile_file_prefix = str(Path(folder) / "profile")
        s = ort.InferenceSession(
            graph.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        feed = {s.get_inputs()[0].name: x[:1]}
        for _ in range(calls):
            s.run(None, feed)
        events = json.loads(Path(s.end_profiling()).read_text())
    kernels: dict[str, list[float]] = {}
    ops: dict[str, str] = {}
    runs = []
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            name = event["name"].removesuffix("_kernel_time")
            kernels.setdefault(name, []).append(event["dur"])
            ops[name] = event["args"].get("op_name", "?")
        elif event.get("cat") == "Session" and event["name"] == "model_run":
            runs.append(event["dur"])
    nodes = [(ops[name], float(np.median(times))) for name, times in kernels.items()]
    return nodes, float(np.median(runs[len(runs) // 10 :]))


def profile_row(label: str, graphs: dict[str, tuple[Any, np.ndarray]], calls: int) -> list[str]:
    """One row of the per-node table: the default graph's nodes and the peer's at one row."""
    cells = [label]
    for name in ("default", "peer"):
        nodes, run = node_profile(*graphs[name], calls)
        listed = ", ".join(f"{op} {us:.0f}" for op, us in nodes)
        cells += [str(len(nodes)), listed, f"{sum(us for _, us in nodes):.0f} / {run:.0f}"]
    return cells


def measured_crossover(best: dict[str, dict[int, float]], sizes: list[int]) -> int | None:
    """The largest batch size up to which the exact side is never slower than the fast one."""
    if "exact side" not in best:
        return None
    crossover = 0
    for size in sizes:
        if best["exact side"][size] > best["fast side"][size]:
            break
        crossover = size
    return crossover


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--models", default=None, help="row labels of bench_export.py")
    parser.add_argument("--rounds", type=int, default=None, help="timing rounds (default 7)")
    parser.add_argument("--train-rows", type=int, default=None, help="training rows (20,000)")
    parser.add_argument("--sizes", default=None, help="batch sizes, comma-separated")
    parser.add_argument(
        "--profile-calls", type=int, default=None, help="1-row calls profiled a graph (2,000)"
    )
    args = parser.parse_args(argv)
    out = output_dir(args)
    quick = args.quick
    n_train, n_trees, rounds, budget = (500, 5, 1, 0.001) if quick else (20_000, 100, 7, 0.05)
    rounds = args.rounds or rounds
    n_train = args.train_rows or n_train
    sizes = [1, 16, 1000] if quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 1000, 10_000]
    if args.sizes:
        sizes = sorted({int(size) for size in args.sizes.split(",")})
    rng = np.random.default_rng(0)
    k_train = klein_data(n_train, DIM, rng)
    X_train = geometry.from_klein(k_train, "hyperboloid")
    X32 = geometry.from_klein(klein_data(max(sizes), DIM, rng), "hyperboloid").astype(np.float32)
    k32 = (X32[:, 1:].astype(np.float64) / X32[:, :1]).astype(np.float32)
    specs = model_specs(n_trees, quick)
    picked = pick_models(args.models, [s[0] for s in specs]) if args.models else None
    if quick and picked is None:  # a smoke test: one model of each kind of graph
        picked = ["RF 8 classes", "RF binary", "LightGBM regressor"]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    headers = ["model", "crossover (set / measured)"]
    headers += [f"{s} rows vs peer" for s in sizes] + ["If's cost, 1 row / long, µs"]
    rows, profiled = [], []
    calls = args.profile_calls or (20 if quick else 2000)
    for index, (label, fit) in enumerate(steps(specs, "models", unit="models")):
        if picked and label not in picked:
            continue
        model, kwargs, make_peer = fit(k_train, X_train, np.random.default_rng([0, index]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graphs = {"peer": (make_peer(k32), k32), **variants(model, kwargs, X32)}
        best = time_sizes(graphs, sizes, rounds, budget)
        ratios = [f"{best['default'][s] / best['peer'][s]:.2f}x" for s in sizes]
        crossover = measured_crossover(best, sizes)
        meta = {p.key: p.value for p in graphs["default"][0].metadata_props}
        set_rows = meta.get("hyp2onnx.short_batch_rows", "-")
        if crossover is None:
            if_cost = "-"
        else:
            one = best["default"][1] - best["exact side"][1]
            long = best["default"][sizes[-1]] - best["fast side"][sizes[-1]]
            if_cost = f"{one:+.1f} / {long:+.1f}"
        rows.append([label, f"{set_rows} / {crossover if crossover is not None else '-'}"])
        rows[-1] += [*ratios, if_cost]
        print(text_table(headers, rows[-1:]), flush=True)
        profiled.append(profile_row(label, graphs, calls))
    elapsed = time.perf_counter() - started
    md = [
        "# Short batches: the default graph against its peer",
        "",
        f"Models of `bench_export.py` ({n_trees} trees or rounds, {DIM} Klein features, "
        f"trained on {n_train:,} rows). Time per call of the default graph over the peer's "
        "(the same trees' skl2onnx/onnxmltools graph fed precomputed float32 Klein "
        f"coordinates) at each batch size, one onnxruntime thread, best of {rounds} rounds "
        "in which every graph runs each size in turn. Crossover: batches of up to this many "
        "rows take the exact scores (set: the graph's metadata; measured: the largest size "
        "up to which the exact side was never slower than the fast side). The If's cost: "
        "the default graph's time less that of the side it takes, with the If left out "
        "(negative: within the noise).",
        "",
        md_table(headers, rows, align="ll" + "r" * (len(headers) - 2)),
        "",
        "## The nodes of a 1-row call",
        "",
        "Each node a 1-row call runs, in order, with its median kernel time in µs by "
        f"onnxruntime's profiler ({calls:,} calls, one thread). The profiler adds its own "
        "cost to every node, so these times count and rank the nodes; the ratios above are "
        "timed without it. An If's time holds the branch it takes, whose nodes are listed before it. "
        "Sum / call: the nodes' times added (an If's branch counted twice: in the If and in its nodes), and the median profiled call.",
        "",
        md_table(
            [
                "model",
                "nodes",
                "default graph's nodes, µs",
                "sum / call, µs",
                "peer's nodes",
                "peer's nodes, µs",
                "peer's sum / call, µs",
            ],
            profiled,
            align="lrlrrlr",
        ),
        "",
        environment() + f" Load average at the start: {load:.2f}. Run: {elapsed / 60:.1f} min.",
    ]
    write(out / "short_batches.md", "\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
