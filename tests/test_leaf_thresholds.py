"""The partitioned correction (the map-reduce one) against the single-machine one.

Oracles: `hyp2onnx.correction.shared_rows.correct_trees` on all rows for
the thresholds, and the booster's own routing (``pred_leaf``) for every
split's nearest values, found here by brute force. The rows are cut into
partitions summarised apart and merged in a random order. Data: Klein values
on a coarse grid with one-ulp nudges (ties and near-ties on every
threshold), so a wrong comparison or precision moves some threshold.
"""

from __future__ import annotations

import numpy as np
import pytest
from _boosting_data import klein_with_ties, labels

from hyp2onnx.correction.shared_rows import correct_trees
from hyp2onnx.correction.summaries import (
    SplitSummary,
    correct_from_summary,
    klein_space,
    summarise,
)
from hyp2onnx.correction.tree_space import KleinPlacer, TreeSpace
from hyp2onnx.estimators._lightgbm import LightGBMBackend
from hyp2onnx.estimators._xgboost import XGBoostBackend
from hyp2onnx.ir.trees import TreeArrays


def _native(backend, task):
    import lightgbm
    import xgboost

    if backend is XGBoostBackend:
        cls = xgboost.XGBRegressor if task == "regression" else xgboost.XGBClassifier
        return cls(n_estimators=12, max_depth=4, max_bin=16, n_jobs=1)
    cls = lightgbm.LGBMRegressor if task == "regression" else lightgbm.LGBMClassifier
    return cls(n_estimators=12, num_leaves=9, min_child_samples=3, max_bin=16, verbose=-1, n_jobs=1)


def _booster_leaves(b, fitted, Xc: np.ndarray) -> np.ndarray:
    """Node (read_trees numbering) each row reaches in every tree, as the booster routes it."""
    if isinstance(b, XGBoostBackend):
        import xgboost

        leaves = fitted.get_booster().predict(xgboost.DMatrix(Xc), pred_leaf=True)
        return np.asarray(leaves).reshape(Xc.shape[0], -1).astype(np.int64)
    leaves = fitted.booster_.predict(Xc, pred_leaf=True, num_iteration=-1)
    leaves = np.asarray(leaves, dtype=np.int64).reshape(Xc.shape[0], -1)
    # LightGBM numbers leaves apart; read_trees puts them after the internal nodes.
    return leaves + np.array([t.n_internal for t in b._model(fitted).trees])


def _subtree(tree: TreeArrays, node: int) -> list[int]:
    if tree.feature[node] < 0:
        return [node]
    return [node, *_subtree(tree, tree.left[node]), *_subtree(tree, tree.right[node])]


def _brute_force(trees, leaves, X):
    """Every split's L and R from the rows' leaves (one split at a time)."""
    L, R = [], []
    for t, tree in enumerate(trees):
        for node in np.flatnonzero(tree.feature >= 0):
            column = X[:, tree.feature[node]].astype(np.float64)
            went_left = np.isin(leaves[:, t], _subtree(tree, tree.left[node]))
            went_right = np.isin(leaves[:, t], _subtree(tree, tree.right[node]))
            L.append(column[went_left].max(initial=-np.inf))
            R.append(column[went_right].min(initial=np.inf))
    return np.array(L), np.array(R)


def _partitioned(trees, Xc, op, rng, n_parts):
    cuts = np.sort(rng.choice(np.arange(1, Xc.shape[0]), n_parts - 1, replace=False))
    parts = [summarise(trees, block, op) for block in np.split(Xc, cuts)]
    rng.shuffle(parts)
    while len(parts) > 1:  # an uneven tree of merges
        i = int(rng.integers(len(parts) - 1))
        parts[i : i + 2] = [parts[i].merge(parts[i + 1])]
    return parts[0]


def _assert_same(a: SplitSummary, b: SplitSummary) -> None:
    for name in ("largest_left", "smallest_right", "below", "above"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("backend", [XGBoostBackend, LightGBMBackend], ids=["xgboost", "lightgbm"])
@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
def test_partitioned_summaries_give_the_single_machine_thresholds(backend, task):
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
    seen = Xc[rows[0]]
    summary = _partitioned(trees, seen, b.op, rng, n_parts=7)
    assert summary.largest_left.dtype == np.dtype(b.compare_dtype)
    # Where the booster itself sends the rows.
    L, R = _brute_force(trees, _booster_leaves(b, fitted, seen), seen)
    np.testing.assert_array_equal(summary.largest_left, L)
    np.testing.assert_array_equal(summary.smallest_right, R)
    got, report = correct_from_summary(
        trees, summary, op=b.op, threshold_dtype=b.threshold_dtype, midpoint="einstein"
    )
    assert report == want_report and report.n_moved > 0
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.view(np.int64), w.view(np.int64))  # bit for bit
    # Merging is exact whatever the grouping: the unpartitioned summary is the same.
    _assert_same(summarise(trees, seen, b.op), summary)


def _stump() -> TreeArrays:
    return TreeArrays(
        np.array([1, -1, -1]), np.array([0.5, 0, 0]), np.array([1, -1, -1]), np.array([2, -1, -1])
    )


