"""Shared helpers of the graph code, and module names no function shadows.

- `GraphBuilder.columns` is the one ``Slice`` of a run of columns;
- `hyp2onnx._feeds.numpy_dtype` reads onnx's own element-type table, for
  the numbers and booleans hyp2onnx feeds and returns, and nothing else;
- ``compose``'s precision warning points at the first line outside hyp2onnx,
  however deep the call (the command line's included), through `errors.warn_user`;
- ``hyp2onnx.verification`` and ``hyp2onnx.export.composition`` are modules
  (``hyp2onnx.verify`` and ``hyp2onnx.export.compose`` are the functions), and the
  modules' old names still import.
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from _data import labels, points
from onnx import TensorProto, helper

import hyp2onnx as h
from hyp2onnx._feeds import numpy_dtype
from hyp2onnx.emit._graph import GraphBuilder


def test_columns_is_a_slice_of_the_run():
    builder = GraphBuilder(17)
    builder.reserve("X", "Y")
    out = builder.columns("cut", "X", 1, 3, "middle")
    builder.rename(out, "Y")
    graph = helper.make_graph(
        builder.nodes,
        "cut",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, ["N", 4])],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, ["N", 2])],
        builder.initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    X = np.arange(12.0).reshape(3, 4)
    got = ort.InferenceSession(model.SerializeToString()).run(None, {"X": X})[0]
    np.testing.assert_array_equal(got, X[:, 1:3])
    assert [t.name for t in builder.initializers] == [
        f"cut/middle_{k}" for k in ("start", "stop", "axis")
    ]


def test_numpy_dtype_is_onnx_table_for_numbers_and_booleans():
    numbers = {
        TensorProto.FLOAT: np.float32,
        TensorProto.DOUBLE: np.float64,
        TensorProto.FLOAT16: np.float16,
        TensorProto.INT8: np.int8,
        TensorProto.INT16: np.int16,
        TensorProto.INT32: np.int32,
        TensorProto.INT64: np.int64,
        TensorProto.UINT8: np.uint8,
        TensorProto.UINT16: np.uint16,
        TensorProto.UINT32: np.uint32,
        TensorProto.UINT64: np.uint64,
        TensorProto.BOOL: np.bool_,
    }
    for elem, want in numbers.items():
        assert numpy_dtype(elem) == np.dtype(want), TensorProto.DataType.Name(elem)
    others = set(TensorProto.DataType.values()) - set(numbers)
    assert {TensorProto.STRING, TensorProto.BFLOAT16, TensorProto.FLOAT8E5M2} <= others
    for elem in others:  # strings, complex, bfloat16, float8, int4, undefined
        assert numpy_dtype(elem) is None, TensorProto.DataType.Name(elem)


def _identity_encoder(path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["E"], ["points"])],
        "identity",
        [helper.make_tensor_value_info("E", TensorProto.DOUBLE, ["N", 3])],
        [helper.make_tensor_value_info("points", TensorProto.DOUBLE, ["N", 3])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_compose_warns_at_the_users_line_from_the_command_line_too(tmp_path):
    X, k = points(120, 2, seed=2, max_radius=1.5)
    forest = h.HyperbolicRandomForestClassifier(n_estimators=2, max_depth=2, random_state=0)
    forest.fit(X, labels(k, 2, seed=2))
    _identity_encoder(tmp_path / "enc.onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        h.compose(str(tmp_path / "enc.onnx"), forest, dtype="float32")
    lost = [w for w in caught if "precision lost" in str(w.message)]
    assert len(lost) == 1 and lost[0].filename == __file__, [(w.filename, w.lineno) for w in lost]
    from hyp2onnx.cli.convert import ConvertOptions, _with_encoder

    options = ConvertOptions(dtype="float32", encoder=tmp_path / "enc.onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _with_encoder(forest, options, {"dtype": "float32"})  # what convert --encoder runs
    lost = [w for w in caught if "precision lost" in str(w.message)]
    assert len(lost) == 1 and lost[0].filename == __file__, [(w.filename, w.lineno) for w in lost]


def test_module_names_are_modules_and_the_functions_keep_theirs():
    verification = importlib.import_module("hyp2onnx.verification")
    composition = importlib.import_module("hyp2onnx.export.composition")
    assert inspect.ismodule(verification) and inspect.ismodule(composition)
    assert h.verify is verification.verify and inspect.isfunction(h.verify)
    assert h.export.compose is composition.compose and inspect.isfunction(h.compose)
    # the modules' names before: their names still import, and pickles of their classes load
    from hyp2onnx.export.compose import encoder_sha256
    from hyp2onnx.verify import VerifyReport, default_tolerance

    assert default_tolerance is verification.default_tolerance
    assert encoder_sha256 is composition.encoder_sha256
    old = pickle.dumps(VerifyReport, protocol=0).replace(
        b"hyp2onnx.verification", b"hyp2onnx.verify"
    )
    assert pickle.loads(old) is VerifyReport
