"""The default encoding, ``fast``: exact routing and labels, values within a stated bound.

The exact encoding adds the trees' leaf values in tree order (one output
column per tree, ``CumSum``, row blocks in a ``Loop``), which gives the
Python model's values bit for bit but runs on one thread and costs a score
vector of one entry per tree. This encoding lets the tree operator add the
trees itself, as the peer's graph does (skl2onnx, onnxmltools):

* every tree feeds one output column (regressors, XGBoost, LightGBM and
  CatBoost boosters): one operator with one target per output column, each
  leaf adding its value to its class; the operator adds the trees in the
  order its threads take them;
* a leaf holds two class fractions (binary scikit-learn classifiers): one
  target per leaf, the class-1 fraction, and class 0 as ``1 - p1`` (one
  ``Gemm``), the fractions' rounding (`complement_defect`) added to
  the bound;
* a leaf holds a fraction per class (scikit-learn forests of more classes;
  the opset-5 operator gives a leaf one target only): the ai.onnx.ml
  opset-3 regressor with double thresholds and weights, every leaf adding
  its C fractions (`class_weight_regressor`). onnxruntime keeps its sums in
  double and rounds the averages once to float32, which the bound adds
  (`float32_rounding`) and the metadata states (``values_rounded_to``); the
  alternatives measured against it stay selectable (`ClassValues`);
* nothing to reorder: the exact graph.

`fast_layout` names these cases; `hyp2onnx.emit.strategy.choose_graph`
picks one for each model.

Forests divide by the tree count in the operator (its ``AVERAGE``). A model
comparing in float32 fed float64 Klein coordinates reads them directly
against float64 boundaries of its float32 thresholds
(`float32_boundaries`), without the ``Cast`` to
float32 and back.

Routing is the exact encoding's (the same operator attributes and
thresholds). A sum of ``n`` terms added in two orders differs by at most
``2 γ(n-1) Σ|v|``, ``γ(k) = k u / (1 - k u)``, ``u`` the unit roundoff of the
summation type (docs/math.md, "The summation contract"); `value_bound`
turns that into one bound on every raw score, written into the graph's
metadata (``hyp2onnx.value_bound``), from which `hyp2onnx.verification.default_tolerance`
follows.

A label can depend on the order only where the top two probabilities lie
within twice that bound (the link functions change distances by a factor of
at most 1, plus a few roundings: `tie_margin`). On every call the
graph takes the smallest gap of the batch (``TopK``, ``MatMul``,
``ReduceMin``; binary forests ``|p1 - 1/2|``) against the margin, and an
``If`` that only when some row is near a tie finds those rows, scores them
with the exact encoding's ordered per-tree sums (``NonZero``, ``GatherND``,
the exact operator in row blocks), writes their exact scores back with
``ScatterND`` and applies the link again: those rows get the exact graph's
probabilities and label, exact ties included (a tie has gap 0, and
``ArgMax`` then takes the first class as numpy does).

Where the library decides its label on the raw scores (the ensemble's
``label_rule``: binary boosters against a threshold, CatBoost's largest
score), the guard looks at those instead (`_score_guard`): the margin's
distance to the threshold against the bound, or the top two scores' gap
against twice the bound; the near rows' scores are rescored, and the link
and the label (`hyp2onnx.emit.outputs.class_index`) taken once, after the
``If``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

import numpy as np
from onnx import TensorProto, helper

from ..ir import Ensemble
from ._graph import GraphBuilder, onnx_type
from .outputs import NEAR_TIE, class_index, library_softmax
from .trees import (
    ExactScorer,
    TreePlan,
    by_row_blocks,
    cast_to,
    class_weight_classifier,
    class_weight_regressor,
    emit_exact,
    finish_scores,
    float32_boundaries,
    per_class_trees,
    tree_of_node,
    tree_operator,
)

STAGE = "trees"
GUARD_STAGE = "guard"
#: Unit roundoff of each summation type.
UNIT_ROUNDOFF = {"float32": 2.0**-24, "float64": 2.0**-53}
#: How the fast graph adds the trees: ``"by_column"`` one operator target per
#: output column (every tree feeds one column); ``"complement"`` the class-1
#: fractions of binary leaves, class 0 as ``1 - p1``; ``"class_values"`` every
#: leaf's class fractions (forests of more classes, plans with ``class_weights``,
#: as `ClassValues` says); ``"exact"`` the exact graph (nothing to reorder).
FastLayout = Literal["by_column", "complement", "class_values", "exact"]
#: Leaves holding a fraction per class (scikit-learn forests of more than two
#: classes), how the fast graph adds them: ``"average"`` (the default) one opset-3
#: regressor, every leaf adding its C fractions and the operator dividing
#: (`class_weight_regressor`); ``"classifier"`` the opset-3 classifier, then a
#: division; ``"per_class"`` C one-target regressors; ``"exact"`` the exact graph.
#: The others are kept to be measured side by side (benchmarks/bench_multiclass.py,
#: results in benchmarks/results/multiclass.md), chosen by
#: `hyp2onnx.emit.strategy.GraphOverrides`.
ClassValues = Literal["average", "classifier", "per_class", "exact"]
CLASS_VALUE_CHOICES: tuple[ClassValues, ...] = ("average", "classifier", "per_class", "exact")
#: Unit roundoff of float32, to which the opset-3 operator rounds its double sums.
FLOAT32_ROUNDOFF = 2.0**-24
#: Half the smallest float32 subnormal spacing: the rounding error below float32's normal range.
FLOAT32_SUBNORMAL_HALF_STEP = 2.0**-150


#: Bits of each summation type's significand: every integer up to ``2^p`` is a float of it.
SIGNIFICAND_BITS = {"float32": 24, "float64": 53}


def _gamma(k: np.ndarray, u: float) -> np.ndarray:
    return k * u / (1.0 - k * u)


#: Scans of an ensemble's leaf values, kept while the ensemble lives: one export asks
#: for them from several places (the layout, the bound, the guard, short batches), and
#: a large forest's scan takes a noticeable part of its export. Ensembles are frozen.
_SCANS: weakref.WeakKeyDictionary[Ensemble, dict[object, Any]] = weakref.WeakKeyDictionary()


def _scanned(ensemble: Ensemble, key: object, scan: Callable[[], Any]) -> Any:
    """``scan()`` for ``ensemble``, made once per ensemble and ``key``."""
    memo = _SCANS.setdefault(ensemble, {})
    if key not in memo:
        memo[key] = scan()
    return memo[key]


def _largest_per_tree(ensemble: Ensemble) -> np.ndarray:
    """``[n_trees, n_outputs]`` (read-only): each tree's largest ``|leaf value|`` in each
    output column."""

    def scan() -> np.ndarray:
        leaf = ensemble.feature < 0
        largest = np.zeros((ensemble.n_trees, ensemble.n_outputs))
        values = np.abs(ensemble.value[leaf].astype(np.float64))
        np.maximum.at(largest, tree_of_node(ensemble)[leaf], values)
        largest.setflags(write=False)
        return largest

    result: np.ndarray = _scanned(ensemble, "largest", scan)
    return result


def exact_sum_unit(ensemble: Ensemble, *, held_in: str | None = None) -> float | None:
    """The power of two ``2^-e`` of which every leaf and base value is a multiple, where
    that makes every sum of one leaf per tree exact in ``ensemble.sum_dtype`` whatever
    its order; None where it does not.

    With every value a multiple of ``2^-e`` and each column's ``Σ_t max |v|`` (plus
    its base value) at most ``2^p · 2^-e`` (``p``: `SIGNIFICAND_BITS`), every partial
    sum, in any order or grouping, is a multiple of ``2^-e`` no larger: a float of the
    type. Every addition is then exact, and every order gives the exact sum, which the
    Python model's tree-order sum is too (docs/math.md, "Sums that no order changes").
    Forests grown to pure leaves (class fractions 0 and 1) are the case met in practice.
    ``held_in``: a narrower type every sum must also be a float of (``"float32"``, which
    the opset-3 operator writes its double sums in).
    """
    held = held_in or ensemble.sum_dtype
    unit: float | None = _scanned(ensemble, "unit", lambda: _lowest_bit(ensemble))
    if unit is None or unit < float(np.finfo(held).smallest_subnormal):
        return None
    limit = 2 ** SIGNIFICAND_BITS[held]
    base = np.broadcast_to(np.ravel(ensemble.base_values), (ensemble.n_outputs,))
    # each term in units: an integer, exact (a power of two's scaling) up to the limit
    units = np.vstack([_largest_per_tree(ensemble), np.abs(base)]) / unit
    if not units.max(initial=0.0) <= limit:
        return None
    # the totals in Python integers: a float sum could round 2^p + 1 down to 2^p
    totals = [sum(map(int, column)) for column in units.T]
    return unit if max(totals, default=0) <= limit else None


def _lowest_bit(ensemble: Ensemble) -> float | None:
    """The largest power of two dividing every leaf and base value, or None where some
    value is not finite or not a float of the summation type."""
    leaf = ensemble.feature < 0
    values = np.concatenate(
        [ensemble.value[leaf].astype(np.float64).ravel(), np.ravel(ensemble.base_values)]
    ).astype(np.float64)
    if not np.all(np.isfinite(values)):
        return None
    if np.any(values.astype(ensemble.sum_dtype).astype(np.float64) != values):
        return None  # not the summation type's floats: the operator's weights would round
    nonzero = values[values != 0.0]
    if nonzero.size == 0:
        return 1.0
    mantissa, exponent = np.frexp(np.abs(nonzero))
    significand = np.ldexp(mantissa, 53).astype(np.int64)  # an integer below 2^53, exactly
    lowest_bit = np.log2((significand & -significand).astype(np.float64)).astype(np.int64)
    return float(np.ldexp(1.0, int((exponent - 53 + lowest_bit).min())))


def counts_class_values(ensemble: Ensemble, class_values: ClassValues = "average") -> bool:
    """Whether a forest's per-class leaf fractions are added as counts: the opset-3
    operator's sums (``SUM``, no ``AVERAGE``), then a ``Div`` by the tree count in double.

    Where every class total is a float of float32 (`exact_sum_unit` held in float32),
    the operator's double sums are exact in any order and its float32 output holds
    them exactly, so the ``Div`` gives the model's probabilities bit for bit (the
    model divides its totals by the tree count too), ties and all. Only for the default
    way of adding class values (``"average"``; the others are kept to be measured).
    """
    return (
        class_values == "average"
        and ensemble.aggregate == "mean"
        and not np.any(ensemble.base_values != 0)
        and exact_sum_unit(ensemble, held_in="float32") is not None
    )


def labels_need_guard(
    ensemble: Ensemble, layout: FastLayout, class_values: ClassValues = "average"
) -> bool:
    """Whether some label of the fast graph with this ``layout`` may depend on the order
    of the runtime's sums, so that the near-tie guard must look at every batch.

    Not where every sum is exact in any order (`exact_sum_unit`) for forests'
    averaged class fractions:

    * ``"complement"`` leaves whose two fractions add up to exactly 1: the class-1
      sum ``S1`` is the model's, and `_counted_complement_link` gives
      ``[T - S1, S1] / T``, the model's probabilities bit for bit;
    * ``"class_values"`` added as counts (`counts_class_values`): the model's
      probabilities bit for bit;
    * ``"class_values"`` otherwise: every class total is the model's; two unequal
      ones differ by at least the unit over the tree count, which, where it exceeds
      twice the tie margin, survives every rounding the graph makes; equal ones
      go through the same operations and stay equal, a tie ``ArgMax`` gives
      to the first class, as numpy's ``argmax`` does.
    """
    if ensemble.classes is None or len(ensemble.classes) < 2:
        return False
    if (
        layout not in ("complement", "class_values")
        or ensemble.label_rule != "probabilities"
        or ensemble.post_transform != "identity"
        or np.any(ensemble.base_values != 0)
    ):
        return True
    unit = exact_sum_unit(ensemble)
    if unit is None:
        return True
    if layout == "complement":
        return ensemble.aggregate != "mean" or complement_defect(ensemble) != 0.0
    if counts_class_values(ensemble, class_values):
        return False
    bound = value_bound(ensemble)
    bound += float32_rounding(ensemble, bound)
    divisor = ensemble.n_trees if ensemble.aggregate == "mean" else 1
    return unit / divisor <= 2.0 * tie_margin(ensemble, bound)


def value_bound(ensemble: Ensemble) -> float:
    """Largest difference between any raw score of this encoding and the exact one's.

    Per output column ``c``: ``n_c`` trees with a non-zero leaf value there
    (adding an exact zero rounds nothing), ``S_c`` the sum over those trees of
    their largest ``|leaf value|``. Any two orders of the sum differ by at
    most ``2 γ(n_c - 1) S_c``; the division by the tree count (forests) and
    the base value's addition round monotonically, adding at most an ulp each
    (``8 u`` covers them). 0 when no column adds two non-zero terms: then
    both graphs make the same additions. Sums that no order changes
    (`exact_sum_unit`) keep the roundings after them alone.
    """
    u = UNIT_ROUNDOFF[ensemble.sum_dtype]
    largest = _largest_per_tree(ensemble)
    terms = np.count_nonzero(largest, axis=0)
    if terms.max(initial=0) <= 1:
        return 0.0
    # sums that no order changes (exact_sum_unit): the roundings after them alone
    reordered = 0 if exact_sum_unit(ensemble) is not None else np.maximum(terms - 1, 0)
    total = largest.sum(axis=0)
    divisor = ensemble.n_trees if ensemble.aggregate == "mean" else 1
    scale = total / divisor + np.abs(ensemble.base_values.astype(np.float64))
    bound = (2.0 * _gamma(np.asarray(reordered), u) + 8.0 * u) * scale
    defect = complement_defect(ensemble)
    if defect is not None:
        # Class 0 as 1 - p1 (binary class fractions): its exact sum adds the p0
        # fractions, equal to T - sum(p1) but for the defect D. Both sums'
        # reorderings, D, and the roundings of the division, the Sub and the
        # exact graph's division: within (2 γ(T-1) + 8u)(S0 + S1) / T + 2 D / T
        # (S0 + S1 >= T - D, so this covers the 1 as well).
        n = np.float64(np.max(reordered))
        both = (2.0 * n * u / (1.0 - n * u) + 8.0 * u) * total.sum() / divisor
        bound = np.append(bound, both + 2.0 * defect / divisor)
    return float(bound.max())


def float32_rounding(ensemble: Ensemble, bound: float) -> float:
    """Largest change the opset-3 operator's final rounding to float32 makes to a score.

    Its double result lies within ``bound`` of the exact score, whose size is at
    most ``Σ_t max |leaf value| / T`` per column (forests; plus the base value):
    rounding to nearest float32 moves it by at most ``2^-24`` of its size, or by
    half a subnormal step below float32's normal range.
    """
    divisor = ensemble.n_trees if ensemble.aggregate == "mean" else 1
    scale = _largest_per_tree(ensemble).sum(axis=0) / divisor + np.abs(
        ensemble.base_values.astype(np.float64)
    )
    size = float(scale.max(initial=0.0)) + bound
    # (1 + 2^-40): the products above are rounded up by far less than that
    return (FLOAT32_ROUNDOFF * size + FLOAT32_SUBNORMAL_HALF_STEP) * (1.0 + 2.0**-40)


def tie_margin(ensemble: Ensemble, bound: float) -> float:
    """Rows whose top two probabilities differ by at most this are scored exactly.

    Each probability of this graph lies within ``bound`` (times the link's
    Lipschitz constant, at most 1 for the identity, sigmoid and softmax) of
    the exact graph's, plus the link's own roundings on different inputs
    (``64 u`` covers them); a gap larger than twice that keeps the same
    strict order, hence the same label.
    """
    u = UNIT_ROUNDOFF[ensemble.sum_dtype]
    rounding = 0.0 if ensemble.post_transform == "identity" else 64.0 * u
    return 2.0 * (bound + rounding)


#: ``link(builder, scores) -> probabilities``
Link = Callable[[GraphBuilder, str], str]
#: ``refine(builder, scores, link) -> probabilities``, or ``(probabilities, best)``
#: where the guard also gives each row's best class index (int64 [N], numpy's argmax rule)
Refine = Callable[[GraphBuilder, str, Link], str | tuple[str, str]]


@dataclass(frozen=True, kw_only=True)
class Guarded:
    """What `emit_fast` returns: raw scores, their bound, and the label guard."""

    scores: str
    bound: float  #: `value_bound`
    margin: float  #: `tie_margin`
    refine: Refine | None  #: None: no labels depend on the order (or the guard is off)
    #: replaces the link function (binary forests: ``scores`` is p1 alone)
    to_probabilities: Link | None = None
    #: the scores are double sums rounded once to this type (within ``bound``), or None
    rounded_to: str | None = None


def complement_defect(ensemble: Ensemble) -> float | None:
    """``Σ_t max |p0 + p1 - 1|`` over each tree's leaves, for binary leaves holding class
    fractions; None where the fast graph cannot derive class 0 from class 1.

    A binary scikit-learn classifier's leaf holds two fractions that add up to
    1 but for their roundings. The fast graph adds the class-1 fractions
    alone, with one target per leaf as the peer does, and gives class 0 as
    ``1 - p1``; the defect, computed exactly here (``TwoSum``), enters the
    value bound (`value_bound`).
    """
    if (
        ensemble.classes is None
        or len(ensemble.classes) != 2
        or ensemble.n_outputs != 2
        or ensemble.post_transform != "identity"
        or np.any(ensemble.base_values != 0)
        or ensemble.sum_dtype != "float64"
    ):
        return None
    leaf = ensemble.feature < 0
    p0, p1 = (ensemble.value[leaf, c].astype(np.float64) for c in (0, 1))
    total = p0 + p1
    back = total - p0
    rounding = (p0 - (total - back)) + (p1 - back)  # TwoSum: p0 + p1 = total + rounding
    if np.any(total < 0.5) or np.any(total > 2.0):
        return None  # not fractions; (total - 1) below is exact only in [0.5, 2]
    defect = np.abs((total - 1.0) + rounding) * (1.0 + 4.0 * UNIT_ROUNDOFF["float64"])
    per_tree = np.zeros(ensemble.n_trees)
    np.maximum.at(per_tree, tree_of_node(ensemble)[leaf], defect)
    largest = float(per_tree.sum())
    if largest > 4.0 * ensemble.n_trees * UNIT_ROUNDOFF["float64"]:
        return None
    return largest


def fast_layout(
    ensemble: Ensemble, plan: TreePlan, class_values: ClassValues = "average"
) -> FastLayout:
    """How the fast graph adds the trees of ``ensemble`` (see `FastLayout`; ``class_values``:
    `ClassValues`)."""
    if plan.carries == "values" and per_class_trees(ensemble) is not None:
        layout: FastLayout = "by_column"
    elif complement_defect(ensemble) is not None:
        layout = "complement"
    elif plan.class_weights and class_values != "exact":
        layout = "class_values"
    else:
        return "exact"
    return layout if value_bound(ensemble) > 0.0 else "exact"


def emit_fast(
    builder: GraphBuilder,
    k: str,
    k_dtype: str,
    ensemble: Ensemble,
    plan: TreePlan,
    *,
    layout: FastLayout,
    guard: bool = True,
    short_rows: int = 0,
    class_values: ClassValues = "average",
    features: Callable[[GraphBuilder, str], str] | None = None,
) -> Guarded | ShortBatches:
    """Raw scores ``[N, n_outputs]`` in ``ensemble.sum_dtype`` summed in the runtime's order.

    ``layout`` is `fast_layout`'s. ``guard`` False leaves out the
    near-tie guard, whose labels may then differ from the model's (tests
    show such an input); the export always keeps it. ``short_rows`` > 0:
    batches of up to that many rows take the exact scores instead
    (`ShortBatches`). ``class_values``: how leaves holding a fraction per class
    are added (`ClassValues`). ``features``: as for `emit_exact` (a map of row
    blocks to the float64 columns the ensemble reads).
    """
    if layout == "exact":
        exact_scores = emit_exact(builder, k, k_dtype, ensemble, plan, features=features)
        return Guarded(scores=exact_scores, bound=0.0, margin=0.0, refine=None)
    exact = ExactScorer.build(builder, ensemble, plan)
    fast = partial(
        _guarded,
        k=k,
        k_dtype=k_dtype,
        exact=exact,
        layout=layout,
        guard=guard,
        class_values=class_values,
        features=features,
    )
    if short_rows <= 0:
        return fast(builder)

    def short_scores(branch: GraphBuilder) -> str:
        rows = k if features is None else features(branch, k)
        wide = k_dtype if features is None else "float64"
        raw = exact.scores_of(branch, exact.operator_input(branch, rows, wide))
        return finish_scores(branch, raw, ensemble, ensemble.sum_dtype)

    return ShortBatches(rows=short_rows, k=k, short=short_scores, long=fast)


@dataclass(frozen=True, kw_only=True)
class ShortBatches:
    """What `emit_fast` returns when short batches take the exact path.

    A batch of at most ``rows`` rows gets the exact encoding's scores (sums in
    tree order, the Python model's bit for bit: no guard, bound 0), a longer
    one the fast scores and their guard; the outputs put the two behind an
    ``If`` on the batch size (``hyp2onnx.export``), whose branches each build
    one of them. A single row's guard (``TopK``, ``MatMul``, ``ReduceMin``,
    ``If``) costs more than the ordered sums of its one row; a long batch's
    guard costs little beside the sums it saves (benchmarks/bench_short_batches.py,
    results in benchmarks/results/short_batches.md).
    """

    rows: int  #: the crossover: batches of up to this many rows take the exact scores
    k: str  #: the Klein coordinates, whose row count decides
    short: Callable[[GraphBuilder], str]  #: the exact scores, built in a branch
    long: Callable[[GraphBuilder], Guarded]  #: the fast scores and guard, built in a branch


def _guarded(
    builder: GraphBuilder,
    *,
    k: str,
    k_dtype: str,
    exact: ExactScorer,
    layout: FastLayout,
    guard: bool,
    class_values: ClassValues,
    features: Callable[[GraphBuilder, str], str] | None,
) -> Guarded:
    """The fast scores of every row, their bound and the label guard (see `emit_fast`)."""
    ensemble = exact.ensemble
    if features is not None:  # the whole batch's columns, for the operator below
        k = by_row_blocks(builder, k, features, ensemble.n_features, "float64")
        k_dtype = "float64"
    bound = value_bound(ensemble)
    # binary class fractions summed exactly: class 1's sum, then [T - S1, S1] / T
    counted = layout == "complement" and not labels_need_guard(ensemble, layout)
    rounded_to = None
    if layout == "class_values":  # the opset-3 operator's double sums, rounded to float32
        scores = _class_value_scores(builder, k, k_dtype, ensemble, class_values)
        if not counts_class_values(ensemble, class_values):  # counts: written exactly
            bound += float32_rounding(ensemble, bound)
            rounded_to = "float32"
    else:
        scores = _reordered_sums(builder, k, k_dtype, exact, layout=layout, counted=counted)
    margin = tie_margin(ensemble, bound)
    complement = layout == "complement"
    # "average": the operator's float32 output is the scores, widened in the link
    # (inside the guard's branches, where the labels are taken too)
    widened = rounded_to is not None and class_values == "average"
    to_probabilities = None
    if counted:
        to_probabilities = _counted_complement_link(ensemble)
    elif complement:
        to_probabilities = _complement_link(ensemble.sum_dtype)
    elif widened:
        to_probabilities = _widening_link(ensemble.sum_dtype)
    refine: Refine | None = None
    if guard and labels_need_guard(ensemble, layout, class_values):
        inputs = _GuardInputs(k=k, k_dtype=k_dtype, exact=exact, margin=margin)
        if ensemble.label_rule != "probabilities":  # the label is decided on the scores
            refine = partial(_score_guard, inputs=inputs, bound=bound)
        elif ensemble.post_transform == "softmax" and not (complement or widened):
            refine = partial(_softmax_guard, inputs=inputs, bound=bound)
        else:
            chosen = _binary_guard if complement else _rounded_guard if widened else _guard
            refine = partial(chosen, inputs=inputs)
    return Guarded(
        scores=scores,
        bound=bound,
        margin=margin,
        refine=refine,
        to_probabilities=to_probabilities,
        rounded_to=rounded_to,
    )


def _class_value_scores(
    builder: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble, class_values: ClassValues
) -> str:
    """Scores ``[N, C]`` of leaves holding a value per class, by ``class_values``
    (all but ``"exact"``): float32 for ``"average"``, else float64 holding float32
    values; counts (`counts_class_values`) divided in float64."""
    rows, boundaries = _double_input(builder, k, k_dtype, ensemble)
    classes = np.arange(ensemble.n_outputs)
    dtype = ensemble.sum_dtype
    averaged = ensemble.aggregate == "mean"  # the operator's AVERAGE divided
    if counts_class_values(ensemble, class_values):
        counts = class_weight_regressor(
            builder, rows, ensemble, boundaries=boundaries, classes=classes, average=False
        )
        return finish_scores(builder, builder.cast(STAGE, counts, dtype), ensemble, dtype)
    if class_values == "average":  # float32: widened by _widening_link (no base values)
        return class_weight_regressor(
            builder, rows, ensemble, boundaries=boundaries, classes=classes
        )
    if class_values == "per_class":
        columns = [
            class_weight_regressor(
                builder, rows, ensemble, boundaries=boundaries, classes=classes[c : c + 1]
            )
            for c in classes
        ]
        raw = builder.op(STAGE, "Concat", columns, axis=1)
        widened = builder.cast(STAGE, raw, dtype)
        return finish_scores(builder, widened, ensemble, dtype, averaged=averaged)
    if class_values == "classifier":
        raw = class_weight_classifier(builder, rows, ensemble, boundaries=boundaries)
        return finish_scores(builder, builder.cast(STAGE, raw, dtype), ensemble, dtype)
    raise ValueError(f"class_values must be one of {CLASS_VALUE_CHOICES}, got {class_values!r}")


def _reordered_sums(
    builder: GraphBuilder,
    k: str,
    k_dtype: str,
    exact: ExactScorer,
    *,
    layout: FastLayout,
    counted: bool = False,
) -> str:
    """The tree operator adding the trees itself: one target per output column
    (``"by_column"``) or the class-1 fractions alone (``"complement"``; with
    ``counted``, their sum undivided, for `_counted_complement_link`)."""
    ensemble, plan = exact.ensemble, exact.plan
    # The operator divides by the tree count itself (its AVERAGE): one node less.
    average = ensemble.aggregate == "mean" and ensemble.n_trees > 1 and not counted
    leaf_nodes = np.flatnonzero(ensemble.feature < 0)
    tree = tree_of_node(ensemble)[leaf_nodes]
    if layout == "by_column":
        target = (
            np.zeros(ensemble.n_trees, dtype=np.int64)
            if ensemble.tree_target is None
            else ensemble.tree_target
        )
        targets = {
            "leaf_nodes": leaf_nodes,
            "target_ids": np.asarray(target, dtype=np.int64)[tree],
            "weights": ensemble.value[leaf_nodes].sum(axis=1),  # the one non-zero column
            "n_targets": ensemble.n_outputs,
        }
    else:  # class 1 only; class 0 is 1 - p1 (complement_defect)
        targets = {
            "leaf_nodes": leaf_nodes,
            "target_ids": np.zeros(leaf_nodes.size, dtype=np.int64),
            "weights": ensemble.value[leaf_nodes, 1],
            "n_targets": 1,
        }
    if plan.operator == "legacy":  # only ever with by_column (plan_trees)
        rows, boundaries = exact.operator_input(builder, k, k_dtype), False
    else:
        rows, boundaries = _double_input(builder, k, k_dtype, ensemble)
    operator: Literal["legacy", "v5"] = "legacy" if plan.operator == "legacy" else "v5"
    raw = tree_operator(
        builder,
        rows,
        ensemble,
        operator=operator,
        average=average,
        boundaries=boundaries,
        **targets,
    )
    raw = cast_to(builder, raw, exact.out_dtype, ensemble.sum_dtype)
    if counted:
        return raw
    return finish_scores(builder, raw, ensemble, ensemble.sum_dtype, averaged=average)


@dataclass(frozen=True, kw_only=True)
class _GuardInputs:
    """What the guard needs to rescore rows exactly: the Klein coordinates the
    operator reads, the exact encoding's scorer, and the tie margin."""

    k: str
    k_dtype: str
    exact: ExactScorer
    margin: float

    @property
    def ensemble(self) -> Ensemble:
        return self.exact.ensemble


