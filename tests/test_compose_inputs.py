"""Composed graphs whose encoder takes several inputs, or integer and bool ones.

Encoders are built here with ``onnx.helper`` (no torch):

- ``scaled_exp``: features ``x`` float32 [N, 5] and a per-row ``scale``
  float64 [N, 1]; ``v = (x W) * scale``, then the exponential map onto the
  hyperboloid, ``(cosh |v|, sinh |v| v / |v|)``;
- ``embedding``: ``ids`` int64 [N] into a table of Poincare points (Gather),
  negated where the bool ``flip`` [N] is set;
- ``graph``: node features ``x`` float32 [N, 4] and an edge list ``edges``
  int64 [E, 2]: each node's ``x W`` plus the sum over its in-edges, then the
  exponential map onto the Poincare disk. Its inputs share no row axis.

The oracle is the encoder run in onnxruntime on its own (its session built
here, fed by hand) and the Python model on its outputs; the encoders'
outputs are themselves checked against numpy written from their definitions.
"""

from __future__ import annotations

import pickle

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _cli import assert_usage_error, cli
from onnx import TensorProto, helper, numpy_helper

import hyp2onnx as h
from hyp2onnx import compose, verify
from hyp2onnx.errors import InvalidPointError
from hyp2onnx.verification import default_rtol, default_tolerance, run_onnx

# float32 encoders in front of float64 model graphs: compose says what that costs
pytestmark = pytest.mark.filterwarnings("ignore:compose. precision lost")

RNG = np.random.default_rng(7)
W_EXP = (RNG.normal(size=(5, 3)) / 2).astype(np.float32)
TABLE = RNG.normal(size=(40, 2))
TABLE = (
    0.9
    * np.tanh(np.linalg.norm(TABLE, axis=1, keepdims=True))
    * TABLE
    / np.linalg.norm(TABLE, axis=1, keepdims=True)
)  # Poincare points of radius below 0.9
W_GRAPH = (RNG.normal(size=(4, 2)) / 2).astype(np.float32)


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "encoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def _const(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _exp_nodes(v: str, out: str, *, poincare: bool) -> tuple[list, list]:
    """Exponential map at the origin (K = -1) of the float32 rows of ``v``."""
    nodes = [
        helper.make_node("Mul", [v, v], ["vv"]),
        helper.make_node("ReduceSum", ["vv", "axes"], ["ss"], keepdims=1),
        helper.make_node("Add", ["ss", "eps"], ["ss_eps"]),
        helper.make_node("Sqrt", ["ss_eps"], ["n"]),
    ]
    inits = [_const("axes", np.array([1], np.int64)), _const("eps", np.float32(1e-30))]
    if poincare:
        nodes += [
            helper.make_node("Tanh", ["n"], ["t"]),
            helper.make_node("Div", ["t", "n"], ["f"]),
            helper.make_node("Mul", ["f", v], [out]),
        ]
    else:
        nodes += [
            helper.make_node("Cosh", ["n"], ["x0"]),
            helper.make_node("Sinh", ["n"], ["s"]),
            helper.make_node("Div", ["s", "n"], ["f"]),
            helper.make_node("Mul", ["f", v], ["xs"]),
            helper.make_node("Concat", ["x0", "xs"], [out], axis=1),
        ]
    return nodes, inits


def scaled_exp() -> onnx.ModelProto:
    nodes, inits = _exp_nodes("v", "points", poincare=False)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Cast", ["scale"], ["scale32"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["xw", "scale32"], ["v"]),
        *nodes,
    ]
    return _model(
        nodes,
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 5]),
            helper.make_tensor_value_info("scale", TensorProto.DOUBLE, ["N", 1]),
        ],
        [helper.make_tensor_value_info("points", TensorProto.FLOAT, ["N", 4])],
        [_const("W", W_EXP), *inits],
    )


