"""Models trained with the original HyperDT (PyPI ``hyperdt`` 0.0.3), exported to ONNX.

HyperDT stores each split as a feature ``d`` and an angle ``theta`` and
sends a point left iff, in float64,

    sin(theta) * x[d] - cos(theta) * x[t] < 0        (``dot_product="sparse"``, the default)
    sin(theta) * x[d] + cos(theta) * x[t] < 0        (``"sparse_minkowski"``)

with ``t`` its ``timelike_dim``. On the upper sheet the first is the Klein
test ``x[d] / x[t] < cot(theta)``, but not in floating point: points whose
Klein value rounds to the same number can fall on either side (measured in
``tests/test_hyperdt.py``), so a Klein threshold cannot route every row as
HyperDT does. The graph therefore computes HyperDT's own two products and
difference, per split, in float64 (``Mul``, ``Mul``, ``Sub``: each correctly
rounded, as numpy's are) and tests the result ``< 0``, which routes every
row exactly as HyperDT's ``predict``. ``dot_product="dense"`` (a BLAS
matrix product, whose summation order and fused multiply-adds belong to
the BLAS build) is refused.

What each class predicts, reproduced as HyperDT computes it:

* ``HyperbolicDecisionTreeClassifier``: the leaf's class fractions, and the
  first class of highest fraction.
* ``HyperbolicDecisionTreeRegressor``: the leaf's mean target.
* ``HyperbolicRandomForestClassifier``: ``probabilities`` are the mean of
  the trees' leaf fractions (tree order, then divided; a tree whose
  bootstrap sample missed a class gives it 0, where HyperDT's own
  ``predict_proba`` fails: see :func:`hyperdt_outputs`); ``label`` is the
  *mode* of the trees' labels, the smallest label on a tie
  (``scipy.stats.mode``), which may differ from the most probable class.
* ``HyperbolicRandomForestRegressor``: HyperDT 0.0.3 inherits the
  classifier's vote, so it predicts the mode of the trees' values (the
  smallest on a tie), not their mean. Reproduced faithfully.

The graph reads hyperboloid points only, as HyperDT's estimators do, and
does not check them (HyperDT checks at ``fit`` only). HyperDT's curvature
enters only its fit-time check (``x_t > 1/c``, which should be
``1/sqrt(c)``); its splits are planes through the origin, valid at every
curvature, and the exported metadata records ``K = -c``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import helper

from ..emit import ENCODINGS
from ..emit import encoding as registered
from ..emit._graph import ML_DOMAIN, GraphBuilder, onnx_type
from ..emit.outputs import label_tensor
from ..emit.strategy import plan_trees
from ..emit.trees import by_row_blocks
from ..errors import UnsupportedModelError
from ..ir import Ensemble, InputSpace, Model, predict_output, predict_scores
from ._model_file import finish_model

__all__ = [
    "HYPERDT_CLASSES",
    "boundary_rows",
    "handles",
    "hyperdt_outputs",
    "predict_reference",
    "read_hyperdt",
    "split_columns",
]

#: HyperDT 0.0.3's hyperbolic estimators, by module and class name.
HYPERDT_CLASSES: dict[str, str] = {
    "HyperbolicDecisionTreeClassifier": "hyperdt.tree",
    "HyperbolicDecisionTreeRegressor": "hyperdt.tree",
    "HyperbolicRandomForestClassifier": "hyperdt.ensemble",
    "HyperbolicRandomForestRegressor": "hyperdt.ensemble",
}
_SIGN = {"sparse": 1.0, "sparse_minkowski": -1.0}  # x[t]'s factor is -SIGN * cos(theta)
STAGE = "hyperdt"


def handles(model: Any) -> bool:
    """True if ``model`` is one of HyperDT's hyperbolic estimators (without importing hyperdt)."""
    cls = type(model)
    return HYPERDT_CLASSES.get(cls.__name__) == cls.__module__


