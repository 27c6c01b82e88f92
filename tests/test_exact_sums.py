"""Sums that no order changes: the fast graph of forests grown to pure leaves needs no guard.

A forest of unlimited depth holds class fractions 0 and 1 in its leaves, so
every class total is an integer, exact in any order of the sum (onnxruntime
splits a batch's trees among its threads). `hyp2onnx.emit.fast.exact_sum_unit`
says when that holds (every value a multiple of one power of two, the totals
within the significand); `labels_need_guard` then drops the near-tie guard and
the ``If`` on the batch size. The oracles here are independent of that code:
``fractions.Fraction`` for the sums, scikit-learn's own ``predict`` and
``predict_proba`` for the answers, on rows whose votes tie exactly.
"""

from __future__ import annotations

import math
from dataclasses import replace
from fractions import Fraction

import numpy as np
import pytest
from _data import klein_points, labels

import hyp2onnx as h
from hyp2onnx._runtime import all_nodes
from hyp2onnx.emit import fast
from hyp2onnx.emit.strategy import GraphOverrides
from hyp2onnx.emit.trees import tree_of_node
from hyp2onnx.export import describe, read_metadata
from hyp2onnx.export._compile import compile_model
from hyp2onnx.verification import run_onnx, verify

KLEIN = dict(input_geometry="klein")
#: the guard's and the short batches' nodes: none of them may be left in a guard-free graph
GUARD_OPS = {"If", "TopK", "ReduceMin", "NonZero", "Loop"}


def _forest(n_classes: int, n_trees: int, *, max_depth: int | None = None):
    """A forest on rows repeated under another label: exact vote ties where those lead."""
    k = klein_points(300, 3, seed=61)
    y = labels(k, n_classes)
    tied = (y < 2) & (np.arange(y.size) % 3 == 0)  # a third, of classes 0 and 1
    X = np.concatenate([k, k[tied]])
    Y = np.concatenate([y, 1 - y[tied]])
    model = h.HyperbolicRandomForestClassifier(
        n_estimators=n_trees,
        max_depth=max_depth,
        max_features=1,
        bootstrap=False,
        random_state=0,
        **KLEIN,
    ).fit(X, Y)
    rows = np.concatenate([X, klein_points(2_000, 3, seed=62)])
    return model, rows


def _with_tree_values(described, per_tree: np.ndarray):
    """Every leaf of tree ``t`` holds ``per_tree[t]`` (a row of class values)."""
    e = described.ensemble
    leaf = e.feature < 0
    value = np.zeros_like(e.value)
    value[leaf] = per_tree[tree_of_node(e)[leaf]]
    return replace(described, ensemble=replace(e, value=value))


def _unit_by_fractions(values: np.ndarray) -> Fraction:
    """The largest power of two dividing every value, by exact rational arithmetic."""
    unit = Fraction(2) ** 1100
    for v in values[values != 0]:
        while Fraction(float(v)) / unit != int(Fraction(float(v)) / unit):
            unit /= 2
    return unit


def test_the_unit_is_the_largest_power_of_two_dividing_every_value() -> None:
    model, _ = _forest(3, 8)
    described = describe(model)
    rng = np.random.default_rng(3)
    for scale in (0, 7, 30, 60):
        per_tree = np.ldexp(rng.integers(-1000, 1000, size=(8, 3)), -scale)
        per_tree[rng.integers(8), rng.integers(3)] = 0.0
        e = _with_tree_values(described, per_tree).ensemble
        assert Fraction(fast.exact_sum_unit(e)) == _unit_by_fractions(per_tree.ravel())


def test_counts_held_in_float32_stop_at_its_significand() -> None:
    """The multi-class operator writes float32: class totals up to ``2^24`` units are
    counts it holds exactly, one unit more is not (the next float32 is two units on)."""
    model, _ = _forest(3, 8)
    described = describe(model)
    T = described.ensemble.n_trees

    def with_first(first: float):
        per_tree = np.ones((T, 3))
        per_tree[0] = first
        return _with_tree_values(described, per_tree).ensemble

    assert fast.exact_sum_unit(with_first(2.0**24 - (T - 1)), held_in="float32") == 1.0
    assert fast.counts_class_values(with_first(2.0**24 - (T - 1)))
    over = with_first(2.0**24 - (T - 2))
    assert fast.exact_sum_unit(over) == 1.0  # still exact in double
    assert fast.exact_sum_unit(over, held_in="float32") is None
    assert not fast.counts_class_values(over)
    assert float(np.float32(2.0**24 + 1)) != 2.0**24 + 1
    tiny = with_first(2.0**-150)  # a unit below float32's smallest subnormal
    assert fast.exact_sum_unit(tiny, held_in="float32") is None


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_the_size_limit_is_the_significand(dtype: str) -> None:
    """At ``Σ_t max |v| = 2^p · unit`` every order is exact; one unit more and the
    tree order itself rounds (checked here against the exact sum)."""
    model, _ = _forest(3, 8)
    described = describe(model)
    p = fast.SIGNIFICAND_BITS[dtype]
    T = described.ensemble.n_trees

    def with_first(first: float):
        per_tree = np.ones((T, 3))
        per_tree[0] = first
        return replace(_with_tree_values(described, per_tree).ensemble, sum_dtype=dtype), per_tree[
            :, 0
        ]

    fits, _ = with_first(2.0**p - (T - 1))
    assert fast.exact_sum_unit(fits) == 1.0
    over, column = with_first(2.0**p - (T - 2))
    assert fast.exact_sum_unit(over) is None
    in_order = np.asarray(0.0, dtype=dtype)
    for v in column:
        in_order = (in_order + np.asarray(v, dtype=dtype)).astype(dtype)
    assert Fraction(float(in_order)) != sum(Fraction(float(v)) for v in column)
    # values that are no floats of the summation type are never certified
    thirds = replace(fits, value=fits.value / 3.0)
    assert fast.exact_sum_unit(thirds) is None