def scaled_exp_numpy(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """The hyperboloid's exponential map at the origin, from its definition, in float64."""
    v = (x.astype(np.float64) @ W_EXP.astype(np.float64)) * scale
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return np.concatenate([np.cosh(n), np.sinh(n) / n * v], axis=1)


def embedding() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Gather", ["table", "ids"], ["e"], axis=0),
        helper.make_node("Neg", ["e"], ["minus_e"]),
        helper.make_node("Unsqueeze", ["flip", "axes"], ["flip2"]),
        helper.make_node("Where", ["flip2", "minus_e", "e"], ["points"]),
    ]
    return _model(
        nodes,
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["N"]),
            helper.make_tensor_value_info("flip", TensorProto.BOOL, ["N"]),
        ],
        [helper.make_tensor_value_info("points", TensorProto.DOUBLE, ["N", 2])],
        [_const("table", TABLE), _const("axes", np.array([1], np.int64))],
    )


def graph_encoder() -> onnx.ModelProto:
    """Node features plus a sum of messages along the edges, then onto the Poincare disk."""
    exp_nodes, inits = _exp_nodes("v", "points", poincare=True)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["hx"]),
        helper.make_node("Gather", ["edges", "zero"], ["src"], axis=1),
        helper.make_node("Gather", ["edges", "one"], ["dst"], axis=1),
        helper.make_node("Gather", ["hx", "src"], ["msg"], axis=0),
        helper.make_node("Unsqueeze", ["dst", "axes"], ["dst2"]),
        helper.make_node("Shape", ["msg"], ["msg_shape"]),
        helper.make_node("Expand", ["dst2", "msg_shape"], ["index"]),
        helper.make_node("ScatterElements", ["hx", "index", "msg"], ["v"], axis=0, reduction="add"),
        *exp_nodes,
    ]
    return _model(
        nodes,
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("edges", TensorProto.INT64, ["E", 2]),
        ],
        [helper.make_tensor_value_info("points", TensorProto.FLOAT, ["N", 2])],
        [
            _const("W", W_GRAPH),
            _const("zero", np.int64(0)),
            _const("one", np.int64(1)),
            *inits,
        ],
    )


def _assert_close(got: np.ndarray, want: np.ndarray, graph) -> None:
    """Within the bound the graph states for its values (`verify`'s defaults)."""
    meta = h.read_metadata(graph)
    atol, rtol = default_tolerance(meta), default_rtol(meta)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def encoder_outputs(encoder: onnx.ModelProto, arrays: dict) -> np.ndarray:
    """The oracle's first half: the encoder alone in onnxruntime, fed by hand."""
    session = ort.InferenceSession(encoder.SerializeToString(), providers=["CPUExecutionProvider"])
    (points,) = session.run(["points"], arrays)
    return points.astype(np.float64)


def _exp_data(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": rng.normal(size=(n, 5)).astype(np.float32),
        "scale": rng.uniform(0.2, 2.0, size=(n, 1)),
    }


def _emb_data(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(0, len(TABLE), size=n), "flip": rng.random(n) < 0.5}


def _labels(points: np.ndarray, geometry: str) -> np.ndarray:
    k = h.geometry.to_klein(points, geometry)
    return (k[:, 0] > 0.1).astype(int) + (k[:, 1] > -0.2).astype(int)


def _fit(kind: str, points: np.ndarray, geometry: str):
    y = _labels(points, geometry)
    if kind == "tree":
        model = h.HyperbolicRandomForestClassifier(
            n_estimators=6, max_depth=6, random_state=0, input_geometry=geometry
        )
    else:
        model = h.HyperbolicMLPClassifier(
            hidden_layer_sizes=(12,), max_iter=400, random_state=0, input_geometry=geometry
        )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the MLP's convergence warning
        return model.fit(points, y)


@pytest.fixture(scope="module", params=["tree", "mlp"])
def kind(request):
    return request.param


@pytest.fixture(scope="module")
def exp_case(kind):
    enc = scaled_exp()
    points = encoder_outputs(enc, _exp_data(1500, 0))
    return enc, _fit(kind, points, "hyperboloid")


@pytest.fixture(scope="module")
def emb_case(kind):
    enc = embedding()
    points = encoder_outputs(enc, _emb_data(600, 0))
    return enc, _fit(kind, points, "poincare")


