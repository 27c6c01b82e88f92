"""Checks that no finite input slips through, and that ``verify`` compares as the user holds data.

Cases of issue 23. Oracles are plain numpy written here, independent of the
code under test: a hyperboloid row is on the manifold iff
``x_0^2 - |x_s|^2 = R^2`` computed on the row divided by its largest value
(no overflow); a code is exact in float32 iff ``float32(c) == c``.
"""

from __future__ import annotations

import numpy as np
import pytest
from _cli import assert_usage_error, cli

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.blocks import Categorical, Hyperbolic, Spherical, to_features
from hyp2onnx.errors import InvalidPointError

#: Finite rows whose squares overflow float64: x0*x0 is inf, and inf > rtol * inf is False.
OVERFLOWING = np.array(
    [[1e200, 1.0, 0.0, 0.0], [1e155, 1e155, 1e155, 0.0], [1e300, 0.0, 1e299, 0.0]]
)


def _minkowski_off(X: np.ndarray, R: float = 1.0, rtol: float = 1e-5) -> np.ndarray:
    """Independent oracle: off the hyperboloid, computed on rows scaled to max |x| = 1."""
    m = np.abs(X).max(axis=1, keepdims=True)
    Y = X / m
    with np.errstate(over="ignore"):
        r2 = (R / m[:, 0]) ** 2
    q = Y[:, 0] ** 2 - (Y[:, 1:] ** 2).sum(axis=1)
    return ~(np.abs(q - r2) <= rtol * (Y**2).sum(axis=1))


# -- 1. overflowing points -----------------------------------------------------------------


def test_overflowing_hyperboloid_rows_are_refused_everywhere() -> None:
    assert _minkowski_off(OVERFLOWING).all()  # the oracle: none of them is on the hyperboloid
    for row in OVERFLOWING:
        with pytest.raises(InvalidPointError, match="off the hyperboloid"):
            geometry.check_points(row[None], "hyperboloid")
        with pytest.raises(InvalidPointError, match="off the hyperboloid"):
            geometry.to_klein(row[None], "hyperboloid")
        with pytest.raises(InvalidPointError, match="off the hyperboloid"):
            to_features(row[None], [Hyperbolic(3)])


def test_overflowing_spherical_rows_are_refused() -> None:
    for row in ([1e200, 1.0, 0.0], [1e155, 1e155, 1e155]):
        with pytest.raises(InvalidPointError, match="off the sphere"):
            to_features(np.array([row]), [Spherical(2)])


def test_accepted_far_points_keep_their_klein_coordinates_in_the_ball() -> None:
    """Points the check accepts give |k|^2 <= (1 + rtol) / (1 - rtol); rows it refuses do not."""
    rng = np.random.default_rng(3)
    scale = 10.0 ** rng.uniform(-300, 300, size=(400, 1))
    X = np.abs(rng.normal(size=(400, 4))) * scale
    X[:, 0] = np.abs(X[:, 0]) + np.sqrt((X[:, 1:] ** 2).sum(axis=1) / 4.0)  # some near the cone
    X = np.vstack([X, OVERFLOWING])
    for x in X:
        try:
            k = geometry.to_klein(x[None], "hyperboloid")
        except InvalidPointError:
            continue
        assert not _minkowski_off(x[None])[0]
        assert (k**2).sum() <= (1 + 1e-5) / (1 - 1e-5)


def test_cli_refuses_overflowing_rows_for_a_float64_graph(tmp_path) -> None:
    from _data import labels, points

    X, k = points(120, 3, seed=7)
    model = h.HyperbolicDecisionTreeClassifier(max_depth=3, random_state=0).fit(
        X, labels(k, 2, seed=7)
    )
    import pickle

    (tmp_path / "m.pkl").write_bytes(pickle.dumps(model))
    code, _, err = cli(
        "convert", tmp_path / "m.pkl", "-o", tmp_path / "m.onnx", "--dtype", "float64"
    )
    assert code == 0, err
    np.save(tmp_path / "far.npy", np.vstack([X[:3], OVERFLOWING]))
    for args in (
        ("predict", tmp_path / "m.onnx", tmp_path / "far.npy", "-o", tmp_path / "p.csv"),
        ("verify", tmp_path / "m.pkl", tmp_path / "m.onnx", "--data", tmp_path / "far.npy"),
        (
            "convert",
            tmp_path / "m.pkl",
            "-o",
            tmp_path / "c.onnx",
            "--dtype",
            "float64",
            "--check",
            tmp_path / "far.npy",
        ),
    ):
        code, _, err = cli(*args)
        assert_usage_error(code, err, match="off the hyperboloid")
        assert "rows 3, 4, 5" in err, err


