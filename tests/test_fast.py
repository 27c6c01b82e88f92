"""The fast encoding (the default): exact labels, values within the bound it records.

Its tree operator adds the trees in the runtime's order, which at two
threads differs from the model's tree order (onnxruntime splits a batch's
trees among its threads). Labels must still be the Python model's on every
row, exact ties (numpy's argmax takes the first class) and near-ties
included: the graph rescores the rows whose top two probabilities lie within
twice the recorded bound with the exact encoding's ordered sums. Rows here:
training rows with one-ulp near-ties, rows repeated with another label
(exact vote ties, equal class scores), forests whose leaves hold fractions
k/n, and every split's threshold neighbours from the independent oracle
(``_oracle.probe_rows``).
"""

from __future__ import annotations

from dataclasses import replace

import _oracle as oracle
import numpy as np
import pytest
from _boosting_data import klein_with_ties
from _data import klein_points, labels

import hyp2onnx as h
from hyp2onnx._runtime import all_nodes
from hyp2onnx.emit import trees
from hyp2onnx.emit.strategy import choose_graph
from hyp2onnx.emit.trees import tree_of_node
from hyp2onnx.export import describe, read_metadata
from hyp2onnx.export._compile import compile_model
from hyp2onnx.verify import default_rtol, default_tolerance, run_onnx

KLEIN = dict(input_geometry="klein")
BOOST = dict(n_estimators=6, n_jobs=1, **KLEIN)
MODELS = {
    "tree": lambda: h.HyperbolicDecisionTreeClassifier(max_depth=6, random_state=0, **KLEIN),
    # unlimited depth, an even number of trees: votes k/6, exact ties
    "forest_votes": lambda: h.HyperbolicRandomForestClassifier(
        n_estimators=6, random_state=0, **KLEIN
    ),
    # shallow: leaves hold fractions k/n, sums of them differ by an ulp by order
    # shallow, no bootstrap (repeated rows stay together): leaves hold fractions k/n
    "forest_fractions": lambda: h.HyperbolicRandomForestClassifier(
        n_estimators=7, max_depth=3, bootstrap=False, max_features=1, random_state=0, **KLEIN
    ),
    "forest_binary": lambda: h.HyperbolicRandomForestClassifier(
        n_estimators=10, bootstrap=False, max_features=1, random_state=0, **KLEIN
    ),
    "xgb_binary": lambda: h.HyperbolicXGBClassifier(max_depth=3, **BOOST),
    "xgb_multi": lambda: h.HyperbolicXGBClassifier(max_depth=3, **BOOST),
    "lgbm_binary": lambda: h.HyperbolicLGBMClassifier(num_leaves=6, verbose=-1, **BOOST),
    "lgbm_multi": lambda: h.HyperbolicLGBMClassifier(num_leaves=6, verbose=-1, **BOOST),
    "catboost_multi": lambda: h.HyperbolicCatBoostClassifier(
        iterations=6, depth=3, verbose=0, thread_count=1, random_seed=0, **KLEIN
    ),
    "catboost_binary": lambda: h.HyperbolicCatBoostClassifier(
        iterations=6, depth=3, verbose=0, thread_count=1, random_seed=0, **KLEIN
    ),
    "hhcart": lambda: h.HyperbolicHouseholderTreeClassifier(max_depth=5, random_state=0, **KLEIN),
}
N_CLASSES = {name: 2 if "binary" in name else 3 for name in MODELS}
#: Binary boosters fit a margin that only approaches 0 on the repeated rows:
#: their exact ties are made by hand in test_the_guard_cannot_be_removed.
NO_NATURAL_TIES = {"xgb_binary", "lgbm_binary", "catboost_binary"}


def training_rows() -> np.ndarray:
    """Spread points and one-ulp grid ties."""
    ties = klein_with_ties(300, 3, seed=42)
    ties = ties[np.sum(ties * ties, axis=1) < 0.98]
    return np.concatenate([klein_points(200, 3, seed=41), ties])