def test_the_encoders_follow_their_definitions():
    """The numpy definitions the oracle leans on agree with the onnx.helper encoders."""
    data = _exp_data(400, 1)
    np.testing.assert_allclose(
        encoder_outputs(scaled_exp(), data),
        scaled_exp_numpy(data["x"], data["scale"]),
        rtol=3e-5,
        atol=1e-6,
    )
    data = _emb_data(300, 1)
    want = np.where(data["flip"][:, None], -TABLE[data["ids"]], TABLE[data["ids"]])
    np.testing.assert_array_equal(encoder_outputs(embedding(), data), want)


def test_two_float_inputs_verify_and_route_as_the_model(exp_case):
    enc, model = exp_case
    composed = compose(enc, model)
    assert [i.name for i in composed.graph.input] == ["x", "scale"]
    data = _exp_data(700, 2)
    points = encoder_outputs(enc, data)
    assert h.geometry.check_points(points, "hyperboloid").shape == (700, 4)
    got = run_onnx(composed, data)
    np.testing.assert_array_equal(got["label"], model.predict(points))
    _assert_close(got["probabilities"], model.predict_proba(points), composed)
    # the mapping's order is not the graph's: inputs are fed by name
    reordered = {"scale": data["scale"], "x": data["x"]}
    np.testing.assert_array_equal(run_onnx(composed, reordered)["label"], got["label"])
    report = verify(model, composed, reordered)
    assert report.ok and report.rows == 700 and report.label_mismatches == 0, report
    assert verify(model, composed, data, encoder=enc).ok


def test_integer_and_bool_inputs_verify_and_route_as_the_model(emb_case):
    enc, model = emb_case
    composed = compose(enc, model)
    data = _emb_data(500, 3)
    points = encoder_outputs(enc, data)
    got = run_onnx(composed, data)
    np.testing.assert_array_equal(got["label"], model.predict(points))
    assert verify(model, composed, data).ok
    assert verify(model, composed, data, encoder=enc).ok
    # lossless casts: int32 ids, integral float ids, 0/1 flags
    lossless = {"ids": data["ids"].astype(np.float64), "flip": data["flip"].astype(np.uint8)}
    np.testing.assert_array_equal(run_onnx(composed, lossless)["label"], got["label"])
    lossless["ids"] = data["ids"].astype(np.int32)
    np.testing.assert_array_equal(run_onnx(composed, lossless)["label"], got["label"])


def test_the_row_count_is_the_graphs_own():
    """An edge list beside node features: N rows out, E edges in."""
    enc = graph_encoder()
    rng = np.random.default_rng(4)
    x = rng.normal(size=(300, 4)).astype(np.float32)
    edges = rng.integers(0, 300, size=(900, 2))
    hx = x.astype(np.float64) @ W_GRAPH.astype(np.float64)
    v = hx.copy()
    np.add.at(v, edges[:, 1], hx[edges[:, 0]])
    n = np.linalg.norm(v, axis=1, keepdims=True)
    points = encoder_outputs(enc, {"x": x, "edges": edges})
    np.testing.assert_allclose(points, np.tanh(n) / n * v, rtol=1e-4, atol=1e-6)
    model = _fit("tree", points, "poincare")
    composed = compose(enc, model)
    report = verify(model, composed, {"x": x, "edges": edges})
    assert report.ok and report.rows == 300, report
    got = run_onnx(composed, {"edges": edges, "x": x})
    np.testing.assert_array_equal(got["label"], model.predict(points))


