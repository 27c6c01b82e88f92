"""Training time of hyp2onnx's hyperbolic tree against the original HyperDT (paper's speed figure).

Both fit a depth-3 classifier on the same hyperboloid points: 8-class
mixtures of wrapped normals in d = 2 (``hyp2onnx.datasets``), n = 2, 4, ...,
32,768 rows. HyperDT is PyPI's ``hyperdt==0.0.3`` (its
``HyperbolicDecisionTreeClassifier``, which scores every candidate angle by
a pass over the node's rows: O(n^2) per level); hyp2onnx's
``HyperbolicDecisionTreeClassifier`` validates the points, projects them to
Klein coordinates, fits scikit-learn's tree and moves every threshold to its
Einstein midpoint. Plain scikit-learn on the Klein coordinates is shown as
the floor. Each trial draws a new data set (seed = trial); hyp2onnx's and
scikit-learn's times are medians of ``--repeats`` fits per trial, HyperDT's
one fit per trial; the table gives medians over trials and the ratio of
the medians. HyperDT takes minutes at the largest sizes, so its trials at a
size stop once they have used ``--budget`` seconds (at least one runs):
the table says how many ran. The last column is the share of training rows
on which both trees predict the same class.

Needs ``pip install hyperdt==0.0.3`` (the ``bench`` extra); the PNG needs
matplotlib.

    python benchmarks/bench_vs_hyperdt.py [--quick] [--max-n 32768] [--trials 3] [--budget 150]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.tree import DecisionTreeClassifier

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import (
    add_output_args,
    environment,
    have_hyperdt,
    md_table,
    output_dir,
    pyplot,
    steps,
    text_table,
    timed,
    to_spread,
    write,
)

from hyp2onnx import HyperbolicDecisionTreeClassifier
from hyp2onnx.datasets import make_wrapped_normal_mixture

PAPER_SPEEDUP_32K = 3752
PAPER_HYPERDT_32K_S = 138.0
N_CLASSES = 8
DIM = 2


def hyperdt_tree():
    """The original HyperDT classifier (PyPI hyperdt 0.0.3), depth 3.

    ``min_samples_split=1`` gives HyperDT scikit-learn's rule (a node with two
    rows may still split; HyperDT stops at ``len(y) <= min_samples_split``).
    """
    from hyperdt.tree import HyperbolicDecisionTreeClassifier as HyperDT

    return HyperDT(max_depth=3, min_samples_split=1, timelike_dim=0)


def measure(n: int, trials: int, repeats: int, budget: float) -> dict:
    """Times (s) of each system over the trials at size ``n``, and the training agreement."""
    t_hdt: list[float] = []
    t_ours: list[float] = []
    t_skl: list[float] = []
    all_ours: list[float] = []
    agree: list[float] = []
    spent = 0.0
    for trial in range(trials):
        X, y = make_wrapped_normal_mixture(n, DIM, N_CLASSES, random_state=trial)
        Xk = X[:, 1:] / X[:, :1]
        ours = HyperbolicDecisionTreeClassifier(max_depth=3, random_state=0)
        plain = DecisionTreeClassifier(max_depth=3, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours.fit(X, y)  # warm-up
            fits = [timed(lambda: ours.fit(X, y)) for _ in range(repeats)]
            all_ours += fits
            t_ours.append(statistics.median(fits))
            t_skl.append(statistics.median(timed(lambda: plain.fit(Xk, y)) for _ in range(repeats)))
        if trial == 0 or spent + statistics.median(t_hdt) <= budget:
            hdt = hyperdt_tree()
            t = timed(lambda: hdt.fit(X, y))
            t_hdt.append(t)
            spent += t
            agree.append(float(np.mean(hdt.predict(X) == ours.predict(X))))
    return {
        "hyperdt": t_hdt,
        "ours": t_ours,
        "sklearn": t_skl,
        "agree": agree,
        "all_ours": all_ours,
    }


def speedup_range(r: dict) -> tuple[float, float, float]:
    """Ratio of the medians, and its extremes over every HyperDT fit and every hyp2onnx fit."""
    median = statistics.median(r["hyperdt"]) / statistics.median(r["ours"])
    return median, min(r["hyperdt"]) / max(r["all_ours"]), max(r["hyperdt"]) / min(r["all_ours"])


def fmt_spread(ratio: float, low: float, high: float) -> str:
    """The ratio at the precision its spread supports, with the spread."""
    rounded = to_spread(ratio, low, high)
    shown = f"{rounded:,.0f}" if rounded >= 1000 else f"{rounded:g}"
    return f"{shown}x ({fmt_ratio(low)} to {fmt_ratio(high)})"


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.0f} µs"


def fmt_ratio(ratio: float) -> str:
    return f"{ratio:.2f}x" if ratio < 10 else f"{ratio:,.0f}x"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument(
        "--max-n", type=int, default=32_768, help="largest training size (power of 2)"
    )
    parser.add_argument("--trials", type=int, default=3, help="data sets per size")
    parser.add_argument(
        "--repeats", type=int, default=5, help="fits per trial for the fast systems"
    )
    parser.add_argument(
        "--budget", type=float, default=150.0, help="seconds of HyperDT fitting per size"
    )
    args = parser.parse_args(argv)
    if not have_hyperdt():
        return 2
    if args.quick:
        args.max_n, args.trials, args.repeats, args.budget = 512, 2, 3, 5.0
    out = output_dir(args)
    sizes = [2**k for k in range(1, int(np.log2(args.max_n)) + 1)]

    started = time.perf_counter()
    rows, results = [], []
    print(f"depth-3 trees, {N_CLASSES}-class wrapped-normal mixtures, d = {DIM}")
    for n in steps(sizes, "fit times", unit="sizes"):
        r = measure(n, args.trials, args.repeats, args.budget)
        hdt, ours, skl = (statistics.median(r[k]) for k in ("hyperdt", "ours", "sklearn"))
        results.append((n, r))
        row = (
            f"{n:,}",
            fmt_time(hdt),
            fmt_time(ours),
            fmt_time(skl),
            fmt_spread(*speedup_range(r)),
            f"{fmt_time(min(r['all_ours']))} to {fmt_time(max(r['all_ours']))}",
            len(r["hyperdt"]),
            f"{100 * min(r['agree']):.1f}%",
        )
        rows.append(row)
        print(
            f"  n={n:>6,}: HyperDT {row[1]:>9} ({row[6]} trial(s)), hyp2onnx {row[2]:>9}, "
            f"speed-up {row[4]}",
            flush=True,
        )
    elapsed = time.perf_counter() - started

    headers = (
        "n",
        "HyperDT",
        "hyp2onnx",
        "scikit-learn (Klein)",
        "speed-up (range)",
        "hyp2onnx range",
        "HyperDT trials",
        "same predictions (min)",
    )
    print()
    print(text_table(headers, rows))
    last_n, last = results[-1]
    speedup, low, high = speedup_range(last)
    md = [
        "# Training time: hyp2onnx vs the original HyperDT",
        "",
        f"Depth-3 classifiers on {N_CLASSES}-class mixtures of wrapped normals in d = {DIM} "
        f"(`hyp2onnx.datasets`), hyperboloid input. HyperDT is PyPI `hyperdt==0.0.3`; "
        "hyp2onnx's time includes validation, projection and the Einstein-midpoint "
        "correction; scikit-learn is `DecisionTreeClassifier` on the Klein coordinates. "
        f"Medians over up to {args.trials} data sets per size (hyp2onnx and scikit-learn: "
        f"median of {args.repeats} fits per data set); HyperDT's trials per size stop after "
        f"{args.budget:.0f} s of fitting, at least one. The speed-up is the ratio of the "
        "medians rounded to the leading digit of its range, which runs from the fastest "
        "HyperDT fit over the slowest hyp2onnx fit to the slowest over the fastest (every fit "
        "of every trial; with one HyperDT fit, the range is hyp2onnx's spread alone). "
        '"same predictions" is the lowest share, over trials, of training rows both trees '
        "label alike.",
        "",
        md_table(headers, rows),
        "",
        f"**Speed-up at n = {last_n:,}: {fmt_spread(speedup, low, high)}** "
        f"(HyperDT {fmt_time(statistics.median(last['hyperdt']))} over "
        f"{len(last['hyperdt'])} fit(s), hyp2onnx {fmt_time(statistics.median(last['ours']))}, "
        f"{fmt_time(min(last['all_ours']))} to {fmt_time(max(last['all_ours']))} over "
        f"{len(last['all_ours'])} fits). The paper reports "
        f"{PAPER_SPEEDUP_32K:,}x at 32,768 ({PAPER_HYPERDT_32K_S:.0f} s for HyperDT, 0.037 s "
        "for Fast-HyperDT).",
        "",
        environment() + f" Whole run: {elapsed / 60:.1f} min.",
    ]
    plt = pyplot()
    if plt is not None:
        ns = [n for n, _ in results]
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for key, label, color in (
            ("hyperdt", "HyperDT 0.0.3", "tab:red"),
            ("ours", "hyp2onnx (Fast-HyperDT)", "tab:blue"),
            ("sklearn", "scikit-learn on Klein", "tab:gray"),
        ):
            med = [statistics.median(r[key]) for _, r in results]
            lo = [min(r[key]) for _, r in results]
            hi = [max(r[key]) for _, r in results]
            ax1.plot(ns, med, "o-", color=color, label=label, ms=4)
            ax1.fill_between(ns, lo, hi, color=color, alpha=0.2)
        ax1.set(
            xscale="log",
            yscale="log",
            xlabel="training rows n",
            ylabel="fit time (s)",
            title="Training time, depth-3 tree",
        )
        ax1.legend()
        ratios = [
            statistics.median(r["hyperdt"]) / statistics.median(r["ours"]) for _, r in results
        ]
        ax2.plot(ns, ratios, "o-", color="tab:purple", ms=4)
        ax2.axhline(1, color="k", lw=0.5)
        if last_n == 32_768:
            ax2.plot([32_768], [PAPER_SPEEDUP_32K], "k*", ms=10, label="paper: 3,752x")
            ax2.legend()
        ax2.set(
            xscale="log",
            yscale="log",
            xlabel="training rows n",
            ylabel="HyperDT / hyp2onnx",
            title="Speed-up",
        )
        ax2.annotate(
            fmt_spread(*speedup_range(last)).split(" (")[0],
            (ns[-1], ratios[-1]),
            textcoords="offset points",
            xytext=(-40, 8),
        )
        fig.tight_layout()
        png = out / "vs_hyperdt.png"
        fig.savefig(png, dpi=110)
        print(f"wrote {png}")
        md[4:4] = ["![Training time and speed-up](vs_hyperdt.png)", ""]
    write(out / "vs_hyperdt.md", "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
