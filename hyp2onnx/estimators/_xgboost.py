"""XGBoost boosters (``XGBClassifier``, ``XGBRegressor``).

XGBoost casts inputs to float32 and sends a row left iff
``float32(x) < split_condition``, a float32 threshold (missing values take
the node's default direction; hyperbolic input has none, and a ``missing``
other than NaN is refused: see ``_refuse_missing``). With ``hist`` the
thresholds are bin cuts equal to training values, so treating the test as
``<=`` would misroute those rows.

Categorical splits (from ``Categorical`` input blocks, ``feature_types``
'c') send a row *right* iff its code is in the node's set; every other value
(other codes, negative, past the largest category) goes left, NaN to the
default side. The Ensemble's set-membership node sends members left, so the
children of those nodes are swapped when read. (XGBoost truncates a
fractional value to an integer first; hyp2onnx refuses fractional codes.)

Trees are read from and written to the booster's UBJSON model, the binary
encoding of its JSON model (same schema): floats are stored as exact
float32 bits, there is no decimal round trip, and its typed arrays are
views into one buffer, so corrected thresholds are written into that buffer
and loaded back with ``Booster.load_model``. Parsing and loading cost a few
milliseconds for 100 trees, a third of the JSON text route.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import xgboost
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils import assert_all_finite
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d

from ..errors import UnsupportedModelError
from ..ir import XGBOOST_LOGISTIC_THRESHOLD, Ensemble, Model
from ..ir.trees import CategorySets, TreeArrays
from ._base import HyperbolicClassifierMixin
from ._booster import BoosterBackend, BoostingModel, boosting_doc
from ._interface import refuse_row_scores

#: Objectives whose prediction is the raw score itself.
_IDENTITY_OBJECTIVES = {
    "reg:squarederror",
    "reg:squaredlogerror",
    "reg:pseudohubererror",
    "reg:absoluteerror",
    "reg:quantileerror",
}


# -- UBJSON (https://ubjson.org), the subset XGBoost writes -------------------

#: UBJSON number markers: (numpy dtype, struct code), all big-endian.
_NUMBERS = {
    "i": ("i1", "b"),
    "U": ("u1", "B"),
    "I": ("i2", "h"),
    "l": ("i4", "i"),
    "L": ("i8", "q"),
    "d": ("f4", "f"),
    "D": ("f8", "d"),
}
_ARRAYS = {ord(m): np.dtype(">" + dtype) for m, (dtype, _) in _NUMBERS.items()}
_SCALARS = {ord(m): struct.Struct(">" + code) for m, (_, code) in _NUMBERS.items()}


_CONSTANTS = {ord("T"): True, ord("F"): False, ord("Z"): None}
_TEXT, _OBJECT, _ARRAY, _OBJECT_END, _ARRAY_END, _TYPE, _COUNT = map(ord, "S{[}]$#")


def _ubj_load(buf: bytearray) -> Any:
    """Parse UBJSON; typed numeric arrays become numpy views into ``buf``.

    Markers and keys are read from an immutable copy (faster to index), keys
    decoded once each; the typed arrays that make most of a model are read
    in the object loop itself.
    """
    data, scalars, arrays = bytes(buf), _SCALARS, _ARRAYS
    keys: dict[bytes, str] = {}

    def length(i: int) -> tuple[int, int]:
        s = scalars[data[i]]
        return s.unpack_from(data, i + 1)[0], i + 1 + s.size

    def text(i: int) -> tuple[str, int]:
        k, i = length(i)
        raw = data[i : i + k]
        if raw not in keys:
            keys[raw] = raw.decode()
        return keys[raw], i + k

    def typed_array(i: int, typed: int) -> tuple[np.ndarray, int]:
        """The typed array whose count marker is at ``i``."""
        dt = arrays[typed]
        count, i = length(i + 1)
        return np.frombuffer(buf, dt, count, i), i + count * dt.itemsize

    def value(i: int, marker: int) -> tuple[Any, int]:
        s = scalars.get(marker)
        if s is not None:
            return s.unpack_from(data, i)[0], i + s.size
        if marker == _TEXT:
            return text(i)
        if marker in _CONSTANTS:
            return _CONSTANTS[marker], i
        if marker != _ARRAY and marker != _OBJECT:
            raise UnsupportedModelError(
                f"unexpected UBJSON marker {chr(marker)!r} in the XGBoost model"
            )
        typed = count = None
        if data[i] == _TYPE:
            typed, i = data[i + 1], i + 2
        if marker == _ARRAY and typed in arrays:
            if data[i] != _COUNT:  # UBJSON gives a typed container its count ($ then #)
                raise UnsupportedModelError(
                    "a typed UBJSON array without a count in the XGBoost model"
                )
            return typed_array(i, typed)
        if data[i] == _COUNT:
            count, i = length(i + 1)
        end = _OBJECT_END if marker == _OBJECT else _ARRAY_END
        items: list[Any] = []
        while (len(items) < count) if count is not None else (data[i] != end):
            if marker == _OBJECT:
                key, i = text(i)
            item_marker, i = (data[i], i + 1) if typed is None else (typed, i)
            numeric = item_marker == _ARRAY and data[i] == _TYPE and data[i + 1] in arrays
            if numeric and data[i + 2] == _COUNT:  # most of a model: read here
                item, i = typed_array(i + 2, data[i + 1])
            else:
                item, i = value(i, item_marker)
            items.append((key, item) if marker == _OBJECT else item)
        i += 1 if count is None else 0
        return (dict(items) if marker == _OBJECT else items), i

    return value(1, data[0])[0]


# -- the model -------------------------------------------------------------


def _float32_list(text: str) -> np.ndarray:
    """XGBoost's ``base_score``: "0.5" (2.x) or "[5E-1,...]" (3.x), as float32."""
    return np.array([float(v) for v in text.strip("[]").split(",")], dtype=np.float32)