def symmetric(k: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Training data whose classes 0 and 1 are symmetric, so that their scores tie exactly.

    Three classes: rows of classes 0 and 1 repeated under the other label;
    wherever classes 0 and 1 lead, they tie (forests: equal counts in every
    leaf; boosters grow the same trees for both), and numpy's argmax picks
    class 0. Two classes: rows with ``k_0 < 0`` under both labels, the others
    mirrored in ``k_1`` with the label following its sign, so the classes
    balance exactly (a booster's base score is then 0.5, a margin of 0) and
    the repeated half's leaves have gradient sums of exactly 0.
    """
    if n_classes == 2:
        left = k[k[:, 0] < 0]
        right = k[k[:, 0] >= 0]
        mirror = right * np.array([1.0, -1.0, 1.0])
        X = np.concatenate([left, left, right, mirror])
        y = np.concatenate(
            [np.zeros(len(left)), np.ones(len(left)), right[:, 1] > 0, mirror[:, 1] > 0]
        )
        return X, y.astype(np.int64)
    y = labels(k, n_classes)
    pair = y < 2
    return np.concatenate([k, k[pair]]), np.concatenate([y, 1 - y[pair]])


@pytest.fixture(scope="module")
def zoo() -> dict:
    """name -> (model, rows to score); fitted on first use."""
    k = training_rows()
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            X, Y = symmetric(k, N_CLASSES[name])
            model = MODELS[name]().fit(X, Y)
            rows = [X]
            if not name.startswith(
                "catboost"
            ):  # the oracle reads scikit-learn, XGBoost, LightGBM, oblique
                rows.append(oracle.probe_rows(oracle.native(model), X, np.float64).k)
            cache[name] = (model, np.concatenate(rows))
        return cache[name]

    return get


def _python(model, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(model.predict(X)), np.asarray(model.predict_proba(X))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", list(MODELS))
def test_labels_are_the_models_at_ties_and_near_ties(zoo, name: str, threads: int) -> None:
    model, rows = zoo(name)
    graph = h.to_onnx(model)
    meta = read_metadata(graph)
    assert meta["encoding"] == "fast"
    X = rows.astype(np.float32 if meta["input_dtype"] == "float32" else np.float64)
    want_label, want_p = _python(model, X)
    got = run_onnx(graph, X, threads=threads)
    assert np.array_equal(got["label"], want_label), np.flatnonzero(got["label"] != want_label)[:10]
    # values within the recorded bound (verify's default tolerance follows from it)
    tolerance = default_tolerance(meta) + default_rtol(meta) * np.abs(want_p)
    assert np.all(np.abs(got["probabilities"] - want_p) <= tolerance)
    # the rows hold what the test is about: exact ties (first class wins) and near-ties
    top = np.sort(want_p, axis=1)[:, -2:]
    gap = top[:, 1] - top[:, 0]
    if name not in NO_NATURAL_TIES:
        assert np.count_nonzero(gap == 0) > 0, "no exact ties among the rows"


def _near_tie_model(T: int = 100) -> tuple[h.HyperbolicLGBMClassifier, np.ndarray]:
    """A LightGBM binary model whose leaf values make a one-ulp near-tie at two threads.

    Every leaf of tree 0 holds 1, of the last tree -1, of the others 2^-53.
    In tree order ``1 + 2^-53`` rounds back to 1 (ties to even) each time,
    and the sum is exactly 0: probabilities 0.5 / 0.5, label: the first
    class. Summed in two halves, the second half's ``2^-53`` survive against
    ``-1`` (the spacing just below 1 is ``2^-53``) and the margin is about
    ``49 * 2^-53 > 0``: the second class.
    """
    k = klein_points(400, 3, seed=44)
    model = h.HyperbolicLGBMClassifier(
        n_estimators=T, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1, **KLEIN
    ).fit(k, labels(k, 2))
    return model, k


def _with_leaf_values(described, per_tree: np.ndarray):
    e = described.ensemble
    leaf = e.feature < 0
    value = np.zeros_like(e.value)
    value[leaf, 0] = per_tree[tree_of_node(e)[leaf]]
    return replace(
        described, ensemble=replace(e, value=value, base_values=np.zeros_like(e.base_values))
    )


def _compile_fast(described, *, guard: bool):
    """The fast graph, with or without its near-tie guard (the export always keeps it)."""
    strategy = replace(choose_graph(described, encoding="fast", input_dtype="float64"), guard=guard)
    return compile_model(described, dtype="float64", encoding="fast", opset=18, strategy=strategy)


def test_the_guard_cannot_be_removed() -> None:
    model, k = _near_tie_model()
    T = describe(model).ensemble.n_trees
    per_tree = np.full(T, 2.0**-53)
    per_tree[0], per_tree[-1] = 1.0, -1.0
    described = _with_leaf_values(describe(model), per_tree)
    # The model's own arithmetic: leaf values added in tree order, sigmoid, first class on a tie.
    margin = np.float64(0.0)
    for v in per_tree:
        margin = margin + v
    assert margin == 0.0
    want = np.zeros(200, dtype=np.int64)  # p = 0.5 = 1 - p: numpy's argmax takes class 0

    def labels_of(guard: bool, threads: int) -> np.ndarray:
        graph = _compile_fast(described, guard=guard)
        return run_onnx(graph, k[:200], threads=threads)["label"]

    for threads in (1, 2):
        assert np.array_equal(labels_of(True, threads), want)
    # Without the guard, the runtime's order at two threads gives the other class:
    # the input above really needs it (if onnxruntime ever adds in tree order at
    # two threads, this stops showing it and must be rebuilt).
    assert np.all(labels_of(False, 2) == 1)


def test_the_binary_forest_guard_cannot_be_removed() -> None:
    """Binary forests add the class-1 fractions alone and give class 0 as 1 - p1.

    Every leaf of tree 0 holds (0, 1), of the last tree (1, 0), of the others
    (1/2 - 2^-53, 1/2 + 2^-53). In tree order the class-1 fractions add up to
    exactly 50 (each 2^-53 is lost against sums of 1 and more) and the class-0
    ones to a little less: probability 0.5 against 0.49999999999999994, class 1.
    The graph's ``1 - p1`` is 0.5 too, a tie, and ``ArgMax`` takes class 0, in
    any order of the sum: only the guard gives these rows class 1.
    """
    k = klein_points(400, 3, seed=46)
    model = h.HyperbolicRandomForestClassifier(
        n_estimators=100, max_depth=2, random_state=0, **KLEIN
    ).fit(k, labels(k, 2))
    described = describe(model)
    e = described.ensemble
    p1 = np.full(e.n_trees, 0.5 + 2.0**-53)
    p1[0], p1[-1] = 1.0, 0.0
    leaf = e.feature < 0
    value = np.zeros_like(e.value)
    value[leaf, 1] = p1[tree_of_node(e)[leaf]]
    value[leaf, 0] = 1.0 - value[leaf, 1]
    described = replace(described, ensemble=replace(e, value=value))
    # The model's own arithmetic: each class's fractions added in tree order.
    sums = [np.float64(0.0), np.float64(0.0)]
    for v in p1:
        sums = [sums[0] + (1.0 - v), sums[1] + v]
    assert sums[1] / e.n_trees > sums[0] / e.n_trees  # class 1

    def run(guard: bool, threads: int) -> dict:
        graph = _compile_fast(described, guard=guard)
        assert "Gemm" in [n.op_type for n in all_nodes(graph.graph)]  # 1 - p1
        return run_onnx(graph, k[:200], threads=threads)

    for threads in (1, 2):
        got = run(True, threads)
        assert np.all(got["label"] == 1)
        assert np.all(got["probabilities"][:, 0] == sums[0] / e.n_trees)  # the exact values
        assert np.all(run(False, threads)["label"] == 0)  # without the guard: the tie


def test_values_stay_within_the_recorded_bound() -> None:
    k = klein_points(400, 3, seed=45)
    model = h.HyperbolicLGBMRegressor(
        n_estimators=100, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1, **KLEIN
    ).fit(k, k[:, 0])
    T = describe(model).ensemble.n_trees
    rng = np.random.default_rng(0)
    # leaf values of mixed signs and magnitudes: sums that round differently by order
    per_tree = rng.normal(size=T) * 10.0 ** rng.integers(-8, 8, size=T)
    described = _with_leaf_values(describe(model), per_tree)
    exact = run_onnx(
        compile_model(described, dtype="float64", encoding="exact", opset=18), k, threads=2
    )
    graph = compile_model(described, dtype="float64", encoding="fast", opset=18)
    bound = read_metadata(graph)["value_bound"]
    # at least the textbook bound on reordering T terms (docs/math.md, "The summation contract")
    assert bound >= (T - 1) * 2.0**-53 * np.abs(per_tree).sum()
    got = run_onnx(graph, k, threads=2)
    differs = np.abs(got["variable"] - exact["variable"])
    assert differs.max() > 0  # the orders differ here ...
    assert np.all(differs <= bound)  # ... by no more than the bound


def _float32_ties(X: np.ndarray) -> list[np.ndarray]:
    """``X`` with every value moved to the midpoint between its float32 rounding and
    the float32 above or below (where rounding to float32 ties), and one float64 step
    either side of it."""
    x32 = X.astype(np.float32)
    out = []
    for direction in (np.inf, -np.inf):
        beside = np.nextafter(x32, np.float32(direction)).astype(np.float64)
        mid = (x32.astype(np.float64) + beside) / 2
        out += [mid, np.nextafter(mid, np.inf), np.nextafter(mid, -np.inf)]
    return out


@pytest.mark.parametrize("task", ["binary", "regressor"])
def test_float64_input_is_routed_as_the_model_rounds_it(task: str) -> None:
    """A model comparing in float32 fed float64 points: the fast graph's opset-5
    operator reads them as they are, against float32 boundaries (no Cast to float32
    and back). Rows at and next to every threshold and where rounding to float32
    ties reach the model's leaves: the outputs agree within the bound (a misrouted
    row is off by a leaf's value)."""
    from types import SimpleNamespace

    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    rows = training_rows()
    if task == "binary":
        model = RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0)
        model.fit(rows, labels(rows, 2))
    else:
        model = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0)
        model.fit(rows, rows[:, 0] + np.sin(3 * rows[:, 1]))
    probes = oracle.probe_rows(oracle.native(SimpleNamespace(estimator_=model)), rows).k
    X = np.concatenate([rows, probes, *_float32_ties(probes)])
    with pytest.warns(UserWarning, match="own .Euclidean. thresholds"):
        graph = h.to_onnx(model, dtype="float64", **KLEIN)
    assert describe(model, **KLEIN).ensemble.compare_dtype == "float32"
    main = [n.op_type for n in graph.graph.node]
    assert "Cast" not in main and "TreeEnsemble" in main
    meta = read_metadata(graph)
    got = run_onnx(graph, X, threads=2)
    if task == "regressor":
        want, got_values = model.predict(X).reshape(-1, 1), got["variable"]
    else:
        want, got_values = model.predict_proba(X), got["probabilities"]
        assert np.array_equal(got["label"], model.predict(X))
    tolerance = default_tolerance(meta) + default_rtol(meta) * np.abs(want)
    assert np.all(np.abs(got_values - want) <= tolerance)


