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
  ``predict_proba`` fails: see `hyperdt_outputs`); ``label`` is the
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
import onnx
from onnx import helper

from ..emit import ENCODINGS, Encoding
from ..emit import encoding as registered
from ..emit._graph import ML_DOMAIN, GraphBuilder, onnx_type
from ..emit.outputs import label_tensor
from ..emit.strategy import TREE_EMITTERS, plan_trees
from ..emit.trees import TreePlan, by_row_blocks
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
    trees = _trees_of(model)
    nodes_of = [_tree_nodes(t) for t in trees]
    n_input, timelike = _input_columns(trees, name)
    classes = _classes(model, name) if name.endswith("Classifier") else None
    keys, nodes, codes = _flatten(trees, nodes_of, classes, name)
    values = Ensemble(
        value=np.asarray(nodes.pop("value")),
        aggregate="mean",
        base_values=np.zeros(len(classes) if classes is not None else 1),
        classes=classes,
        **nodes,
    )
    votes = _votes(nodes, codes, len(trees)) if "Forest" in name else None
    columns = np.array(list(keys), dtype=np.float64).reshape(-1, 3)
    space = InputSpace(
        geometry="hyperboloid",
        curvature=-abs(float(model.curvature)),
        timelike_dim=timelike,
        n_input_features=n_input,
    )
    return HyperDTModel(
        columns_feature=columns[:, 0].astype(np.int64),
        columns_sin=columns[:, 1],
        columns_cos=columns[:, 2],
        timelike=timelike,
        values=values,
        votes=votes,
        model=Model(ensemble=values, space=space, backend="hyperdt", estimator_class=name),
    )


def _input_columns(trees: list[Any], name: str) -> tuple[int, int]:
    """The trees' common number of input columns and timelike column; refuses dense products."""
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
    return n_input, timelike


def _classes(model: Any, name: str) -> np.ndarray:
    classes = np.asarray(model.classes_)
    if "Forest" in name and classes.dtype.kind not in "iuf":  # booleans fail scipy's mode too
        what = "boolean" if classes.dtype.kind == "b" else "non-numeric"
        raise UnsupportedModelError(
            f"HyperDT's {name} cannot predict {what} labels (its vote uses "
            "scipy.stats.mode, which refuses them); refit it on integer labels, "
            "e.g. y.astype(int)."
        )
    return classes


def _flatten(
    trees: list[Any], nodes_of: list[list[Any]], classes: np.ndarray | None, name: str
) -> tuple[dict[tuple[int, float, float], int], dict[str, Any], list[float]]:
    """Every tree's nodes in one ensemble: one split column per distinct (feature, sin,
    cos), the ensemble's node arrays, and each node's vote (label index or value)."""
    keys: dict[tuple[int, float, float], int] = {}
    feature, left, right, value, codes, roots = [], [], [], [], [], []
    width = classes.size if classes is not None else 1
    offset = 0
    for t, nodes in zip(trees, nodes_of, strict=True):
        index = {id(n): offset + i for i, n in enumerate(nodes)}
        sign = _SIGN[t.dot_product]
        local = None if classes is None else _tree_classes(t, classes, name)
        roots.append(offset)
        for n in nodes:
            if n.value is None:
                # HyperDT's own scalars: np.sin/np.cos of the stored angle.
                key = (int(n.feature), float(np.sin(n.theta)), float(sign * np.cos(n.theta)))
                feature.append(keys.setdefault(key, len(keys)))
                left.append(index[id(n.left)])
                right.append(index[id(n.right)])
                value.append(np.zeros(width))
                codes.append(0.0)
                continue
            feature.append(-1)
            left.append(-1)
            right.append(-1)
            if local is not None:  # classifier
                row = np.zeros(width)
                row[local] = np.asarray(n.probs, dtype=np.float64)
                value.append(row)
                codes.append(float(local[int(n.value)]))
            else:
                value.append(np.array([float(n.value)]))
                codes.append(float(n.value))
        offset += len(nodes)
    if not keys:  # only leaves: the operator still needs one input column
        keys[(0, 0.0, 0.0)] = 0
    arrays = dict(
        feature=np.asarray(feature, dtype=np.int64),
        threshold=np.zeros(len(feature)),
        left=np.asarray(left, dtype=np.int64),
        right=np.asarray(right, dtype=np.int64),
        roots=np.asarray(roots, dtype=np.int64),
        op="<",
        compare_dtype="float64",
        threshold_dtype="float64",
        n_features=len(keys),
        post_transform="identity",
        sum_dtype="float64",
        value=value,
    )
    return keys, arrays, codes


