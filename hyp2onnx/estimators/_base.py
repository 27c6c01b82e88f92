"""The scikit-learn face of every hyperbolic tree model.

``fit`` runs the whole training half of the pipeline: validate the points,
project them to unit-ball Klein coordinates, fit the wrapped Euclidean
model through its backend on a monotone image of them (``tree_space``, see
`hyp2onnx.correction.tree_space`), then move every threshold to its Einstein
midpoint among the rows each tree was trained on and write it back into the
native model. ``estimator_`` is that corrected native model. It reads Klein
coordinates, unless the backend's own precision cannot separate some split
(points far from the origin): it then reads the split indices of
``split_index_``, which route every row as float64 Klein thresholds do.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import os
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import Tags, get_tags
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._threads import thread_pool
from ..blocks import as_blocks, categorical_features, feature_kinds, to_features
from ..correction import (
    TREE_SPACES,
    Comparison,
    Correction,
    Midpoint,
    TreeSpace,
    correct,
    from_rows,
)
from ..correction.shared_rows import shared_rows
from ..errors import InvalidPointError
from ..geometry import GEOMETRIES, to_klein
from ..ir import InputSpace, Model
from ..ir.crossings import Splits, moved_by, rows_that_may_cross, splits_in_reach
from ._interface import Backend
from ._registry import backend_for
from ._transaction import FitTransaction, refuse_continuation
from ._weights import checked_weights

#: Rows the float32 check takes at a time (`HyperbolicTreeModel._float32_keeps_outputs`).
_CHECK_ROWS = 1 << 15

#: Parameters every hyperbolic model takes, with their defaults.
GEOMETRY_DEFAULTS: dict[str, Any] = {
    "input_geometry": "hyperboloid",
    "curvature": -1.0,
    "timelike_dim": 0,
    "midpoint": "einstein",
    "check_manifold": True,
    "tree_space": "ranks",
    "input_blocks": None,
}


#: How every hyperbolic estimator's docstring starts its parameters (geometry first).
GEOMETRY_PARAMS_DOC = """
    Parameters
    ----------
    input_geometry : {"hyperboloid", "poincare", "klein"}, default="hyperboloid"
        Model of hyperbolic space the input points are given in. Hyperboloid
        points have ``d + 1`` columns (the timelike one at ``timelike_dim``);
        Poincare and Klein points lie in the ball of radius ``R = 1/sqrt(-K)``.
    curvature : float < 0, default=-1.0
        Curvature ``K`` of the space.
    timelike_dim : int, default=0
        Column of the timelike coordinate ``x_0`` (hyperboloid input only).
