"""The parts of the all-trees-at-once neighbour search, each against brute force.

The oracle routes every row down every tree one node at a time in plain
Python-level numpy (no ranks, no boxes), so it shares nothing with the search.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_ensemble_thresholds import random_tree

from hyp2onnx.correction import shared_rows
from hyp2onnx.correction.shared_rows import (
    _node_boxes,
    _order_of_permutation,
    _rank_features,
    _sorting_order,
    _Walks,
    shared_neighbours_and_sides,
)


def _forest(seed: int, op: str) -> tuple[np.ndarray, dict[str, np.ndarray], list[np.ndarray]]:
    """Rows with ties, trees laid end to end, and the rows reaching each node (brute force)."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.uniform(-1, 1, (300, 3)), 2)  # many ties
    trees = [random_tree(rng, X, 5) for _ in range(4)]
    starts = np.cumsum([0] + [t.feature.size for t in trees])[:-1]
    glob = lambda a, s: np.where(a >= 0, a + s, -1)
    flat = {
        "feature": np.concatenate([t.feature for t in trees]),
        "threshold": np.concatenate([t.threshold for t in trees]),
        "left": np.concatenate([glob(t.left, s) for t, s in zip(trees, starts)]),
        "right": np.concatenate([glob(t.right, s) for t, s in zip(trees, starts)]),
        "roots": starts.astype(np.int64),
        "tree_of": np.repeat(np.arange(len(trees)), [t.feature.size for t in trees]),
    }
    reach = [np.zeros(0, dtype=np.int64)] * flat["feature"].size
    todo = [(int(r), np.arange(X.shape[0])) for r in starts]
    while todo:
        node, rows = todo.pop()
        reach[node] = rows
        f = flat["feature"][node]
        if f < 0:
            continue
        x, t = X[rows, f], flat["threshold"][node]
        go_left = x <= t if op == "<=" else x < t
        todo += [
            (int(flat["left"][node]), rows[go_left]),
            (int(flat["right"][node]), rows[~go_left]),
        ]
    return X, flat, reach


def _ranked_boxes(X: np.ndarray, flat: dict[str, np.ndarray], op: str):
    """The rank search's ranks of ``X`` and the boxes of every node of ``flat``'s trees."""
    ranks = _rank_features(X, flat["feature"], flat["threshold"], op)
    boxes = _node_boxes(
        ranks, flat["feature"], flat["left"], flat["right"], flat["roots"], flat["tree_of"]
    )
    return ranks, boxes


@pytest.mark.parametrize("op", ["<=", "<"])
def test_ranks_sort_each_used_feature_and_cut_where_the_comparison_flips(op: str) -> None:
    X, flat, _ = _forest(1, op)
    ranks = _rank_features(X, flat["feature"], flat["threshold"], op)
    n = X.shape[0]
    sorted_values = [ranks.value(c * n + np.arange(n)) for c in range(ranks.u)]
    for c in range(ranks.u):
        assert np.all(np.diff(sorted_values[c]) >= 0)
        np.testing.assert_array_equal(sorted_values[c], np.sort(X[:, ranks.used[c]]))
        np.testing.assert_array_equal(ranks.rank[ranks.order[c], c], np.arange(n))
    for j in np.flatnonzero(flat["feature"] >= 0):
        column = sorted_values[ranks.col[j]]
        t = flat["threshold"][j]
        passes = column <= t if op == "<=" else column < t
        assert ranks.pos[j] == passes.sum() and passes[: ranks.pos[j]].all()


@pytest.mark.parametrize("op", ["<=", "<"])
def test_boxes_hold_exactly_the_rows_that_reach_each_split(op: str) -> None:
    X, flat, reach = _forest(2, op)
    ranks, boxes = _ranked_boxes(X, flat, op)
    assert sorted(boxes.nodes) == list(np.flatnonzero(flat["feature"] >= 0))
    for node, lo, hi in zip(boxes.nodes, boxes.lo, boxes.hi):
        inside = np.all((ranks.rank >= lo) & (ranks.rank < hi), axis=1)
        np.testing.assert_array_equal(np.flatnonzero(inside), np.sort(reach[node]))