def _tree_classes(tree: Any, classes: np.ndarray, name: str) -> np.ndarray:
    """Where each of a tree's classes sits among the model's."""
    # asarray: an array query, so that numpy's stubs give an array of positions
    local = np.searchsorted(classes, np.asarray(tree.classes_))
    if np.any(local >= classes.size) or not np.array_equal(classes[local], tree.classes_):
        raise UnsupportedModelError(f"a tree of this {name} has classes the model lacks.")
    return local


def _votes(nodes: dict[str, Any], codes: list[float], n_trees: int) -> Ensemble:
    """The ensemble whose tree ``i`` puts its vote in column ``i`` (forests: for the mode)."""
    n_nodes = len(codes)
    tree_of = np.repeat(np.arange(n_trees), np.diff(np.append(nodes["roots"], n_nodes)))
    per_tree = np.zeros((n_nodes, n_trees))
    per_tree[np.arange(n_nodes), tree_of] = codes
    return Ensemble(
        value=per_tree,
        aggregate="sum",
        base_values=np.zeros(n_trees),
        tree_target=np.arange(n_trees, dtype=np.int64),
        **nodes,
    )


def predict_reference(hyperdt_model: HyperDTModel, X: np.ndarray) -> dict[str, np.ndarray]:
    """The graph's outputs computed in numpy (HyperDT's arithmetic, vectorised)."""
    S = split_columns(hyperdt_model, X)
    values = hyperdt_model.values
    out = predict_output(values, S)
    classes = values.classes  # None: a regressor (values.is_classifier is False)
    if hyperdt_model.votes is None:
        if classes is not None:
            return {"label": classes[np.argmax(out, axis=1)], "probabilities": out}
        return {"variable": out}
    winner = _mode(predict_scores(hyperdt_model.votes, S))
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


def split_columns(hyperdt_model: HyperDTModel, X: np.ndarray) -> np.ndarray:
    """``sin * x[d] - cos * x[t]`` for every split column, in float64, as HyperDT computes it."""
    X = np.asarray(X).astype(np.float64)
    return hyperdt_model.columns_sin * X[:, hyperdt_model.columns_feature] - (
        hyperdt_model.columns_cos * X[:, [hyperdt_model.timelike]]
    )


def _mode(V: np.ndarray) -> np.ndarray:
    """Most frequent value of each row, the smallest on a tie (``scipy.stats.mode``'s rule)."""
    counts = (V[:, :, None] == V[:, None, :]).sum(axis=2)
    best = counts == counts.max(axis=1, keepdims=True)
    return np.where(best, V, np.inf).min(axis=1)


def compile_hyperdt(
    model: Any, *, dtype: str, encoding: str, opset: int, name: str | None = None
) -> Any:
    """The ONNX model of a HyperDT estimator, in an encoding that compares in float64.

    ``model`` may also be its description (`read_hyperdt`), as the graph-hash
    tests store it: the graph depends on nothing else.
    """
    spec = _hyperdt_encoding(encoding)
    hyperdt_model = model if isinstance(model, HyperDTModel) else read_hyperdt(model)
    builder = GraphBuilder(opset)
    builder.reserve("X", "label", "probabilities", "variable")
    trees = _TreeStage(builder, _emit_split_columns(builder, hyperdt_model, dtype), spec)
    if hyperdt_model.values.classes is not None:  # values.is_classifier
        outputs = _classifier_outputs(builder, hyperdt_model, trees)
    else:
        outputs = _regressor_outputs(builder, hyperdt_model, trees)
    graph = builder.points_graph(
        name or f"hyp2onnx_hyperdt_{hyperdt_model.model.estimator_class}",
        dtype,
        hyperdt_model.model.space.n_input_features,
        outputs,
    )
    ml_opset = max((p.ml_opset for p in trees.plans), default=None)
    return finish_model(
        graph,
        hyperdt_model.model,
        opset=opset,
        extra_opsets=[helper.make_opsetid(ML_DOMAIN, ml_opset)] if ml_opset else [],
        encoding=spec.name,
        dtype=dtype,
    )


