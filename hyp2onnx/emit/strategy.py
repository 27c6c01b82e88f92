"""Which graph ``to_onnx`` builds for a model: every choice, made in one place.

`choose_graph` takes the IR model and
the encoding asked for, and returns a
`GraphStrategy` naming each choice:
the encoding used, how the trees' features are made, the tree emitter (a
function, from `TREE_EMITTERS`), the
tree operator and what it carries, the fast encoding's leaf layout, how the
exact sums meet a batch, and the outputs. ``hyp2onnx.export.compile_model``
builds what the strategy says, and nothing else chooses.

The choices need the fast encoding's bound (`hyp2onnx.emit.fast`) as
well as the tree operators (`hyp2onnx.emit.trees`), so they live above
both: no emitter imports this module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from ..errors import UnsupportedModelError
from ..ir import Ensemble, Model, Task
from . import ENCODINGS, Encoding
from . import encoding as registered
from ._graph import GraphBuilder
from .fast import (
    ClassValues,
    FastLayout,
    Guarded,
    ShortBatches,
    complement_defect,
    emit_fast,
    fast_layout,
    labels_need_guard,
    value_bound,
)
from .frames import emit_frames, frame_chain, remap_frames
from .hyperplanes import emit_forest_walk, forest_walk_applies
from .isolation import emit_oblique_walk, emit_perfect_walk, perfect_applies, walk_applies
from .oblique import emit_normals, remap_projection
from .projection import projection_dtype, whole_rows_column
from .standard import emit_standard
from .trees import Batching, TreePlan, emit_compat, emit_exact, per_class_trees, remap_features

#: Leaf indices travel as the ensemble's float type; float32 holds integers exactly below this.
_FLOAT32_EXACT_INTS = 1 << 24
#: Above this many nodes the exact encoding uses opset-5 ``TreeEnsemble`` even
#: where the legacy operator would do: the legacy operator keeps every node's
#: fields in attribute lists, which stay in the protobuf and cannot exceed
#: 2 GiB, while ``TreeEnsemble`` holds thresholds, modes and leaf weights in
#: tensors, which move to external data.
LEGACY_MAX_NODES = 30_000_000
#: Up to this many nodes (a few MB of trees) the exact encoding also gives
#: batches of at most ``CHUNK_ROWS`` rows a path without the Loop, through an
#: ``If`` whose two branches each hold the tree operator; larger models keep
#: one copy and always go through the Loop.
SHORT_PATH_MAX_NODES = 200_000

#: ``emit(builder, k, k_dtype, ensemble, **options) -> raw scores`` (a name, or
#: `Guarded` or `ShortBatches` for the fast encoding).
TreeEmitter = Callable[..., "str | Guarded | ShortBatches"]

#: The tree emitter of each encoding. The registry ``hyp2onnx.emit.ENCODINGS``
#: holds the names, help texts and properties only, so that the command line
#: lists encodings without importing ONNX; an encoding added there gets its
#: emitter here.
TREE_EMITTERS: dict[str, TreeEmitter] = {
    "fast": emit_fast,
    "exact": emit_exact,
    "compat": emit_compat,
    "standard": emit_standard,
}

#: What the trees read, made from the Klein coordinates: the coordinates
#: themselves; projections on oblique normals; rotation frames for the whole
#: batch; or rotation frames made block by block inside the exact scorer's
#: row blocks (the fast and exact encodings).
Features = Literal["klein", "oblique", "frames", "frames_by_block"]


@dataclass(frozen=True, kw_only=True)
class GraphOverrides:
    """Choices `choose_graph` makes itself, made otherwise: the variants the benchmarks
    measure side by side and the tests hold against the defaults. An export never needs
    them (`to_onnx` takes none)."""

    #: the fast encoding's near-tie guard; without it labels may differ from the model's
    guard: bool = True
    #: the crossover of short batches (`short_batch_rows`); None: the one chosen
    short_rows: int | None = None
    #: how the fast encoding adds leaves holding a fraction per class (`ClassValues`)
    class_values: ClassValues = "average"


@dataclass(frozen=True, kw_only=True)
class GraphStrategy:
    """The graph ``compile_model`` builds for one model (see `choose_graph`)."""

    #: the encoding used, as the graph's metadata records it
    encoding: Encoding
    #: the trees, reading only the Klein features they use, renumbered
    ensemble: Ensemble
    #: those features' Klein columns
    used: np.ndarray
    features: Features
    #: the tree emitter
    trees: TreeEmitter
    #: the tree operator and what it carries; None for emitters without one
    operator: TreePlan | None
    #: the fast encoding's leaf layout; None for the other encodings
    layout: FastLayout | None
    #: the near-tie guard and the class values of the fast encoding (`GraphOverrides`)
    overrides: GraphOverrides = GraphOverrides()
    #: batches of up to this many rows take the exact scores instead of the fast
    #: encoding's (`short_batch_rows`); 0: every batch takes the fast scores
    short_rows: int = 0
    #: the precision the projection computes the Klein coordinates in
    klein_dtype: str
    #: the trees read ``X / x_0`` whole, its column of ones at this index (their
    #: features shifted past it), or None: the used Klein columns alone
    ones_column: int | None = None
    #: the model's task: isolation forests output labels, scores and path lengths
    task: Task

    def emitter_options(self) -> dict[str, Any]:
        """The keywords ``trees`` takes besides ``(builder, k, k_dtype, ensemble)``."""
        if self.trees is emit_fast:
            return {
                "plan": self.operator,
                "layout": self.layout,
                "guard": self.overrides.guard,
                "short_rows": self.short_rows,
                "class_values": self.overrides.class_values,
            }
        return {} if self.operator is None else {"plan": self.operator}


def choose_graph(
    model: Model,
    *,
    encoding: str,
    input_dtype: str,
    legacy_only: bool = False,
    overrides: GraphOverrides | None = None,
) -> GraphStrategy:
    """Which graph ``to_onnx`` builds for ``model`` fed ``input_dtype`` points, in order:

    1. **Encoding** (``encoding``, registry ``hyp2onnx.emit.ENCODINGS``).
       Isolation forests asked for ``fast`` get ``exact`` (their labels compare
       summed path lengths with a threshold: the sums keep tree order; HyperDT
       models, ``hyp2onnx.export.hyperdt``, do the same). Categorical splits
       need an encoding with set membership.
    2. **Features** the trees read (`Features`), from Klein coordinates
       in the precision the trees compare (`_klein_dtype`): oblique
       trees project onto their normals, rotation forests map to their frames
       (for fast and exact block by block); isolation forests' walks project
       by themselves; tree operators may read ``X / x_0`` whole (`_whole_rows`).
    3. **Tree emitter**, a function: `TREE_EMITTERS` by encoding; oblique isolation
       forests (not compat) walk level by level (``emit_perfect_walk`` within
       ``PERFECT_MAX_ENTRIES``, else ``emit_oblique_walk``); rotation forests routed
       by hyperplanes, ``emit_forest_walk`` where it fits (`_walk`).
    4. **Tree operator** (`plan_trees`): legacy opset-1
       ``TreeEnsembleRegressor`` (compat; float32 comparisons) or opset-5
       ``TreeEnsemble`` in double (float64 comparisons, categorical splits,
       fast binary forests, past `LEGACY_MAX_NODES` nodes), carrying
       each tree's leaf value or its leaf's row in a value table.
    5. **Leaf layout** of the fast encoding (``fast_layout``): a target per
       output column, class 1 alone with class 0 as ``1 - p1``, C fractions a
       leaf (``TreePlan.class_weights``), or else the exact graph (bound 0);
       batches of up to `short_batch_rows` rows take the exact scores (an ``If``).
    6. **Row batching** of the exact sums (`row_batching`): the whole
       batch for one tree; an ``If`` sending short batches past the row-block
       ``Loop`` up to `SHORT_PATH_MAX_NODES` nodes; the ``Loop`` beyond.
    7. **Outputs**, by the model's task: label and probabilities, values, or
       an isolation forest's label, scores and path lengths.

    ``legacy_only`` (skl2onnx hosts: ai.onnx.ml below opset 5) keeps to the legacy operator;
    ``overrides``: `GraphOverrides` (the variants of benchmarks and tests).
    """
    chosen = overrides or GraphOverrides()
    spec, ensemble, used, features, trees, ones_column = _trees(model, encoding)
    operator = _operator_plan(ensemble, spec, trees, features, legacy_only=legacy_only)
    layout, short_rows = _layout(ensemble, trees, operator, chosen)
    return GraphStrategy(
        encoding=spec,
        ensemble=ensemble,
        used=used,
        features=features,
        trees=trees,
        operator=operator,
        layout=layout,
        overrides=chosen,
        short_rows=short_rows,
        klein_dtype=_klein_dtype(model, ensemble, spec, input_dtype),
        ones_column=ones_column,
        task=model.task,
    )


def _trees(
    model: Model, encoding: str
) -> tuple[Encoding, Ensemble, np.ndarray, Features, TreeEmitter, int | None]:
    """Steps 1 to 3: the encoding as the emitter takes it, the trees reading only the
    features they use (renumbered), those features' Klein columns, what the trees read,
    the tree emitter, and the column of ones where the trees read ``X / x_0`` whole."""
    spec = _encoding_for(model, encoding)
    ensemble, used = _remap(model.ensemble)
    features = _features(ensemble, spec)
    trees: TreeEmitter = TREE_EMITTERS[spec.name]
    walk = _walk(model, ensemble, spec)
    if walk is not None:
        trees, spec, features = *walk, "klein"
    ensemble, ones_column = _whole_rows(model, ensemble, used, features, trees)
    return spec, ensemble, used, features, trees, ones_column


def _layout(
    ensemble: Ensemble, trees: TreeEmitter, operator: TreePlan | None, chosen: GraphOverrides
) -> tuple[FastLayout | None, int]:
    """The fast encoding's leaf layout (None for the other emitters) and the crossover of
    short batches (step 5), as ``chosen`` overrides them."""
    layout = None
    if trees is emit_fast and operator:
        layout = fast_layout(ensemble, operator, chosen.class_values)
    if chosen.short_rows is not None:
        return layout, chosen.short_rows
    return layout, short_batch_rows(layout, ensemble, chosen.class_values)


def _operator_plan(
    ensemble: Ensemble, spec: Encoding, trees: TreeEmitter, features: Features, *, legacy_only: bool
) -> TreePlan | None:
    """The tree operator's plan (step 4), or None for emitters without one."""
    if not (spec.tree_operator and trees in TREE_EMITTERS.values()):
        return None
    by_block = features == "frames_by_block"
    return plan_trees(ensemble, spec.name, legacy_only=legacy_only, by_block=by_block)


