"""The standard-operator encoding: no ai.onnx.ml, same outputs as the exact encoding.

Both tree walks (perfect layout and child pointers) are checked against the
exact encoding bit for bit, for every backend, on random, threshold-adjacent
and far rows, in onnxruntime and in the reference evaluator; and so are
ensembles whose trees are walked in several depth groups and put back in
tree order for the sum (LightGBM with 31 leaves, unlimited-depth forests).
Planted bugs each of these tests caught: the groups' columns left in group
order; the deepest group walked one step short; the perfect walk one level
short.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from _data import labels, points, targets
from onnx import numpy_helper
from test_export import adversarial_klein

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.emit import standard
from hyp2onnx.export import to_onnx
from hyp2onnx.verification import reference_evaluator, run_onnx


def _models():
    return {
        "tree_clf": (h.HyperbolicDecisionTreeClassifier(max_depth=5, random_state=0), 3),
        "forest_clf": (h.HyperbolicRandomForestClassifier(n_estimators=4, random_state=0), 2),
        "forest_reg": (
            h.HyperbolicRandomForestRegressor(n_estimators=3, max_depth=6, random_state=0),
            0,
        ),
        "xgb_multi": (h.HyperbolicXGBClassifier(n_estimators=6, max_depth=3, n_jobs=1), 4),
        "lgbm_binary": (h.HyperbolicLGBMClassifier(n_estimators=6, verbose=-1, n_jobs=1), 2),
        "lgbm_reg": (h.HyperbolicLGBMRegressor(n_estimators=6, verbose=-1, n_jobs=1), 0),
    }


@pytest.fixture(params=["perfect", "pointer"])
def strategy(request, monkeypatch):
    monkeypatch.setattr(standard, "choose_strategy", lambda depth: request.param)
    return request.param


@pytest.mark.parametrize(
    "geometry_name, curvature", [("hyperboloid", -1.0), ("poincare", -0.6), ("klein", -2.5)]
)
@pytest.mark.parametrize("name", list(_models()))
def test_standard_equals_exact(name, geometry_name, curvature, strategy):
    model, n_classes = _models()[name]
    model.set_params(input_geometry=geometry_name, curvature=curvature)
    X, k = points(400, 3, geometry_name, curvature=curvature, seed=31)
    model.fit(X, labels(k, n_classes) if n_classes else targets(k))
    far = 7.0 if geometry_name == "klein" else 12.0  # float32 Klein input holds ~8 at most
    X_all = np.concatenate(
        [
            X,
            geometry.from_klein(adversarial_klein(model, k), geometry_name, curvature),
            points(100, 3, geometry_name, curvature=curvature, seed=32, max_radius=far)[0],
        ]
    )
    for dtype in ("float32", "float64"):
        onx = to_onnx(model, encoding="standard", dtype=dtype)
        assert all(o.domain in ("", "ai.onnx") for o in onx.opset_import)
        assert all(node.domain in ("", "ai.onnx") for node in onx.graph.node)
        exact = to_onnx(model, dtype=dtype, encoding="exact")
        got, want = run_onnx(onx, X_all), run_onnx(exact, X_all)
        for output in want:
            np.testing.assert_array_equal(got[output], want[output])
        assert h.verify(
            model, onx, X_all.astype(dtype)
        ).ok  # the float32 graph's user holds float32 (verify runs the model on the data as held)
        ref = reference_evaluator(onx).run(None, {"X": X_all[:80].astype(dtype)})
        for output, value in zip(onx.graph.output, ref, strict=True):
            if value.dtype.kind == "f":  # the runtimes' exp may differ in the last bit
                np.testing.assert_allclose(value, got[output.name][:80], rtol=0, atol=1e-6)
            else:
                np.testing.assert_array_equal(value, got[output.name][:80])


def test_deep_trees_choose_pointer_walk():
    X, k = points(2000, 2, seed=33)
    deep = h.HyperbolicDecisionTreeRegressor(random_state=0).fit(X, targets(k))  # fully grown
    shallow = h.HyperbolicDecisionTreeRegressor(max_depth=6).fit(X, targets(k))
    assert deep.estimator_.get_depth() > standard.PERFECT_MAX_DEPTH
    assert [g.strategy for g in standard.plan_groups(deep.to_ir().ensemble)] == ["pointer"]
    assert [g.strategy for g in standard.plan_groups(shallow.to_ir().ensemble)] == ["perfect"]
    onx = to_onnx(deep, encoding="standard")
    np.testing.assert_array_equal(
        run_onnx(onx, X)["variable"][:, 0], deep.predict(X.astype(np.float32))
    )


def test_single_leaf_trees():
    X, k = points(50, 2, seed=34)
    model = h.HyperbolicRandomForestRegressor(n_estimators=3, max_depth=1, random_state=0)
    model.fit(X, np.full(50, 2.5))  # constant target: every tree is one leaf
    got = run_onnx(to_onnx(model, encoding="standard"), X)["variable"][:, 0]
    np.testing.assert_array_equal(got, model.predict(X.astype(np.float32)))


def _mixed_depth_models():
    """Ensembles whose trees differ in depth, so that the walk is split into groups."""
    return {
        # 31 leaves: most trees end by depth 10, a few go past the perfect-layout limit
        "lgbm_8_classes": lambda: h.HyperbolicLGBMClassifier(
            n_estimators=8, num_leaves=31, min_child_samples=5, verbose=-1, n_jobs=1
        ),
        "forest_unlimited": lambda: h.HyperbolicRandomForestClassifier(
            n_estimators=8, max_features=0.5, random_state=0
        ),
        "forest_regressor_unlimited": lambda: h.HyperbolicRandomForestRegressor(
            n_estimators=6, max_features=0.5, random_state=0
        ),
    }


def _tree_depths(ensemble):
    layout = standard._layout(ensemble)
    return layout.tree_depth


@functools.cache
def _depth_case(name: str) -> tuple[object, np.ndarray, dict[str, dict[str, np.ndarray]]]:
    """A `_mixed_depth_models` model fitted once, the rows it is scored on (every threshold
    and its neighbours, and far points) and its exact graph's outputs for each dtype:
    both plans of `test_depth_groups_equal_exact` share them, as a plan changes only
    the standard graph."""
    # The regressor's trees grow to one row a leaf: from 1,500 rows 20 to 27 levels, whose
    # perfect layout up to the median depth (the finest plan) holds 2^21 nodes a tree;
    # from 500 rows 15 to 20 levels, five depths.
    rows = {"lgbm_8_classes": 3000, "forest_regressor_unlimited": 500}.get(name, 1500)
    X, k = points(rows, 4, seed=35)
    model = _mixed_depth_models()[name]()
    model.fit(X, targets(k) if "regressor" in name else labels(k, 8))
    X_all = np.concatenate(
        [
            X,
            geometry.from_klein(adversarial_klein(model, k, steps=1), "hyperboloid"),
            points(100, 4, seed=36, max_radius=12.0)[0],
        ]
    )
    want = {
        dtype: run_onnx(to_onnx(model, encoding="exact", dtype=dtype), X_all, threads=1)
        for dtype in ("float32", "float64")
    }
    return model, X_all, want


@pytest.mark.parametrize("plan", ["planned", "finest"])
@pytest.mark.parametrize("name", list(_mixed_depth_models()))
def test_depth_groups_equal_exact(name, plan, monkeypatch):
    """Trees walked in depth groups, then put back in tree order: the exact encoding's
    outputs bit for bit on rows at every threshold and its neighbours, at 1 and 2 threads.

    ``finest``: as many groups as allowed, the perfect layout up to the median depth
    and pointers below it, so that both walks and the reordering are exercised.
    """
    model, X_all, want = _depth_case(name)
    ensemble = model.to_ir().ensemble
    depths = _tree_depths(ensemble)
    if plan == "finest":
        monkeypatch.setattr(standard, "GROUP_STEP_COST", 0.0)
        monkeypatch.setattr(standard, "PERFECT_MAX_DEPTH", int(np.median(depths)))
    groups = standard.plan_groups(ensemble)
    if plan == "finest":
        assert len(groups) == min(standard.MAX_GROUPS, np.unique(depths).size) >= 3
        assert {g.strategy for g in groups} == {"perfect", "pointer"}
    elif name == "lgbm_8_classes":  # a few deep trees are walked apart from the others
        assert [g.strategy for g in groups] == ["perfect", "pointer"]
    for dtype in ("float32", "float64"):
        onx = to_onnx(model, encoding="standard", dtype=dtype)
        for threads in (1, 2):
            got = run_onnx(onx, X_all, threads=threads)
            for output in want[dtype]:
                np.testing.assert_array_equal(got[output], want[dtype][output])


def test_plan_groups_cover_every_tree_in_order():
    """Each tree in exactly one group, in output-column order within it; each group
    walks exactly as deep as its deepest tree, and cheaper than one group."""
    X, k = points(3000, 4, seed=35)
    model = _mixed_depth_models()["lgbm_8_classes"]().fit(X, labels(k, 8))
    ensemble = model.to_ir().ensemble
    depths = _tree_depths(ensemble)
    column = standard.tree_columns(standard.per_class_trees(ensemble))
    groups = standard.plan_groups(ensemble, column)
    trees = np.concatenate([g.trees for g in groups])
    np.testing.assert_array_equal(np.sort(trees), np.arange(ensemble.n_trees))
    for g in groups:
        assert np.all(np.diff(column[g.trees]) > 0)
        assert g.depth == depths[g.trees].max()
        assert g.strategy == standard.choose_strategy(g.depth)
    assert max(g.depth for g in groups[:-1]) < groups[-1].depth == depths.max()
    single = standard._group_cost(ensemble.n_trees, int(depths.max()))
    assert sum(standard._group_cost(g.trees.size, g.depth) for g in groups) < single


def _negated_comparisons(onx):
    """The reference evaluator with ``Greater``/``GreaterOrEqual`` answered as OpenVINO's
    CPU plugin answers them: ``not (a <= b)`` and ``not (a < b)``, true against NaN."""
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun

    class Greater(OpRun):
        def _run(self, a, b):
            return (np.logical_not(a <= b),)

    class GreaterOrEqual(OpRun):
        def _run(self, a, b):
            return (np.logical_not(a < b),)

    class GatherElements(OpRun):  # strict bounds, as OpenVINO checks them
        def _run(self, data, indices, axis=None):
            axis = 0 if axis is None else int(axis)
            if (indices >= data.shape[axis]).any() or (indices < -data.shape[axis]).any():
                raise IndexError("indices values of GatherElements exceed data size")
            indices = np.where(indices < 0, indices + data.shape[axis], indices)
            return (np.take_along_axis(data, indices.astype(np.int64), axis=axis),)

    return ReferenceEvaluator(onx, new_ops=[Greater, GreaterOrEqual, GatherElements])


@pytest.mark.parametrize("name", list(_models()))
def test_standard_graphs_hold_no_matrix_products(name):
    """OpenVINO may compute MatMul and Gemm in bfloat16 (its default precision hint on
    processors with bfloat16 units), so the standard graph has neither: it takes ``x_0``
    of whole hyperboloid rows by a ``Gather``, and the boosters' top-two gap by a ``Sub``."""
    model, n_classes = _models()[name]
    X, k = points(300, 3, "hyperboloid", seed=43)
    model.fit(X, labels(k, n_classes) if n_classes else targets(k))
    standard_ops = {node.op_type for node in to_onnx(model, encoding="standard").graph.node}
    assert not standard_ops & {"MatMul", "Gemm"}, standard_ops
    exact = [n.op_type for n in to_onnx(model, encoding="exact").graph.node]
    assert "Gather" in exact[:2] and "Div" in exact[:3]  # every coordinate used: whole rows


