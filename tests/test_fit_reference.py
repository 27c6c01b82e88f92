"""Issue 40's faster fit gives today's answers bit for bit.

The reference is the old code, kept verbatim in ``_fit_reference.py``. On
adversarial points (Klein values on a threshold, one float64 step and one
or two float32 steps either side of it, duplicated rows, points at radius
16, weighted fits, categorical columns), for every backend that splits on
features:

- the float32 decision of `HyperbolicTreeModel._float32_keeps_outputs` is the
  old one (which ran the library's ``predict`` on every moved row);
- every row whose outputs change when rounded to float32 is among the rows
  `rows_that_may_cross` hands to ``predict`` (the property the decision
  rests on, checked row by row);
- a fit gives the same ``input_dtype_`` with the old check as with the new.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from _fit_reference import (
    old_correct_trees,
    old_float32_keeps_outputs,
    old_rows_that_may_cross,
    old_tree_neighbours,
    old_tree_space,
    old_ubj_load,
)
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.blocks import Categorical, Euclidean, Hyperbolic
from hyp2onnx.correction import _correct as _correct_module
from hyp2onnx.correction import midpoints as _midpoints_module
from hyp2onnx.correction import shared_rows as _shared_rows_module
from hyp2onnx.correction.midpoints import leaves, tree_neighbours
from hyp2onnx.correction.tree_space import TreeSpace
from hyp2onnx.errors import InvalidPointError, UnsupportedModelError
from hyp2onnx.estimators import _base as _base_module
from hyp2onnx.estimators._base import HyperbolicTreeModel
from hyp2onnx.estimators._registry import backend_for
from hyp2onnx.estimators._xgboost import _ubj_load
from hyp2onnx.ir.crossings import Splits, rows_that_may_cross
from hyp2onnx.ir.trees import CategorySets, Op, TreeArrays, apply, as_compared

BLOCKS = [Hyperbolic(2, model="klein"), Categorical(1)]
BLOCKS_HYPERBOLOID = [Hyperbolic(2), Categorical(1)]


def _klein(n: int, d: int, radius: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    u = rng.normal(size=(n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return u * np.tanh(rng.uniform(0.0, radius, size=(n, 1)))


def _labels(k: np.ndarray) -> np.ndarray:
    return (np.arctan2(k[:, 1], k[:, 0]) > 0.3).astype(int) + (k[:, 0] > 0.5)


# name -> (model factory, geometry ("hyperboloid", "klein" or "blocks"), radius, weighted)
CASES: dict[str, tuple[Callable[[], Any], str, float, bool]] = {
    "tree": (
        lambda: h.HyperbolicDecisionTreeClassifier(max_depth=6, random_state=0),
        "hyperboloid",
        3.0,
        False,
    ),
    "tree_klein": (
        lambda: h.HyperbolicDecisionTreeClassifier(
            max_depth=6, random_state=0, input_geometry="klein"
        ),
        "klein",
        3.0,
        False,
    ),
    "forest_weights": (
        lambda: h.HyperbolicEstimator(RandomForestClassifier(5, max_depth=5, random_state=0)),
        "hyperboloid",
        3.0,
        True,
    ),
    "tree_far": (
        lambda: h.HyperbolicEstimator(DecisionTreeClassifier(max_depth=6, random_state=0)),
        "hyperboloid",
        16.0,
        False,
    ),
    "xgboost": (
        lambda: h.HyperbolicXGBClassifier(n_estimators=4, max_depth=4, n_jobs=1),
        "hyperboloid",
        3.0,
        True,
    ),
    "xgboost_categorical": (
        lambda: h.HyperbolicXGBClassifier(
            n_estimators=4, max_depth=4, n_jobs=1, input_blocks=BLOCKS_HYPERBOLOID
        ),
        "blocks_hyperboloid",
        3.0,
        False,
    ),
    "lightgbm_klein": (
        lambda: h.HyperbolicLGBMClassifier(
            n_estimators=4, num_leaves=15, min_child_samples=2, verbose=-1, input_geometry="klein"
        ),
        "klein",
        3.0,
        True,
    ),
    "lightgbm_categorical": (
        lambda: h.HyperbolicLGBMClassifier(
            n_estimators=4, num_leaves=15, min_child_samples=2, verbose=-1, input_blocks=BLOCKS
        ),
        "blocks",
        3.0,
        False,
    ),
    "catboost": (
        lambda: h.HyperbolicCatBoostClassifier(iterations=4, depth=3, verbose=0, thread_count=1),
        "hyperboloid",
        3.0,
        False,
    ),
}


def _inputs(k: np.ndarray, kind: str, codes: np.ndarray) -> np.ndarray:
    if kind == "blocks":
        return np.column_stack([k, codes])
    if kind == "blocks_hyperboloid":
        return np.column_stack([geometry.from_klein(k), codes])
    return geometry.from_klein(k, kind)


def _training(kind: str, radius: float, weighted: bool, n: int = 400) -> tuple[np.ndarray, ...]:
    k = _klein(n, 2, radius, seed=1)
    codes = np.arange(n) % 4
    y = _labels(k)
    if kind.startswith("blocks"):
        y = (y + (codes == 2)) % 3
    if n > 400:  # noisy labels: bushy trees
        y = np.where(np.random.default_rng(7).random(n) < 0.3, codes % 3, y)
    w = np.random.default_rng(2).uniform(0.0, 3.0, n) if weighted else None
    if w is not None:
        w[::7] = 0.0
    return _inputs(k, kind, codes), y, w, codes


def _probes(model: Any, kind: str, radius: float) -> np.ndarray:
    """Klein points on, and a float64 step and one or two float32 steps beside,
    thresholds of the fitted model; rows duplicated."""
    backend = backend_for(model.estimator_)
    rng = np.random.default_rng(3)
    rows = []
    for tree in backend.read_trees(model.estimator_):
        numeric = (tree.feature >= 0) & (tree.feature < 2)
        if tree.categories is not None:
            numeric &= ~tree.categories.member
        feature, threshold = tree.feature[numeric], tree.threshold[numeric]
        if model.split_index_ is not None:
            threshold = model.split_index_.klein_thresholds(feature, threshold)
        for f, t in zip(feature, threshold, strict=True):
            t32 = np.float32(t)
            near = [t, np.nextafter(t, -1.0), np.nextafter(t, 1.0)]
            near += [float(t32), float(np.nextafter(t32, np.float32(-1)))]
            near += [float(np.nextafter(np.nextafter(t32, np.float32(1)), np.float32(1)))]
            for v in near:
                other = rng.uniform(-1.0, 1.0) * np.sqrt(max(1.0 - v * v, 0.0)) * 0.9
                row = np.empty(2)
                row[f], row[1 - f] = v, other
                if np.sum(row * row) < 1.0:
                    rows.append(row)
    k = np.array(rows)
    k = np.concatenate([k, k[: len(k) // 3]])  # duplicates
    codes = rng.integers(0, 4, size=k.shape[0])
    return _inputs(k, kind, codes)


def _splits(model: Any) -> Splits:
    backend = backend_for(model.estimator_)
    trees = backend.read_trees(model.estimator_)
    return Splits.of(trees, [t.threshold for t in trees], backend.threshold_dtype)


@pytest.mark.parametrize("name", list(CASES))
def test_float32_decision_is_the_old_one(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    make, kind, radius, weighted = CASES[name]
    X, y, w, _ = _training(kind, radius, weighted)
    model = make().fit(X, y, sample_weight=w)
    backend = backend_for(model.estimator_)
    splits = _splits(model)
    for probe in (X, _probes(model, kind, radius)):
        old = old_float32_keeps_outputs(model, probe)
        assert model._float32_keeps_outputs(probe, backend, splits) == old
        # Klein input, handed over as its own Klein coordinates (what fit does).
        klein = probe if kind == "klein" else None
        assert model._float32_keeps_outputs(probe, backend, splits, klein) == old
        with monkeypatch.context() as small_blocks:  # the check in blocks of 7 rows
            small_blocks.setattr(_base_module, "_CHECK_ROWS", 7)
            assert model._float32_keeps_outputs(probe, backend, splits) == old
            assert model._float32_keeps_outputs(probe, backend, splits, klein) == old
        rounded = probe.astype(np.float32).astype(np.float64)
        try:
            seen_in = model._tree_input(rounded)
        except InvalidPointError:
            continue
        own_in = model._tree_input(probe)
        outputs = getattr(model.estimator_, "predict_proba", model.estimator_.predict)
        changed = np.flatnonzero(
            np.any(np.atleast_2d((outputs(own_in) != outputs(seen_in)).T).T, axis=-1)
        )
        crossing = rows_that_may_cross(
            splits,
            own_in,
            seen_in,
            op=backend.op,
            compare_dtype=backend.compare_dtype,
            zero_band=backend.zero_band,
        )
        assert np.isin(changed, crossing).all(), (name, np.setdiff1d(changed, crossing))
    # The probes reach across thresholds: the filter is exercised, not bypassed
    # (float32 Klein input is what a float32 comparison sees anyway: nothing moves).
    assert crossing.size > 0 or name == "tree_klein"


def test_the_probes_change_outputs() -> None:
    """Some probes do get other outputs in float32 (the check can say no)."""
    make, kind, radius, weighted = CASES["lightgbm_klein"]
    X, y, w, _ = _training(kind, radius, weighted)
    model = make().fit(X, y, sample_weight=w)
    assert not old_float32_keeps_outputs(model, _probes(model, kind, radius))


@pytest.mark.parametrize(
    "name", ["tree", "tree_klein", "forest_weights", "xgboost", "lightgbm_klein"]
)
def test_fit_decides_as_before(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    make, kind, radius, weighted = CASES[name]
    X, y, w, _ = _training(kind, radius, weighted)
    new = make().fit(X, y, sample_weight=w).input_dtype_
    monkeypatch.setattr(
        HyperbolicTreeModel,
        "_float32_keeps_outputs",
        lambda self, X, backend, splits, klein=None: old_float32_keeps_outputs(self, X),
    )
    assert make().fit(X, y, sample_weight=w).input_dtype_ == new


def _random_tree(rng: np.random.Generator, values: np.ndarray, depth: int) -> TreeArrays:
    """A full tree of ``depth`` levels: thresholds drawn from ``values`` (feature 0 or 1),
    the nodes on feature 2 set-membership splits of a few codes."""
    n_internal = 2**depth - 1
    n = 2 * n_internal + 1
    feature = np.full(n, -1)
    feature[:n_internal] = rng.integers(0, 3, n_internal)
    threshold = np.zeros(n)
    threshold[:n_internal] = rng.choice(values, n_internal)
    left, right = np.full(n, -1), np.full(n, -1)
    left[:n_internal] = 2 * np.arange(n_internal) + 1
    right[:n_internal] = 2 * np.arange(n_internal) + 2
    codes = np.array([3.0, 2.0**24, 2.0**24 + 1])
    sets = {int(j): rng.choice(codes, 2, replace=False) for j in np.flatnonzero(feature == 2)}
    return TreeArrays(feature, threshold, left, right, CategorySets.from_sets(n, sets))


@pytest.mark.parametrize(
    ("op", "compare_dtype"), [("<=", "float32"), ("<", "float32"), ("<=", "float64")]
)
def test_rows_that_may_cross_hold_every_changed_path(op: Op, compare_dtype: str) -> None:
    """Oracle: the IR's own walk (`hyp2onnx.ir.trees.apply`) of both versions of each row.

    Rows sit on thresholds and one float32/float64 step beside them, codes at
    2**24 + 1 (float32 rounds it to 2**24), values duplicated; each moves by a
    float32 or float64 step or two."""
    trees, a, b = _crossing_rows(np.random.default_rng(5))
    A, B = as_compared(a, compare_dtype), as_compared(b, compare_dtype)
    changed = np.zeros(a.shape[0], dtype=bool)
    for tree in trees:
        changed |= apply(tree, A, op) != apply(tree, B, op)
    splits = Splits.of(trees, [t.threshold for t in trees], "float64")
    crossing = rows_that_may_cross(splits, a, b, op=op, compare_dtype=compare_dtype)
    assert changed.any()
    assert np.isin(np.flatnonzero(changed), crossing).all()


@pytest.mark.parametrize(
    ("op", "compare_dtype"), [("<=", "float32"), ("<", "float32"), ("<=", "float64")]
)
@pytest.mark.parametrize("zero_band", [0.0, 1e-35])
def test_rows_that_may_cross_are_the_old_ones(op: Op, compare_dtype: str, zero_band: float) -> None:
    """One search per moved value picks exactly the rows the old two searches did: the
    rows of the oracle test, and rows with NaN, infinities and values in the zero band."""
    trees, a, b = _crossing_rows(np.random.default_rng(8))
    a[:6, 0] = [np.nan, np.inf, -np.inf, 0.0, 1e-36, -5e-324]
    b[:6, 0] = [0.5, np.inf, 0.25, -0.0, 2e-36, 0.0]
    splits = Splits.of(trees, [t.threshold for t in trees], "float64")
    keywords = {"op": op, "compare_dtype": compare_dtype, "zero_band": zero_band}
    with np.errstate(invalid="ignore"):
        new = rows_that_may_cross(splits, a, b, **keywords)
        old = old_rows_that_may_cross(splits, a, b, **keywords)
    assert new.size and new.size < a.shape[0]
    assert new.tobytes() == old.tobytes()


def _crossing_rows(rng: np.random.Generator) -> tuple[list[TreeArrays], np.ndarray, np.ndarray]:
    """Trees with thresholds on, and a float32 or float64 step beside, shared values;
    rows ``a`` near them (codes in a third column), and ``b``: ``a`` moved."""
    base = rng.uniform(-1.0, 1.0, 40)
    steps = [
        np.nextafter(base.astype(np.float32), np.float32(s)).astype(np.float64) for s in (-1, 1)
    ]
    values = np.concatenate([base, base.astype(np.float32).astype(np.float64), *steps])
    trees = [_random_tree(rng, values, 5) for _ in range(6)]
    near = np.concatenate([values, np.nextafter(values, -2.0), np.nextafter(values, 2.0)])
    a = np.column_stack(
        [rng.choice(near, 3000), rng.choice(near, 3000), rng.choice([3.0, 2.0**24 + 1], 3000)]
    )
    a = np.concatenate([a, a[:500]])
    # b: a moved by up to two float32 steps, or a float64 step, or rounded to float32,
    # as projecting a float32-rounded input moves a Klein value.
    b32 = a.astype(np.float32)
    for _ in range(2):
        b32 = np.nextafter(b32, np.where(rng.random(a.shape) < 0.5, -2, 2).astype(np.float32))
    moves = [b32.astype(np.float64), np.nextafter(a, -2.0), a.astype(np.float32).astype(float)]
    b = np.choose(rng.integers(0, 3, a.shape), moves)
    return trees, a, b


def _same(a: Any, b: Any) -> bool:
    """Equal structure, types, keys in order, and arrays of equal dtype and bytes."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and (a == b or (a != a and b != b))