class _Model:
    """A parsed XGBoost booster: the raw UBJSON buffer and views into it."""

    def __init__(self, booster: Any) -> None:
        self.raw = booster.save_raw(raw_format="ubj")
        learner = _ubj_load(self.raw)["learner"]
        booster_json = learner["gradient_booster"]
        kind = booster_json.get("name")
        if kind != "gbtree":
            raise UnsupportedModelError(
                f"XGBoost booster={kind!r} is not supported; use booster='gbtree' (the default)."
            )
        model = booster_json["model"]
        self.trees = model["trees"]
        self.tree_info = np.asarray(model["tree_info"], dtype=np.int64)
        self.iteration_indptr = np.asarray(model.get("iteration_indptr", []), dtype=np.int64)
        self.objective = learner["objective"]["name"]
        param = learner["learner_model_param"]
        self.n_features = int(param["num_feature"])
        self.n_classes = int(param.get("num_class", "0"))
        self.n_targets = int(param.get("num_target", "1"))
        self.base_score = _float32_list(param["base_score"])
        for tree in self.trees:
            if int(tree["tree_param"].get("size_leaf_vector", "1")) > 1:
                raise UnsupportedModelError(
                    "XGBoost trees with vector leaves (multi_strategy='multi_output_tree') "
                    "are not supported; use the default one_output_per_tree."
                )

    def category_sets(self, i: int) -> dict[int, np.ndarray]:
        """Codes of each categorical split of tree ``i`` (XGBoost sends them right)."""
        tree = self.trees[i]
        if not np.any(np.asarray(tree["split_type"]) != 0):
            return {}
        codes = np.asarray(tree["categories"], dtype=np.int64)
        starts = np.asarray(tree["categories_segments"], dtype=np.int64)
        sizes = np.asarray(tree["categories_sizes"], dtype=np.int64)
        nodes = np.asarray(tree["categories_nodes"], dtype=np.int64)
        return {int(j): codes[a : a + k] for j, a, k in zip(nodes, starts, sizes, strict=True)}

    def arrays(self, i: int) -> TreeArrays:
        """Tree ``i``; a categorical split's children are swapped, so that, as the
        Ensemble has it, a row goes left iff its code is in the node's set."""
        tree = self.trees[i]
        left = np.asarray(tree["left_children"], dtype=np.int64)
        right = np.asarray(tree["right_children"], dtype=np.int64)
        leaf = left < 0
        feature = np.where(leaf, -1, np.asarray(tree["split_indices"], dtype=np.int64))
        threshold = np.where(leaf, 0.0, np.asarray(tree["split_conditions"], dtype=np.float64))
        left, right = np.where(leaf, -1, left), np.where(leaf, -1, right)
        sets = self.category_sets(i)
        categories = None
        if sets:
            categories = CategorySets.from_sets(leaf.shape[0], sets)
            member = categories.member
            left, right = np.where(member, right, left), np.where(member, left, right)
        return TreeArrays(feature, threshold, left, right, categories)

    def leaf_values(self, i: int) -> np.ndarray:
        """Float32 leaf values (XGBoost keeps a leaf's value in split_conditions)."""
        tree = self.trees[i]
        leaf = np.asarray(tree["left_children"]) < 0
        return np.where(leaf, np.asarray(tree["split_conditions"], dtype=np.float32), 0)

    def base_margin(self) -> np.ndarray:
        """The float32 score every row starts from, one per output."""
        if self.objective in ("binary:logistic", "reg:logistic"):
            # ProbToMargin: -log(1/p - 1), in float32.
            q = np.float32(1.0) / self.base_score - np.float32(1.0)
            return (-np.log(q.astype(np.float64))).astype(np.float32)
        return self.base_score


