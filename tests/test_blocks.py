"""Input blocks: hyperbolic, spherical, Euclidean and categorical columns in one model.

Oracles are independent of the code under test: gnomonic coordinates and
the angular midpoint from plane vectors, Klein coordinates as x_i / x_0;
the exported graphs against the Python models on training rows and on rows
placed at and one float step beside every threshold of every block, and on
every categorical code (members, non-members, past the largest).
"""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.base import clone

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.blocks import (
    Categorical,
    Euclidean,
    Hyperbolic,
    Spherical,
    as_blocks,
    blocks_from_json,
    blocks_to_json,
    to_features,
)
from hyp2onnx.errors import InvalidPointError, UnsupportedModelError
from hyp2onnx.export import read_metadata, to_onnx
from hyp2onnx.geometry import gnomonic_midpoint
from hyp2onnx.verification import run_onnx

BLOCKS = [
    Hyperbolic(2, model="poincare", curvature=-0.5),
    Spherical(2, curvature=2.0, base_dim=1),
    Euclidean(1),
    Hyperbolic(2, curvature=-1.5, timelike_dim=2),
    Categorical(1),
]
N_CODES = 7


def _block_rows(F: np.ndarray, blocks, *, exact: bool) -> np.ndarray:
    """Input rows whose features are ``F``.

    ``exact=False``: points on each manifold (features within rounding of F).
    ``exact=True``: hyperboloid and sphere rows with x_0 = 1 and x_s = F, off
    the manifold but giving exactly F (for models with check_manifold=False).
    """
    parts, f = [], 0
    for b in blocks:
        g = F[:, f : f + b.dims]
        if isinstance(b, Hyperbolic):
            if exact and b.model == "hyperboloid":
                parts.append(np.insert(g, b.timelike_dim, 1.0, axis=1))
            else:
                parts.append(geometry.from_klein(g, b.model, b.curvature, b.timelike_dim))
        elif isinstance(b, Spherical):
            x0 = (
                np.ones(len(g))
                if exact
                else (1 / np.sqrt(b.curvature)) / np.sqrt(1 + (g * g).sum(1))
            )
            parts.append(np.insert(g * x0[:, None], b.base_dim, x0, axis=1))
        else:
            parts.append(g)
        f += b.dims
    return np.concatenate(parts, axis=1)