def _complement_link(dtype: str) -> Link:
    """``p1 [N, 1] -> [1 - p1, p1]`` in one ``Gemm`` (``p1 · [-1, 1] + [1, 0]``: the
    products are exact, so each entry is rounded once, as ``1 - p1`` and ``p1``)."""

    def to_probabilities(builder: GraphBuilder, p1: str) -> str:
        signs = builder.const(STAGE, "minus_plus", np.array([[-1.0, 1.0]]), dtype)
        offset = builder.const(STAGE, "one_zero", np.array([1.0, 0.0]), dtype)
        return builder.op(STAGE, "Gemm", [p1, signs, offset])

    return to_probabilities


def _counted_complement_link(ensemble: Ensemble) -> Link:
    """Class 1's exact sum ``S1 [N, 1] -> [T - S1, S1] / T`` (``Gemm``, ``Div``), where
    every sum is exact and each leaf's two fractions add up to 1 (`labels_need_guard`).

    ``T - S1`` is then class 0's sum, exactly, and each column is divided by the
    tree count as the model divides its sums: the model's probabilities bit for
    bit, and a tie (``S1 = T / 2``) an exact one. ``1 - S1 / T`` rounds apart
    from ``S0 / T``, and a runtime averaging by a product with ``1 / T`` could
    break such a tie.
    """
    dtype = ensemble.sum_dtype

    def to_probabilities(builder: GraphBuilder, class_one: str) -> str:
        signs = builder.const(STAGE, "minus_plus", np.array([[-1.0, 1.0]]), dtype)
        offset = builder.const(STAGE, "trees_zero", np.array([ensemble.n_trees, 0.0]), dtype)
        sums = builder.op(STAGE, "Gemm", [class_one, signs, offset])
        trees = builder.const(STAGE, "n_trees", ensemble.n_trees, dtype)
        return builder.op(STAGE, "Div", [sums, trees])

    return to_probabilities