def _whole_rows(
    model: Model, ensemble: Ensemble, used: np.ndarray, features: Features, trees: TreeEmitter
) -> tuple[Ensemble, int | None]:
    """The trees reading ``X / x_0`` whole and its column of ones, where the tree operators
    read Klein coordinates that allow it (step 2); else as they were, and None."""
    if features != "klein" or trees not in TREE_EMITTERS.values():
        return ensemble, None
    ones_column = whole_rows_column(model.space, used)
    if ones_column is None:
        return ensemble, None
    shift = 1 if ones_column == 0 else 0  # feature f at column f + 1 after the ones
    feature = np.where(ensemble.feature >= 0, ensemble.feature + shift, -1).astype(np.int64)
    width = model.space.n_input_features
    return replace(ensemble, feature=feature, n_features=width), ones_column


def _walk(model: Model, ensemble: Ensemble, spec: Encoding) -> tuple[TreeEmitter, Encoding] | None:
    """The level walk and its encoding for ``ensemble``, if it takes one (step 3).

    Oblique isolation forests: perfect tables where they stay small, else the
    node walk (the same sums, bit for bit). Rotation forests routed by
    hyperplanes: `_walks_hyperplanes`; their sums are exact, so asked for
    fast they get the exact encoding (bound 0).
    """
    if model.task == Task.ANOMALY and not spec.float32 and walk_applies(ensemble):
        return (emit_perfect_walk if perfect_applies(ensemble) else emit_oblique_walk), spec
    if _walks_hyperplanes(model, ensemble, spec):
        return emit_forest_walk, registered("exact")
    return None


