"""A plain in-memory description of a fitted hyperbolic tree model.

Every backend ends here, and every emitter starts here. The description is
frozen numpy arrays and a few strings, with nothing backend-specific left
to infer: the comparison operator, the precision the feature value is
compared in, the dtype thresholds are stored in and how leaf values are
combined are all explicit.

`predict_scores` evaluates the description in numpy in the backend's
own order of operations; tests use it as the reference between the Python
model and the ONNX graph. `trees` holds one tree's arrays and how rows
are routed and compared; `projection` the oblique splits' projections.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

import numpy as np

from ..blocks import Block, n_features, n_input_columns
from ..errors import DamagedModelError
from ..geometry import check_timelike_dim, curvature_radius, n_klein_features
from .frames import Frames, frame_features
from .projection import project
from .trees import CategorySets, Op, TreeArrays, apply, as_compared, structure_damage, where_node

__all__ = [
    "XGBOOST_LOGISTIC_THRESHOLD",
    "LIGHTGBM_LOGISTIC_THRESHOLD",
    "Ensemble",
    "InputSpace",
    "LabelRule",
    "Model",
    "Task",
    "predict_output",
    "predict_scores",
]

#: How a classifier's own ``predict`` turns raw scores into a label (docs/math.md,
#: "How each backend turns scores into labels"): ``"probabilities"``, the first
#: class of highest probability (scikit-learn; XGBoost and LightGBM with more than two
#: classes); ``"scores"``, the first class of highest raw score (CatBoost with more
#: than two classes); ``"above"``, the second class iff the one raw score exceeds
#: ``label_threshold`` (binary boosters).
LabelRule = Literal["probabilities", "scores", "above"]
#: XGBoost's binary label is 1 iff its float32 ``1 / (expf(-x) + 1 + 1e-16)``
#: exceeds 0.5, iff ``expf(-x) <= 1 - 2**-23`` (a float32 ``1 - 2**-24`` gives a
#: denominator rounded to 2), iff the float32 margin ``x`` exceeds ``1.5 * 2**-24``.
XGBOOST_LOGISTIC_THRESHOLD = 1.5 * 2.0**-24
#: LightGBM's binary label is 1 iff its float64 ``p = 1 / (1 + exp(-x))`` exceeds
#: ``1 - p`` (numpy's argmax of ``[1 - p, p]``), iff ``p > 1/2``, iff
#: ``exp(-x) <= 1 - 2**-52``, iff the margin ``x`` exceeds ``1.5 * 2**-53``.
LIGHTGBM_LOGISTIC_THRESHOLD = 1.5 * 2.0**-53


class Task(StrEnum):
    """What a model's graph outputs; written to its metadata as ``hyp2onnx.task``.

    Classifiers and regressors follow from their ensemble; a model of another
    task records it in `Model.metadata` (``"task"``), as isolation
    forests do.
    """

    CLASSIFICATION = "classification"  #: ``label`` and ``probabilities``
    REGRESSION = "regression"  #: ``variable``
    ANOMALY = "anomaly"  #: isolation forests: ``label`` (+1 / -1), ``scores``, ``path_length``


@dataclass(frozen=True)
class InputSpace:
    """Where the model's input points live and how they become the trees' features.

    One hyperbolic model (``geometry``, ``curvature``, ``timelike_dim``), or,
    with ``geometry="product"``, the ``blocks`` of [`hyp2onnx.blocks`][hyp2onnx.blocks]
    (``curvature`` is then NaN and ``timelike_dim`` 0: each block has its own).
    """

    geometry: Literal["hyperboloid", "poincare", "klein", "product"]
    curvature: float
    timelike_dim: int
    n_input_features: int
    blocks: tuple[Block, ...] | None = None

    def __post_init__(self) -> None:
        if self.geometry == "product" or self.blocks is not None:
            if self.geometry != "product" or not self.blocks:
                raise ValueError("InputSpace: blocks go with geometry='product' and vice versa")
            if n_input_columns(self.blocks) != self.n_input_features:
                raise ValueError(
                    "InputSpace: the blocks' columns do not add up to n_input_features"
                )
            return
        curvature_radius(self.curvature)  # validates K < 0
        n_klein_features(self.n_input_features, self.geometry)  # validates the name
        check_timelike_dim(self.timelike_dim, self.n_input_features, self.geometry)

    @property
    def n_klein_features(self) -> int:
        """Features the trees read (Klein coordinates, or the blocks' features)."""
        if self.blocks is not None:
            return n_features(self.blocks)
        return n_klein_features(self.n_input_features, self.geometry)


@dataclass(frozen=True, eq=False)
class Ensemble:
    """Trees over unit-ball Klein coordinates, all nodes of all trees concatenated.

    Node ``j`` of the whole ensemble tests ``k[feature[j]] OP threshold[j]``
    (true: go to ``left[j]``); ``left``/``right`` are global node indices and
    ``feature`` is -1 at leaves. ``value[j]`` is what leaf ``j`` adds to the
    model's raw scores (zero rows at internal nodes). Raw scores are
    ``aggregate`` ("sum" or "mean") of the trees' leaf values, added tree by
    tree in tree order in ``sum_dtype``, plus ``base_values``; then
    ``post_transform`` maps scores to the outputs (probabilities or values).
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    op: Op
    compare_dtype: Literal["float32", "float64"]
    threshold_dtype: Literal["float32", "float64"]
    n_features: int
    aggregate: Literal["sum", "mean"]
    base_values: np.ndarray
    post_transform: Literal["identity", "logistic", "softmax"]
    sum_dtype: Literal["float32", "float64"] = "float64"
    classes: np.ndarray | None = None
    tree_target: np.ndarray | None = None  #: output column each tree feeds; None: all
    #: Oblique splits: ``[n_features, n_columns]`` normals. Node ``j`` then tests
    #: column ``feature[j]`` of ``project(k, projection)`` (see `hyp2onnx.ir.projection`)
    #: instead of Klein feature ``feature[j]``; None: axis-parallel splits.
    projection: np.ndarray | None = None
    #: Set-membership splits (categorical codes) among the nodes; None: none.
    categories: CategorySets | None = None
    #: Splits in other frames (rotation forests): node ``j`` then tests column
    #: ``feature[j]`` of ``frame_features(k, frames)`` (see `hyp2onnx.ir.frames`).
    frames: Frames | None = None
    #: How the library's ``predict`` picks the label from the raw scores (classifiers).
    label_rule: LabelRule = "probabilities"
    #: ``label_rule == "above"``: the second class iff the raw score exceeds this.
    label_threshold: float = 0.0

    def __post_init__(self) -> None:
        n = self.feature.shape[0]
        for name in ("threshold", "left", "right"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"Ensemble.{name} must have shape ({n},)")
        if self.value.ndim != 2 or self.value.shape[0] != n:
            raise ValueError(f"Ensemble.value must have shape ({n}, n_outputs)")
        if self.base_values.shape != (self.n_outputs,):
            raise ValueError("Ensemble.base_values must have one entry per output")
        internal = self.feature >= 0
        if self.projection is not None and (
            self.projection.ndim != 2 or self.projection.shape[0] != self.n_features
        ):
            raise ValueError("Ensemble.projection must have shape (n_features, n_columns)")
        n_tested = self.n_features if self.projection is None else self.projection.shape[1]
        if self.frames is not None:
            if self.projection is not None or self.frames.n_klein_features != self.n_features:
                raise ValueError("Ensemble.frames: no projection, and one row per Klein feature")
            n_tested = self.frames.n_columns
        member = None if self.categories is None else self.categories.member
        args = (self.feature, self.threshold, self.left, self.right, self.roots, n_tested, member)
        damage = structure_damage(*args)
        if damage is None and not np.all(np.isfinite(self.value[~internal])):
            bad = np.flatnonzero(~internal & ~np.all(np.isfinite(self.value), axis=1))
            damage = f"{where_node(self.roots, bad)} has leaf value {self.value[bad[0]].tolist()}"
        if damage is None and not np.all(np.isfinite(self.base_values)):
            damage = f"the base scores {self.base_values.tolist()} are not finite"
        if damage is not None:
            raise DamagedModelError(f"the model is damaged: {damage}; save an undamaged copy")
        if self.tree_target is not None and self.tree_target.shape != self.roots.shape:
            raise ValueError("Ensemble.tree_target must have one entry per tree")
        if self.categories is not None and self.categories.member.shape != (n,):
            raise ValueError(f"Ensemble.categories must mark each of the {n} nodes")
        if self.post_transform == "logistic" and self.n_outputs != 1:
            raise ValueError("the logistic post-transform takes one score column")
        if self.label_rule == "above" and self.n_outputs != 1:
            raise ValueError("the 'above' label rule takes one score column")
        if self.classes is not None:
            scored = 2 if self.post_transform == "logistic" else self.n_outputs
            if len(self.classes) != scored:
                raise ValueError(
                    f"the trees score {scored} classes but the model lists "
                    f"{len(self.classes)} ({np.asarray(self.classes).tolist()[:5]}); XGBoost "
                    "and LightGBM classifiers need at least two classes in y: train on data "
                    "with two or more classes"
                )

    @classmethod
    def from_trees(
        cls, trees: list[TreeArrays], values: list[np.ndarray], **facts: object
    ) -> Ensemble:
        """Trees with local node indices (and their leaf values) laid end to end.

        Every backend describes its model this way: children become global
        node indices, thresholds are zeroed at leaves, the roots are each
        tree's first node; ``facts`` are the other fields.
        """
        n_outputs = np.asarray(facts["base_values"]).shape[0]
        sizes = np.array([t.feature.shape[0] for t in trees], dtype=np.int64)
        roots = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)[: len(trees)]

        def joined(arrays: list[np.ndarray], dtype: type, empty: tuple[int, ...]) -> np.ndarray:
            return np.concatenate(arrays).astype(dtype) if arrays else np.zeros(empty, dtype)

        glob = lambda c, o: np.where(c >= 0, c + o, -1)
        if "categories" not in facts and any(t.categories is not None for t in trees):
            # Each tree's (node, code) keys shifted to global node indices: still sorted.
            facts["categories"] = CategorySets(
                np.concatenate(
                    [
                        np.zeros(n, bool) if t.categories is None else t.categories.member
                        for t, n in zip(trees, sizes, strict=True)
                    ]
                ),
                np.concatenate(
                    [
                        t.categories.keys + (np.int64(o) << 32)
                        for t, o in zip(trees, roots, strict=True)
                        if t.categories is not None
                    ]
                ),
            )
        return cls(
            feature=joined([t.feature for t in trees], np.int64, (0,)),
            threshold=joined(
                [np.where(t.feature >= 0, t.threshold, 0.0) for t in trees], np.float64, (0,)
            ),
            left=joined(
                [glob(t.left, o) for t, o in zip(trees, roots, strict=True)], np.int64, (0,)
            ),
            right=joined(
                [glob(t.right, o) for t, o in zip(trees, roots, strict=True)], np.int64, (0,)
            ),
            value=joined(list(values), np.float64, (0, n_outputs)),
            roots=roots,
            **facts,  # type: ignore[arg-type]
        )

    @property
    def n_trees(self) -> int:
        return int(self.roots.shape[0])

    @property
    def n_nodes(self) -> int:
        return int(self.feature.shape[0])

    @property
    def n_outputs(self) -> int:
        """Columns of the raw scores (1 for binary logistic models)."""
        return int(self.value.shape[1])

    @property
    def is_classifier(self) -> bool:
        return self.classes is not None

    def tree_bounds(self) -> np.ndarray:
        """``[start, stop)`` node ranges of each tree (trees are stored contiguously)."""
        stops = np.append(self.roots[1:], self.n_nodes)
        return np.stack([self.roots, stops], axis=1)

    def tree(self, i: int) -> tuple[TreeArrays, np.ndarray]:
        """Tree ``i`` with local node indices, and its leaf values."""
        start, stop = self.tree_bounds()[i]
        local = lambda a: np.where(a[start:stop] >= 0, a[start:stop] - start, -1)
        categories = None if self.categories is None else self.categories.slice(start, stop)
        arrays = TreeArrays(
            self.feature[start:stop],
            self.threshold[start:stop],
            local(self.left),
            local(self.right),
            categories,
        )
        return arrays, self.value[start:stop]

    def used_features(self) -> np.ndarray:
        """Sorted Klein feature indices that some split reads."""
        tested = np.unique(self.feature[self.feature >= 0])
        if self.frames is not None:
            return self.frames.select(tested).used_features()
        if self.projection is None:
            return tested
        return np.flatnonzero(np.any(self.projection[:, tested] != 0, axis=1))


@dataclass(frozen=True, eq=False)
class Model:
    """What the emitters need: trees, the input space and where they came from."""

    ensemble: Ensemble
    space: InputSpace
    backend: str
    estimator_class: str
    metadata: dict[str, str] = field(default_factory=dict)
    #: Input precision that keeps every split the model makes (None: unknown;
    #: then its comparison precision).
    input_dtype: Literal["float32", "float64"] | None = None

    @property
    def task(self) -> Task:
        """The task recorded in ``metadata``, else classification or regression."""
        recorded = self.metadata.get("task")
        if recorded is not None:
            return Task(recorded)
        return Task.CLASSIFICATION if self.ensemble.is_classifier else Task.REGRESSION


def predict_scores(ensemble: Ensemble, Xk: np.ndarray) -> np.ndarray:
    """Raw scores (before ``post_transform``) for unit-ball Klein rows ``Xk``.

    Reproduces the backend's arithmetic: oblique splits' projections in
    `hyp2onnx.ir.projection.project`'s order, values compared in
    ``compare_dtype``, leaf values added in tree order in ``sum_dtype``,
    then divided by the tree count ("mean") and offset by ``base_values``.
    """
    if ensemble.projection is not None:
        Xk = project(Xk, ensemble.projection)
    if ensemble.frames is not None:
        Xk = frame_features(Xk, ensemble.frames)
    X = as_compared(Xk, ensemble.compare_dtype)
    dt = np.dtype(ensemble.sum_dtype)
    total = np.zeros((X.shape[0], ensemble.n_outputs), dtype=dt)
    for i in range(ensemble.n_trees):
        tree, values = ensemble.tree(i)
        total += values[apply(tree, X, ensemble.op)].astype(dt)
    if ensemble.aggregate == "mean":
        total /= dt.type(ensemble.n_trees)
    return (total + ensemble.base_values.astype(dt)).astype(np.float64)


def predict_output(ensemble: Ensemble, Xk: np.ndarray) -> np.ndarray:
    """Probabilities (classifiers, in ``classes`` order) or values (regressors)."""
    scores = predict_scores(ensemble, Xk)
    if ensemble.post_transform == "identity":
        return scores
    if ensemble.post_transform == "logistic":
        p = 1.0 / (1.0 + np.exp(-scores[:, 0]))
        return np.stack([1.0 - p, p], axis=1)
    if ensemble.post_transform == "softmax":
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    raise ValueError(f"unknown post_transform {ensemble.post_transform!r}")