@pytest.mark.parametrize("name", ["forest_reg", "lgbm_binary", "xgb_multi"])
def test_walk_never_compares_with_nan(name, strategy):
    """Leaves and empty slots must go left without relying on IEEE NaN comparisons.

    OpenVINO's CPU plugin answers ``Greater(x, NaN)`` with true; with NaN
    thresholds at leaves the pointer walk then left its tables (OpenVINO:
    "indices values of GatherElement exceed data size") and the perfect walk
    read other leaves. Planted bug: NaN thresholds at leaves and empty slots
    again; both strategies fail here.
    """
    model, n_classes = _models()[name]
    X, k = points(300, 3, "hyperboloid", seed=41)
    model.fit(X, labels(k, n_classes) if n_classes else targets(k))
    onx = to_onnx(model, encoding="standard", dtype="float64")
    for init in onx.graph.initializer:
        values = numpy_helper.to_array(init)
        assert not (values.dtype.kind == "f" and np.isnan(values).any()), init.name
    want = run_onnx(onx, X[:60])
    got = _negated_comparisons(onx).run(None, {"X": X[:60]})
    for output, value in zip(onx.graph.output, got, strict=True):
        if value.dtype.kind == "f":
            np.testing.assert_allclose(
                value, want[output.name], rtol=0, atol=1e-6
            )  # exp may differ
        else:
            np.testing.assert_array_equal(value, want[output.name])
