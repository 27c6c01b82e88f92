"""Threshold placement, dtype-safe rounding and the per-node correction (Algorithm 1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor
from sklearn.tree import DecisionTreeClassifier

from hyp2onnx import geometry
from hyp2onnx.correction.midpoints import CorrectionReport, correct_tree, place_thresholds
from hyp2onnx.estimators._sklearn import SklearnBackend
from hyp2onnx.ir.trees import TreeArrays, apply, as_compared, round_threshold, walk_levels
from tests._data import klein_points, labels

F32_BELOW_ONE = float(np.nextafter(np.float32(1), np.float32(0)))  # 1 - 2**-24


def neighbour_pairs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """float32-representable pairs L < R: random ones, adjacent float32 values, values near +-1."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, 3000).astype(np.float32)
    b = rng.uniform(-1, 1, 3000).astype(np.float32)
    L, R = np.minimum(a, b), np.maximum(a, b)
    keep = L < R
    L, R = L[keep], R[keep]
    adjacent_L = rng.uniform(-1, 1, 500).astype(np.float32)
    adjacent_R = np.nextafter(adjacent_L, np.float32(2))
    edges_L = np.array([F32_BELOW_ONE, 0.9999, -1.0, -1.0, 0.0, -F32_BELOW_ONE, -1e-30], np.float32)
    edges_R = np.array([1.0, F32_BELOW_ONE, -F32_BELOW_ONE, 1.0, 1e-45, -0.5, 1e-30], np.float32)
    L = np.concatenate([L, adjacent_L, edges_L]).astype(np.float64)
    R = np.concatenate([R, adjacent_R, edges_R]).astype(np.float64)
    assert np.all(L < R)
    return L, R


def is_float32(t: np.ndarray) -> np.ndarray:
    return t.astype(np.float32).astype(np.float64) == t


# -- place_thresholds ---------------------------------------------------------


@pytest.mark.parametrize("threshold_dtype", ["float64", "float32"])
@pytest.mark.parametrize("midpoint", ["einstein", "arithmetic"])
def test_placed_thresholds_keep_both_neighbours_on_their_side(
    threshold_dtype: str, midpoint: str
) -> None:
    L, R = neighbour_pairs()
    le = place_thresholds(L, R, op="<=", threshold_dtype=threshold_dtype, midpoint=midpoint)
    assert np.all(L <= le) and np.all(le < R)
    lt = place_thresholds(L, R, op="<", threshold_dtype=threshold_dtype, midpoint=midpoint)
    assert np.all(L < lt) and np.all(lt <= R)
    # The routing a backend makes, on the values it compares (float32 inputs).
    L32, R32 = L.astype(np.float32), R.astype(np.float32)
    if threshold_dtype == "float32":
        assert np.all(is_float32(le)) and np.all(is_float32(lt))
        le32, lt32 = le.astype(np.float32), lt.astype(np.float32)
        assert np.all(L32 <= le32) and np.all(~(R32 <= le32))
        assert np.all(~(L32 >= lt32)) and np.all(R32 >= lt32)
    else:
        assert np.all(L32 <= le) and np.all(~(R32 <= le))


def test_float64_thresholds_are_strictly_between_float32_neighbours() -> None:
    # scikit-learn: float32 values, float64 thresholds. There is always room.
    L, R = neighbour_pairs(seed=1)
    t = place_thresholds(L, R, op="<=")
    ideal = L == -1.0  # an ideal left endpoint: the midpoint is that endpoint (its limit)
    assert ideal.sum() == 2
    assert np.all((L < t) & (t < R) | ideal)
    np.testing.assert_array_equal(t[ideal], [-1.0, 0.0])  # (-1, -0.99999994) and (-1, 1)


def test_einstein_placement_is_the_einstein_midpoint_when_it_fits() -> None:
    L, R = neighbour_pairs(seed=2)
    m = geometry.einstein_midpoint(L, R)
    inside = (L < m) & (m < R)
    assert inside.mean() > 0.8
    np.testing.assert_array_equal(place_thresholds(L, R, op="<=")[inside], m[inside])
    # float32 storage: the nearest float32 on the safe side of m.
    down = place_thresholds(L, R, op="<=", threshold_dtype="float32")
    up = place_thresholds(L, R, op="<", threshold_dtype="float32")
    np.testing.assert_array_equal(down[inside], round_threshold(m[inside], "float32", "down"))
    np.testing.assert_array_equal(up[inside], round_threshold(m[inside], "float32", "up"))


def test_arithmetic_placement_is_scikit_learns_sum_of_halves() -> None:
    L, R = neighbour_pairs(seed=3)
    np.testing.assert_array_equal(
        place_thresholds(L, R, op="<=", midpoint="arithmetic"), L / 2 + R / 2
    )


