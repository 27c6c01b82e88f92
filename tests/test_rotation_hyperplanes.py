"""Rotation forests routed by their split hyperplanes (issue 34): model, check and walk.

The oracle is written here from the definitions: a split ``k'_j <= T`` of the
frame ``M`` is the hyperplane ``(M_j - T M_0) . (1, k) <= 0``, which the model
defines as ``w . k <= c`` with ``w = (M_j - T M_0)[1:]`` and
``c = -(M_j - T M_0)[0]``, ``w . k`` added in feature order. The oracle walks
each tree with numpy on those definitions; the Python model and every graph
must agree with it bit for bit on rows on each node's hyperplane, one and a
few ulps beside it, and far from the origin.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from _data import isometric_copy, random_isometry
from sklearn.model_selection import train_test_split

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.emit.hyperplanes import emit_forest_walk
from hyp2onnx.emit.strategy import choose_graph


def _data(n: int, d: int, *, seed: int = 0, classes: int = 4):
    X, y = make_wrapped_normal_mixture(n, d, classes, random_state=seed, geometry="klein")
    return train_test_split(X, y, test_size=0.25, random_state=seed, stratify=y)


def _oracle_planes(model, t: int) -> tuple[np.ndarray, np.ndarray]:
    """``[n_nodes, d]`` normals and ``[n_nodes]`` offsets of tree ``t``, from the frame."""
    M = model.frames_[t]
    column, threshold = model._split_thresholds(t)  # the frame tree's k'_j <= T
    internal = column >= 0
    n = np.array([M[1 + j] - T * M[0] for j, T in zip(np.where(internal, column, 0), threshold)])
    return n[:, 1:], -n[:, 0]


def _oracle_leaves(model, k: np.ndarray) -> np.ndarray:
    """``[n, T]`` leaves: each tree walked with ``w_0 k_0 + w_1 k_1 + ... <= c``, in order."""
    out = []
    for t, tree in enumerate(model.estimators_):
        w, c = _oracle_planes(model, t)
        left, right = tree.tree_.children_left, tree.tree_.children_right
        leaves = []
        for row in k:
            node = 0
            while left[node] >= 0:
                p = row[0] * w[node, 0]
                for f in range(1, row.size):
                    p = p + row[f] * w[node, f]
                node = left[node] if p <= c[node] else right[node]
            leaves.append(node)
        out.append(leaves)
    return np.array(out).T


def _oracle_proba(model, k: np.ndarray) -> np.ndarray:
    leaves = _oracle_leaves(model, k)
    total = None
    for t, tree in enumerate(model.estimators_):
        v = tree.tree_.value[leaves[:, t], 0, : len(model.classes_)]
        total = v if total is None else total + v
    return total / len(model.estimators_)


def _rows_on_hyperplanes(model, rng: np.random.Generator, steps: int = 3) -> np.ndarray:
    """Klein rows on every split's hyperplane of the first trees (the foot of a random
    point's perpendicular), and each moved by 1 to ``steps`` ulps either way along the
    coordinate of the normal's largest weight."""
    rows = []
    for t in range(min(3, len(model.estimators_))):
        w, c = _oracle_planes(model, t)
        for node in np.flatnonzero(model.estimators_[t].tree_.children_left >= 0):
            start = rng.normal(scale=0.2, size=w.shape[1])
            point = start - (start @ w[node] - c[node]) / (w[node] @ w[node]) * w[node]
            if point @ point >= 0.99:
                continue
            f = int(np.argmax(np.abs(w[node])))
            for direction in (-np.inf, np.inf):
                moved = point.copy()
                for _ in range(steps + 1):
                    rows.append(moved.copy())
                    moved[f] = np.nextafter(moved[f], direction)
    return np.array(rows)


