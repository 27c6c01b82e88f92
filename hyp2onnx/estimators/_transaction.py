"""A fit either succeeds or changes nothing.

A refused fit (bad weights, points off the manifold, one class) used to
leave the attributes it had set so far: ``n_features_in_`` made
scikit-learn's ``check_is_fitted`` pass, and ``predict`` then failed on a
missing ``classes_``; a refused refit left a model mixing its old fit with
parts of the new one. `FitTransaction` wraps every ``fit`` and
``partial_fit`` a subclass defines: on any exception the instance's
attributes are put back as they were before the call, so an unfitted
model stays unfitted (``predict`` raises ``NotFittedError``) and a fitted
one keeps its previous fit. A fit must therefore build new fitted objects
rather than change the previous ones in place (a warm start copies them).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import UnsupportedModelError

__all__ = ["CONTINUATION_PARAMS", "FitTransaction", "refuse_continuation", "transactional"]

#: The methods that fit a model, wrapped wherever a subclass defines them.
_FITTING = ("fit", "partial_fit")

#: Fit parameters with which a booster continues from a previous model.
CONTINUATION_PARAMS = ("xgb_model", "init_model")


def refuse_continuation(estimator: Any, fit_params: dict[str, Any]) -> None:
    """Refuse ``warm_start=True`` and the boosters' continuation fit parameters.

    A tree model's thresholds are moved to Einstein midpoints of the rows
    each tree was grown on, and its learner was fitted in a tree space made
    of those rows, so a new fit cannot grow trees onto the corrected ones:
    the library would ignore ``warm_start`` silently (a forest refits from
    scratch, LightGBM drops the keyword) or mix two spaces.
    """
    asked = [f"{name}=..." for name in CONTINUATION_PARAMS if fit_params.get(name) is not None]
    if getattr(estimator, "warm_start", False):
        asked.insert(0, "warm_start=True")
    if asked:
        raise UnsupportedModelError(
            f"{type(estimator).__name__} cannot continue a previous fit ({', '.join(asked)}): "
            "its thresholds were moved to Einstein midpoints of the rows each tree was grown "
            "on, in a tree space fitted on those rows. Fit once, with all the trees you need."
        )


def transactional(method: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a fitting method so that on failure the instance is as it was before the call."""

    @functools.wraps(method)
    def fit(self: Any, *args: Any, **kwargs: Any) -> Any:
        before = dict(self.__dict__)
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(before)
            raise

    fit.__wrapped_fit__ = True  # type: ignore[attr-defined]
    return fit


class FitTransaction:
    """Mixin: the ``fit`` / ``partial_fit`` of every subclass restores the instance on failure."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _FITTING:
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "__wrapped_fit__", False):
                setattr(cls, name, transactional(method))
