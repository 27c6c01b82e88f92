"""Far from the origin: every backend separates what float64 geometry separates.

Oracles independent of the code under test: labels are the float64
geodesic distance from the origin, ``acosh(x_0)``, computed here; Klein
coordinates are ``x_i / x_0`` computed here; each single tree's thresholds
are checked by routing its training rows by brute force in float64.
Python/graph parity is onnxruntime's TreeEnsemble on float64 Klein
thresholds against the native library's own predict, on rows placed on
every threshold and one ulp either side.
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from hyp2onnx import (
    HyperbolicCatBoostClassifier,
    HyperbolicCatBoostRegressor,
    HyperbolicDecisionTreeClassifier,
    HyperbolicLGBMClassifier,
    HyperbolicLGBMRegressor,
    HyperbolicRandomForestClassifier,
    HyperbolicRandomForestRegressor,
    HyperbolicXGBClassifier,
    HyperbolicXGBRegressor,
    to_onnx,
)
from hyp2onnx.correction import tree_space
from hyp2onnx.datasets import make_geodesic_ray
from hyp2onnx.geometry import einstein_midpoint

SMALL = {"n_estimators": 8, "max_depth": 6, "random_state": 0, "n_jobs": 1}
CATBOOST = {"iterations": 8, "depth": 6, "random_seed": 0, "thread_count": 1, "verbose": False}
MODELS = {
    "sklearn": lambda **kw: HyperbolicRandomForestClassifier(**SMALL, **kw),
    "xgboost": lambda **kw: HyperbolicXGBClassifier(**SMALL, **kw),
    "lightgbm": lambda **kw: HyperbolicLGBMClassifier(**SMALL, verbose=-1, **kw),
    "catboost": lambda **kw: HyperbolicCatBoostClassifier(**CATBOOST, **kw),
}
by_backend = pytest.mark.parametrize("backend", list(MODELS))
# Off the axes (where no monotone map of one coordinate helps), and in d = 8.
DIRECTION_D8 = np.random.default_rng(8).normal(size=8)


def ray(n: int, r0: float, direction: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    X, _ = make_geodesic_ray(n, r0, direction, random_state=seed)
    y = (np.arccosh(X[:, 0]) > r0).astype(np.int64)  # the oracle: float64 distance
    return X, y


def klein(X: np.ndarray) -> np.ndarray:
    return X[:, 1:] / X[:, :1]


def session(model, dtype: str = "float64") -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    graph = to_onnx(model, dtype=dtype)
    return ort.InferenceSession(graph.SerializeToString(), options)


def threshold_rows(model, base: np.ndarray) -> np.ndarray:
    """Hyperboloid rows with one Klein coordinate on a threshold, or one ulp either side.

    Built from Klein values, with ``x_0`` chosen so that ``x_i / x_0`` is the
    intended value or within an ulp of it (both sides compute the same one).
    """
    ensemble = model.to_ir().ensemble
    dt = np.dtype(ensemble.compare_dtype).type
    rows = []
    for node in np.flatnonzero(ensemble.feature >= 0):
        f, t = ensemble.feature[node], dt(ensemble.threshold[node])
        k = base[node % base.shape[0]].copy()
        for value in (np.nextafter(t, dt(-np.inf)), t, np.nextafter(t, dt(np.inf))):
            k[f] = float(value)
            rows.append(k.copy())
    k = np.array(rows)
    x0 = 1.0 / np.sqrt(1.0 - np.sum(k * k, axis=1))
    return np.concatenate([x0[:, None], k * x0[:, None]], axis=1)


@by_backend
@pytest.mark.parametrize(
    ("r0", "direction"),
    [(12.0, np.array([np.cos(0.3), np.sin(0.3)])), (9.0, DIRECTION_D8)],
    ids=["angle0.3-r12", "d8-r9"],
)
def test_far_rays_are_separated_in_python_and_in_the_graph(backend, r0, direction) -> None:
    X, y = ray(3000, r0, direction, seed=1)
    Xt, yt = ray(1000, r0, direction, seed=2)
    model = MODELS[backend]().fit(X, y)
    assert model.split_index_ is not None or backend == "lightgbm"
    assert model.input_dtype_ == "float64"
    predicted = model.predict(Xt)
    assert np.mean(predicted == yt) >= 0.99
    probe = np.concatenate([Xt, threshold_rows(model, klein(Xt))])
    labels = session(model).run(["label"], {"X": probe})[0]
    np.testing.assert_array_equal(labels, model.predict(probe))
    np.testing.assert_array_equal(labels[: len(yt)], predicted)


@pytest.mark.parametrize("backend", ["sklearn", "xgboost", "catboost"])
def test_klein_tree_space_is_blind_there(backend) -> None:
    # The failure the default fixes (so the test above can fail).
    X, y = ray(3000, 13.0, DIRECTION_D8, seed=1)
    Xt, yt = ray(1000, 13.0, DIRECTION_D8, seed=2)
    if backend == "catboost":
        # Its float32 quantization merges each feature's training values into one.
        catboost = pytest.importorskip(
            "catboost", reason="catboost (extra 'catboost') is not installed"
        )
        with pytest.raises(catboost.CatBoostError, match="constant"):
            MODELS[backend](tree_space="klein").fit(X, y)
        return
    model = MODELS[backend](tree_space="klein").fit(X, y)
    assert model.split_index_ is None and model.input_dtype_ == "float32"
    assert np.mean(model.predict(Xt) == yt) < 0.9


def test_far_tree_thresholds_are_float64_einstein_midpoints_of_their_rows() -> None:
    # Brute force: route the training rows by float64 Klein comparisons down the
    # exported description; every threshold is the Einstein midpoint of the two
    # nearest values of the rows that reach it, strictly keeping them apart.
    X, _ = ray(2000, 11.0, DIRECTION_D8, seed=4)
    y = np.floor(np.arccosh(X[:, 0]) * 40).astype(np.int64) % 2  # 40 alternating bands
    model = HyperbolicDecisionTreeClassifier(random_state=0).fit(X, y)
    assert model.split_index_ is not None
    ens = model.to_ir().ensemble
    assert (ens.op, ens.compare_dtype, ens.threshold_dtype) == ("<=", "float64", "float64")
    k = klein(X)
    stack, checked = [(0, np.arange(len(y)))], 0
    while stack:
        node, rows = stack.pop()
        if ens.feature[node] < 0:
            continue
        v, t = k[rows, ens.feature[node]], ens.threshold[node]
        left = v <= t
        L, R = v[left].max(), v[~left].min()
        assert L <= t < R
        assert t == min(max(einstein_midpoint(L, R), L), np.nextafter(R, -np.inf))
        checked += 1
        stack += [(ens.left[node], rows[left]), (ens.right[node], rows[~left])]
    assert checked > 20
    # And the Python model reaches the leaves those thresholds give, so its
    # training accuracy is what the brute-force routing gives.
    assert np.mean(model.predict(X) == y) > 0.99


@pytest.mark.parametrize("make", [HyperbolicDecisionTreeClassifier, HyperbolicXGBClassifier])
def test_klein_input_exactly_on_thresholds_routes_as_float64_comparisons(make) -> None:
    # Klein input (R = 1) is the Klein coordinate itself, so rows hit every
    # threshold t exactly, and t's float64 neighbours. Oracle: walk each tree
    # by hand with k <= t in float64 and take the majority of the leaf classes.
    direction = DIRECTION_D8
    k, _ = make_geodesic_ray(2000, 9.0, direction, geometry="klein", random_state=10)
    y = (np.arctanh(np.linalg.norm(k, axis=1)) > 9.0).astype(np.int64)
    model = make(input_geometry="klein", max_depth=6, random_state=0).fit(k, y)
    assert model.split_index_ is not None
    ens = model.to_ir().ensemble
    rows = []
    for node in np.flatnonzero(ens.feature >= 0):
        for value in (
            np.nextafter(ens.threshold[node], -1),
            ens.threshold[node],
            np.nextafter(ens.threshold[node], 2),
        ):
            row = k[node % len(k)].copy()
            row[ens.feature[node]] = value
            rows.append(row)
    probe = np.array(rows)
    scores = np.zeros((len(probe), ens.n_outputs))
    for i in range(ens.n_trees):
        node = np.full(len(probe), ens.roots[i])
        while np.any(ens.feature[node] >= 0):
            inner = ens.feature[node] >= 0
            f = ens.feature[node[inner]]
            left = probe[inner, f] <= ens.threshold[node[inner]]
            node[inner] = np.where(left, ens.left[node[inner]], ens.right[node[inner]])
        scores += ens.value[node]
    if ens.n_outputs == 1:  # XGBoost binary: one margin column
        expected = (scores[:, 0] + ens.base_values[0] > 0).astype(np.int64)
    else:
        expected = ens.classes[np.argmax(scores, axis=1)]
    np.testing.assert_array_equal(model.predict(probe), expected)
    labels = session(model).run(["label"], {"X": probe})[0]
    np.testing.assert_array_equal(labels, expected)


@pytest.mark.parametrize(
    "make",
    [
        lambda: HyperbolicRandomForestRegressor(**SMALL),
        lambda: HyperbolicXGBRegressor(**SMALL),
        lambda: HyperbolicLGBMRegressor(**SMALL, learning_rate=0.5, verbose=-1),
        lambda: HyperbolicCatBoostRegressor(**CATBOOST, learning_rate=0.5),
    ],
    ids=["sklearn-regressor", "xgboost-regressor", "lightgbm-regressor", "catboost-regressor"],
)
def test_far_regressors_match_the_graph_at_thresholds(make) -> None:
    X, _ = ray(2000, 10.0, DIRECTION_D8, seed=5)
    target = np.arccosh(X[:, 0])
    model = make().fit(X, target)
    assert model.input_dtype_ == "float64"
    probe = np.concatenate([X[:300], threshold_rows(model, klein(X))])
    values = session(model).run(["variable"], {"X": probe})[0].ravel()
    np.testing.assert_allclose(values, model.predict(probe), rtol=1e-6, atol=1e-6)
    near = np.abs(model.predict(X) - target)
    assert np.mean(near) < 0.05  # the regression resolves distances far out


def test_near_models_keep_reading_klein_coordinates_in_their_own_precision() -> None:
    X, y = ray(2000, 2.0, DIRECTION_D8, seed=6)
    model = HyperbolicRandomForestClassifier(**SMALL).fit(X, y)
    assert model.split_index_ is None and model.input_dtype_ == "float32"
    ens = model.to_ir().ensemble
    assert (ens.op, ens.compare_dtype) == ("<=", "float32")
    # estimator_ reads Klein coordinates, as scikit-learn compares them.
    np.testing.assert_array_equal(
        model.predict(X), model.estimator_.predict(klein(X).astype(np.float32))
    )
    graph = to_onnx(model)
    assert graph.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


def test_default_graph_input_follows_the_model_and_float32_warns() -> None:
    X, y = ray(2000, 10.0, DIRECTION_D8, seed=7)
    model = HyperbolicRandomForestClassifier(**SMALL).fit(X, y)
    graph = to_onnx(model)
    assert graph.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    with pytest.warns(UserWarning, match="float32 input loses them"):
        to_onnx(model, dtype="float32")
    # the fix names the default graph first, which routes as the model does
    with pytest.warns(UserWarning, match=r"compat encoding compares in float32.*default encoding"):
        to_onnx(model, encoding="compat")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        to_onnx(model, dtype="float64")


def test_far_model_survives_pickle_and_refit_in_another_space() -> None:
    X, y = ray(1500, 10.0, DIRECTION_D8, seed=8)
    model = HyperbolicXGBClassifier(**SMALL).fit(X, y)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X), model.predict(X))
    model.set_params(tree_space="klein").fit(X, y)
    assert model.split_index_ is None


def test_rank_map_and_split_index() -> None:
    Xk = np.array([[0.5, -0.2], [0.1, -0.2], [0.5, 0.3], [0.9, 0.0]])
    space = tree_space.TreeSpace.fit(Xk, "ranks", "float32")
    np.testing.assert_array_equal(space.transform(Xk), [[2, 1], [1, 1], [2, 3], [3, 2]])
    # Values between training values sit halfway between their ranks.
    np.testing.assert_array_equal(
        space.transform(np.array([[0.0, -0.5], [0.3, 0.1], [1.0, 0.4]])),
        [[0.5, 0.5], [1.5, 2.5], [3.5, 3.5]],
    )
    feature = np.array([0, 0, -1, 1])
    thresholds = np.array([0.7, 0.2, 0.0, 0.2])
    index = tree_space.SplitIndex.from_splits(feature, thresholds, 2, "float64")
    native = index.native_thresholds(feature, thresholds)
    np.testing.assert_array_equal(native, [2.5, 1.5, 0.0, 1.5])
    klein = index.klein_thresholds(feature, native)
    np.testing.assert_array_equal(klein[[0, 1, 3]], [0.7, 0.2, 0.2])
    # k <= T[j]  iff  z <= j + 1.5, at T[j] and one ulp either side.
    for f, t in ((0, 0.2), (0, 0.7), (1, 0.2)):
        k = np.zeros((3, 2))
        k[:, f] = [np.nextafter(t, -1), t, np.nextafter(t, 2)]
        z = index.transform(k)[:, f]
        j = np.searchsorted(index.thresholds[f], t)
        np.testing.assert_array_equal(z <= j + 1.5, k[:, f] <= t)


def test_too_many_ranks_for_float32_is_refused(monkeypatch) -> None:
    monkeypatch.setitem(tree_space._EXACT_INTS, "float32", 100)
    X, y = ray(200, 3.0, DIRECTION_D8, seed=9)
    with pytest.raises(ValueError, match="more ranks than float32 holds exactly"):
        HyperbolicDecisionTreeClassifier(max_depth=2).fit(X, y)
    HyperbolicLGBMClassifier(n_estimators=2, verbose=-1).fit(X, y)  # compares in float64


def test_rapidity_refuses_points_whose_klein_coordinate_rounds_to_one() -> None:
    X, y = ray(200, 20.0, np.array([1.0, 0.0]), seed=11)
    assert np.any(klein(X)[:, 0] == 1.0)
    with pytest.raises(ValueError, match="rapidity is infinite"):
        HyperbolicDecisionTreeClassifier(tree_space="rapidity").fit(X, y)