def _hyperdt_encoding(name: str) -> Encoding:
    """The encoding HyperDT's graph uses when ``name`` is asked for."""
    spec = registered(name)
    if spec.value_bound:
        # HyperDT's graph takes labels from votes and modes, not from summed
        # scores; it keeps the exact encoding's ordered sums.
        spec = registered("exact")
    if spec.float32:
        usable = ", ".join(repr(e.name) for e in ENCODINGS.values() if not e.float32)
        raise ValueError(
            f"HyperDT models export with encoding {usable}, not {name!r}: their splits "
            f"compare float64 products, which the float32 {name!r} encoding cannot."
        )
    return spec


def _emit_split_columns(builder: GraphBuilder, hyperdt_model: HyperDTModel, dtype: str) -> str:
    """HyperDT's split columns ``sin * x[d] - cos * x[t]`` in float64 (``Mul``, ``Mul``, ``Sub``)."""
    x = "X" if dtype == "float64" else builder.cast(STAGE, "X", np.float64)
    features = builder.const(STAGE, "features", hyperdt_model.columns_feature)
    xd = builder.op(STAGE, "Gather", [x, features], axis=1)
    timelike = builder.const(STAGE, "timelike", [hyperdt_model.timelike], np.int64)
    xt = builder.op(STAGE, "Gather", [x, timelike], axis=1)
    products = builder.op(
        STAGE, "Mul", [xd, builder.const(STAGE, "sin", hyperdt_model.columns_sin)]
    )
    subtracted = builder.op(
        STAGE, "Mul", [xt, builder.const(STAGE, "cos", hyperdt_model.columns_cos)]
    )
    return builder.op(STAGE, "Sub", [products, subtracted])


class _TreeStage:
    """The encoding's tree emitter over the split columns; remembers the operators it used."""

    def __init__(self, builder: GraphBuilder, columns: str, spec: Encoding) -> None:
        self.builder, self.columns, self.spec = builder, columns, spec
        self.plans: list[TreePlan] = []

    def __call__(self, ensemble: Ensemble) -> str:
        emit = TREE_EMITTERS[self.spec.name]
        if not self.spec.tree_operator:
            raw = emit(self.builder, self.columns, "float64", ensemble)
        else:
            plan = plan_trees(ensemble, self.spec.name)
            self.plans.append(plan)
            raw = emit(self.builder, self.columns, "float64", ensemble, plan=plan)
        assert isinstance(raw, str)  # value-bound (Guarded) encodings were replaced above
        return raw


def _classifier_outputs(
    builder: GraphBuilder, hyperdt_model: HyperDTModel, trees: _TreeStage
) -> list[onnx.ValueInfoProto]:
    """``probabilities`` (the mean of the leaf fractions) and ``label`` (their first
    largest for a tree, the mode of the trees' labels for a forest)."""
    values = hyperdt_model.values
    assert values.classes is not None
    builder.rename(trees(values), "probabilities")
    labels, label_type = label_tensor(values.classes)
    if hyperdt_model.votes is None:
        winner = builder.op(STAGE, "ArgMax", ["probabilities"], axis=1, keepdims=0)
    else:
        mode = _emit_mode(builder, trees(hyperdt_model.votes), trees.spec)
        winner = builder.cast(STAGE, mode, np.int64)
    classes = builder.const(STAGE, "classes", labels)
    builder.op(STAGE, "Gather", [classes, winner], axis=0, outputs=["label"])
    return [
        helper.make_tensor_value_info("label", label_type, ["N"]),
        helper.make_tensor_value_info(
            "probabilities", onnx_type("float64"), ["N", values.n_outputs]
        ),
    ]


