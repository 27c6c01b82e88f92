"""Input made of blocks: hyperbolic, spherical, Euclidean and categorical columns.

A row of a product-space model is its blocks' columns side by side, in the
order the blocks are listed. Each block becomes some *tree features*, the
coordinates the trees split on, and each kind has its own midpoint (where a
threshold goes between its two nearest training values):

========================  ==============  =====================  ==========================
block                     input columns   tree features          midpoint of a < b
========================  ==============  =====================  ==========================
``Hyperbolic(d)``         d + 1 (hyper-   d Klein coordinates    Einstein
                          boloid) or d    ([`geometry`][hyp2onnx.geometry])     ``tanh((artanh a + artanh b)/2)``
``Spherical(d)``          d + 1           d gnomonic ``x_i/x_0`` angular
                                                                 ``tan((atan a + atan b)/2)``
``Euclidean(d)``          d               the columns            arithmetic ``(a + b)/2``
``Categorical(d)``        d               the integer codes      the backend's own rule
========================  ==============  =====================  ==========================

``dims`` is always the number of tree features (the manifold dimension for
curved blocks, as in ``manify``'s signatures ``[(K, d), ...]``, which
[`as_blocks`][hyp2onnx.blocks.as_blocks] also accepts: ``K < 0`` hyperbolic hyperboloid, ``K = 0``
Euclidean, ``K > 0`` spherical). The last block may leave it out: it then
takes the remaining columns (``[Hyperbolic(2), Euclidean()]``: an embedding,
then any number of plain columns).

Spherical blocks: on the sphere ``x_0^2 + |x_s|^2 = R^2`` (``R = 1/sqrt(K)``)
a split through the centre is a half-line of the gnomonic coordinate
``g_i = x_i / x_0`` on the open hemisphere ``x_0 > 0`` only (see docs/math.md,
"Spherical blocks: the gnomonic twin").
Points with ``x_0 <= 0`` have no gnomonic image, so they are refused, naming
the rows; ``base_dim`` chooses which column is ``x_0`` (pick one on whose
positive side all the data lie).

Categorical columns hold non-negative integer codes (below ``2**31``). LightGBM
and XGBoost split them natively (set membership); scikit-learn trees split
the codes as numbers, at scikit-learn's own thresholds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from numbers import Integral, Real
from typing import Any

import numpy as np

from .errors import InvalidPointError
from .geometry import (
    DEFAULT_RTOL,
    GEOMETRIES,
    Geometry,
    as_points,
    check_finite,
    curvature_radius,
    gnomonic_midpoint,
    raise_rows,
    sum_of_squares,
    to_klein,
)

__all__ = [
    "Block",
    "Categorical",
    "Euclidean",
    "Hyperbolic",
    "MAX_CATEGORY",
    "Spherical",
    "as_blocks",
    "blocks_from_json",
    "blocks_to_json",
    "categorical_features",
    "check_categories",
    "describe_blocks",
    "feature_kinds",
    "gnomonic_midpoint",
    "n_features",
    "n_input_columns",
    "spans",
    "sphere_radius",
    "to_features",
]

#: Largest categorical code + 1 (LightGBM and XGBoost hold codes as 32-bit ints).
MAX_CATEGORY = 1 << 31


def _check_dims(dims: Any, kind: str) -> None:
    if dims is None:
        return  # the remaining columns (last block only), resolved by as_blocks
    if isinstance(dims, bool) or not isinstance(dims, Integral) or dims < 1:
        raise ValueError(f"{kind}(dims=...) must be an integer >= 1 or None, got {dims!r}.")


def _width(block: Any, extra: int) -> int:
    if block.dims is None:
        raise ValueError(
            f"{type(block).__name__}(dims=None) takes the remaining columns, which are known "
            "only once X is seen; resolve it with as_blocks(..., n_columns=X.shape[1])."
        )
    return block.dims + extra


def _resolved_dims(block: Any) -> int:
    """``block.dims``, which only a resolved block (see [`as_blocks`][hyp2onnx.blocks.as_blocks]) is sure to have."""
    return _width(block, 0)


@dataclass(frozen=True)
class Hyperbolic:
    """``dims``-dimensional hyperbolic space in ``model`` (hyperboloid, poincare or klein)."""

    dims: int | None = None
    model: Geometry = "hyperboloid"
    curvature: float = -1.0
    timelike_dim: int = 0

    def __post_init__(self) -> None:
        _check_dims(self.dims, "Hyperbolic")
        if self.model not in GEOMETRIES:
            raise ValueError(
                f"Hyperbolic(model=...) must be one of {', '.join(map(repr, GEOMETRIES))}, "
                f"got {self.model!r}."
            )
        if isinstance(self.curvature, (bool, np.bool_)) or not isinstance(self.curvature, Real):
            raise ValueError(
                f"Hyperbolic(curvature=...) must be a number (a finite negative one), got "
                f"{self.curvature!r} ({type(self.curvature).__name__}); pass e.g. curvature=-1.0."
            )
        curvature_radius(self.curvature)
        _curved(self, "timelike_dim")

    @property
    def n_columns(self) -> int:
        return _width(self, 1 if self.model == "hyperboloid" else 0)


@dataclass(frozen=True)
class Spherical:
    """The ``dims``-sphere of curvature ``K > 0`` in ``dims + 1`` ambient columns.

    ``base_dim`` is the column (within the block) taken as ``x_0``: the data
    must lie on its positive side, ``x_0 > 0``.
    """

    dims: int | None = None
    curvature: float = 1.0
    base_dim: int = 0

    def __post_init__(self) -> None:
        _check_dims(self.dims, "Spherical")
        sphere_radius(self.curvature)
        _curved(self, "base_dim")

    @property
    def n_columns(self) -> int:
        return _width(self, 1)


@dataclass(frozen=True)
class _Columns:
    """``dims`` columns taken as they are, one feature each (no coordinates to map)."""

    dims: int | None = None

    def __post_init__(self) -> None:
        _check_dims(self.dims, type(self).__name__)

    @property
    def n_columns(self) -> int:
        return _width(self, 0)


@dataclass(frozen=True)
class Euclidean(_Columns):
    """``dims`` plain numeric columns."""


@dataclass(frozen=True)
class Categorical(_Columns):
    """``dims`` categorical columns holding integer codes ``0 .. 2**31 - 1``."""


Block = Hyperbolic | Spherical | Euclidean | Categorical
_KINDS: dict[str, type] = {
    "hyperbolic": Hyperbolic,
    "spherical": Spherical,
    "euclidean": Euclidean,
    "categorical": Categorical,
}
#: Midpoint rule of each block's features (thresholds.place_thresholds' names).
_MIDPOINT = {
    Hyperbolic: "einstein",
    Spherical: "angular",
    Euclidean: "arithmetic",
    Categorical: "keep",
}


def _curved(block: Any, base: str) -> None:
    """The checks a curved block (hyperbolic, spherical) ends with, its curvature already
    checked: the curvature stored as a float (as exported), and the column named by
    its field ``base`` an index (that lies within the block, once ``dims`` is known)."""
    object.__setattr__(block, "curvature", float(block.curvature))
    index, what = getattr(block, base), f"{type(block).__name__}({base}=...)"
    _check_index(index, what)
    if block.dims is not None:
        _check_column(index, block.n_columns, what)


def _check_index(index: Any, what: str) -> None:
    """A column index must be a non-negative integer (checked even before dims is known)."""
    if isinstance(index, (bool, np.bool_)) or not isinstance(index, Integral) or index < 0:
        raise ValueError(
            f"{what} must be a non-negative integer column of the block, got {index!r}."
        )


def _check_column(index: Any, n_columns: int, what: str) -> None:
    if (
        isinstance(index, bool)
        or not isinstance(index, Integral)
        or not 0 <= int(index) < n_columns
    ):
        raise ValueError(
            f"{what} must be a column of the block, 0 .. {n_columns - 1}; got {index!r}."
        )


def sphere_radius(curvature: float) -> float:
    """``R = 1 / sqrt(K)`` for a finite curvature ``K > 0``."""
    if (
        isinstance(curvature, (bool, np.bool_))
        or not isinstance(curvature, Real)
        or not (math.isfinite(curvature) and curvature > 0)
    ):
        raise ValueError(
            f"Spherical(curvature=...) must be a finite positive number, got {curvature!r}."
        )
    return 1.0 / math.sqrt(curvature)


def as_blocks(spec: Any, n_columns: int | None = None) -> tuple[Block, ...]:
    """Blocks from a list of block objects and/or ``manify`` signature pairs ``(K, d)``.

    A pair ``(K, d)`` is ``Hyperbolic(d, curvature=K)`` (hyperboloid, timelike
    column first) for ``K < 0``, ``Euclidean(d)`` for ``K = 0`` and
    ``Spherical(d, curvature=K)`` for ``K > 0``. The last block may leave
    ``dims`` out (None): it then takes the remaining columns of rows with
    ``n_columns`` columns (left unresolved when ``n_columns`` is None).
    """
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence) or len(spec) == 0:
        raise ValueError(
            "input_blocks must be a non-empty list of blocks (Hyperbolic, Spherical, Euclidean, "
            f"Categorical) or of (curvature, dims) pairs; got {spec!r}."
        )
    blocks: list[Block] = []
    for item in spec:
        if isinstance(item, (Hyperbolic, Spherical, Euclidean, Categorical)):  # _MIDPOINT's keys
            blocks.append(item)
        elif isinstance(item, Sequence) and len(item) == 2 and not isinstance(item, str):
            k, d = item
            if isinstance(k, bool) or not isinstance(k, Real) or not math.isfinite(k):
                raise ValueError(
                    f"a signature pair (curvature, dims) needs a finite curvature, got {item!r}."
                )
            curvature = float(k)  # what the block stores
            blocks.append(
                Hyperbolic(d, curvature=curvature)
                if curvature < 0
                else Spherical(d, curvature=curvature)
                if curvature > 0
                else Euclidean(d)
            )
        else:
            raise ValueError(
                f"input_blocks entry {item!r} is neither a block (Hyperbolic, Spherical, "
                "Euclidean, Categorical) nor a (curvature, dims) pair."
            )
    if any(b.dims is None for b in blocks[:-1]):
        raise ValueError("only the last input block may leave dims out (the remaining columns).")
    last = blocks[-1]
    if last.dims is None and n_columns is not None:
        taken = sum(b.n_columns for b in blocks[:-1])
        extra = (
            1 if isinstance(last, Spherical) or getattr(last, "model", "") == "hyperboloid" else 0
        )
        dims = n_columns - taken - extra
        if dims < 1:
            raise InvalidPointError(
                f"X has {n_columns} columns: the blocks before the last take {taken}, which "
                f"leaves no {type(last).__name__} feature for the last block."
            )
        blocks[-1] = replace(last, dims=dims)
    return tuple(blocks)


def n_input_columns(blocks: Sequence[Block]) -> int:
    """Columns of a row."""
    return sum(b.n_columns for b in blocks)


def n_features(blocks: Sequence[Block]) -> int:
    """Tree features of a row."""
    return sum(_resolved_dims(b) for b in blocks)


def feature_kinds(blocks: Sequence[Block]) -> np.ndarray:
    """Midpoint rule of every tree feature: einstein, angular, arithmetic or keep."""
    return np.array(
        [_MIDPOINT[type(b)] for b in blocks for _ in range(_resolved_dims(b))], dtype=object
    )


def categorical_features(blocks: Sequence[Block]) -> np.ndarray:
    """Indices of the tree features that are categorical codes."""
    return np.flatnonzero(feature_kinds(blocks) == "keep")


def spans(blocks: Sequence[Block]) -> list[tuple[Block, int, int]]:
    """Each block with its first input column and first tree feature."""
    out, column, feature = [], 0, 0
    for b in blocks:
        out.append((b, column, feature))
        column += b.n_columns
        feature += _resolved_dims(b)
    return out


def _gnomonic(X: np.ndarray, block: Spherical, check: bool, rtol: float) -> np.ndarray:
    x0 = X[:, block.base_dim]
    xs = np.delete(X, block.base_dim, axis=1)
    if check:
        R = sphere_radius(block.curvature)
        raise_rows(
            x0 <= 0,
            f"of a spherical block have x_0 <= 0 (block column {block.base_dim}): gnomonic "
            "coordinates x_i / x_0 exist only on the open hemisphere x_0 > 0",
            "Choose Spherical(base_dim=...) so that every point lies on that column's positive "
            "side (rotate the data first if no column does).",
        )
        # Scaled by the row's largest magnitude so that no square overflows
        # (x0 * x0 of [1e200, 1, 0] is inf, and inf > rtol * inf is False).
        m = np.maximum(x0, np.abs(xs).max(axis=1, initial=0.0))
        with np.errstate(over="ignore", under="ignore"):
            norm2 = (x0 / m) ** 2 + sum_of_squares(xs / m[:, None])
            r = R / m
            off = np.abs(norm2 - r * r) > rtol * norm2
        raise_rows(
            off,
            f"are off the sphere |x|^2 = R^2 with R = {R:g} (curvature {block.curvature}; "
            f"relative tolerance {rtol:g})",
            "Check the block's curvature, or project the points onto the sphere. Pass "
            "check_manifold=False to skip this check for trusted data.",
        )
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        g = xs / x0[:, None]
    # Points at the edge of the hemisphere (x_0 tiny or 0) have gnomonic
    # coordinates no learner or float32 graph can hold: [1e-300, 1, 0] gives
    # 1e300, inf for scikit-learn and 0 / 0 in a float32 graph. Refused always,
    # as NaN and infinity are, so that every path gives the same error.
    raise_rows(
        ~(np.abs(g) <= _GNOMONIC_LIMIT).all(axis=1),
        "of a spherical block lie too close to the edge of the hemisphere x_0 > 0: their "
        f"gnomonic coordinates x_i / x_0 exceed {_GNOMONIC_LIMIT:.4g} (float32's largest)",
        "Choose Spherical(base_dim=...) so that every point lies well inside that column's "
        "positive side (rotate the data first if no column does).",
    )
    return g


#: Largest gnomonic coordinate a spherical block takes: float32's largest.
_GNOMONIC_LIMIT = float(np.finfo(np.float32).max)


def check_categories(C: np.ndarray) -> None:
    """Categorical codes must be integers in ``0 .. 2**31 - 1`` (NaN is not a code)."""
    bad = ~((C >= 0) & (C < MAX_CATEGORY) & (np.floor(C) == C))
    raise_rows(
        bad.any(axis=1),
        f"have categorical codes that are not integers in 0 .. {MAX_CATEGORY - 1}",
        "Encode each category as a non-negative integer code (e.g. with "
        "sklearn.preprocessing.OrdinalEncoder).",
    )


def to_features(
    X: Any, blocks: Sequence[Block], *, check: bool = True, rtol: float = DEFAULT_RTOL
) -> np.ndarray:
    """The tree features (float64) of rows ``X`` whose columns are ``blocks``.

    Curved blocks are checked against their manifold unless ``check=False``;
    NaN, infinity and bad categorical codes are always refused.
    """
    X = as_points(X)
    want = n_input_columns(blocks)
    if X.shape[1] != want:
        raise InvalidPointError(
            f"X has {X.shape[1]} columns, but the input blocks take {want} "
            f"({', '.join(f'{type(b).__name__} {b.n_columns}' for b in blocks)})."
        )
    check_finite(X)
    parts = []
    for block, c0, _ in spans(blocks):
        part = X[:, c0 : c0 + block.n_columns]
        if isinstance(block, Hyperbolic):
            parts.append(
                to_klein(
                    part, block.model, block.curvature, block.timelike_dim, check=check, rtol=rtol
                )
            )
        elif isinstance(block, Spherical):
            parts.append(_gnomonic(part, block, check, rtol))
        else:
            if isinstance(block, Categorical):
                check_categories(part)
            parts.append(part)
    return np.concatenate(parts, axis=1) if len(parts) > 1 else np.array(parts[0], dtype=np.float64)


def blocks_to_json(blocks: Sequence[Block]) -> str:
    """A JSON description of ``blocks`` (for exported models' metadata)."""
    kind_of = {cls: name for name, cls in _KINDS.items()}
    return json.dumps(
        [{"kind": kind_of[type(b)], **asdict(b)} for b in blocks],
        default=lambda v: v.item(),  # numpy scalars
    )


def blocks_from_json(text: str) -> tuple[Block, ...]:
    """Inverse of [`blocks_to_json`][hyp2onnx.blocks.blocks_to_json]."""
    out = []
    for entry in json.loads(text):
        entry = dict(entry)
        out.append(_KINDS[entry.pop("kind")](**entry))
    return tuple(out)


def describe_blocks(blocks: Sequence[Block]) -> str:
    """A one-line description, e.g. ``hyperbolic(2, hyperboloid, K=-1) + categorical(1)``."""
    words = []
    for b in blocks:
        if isinstance(b, Hyperbolic):
            words.append(f"hyperbolic({b.dims}, {b.model}, K={b.curvature:g})")
        elif isinstance(b, Spherical):
            words.append(f"spherical({b.dims}, K={b.curvature:g}, base column {b.base_dim})")
        else:
            words.append(f"{type(b).__name__.lower()}({b.dims})")
    return " + ".join(words)