def _booster(fitted: Any) -> Any:
    return fitted.get_booster()


def _refuse_missing(model: Any) -> None:
    """Refuse a ``missing`` other than NaN (the default): XGBoost sends every value equal
    to it to each split's default side, which the threshold correction and the exported
    graph do not model (they compare it like any other value)."""
    missing = model.get_params().get("missing", np.nan)
    if missing is not None and not np.isnan(missing):
        raise UnsupportedModelError(
            f"XGBoost missing={missing!r} is not supported: XGBoost sends every value equal "
            "to it to each split's default side, but the threshold correction and the "
            "exported graph compare it like any other value, so points with a coordinate "
            f"equal to {missing!r} would be scored differently. Hyperbolic coordinates have "
            "no missing values: leave missing at its default, nan."
        )


#: Largest categorical code + 1 that XGBoost trains on: it holds categories as
#: float32 and refuses codes from 2**24 on with an XGBoostError (measured with
#: XGBoost 3.2; codes up to 2**31 - 1, the other backends' range, fail). When
#: predicting it sends larger codes where unseen ones go, as the graph does.
MAX_TRAINING_CATEGORY = 1 << 24


def _check_training_codes(codes: np.ndarray, what: str) -> None:
    """Refuse codes XGBoost cannot train on, naming the rows, before XGBoost raises."""
    too_large = (codes >= MAX_TRAINING_CATEGORY).any(axis=1)
    if too_large.any():
        rows = np.flatnonzero(too_large)
        shown = ", ".join(map(str, rows[:5])) + (", ..." if rows.size > 5 else "")
        raise ValueError(
            f"{rows.size} row(s) of {what} have categorical codes of {MAX_TRAINING_CATEGORY} or "
            f"more (rows {shown}), which XGBoost cannot train on (its largest is "
            f"{MAX_TRAINING_CATEGORY - 1}; other backends take codes up to 2**31 - 1): renumber "
            "the categories as consecutive codes from 0 (sklearn.preprocessing.OrdinalEncoder), "
            "or train a LightGBM model (hyp2onnx.HyperbolicLGBMClassifier, ...)."
        )


