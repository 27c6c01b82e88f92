"""What the distributed threshold corrections (Dask and Spark) search on each partition."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..correction.shared_rows import shared_rows
from ..estimators._interface import Backend

__all__ = ["training_rows"]


def training_rows(
    backend: Backend, fitted: Any, X: np.ndarray, y: np.ndarray, w: Any, compared: bool = True
) -> np.ndarray:
    """One partition's training rows, in the backend's comparison precision (``compared``)
    or as they are (float64 Klein rows, for trees of Klein splits)."""
    X, y = np.asarray(X), np.asarray(y)
    if y.shape[0] != X.shape[0] or (w is not None and np.shape(w)[0] != X.shape[0]):
        raise ValueError(
            f"a partition of X has {X.shape[0]} rows but its partition of y (or sample_weight) "
            "does not: give X, y and sample_weight the same partitions."
        )
    rows = shared_rows(backend.training_rows(fitted, y, None if w is None else np.asarray(w)))
    if rows is None:  # boosters grow every tree on the same rows
        raise ValueError("the trees of this booster were not grown on the same rows")
    X = X if rows.size == X.shape[0] else X[rows]
    return backend.compared_values(fitted, X) if compared else np.asarray(X, dtype=np.float64)
