"""ONNX nodes from raw scores to the model's outputs.

Classifiers: ``probabilities`` [N, n_classes] in ``classes_`` order (no
ZipMap) and ``label`` [N], decided as the library's own ``predict`` decides
(the ensemble's ``label_rule``, docs/math.md "How each backend turns scores
into labels"): the first class of highest probability (scikit-learn, and
XGBoost's and LightGBM's multi-class models with their softmax computed as
they compute it: `library_softmax`), the first class of highest raw score
(CatBoost), or, for binary boosters, the
second class iff the raw score exceeds the library's threshold. A label is
never read from probabilities that the library does not decide on: two raw
scores one ulp apart may round to one probability. Regressors:
``variable`` [N, n_targets].
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable
from typing import Any

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
        if ensemble.label_rule == "probabilities":  # the label is read from these
            return library_softmax(builder, scores, dtype)
        return builder.op(STAGE, "Softmax", [scores], axis=1)
    return scores


#: Rows whose two largest scores lie closer than this (float64 scores; float32 ones
#: use ``NEAR_TIE["float32"]``) get their softmax again with correctly rounded
#: exponentials (`library_softmax`). Farther apart, the largest score's class has
#: the strictly largest probability whatever the last bits of the ``exp``: another
#: class's exponential is then below ``1 - 2**-41`` (float32: ``1 - 2**-13``),
#: far more than the few ulps by which a division could merge it with the first.
NEAR_TIE = {"float64": 2.0**-40, "float32": 2.0**-12}
#: Table size of `exp_correctly_rounded`: ``exp(x) = 2**(k/N) exp(r)``, ``|r| <= ln 2 / 2N``.
_EXP_TABLE = 256


@functools.cache
def _exp_constants() -> dict[str, Any]:
    """``ln 2 / N`` in three parts (the first two of 32 bits, so that ``k`` times them is
    exact for ``|k| < 2**20``) and ``2**(j/N)`` as float64 pairs ``hi + lo``, from 60-digit
    decimal arithmetic."""
    context = decimal.Context(prec=60)
    ln2 = context.ln(decimal.Decimal(2))
    step = context.divide(ln2, _EXP_TABLE)

    def leading(value: decimal.Decimal, n_bits: int) -> float:
        mantissa, exponent = math.frexp(float(value))
        return math.ldexp(round(mantissa * 2**n_bits), exponent - n_bits)

    c1 = leading(step, 32)
    c2 = leading(step - decimal.Decimal(c1), 32)
    c3 = float(step - decimal.Decimal(c1) - decimal.Decimal(c2))
    powers = [
        context.power(decimal.Decimal(2), context.divide(j, _EXP_TABLE)) for j in range(_EXP_TABLE)
    ]
    hi = np.array([float(t) for t in powers])
    lo = np.array([float(t - decimal.Decimal(float(t))) for t in powers])
    return {"inv": float(context.divide(_EXP_TABLE, ln2)), "c": (c1, c2, c3), "hi": hi, "lo": lo}


def _two_sum(builder: GraphBuilder, a: str, b: str) -> tuple[str, str]:
    """``s + e = a + b`` exactly, ``s`` the rounded sum (Knuth's TwoSum)."""
    s = builder.op(STAGE, "Add", [a, b])
    b_virtual = builder.op(STAGE, "Sub", [s, a])
    a_virtual = builder.op(STAGE, "Sub", [s, b_virtual])
    e = builder.op(
        STAGE,
        "Add",
        [builder.op(STAGE, "Sub", [a, a_virtual]), builder.op(STAGE, "Sub", [b, b_virtual])],
    )
    return s, e


def _exp_reduce(builder: GraphBuilder, x: str) -> tuple[str, str, str, str, str]:
    """``x = k ln2/N + r_hi + r_lo``: ``(r_hi, r_lo, 2**(k // N) as float64 exponent,
    T_hi, T_lo)`` with ``T = 2**(j/N)``, ``j = k mod N``, from the table of pairs."""
    k_ = _exp_constants()
    c1, c2, c3 = k_["c"]
    const = lambda name, value: builder.const(STAGE, name, value, "float64")
    op = lambda kind, inputs: builder.op(STAGE, kind, inputs)
    # k = floor(x N / ln 2 + 1/2), a nearest integer (exact in float64: |x N / ln 2| < 2**19).
    # Floor, not the sum and difference with 1.5 * 2**52, which a runtime computing float64
    # in float32 (OpenVINO) turns into k = 0; tract has Floor but no float64 Round.
    scaled = op("Mul", [x, const("exp_inv_step", k_["inv"])])
    kd = op("Floor", [op("Add", [scaled, const("exp_half", 0.5)])])
    r1 = op("Sub", [x, op("Mul", [kd, const("exp_c1", c1)])])  # exact (Sterbenz)
    r_hi, r_lo = _two_sum(builder, r1, op("Neg", [op("Mul", [kd, const("exp_c2", c2)])]))
    r_lo = op("Sub", [r_lo, op("Mul", [kd, const("exp_c3", c3)])])
    k = builder.op(STAGE, "Cast", [kd], to=TensorProto.INT64)
    n = builder.const(STAGE, "exp_table_size", _EXP_TABLE, np.int64)
    # k >= -746 N / ln 2 (the floor in exp_correctly_rounded): moved up by a multiple of N
    # past that, k mod N is the same whichever sign convention a runtime's Mod follows
    offset = builder.const(STAGE, "exp_k_offset", 2048 * _EXP_TABLE, np.int64)
    j = builder.op(STAGE, "Mod", [builder.op(STAGE, "Add", [k, offset]), n])  # in [0, N)
    power = builder.op(STAGE, "Cast", [op("Div", [op("Sub", [k, j]), n])], to=TensorProto.DOUBLE)
    t_hi = builder.op(STAGE, "Gather", [const("exp_table_hi", k_["hi"]), j], axis=0)
    t_lo = builder.op(STAGE, "Gather", [const("exp_table_lo", k_["lo"]), j], axis=0)
    return r_hi, r_lo, power, t_hi, t_lo


def _dekker_product(builder: GraphBuilder, a: str, b: str) -> tuple[str, str]:
    """``a b = product + error`` exactly (Veltkamp's split into 26-bit halves, Dekker)."""
    const = lambda name, value: builder.const(STAGE, name, value, "float64")
    op = lambda kind, inputs: builder.op(STAGE, kind, inputs)

    def split(value: str) -> tuple[str, str]:
        c = op("Mul", [value, const("exp_split", 134217729.0)])
        hi = op("Sub", [c, op("Sub", [c, value])])
        return hi, op("Sub", [value, hi])

    a_hi, a_lo = split(a)
    b_hi, b_lo = split(b)
    product = op("Mul", [a, b])
    high_parts = op("Sub", [op("Mul", [a_hi, b_hi]), product])
    error = op(
        "Add",
        [
            op("Add", [op("Add", [high_parts, op("Mul", [a_hi, b_lo])]), op("Mul", [a_lo, b_hi])]),
            op("Mul", [a_lo, b_lo]),
        ],
    )
    return product, error


def exp_correctly_rounded(builder: GraphBuilder, x: str) -> str:
    """``exp(x)`` in float64, correctly rounded but where it lies within about
    ``2**-70`` of a rounding midpoint, for ``x`` in ``[-708, 0]`` (normal results;
    below, a subnormal result may come out as 0, and 0 below -746).

    ``x = k ln2/N + r`` (``k`` a nearest integer, by ``Floor``, so that the graph run in
    float32 arithmetic, as OpenVINO runs float64, keeps ``|r| <= ln 2 / 2N`` and float32
    accuracy; ``r = r_hi + r_lo`` exact to
    ``2**-100``, the product ``k`` times the first two parts of ``ln2/N`` exact),
    ``exp(x) = 2**(k // N) T_j (1 + q)`` with ``T_j = 2**(j/N)``, ``j = k mod N``,
    from a table of float64 pairs, and ``q = exp(r) - 1`` to degree 6 in ``r``
    (``|r| <= ln 2 / 2N``); ``T_j (1 + q)`` is summed in double-double (Dekker's
    product, TwoSum) and rounded once; the power of two is exact. onnxruntime's
    ``Exp`` is not correctly rounded on some shifts, the C library's is but for
    few; a label that rides on the last bit of a sum of exponentials needs this.
    """
    const = lambda name, value: builder.const(STAGE, name, value, "float64")
    op = lambda kind, inputs: builder.op(STAGE, kind, inputs)
    # exp(x) rounds to 0 below -745.2: clamping there keeps k within int64 and the
    # rounding's exact range (far smaller shifts gave NaN)
    x = op("Max", [x, const("exp_floor", -746.0)])
    r_hi, r_lo, power, t_hi, t_lo = _exp_reduce(builder, x)
    poly = const("exp_p6", 1.0 / 720.0)
    for i, coefficient in enumerate((1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5)):
        poly = op("Add", [const(f"exp_p{5 - i}", coefficient), op("Mul", [r_hi, poly])])
    q_lo = op(
        "Add",
        [
            op("Add", [r_lo, op("Mul", [r_lo, r_hi])]),
            op("Mul", [op("Mul", [r_hi, r_hi]), poly]),
        ],
    )  # exp(r) - 1 = r_hi + q_lo
    product, product_err = _dekker_product(builder, t_hi, r_hi)  # t_hi r_hi, exactly
    s, e = _two_sum(builder, t_hi, product)
    small = op(
        "Add",
        [
            op("Add", [op("Add", [e, product_err]), op("Add", [t_lo, op("Mul", [t_lo, r_hi])])]),
            op("Mul", [t_hi, q_lo]),
        ],
    )
    rounded = op("Add", [s, small])
    return op("Mul", [rounded, op("Pow", [const("exp_two", 2.0), power])])


def _softmax_of(
    builder: GraphBuilder,
    block: GraphBuilder,
    shifts: str,
    exp: Callable[[GraphBuilder, str], str],
    dtype: str,
) -> str:
    """The libraries' softmax of shifted scores in ``block``: ``exp`` in float64 (rounded to
    ``dtype``), the exponentials added class by class in float64, each divided by the sum
    (rounded to ``dtype``). Constants live in ``builder``, the outer graph."""
    two = "float64"
    e_wide = exp(block, shifts)
    e = e_wide if dtype == two else block.cast(STAGE, e_wide, dtype)
    e_sum = e if dtype == two else block.cast(STAGE, e, two)  # each float32 exp, widened exactly
    running = block.op(STAGE, "CumSum", [e_sum, builder.const(STAGE, "class_axis", 1, np.int64)])
    last = builder.const(STAGE, "last_class", [-1], np.int64)
    total = block.op(STAGE, "Gather", [running, last], axis=1)
    total = total if dtype == two else block.cast(STAGE, total, dtype)
    return block.op(STAGE, "Div", [e, total])


def library_softmax(
    builder: GraphBuilder,
    scores: str,
    dtype: str,
    *,
    top_two: str | None = None,
    near_ties: bool = True,
) -> str:
    """The softmax of XGBoost's and LightGBM's ``predict``, operation for operation.

    Both shift a row by its largest score, take ``exp``, add the exponentials
    class by class into a float64 sum (XGBoost's are float32, and it rounds
    the sum to float32) and divide each by the sum. Their labels are the first
    class of highest probability, and two close scores may round to one
    probability: ``Softmax`` (which may order or round its sums otherwise)
    would break those ties differently. ``exp`` is onnxruntime's, in float64
    (rounded to float32 for float32 scores); rows whose two largest scores lie
    within ``NEAR_TIE`` (where a tie between probabilities can ride on the
    last bit of an exponential or of their sum) are done again inside an
    ``If``, taken only when there are such rows, with `exp_correctly_rounded`,
    as the C library's ``exp`` rounds but for a few shifts.

    ``top_two``: the scores' ``TopK`` of 2, where the caller has it already.
    ``near_ties`` False leaves out the ``If``, for a caller that has sent every
    row within ``NEAR_TIE`` elsewhere (the fast encoding's softmax guard).
    """
    if top_two is None:
        top_two, _ = builder.op(
            STAGE, "TopK", [scores, builder.const(STAGE, "two", [2], np.int64)], axis=1, n_outputs=2
        )
    top = builder.op(
        STAGE, "Gather", [top_two, builder.const(STAGE, "first", [0], np.int64)], axis=1
    )
    shifted = builder.op(STAGE, "Sub", [scores, top])
    wide = shifted if dtype == "float64" else builder.cast(STAGE, shifted, "float64")
    probabilities = _softmax_of(
        builder, builder, wide, lambda block, x: block.op(STAGE, "Exp", [x]), dtype
    )
    if not near_ties:
        return probabilities
    # The top-two gap [N] by Gather and Sub, not a MatMul against [1, -1]: the same rounding,
    # and no matrix product, which OpenVINO may compute in bfloat16 (standard graphs have none).
    first, second = (
        builder.op(STAGE, "Gather", [top_two, builder.const(STAGE, label, i, np.int64)], axis=1)
        for label, i in (("first_column", 0), ("second_column", 1))
    )
    gap = builder.op(STAGE, "Sub", [first, second])
    return _redo_near_ties(builder, probabilities, wide, gap, dtype)


def _redo_near_ties(
    builder: GraphBuilder, probabilities: str, wide: str, gap: str, dtype: str
) -> str:
    """``probabilities``, with the rows whose top-two ``gap`` is within ``NEAR_TIE`` done
    again with `exp_correctly_rounded`, inside an ``If`` taken only when there are such."""
    limit = builder.const(STAGE, "near_tie", NEAR_TIE[dtype], dtype)
    any_near = builder.op(
        STAGE, "LessOrEqual", [builder.op(STAGE, "ReduceMin", [gap], keepdims=0), limit]
    )
    redo = builder.child()
    near = redo.op(STAGE, "LessOrEqual", [gap, limit])
    index = redo.op(STAGE, "Transpose", [redo.op(STAGE, "NonZero", [near])], perm=[1, 0])
    rows = redo.op(STAGE, "GatherND", [wide, index])
    again = _softmax_of(builder, redo, rows, exp_correctly_rounded, dtype)
    redone = redo.op(STAGE, "ScatterND", [probabilities, index, again])
    keep = builder.child()
    kept = keep.op(STAGE, "Identity", [probabilities])
    out = helper.make_tensor_value_info
    elem = onnx_type(dtype)
    return builder.op(
        STAGE,
        "If",
        [any_near],
        then_branch=helper.make_graph(redo.nodes, "near_ties", [], [out(redone, elem, None)]),
        else_branch=helper.make_graph(keep.nodes, "no_near_ties", [], [out(kept, elem, None)]),
    )


def class_index(
    builder: GraphBuilder,
    decided: str,
    ensemble: Ensemble,
    dtype: str,
    *,
    output: str | None = None,
) -> str:
    """``[N]`` int64 class indices from the tensor the library decides on.

    ``label_rule`` ``"above"``: 1 iff the one score column exceeds
    ``label_threshold`` (held in ``dtype``, as the scores are); otherwise the
    first column of the largest value (``ArgMax``, numpy's rule on ties).
    """
    outputs = None if output is None else [output]
    if ensemble.label_rule == "above":
        threshold = builder.const(STAGE, "label_threshold", ensemble.label_threshold, dtype)
        above = builder.op(STAGE, "Greater", [decided, threshold])  # [N, 1]
        flat = builder.op(STAGE, "Reshape", [above, builder.const(STAGE, "flat", [-1], np.int64)])
        # Where, not a Cast of the bools: tract gives a Cast to int64 its shape type
        one, zero = (
            builder.const(STAGE, name, v, np.int64) for name, v in (("one", 1), ("zero", 0))
        )
        return builder.op(STAGE, "Where", [flat, one, zero], outputs=outputs)
    return builder.op(STAGE, "ArgMax", [decided], axis=1, keepdims=0, outputs=outputs)


def _regressor_outputs(
    builder: GraphBuilder, scores: str, ensemble: Ensemble, elem: int
) -> list[helper.ValueInfoProto]:
    """A regressor's ``variable`` (through a logistic where the model has one)."""
    if ensemble.post_transform == "logistic":
        scores = builder.op(STAGE, "Sigmoid", [scores])
    builder.rename(scores, "variable")
    return [helper.make_tensor_value_info("variable", elem, ["N", ensemble.n_outputs])]


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
    or those and each row's class index, which the labels then read (guards
    of labels decided on the raw scores give it, by `class_index`). Without
    a guard the label is decided as the ensemble's ``label_rule`` says.
    """
    elem = onnx_type(dtype)
    classes = ensemble.classes
    if classes is None:  # a regressor (ensemble.is_classifier is False)
        return _regressor_outputs(builder, scores, ensemble, elem)
    n_classes = len(classes)
    if to_probabilities is None:
        to_probabilities = lambda block, s: link(block, s, ensemble, dtype)
    best = None  # the guard's own class index, where it gives one
    if refine is not None:
        refined = refine(builder, scores, to_probabilities)
        probabilities, best = refined if isinstance(refined, tuple) else (refined, None)
        decided = probabilities  # a guard returning probabilities alone: the label's rule is theirs
    else:
        probabilities = to_probabilities(builder, scores)
        decided = probabilities if ensemble.label_rule == "probabilities" else scores
    if decided == probabilities:
        decided = "probabilities"
    builder.rename(probabilities, "probabilities")
    labels, label_type = label_tensor(classes)
    # Labels 0 .. C-1 are the class index itself: no Gather (a node less per call).
    direct = label_type == TensorProto.INT64 and np.array_equal(labels, np.arange(n_classes))
    if best is None:
        best = class_index(builder, decided, ensemble, dtype, output="label" if direct else None)
    elif direct:
        builder.rename(best, "label")
    if not direct:
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
