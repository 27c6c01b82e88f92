"""CatBoost models (``CatBoostClassifier``, ``CatBoostRegressor``): symmetric trees.

CatBoost quantizes each feature with one sorted list of float32 borders that
all trees share. A symmetric (oblivious) tree of depth D tests one
(feature, border) split per level, the same at every node of the level, and
a row reaches leaf ``sum_j [float32(x[f_j]) > border_j] << j`` (split ``j``
of the model's list sets bit ``j``). So a row goes left iff
``float32(x) <= border``; checked against CatBoost's raw predictions on rows
on and one float32 ulp either side of every border, which also showed the
raw score to be the float64 sum of leaf values in tree order, times
``scale``, plus ``bias``.

Because a border is shared by every split that uses it, it is corrected
among all training rows: each border is handed to the correction as a
one-split tree over every row, and moves to the Einstein midpoint of the
two nearest training values on its sides. Every training row then keeps
its side of every border, so its quantized value, and the leaf it reaches
in every tree, are unchanged, whatever rows a tree was grown on (CatBoost's
bootstrap needs no switching off).

The model is read and written through CatBoost's own JSON model format
(``save_model``/``load_model`` with ``format="json"``): borders are float32
values written in full. CatBoost's JSON reader rounds the last bit of some
leaf values, so leaf values are read with ``get_leaf_values`` and, after the
corrected JSON is loaded, put back with ``set_leaf_values``.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import catboost
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets

from ..errors import DamagedModelError, UnsupportedModelError
from ..ir import Ensemble
from ..ir.trees import TreeArrays
from ._base import HyperbolicClassifierMixin, WrappedParamsModel
from ._catboost_probe import exercise as exercise_natively
from ._interface import Array, Backend, Weights, refuse_row_scores
from ._probe import UnreadableFileError, native_error, run_child

_CLASSES = (catboost.CatBoostClassifier, catboost.CatBoostRegressor)
#: Regression losses whose prediction is the raw score itself.
_IDENTITY_LOSSES = {"RMSE", "MAE", "Quantile", "MAPE", "Huber", "Expectile", "Lq", "MultiRMSE"}
#: Classification losses and the link from raw scores to probabilities.
_CLASSIFIER_LOSSES = {"Logloss": "logistic", "CrossEntropy": "logistic", "MultiClass": "softmax"}
_NON_NUMERIC = ("cat_features", "text_features", "embedding_features")


def _quiet() -> Any:
    """A context in which CatBoost's native log lines (e.g. "There are invalid params and
    some of them will be ignored." for a damaged file) are dropped instead of written to
    stderr, where they would stand beside the command's one error line."""
    import io

    fixup = getattr(getattr(catboost, "core", None), "log_fixup", None)
    if fixup is None:  # an older or newer catboost without it: nothing to silence with
        import contextlib

        return contextlib.nullcontext()
    return fixup(io.StringIO(), io.StringIO())


def _damaged(exc: Exception, doing: str = "write it out") -> DamagedModelError:
    """A CatBoost model its own library cannot read back: damaged, not a hyp2onnx bug.

    A `DamagedModelError`, which export passes on (other ValueErrors it
    reads as "not fitted")."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    text = re.sub(r"^\S+\.(?:cpp|h):\d+:\s*", "", text)  # "catboost/libs/x.cpp:507: "
    return DamagedModelError(
        f"the CatBoost model is damaged: CatBoost cannot {doing} ({type(exc).__name__}: "
        f"{text}); fit it again or save an undamaged copy"
    )


def _loss(model: Any) -> str:
    """The model's loss function, as its parameters name it."""
    try:
        with _quiet():  # a damaged file's parameters: "There are invalid params ..."
            return str(model.get_all_params()["loss_function"]).split(":")[0]
    except (catboost.CatBoostError, KeyError) as exc:
        raise _damaged(exc, "state its loss function") from exc


def _check_probability_threshold(fitted: Any) -> None:
    """Refuse a binary model whose labels use another probability threshold than 1/2."""
    threshold = fitted.get_probability_threshold()
    if threshold != 0.5:
        raise UnsupportedModelError(
            f"the CatBoost model labels rows with probability threshold {threshold}; the "
            "graph's labels follow the default 0.5 (raw score above 0). Call "
            "set_probability_threshold(0.5) before exporting, and compare the graph's "
            "probabilities with your threshold instead."
        )


