"""Neural encoders built with ``onnx.helper`` (no torch), and their forward pass in numpy.

Each encoder is a small ReLU MLP from raw features to a tangent vector ``v``
at the origin, then an exponential map onto a hyperbolic model:

- hyperboloid of radius R: ``x_0 = R cosh(|v|/R)``, ``x_s = R sinh(|v|/R) v/|v|``
  (time column first or last);
- Poincare ball of radius R: ``p = R tanh(|v|/R) v/|v|``;
- Klein ball of radius R: ``k = R tanh(|v|/R) v/|v|`` is not used; the
  "scaled" encoder instead returns ``R * x`` (exact in floating point), so
  rows can be placed on a model's thresholds through it.

``|v|`` is ``sqrt(|v|^2 + 1e-30)`` so that ``v = 0`` maps to the origin. The
numpy forward pass below is written from these formulas, not from the graph
and not with hyp2onnx, so it is an oracle for the graph's encoder part (to
within the runtimes' rounding of ``exp`` and the matrix products).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

EPS = 1e-30
_ELEM = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE}


class Encoder:
    """Weights of an MLP encoder and the model its exponential map lands in."""

    def __init__(
        self,
        n_in: int,
        hidden: int,
        d: int,
        *,
        target: str = "hyperboloid",
        curvature: float = -1.0,
        timelike_last: bool = False,
        dtype: type = np.float32,
        seed: int = 0,
        scale: float = 1.0,
    ) -> None:
        rng = np.random.default_rng(seed)
        self.n_in, self.d, self.target, self.dtype = n_in, d, target, dtype
        self.R = 1.0 / np.sqrt(-curvature)
        self.timelike_last = timelike_last
        self.W1 = (rng.normal(size=(n_in, hidden)) / np.sqrt(n_in)).astype(dtype)
        self.b1 = (rng.normal(size=hidden) * 0.1).astype(dtype)
        self.W2 = (rng.normal(size=(hidden, d)) * scale / np.sqrt(hidden)).astype(dtype)
        self.b2 = (rng.normal(size=d) * 0.1).astype(dtype)

    @property
    def width(self) -> int:
        return self.d + 1 if self.target == "hyperboloid" else self.d

    def numpy(self, X: np.ndarray) -> np.ndarray:
        """The forward pass in numpy, in the encoder's dtype."""
        X = np.asarray(X, dtype=self.dtype)
        if self.target == "scaled":
            return X * self.dtype(self.R)
        h = np.maximum(X @ self.W1 + self.b1, 0)
        v = h @ self.W2 + self.b2
        n = np.sqrt(np.sum(v * v, axis=1, keepdims=True) + self.dtype(EPS))
        a = n / self.dtype(self.R)
        if self.target == "poincare":
            return (self.dtype(self.R) * np.tanh(a) / n * v).astype(self.dtype)
        x0 = self.dtype(self.R) * np.cosh(a)
        xs = self.dtype(self.R) * np.sinh(a) / n * v
        parts = [xs, x0] if self.timelike_last else [x0, xs]
        return np.concatenate(parts, axis=1).astype(self.dtype)

    def onnx(
        self,
        *,
        opset: int = 18,
        extra_outputs: bool = False,
        names: dict[str, str] | None = None,
        width_known: bool = True,
    ) -> onnx.ModelProto:
        """The same encoder as an ONNX model: input ``x``, output ``points``.

        ``extra_outputs`` adds the tangent vector ``v`` as a second output.
        ``names`` renames internal tensors (to provoke clashes with a model's
        names). ``width_known=False`` leaves the output's width open.
        """
        names = names or {}
        nm = lambda s: names.get(s, s)
        dt = self.dtype
        elem = _ELEM[dt]
        inits = []
        nodes = []

        def const(name: str, value) -> str:
            inits.append(numpy_helper.from_array(np.asarray(value, dtype=dt), nm(name)))
            return nm(name)

        if self.target == "scaled":
            nodes.append(helper.make_node("Mul", ["x", const("R", self.R)], [nm("points")]))
        else:
            nodes += [
                helper.make_node("MatMul", ["x", const("W1", self.W1)], [nm("h0")]),
                helper.make_node("Add", [nm("h0"), const("b1", self.b1)], [nm("h1")]),
                helper.make_node("Relu", [nm("h1")], [nm("h")]),
                helper.make_node("MatMul", [nm("h"), const("W2", self.W2)], [nm("v0")]),
                helper.make_node("Add", [nm("v0"), const("b2", self.b2)], [nm("v")]),
                helper.make_node("Mul", [nm("v"), nm("v")], [nm("vv")]),
                helper.make_node(
                    "ReduceSum",
                    [nm("vv"), numpy_helper_axes(inits, nm("axes"))],
                    [nm("ss")],
                    keepdims=1,
                ),
                helper.make_node("Add", [nm("ss"), const("eps", EPS)], [nm("ss_eps")]),
                helper.make_node("Sqrt", [nm("ss_eps")], [nm("n")]),
                helper.make_node("Div", [nm("n"), const("R", self.R)], [nm("a")]),
            ]
            if self.target == "poincare":
                nodes += [
                    helper.make_node("Tanh", [nm("a")], [nm("t")]),
                    helper.make_node("Mul", [const("Rc", self.R), nm("t")], [nm("Rt")]),
                    helper.make_node("Div", [nm("Rt"), nm("n")], [nm("f")]),
                    helper.make_node("Mul", [nm("f"), nm("v")], [nm("points")]),
                ]
            else:
                if dt is np.float32:
                    nodes += [
                        helper.make_node("Cosh", [nm("a")], [nm("c")]),
                        helper.make_node("Sinh", [nm("a")], [nm("s")]),
                    ]
                else:  # onnxruntime has no float64 Cosh/Sinh: (e^a +- e^-a) / 2
                    nodes += [
                        helper.make_node("Exp", [nm("a")], [nm("ea")]),
                        helper.make_node("Neg", [nm("a")], [nm("na")]),
                        helper.make_node("Exp", [nm("na")], [nm("ena")]),
                        helper.make_node("Add", [nm("ea"), nm("ena")], [nm("c2")]),
                        helper.make_node("Sub", [nm("ea"), nm("ena")], [nm("s2")]),
                        helper.make_node("Mul", [nm("c2"), const("half", 0.5)], [nm("c")]),
                        helper.make_node("Mul", [nm("s2"), const("half2", 0.5)], [nm("s")]),
                    ]
                nodes += [
                    helper.make_node("Mul", [const("Rc", self.R), nm("c")], [nm("x0")]),
                    helper.make_node("Mul", [const("Rs", self.R), nm("s")], [nm("Rs_s")]),
                    helper.make_node("Div", [nm("Rs_s"), nm("n")], [nm("f")]),
                    helper.make_node("Mul", [nm("f"), nm("v")], [nm("xs")]),
                    helper.make_node(
                        "Concat",
                        [nm("xs"), nm("x0")] if self.timelike_last else [nm("x0"), nm("xs")],
                        [nm("points")],
                        axis=1,
                    ),
                ]
        width = self.width if width_known else "W"
        outputs = [helper.make_tensor_value_info(nm("points"), elem, ["N", width])]
        if extra_outputs and self.target != "scaled":
            outputs.append(helper.make_tensor_value_info(nm("v"), elem, ["N", self.d]))
        n_in: int | str = self.d if self.target == "scaled" else self.n_in
        if self.target == "scaled" and not width_known:
            n_in = "W"
        graph = helper.make_graph(
            nodes,
            "encoder",
            [helper.make_tensor_value_info("x", elem, ["N", n_in])],
            outputs,
            inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        return model


def numpy_helper_axes(inits: list, name: str) -> str:
    inits.append(numpy_helper.from_array(np.array([1], dtype=np.int64), name))
    return name


def run(model: onnx.ModelProto, X: np.ndarray, output: str | None = None) -> dict[str, np.ndarray]:
    """Outputs of ``model`` in onnxruntime, by name, for its first input ``X``."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    dtype = np.float64 if session.get_inputs()[0].type == "tensor(double)" else np.float32
    values = session.run(None, {name: np.asarray(X, dtype=dtype)})
    return {o.name: v for o, v in zip(session.get_outputs(), values)}
