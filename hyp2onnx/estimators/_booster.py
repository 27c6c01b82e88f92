"""What booster backends (XGBoost, LightGBM) add to `Backend`, and
the hyperbolic model around one booster's scikit-learn class.

Each model wraps the library's scikit-learn class: it takes that class's own
parameters by keyword (any extra keyword the library accepts through
``**kwargs`` too, e.g. LightGBM's ``verbose`` or ``max_bin``), fits it on
Klein coordinates and moves every threshold to its Einstein midpoint inside
the native booster, so the booster's own ``predict`` uses them.

All trees of a booster without row subsampling are grown on the same rows,
so the thresholds of all trees are corrected in one pass
(`hyp2onnx.correction.shared_rows`), at a small fraction of the boosting time.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from ..errors import warn_user
from ..ir import Ensemble
from ..ir.trees import TreeArrays
from ._base import GEOMETRY_DEFAULTS, GEOMETRY_PARAMS_DOC, HyperbolicTreeModel, generate_init
from ._interface import Array, Backend, Weights
from ._probe import read_natively


class BoosterBackend(Backend):
    """A booster backend: says how the library subsamples rows, so that the
    hyperbolic models can turn it off and every tree sees every row.

    ``fit`` checks the settings (`check_fit`), warns when rows are
    subsampled, fits, and refuses at once a model the export would refuse
    (`outputs`). One parse of the native model (`parse`) serves
    ``read_trees`` and ``write_thresholds`` of one correction.
    """

    #: The library's name in messages.
    title: ClassVar[str]
    #: The library's own model class, trusted beside its scikit-learn classes.
    booster: ClassVar[type]
    #: The library's module that loads its shared library (as ``_LIB``).
    loader: ModuleType

    @classmethod
    def check_file(cls, path: Path) -> None:
        """Read ``path`` with the shared library alone in a child: a damaged file can crash it."""
        read_natively(path, cls.title, cls.title, cls.loader._LIB._name)

    @classmethod
    def trusted_types(cls) -> list[type]:
        return [*cls.native, cls.booster]

    def boosted(
        self, trees: list[TreeArrays], values: list[Array], n_features: int, **facts: Any
    ) -> Ensemble:
        """The IR of a boosted model: every tree's value added, from ``base_values`` on."""
        return self.ensemble(trees, values, n_features=n_features, aggregate="sum", **facts)

    def __init__(self) -> None:
        self._parsed: tuple[Any, Any] | None = None

    @abstractmethod
    def parse(self, fitted: Any) -> Any:
        """The fitted model's trees, read from its native format."""

    @abstractmethod
    def outputs(self, fitted: Any, model: Any) -> tuple[int, str]:
        """Score columns and post-transform, or an error if the Ensemble cannot say it."""

    @abstractmethod
    def check_fit(self, estimator: Any, y: np.ndarray, fit_params: dict[str, Any]) -> None:
        """Refuse settings the correction or the export cannot follow."""

    def categorical_fit(
        self, estimator: Any, Xk: np.ndarray, fit_params: dict[str, Any]
    ) -> dict[str, Any]:
        """Hook, after `check_fit`: declare the columns of `use_categorical`
        to the library; returns the fit parameters to use."""
        return fit_params

    def _model(self, fitted: Any) -> Any:
        if self._parsed is None or self._parsed[0] is not fitted:
            self._parsed = (fitted, self.parse(fitted))
        return self._parsed[1]

    def fit(
        self, estimator: Any, Xk: Array, y: Array, sample_weight: Weights, **fit_params: Any
    ) -> Any:
        self.check_fit(estimator, y, fit_params)
        fit_params = self.categorical_fit(estimator, Xk, fit_params)
        self.warn_subsampling(estimator)
        # The library casts to its own precision, exactly as it does when predicting.
        estimator.fit(Xk, y, sample_weight=sample_weight, **fit_params)
        self.outputs(estimator, self._model(estimator))  # refuse now what export would refuse
        return estimator

    def warn_subsampling(self, estimator: Any) -> None:
        """Warn that the correction is approximate if ``estimator`` subsamples rows
        (also called by trainers that fit the booster elsewhere: [`hyp2onnx.dask`][hyp2onnx.distributed.dask])."""
        subsampling = self.row_subsampling(estimator)
        if subsampling:
            warn_user(
                f"{self.title} trains each tree on a subset of rows ({subsampling}), but the "
                "threshold correction uses all training rows, so it is approximate: training "
                "predictions may change. Use override_subsample=True for an exact correction."
            )

    @staticmethod
    @abstractmethod
    def row_subsampling(estimator: Any) -> str | None:
        """The setting that makes trees see random row subsets, or None."""

    @staticmethod
    @abstractmethod
    def disable_row_subsampling(estimator: Any) -> None:
        """Make every tree see every training row (column sampling is harmless)."""