def test_hand_computed_stump_and_unreached_side():
    trees = [_stump()]
    X = np.array([[9.0, 0.1], [9.0, 0.4], [9.0, 0.7], [9.0, 0.9]])
    summary = summarise(trees, X, "<=")
    assert summary.largest_left.tolist() == [0.4] and summary.smallest_right.tolist() == [0.7]
    assert summary.below.tolist() == [0.4] and summary.above.tolist() == [0.7]
    new, report = correct_from_summary(trees, summary, op="<=")
    m = np.tanh((np.arctanh(0.4) + np.arctanh(0.7)) / 2)
    assert new[0][0] == m and report.n_moved == 1 and report.n_unreached == 0
    # Only left rows: the split keeps its threshold and is counted as unreached.
    new, report = correct_from_summary(trees, summarise(trees, X[:2], "<="), op="<=")
    assert new[0][0] == 0.5 and report.n_unreached == 1
    # "<": a value equal to the threshold goes right.
    summary = summarise(trees, np.array([[0.0, 0.4], [0.0, 0.5], [0.0, 0.9]]), "<")
    assert summary.largest_left.tolist() == [0.4] and summary.smallest_right.tolist() == [0.5]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_an_empty_partition_is_the_identity_of_the_merge(dtype):
    """A partition without rows (Dask allows them) summarises to the merge's identity."""
    rng = np.random.default_rng(3)
    X = rng.choice([0.1, 0.4, 0.6, 0.9], size=(50, 2)).astype(dtype)
    trees = [_stump(), _stump()]  # two trees: the rank search, not the single-tree route
    empty = summarise(trees, X[:0], "<")
    assert empty.largest_left.dtype == np.dtype(dtype)
    assert np.all(empty.largest_left == -np.inf) and np.all(empty.smallest_right == np.inf)
    assert np.all(empty.below == -np.inf) and np.all(empty.above == np.inf)
    whole = summarise(trees, X, "<")
    _assert_same(empty.merge(whole), whole)
    _assert_same(whole.merge(empty), whole)
    new, report = correct_from_summary(trees, empty, op="<")
    assert [t[0] for t in new] == [0.5, 0.5] and report.n_unreached == 2


def test_bad_summaries_are_refused():
    X = np.zeros((3, 2))
    a = summarise([_stump()], X, "<=")
    with pytest.raises(ValueError, match="different models"):
        a.merge(summarise([_stump()], X.astype(np.float32), "<="))
    with pytest.raises(ValueError, match="different models"):
        a.merge(summarise([_stump(), _stump()], X, "<="))
    with pytest.raises(ValueError, match="does not fit"):
        correct_from_summary([_stump(), _stump()], a, op="<=")
    with pytest.raises(TypeError, match="floating-point"):
        summarise([_stump()], X.astype(np.int64), "<=")
    assert isinstance(a, SplitSummary) and a.nbytes == 4 * 1 * 8


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
        np.array([1, -1, 0, -1, -1]),
        np.array([0.3, 0, 0.0, 0, 0]),
        np.array([1, -1, 3, -1, -1]),
        np.array([2, -1, 4, -1, -1]),
    )
    second = TreeArrays(  # left child of the root splits at 0.9: no row with k1 <= 0.3 is right
        np.array([1, 1, -1, -1, -1]),
        np.array([0.3, 0.9, 0, 0, 0]),
        np.array([1, 3, -1, -1, -1]),
        np.array([2, 4, -1, -1, -1]),
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
    # The routing the summaries see, against one row at a time.
    leaves = np.stack([_route(t, Xc, op) for t in trees], axis=1)
    L, R = _brute_force(trees, leaves, Xc)
    parts = [  # partitions in reverse order (the table's -0/+0 come first the other way)
        summarise(trees, Xc[rows], op) for rows in np.array_split(np.arange(400)[::-1], 5)
    ]
    summary = parts[0]
    for part in parts[1:]:
        summary = summary.merge(part)
    np.testing.assert_array_equal(summary.largest_left, L)
    np.testing.assert_array_equal(summary.smallest_right, R)
    space = klein_space(trees, summary, 2, dtype)
    got, report = correct_from_summary(
        trees, summary, place=KleinPlacer(space, op, compare_dtype=dtype, **kwargs), **kwargs
    )
    assert report == want_report
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.view(np.int64), w.view(np.int64))
    # The unreached split sits between the feature's training values around 0.9.
    assert 0.7 < got[1][1] < 0.97


@pytest.mark.parametrize("op", ["<=", "<"])
def test_a_partition_whose_rows_all_go_one_way(op):
    """No split with a row on its right (the walks to the right have nothing to read):
    the search gives every left value and no right one, as routing does."""
    trees = [_stump(), _stump()]
    X = np.array([[0.0, 0.1], [0.0, 0.2], [0.0, 0.2], [0.0, 0.3]])
    summary = summarise(trees, X, op)
    assert summary.largest_left.tolist() == [0.3, 0.3]
    assert summary.smallest_right.tolist() == [np.inf, np.inf]
    assert summary.above.tolist() == [np.inf, np.inf]
    want, want_report = correct_trees(trees, X, [np.arange(4)] * 2, op=op)
    assert want_report.n_unreached == 2
    new, report = correct_from_summary(trees, summary, op=op)
    assert report == want_report and [t[0] for t in new] == [t[0] for t in want] == [0.5, 0.5]
