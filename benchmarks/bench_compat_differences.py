"""How often the compat encoding differs from the Python model, measured.

The compat encoding routes exactly for float32-comparing models but adds
leaf values in float32, so where two classes tie exactly in float64 the
float32 sums can break the tie the other way; LightGBM compares in float64,
which a float32 graph can only approximate near thresholds. This script
counts label differences, rows with exact ties and the largest probability
difference on random rows and on rows placed at the thresholds.

    python benchmarks/bench_compat_differences.py [--quick] [--out DIR]

Writes ``compat_differences.md`` in ``benchmarks/results/`` (``--quick``: a
temporary folder).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.verification import run_onnx


def klein_data(n: int, d: int, rng: np.random.Generator) -> np.ndarray:
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return direction * np.tanh(rng.uniform(0, 3, size=(n, 1)))


HEADERS = [
    "model and rows",
    "rows",
    "exact ties",
    "labels differ",
    "largest probability difference",
]


def at_thresholds(model, k: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Rows whose tested Klein coordinate is a threshold or one float32 step from it."""
    ens = model.to_ir().ensemble
    internal = np.flatnonzero(ens.feature >= 0)
    pick = rng.choice(internal, size=min(internal.size, 3000), replace=False)
    rows = k[rng.integers(0, len(k), size=3 * pick.size)] * 0.5
    t32 = ens.threshold[pick].astype(np.float32)
    values = np.concatenate(
        [t32, np.nextafter(t32, np.float32(-1)), np.nextafter(t32, np.float32(1))]
    )
    rows[np.arange(rows.shape[0]), np.tile(ens.feature[pick], 3)] = values
    return rows[np.linalg.norm(rows, axis=1) < 1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_output_args(parser)
    args = parser.parse_args(argv)
    n_train, n_test = (1000, 5000) if args.quick else (5000, 100_000)
    rng = np.random.default_rng(0)
    k_train, k_test = klein_data(n_train, 4, rng), klein_data(n_test, 4, rng)
    X_train = geometry.from_klein(k_train, "hyperboloid")
    models, table = [], []
    for n_classes in (2, 8):
        y = np.argmax(
            k_train[:, : min(n_classes, 4)] @ rng.normal(size=(min(n_classes, 4), n_classes))
            + 0.5 * rng.normal(size=(n_train, n_classes)),
            axis=1,
        )
        for n_trees, depth in ((2, None), (4, None), (10, None), (100, 8)):
            models.append(
                (
                    f"sklearn forest, {n_classes} classes, {n_trees} trees, depth {depth}",
                    h.HyperbolicRandomForestClassifier(
                        n_estimators=n_trees, max_depth=depth, random_state=0
                    ).fit(X_train, y),
                )
            )
    if hasattr(h, "HyperbolicLGBMClassifier"):
        y = np.argmax(k_train[:, :3], axis=1)
        models.append(
            (
                "LightGBM, 3 classes, 50 trees",
                h.HyperbolicLGBMClassifier(n_estimators=50, verbose=-1, random_state=0).fit(
                    X_train, y
                ),
            )
        )
    for name, model in steps(models, "models", unit="models"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            onx = h.to_onnx(model, encoding="compat")
        for where, k in (("random", k_test), ("at thresholds", at_thresholds(model, k_test, rng))):
            X = geometry.from_klein(k, "hyperboloid").astype(np.float32)
            got = run_onnx(onx, X)
            proba = model.predict_proba(X)
            top = np.sort(proba, axis=1)
            ties = np.mean(top[:, -1] == top[:, -2])
            differ = np.mean(got["label"] != model.predict(X))
            dp = np.abs(got["probabilities"] - proba).max()
            table.append([f"{name}, {where}", len(X), f"{ties:.2%}", f"{differ:.3%}", f"{dp:.2g}"])
    print(text_table(HEADERS, table))
    text = "\n\n".join(
        [
            "# The compat encoding against the Python model",
            __doc__.split("\n\n")[1].replace("\n", " "),
            f"{n_train:,} training rows, d = 4; rows at thresholds: each threshold, rounded to "
            "float32, and one float32 step either side. " + environment(),
            md_table(HEADERS, table),
        ]
    )
    write(output_dir(args) / "compat_differences.md", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
