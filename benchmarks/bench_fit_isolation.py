"""Fit time of hyp2onnx's own isolation forests against scikit-learn's ``IsolationForest``.

Both fit the same precomputed unit-ball Klein coordinates (float64,
``x_s / x_0`` of an 8-class ``make_wrapped_normal_mixture``) with 100 trees
of ``max_samples="auto"`` rows, ``random_state=0`` and the same threads:
hyp2onnx's default design (centred splits, Klein law) and ``splits="axis",
threshold_law="distance"`` (which hyp2onnx grows too), against scikit-learn.
``--baseline`` names another checkout of hyp2onnx (say, the code before a
change) timed as a third side, so before and after are measured in one run.

Each checkout is timed in its own child process (``PYTHONPATH`` set to
it), its sides after a warm-up fit on 300 rows each; the checkouts take
turns, repeat by repeat, and each side's best is kept. A cProfile of each design's
fit (10,000 rows, d = 8, one thread) splits its time by function (not in
``--quick``, which times 800 rows, d = 2, once).

    python benchmarks/bench_fit_isolation.py [--quick] [--sizes 10000 100000]
        [--dims 2 8 16] [--threads 1] [--repeats 3] [--baseline DIR] [--name NAME]
        [--skip-profile]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, write

ROOT = Path(__file__).resolve().parent.parent
DESIGNS = {
    "centred, klein (default)": {},
    "axis, distance": {"splits": "axis", "threshold_law": "distance"},
}

# Fits timed in a child: argv = n, d, threads, trees, {label: params or None for scikit-learn}.
_CHILD = r"""
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
from sklearn.ensemble import IsolationForest
n, d, threads, trees = map(int, sys.argv[1:5])
kinds = json.loads(sys.argv[5])
X, _ = make_wrapped_normal_mixture(n, d, 8, random_state=0)
k = X[:, 1:] / X[:, :1]
def make(params):
    if params is None:
        return IsolationForest(n_estimators=trees, random_state=0, n_jobs=threads)
    return h.HyperbolicIsolationForest(
        n_estimators=trees, random_state=0, n_jobs=threads, input_geometry="klein", **params
    )
seconds = {}
with threadpool_limits(threads):
    for params in kinds.values():
        make(params).fit(k[:300])
    for label, params in kinds.items():
        start = time.perf_counter()
        make(params).fit(k)
        seconds[label] = time.perf_counter() - start