def _regressor_outputs(
    builder: GraphBuilder, hyperdt_model: HyperDTModel, trees: _TreeStage
) -> list[onnx.ValueInfoProto]:
    """``variable``: the leaf value, or for a forest the mode of the trees' values."""
    scores = trees(hyperdt_model.values)
    if hyperdt_model.votes is not None:
        mode = _emit_mode(builder, trees(hyperdt_model.votes), trees.spec)
        axis = builder.const(STAGE, "axis1", [1], np.int64)
        scores = builder.op(STAGE, "Unsqueeze", [mode, axis])
    builder.rename(scores, "variable")
    return [helper.make_tensor_value_info("variable", onnx_type("float64"), ["N", 1])]


def _emit_mode(builder: GraphBuilder, per_tree: str, spec: Encoding) -> str:
    """[N] mode of the [N, T] per-tree values (smallest on a tie), as `_mode`.

    Counts pairwise equalities ([rows, T, T]); the exact encoding does this
    in blocks of rows (a Loop), the standard one for all rows at once.
    """

    def mode(block: GraphBuilder, v: str) -> str:
        rows = block.op(STAGE, "Unsqueeze", [v, block.const(STAGE, "axis2", [2], np.int64)])
        cols = block.op(STAGE, "Unsqueeze", [v, block.const(STAGE, "axis1", [1], np.int64)])
        same = block.cast(STAGE, block.op(STAGE, "Equal", [rows, cols]), np.int32)
        counts = block.op(
            STAGE, "ReduceSum", [same, block.const(STAGE, "axis2b", [2], np.int64)], keepdims=0
        )
        most = _reduce(block, "ReduceMax", counts, "axis1b")
        best = block.op(STAGE, "Equal", [counts, most])
        inf = block.const(STAGE, "inf", np.inf, np.float64)
        candidates = block.op(STAGE, "Where", [best, v, inf])
        return _reduce(block, "ReduceMin", candidates, "axis1c")

    # An encoding without tree operators targets runtimes without sequence operators too.
    if spec.tree_operator:
        winner = by_row_blocks(builder, per_tree, mode, 1, "float64")
    else:
        winner = mode(builder, per_tree)
    return builder.op(STAGE, "Squeeze", [winner, builder.const(STAGE, "axis1d", [1], np.int64)])


def _reduce(builder: GraphBuilder, op: str, x: str, axis_name: str) -> str:
    """``op`` over axis 1, keeping it: the axes an attribute before opset 18, an input from it."""
    if builder.opset < 18:
        return builder.op(STAGE, op, [x], axes=[1], keepdims=1)
    return builder.op(STAGE, op, [x, builder.const(STAGE, axis_name, [1], np.int64)], keepdims=1)


def boundary_rows(
    model: Any, *, per_split: int = 6, ulps_feature: int = 3, ulps_time: int = 2, seed: int = 0
) -> np.ndarray:
    """Adversarial hyperboloid rows at and beside every split of a HyperDT ``model``.

    For each split with ``|cot(theta)| < 1`` (one that crosses the
    hyperboloid), ``per_split`` points exactly on its boundary in Klein
    coordinates (``k_d = cot(theta)``, the other coordinates random) are
    lifted to the hyperboloid and then moved by up to ``ulps_feature`` ulps
    in ``x_d`` and ``ulps_time`` ulps in ``x_t``: the rows a different
    arithmetic would send the other way. Use them with `hyp2onnx.verify`.
    """
    hyperdt_model = read_hyperdt(model)
    rng = np.random.default_rng(seed)
    n_in, t = hyperdt_model.model.space.n_input_features, hyperdt_model.timelike
    spacelike = np.delete(np.arange(n_in), t)
    steps_d = np.arange(-ulps_feature, ulps_feature + 1)
    steps_t = np.arange(-ulps_time, ulps_time + 1)
    rows = []
    for d, sin, cos in zip(
        hyperdt_model.columns_feature, hyperdt_model.columns_sin, hyperdt_model.columns_cos
    ):
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