def test_near_boundary_neighbours() -> None:
    # Far points collapse to float32 values next to +-1; the threshold still separates them.
    t = place_thresholds(np.array([F32_BELOW_ONE]), np.array([1.0]), op="<=")
    assert F32_BELOW_ONE < t[0] < 1.0
    t = place_thresholds(np.array([-1.0]), np.array([-F32_BELOW_ONE]), op="<")
    assert -1.0 < t[0] < -F32_BELOW_ONE
    below, one = np.array([F32_BELOW_ONE]), np.array([1.0])
    assert place_thresholds(below, one, op="<=", threshold_dtype="float32")[0] == F32_BELOW_ONE
    assert place_thresholds(below, one, op="<", threshold_dtype="float32")[0] == 1.0


def test_place_thresholds_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="L < R"):
        place_thresholds(np.array([0.5]), np.array([0.5]), op="<=")
    with pytest.raises(ValueError, match="midpoint must be"):
        bad_midpoint: Any = "geometric"
        place_thresholds(np.array([0.1]), np.array([0.5]), op="<=", midpoint=bad_midpoint)
    with pytest.raises(ValueError, match="unknown comparison"):
        place_thresholds(np.array([0.1]), np.array([0.5]), op=">")  # type: ignore[arg-type]


# -- round_threshold ------------------------------------------------------------


def test_round_threshold_direction() -> None:
    rng = np.random.default_rng(4)
    t = np.concatenate([rng.uniform(-1, 1, 5000), rng.normal(size=5000) * 1e3, [0.0, 1.0, -1.0]])
    down = round_threshold(t, "float32", "down")
    up = round_threshold(t, "float32", "up")
    assert np.all(is_float32(down)) and np.all(is_float32(up))
    assert np.all(down <= t) and np.all(up >= t)
    # Tight: the next float32 beyond is on the other side of t.
    assert np.all(np.nextafter(down.astype(np.float32), np.float32(np.inf)) > t)
    assert np.all(np.nextafter(up.astype(np.float32), np.float32(-np.inf)) < t)
    # Round-to-nearest would go the wrong way for about half of them.
    nearest = t.astype(np.float32).astype(np.float64)
    assert 0.3 < np.mean(nearest > t) < 0.7
    # float32 values and float64 storage are unchanged.
    exact = t.astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(round_threshold(exact, "float32", "down"), exact)
    np.testing.assert_array_equal(round_threshold(exact, "float32", "up"), exact)
    np.testing.assert_array_equal(round_threshold(t, "float64", "down"), t)
    with pytest.raises(ValueError, match="direction"):
        round_threshold(t, "float32", "nearest")  # type: ignore[arg-type]


# -- correct_tree on a hand-built tree ------------------------------------------


def hand_tree() -> TreeArrays:
    """Node 0: x0 <= 0; node 1 (left): x1 <= 0.5; node 4 (right): x1 <= -0.5; node 5: x0 <= 0.9."""
    return TreeArrays(
        feature=np.array([0, 1, -1, -1, 1, 0, -1, -1, -1]),
        threshold=np.array([0.0, 0.5, -2.0, -2.0, -0.5, 0.9, -2.0, -2.0, -2.0]),
        left=np.array([1, 2, -1, -1, 5, 6, -1, -1, -1]),
        right=np.array([4, 3, -1, -1, 8, 7, -1, -1, -1]),
    )


HAND_X = np.array(
    [
        [-0.6, 0.2],  # node 0 left, node 1 left
        [-0.2, 0.9],  # node 0 left, node 1 right
        [-0.4, -0.3],  # node 0 left, node 1 left
        [0.1, -0.7],  # node 0 right, node 4 left, node 5 left
        [0.7, 0.6],  # node 0 right, node 4 right: its x1 = 0.6 must not count at node 1
        [0.3, -0.9],  # node 0 right, node 4 left, node 5 left
    ]
)


def test_correct_tree_uses_each_nodes_own_rows() -> None:
    tree = hand_tree()
    new, report = correct_tree(tree, HAND_X, op="<=")
    expected_LR = {0: (-0.2, 0.1), 1: (0.2, 0.9), 4: (-0.7, 0.6)}
    for node, (L, R) in expected_LR.items():
        expected = np.tanh((np.arctanh(L) + np.arctanh(R)) / 2)
        assert new[node] == pytest.approx(expected, abs=1e-15), node
    # Node 5 (x0 <= 0.9) sees rows 3 and 5 (x0 = 0.1, 0.3): nothing goes right.
    assert new[5] == 0.9
    # Leaves keep their value.
    np.testing.assert_array_equal(new[tree.feature < 0], -2.0)
    assert report == CorrectionReport(n_splits=4, n_moved=3, n_unreached=1)
    # The rows still reach the same leaves.
    moved = tree._replace(threshold=new)
    np.testing.assert_array_equal(apply(moved, HAND_X, "<="), apply(tree, HAND_X, "<="))