def _widening_link(dtype: str) -> Link:
    """The float32 scores of the opset-3 operator as ``dtype`` probabilities (identity
    link, no base values: scikit-learn forests)."""

    def to_probabilities(builder: GraphBuilder, scores: str) -> str:
        return builder.cast(STAGE, scores, dtype)

    return to_probabilities


def _double_input(
    builder: GraphBuilder, k: str, k_dtype: str, ensemble: Ensemble
) -> tuple[str, bool]:
    """The opset-5 operator's float64 input, and whether its thresholds are float32 boundaries.

    A model comparing in float32 fed float64 Klein coordinates reads them as
    they are, against `float32_boundaries` (no
    ``Cast`` to float32 and back); otherwise as the exact encoding does.
    """
    if (
        k_dtype == "float64"
        and ensemble.compare_dtype == "float32"
        and ensemble.categories is None
        and np.all(
            np.isfinite(float32_boundaries(ensemble.threshold[ensemble.feature >= 0], ensemble.op))
        )
    ):
        return k, True
    compare = ensemble.compare_dtype
    return cast_to(builder, cast_to(builder, k, k_dtype, compare), compare, "float64"), False


def _guard(builder: GraphBuilder, scores: str, link: Link, *, inputs: _GuardInputs) -> str:
    """``probabilities`` with the rows near a tie recomputed from exact scores.

    On every call: the top two probabilities of each row (``TopK``), their
    difference (``MatMul``), its smallest value over the batch (``ReduceMin``,
    +inf for an empty batch) against the margin, and an ``If``. Only the
    branch taken when some row is near a tie finds those rows and rescores them.
    """
    dtype = inputs.ensemble.sum_dtype
    probabilities = link(builder, scores)
    gap = _top_two_gap(builder, probabilities, dtype)
    tie_margin = builder.const(GUARD_STAGE, "tie_margin", inputs.margin, dtype)
    any_near, redo, near = _near_rows(builder, gap, tie_margin)
    redone = link(redo, _rescore(redo, near, scores, inputs))
    keep = builder.child()
    kept = keep.op(GUARD_STAGE, "Identity", [probabilities])
    return _branch(
        builder, any_near, near_ties=(redo, redone), no_near_ties=(keep, kept), dtype=dtype
    )


