"""Sample weights are checked before any library sees them, with the rows named.

A NaN, infinite or (for most backends) negative weight, or weights that
are all zero, make the libraries fail with their own internal messages
(XGBoost's "quantile.cc" check, a Spark barrier stage, a Dask ring
allreduce) or, for scikit-learn forests, answer with negative
"probabilities". Negative weights are refused except where the library
defines them (``Backend.takes_negative_weights``: LightGBM scales each
row's gradient and hessian by its weight, whatever its sign; a
scikit-learn regressor's leaf value is a weighted mean, unless a forest
draws bootstrap samples with the weights as probabilities).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.validation import _check_sample_weight

__all__ = [
    "check_weight_rows",
    "checked_weights",
    "rows_text",
    "weight_error",
    "weight_problems",
]


def rows_text(first: Any, count: int) -> str:
    """ "rows 3, 7, 9, 12, 20 and 4 more": the ``first`` few of ``count`` rows."""
    shown = [int(i) for i in first][:5]
    more = f" and {count - len(shown)} more" if count > len(shown) else ""
    return f"row{'s' if count > 1 else ''} {', '.join(map(str, shown))}{more}"


def weight_problems(
    w: np.ndarray, *, negative_ok: bool, null: np.ndarray | None = None, start: int = 0
) -> list[str]:
    """What is wrong with the weights ``w``, one phrase per kind, naming the rows.

    ``null`` marks missing values (an SQL null, a pandas NA) that ``w``
    holds as NaN; ``start`` is the number of ``w``'s first row.
    """
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    null = np.zeros(w.shape, dtype=bool) if null is None else np.asarray(null, dtype=bool)
    kinds = [
        ("null", null),
        ("NaN", np.isnan(w) & ~null),
        ("infinite", np.isinf(w)),
    ]
    if not negative_ok:
        kinds.append(("negative", w < 0))
    return [
        f"{name} at {rows_text(np.flatnonzero(mask)[:5] + start, int(mask.sum()))}"
        for name, mask in kinds
        if mask.any()
    ]


def check_weight_rows(
    w: np.ndarray, *, negative_ok: bool, what: str = "sample_weight", backend: str = ""
) -> None:
    """A ValueError naming the rows unless the weights ``w`` (one per training row) are usable."""
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    error = weight_error(
        weight_problems(w, negative_ok=negative_ok),
        int(np.count_nonzero(w)),
        w.size,
        negative_ok=negative_ok,
        what=what,
        backend=backend,
    )
    if error is not None:
        raise error


def checked_weights(
    sample_weight: Any, X: np.ndarray, *, negative_ok: bool, backend: str = ""
) -> np.ndarray:
    """``sample_weight`` as scikit-learn's ``_check_sample_weight`` gives it, checked first.

    Checked here before scikit-learn, whose own check names no rows (and a
    scalar stands for the same weight on every row).
    """
    n = X.shape[0]
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError):
        w = None  # not numbers: scikit-learn's check says so
    if w is not None and w.ndim == 0:
        w = np.full(n, float(w))
    if w is not None and w.shape == (n,):
        check_weight_rows(w, negative_ok=negative_ok, backend=backend)
    return _check_sample_weight(sample_weight, X, dtype=np.float64)


def weight_error(
    problems: list[str],
    n_nonzero: int,
    n_rows: int,
    *,
    negative_ok: bool,
    what: str = "sample_weight",
    backend: str = "",
) -> ValueError | None:
    """The ValueError for weights with ``problems`` (`weight_problems`) and ``n_nonzero``
    non-zero values among ``n_rows``, or None if they are usable."""
    if problems:
        rule = "finite" if negative_ok else "finite and non-negative"
        by = f" for {backend}" if backend else ""
        return ValueError(f"{what} must be {rule}{by}; found " + "; ".join(problems) + ".")
    if n_nonzero == 0 and n_rows > 0:
        return ValueError(
            f"{what}: every weight is zero ({n_rows} rows), so there is nothing to learn from; "
            "give some rows a non-zero (positive) weight."
        )
    return None
