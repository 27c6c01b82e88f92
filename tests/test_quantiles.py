"""The "quantiles" tree space's pieces: the mergeable sketch and the bucket map.

Oracles independent of the code under test: ``np.unique`` for exact sketches,
and brute force over every bucket boundary and one ulp either side for the
Klein thresholds of bucket splits.
"""

from __future__ import annotations

import numpy as np
import pytest

from hyp2onnx.correction.quantiles import QuantileMap, QuantileSketch
from hyp2onnx.ir.trees import TreeArrays


def _values(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.choice(np.linspace(-0.9, 0.9, 40), size=(n, 3))
    v[::7] = np.nextafter(v[::7], 1.0)  # near-ties
    v[::11, 0] = -0.0
    return v


def test_small_sketches_are_exact_and_merge_exactly():
    X = _values(600, 0)
    whole = QuantileSketch.of(X, size=1000)
    parts = [QuantileSketch.of(X[a:b], size=1000) for a, b in ((0, 100), (100, 101), (101, 600))]
    merged = parts[0].merge(parts[2]).merge(parts[1])
    for sketch in (whole, merged):
        for f in range(3):
            u, counts = np.unique(X[:, f] + 0.0, return_counts=True)
            np.testing.assert_array_equal(sketch.values[f], u)
            np.testing.assert_array_equal(sketch.weights[f], counts)
    assert merged.max_norm2 == whole.max_norm2 == np.max(np.sum(X * X, axis=1))


@pytest.mark.parametrize("size", [2, 5, 64])
def test_compressed_sketches_stay_bounded_and_keep_the_ends_and_weight(size):
    rng = np.random.default_rng(size)
    X = rng.normal(size=(5000, 2)) * np.exp(-rng.uniform(0, 30, size=(5000, 2)))
    sketch = QuantileSketch.of(X[:10], size)
    for start in range(10, 5000, 700):
        sketch = sketch.merge(QuantileSketch.of(X[start : start + 700], size))
    for f in range(2):
        v, w = sketch.values[f], sketch.weights[f]
        assert v.size <= size and np.all(np.diff(v) > 0)
        assert v[0] == X[:, f].min() and v[-1] == X[:, f].max()
        assert w.sum() == 5000
    assert sketch.nbytes <= 2 * 2 * 8 * size
    with pytest.raises(ValueError, match="at least 2"):
        QuantileSketch.of(X, 1)


def test_near_is_the_largest_norm_within_the_radius():
    k = np.array([[np.tanh(4.9), 0.0], [0.1, 0.2]])
    assert QuantileSketch.of(k).near(5.0)
    far = np.array([[0.0, np.tanh(5.1)]])
    assert not QuantileSketch.of(k).merge(QuantileSketch.of(far)).near(5.0)


def test_the_map_never_misorders_and_merges_only_within_a_bucket():
    edges = np.array([-0.5, 0.0, 1e-300, 0.25, 0.9999999999999])
    qmap = QuantileMap((edges,))
    probe = np.unique(
        np.concatenate(
            [edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf), [-1.0, 1.0]]
        )
    )
    b = qmap.transform(probe[:, None])[:, 0]
    assert np.all(np.diff(b) >= 0)
    np.testing.assert_array_equal(b, 1 + np.searchsorted(edges, probe, side="left"))
    # Each edge closes its bucket: the edge and the value one ulp above are apart.
    np.testing.assert_array_equal(
        qmap.transform(np.nextafter(edges, np.inf)[:, None])[:, 0],
        qmap.transform(edges[:, None])[:, 0] + 1,
    )
    # LightGBM's zero band reads as 0.
    banded = QuantileMap((edges,), zero_band=1e-35)
    assert banded.transform(np.array([[1e-36]]))[0, 0] == banded.transform(np.array([[0.0]]))[0, 0]


@pytest.mark.parametrize("op", ["<", "<="])
def test_bucket_splits_are_float64_klein_splits(op):
    """Brute force: for every learner threshold (integers, halves, outside the range),
    ``b(k) op t`` equals the Klein split of the Klein tree on every edge and one ulp
    either side."""
    edges = np.sort(np.random.default_rng(1).uniform(-1, 1, 30))
    qmap = QuantileMap((edges,))
    t = np.concatenate([np.arange(-1.0, 33.0), np.arange(-1.0, 33.0) + 0.5, [1e9, -1e9]])
    tree = TreeArrays(
        feature=np.zeros(t.size, dtype=np.int64),
        threshold=t,
        left=np.zeros(t.size, dtype=np.int64),
        right=np.zeros(t.size, dtype=np.int64),
    )
    (klein_tree,) = qmap.klein_trees([tree], op)
    k = np.concatenate([edges, np.nextafter(edges, -2), np.nextafter(edges, 2), [-1.0, 1.0]])
    b = qmap.transform(k[:, None])[:, 0]
    compare = np.less if op == "<" else np.less_equal
    for j in range(t.size):
        np.testing.assert_array_equal(
            compare(k, klein_tree.threshold[j]), compare(b, t[j]), err_msg=f"threshold {t[j]}"
        )


@pytest.mark.parametrize("n", [300, 9000])  # searched as given, and sorted first
@pytest.mark.parametrize("zero_band", [0.0, 1e-3])
def test_buckets_count_the_edges_below_each_value(n, zero_band):
    """Each value's bucket is one more than the number of edges strictly below it, counted
    by `bisect` value by value (the oracle): values on an edge, one float64 step either
    side, repeated values, -0.0 and 0.0, values beyond the first and last edge."""
    import bisect

    rng = np.random.default_rng(7)
    edges = [np.unique(rng.uniform(-0.9, 0.9, size=m)) for m in (1, 40, 700)]
    edges[1] = np.unique(np.concatenate([edges[1], [0.0, 5e-4]]))
    columns = []
    for e in edges:
        on = rng.choice(e, size=n // 4)
        near = np.concatenate([np.nextafter(on, -np.inf), np.nextafter(on, np.inf)])
        rest = rng.uniform(-1.0, 1.0, size=n - on.size - near.size - 4)
        col = np.concatenate([on, near, rest, [-0.0, 0.0, -0.99, 0.99]])
        columns.append(rng.permutation(col))
    X = np.column_stack(columns)
    got = QuantileMap(tuple(edges), zero_band).transform(X)
    read = np.where(np.abs(X) <= zero_band, 0.0, X)
    expected = np.array(
        [[bisect.bisect_left(e.tolist(), v) + 1.0 for e, v in zip(edges, row)] for row in read]
    )
    np.testing.assert_array_equal(got, expected)