# -- 2. categorical codes float32 cannot hold --------------------------------------------------


def _coded_model(codes: list[int], n: int = 400, seed: int = 0, learner: str = "lightgbm"):
    from _data import coded_model, points

    # learner="sklearn": codes split as numbers (LightGBM writes a 2**31-bit set for 2**31 - 1)
    X, k = points(n, 2, seed=seed)
    rng = np.random.default_rng(seed)
    return coded_model(X, k, codes, codes[-1], rng, seed=seed, learner=learner)


def test_codes_float32_cannot_hold_make_the_default_graph_float64() -> None:
    from hyp2onnx.verification import run_onnx

    codes = [1 << 24, (1 << 24) + 1]
    assert float(np.float32(codes[1])) != codes[1]  # the oracle: float32 reads 2**24 + 1 as 2**24
    model, X = _coded_model(codes)
    graph = h.to_onnx(model)
    assert h.read_metadata(graph)["input_dtype"] == "float64"
    assert (run_onnx(graph, X)["label"] == model.predict(X)).all()
    # Small codes keep float32 (the rule is about the codes, not about categories at all).
    small, Xs = _coded_model([3, 4])
    assert h.read_metadata(h.to_onnx(small))["input_dtype"] == "float32"


def test_verify_compares_the_model_on_the_data_as_the_user_holds_it() -> None:
    """A float32 graph forced on codes above 2**24: verify must see what the cast loses."""
    from hyp2onnx.verification import run_onnx

    model, X = _coded_model([1 << 24, (1 << 24) + 1])
    with pytest.warns(UserWarning, match="float32 cannot separate"):
        graph = h.to_onnx(model, dtype="float32")
    differ = int((run_onnx(graph, X)["label"] != model.predict(X)).sum())
    assert differ > 0  # the graph really misroutes training rows
    report = h.verify(model, graph, X)
    assert not report.ok and report.label_mismatches == differ


def test_verify_accepts_the_training_rows_of_a_model_with_code_2_31_minus_1(tmp_path) -> None:
    import pickle

    top = (1 << 31) - 1
    model, X = _coded_model([5, top], learner="sklearn")
    graph = h.to_onnx(model)
    assert h.verify(model, graph, X).ok
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(model))
    np.save(tmp_path / "X.npy", X)
    code, out, err = cli(
        "convert", tmp_path / "m.pkl", "-o", tmp_path / "m.onnx", "--check", tmp_path / "X.npy"
    )
    assert code == 0, err
    code, out, err = cli(
        "verify", tmp_path / "m.pkl", tmp_path / "m.onnx", "--data", tmp_path / "X.npy"
    )
    assert code == 0 and out.startswith("OK"), (out, err)


# -- 3. far HyperDT models ---------------------------------------------------------------------