@dataclass(frozen=True, eq=False)
class HyperDTModel:
    """A HyperDT model as split columns and trees over them.

    Split column ``j`` is ``sin_[j] * x[feature_[j]] - cos_[j] * x[timelike]``
    (``cos_`` carries the sign of ``dot_product``). ``values`` is the
    ensemble of leaf fractions (classifiers) or leaf values (regressors),
    ``votes`` the ensemble whose tree ``i`` outputs, in column ``i``, its
    label's class index (classifier) or its value (regressor); forests
    only, for the mode.
    """

    columns_feature: np.ndarray
    columns_sin: np.ndarray
    columns_cos: np.ndarray
    timelike: int
    values: Ensemble
    votes: Ensemble | None
    model: Model


def _tree_nodes(tree: Any) -> list[Any]:
    """The DecisionNodes of a fitted HyperDT tree, in depth-first order (root first)."""
    if getattr(tree, "tree", None) is None:
        raise UnsupportedModelError(
            f"{type(tree).__name__} is not fitted (its 'tree' is None); fit it before exporting."
        )
    order, stack = [], [tree.tree]
    while stack:
        node = stack.pop()
        order.append(node)
        if node.value is None:
            stack.extend([node.right, node.left])
    return order


def _trees_of(model: Any) -> list[Any]:
    trees = list(getattr(model, "trees", [model])) if "Forest" in type(model).__name__ else [model]
    if not trees:
        raise UnsupportedModelError(f"{type(model).__name__} has no trees.")
    return trees


def read_hyperdt(model: Any) -> HyperDTModel:
    """Describe a fitted HyperDT estimator (see the module doc for what is reproduced)."""
    if not handles(model):
        raise UnsupportedModelError(
            f"{type(model).__module__}.{type(model).__name__} is not a HyperDT 0.0.3 estimator; "
            f"expected one of {sorted(HYPERDT_CLASSES)}."
        )
    name = type(model).__name__
    forest = "Forest" in name
    classifier = name.endswith("Classifier")
    trees = _trees_of(model)
    nodes_of = [_tree_nodes(t) for t in trees]
    n_input = int(trees[0].ndim)
    timelike = int(trees[0].timelike_dim) % n_input
    for t in trees:
        if t.dot_product not in _SIGN:
            raise UnsupportedModelError(
                f"HyperDT's dot_product={t.dot_product!r} is a BLAS matrix product whose "
                "rounding depends on the BLAS build, so no graph can route as it does on every "
                "row; refit with dot_product='sparse' (the default), which computes the same split."
            )
        if int(t.ndim) != n_input or int(t.timelike_dim) % n_input != timelike:
            raise UnsupportedModelError(
                f"the trees of this {name} disagree on their input columns."
            )

    if classifier:
        classes = np.asarray(model.classes_)
        if forest and classes.dtype.kind not in "iuf":  # booleans fail scipy's mode too
            what = "boolean" if classes.dtype.kind == "b" else "non-numeric"
            raise UnsupportedModelError(
                f"HyperDT's {name} cannot predict {what} labels (its vote uses "
                "scipy.stats.mode, which refuses them); refit it on integer labels, "
                "e.g. y.astype(int)."
            )
    else:
        classes = None

    # One split column per distinct (feature, sin, cos).
    keys: dict[tuple[int, float, float], int] = {}
    feature, threshold, left, right, value, code, roots = [], [], [], [], [], [], []
    offset = 0
    for t, nodes in zip(trees, nodes_of, strict=True):
        index = {id(n): i for i, n in enumerate(nodes)}
        sign = _SIGN[t.dot_product]
        if classes is not None:  # classifier
            # asarray: an array query, so that numpy's stubs give an array of positions
            local = np.searchsorted(classes, np.asarray(t.classes_))
            if np.any(local >= classes.size) or not np.array_equal(classes[local], t.classes_):
                raise UnsupportedModelError(f"a tree of this {name} has classes the model lacks.")
        roots.append(offset)
        for n in nodes:
            if n.value is None:
                # HyperDT's own scalars: np.sin/np.cos of the stored angle.
                key = (int(n.feature), float(np.sin(n.theta)), float(sign * np.cos(n.theta)))
                feature.append(keys.setdefault(key, len(keys)))
                threshold.append(0.0)
                left.append(offset + index[id(n.left)])
                right.append(offset + index[id(n.right)])
                value.append(np.zeros(classes.size if classes is not None else 1))
                code.append(0.0)
            else:
                feature.append(-1)
                threshold.append(0.0)
                left.append(-1)
                right.append(-1)
                if classes is not None:  # classifier
                    row = np.zeros(classes.size)
                    row[local] = np.asarray(n.probs, dtype=np.float64)
                    value.append(row)
                    code.append(float(local[int(n.value)]))
                else:
                    value.append(np.array([float(n.value)]))
                    code.append(float(n.value))
        offset += len(nodes)
    if not keys:  # only leaves: the operator still needs one input column
        keys[(0, 0.0, 0.0)] = 0
    columns = np.array(list(keys), dtype=np.float64).reshape(-1, 3)
    common: dict[str, Any] = dict(
        feature=np.asarray(feature, dtype=np.int64),
        threshold=np.asarray(threshold),
        left=np.asarray(left, dtype=np.int64),
        right=np.asarray(right, dtype=np.int64),
        roots=np.asarray(roots, dtype=np.int64),
        op="<",
        compare_dtype="float64",
        threshold_dtype="float64",
        n_features=len(keys),
        post_transform="identity",
        sum_dtype="float64",
    )
    values = Ensemble(
        value=np.asarray(value),
        aggregate="mean",
        base_values=np.zeros(len(value[0])),
        classes=classes,
        **common,
    )
    votes = None
    if forest:
        n_trees = len(trees)
        tree_of = np.repeat(np.arange(n_trees), np.diff(np.append(roots, offset)))
        per_tree = np.zeros((offset, n_trees))
        per_tree[np.arange(offset), tree_of] = code
        votes = Ensemble(
            value=per_tree,
            aggregate="sum",
            base_values=np.zeros(n_trees),
            tree_target=np.arange(n_trees, dtype=np.int64),
            **common,
        )
    space = InputSpace("hyperboloid", -abs(float(model.curvature)), timelike, n_input)
    return HyperDTModel(
        columns_feature=columns[:, 0].astype(np.int64),
        columns_sin=columns[:, 1],
        columns_cos=columns[:, 2],
        timelike=timelike,
        values=values,
        votes=votes,
        model=Model(values, space, "hyperdt", name),
    )