BOOSTING_DOC = (
    GEOMETRY_PARAMS_DOC.replace("{", "{{").replace("}", "}}")
    + """    midpoint : {{"einstein", "arithmetic"}}, default="einstein"
        Where each threshold goes between its two nearest training values
        (among the rows that reached the split): the hyperbolic (Einstein)
        midpoint, or the Euclidean one (ablation).
    check_manifold : bool, default=True
        Reject points off the manifold (or outside the ball) in ``fit`` and
        ``predict``. Turn off only for large data known to be valid.
    tree_space : {{"ranks", "rapidity", "klein"}}, default="ranks"
        What the booster is fitted on: the ranks of each Klein coordinate's
        distinct training values (splits as fine as float64 Klein
        coordinates: points far from the origin stay separable), ``artanh``
        of them, or the coordinates themselves (the paper's design).
        Thresholds are Klein thresholds at Einstein midpoints in every case;
        see `hyp2onnx.correction.tree_space`.
    input_blocks : list or None, default=None
        Input made of blocks ([`hyp2onnx.blocks`][hyp2onnx.blocks]): ``[Hyperbolic(2),
        Spherical(2), Euclidean(3), Categorical(1)]`` or a signature
        ``[(-1.0, 2), (0.0, 3), (1.0, 2)]``. Each block gets its own
        midpoint; ``Categorical`` columns get the booster's native
        set-membership splits. ``input_geometry``, ``curvature`` and
        ``timelike_dim`` then stay at their defaults.
    override_subsample : bool, default=True
        Train without row subsampling ({rows} set to 1.0) so that the
        correction sees exactly the rows each tree was grown on and training
        predictions never change. With False the booster subsamples as
        asked and the correction uses all rows, with a warning that it is
        approximate. Column subsampling ({columns}) is harmless either way:
        it changes which features a split may use, not which rows reach it.
    **params
        Every parameter of `{native}`, by keyword.

    Notes
    -----
    Fit parameters such as ``eval_set`` take hyperbolic points, like ``X``.
    Categorical features are declared with ``input_blocks`` only (the
    booster's own categorical options are refused).
"""
)


class BoostingModel(HyperbolicTreeModel):
    """A hyperbolic model around one XGBoost or LightGBM scikit-learn class.

    A subclass sets ``_native`` (the class it wraps), ``_signature_from``
    (further classes whose ``__init__`` keywords ``_native`` accepts through
    ``**kwargs``, e.g. ``XGBModel`` for ``XGBClassifier``) and ``_backend``.
    Its ``__init__`` is generated: the geometry parameters, ``override_subsample``
    and every native keyword, each stored unchanged as scikit-learn requires;
    other keywords are stored too and reported by ``get_params``.
    """

    _native: ClassVar[type]
    _signature_from: ClassVar[tuple[type, ...]] = ()
    _backend: ClassVar[type[BoosterBackend]]
    _native_params: ClassVar[tuple[str, ...]] = ()
    #: Keywords outside the native signature, stored by _store_extra (an instance
    #: attribute the generated ``__init__`` starts empty).
    _extra_params: tuple[str, ...]
    _parameter_constraints: ClassVar[dict] = {
        **HyperbolicTreeModel._parameter_constraints,
        "override_subsample": ["boolean"],
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_native" not in cls.__dict__:
            return
        cls._native_params = generate_init(
            cls,
            (cls._native, *cls._signature_from),
            {**GEOMETRY_DEFAULTS, "override_subsample": True},
            extra=True,
        )

    # -- parameters --------------------------------------------------------

    def _store_extra(self, extra: dict[str, Any]) -> None:
        for name, value in extra.items():
            if name.startswith("_") or hasattr(type(self), name):
                raise TypeError(
                    f"{type(self).__name__} got an unexpected keyword argument {name!r}."
                )
            setattr(self, name, value)
        new = [name for name in extra if name not in self._extra_params]
        self._extra_params = (*self._extra_params, *new)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Parameters of this model, including extra keywords passed on to the booster."""
        params = super().get_params(deep=deep)
        params.update({name: getattr(self, name) for name in self._extra_params})
        return params

    def set_params(self, **params: Any):
        """Set parameters; unknown plain names become extra booster keywords."""
        known = set(self._get_param_names()) | set(self._extra_params)
        extra = {k: v for k, v in params.items() if k not in known and "__" not in k}
        self._store_extra(extra)
        rest = {k: v for k, v in params.items() if k not in extra}
        return super().set_params(**rest) if rest else self

    def _native_template(self) -> Any:
        """The native estimator with this model's parameters as given (for its tags)."""
        params = {name: getattr(self, name) for name in (*self._native_params, *self._extra_params)}
        return self._native(**params)

    def _make_estimator(self) -> Any:
        estimator = self._native_template()
        if self.override_subsample:
            self._backend.disable_row_subsampling(estimator)
        return estimator


def boosting_doc(what: str, native: str, summary: str, rows: str, columns: str) -> str:
    """A booster estimator's docstring: the library's one-line ``summary`` of a ``what``
    ("classifier", "regressor"), then `BOOSTING_DOC` filled with the ``native``
    class and the names of its ``rows``/``columns`` subsampling parameters."""
    return (
        summary.format(what=what)
        + "\n"
        + BOOSTING_DOC.format(native=native, rows=rows, columns=columns)
    )