def _walks_hyperplanes(model: Model, ensemble: Ensemble, spec: Encoding) -> bool:
    """Whether a rotation forest routed by hyperplanes gets the level walk (step 3).

    The walk computes ``depth x (d + 1)`` products a tree, on the row's path;
    projecting onto every split's normal for the tree operator computes
    ``n_splits x (d + 1)``. Both give the Python model's routing bit for
    bit; the walk is faster wherever its perfect tables fit (docs/rotation.md
    measures both), and deeper forests keep the projections. The compat and
    standard encodings keep their own tree stages.
    """
    return (
        model.backend == "sklearn-rotation"
        and spec.name in ("fast", "exact")
        and forest_walk_applies(ensemble)
    )


def _encoding_for(model: Model, encoding: str) -> Encoding:
    """The encoding used for ``model`` when ``encoding`` is asked for (step 1)."""
    spec = registered(encoding)
    if spec.value_bound and model.task == Task.ANOMALY:
        spec = registered("exact")
    if model.ensemble.categories is not None and not spec.categories:
        able = [e.name for e in ENCODINGS.values() if e.categories]
        raise UnsupportedModelError(
            f"the {spec.name} encoding has no set-membership node for categorical splits; "
            f"use encoding={' or '.join(map(repr, able))}."
        )
    return spec


