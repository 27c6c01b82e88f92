"""Say where the points come from; get ``input_geometry``, ``curvature`` and ``timelike_dim``.

Each hyperbolic library states the model, the curvature and the time
coordinate in its own way (table in ``docs/conventions.md``).
[`convention_of`][hyp2onnx.conventions.convention_of] reads a library's manifold or model object;
[`convention`][hyp2onnx.conventions.convention] takes the library's name and its own parameters. Both
return a [`Convention`][hyp2onnx.conventions.Convention] whose [`kwargs`][hyp2onnx.conventions.Convention.kwargs] go straight
to any hyp2onnx estimator, or to [`hyp2onnx.to_onnx`][hyp2onnx.to_onnx] for a plain Klein
model::

    conv = hyp2onnx.conventions.convention_of(geoopt.Lorentz(k=2.0))
    model = hyp2onnx.HyperbolicRandomForestClassifier(**conv.kwargs()).fit(X, y)

No library is imported here: objects are recognised by their class's
module and name, and their parameters are read as numbers.

hyp2onnx's conventions (``docs/export.md``): curvature ``K < 0``,
``R = 1 / sqrt(-K)``; hyperboloid ``x_0^2 - |x_s|^2 = R^2`` with the time
coordinate in column ``timelike_dim``; Poincare (and Klein) points in the
ball of radius ``R``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .geometry import GEOMETRIES, curvature_radius, from_klein, to_klein

__all__ = ["SOURCES", "Convention", "convention", "convention_of", "distance", "gensim_points"]


@dataclass(frozen=True)
class Convention:
    """Where points live, in hyp2onnx's terms."""

    input_geometry: str
    curvature: float
    timelike_dim: int = 0
    source: str = ""  #: what it was read from, for messages

    def __post_init__(self) -> None:
        if self.input_geometry not in GEOMETRIES:
            raise ValueError(
                f"input_geometry must be one of {GEOMETRIES}, got {self.input_geometry!r}."
            )
        curvature_radius(_number(self.curvature, "curvature"))  # K < 0, finite
        t = self.timelike_dim
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise ValueError(
                f"timelike_dim must be an integer column index, got {t!r} ({type(t).__name__})."
            )

    def kwargs(self) -> dict[str, Any]:
        """``input_geometry``, ``curvature``, ``timelike_dim`` for estimators and ``to_onnx``."""
        return {
            "input_geometry": self.input_geometry,
            "curvature": self.curvature,
            "timelike_dim": self.timelike_dim,
        }


def _positive(name: str, value: Any, source: str) -> float:
    v = _number(value, f"{source}: {name}")
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{source}: {name} must be a positive number, got {v!r}.")
    return v


def _number(value: Any, name: str = "the parameter") -> float:
    """A finite Python float from a number, a 0-d/1-element array or tensor.

    Booleans, strings and NaN or infinity are refused: ``c=True`` read as 1.0
    or ``k=nan`` read as "spherical" would give another model's geometry.
    """
    if hasattr(value, "detach"):  # torch tensors, without importing torch
        value = value.detach().cpu().numpy()
    array = np.asarray(value)
    if array.dtype.kind not in "iuf":  # b (bool), U/S/O (strings, objects), c (complex)
        raise ValueError(f"{name} must be a real number, got {value!r}.")
    if array.size != 1:
        raise ValueError(f"{name}: expected one number, got an array of shape {array.shape}.")
    number = float(array.reshape(()))
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {number!r}.")
    return number


def _softplus(x: float) -> float:
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


#: ``convention(source, ...)``'s sources and the parameter each takes.
SOURCES: dict[str, str] = {
    "gensim": "(none) gensim PoincareModel: unit Poincare ball, K = -1",
    "geoopt.PoincareBall": "c > 0: ball of radius 1/sqrt(c), K = -c",
    "geoopt.Lorentz": "k > 0: <x, x> = -k, time at 0, K = -1/k",
    "geoopt.Stereographic": "k < 0: Poincare ball of radius 1/sqrt(-k), K = k",
    "geomstats.Hyperboloid": "(none) time at 0, K = -1",
    "geomstats.PoincareBall": "(none) unit ball, K = -1",
    "hypll": "c > 0 the curvature after softplus (manifold.c()), or raw= the stored parameter",
    "hgcn": "c > 0: -x_0^2 + |x_s|^2 = -1/c, time at 0, K = -c",
}


