"""Labels at near ties: the graph against each library's own predict, and what it costs.

First table: rows built to be near ties (leaf values set in each library's
own model, ``tests/_margins.py``): one class's scores run one ulp at a time
through a base score, a second class sits at the base or one ulp from it, the
others lie 0 to 6 below (four classes, one tree per class, 400 rows a model,
exact encoding, onnxruntime). Counted: rows whose graph label differs from
the library's ``predict``. XGBoost and LightGBM decide on their own softmax,
which the graph computes step for step (rows near a tie with correctly
rounded exponentials); CatBoost on its raw scores.

Second table: how often an ``exp`` is not correctly rounded, on shifts drawn
in ``[-6, 0]`` and ``[-700, 0]`` and on the shifts near ties make
(``-k * 2**-n``, k up to 199, n 18 to 61): onnxruntime's float64 ``Exp``,
the C library's ``exp`` (Python's ``math.exp``) and the graph's
``exp_correctly_rounded``, which rows near a tie go through; the reference
is ``decimal`` at 60 digits. Last column: where the graph's and the C
library's differ.

Third table: time of one call of the exported default graph (8 classes, 20
rounds) with the library's softmax against ``Softmax``, side by side.

    python benchmarks/bench_label_rules.py [--quick] [--trials 600]
"""

from __future__ import annotations

import argparse
import copy
import decimal
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests"))  # _margins: leaf values set in the native models
from _margins import set_leaves
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

import hyp2onnx as h
from hyp2onnx import _runtime
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.emit import outputs
from hyp2onnx.verification import run_onnx


def _ulps(center: float, offsets: np.ndarray, dtype: str) -> np.ndarray:
    one = np.dtype(dtype).type
    out = []
    for k in offsets.tolist():
        x = one(center)
        for _ in range(abs(k)):
            x = np.nextafter(x, one(np.inf if k > 0 else -np.inf))
        out.append(x)
    return np.array(out, dtype=np.float64)