def _remap(ensemble: Ensemble) -> tuple[Ensemble, np.ndarray]:
    """The ensemble reading only the Klein features it uses, and those features."""
    if ensemble.frames is not None:
        return remap_frames(ensemble)
    if ensemble.projection is not None:
        return remap_projection(ensemble)
    return remap_features(ensemble)


def _features(ensemble: Ensemble, spec: Encoding) -> Features:
    """What the trees of the remapped ``ensemble`` read (step 2)."""
    if ensemble.projection is not None:
        return "oblique"
    if ensemble.frames is not None:
        by_block = TREE_EMITTERS[spec.name] in (emit_fast, emit_exact)
        return "frames_by_block" if by_block else "frames"
    return "klein"


def _klein_dtype(model: Model, remapped: Ensemble, spec: Encoding, input_dtype: str) -> str:
    """The precision the projection computes the Klein coordinates in.

    What the trees compare: float32 for the compat encoding, except that
    oblique splits and frames (of the fitted ensemble, even where every split
    of an oblique tree reads a single feature) project float64 Klein
    coordinates, whatever the encoding. The standard encoding always divides
    in float64: its runtimes (tract, OpenVINO) divide float32 by a
    reciprocal, one unit in the last place off at times; a float64 quotient
    rounded to float32 is the correctly rounded float32 quotient, as Python
    compares it.
    """
    if spec.name == "standard":
        return "float64"
    oblique = model.ensemble.projection is not None or model.ensemble.frames is not None
    compare = "float32" if spec.float32 and not oblique else remapped.compare_dtype
    return projection_dtype(model.space, input_dtype, compare)


def emit_features(
    builder: GraphBuilder, k: str, k_dtype: str, strategy: GraphStrategy
) -> tuple[str, str, Ensemble, dict[str, Any]]:
    """The columns the trees read, from Klein coordinates ``k``, as ``strategy.features``
    says: their name, dtype, the ensemble that reads them, and the emitter's
    ``features=`` keyword for frames made block by block."""
    ensemble = strategy.ensemble
    if strategy.features == "oblique":
        return (*emit_normals(builder, k, k_dtype, ensemble), {})
    if strategy.features == "frames":
        return (*emit_frames(builder, k, k_dtype, ensemble), {})
    if strategy.features == "frames_by_block":
        by_block, planar = frame_chain(builder, k_dtype, ensemble)
        return k, k_dtype, planar, {"features": by_block}
    return k, k_dtype, ensemble, {}


def emit_trees(
    builder: GraphBuilder, k: str, k_dtype: str, strategy: GraphStrategy
) -> tuple[str | Guarded | ShortBatches, Ensemble]:
    """The raw scores of Klein coordinates ``k``, built as ``strategy`` says, and the
    ensemble they come from (for the outputs)."""
    columns, columns_dtype, ensemble, by_block = emit_features(builder, k, k_dtype, strategy)
    options = strategy.emitter_options() | by_block
    return strategy.trees(builder, columns, columns_dtype, ensemble, **options), ensemble


#: The crossover of each fast leaf layout: batches of up to this many rows take the
#: exact scores. Measured at one thread as the largest batch size up to which the
#: exact scores were never slower than the fast ones with their guard
#: (benchmarks/bench_short_batches.py, results in benchmarks/results/short_batches.md):
#: forests of more than two classes (``"class_values"``). Binary forests
#: (``"complement"``) and boosters (``"by_column"``) were faster on the fast side at
#: every size, one row included, and keep it (no ``If``).
SHORT_BATCH_ROWS: dict[FastLayout, int] = {"class_values": 8}


def short_batch_rows(
    layout: FastLayout | None, ensemble: Ensemble, class_values: ClassValues = "average"
) -> int:
    """Batches of up to this many rows take the exact scores (step 5); 0: none do.

    The exact scores' ordered sums cost a row more than the runtime's own
    sums, but a classifier's near-tie guard (``TopK``, ``MatMul``,
    ``ReduceMin``, ``If``) costs a call more than the sums of a few rows:
    below the crossover the exact path is the faster, and its values are the
    model's bit for bit. Regressors have no guard to save (the ``If`` would
    only cost), nor layouts without a bound (``"exact"``), nor classifiers
    whose labels no order of the sums changes (`labels_need_guard`).
    """
    if layout is None or not labels_need_guard(ensemble, layout, class_values):
        return 0
    return SHORT_BATCH_ROWS.get(layout, 0)