def _far_hyperdt_rows(n: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Points at hyperbolic radius 9 whose angles are 2e-7 apart: float32 cannot tell them apart."""
    theta = 0.7 + np.arange(n) * 2e-7
    rho = 9.0
    X = np.column_stack(
        [np.full(n, np.cosh(rho)), np.sinh(rho) * np.cos(theta), np.sinh(rho) * np.sin(theta)]
    )
    return X, (np.arange(n) // 3) % 2


def test_far_hyperdt_models_export_float64_and_keep_every_training_row() -> None:
    from hyp2onnx.verification import run_onnx

    tree = pytest.importorskip("hyperdt.tree", reason="hyperdt (extra 'bench') is not installed")
    X, y = _far_hyperdt_rows()
    model = tree.HyperbolicDecisionTreeClassifier(max_depth=8).fit(X, y)
    # The oracle, HyperDT itself: rounded to float32, some training rows change sides.
    assert (model.predict(X.astype(np.float32).astype(np.float64)) != model.predict(X)).any()
    graph = h.to_onnx(model)
    assert h.read_metadata(graph)["input_dtype"] == "float64"
    assert (run_onnx(graph, X)["label"] == model.predict(X)).all()
    assert h.verify(model, graph, X).ok
    # Forced float32: a warning, and verify shows the rows that float32 moves.
    with pytest.warns(UserWarning, match="HyperDT compares its splits in float64"):
        graph32 = h.to_onnx(model, dtype="float32")
    differ = int((run_onnx(graph32, X)["label"] != model.predict(X)).sum())
    assert differ > 0
    assert h.verify(model, graph32, X).label_mismatches == differ


# -- 5, 6. categorical codes on the command line ------------------------------------------


@pytest.fixture(scope="module")
def coded_graph(tmp_path_factory):
    import pickle

    folder = tmp_path_factory.mktemp("coded")
    model, X = _coded_model([0, 3, 7], learner="sklearn")
    (folder / "m.pkl").write_bytes(pickle.dumps(model))
    code, _, err = cli("convert", folder / "m.pkl", "-o", folder / "m.onnx")
    assert code == 0, err
    return folder, X


@pytest.mark.parametrize("bad_code", [-1.0, float(1 << 31), 2.5])
@pytest.mark.parametrize("manifold_flag", [[], ["--no-manifold-check"]])
def test_predict_refuses_invalid_codes_with_the_range_and_the_row(
    coded_graph, bad_code, manifold_flag
):
    folder, X = coded_graph
    data = X[:6].copy()
    data[4, -1] = bad_code
    # The oracle: codes are integers in [0, 2**31).
    assert not (0 <= bad_code < 2**31 and bad_code == int(bad_code))
    np.save(folder / "bad.npy", data)
    out = folder / "p.csv"
    code, _, err = cli(
        "predict", folder / "m.onnx", folder / "bad.npy", "-o", out, "--force", *manifold_flag
    )
    assert_usage_error(code, err, match="0 .. 2147483647")
    assert "(rows 4)" in err, err
    assert not out.exists()


# -- 8. block parameters are checked when the block is made -----------------------------------


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: Hyperbolic(2, curvature="-1"), r"Hyperbolic\(curvature=...\) must be a number"),
        (lambda: Hyperbolic(2, curvature=True), r"Hyperbolic\(curvature=...\) must be a number"),
        (lambda: Hyperbolic(2, curvature=0.5), "curvature must be a finite negative number"),
        (lambda: Hyperbolic(timelike_dim=1.5), r"Hyperbolic\(timelike_dim=...\)"),
        (lambda: Hyperbolic(timelike_dim=True), r"Hyperbolic\(timelike_dim=...\)"),
        (lambda: Spherical(2, curvature="1"), r"Spherical\(curvature=...\)"),
        (lambda: Spherical(base_dim="0"), r"Spherical\(base_dim=...\)"),
        (lambda: Categorical(2.0), r"Categorical\(dims=...\)"),
    ],
)
def test_bad_block_parameters_are_refused_when_the_block_is_made(make, match) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_a_curvature_of_any_real_type_is_kept_as_a_float() -> None:
    from fractions import Fraction

    block = Hyperbolic(2, curvature=Fraction(-1, 2))
    assert block.curvature == -0.5 and type(block.curvature) is float


# -- 12. conventions and gensim_points -------------------------------------------------------


@pytest.mark.parametrize(
    "source, params",
    [
        ("geoopt.Stereographic", {"k": float("nan")}),
        ("geoopt.Stereographic", {"k": -float("inf")}),
        ("geoopt.PoincareBall", {"c": True}),
        ("hgcn", {"c": True}),
        ("hypll", {"c": True}),
        ("hypll", {"raw": True}),
        ("geoopt.PoincareBall", {"c": "1"}),
    ],
)
def test_conventions_refuse_booleans_strings_and_non_finite_parameters(source, params) -> None:
    from hyp2onnx.conventions import convention

    with pytest.raises(
        ValueError, match=f"{source}: {next(iter(params))} must be a (real|finite) number"
    ):
        convention(source, **params)


@pytest.mark.parametrize("timelike_dim", [1.5, 1.0, True])
def test_a_convention_refuses_a_timelike_dim_that_is_not_an_integer(timelike_dim) -> None:
    from hyp2onnx.conventions import Convention

    with pytest.raises(ValueError, match="timelike_dim must be an integer"):
        Convention("hyperboloid", -1.0, timelike_dim)


@pytest.mark.parametrize("thing", [None, 3, np.zeros((2, 2))])
def test_gensim_points_refuses_what_is_not_a_gensim_model(thing) -> None:
    from hyp2onnx.conventions import gensim_points

    with pytest.raises(TypeError, match="needs a trained gensim PoincareModel"):
        gensim_points(thing)


def test_metadata_nested_too_deep_is_one_clear_error(tmp_path) -> None:
    import onnx
    from _data import labels, points

    X, k = points(60, 2, seed=1)
    model = h.HyperbolicDecisionTreeClassifier(max_depth=2).fit(X, labels(k, 2, seed=1))
    graph = h.to_onnx(model)
    for prop in graph.metadata_props:
        if prop.key.endswith("classes"):
            prop.value = "[" * 5000 + "]" * 5000  # valid JSON, deeper than Python's recursion limit
    onnx.save(graph, tmp_path / "deep.onnx")
    np.save(tmp_path / "X.npy", X)
    with pytest.raises(ValueError, match="nested too deeply"):
        h.read_metadata(graph)
    for args in (
        ("inspect", tmp_path / "deep.onnx"),
        ("predict", tmp_path / "deep.onnx", tmp_path / "X.npy", "-o", tmp_path / "p.csv"),
    ):
        code, _, err = cli(*args)
        assert_usage_error(code, err, match="nested too deeply")


def test_skl2onnx_advises_only_encodings_that_convert_a_categorical_model() -> None:
    import re

    pytest.importorskip("skl2onnx", reason="skl2onnx (extra 'skl2onnx') is not installed")
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    h.register_skl2onnx_converters()
    model, X = _coded_model([0, 3, 7])
    convert = lambda options: convert_sklearn(
        model,
        initial_types=[("X", FloatTensorType([None, X.shape[1]]))],
        options=options,
        target_opset={"": 18, "ai.onnx.ml": 3},
    )
    with pytest.raises(RuntimeError) as caught:
        convert(None)
    advised = re.findall(r"options=\{'encoding': '(\w+)'\}", str(caught.value))
    assert advised, str(caught.value)
    for name in advised:  # the advice works
        convert({id(model): {"encoding": name}})
    assert "compat" not in advised


def test_a_spherical_point_at_the_hemispheres_edge_gets_one_error_everywhere(tmp_path) -> None:
    import pickle

    rng = np.random.default_rng(0)
    g = rng.uniform(-2, 2, size=(200, 2))
    x0 = 1 / np.sqrt(1 + (g * g).sum(1))
    X = np.column_stack([x0, g * x0[:, None]])
    model = h.HyperbolicDecisionTreeClassifier(max_depth=3, input_blocks=[Spherical(2)]).fit(
        X, (g[:, 0] > 0.3).astype(int)
    )
    P = np.array([[1e-300, 1.0, 0.0]])  # on the unit sphere, x_0 > 0
    assert 1.0 / 1e-300 > 3.4028235e38  # the oracle: its gnomonic coordinate overflows float32
    match = "too close to the edge of the hemisphere"
    with pytest.raises(InvalidPointError, match=match):
        model.predict(P)
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(model))
    np.save(tmp_path / "P.npy", P)
    code, _, err = cli("convert", tmp_path / "m.pkl", "-o", tmp_path / "m.onnx")
    assert code == 0, err
    for args in (
        ("predict", tmp_path / "m.onnx", tmp_path / "P.npy", "-o", tmp_path / "p.csv"),
        (
            "predict",
            tmp_path / "m.onnx",
            tmp_path / "P.npy",
            "-o",
            tmp_path / "p.csv",
            "--no-manifold-check",
        ),
        ("verify", tmp_path / "m.pkl", tmp_path / "m.onnx", "--data", tmp_path / "P.npy"),
    ):
        code, _, err = cli(*args)
        assert_usage_error(code, err, match=match)
        assert "x_0 <= 0" not in err


def test_the_default_dtype_keeps_every_training_label_when_the_input_is_rounded() -> None:
    # Klein values two float32 steps apart, labels flipping every two points: float32
    # keeps each split's two nearest Klein values apart, but a float32 graph receives
    # the hyperboloid coordinates rounded to float32, and their quotient moves by up to
    # about a float32 step. The default must be the dtype whose graph answers as the model.
    rng = np.random.default_rng(0)
    step = np.spacing(np.float32(0.5))
    k = 0.5 + step * np.arange(0, 400, 2.0) + step * rng.uniform(-0.2, 0.2, 200)
    y = (np.arange(200) // 2) % 2
    r = np.arctanh(k)
    X = np.stack([np.cosh(r), np.sinh(r)], axis=1)
    model = h.HyperbolicXGBClassifier(
        tree_space="klein", n_estimators=20, max_depth=8, learning_rate=1.0
    ).fit(X, y)
    report = h.verify(model, h.to_onnx(model), X)
    assert report.ok, report
    assert model.input_dtype_ == "float64"


# -- sample weights (issue 31) ---------------------------------------------------------------

#: Each estimator, small, and whether its library defines a negative weight.
WEIGHTED = [
    ("HyperbolicDecisionTreeClassifier", {"max_depth": 3}, False),
    ("HyperbolicRandomForestClassifier", {"n_estimators": 3, "max_depth": 3}, False),
    # A regressor's leaf value is a weighted mean, defined for negative weights too; a
    # random forest draws its bootstrap samples with the weights as probabilities.
    ("HyperbolicDecisionTreeRegressor", {"max_depth": 3}, True),
    ("HyperbolicRandomForestRegressor", {"n_estimators": 3, "max_depth": 3}, False),
    ("HyperbolicXGBClassifier", {"n_estimators": 2, "max_depth": 2}, False),
    ("HyperbolicLGBMClassifier", {"n_estimators": 2, "num_leaves": 4, "verbose": -1}, True),
    ("HyperbolicCatBoostClassifier", {"iterations": 2, "depth": 2, "verbose": 0}, False),
    ("HyperbolicHouseholderTreeClassifier", {"max_depth": 2}, False),
    ("HyperbolicRotationForestClassifier", {"n_estimators": 2, "max_depth": 2}, False),
]


@pytest.mark.parametrize(("name", "params", "negative_ok"), WEIGHTED)
def test_bad_sample_weights_are_refused_naming_the_rows(name, params, negative_ok) -> None:
    """Before this check XGBoost raised its raw "Weights must be positive values ... Stack
    trace", and a forest with a negative weight predicted negative "probabilities"."""
    X, y = h.datasets.make_wrapped_normal_mixture(60, 2, 2, random_state=0)
    make = getattr(h, name)
    cases = [(np.nan, "NaN at rows 7, 40"), (np.inf, "infinite at rows 7, 40")]
    if not negative_ok:
        cases.append((-0.5, "negative at rows 7, 40"))
    for value, match in cases:
        w = np.ones(len(y))
        w[[7, 40]] = value
        with pytest.raises(ValueError, match=match):
            make(**params).fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match=r"every weight is zero \(60 rows\)"):
        make(**params).fit(X, y, sample_weight=np.zeros(len(y)))
    if negative_ok:  # LightGBM, scikit-learn regressors: defined for any sign
        w = np.ones(len(y))
        w[7] = -0.5
        make(**params).fit(X, y, sample_weight=w)
    many = np.ones(len(y))
    many[10:20] = np.nan
    with pytest.raises(ValueError, match=r"NaN at rows 10, 11, 12, 13, 14 and 5 more"):
        make(**params).fit(X, y, sample_weight=many)