#: Hand-made UBJSON: containers with and without counts, typed objects and arrays,
#: strings, constants, every number type, NaN, an empty typed array.
HAND_MADE = bytearray(
    b"{U\x01a[$d#U\x02"
    + struct.pack(">ff", np.nan, -0.0)
    + b"U\x01b[i\xffU\x05I\x01\x00l\x00\x00\x01\x00L"
    + struct.pack(">q", -(2**40))
    + b"D"
    + struct.pack(">d", 1e-300)
    + b"d"
    + struct.pack(">f", 3.5)
    + b"SU\x03abcTFZ[$l#U\x00]"
    + b"U\x01c{$S#U\x02U\x01xU\x02hiU\x01yU\x00"
    + b"U\x01d[#U\x02{}[]"
    + b"U\x01e[$U#U\x03\x01\x02\x03}"
)


@pytest.mark.parametrize("kind", ["binary", "multiclass", "two_targets", "categorical"])
def test_ubjson_reads_as_before(kind: str) -> None:
    """The parser reads every XGBoost model as the old one did; arrays stay views into
    the buffer (written thresholds reach the booster)."""
    X, y, _, codes = _training("hyperboloid", 3.0, False)
    params = {"n_estimators": 3, "max_depth": 3, "n_jobs": 1}
    if kind == "categorical":
        X = np.column_stack([X, codes])
        params["input_blocks"] = BLOCKS_HYPERBOLOID
    if kind == "two_targets":
        model = h.HyperbolicXGBRegressor(**params).fit(X, np.column_stack([y, -y]))
    else:
        model = h.HyperbolicXGBClassifier(**params).fit(X, y > 0 if kind == "binary" else y)
    raw = model.estimator_.get_booster().save_raw(raw_format="ubj")
    new, old = _ubj_load(raw), old_ubj_load(raw)
    assert _same(new, old)
    conditions = new["learner"]["gradient_booster"]["model"]["trees"][0]["split_conditions"]
    conditions[0] = 0.25
    assert old_ubj_load(raw)["learner"]["gradient_booster"]["model"]["trees"][0][
        "split_conditions"
    ][0] == np.float32(0.25)