def row_batching(ensemble: Ensemble, *, by_block: bool = False) -> Batching:
    """How the exact sums meet a batch (step 6): see `Batching`.

    ``by_block``: the features are made block by block, so rows always go
    in blocks (never the whole batch at once).
    """
    if ensemble.n_trees == 1 and not by_block:
        return "whole"
    return "short_or_blocks" if ensemble.n_nodes <= SHORT_PATH_MAX_NODES else "blocks"


def plan_trees(
    ensemble: Ensemble, encoding: str, *, legacy_only: bool = False, by_block: bool = False
) -> TreePlan:
    """Choose the operator, what it carries and the batching (see `TreePlan`).

    ``legacy_only`` (for hosts such as skl2onnx that cap ai.onnx.ml below
    opset 5) raises `ValueError` when the exact encoding needs v5.
    """
    operator: Literal["legacy", "v3", "v5"]
    operator, carries = _operator(ensemble, encoding, legacy_only=legacy_only)
    class_weights = (
        encoding == "fast"
        and not legacy_only
        and not by_block
        and carries == "leaf_rows"
        and (operator == "legacy" or _leaf_rows_fit_v3(ensemble))
        and _class_fractions(ensemble)
    )
    if class_weights and operator == "v5":
        # float64 comparisons: the guard's exact rescoring uses the opset-3 operator
        # with double thresholds too (opset 5 no longer has it)
        operator = "v3"
    return TreePlan(
        operator=operator,
        carries=carries,
        batching=row_batching(ensemble, by_block=by_block),
        class_weights=class_weights,
    )


def _leaf_rows_fit_v3(ensemble: Ensemble) -> bool:
    """Whether the opset-3 operator with double thresholds can hand over leaf rows
    (float32 outputs: exact below 2**24) and hold the nodes in its attribute lists."""
    return (
        ensemble.categories is None
        and int(np.sum(ensemble.feature < 0)) < _FLOAT32_EXACT_INTS
        and ensemble.n_nodes <= LEGACY_MAX_NODES
    )


def _class_fractions(ensemble: Ensemble) -> bool:
    """Whether leaves hold a fraction per class of more than two classes, averaged over
    the trees with no link or base values (scikit-learn forests), with something to
    reorder: the fast graph then adds them all with the opset-3 operator, and the
    guard's exact rescoring uses an operator opset 3 still has."""
    return bool(
        ensemble.n_outputs > 2
        and ensemble.aggregate == "mean"
        and ensemble.post_transform == "identity"
        and not np.any(ensemble.base_values != 0)
        and value_bound(ensemble) > 0
    )


def _operator(
    ensemble: Ensemble, encoding: str, *, legacy_only: bool
) -> tuple[Literal["legacy", "v5"], Literal["values", "leaf_rows"]]:
    if encoding == "compat":
        return "legacy", "values"
    one_column = per_class_trees(ensemble) is not None  # every tree feeds one output column
    if ensemble.categories is not None:
        # Set-membership splits exist only in opset 5 (BRANCH_MEMBER).
        if legacy_only:
            raise ValueError(
                "the exact encoding of a model with categorical splits needs ai.onnx.ml opset 5"
            )
        return "v5", "values" if one_column else "leaf_rows"
    if encoding == "fast" and not legacy_only:
        if complement_defect(ensemble) is not None and value_bound(ensemble) > 0:
            # Binary class fractions: the fast graph's one-target operator in double,
            # and its guard's exact rescoring in the same opset.
            return "v5", "leaf_rows"
    leaves = int(np.sum(ensemble.feature < 0))
    float32_routing = ensemble.compare_dtype == "float32"
    small = legacy_only or ensemble.n_nodes <= LEGACY_MAX_NODES
    if one_column:
        if float32_routing and ensemble.sum_dtype == "float32" and small:
            return "legacy", "values"
        if not legacy_only:
            return "v5", "values"
    if float32_routing and leaves < _FLOAT32_EXACT_INTS and small:
        return "legacy", "leaf_rows"
    if legacy_only:
        raise ValueError(
            "the exact encoding of this model needs ai.onnx.ml opset 5 (float64 routing)"
        )
    return "v5", "leaf_rows"
