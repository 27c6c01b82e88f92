"""Issue 40's bounded-memory rotation forest fit gives today's forests bit for bit.

The reference is the old fit, kept verbatim in ``_rotation_fit_reference.py``:
it made every tree's frame coordinates whole (``n x d`` float64, then their
ranks in float64 and a float32 copy) and the float32 and routing checks on
every tree's coordinates at once (``n x trees x d``). The new fit makes them
a column or a block of rows at a time. On adversarial points (rows on the
thresholds of a first forest, one float32 step and one float64 step either
side; duplicated rows; points at radius 16; sample weights with zeros,
class weights, bootstrap draws), for each kind of frame, tree space, input
geometry and routing, the two fits give the same frames, trees (every node
array), corrected thresholds, split indices, correction reports, hyperplanes,
routing and input dtype, to the bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _rotation_fit_reference import old_draw_frame, old_frame_features, old_rotation_fit
from sklearn.base import clone

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.correction.tree_space import TreeSpace
from hyp2onnx.estimators import _rotation
from hyp2onnx.ir import frames as _frames
from hyp2onnx.ir.frames import Frames, frame_columns, frame_features

_NODE_ARRAYS = (
    "feature",
    "threshold",
    "children_left",
    "children_right",
    "value",
    "impurity",
    "n_node_samples",
    "weighted_n_node_samples",
)


def _klein(
    n: int, d: int, radius: float, rng: np.random.Generator, inner: float = 0.0
) -> np.ndarray:
    """``n`` Klein rows at hyperbolic radii uniform in ``[inner, radius]``."""
    u = rng.normal(size=(n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return u * np.tanh(rng.uniform(inner, radius, size=(n, 1)))


def _f32_steps(v: np.ndarray, steps: int) -> np.ndarray:
    """``v`` moved ``steps`` float32 steps (as float64 values of float32 numbers)."""
    f = v.astype(np.float32)
    for _ in range(abs(steps)):
        f = np.nextafter(f, np.float32(np.inf if steps > 0 else -np.inf))
    return f.astype(np.float64)


def _adversarial(d: int, seed: int) -> np.ndarray:
    """Klein rows: random ones to radius 3 and 16, duplicates, and rows on the
    thresholds of an unrotated forest, a float32 and a float64 step either side."""
    rng = np.random.default_rng(seed)
    ray = rng.normal(size=d)
    ray /= np.linalg.norm(ray)
    along = ray + 1e-9 * rng.normal(size=(40, d))  # a thin cone: splits among far rows
    along *= np.tanh(rng.uniform(15.0, 16.0, size=(40, 1))) / np.linalg.norm(along, axis=1)[:, None]
    k = np.concatenate([_klein(260, d, 3.0, rng), _klein(30, d, 16.0, rng, inner=15.0), along])
    k = np.concatenate([k, k[rng.integers(0, k.shape[0], 40)]])  # duplicates
    y = _labels(k)
    plain = h.HyperbolicRotationForestClassifier(
        n_estimators=2,
        max_depth=4,
        centre="origin",
        rotation="identity",
        input_geometry="klein",
        random_state=seed,
    ).fit(k, y)  # identity frames: its thresholds are Klein thresholds
    near = []
    for t in range(2):
        column, threshold = plain._split_thresholds(t)
        for j in np.flatnonzero(column >= 0)[:6]:
            base = k[rng.integers(0, k.shape[0], 5)].copy()
            for moved in (
                threshold[j],
                np.nextafter(threshold[j], np.inf),
                np.nextafter(threshold[j], -np.inf),
                _f32_steps(np.array(threshold[j]), 1)[()],
                _f32_steps(np.array(threshold[j]), -1)[()],
            ):
                row = base[len(near) % 5].copy()
                row[column[j]] = moved
                if np.sum(row**2) < 1.0:
                    near.append(row)
    k = np.concatenate([k, np.array(near)])
    return k[rng.permutation(k.shape[0])]


def _labels(k: np.ndarray) -> np.ndarray:
    """Quadrants near the origin; far out, bands of radius (splits among far rows)."""
    near = (k[:, 0] > 0).astype(int) + 2 * (k[:, 1] > k[:, -1]).astype(int)
    radius = np.arctanh(np.minimum(np.linalg.norm(k, axis=1), 1.0 - 1e-16))
    return np.where(radius > 14.0, np.floor(radius * 8.0).astype(int) % 4, near)


def _as(k: np.ndarray, kind: str) -> np.ndarray:
    if kind == "klein":
        return k
    if kind == "float32":  # Klein rows float32 holds: the float32 check's first answer
        rounded = k.astype(np.float32).astype(np.float64)
        return np.where((np.sum(rounded**2, axis=1) < 1.0)[:, None], rounded, 0.5 * rounded)
    return geometry.from_klein(k, kind)


CASES: dict[str, tuple[dict[str, Any], str, str | None]] = {
    # name: (parameters, input geometry, weights)
    "default_deep": ({}, "klein", None),
    "shallow_auto_routing": ({"max_depth": 4, "n_estimators": 5}, "hyperboloid", None),
    "hyperplane_routing": ({"max_depth": 3, "routing": "hyperplanes"}, "klein", None),
    "frames_routing_float32_rows": ({"max_depth": 6, "routing": "frames"}, "float32", None),
    "weights_zero_balanced_bootstrap": (
        {"class_weight": "balanced", "bootstrap": True, "max_samples": 0.7, "max_depth": 7},
        "poincare",
        "zeros",
    ),
    "weights_one_group": ({"group_size": 8, "remove_proportion": 0.2}, "klein", "positive"),
    "haar_origin_klein_space": (
        {"rotation": "haar", "centre": "origin", "tree_space": "klein"},
        "hyperboloid",
        None,
    ),
    "identity_rapidity": ({"rotation": "identity", "tree_space": "rapidity"}, "klein", "zeros"),
    "regressor": ({"regressor": True, "max_depth": 8}, "klein", "zeros"),
    "two_threads": ({"n_jobs": 2, "max_depth": 5}, "klein", None),
}


def _model(params: dict[str, Any], kind: str) -> Any:
    params = dict(params)
    cls = (
        h.HyperbolicRotationForestRegressor
        if params.pop("regressor", False)
        else h.HyperbolicRotationForestClassifier
    )
    geometry_name = "klein" if kind in ("klein", "float32") else kind
    return cls(**{"n_estimators": 4, "random_state": 3, **params}, input_geometry=geometry_name)


_PARTS = (
    "frames",
    "trees",
    "split indices",
    "thresholds",
    "correction reports",
    "hyperplanes",
    "routing",
    "input dtype",
)


def _state(model: Any) -> tuple[Any, ...]:
    trees = [
        tuple(np.asarray(getattr(tree.tree_, a)).tobytes() for a in _NODE_ARRAYS)
        for tree in model.estimators_
    ]
    indices = [
        None if index is None else tuple(t.tobytes() for t in index.thresholds)
        for index in model.split_indices_
    ]
    thresholds = [tuple(a.tobytes() for a in model._split_thresholds(t)) for t in range(len(trees))]
    return (
        [M.tobytes() for M in model.frames_],
        trees,
        indices,
        thresholds,
        model.corrections_,
        [tuple(a.tobytes() for a in p) for p in model.hyperplanes_],
        model.routing_,
        model.input_dtype_,
    )


def _fit(fit: Any, model: Any, X: np.ndarray, y: np.ndarray, w: np.ndarray | None) -> Any:
    try:
        return _state(fit(model, X, y, w))
    except ValueError as error:  # routing="hyperplanes" may refuse: the same refusal
        return ("raised", str(error))


@pytest.mark.parametrize("blocks", ["default", "small"])
@pytest.mark.parametrize("name", list(CASES))
def test_rotation_fit_is_the_old_one(
    name: str, blocks: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if blocks == "small":  # many blocks of rows, the last one short, and one-row blocks
        monkeypatch.setattr(_rotation, "_BLOCK_ROWS", 37 if len(name) % 2 else 1)
        monkeypatch.setattr(_frames, "BLOCK_VALUES", 100)
    model, X, y, w = _case(name)
    new = _fit(lambda m, *a: m.fit(*a), clone(model), X, y, w)
    old = _fit(old_rotation_fit, clone(model), X, y, w)
    assert len(new) == len(old)
    for part, a, b in zip(_PARTS if len(new) == len(_PARTS) else ("refusal",) * 2, new, old):
        assert a == b, f"{name}: the new fit's {part} differ from the old fit's"


def _case(name: str) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray | None]:
    """The unfitted model, points, targets and weights of case ``name``."""
    params, kind, weights = CASES[name]
    k = _adversarial(8 if name == "weights_one_group" else 4, seed=len(name))
    X, y = _as(k, kind), _labels(k)
    if params.get("regressor"):
        y = np.sin(3 * k[:, 0]) + k[:, 1] ** 2
    rng = np.random.default_rng(7)
    w = None
    if weights is not None:
        w = rng.uniform(0.5, 2.0, X.shape[0])
        if weights == "zeros":
            w[rng.random(X.shape[0]) < 0.2] = 0.0
    return _model(params, kind), X, y, w


def test_the_cases_reach_every_path() -> None:
    """Far rows, duplicates, both routings, both input dtypes and split indices."""
    k = _adversarial(4, seed=0)
    assert np.linalg.norm(k, axis=1).max() > np.tanh(15.0)
    assert np.unique(k, axis=0).shape[0] < k.shape[0]
    fitted = [m.fit(X, y, w) for m, X, y, w in map(_case, CASES)]
    assert {m.routing_ for m in fitted} == {"hyperplanes", "frames"}
    assert {m.input_dtype_ for m in fitted} == {"float32", "float64"}
    assert any(i is not None for m in fitted for i in m.split_indices_)
    assert any(i is None for m in fitted for i in m.split_indices_)


def test_frame_columns_and_blocks_are_the_whole_computation() -> None:
    rng = np.random.default_rng(0)
    k = _klein(70_001, 5, 16.0, rng)
    matrices = [np.eye(6) + 0.3 * rng.normal(size=(6, 6)) for _ in range(3)]
    for M in matrices:
        M[0, 0] += 3.0
    frames = Frames.from_lorentz(matrices)
    whole = old_frame_features(k, frames)
    assert whole.tobytes() == frame_features(k, frames).tobytes()
    assert whole.tobytes() == np.stack(list(frame_columns(k, frames)), axis=1).tobytes()
    space, ranks = TreeSpace.fit_transform(whole[:, :5], "ranks", "float32")
    by_column = TreeSpace.ranks_of_columns(
        frame_columns(k, Frames.from_lorentz(matrices[:1])), (k.shape[0], 5), "float32"
    )
    assert by_column is not None
    assert ranks.tobytes() == by_column[1].tobytes()
    for f in range(5):  # np.unique's distinct values and inverse, independently
        u, inverse = np.unique(whole[:, f], return_inverse=True)
        assert np.array_equal(by_column[1][:, f], (inverse + 1).astype(np.float32))
        assert u.tobytes() == by_column[0].klein[f].tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(space.klein, by_column[0].klein))
    whole[3, 1] = np.nan  # not finite: left to the whole computation
    assert TreeSpace.ranks_of_columns(iter(whole.T), whole.shape, "float32") is None


@pytest.mark.parametrize("centre", ["class_subset", "origin"])
def test_draw_frame_is_the_old_one(centre: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`draw_frame` on whole rows, in blocks of rows: the old frame."""
    monkeypatch.setattr(_rotation, "_BLOCK_ROWS", 29)
    k = _adversarial(5, seed=4)
    x = geometry.unit_hyperboloid(k, "klein")
    y = _labels(k)
    rows = np.flatnonzero(np.arange(k.shape[0]) % 3 != 0)
    frames = [
        draw(
            *arrays,
            y,
            rows,
            centre=centre,
            rotation="pca",
            group_size=2,
            remove_proportion=0.3,
            rng=np.random.default_rng(5),
        )
        for draw, arrays in (
            (_rotation.draw_frame, (x.__getitem__, x.shape)),
            (old_draw_frame, (x,)),
        )
    ]
    assert frames[0].tobytes() == frames[1].tobytes()


def test_precision_check_on_extremes_is_the_whole_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """`_Points.check_precision` (the least and largest ``x_0`` only) passes and fails
    where `check_frame_precision` on every row does, with its error."""
    monkeypatch.setattr(_rotation, "_BLOCK_ROWS", 23)
    rng = np.random.default_rng(2)
    k = _klein(200, 3, 17.5, rng)
    X = geometry.from_klein(k, "poincare")
    x = geometry.unit_hyperboloid(X, "poincare")
    points = _rotation._Points(X, 3, ("poincare", -1.0, 0))
    assert points(np.arange(200)[::-3]).tobytes() == x[::-3].tobytes()
    cut = np.cosh(17.0) ** 2 / x[:, 0].max()
    outcomes = []
    for m00 in (1.0, cut, np.nextafter(cut, np.inf), 1e300, np.inf, np.nan, -2.0, 0.0):
        M = np.eye(4)
        M[0, 0] = m00
        found = []
        for check in (points.check_precision, lambda M: _rotation.check_frame_precision(M, x)):
            try:
                check(M)
                found.append(None)
            except h.FarPointError as error:
                found.append(str(error))
        assert found[0] == found[1], m00
        outcomes.append(found[0] is None)
    assert True in outcomes and False in outcomes
