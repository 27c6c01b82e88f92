"""ONNX nodes from raw scores to the model's outputs.

Classifiers: ``probabilities`` [N, n_classes] in ``classes_`` order (no
ZipMap) and ``label`` [N], the first class of highest probability (numpy's
``argmax`` rule, which every backend's ``predict`` uses). Regressors:
``variable`` [N, n_targets].
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from onnx import TensorProto, helper

from ..errors import UnsupportedModelError
from ..ir import Ensemble
from ._graph import GraphBuilder, onnx_type

STAGE = "output"


def label_tensor(classes: np.ndarray) -> tuple[np.ndarray, int]:
    """Class labels as an initializer array and its ONNX element type."""
    classes = np.asarray(classes)
    if classes.dtype.kind in "iub":
        return classes.astype(np.int64), TensorProto.INT64
    if classes.dtype.kind in "USO" and all(isinstance(c, str) for c in classes.tolist()):
        return np.array(classes.tolist(), dtype=object), TensorProto.STRING
    if classes.dtype.kind == "f":
        return classes.astype(np.float64), TensorProto.DOUBLE
    raise UnsupportedModelError(
        f"class labels of dtype {classes.dtype} cannot be ONNX outputs; use integer or string labels."
    )


def link(builder: GraphBuilder, scores: str, ensemble: Ensemble, dtype: str) -> str:
    """A classifier's probabilities from its raw scores (the link function)."""
    if ensemble.post_transform == "logistic":
        p = builder.op(STAGE, "Sigmoid", [scores])
        q = builder.op(STAGE, "Sub", [builder.const(STAGE, "one", np.ones((1, 1)), dtype), p])
        return builder.op(STAGE, "Concat", [q, p], axis=1)
    if ensemble.post_transform == "softmax":
        return builder.op(STAGE, "Softmax", [scores], axis=1)
    return scores


def emit_outputs(
    builder: GraphBuilder,
    scores: str,
    ensemble: Ensemble,
    dtype: str,
    *,
    refine: Callable[..., str | tuple[str, str]] | None = None,
    to_probabilities: Callable[[GraphBuilder, str], str] | None = None,
) -> list[helper.ValueInfoProto]:
    """Wire the named graph outputs; returns their value infos.

    ``to_probabilities(builder, scores)``, if given, replaces the link function
    (the fast graph of binary forests: class 0 as 1 - p1).
    ``refine(builder, scores, to_probabilities)``, if given, returns the
    probabilities the labels are taken from, applying the link itself where
    it chooses (the fast encoding's near-tie guard, `hyp2onnx.emit.fast`),
    or those and each row's best class index, which the labels then read.
    """
    elem = onnx_type(dtype)
    classes = ensemble.classes
    if classes is None:  # a regressor (ensemble.is_classifier is False)
        if ensemble.post_transform == "logistic":
            scores = builder.op(STAGE, "Sigmoid", [scores])
        builder.rename(scores, "variable")
        return [helper.make_tensor_value_info("variable", elem, ["N", ensemble.n_outputs])]

    n_classes = len(classes)
    if to_probabilities is None:
        to_probabilities = lambda block, s: link(block, s, ensemble, dtype)
    best = None  # the guard's own ArgMax, where it gives one
    if refine is not None:
        refined = refine(builder, scores, to_probabilities)
        probabilities, best = refined if isinstance(refined, tuple) else (refined, None)
    else:
        probabilities = to_probabilities(builder, scores)
    builder.rename(probabilities, "probabilities")
    labels, label_type = label_tensor(classes)
    if label_type == TensorProto.INT64 and np.array_equal(labels, np.arange(n_classes)):
        # Labels 0 .. C-1 are ArgMax's own output: no Gather (a node less per call).
        if best is not None:
            builder.rename(best, "label")
        else:
            builder.op(STAGE, "ArgMax", ["probabilities"], axis=1, keepdims=0, outputs=["label"])
    else:
        if best is None:
            best = builder.op(STAGE, "ArgMax", ["probabilities"], axis=1, keepdims=0)
        builder.op(
            STAGE,
            "Gather",
            [builder.const(STAGE, "classes", labels), best],
            axis=0,
            outputs=["label"],
        )
    return [
        helper.make_tensor_value_info("label", label_type, ["N"]),
        helper.make_tensor_value_info("probabilities", elem, ["N", n_classes]),
    ]