class XGBoostBackend(BoosterBackend):
    name = "xgboost"
    op = "<"
    compare_dtype = "float32"
    threshold_dtype = "float32"
    title = "XGBoost"
    native = (xgboost.XGBClassifier, xgboost.XGBRegressor)
    booster = xgboost.Booster
    loader = xgboost.core

    def __init__(self) -> None:
        super().__init__()
        self._categorical_features = np.zeros(0, np.int64)

    def use_categorical(self, estimator: Any, features: np.ndarray) -> bool:
        """Split ``features`` natively (set membership: ``feature_types`` 'c')."""
        if features.size == 0:
            return False
        if estimator.get_params().get("feature_types") is not None:
            raise UnsupportedModelError(
                "feature_types is set from input_blocks (Categorical blocks become 'c'); "
                "leave it out."
            )
        self._categorical_features = np.asarray(features, dtype=np.int64)
        return True

    def categorical_fit(
        self, estimator: Any, Xk: np.ndarray, fit_params: dict[str, Any]
    ) -> dict[str, Any]:
        if self._categorical_features.size:
            _check_training_codes(Xk[:, self._categorical_features], "X")
            for i, pair in enumerate(fit_params.get("eval_set") or ()):
                _check_training_codes(
                    np.asarray(pair[0])[:, self._categorical_features], f"eval_set[{i}]"
                )
            types = np.full(Xk.shape[1], "q", dtype=object)
            types[self._categorical_features] = "c"
            estimator.set_params(enable_categorical=True, feature_types=types.tolist())
        return fit_params

    @classmethod
    def load_file(cls, path: Path) -> Any:
        """An XGBClassifier or XGBRegressor from ``save_model``'s ``.json``/``.ubj`` file.

        The file does not say classifier or regressor; its objective does:
        ``binary:*`` and ``multi:*`` load as classifiers.
        """
        booster = xgboost.Booster(model_file=str(path))
        objective = json.loads(booster.save_config())["learner"]["objective"]["name"]
        classifier = objective.startswith(("binary:", "multi:"))
        model = xgboost.XGBClassifier() if classifier else xgboost.XGBRegressor()
        model.load_model(str(path))
        return model

    # -- training --------------------------------------------------------

    @staticmethod
    def row_subsampling(estimator: Any) -> str | None:
        """Which parameter makes trees see random row subsets, or None."""
        subsample = estimator.get_params().get("subsample")
        if subsample is not None and subsample < 1.0:
            return f"subsample={subsample}"
        return None

    @staticmethod
    def disable_row_subsampling(estimator: Any) -> None:
        """Make every tree see every training row (column sampling is harmless)."""
        estimator.set_params(subsample=1.0)

    def check_fit(self, estimator: Any, y: np.ndarray, fit_params: dict[str, Any]) -> None:
        _refuse_missing(estimator)
        params = estimator.get_params()
        if params.get("booster") not in (None, "gbtree"):
            raise UnsupportedModelError(
                f"XGBoost booster={params['booster']!r} is not supported; use 'gbtree'."
            )
        if any(t == "c" for t in (params.get("feature_types") or ())):
            raise UnsupportedModelError(
                "categorical splits are not hyperbolic: Klein coordinates are continuous. "
                "Declare categorical columns with input_blocks=[..., Categorical(n)] instead "
                "of feature_types 'c'."
            )
        refuse_row_scores(fit_params, "base_margin", "base_margin_eval_set")
        if np.ndim(y) != 1 and type(estimator) is not xgboost.XGBRegressor:
            raise UnsupportedModelError(
                "multi-label XGBoost classifiers are not supported; pass a 1-D y."
            )

    def training_rows(
        self, fitted: Any, y: np.ndarray, sample_weight: np.ndarray | None
    ) -> list[np.ndarray]:
        # Rows of zero weight carry no gradient and no sketch weight.
        n = np.shape(y)[0]
        rows = np.arange(n) if sample_weight is None else np.flatnonzero(sample_weight > 0)
        return [rows] * len(self._model(fitted).trees)

    # -- trees -------------------------------------------------------------

    def parse(self, fitted: Any) -> _Model:
        return _Model(_booster(fitted))

    def read_trees(self, fitted: Any) -> list[TreeArrays]:
        model = self._model(fitted)
        return [model.arrays(i) for i in range(len(model.trees))]

    def write_thresholds(self, fitted: Any, thresholds: list[np.ndarray]) -> Any:
        model = self._model(fitted)
        self._parsed = None
        for tree, new in zip(model.trees, thresholds, strict=True):
            conditions = tree["split_conditions"]  # a writable view into model.raw
            internal = np.asarray(tree["left_children"]) >= 0
            values = np.asarray(new, dtype=np.float64)[internal]
            if np.any(values.astype(np.float32).astype(np.float64) != values):
                raise ValueError("XGBoost thresholds must be float32 values")
            conditions[internal] = values
        booster = _booster(fitted)
        config = booster.save_config()
        booster.load_model(model.raw)
        booster.load_config(config)
        return fitted

    # -- description -----------------------------------------------------

    def outputs(self, fitted: Any, model: _Model) -> tuple[int, str]:
        objective = model.objective
        if type(fitted) is xgboost.XGBClassifier:
            if model.n_targets > 1:
                raise UnsupportedModelError(
                    "multi-label XGBoost classifiers are not supported; fit one per label."
                )
            if objective == "binary:logistic":
                return 1, "logistic"
            if objective == "multi:softprob":
                return model.n_classes, "softmax"
            raise UnsupportedModelError(
                f"XGBClassifier objective {objective!r} is not supported; use the default "
                "('binary:logistic', or 'multi:softprob' for more classes)."
            )
        if objective not in _IDENTITY_OBJECTIVES:
            raise UnsupportedModelError(
                f"XGBRegressor objective {objective!r} is not supported: its prediction is not "
                f"the raw score. Supported: {', '.join(sorted(_IDENTITY_OBJECTIVES))}."
            )
        # Several targets (a 2-D y, or several quantiles): one tree per target
        # and iteration (multi_strategy="one_output_per_tree").
        return model.n_targets, "identity"

    def _used_trees(self, fitted: Any, model: _Model) -> int:
        """Trees ``predict`` uses: up to the best iteration after early stopping."""
        try:
            best = int(fitted.best_iteration)
        except (AttributeError, ValueError, TypeError):
            return len(model.trees)
        if model.iteration_indptr.size > best + 1:
            return int(model.iteration_indptr[best + 1])
        return len(model.trees)

    def to_ensemble(self, fitted: Any) -> Ensemble:
        """Trees as XGBoost predicts: float32 sums in tree order.

        XGBoost starts every row at the base margin and adds the trees'
        float32 leaf values one by one. The base margin of each output is
        folded into the leaves of that output's first tree, which gives the
        same float32 sums bit for bit (the Ensemble adds its base values
        last).
        """
        _refuse_missing(fitted)
        model = self._model(fitted)
        classifier = type(fitted) is xgboost.XGBClassifier
        n_outputs, post = self.outputs(fitted, model)
        binary = classifier and post == "logistic"
        if binary and getattr(fitted, "n_classes_", 2) < 2:  # its margins are infinite
            raise ValueError(
                "this XGBoost classifier was trained on one class; XGBoost and LightGBM "
                "classifiers need at least two classes in y: train on data with two or more "
                "classes"
            )
        base = model.base_margin()
        if base.size != n_outputs:
            base = np.broadcast_to(base, (n_outputs,)).astype(np.float32)
        n_used = self._used_trees(fitted, model)
        targets = model.tree_info[:n_used] if n_outputs > 1 else np.zeros(n_used, np.int64)

        trees, values = [], []
        folded = np.zeros(n_outputs, dtype=bool)
        for i in range(n_used):
            arrays = model.arrays(i)
            leaf = arrays.feature < 0
            target = int(targets[i])
            leaf_values = model.leaf_values(i)
            if not folded[target]:
                leaf_values = np.where(leaf, leaf_values + base[target], 0).astype(np.float32)
                folded[target] = True
            value = np.zeros((leaf.shape[0], n_outputs))
            value[:, target] = leaf_values
            trees.append(arrays)
            values.append(value)
        return self.boosted(
            trees,
            values,
            model.n_features,
            base_values=np.where(folded, 0.0, base.astype(np.float64)),
            post_transform=post,
            sum_dtype="float32",
            classes=np.arange(max(model.n_classes, 2)) if classifier else None,
            tree_target=targets.astype(np.int64) if n_outputs > 1 else None,
            # binary: XGBClassifier.predict takes p > 0.5 of its float32 sigmoid
            label_rule="above" if binary else "probabilities",
            label_threshold=XGBOOST_LOGISTIC_THRESHOLD if binary else 0.0,
        )


