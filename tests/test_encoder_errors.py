"""A composed graph whose encoder fails on the user's data: an error in the data, said so.

The encoder here is an embedding table (``Gather``) followed by the
exponential map onto the hyperboloid, built with ``onnx.helper`` as
``torch.onnx.export`` writes ``nn.Embedding(50, 2)`` and a map: an id of
50 is beyond its table, and onnxruntime's ``Gather`` refuses it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from _cli import assert_usage_error, cli
from onnx import TensorProto, helper, numpy_helper

import hyp2onnx as h
from hyp2onnx.errors import GraphRunError
from hyp2onnx.verification import run_onnx

N_IDS = 50


def _embedding_encoder(*, second_input: bool = False) -> onnx.ModelProto:
    """``ids`` [N] (int64) -> the hyperboloid point ``exp_0(table[ids])`` [N, 3].

    With ``second_input``, a float ``scale`` [N, 1] multiplies the tangent vector."""
    table = np.random.default_rng(0).normal(size=(N_IDS, 2)).astype(np.float32) * 0.7
    inits = [
        numpy_helper.from_array(table, "table"),
        numpy_helper.from_array(np.array([1], np.int64), "axes"),
        numpy_helper.from_array(np.array(1e-30, np.float32), "eps"),
    ]
    v = "v"
    nodes = [helper.make_node("Gather", ["table", "ids"], ["v"], axis=0, name="embedding")]
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N"])]
    if second_input:
        nodes.append(helper.make_node("Mul", ["v", "scale"], ["vs"]))
        inputs.append(helper.make_tensor_value_info("scale", TensorProto.FLOAT, ["N", 1]))
        v = "vs"
    nodes += [
        helper.make_node("Mul", [v, v], ["vv"]),
        helper.make_node("ReduceSum", ["vv", "axes"], ["ss"], keepdims=1),
        helper.make_node("Add", ["ss", "eps"], ["ss_eps"]),
        helper.make_node("Sqrt", ["ss_eps"], ["n"]),
        helper.make_node("Cosh", ["n"], ["x0"]),
        helper.make_node("Sinh", ["n"], ["s"]),
        helper.make_node("Div", ["s", "n"], ["f"]),
        helper.make_node("Mul", ["f", v], ["xs"]),
        helper.make_node("Concat", ["x0", "xs"], ["points"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "embedding",
        inputs,
        [helper.make_tensor_value_info("points", TensorProto.FLOAT, ["N", 3])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.fixture(scope="module")
def composed() -> onnx.ModelProto:
    X, y = h.datasets.make_wrapped_normal_mixture(300, 2, 3, random_state=0)
    model = h.HyperbolicMLPClassifier(hidden_layer_sizes=(8,), max_iter=50, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter: not converged
        model.fit(X, y)
        return h.compose(_embedding_encoder(), model)  # the encoder's float32: precision lost


def test_run_onnx_names_the_input_and_rows(composed: onnx.ModelProto) -> None:
    """Before: onnxruntime's own InvalidArgument (not a ValueError), no rows."""
    ids = np.arange(200) % N_IDS
    assert run_onnx(composed, {"ids": ids})["label"].shape == (200,)
    ids[[17, 123]] = [N_IDS, -N_IDS - 3]
    with pytest.raises(GraphRunError, match=r"row\(s\) 17, 123 of input 'ids' make") as caught:
        run_onnx(composed, {"ids": ids})
    assert isinstance(caught.value, ValueError)
    assert caught.value.rows == [17, 123] and caught.value.inputs == ["ids"]
    assert "idx=50 must be within the inclusive range [-50,49]" in str(caught.value)


def test_the_failing_input_is_named_among_several() -> None:
    X, y = h.datasets.make_wrapped_normal_mixture(200, 2, 2, random_state=1)
    tree = h.HyperbolicDecisionTreeClassifier(max_depth=3).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the encoder's float32: precision lost
        graph = h.compose(_embedding_encoder(second_input=True), tree)
    ids, scale = np.arange(40) % N_IDS, np.ones((40, 1), np.float32)
    ids[31] = 99
    with pytest.raises(GraphRunError, match=r"row\(s\) 31 of input 'ids' make") as caught:
        run_onnx(graph, {"ids": ids, "scale": scale})
    assert caught.value.inputs == ["ids"]


def test_predict_gives_one_error_line_naming_rows(
    composed: onnx.ModelProto, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Before: onnxruntime's coloured log line on stderr, then "error: unexpected
    InvalidArgument ..." and "fix: rerun with --debug and report the traceback".
    Rows are numbered in the whole file (the second chunk's here)."""
    h.save_onnx(composed, tmp_path / "composed.onnx")
    ids = np.arange(300) % N_IDS
    ids[[150, 160]] = N_IDS
    np.save(tmp_path / "ids.npy", ids)
    capfd.readouterr()
    code, out, err = cli(
        "predict", tmp_path / "composed.onnx", tmp_path / "ids.npy",
        "-o", tmp_path / "p.csv", "--chunk-rows", "100",
    )  # fmt: skip
    native = capfd.readouterr().err  # what onnxruntime writes to the process's stderr itself
    assert_usage_error(
        code, err, match="ids.npy: row(s) 150, 160 of input 'ids' make the graph fail"
    )
    assert native == "" and out == ""
    assert not (tmp_path / "p.csv").exists()
