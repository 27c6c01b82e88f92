"""Isolation trees grown level by level: what growth decided is what the stored splits route.

The rows are adversarial: far points (to radius 16), duplicates, and pairs
one ulp apart in a Klein coordinate, so deep nodes hold rows a single ulp
apart and thresholds clamp onto a row's own value. For every tree the
training rows, routed by ``IsolationTree.apply`` (the stored splits, float64
comparisons, as the graph does), must land in leaves whose counts are the
ones growth recorded, every node's count must be its children's sum and
every child one level below its parent. Fits are deterministic and do not
depend on how many jobs grow them.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import hyp2onnx as h
from hyp2onnx.estimators import _isolation
from hyp2onnx.ir.projection import project

DESIGNS = [
    {"splits": "centred", "threshold_law": "klein"},
    {"splits": "centred", "threshold_law": "distance", "bootstrap": True},
    {"splits": "centred", "threshold_law": "klein", "max_features": 2},
    {"splits": "axis", "threshold_law": "distance"},
    {"splits": "axis", "threshold_law": "distance", "max_features": 2, "bootstrap": True},
]


def _adversarial(n: int, d: int, seed: int) -> np.ndarray:
    """Klein rows: clusters and scattered rows out to radius 16, duplicates, ulp neighbours."""
    rng = np.random.default_rng(seed)
    direction = rng.standard_normal((n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    radius = np.where(rng.random(n) < 0.2, rng.uniform(10.0, 16.0, n), rng.uniform(0.0, 3.0, n))
    k = np.tanh(radius)[:, None] * direction
    k[n // 2 : n // 2 + 40] = k[0]  # duplicates
    pairs = k[rng.integers(0, n, n // 3)]
    column = rng.integers(0, d, pairs.shape[0])
    near = pairs.copy()
    at = np.arange(near.shape[0])
    near[at, column] = np.nextafter(near[at, column], 0.0)  # one ulp nearer the origin
    return np.vstack([k, pairs, near])


def _check_tree(tree: _isolation.IsolationTree, values: np.ndarray, n_rows: int) -> None:
    counts = np.bincount(tree.apply(values), minlength=tree.n_node_samples.size)
    leaf = tree.is_leaf
    assert np.array_equal(counts[leaf], tree.n_node_samples[leaf])
    assert counts[~leaf].sum() == 0
    inner = np.flatnonzero(~leaf)
    left, right = tree.left[inner], tree.right[inner]
    assert np.array_equal(
        tree.n_node_samples[inner], tree.n_node_samples[left] + tree.n_node_samples[right]
    )
    assert (tree.n_node_samples[inner] > 1).all()
    assert np.array_equal(tree.depth[left], tree.depth[inner] + 1)
    assert np.array_equal(tree.depth[right], tree.depth[inner] + 1)
    assert (left > inner).all() and (right == left + 1).all()  # children after their parent
    assert tree.n_node_samples[0] == n_rows and tree.depth[0] == 0


def _on_threshold(tree: _isolation.IsolationTree, values: np.ndarray) -> int:
    """How many (row, split) pairs have the row's tested value exactly on the threshold."""
    inner = np.flatnonzero(~tree.is_leaf)
    if tree.normal is None:
        tested = values[:, tree.feature[inner]]
    else:
        tested = project(values, np.ascontiguousarray(tree.normal[inner].T))
    return int((tested == tree.threshold[inner]).sum())


@pytest.mark.parametrize("params", DESIGNS)
@pytest.mark.parametrize("d", [2, 5])
def test_training_rows_are_routed_by_the_stored_splits_where_growth_put_them(params, d) -> None:
    k = _adversarial(1500, d, d)
    model = h.HyperbolicIsolationForest(
        n_estimators=30, input_geometry="klein", random_state=d, **params
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", h.FarPointWarning)
        model.fit(k)
    on = 0
    for rows, tree in zip(model.estimators_samples_, model.trees_, strict=True):
        _check_tree(tree, k[rows], model.max_samples_)
        on += _on_threshold(tree, k[rows])
    assert on > 0  # some rows sit exactly on a threshold: the ties are exercised


@pytest.mark.parametrize("params", DESIGNS[:2] + DESIGNS[3:4])
def test_fits_are_deterministic_and_do_not_depend_on_the_jobs(params) -> None:
    k = _adversarial(600, 3, 1)
    fits = [
        h.HyperbolicIsolationForest(
            n_estimators=7, input_geometry="klein", random_state=4, n_jobs=jobs, **params
        ).fit(k)
        for jobs in (None, None, 2, 3)
    ]
    for other in fits[1:]:
        for a, b in zip(fits[0].trees_, other.trees_, strict=True):
            for name in ("feature", "threshold", "left", "right", "n_node_samples", "depth"):
                assert np.array_equal(getattr(a, name), getattr(b, name))
            assert (a.normal is None) == (b.normal is None)
            if a.normal is not None:
                assert np.array_equal(a.normal, b.normal)


@pytest.mark.parametrize(("n", "psi"), [(40, 5), (1000, 5), (12, 12), (9, 3)])
def test_subsamples_are_uniform_distinct_and_sorted(n, psi) -> None:
    rng = np.random.RandomState(0)
    seen = np.zeros(n)
    draws = 4000
    for _ in range(draws):
        rows = _isolation._subsample(rng, n, psi, False)
        assert rows.size == psi and (np.diff(rows) > 0).all()
        assert 0 <= rows[0] and rows[-1] < n
        seen[rows] += 1
    expected = draws * psi / n
    assert np.abs(seen - expected).max() <= 5 * np.sqrt(expected)  # each row equally likely


def test_trees_grown_in_small_chunks_are_the_trees_grown_together(monkeypatch) -> None:
    """Large subsamples grow a few trees at a time (memory); the trees are the same."""
    k = _adversarial(600, 3, 2)

    def fit():
        model = h.HyperbolicIsolationForest(n_estimators=5, input_geometry="klein", random_state=1)
        return model.fit(k).trees_

    together = fit()
    monkeypatch.setattr(_isolation, "_ROWS_AT_ONCE", 300)  # 256 rows a tree: one at a time
    for a, b in zip(together, fit(), strict=True):
        assert np.array_equal(a.threshold, b.threshold) and np.array_equal(a.normal, b.normal)
        assert np.array_equal(a.n_node_samples, b.n_node_samples)
