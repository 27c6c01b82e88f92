"""Composition: one graph (encoder + model) against the two graphs run one after the other.

An MLP encoder (32 raw features, 64 ReLU units, then the exponential map
onto the hyperboloid H^8, float32, built with ``onnx.helper``) feeds two
models fitted on its points: a 100-tree depth-8 random forest classifier
(8 classes), a 100-tree depth-8 random forest regressor and a ReLU MLP
classifier (hidden layers 16 and 16, 8 classes), exported with the default
(fast) encoding. For each model and thread count:

* **sequential**: the encoder's session, then the model graph's session on
  the encoder's output (what a user runs without ``hyp2onnx.compose``);
* **composed**: ``hyp2onnx.compose(encoder, model)`` in one session, with the
  in-graph manifold check (the default) and without it
  (``check_manifold=False``).

Throughput is rows per second on a 50,000-row batch, latency the time of
a single-row call. Each round times every system once (batch, then
single-row calls) in an order rotated from round to round; the ratios are
medians of the rounds' own ratios (paired, so that the load of a shared
machine drifting between rounds cancels), with their quartiles.
"outputs ≠" counts rows whose composed label (or value) differs from the
sequential one's.

    python benchmarks/bench_compose.py [--quick]

``--distributed [--rows N ...]``: composed graphs from raw columns on a Dask
cluster, against the encoder and the model graph in turn on the same
workers (`_compose_distributed.py`, written to compose_distributed.md).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

import hyp2onnx as h

N_IN, HIDDEN, DIM = 32, 64, 8


def encoder(seed: int = 0) -> onnx.ModelProto:
    """ReLU MLP to a tangent vector v, then x = (cosh|v|, sinh|v| v/|v|) (float32)."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    w = {
        "W1": (rng.normal(size=(N_IN, HIDDEN)) / np.sqrt(N_IN)).astype(f32),
        "b1": (rng.normal(size=HIDDEN) * 0.1).astype(f32),
        "W2": (rng.normal(size=(HIDDEN, DIM)) * 1.5 / np.sqrt(HIDDEN)).astype(f32),
        "b2": (rng.normal(size=DIM) * 0.1).astype(f32),
        "eps": np.array(1e-30, dtype=f32),
        "axes": np.array([1], dtype=np.int64),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "W2"], ["v0"]),
        helper.make_node("Add", ["v0", "b2"], ["v"]),
        *exponential_map("v"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", N_IN])]
    return _model("encoder", nodes, inputs, w)


def exponential_map(v: str) -> list[onnx.NodeProto]:
    """Nodes from tangent vectors ``v`` to ``points`` = (cosh|v|, sinh|v| v/|v|) (float32;
    reads the initializers ``eps`` and ``axes``)."""
    return [
        helper.make_node("Mul", [v, v], ["vv"]),
        helper.make_node("ReduceSum", ["vv", "axes"], ["ss"], keepdims=1),
        helper.make_node("Add", ["ss", "eps"], ["ss_eps"]),
        helper.make_node("Sqrt", ["ss_eps"], ["n"]),
        helper.make_node("Cosh", ["n"], ["x0"]),
        helper.make_node("Sinh", ["n"], ["s"]),
        helper.make_node("Div", ["s", "n"], ["f"]),
        helper.make_node("Mul", ["f", v], ["xs"]),
        helper.make_node("Concat", ["x0", "xs"], ["points"], axis=1),
    ]


def _model(name: str, nodes: list, inputs: list, weights: dict) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        name,
        inputs,
        [helper.make_tensor_value_info("points", TensorProto.FLOAT, ["N", DIM + 1])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def id_encoder(n_entities: int, n_features: int, seed: int = 0) -> onnx.ModelProto:
    """Raw columns to H^DIM: an entity id (int64 [N]) into an embedding table, a bool flag
    [N] that negates the embedding where false (``Where``), and float32 features [N, F]
    through one linear layer, summed, then the exponential map (float32)."""
    rng = np.random.default_rng(seed)
    f32 = np.float32
    w = {
        "table": (rng.normal(size=(n_entities, DIM)) * 0.7).astype(f32),
        "W": (rng.normal(size=(n_features, DIM)) * 0.5 / np.sqrt(n_features)).astype(f32),
        "eps": np.array(1e-30, dtype=f32),
        "axes": np.array([1], dtype=np.int64),
    }
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], axis=0),
        helper.make_node("Neg", ["e"], ["minus_e"]),
        helper.make_node("Unsqueeze", ["flag", "axes"], ["flag2"]),
        helper.make_node("Where", ["flag2", "e", "minus_e"], ["signed"]),
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["signed", "xw"], ["v"]),
        *exponential_map("v"),
    ]
    inputs = [
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["N"]),
        helper.make_tensor_value_info("flag", TensorProto.BOOL, ["N"]),
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", n_features]),
    ]
    return _model("id_encoder", nodes, inputs, w)