def predict_reference(described: HyperDTModel, X: np.ndarray) -> dict[str, np.ndarray]:
    """The graph's outputs computed in numpy (HyperDT's arithmetic, vectorised)."""
    S = split_columns(described, X)
    values = described.values
    out = predict_output(values, S)
    classes = values.classes  # None: a regressor (values.is_classifier is False)
    if described.votes is None:
        if classes is not None:
            return {"label": classes[np.argmax(out, axis=1)], "probabilities": out}
        return {"variable": out}
    winner = _mode(predict_scores(described.votes, S))
    if classes is not None:
        return {"label": classes[winner.astype(np.int64)], "probabilities": out}
    return {"variable": winner[:, None]}


def hyperdt_outputs(model: Any, X: np.ndarray) -> dict[str, np.ndarray]:
    """HyperDT's own outputs for ``X``: ``predict``, and ``predict_proba`` for classifiers.

    A forest whose bootstrap samples missed a class has trees with fewer
    classes, and HyperDT's ``predict_proba`` then fails (it stacks arrays of
    different widths). Its probabilities are then the mean, over trees in
    order, of each tree's own ``predict_proba`` placed in the forest's class
    columns (0 for classes a tree never saw), which is what the graph gives.
    """
    out = {
        "label" if read_hyperdt(model).values.is_classifier else "variable": np.asarray(
            model.predict(X)
        )
    }
    if "variable" in out:
        return out
    trees = _trees_of(model)
    if all(np.array_equal(t.classes_, model.classes_) for t in trees):
        out["probabilities"] = np.asarray(model.predict_proba(X))
        return out
    per_tree = np.zeros((len(trees), X.shape[0], len(model.classes_)))
    for i, t in enumerate(trees):
        per_tree[i][:, np.searchsorted(model.classes_, t.classes_)] = t.predict_proba(X)
    out["probabilities"] = np.mean(per_tree, axis=0)
    return out


def split_columns(described: HyperDTModel, X: np.ndarray) -> np.ndarray:
    """``sin * x[d] - cos * x[t]`` for every split column, in float64, as HyperDT computes it."""
    X = np.asarray(X).astype(np.float64)
    return described.columns_sin * X[:, described.columns_feature] - (
        described.columns_cos * X[:, [described.timelike]]
    )