def _rounded_up(value: float, dtype: str) -> np.ndarray:
    """``value`` in ``dtype``, rounded toward +inf (a limit no smaller than ``value``)."""
    held = np.asarray(value, dtype=dtype)
    if float(held) < value:
        held = np.nextafter(held, np.asarray(np.inf, dtype=dtype))
    return held


def _score_guard(
    builder: GraphBuilder, scores: str, link: Link, *, inputs: _GuardInputs, bound: float
) -> tuple[str, str]:
    """``(probabilities, class index)`` from the scores with the rows whose label may
    depend on the order recomputed exactly, for labels decided on the raw scores
    (``label_rule`` ``"above"`` or ``"scores"``).

    Each score lies within ``bound`` of the exact one. ``"above"``: the label can
    differ only where ``|s - threshold| <= bound``; ``"scores"``: only where the
    top two scores lie within ``2 bound`` (a larger gap keeps the same strict
    order). Both distances are one rounding of the exact one, and rounding is
    monotone, so comparing them with the limit rounded up misses no row. On
    every call: the distances, their smallest value (``ReduceMin``) and an
    ``If`` that rescores the near rows only when there are some; then the link
    and the label, once, on the scores the label is decided on.
    """
    ensemble = inputs.ensemble
    dtype = ensemble.sum_dtype
    if ensemble.label_rule == "above":
        threshold = builder.const(GUARD_STAGE, "label_threshold", ensemble.label_threshold, dtype)
        offset = builder.op(
            GUARD_STAGE, "Abs", [builder.op(GUARD_STAGE, "Sub", [scores, threshold])]
        )
        flat = builder.const(GUARD_STAGE, "flat", [-1], np.int64)
        distance = builder.op(GUARD_STAGE, "Reshape", [offset, flat])
        limit = _rounded_up(bound, dtype)
    else:
        distance = _top_two_gap(builder, scores, dtype)
        limit = _rounded_up(2.0 * bound, dtype)
    near_limit = builder.const(GUARD_STAGE, "score_margin", limit, dtype)
    least = builder.op(GUARD_STAGE, "ReduceMin", [distance], keepdims=0)
    any_near = builder.op(GUARD_STAGE, "LessOrEqual", [least, near_limit])

    redo = builder.child()
    near = redo.op(GUARD_STAGE, "LessOrEqual", [distance, near_limit])
    redone = _rescore(redo, near, scores, inputs)
    keep = builder.child()
    kept = keep.op(GUARD_STAGE, "Identity", [scores])
    decided = _branch(
        builder, any_near, near_ties=(redo, redone), no_near_ties=(keep, kept), dtype=dtype
    )
    return link(builder, decided), class_index(builder, decided, ensemble, dtype)


