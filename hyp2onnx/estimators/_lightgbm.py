"""LightGBM boosters (``LGBMClassifier``, ``LGBMRegressor``).

LightGBM compares float64 inputs with float64 thresholds and sends a row
left iff ``x <= threshold``. Each node also has a missing-value type: with
``Zero`` (only from ``zero_as_missing=True``, which hyp2onnx rejects) any
``|x| <= kZeroThreshold`` (float32 1e-35, widened) goes to the node's
default side whatever the threshold; ``None`` and ``NaN`` route every finite
value by the threshold, exactly as the Ensemble does. A ``Zero`` node is
accepted only where its default side agrees with the threshold for the
whole zero band, so the Ensemble routes every finite input as LightGBM does.

Categorical splits (from ``Categorical`` input blocks) send a row left iff
its code is in the node's set (``cat_threshold`` bitset); LightGBM sends NaN,
negative values and codes past the bitset right, as the set-membership node
of the Ensemble and of ``TreeEnsemble`` (opset 5) do. (LightGBM truncates a
fractional value to an integer first; hyp2onnx refuses fractional codes.)

Trees are read from ``Booster.model_to_string()`` and corrected thresholds
are written back by rewriting each tree's ``threshold=`` line with
``repr(float)`` (the shortest text that parses back to the same double) and
rebuilding the Booster from the text, so ``predict`` uses them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import lightgbm
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.class_weight import compute_sample_weight

from ..errors import UnsupportedModelError
from ..ir import LIGHTGBM_LOGISTIC_THRESHOLD, Ensemble
from ..ir.trees import CategorySets, TreeArrays
from ._base import HyperbolicClassifierMixin
from ._booster import BoosterBackend, BoostingModel, boosting_doc
from ._interface import refuse_row_scores
from ._probe import UnreadableFileError

#: LightGBM's kZeroThreshold: the float literal 1e-35f held in a double.
ZERO_THRESHOLD = float(np.float32(1e-35))

#: Objectives (as the model text names them) whose prediction is the raw score.
_IDENTITY_OBJECTIVES = {"regression", "regression_l1", "huber", "fair", "quantile", "mape"}

# Parameter names and their aliases (LightGBM's docs, "Parameters").
_BAGGING_FRACTIONS = (
    ("subsample", "bagging_fraction", "sub_row", "bagging"),
    ("pos_bagging_fraction", "pos_sub_row", "pos_subsample", "pos_bagging"),
    ("neg_bagging_fraction", "neg_sub_row", "neg_subsample", "neg_bagging"),
)
_BAGGING_FREQ = ("subsample_freq", "bagging_freq")
_BOOSTING = ("boosting_type", "boosting", "boost")
_CATEGORICAL = (
    "categorical_feature",
    "cat_feature",
    "categorical_column",
    "cat_column",
    "categorical_features",
)
_LINEAR_TREE = ("linear_tree", "linear_trees")

#: A ``Tree=`` line; where it starts a line is checked apart (`_tree_starts`): a leading
#: ``^`` makes the regex try every line, twelve times slower on a 160-tree model.
_TREE_LINE = re.compile(r"Tree=\d+$", re.MULTILINE)

#: A line of a model text's ``parameters:`` section as LightGBM writes it, ``[name: value]``:
#: LightGBM splits each at its colons and reads the second piece unchecked.
_PARAMETER_LINE = re.compile(r"\[[^:\]]+:.+\]")


def _values(params: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    return [params[name] for name in names if params.get(name) is not None]


class _Tree:
    """One ``Tree=`` block of a LightGBM model text."""

    def __init__(self, index: int, block: str) -> None:
        self.block = block
        fields = dict(line.split("=", 1) for line in block.splitlines()[1:] if "=" in line)
        self.fields = fields
        n_leaves = int(fields["num_leaves"])
        n_internal = n_leaves - 1
        if int(fields.get("is_linear", "0")):
            raise UnsupportedModelError(
                "LightGBM linear trees are not supported (their leaves depend on x); "
                "fit with linear_tree=False."
            )

        # Python's int() and float() parse exactly (and faster than numpy from strings).
        def ints(key: str) -> np.ndarray:
            return np.array(list(map(int, fields[key].split())) if n_internal else [], np.int64)

        def floats(key: str) -> np.ndarray:
            return np.array(list(map(float, fields[key].split())) if n_internal else [], float)

        self.split_feature = ints("split_feature")
        self.threshold = floats("threshold")
        self.decision_type = ints("decision_type")
        child = lambda c: np.where(c >= 0, c, n_internal + ~c)
        self.left = child(ints("left_child"))
        self.right = child(ints("right_child"))
        self.leaf_value = np.array(list(map(float, fields["leaf_value"].split())), float)
        if self.leaf_value.shape != (n_leaves,):
            raise UnsupportedModelError("malformed LightGBM model text: leaf_value count")
        self.categorical = (self.decision_type & 1) > 0
        self.sets: dict[int, np.ndarray] = {}
        if self.categorical.any():
            # Node j's codes: the set bits of the uint32 words
            # cat_threshold[cat_boundaries[c] : cat_boundaries[c + 1]], c = threshold[j].
            bounds = np.array(list(map(int, fields["cat_boundaries"].split())), np.int64)
            words = np.array(list(map(int, fields["cat_threshold"].split())), np.uint32)
            bits = np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool)
            for j in np.flatnonzero(self.categorical):
                c = int(self.threshold[j])
                self.sets[int(j)] = np.flatnonzero(bits[32 * bounds[c] : 32 * bounds[c + 1]])

    @property
    def n_internal(self) -> int:
        return self.split_feature.shape[0]

    def arrays(self) -> TreeArrays:
        """Internal nodes first (LightGBM's numbering), then leaf i as node n_internal + i."""
        n_leaves = self.leaf_value.shape[0]
        pad = np.full(n_leaves, -1, dtype=np.int64)
        categories = (
            CategorySets.from_sets(self.n_internal + n_leaves, self.sets) if self.sets else None
        )
        return TreeArrays(
            np.concatenate([self.split_feature, pad]),
            np.concatenate([self.threshold, np.zeros(n_leaves)]),
            np.concatenate([self.left, pad]),
            np.concatenate([self.right, pad]),
            categories,
        )

    def check_zero_band(self, thresholds: np.ndarray, index: int) -> None:
        """Reject ``Zero`` nodes whose default side disagrees with ``x <= t`` near zero."""
        zero = (((self.decision_type >> 2) & 3) == 1) & ~self.categorical
        if not zero.any():
            return
        default_left = (self.decision_type & 2) > 0
        t = thresholds[: self.n_internal]
        agrees = np.where(default_left, t >= ZERO_THRESHOLD, t < -ZERO_THRESHOLD)
        if np.any(zero & ~agrees):
            raise UnsupportedModelError(
                f"tree {index} of the LightGBM model sends |x| <= 1e-35 to a default side "
                "that its threshold does not (missing_type Zero, from zero_as_missing=True), "
                "which the exported model cannot reproduce. Fit with zero_as_missing=False."
            )

    def with_thresholds(self, thresholds: np.ndarray) -> str:
        """This block with its ``threshold=`` line rewritten."""
        line = (
            "threshold="
            + " ".join(
                str(int(t)) if categorical else repr(float(t))  # a categorical node's set index
                for t, categorical in zip(
                    thresholds[: self.n_internal], self.categorical, strict=True
                )
            )
        )
        return re.sub(r"(?m)^threshold=.*$", lambda _: line, self.block, count=1)


def _tree_starts(text: str, end: int) -> list[int]:
    r"""Where each ``Tree=<n>`` line before ``end`` starts (the regex ``(?m)^Tree=\d+$``)."""
    return [
        m.start()
        for m in _TREE_LINE.finditer(text, 0, end)
        if m.start() == 0 or text[m.start() - 1] == "\n"
    ]


class _Model:
    """A LightGBM model text split into header, tree blocks and tail."""

    def __init__(self, text: str) -> None:
        end = text.find("end of trees")
        starts = _tree_starts(text, end)
        if end < 0 or not starts:
            raise UnsupportedModelError("malformed LightGBM model text: no trees found")
        self.head, self.tail = text[: starts[0]], text[end:]
        blocks = [text[a:b] for a, b in zip(starts, [*starts[1:], end], strict=True)]
        self.trees = [_Tree(i, block) for i, block in enumerate(blocks)]
        header = dict(line.split("=", 1) for line in self.head.splitlines() if "=" in line)
        self.n_per_iteration = int(header.get("num_tree_per_iteration", "1"))
        self.n_features = int(header["max_feature_idx"]) + 1
        objective = header.get("objective", "").split()
        self.objective = objective[0] if objective else ""
        self.objective_options = objective[1:]
        self.average_output = "average_output" in (line.strip() for line in self.head.splitlines())
        for i, tree in enumerate(self.trees):
            tree.check_zero_band(tree.threshold, i)

    def text(self, thresholds: list[np.ndarray]) -> str:
        """The model text with new thresholds (and matching ``tree_sizes``)."""
        blocks = [tree.with_thresholds(t) for tree, t in zip(self.trees, thresholds, strict=True)]
        sizes = "tree_sizes=" + " ".join(str(len(b.encode())) for b in blocks)
        head = re.sub(r"(?m)^tree_sizes=.*$", lambda _: sizes, self.head, count=1)
        return head + "".join(blocks) + self.tail


def model_text(path: Path) -> str:
    """The model text in ``path``; `UnreadableFileError` where LightGBM would misread it.

    LightGBM reads a file's lines up to a newline or a NUL byte, and its copy of
    a file has no NUL after the last byte: a file cut short has its last line
    read on into whatever memory follows. It is handed the text with the NUL
    that ends every Python bytes object instead (``Booster(model_str=...)``),
    here and in the child (``_native_probe.py``), which then read the same
    bytes. Asking a model for its parameters (``lightgbm.Booster`` does, on
    loading) crashes LightGBM, or not, depending on memory, where a line of the
    ``parameters:`` section has no colon: a file cut inside the section.
    """
    data = path.read_bytes()
    problem = "it holds a NUL byte, which model text never does" if b"\0" in data else None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = problem or f"not UTF-8 text: {exc.reason} at byte {exc.start}"
        text = ""
    lines = [line for line in re.split(r"[\r\n]+", text) if line]
    if "parameters:" in lines:
        rest = lines[lines.index("parameters:") + 1 :]
        end = rest.index("end of parameters") if "end of parameters" in rest else len(rest)
        bad = [line for line in rest[:end] if not _PARAMETER_LINE.fullmatch(line)]
        if end == len(rest) or bad:
            shown = f"the line {bad[0][:60]!r}" if bad else "no 'end of parameters' line"
            problem = problem or f"its parameters section is cut short or damaged: {shown}"
    if problem:
        raise UnreadableFileError(f"not a readable LightGBM model file ({problem})")
    return text


def _objective_in_text(text: str) -> str:
    """The objective's name from a LightGBM model text's header ("" if none is stated)."""
    for line in text.splitlines():
        if line.startswith("objective="):
            words = line[len("objective=") :].split()
            return words[0] if words else ""
        if line.startswith("Tree="):
            break
    return ""


class LightGBMBackend(BoosterBackend):
    name = "lightgbm"
    op = "<="
    compare_dtype = "float64"
    threshold_dtype = "float64"
    title = "LightGBM"
    native = (lightgbm.LGBMClassifier, lightgbm.LGBMRegressor)
    booster = lightgbm.Booster
    loader = lightgbm.basic
    zero_band = ZERO_THRESHOLD
    negative_weights = True

    @classmethod
    def check_file(cls, path: Path) -> None:
        """Refuse first what LightGBM crashes on or not by chance (`model_text`), then read
        ``path`` with the shared library alone in a child (`BoosterBackend.check_file`)."""
        model_text(path)
        super().check_file(path)

    def __init__(self) -> None:
        super().__init__()
        self._categorical: list[int] = []

    def use_categorical(self, estimator: Any, features: np.ndarray) -> bool:
        """Split ``features`` natively (set membership), as ``categorical_feature`` does."""
        self._categorical = [int(f) for f in features]
        return bool(self._categorical)

    @classmethod
    def load_file(cls, path: Path) -> Any:
        """An LGBMClassifier/LGBMRegressor around the Booster in ``path`` (``save_model``).

        The ``binary`` and ``multiclass*`` objectives load as classifiers; a
        model file stores class indices, not labels, so the classes are
        ``0 .. n-1``. LightGBM's scikit-learn classes cannot be built from a
        Booster through their public API, so a stand-in is fitted on a few
        rows of the loaded model's shape (LightGBM sets its own fitted
        attributes, classes included) and its booster is swapped for the
        loaded one, through the attribute ``booster_`` reads.
        """
        text = model_text(path)
        booster = lightgbm.Booster(model_str=text)  # not model_file=: see model_text
        objective = _objective_in_text(text)
        n_features = booster.num_feature()
        if objective.startswith("multiclass"):
            n_classes = booster.num_model_per_iteration()
        elif objective == "binary":
            n_classes = 2
        else:
            n_classes = 0
        X = np.zeros((max(n_classes, 2), n_features))
        if n_classes:
            model = lightgbm.LGBMClassifier(n_estimators=1, verbose=-1)
            model.fit(X, np.arange(n_classes))
        else:
            model = lightgbm.LGBMRegressor(n_estimators=1, verbose=-1)
            model.fit(X, np.zeros(X.shape[0]))
        model._Booster = booster
        return model

    # -- training --------------------------------------------------------

    @staticmethod
    def row_subsampling(estimator: Any) -> str | None:
        """Which parameters make trees see random row subsets, or None."""
        params = estimator.get_params()
        if "goss" in _values(params, _BOOSTING) or params.get("data_sample_strategy") == "goss":
            return "GOSS"
        freq = max(_values(params, _BAGGING_FREQ), default=0)
        if freq > 0:
            for names in _BAGGING_FRACTIONS:
                for name in names:
                    value = params.get(name)
                    if value is not None and value < 1.0:
                        return f"{name}={value} with bagging_freq={freq}"
        return None

    @staticmethod
    def disable_row_subsampling(estimator: Any) -> None:
        """Make every tree see every training row (column sampling is harmless)."""
        params = estimator.get_params()
        if LightGBMBackend.row_subsampling(estimator) == "GOSS":
            raise UnsupportedModelError(
                "GOSS keeps a different, gradient-dependent subset of rows for every tree, so "
                "the thresholds cannot be corrected exactly. Use data_sample_strategy='bagging' "
                "(the default), or override_subsample=False to accept an approximate correction."
            )
        ones = {name: 1.0 for names in _BAGGING_FRACTIONS for name in names if name in params}
        estimator.set_params(**{**ones, "subsample": 1.0})

    def check_fit(self, estimator: Any, y: np.ndarray, fit_params: dict[str, Any]) -> None:
        params = estimator.get_params()
        if callable(params.get("objective")):
            raise UnsupportedModelError(
                "custom LightGBM objectives are not supported: their link function is unknown."
            )
        if "rf" in _values(params, _BOOSTING):
            raise UnsupportedModelError(
                "LightGBM boosting_type='rf' is not supported; use 'gbdt' or 'dart', or a "
                "hyperbolic random forest."
            )
        if params.get("zero_as_missing"):
            raise UnsupportedModelError(
                "zero_as_missing=True sends |x| <= 1e-35 to a default side whatever the "
                "threshold; Klein coordinates have no missing values. Leave it False."
            )
        if any(_values(params, _LINEAR_TREE)):
            raise UnsupportedModelError(
                "LightGBM linear trees are not supported (their leaves depend on x)."
            )
        categorical = [fit_params.get("categorical_feature", "auto")]
        categorical += _values(params, _CATEGORICAL)
        if any((c != "auto" if isinstance(c, str) else len(c) > 0) for c in categorical):
            raise UnsupportedModelError(
                "categorical splits are not hyperbolic: Klein coordinates are continuous. "
                "Declare categorical columns with input_blocks=[..., Categorical(n)] instead "
                "of categorical_feature."
            )
        refuse_row_scores(fit_params, "init_score", "eval_init_score")
        if np.ndim(y) != 1:
            raise UnsupportedModelError("LightGBM models take a 1-D y.")

    def categorical_fit(
        self, estimator: Any, Xk: np.ndarray, fit_params: dict[str, Any]
    ) -> dict[str, Any]:
        if self._categorical:
            return {**fit_params, "categorical_feature": self._categorical}
        return fit_params

    def training_rows(
        self, fitted: Any, y: np.ndarray, sample_weight: np.ndarray | None
    ) -> list[np.ndarray]:
        # Every tree sees every row; rows of zero weight carry no gradient.
        w = np.ones(np.shape(y)[0]) if sample_weight is None else np.asarray(sample_weight)
        class_weight = getattr(fitted, "class_weight", None)
        if class_weight is not None:
            w = w * compute_sample_weight(class_weight, y)
        rows = np.flatnonzero(w > 0)
        return [rows] * len(self._model(fitted).trees)

    # -- trees -------------------------------------------------------------

    def parse(self, fitted: Any) -> _Model:
        return _Model(fitted.booster_.model_to_string(num_iteration=-1))

    def read_trees(self, fitted: Any) -> list[TreeArrays]:
        return [tree.arrays() for tree in self._model(fitted).trees]

    def write_thresholds(self, fitted: Any, thresholds: list[np.ndarray]) -> Any:
        model = self._model(fitted)
        self._parsed = None
        for i, (tree, new) in enumerate(zip(model.trees, thresholds, strict=True)):
            tree.check_zero_band(np.asarray(new, dtype=np.float64), i)
        old = fitted.booster_
        booster = lightgbm.Booster(model_str=model.text(thresholds))
        booster.best_iteration = old.best_iteration
        booster.best_score = old.best_score
        # LGBMModel has no public setter; booster_ reads this attribute.
        fitted._Booster = booster
        return fitted

    # -- description -----------------------------------------------------

    def outputs(self, fitted: Any, model: _Model) -> tuple[int, str]:
        classifier = type(fitted) is lightgbm.LGBMClassifier
        objective, options = model.objective, model.objective_options
        if model.average_output:
            raise UnsupportedModelError(
                "LightGBM random forests (average_output) are not supported."
            )
        if classifier and objective == "binary":
            if "sigmoid:1" not in options:
                raise UnsupportedModelError(
                    f"LightGBM binary objective with {' '.join(options)} is not supported: the "
                    "Ensemble's logistic transform has slope 1. Leave sigmoid at 1.0."
                )
            return 1, "logistic"
        if classifier and objective == "multiclass":
            return model.n_per_iteration, "softmax"
        if not classifier and objective in _IDENTITY_OBJECTIVES and "sqrt" not in options:
            return 1, "identity"
        supported = (
            "binary, multiclass"
            if classifier
            else ", ".join(sorted(_IDENTITY_OBJECTIVES)) + " (without reg_sqrt)"
        )
        raise UnsupportedModelError(
            f"LightGBM objective {' '.join([objective, *options])!r} is not supported for "
            f"{type(fitted).__name__}: its prediction is not the Ensemble's identity, logistic "
            f"or softmax of the trees' sum. Supported: {supported}."
        )

    def to_ensemble(self, fitted: Any) -> Ensemble:
        """Trees as LightGBM predicts: float64 sums in tree order, from zero.

        LightGBM folds its initial score into the first trees' leaves, so the
        base values are zero.
        """
        model = self._model(fitted)
        classifier = type(fitted) is lightgbm.LGBMClassifier
        n_outputs, post = self.outputs(fitted, model)
        binary = classifier and post == "logistic"
        n_used = len(model.trees)
        best = int(getattr(fitted.booster_, "best_iteration", 0) or 0)
        if best > 0:
            n_used = min(n_used, best * model.n_per_iteration)

        trees, values, targets = [], [], []
        for i in range(n_used):
            tree = model.trees[i]
            tree.check_zero_band(tree.threshold, i)
            arrays = tree.arrays()
            target = i % model.n_per_iteration if n_outputs > 1 else 0
            value = np.zeros((arrays.feature.shape[0], n_outputs))
            value[tree.n_internal :, target] = tree.leaf_value
            trees.append(arrays)
            targets.append(target)
            values.append(value)
        return self.boosted(
            trees,
            values,
            model.n_features,
            base_values=np.zeros(n_outputs),
            post_transform=post,
            sum_dtype="float64",
            classes=np.asarray(fitted.classes_) if classifier else None,
            tree_target=np.asarray(targets, dtype=np.int64) if n_outputs > 1 else None,
            # binary: LGBMClassifier.predict takes the argmax of [1 - p, p], p its float64 sigmoid
            label_rule="above" if binary else "probabilities",
            label_threshold=LIGHTGBM_LOGISTIC_THRESHOLD if binary else 0.0,
        )


# -- the hyperbolic estimators ------------------------------------------------

_LGBM_DOC = dict(
    summary="Hyperbolic LightGBM {what}: LightGBM on Klein coordinates with Einstein-midpoint "
    "thresholds (compared as LightGBM does: ``x <= t`` in float64).",
    rows="``subsample``/``bagging_fraction`` and its aliases, and their ``pos_``/``neg_`` "
    "variants; GOSS is refused",
    columns="``colsample_bytree``/``feature_fraction``, ``feature_fraction_bynode``",
)


class HyperbolicLGBMClassifier(HyperbolicClassifierMixin, ClassifierMixin, BoostingModel):
    __doc__ = boosting_doc("classifier", "lightgbm.LGBMClassifier", **_LGBM_DOC)
    _native = lightgbm.LGBMClassifier
    _signature_from = (lightgbm.LGBMModel,)
    _backend = LightGBMBackend


class HyperbolicLGBMRegressor(RegressorMixin, BoostingModel):
    __doc__ = boosting_doc("regressor", "lightgbm.LGBMRegressor", **_LGBM_DOC)
    _native = lightgbm.LGBMRegressor
    _signature_from = (lightgbm.LGBMModel,)
    _backend = LightGBMBackend
