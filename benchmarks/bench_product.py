"""Accuracy on product spaces: models that know each block's geometry against those that do not.

Data: `hyp2onnx.datasets.make_product_mixture`, an 8-class mixture of
wrapped normals on a product of hyperbolic, Euclidean and spherical blocks
(``manify``-style signatures below; spheres of curvature 1/4), 1,000 points, an 80/20 split stratified
by class. Rows of a spherical block farther than a quarter turn from its
base point have no gnomonic coordinates; they are dropped from the data set
for every model alike, and their share is reported.

Models (12 trees of depth 5 each, one thread, ``random_state=0``):

* ``Product RF``: ``HyperbolicRandomForestClassifier(input_blocks=signature)``,
  each block with its own midpoint (Einstein, angular, arithmetic);
* ``Product RF, arith.``: the same trees with the arithmetic midpoint everywhere
  (the midpoint ablation);
* ``Product LGBM``: ``HyperbolicLGBMClassifier(input_blocks=signature)``, 12 rounds;
* ``Euclidean RF, raw``: scikit-learn's RandomForestClassifier on the raw
  (ambient) coordinates of all blocks;
* ``First block only``: a single-geometry model, the hyperbolic (or
  Euclidean/spherical) random forest on the first block's columns alone.

The mixed-curvature paper (Chlenski et al., ICML 2025) benchmarks product
RFs on Gaussian mixtures too, but its tables could not be retrieved here, so
no published figure is printed beside ours (see the results file).

    python benchmarks/bench_product.py [--quick] [--seeds 20] [--jobs 2]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

import hyp2onnx as h
from hyp2onnx.blocks import Spherical, as_blocks, spans
from hyp2onnx.datasets import make_product_mixture

#: Spheres of curvature 1/4 (radius 2): at the generator's noise, 2% (d = 2) to 8% (d = 4)
#: of rows fall on the far hemisphere, against 25% to 44% on the unit sphere.
SIGNATURES: dict[str, list[tuple[float, int]]] = {
    "H2 x E2": [(-1.0, 2), (0.0, 2)],
    "H2 x H2": [(-1.0, 2), (-1.0, 2)],
    "H2 x S2": [(-1.0, 2), (0.25, 2)],
    "S2 x S2": [(0.25, 2), (0.25, 2)],
    "H4 x E4 x S4": [(-1.0, 4), (0.0, 4), (0.25, 4)],
}
MODELS = (
    "Product RF",
    "Product RF, arith.",
    "Product LGBM",
    "Euclidean RF, raw",
    "First block only",
)
N_POINTS, N_CLASSES, DEPTH, N_TREES = 1000, 8, 5, 12


def _on_hemispheres(X: np.ndarray, blocks: tuple) -> np.ndarray:
    """Rows whose every spherical block has x_0 > 0."""
    keep = np.ones(X.shape[0], dtype=bool)
    for block, column, _ in spans(blocks):
        if isinstance(block, Spherical):
            keep &= X[:, column + block.base_dim] > 0
    return keep


def _models(signature: list[tuple[float, int]]) -> dict[str, Any]:
    blocks = as_blocks(signature)
    forest = {"n_estimators": N_TREES, "max_depth": DEPTH, "random_state": 0, "n_jobs": 1}
    first = blocks[0]
    return {
        "Product RF": h.HyperbolicRandomForestClassifier(input_blocks=signature, **forest),
        "Product RF, arith.": h.HyperbolicRandomForestClassifier(
            input_blocks=signature, midpoint="arithmetic", **forest
        ),
        "Product LGBM": h.HyperbolicLGBMClassifier(
            input_blocks=signature,
            n_estimators=N_TREES,
            max_depth=DEPTH,
            n_jobs=1,
            random_state=0,
            verbose=-1,
        ),
        "Euclidean RF, raw": RandomForestClassifier(**forest),
        "First block only": (
            h.HyperbolicRandomForestClassifier(input_blocks=[first], **forest),
            first.n_columns,
        ),
    }


def _task(args: tuple[str, int, int]) -> dict[str, Any]:
    name, seed, n_points = args
    signature = SIGNATURES[name]
    blocks = as_blocks(signature)
    X, y = make_product_mixture(n_points, signature, N_CLASSES, random_state=seed)
    keep = _on_hemispheres(X, blocks)
    X, y = X[keep], y[keep]
    counts = np.bincount(y)
    stratify = y if counts[counts > 0].min() >= 2 else None
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=stratify)
    scores = {}
    for model_name, model in _models(signature).items():
        width = None
        if isinstance(model, tuple):
            model, width = model
        Xa, Xb = (Xtr, Xte) if width is None else (Xtr[:, :width], Xte[:, :width])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scores[model_name] = float(np.mean(model.fit(Xa, ytr).predict(Xb) == yte))
    return {"name": name, "seed": seed, "dropped": 1.0 - keep.mean(), **scores}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--seeds", type=int, default=20, help="seeds per signature (default 20)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args(argv)
    out = output_dir(args)
    names = list(SIGNATURES)[:2] if args.quick else list(SIGNATURES)
    seeds = 1 if args.quick else args.seeds
    n_points = 200 if args.quick else N_POINTS
    tasks = [(name, seed, n_points) for name in names for seed in range(seeds)]
    start = time.perf_counter()
    if args.jobs > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(steps(pool.map(_task, tasks), "product", len(tasks), "tasks"))
    else:
        results = [_task(t) for t in steps(tasks, "product", unit="tasks")]
    elapsed = time.perf_counter() - start

    def mean_se(values: np.ndarray) -> str:
        se = values.std(ddof=1) / np.sqrt(values.size) if values.size > 1 else 0.0
        return f"{100 * values.mean():.1f} ± {100 * se:.1f}"

    headers = ["signature", "rows dropped", *MODELS, "paper (Product RF)"]
    rows, paired = [], []
    for name in names:
        mine = [r for r in results if r["name"] == name]
        row = [name, f"{100 * np.mean([r['dropped'] for r in mine]):.1f}%"]
        row += [mean_se(np.array([r[model] for r in mine])) for model in MODELS]
        row.append("not retrieved")
        rows.append(row)
        # Paired by seed: the same data for every model.
        product = np.array([r["Product RF"] for r in mine])
        pair = [name]
        for other in ("Euclidean RF, raw", "First block only", "Product RF, arith."):
            diff = product - np.array([r[other] for r in mine])
            pair.append(f"{mean_se(diff)} ({int(np.sum(diff > 0))}/{int(np.sum(diff < 0))})")
        paired.append(pair)
    print(text_table(headers, rows))
    paired_headers = [
        "signature",
        "Product RF − Euclidean RF, raw",
        "Product RF − first block only",
        "Product RF − arith. midpoints",
    ]
    print(text_table(paired_headers, paired))

    md = [
        "# Accuracy on product spaces",
        "",
        "Test accuracy (%, mean ± standard error over seeds) of classifiers on 8-class "
        f"wrapped-normal mixtures on product spaces ({n_points} points, 80/20 split; "
        f"{seeds} seed(s) per signature; {N_TREES} trees of depth {DEPTH}; H: curvature -1, "
        "S: curvature 1/4). Produced by "
        "`benchmarks/bench_product.py`" + (" in --quick mode" if args.quick else "") + ".",
        "",
        md_table(headers, rows),
        "",
        "Paired by seed (same data for both models): accuracy difference in points, mean ± "
        "standard error, and (seeds won/lost).",
        "",
        md_table(paired_headers, paired),
        "",
        "- *Product RF*: `HyperbolicRandomForestClassifier(input_blocks=signature)`, each "
        "block's own midpoint (Einstein for hyperbolic, angular for spherical, arithmetic for "
        "Euclidean blocks); *arith.*: the same with the arithmetic midpoint on every block; "
        "*Product LGBM*: `HyperbolicLGBMClassifier(input_blocks=signature)`.",
        "- *Euclidean RF, raw*: scikit-learn's random forest on the raw ambient coordinates "
        "of all blocks. *First block only*: a single-geometry forest on the first block.",
        "- *rows dropped*: rows with a spherical block on the far hemisphere (x_0 <= 0), which "
        "have no gnomonic coordinates; they are removed for every model alike.",
        "- *paper*: the mixed-curvature paper (Chlenski et al., ICML 2025) reports product RFs "
        "on Gaussian mixtures, but its result tables could not be retrieved when this was "
        "written, so no published figure stands beside ours; its generator (`manify`, "
        "32 clusters for 8 classes) also differs from this one.",
        "",
        environment() + f" Whole run: {elapsed:.0f} s with {args.jobs} worker(s).",
    ]
    write(out / "product.md", "\n".join(md))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