def _softmax_guard(
    builder: GraphBuilder, scores: str, link: Link, *, inputs: _GuardInputs, bound: float
) -> tuple[str, str]:
    """``(probabilities, class index)`` of softmax boosters (XGBoost's and LightGBM's
    multi-class models), one check serving both the order of the sums and the
    library's softmax (`hyp2onnx.emit.outputs.library_softmax`).

    Each fast score lies within ``bound`` of the exact one. Where the top two fast
    scores lie more than ``2 bound + NEAR_TIE`` apart, the exact scores keep the same
    first class, more than ``NEAR_TIE`` ahead: its probability is then the strictly
    largest whatever the order of the sums and the last bits of the ``exp``, in the
    library's softmax and in this one. So one ``TopK`` (which the softmax's shift
    reads too), the gap, its smallest value and one ``If``: the rows within that
    limit (rounded up; the gap is one rounding of the exact one, and rounding is
    monotone) are rescored exactly and given the library's softmax, near-tie
    ``exp`` included; otherwise the softmax runs without its own near-tie ``If``.
    The guard of `_guard` (on the probabilities) and the softmax's (on the scores)
    would each cost a ``TopK``, a ``ReduceMin`` and an ``If`` per call.
    """
    dtype = inputs.ensemble.sum_dtype
    two = builder.const(GUARD_STAGE, "two", [2], np.int64)
    top_two, _ = builder.op(GUARD_STAGE, "TopK", [scores, two], axis=1, n_outputs=2)
    first_minus_second = builder.const(GUARD_STAGE, "first_minus_second", [1, -1], dtype)
    gap = builder.op(GUARD_STAGE, "MatMul", [top_two, first_minus_second])
    limit = _rounded_up(2.0 * bound + NEAR_TIE[dtype], dtype)
    near_limit = builder.const(GUARD_STAGE, "softmax_margin", limit, dtype)
    any_near, redo, near = _near_rows(builder, gap, near_limit)
    redone = link(redo, _rescore(redo, near, scores, inputs))
    keep = builder.child()
    kept = library_softmax(keep, scores, dtype, top_two=top_two, near_ties=False)
    return _two_output_branch(builder, any_near, (redo, redone), (keep, kept, kept), dtype)


