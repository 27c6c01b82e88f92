"""The per-leaf-bounds correction (the map-reduce one) against the single-machine one.

Oracle: :func:`hyp2onnx.ensemble_thresholds.correct_trees`, which routes the
rows itself; here the rows' leaves come from the booster's ``pred_leaf`` and
the rows are cut into partitions summarised apart and merged in a random
order. Data: Klein values on a coarse grid with one-ulp nudges (ties and
near-ties on every threshold), so a wrong comparison or precision moves
some threshold.
"""

from __future__ import annotations

import numpy as np
import pytest

from _boosting_data import klein_with_ties, labels
from hyp2onnx.ir.trees import TreeArrays
from hyp2onnx.ensemble_thresholds import correct_trees
from hyp2onnx.estimators._lightgbm import LightGBMBackend
from hyp2onnx.estimators._xgboost import XGBoostBackend
from hyp2onnx.leaf_thresholds import (
    LeafBounds,
    correct_from_bounds,
    klein_space,
    leaf_bounds,
    leaf_layout,
    split_bounds,
)
from hyp2onnx.tree_space import KleinPlacer, TreeSpace


def _native(backend, task):
    import lightgbm
    import xgboost

    if backend is XGBoostBackend:
        cls = xgboost.XGBRegressor if task == "regression" else xgboost.XGBClassifier
        return cls(n_estimators=12, max_depth=4, max_bin=16, n_jobs=1)
    cls = lightgbm.LGBMRegressor if task == "regression" else lightgbm.LGBMClassifier
    return cls(n_estimators=12, num_leaves=9, min_child_samples=3, max_bin=16, verbose=-1, n_jobs=1)


def _partitioned(backend, fitted, trees, Xc, rng, n_parts):
    layout = leaf_layout(trees)
    cuts = np.sort(rng.choice(np.arange(1, Xc.shape[0]), n_parts - 1, replace=False))
    parts = [
        leaf_bounds(layout, backend.leaf_nodes(fitted, block), block)
        for block in np.split(Xc, cuts)
    ]
    rng.shuffle(parts)
    while len(parts) > 1:  # an uneven tree of merges
        i = int(rng.integers(len(parts) - 1))
        parts[i : i + 2] = [parts[i].merge(parts[i + 1])]
    return layout, parts[0]


@pytest.mark.parametrize("backend", [XGBoostBackend, LightGBMBackend], ids=["xgboost", "lightgbm"])
@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_partitioned_bounds_give_the_single_machine_thresholds(backend, task):
    rng = np.random.default_rng(7)
    k = klein_with_ties(3000, 3, seed=5)
    y = labels(k, task, seed=5)
    weights = np.where(rng.random(k.shape[0]) < 0.1, 0.0, 1.0)  # zero weight: not a training row
    b = backend()
    fitted = b.fit(_native(backend, task), k, y, weights)
    trees = b.read_trees(fitted)
    Xc = np.ascontiguousarray(k, dtype=b.compare_dtype)
    rows = b.training_rows(fitted, y, weights)
    want, want_report = correct_trees(
        trees, Xc, rows, op=b.op, threshold_dtype=b.threshold_dtype, midpoint="einstein"
    )
    layout, bounds = _partitioned(b, fitted, trees, Xc[rows[0]], rng, n_parts=7)
    assert bounds.low.dtype == np.dtype(b.compare_dtype)
    got, report = correct_from_bounds(
        trees, layout, bounds, op=b.op, threshold_dtype=b.threshold_dtype, midpoint="einstein"
    )
    assert report == want_report and report.n_moved > 0
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.view(np.int64), w.view(np.int64))  # bit for bit
    # Merging is exact whatever the grouping: the unpartitioned summary is the same.
    whole = leaf_bounds(layout, b.leaf_nodes(fitted, Xc[rows[0]]), Xc[rows[0]])
    np.testing.assert_array_equal(whole.low, bounds.low)
    np.testing.assert_array_equal(whole.high, bounds.high)


def _stump() -> TreeArrays:
    return TreeArrays(
        np.array([1, -1, -1]), np.array([0.5, 0, 0]), np.array([1, -1, -1]), np.array([2, -1, -1])
    )


def test_hand_computed_stump_and_unreached_side():
    trees = [_stump()]
    layout = leaf_layout(trees)
    assert layout.n_leaves == 2 and layout.features.tolist() == [1]
    X = np.array([[9.0, 0.1], [9.0, 0.4], [9.0, 0.7], [9.0, 0.9]])
    leaves = np.where(X[:, 1] <= 0.5, 1, 2)[:, None]
    bounds = leaf_bounds(layout, leaves, X)
    assert bounds.low.ravel().tolist() == [0.1, 0.7] and bounds.high.ravel().tolist() == [0.4, 0.9]
    new, report = correct_from_bounds(trees, layout, bounds, op="<=")
    m = np.tanh((np.arctanh(0.4) + np.arctanh(0.7)) / 2)
    assert new[0][0] == m and report.n_moved == 1 and report.n_unreached == 0
    # Only left rows: the split keeps its threshold and is counted as unreached.
    bounds = leaf_bounds(layout, leaves[:2], X[:2])
    new, report = correct_from_bounds(trees, layout, bounds, op="<=")
    assert new[0][0] == 0.5 and report.n_unreached == 1