def test_ubjson_hand_made_and_errors() -> None:
    assert _same(_ubj_load(HAND_MADE), old_ubj_load(HAND_MADE))
    for bad in (b"[X]", b"[$dU\x01]", b"{U\x01a[$lU\x01}"):
        with pytest.raises(UnsupportedModelError) as new_error:
            _ubj_load(bytearray(bad))
        with pytest.raises(UnsupportedModelError) as old_error:
            old_ubj_load(bytearray(bad))
        assert str(new_error.value) == str(old_error.value)


def _fitted_state(model: Any) -> tuple[Any, ...]:
    backend = backend_for(model.estimator_)
    trees = backend.read_trees(model.estimator_)
    index = model.split_index_
    return (
        [t.threshold.tobytes() for t in trees],
        model.correction_,
        model.input_dtype_,
        None
        if index is None
        else index.klein_thresholds(trees[0].feature, trees[0].threshold).tobytes(),
    )


MIXED_BLOCKS = [Hyperbolic(2, model="klein"), Euclidean(1), Categorical(1)]

CORRECTION_CASES: dict[str, tuple[Callable[[], Any], str, float, bool]] = {
    **{k: CASES[k] for k in ("tree", "forest_weights", "tree_far", "lightgbm_categorical")},
    "extra_trees_bootstrap": (
        lambda: h.HyperbolicEstimator(
            ExtraTreesClassifier(6, bootstrap=True, max_depth=6, random_state=0)
        ),
        "hyperboloid",
        3.0,
        True,
    ),
    "forest_far_arithmetic": (
        lambda: h.HyperbolicRandomForestClassifier(
            n_estimators=4, max_depth=8, random_state=0, midpoint="arithmetic"
        ),
        "hyperboloid",
        16.0,
        False,
    ),
    # trees sharing their rows, over 255 splits each: routed, not searched
    "extra_trees_shared_bushy": (
        lambda: h.HyperbolicEstimator(ExtraTreesClassifier(3, random_state=0)),
        "hyperboloid_large",
        3.0,
        True,
    ),
    "forest_klein_space": (
        lambda: h.HyperbolicRandomForestClassifier(
            n_estimators=4, max_depth=8, random_state=0, tree_space="klein"
        ),
        "hyperboloid",
        3.0,
        False,
    ),
    "forest_blocks": (
        lambda: h.HyperbolicRandomForestClassifier(
            n_estimators=4, max_depth=6, random_state=0, input_blocks=MIXED_BLOCKS
        ),
        "mixed",
        3.0,
        True,
    ),
}