def test_bad_inputs_are_refused_naming_the_input(exp_case, emb_case):
    exp = compose(*exp_case)
    emb = compose(*emb_case)
    data = _exp_data(20, 5)
    with pytest.raises(ValueError, match=r"takes 2 inputs, x \(float32 \(N, 5\)\), scale"):
        run_onnx(exp, data["x"])
    with pytest.raises(ValueError, match=r"missing 'scale'\): the graph's inputs are x"):
        run_onnx(exp, {"x": data["x"]})
    with pytest.raises(ValueError, match=r"unknown 'mask'\): the graph's inputs are"):
        verify(exp_case[1], exp, {**data, "mask": data["scale"]})
    with pytest.raises(ValueError, match=r"input 'x' must have shape \(N, 5\) .* got \(20, 4\)"):
        run_onnx(exp, {**data, "x": data["x"][:, :4]})
    with pytest.raises(ValueError, match=r"input 'scale' must have shape \(N, 1\) .* got \(20,\)"):
        run_onnx(exp, {**data, "scale": data["scale"][:, 0]})
    # a per-row input of another length would broadcast: the shared dimension is checked
    with pytest.raises(ValueError, match=r"dimension 'N' is 20 in input 'x' .* but 1 in input"):
        run_onnx(exp, {**data, "scale": data["scale"][:1]})
    with pytest.raises(ValueError, match=r"input 'x' must hold real numbers .* got dtype bool"):
        run_onnx(exp, {**data, "x": data["x"] > 0})
    with pytest.raises(ValueError, match=r"input 'scale' must hold real numbers .* <U"):
        run_onnx(exp, {**data, "scale": data["scale"].astype(str)})
    bad = data["scale"].copy()
    bad[[3, 11]] = np.nan
    with pytest.raises(InvalidPointError, match=r"input 'scale': 2 row\(s\) contain NaN .*3, 11"):
        verify(exp_case[1], exp, {**data, "scale": bad})

    ids = _emb_data(20, 5)
    fractional = ids["ids"].astype(np.float64)
    fractional[7] += 0.5
    with pytest.raises(InvalidPointError, match=r"input 'ids': 1 row\(s\) hold fractional.*7\)"):
        run_onnx(emb, {**ids, "ids": fractional})
    with pytest.raises(InvalidPointError, match=r"input 'ids': 1 row\(s\) hold float values"):
        run_onnx(emb, {**ids, "ids": np.where(np.arange(20) == 2, 2.0**60, fractional.round())})
    huge = ids["ids"].astype(np.uint64)
    huge[4] = 2**63
    with pytest.raises(InvalidPointError, match=r"outside int64's range .*\(rows 4\)"):
        verify(emb_case[1], emb, {**ids, "ids": huge})
    with pytest.raises(InvalidPointError, match=r"input 'flip': 1 row\(s\) hold values other"):
        run_onnx(emb, {**ids, "flip": np.where(np.arange(20) == 9, 2, 0)})
    with pytest.raises(ValueError, match=r"input 'ids' must have shape \(N,\) .* \(20, 1\)"):
        run_onnx(emb, {**ids, "ids": ids["ids"][:, None]})


# -- the command line -------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory, exp_case, emb_case):
    folder = tmp_path_factory.mktemp("inputs")
    for tag, (enc, model) in (("exp", exp_case), ("emb", emb_case)):
        onnx.save(enc, folder / f"{tag}.onnx")
        (folder / f"{tag}.pkl").write_bytes(pickle.dumps(model))
    np.savez(folder / "exp.npz", **_exp_data(300, 6))
    np.savez(folder / "emb.npz", **_emb_data(300, 6))
    return folder


def _predicted(path) -> np.ndarray:
    return np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


@pytest.mark.parametrize("tag", ["exp", "emb"])
def test_cli_convert_check_predict_and_verify_take_npz(files, tag, exp_case, emb_case):
    enc, model = exp_case if tag == "exp" else emb_case
    out = files / f"{tag}-composed.onnx"
    code, stdout, err = cli(
        "convert", files / f"{tag}.pkl", "--encoder", files / f"{tag}.onnx",
        "--check", files / f"{tag}.npz", "-o", out, "--force",
    )  # fmt: skip
    assert code == 0, err
    assert "check on" in stdout and "OK: 300 rows" in stdout
    with np.load(files / f"{tag}.npz") as archive:
        data = dict(archive)
    want = model.predict(encoder_outputs(enc, data))
    for extra in ([], ["--chunk-rows", "7"]):
        csv = files / f"{tag}-p{len(extra)}.csv"
        code, _, err = cli("predict", out, files / f"{tag}.npz", "-o", csv, "--force", *extra)
        assert code == 0, err
        got = _predicted(csv)
        np.testing.assert_array_equal(got[:, 0], want)
        _assert_close(got[:, 1:], model.predict_proba(encoder_outputs(enc, data)), out)
    code, stdout, err = cli("verify", files / f"{tag}.pkl", out, "--data", files / f"{tag}.npz")
    assert code == 0 and stdout.startswith("OK: 300 rows"), err