def test_bad_summaries_are_refused():
    layout = leaf_layout([_stump()])
    X = np.zeros((3, 2))
    with pytest.raises(ValueError, match="internal node"):
        leaf_bounds(layout, np.zeros((3, 1), dtype=np.int64), X)
    with pytest.raises(ValueError, match="outside"):
        leaf_bounds(layout, np.full((3, 1), 3), X)
    with pytest.raises(ValueError, match="shape"):
        leaf_bounds(layout, np.ones((3, 2), dtype=np.int64), X)
    a = leaf_bounds(layout, np.ones((3, 1), dtype=np.int64), X)
    b = leaf_bounds(layout, np.ones((3, 1), dtype=np.int64), X.astype(np.float32))
    with pytest.raises(ValueError, match="different models"):
        a.merge(b)
    with pytest.raises(ValueError, match="do not fit"):
        correct_from_bounds(
            [_stump(), _stump()], leaf_layout([_stump(), _stump()]), a, op="<="
        )
    assert isinstance(a, LeafBounds) and a.nbytes == 2 * 2 * 1 * 8


def _route(tree: TreeArrays, X: np.ndarray, op: str) -> np.ndarray:
    """Leaf of every row (an oracle apart from the code under test: one row at a time)."""
    out = []
    for x in X:
        node = 0
        while tree.feature[node] >= 0:
            v, t = x[tree.feature[node]], tree.threshold[node]
            node = tree.left[node] if (v <= t if op == "<=" else v < t) else tree.right[node]
        out.append(node)
    return np.array(out)


@pytest.mark.parametrize("op, dtype", [("<=", "float64"), ("<", "float32")])
def test_klein_placement_from_summaries_matches_the_whole_table(op, dtype):
    """Placement from partition summaries (``klein_space``) equals placement from every
    distinct training value (``TreeSpace.fit``), bit for bit, including a split no row
    reaches on one side (placed from the whole feature's values) and +-0 ties."""
    rng = np.random.default_rng(11)
    tiny = np.finfo(dtype).smallest_subnormal  # next to the +-0 tie: thresholds at zero
    X = rng.choice([-0.6, -tiny, -0.0, 0.0, tiny, 0.2, 0.45, 0.7, 0.97], size=(400, 2))
    X[rng.random(400) < 0.3, 1] = np.nextafter(0.45, 1)  # a one-ulp neighbour
    X = X.astype(dtype).astype(np.float64)
    first = TreeArrays(  # root on feature 1, right child on feature 0
        np.array([1, -1, 0, -1, -1]), np.array([0.3, 0, 0.0, 0, 0]),
        np.array([1, -1, 3, -1, -1]), np.array([2, -1, 4, -1, -1]),
    )
    second = TreeArrays(  # left child of the root splits at 0.9: no row with k1 <= 0.3 is right
        np.array([1, 1, -1, -1, -1]), np.array([0.3, 0.9, 0, 0, 0]),
        np.array([1, 3, -1, -1, -1]), np.array([2, 4, -1, -1, -1]),
    )
    trees = [first, second]
    Xc = X.astype(dtype)
    kwargs = dict(op=op, threshold_dtype=dtype, midpoint="einstein")
    whole = TreeSpace.fit(X, "klein", dtype)
    want, want_report = correct_trees(
        trees,
        Xc,
        [np.arange(400)] * 2,
        place=KleinPlacer(whole, op, compare_dtype=dtype, **kwargs),
        **kwargs,
    )
    assert want_report.n_unreached == 1
    layout = leaf_layout(trees)
    leaves = np.stack([_route(t, Xc, op) for t in trees], axis=1)
    parts = [  # partitions in reverse order (the table's -0/+0 come first the other way)
        (leaf_bounds(layout, leaves[rows], Xc[rows]), split_bounds(trees, Xc[rows], op))
        for rows in np.array_split(np.arange(400)[::-1], 5)
    ]
    bounds, around = parts[0]
    for b, a in parts[1:]:
        bounds, around = bounds.merge(b), around.merge(a)
    space = klein_space(trees, layout, bounds, around, 2, dtype)
    got, report = correct_from_bounds(
        trees, layout, bounds, place=KleinPlacer(space, op, compare_dtype=dtype, **kwargs), **kwargs
    )
    assert report == want_report
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.view(np.int64), w.view(np.int64))
    # The unreached split sits between the feature's training values around 0.9.
    assert 0.7 < got[1][1] < 0.97