def _mode(V: np.ndarray) -> np.ndarray:
    """Most frequent value of each row, the smallest on a tie (``scipy.stats.mode``'s rule)."""
    counts = (V[:, :, None] == V[:, None, :]).sum(axis=2)
    best = counts == counts.max(axis=1, keepdims=True)
    return np.where(best, V, np.inf).min(axis=1)


def compile_hyperdt(
    model: Any, *, dtype: str, encoding: str, opset: int, name: str | None = None
) -> Any:
    """The ONNX model of a HyperDT estimator, in an encoding that compares in float64."""
    how = registered(encoding)
    if how.value_bound:
        # HyperDT's graph takes labels from votes and modes, not from summed
        # scores; it keeps the exact encoding's ordered sums.
        encoding, how = "exact", registered("exact")
    if how.float32:
        usable = ", ".join(repr(e.name) for e in ENCODINGS.values() if not e.float32)
        raise ValueError(
            f"HyperDT models export with encoding {usable}, not {encoding!r}: their splits "
            f"compare float64 products, which the float32 {encoding!r} encoding cannot."
        )
    described = read_hyperdt(model)
    g = GraphBuilder(opset)
    g.reserve("X", "label", "probabilities", "variable")
    x = "X" if dtype == "float64" else g.cast(STAGE, "X", np.float64)
    xd = g.op(STAGE, "Gather", [x, g.const(STAGE, "features", described.columns_feature)], axis=1)
    xt = g.op(
        STAGE, "Gather", [x, g.const(STAGE, "timelike", [described.timelike], np.int64)], axis=1
    )
    a = g.op(STAGE, "Mul", [xd, g.const(STAGE, "sin", described.columns_sin)])
    b = g.op(STAGE, "Mul", [xt, g.const(STAGE, "cos", described.columns_cos)])
    S = g.op(STAGE, "Sub", [a, b])

    plans = []

    def trees(ensemble: Ensemble) -> str:
        if not how.tree_operator:
            raw = how.emit_function()(g, S, "float64", ensemble)
        else:
            plan = plan_trees(ensemble, encoding)
            plans.append(plan)
            raw = how.emit_function()(g, S, "float64", ensemble, plan=plan)
        assert isinstance(raw, str)  # value-bound (Guarded) encodings were replaced above
        return raw

    values = described.values
    scores = trees(values)
    if values.classes is not None:  # values.is_classifier
        g.rename(scores, "probabilities")
        labels, label_type = label_tensor(values.classes)
        if described.votes is None:
            winner = g.op(STAGE, "ArgMax", ["probabilities"], axis=1, keepdims=0)
        else:
            winner = g.cast(STAGE, _emit_mode(g, trees(described.votes), encoding), np.int64)
        g.op(
            STAGE, "Gather", [g.const(STAGE, "classes", labels), winner], axis=0, outputs=["label"]
        )
        outputs = [
            helper.make_tensor_value_info("label", label_type, ["N"]),
            helper.make_tensor_value_info(
                "probabilities", onnx_type("float64"), ["N", values.n_outputs]
            ),
        ]
    else:
        if described.votes is not None:
            mode = _emit_mode(g, trees(described.votes), encoding)
            scores = g.op(STAGE, "Unsqueeze", [mode, g.const(STAGE, "axis1", [1], np.int64)])
        g.rename(scores, "variable")
        outputs = [helper.make_tensor_value_info("variable", onnx_type("float64"), ["N", 1])]

    ml_opset = max((p.ml_opset for p in plans), default=None)
    graph = helper.make_graph(
        g.nodes,
        name or f"hyp2onnx_hyperdt_{described.model.estimator_class}",
        [
            helper.make_tensor_value_info(
                "X", onnx_type(dtype), ["N", described.model.space.n_input_features]
            )
        ],
        outputs,
        g.initializers,
    )
    extra = [helper.make_opsetid(ML_DOMAIN, ml_opset)] if ml_opset else []
    return finish_model(
        graph, described.model, opset=opset, extra_opsets=extra, encoding=encoding, dtype=dtype
    )


