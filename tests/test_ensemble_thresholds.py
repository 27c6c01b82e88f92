"""The all-trees-at-once correction equals thresholds.correct_tree tree by tree."""

from __future__ import annotations

import numpy as np
import pytest

from hyp2onnx.correction import shared_rows as _shared_rows
from hyp2onnx.correction.midpoints import CorrectionReport, correct_tree
from hyp2onnx.correction.shared_rows import correct_shared_rows, correct_trees
from hyp2onnx.ir.trees import TreeArrays


def random_tree(rng: np.random.Generator, X: np.ndarray, max_depth: int) -> TreeArrays:
    """A random unbalanced tree whose thresholds are training values (ties) or not."""
    feature, threshold, left, right = [], [], [], []

    def grow(depth: int) -> int:
        node = len(feature)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        if depth < max_depth and rng.random() < 0.8:
            f = int(rng.integers(X.shape[1]))
            feature[node] = f
            # A training value (an exact tie), or anywhere, even outside the data.
            threshold[node] = (
                float(X[rng.integers(X.shape[0]), f]) if rng.random() < 0.7 else rng.uniform(-1, 1)
            )
            left[node] = grow(depth + 1)
            right[node] = grow(depth + 1)
        return node

    grow(0)
    return TreeArrays(
        np.array(feature, dtype=np.int64),
        np.array(threshold),
        np.array(left, dtype=np.int64),
        np.array(right, dtype=np.int64),
    )


def data(n: int, d: int, dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    X = rng.choice(np.linspace(-0.9, 0.9, 19), size=(n, d))  # many repeats
    X[: n // 3] += rng.normal(scale=1e-9, size=(n // 3, d))  # nearly equal
    return X.astype(dtype).astype(np.float64)


@pytest.mark.parametrize("op, dtype", [("<", "float32"), ("<=", "float64"), ("<=", "float32")])
@pytest.mark.parametrize("budget", [0.5, 0.0, np.inf], ids=["default", "all-routed", "no-routing"])
def test_equals_correct_tree(op, dtype, budget, monkeypatch):
    monkeypatch.setattr(_shared_rows, "_ROUTING_BUDGET", budget)
    rng = np.random.default_rng(7)
    X = data(600, 3, dtype, seed=1)
    trees = [random_tree(rng, X, max_depth=int(rng.integers(0, 8))) for _ in range(25)]
    new, report = correct_shared_rows(trees, X, op=op, threshold_dtype=dtype)
    expected = CorrectionReport()
    for tree, got in zip(trees, new, strict=True):
        want, tree_report = correct_tree(tree, X, op=op, threshold_dtype=dtype)
        np.testing.assert_array_equal(got, want)
        expected = expected + tree_report
    assert report == expected
    assert report.n_unreached > 0  # random thresholds leave some sides empty


def test_float32_input_and_row_subsets():
    rng = np.random.default_rng(3)
    X = data(400, 2, "float32", seed=2).astype(np.float32)
    trees = [random_tree(rng, X, max_depth=5) for _ in range(6)]
    shared = np.flatnonzero(rng.random(400) < 0.7)
    new, _ = correct_trees(trees, X, [shared] * 6, op="<", threshold_dtype="float32")
    for tree, got in zip(trees, new, strict=True):
        seen = X[shared].astype(np.float64)
        want, _ = correct_tree(tree, seen, op="<", threshold_dtype="float32")
        np.testing.assert_array_equal(got, want)
    # Different rows per tree: corrected one by one.
    rows = [np.flatnonzero(rng.random(400) < 0.5) for _ in range(6)]
    new, _ = correct_trees(trees, X, rows, op="<", threshold_dtype="float32")
    for tree, r, got in zip(trees, rows, new, strict=True):
        want, _ = correct_tree(tree, X[r].astype(np.float64), op="<", threshold_dtype="float32")
        np.testing.assert_array_equal(got, want)


def test_degenerate_inputs():
    leaf = TreeArrays(np.array([-1]), np.array([0.0]), np.array([-1]), np.array([-1]))
    assert correct_shared_rows([], np.zeros((5, 2)), op="<=") == ([], CorrectionReport())
    new, report = correct_shared_rows([leaf, leaf], np.zeros((5, 2)), op="<=")
    assert report == CorrectionReport() and all(t.tolist() == [0.0] for t in new)
    stump = TreeArrays(
        np.array([0, -1, -1]), np.array([0.5, 0, 0]), np.array([1, -1, -1]), np.array([2, -1, -1])
    )
    new, report = correct_shared_rows([stump], np.zeros((0, 1)), op="<")
    assert report.n_unreached == 1 and new[0][0] == 0.5
    with pytest.raises(ValueError, match="comparison"):
        correct_shared_rows([stump], np.zeros((3, 1)), op=">")
