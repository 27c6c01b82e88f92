"""The near-tie path of the library's softmax in a runtime that computes float64 in float32.

Rows whose two largest scores lie within ``NEAR_TIE`` get their softmax again
with `exp_correctly_rounded` (docs/math.md "How each backend turns scores into
labels"). OpenVINO's CPU plugin computes float64 tensors in float32: its
argument reduction must then still take a nearest multiple of ``ln 2 / N``,
or the polynomial is evaluated far outside its range (the rounding by adding
and taking away ``1.5 * 2**52`` gave ``k = 0`` there, wrong probabilities and
labels). The rows are built to be near ties: leaf values set in XGBoost's own
model (``tests/_margins.py``), one tree per class, so that every row's top two
scores lie 0 to ``2**-11`` apart (two trees' leaves) and the other two classes 0.5 to 6 below.
``float32_arithmetic`` runs a graph as OpenVINO does (every float64 tensor held
in float32) in onnxruntime, so the rule is checked where OpenVINO is missing.
"""

from __future__ import annotations

import copy
import importlib.util

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hyp2onnx as h
from hyp2onnx._runtime import session
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.edge import without_row_blocks
from hyp2onnx.emit._graph import GraphBuilder
from hyp2onnx.emit.outputs import NEAR_TIE, _exp_constants, _exp_reduce
from hyp2onnx.verification import default_tolerance

#: Top-two gaps of the built rows, in float32 steps of the top score (below: a gap in ulps
#: that float32 arithmetic may merge; OpenVINO's own Exp and Div are not correctly rounded).
FEW_ULPS = 8


