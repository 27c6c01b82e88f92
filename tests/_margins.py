"""Fitted models whose raw scores are set leaf by leaf, through each library's own model.

The label tests need rows whose scores lie at, and one ulp around, the point
where a library's ``predict`` changes its label. Training cannot aim that
finely, so these helpers overwrite the leaf values of a fitted hyperbolic
model inside the library's own model (XGBoost's JSON, LightGBM's model text,
CatBoost's ``set_leaf_values``, scikit-learn's tree arrays) and start every
score from zero. Both sides of a comparison then read that one model: the
library's ``predict`` and the exported graph (which parses the native model
anew), so the oracle stays the library itself.

``values(tree, column, n_leaves)`` gives tree ``tree``'s leaf values, in the
order of its leaf nodes, for output column ``column`` (a booster's tree feeds
one column; a scikit-learn tree gets one call per class).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

Values = Callable[[int, int, int], np.ndarray]


def set_leaves(model, values: Values) -> None:
    """Overwrite ``model``'s leaf values in place (its native model is replaced)."""
    native = type(model.estimator_).__module__.split(".")[0]
    {
        "xgboost": _xgboost,
        "lightgbm": _lightgbm,
        "catboost": _catboost,
        "sklearn": _sklearn,
    }[native](model.estimator_, values)


def _xgboost(fitted, values: Values) -> None:
    import xgboost

    doc = json.loads(fitted.get_booster().save_raw(raw_format="json"))
    learner = doc["learner"]
    n_classes = int(learner["learner_model_param"].get("num_class", "0"))
    # Every score starts at 0: a probability of 1/2 for binary:logistic, a margin of 0 per class.
    learner["learner_model_param"]["base_score"] = (
        "[" + ",".join(["0"] * n_classes) + "]" if n_classes > 1 else "[5E-1]"
    )
    model = learner["gradient_booster"]["model"]
    for i, tree in enumerate(model["trees"]):
        leaf = np.asarray(tree["left_children"]) < 0
        new = np.asarray(values(i, int(model["tree_info"][i]), int(leaf.sum())), np.float32)
        for key in ("split_conditions", "base_weights"):
            held = np.asarray(tree[key], dtype=np.float64)
            held[leaf] = new
            tree[key] = held.tolist()
    booster = xgboost.Booster()
    booster.load_model(bytearray(json.dumps(doc).encode()))
    fitted._Booster = booster


def _lightgbm(fitted, values: Values) -> None:
    import lightgbm

    text = fitted.booster_.model_to_string()
    per_iteration = int(re.search(r"num_tree_per_iteration=(\d+)", text).group(1))
    lines, tree, n_leaves = [], -1, 0
    for line in text.split("\n"):
        if line.startswith("tree_sizes="):
            continue  # byte counts of the old text: LightGBM reads the trees in order without them
        if line.startswith("Tree="):
            tree = int(line[5:])
        elif line.startswith("num_leaves="):
            n_leaves = int(line[11:])
        elif line.startswith("leaf_value="):
            new = values(tree, tree % per_iteration, n_leaves)
            line = "leaf_value=" + " ".join(repr(float(v)) for v in new)
        lines.append(line)
    fitted._Booster = lightgbm.Booster(model_str="\n".join(lines))


def _catboost(fitted, values: Values) -> None:
    with tempfile.TemporaryDirectory() as folder:  # a model read from a file is modifiable
        path = str(Path(folder) / "model.cbm")
        fitted.save_model(path)
        fitted.load_model(path)
    counts = fitted.get_tree_leaf_counts()
    n_outputs = fitted.get_leaf_values().size // int(counts.sum())
    flat = []
    for i, n in enumerate(counts):
        per_column = [np.asarray(values(i, c, int(n)), np.float64) for c in range(n_outputs)]
        flat.append(np.stack(per_column, axis=1).ravel())  # leaf-major: a leaf's values together
    fitted.set_leaf_values(np.concatenate(flat))
    fitted.set_scale_and_bias(1.0, [0.0] * n_outputs if n_outputs > 1 else 0.0)


def _sklearn(fitted, values: Values) -> None:
    for i, est in enumerate(fitted.estimators_):
        leaf = np.flatnonzero(est.tree_.feature < 0)
        table = est.tree_.value  # a writable view of the tree's own array
        for c in range(table.shape[2]):
            table[leaf, 0, c] = values(i, c, leaf.size)