# -- the hyperbolic estimators ------------------------------------------------

_XGB_DOC = dict(
    summary="Hyperbolic XGBoost {what}: XGBoost on Klein coordinates with Einstein-midpoint "
    "thresholds (compared as XGBoost does: ``x < t`` in float32).",
    rows="``subsample``",
    columns="``colsample_bytree``, ``colsample_bylevel``, ``colsample_bynode``",
)


#: The classifier's summary also says what labels it takes.
_XGB_LABELS = (
    _XGB_DOC["summary"] + "\n\n    Labels may be any values (strings too); XGBoost sees them "
    "encoded as 0..k-1."
)


class HyperbolicXGBClassifier(HyperbolicClassifierMixin, ClassifierMixin, BoostingModel):
    __doc__ = boosting_doc(
        "classifier", "xgboost.XGBClassifier", **{**_XGB_DOC, "summary": _XGB_LABELS}
    )
    _native = xgboost.XGBClassifier
    _signature_from = (xgboost.XGBModel,)
    _backend = XGBoostBackend

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any):
        """Fit on hyperbolic points ``X`` and labels ``y`` (any values)."""
        y = column_or_1d(y, warn=True)
        assert_all_finite(y, input_name="y")
        check_classification_targets(y)
        self._labels, encoded = np.unique(y, return_inverse=True)
        return super().fit(X, encoded, sample_weight, **fit_params)

    def _classes(self, fitted: Any) -> np.ndarray:
        return self._labels

    def _eval_labels(self, y: Any) -> np.ndarray:
        y = column_or_1d(y)
        index = np.searchsorted(self._labels, y)
        index = np.minimum(index, self._labels.size - 1)
        if np.any(self._labels[index] != y):
            unseen = np.setdiff1d(y, self._labels)
            raise ValueError(f"eval_set has labels {unseen[:5].tolist()} not seen in y.")
        return index

    def predict(self, X: Any) -> np.ndarray:
        """Labels (in ``classes_``) for hyperbolic points ``X``."""
        check_is_fitted(self)
        return self.classes_[self.estimator_.predict(self._tree_input(X))]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, columns in ``classes_`` order (XGBoost's float32, widened)."""
        return super().predict_proba(X).astype(np.float64)

    def to_ir(self) -> Model:
        model = super().to_ir()
        ensemble = dataclasses.replace(model.ensemble, classes=np.asarray(self.classes_))
        return dataclasses.replace(model, ensemble=ensemble)


class HyperbolicXGBRegressor(RegressorMixin, BoostingModel):
    __doc__ = boosting_doc("regressor", "xgboost.XGBRegressor", **_XGB_DOC)
    _native = xgboost.XGBRegressor
    _signature_from = (xgboost.XGBModel,)
    _backend = XGBoostBackend

    def predict(self, X: Any) -> np.ndarray:
        """Values for hyperbolic points ``X`` (XGBoost's float32, widened exactly)."""
        return super().predict(X).astype(np.float64)