def float32_arithmetic(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with every float64 tensor held in float32 (constants, casts, value types,
    in subgraphs too): what OpenVINO's CPU plugin computes for a float64 graph."""
    model = copy.deepcopy(model)

    def convert(graph: onnx.GraphProto) -> None:
        for i, tensor in enumerate(graph.initializer):
            if tensor.data_type == TensorProto.DOUBLE:
                array = numpy_helper.to_array(tensor).astype(np.float32)
                graph.initializer[i].CopyFrom(numpy_helper.from_array(array, tensor.name))
        for info in [*graph.input, *graph.output, *graph.value_info]:
            if info.type.tensor_type.elem_type == TensorProto.DOUBLE:
                info.type.tensor_type.elem_type = TensorProto.FLOAT
        for node in graph.node:
            for attribute in node.attribute:
                if node.op_type == "Cast" and attribute.name == "to":
                    if attribute.i == TensorProto.DOUBLE:
                        attribute.i = TensorProto.FLOAT
                if attribute.type == onnx.AttributeProto.GRAPH:
                    convert(attribute.g)

    convert(model.graph)
    return model


def _run(model: onnx.ModelProto, X: np.ndarray) -> dict[str, np.ndarray]:
    names = [o.name for o in model.graph.output]
    return dict(zip(names, session(model, threads=1).run(None, {"X": X}), strict=True))


@pytest.fixture(scope="module")
def near_ties():
    """An XGBoost model of 4 classes whose every row is a near tie, its rows (float32), the
    top-two gap of each row, and its standard graph without row blocks."""
    from _margins import set_leaves

    X, y = make_wrapped_normal_mixture(400, 2, 4, random_state=3)
    model = h.HyperbolicXGBClassifier(n_estimators=1, max_depth=6, n_jobs=1).fit(X, y)
    rng = np.random.default_rng(0)
    base = np.float32(0.8375)

    def offsets(n: int) -> np.ndarray:
        """0 to 3 ulps on half the leaves, 2**-23 to 2**-12 on the others, in random order."""
        ulps = np.arange(n // 2) % 4 * np.spacing(base)
        return rng.permutation(np.concatenate([ulps, 2.0 ** rng.uniform(-23, -12, n - ulps.size)]))

    def values(tree: int, column: int, n: int) -> np.ndarray:
        # classes 2 and 3 lie base - b and base + a apart: gaps a + b, from an exact tie
        # (the first class wins) through a few ulps to either side of NEAR_TIE
        if column >= 2:
            sign = 1.0 if column == 3 else -1.0
            return (base + sign * offsets(n)).astype(np.float32)
        return base - rng.uniform(0.5, 6.0, n).astype(np.float32)

    set_leaves(model, values)
    X = X.astype(np.float32)
    margins = model.estimator_.predict(model._tree_input(X), output_margin=True)
    top = np.sort(margins, axis=1)
    gap = top[:, -1] - top[:, -2]
    assert np.count_nonzero(gap <= NEAR_TIE["float32"]) > 100  # the rows reach the path
    graph = without_row_blocks(h.to_onnx(model, encoding="standard", dtype="float32"))
    return model, X, gap, graph


def _assert_served(model, X, gap, got, atol) -> None:
    """The model's labels on every row not within a few ulps of a tie; its probabilities
    within ``atol`` on every row."""
    apart = gap >= FEW_ULPS * np.spacing(np.float32(0.8375))
    np.testing.assert_array_equal(got["label"][apart], model.predict(X)[apart])
    np.testing.assert_allclose(got["probabilities"], model.predict_proba(X), rtol=0, atol=atol)


def test_near_tie_rows_in_float32_arithmetic(near_ties):
    """The standard graph run with every float64 tensor in float32 (onnxruntime): labels
    and probabilities as OpenVINO's float32 rounding allows. Planted: the reduction's Floor
    replaced by the sum and difference with 1.5 * 2**52 again: fails (labels and values)."""
    model, X, gap, graph = near_ties
    got = _run(float32_arithmetic(graph), X)
    _assert_served(model, X, gap, got, default_tolerance(h.read_metadata(graph)))


@pytest.mark.skipif(
    importlib.util.find_spec("openvino") is None,
    reason="openvino is not installed (pip install -e '.[compat-table]')",
)
def test_near_tie_rows_in_openvino(near_ties, tmp_path):
    """The issue's runtime itself: OpenVINO 2026 on the CPU, float32 precision, one thread.
    The graph with the 1.5 * 2**52 rounding gave wrong probabilities on every near-tie row
    and wrong labels on some."""
    import openvino as ov

    model, X, gap, graph = near_ties
    path = tmp_path / "near_ties.onnx"
    h.save_onnx(graph, path)
    core = ov.Core()
    options = {"INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": "f32"}
    compiled = core.compile_model(core.read_model(str(path)), "CPU", options)
    result = compiled([X])
    got = {o.get_any_name(): np.asarray(result[o]) for o in compiled.outputs}
    _assert_served(model, X, gap, got, default_tolerance(h.read_metadata(graph)))


@pytest.mark.parametrize("arithmetic", ["float64", "float32"])
def test_the_reduction_takes_a_nearest_multiple(arithmetic):
    """``x = k ln2/N + r`` with ``|r| <= ln2 / 2N`` (the polynomial's range), in float64 and
    in float32 arithmetic, for shifts in [-746, 0], at half steps and one ulp beside them.
    Planted: Floor(x N / ln 2) without the half fails both; the 1.5 * 2**52 rounding fails
    in float32."""
    g = GraphBuilder(17)
    r_hi, _, _, _, _ = _exp_reduce(g, "X")
    g.rename(r_hi, "r")
    vector = lambda name: helper.make_tensor_value_info(name, TensorProto.DOUBLE, [None])
    graph = helper.make_graph(g.nodes, "reduce", [vector("X")], [vector("r")], g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    step = 1.0 / _exp_constants()["inv"]
    rng = np.random.default_rng(0)
    halves = (np.arange(-2000, 0) + 0.5) * step
    x = np.concatenate(
        [-rng.uniform(0, 746, 2000), -rng.uniform(0, 8, 2000), halves, np.nextafter(halves, 0)]
    )
    if arithmetic == "float32":
        model, x = float32_arithmetic(model), x.astype(np.float32)
    r = _run(model, x)["r"].astype(np.float64)
    # x N / ln 2 is rounded once (and float32's kd ln2/N too): r may pass the half step by
    # a few of x's ulps
    slack = 4 * np.spacing(np.abs(x))
    assert np.all(np.abs(r) <= step / 2 + slack)