def session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def spread(ratios: np.ndarray) -> str:
    """Median of per-round ratios, with their quartiles: ``1.02 (0.97–1.08)``."""
    q1, med, q3 = np.percentile(ratios, [25, 50, 75])
    return f"{med:.2f} ({q1:.2f}–{q3:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument(
        "--distributed",
        action="store_true",
        help="score a composed graph on a Dask LocalCluster instead (compose_distributed.md)",
    )
    parser.add_argument(
        "--rows", type=int, nargs="+", help="rows scored with --distributed [1000000]"
    )
    parser.add_argument(
        "--spark",
        action="store_true",
        help="with --distributed: score on a local[2] Spark session too",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="alternating rounds with --distributed [3]"
    )
    args = parser.parse_args()
    if args.distributed:
        from _compose_distributed import run_distributed

        run_distributed(args, id_encoder)
        return
    quick = args.quick
    n_train, n_test = (2_000, 2_000) if quick else (20_000, 50_000)
    n_trees, depth = (10, 4) if quick else (100, 8)
    repeats, single_calls = (2, 20) if quick else (21, 200)
    threads_list = (1,) if quick else (1, 2)

    enc = encoder()
    rng = np.random.default_rng(1)
    X_train = rng.normal(size=(n_train, N_IN)).astype(np.float32)
    X_test = rng.normal(size=(n_test, N_IN)).astype(np.float32)
    enc_session = session(enc, 1)
    E = enc_session.run(["points"], {"x": X_train})[0].astype(np.float64)
    k = E[:, 1:] / E[:, :1]
    normals = rng.normal(size=(DIM, 8))
    classes = np.argmax(k @ normals, axis=1)
    target = np.sin(3 * k[:, 0]) + k[:, 1] ** 2
    models = {
        "forest classifier (8 classes)": h.HyperbolicRandomForestClassifier(
            n_estimators=n_trees, max_depth=depth, random_state=0
        ).fit(E, classes),
        "forest regressor": h.HyperbolicRandomForestRegressor(
            n_estimators=n_trees, max_depth=depth, random_state=0
        ).fit(E, target),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a network may stop before it converges
        models["MLP classifier (8 classes)"] = h.HyperbolicMLPClassifier(
            hidden_layer_sizes=(16, 16), max_iter=20 if quick else 200, random_state=0
        ).fit(E, classes)

    rows = []
    inputs: dict[str, str] = {}
    for name, model in steps(models.items(), "models", unit="models"):
        graph = h.to_onnx(model)
        # A model whose splits float32 cannot separate takes float64: the sequential
        # pipeline widens the encoder's points in numpy, the composed graph casts them.
        wide = graph.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # that precision note, said in the results
            composed = h.compose(enc, graph)
            unchecked = h.compose(enc, graph, check_manifold=False)
        inputs[name] = "float64" if wide else "float32"
        first = "label" if "label" in [o.name for o in graph.graph.output] else "variable"
        for threads in threads_list:
            e, m = session(enc, threads), session(graph, threads)
            c, u = session(composed, threads), session(unchecked, threads)

            def sequential(x, e=e, m=m, wide=wide):
                points = e.run(["points"], {"x": x})[0]
                return m.run(None, {"X": points.astype(np.float64) if wide else points})

            systems = {
                "sequential": sequential,
                "composed": lambda x, c=c: c.run(None, {"x": x}),
                "composed, no check": lambda x, u=u: u.run(None, {"x": x}),
            }
            seq_out = sequential(X_test)[0]
            com_out = c.run([first], {"x": X_test})[0]
            differ = int(np.count_nonzero(~np.isclose(seq_out, com_out, rtol=0, atol=0)))
            for run in systems.values():  # warm-up
                run(X_test[:1])
                run(X_test)
            batch = {s: [] for s in systems}
            single = {s: [] for s in systems}
            one = X_test[:1]
            order = list(systems)
            for r in range(repeats):
                # rotate the order each round: no system always runs first (or last)
                turn = order[r % len(order) :] + order[: r % len(order)]
                for s in turn:
                    t = time.perf_counter()
                    systems[s](X_test)
                    batch[s].append(time.perf_counter() - t)
                for s in turn:
                    t = time.perf_counter()
                    for _ in range(single_calls):
                        systems[s](one)
                    single[s].append((time.perf_counter() - t) / single_calls * 1e6)
            seq_t = np.array(batch["sequential"])
            seq_l = np.array(single["sequential"])
            rows.append(
                [
                    name,
                    threads,
                    f"{n_test / np.median(seq_t):,.0f}",
                    f"{n_test / np.median(batch['composed']):,.0f}",
                    spread(seq_t / np.array(batch["composed"])),
                    spread(seq_t / np.array(batch["composed, no check"])),
                    f"{np.median(seq_l):.0f}",
                    f"{np.median(single['composed']):.0f}",
                    spread(np.array(single["composed"]) / seq_l),
                    differ,
                ]
            )
    headers = [
        "model",
        "threads",
        "sequential rows/s",
        "composed rows/s",
        "throughput composed / sequential",
        "no check / sequential",
        "sequential µs/row call",
        "composed µs/row call",
        "latency composed / sequential",
        "outputs ≠",
    ]
    print(text_table(headers, rows))
    text = (
        "# Composition: encoder + model in one graph\n\n"
        + "Generated by `benchmarks/bench_compose.py`"
        + (" (--quick)" if quick else "")
        + f". {environment()}\n\n"
        + f"Encoder: MLP {N_IN} → {HIDDEN} (ReLU) → {DIM}, exponential map onto H^{DIM}, "
        + f"float32. Models: forests of {n_trees} trees of depth {depth}, an MLP with hidden "
        + "layers 16 and 16, fast encoding; batch of "
        + f"{n_test:,} rows; latency: mean of {single_calls} single-row calls. Each of "
        + f"{repeats} rounds times every system once, in an order rotated from round to "
        + "round; rows/s and µs are medians over the rounds, ratios the median of the "
        + "rounds' own ratios with their quartiles in brackets. A throughput ratio above 1 "
        + "means the composed graph is faster, a latency ratio below 1 likewise. "
        + '"outputs ≠" counts rows whose first output (label, or value) differs between '
        + "the composed graph and the two graphs in turn. Model graph inputs: "
        + ", ".join(f"{k} {v}" for k, v in inputs.items())
        + " (a float64 model gets the encoder's float32 points widened: by numpy in "
        + "the sequential pipeline, by an exact Cast in the composed graph).\n\n"
        + md_table(headers, rows, "lrrrrrrrrr")
        + "\n"
    )
    write(output_dir(args) / "compose.md", text)


if __name__ == "__main__":
    main()
