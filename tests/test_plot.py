"""Pictures of models in a hyperbolic disk, tested on the data they draw, not on pixels.

* the class drawn at each grid point is the model's prediction for that point,
  computed here from the mesh coordinates by formulas of this file (Poincaré and
  Klein disks, hyperboloid and Poincaré input, a 3-D slice, a region tree's regions);
* the model is asked about no point outside the disk;
* a region's faces are the half-spaces a grid finds non-redundant;
* ``import hyp2onnx.plot`` without matplotlib names the extra.
"""

from __future__ import annotations

import importlib
import sys
import warnings

import numpy as np
import pytest
from _data import labels, points

import hyp2onnx
from hyp2onnx.errors import MissingExtraError

matplotlib = pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') is not installed")
matplotlib.use("Agg")

from hyp2onnx.plot import DecisionRegionDisplay


def _hyperboloid_from_disk(u: np.ndarray, disk: str) -> np.ndarray:
    """Unit hyperboloid points of unit-disk points ``u`` (formulas written out here)."""
    r2 = np.sum(u * u, axis=1)
    if disk == "poincare":
        return np.column_stack([(1 + r2) / (1 - r2), 2 * u / (1 - r2)[:, None]])
    x0 = 1 / np.sqrt(1 - r2)
    return np.column_stack([x0, u * x0[:, None]])


@pytest.fixture(scope="module")
def mlp():
    X, k = points(300, 2, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = hyp2onnx.HyperbolicMLPClassifier(
            hidden_layer_sizes=(12,), max_iter=150, random_state=0
        ).fit(X, labels(k, 3))
    return model, X


class _Recorder:
    """A classifier that records every row it is asked about (the model's geometry)."""

    def __init__(self, model):
        self.model, self.asked = model, []
        for name in ("input_geometry", "curvature", "timelike_dim", "n_features_in_", "classes_"):
            setattr(self, name, getattr(model, name))

    def predict(self, X):
        self.asked.append(np.asarray(X))
        return self.model.predict(X)


@pytest.mark.parametrize("disk", ["poincare", "klein"])
def test_regions_drawn_are_the_models_predictions_on_the_grid(mlp, disk):
    model, X = mlp
    shown = DecisionRegionDisplay.from_estimator(model, X, disk=disk, resolution=41, plot=False)
    mesh = np.column_stack([shown.xx[shown.inside], shown.yy[shown.inside]])
    want = model.predict(_hyperboloid_from_disk(mesh, disk))
    got = shown.classes[shown.response[shown.inside].astype(int)]
    assert np.array_equal(got, want)
    assert len(np.unique(want)) > 1  # the picture shows more than one class
    assert np.isnan(shown.response[~shown.inside]).all()


def test_no_grid_point_asked_about_lies_outside_the_disk(mlp):
    model, X = mlp
    recorder = _Recorder(model)
    shown = DecisionRegionDisplay.from_estimator(recorder, None, resolution=41, plot=False)
    asked = np.concatenate(recorder.asked)
    assert len(asked) == shown.inside.sum() > 0.7 * 41 * 41
    assert np.all(asked[:, 0] ** 2 - np.sum(asked[:, 1:] ** 2, axis=1) > 0.5)  # on the sheet
    assert np.all(shown.xx[shown.inside] ** 2 + shown.yy[shown.inside] ** 2 < 1)


def test_a_poincare_model_and_a_slice_of_three_dimensions():
    """A plain scikit-learn tree on Poincaré points (it says no geometry: given here), 3-D:
    the slice of coordinates 0 and 2 asks about points whose coordinate 1 is 0."""
    from sklearn.tree import DecisionTreeClassifier

    X, k = points(400, 3, seed=5)
    P = hyp2onnx.geometry.klein_to_poincare(k)
    model = DecisionTreeClassifier(max_depth=5, random_state=0).fit(P, labels(k, 3))
    shown = DecisionRegionDisplay.from_estimator(
        model, P, input_geometry="poincare", dims=(0, 2), resolution=41, plot=False
    )
    mesh = np.column_stack(
        [shown.xx[shown.inside], np.zeros(shown.inside.sum()), shown.yy[shown.inside]]
    )
    got = shown.classes[shown.response[shown.inside].astype(int)]
    assert np.array_equal(got, model.predict(mesh))
    # data at their orthogonal projection onto the slice: drop Klein coordinate 1
    k2 = (2 * P / (1 + np.sum(P * P, axis=1))[:, None])[:, [0, 2]]
    projected = k2 / (1 + np.sqrt(1 - np.sum(k2 * k2, axis=1)))[:, None]
    np.testing.assert_allclose(shown.points, projected, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="input_geometry"):
        DecisionRegionDisplay.from_estimator(model, P, plot=False)


def test_a_region_trees_partition_is_its_regions(mlp):
    model, X = mlp
    tree = hyp2onnx.region_tree(model, X[:60])
    shown = tree.plot(X, resolution=41)
    mesh = np.column_stack([shown.xx[shown.inside], shown.yy[shown.inside]])
    want = tree.apply(_hyperboloid_from_disk(mesh, "poincare"))
    assert np.array_equal(shown.classes[shown.response[shown.inside].astype(int)], want)
    assert (want == -1).any() and "not in the tree" in shown.names
    assert np.array_equal(shown.point_labels, tree.apply(X))


def test_a_regions_faces_are_its_non_redundant_half_spaces(mlp):
    """Oracle: on a fine Klein grid, half-space h is a face iff dropping it lets in
    points the region lacks (grid points satisfying every other half-space but not h)."""
    model, X = mlp
    tree = hyp2onnx.region_tree(model, X)
    t = np.linspace(-1, 1, 401)
    grid = np.stack(np.meshgrid(t, t), axis=-1).reshape(-1, 2)
    grid = grid[np.sum(grid * grid, axis=1) < 1]
    checked = 0
    for row in X[:30:6]:
        region = tree.explain(row)
        s = region.side * (grid @ region.klein_normals.T + region.klein_offsets)
        holds = s > 0
        faces = {h for h, _ in region.faces()}
        for h in range(region.side.size):
            others = np.delete(holds, h, axis=1).all(axis=1)
            widening = (others & ~holds[:, h]).sum()
            if h in faces:
                assert widening > 0, (h, row)
            else:
                assert widening == 0, (h, row)
        checked += len(faces)
        for h, edge in region.faces():
            on = region.klein_normals[h] @ edge.T + region.klein_offsets[h]
            assert np.abs(on).max() < 1e-9
    assert checked > 10


def test_a_region_is_drawn_with_its_faces_and_the_data(mlp):
    model, X = mlp
    tree = hyp2onnx.region_tree(model, X)
    region = tree.explain(X[7])
    ax = region.plot(points=tree.to_klein(X), labels=model.predict(X), resolution=81)
    thick = [line for line in ax.lines if line.get_linewidth() > 2]
    assert len(thick) == len(region.faces()) > 0
    assert ax.collections and ax.get_legend() is not None


def test_importing_the_module_without_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    monkeypatch.delitem(sys.modules, "hyp2onnx.plot")
    with pytest.raises(MissingExtraError, match=r"pip install 'hyp2onnx\[plot\]'"):
        importlib.import_module("hyp2onnx.plot")