def _case_training(kind: str, radius: float, weighted: bool) -> tuple[Any, ...]:
    """A correction case's training points, labels and weights: 3000 rows for the
    "_large" kind, a Euclidean and a code column beside Klein points for "mixed"."""
    if kind == "hyperboloid_large":
        X, y, w, codes = _training("hyperboloid", radius, weighted, n=3000)
    else:
        X, y, w, codes = _training("klein" if kind == "mixed" else kind, radius, weighted)
    if kind == "mixed":
        X = np.column_stack([X, np.random.default_rng(4).normal(size=len(X)), codes])
    return X, y, w


@pytest.mark.parametrize("name", list(CORRECTION_CASES))
def test_correction_is_the_old_one(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every corrected threshold, the report, the split index and the input dtype,
    bit for bit, with the old per-tree correction and the new batched one."""
    make, kind, radius, weighted = CORRECTION_CASES[name]
    X, y, w = _case_training(kind, radius, weighted)
    model = make().fit(X, y, sample_weight=w)
    if kind == "hyperboloid_large":  # the case is what it says
        assert min(t.tree_.node_count for t in model.estimator_.estimators_) > 2 * 255
    new = _fitted_state(model)

    def old(
        *args: Any, threads: int = 1, routing: Any = None, memo: Any = None, **kwargs: Any
    ) -> Any:
        # One thread, numpy's routing, neighbours searched again at each placement.
        return old_correct_trees(*args, **kwargs)

    monkeypatch.setattr(_correct_module, "correct_trees", old)
    for module in (_midpoints_module, _shared_rows_module):
        monkeypatch.setattr(module, "tree_neighbours", old_tree_neighbours)
    assert _fitted_state(make().fit(X, y, sample_weight=w)) == new


def _unbalanced_tree(rng: np.random.Generator, X: np.ndarray, max_depth: int) -> TreeArrays:
    """A random tree, deep on some branches and shallow on others, with thresholds at
    training values (ties), one float32 step off them, or anywhere."""
    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []

    def grow(depth: int) -> int:
        node = len(feature)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        if depth < max_depth and rng.random() < (0.95 if depth < 3 else 0.7):
            f = int(rng.integers(X.shape[1]))
            value = float(X[rng.integers(X.shape[0]), f])
            feature[node] = f
            threshold[node] = [
                value,
                float(np.nextafter(np.float32(value), np.float32(np.inf))),
                float(rng.uniform(-1.5, 1.5)),
            ][int(rng.integers(3))]
            left[node] = grow(depth + 1)
            right[node] = grow(depth + 1)
        return node

    grow(0)
    return TreeArrays(*(np.array(a) for a in (feature, threshold, left, right)))


@pytest.mark.parametrize("op", ["<=", "<"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [0, 1, 7, 3000, 70_000])
def test_tree_neighbours_are_the_old_ones(
    op: Op, dtype: str, n: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Leaf-grouped extremes give each node's ``L`` and ``R`` of the old level-by-level
    routing bit for bit (a zero as +0.0: which zero a max keeps followed the row
    order, and every placement adds 0.0): ties on thresholds, duplicate rows,
    signed zeros, values past every threshold, infinities and NaN, deep and
    shallow branches, one row or none, several row blocks (and, at 3000 rows,
    blocks of 7 rows)."""
    if n == 3000:
        monkeypatch.setattr(_midpoints_module, "_BLOCK_ROWS", 7)
    rng = np.random.default_rng(n + len(op) + len(dtype))
    X = np.round(rng.uniform(-1.2, 1.2, (n, 3)), 2)  # many ties
    X[:, 0] = rng.uniform(-1.2, 1.2, n)  # and none: every row may be a node's extreme
    if n >= 7:
        X[:3] = [[0.0, -0.0, 0.0], [-0.0, 0.0, -0.0], [np.inf, -np.inf, np.nan]]
        X[3:7] = X[:4] if n > 7 else X[3:7]
    X = X.astype(dtype)
    data_rows = np.nan_to_num(X, posinf=1.5, neginf=-1.5) if n else np.zeros((1, 3))
    for seed in range(4):
        tree = _unbalanced_tree(np.random.default_rng(seed), data_rows, 12)
        with np.errstate(invalid="ignore"):  # NaN rows
            new, old = tree_neighbours(tree, X, op), old_tree_neighbours(tree, X, op)
        for a, b in zip(new, old, strict=True):
            assert a.dtype == b.dtype == np.float64
            assert a.tobytes() == (b + 0.0).tobytes()


@pytest.mark.parametrize("space", ["ranks", "rapidity", "klein"])
@pytest.mark.parametrize("backend_name", ["sklearn", "lightgbm"])
@pytest.mark.parametrize("weights", [None, "some zero", "all zero"])
def test_tree_space_is_the_old_one(space: str, backend_name: str, weights: str | None) -> None:
    """The map and the learner's input, bit for bit: ranks in one pass now."""
    rng = np.random.default_rng(6)
    k = _klein(300, 3, 3.0, seed=6)
    k[:40] = k[40:80]  # duplicate rows
    k[80:90, 0] = [0.0, -0.0, 1e-36, -1e-36, 5e-324, -5e-324, 1e-35, 2e-35, -1e-35, 0.0]
    k[90:95, 1] = np.nextafter(k[95:100, 1], 1.0)  # one float64 step apart
    k[-1, 0] = -1e-36  # in LightGBM's zero band, the last row of its rank
    w = {None: None, "some zero": rng.uniform(0, 2, 300), "all zero": np.zeros(300)}[weights]
    if weights == "some zero":
        w[::5] = 0.0
    model = (
        h.HyperbolicLGBMClassifier(tree_space=space)
        if backend_name == "lightgbm"
        else h.HyperbolicDecisionTreeClassifier(tree_space=space)
    )
    backend = backend_for(model._make_estimator())
    new, Xt = model._tree_space(backend, k, w)
    old = old_tree_space(model, backend, k, w)
    assert Xt.tobytes() == old.transform(k).tobytes()
    assert (new.space, new.compare_dtype, new.zero_band) == (
        old.space,
        old.compare_dtype,
        old.zero_band,
    )
    for a, b in zip((*new.klein, *new.image), (*old.klein, *old.image), strict=True):
        assert a.tobytes() == b.tobytes()
    # Each feature's image as the learner compares it (a "klein" space makes it when read).
    fitted_on = k if w is None or not (w != 0).any() else k[w != 0]
    zeroed = np.where(np.abs(fitted_on) <= backend.zero_band, 0.0, fitted_on)
    for f in range(k.shape[1]):
        distinct = np.unique(zeroed[:, f]) + 0.0
        want = {
            "ranks": np.arange(1.0, distinct.size + 1.0),
            "klein": as_compared(distinct, backend.compare_dtype),
            "rapidity": as_compared(np.arctanh(distinct), backend.compare_dtype),
        }[space]
        assert new.image_of(f).tobytes() == want.tobytes()
        assert new.values(f).tobytes() == distinct.tobytes()
    # Compact ranks keep no values: each is read off the training rows when asked.
    lean, Xt32 = model._tree_space(backend, k, w, compact=True)
    assert Xt32.astype(np.float64).tobytes() == Xt.tobytes()
    assert not lean.klein or space != "ranks" or weights == "some zero"
    for f in range(k.shape[1]):
        assert lean.values(f).tobytes() == old.klein[f].tobytes()
    assert lean.transform(k[::3]).tobytes() == old.transform(k[::3]).tobytes()


@pytest.mark.parametrize("space", ["ranks", "klein"])
@pytest.mark.parametrize("first", [-0.0, 0.0])
def test_the_zero_kept_is_plus_zero_whatever_the_sort(space: str, first: float) -> None:
    """``np.unique`` keeps whichever of -0.0 and 0.0 its sort puts first (the CPU's
    sort kernels decide); the fitted map keeps +0.0 on every machine."""
    col = np.array([first, -first, 0.5, -0.5, first, 0.25])
    Xk = np.column_stack([col, col[::-1]])
    for fitted in (
        TreeSpace.fit(Xk, space, "float64"),
        TreeSpace.fit_transform(Xk, space, "float64")[0],
        TreeSpace.fit_transform(Xk, space, "float64", lazy=True)[0],
    ):
        for f in range(fitted.n_features):
            u = fitted.values(f)
            zero = u[u == 0.0]
            assert zero.size == 1 and not np.signbit(zero[0])


@pytest.mark.parametrize("op", ["<=", "<"])
@pytest.mark.parametrize("batch", [3, 1 << 16])
@pytest.mark.parametrize("in_order", [0, 8])
def test_rank_search_in_batches_is_the_old_routing(
    op: Op, batch: int, in_order: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rank search's ``L`` and ``R`` of trees sharing their rows, walks looked at in
    batches of a few candidates or all at once, with and without the walking-order
    rank table, are the old routing's (zeros as +0.0), tree by tree."""
    monkeypatch.setattr(_shared_rows_module, "_BATCH", batch)
    monkeypatch.setattr(_shared_rows_module, "_IN_ORDER_MAX_FEATURES", in_order)
    rng = np.random.default_rng(len(op) + batch)
    X = np.round(rng.uniform(-1.2, 1.2, (4000, 6)), 2).astype(np.float32)  # many ties
    X[:, 0] = rng.uniform(-1.2, 1.2, 4000)
    X[:4, 1] = [0.0, -0.0, -0.0, 0.0]
    trees = [_unbalanced_tree(np.random.default_rng(s), X, 5) for s in range(12)]
    largest_left, smallest_right = _shared_rows_module.shared_neighbours(trees, X, op)
    old = [old_tree_neighbours(t, X, op) for t in trees]
    for new, side in ((largest_left, 0), (smallest_right, 1)):
        assert (new + 0.0).tobytes() == (np.concatenate([o[side] for o in old]) + 0.0).tobytes()


COMPACT_CASES = {
    **{k: v for k, v in CASES.items() if not v[3]},  # weighted fits map a subset: float64
    "extra_trees": (
        lambda: h.HyperbolicEstimator(ExtraTreesClassifier(5, max_depth=8, random_state=0)),
        "hyperboloid",
        3.0,
        False,
    ),
    "xgboost_far": (
        lambda: h.HyperbolicXGBClassifier(n_estimators=4, max_depth=5, n_jobs=1),
        "hyperboloid",
        16.0,
        False,
    ),
    "lightgbm_far": (
        lambda: h.HyperbolicLGBMClassifier(
            n_estimators=4, num_leaves=31, min_child_samples=2, verbose=-1
        ),
        "hyperboloid",
        16.0,
        False,
    ),
}


@pytest.mark.parametrize("name", list(COMPACT_CASES))
def test_float32_ranks_fit_the_same_model(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranks handed to the library as float32 (the same integers) give the model of
    float64 ranks bit for bit: thresholds, report, split index, input dtype and
    outputs on points beside every threshold."""
    make, kind, radius, weighted = COMPACT_CASES[name]
    X, y, w, _ = _training(kind, radius, weighted)
    original = HyperbolicTreeModel._tree_space
    dtypes = []

    def ranks_as(dtype: type) -> Callable[..., Any]:
        def tree_space(self: Any, *args: Any, compact: bool = False, **kwargs: Any) -> Any:
            space, Xt = original(self, *args, compact=compact and dtype == np.float32, **kwargs)
            dtypes.append(Xt.dtype)
            return space, Xt

        return tree_space

    monkeypatch.setattr(HyperbolicTreeModel, "_tree_space", ranks_as(np.float32))
    compact = make().fit(X, y, sample_weight=w)
    monkeypatch.setattr(HyperbolicTreeModel, "_tree_space", ranks_as(np.float64))
    wide = make().fit(X, y, sample_weight=w)
    # Codes read natively keep float64 (LightGBM's reach 2**31).
    assert dtypes == [np.float64 if "categorical" in name else np.float32, np.float64]
    assert _fitted_state(compact) == _fitted_state(wide)
    probes = _probes(wide, kind, radius)
    outputs = "predict_proba" if hasattr(wide, "predict_proba") else "predict"
    new, old = getattr(compact, outputs)(probes), getattr(wide, outputs)(probes)
    assert new.tobytes() == old.tobytes()


@pytest.mark.parametrize("name", [*CORRECTION_CASES, *COMPACT_CASES])
def test_values_read_off_the_ranks_fit_the_same_model(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ranks space that holds no values through the library's fit (each read off the
    training rows and their ranks when the correction asks, the Klein rows of
    non-Klein input computed again after the fit) gives the model of one that
    holds them, bit for bit; and the fit does take that path."""
    cases = {**CORRECTION_CASES, **COMPACT_CASES}
    make, kind, radius, weighted = cases[name]
    X, y, w = _case_training(kind, radius, weighted)
    original_correct = HyperbolicTreeModel._correct
    seen: list[TreeSpace] = []

    def correct(self: Any, backend: Any, fitted: Any, Xt: Any, *args: Any) -> Any:
        seen.append(args[-1])
        return original_correct(self, backend, fitted, Xt, *args)

    monkeypatch.setattr(HyperbolicTreeModel, "_correct", correct)
    lean = make().fit(X, y, sample_weight=w)
    eager_fit = TreeSpace.fit_transform.__func__  # type: ignore[attr-defined]

    def eager(cls: Any, *args: Any, lazy: bool = False, **kwargs: Any) -> Any:
        return eager_fit(cls, *args, lazy=False, **kwargs)

    monkeypatch.setattr(TreeSpace, "fit_transform", classmethod(eager))
    held = make().fit(X, y, sample_weight=w)
    assert _fitted_state(lean) == _fitted_state(held)
    probes = X if kind == "mixed" else _probes(held, kind.removesuffix("_large"), radius)
    outputs = "predict_proba" if hasattr(held, "predict_proba") else "predict"
    assert getattr(lean, outputs)(probes).tobytes() == getattr(held, outputs)(probes).tobytes()
    # Where the space is fitted on every row in ranks, none held values.
    if (
        getattr(held, "tree_space", "ranks") == "ranks"
        and not weighted
        and "categorical" not in name
    ):
        assert seen[0].klein == () and seen[0].rows is not None
        assert seen[1].klein != ()


def test_a_bootstrapped_forest_s_rows_come_one_tree_at_a_time() -> None:
    """Each tree's rows are made as the correction reaches the tree (not a list of all),
    again on a second pass, and are scikit-learn's drawn rows of non-zero weight."""
    X, y, w, _ = _training("hyperboloid", 3.0, True)
    model = h.HyperbolicRandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)
    model.fit(X, y, sample_weight=w)
    backend = backend_for(model.estimator_)
    rows = backend.training_rows(model.estimator_, y, w)
    assert not isinstance(rows, (list, tuple))
    drawn = model.estimator_.estimators_samples_
    want = [np.flatnonzero((np.bincount(s, minlength=len(y)) > 0) & (w != 0)) for s in drawn]
    for _ in range(2):
        got = list(rows)
        assert len(got) == len(want)
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.parametrize("bootstrap", [True, False])
def test_trees_routed_on_threads_get_the_thresholds_of_one_thread(bootstrap: bool) -> None:
    """A forest given n_jobs routes its trees' rows that many at a time, one tree a thread:
    every threshold, the report and the input dtype are those of one thread, bit for bit
    (bootstrapped rows made per tree, and rows shared by every tree; an odd count of
    trees leaves a last batch of one)."""
    X, y, w, _ = _training("hyperboloid", 3.0, True, n=2000)

    def fit(n_jobs: int) -> Any:
        forest = ExtraTreesClassifier(7, bootstrap=bootstrap, random_state=0, n_jobs=n_jobs)
        return h.HyperbolicEstimator(forest).fit(X, y, sample_weight=w)

    one = fit(1)
    # Bushy trees: routed, not searched, even where they share their rows.
    assert not _shared_rows_module._searched(backend_for(one.estimator_).read_trees(one.estimator_))
    assert _fitted_state(fit(3)) == _fitted_state(one)


def test_scikit_learn_s_routing_gives_the_numpy_walk_s_leaves() -> None:
    """The correction routes scikit-learn trees' rows with ``tree_.apply``: every row's leaf
    is the numpy walk's (`leaves`) on rows on every threshold, one float32 step either
    side and between, for every tree of a forest; float64 rows get no compiled routing."""
    X, y, _, _ = _training("klein", 3.0, False, n=1000)
    forest = RandomForestClassifier(5, max_depth=8, random_state=0).fit(X.astype(np.float32), y)
    backend = backend_for(forest)
    trees = backend.read_trees(forest)
    rows = [X.astype(np.float32)]
    for tree in trees:
        t = tree.threshold[tree.feature >= 0].astype(np.float32)
        for value in (t, np.nextafter(t, np.float32(-2)), np.nextafter(t, np.float32(2))):
            probe = np.repeat(value[:, None], X.shape[1], axis=1)
            rows += [probe, probe[::-1] * np.float32(0.5)]
    rows32 = np.ascontiguousarray(np.concatenate(rows), dtype=np.float32)
    route = backend.leaf_routing(forest, rows32)
    assert route is not None
    for i, tree in enumerate(trees):
        assert np.array_equal(route(i, rows32), leaves(tree, rows32, "<="))
    assert backend.leaf_routing(forest, rows32.astype(np.float64)) is None