def test_correct_tree_strict_comparison_and_float32_storage() -> None:
    tree = hand_tree()
    X = HAND_X.astype(np.float32).astype(np.float64)
    new, report = correct_tree(tree, X, op="<", threshold_dtype="float32", midpoint="arithmetic")
    f32 = lambda v: float(np.float32(v))
    assert new[0] == round_threshold(np.array([f32(-0.2) / 2 + f32(0.1) / 2]), "float32", "up")[0]
    assert f32(-0.2) < new[0] <= f32(0.1)
    assert is_float32(new[[0, 1, 4]]).all()
    assert report.n_unreached == 1
    np.testing.assert_array_equal(apply(tree._replace(threshold=new), X, "<"), apply(tree, X, "<"))


def test_correct_tree_with_no_rows_changes_nothing() -> None:
    tree = hand_tree()
    new, report = correct_tree(tree, np.empty((0, 2)), op="<=")
    np.testing.assert_array_equal(new, tree.threshold)
    assert report == CorrectionReport(n_splits=4, n_moved=0, n_unreached=4)


def test_walk_levels_yields_each_row_once_per_level() -> None:
    tree = hand_tree()
    seen = [(r.tolist(), nodes.tolist()) for r, nodes, _, _ in walk_levels(tree, HAND_X, "<=")]
    assert seen == [
        ([0, 1, 2, 3, 4, 5], [0, 0, 0, 0, 0, 0]),
        ([0, 1, 2, 3, 4, 5], [1, 1, 1, 4, 4, 4]),
        ([3, 5], [5, 5]),
    ]


# -- against scikit-learn's own trees ---------------------------------------------


def fitted_tree(
    seed: int = 0, n: int = 3000, **params: object
) -> tuple[DecisionTreeClassifier, np.ndarray]:
    k = klein_points(n, 3, seed=seed, max_radius=5.0)
    X32 = k.astype(np.float32)
    return DecisionTreeClassifier(random_state=seed, **params).fit(X32, labels(k, seed=seed)), X32


def test_walk_matches_scikit_learn_apply() -> None:
    est, X32 = fitted_tree(max_depth=9)
    (tree,) = SklearnBackend().read_trees(est)
    np.testing.assert_array_equal(apply(tree, as_compared(X32, "float32"), "<="), est.apply(X32))
    # Float32 storage and Fortran order walk the same way.
    np.testing.assert_array_equal(apply(tree, np.asfortranarray(X32), "<="), est.apply(X32))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_arithmetic_correction_reproduces_scikit_learn_thresholds_exactly(seed: int) -> None:
    est, X32 = fitted_tree(seed=seed)
    (tree,) = SklearnBackend().read_trees(est)
    new, report = correct_tree(tree, X32, op="<=", midpoint="arithmetic")
    assert report.n_splits > 100 and report.n_moved == 0 and report.n_unreached == 0
    np.testing.assert_array_equal(new, est.tree_.threshold)


def test_arithmetic_correction_reproduces_each_forest_tree() -> None:
    k = klein_points(1500, 2, seed=5)
    X32 = k.astype(np.float32)
    forest = RandomForestRegressor(n_estimators=4, random_state=0).fit(X32, k[:, 0] * k[:, 1])
    backend = SklearnBackend()
    rows = backend.training_rows(forest, k[:, 0], None)
    for est, tree, r in zip(forest.estimators_, backend.read_trees(forest), rows, strict=True):
        new, report = correct_tree(tree, X32[r], op="<=", midpoint="arithmetic")
        assert report.n_moved == 0
        np.testing.assert_array_equal(new, est.tree_.threshold)


@pytest.mark.parametrize("seed", [0, 3])
def test_corrected_thresholds_lie_strictly_between_their_neighbours(seed: int) -> None:
    """Brute force per node: the rows that reach it, their values, the two nearest."""
    est, X32 = fitted_tree(seed=seed, max_depth=8)
    (tree,) = SklearnBackend().read_trees(est)
    new, _ = correct_tree(tree, X32, op="<=")
    path = est.decision_path(X32).tocsc()
    checked = 0
    for node in np.flatnonzero(tree.feature >= 0):
        reach = path[:, node].nonzero()[0]
        values = X32[reach, tree.feature[node]].astype(np.float64)
        L = values[values <= tree.threshold[node]].max()
        R = values[values > tree.threshold[node]].min()
        assert L < new[node] < R
        assert new[node] == geometry.einstein_midpoint(np.array([L]), np.array([R]))[0]
        checked += 1
    assert checked > 50