def _near_rows(builder: GraphBuilder, gap: str, limit: str) -> tuple[str, GraphBuilder, str]:
    """Whether any row's ``gap`` is within ``limit`` (the guard's ``If`` condition), the
    builder of the branch that rescores, and in it which rows are near."""
    least = builder.op(GUARD_STAGE, "ReduceMin", [gap], keepdims=0)
    any_near = builder.op(GUARD_STAGE, "LessOrEqual", [least, limit])
    redo = builder.child()
    return any_near, redo, redo.op(GUARD_STAGE, "LessOrEqual", [gap, limit])


def _two_output_branch(
    builder: GraphBuilder,
    near: str,
    near_ties: tuple[GraphBuilder, str],
    no_near_ties: tuple[GraphBuilder, str, str],
    dtype: str,
) -> tuple[str, str]:
    """``If(near)`` of two outputs, ``(probabilities, class index)``: the rescored
    branch's builder and probabilities, else the kept branch's builder, probabilities
    and the scores its class index is taken from (each branch's ``ArgMax`` made here)."""
    redo, redone = near_ties
    keep, kept, kept_scores = no_near_ties
    redone_best = redo.op(GUARD_STAGE, "ArgMax", [redone], axis=1, keepdims=0)
    kept_best = keep.op(GUARD_STAGE, "ArgMax", [kept_scores], axis=1, keepdims=0)
    out_info = helper.make_tensor_value_info
    elem = onnx_type(dtype)
    branches = {
        name: helper.make_graph(
            branch.nodes,
            name,
            [],
            [out_info(p, elem, None), out_info(best, TensorProto.INT64, None)],
        )
        for name, (branch, p, best) in (
            ("near_ties", (redo, redone, redone_best)),
            ("no_near_ties", (keep, kept, kept_best)),
        )
    }
    probabilities, best = builder.op(
        GUARD_STAGE,
        "If",
        [near],
        n_outputs=2,
        then_branch=branches["near_ties"],
        else_branch=branches["no_near_ties"],
    )
    return probabilities, best