def test_cli_errors_name_the_file_and_the_input(files, exp_case):
    out = files / "exp-errors.onnx"
    h.save_onnx(compose(*exp_case), out)
    data = _exp_data(30, 8)
    cases = {
        "missing": ({"x": data["x"]}, "(missing scale); the graph's inputs are x (float32 (N, 5))"),
        "extra": ({**data, "w": data["scale"]}, "(unknown w); the graph's inputs are"),
        "dtype": ({**data, "x": data["x"] > 0}, "input 'x' must hold real numbers"),
        "rank": ({**data, "scale": data["scale"][:, 0]}, "input 'scale' must have shape (N, 1)"),
        "nan": (
            {**data, "scale": np.where(np.arange(30)[:, None] == 17, np.nan, 1.0)},
            "(rows 17)",
        ),
        "short": (
            {**data, "scale": data["scale"][:29]},
            "dimension 'N' is 30 in input 'x' (axis 0) but 29 in input 'scale'",
        ),
    }
    for name, (arrays, match) in cases.items():
        np.savez(files / f"{name}.npz", **arrays)
        for argv in (
            ["predict", out, files / f"{name}.npz", "-o", files / f"{name}.csv", "--chunk-rows", "5"],
            ["verify", files / "exp.pkl", out, "--data", files / f"{name}.npz"],
            ["convert", files / "exp.pkl", "--encoder", files / "exp.onnx",
             "--check", files / f"{name}.npz", "-o", files / f"{name}.onnx"],
        ):  # fmt: skip
            code, _, err = cli(*argv)
            assert_usage_error(code, err, match=match)
            error = next(line for line in err.splitlines() if line.startswith("error:"))
            assert f"{name}.npz: " in error, err
        assert not (files / f"{name}.csv").exists() and not (files / f"{name}.onnx").exists()
    np.save(files / "x.npy", data["x"])
    code, _, err = cli("predict", out, files / "x.npy", "-o", files / "x.csv")
    assert_usage_error(code, err, match="holds one array, but the graph takes 2 inputs")
    assert "numpy.savez(path, x=..., scale=...)" in err


def test_cli_integer_inputs_refuse_fractions_with_file_rows(files, emb_case):
    out = files / "emb-errors.onnx"
    h.save_onnx(compose(*emb_case), out)
    data = _emb_data(30, 9)
    ids = data["ids"].astype(np.float64)
    ids[23] = 2.5
    np.savez(files / "frac.npz", ids=ids, flip=data["flip"])
    code, _, err = cli(
        "predict", out, files / "frac.npz", "-o", files / "f.csv", "--chunk-rows", "10"
    )
    assert_usage_error(code, err, match="input 'ids': 1 row(s) hold fractional values")
    assert "(rows 23)" in err  # the file's row, not the chunk's
    assert not (files / "f.csv").exists()


def test_cli_unsplittable_inputs_run_whole_and_refuse_chunk_rows(tmp_path):
    enc = graph_encoder()
    rng = np.random.default_rng(10)
    x = rng.normal(size=(200, 4)).astype(np.float32)
    edges = rng.integers(0, 200, size=(500, 2))
    points = encoder_outputs(enc, {"x": x, "edges": edges})
    model = _fit("tree", points, "poincare")
    h.save_onnx(compose(enc, model), tmp_path / "g.onnx")
    np.savez(tmp_path / "g.npz", x=x, edges=edges)
    code, _, err = cli("predict", tmp_path / "g.onnx", tmp_path / "g.npz", "-o", tmp_path / "p.csv")
    assert code == 0, err
    np.testing.assert_array_equal(_predicted(tmp_path / "p.csv")[:, 0], model.predict(points))
    code, _, err = cli(
        "predict", tmp_path / "g.onnx", tmp_path / "g.npz", "-o", tmp_path / "q.csv",
        "--chunk-rows", "50",
    )  # fmt: skip
    assert_usage_error(code, err, match="--chunk-rows cannot split these inputs into rows")
    assert "do not share a named first dimension" in err and "leave out --chunk-rows" in err
    assert not (tmp_path / "q.csv").exists()
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(model))
    code, stdout, err = cli(
        "verify", tmp_path / "m.pkl", tmp_path / "g.onnx", "--data", tmp_path / "g.npz"
    )
    assert code == 0 and stdout.startswith("OK: 200 rows"), err


