"""What booster backends (XGBoost, LightGBM) add to :class:`Backend`."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from ._interface import Backend


class BoosterBackend(Backend):
    """A booster backend: says how the library subsamples rows, so that the
    hyperbolic models can turn it off and every tree sees every row."""

    @staticmethod
    @abstractmethod
    def row_subsampling(estimator: Any) -> str | None:
        """The setting that makes trees see random row subsets, or None."""

    @staticmethod
    @abstractmethod
    def disable_row_subsampling(estimator: Any) -> None:
        """Make every tree see every training row (column sampling is harmless)."""
