"""A minimal, deterministic ONNX graph builder.

Nodes are named ``stage/OpType`` (``klein/Div``, ``trees/TreeEnsemble``,
...) so the graph reads well in a viewer; names and the order of nodes and
initializers depend only on what is added, so the same model always gives
byte-identical files.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

ML_DOMAIN = "ai.onnx.ml"


def onnx_type(dtype: Any) -> int:
    """ONNX element type of a numpy dtype (float32, float64, int64), by onnx's own table."""
    return int(helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


class GraphBuilder:
    """Collects nodes and initializers; every name it hands out is unique."""

    def __init__(self, opset: int) -> None:
        self.opset = opset  #: ai.onnx opset the nodes must be valid in
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._used: set[str] = set()

    def points_graph(
        self, name: str, dtype: Any, n_features: int, outputs: list[onnx.ValueInfoProto]
    ) -> onnx.GraphProto:
        """The nodes built as one graph: points ``X`` [N, n_features] of ``dtype`` in,
        ``outputs`` out (every exported graph takes its points so)."""
        x = helper.make_tensor_value_info("X", onnx_type(dtype), ["N", n_features])
        return helper.make_graph(self.nodes, name, [x], outputs, self.initializers)

    def child(self) -> GraphBuilder:
        """A builder for a subgraph (a Loop body): own nodes, shared names and initializers."""
        sub = GraphBuilder(self.opset)
        sub._used = self._used
        sub.initializers = self.initializers
        return sub

    def unique(self, name: str) -> str:
        if name not in self._used:
            self._used.add(name)
            return name
        i = 1
        while f"{name}_{i}" in self._used:
            i += 1
        self._used.add(f"{name}_{i}")
        return f"{name}_{i}"

    def reserve(self, *names: str) -> None:
        """Mark graph input/output names as taken."""
        self._used.update(names)

    def const(self, stage: str, label: str, value: Any, dtype: Any = None) -> str:
        """An initializer; returns its name."""
        array = np.asarray(value, dtype=dtype)
        name = self.unique(f"{stage}/{label}")
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def op(
        self,
        stage: str,
        op_type: str,
        inputs: list[str],
        *,
        n_outputs: int = 1,
        outputs: list[str] | None = None,
        domain: str = "",
        **attrs: Any,
    ) -> Any:
        """Add a node; returns its output name (or a list of names)."""
        name = self.unique(f"{stage}/{op_type}")
        if outputs is None:
            outputs = [self.unique(f"{name}:{i}") for i in range(n_outputs)]
        node = helper.make_node(op_type, inputs, outputs, name=name, domain=domain or None)
        for key in sorted(attrs):
            value = attrs[key]
            if isinstance(value, np.ndarray):
                node.attribute.append(helper.make_attribute(key, numpy_helper.from_array(value)))
            else:
                node.attribute.append(helper.make_attribute(key, value))
        self.nodes.append(node)
        return outputs[0] if len(outputs) == 1 else outputs

    def rename(self, old: str, new: str) -> str:
        """Give the tensor ``old`` the name ``new`` (for graph outputs)."""
        self._used.add(new)
        for node in self.nodes:
            for field in (node.input, node.output):
                for i, name in enumerate(field):
                    if name == old:
                        field[i] = new
        return new

    def n_rows(self, stage: str, x: str) -> str:
        """``x``'s number of rows as a 1-D int64 tensor ``[N]``.

        ``Shape(start=0, end=1)`` from opset 15 on; before, ``Shape`` then
        ``Slice`` (the ``start``/``end`` attributes did not exist yet).
        """
        if self.opset >= 15:
            return self.op(stage, "Shape", [x], start=0, end=1)
        first = [self.const(stage, label, [i], np.int64) for label, i in (("first", 0), ("one", 1))]
        return self.op(stage, "Slice", [self.op(stage, "Shape", [x]), *first])

    def columns(self, stage: str, x: str, start: int, stop: int, label: str) -> str:
        """``x[:, start:stop]``: one ``Slice`` along axis 1, its bounds named ``{label}_start``,
        ``{label}_stop`` and ``{label}_axis`` (the one helper for a run of columns)."""
        bounds = [
            self.const(stage, f"{label}_{key}", [value], np.int64)
            for key, value in (("start", start), ("stop", stop), ("axis", 1))
        ]
        return self.op(stage, "Slice", [x, *bounds])

    def cast(self, stage: str, name: str, dtype: Any) -> str:
        return self.op(stage, "Cast", [name], to=onnx_type(dtype))