def _features(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    k1 = rng.uniform(-0.6, 0.6, size=(n, 2))
    g = rng.uniform(-2.0, 2.0, size=(n, 2))
    e = rng.normal(size=(n, 1))
    k2 = rng.uniform(-0.6, 0.6, size=(n, 2))
    c = rng.integers(0, N_CODES, size=(n, 1)).astype(float)
    return np.concatenate([k1, g, e, k2, c], axis=1)


def _targets(F: np.ndarray, task: str) -> np.ndarray:
    score = (
        F[:, 0] + 0.5 * np.arctan(F[:, 2]) - 0.3 * F[:, 4] + F[:, 6] - np.isin(F[:, 7], [1, 4, 5])
    )
    if task == "reg":
        return score
    return np.digitize(score, np.quantile(score, [0.33, 0.66]))


def _adversarial(model, F: np.ndarray) -> np.ndarray:
    """Feature rows at and one float32/float64 step beside every numeric threshold."""
    ens = model.to_ir().ensemble
    member = np.zeros(ens.n_nodes, bool) if ens.categories is None else ens.categories.member
    split = (ens.feature >= 0) & ~member
    rng = np.random.default_rng(1)
    rows = []
    for f, t in zip(ens.feature[split], ens.threshold[split], strict=True):
        values = {float(t)}
        for dtype in (np.float32, np.float64):
            for way in (-np.inf, np.inf):
                values.add(float(np.nextafter(dtype(t), dtype(way))))
            values.add(float(dtype(t)))
        base = F[rng.integers(0, len(F), size=len(values))].copy()
        base[:, f] = sorted(values)
        rows.append(base)
    A = np.concatenate(rows)
    # Every code, members and not, past the largest, on each row set.
    A[:, 7] = np.arange(len(A)) % (N_CODES + 3)
    inside = (np.linalg.norm(A[:, 0:2], axis=1) < 1) & (np.linalg.norm(A[:, 5:7], axis=1) < 1)
    return A[inside]


#: LightGBM's settings for these small categorical data: quiet, one thread, small groups.
QUIET = {"verbose": -1, "min_data_per_group": 5, "cat_smooth": 1.0, "n_jobs": 1}


def _models():
    return {
        "tree_clf": (h.HyperbolicDecisionTreeClassifier(max_depth=6, random_state=0), "clf"),
        "forest_reg": (
            h.HyperbolicRandomForestRegressor(n_estimators=4, max_depth=5, random_state=0),
            "reg",
        ),
        "xgb_clf": (
            h.HyperbolicXGBClassifier(n_estimators=6, max_depth=3, max_cat_to_onehot=1, n_jobs=1),
            "clf",
        ),
        "xgb_reg": (h.HyperbolicXGBRegressor(n_estimators=6, max_depth=3, n_jobs=1), "reg"),
        "lgbm_clf": (h.HyperbolicLGBMClassifier(n_estimators=6, num_leaves=8, **QUIET), "clf"),
        "lgbm_reg": (h.HyperbolicLGBMRegressor(n_estimators=6, num_leaves=8, **QUIET), "reg"),
    }


def _assert_same(model, onx, X):
    got = run_onnx(onx, X)
    Xt = X.astype(np.float32 if onx.graph.input[0].type.tensor_type.elem_type == 1 else np.float64)
    tol = {"sklearn": 0.0, "lightgbm": 1e-12, "xgboost": 1e-6}[read_metadata(onx)["backend"]]
    if "label" in got:
        np.testing.assert_array_equal(got["label"], model.predict(Xt))
        np.testing.assert_allclose(got["probabilities"], model.predict_proba(Xt), rtol=0, atol=tol)
    else:
        np.testing.assert_allclose(got["variable"][:, 0], model.predict(Xt), rtol=0, atol=tol)


@pytest.mark.parametrize("name", list(_models()))
def test_every_block_exports_exactly(name):
    model, task = _models()[name]
    F = _features(400, seed=3)
    X = _block_rows(F, BLOCKS, exact=False)
    model.set_params(input_blocks=BLOCKS).fit(X, _targets(F, task))
    ens = model.to_ir().ensemble
    used = np.unique(ens.feature[ens.feature >= 0])
    assert {0, 2, 4, 5, 7} & set(used.tolist()), "the trees should read several blocks"
    if name.startswith(("xgb", "lgbm")):
        assert ens.categories is not None and ens.categories.member.any()
    else:
        assert ens.categories is None  # scikit-learn splits the codes as numbers
    A = _adversarial(model, F)
    X_near = np.concatenate([X, _block_rows(A, BLOCKS, exact=False)])
    for dtype in ("float32", "float64"):
        _assert_same(model, to_onnx(model, dtype=dtype, encoding="exact"), X_near)
        # The default graph: the same labels, values within its recorded bound.
        assert h.verify(model, to_onnx(model, dtype=dtype), X_near.astype(dtype)).ok
    _assert_same(model, to_onnx(model, dtype="float64", encoding="standard"), X_near)
    # Rows whose features are the thresholds themselves (off-manifold, unchecked).
    X_exact = _block_rows(A, BLOCKS, exact=True)
    model.set_params(check_manifold=False)
    # (The Poincare block maps back within rounding; the others exactly.)
    np.testing.assert_array_equal(model.to_klein(X_exact)[:, 2:], A[:, 2:])
    for encoding in ("exact", "standard"):
        _assert_same(model, to_onnx(model, dtype="float64", encoding=encoding), X_exact)


def test_categorical_graph_matches_the_ensemble_on_odd_codes():
    """Negative, fractional, NaN and too-large codes go right in the graph, as in the IR."""
    F = _features(300, seed=4)
    X = _block_rows(F, BLOCKS, exact=False)
    model = h.HyperbolicLGBMClassifier(n_estimators=5, input_blocks=BLOCKS, **QUIET).fit(
        X, _targets(F, "clf")
    )
    odd = np.repeat(X[:1], 8, axis=0)
    odd[:, -1] = [-1.0, -0.0, 0.5, np.nan, N_CODES + 5, 2**31, 1e30, np.inf]
    with pytest.raises(InvalidPointError, match="categorical codes"):
        model.predict(odd[[0, 2, 4, 5]])
    with pytest.raises(InvalidPointError, match="NaN or infinity"):
        model.predict(odd)
    from hyp2onnx.ir import predict_output

    ens = model.to_ir().ensemble
    Fodd = np.repeat(model.to_klein(X[:1]), 8, axis=0)
    Fodd[:, -1] = odd[:, -1]
    want = predict_output(ens, Fodd)
    for encoding in ("exact", "standard"):
        # run_onnx refuses NaN and infinity on the way in; the graph's own routing of
        # them is what this checks, so it is fed through onnxruntime directly.
        session = ort.InferenceSession(
            to_onnx(model, dtype="float64", encoding=encoding).SerializeToString(),
            providers=["CPUExecutionProvider"],
        )
        got = session.run(["probabilities"], {"X": odd})[0]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # -0.0 is code 0; every other odd value goes where a code in no set goes.
    zero, unseen = Fodd[:2].copy(), Fodd[:1].copy()
    zero[:, -1], unseen[:, -1] = 0.0, N_CODES + 100
    np.testing.assert_array_equal(want[1], predict_output(ens, zero)[0])
    np.testing.assert_array_equal(
        want[[0, 2, 3, 4, 5, 6, 7]], np.repeat(predict_output(ens, unseen), 7, 0)
    )


def test_compat_encoding_refuses_categorical_splits():
    F = _features(200, seed=5)
    model = h.HyperbolicXGBClassifier(n_estimators=3, n_jobs=1, input_blocks=BLOCKS).fit(
        _block_rows(F, BLOCKS, exact=False), _targets(F, "clf")
    )
    with pytest.raises(UnsupportedModelError, match="set-membership"):
        to_onnx(model, encoding="compat")


def test_signature_pairs_and_block_objects_agree():
    blocks = as_blocks([(-1.0, 2), (0.0, 3), (2.0, 1)])
    assert blocks == (Hyperbolic(2), Euclidean(3), Spherical(1, curvature=2.0))
    assert blocks_from_json(blocks_to_json(BLOCKS)) == tuple(BLOCKS)
    for bad in ([], "hyperboloid", [(-1.0,)], [(float("nan"), 2)], [Hyperbolic(2), 3]):
        with pytest.raises(ValueError):
            as_blocks(bad)
    for make in (
        lambda: Hyperbolic(0),
        lambda: Hyperbolic(2, curvature=1.0),
        lambda: Hyperbolic(2, model="sphere"),
        lambda: Hyperbolic(2, timelike_dim=3),
        lambda: Spherical(2, curvature=-1.0),
        lambda: Spherical(2, base_dim=3),
        lambda: Euclidean(1.5),
    ):
        with pytest.raises(ValueError):
            make()


def test_features_against_independent_formulas():
    F = _features(50, seed=6)
    X = _block_rows(F, BLOCKS, exact=False)
    got = to_features(X, BLOCKS)
    np.testing.assert_allclose(got, F, rtol=1e-12, atol=1e-12)
    # Spherical block: input columns 2..4, base column 1 of the block (input column 3).
    sphere = X[:, 2:5]
    np.testing.assert_allclose(got[:, 2:4], sphere[:, [0, 2]] / sphere[:, [1]], rtol=1e-15)
    # Hyperboloid block: input columns 6..8, timelike column 2 of the block.
    hyp = X[:, 6:9]
    np.testing.assert_allclose(got[:, 5:7], hyp[:, :2] / hyp[:, [2]], rtol=1e-15)


def test_sphere_points_off_the_hemisphere_or_sphere_are_refused():
    F = _features(20, seed=7)
    X = _block_rows(F, BLOCKS, exact=False)
    flipped = X.copy()
    flipped[3, 2:5] *= -1  # the antipode: x_0 < 0
    with pytest.raises(InvalidPointError, match=r"x_0 <= 0.*rows 3\b.*base_dim"):
        to_features(flipped, BLOCKS)
    off = X.copy()
    off[5, 2:5] *= 1.01
    with pytest.raises(InvalidPointError, match=r"off the sphere.*rows 5\b"):
        to_features(off, BLOCKS)
    bad_code = X.copy()
    bad_code[2, -1] = 1.5
    with pytest.raises(InvalidPointError, match="categorical codes"):
        to_features(bad_code, BLOCKS)
    with pytest.raises(InvalidPointError, match="columns"):
        to_features(X[:, :-1], BLOCKS)


def test_angular_midpoint_bisects_the_angle():
    """Oracle: the bisector of the plane vectors (1, a) and (1, b), normalised."""
    rng = np.random.default_rng(8)
    a = rng.normal(scale=3.0, size=1000)
    b = a + rng.exponential(size=1000)
    u = np.stack([np.ones_like(a), a]) / np.hypot(1, a)
    v = np.stack([np.ones_like(b), b]) / np.hypot(1, b)
    w = u + v
    np.testing.assert_allclose(gnomonic_midpoint(a, b), w[1] / w[0], rtol=1e-12, atol=1e-14)


def test_each_block_gets_its_own_midpoint():
    """A stump per block: its threshold is that block's midpoint of the two training values."""
    lo, hi = np.array([0.2]), np.array([0.7])
    for f, expected in (
        (0, geometry.einstein_midpoint(lo, hi)),
        (2, gnomonic_midpoint(lo, hi)),
        (4, (lo + hi) / 2),
    ):
        F = np.tile(_features(1, seed=9), (2, 1))
        F[:, f] = [lo[0], hi[0]]
        X = _block_rows(F, BLOCKS, exact=False)
        Fx = to_features(X, BLOCKS)
        model = h.HyperbolicLGBMRegressor(
            n_estimators=1,
            min_child_samples=1,
            min_data_in_bin=1,
            verbose=-1,
            n_jobs=1,
            input_blocks=BLOCKS,
        ).fit(X, [0.0, 1.0])
        ens = model.to_ir().ensemble
        t = ens.threshold[ens.feature == f]
        want = {0: geometry.einstein_midpoint, 2: gnomonic_midpoint}.get(
            f, lambda a, b: a / 2 + b / 2
        )
        assert t.size == 1 and t[0] == want(Fx[0, f], Fx[1, f])[()], (f, t, expected)


def test_parameters_clone_pickle_and_errors():
    F = _features(200, seed=10)
    X, y = _block_rows(F, BLOCKS, exact=False), _targets(F, "clf")
    model = h.HyperbolicRandomForestClassifier(n_estimators=3, random_state=0, input_blocks=BLOCKS)
    assert model.get_params()["input_blocks"] is BLOCKS
    twin = clone(model)
    assert twin.get_params()["input_blocks"] == BLOCKS
    fitted = twin.fit(X, y)
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(X), fitted.predict_proba(X))
    assert fitted.n_features_in_ == X.shape[1]
    signature = h.HyperbolicDecisionTreeClassifier(input_blocks=[(-1.0, 2), (0.0, 1)])
    rng = np.random.default_rng(0)
    Xs = np.concatenate(
        [geometry.from_klein(rng.uniform(-0.5, 0.5, (50, 2))), rng.normal(size=(50, 1))], 1
    )
    assert signature.fit(Xs, Xs[:, 3] > 0).score(Xs, Xs[:, 3] > 0) == 1.0
    with pytest.raises(ValueError, match="input_blocks describes every column"):
        h.HyperbolicDecisionTreeClassifier(input_blocks=BLOCKS, curvature=-2.0).fit(X, y)
    with pytest.raises(ValueError, match="expecting 10 features"):
        fitted.predict(X[:, :-1])
    with pytest.raises(UnsupportedModelError, match="input_blocks"):
        h.HyperbolicLGBMClassifier(input_blocks=BLOCKS, verbose=-1).fit(
            X, y, categorical_feature=[7]
        )
    with pytest.raises(UnsupportedModelError, match="feature_types"):
        h.HyperbolicXGBClassifier(input_blocks=BLOCKS, feature_types=["q"] * 8).fit(X, y)
    with pytest.raises(TypeError, match="input_blocks"):
        h.HyperbolicHouseholderTreeClassifier(input_blocks=BLOCKS)


