"""What booster backends (XGBoost, LightGBM) add to :class:`Backend`."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

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

    @abstractmethod
    def check_fit(self, estimator: Any, y: Any, fit_params: dict[str, Any]) -> None:
        """Refuse settings that cannot be corrected or exported, before training.

        :meth:`fit` calls it; so do trainers that fit the booster elsewhere
        (:mod:`hyp2onnx.dask`).
        """

    @abstractmethod
    def leaf_nodes(self, fitted: Any, Xc: np.ndarray) -> np.ndarray:
        """Node each row of ``Xc`` reaches in every tree, as the booster routes it.

        ``Xc`` holds rows in the comparison precision; the result is an
        integer array of shape (n_rows, n_trees) in :meth:`read_trees`'s node
        numbering, every tree of the model included.
        """
