"""CatBoost: hyp2onnx's graphs against CatBoost's own ONNX export, and startup times.

* Inference: a HyperbolicCatBoostClassifier (8 classes, d = 8) exported by
  hyp2onnx (exact and standard encodings, raw hyperboloid float32 points in)
  against CatBoost's own ``save_model(format="onnx")`` of the same corrected
  model (Klein coordinates in, so it skips the projection), in onnxruntime
  on one thread: rows/s on a large batch and the time of a one-row call,
  medians of interleaved repeats; and how many labels each graph gets
  different from the Python model.
* Startup: wall and CPU time of ``hyp2onnx --help``, ``hyp2onnx inspect``
  and ``python -c "import hyp2onnx"`` in fresh interpreters (medians; the
  CPU time depends less on other load on the machine).

    python benchmarks/bench_catboost.py [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture


def _session(model_bytes: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def inference(n_rows: int, iterations: int, repeats: int) -> tuple[list[list[str]], str]:
    X, y = make_wrapped_normal_mixture(4000, 8, 8, random_state=0)
    model = h.HyperbolicCatBoostClassifier(
        iterations=iterations, depth=6, verbose=0, random_seed=0, thread_count=1
    ).fit(X, y)
    X_test = make_wrapped_normal_mixture(n_rows, 8, 8, random_state=1)[0].astype(np.float32)
    k_test = model.to_klein(X_test).astype(np.float32)
    want = model.predict(X_test)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "catboost.onnx"
        model.estimator_.save_model(str(path), format="onnx")
        theirs = path.read_bytes()
    graphs = {
        "hyp2onnx exact (hyperboloid in)": (h.to_onnx(model).SerializeToString(), X_test, "label"),
        "hyp2onnx standard (hyperboloid in)": (
            h.to_onnx(model, encoding="standard").SerializeToString(),
            X_test,
            "label",
        ),
        "CatBoost's ONNX export (Klein in)": (theirs, k_test, None),
    }
    sessions = {name: _session(g) for name, (g, _, _) in graphs.items()}
    batch: dict[str, list[float]] = {name: [] for name in graphs}
    single: dict[str, list[float]] = {name: [] for name in graphs}
    # interleaved, so load on the machine hits every graph alike
    for _ in steps(range(repeats), "inference", unit="rounds"):
        for name, (_, data, _) in graphs.items():
            s = sessions[name]
            feed = {s.get_inputs()[0].name: data}
            start = time.perf_counter()
            s.run(None, feed)
            batch[name].append(time.perf_counter() - start)
            one = {s.get_inputs()[0].name: data[:1]}
            start = time.perf_counter()
            for _ in range(200):
                s.run(None, one)
            single[name].append((time.perf_counter() - start) / 200)
    rows = []
    for name, (_, data, label_name) in graphs.items():
        s = sessions[name]
        out = s.run(None, {s.get_inputs()[0].name: data})
        labels = np.asarray(out[0]).reshape(-1)
        if label_name is None:  # CatBoost's graph outputs class indices
            labels = model.classes_[labels.astype(np.int64)]
        rate = [n_rows / t for t in batch[name]]
        rows.append(
            [
                name,
                f"{statistics.median(rate):,.0f} ({min(rate):,.0f} to {max(rate):,.0f})",
                f"{1e6 * statistics.median(single[name]):.1f}",
                str(int(np.sum(labels != want))),
            ]
        )
    setup = (
        f"{iterations} depth-6 symmetric trees, 8 classes, d = 8, {n_rows:,} test rows, "
        f"one onnxruntime thread, median (range) of {repeats} interleaved repeats."
    )
    return rows, setup


def startup(repeats: int) -> list[list[str]]:
    with tempfile.TemporaryDirectory() as folder:
        X, y = make_wrapped_normal_mixture(200, 3, 3, random_state=0)
        onnx_file = Path(folder) / "tree.onnx"
        h.save_onnx(h.HyperbolicDecisionTreeClassifier(max_depth=3).fit(X, y), onnx_file)
        exe = str(Path(sys.executable).with_name("hyp2onnx"))
        commands = {
            "hyp2onnx --help": [exe, "--help"],
            "hyp2onnx inspect tree.onnx": [exe, "inspect", str(onnx_file)],
            "python -c 'import hyp2onnx'": [sys.executable, "-c", "import hyp2onnx"],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for _ in steps(range(repeats), "start-up", unit="rounds"):
            for name, argv in commands.items():
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(argv, check=True, capture_output=True)
                times[name].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(
                    after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                )
    return [
        [
            name,
            f"{statistics.median(t):.2f}",
            f"{min(t):.2f} to {max(t):.2f}",
            f"{statistics.median(cpu[name]):.2f}",
        ]
        for name, t in times.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    args = parser.parse_args()
    out = output_dir(args)
    rows, setup = inference(
        2_000 if args.quick else 100_000, 10 if args.quick else 200, 2 if args.quick else 7
    )
    headers = ["graph", "rows/s", "1-row call µs", "labels differing from Python"]
    print(text_table(headers, rows))
    start_rows = startup(2 if args.quick else 9)
    start_headers = ["command", "wall s, median", "wall s, range", "CPU s (user + system), median"]
    print(text_table(start_headers, start_rows))
    write(
        out / "catboost.md",
        "# CatBoost: hyp2onnx's graph and CatBoost's own ONNX export\n\n"
        f"{setup}\n\n{md_table(headers, rows)}\n\n"
        "## Startup of the command line and the package\n\n"
        f"{md_table(start_headers, start_rows)}\n\n{environment()}\n",
    )


if __name__ == "__main__":
    main()