def near_ties(trials: int) -> list[list]:
    X, y = make_wrapped_normal_mixture(400, 2, 4, random_state=31)
    makers = {
        "XGBoost": lambda: h.HyperbolicXGBClassifier(n_estimators=1, max_depth=5, n_jobs=1),
        "LightGBM": lambda: h.HyperbolicLGBMClassifier(
            n_estimators=1, num_leaves=32, min_child_samples=2, verbose=-1, n_jobs=1
        ),
        "CatBoost": lambda: h.HyperbolicCatBoostClassifier(
            iterations=1, depth=5, verbose=0, thread_count=1
        ),
    }
    rows = []
    for name, make in makers.items():
        fitted = make().fit(X, y)
        dtype = "float32" if name == "XGBoost" else "float64"
        rng = np.random.default_rng(0)
        differ = total = 0
        for _ in steps(range(trials), f"near ties, {name}", unit="models"):
            model = copy.deepcopy(fitted)
            base = float(np.asarray(rng.choice([0.3, 0.7, -1.2, 1e-3, 2.5, 0.1, 5.0]), dtype))
            base = float(np.asarray(base * rng.uniform(0.5, 2), dtype))
            swept = int(rng.integers(4))

            def values(tree: int, column: int, n: int) -> np.ndarray:
                if column == swept:
                    return _ulps(base, np.arange(n) - n // 2 + rng.integers(-3, 4), dtype)
                if column == (swept + 1) % 4:
                    return np.full(n, _ulps(base, np.array([rng.integers(-1, 2)]), dtype)[0])
                return (base - rng.uniform(0, 6, n)).astype(dtype).astype(np.float64)

            set_leaves(model, values)
            got = run_onnx(h.to_onnx(model, encoding="exact"), X)["label"]
            differ += int(np.sum(got != model.predict(X)))
            total += X.shape[0]
        rows.append([name, f"{total:,}", differ])
    return rows


def _session(op_nodes, elem):
    from onnx import helper

    graph = helper.make_graph(
        op_nodes,
        "exp",
        [helper.make_tensor_value_info("x", elem, [None])],
        [helper.make_tensor_value_info("y", elem, [None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return _runtime.session(model, threads=1)


def exp_rounding(n: int) -> list[list]:
    from onnx import TensorProto, helper

    from hyp2onnx.emit._graph import GraphBuilder

    decimal.getcontext().prec = 60
    rng = np.random.default_rng(1)
    sets = {
        "drawn in [-6, 0]": -rng.uniform(0, 6, n),
        "drawn in [-700, 0]": -rng.uniform(0, 700, n // 2),
        "-k 2^-n (near ties)": -(np.arange(1, 200)[:, None] * 2.0 ** -np.arange(18, 62)).ravel(),
    }
    ort_exp = _session([helper.make_node("Exp", ["x"], ["y"])], TensorProto.DOUBLE)
    g = GraphBuilder(17)
    accurate = outputs.exp_correctly_rounded(g, "x")
    g.rename(accurate, "y")
    graph = helper.make_graph(
        g.nodes,
        "series",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [None])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [None])],
        g.initializers,
    )
    exp_session = _runtime.session(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), threads=1
    )
    rows = []
    for name, x in sets.items():
        exact = np.array([float(decimal.Decimal(float(v)).exp()) for v in x])
        ort = ort_exp.run(None, {"x": x})[0]
        libm = np.array([math.exp(float(v)) for v in x])
        ours = exp_session.run(None, {"x": x})[0]
        rows.append(
            [
                name,
                f"{x.size:,}",
                f"{np.mean(ort != exact):.2%}",
                f"{np.mean(libm != exact):.3%}",
                f"{np.sum(ours != exact)}",
                f"{np.sum(ours != libm)}",
            ]
        )
    return rows


def timing(repeats: int, rounds: int) -> list[list]:
    X, y = make_wrapped_normal_mixture(2000, 4, 8, random_state=0)
    models = {
        "XGBoost": h.HyperbolicXGBClassifier(n_estimators=rounds, max_depth=4, n_jobs=1),
        "LightGBM": h.HyperbolicLGBMClassifier(
            n_estimators=rounds, num_leaves=15, verbose=-1, n_jobs=1
        ),
    }
    library = outputs.library_softmax

    def plain(g, scores, dtype):
        return g.op(outputs.STAGE, "Softmax", [scores], axis=1)

    rows = []
    for name, model in steps(models.items(), "softmax timing", unit="models"):
        model.fit(X, y)
        for batch in (1, 1000):
            took = {}
            for label, softmax in (("Softmax", plain), ("library", library)):
                outputs.library_softmax = softmax
                try:
                    session = _runtime.session(h.to_onnx(model), threads=1)
                finally:
                    outputs.library_softmax = library
                feed = {session.get_inputs()[0].name: X[:batch].astype(np.float32)}
                session.run(None, feed)
                times = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    session.run(None, feed)
                    times.append(time.perf_counter() - start)
                took[label] = float(np.median(times))
            rows.append(
                [
                    name,
                    batch,
                    f"{took['Softmax'] * 1e6:.0f}",
                    f"{took['library'] * 1e6:.0f}",
                    f"{took['library'] / took['Softmax']:.2f}",
                ]
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--trials", type=int, default=600, help="models per backend (table 1)")
    args = parser.parse_args(argv)
    trials, draws, repeats, rounds = (
        (1, 200, 3, 2) if args.quick else (args.trials, 50_000, 201, 20)
    )
    warnings.filterwarnings("ignore")
    load = os.getloadavg()
    ties = near_ties(trials)
    rounding = exp_rounding(draws)
    times = timing(repeats, rounds)
    load_after = os.getloadavg()
    heads = (
        ["model", "near-tie rows", "labels differing"],
        [
            "shifts",
            "count",
            "onnxruntime Exp",
            "C library exp",
            "graph's exp (near ties)",
            "graph's exp != C library's",
        ],
        ["model", "rows per call", "Softmax (us)", "library softmax (us)", "ratio"],
    )
    for head, rows in zip(heads, (ties, rounding, times), strict=True):
        print(text_table(head, rows), end="\n\n")
    text = "\n\n".join(
        [
            "# Labels at near ties",
            (__doc__ or "").split("\n\n    python")[0],
            md_table(heads[0], ties),
            md_table(heads[1], rounding),
            md_table(heads[2], times),
            f"Load average (1, 5, 15 min) before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
            f"after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}. " + environment(),
        ]
    )
    write(output_dir(args) / "label_rules.md", text)


if __name__ == "__main__":
    main()
