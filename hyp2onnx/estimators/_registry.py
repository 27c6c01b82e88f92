"""Which backend handles which estimator. Add a backend here, nowhere else."""

from __future__ import annotations

from typing import Any

from ..errors import UnsupportedModelError
from ._interface import Backend
from ._lightgbm import LightGBMBackend
from ._sklearn import SklearnBackend
from ._xgboost import XGBoostBackend

BACKENDS: list[type[Backend]] = [SklearnBackend, XGBoostBackend, LightGBMBackend]


def backend_for(estimator: Any) -> Backend:
    """The backend for ``estimator``, or an error listing what is supported."""
    for backend in BACKENDS:
        if backend.handles(estimator):
            return backend()
    names = ", ".join(name for b in BACKENDS for name in b.supported())
    raise UnsupportedModelError(
        f"{type(estimator).__module__}.{type(estimator).__name__} is not a supported tree "
        f"model. Supported: {names}."
    )