@pytest.mark.parametrize("op", ["<=", "<"])
def test_walks_find_the_nearest_value_on_each_side(op: str) -> None:
    X, flat, reach = _forest(3, op)
    ranks, boxes = _ranked_boxes(X, flat, op)
    walks = _Walks.plan(ranks, boxes, flat["tree_of"])
    largest_left = np.full(flat["feature"].size, -np.inf)
    smallest_right = np.full(flat["feature"].size, np.inf)
    routed = walks.walk(-1, largest_left) | walks.walk(1, smallest_right)
    assert not routed.any()  # small trees: every walk within budget, so every split is checked
    for node in boxes.nodes:
        if routed[flat["tree_of"][node]]:
            continue
        x, t = X[reach[node], flat["feature"][node]], flat["threshold"][node]
        go_left = x <= t if op == "<=" else x < t
        assert largest_left[node] == (x[go_left].max() if go_left.any() else -np.inf)
        assert smallest_right[node] == (x[~go_left].min() if (~go_left).any() else np.inf)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_column_of_distinct_ranks_is_ordered_as_argsort_orders_it(
    dtype: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank space's column without ties (each of 1..n once) is ordered by inverting it,
    not sorted: the same order as ``np.argsort``, and every other column (a tie that
    keeps 1 and n, 0, n + 1, a half, NaN, Klein values, none) is sorted as before.
    Then the search's tables with the shortcut equal those of argsort alone. Planted:
    the check that every slot is filled dropped (the tie passes), the check for
    integers dropped (the half passes)."""
    rng = np.random.default_rng(5)
    n = 500
    column = (rng.permutation(n) + 1).astype(dtype)
    np.testing.assert_array_equal(_order_of_permutation(column), np.argsort(column))
    inner = np.flatnonzero((column != 1) & (column != n))
    for value in ("tie", 0.0, n + 1.0, "half", np.nan):
        bad = column.copy()
        if value == "tie":
            bad[inner[0]] = bad[inner[1]]
        elif value == "half":
            bad[inner[0]] += 0.5
        else:
            bad[inner[0]] = value
        assert _order_of_permutation(bad) is None, value
    assert _order_of_permutation(rng.uniform(-1, 1, n).astype(dtype)) is None
    assert _order_of_permutation(np.zeros(0, dtype=dtype)) is None
    # Rows: a column of distinct ranks, one with ties, one of Klein values.
    X = np.column_stack([column, np.round(column / 7), rng.uniform(-1, 1, n)]).astype(dtype)
    feature = np.array([0, 1, 2, 0, -1, -1])
    threshold = np.array([250.0, 30.0, 0.1, 17.5, 0.0, 0.0])
    got = _rank_features(X, feature, threshold, "<=")
    monkeypatch.setattr(shared_rows, "_order_of_permutation", lambda column: None)
    want = _rank_features(X, feature, threshold, "<=")
    for name in ("order", "rank", "pos"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["<=", "<"])
@pytest.mark.parametrize("n_trees", [1, 4])
def test_sides_are_the_nearest_values_either_side_of_each_threshold(
    op: str, dtype: type, n_trees: int
) -> None:
    """``below``/``above`` of every split against brute force over all rows: the largest
    value the comparison sends left, the smallest it sends right; from the rank search's
    sorted columns (several trees) or from distinct values (one tree, routed). Rows with
    ties, -0.0 beside 0.0, thresholds on a value, one ulp beside it, at 0 and outside the
    data; zeros come out +0.0. Planted: the value at the cut read for ``below``, the
    zeros' sign kept."""
    rng = np.random.default_rng(11)
    X = np.round(rng.uniform(-1, 1, (400, 3)), 2).astype(dtype)  # many ties
    X[rng.random(X.shape) < 0.05] = -0.0
    X[rng.random(X.shape) < 0.05] = 0.0
    trees = [random_tree(rng, X.astype(np.float64), 5) for _ in range(n_trees)]
    picks = [0.0, float(X[0, 0]), 5.0, -5.0]
    for t in trees:  # thresholds one float step beside a value, and at 0
        at = np.flatnonzero(t.feature >= 0)
        for j, node in enumerate(at[: len(picks) * 2]):
            value = picks[j % len(picks)]
            step = np.nextafter(dtype(value), dtype(np.inf)) if j >= len(picks) else value
            t.threshold[node] = float(step)
    L, R, below, above = shared_neighbours_and_sides(trees, X, op)
    feature = np.concatenate([t.feature for t in trees])
    threshold = np.concatenate([t.threshold for t in trees])
    for j in np.flatnonzero(feature >= 0):
        x = X[:, feature[j]].astype(np.float64)
        left = x <= threshold[j] if op == "<=" else x < threshold[j]
        assert below[j] == (x[left].max() if left.any() else -np.inf), j
        assert above[j] == (x[~left].min() if (~left).any() else np.inf), j
    zeros = np.concatenate([below[below == 0], above[above == 0]])
    assert zeros.size and not np.signbit(zeros).any()


def test_radix_order_sorts_float32_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long float32 column's two radix passes sort it: the values in its order are
    ``np.sort``'s (negative and positive, -0.0 beside 0.0, ties, the extremes, tiny
    subnormals), and the search's cuts equal those of argsort alone. Planted: the
    sign bit left as it is (negatives last), the passes swapped (low half last)."""
    rng = np.random.default_rng(12)
    n = 1 << 14
    tiny = np.float32(1e-45)
    column = np.concatenate(
        [
            rng.normal(size=n - 10).astype(np.float32),
            np.array([0.0, -0.0, tiny, -tiny, 3.4e38, -3.4e38, 1.0, 1.0, -1.0, -1.0], np.float32),
        ]
    )
    column[rng.random(n) < 0.2] = np.round(column[:1000], 1)[0]  # many ties
    order = _sorting_order(column)
    assert np.array_equal(np.sort(order), np.arange(n))
    np.testing.assert_array_equal(column[order], np.sort(column))
    X = np.column_stack([column, column[::-1]])
    feature = np.array([0, 1, 0, -1])
    threshold = np.array([0.0, float(column[5]), -1.0, 0.0])
    got = _rank_features(X, feature, threshold, "<")
    monkeypatch.setattr(shared_rows, "_RADIX_MIN_ROWS", n + 1)
    want = _rank_features(X, feature, threshold, "<")
    np.testing.assert_array_equal(got.pos, want.pos)
    for c in range(got.u):
        sorted_got = X[got.order[c], got.used[c]]
        np.testing.assert_array_equal(sorted_got, X[want.order[c], want.used[c]])