"""


class HyperbolicTreeModel(FitTransaction, BaseEstimator, metaclass=ABCMeta):
    """Shared fit/predict logic; subclasses say which native model to wrap.

    Fitted attributes: ``estimator_`` (the corrected native model),
    ``split_index_`` (None when ``estimator_`` reads Klein coordinates; else a
    `SplitIndex`, the float64 Klein thresholds
    whose indices it reads), ``input_dtype_`` (``"float32"`` if float32
    separates every split's two nearest training rows, else ``"float64"``),
    ``n_features_in_`` (columns of the hyperbolic input), ``correction_``
    (a `CorrectionReport`) and, for classifiers,
    ``classes_``.
    """

    _parameter_constraints: ClassVar[dict] = {
        "input_geometry": [StrOptions(set(GEOMETRIES))],
        "curvature": [Interval(Real, None, 0, closed="neither")],
        "timelike_dim": [Integral],
        "midpoint": [StrOptions({"einstein", "arithmetic"})],
        "check_manifold": ["boolean"],
        "tree_space": [StrOptions(set(TREE_SPACES))],
        "input_blocks": [None, list, tuple],
    }

    @abstractmethod
    def _make_estimator(self) -> Any:
        """A new, unfitted native estimator configured from this model's parameters."""

    def _native_template(self) -> Any:
        """The native estimator as configured (unfitted, not to be fitted), for its tags."""
        return self._make_estimator()

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        # Multi-output regression passes through to the native model;
        # classification is single-output (no backend corrects multi-output
        # classifiers).
        native = get_tags(self._native_template())
        tags.target_tags.multi_output = (
            native.target_tags.multi_output and native.estimator_type != "classifier"
        )
        return tags

    # -- data ----------------------------------------------------------------

    def to_klein(self, X: Any) -> np.ndarray:
        """Unit-ball Klein coordinates (float64) that the trees see for points ``X``."""
        check_is_fitted(self)
        k = self._klein(X, reset=False)
        # Klein input comes back from the checks uncopied: the caller gets its own array.
        return k.copy() if isinstance(X, np.ndarray) and np.may_share_memory(k, X) else k

    def _tree_input(self, X: Any) -> np.ndarray:
        """What ``estimator_`` reads for points ``X``: Klein coordinates or split indices."""
        return self._from_klein(self._klein(X, reset=False))

    def _from_klein(self, k: np.ndarray) -> np.ndarray:
        """What ``estimator_`` reads for checked Klein coordinates ``k``."""
        index = getattr(self, "split_index_", None)
        return k if index is None else index.transform(k)

    def _klein(self, X: Any, *, reset: bool) -> np.ndarray:
        # NaN and infinity are left to the geometry check, which names the rows.
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        return self._features(X)

    def _blocks(self) -> tuple | None:
        """The validated input blocks, or None for one hyperbolic geometry."""
        # Oblique (Householder) trees take no input_blocks: their hyperplanes mix
        # coordinates, which across blocks of different geometry is no geodesic split.
        if getattr(self, "input_blocks", None) is None:
            return None
        changed = [
            name
            for name in ("input_geometry", "curvature", "timelike_dim")
            if getattr(self, name) != GEOMETRY_DEFAULTS[name]
        ]
        if changed:
            raise ValueError(
                f"input_blocks describes every column, so {', '.join(changed)} must stay at the "
                "default; give each block its own model and curvature instead."
            )
        return as_blocks(self.input_blocks, n_columns=getattr(self, "n_features_in_", None))

    def _features(self, X: np.ndarray, *, check: bool = True) -> np.ndarray:
        """What the trees see: Klein coordinates, or each block's features side by side
        (``check=False``: of points already checked)."""
        check = check and self.check_manifold
        blocks = self._blocks()
        if blocks is not None:
            return to_features(X, blocks, check=check)
        # Not copied when already Klein: nothing here writes into the points.
        return to_klein(
            X,
            self.input_geometry,
            self.curvature,
            self.timelike_dim,
            check=check,
            copy=False,
        )

    def _midpoint_rules(self) -> Midpoint | np.ndarray:
        """One rule (single geometry), or each feature's rule (input blocks).

        With blocks, ``midpoint="einstein"`` means each block's own geometric
        midpoint (Einstein, angular, arithmetic); ``"arithmetic"`` uses the
        arithmetic one on every block (ablation). Categorical codes always
        keep the backend's thresholds.
        """
        blocks = self._blocks()
        if blocks is None:
            return self.midpoint
        rules = feature_kinds(blocks)
        if self.midpoint == "arithmetic":
            rules = np.where(rules == "keep", rules, "arithmetic").astype(object)
        return rules

    # -- training ------------------------------------------------------------

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any):
        """Fit on hyperbolic points ``X`` and correct every threshold.

        ``fit_params`` are passed to the native model's ``fit``. A refused fit
        leaves the model as it was (`FitTransaction`); a previous fit cannot be
        continued (``warm_start``, ``xgb_model``, ``init_model`` are refused).
        """
        self._validate_params()
        refuse_continuation(self, fit_params)
        # Single-output models (every classifier) ravel a column y with
        # scikit-learn's DataConversionWarning and reject a 2-D one here.
        multi_output = get_tags(self).target_tags.multi_output
        X, y = validate_data(
            self, X, y, dtype=np.float64, multi_output=multi_output, ensure_all_finite=False
        )
        estimator = self._make_estimator()
        backend = backend_for(estimator)
        if sample_weight is not None:  # checked, rows named, before any library sees them
            sample_weight = checked_weights(
                sample_weight,
                X,
                negative_ok=backend.takes_negative_weights(estimator),
                backend=f"{backend.name} {'classifiers' if is_classifier(self) else 'regressors'}",
            )
        Xk = self._features(X)
        space, Xt, params = self._learner_input(backend, estimator, Xk, sample_weight, fit_params)
        klein_input = Xk is X  # Klein points are the caller's array, held anyway
        lean = space.rows is not None and not klein_input
        if lean:  # Klein coordinates computed here need not live through the library's fit
            space = space.with_rows(None)
            del Xk
        fitted = backend.fit(estimator, Xt, y, sample_weight, **params)
        del params
        if lean:
            Xk = self._features(X, check=False)
            space = space.with_rows((Xk, Xt))
        corrected, splits = self._correct(backend, fitted, Xt, y, sample_weight, space)
        del space, Xt  # the float32 check reads neither, only the Klein rows Xk
        self.estimator_, self.correction_, self.split_index_, self.input_dtype_ = corrected
        if is_classifier(self):
            self.classes_ = self._classes(fitted)
        self.n_outputs_ = 1 if np.ndim(y) == 1 else np.shape(y)[1]
        if self.input_dtype_ == "float32":
            if not self._float32_keeps_outputs(X, backend, splits, Xk):
                self.input_dtype_ = "float64"
        return self

    def _learner_input(
        self,
        backend: Backend,
        estimator: Any,
        Xk: np.ndarray,
        sample_weight: np.ndarray | None,
        fit_params: dict[str, Any],
    ) -> tuple[TreeSpace, np.ndarray, dict[str, Any]]:
        """The tree space, the learner's training input (its image of the Klein rows
        ``Xk``) and the learner's fit parameters (evaluation points mapped alike)."""
        blocks = self._blocks()
        if blocks is not None and not (backend.takes_blocks and backend.feature_splits):
            raise ValueError(
                f"{backend.name} models do not take input_blocks (got {self.input_blocks!r}): "
                "leave input_blocks=None and give one hyperbolic geometry, or use a "
                "scikit-learn, XGBoost or LightGBM model for inputs made of blocks."
            )
        native_categorical = blocks is not None and backend.use_categorical(
            estimator, categorical_features(blocks)
        )
        # Codes read natively go into Xt as they are: float64 holds every one.
        # The learner's threads rank the columns too.
        threads = _threads(getattr(estimator, "n_jobs", None))
        space, Xt = self._tree_space(
            backend, Xk, sample_weight, compact=not native_categorical, threads=threads
        )
        to_tree: Callable[[np.ndarray], np.ndarray] = space.transform
        if native_categorical:
            assert blocks is not None  # only input blocks have categorical features
            # Native categorical splits read the codes themselves, never a map of them.
            codes, transform = categorical_features(blocks), space.transform

            def to_tree(F: np.ndarray) -> np.ndarray:
                out = transform(F)
                out[:, codes] = F[:, codes]
                return out

            Xt[:, codes] = Xk[:, codes]
        return space, Xt, self._fit_params(fit_params, to_tree)

    def _float32_keeps_outputs(
        self,
        X: np.ndarray,
        backend: Backend,
        splits: Splits | None,
        klein: np.ndarray | None = None,
    ) -> bool:
        """Whether the training points rounded to float32 get the model's own outputs.

        A float32 graph receives exactly those rounded points and projects them
        as Python does (``hyp2onnx.emit.projection``), so this runs the graph's
        arithmetic on the training rows. The correction's check (float32 keeps
        each split's two nearest Klein values apart) misses that rounding the
        *input* moves a Klein value by up to about two float32 steps.

        The library's ``predict`` runs only on the rows that some split of
        ``splits`` (the native model's, None for oblique splits: every moved
        row) may route apart (`hyp2onnx.ir.crossings`); every other row takes
        the same path in every tree, so gets the same outputs. Rows go in
        blocks, so that the check's copies stay small beside the training data.
        ``klein``: the checked Klein coordinates of ``X`` if known (not recomputed).
        The learner's threads (``n_jobs``) take a block each.
        """
        threads = max(1, _threads(getattr(self.estimator_, "n_jobs", None)))

        def keeps(start: int) -> bool:
            rows = slice(start, start + _CHECK_ROWS)
            return self._float32_keeps_block(
                X[rows], backend, splits, None if klein is None else klein[rows]
            )

        starts = iter(range(0, X.shape[0], _CHECK_ROWS))
        with thread_pool(min(threads, -(-X.shape[0] // _CHECK_ROWS))) as pool:
            while batch := list(itertools.islice(starts, threads)):
                if not all(list(pool.map(keeps, batch))):
                    return False
        return True

    def _float32_keeps_block(
        self, X: np.ndarray, backend: Backend, splits: Splits | None, klein: np.ndarray | None
    ) -> bool:
        """`_float32_keeps_outputs` for one block of rows."""
        rounded = X.astype(np.float32).astype(np.float64)
        moved = np.flatnonzero((rounded != X).any(axis=1))
        if moved.size == 0:
            return True
        # X is fit's validated float64 array, and ``rounded`` a copy of it: the
        # library-side validation of `_tree_input` has nothing left to check.
        try:
            seen_in = self._from_klein(self._features(rounded[moved]))
        except InvalidPointError:  # rounding put a point off the manifold: keep float64
            return False
        own = self._features(X[moved], check=False) if klein is None else klein[moved]
        own_in = self._from_klein(own)
        if splits is not None:
            # Only splits that a row moved this far may cross are searched.
            step = moved_by(own_in, seen_in, backend.zero_band)
            near = splits_in_reach(splits, step, op=backend.op, compare_dtype=backend.compare_dtype)
            rows = rows_that_may_cross(
                near,
                own_in,
                seen_in,
                op=backend.op,
                compare_dtype=backend.compare_dtype,
                zero_band=backend.zero_band,
            )
            if rows.size == 0:
                return True
            seen_in, own_in = seen_in[rows], own_in[rows]
        outputs = getattr(self.estimator_, "predict_proba", self.estimator_.predict)
        return bool(np.array_equal(outputs(seen_in), outputs(own_in)))

    def _fit_params(
        self, fit_params: dict[str, Any], to_tree: Callable[[np.ndarray], np.ndarray]
    ) -> dict[str, Any]:
        """Map evaluation points (``eval_set``, LightGBM's ``eval_X``) as the training points:
        ``to_tree`` of their Klein coordinates, what the learner is fitted on."""
        params = dict(fit_params)

        def points(X: Any) -> np.ndarray:
            return to_tree(self._klein(X, reset=False))

        eval_set = params.get("eval_set")
        if eval_set is not None:
            if isinstance(eval_set, tuple) and len(eval_set) == 2 and np.ndim(eval_set[0]) == 2:
                eval_set = [eval_set]
            params["eval_set"] = [(points(X), self._eval_labels(y)) for X, y in eval_set]
        eval_X = params.get("eval_X")
        if eval_X is not None:
            params["eval_X"] = (
                tuple(points(X) for X in eval_X) if isinstance(eval_X, tuple) else points(eval_X)
            )
        return params

    def _eval_labels(self, y: Any) -> Any:
        """Hook: evaluation labels as the booster expects them."""
        return y

    def _tree_space(
        self,
        backend: Backend,
        Xk: np.ndarray,
        sample_weight: np.ndarray | None,
        *,
        compact: bool = False,
        threads: int = 1,
    ) -> tuple[TreeSpace, np.ndarray]:
        """The map from Klein coordinates to what the learner is fitted on, and its
        image of ``Xk`` (in one pass when the map is fitted on every row, its columns
        ``threads`` at a time; with ``compact``, ranks as float32 where that holds them
        exactly: every library then reads the same numbers, see
        `TreeSpace.fit_transform`)."""
        if not backend.feature_splits:
            # Oblique splits compare projections of all Klein coordinates, which
            # no per-feature map keeps: such learners see the coordinates.
            space = getattr(self, "tree_space", "klein")
            if space != "klein":
                raise ValueError(
                    f"{backend.name} trees split on projections of the Klein coordinates, "
                    f"which tree_space={space!r} does not keep; use tree_space='klein'."
                )
            klein = TreeSpace.fit(Xk[:0], "klein", backend.compare_dtype)
            return klein, klein.transform(Xk)
        # The map is fitted on the rows the learner learns from: a row of zero
        # weight must not change where the others are (random splitters draw
        # thresholds in the space they see).
        weighted = None if sample_weight is None else sample_weight != 0
        if weighted is None or weighted.all() or not weighted.any():
            # Ranks of every row: the space reads its values off them when asked
            # (not compact: categorical codes are to overwrite some ranks).
            return TreeSpace.fit_transform(
                Xk,
                self.tree_space,
                backend.compare_dtype,
                backend.zero_band,
                compact=compact,
                lazy=compact,
                threads=threads,
            )
        space = TreeSpace.fit(
            Xk[weighted], self.tree_space, backend.compare_dtype, backend.zero_band
        )
        return space, space.transform(Xk)

    def _classes(self, fitted: Any) -> np.ndarray:
        """Hook: the class labels in output order."""
        return fitted.classes_

    def _correct(
        self,
        backend: Backend,
        fitted: Any,
        Xt: np.ndarray,
        y: np.ndarray,
        sample_weight: np.ndarray | None,
        space: TreeSpace,
    ) -> tuple[tuple[Any, Any, Any, str], Splits | None]:
        """Correct the thresholds of ``fitted``, trained on ``Xt`` (``space`` of the Klein rows).

        Returns the corrected model, the report, the split index (or None) and
        the input dtype that keeps every split (see `hyp2onnx.correction.correct`),
        then the native model's splits (None for oblique splits, which compare
        projections), for `_float32_keeps_outputs`.
        """
        # The values each tree compared, held in the backend's precision (float32
        # stays float32: half the memory of widening; the correction widens the
        # values it gathers, exactly).
        Xc = _compared(backend, fitted, Xt, space)
        trees = backend.read_trees(fitted)
        comparison = comparison_of(backend)
        rows = backend.training_rows(fitted, y, sample_weight)
        # Trees route their rows on as many threads as the learner was given.
        threads = _threads(getattr(fitted, "n_jobs", None))
        routing = backend.leaf_routing(fitted, Xc)
        neighbours = from_rows(
            trees, Xc, rows, comparison, self._midpoint_rules(), threads=threads, routing=routing
        )
        done = correct(trees, space, neighbours, comparison, self._midpoint_rules())
        splits = None
        if backend.feature_splits:
            splits = Splits.of(trees, done.thresholds, backend.threshold_dtype)
            # A split's margins bound the rows the correction saw reach it; they
            # speak for every training row only if every tree saw them all.
            common = shared_rows(rows)
            if common is not None and common.size == Xt.shape[0]:
                splits = splits._replace(margins=done.margins)
        return write_back(backend, fitted, done), splits

    # -- prediction ----------------------------------------------------------

    def predict(self, X: Any) -> np.ndarray:
        """Labels (classifiers) or values (regressors) for hyperbolic points ``X``."""
        check_is_fitted(self)
        return self.estimator_.predict(self._tree_input(X))

    @property
    def feature_importances_(self) -> np.ndarray:
        """Importances of the Klein features (one per spacelike input column), or of the
        blocks' features in block order."""
        check_is_fitted(self)
        return self.estimator_.feature_importances_

    # -- export --------------------------------------------------------------

    def to_ir(self) -> Model:
        """The fitted model as an `Model` for the emitters."""
        check_is_fitted(self)
        backend = backend_for(self.estimator_)
        ensemble = backend.to_ensemble(self.estimator_)
        index = getattr(self, "split_index_", None)
        if index is not None:
            ensemble = dataclasses.replace(
                ensemble,
                threshold=index.klein_thresholds(ensemble.feature, ensemble.threshold),
                op="<=",
                compare_dtype=index.compare_dtype,
                threshold_dtype=index.compare_dtype,
            )
        space = input_space(self, self._blocks())
        return Model(
            ensemble=ensemble,
            space=space,
            backend=backend.name,
            estimator_class=type(self).__name__,
            input_dtype=getattr(self, "input_dtype_", None),
        )


def input_space(estimator: Any, blocks: tuple | None = None) -> InputSpace:
    """What a fitted estimator's input points are: its geometry parameters, or its blocks."""
    n_input = int(estimator.n_features_in_)
    if blocks is not None:
        return InputSpace("product", float("nan"), 0, n_input, blocks)
    return InputSpace(
        geometry=estimator.input_geometry,
        curvature=float(estimator.curvature),
        timelike_dim=int(estimator.timelike_dim),
        n_input_features=n_input,
    )


def _threads(n_jobs: Any) -> int:
    """Threads for ``n_jobs`` as joblib counts them: None is 1, -1 every CPU, -2 all but one."""
    if not isinstance(n_jobs, Integral) or int(n_jobs) == 0:
        return 1
    jobs = int(n_jobs)
    return jobs if jobs > 0 else max(1, (os.cpu_count() or 1) + 1 + jobs)


def _compared(backend: Backend, fitted: Any, Xt: np.ndarray, space: TreeSpace) -> np.ndarray:
    """What the splits compare (`Backend.compared_values`); float32 ranks as they are,
    whatever the backend's precision: integers below 2**24, exact in every one."""
    if space.space == "ranks" and Xt.dtype == np.float32 and backend.feature_splits:
        return np.ascontiguousarray(Xt)
    return backend.compared_values(fitted, Xt)


def comparison_of(backend: Backend) -> Comparison:
    """How ``backend``'s learner compares, as the correction needs it."""
    return Comparison(
        backend.op, backend.compare_dtype, backend.threshold_dtype, backend.feature_splits
    )


def write_back(backend: Backend, fitted: Any, done: Correction) -> tuple[Any, Any, Any, str]:
    """Store the corrected thresholds in the native model; the fitted attributes to set."""
    model = backend.write_thresholds(fitted, done.thresholds)
    return model, done.report, done.split_index, done.input_dtype


class HyperbolicClassifierMixin:
    """Probability methods of hyperbolic classifiers."""

    # What the concrete model (a HyperbolicTreeModel listed after this mixin)
    # provides; annotations only, so that nothing here shadows its definitions.
    estimator_: Any
    _tree_input: Callable[[Any], np.ndarray]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order."""
        check_is_fitted(self)
        return self.estimator_.predict_proba(self._tree_input(X))

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of `predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))


_KEYWORD = inspect.Parameter.KEYWORD_ONLY


def generate_init(
    cls: type[Any], sources: tuple[type[Any], ...], own: dict[str, Any], *, extra: bool = False
) -> tuple[str, ...]:
    """Give ``cls`` an ``__init__`` taking ``own`` and every keyword of ``sources``.

    Each argument is stored unchanged under its own name, as scikit-learn's
    ``get_params`` and ``clone`` require; the signature is real, so
    ``inspect.signature`` (and scikit-learn) sees every parameter. With
    ``extra=True`` unknown keywords are accepted too and handed to
    ``self._store_extra`` (boosters take parameters their ``__init__`` does
    not name). Returns the names taken from ``sources``.
    """
    native: list[inspect.Parameter] = []
    for source in sources:
        for name, p in inspect.signature(source.__init__).parameters.items():
            if name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            if name not in own and all(q.name != name for q in native):
                native.append(p.replace(kind=_KEYWORD))
    ours = [inspect.Parameter(name, _KEYWORD, default=value) for name, value in own.items()]
    parameters = [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        *ours,
        *native,
    ]
    if extra:
        parameters.append(inspect.Parameter("params", inspect.Parameter.VAR_KEYWORD))
    signature = inspect.Signature(parameters)
    known = {p.name for p in (*ours, *native)}

    def __init__(self, **params: Any) -> None:
        unknown = {name: params.pop(name) for name in list(params) if name not in known}
        bound = signature.bind(self, **params, **({} if extra else unknown))
        bound.apply_defaults()
        for name, value in bound.arguments.items():
            if name not in ("self", "params"):
                setattr(self, name, value)
        if extra:
            self._extra_params = ()
            self._store_extra(unknown)

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    __init__.__qualname__ = f"{cls.__name__}.__init__"
    __init__.__doc__ = (
        f"Store the geometry parameters and {sources[0].__name__}'s own parameters unchanged."
        if sources
        else "Store every parameter unchanged."
    )
    cls.__init__ = __init__
    return tuple(p.name for p in native)


class WrappedParamsModel(HyperbolicTreeModel):
    """A hyperbolic model that takes the wrapped class's own parameters by keyword.

    A subclass sets ``_wrapped`` to a native estimator class; its ``__init__``
    is then generated with every keyword of that class plus the geometry
    parameters, storing each unchanged, as scikit-learn's ``get_params`` and
    ``clone`` require.
    """

    _wrapped: ClassVar[type | None] = None
    _wrapped_params: ClassVar[tuple[str, ...]] = ()
    #: The hyperbolic parameters the generated ``__init__`` takes, with defaults.
    _own_params: ClassVar[dict[str, Any]] = GEOMETRY_DEFAULTS

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrapped = cls.__dict__.get("_wrapped")
        if wrapped is None:
            return
        cls._wrapped_params = generate_init(cls, (wrapped,), cls._own_params)
        cls._parameter_constraints = {
            **getattr(wrapped, "_parameter_constraints", {}),
            **HyperbolicTreeModel._parameter_constraints,
        }

    def _make_estimator(self) -> Any:
        wrapped = self._wrapped
        if wrapped is None:  # what calling None raised before, with a reason
            raise TypeError(f"{type(self).__name__} names no _wrapped estimator class")
        return wrapped(**{name: getattr(self, name) for name in self._wrapped_params})


class HyperbolicEstimator(MetaEstimatorMixin, HyperbolicTreeModel):
    """Make any supported tree model hyperbolic.

    ``estimator`` is an unfitted scikit-learn tree or forest (or any model a
    registered backend handles); a clone of it is fitted on Klein
    coordinates and corrected. Classifier or regressor according to
    ``estimator``.

    Parameters
    ----------
    estimator : estimator instance
        The Euclidean tree model to wrap, e.g. ``ExtraTreesClassifier()``.
    input_geometry, curvature, timelike_dim, midpoint, check_manifold, tree_space, input_blocks
        As for [`HyperbolicDecisionTreeClassifier`][hyp2onnx.HyperbolicDecisionTreeClassifier] (oblique trees take
        ``tree_space="klein"`` only and, like CatBoost, no ``input_blocks``).
    """

    def __init__(
        self,
        estimator: Any,
        *,
        input_geometry: str = GEOMETRY_DEFAULTS["input_geometry"],
        curvature: float = GEOMETRY_DEFAULTS["curvature"],
        timelike_dim: int = GEOMETRY_DEFAULTS["timelike_dim"],
        midpoint: str = GEOMETRY_DEFAULTS["midpoint"],
        check_manifold: bool = GEOMETRY_DEFAULTS["check_manifold"],
        tree_space: str = GEOMETRY_DEFAULTS["tree_space"],
        input_blocks: Any = GEOMETRY_DEFAULTS["input_blocks"],
    ) -> None:
        self.estimator = estimator
        self.input_geometry = input_geometry
        self.curvature = curvature
        self.timelike_dim = timelike_dim
        self.midpoint = midpoint
        self.check_manifold = check_manifold
        self.tree_space = tree_space
        self.input_blocks = input_blocks

    _parameter_constraints = {
        **HyperbolicTreeModel._parameter_constraints,
        "estimator": [HasMethods(["fit", "predict"])],
    }

    def _make_estimator(self) -> Any:
        return clone(self.estimator)

    def _native_template(self) -> Any:
        return self.estimator

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        wrapped = get_tags(self.estimator)
        tags.estimator_type = wrapped.estimator_type
        tags.classifier_tags = wrapped.classifier_tags
        tags.regressor_tags = wrapped.regressor_tags
        tags.target_tags.required = wrapped.target_tags.required
        if tags.classifier_tags is not None:
            tags.classifier_tags.multi_label = False  # classifiers are single-output
        return tags

    @available_if(lambda self: hasattr(self.estimator, "predict_proba"))
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order."""
        return HyperbolicClassifierMixin.predict_proba(self, X)

    @available_if(lambda self: hasattr(self.estimator, "predict_proba"))
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of `predict_proba`."""
        return HyperbolicClassifierMixin.predict_log_proba(self, X)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy for classifiers, R^2 for regressors."""
        metric = accuracy_score if is_classifier(self) else r2_score
        return metric(y, self.predict(X), sample_weight=sample_weight)