def _emit_mode(g: Any, per_tree: str, encoding: str) -> str:
    """[N] mode of the [N, T] per-tree values (smallest on a tie), as :func:`_mode`.

    Counts pairwise equalities ([rows, T, T]); the exact encoding does this
    in blocks of rows (a Loop), the standard one for all rows at once.
    """

    def mode(b: Any, v: str) -> str:
        rows = b.op(STAGE, "Unsqueeze", [v, b.const(STAGE, "axis2", [2], np.int64)])
        cols = b.op(STAGE, "Unsqueeze", [v, b.const(STAGE, "axis1", [1], np.int64)])
        same = b.cast(STAGE, b.op(STAGE, "Equal", [rows, cols]), np.int32)
        counts = b.op(
            STAGE, "ReduceSum", [same, b.const(STAGE, "axis2b", [2], np.int64)], keepdims=0
        )
        most = (
            b.op(STAGE, "ReduceMax", [counts], axes=[1], keepdims=1)
            if b.opset < 18
            else b.op(
                STAGE, "ReduceMax", [counts, b.const(STAGE, "axis1b", [1], np.int64)], keepdims=1
            )
        )
        best = b.op(STAGE, "Equal", [counts, most])
        inf = b.const(STAGE, "inf", np.inf, np.float64)
        candidates = b.op(STAGE, "Where", [best, v, inf])
        if b.opset < 18:
            return b.op(STAGE, "ReduceMin", [candidates], axes=[1], keepdims=1)
        return b.op(
            STAGE, "ReduceMin", [candidates, b.const(STAGE, "axis1c", [1], np.int64)], keepdims=1
        )

    # An encoding without tree operators targets runtimes without sequence operators too.
    blocks = registered(encoding).tree_operator
    winner = by_row_blocks(g, per_tree, mode, 1, "float64") if blocks else mode(g, per_tree)
    return g.op(STAGE, "Squeeze", [winner, g.const(STAGE, "axis1d", [1], np.int64)])


def boundary_rows(
    model: Any, *, per_split: int = 6, ulps_feature: int = 3, ulps_time: int = 2, seed: int = 0
) -> np.ndarray:
    """Adversarial hyperboloid rows at and beside every split of a HyperDT ``model``.

    For each split with ``|cot(theta)| < 1`` (one that crosses the
    hyperboloid), ``per_split`` points exactly on its boundary in Klein
    coordinates (``k_d = cot(theta)``, the other coordinates random) are
    lifted to the hyperboloid and then moved by up to ``ulps_feature`` ulps
    in ``x_d`` and ``ulps_time`` ulps in ``x_t``: the rows a different
    arithmetic would send the other way. Use them with :func:`hyp2onnx.verify`.
    """
    described = read_hyperdt(model)
    rng = np.random.default_rng(seed)
    n_in, t = described.model.space.n_input_features, described.timelike
    spacelike = np.delete(np.arange(n_in), t)
    steps_d = np.arange(-ulps_feature, ulps_feature + 1)
    steps_t = np.arange(-ulps_time, ulps_time + 1)
    rows = []
    for d, sin, cos in zip(described.columns_feature, described.columns_sin, described.columns_cos):
        cot = cos / sin
        if not -1 < cot < 1:
            continue
        k = np.zeros((per_split, n_in))
        k[:, spacelike] = rng.uniform(-1, 1, (per_split, n_in - 1))
        k[:, spacelike] *= (
            np.sqrt(1 - cot**2)
            * rng.uniform(0, 0.999, (per_split, 1))
            / np.maximum(np.linalg.norm(k[:, spacelike], axis=1, keepdims=True), 1.0)
        )
        k[:, d] = cot
        x0 = 1 / np.sqrt(1 - np.sum(k * k, axis=1, keepdims=True))
        x = k * x0
        x[:, t] = x0[:, 0]
        for sd in steps_d:
            for st in steps_t:
                z = x.copy()
                z[:, d] = _step_ulps(z[:, d], sd)
                z[:, t] = _step_ulps(z[:, t], st)
                rows.append(z)
    return np.concatenate(rows) if rows else np.empty((0, n_in))


def _step_ulps(v: np.ndarray, n: int | np.integer) -> np.ndarray:
    toward = np.inf if n > 0 else -np.inf
    for _ in range(abs(int(n))):
        v = np.nextafter(v, toward)
    return v
