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

import copy
from dataclasses import replace

import _oracle as oracle
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _boosting_data import klein_with_ties
from _data import klein_points, labels

import hyp2onnx as h
from hyp2onnx._runtime import all_nodes
from hyp2onnx.emit import fast, outputs, trees
from hyp2onnx.emit.strategy import GraphOverrides
from hyp2onnx.emit.trees import tree_of_node
from hyp2onnx.export import describe, read_metadata
from hyp2onnx.export._compile import compile_model
from hyp2onnx.verification import default_rtol, default_tolerance, run_onnx

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
    if name in ("forest_votes", "forest_fractions"):  # 3 classes: the opset-3 graph
        assert meta["values_rounded_to"] == "float32"
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


def _class_one_rounds(seed: int, big: float, small: float):
    """A 100-round three-class LightGBM model (``klein_points(400, 3, seed=seed)``), its
    description, and leaf values for it in which only class 1's trees add: ``big`` in the
    first round, ``-big`` in the last, ``small`` in every other (``per_round``). Returns
    ``k, described, value, per_round``; the description keeps the model's own values."""
    k = klein_points(400, 3, seed=seed)
    model = h.HyperbolicLGBMClassifier(
        n_estimators=100, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1, **KLEIN
    ).fit(k, labels(k, 3))
    described = describe(model)
    e = described.ensemble
    per_round = np.full(e.n_trees // 3, small)
    per_round[0], per_round[-1] = big, -big
    leaf = e.feature < 0
    tree = tree_of_node(e)
    value = np.zeros_like(e.value)
    ones = leaf & (e.tree_target[tree] == 1)
    value[ones, 1] = per_round[tree[ones] // 3]
    return k, described, value, per_round


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
    overrides = GraphOverrides(guard=guard)
    return compile_model(described, dtype="float64", encoding="fast", opset=18, overrides=overrides)


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


def test_the_guard_follows_xgboosts_float32_threshold() -> None:
    """XGBoost's binary label is a float32 margin above ``1.5 * 2**-24`` (its own sigmoid's
    ``p > 0.5``): the guard looks at the margin's distance to that threshold.

    Tree 0 adds 1, the last -1, the others ``2**-24``: in tree order each ``2**-24`` is lost
    against 1 (ties to even) and the float32 margin is exactly 0, label 0. Summed in two
    halves, the second half's ``2**-24`` survive against -1 and the margin is about
    ``49 * 2**-24``, far above the threshold: label 1 without the guard.
    """
    k = klein_points(400, 3, seed=47)
    model = h.HyperbolicXGBClassifier(
        n_estimators=100, max_depth=2, n_jobs=1, base_score=0.5, **KLEIN
    ).fit(k, labels(k, 2))
    described = describe(model)
    assert described.ensemble.label_rule == "above"
    per_tree = np.full(described.ensemble.n_trees, 2.0**-24)
    per_tree[0], per_tree[-1] = 1.0, -1.0
    described = _with_leaf_values(describe(model), per_tree)
    margin = np.float32(0.0)
    for v in per_tree.astype(np.float32):  # the model's own arithmetic: float32, tree order
        margin = np.float32(margin + v)
    assert margin == 0.0

    def labels_of(guard: bool, threads: int) -> np.ndarray:
        graph = _compile_fast(described, guard=guard)
        return run_onnx(graph, k[:200], threads=threads)["label"]

    for threads in (1, 2):
        assert np.all(labels_of(True, threads) == 0)
    assert np.all(labels_of(False, 2) == 1)  # the runtime's order needs the guard here


def test_the_guard_of_labels_on_raw_scores_cannot_be_removed() -> None:
    """Labels decided on raw scores (CatBoost's rule): the guard looks at the top two
    scores. Three classes whose trees each feed one class (a LightGBM model's IR with
    CatBoost's rule): classes 0 and 2 score 0, class 1 the near-tie sum of
    ``_near_tie_model`` (exactly 0 in tree order, ``49 * 2**-53`` in two halves)."""
    k, described, value, _ = _class_one_rounds(48, 1.0, 2.0**-53)
    e = described.ensemble
    described = replace(described, ensemble=replace(e, value=value, label_rule="scores"))

    def labels_of(guard: bool, threads: int) -> np.ndarray:
        graph = _compile_fast(described, guard=guard)
        return run_onnx(graph, k[:200], threads=threads)["label"]

    for threads in (1, 2):
        assert np.all(labels_of(True, threads) == 0)  # an exact tie: the first class
    assert np.all(labels_of(False, 2) == 1)


def test_the_softmax_guard_cannot_be_removed() -> None:
    """Softmax boosters' labels come from the library's probabilities: one guard on the top
    two scores serves both the order of the sums and the softmax's near-ties, with the
    limit ``2 bound + NEAR_TIE``. Three classes whose trees each feed one class: classes 0
    and 2 score 0, class 1 adds 4096, then ``2**-41`` (half an ulp of 4096: lost to ties
    to even in tree order), then -4096: exactly 0 in tree order, a tie of all three
    classes (label 0); about ``49 * 2**-41`` summed in two halves, far above ``NEAR_TIE``
    (the softmax alone would keep it) but within twice the bound: label 1 unless the guard
    rescores the row."""
    k, described, value, per_round = _class_one_rounds(49, 4096.0, 2.0**-41)
    e = described.ensemble
    assert (e.post_transform, e.label_rule) == ("softmax", "probabilities")
    described = replace(
        described, ensemble=replace(e, value=value, base_values=np.zeros_like(e.base_values))
    )
    total = np.float64(0.0)
    for v in per_round:  # the model's own arithmetic: tree order
        total = total + v
    assert total == 0.0
    limit = 2.0 * fast.value_bound(described.ensemble) + outputs.NEAR_TIE["float64"]
    assert outputs.NEAR_TIE["float64"] < 40 * 2.0**-41 < limit

    def run(guard: bool, threads: int) -> dict:
        graph = _compile_fast(described, guard=guard)
        return run_onnx(graph, k[:200], threads=threads)

    for threads in (1, 2):
        got = run(True, threads)
        assert np.all(got["label"] == 0)  # an exact tie: the first class
        assert np.all(got["probabilities"] == 1.0 / 3.0)
    assert np.all(run(False, 2)["label"] == 1)  # the runtime's order needs the guard here


def _exp_off_by_ulps(graph, factor: float):
    """``graph`` with every ``Exp`` multiplied by ``factor`` and kept at most 1 (the
    softmax's shifted scores are at most 0): a runtime whose ``exp`` is a few ulps high
    but exact at 0 (the library's ``exp``, or another runtime's, may round otherwise)."""
    graph = copy.deepcopy(graph)

    def walk(g) -> None:
        nodes = []
        for node in g.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    walk(attribute.g)
            nodes.append(node)
            if node.op_type == "Exp":
                out = node.output[0]
                node.output[0] = out + "/exact"
                c = onnx.helper.make_tensor(out + "/factor", onnx.TensorProto.DOUBLE, [], [factor])
                nodes.append(onnx.helper.make_node("Constant", [], [c.name], value=c))
                one = onnx.helper.make_tensor(out + "/one", onnx.TensorProto.DOUBLE, [], [1.0])
                nodes.append(onnx.helper.make_node("Constant", [], [one.name], value=one))
                high = out + "/high"
                nodes.append(onnx.helper.make_node("Mul", [node.output[0], c.name], [high]))
                nodes.append(onnx.helper.make_node("Min", [high, one.name], [out]))
        del g.node[:]
        g.node.extend(nodes)

    walk(graph.graph)
    return graph


def test_the_softmax_guard_covers_the_exps_last_bits() -> None:
    """The softmax guard's limit holds ``NEAR_TIE`` beside ``2 bound``: a row whose top two
    scores lie closer gets the correctly rounded ``exp``, so a runtime whose ``exp`` is a
    few ulps off keeps the library's label. Class 1 scores ``3 * 2**-53`` (two trees, added
    exactly in any order: ``2 bound`` is far smaller), classes 0 and 2 score 0: the library
    gives class 1 the larger probability; an ``exp`` four ulps high rounds the others'
    ``exp(-3 * 2**-53)`` to 1, a three-way tie, and class 0."""
    k = klein_points(400, 3, seed=50)
    model = h.HyperbolicLGBMClassifier(
        n_estimators=4, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1, **KLEIN
    ).fit(k, labels(k, 3))
    described = describe(model)
    e = described.ensemble
    per_round = np.array([2.0**-52, 2.0**-53, 0.0, 0.0])
    leaf, tree = e.feature < 0, tree_of_node(e)
    value = np.zeros_like(e.value)
    ones = leaf & (e.tree_target[tree] == 1)
    value[ones, 1] = per_round[tree[ones] // 3]
    described = replace(
        described, ensemble=replace(e, value=value, base_values=np.zeros_like(e.base_values))
    )
    assert 0 < 2.0 * fast.value_bound(described.ensemble) < 3 * 2.0**-53
    assert 3 * 2.0**-53 < outputs.NEAR_TIE["float64"]
    shifted_exp = np.exp(np.float64(-3 * 2.0**-53))
    assert shifted_exp / (1 + 2 * shifted_exp) < 1 / (1 + 2 * shifted_exp)  # the library: class 1
    assert shifted_exp * (1 + 2.0**-51) == 1.0  # four ulps high: a tie
    graph = _exp_off_by_ulps(_compile_fast(described, guard=True), 1 + 2.0**-51)
    options = ort.SessionOptions()
    # as written: onnxruntime's graph optimizations may rewrite the inserted Mul and Min
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    for threads in (1, 2):
        options.intra_op_num_threads = threads
        s = ort.InferenceSession(
            graph.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        assert np.all(s.run(["label"], {"X": k[:200]})[0] == 1)


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


@pytest.mark.parametrize("task", ["binary", "multiclass", "regressor"])
def test_float64_input_is_routed_as_the_model_rounds_it(task: str) -> None:
    """A model comparing in float32 fed float64 points: the fast graph's opset-5
    operator reads them as they are, against float32 boundaries (no Cast to float32
    and back). Rows at and next to every threshold and where rounding to float32
    ties reach the model's leaves: the outputs agree within the bound (a misrouted
    row is off by a leaf's value)."""
    from types import SimpleNamespace

    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    rows = training_rows()
    if task != "regressor":
        model = RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0)
        model.fit(rows, labels(rows, 2 if task == "binary" else 4))
    else:
        model = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0)
        model.fit(rows, rows[:, 0] + np.sin(3 * rows[:, 1]))
    probes = oracle.probe_rows(oracle.native(SimpleNamespace(estimator_=model)), rows).k
    X = np.concatenate([rows, probes, *_float32_ties(probes)])
    with pytest.warns(UserWarning, match="own .Euclidean. thresholds"):
        graph = h.to_onnx(model, dtype="float64", **KLEIN)
    assert describe(model, **KLEIN).ensemble.compare_dtype == "float32"
    main = [n.op_type for n in _long_batch_nodes(graph)]
    operator = "TreeEnsembleRegressor" if task == "multiclass" else "TreeEnsemble"
    assert operator in main and "Cast" not in main[: main.index(operator)]
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


def _multiclass_forest(n_trees: int = 20):
    k = klein_points(400, 3, seed=47)
    model = h.HyperbolicRandomForestClassifier(
        n_estimators=n_trees, max_depth=3, random_state=0, **KLEIN
    ).fit(k, labels(k, 3))
    return model, k


def _long_batch_nodes(graph) -> list:
    """The nodes a long batch runs at the top of its path: those of the main graph, and
    past the If on the batch size (multi-class forests), those of its long branch."""
    nodes = list(graph.graph.node)
    for i, node in enumerate(nodes):
        if node.name == "short_batch/If":
            branch = next(a.g for a in node.attribute if a.name == "else_branch")
            return nodes[:i] + list(branch.node)
    return nodes


def test_the_multiclass_forest_guard_cannot_be_removed() -> None:
    """Forests of more than two classes: the opset-3 operator adds every leaf's class
    values in double, in its threads' order, and rounds once to float32.

    Exact ties: every leaf holds (0.4, 0.4 + 2^-30, 0.2 - 2^-30). In any order class 1
    leads by 2^-30 in double, far more than the reordering bound (label 1); rounded to
    float32 both are 0.4, a tie that ``ArgMax`` gives to class 0.
    """
    model, k = _multiclass_forest()
    described = describe(model)
    e = described.ensemble
    leaf = e.feature < 0
    value = np.zeros_like(e.value)
    value[leaf] = [0.4, 0.4 + 2.0**-30, 0.2 - 2.0**-30]
    described = replace(described, ensemble=replace(e, value=value))
    exact = np.float64(0.0), np.float64(0.0)
    for _ in range(e.n_trees):  # the model's own arithmetic: tree order, then the mean
        exact = exact[0] + value[leaf][0, 0], exact[1] + value[leaf][0, 1]
    p0, p1 = exact[0] / e.n_trees, exact[1] / e.n_trees
    assert p1 > p0 and np.float32(p1) == np.float32(p0)

    def run(threads: int, guard: bool = True) -> dict:
        graph = _compile_fast(described, guard=guard)
        assert read_metadata(graph)["values_rounded_to"] == "float32"
        assert "TreeEnsembleRegressor" in [n.op_type for n in _long_batch_nodes(graph)]
        return run_onnx(graph, k[:200], threads=threads)

    for threads in (1, 2):
        got = run(threads)
        assert np.all(got["label"] == 1)
        assert np.all(got["probabilities"][:, :2] == [p0, p1])  # the exact graph's values
        assert np.all(run(threads, guard=False)["label"] == 0)  # no guard: the float32 tie


def test_the_multiclass_margin_covers_the_float32_rounding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Near-ties the rounding widens: a margin of the reordering bound alone is too narrow.

    128 trees, ``m`` the float32 midpoint ``0.3125 + 2^-26``. Class 0: tree 0 holds
    ``A = 128 m - 2^-44``, every other tree ``2^-48``, half an ulp of ``A``: in tree
    order each rounds away (ties to even), so ``p0 = A / 128``, just below ``m``.
    Class 1: tree 0 holds ``A + 2^-46``, the others 0: ``p1 > p0``, the model's label
    is 1, and ``p1`` is still below ``m``. At two threads onnxruntime adds the trees in
    two halves, the second half's ``64 * 2^-48 = 2^-42`` survives, and class 0's double
    sum passes ``m``: rounded to float32, class 0 is ``0.3125 + 2^-25`` and class 1
    ``0.3125``, one float32 ulp apart, far more than twice the reordering bound. Only a
    margin that covers the rounding sends these rows to the exact sums.
    """
    model, k = _multiclass_forest(n_trees=128)
    described = describe(model)
    e = described.ensemble
    mid = 0.3125 + 2.0**-26
    A = 128 * mid - 2.0**-44
    per_tree = np.zeros((e.n_trees, e.n_outputs))
    per_tree[:, 0] = 2.0**-48
    per_tree[0, :2] = A, A + 2.0**-46
    leaf = e.feature < 0
    value = np.zeros_like(e.value)
    value[leaf] = per_tree[tree_of_node(e)[leaf]]
    described = replace(described, ensemble=replace(e, value=value))
    sums = np.zeros(e.n_outputs)
    for row in per_tree:  # the model's own arithmetic: tree order, then the mean
        sums = sums + row
    p = sums / e.n_trees
    assert p[1] > p[0] and p[1] < mid and np.float32(p[0]) == np.float32(p[1])

    def labels_of(threads: int) -> np.ndarray:
        graph = compile_model(described, dtype="float64", encoding="fast", opset=18)
        return run_onnx(graph, k[:200], threads=threads)["label"]

    for threads in (1, 2):
        assert np.all(labels_of(threads) == 1)
    # The margin of the reordering bound alone: at two threads the rows keep the
    # rounded sums, whose order is the other class's (the input really needs it).
    monkeypatch.setattr(fast, "float32_rounding", lambda ensemble, bound: 0.0)
    assert np.all(labels_of(2) == 0)


@pytest.mark.parametrize("threads", [1, 2])
def test_multiclass_probabilities_are_double_sums_rounded_once(threads: int) -> None:
    """The opset-3 operator (double thresholds and weights) keeps its sums in double and
    rounds once to float32: every probability not rescored is a float32 value within
    half a float32 ulp (2^-24 relative) plus the reordering bound of the model's, hence
    within the recorded bound, which ``verify`` checks."""
    from hyp2onnx.emit.fast import float32_rounding, value_bound
    from hyp2onnx.verification import verify

    model, k = _multiclass_forest(n_trees=40)
    X = np.concatenate([k, klein_points(3000, 3, seed=48)])
    graph = h.to_onnx(model, dtype="float64")
    meta = read_metadata(graph)
    e = describe(model).ensemble
    reorder = value_bound(e)
    assert meta["values_rounded_to"] == "float32"
    assert meta["value_bound"] == reorder + float32_rounding(e, reorder)
    got = run_onnx(graph, X, threads=threads)["probabilities"]
    want = model.predict_proba(X)
    top = np.sort(got, axis=1)
    rescored = top[:, -1] - top[:, -2] <= meta["tie_margin"]
    fast_rows = got[~rescored]
    assert np.array_equal(fast_rows.astype(np.float32), fast_rows)  # float32 values
    differs = np.abs(got - want)
    assert np.all(differs[~rescored] <= 2.0**-24 * np.abs(want[~rescored]) + reorder)
    assert differs.max() > 1e-9  # the rounding shows ...
    assert differs.max() <= meta["value_bound"]  # ... within the recorded bound
    assert verify(model, graph, X).ok
    # verify holds the graph to its stated bound: understated, the same graph fails
    low = type(graph)()
    low.CopyFrom(graph)
    for prop in low.metadata_props:
        if prop.key.endswith("value_bound"):
            prop.value = repr(float(differs.max()) / 2)
    assert not verify(model, low, X).ok


def test_the_reference_evaluator_runs_the_multiclass_graph() -> None:
    """onnx's reference evaluator reads only the float attributes of the opset-3
    operator; hyp2onnx's (``verify.reference_evaluator``) also reads the double ones."""
    from hyp2onnx.verification import reference_evaluator

    model, k = _multiclass_forest()
    graph = h.to_onnx(model, dtype="float64")
    label, p = reference_evaluator(graph).run(None, {"X": k})
    assert np.array_equal(label, model.predict(k))
    assert np.abs(p - model.predict_proba(k)).max() <= read_metadata(graph)["value_bound"]


@pytest.mark.parametrize("variant", fast.CLASS_VALUE_CHOICES)
def test_each_way_of_adding_class_values_keeps_the_contract(variant):
    """`GraphOverrides(class_values=...)` builds each way of adding a forest's per-class
    leaf fractions (what bench_multiclass measures): the model's labels, probabilities
    within the bound the graph records, and a graph of its own. Planted: the override
    dropped on the way to the emitter (every variant the default graph)."""
    k = klein_points(3_000, 3, seed=4)
    y = labels(k, 4)
    model = h.HyperbolicRandomForestClassifier(
        n_estimators=12, max_depth=6, input_geometry="klein", random_state=0
    ).fit(k[:1_500], y[:1_500])
    described = describe(model)
    dtype = h.export.input_dtype(described)

    def graph(values):
        return compile_model(
            described,
            dtype=dtype,
            encoding="fast",
            opset=18,
            overrides=GraphOverrides(class_values=values),
        )

    built = graph(variant)
    assert (built == graph("average")) == (variant == "average")
    rows = k[1_500:].astype(dtype)
    got = run_onnx(built, rows)
    np.testing.assert_array_equal(got["label"], model.predict(rows))
    bound = float(read_metadata(built)["value_bound"])
    assert np.abs(got["probabilities"] - model.predict_proba(rows)).max() <= bound