def _binary_guard(builder: GraphBuilder, p1: str, link: Link, *, inputs: _GuardInputs) -> str:
    """The guard of binary forests, whose scores are ``p1 [N, 1]`` and probabilities
    ``[1 - p1, p1]``: the link runs inside the ``If``, where it is needed anyway.

    On every call: ``|p1 - 1/2|`` (``Sub``, exact wherever it is below 1/4 by
    Sterbenz's lemma, and ``Abs``), its smallest value, and the ``If``. A row
    whose probabilities lie within ``margin`` has ``|1 - 2 p1| <= margin + u``
    (``1 - p1`` rounds once), so ``|p1 - 1/2| <= margin / 2 + u``: the branch
    that rescores is taken whenever a row needs it, and rescores exactly the
    rows of the general guard (top two within ``margin``).
    """
    dtype, margin = inputs.ensemble.sum_dtype, inputs.margin
    near_half = margin / 2.0 + UNIT_ROUNDOFF[dtype]
    if near_half >= 0.25:  # not the case for any bound of this module; kept general
        return _guard(builder, p1, link, inputs=inputs)
    half = builder.const(GUARD_STAGE, "half", 0.5, dtype)
    distance = builder.op(GUARD_STAGE, "Abs", [builder.op(GUARD_STAGE, "Sub", [p1, half])])
    least = builder.op(GUARD_STAGE, "ReduceMin", [distance], keepdims=0)
    limit = builder.const(GUARD_STAGE, "near_half", near_half, dtype)
    any_near = builder.op(GUARD_STAGE, "LessOrEqual", [least, limit])

    redo = builder.child()
    probabilities = link(redo, p1)
    gap = _top_two_gap(redo, probabilities, dtype)
    near = redo.op(
        GUARD_STAGE, "LessOrEqual", [gap, builder.const(GUARD_STAGE, "tie_margin", margin, dtype)]
    )
    # identity link: the exact scores are the probabilities
    redone = _rescore(redo, near, probabilities, inputs)
    keep = builder.child()
    kept = link(keep, p1)
    return _branch(
        builder, any_near, near_ties=(redo, redone), no_near_ties=(keep, kept), dtype=dtype
    )