@pytest.mark.parametrize("d", [2, 5])
def test_hyperplane_routing_on_and_beside_every_split_matches_the_oracle(d: int) -> None:
    Xtr, Xte, ytr, _ = _data(400, d)
    model = h.HyperbolicRotationForestClassifier(
        n_estimators=5, max_depth=3, input_geometry="klein", random_state=0
    ).fit(Xtr, ytr)
    assert model.routing_ == "hyperplanes"
    rows = np.vstack([_rows_on_hyperplanes(model, np.random.default_rng(1)), Xte])
    assert rows.shape[0] >= 150
    want = _oracle_leaves(model, rows)
    assert np.array_equal(model.apply(rows), want)
    proba = _oracle_proba(model, rows)
    assert np.array_equal(model.predict_proba(rows), proba)
    # some rows straddle a split: the oracle's own margins change sign among them
    assert len(np.unique(want, axis=0)) > 10
    for encoding in ("fast", "exact"):
        onx = h.to_onnx(model, encoding=encoding, dtype="float64")
        session = ort.InferenceSession(onx.SerializeToString())
        # short batches take the If's short path, long ones the Loop over row blocks
        for batch in (rows[:1000], np.vstack([rows] * (2048 // len(rows) + 1))):
            label, got = session.run(["label", "probabilities"], {"X": batch})
            expected = _oracle_proba(model, batch) if len(batch) != len(rows) else proba
            assert np.array_equal(got, expected)
            assert np.array_equal(label, model.classes_[np.argmax(expected, axis=1)])


def test_far_data_routes_by_hyperplanes_exactly() -> None:
    d = 3
    Xtr, Xte, ytr, _ = train_test_split(
        *make_wrapped_normal_mixture(400, d, 4, random_state=2), test_size=0.25, random_state=2
    )
    G = random_isometry(d, 6.0, np.random.default_rng(4))
    far_tr, far_te = isometric_copy(Xtr, G), isometric_copy(Xte, G)
    model = h.HyperbolicRotationForestClassifier(n_estimators=6, max_depth=3, random_state=0)
    model.fit(far_tr, ytr)
    assert model.routing_ == "hyperplanes"
    k = model.to_klein(far_te)
    assert np.array_equal(model.apply(far_te), _oracle_leaves(model, k))
    onx = h.to_onnx(model, dtype="float64")
    report = h.verify(model, onx, np.vstack([far_tr, far_te]))
    assert report.ok and report.max_abs_diff["probabilities"] == 0.0, str(report)


def test_training_rows_that_the_hyperplanes_route_otherwise_keep_the_frames() -> None:
    Xtr, _, ytr, _ = _data(300, 3)
    model = h.HyperbolicRotationForestClassifier(
        n_estimators=4, max_depth=3, input_geometry="klein", random_state=0
    ).fit(Xtr, ytr)
    assert model.routing_ == "hyperplanes"
    k = model.to_klein(Xtr)
    # Move tree 2's root hyperplane through the training rows: their leaves now differ.
    w, c = model.hyperplanes_[2]
    c[0] = float(np.median(k @ w[:, 0]))
    assert model._choose_routing(k) == "frames"  # routing="auto"
    model.routing = "hyperplanes"
    with pytest.raises(ValueError, match="tree 2.*routing='frames'"):
        model._choose_routing(k)
    model.routing = "frames"
    assert model._choose_routing(k) == "frames"


def test_deep_trees_keep_frames_and_shallow_ones_walk() -> None:
    Xtr, Xte, ytr, _ = _data(400, 4)
    deep = h.HyperbolicRotationForestClassifier(
        n_estimators=3, input_geometry="klein", random_state=0
    ).fit(Xtr, ytr)
    assert deep.routing_ == "frames" and deep.to_ir().ensemble.frames is not None
    shallow = h.HyperbolicRotationForestClassifier(
        n_estimators=3, max_depth=3, input_geometry="klein", random_state=0
    )
    shallow.fit(Xtr, ytr)
    for encoding in ("fast", "exact"):
        strategy = choose_graph(shallow.to_ir(), encoding=encoding, input_dtype="float64")
        assert strategy.trees is emit_forest_walk and strategy.encoding.name == "exact"
    onx = h.to_onnx(shallow)
    assert dict((p.key, p.value) for p in onx.metadata_props)["hyp2onnx.encoding"] == "exact"
    # the same trees, frames or hyperplanes, route these rows alike
    framed = h.HyperbolicRotationForestClassifier(
        n_estimators=3, max_depth=3, routing="frames", input_geometry="klein", random_state=0
    ).fit(Xtr, ytr)
    assert np.array_equal(framed.apply(Xte), shallow.apply(Xte))
    for encoding in ("compat", "standard"):  # their own tree stages, still exact labels
        report = h.verify(shallow, h.to_onnx(shallow, encoding=encoding, dtype="float64"), Xte)
        assert report.ok and report.label_mismatches == 0, str(report)


def test_regressor_routes_by_hyperplanes_exactly() -> None:
    Xtr, Xte, ytr, _ = _data(400, 3)
    target = ytr + np.sin(3 * Xtr[:, 1])
    model = h.HyperbolicRotationForestRegressor(
        n_estimators=5, max_depth=3, input_geometry="klein", random_state=0
    )
    model.fit(Xtr, target)
    assert model.routing_ == "hyperplanes"
    report = h.verify(model, h.to_onnx(model), Xte)
    assert report.ok and report.max_abs_diff["variable"] == 0.0, str(report)


def test_routing_parameter_is_validated() -> None:
    Xtr, _, ytr, _ = _data(100, 2)
    with pytest.raises(ValueError, match="routing"):
        h.HyperbolicRotationForestClassifier(n_estimators=2, routing="planes").fit(Xtr, ytr)
