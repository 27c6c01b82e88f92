"""Peak memory of ``hyp2onnx predict``, per encoding and forest size.

``predict`` reads and scores its data in chunks and sizes each chunk from
the graph (``hyp2onnx.cli.predict.chunk_rows_for``) so that scoring takes
at most ``SCORING_BUDGET`` bytes beyond what the libraries take on import.
This measures that promise: each run is a fresh process scoring a
200k-row file with the default ``--chunk-rows``, and reports its peak
resident memory (``ru_maxrss``) minus that of the same command on a
one-row file with the smallest graph (the libraries alone). It also runs
the widest graph with the old fixed 65,536-row chunks, which is what the
standard encoding used to take.

    python benchmarks/bench_predict_memory.py [--quick]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import hyp2onnx as h
from hyp2onnx.cli.predict import SCORING_BUDGET
from hyp2onnx.datasets import make_wrapped_normal_mixture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

#: Runs ``main(argv)`` and prints the process's peak resident memory in bytes.
MEASURE = (
    "import resource, sys\n"
    "from hyp2onnx.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print('PEAK', code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)\n"
)


def peak(args: list[str]) -> int:
    """Peak resident bytes of one ``hyp2onnx`` command in a fresh process."""
    done = subprocess.run([sys.executable, "-c", MEASURE, *args], capture_output=True, text=True)
    line = next((x for x in done.stdout.splitlines() if x.startswith("PEAK")), None)
    if line is None or line.split()[1] != "0":
        raise RuntimeError(f"predict failed: {done.stderr[-800:]}")
    return int(line.split()[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    args = parser.parse_args()
    out = output_dir(args)
    n_rows = 3000 if args.quick else 200_000
    sizes = [(3, 2), (10, 8)] if args.quick else [(10, 2), (100, 2), (100, 8), (300, 8)]
    depth = 4 if args.quick else 8

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        X, _ = make_wrapped_normal_mixture(n_rows, 4, 8, random_state=1)
        np.save(work / "data.npy", X)
        np.save(work / "one.npy", X[:1])
        train, y8 = make_wrapped_normal_mixture(2000, 4, 8, random_state=0)
        graphs = []
        for n_trees, n_classes in sizes:
            model = h.HyperbolicRandomForestClassifier(
                n_estimators=n_trees, max_depth=depth, random_state=0, n_jobs=2
            ).fit(train, y8 % n_classes)
            for encoding in ("exact", "compat", "standard"):
                path = work / f"rf{n_trees}x{n_classes}_{encoding}.onnx"
                h.save_onnx(model, path, encoding=encoding)
                graphs.append((n_trees, n_classes, encoding, path))

        base = peak(
            ["predict", str(graphs[0][3]), str(work / "one.npy"), "-o", str(work / "base.csv")]
        )
        rows = []
        for n_trees, n_classes, encoding, path in steps(graphs, "peak memory", unit="graphs"):
            used = (
                peak(
                    [
                        "predict",
                        str(path),
                        str(work / "data.npy"),
                        "-o",
                        str(work / "p.csv"),
                        "--force",
                    ]
                )
                - base
            )
            rows.append(
                [
                    f"{n_trees} x {n_classes}",
                    encoding,
                    "default",
                    f"{used / 2**20:.0f}",
                    "yes" if used <= SCORING_BUDGET else "NO",
                ]
            )
        widest = [g for g in graphs if g[2] == "standard"][-1]
        used = (
            peak(
                [
                    "predict",
                    str(widest[3]),
                    str(work / "data.npy"),
                    "-o",
                    str(work / "p.csv"),
                    "--force",
                    "--chunk-rows",
                    "65536",
                ]
            )
            - base
        )
        # --chunk-rows is an upper bound: the graph's own chunk size still applies.
        rows.append(
            [
                f"{widest[0]} x {widest[1]}",
                "standard",
                "65536 asked",
                f"{used / 2**20:.0f}",
                "yes" if used <= SCORING_BUDGET else "NO",
            ]
        )

    headers = [
        "trees x classes",
        "encoding",
        "--chunk-rows",
        "peak beyond libraries (MiB)",
        f"within {SCORING_BUDGET / 2**20:.0f} MiB",
    ]
    print(text_table(headers, rows))
    print(f"libraries alone: {base / 2**20:.0f} MiB")
    text = "\n\n".join(
        [
            "# Peak memory of `hyp2onnx predict`",
            f"{n_rows:,} rows of 4-column hyperboloid points, random forests of depth {depth}; "
            "each figure is one fresh process's peak resident memory (`ru_maxrss`) minus the "
            f"{base / 2**20:.0f} MiB the same command takes on a one-row file (the libraries "
            "alone). Chunks are sized from the graph "
            "(`hyp2onnx.cli.predict.chunk_rows_for`) to keep scoring under "
            f"{SCORING_BUDGET / 2**20:.0f} MiB, whatever `--chunk-rows` asks.",
            md_table(headers, rows, "llrrl"),
            environment() + " One run; `python benchmarks/bench_predict_memory.py`.",
        ]
    )
    write(out / "predict_memory.md", text)


if __name__ == "__main__":
    main()