def _rounded_guard(
    builder: GraphBuilder, raw: str, link: Link, *, inputs: _GuardInputs
) -> tuple[str, str]:
    """The guard of the opset-3 operator's float32 scores ``raw``: ``(probabilities,
    best class)``, both from inside the ``If``, so that a call without near-ties runs
    only the widening ``Cast`` and ``ArgMax`` there (the general guard's ``Identity``
    and the ``Cast`` and ``ArgMax`` after it are not needed).

    The gap is taken in float32 (``TopK``, ``MatMul``: the difference of two float32
    values rounded once) against the margin rounded up to float32: a gap above that is
    above the margin, and rounding is monotone, so every row within the margin is
    rescored. ``ArgMax`` of the float32 scores is that of their exact widening.
    """
    dtype, margin = inputs.ensemble.sum_dtype, inputs.margin
    gap = _top_two_gap(builder, raw, "float32")
    limit = np.float32(margin)
    if float(limit) < margin:
        limit = np.nextafter(limit, np.float32(np.inf))
    tie_margin = builder.const(GUARD_STAGE, "tie_margin", limit, np.float32)
    any_near, redo, near = _near_rows(builder, gap, tie_margin)
    redone = _rescore(redo, near, link(redo, raw), inputs)
    keep = builder.child()
    kept = link(keep, raw)
    return _two_output_branch(builder, any_near, (redo, redone), (keep, kept, raw), dtype)


def _top_two_gap(builder: GraphBuilder, probabilities: str, dtype: str) -> str:
    """``[N]``: each row's largest probability minus its second largest."""
    two = builder.const(GUARD_STAGE, "two", [2], np.int64)
    top, _ = builder.op(GUARD_STAGE, "TopK", [probabilities, two], axis=1, n_outputs=2)
    # first minus second, one rounding as a Sub would make ([N, 2] x [2] -> [N])
    first_minus_second = builder.const(GUARD_STAGE, "first_minus_second", [1, -1], dtype)
    return builder.op(GUARD_STAGE, "MatMul", [top, first_minus_second])


def _rescore(redo: GraphBuilder, near: str, scores: str, inputs: _GuardInputs) -> str:
    """``scores`` with the rows where ``near`` [N] holds replaced by the exact encoding's."""
    exact, ensemble = inputs.exact, inputs.ensemble
    where = redo.op(GUARD_STAGE, "NonZero", [near])  # [1, M]
    index = redo.op(GUARD_STAGE, "Transpose", [where], perm=[1, 0])  # [M, 1]
    near_k = redo.op(GUARD_STAGE, "GatherND", [inputs.k, index])  # [M, F]
    near_rows = exact.operator_input(redo, near_k, inputs.k_dtype)
    dtype = ensemble.sum_dtype
    exact_scores = finish_scores(redo, exact.blocks_of(redo, near_rows), ensemble, dtype)
    return redo.op(GUARD_STAGE, "ScatterND", [scores, index, exact_scores])


def _branch(
    builder: GraphBuilder,
    near: str,
    *,
    near_ties: tuple[GraphBuilder, str],
    no_near_ties: tuple[GraphBuilder, str],
    dtype: str,
) -> str:
    """``If(near)``: the first branch's builder and output, else the second's."""
    (redo, redone), (keep, kept) = near_ties, no_near_ties
    out_info = helper.make_tensor_value_info
    elem = onnx_type(dtype)
    redo_graph = helper.make_graph(redo.nodes, "near_ties", [], [out_info(redone, elem, None)])
    keep_graph = helper.make_graph(keep.nodes, "no_near_ties", [], [out_info(kept, elem, None)])
    return builder.op(GUARD_STAGE, "If", [near], then_branch=redo_graph, else_branch=keep_graph)
