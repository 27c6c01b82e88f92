"""ONNX nodes from an isolation forest's summed path lengths to its outputs.

The tree stage adds each tree's leaf path length in tree order (the sums
are the Python model's bit for bit). Outputs, each ``[N]``:

- ``path_length``: the summed path lengths ``S``;
- ``scores``: ``-(2 ** -(S / D))`` with ``D = n_estimators * c(max_samples_)``,
  scikit-learn's ``score_samples`` (``Div``, ``Neg``, ``Pow``, ``Neg``: the same
  operations; ``Pow`` is the runtime's, which may differ from numpy's
  ``2 ** x`` in the last bit);
- ``label``: int64, -1 (outlier) iff ``S < path_threshold``, else +1: decided
  on the sums, so identical to the Python model's ``predict``.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ._graph import GraphBuilder, onnx_type

STAGE = "anomaly"

__all__ = ["OUTPUTS", "emit_anomaly_outputs"]

#: Graph outputs of an isolation forest, in order.
OUTPUTS = ("label", "scores", "path_length")


def emit_anomaly_outputs(
    g: GraphBuilder, sums: str, metadata: dict[str, str], dtype: str
) -> list[helper.ValueInfoProto]:
    """Wire ``label``, ``scores`` and ``path_length`` from the ``[N, 1]`` sums."""
    elem = onnx_type(dtype)
    total = g.op(STAGE, "Squeeze", [sums, g.const(STAGE, "axis", [1], np.int64)])
    g.rename(total, "path_length")
    denominator = float(metadata["denominator"])
    if denominator != 0:
        ratio = g.op(STAGE, "Div", ["path_length", g.const(STAGE, "denominator", denominator, dtype)])
    else:  # one training row: scikit-learn scores every point -(2 ** -1)
        zero = g.op(STAGE, "Mul", ["path_length", g.const(STAGE, "zero", 0.0, dtype)])
        ratio = g.op(STAGE, "Add", [zero, g.const(STAGE, "one", 1.0, dtype)])
    power = g.op(STAGE, "Pow", [g.const(STAGE, "two", 2.0, dtype), g.op(STAGE, "Neg", [ratio])])
    g.op(STAGE, "Neg", [power], outputs=["scores"])
    threshold = g.const(STAGE, "path_threshold", float(metadata["path_threshold"]), dtype)
    outlier = g.op(STAGE, "Less", ["path_length", threshold])
    g.op(
        STAGE,
        "Where",
        [outlier, g.const(STAGE, "outlier", -1, np.int64), g.const(STAGE, "inlier", 1, np.int64)],
        outputs=["label"],
    )
    return [
        helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
        helper.make_tensor_value_info("scores", elem, ["N"]),
        helper.make_tensor_value_info("path_length", elem, ["N"]),
    ]