def convention(
    source: str, *, c: float | None = None, k: float | None = None, raw: float | None = None
) -> Convention:
    """The convention of points from ``source`` (a key of `SOURCES`) with its parameters.

    ``c``/``k`` are the library's own curvature parameters, named as it names
    them; for hypll, ``c`` is the curvature ``manifold.c()`` returns and
    ``raw`` the stored parameter before softplus (default 1.0: c = 1.3133).
    """

    def needs(name: str, value: Any) -> float:
        if value is None:
            raise ValueError(f"{source} points need {name}= (see hyp2onnx.conventions.SOURCES).")
        return _number(value, f"{source}: {name}")

    def no(*names: str) -> None:
        given = {"c": c, "k": k, "raw": raw}
        extra = [n for n in names if given[n] is not None]
        if extra:
            raise ValueError(f"{source} takes no {', '.join(extra)}= parameter.")

    if source in ("gensim", "geomstats.PoincareBall"):
        no("c", "k", "raw")
        return Convention("poincare", -1.0, 0, source)
    if source == "geomstats.Hyperboloid":
        no("c", "k", "raw")
        return Convention("hyperboloid", -1.0, 0, source)
    if source == "geoopt.PoincareBall":
        no("k", "raw")
        return Convention("poincare", -_positive("c", needs("c", c), source), 0, source)
    if source == "geoopt.Lorentz":
        no("c", "raw")
        return Convention("hyperboloid", -1.0 / _positive("k", needs("k", k), source), 0, source)
    if source == "geoopt.Stereographic":
        no("c", "raw")
        value = needs("k", k)
        if not value < 0:
            raise ValueError(
                f"geoopt.Stereographic(k={value:g}) is "
                + ("flat (Euclidean)" if value == 0 else "spherical")
                + ": hyp2onnx needs hyperbolic points (k < 0)."
            )
        return Convention("poincare", value, 0, source)
    if source == "hypll":
        no("k")
        if c is not None and raw is not None:
            raise ValueError("hypll: give c= (after softplus) or raw= (before), not both.")
        value = (
            c
            if c is not None
            else _softplus(_number(1.0 if raw is None else raw, f"{source}: raw"))
        )
        return Convention("poincare", -_positive("c", value, source), 0, source)
    if source == "hgcn":
        no("k", "raw")
        return Convention("hyperboloid", -_positive("c", needs("c", c), source), 0, source)
    raise ValueError(f"unknown source {source!r}; known: {', '.join(SOURCES)}.")


def _class_names(obj: Any) -> list[tuple[str, str]]:
    return [(cls.__module__.split(".")[0], cls.__name__) for cls in type(obj).__mro__]


def convention_of(obj: Any) -> Convention:
    """The convention of points on a library's manifold (or in its model) ``obj``.

    Reads: geoopt ``PoincareBall``/``PoincareBallExact`` (``c``),
    ``Lorentz`` (``k``), ``Stereographic`` (``k``); hypll ``PoincareBall``
    (``c()``); gensim ``PoincareModel`` and ``PoincareKeyedVectors``;
    geomstats ``Hyperboloid`` (extrinsic coordinates) and ``PoincareBall``.
    """
    names = _class_names(obj)
    library = names[0][0]
    classes = {n for lib, n in names if lib == library}
    if library == "geoopt":
        if "PoincareBall" in classes:
            return convention("geoopt.PoincareBall", c=obj.c)
        if "Lorentz" in classes:
            return convention("geoopt.Lorentz", k=obj.k)
        if "Stereographic" in classes:
            return convention("geoopt.Stereographic", k=obj.k)
    if library == "hypll" and "PoincareBall" in classes:
        return convention("hypll", c=obj.c())
    if library == "gensim" and classes & {"PoincareModel", "PoincareKeyedVectors"}:
        return convention("gensim")
    if library == "geomstats":
        if "Hyperboloid" in classes:
            coords = getattr(obj, "coords_type", "extrinsic")
            if coords != "extrinsic":
                raise ValueError(
                    f"geomstats Hyperboloid with coords_type={coords!r}: convert the points to "
                    "extrinsic coordinates (hyperboloid.intrinsic_to_extrinsic_coords) first."
                )
            return convention("geomstats.Hyperboloid")
        if "PoincareBall" in classes:
            return convention("geomstats.PoincareBall")
    raise ValueError(
        f"cannot tell the convention of a {type(obj).__module__}.{type(obj).__name__}; "
        f"use hyp2onnx.conventions.convention() with one of: {', '.join(SOURCES)}."
    )


def gensim_points(model: Any) -> tuple[list[Any], np.ndarray]:
    """The node keys and their unit-Poincare-ball vectors (float64) of a gensim PoincareModel."""
    kv = getattr(model, "kv", model)
    if not (hasattr(kv, "index_to_key") and hasattr(kv, "vectors")):
        raise TypeError(
            "gensim_points needs a trained gensim PoincareModel (or its .kv, "
            f"PoincareKeyedVectors), got {type(model).__name__}."
        )
    return list(kv.index_to_key), np.asarray(kv.vectors, dtype=np.float64)


def distance(X: np.ndarray, Y: np.ndarray, conv: Convention) -> np.ndarray:
    """Hyperbolic distances between rows of ``X`` and ``Y`` (same shape) under ``conv``.

    Both are mapped to the hyperboloid of radius ``R`` with
    [`hyp2onnx.geometry`][hyp2onnx.geometry] (checked on the way); the distance is
    ``R * arccosh(-<x, y>_L / R^2)``.
    """
    R = curvature_radius(conv.curvature)
    points = []
    for Z in (X, Y):
        k = to_klein(Z, conv.input_geometry, conv.curvature, conv.timelike_dim)
        points.append(from_klein(k, "hyperboloid", conv.curvature, 0))
    x, y = points
    inner = x[:, 0] * y[:, 0] - np.sum(x[:, 1:] * y[:, 1:], axis=1)
    return R * np.arccosh(np.maximum(inner / (R * R), 1.0))
