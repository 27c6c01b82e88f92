"""Walking each (row, tree) pair only to its leaf in standard ONNX operators: measured.

The standard encoding walks every tree of a depth group for every row as
many levels as the group's deepest tree. LightGBM's leaf-wise trees make
that costly: its 800 trees of the 8-class benchmark need about three times
the levels a row really takes. Compacting the unfinished (row, tree) pairs
after each level (``Compress``) walks each pair only to its leaf. This
script builds that walk for the benchmark's LightGBM 8-class model (leaf ids
only; no values, no sums), checks its leaves against a numpy walk of the
same tables, and times it beside the standard encoding's whole graph and
the peer (onnxmltools' ai.onnx.ml graph on Klein coordinates), in turn in
each round.

    python benchmarks/bench_standard_compaction.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_export
from _report import add_output_args, environment, md_table, output_dir, steps, write

import hyp2onnx as h
from hyp2onnx.export import describe


def pointer_tables(ensemble: Any) -> dict[str, np.ndarray]:
    """Every tree's nodes renumbered breadth first, siblings side by side (right = left + 1);
    leaves point to themselves and test ``+inf``."""
    feature, left, right = ensemble.feature, ensemble.left, ensemble.right
    order: list[int] = []
    new = -np.ones(feature.size, dtype=np.int64)
    for root in ensemble.roots:
        new[root] = len(order)
        order.append(int(root))
        frontier = [int(root)]
        while frontier:
            children = [c for n in frontier if feature[n] >= 0 for c in (left[n], right[n])]
            new[children] = np.arange(len(order), len(order) + len(children))
            order += children
            frontier = children
    at = np.array(order)
    leaf = feature[at] < 0
    depth = np.zeros(at.size, dtype=np.int64)
    lefts = np.where(leaf, np.arange(at.size), new[left[at]])
    for i in np.flatnonzero(~leaf):  # parents come before their children
        depth[lefts[i]] = depth[lefts[i] + 1] = depth[i] + 1
    return {
        "feature": np.where(leaf, 0, feature[at]).astype(np.int64),
        "threshold": np.where(leaf, np.inf, ensemble.threshold[at]).astype(np.float64),
        "left": lefts.astype(np.int64),
        "leaf": leaf,
        "root": new[ensemble.roots].astype(np.int64),
        "depth": np.array(int(depth.max())),
    }


def numpy_leaves(tables: dict[str, np.ndarray], k: np.ndarray) -> np.ndarray:
    """The oracle: every pair walked to its leaf in numpy."""
    node = np.tile(tables["root"], (len(k), 1))
    rows = np.arange(len(k))[:, None]
    for _ in range(int(tables["depth"])):
        right = k[rows, tables["feature"][node]] > tables["threshold"][node]
        node = np.where(tables["leaf"][node], node, tables["left"][node] + right)
    return node


def compaction_graph(tables: dict[str, np.ndarray], n_features: int) -> onnx.ModelProto:
    """Leaf ids ``[N, trees]`` of float64 Klein rows, unfinished pairs compacted every level."""
    nodes: list[onnx.NodeProto] = []
    n_trees = tables["root"].size

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        out = f"{kind}_{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    consts = {
        "features": tables["feature"],
        "thresholds": tables["threshold"],
        "lefts": tables["left"],
        "is_leaf": tables["leaf"],
        "roots": tables["root"],
        "n_trees": np.array(n_trees, np.int64),
        "n_features": np.array(n_features, np.int64),
        "zero": np.array(0, np.int64),
        "one": np.array(1, np.int64),
        "flat": np.array([-1], np.int64),
        "first": np.array([0], np.int64),
        "trees_1d": np.array([n_trees], np.int64),
        "unset": np.array([-1], np.int64),
    }
    x = op("Reshape", ["X", "flat"])
    n = op("Gather", [op("Shape", ["X"]), "first"], axis=0)
    n_pairs = op("Mul", [n, "trees_1d"])
    pairs = op("Range", ["zero", op("Squeeze", [n_pairs]), "one"])
    row_at = op("Mul", [op("Div", [pairs, "n_trees"]), "n_features"])
    node = op("Gather", ["roots", op("Mod", [pairs, "n_trees"])], axis=0)
    done_pairs, done_nodes = [], []
    for _ in range(int(tables["depth"])):
        feature = op("Gather", ["features", node], axis=0)
        value = op("Gather", [x, op("Add", [row_at, feature])], axis=0)
        limit = op("Gather", ["thresholds", node], axis=0)
        right = op("Cast", [op("Greater", [value, limit])], to=TensorProto.INT64)
        node = op("Add", [op("Gather", ["lefts", node], axis=0), right])
        done = op("Gather", ["is_leaf", node], axis=0)
        done_pairs.append(op("Compress", [pairs, done], axis=0))
        done_nodes.append(op("Compress", [node, done], axis=0))
        going = op("Not", [done])
        pairs, row_at, node = (op("Compress", [a, going], axis=0) for a in (pairs, row_at, node))
    leaves = op("Expand", ["unset", n_pairs])
    leaves = op(
        "ScatterElements",
        [leaves, op("Concat", done_pairs, axis=0), op("Concat", done_nodes, axis=0)],
        axis=0,
    )
    nodes.append(
        helper.make_node("Reshape", [leaves, op("Concat", [n, "trees_1d"], axis=0)], ["leaves"])
    )
    graph = helper.make_graph(
        nodes,
        "compaction",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, n_features])],
        [helper.make_tensor_value_info("leaves", TensorProto.INT64, [None, n_trees])],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    args = parser.parse_args(argv)
    out = output_dir(args)
    n_train, n_test, rounds, repeats = (
        (2_000, 2_000, 10, 2) if args.quick else (20_000, 20_000, 100, 5)
    )
    import lightgbm

    rng = np.random.default_rng(0)
    dim = bench_export.DIM
    k_train = bench_export.klein_data(n_train, dim, rng)
    y = bench_export._classes(k_train, 8, np.random.default_rng([0, 6]))
    model = lightgbm.LGBMClassifier(n_estimators=rounds, n_jobs=1, random_state=0, verbose=-1).fit(
        k_train, y
    )
    k_test = bench_export.klein_data(n_test, dim, rng)
    with warnings.catch_warnings():  # "exported with its own (Euclidean) thresholds"
        warnings.simplefilter("ignore")
        tables = pointer_tables(describe(model, input_geometry="klein").ensemble)
        standard = h.to_onnx(model, input_geometry="klein", encoding="standard", dtype="float64")
        peer = bench_export._onnxmltools_peer(model, "lightgbm")
    compact = compaction_graph(tables, dim)
    check = min(n_test, 2_000)
    got = bench_export.session(compact).run(None, {"X": k_test[:check]})[0]
    if not np.array_equal(got, numpy_leaves(tables, k_test[:check])):
        raise SystemExit("the compaction walk reaches other leaves than the numpy walk")
    feeds = {
        "compaction walk (leaf ids only)": (compact, k_test),
        "standard encoding (whole graph)": (standard, k_test),
        "peer": (peer, k_test.astype(np.float32)),
    }
    rows = []
    for threads in steps((1, 2), "thread counts", unit="settings"):
        sessions = {name: (bench_export.session(g, threads), x) for name, (g, x) in feeds.items()}
        times: dict[str, list[float]] = {name: [] for name in sessions}
        for s, x in sessions.values():
            s.run(None, {"X": x})
        for _ in range(repeats):
            for name, (s, x) in sessions.items():
                start = time.perf_counter()
                s.run(None, {"X": x})
                times[name].append(time.perf_counter() - start)
        peer_time = statistics.median(times["peer"])
        for name, t in times.items():
            rate = n_test / statistics.median(t)
            rows.append(
                [name, threads, f"{rate / 1e3:,.1f}k", f"{peer_time / statistics.median(t):.2f}x"]
            )
    table = md_table(["graph", "threads", "rows/s", "vs peer"], rows, "lrrr")
    print(table)
    write(
        out / "standard_compaction.md",
        "\n".join(
            [
                "# Walking each pair only to its leaf, in standard operators",
                "",
                f"LightGBM, 8 classes, {rounds} rounds ({tables['root'].size} trees of 31 leaves, "
                f"depths up to {int(tables['depth'])}), {dim} Klein features, {n_train:,} training "
                f"rows; {n_test:,} rows scored, float64; medians of {repeats} rounds in which the "
                "graphs run in turn. The compaction walk's leaves equal a numpy walk's on "
                f"{check:,} rows.",
                "",
                table,
                "",
                environment(),
            ]
        ),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
