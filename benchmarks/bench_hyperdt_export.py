"""HyperDT models in ONNX: does the graph route every row as HyperDT, and would a Klein threshold?

For each seed and each HyperDT 0.0.3 class (depth-3 trees, 4-tree forests,
d = 2 and 4, 300 training points of ``hyp2onnx.datasets``'s wrapped-normal
mixtures), the model is exported and compared with HyperDT's own
``predict``/``predict_proba`` on 500 held-out points and on
`hyp2onnx.hyperdt.boundary_rows` (points on every split's boundary,
then moved by up to 3 ulps in x_d and 2 in x_t). Alongside, per split and
its boundary rows, HyperDT's test ``sin(theta) x_d - cos(theta) x_t < 0``
is compared with:

* the Klein test ``fl(x_d / x_t) < fl(cos(theta) / sin(theta))``: rows routed
  differently, and splits for which *no* float64 threshold on ``fl(x_d / x_t)``
  separates HyperDT's two sides;
* HyperDT's own ``dot_product="dense"`` arithmetic (``X @ v``, BLAS): rows
  routed differently from the sparse product (why the exporter refuses it).

Needs ``pip install hyperdt==0.0.3`` (the ``bench`` extra).

    python benchmarks/bench_hyperdt_export.py [--quick] [--seeds 5]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, have_hyperdt, md_table, output_dir, steps, write

import hyp2onnx
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.hyperdt import boundary_rows, read_hyperdt, split_columns

KINDS = ("tree classifier", "tree regressor", "forest classifier", "forest regressor")


def fit(kind: str, X: np.ndarray, y: np.ndarray, seed: int):
    from hyperdt.ensemble import HyperbolicRandomForestClassifier, HyperbolicRandomForestRegressor
    from hyperdt.tree import HyperbolicDecisionTreeClassifier, HyperbolicDecisionTreeRegressor

    forest = dict(n_estimators=4, n_jobs=1, random_state=seed, max_depth=3)
    model = {
        "tree classifier": lambda: HyperbolicDecisionTreeClassifier(max_depth=3),
        "tree regressor": lambda: HyperbolicDecisionTreeRegressor(max_depth=3),
        "forest classifier": lambda: HyperbolicRandomForestClassifier(**forest),
        "forest regressor": lambda: HyperbolicRandomForestRegressor(**forest),
    }[kind]()
    target = y if kind.endswith("classifier") else np.round(np.sin(3 * X[:, 1]) + y, 1)
    return model.fit(X, target)


def klein_and_dense(model) -> tuple[int, int, int, int, int]:
    """(row-split pairs, Klein-test differences, inseparable splits, splits, dense differences)."""
    described = read_hyperdt(model)
    pairs = klein_diff = inseparable = dense_diff = 0
    n_splits = described.columns_feature.size
    X = boundary_rows(model)  # rows at every split, each tested on every split
    for j in range(n_splits):
        left = split_columns(described, X)[:, j] < 0
        k = X[:, described.columns_feature[j]] / X[:, described.timelike]
        cot = described.columns_cos[j] / described.columns_sin[j]
        pairs += X.shape[0]
        klein_diff += int(np.sum((k < cot) != left))
        if left.any() and (~left).any() and k[left].max() >= k[~left].min():
            inseparable += 1
        v = np.zeros(X.shape[1])
        v[described.timelike] = -described.columns_cos[j]
        v[described.columns_feature[j]] = described.columns_sin[j]
        # HyperDT's dense predict: one (1, D) @ (D,) product per row.
        dense_left = np.array([(row.reshape(1, -1) @ v).item() < 0 for row in X])
        dense_diff += int(np.sum(dense_left != left))
    return pairs, klein_diff, inseparable, n_splits, dense_diff


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 4])
    args = parser.parse_args(argv)
    if not have_hyperdt():
        return 2
    if args.quick:
        args.seeds, args.dims = 1, [2]
    out = output_dir(args)

    headers = (
        "model",
        "d",
        "models",
        "rows checked",
        "label differences",
        "max output difference",
        "Klein test differs (row-split pairs)",
        "splits no Klein threshold separates",
        "dense product differs",
    )
    rows = []
    for kind in steps(KINDS, "model kinds", unit="kinds"):
        for d in args.dims:
            totals = np.zeros(5, dtype=np.int64)
            checked = labels = 0
            worst = 0.0
            for seed in range(args.seeds):
                X, y = make_wrapped_normal_mixture(300, d, 4, random_state=seed)
                held_out, _ = make_wrapped_normal_mixture(500, d, 4, random_state=1000 + seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = fit(kind, X, y, seed)
                rows_all = np.vstack([held_out, boundary_rows(model, seed=seed)])
                for encoding in ("exact", "standard"):
                    report = hyp2onnx.verify(
                        model, hyp2onnx.to_onnx(model, dtype="float64", encoding=encoding), rows_all
                    )
                    checked += report.rows
                    labels += report.label_mismatches or 0
                    worst = max([worst, *report.max_abs_diff.values()])
                totals += klein_and_dense(model)
            pairs, klein_diff, insep, n_splits, dense = totals
            rows.append(
                (
                    kind,
                    d,
                    args.seeds,
                    checked,
                    labels,
                    f"{worst:.1g}",
                    f"{klein_diff} / {pairs}",
                    f"{insep} / {n_splits}",
                    f"{dense} / {pairs}",
                )
            )
            print(
                ", ".join(f"{h}: {v}" for h, v in zip(headers, rows[-1], strict=True)), flush=True
            )

    text = (
        "# HyperDT 0.0.3 models exported to ONNX\n\n"
        + __doc__.split("\n\n", 1)[1].split("Needs ")[0].replace("``", "`")
        + "Rows checked count both encodings (exact, standard), float64 input.\n\n"
        + md_table(headers, rows)
        + f"\n\n{environment()}\n"
    )
    write(out / "hyperdt_export.md", text)
    return 0 if all(r[4] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
