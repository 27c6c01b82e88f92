"""Novelty in a real hierarchy: a hyperbolic isolation forest finds packages it never saw.

The hierarchy is the Python standard library's package tree, as in
``examples/hierarchy_poincare.py`` (whose helpers this script reuses): the
modules of its six largest top-level packages are embedded in the 5-D
Poincare ball with gensim's ``PoincareModel`` (200 epochs). Each package is
held out in turn: the forests are fitted on 70 % of the other packages'
modules and score the remaining 30 % together with every module of the
held-out package, which they should find abnormal. The script prints
ROC-AUC and average precision of ``HyperbolicIsolationForest`` (the default
design, and axis-parallel splits with the distance law) and of
scikit-learn's ``IsolationForest`` on the Poincare and Klein coordinates,
then exports the default forest of the first held-out package, verifies the
graph (labels identical, summed path lengths bit for bit) and scores that
package's modules with it.

Measured (seeds 0, 1 and 2, six held-out packages each: 18 cases; mean
ROC-AUC / average precision; "ours, axis": axis-parallel splits, distance law):

| embedding                             | ours, default | ours, axis    | sklearn, Poincare |
| ------------------------------------- | ------------- | ------------- | ----------------- |
| 5-D, 200 epochs (the default)         | 0.962 / 0.897 | 0.973 / 0.912 | 0.995 / 0.981     |
| 10-D, 200 epochs (--size 10)          | 0.916 / 0.798 | 0.976 / 0.909 | 0.985 / 0.940     |
| 2-D, 50 epochs (--size 2 --epochs 50) | 0.887 / 0.750 | 0.872 / 0.737 | 0.979 / 0.951     |
| 2-D, 200 epochs (--size 2)            | 0.621 / 0.503 | 0.824 / 0.672 | 0.985 / 0.955     |

The hyperbolic forests find the held-out package in 5 dimensions (the
default's worst case of the 18: ROC-AUC 0.854, ``distutils``, seed 2), but
**scikit-learn's forest on the raw Poincare coordinates scores higher in
every row** (on Klein coordinates: 0.993, 0.982, 0.977, 0.973). In 2-D after
200 epochs the default fails (0.621; ``email`` at seed 0: 0.35).

Why the dimension matters (seed 0): the modules lie 1.8 to 7.4 from the
origin in 5-D, nearly as far out as in 2-D (0.1 to 8.4), and in both the
held-out package's modules are farther from their nearest known module
than known modules are from theirs (hyperbolic distance, medians per
package: 3.1 to 6.9 against 1.4 to 2.5 in 2-D, 7.1 to 9.0 against 5.7 to
6.7 in 5-D), so "everything is far from everything" is not the whole story.
What differs is the direction: seen from the origin, a held-out module lies
0.6 to 35 degrees (``email``: 0.6) from the nearest known module in 2-D,
where known modules lie 0.4 degrees from theirs, but 41 to 66 degrees in
5-D against 9 to 12. The default design draws its thresholds uniformly in
the Klein coordinate of the node's centred frame, where rows far from the
centroid project at about the cosine of their angle: it isolates by
direction, and in 2-D six packages share one circle of directions. Shorter
training (50 epochs, radius at most 4.2) recovers part of it in 2-D (0.887).

Needs gensim (``pip install 'hyp2onnx[dev]'``). ``--quick`` (30 epochs, at
most 60 modules per package, the three largest held out) runs in seconds;
the tests run it.

    python examples/isolation_hierarchy.py [--quick] [--size 5] [--epochs 200]
        [--held-out email] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.ensemble import IsolationForest
from sklearn.metrics import average_precision_score, roc_auc_score

import hyp2onnx
from hyp2onnx.conventions import convention_of, gensim_points
from hyp2onnx.geometry import poincare_to_klein
from hyp2onnx.verification import run_onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hierarchy_poincare import ROOT_NODE, closure, stdlib_tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="short training, small hierarchy, 3 held out"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--classes", type=int, default=6, help="largest top-level packages to keep")
    parser.add_argument("--size", type=int, default=5, help="dimension of the Poincare ball")
    parser.add_argument("--epochs", type=int, default=None, help="default 200 (30 with --quick)")
    parser.add_argument(
        "--held-out", default=None, help="one package to hold out (default: each kept one in turn)"
    )
    args = parser.parse_args(argv)

    from gensim.models.poincare import PoincareModel

    parent = stdlib_tree()
    top = {node: node.split(".")[0] for node in parent}
    sizes = Counter(top[n] for n in parent if "." in n)
    kept = [name for name, _ in sizes.most_common(args.classes)]
    if args.held_out is not None and args.held_out not in kept:
        print(f"--held-out must be one of {sorted(kept)}")
        return 2
    limit = 60 if args.quick else None
    per: Counter = Counter()
    nodes = set()
    for node in sorted(parent, key=lambda n: (n.count("."), n)):
        if top[node] in kept and (limit is None or per[top[node]] < limit):
            nodes.add(node)
            per[top[node]] += 1
    parent = {n: p for n, p in parent.items() if n in nodes and (p in nodes or p == ROOT_NODE)}
    relations = closure(parent)
    epochs = args.epochs or (30 if args.quick else 200)
    embedding = PoincareModel(
        relations, size=args.size, negative=8, burn_in=10, seed=args.seed, workers=1
    )
    embedding.train(epochs=epochs, batch_size=32)
    conv = convention_of(embedding)
    keys, P = gensim_points(embedding)
    modules = [i for i, k in enumerate(keys) if k != ROOT_NODE and "." in k]
    X = P[modules]
    package = np.array([top[keys[i]] for i in modules])
    radius = 2 * np.arctanh(np.linalg.norm(X, axis=1))
    print(
        f"standard library of Python {sys.version.split()[0]}: {len(modules)} modules of "
        f"{sorted(kept)} embedded in the {args.size}-D Poincare ball ({epochs} epochs); "
        f"distance from the origin {radius.min():.1f} .. {radius.max():.1f}"
    )

    detectors = {
        "ours, default": lambda: hyp2onnx.HyperbolicIsolationForest(
            random_state=args.seed, **conv.kwargs()
        ),
        "ours, axis, distance law": lambda: hyp2onnx.HyperbolicIsolationForest(
            splits="axis", threshold_law="distance", random_state=args.seed, **conv.kwargs()
        ),
        "scikit-learn, Poincare": lambda: Euclidean(args.seed, lambda Z: Z),
        "scikit-learn, Klein": lambda: Euclidean(args.seed, poincare_to_klein),
    }
    # --quick holds out the three largest packages only (a smoke test's time).
    held_outs = [args.held_out] if args.held_out else kept[:3] if args.quick else kept
    auc: dict[str, list[float]] = {name: [] for name in detectors}
    ap: dict[str, list[float]] = {name: [] for name in detectors}
    print("novelty detection, ROC-AUC / average precision, one package held out at a time:")
    print(f"  {'held out (modules)':22s}" + "".join(f"{name:>26s}" for name in detectors))
    first = None
    for held_out in held_outs:
        novel = package == held_out
        rng = np.random.default_rng(args.seed)
        known = np.flatnonzero(~novel)
        train = rng.choice(known, int(0.7 * known.size), replace=False)
        test = np.r_[np.setdiff1d(known, train), np.flatnonzero(novel)]
        y = novel[test]
        cells = []
        for name, make in detectors.items():
            model = make().fit(X[train])
            anomaly = -model.score_samples(X[test])
            auc[name].append(roc_auc_score(y, anomaly))
            ap[name].append(average_precision_score(y, anomaly))
            cells.append(f"{auc[name][-1]:.3f} / {ap[name][-1]:.3f}")
            if first is None and name == "ours, default":
                first = (held_out, model, novel, test, y)
        print(f"  {f'{held_out} ({novel.sum()})':22s}" + "".join(f"{c:>26s}" for c in cells))
    if len(held_outs) > 1:
        print(
            f"  {'mean':22s}"
            + "".join(
                f"{f'{np.mean(auc[name]):.3f} / {np.mean(ap[name]):.3f}':>26s}"
                for name in detectors
            )
        )

    # Export the default forest of the first held-out package, verify it, score with it.
    assert first is not None
    held_out, forest, novel, test, y = first
    onnx_model = hyp2onnx.to_onnx(forest)
    report = hyp2onnx.verify(forest, onnx_model, X)
    print(f"ONNX graph of the default forest ({held_out} held out) vs the Python forest: {report}")
    got = run_onnx(onnx_model, X[novel])
    print(
        f"the graph flags {np.mean(got['label'] == -1):.1%} of {held_out}'s modules as outliers "
        f"(contamination='auto'), against {np.mean(forest.predict(X[test][~y]) == -1):.1%} "
        "of the other packages' held-out modules"
    )
    return 0 if report.ok else 1


class Euclidean:
    """scikit-learn's ``IsolationForest`` on Euclidean coordinates of the Poincare points."""

    def __init__(self, seed: int, coords) -> None:
        self.forest, self.coords = IsolationForest(random_state=seed), coords

    def fit(self, X: np.ndarray) -> Euclidean:
        self.forest.fit(self.coords(X))
        return self

    def score_samples(self, X: np.ndarray) -> np.ndarray:
        return self.forest.score_samples(self.coords(X))


if __name__ == "__main__":
    raise SystemExit(main())
