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
        if ensemble.label_rule == "probabilities":  # the label is read from these
            return library_softmax(g, scores, dtype)
        return g.op(STAGE, "Softmax", [scores], axis=1)
    return scores


#: Below this shift the softmax's ``exp`` is its series (see `library_softmax`):
#: the terms left out add less than ``2**-84``, far below the last bit of ``1 + x``.
NEAR_ZERO = 2.0**-20


def _exp_near_zero(g: GraphBuilder, x: str) -> str:
    """``exp(x)`` for float64 ``|x| < NEAR_ZERO``: ``s + (err + x**2 (1/2 + x/6))`` where
    ``s + err = 1 + x`` exactly (``Fast2Sum``: ``|x| < 1``)."""
    one = g.const(STAGE, "exp_one", 1.0, "float64")
    s = g.op(STAGE, "Add", [one, x])
    err = g.op(STAGE, "Sub", [x, g.op(STAGE, "Sub", [s, one])])
    cubic = g.op(
        STAGE,
        "Add",
        [
            g.const(STAGE, "exp_half", 0.5, "float64"),
            g.op(STAGE, "Mul", [x, g.const(STAGE, "exp_sixth", 1.0 / 6.0, "float64")]),
        ],
    )
    tail = g.op(STAGE, "Mul", [g.op(STAGE, "Mul", [x, x]), cubic])
    return g.op(STAGE, "Add", [s, g.op(STAGE, "Add", [err, tail])])


def library_softmax(g: GraphBuilder, scores: str, dtype: str) -> str:
    """The softmax of XGBoost's and LightGBM's ``predict``, operation for operation.

    Both shift a row by its largest score, take ``exp``, add the exponentials
    class by class into a float64 sum (XGBoost's are float32, and it rounds
    the sum to float32) and divide each by the sum. Their labels are the first
    class of highest probability, and two close scores may round to one
    probability: ``Softmax`` (which may order or round its sums otherwise)
    would break those ties differently. ``exp`` is taken in float64 (rounded
    to float32 for float32 scores), nearer the C library's ``expf`` than a
    float32 ``Exp``; for shifts below ``NEAR_ZERO``, where classes within a
    few ulps of the largest score put ``1 + x`` on a rounding midpoint,
    ``exp(x)`` is ``1 + x`` with its exact rounding error (``Fast2Sum``) plus
    ``x**2 / 2 + x**3 / 6``, rounded once, as a correctly rounded ``exp`` is.
    """
    two = "float64"
    top, _ = g.op(
        STAGE, "TopK", [scores, g.const(STAGE, "one", [1], np.int64)], axis=1, n_outputs=2
    )
    shifted = g.op(STAGE, "Sub", [scores, top])
    wide = shifted if dtype == two else g.cast(STAGE, shifted, two)
    e_wide = g.op(
        STAGE,
        "Where",
        [
            g.op(
                STAGE,
                "Less",
                [g.op(STAGE, "Abs", [wide]), g.const(STAGE, "near_zero", NEAR_ZERO, two)],
            ),
            _exp_near_zero(g, wide),
            g.op(STAGE, "Exp", [wide]),
        ],
    )
    e = e_wide if dtype == two else g.cast(STAGE, e_wide, dtype)
    e_sum = e if dtype == two else g.cast(STAGE, e, two)  # each float32 exp, widened exactly
    running = g.op(STAGE, "CumSum", [e_sum, g.const(STAGE, "class_axis", 1, np.int64)])
    total = g.op(STAGE, "Gather", [running, g.const(STAGE, "last_class", [-1], np.int64)], axis=1)
    total = total if dtype == two else g.cast(STAGE, total, dtype)
    return g.op(STAGE, "Div", [e, total])


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
    it chooses (the fast encoding's near-tie guard, `hyp2onnx.emit.fast`).
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