def _graph_ops(graph) -> set[str]:
    return {node.op_type for node in all_nodes(graph.graph)}


@pytest.mark.parametrize("n_classes", [2, 3])
def test_pure_leaf_forests_keep_the_models_answers_without_a_guard(n_classes: int) -> None:
    model, X = _forest(n_classes, 10)
    e = describe(model).ensemble
    # fractions 0 and 1, and 1/2 where repeated rows under two labels share a leaf
    assert fast.exact_sum_unit(e) == 0.5
    proba = model.predict_proba(X)
    top = np.sort(proba, axis=1)
    assert np.count_nonzero(top[:, -1] == top[:, -2]) > 20  # exact vote ties to decide
    graph = h.to_onnx(model)
    assert not _graph_ops(graph) & GUARD_OPS
    assert "short_batch_rows" not in read_metadata(graph)
    # the multi-class operator's float32 output holds the counts exactly: not rounded
    assert "values_rounded_to" not in read_metadata(graph)
    for threads in (1, 2):
        got = run_onnx(graph, X, threads=threads)
        np.testing.assert_array_equal(got["label"], model.predict(X))
        # binary [T - S1, S1] / T, more classes the counts / T: the model's probabilities
        np.testing.assert_array_equal(got["probabilities"], proba)
    assert verify(model, graph, X).ok


def test_the_binary_class_zero_is_counted_not_complemented() -> None:
    """``1 - S1 / T`` rounds apart from the model's ``S0 / T`` for some vote counts of
    10 trees, which the bit-for-bit check above would catch (so it can fail)."""
    T = 10
    counted = [(T - s) / T for s in range(T + 1)]
    complemented = [1.0 - s / T for s in range(T + 1)]
    assert counted != complemented
    assert all(
        math.isclose(a, b, rel_tol=0, abs_tol=2.0**-52) for a, b in zip(counted, complemented)
    )


def test_exact_sums_that_round_to_a_tie_keep_the_guard() -> None:
    """Class values ``(3/8, 3/8 + 2^-30, 1/4 - 2^-30)`` in every leaf: sums exact in any
    order, class 1 ahead by ``2^-30`` (label 1), but both round to the float32 ``0.375``
    the operator writes: a tie ``ArgMax`` gives to class 0. The gap, a unit over the
    tree count, lies within the tie margin, so the guard stays and rescores them."""
    model, X = _forest(3, 12, max_depth=3)
    described = describe(model)
    per_tree = np.tile([0.375, 0.375 + 2.0**-30, 0.25 - 2.0**-30], (12, 1))
    described = _with_tree_values(described, per_tree)
    e = described.ensemble
    assert fast.exact_sum_unit(e) == 2.0**-30
    assert not fast.counts_class_values(e)  # 4.5 = 2^30 * 4.5 units: past float32's 2^24
    assert fast.labels_need_guard(e, "class_values")

    def labels_of(threads: int, guard: bool = True) -> np.ndarray:
        overrides = GraphOverrides(guard=guard, short_rows=0)
        graph = compile_model(
            described, dtype="float64", encoding="fast", opset=18, overrides=overrides
        )
        return run_onnx(graph, X[:200], threads=threads)["label"]

    for threads in (1, 2):
        assert np.all(labels_of(threads) == 1)
    assert np.all(labels_of(1, guard=False) == 0)  # the input really needs the guard


def test_binary_fractions_that_do_not_add_up_to_one_keep_the_guard() -> None:
    """Every leaf of 4 trees holds ``(1/2 - 2^-52, 1/2)``: sums exact in any order (unit
    ``2^-52``, totals ``2 = 2^53`` units), but class 0's is ``2 - 2^-50``, not
    ``T - S1 = 2``, so the model's label is 1 where ``[T - S1, S1]`` would tie. Such
    leaves keep the ``1 - p1`` graph and its guard."""
    model, X = _forest(2, 4, max_depth=3)
    described = _with_tree_values(describe(model), np.tile([0.5 - 2.0**-52, 0.5], (4, 1)))
    e = described.ensemble
    assert fast.exact_sum_unit(e) == 2.0**-52
    assert 0.0 < fast.complement_defect(e)  # a defect, yet the complement layout
    assert fast.labels_need_guard(e, "complement")
    graph = compile_model(described, dtype="float64", encoding="fast", opset=18)
    for threads in (1, 2):
        assert np.all(run_onnx(graph, X[:200], threads=threads)["label"] == 1)