def test_float32_boundaries_round_as_a_cast_does() -> None:
    """x <= b iff float32(x) <= t (or < t), for x at, next to and between the
    float32 neighbours of thresholds of every magnitude, subnormals and ties included."""
    rng = np.random.default_rng(3)
    t = rng.normal(size=300) * 10.0 ** rng.integers(-44, 38, size=300)
    t = np.concatenate([t, [0.0, -0.0, 0.5, -1.0, 1.5, 2.0**-149, 3 * 2.0**-149, 2.0**-126]])
    t32 = t.astype(np.float32).astype(np.float64)
    up = np.nextafter(t.astype(np.float32), np.float32(np.inf)).astype(np.float64)
    t = np.concatenate([t, t32, (t32 + up) / 2])  # float32 values and midpoints (ties)
    for op in ("<=", "<"):
        b = trees.float32_boundaries(t, op)
        for step in range(-2, 3):
            x = b.copy()
            for _ in range(abs(step)):
                x = np.nextafter(x, np.sign(step) * np.inf)
            for probe in (x, np.nextafter(t, np.inf), np.nextafter(t, -np.inf), t):
                x32 = probe.astype(np.float32).astype(np.float64)
                want = x32 <= t if op == "<=" else x32 < t
                assert np.array_equal(probe <= b, want), (op, step)