print(json.dumps(seconds))
"""

_PROFILE = r"""
import cProfile, json, pstats, sys
import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
params, n, d = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
X, _ = make_wrapped_normal_mixture(n, d, 8, random_state=0)
k = X[:, 1:] / X[:, :1]
make = lambda: h.HyperbolicIsolationForest(n_estimators=100, random_state=0, input_geometry="klein", **params)
make().fit(k[:300])
p = cProfile.Profile()
p.enable()
make().fit(k)
p.disable()
stats = pstats.Stats(p).stats
total = max(entry[3] for entry in stats.values())
rows = sorted(
    ((f"{name} ({Path(path).name})" if "hyp2onnx" in path else name, tt, ct)
     for (path, _, name), (_, _, tt, ct, _) in stats.items()),
    key=lambda r: -r[1],
)[:8]
print(json.dumps({"total": total, "rows": rows}))
""".replace("import cProfile,", "from pathlib import Path\nimport cProfile,")


def run_child(code: str, tree: Path, *args: str) -> str:
    """Run ``code`` in a fresh interpreter importing hyp2onnx from ``tree``; its stdout."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(  # run from the checkout: "-c" puts the working folder first
        [sys.executable, "-c", code, *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return done.stdout.strip().splitlines()[-1]


def sides(baseline: Path | None) -> list[tuple[Path, dict[str, dict | None]]]:
    """Each checkout timed and its sides (label: parameters, None for scikit-learn)."""
    here: dict[str, dict | None] = {"scikit-learn": None, **DESIGNS}
    if baseline is None:
        return [(ROOT, here)]
    return [(ROOT, here), (baseline, {f"{k}, baseline": v for k, v in DESIGNS.items()})]


def measure(args: argparse.Namespace) -> list[dict]:
    """Best-of-``repeats`` fit seconds of every side; the checkouts take turns each repeat,
    and so do the sides within each."""
    results = []
    configs = [(n, d, t) for n in args.sizes for d in args.dims for t in args.threads]
    for n, d, t in steps(configs, "fits", unit="configurations"):
        best: dict[str, float] = {}
        for _ in range(args.repeats):
            for tree, kinds in sides(args.baseline):
                argv = [str(n), str(d), str(t), str(args.trees), json.dumps(kinds)]
                for label, seconds in json.loads(run_child(_CHILD, tree, *argv)).items():
                    best[label] = min(best.get(label, float("inf")), seconds)
        results.append({"n": n, "d": d, "threads": t, "seconds": best})
        print(n, d, t, best, flush=True)
    return results


def profiles(args: argparse.Namespace) -> list[list[str]]:
    """cProfile's split of each design's fit, here and in the baseline."""
    n, d = (800, 2) if args.quick else (10_000, 8)
    rows = []
    trees = [("", ROOT)] + ([(", baseline", args.baseline)] if args.baseline else [])
    for name, params in DESIGNS.items():
        for suffix, tree in trees:
            got = json.loads(run_child(_PROFILE, tree, json.dumps(params), str(n), str(d)))
            rows.append([f"{name}{suffix}", "whole fit", f"{got['total']:.3f}", "", "100%"])
            for function, tottime, cumtime in got["rows"]:
                share = f"{100 * tottime / got['total']:.0f}%"
                rows.append(["", function, f"{tottime:.3f}", f"{cumtime:.3f}", share])
    return rows


def report(results: list[dict], split: list[list[str]], args: argparse.Namespace) -> str:
    load = os.getloadavg()
    labels = [label for _, kinds in sides(args.baseline) for label in kinds]
    head = ["rows", "d", "threads", *[f"{x} s" for x in labels]]
    head += [f"{x} / scikit-learn" for x in labels[1:]]
    table = []
    for r in results:
        s = r["seconds"]
        plain = s["scikit-learn"]
        table.append(
            [f"{r['n']:,}", r["d"], r["threads"], *[f"{s[x]:.3f}" for x in labels]]
            + [f"{s[x] / plain:.2f}x" for x in labels[1:]]
        )
    return "\n".join(
        [
            "# Isolation forest fit time against scikit-learn",
            "",
            f"Generated by `benchmarks/bench_fit_isolation.py{' --quick' if args.quick else ''}`"
            + (
                " with `--baseline` (the code before the level-wise growth)"
                if args.baseline
                else ""
            )
            + f". {environment()}",
            f"Load average at the end: {load[0]:.1f} (1 min), {load[1]:.1f} (5 min), on a shared "
            f"machine: each side's best of {args.repeats} runs, the sides taking turns; "
            "ratios are what to read.",
            "",
            f'{args.trees} trees of `max_samples="auto"` rows on Klein coordinates of an 8-class '
            "wrapped-normal mixture; each checkout in its own process, after a warm-up.",
            "",
            md_table(head, table),
            "",
            *_profile_section(split),
        ]
    )


def _profile_section(split: list[list[str]]) -> list[str]:
    if not split:
        return []
    return [
        "## Where the fit's time goes",
        "",
        "cProfile, 100 trees, one thread: the functions with the most time of their own "
        "(seconds; cProfile's per-call cost inflates Python-heavy code).",
        "",
        md_table(["fit", "function", "own s", "cumulative s", "share"], split),
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 8, 16])
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--baseline", type=Path, default=None, help="another hyp2onnx checkout")
    parser.add_argument("--name", default="fit_isolation.md", help="results file name")
    parser.add_argument("--skip-profile", action="store_true", help="time the fits only")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.dims, args.threads, args.repeats, args.trees = [800], [2], [1], 1, 10
    out = output_dir(args)
    split = [] if args.quick or args.skip_profile else profiles(args)
    text = report(measure(args), split, args)
    print(text)
    write(out / args.name, text)


if __name__ == "__main__":
    main()
