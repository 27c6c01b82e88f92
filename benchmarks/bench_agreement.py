"""Agreement of hyp2onnx's hyperbolic tree with the original HyperDT (the paper's agreement figure).

For each seed and dimension d: 1,000 points of an 8-class mixture of
wrapped normals (``hyp2onnx.datasets``), an 80/20 stratified split, and a
depth-3 classifier from each of PyPI's ``hyperdt==0.0.3`` and hyp2onnx
(``HyperbolicDecisionTreeClassifier``, scikit-learn inside, ``random_state=0``).
Measured:

* the share of identical predictions on the training and the test rows;
* node by node, walking both trees from the root while they agree: a split
  *matches exactly* if it uses the same feature and sends the same training
  rows left (the thresholds fall between the same two training values); a
  split that differs is *equal in information gain* if both splits' Gini
  gains on the node's rows are within 1e-4 (the paper's tolerance: a tie the
  two learners break differently), otherwise the learner with the higher
  gain is named; a node that one tree splits and the other does not is
  counted apart. Below a differing split the rows differ and nothing more
  is compared;
* for exact matches, how far HyperDT's threshold (``cot(theta)`` in Klein
  coordinates) lies from hyp2onnx's and from the Einstein midpoint of the two
  nearest training values (float64).

HyperDT is run as published, except ``min_samples_split=1``, which is
scikit-learn's rule (HyperDT stops at ``len(y) <= min_samples_split``).

    python benchmarks/bench_agreement.py [--quick] [--seeds 100] [--dims 2 4 8] [--jobs 2]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

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
    write,
)

from hyp2onnx import HyperbolicDecisionTreeClassifier
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.geometry import einstein_midpoint

GAIN_TOL = 1e-4
CATEGORIES = ("exact", "equal gain", "hyp2onnx higher gain", "HyperDT higher gain", "leaf vs split")


def gini_gain(y: np.ndarray, left: np.ndarray, n_classes: int) -> float:
    """Decrease of Gini impurity when rows with labels ``y`` are split by mask ``left``."""

    def gini(labels: np.ndarray) -> float:
        if labels.size == 0:
            return 0.0
        p = np.bincount(labels, minlength=n_classes) / labels.size
        return 1.0 - float(np.sum(p * p))

    n = y.size
    nl = int(left.sum())
    return gini(y) - (nl / n) * gini(y[left]) - ((n - nl) / n) * gini(y[~left])


def compare_splits(
    hdt, ours, X: np.ndarray, y: np.ndarray
) -> tuple[Counter, list[tuple[float, float, bool]]]:
    """Walk both trees from the root on the training rows; categories and threshold gaps.

    Besides the categories, the counter holds two diagnoses: ``"on a point"``,
    exact matches whose HyperDT threshold equals one of the two nearest
    training values (to 1e-12), and ``"under 1e-7"``, splits where HyperDT
    wins by separating two values closer than 1e-7 in float32, which
    scikit-learn's splitter never separates (its ``FEATURE_THRESHOLD``).
    """
    tree = ours.estimator_.tree_
    kf32 = ours.to_klein(X).astype(np.float32)  # what scikit-learn compares
    k = X[:, 1:] / X[:, :1]
    n_classes = int(y.max()) + 1
    counts: Counter = Counter()
    gaps: list[tuple[float, float, bool]] = []

    def walk(hnode, snode: int, rows: np.ndarray) -> None:
        h_leaf = hnode.value is not None
        s_leaf = tree.children_left[snode] == -1
        if h_leaf and s_leaf:
            return
        if h_leaf != s_leaf:
            counts["leaf vs split"] += 1
            return
        fh, theta = hnode.feature, hnode.theta
        h_left = np.sin(theta) * X[rows, fh] - np.cos(theta) * X[rows, 0] < 0  # HyperDT's rule
        fs, t = int(tree.feature[snode]), float(tree.threshold[snode])
        s_left = kf32[rows, fs] <= t
        h_values = k[rows, fh - 1]
        a, b = h_values[h_left].max(), h_values[~h_left].min()  # HyperDT's two nearest values
        cot = math.cos(theta) / math.sin(theta)
        if fh - 1 == fs and np.array_equal(h_left, s_left):
            counts["exact"] += 1
            on_point = min(abs(cot - a), abs(cot - b)) < 1e-12
            counts["on a point"] += on_point
            gaps.append((abs(cot - t), abs(cot - float(einstein_midpoint(a, b))), on_point))
            walk(hnode.left, int(tree.children_left[snode]), rows[s_left])
            walk(hnode.right, int(tree.children_right[snode]), rows[~s_left])
            return
        g_h = gini_gain(y[rows], h_left, n_classes)
        g_s = gini_gain(y[rows], s_left, n_classes)
        if abs(g_h - g_s) <= GAIN_TOL:
            counts["equal gain"] += 1
        elif g_s > g_h:
            counts["hyp2onnx higher gain"] += 1
        else:
            counts["HyperDT higher gain"] += 1
            counts["under 1e-7"] += float(np.float32(b)) - float(np.float32(a)) < 1e-7

    walk(hdt.tree, 0, np.arange(X.shape[0]))
    return counts, gaps


def run_one(task: tuple[int, int]) -> dict:
    """Fit both trees for one (d, seed); agreement figures."""
    from hyperdt.tree import HyperbolicDecisionTreeClassifier as HyperDT

    d, seed = task
    X, y = make_wrapped_normal_mixture(1000, d, 8, random_state=seed)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, stratify=y, random_state=seed)
    hdt = HyperDT(max_depth=3, min_samples_split=1, timelike_dim=0).fit(X_tr, y_tr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = HyperbolicDecisionTreeClassifier(max_depth=3, random_state=0).fit(X_tr, y_tr)
    counts, gaps = compare_splits(hdt, ours, X_tr, y_tr)
    return {
        "d": d,
        "seed": seed,
        "train": float(np.mean(hdt.predict(X_tr) == ours.predict(X_tr))),
        "test": float(np.mean(hdt.predict(X_te) == ours.predict(X_te))),
        "counts": counts,
        "gaps": gaps,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--seeds", type=int, default=100, help="seeds 0..N-1 per dimension")
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    args = parser.parse_args(argv)
    if not have_hyperdt():
        return 2
    if args.quick:
        args.seeds, args.dims = 4, [2]
    out = output_dir(args)
    tasks = [(d, s) for d in args.dims for s in range(args.seeds)]

    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(
            steps(pool.map(run_one, tasks, chunksize=1), "agreement", len(tasks), "tasks")
        )
    elapsed = time.perf_counter() - started

    headers = (
        "d",
        "seeds",
        "train agreement",
        "test agreement",
        "seeds identical (train/test)",
        *CATEGORIES,
        "max Δ(cot θ, t)",
        "max Δ(cot θ, Einstein)",
    )
    rows = []
    per_d = {}
    for d in args.dims:
        rs = [r for r in results if r["d"] == d]
        counts: Counter = sum((r["counts"] for r in rs), Counter())
        total = sum(counts[c] for c in CATEGORIES)
        gaps = [g for r in rs for g in r["gaps"]]
        train = np.array([r["train"] for r in rs])
        test = np.array([r["test"] for r in rs])
        per_d[d] = (train, test, counts)
        rows.append(
            (
                d,
                len(rs),
                f"{100 * train.mean():.2f}%",
                f"{100 * test.mean():.2f}%",
                f"{100 * np.mean(train == 1):.0f}% / {100 * np.mean(test == 1):.0f}%",
                *(f"{counts[c]} ({100 * counts[c] / max(total, 1):.1f}%)" for c in CATEGORIES),
                f"{max((g[0] for g in gaps), default=0):.1e}",
                f"{max((g[1] for g in gaps), default=0):.1e}",
            )
        )
    all_counts: Counter = sum((v[2] for v in per_d.values()), Counter())
    all_train = np.concatenate([v[0] for v in per_d.values()])
    all_test = np.concatenate([v[1] for v in per_d.values()])
    total = sum(all_counts[c] for c in CATEGORIES)
    print(text_table(headers[:5], [r[:5] for r in rows]))
    print()
    split_headers = ("d", *headers[5:])
    split_rows = [(r[0], *r[5:]) for r in rows]
    print(text_table(split_headers, split_rows))
    summary = (
        f"Over {len(results)} trees: predictions identical on {100 * all_train.mean():.2f}% of "
        f"training rows and {100 * all_test.mean():.2f}% of test rows; of {total} compared "
        f"splits {all_counts['exact']} ({100 * all_counts['exact'] / max(total, 1):.1f}%) match "
        f"exactly, {all_counts['equal gain']} are ties in information gain broken differently, "
        f"{all_counts['hyp2onnx higher gain']} have a higher gain in hyp2onnx and "
        f"{all_counts['HyperDT higher gain']} in HyperDT, {all_counts['leaf vs split']} are a "
        "leaf in one tree only."
    )
    diagnosis = (
        f"HyperDT's threshold lies on a training value (not between two) in "
        f"{all_counts['on a point']} of the exact matches: its angular midpoint returns one of "
        "the two angles when they are `np.isclose` (relative 1e-5), so the rows match only "
        "through rounding and test points near that value can go the other way"
        + (
            "; the largest threshold distances above come from these: elsewhere HyperDT's "
            "threshold is the Einstein midpoint to "
            f"{max((g[1] for r in results for g in r['gaps'] if not g[2]), default=0):.0e}. "
            if all_counts["on a point"]
            else ". "
        )
        + f"{all_counts['under 1e-7']} of the {all_counts['HyperDT higher gain']} splits where "
        "HyperDT found the higher gain separate two training values less than 1e-7 apart in "
        "float32, which scikit-learn's splitter never separates (`FEATURE_THRESHOLD`)."
    )
    print("\n" + summary + "\n\n" + diagnosis)

    md = [
        "# Agreement with the original HyperDT",
        "",
        f"Depth-3 classifiers, PyPI `hyperdt==0.0.3` (with `min_samples_split=1`, "
        "scikit-learn's rule) and hyp2onnx's `HyperbolicDecisionTreeClassifier`, on 1,000-point "
        "8-class wrapped-normal mixtures with an 80/20 stratified split, seeds "
        f"0..{args.seeds - 1} for each d. Splits are compared node by node from the root while "
        'both trees agree (see the script\'s docstring); "equal gain" means a different split '
        f"whose Gini gain is within {GAIN_TOL:g} of the other's: a tie broken differently.",
        "",
        "Predictions:",
        "",
        md_table(headers[:5], [r[:5] for r in rows]),
        "",
        "Splits (counts and shares of the compared splits), and the largest distance between "
        "thresholds of exactly matching splits in Klein coordinates: HyperDT's `cot(theta)` "
        "against hyp2onnx's `t`, and against the Einstein midpoint of the two nearest training "
        "values in float64. hyp2onnx places `t` at the Einstein midpoint of the float32 values "
        "scikit-learn compares, hence the float32-sized gap to HyperDT.",
        "",
        md_table(split_headers, split_rows),
        "",
        summary,
        "",
        diagnosis,
        "",
        "The paper (10,000 seeds, modified HyperDT whose tie-breaking was aligned with "
        "scikit-learn's) reports 9,934 exact matches, 43 ties in information gain and 22 splits "
        "where Fast-HyperDT found the higher gain.",
        "",
        environment() + f" Whole run: {elapsed / 60:.1f} min with {args.jobs} worker(s).",
    ]
    plt = pyplot()
    if plt is not None:
        fig, axes = plt.subplots(1, 3, figsize=(14.5, 4))
        dims = list(per_d)
        for ax, idx, title in ((axes[0], 0, "Training rows"), (axes[1], 1, "Test rows")):
            data = [100 * per_d[d][idx] for d in dims]
            ax.boxplot(data, showmeans=True)
            ax.set_xticks(range(1, len(dims) + 1), [f"d={d}" for d in dims])
            for i, values in enumerate(data, start=1):
                ax.annotate(
                    f"{np.mean(values == 100):.0%} identical",
                    (i, 100),
                    ha="center",
                    textcoords="offset points",
                    xytext=(0, 6),
                    fontsize=8,
                )
            ax.set(title=f"Same prediction: {title.lower()}", ylabel="% of rows")
            ax.set_ylim(top=101.5)
        bottom = np.zeros(len(dims))
        colors = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:gray")
        for c, color in zip(CATEGORIES, colors):
            share = np.array(
                [
                    100 * per_d[d][2][c] / max(sum(per_d[d][2][k] for k in CATEGORIES), 1)
                    for d in dims
                ]
            )
            axes[2].bar([f"d={d}" for d in dims], share, bottom=bottom, color=color, label=c)
            bottom += share
        exact_share = [
            100 * per_d[d][2]["exact"] / max(sum(per_d[d][2][k] for k in CATEGORIES), 1)
            for d in dims
        ]
        floor = max(0.0, np.floor(min(exact_share)) - 2.0)  # zoom in on the few non-exact splits
        axes[2].set_ylim(floor, 100)
        axes[2].set(
            title="Node-by-node splits",
            ylabel="% of compared splits" + (f" (axis from {floor:.0f}%)" if floor else ""),
        )
        axes[2].legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
        fig.tight_layout()
        png = out / "agreement.png"
        fig.savefig(png, dpi=110)
        print(f"wrote {png}")
        md[4:4] = ["![Agreement with HyperDT](agreement.png)", ""]
    write(out / "agreement.md", "\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
