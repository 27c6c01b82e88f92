"""The numpy work of ``fit`` on the learner's threads gives what one thread gives.

With ``n_jobs`` > 1 the tree space ranks several columns at once, the rank
search sorts several features and walks both ways at once, and the float32
check takes several blocks of rows at once. Oracles: the same calls on one
thread, and the kept reference float32 check (the library's own ``predict``
on every row).
"""

from __future__ import annotations

import numpy as np
import pytest
from _fit_reference import old_float32_keeps_outputs
from test_ensemble_thresholds import data, random_tree

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.correction.shared_rows import correct_shared_rows
from hyp2onnx.correction.tree_space import TreeSpace
from hyp2onnx.estimators import _base as _base_module
from hyp2onnx.estimators._registry import backend_for
from hyp2onnx.ir.crossings import Splits


def test_ranks_on_threads_are_the_ranks_of_one_thread() -> None:
    Xk = data(500, 5, "float64", seed=3)
    Xk[::11, 2] = -0.0  # -0.0 and 0.0 are one value
    one, ranks_one = TreeSpace.fit_transform(Xk, "ranks", "float32", threads=1)
    for threads in (2, 3, 8):
        many, ranks = TreeSpace.fit_transform(Xk, "ranks", "float32", threads=threads)
        assert np.array_equal(ranks, ranks_one)
        for f in range(Xk.shape[1]):
            assert np.array_equal(many.values(f), one.values(f))
            assert np.array_equal(many.image_of(f), one.image_of(f))


def test_a_column_that_is_not_finite_refuses_on_threads_as_on_one() -> None:
    Xk = data(50, 4, "float64", seed=4)
    Xk[7, 3] = np.nan
    columns = lambda: (Xk[:, f] for f in range(4))
    for threads in (1, 2, 4):
        assert TreeSpace.ranks_of_columns(columns(), Xk.shape, "float32", threads=threads) is None


@pytest.mark.parametrize("op, dtype", [("<", "float32"), ("<=", "float64")])
def test_the_search_on_threads_finds_the_thresholds_of_one_thread(op: str, dtype: str) -> None:
    rng = np.random.default_rng(5)
    X = data(800, 4, dtype, seed=2)
    trees = [random_tree(rng, X, max_depth=int(rng.integers(1, 7))) for _ in range(30)]
    one, report_one = correct_shared_rows(trees, X, op=op, threshold_dtype=dtype)
    many, report = correct_shared_rows(trees, X, op=op, threshold_dtype=dtype, threads=2)
    assert report == report_one
    for a, b in zip(many, one, strict=True):
        assert np.array_equal(a, b)


def test_the_float32_check_on_threads_decides_as_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Blocks of 7 rows, two or three at a time: the one row that rounds across a
    threshold sits in the eighth block, beside a block that keeps every output, so a
    check that kept one block's answer for its batch, or skipped blocks, says yes."""
    rng = np.random.default_rng(6)
    k = np.column_stack([rng.uniform(-0.8, 0.8, 300), rng.uniform(-0.4, 0.4, 300)])
    y = (k[:, 0] > 0.1).astype(int)
    model = h.HyperbolicDecisionTreeClassifier(max_depth=3, random_state=0).fit(
        geometry.from_klein(k), y
    )
    t = model.estimator_.tree_.threshold[0]
    below = np.float32(t)
    if float(below) > float(t):
        below = np.nextafter(below, np.float32(-1))
    on = np.column_stack(
        [rng.choice([below, np.nextafter(below, np.float32(1))], 40), rng.uniform(-0.5, 0.5, 40)]
    )
    crossing = [
        row for row in geometry.from_klein(on) if not old_float32_keeps_outputs(model, row[None])
    ]
    assert crossing  # the case is what it says
    far = geometry.from_klein(np.column_stack([rng.uniform(-0.8, -0.5, 49), np.zeros(49)]))
    probe = np.concatenate([far, crossing[:1]])
    backend = backend_for(model.estimator_)
    trees = backend.read_trees(model.estimator_)
    splits = Splits.of(trees, [t.threshold for t in trees], backend.threshold_dtype)
    assert not old_float32_keeps_outputs(model, probe)
    assert old_float32_keeps_outputs(model, far)
    monkeypatch.setattr(_base_module, "_CHECK_ROWS", 7)
    for n_jobs in (1, 2, 3):
        model.estimator_.n_jobs = n_jobs
        assert not model._float32_keeps_outputs(probe, backend, splits)
        assert model._float32_keeps_outputs(far, backend, splits)