class _Model:
    """A CatBoost model as its JSON export states it, with exact leaf values."""

    def __init__(self, fitted: Any) -> None:
        try:
            with tempfile.TemporaryDirectory() as folder:
                path = Path(folder) / "model.json"
                fitted.save_model(str(path), format="json")
                self.json = json.loads(path.read_text(encoding="utf-8"))
            leaf_values = fitted.get_leaf_values()
        # e.g. "JSON writer: invalid float value: nan"; bytes that are not UTF-8
        except (catboost.CatBoostError, ValueError) as exc:
            raise _damaged(exc) from exc
        try:
            self._read(leaf_values)
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            if isinstance(exc, UnsupportedModelError):
                raise
            raise _damaged(exc, "state its trees in its JSON format") from exc

    def _read(self, leaf_values: Any) -> None:
        """The fields export uses, from the JSON model."""
        if "oblivious_trees" not in self.json:
            raise UnsupportedModelError(
                "only symmetric CatBoost trees are supported; fit with "
                "grow_policy='SymmetricTree' (the default)."
            )
        features = self.json["features_info"]
        for kind in ("categorical_features", "text_features", "embedding_features"):
            if features.get(kind):
                raise UnsupportedModelError(
                    f"the CatBoost model has {kind.replace('_', ' ')}; Klein coordinates are "
                    "numeric: fit without cat_features/text_features/embedding_features."
                )
        self.floats = features.get("float_features", [])
        self.border_feature = np.array(
            [f["flat_feature_index"] for f in self.floats for _ in f["borders"]], dtype=np.int64
        )
        self.borders = np.array([b for f in self.floats for b in f["borders"]], dtype=np.float64)
        scale, bias = self.json["scale_and_bias"]
        self.scale = float(scale)
        self.bias = np.atleast_1d(np.asarray(bias, dtype=np.float64))
        self.trees = self.json["oblivious_trees"]
        self.leaf_values = np.asarray(leaf_values, dtype=np.float64)
        self.n_features = max((f["flat_feature_index"] + 1 for f in self.floats), default=0)
        self._check_format(n_dims=self.bias.size)
        for tree in self.trees:
            for split in tree["splits"]:
                i = split.get("split_index", -1)
                if split.get("split_type") != "FloatFeature" or not (
                    0 <= i < self.borders.size and self.borders[i] == split["border"]
                ):
                    raise UnsupportedModelError(
                        f"unsupported CatBoost split {split}: only float-feature borders are."
                    )

    def _check_format(self, n_dims: int) -> None:
        """Refuse a model that breaks what CatBoost's format promises (a damaged file).

        CatBoost finds a value's bin by binary search over each feature's
        borders, which it assumes finite and strictly increasing; a graph
        compares each split's border directly. The two agree only on such
        borders. The leaf values must fill every tree's ``2**depth`` leaves.
        """
        for f in self.floats:
            b = np.asarray(f["borders"], dtype=np.float64)
            bad = np.flatnonzero(~np.isfinite(b[:-1]) | ~(np.diff(b) > 0))
            if b.size and not np.isfinite(b[-1]):
                bad = np.append(bad, b.size - 1)
            if bad.size:
                i = int(bad[0])
                shown = ", ".join(
                    f"borders[{j}] = {b[j]:.6g}" for j in range(i, min(i + 2, b.size))
                )
                raise DamagedModelError(
                    f"the CatBoost model is damaged: the borders of feature "
                    f"{f['flat_feature_index']} are not finite and strictly increasing "
                    f"({shown}); save an undamaged copy"
                )
        want = sum((1 << len(t["splits"])) * n_dims for t in self.trees)
        if self.leaf_values.size != want:
            raise DamagedModelError(
                f"the CatBoost model is damaged: its {len(self.trees)} trees have {want} leaf "
                f"values, but it holds {self.leaf_values.size}; save an undamaged copy"
            )

    def splits(self, tree: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Border indices of a tree's splits (bit order) and their features."""
        index = np.array([s["split_index"] for s in tree["splits"]], dtype=np.int64)
        return index, self.border_feature[index]

    def with_borders(self, borders: np.ndarray) -> dict[str, Any]:
        """The JSON model with new border values (in the registry's order); a copy of
        what changes, sharing the rest (the leaf values) with this model's."""
        info = self.json["features_info"]
        floats, i = [], 0
        for feature in info["float_features"]:
            n = len(feature["borders"])
            floats.append({**feature, "borders": [float(b) for b in borders[i : i + n]]})
            i += n
        trees = [
            {
                **tree,
                "splits": [
                    {**split, "border": float(borders[split["split_index"]])}
                    for split in tree["splits"]
                ],
            }
            for tree in self.json["oblivious_trees"]
        ]
        return {
            **self.json,
            "features_info": {**info, "float_features": floats},
            "oblivious_trees": trees,
        }


#: The child's script, run as a file, not a module (no hyp2onnx import), and without its
#: folder on the module path.
_CATBOOST_PROBE = Path(__file__).with_name("_catboost_probe.py")
_RUN_FILE = (
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


class CatBoostBackend(Backend):
    name = "catboost"
    # Its borders are shared by every tree of a feature; per-block midpoints and
    # categorical codes are not wired to them.
    takes_blocks = False
    op = "<="
    compare_dtype = "float32"
    threshold_dtype = "float32"
    native = _CLASSES

    def __init__(self) -> None:
        # One fit reads the model four times (checks, rows, trees, thresholds);
        # each read is a JSON export and parse. Kept until the model changes.
        self._parsed: tuple[Any, _Model] | None = None

    def _model(self, fitted: Any) -> _Model:
        """``fitted``'s `_Model`, parsed once while this backend does not change it."""
        if self._parsed is None or self._parsed[0] is not fitted:
            self._parsed = (fitted, _Model(fitted))
        return self._parsed[1]

    @classmethod
    def load_file(cls, path: Path) -> Any:
        """A CatBoostClassifier or CatBoostRegressor from ``save_model``'s ``.cbm`` file.

        Its loss decides: Logloss, CrossEntropy and MultiClass load as classifiers.
        """
        with _quiet():  # a damaged file's warnings would go to stderr beside our error
            model = catboost.CatBoost()
            model.load_model(str(path))
            loss = _loss(model)
            cls_ = (
                catboost.CatBoostClassifier
                if loss in _CLASSIFIER_LOSSES
                else catboost.CatBoostRegressor
            )
            loaded = cls_()
            loaded.load_model(str(path))
        return loaded

    @classmethod
    def check_file(cls, path: Path) -> None:
        """Read ``path`` and make hyp2onnx's later calls in a child (``_catboost_probe.py``).

        CatBoost crashes its process on some damaged trees, and only later:
        in its JSON export or ``predict``.
        """
        done = run_child(
            ["-c", _RUN_FILE, str(_CATBOOST_PROBE)],
            path,
            crash="damaged CatBoost model file: loading it crashed ({signal})",
            slow="loading it did not finish in {seconds} s",
        )
        if done.returncode == 3:
            raise UnreadableFileError(
                f"not a catboost model file, or a damaged one ({native_error(done)})"
            )

    @classmethod
    def exercise(cls, obj: Any) -> bool:
        if not isinstance(obj, catboost.CatBoost):
            return False
        exercise_natively(obj)
        return True

    @classmethod
    def labels(cls, fitted: Any, X: np.ndarray) -> np.ndarray:
        """The classes, one per row: CatBoost's multiclass ``predict`` returns ``(n, 1)``."""
        label = np.asarray(fitted.predict(X))
        return label[:, 0] if label.ndim == 2 and label.shape[1] == 1 else label

    # -- training --------------------------------------------------------

    def fit(
        self, estimator: Any, Xk: Array, y: Array, sample_weight: Weights, **fit_params: Any
    ) -> Any:
        params = estimator.get_params()
        for name in _NON_NUMERIC:
            if params.get(name) or fit_params.get(name):
                raise UnsupportedModelError(
                    f"{name} are not hyperbolic: Klein coordinates are numeric. Fit without them."
                )
        if params.get("grow_policy") not in (None, "SymmetricTree"):
            raise UnsupportedModelError(
                f"CatBoost grow_policy={params['grow_policy']!r} is not supported; use "
                "'SymmetricTree' (the default)."
            )
        refuse_row_scores(fit_params, "baseline")
        if Xk.shape[0] < 2:
            raise ValueError(f"CatBoost needs at least 2 samples to fit; got {Xk.shape[0]} sample.")
        if isinstance(estimator, catboost.CatBoostClassifier):
            if np.ndim(y) != 1:
                raise UnsupportedModelError("multi-label CatBoost classifiers are not supported.")
            check_classification_targets(y)
            if np.unique(y).size < 2:
                raise ValueError("CatBoost classifiers need at least 2 classes; y has 1 class.")
        estimator.fit(Xk, y, sample_weight=sample_weight, **fit_params)
        self._outputs(estimator, self._model(estimator))  # refuse now what export would refuse
        return estimator

    def training_rows(
        self, fitted: Any, y: np.ndarray, sample_weight: np.ndarray | None
    ) -> list[np.ndarray]:
        # Borders quantize every row: keep all of them on their sides.
        rows = np.arange(np.shape(y)[0])
        return [rows] * self._model(fitted).borders.size

    # -- trees (for the correction: one single-split tree per border) -------

    def read_trees(self, fitted: Any) -> list[TreeArrays]:
        model = self._model(fitted)
        leaf = np.array([-1, -1], dtype=np.int64)
        return [
            TreeArrays(
                np.array([f, -1, -1], dtype=np.int64),
                np.array([b, 0.0, 0.0]),
                np.array([1, *leaf]),
                np.array([2, *leaf]),
            )
            for f, b in zip(model.border_feature, model.borders, strict=True)
        ]

    def write_thresholds(self, fitted: Any, thresholds: list[np.ndarray]) -> Any:
        model = self._model(fitted)
        self._parsed = None  # the borders change below
        borders = np.array([t[0] for t in thresholds], dtype=np.float64)
        if np.any(borders.astype(np.float32).astype(np.float64) != borders):
            raise ValueError("CatBoost borders must be float32 values")
        for f in np.unique(model.border_feature):
            if np.any(np.diff(borders[model.border_feature == f]) <= 0):
                raise UnsupportedModelError(
                    f"the corrected borders of feature {f} are no longer increasing (two borders "
                    "between the same two training values); refit with fewer borders "
                    "(border_count)."
                )
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "corrected.json"
            path.write_text(json.dumps(model.with_borders(borders)), encoding="utf-8")
            fitted.load_model(str(path), format="json")
        fitted.set_leaf_values(model.leaf_values)
        return fitted

    # -- description -----------------------------------------------------

    def _outputs(self, fitted: Any, model: _Model) -> tuple[int, str]:
        """Score columns and post-transform, or an error if the Ensemble cannot say it."""
        loss = _loss(fitted)
        n_dims = model.bias.size
        if model.scale != 1.0:
            raise UnsupportedModelError(
                f"the CatBoost model scales its sums by {model.scale} (scale_and_bias), which "
                "the Ensemble cannot do exactly; export a model with scale 1."
            )
        if isinstance(fitted, catboost.CatBoostClassifier):
            if loss not in _CLASSIFIER_LOSSES:
                raise UnsupportedModelError(
                    f"CatBoostClassifier loss {loss!r} is not supported; use "
                    f"{', '.join(_CLASSIFIER_LOSSES)}."
                )
            return n_dims, _CLASSIFIER_LOSSES[loss]
        if loss not in _IDENTITY_LOSSES:
            raise UnsupportedModelError(
                f"CatBoostRegressor loss {loss!r} is not supported: its prediction is not the "
                f"raw score. Supported: {', '.join(sorted(_IDENTITY_LOSSES))}."
            )
        return n_dims, "identity"

    def to_ensemble(self, fitted: Any) -> Ensemble:
        """Each symmetric tree as a complete binary tree; float64 sums in tree order.

        Level ``l`` of a depth-D tree tests split ``D-1-l``, so the leaf
        reached is the binary number the splits' bits spell (see the module
        doc); the model's bias becomes the base values.
        """
        model = self._model(fitted)
        n_outputs, post = self._outputs(fitted, model)
        trees, values = [], []
        start = 0
        for tree in model.trees:
            index, feature = model.splits(tree)
            depth = index.size
            n_internal, n_leaves = (1 << depth) - 1, 1 << depth
            level = np.repeat(
                np.arange(depth), 1 << np.arange(depth)
            )  # level of each internal node
            split = depth - 1 - level
            node = np.arange(n_internal)
            pad = np.full(n_leaves, -1, dtype=np.int64)
            trees.append(
                TreeArrays(
                    np.concatenate([feature[split], pad]),
                    np.concatenate([model.borders[index][split], np.zeros(n_leaves)]),
                    np.concatenate([2 * node + 1, pad]),
                    np.concatenate([2 * node + 2, pad]),
                )
            )
            leaf_values = model.leaf_values[start : start + n_leaves * n_outputs]
            start += n_leaves * n_outputs
            value = np.zeros((n_internal + n_leaves, n_outputs))
            value[n_internal:] = leaf_values.reshape(n_leaves, n_outputs)
            values.append(value)
        classifier = isinstance(fitted, catboost.CatBoostClassifier)
        # CatBoost's predict decides on the raw scores (its PrepareEval): the first
        # class of highest score, or, for one score, class 1 iff it exceeds the
        # logit of the model's probability threshold (0 for the default 1/2).
        rule = "scores" if n_outputs > 1 else "above"
        if classifier and n_outputs == 1:
            _check_probability_threshold(fitted)
        return self.ensemble(
            trees,
            values,
            n_features=model.n_features,
            aggregate="sum",
            base_values=model.bias if n_outputs == model.bias.size else np.zeros(n_outputs),
            post_transform=post,
            sum_dtype="float64",
            classes=np.asarray(fitted.classes_) if classifier else None,
            label_rule=rule if classifier else "probabilities",
        )


# -- the hyperbolic estimators ------------------------------------------------

_CATBOOST_DOC = """
    Parameters
    ----------
    input_geometry, curvature, timelike_dim, midpoint, check_manifold, tree_space
        As for [`HyperbolicDecisionTreeClassifier`][hyp2onnx.HyperbolicDecisionTreeClassifier].
    input_blocks : None
        Not taken: ``fit`` refuses anything but None (CatBoost's borders are
        shared across trees, and per-block midpoints are not wired to them).

    Other Parameters
    ----------------
    **params
        Every parameter of `catboost.{native}`, by keyword. CatBoost
        writes training files (``catboost_info/``) only with
        ``allow_writing_files=True``.

    Notes
    -----
    Each float32 border (shared by every tree) moves to the Einstein midpoint
    of the two nearest training values on its sides, so every training row
    keeps its leaf in every tree. Symmetric trees only; categorical, text and
    embedding features are rejected: Klein coordinates are numeric.
"""


class _CatBoostModel(WrappedParamsModel):
    def _make_estimator(self) -> Any:
        estimator = super()._make_estimator()
        if self.allow_writing_files is None:
            estimator.set_params(allow_writing_files=False)
        return estimator


class HyperbolicCatBoostClassifier(HyperbolicClassifierMixin, ClassifierMixin, _CatBoostModel):
    __doc__ = (
        "Hyperbolic CatBoost classifier: symmetric trees on Klein coordinates with "
        "Einstein-midpoint borders (compared as CatBoost does: ``x > border`` in float32 goes "
        "right).\n" + _CATBOOST_DOC.format(native="CatBoostClassifier")
    )
    _wrapped = catboost.CatBoostClassifier

    def predict(self, X: Any) -> np.ndarray:
        """Labels (in ``classes_``) for hyperbolic points ``X``, one per row."""
        # CatBoostClassifier returns a column; scikit-learn's convention is 1-D.
        return np.asarray(super().predict(X)).reshape(-1)


class HyperbolicCatBoostRegressor(RegressorMixin, _CatBoostModel):
    __doc__ = (
        "Hyperbolic CatBoost regressor: symmetric trees on Klein coordinates with "
        "Einstein-midpoint borders (compared as CatBoost does: ``x > border`` in float32 goes "
        "right).\n" + _CATBOOST_DOC.format(native="CatBoostRegressor")
    )
    _wrapped = catboost.CatBoostRegressor
