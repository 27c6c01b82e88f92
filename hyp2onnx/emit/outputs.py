"""ONNX nodes from raw scores to the model's outputs.

Classifiers: ``probabilities`` [N, n_classes] in ``classes_`` order (no
ZipMap) and ``label`` [N], decided as the library's own ``predict`` decides
(the ensemble's ``label_rule``, docs/math.md "How each backend turns scores
into labels"): the first class of highest probability (scikit-learn), the
first class of highest raw score (CatBoost), or, for binary boosters, the
second class iff the raw score exceeds the library's threshold. A label is
never read from probabilities that the library does not decide on: two raw
scores one ulp apart may round to one probability. Regressors:
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


def link(g: GraphBuilder, scores: str, ensemble: Ensemble, dtype: str) -> str:
    """A classifier's probabilities from its raw scores (the link function)."""
    if ensemble.post_transform == "logistic":
        p = g.op(STAGE, "Sigmoid", [scores])
        q = g.op(STAGE, "Sub", [g.const(STAGE, "one", np.ones((1, 1)), dtype), p])
        return g.op(STAGE, "Concat", [q, p], axis=1)
    if ensemble.post_transform == "softmax":
        return g.op(STAGE, "Softmax", [scores], axis=1)
    return scores


def class_index(
    g: GraphBuilder, decided: str, ensemble: Ensemble, dtype: str, *, output: str | None = None
) -> str:
    """``[N]`` int64 class indices from the tensor the library decides on.

    ``label_rule`` ``"above"``: 1 iff the one score column exceeds
    ``label_threshold`` (held in ``dtype``, as the scores are); otherwise the
    first column of the largest value (``ArgMax``, numpy's rule on ties).
    """
    outputs = None if output is None else [output]
    if ensemble.label_rule == "above":
        threshold = g.const(STAGE, "label_threshold", ensemble.label_threshold, dtype)
        above = g.op(STAGE, "Greater", [decided, threshold])  # [N, 1]
        flat = g.op(STAGE, "Reshape", [above, g.const(STAGE, "flat", [-1], np.int64)])
        return g.op(STAGE, "Cast", [flat], to=TensorProto.INT64, outputs=outputs)
    return g.op(STAGE, "ArgMax", [decided], axis=1, keepdims=0, outputs=outputs)


def emit_outputs(
    g: GraphBuilder,
    scores: str,
    ensemble: Ensemble,
    dtype: str,
    *,
    refine: Callable[..., tuple[str, str]] | None = None,
    to_probabilities: Callable[[GraphBuilder, str], str] | None = None,
) -> list[helper.ValueInfoProto]:
    """Wire the named graph outputs; returns their value infos.

    ``to_probabilities(g, scores)``, if given, replaces the link function
    (the fast graph of binary forests: class 0 as 1 - p1).
    ``refine(g, scores, to_probabilities)``, if given, returns the
    probabilities and the tensor the label is decided on (the probabilities,
    or the raw scores, as ``label_rule`` says), applying the link itself where
    it chooses (the fast encoding's near-tie guard, :mod:`hyp2onnx.emit.fast`).
    """
    elem = onnx_type(dtype)
    classes = ensemble.classes
    if classes is None:  # a regressor (ensemble.is_classifier is False)
        if ensemble.post_transform == "logistic":
            scores = g.op(STAGE, "Sigmoid", [scores])
        g.rename(scores, "variable")
        return [helper.make_tensor_value_info("variable", elem, ["N", ensemble.n_outputs])]

    n_classes = len(classes)
    if to_probabilities is None:
        to_probabilities = lambda b, s: link(b, s, ensemble, dtype)
    if refine is not None:
        probabilities, decided = refine(g, scores, to_probabilities)
    else:
        probabilities = to_probabilities(g, scores)
        decided = probabilities if ensemble.label_rule == "probabilities" else scores
    if decided == probabilities:
        decided = "probabilities"
    g.rename(probabilities, "probabilities")
    labels, label_type = label_tensor(classes)
    # Labels 0 .. C-1 are the class index itself: no Gather (a node less per call).
    direct = label_type == TensorProto.INT64 and np.array_equal(labels, np.arange(n_classes))
    best = class_index(g, decided, ensemble, dtype, output="label" if direct else None)
    if not direct:
        g.op(STAGE, "Gather", [g.const(STAGE, "classes", labels), best], axis=0, outputs=["label"])
    return [
        helper.make_tensor_value_info("label", label_type, ["N"]),
        helper.make_tensor_value_info("probabilities", elem, ["N", n_classes]),
    ]
