"""scikit-learn decision trees and forests, and their hyperbolic estimators.

scikit-learn casts X to float32 and sends a row left iff
``float32(x) <= threshold`` with float64 thresholds. Trees are read from and
written to the public ``tree_`` arrays; ``tree_.threshold`` is a view of the
tree's node storage, so writing into it changes what ``predict`` does (and
what is pickled).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, is_classifier
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreeClassifier,
    ExtraTreeRegressor,
)
from sklearn.utils.class_weight import compute_sample_weight

from ..correction import RowsPerTree
from ..errors import UnsupportedModelError
from ..ir import Ensemble
from ..ir.trees import TreeArrays
from ._base import GEOMETRY_PARAMS_DOC, HyperbolicClassifierMixin, WrappedParamsModel
from ._interface import Array, Backend, Weights
from ._probe import UnreadableFileError

_TREES = (DecisionTreeClassifier, DecisionTreeRegressor, ExtraTreeClassifier, ExtraTreeRegressor)
_FORESTS = (
    RandomForestClassifier,
    RandomForestRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
)


def _trees_of(fitted: Any) -> list[Any]:
    return list(fitted.estimators_) if isinstance(fitted, _FORESTS) else [fitted]


def _sklearn_trees(obj: Any, depth: int = 0) -> Any:
    """Every scikit-learn ``Tree`` reachable from ``obj`` through estimators and lists."""
    from sklearn.tree._tree import Tree

    if isinstance(obj, Tree):
        yield obj
        return
    if depth > 4:
        return
    if isinstance(obj, (list, tuple)):
        items: Any = obj
    elif isinstance(obj, np.ndarray) and obj.dtype == object:
        items = obj.ravel()
    elif type(obj).__module__.startswith(("sklearn.", "hyp2onnx.")) and hasattr(obj, "__dict__"):
        items = vars(obj).values()
    else:
        return
    for item in items:
        yield from _sklearn_trees(item, depth + 1)


class SklearnBackend(Backend):
    name = "sklearn"
    op = "<="
    compare_dtype = "float32"
    threshold_dtype = "float64"
    native = _TREES + _FORESTS

    def takes_negative_weights(self, estimator: Any) -> bool:
        """Regressors that do not bootstrap: a leaf's value is the weighted mean, defined
        for negative weights too. Classifiers make negative "probabilities" of them, and a
        bootstrapping forest draws its samples with the weights as probabilities."""
        return not is_classifier(estimator) and not getattr(estimator, "bootstrap", False)

    @classmethod
    def trusted_types(cls) -> list[type]:
        from sklearn.tree._tree import Tree

        return [Tree]  # the forests' and trees' classes are skops defaults

    @classmethod
    def check_loaded(cls, obj: Any) -> None:
        """Refuse a scikit-learn tree in ``obj`` whose node arrays are impossible.

        scikit-learn restores a pickled tree's node array without checking its
        links, and its compiled ``predict`` follows them unchecked: a damaged
        file can make it read outside the array and crash the process. Trees
        are built depth first, so every child comes after its parent; checking
        that (and that features exist) rules out such reads and cycles.
        """
        for tree in _sklearn_trees(obj):
            n = int(tree.node_count)
            left, right = np.asarray(tree.children_left), np.asarray(tree.children_right)
            feature = np.asarray(tree.feature)
            node = np.arange(n)
            internal = left != -1
            bad = (
                len(left) != n
                or len(right) != n
                or len(feature) != n
                or np.any(
                    internal & ((left <= node) | (left >= n) | (right <= node) | (right >= n))
                )
                or np.any(internal & ((feature < 0) | (feature >= tree.n_features)))
                or np.any(~internal & (right != -1))
            )
            if bad:
                raise UnreadableFileError(
                    "holds a damaged scikit-learn tree (its nodes link outside the tree)"
                )

    def fit(
        self, estimator: Any, Xk: Array, y: Array, sample_weight: Weights, **fit_params: Any
    ) -> Any:
        # Hand over float32, the precision scikit-learn trains in, so it
        # does not copy the data again.
        estimator.fit(
            Xk.astype(np.float32, copy=False), y, sample_weight=sample_weight, **fit_params
        )
        if is_classifier(estimator) and estimator.n_outputs_ > 1:
            raise UnsupportedModelError(
                "multi-output classification is not supported; fit one classifier per output."
            )
        return estimator

    def training_rows(
        self, fitted: Any, y: np.ndarray, sample_weight: np.ndarray | None
    ) -> Iterable[np.ndarray]:
        # A tree's splitter sees exactly the rows of non-zero weight
        # (negative weights included); in a bootstrapped forest a row's
        # weight is also multiplied by its draw count. (scikit-learn >= 1.9
        # draws bootstrap rows in proportion to their weight, so a drawn row
        # has a non-zero weight; older versions drew uniformly.)
        n = y.shape[0]
        class_weight = getattr(fitted, "class_weight", None)
        if class_weight is not None and class_weight != "balanced_subsample":
            class_w = compute_sample_weight(class_weight, y)
        else:
            class_w = np.ones(n)
        weighted = (class_w if sample_weight is None else class_w * sample_weight) != 0
        if isinstance(fitted, _FORESTS) and fitted.bootstrap:

            def each_tree() -> Iterator[np.ndarray]:
                for s in _drawn_rows(fitted):
                    yield np.flatnonzero((np.bincount(s, minlength=n) > 0) & weighted)

            return RowsPerTree(each_tree)
        rows = np.flatnonzero(weighted)
        return [rows] * len(_trees_of(fitted))

    def leaf_routing(
        self, fitted: Any, X: np.ndarray
    ) -> Callable[[int, np.ndarray], np.ndarray] | None:
        # ``tree_.apply`` compares float32 rows with float64 thresholds (``<=``), as the
        # trees do and `leaves` does, in compiled code; node ids are the trees' own.
        if X.dtype != np.float32:
            return None
        trees = [est.tree_ for est in _trees_of(fitted)]

        def route(t: int, rows: np.ndarray) -> np.ndarray:
            return trees[t].apply(rows)

        return route

    def read_trees(self, fitted: Any) -> list[TreeArrays]:
        out = []
        for est in _trees_of(fitted):
            t = est.tree_
            feature = t.feature.astype(np.int64)
            out.append(
                TreeArrays(
                    np.where(feature >= 0, feature, -1),
                    t.threshold.astype(np.float64),
                    t.children_left.astype(np.int64),
                    t.children_right.astype(np.int64),
                )
            )
        return out

    def write_thresholds(self, fitted: Any, thresholds: list[np.ndarray]) -> Any:
        for est, new in zip(_trees_of(fitted), thresholds, strict=True):
            view = est.tree_.threshold
            leaf = est.tree_.feature < 0
            view[~leaf] = new[~leaf]
        return fitted

    def to_ensemble(self, fitted: Any) -> Ensemble:
        classifier = is_classifier(fitted)
        trees, values = self.read_trees(fitted), []
        for est, arrays in zip(_trees_of(fitted), trees, strict=True):
            v = est.tree_.value
            # Classifiers store class fractions; regressors one value per target.
            leaf_values = v[:, 0, : fitted.n_classes_] if classifier else v[:, :, 0]
            values.append(np.where((arrays.feature < 0)[:, None], leaf_values, 0.0))
        return self.ensemble(
            trees,
            values,
            n_features=int(fitted.n_features_in_),
            aggregate="mean",
            base_values=np.zeros(values[0].shape[1]),
            post_transform="identity",
            sum_dtype="float64",
            classes=np.asarray(fitted.classes_) if classifier else None,
        )


# -- the hyperbolic estimators ------------------------------------------------

_GEOMETRY_DOC = (
    GEOMETRY_PARAMS_DOC
    + """    midpoint : {"einstein", "arithmetic"}, default="einstein"
        Where each threshold goes between its two nearest training values:
        the hyperbolic (Einstein) midpoint, or the Euclidean one (ablation;
        identical to scikit-learn's own thresholds for best-split trees).
    check_manifold : bool, default=True
        Reject points off the manifold (or outside the ball) in ``fit`` and
        ``predict``. Turn off only for large data known to be valid.
    tree_space : {"ranks", "rapidity", "klein"}, default="ranks"
        What the wrapped learner is fitted on: the ranks of each Klein
        coordinate's distinct training values (splits as fine as float64
        Klein coordinates, whatever the learner's precision: points far from
        the origin stay separable), ``artanh`` of them, or the coordinates
        themselves (the paper's design). Thresholds are Klein thresholds at
        Einstein midpoints in every case; see `hyp2onnx.correction.tree_space`.
    input_blocks : list or None, default=None
        Input made of blocks ([`hyp2onnx.blocks`][hyp2onnx.blocks]): ``[Hyperbolic(2),
        Spherical(2), Euclidean(3), Categorical(1)]`` or a signature
        ``[(-1.0, 2), (0.0, 3), (1.0, 2)]``; the columns of a row are the
        blocks' columns in order. Each block gets its own midpoint
        (Einstein, angular, arithmetic); categorical codes are split as
        numbers at scikit-learn's thresholds. ``input_geometry``,
        ``curvature`` and ``timelike_dim`` then stay at their defaults.

    Other Parameters
    ----------------
    **params
        Every parameter of the wrapped scikit-learn class, by keyword
        (``max_depth``, ``n_estimators``, ``random_state``, ...).
"""
)


def _doc(summary: str, wrapped: type) -> str:
    return (
        f"{summary}\n\n    Fits `sklearn.{wrapped.__module__.split('.')[1]}.{wrapped.__name__}` "
        "on Klein coordinates and moves every threshold to its Einstein midpoint.\n" + _GEOMETRY_DOC
    )


class HyperbolicDecisionTreeClassifier(
    HyperbolicClassifierMixin, ClassifierMixin, WrappedParamsModel
):
    __doc__ = _doc("Hyperbolic decision tree classifier (Fast-HyperDT).", DecisionTreeClassifier)
    _wrapped = DecisionTreeClassifier


class HyperbolicDecisionTreeRegressor(RegressorMixin, WrappedParamsModel):
    __doc__ = _doc("Hyperbolic decision tree regressor (Fast-HyperDT).", DecisionTreeRegressor)
    _wrapped = DecisionTreeRegressor


class HyperbolicRandomForestClassifier(
    HyperbolicClassifierMixin, ClassifierMixin, WrappedParamsModel
):
    __doc__ = _doc(
        "Hyperbolic random forest classifier; each tree is corrected on its own bootstrap rows.",
        RandomForestClassifier,
    )
    _wrapped = RandomForestClassifier


class HyperbolicRandomForestRegressor(RegressorMixin, WrappedParamsModel):
    __doc__ = _doc(
        "Hyperbolic random forest regressor; each tree is corrected on its own bootstrap rows.",
        RandomForestRegressor,
    )
    _wrapped = RandomForestRegressor


def _drawn_rows(forest: Any) -> Iterator[np.ndarray]:
    """A forest's drawn rows (``estimators_samples_``), one tree at a time: the list
    scikit-learn's property builds holds all of them at once. Its own generator,
    where this scikit-learn has one (it draws the same rows from each tree's seed)."""
    one_by_one = getattr(forest, "_get_estimators_indices", None)
    return one_by_one() if callable(one_by_one) else iter(forest.estimators_samples_)