def test_cli_one_input_graphs_take_an_npz_of_one_array(tmp_path):
    """A plain graph and a one-input composed graph: one array, whatever its name."""
    X, y = h.datasets.make_wrapped_normal_mixture(300, 2, 3, random_state=0)
    model = h.HyperbolicDecisionTreeClassifier(max_depth=4).fit(X, y)
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(model))
    h.save_onnx(model, tmp_path / "m.onnx")
    np.savez(tmp_path / "one.npz", X[:100])  # stored as arr_0
    code, _, err = cli(
        "predict", tmp_path / "m.onnx", tmp_path / "one.npz", "-o", tmp_path / "p.csv"
    )
    assert code == 0, err
    np.testing.assert_array_equal(_predicted(tmp_path / "p.csv")[:, 0], model.predict(X[:100]))
    code, stdout, err = cli(
        "verify", tmp_path / "m.pkl", tmp_path / "m.onnx", "--data", tmp_path / "one.npz"
    )
    assert code == 0 and stdout.startswith("OK: 100 rows"), err
    off = X[:10].copy()
    off[4, 0] = 0.5  # off the hyperboloid: the plain graph's points are still checked
    np.savez(tmp_path / "off.npz", X=off)
    code, _, err = cli(
        "predict", tmp_path / "m.onnx", tmp_path / "off.npz", "-o", tmp_path / "q.csv"
    )
    assert_usage_error(code, err, match="(rows 4)")
    np.savez(tmp_path / "two.npz", X=X[:10], Y=X[:10])
    code, _, err = cli(
        "predict", tmp_path / "m.onnx", tmp_path / "two.npz", "-o", tmp_path / "q.csv"
    )
    assert_usage_error(code, err, match="(unknown Y); the graph's inputs are X (")


def test_one_integer_input_takes_an_array_a_1d_npy_or_an_npz(tmp_path):
    """ids [N] alone: a single array in Python, a 1-D .npy or an .npz on the command line."""
    enc = embedding()
    graph = enc.graph
    flip = next(i for i in graph.input if i.name == "flip")
    graph.input.remove(flip)
    graph.initializer.append(numpy_helper.from_array(np.zeros(1, dtype=bool), "flip"))
    ids = np.random.default_rng(11).integers(0, len(TABLE), size=200)
    points = TABLE[ids]
    model = _fit("tree", TABLE, "poincare")
    composed = compose(enc, model)
    assert [i.name for i in composed.graph.input] == ["ids"]
    np.testing.assert_array_equal(run_onnx(composed, ids)["label"], model.predict(points))
    assert verify(model, composed, ids).ok
    with pytest.raises(InvalidPointError, match=r"input 'ids': 1 row\(s\) hold fractional"):
        run_onnx(composed, np.where(ids == ids[0], ids + 0.25, ids)[:1])
    h.save_onnx(composed, tmp_path / "ids.onnx")
    np.save(tmp_path / "ids.npy", ids)
    np.savez(tmp_path / "ids.npz", whatever=ids)
    for data in ("ids.npy", "ids.npz"):
        out = tmp_path / f"{data}.csv"
        code, _, err = cli("predict", tmp_path / "ids.onnx", tmp_path / data, "-o", out)
        assert code == 0, err
        np.testing.assert_array_equal(_predicted(out)[:, 0], model.predict(points))