def test_wrapped_estimator_and_metadata():
    from sklearn.ensemble import ExtraTreesRegressor

    F = _features(200, seed=11)
    X = _block_rows(F, BLOCKS, exact=False)
    model = h.HyperbolicEstimator(
        ExtraTreesRegressor(n_estimators=3, random_state=0), input_blocks=BLOCKS
    ).fit(X, _targets(F, "reg"))
    onx = to_onnx(model)
    meta = read_metadata(onx)
    assert meta["input_geometry"] == "product" and meta["blocks"] == tuple(BLOCKS)
    assert "spherical(2, K=2, base column 1)" in meta["doc_string"]
    assert h.verify(model, onx, X).ok


def test_unread_blocks_are_not_projected():
    """Only blocks some split reads get projection nodes (a Euclidean-only model: no Div)."""
    F = _features(200, seed=12)
    X = _block_rows(F, BLOCKS, exact=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = h.HyperbolicDecisionTreeRegressor(max_depth=3, input_blocks=BLOCKS).fit(X, F[:, 4])
    ens = model.to_ir().ensemble
    assert set(np.unique(ens.feature[ens.feature >= 0]).tolist()) == {4}
    onx = to_onnx(model, dtype="float64")
    ops = [n.op_type for n in onx.graph.node if n.name.startswith("klein/")]
    assert "Div" not in ops and "Mul" not in ops
    _assert_same(model, onx, X)


def test_last_block_may_take_the_remaining_columns():
    blocks = as_blocks([Hyperbolic(2), Euclidean()], n_columns=6)
    assert blocks == (Hyperbolic(2), Euclidean(3))
    assert as_blocks([(-1.0, 2), Spherical()], n_columns=7)[-1] == Spherical(3)
    assert as_blocks([Euclidean()])[0].dims is None  # width unknown: left open
    with pytest.raises(ValueError, match="only the last"):
        as_blocks([Euclidean(), Hyperbolic(2)])
    with pytest.raises(InvalidPointError, match="leaves no"):
        as_blocks([Hyperbolic(2), Spherical()], n_columns=4)
    with pytest.raises(ValueError, match="remaining columns"):
        _ = Euclidean().n_columns
    rng = np.random.default_rng(13)
    X = np.concatenate(
        [geometry.from_klein(rng.uniform(-0.5, 0.5, (60, 2))), rng.normal(size=(60, 3))], 1
    )
    model = h.HyperbolicDecisionTreeRegressor(input_blocks=[Hyperbolic(2), Euclidean()]).fit(
        X, X[:, 4]
    )
    assert model.to_ir().space.blocks == (Hyperbolic(2), Euclidean(3))
    assert h.verify(model, to_onnx(model, dtype="float64"), X).ok


def test_command_line_checks_and_describes_product_rows(tmp_path, capsys):
    import pickle as pkl

    from hyp2onnx.cli import main

    F = _features(200, seed=14)
    X = _block_rows(F, BLOCKS, exact=False)
    model = h.HyperbolicXGBClassifier(n_estimators=3, n_jobs=1, input_blocks=BLOCKS).fit(
        X, _targets(F, "clf")
    )
    (tmp_path / "m.pkl").write_bytes(pkl.dumps(model))
    np.save(tmp_path / "X.npy", X)
    bad = X.copy()
    bad[4, 2:5] *= -1  # the spherical block's antipode
    np.save(tmp_path / "bad.npy", bad)
    m, onx = str(tmp_path / "m.pkl"), str(tmp_path / "m.onnx")
    assert main(["convert", m, "--check", str(tmp_path / "X.npy")]) == 0
    assert main(["inspect", onx]) == 0
    assert "blocks hyperbolic(2, poincare, K=-0.5) + spherical(2" in capsys.readouterr().out
    assert main(["predict", onx, str(tmp_path / "bad.npy")]) == 2
    err = capsys.readouterr().err
    assert "x_0 <= 0" in err and "(rows 4)" in err and "spherical(2, K=2, base column 1)" in err
    assert not (tmp_path / "bad.predictions.csv").exists()
    assert main(["convert", m, "--encoding", "compat", "-o", str(tmp_path / "c.onnx")]) == 2
    assert "set-membership" in capsys.readouterr().err
    assert not (tmp_path / "c.onnx").exists()


def test_every_feature_split_family_takes_blocks_and_the_others_refuse_them():
    """input_blocks comes from the shared generated signature: every scikit-learn,
    XGBoost and LightGBM model takes it; CatBoost and oblique trees refuse it by name."""
    import inspect

    from hyp2onnx import estimators

    takes = [
        name
        for name in estimators.__all__
        if name.startswith("Hyperbolic")
        and "input_blocks" in inspect.signature(getattr(estimators, name)).parameters
    ]
    for family in ("DecisionTree", "RandomForest", "XGB", "LGBM", "Estimator", "CatBoost"):
        assert any(family in name for name in takes), family
    assert not [name for name in takes if "Householder" in name]
    F = _features(60, seed=12)
    X, y = _block_rows(F, BLOCKS, exact=False), _targets(F, "clf")
    pytest.importorskip("catboost", reason="catboost (extra 'catboost') is not installed")
    with pytest.raises(ValueError, match="catboost models do not take input_blocks"):
        h.HyperbolicCatBoostClassifier(iterations=2, input_blocks=BLOCKS).fit(X, y)
    from hyp2onnx.estimators._householder import HouseholderTreeClassifier

    with pytest.raises(ValueError, match="do not take input_blocks"):
        h.HyperbolicEstimator(HouseholderTreeClassifier(max_depth=2), input_blocks=BLOCKS).fit(X, y)


def test_xgboost_states_and_checks_its_range_of_codes():
    """XGBoost trains on codes up to 2**24 - 1 only (float32 categories); larger codes
    are refused at fit time with the rows and the range, not a native XGBoostError.
    Predicting, larger codes go where unseen codes go, in the model and the graph."""
    rng = np.random.default_rng(8)
    k = rng.uniform(-0.5, 0.5, size=(200, 2))
    blocks = [Hyperbolic(2, model="klein"), Categorical(1)]
    for top, ok in ((2**24 - 1, True), (2**24, False), (2**31 - 1, False)):
        codes = rng.choice([top - 1, top], size=(200, 1)).astype(float)
        X = np.hstack([k, codes])
        y = (codes[:, 0] == top).astype(int)
        model = h.HyperbolicXGBClassifier(n_estimators=2, max_depth=2, input_blocks=blocks)
        if ok:
            model.fit(X, y)
            far = X[:3].copy()
            far[:, -1] = 2**31 - 1
            assert h.verify(model, to_onnx(model, dtype="float64"), np.vstack([X, far])).ok
            continue
        with pytest.raises(
            ValueError,
            match=r"row\(s\) of X have categorical codes of 16777216 "
            r"or more \(rows .*16777215.*OrdinalEncoder",
        ):
            model.fit(X, y)
