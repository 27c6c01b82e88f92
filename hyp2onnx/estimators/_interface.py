"""The small interface every training backend implements.

A backend knows one library's tree models: how to fit one on Klein
coordinates, which training rows each tree saw, how to read the split
arrays out and write corrected thresholds back into the native model (so
the library's own ``predict`` uses them), and how to describe the result as
an `Ensemble`. Adding a backend means one new file
subclassing `Backend` (with the backend's hyperbolic estimators)
and one line in ``_registry.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..errors import UnsupportedModelError
from ..ir import Ensemble
from ..ir.trees import Op, TreeArrays

#: What a backend is handed: numpy arrays (Klein coordinates or their tree-space image,
#: labels); ``Weights`` is a sample weight per row, or None.
Array = np.ndarray
Weights = np.ndarray | None


class Backend(ABC):
    """How hyp2onnx trains, corrects and describes one library's tree models."""

    #: Short name, recorded in exported models ("sklearn", "xgboost", ...).
    name: ClassVar[str]
    #: Comparison the library makes: go left iff ``x OP threshold``.
    op: ClassVar[Op]
    #: Precision the library compares feature values in.
    compare_dtype: ClassVar[str]
    #: Precision the library stores thresholds in.
    threshold_dtype: ClassVar[str]
    #: The native estimator classes handled (exact types: a subclass may route differently).
    native: ClassVar[tuple[type, ...]] = ()
    #: Values with ``|x| <=`` this are read as 0 (LightGBM's zero band); 0: none.
    zero_band: ClassVar[float] = 0.0
    #: Every split compares one Klein coordinate, so the learner may be fitted on
    #: any per-feature monotone image of them (``tree_space``); False for
    #: oblique splits, which compare projections (`compared_values`).
    feature_splits: ClassVar[bool] = True
    #: The learner takes ``input_blocks`` (each feature its own midpoint rule).
    takes_blocks: ClassVar[bool] = True
    #: The library defines negative sample weights for every model (LightGBM scales a
    #: row's gradient and hessian by its weight); see `takes_negative_weights`.
    negative_weights: ClassVar[bool] = False

    def takes_negative_weights(self, estimator: Any) -> bool:
        """Whether ``estimator`` defines negative sample weights; if not, `fit` refuses them."""
        return self.negative_weights

    @classmethod
    def handles(cls, estimator: Any) -> bool:
        """True if ``estimator`` (fitted or not) belongs to this backend."""
        return type(estimator) in cls.native

    @classmethod
    def supported(cls) -> list[str]:
        """Names of the estimator classes this backend accepts, for error messages."""
        return [c.__name__ for c in cls.native]

    def use_categorical(self, estimator: Any, features: np.ndarray) -> bool:
        """Configure the unfitted ``estimator`` to treat ``features`` as categorical codes.

        Returns True if the library then splits them natively (set
        membership; the learner must see the codes themselves). By default
        the codes are split as numbers (scikit-learn): False.
        """
        return False

    @abstractmethod
    def fit(
        self, estimator: Any, Xk: Array, y: Array, sample_weight: Weights, **fit_params: Any
    ) -> Any:
        """Fit ``estimator`` on unit-ball Klein coordinates; return the fitted model."""

    @abstractmethod
    def training_rows(self, fitted: Any, y: Array, sample_weight: Weights) -> Iterable[np.ndarray]:
        """Indices of the training rows each tree was grown on, tree by tree: a list, or
        (trees with rows of their own) a `RowsPerTree` that makes them one at a time.

        ``y`` and ``sample_weight`` are what `fit` was given.
        """

    def leaf_routing(
        self, fitted: Any, X: np.ndarray
    ) -> Callable[[int, np.ndarray], np.ndarray] | None:
        """The library's own routing of rows of ``X`` (the compared values) to tree ``t``'s
        leaves (`TreeArrays` node ids), for the correction; None to route in numpy.
        Only where it gives the very leaves the trees' comparison does."""
        return None

    def compared_values(self, fitted: Any, Xk: np.ndarray) -> np.ndarray:
        """The values the splits compare, one column per tested feature.

        Klein coordinates held in `compare_dtype`, unless a backend's
        splits compare something else (oblique trees: projections).
        """
        return np.ascontiguousarray(Xk, dtype=self.compare_dtype)

    @abstractmethod
    def read_trees(self, fitted: Any) -> list[TreeArrays]:
        """Split arrays of every tree, in the model's tree order."""

    @abstractmethod
    def write_thresholds(self, fitted: Any, thresholds: list[np.ndarray]) -> Any:
        """Store corrected thresholds (one array per tree) into the native model.

        Returns the model to keep (the same object, or a rebuilt one).
        """

    @abstractmethod
    def to_ensemble(self, fitted: Any) -> Ensemble:
        """Describe the fitted (corrected) model as an `Ensemble`."""

    def ensemble(self, trees: list[TreeArrays], values: list[np.ndarray], **facts: Any) -> Ensemble:
        """The IR of ``trees`` with this backend's comparison recorded in it.

        Every backend ends here, so the operator and the two precisions are
        stated once per backend (its class attributes), never inferred later.
        ``facts`` are `Ensemble.from_trees`'s other keywords.
        """
        return Ensemble.from_trees(
            trees,
            values,
            op=self.op,
            compare_dtype=self.compare_dtype,
            threshold_dtype=self.threshold_dtype,
            **facts,
        )

    # -- files (optional) ----------------------------------------------------

    @classmethod
    def trusted_types(cls) -> list[type]:
        """Native classes a ``.skops`` file of this backend's models may hold."""
        return list(cls.native)

    @classmethod
    def load_file(cls, path: Path) -> Any:
        """The native model in a file of one of the registry's suffixes for this backend.

        Any exception means the file is not such a model; the command line
        reports it with the file's name.
        """
        raise UnsupportedModelError(f"the {cls.name} backend reads no model files")

    @classmethod
    def check_file(cls, path: Path) -> None:
        """Read ``path`` in a child process first, if a damaged file can crash the library.

        Raises `UnreadableFileError` (``._probe``) saying what is wrong;
        by default nothing is checked (the library raises, never crashes).
        """
        return None

    @classmethod
    def check_loaded(cls, obj: Any) -> None:
        """Refuse a damaged model of this library in ``obj``, just loaded from a file.

        For what the library does not check itself and would crash on later
        (scikit-learn's node links). Raises `UnreadableFileError`
        (``._probe``) saying what is wrong; by default nothing is checked.
        """
        return None

    @classmethod
    def exercise(cls, obj: Any) -> bool:
        """Make the native calls hyp2onnx makes on ``obj`` if it is one of this library's models.

        Run in a child process on every object of the library found in a
        pickle or ``.skops`` file, for libraries that crash only in later calls
        (CatBoost); raises if a call fails. True if ``obj`` was such a model.
        """
        return False

    @classmethod
    def labels(cls, fitted: Any, X: np.ndarray) -> np.ndarray:
        """The native model's predicted class per row, one dimension (as the graph's)."""
        return np.asarray(fitted.predict(X))


def refuse_row_scores(fit_params: dict[str, Any], *names: str) -> None:
    """Refuse fit parameters that give each row its own starting score (``base_margin``, ...)."""
    for name in names:
        if fit_params.get(name) is not None:
            raise UnsupportedModelError(
                f"{name} gives each row its own starting score, which an exported model "
                "cannot reproduce; fit without it."
            )
