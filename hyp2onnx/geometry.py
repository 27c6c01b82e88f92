"""Maps between the hyperboloid, Poincare and Beltrami-Klein models.

Everything a tree sees is a *unit-ball Klein coordinate*: for curvature
``K < 0`` and ``R = 1 / sqrt(-K)``

* hyperboloid ``x`` (``x_0^2 - |x_s|^2 = R^2``, ``x_0 > 0``): ``k = x_s / x_0``
  (``K`` does not enter);
* Poincare ball of radius ``R``: with ``q = p / R``, ``k = 2 q / (1 + |q|^2)``;
* Klein ball of radius ``R``: ``k = input / R``.

A split ``k_i <= t`` is a geodesic hyperplane of hyperbolic space, so an
ordinary Euclidean tree on ``k`` is a hyperbolic decision tree; the one
hyperbolic step is where a threshold goes between its two nearest training
values, the 1-D Einstein midpoint [`einstein_midpoint`][hyp2onnx.geometry.einstein_midpoint].

Sums of squares are taken in one fixed pairwise order
([`sum_of_squares`][hyp2onnx.geometry.sum_of_squares]) that the ONNX emitter repeats node for node, so the
exported graph computes bit-identical Klein coordinates.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from .errors import InvalidPointError

Geometry = Literal["hyperboloid", "poincare", "klein"]
GEOMETRIES: tuple[Geometry, ...] = ("hyperboloid", "poincare", "klein")

#: Default relative tolerance of the on-manifold checks (see [`check_points`][hyp2onnx.geometry.check_points]).
DEFAULT_RTOL = 1e-5

#: Radius (in units of ``R``) to which the centred designs (isolation and rotation
#: forests) hold in float64: ``2^-53 cosh(r)^2``, the precision of a point's Klein
#: coordinates seen from a frame at the same radius, is about 0.016 there
#: (``docs/guarantees.md``, "Far points").
CENTRED_RADIUS = 17.0

__all__ = [
    "CENTRED_RADIUS",
    "GEOMETRIES",
    "check_points",
    "check_representable",
    "check_timelike_dim",
    "curvature_radius",
    "einstein_midpoint",
    "from_klein",
    "gnomonic_midpoint",
    "hyperbolic_radius",
    "hyperboloid_to_klein",
    "hyperboloid_to_poincare",
    "klein_to_hyperboloid",
    "klein_to_poincare",
    "lorentzian_centroid",
    "move_to_origin",
    "n_klein_features",
    "name_far_rows",
    "poincare_to_klein",
    "sum_of_squares",
    "to_klein",
    "unit_hyperboloid",
]


def curvature_radius(curvature: float) -> float:
    """Return ``R = 1 / sqrt(-K)`` for a finite curvature ``K < 0``."""
    try:
        k = float(curvature)
    except (TypeError, ValueError):
        raise ValueError(f"curvature must be a negative number, got {curvature!r}.") from None
    if not math.isfinite(k) or k >= 0:
        raise ValueError(
            f"curvature must be a finite negative number (hyperbolic space), got {curvature!r}."
        )
    return 1.0 / math.sqrt(-k)


def _check_geometry(geometry: str) -> None:
    if geometry not in GEOMETRIES:
        raise ValueError(
            f"input_geometry must be one of {', '.join(map(repr, GEOMETRIES))}, got {geometry!r}."
        )


def n_klein_features(n_input_features: int, geometry: str) -> int:
    """Number of Klein coordinates for ``n_input_features`` input columns."""
    _check_geometry(geometry)
    return n_input_features - 1 if geometry == "hyperboloid" else n_input_features


def check_timelike_dim(timelike_dim: Any, n_input_features: int, geometry: str) -> int:
    """``timelike_dim`` as an int, if it names a column of ``n_input_features`` hyperboloid columns.

    A float (2.5, or even 2.0), a bool or a column outside ``[-n, n)`` is a
    ValueError: taken modulo the width it would read the wrong column and
    the graph would return another model's answers. Other geometries have
    no timelike column, so any integer passes.
    """
    if isinstance(timelike_dim, (bool, np.bool_)) or not isinstance(
        timelike_dim, (int, np.integer)
    ):
        raise ValueError(
            f"timelike_dim must be an integer column index, got {timelike_dim!r} "
            f"({type(timelike_dim).__name__})."
        )
    if geometry == "hyperboloid" and not -n_input_features <= timelike_dim < n_input_features:
        raise ValueError(
            f"timelike_dim={timelike_dim} is out of range for hyperboloid input with "
            f"{n_input_features} columns; pass a column in {-n_input_features}..."
            f"{n_input_features - 1} (the timelike one, usually 0)."
        )
    return int(timelike_dim)


def sum_of_squares(q: np.ndarray) -> np.ndarray:
    """Row-wise ``sum(q**2)`` in a fixed, documented order.

    The squared columns are padded with zeros to a power of two, then halves
    are added pairwise (``s = s[:, :h] + s[:, h:]``) until one column is left.
    Numpy's own reductions and onnxruntime's ReduceSum use other orders that
    can differ in the last bit; the ONNX emitter repeats this one exactly.
    """
    s = q * q
    width = s.shape[1]
    padded = 1 << max(width - 1, 0).bit_length()
    if padded != width:
        s = np.concatenate([s, np.zeros((s.shape[0], padded - width), dtype=s.dtype)], axis=1)
    while s.shape[1] > 1:
        half = s.shape[1] // 2
        s = s[:, :half] + s[:, half:]
    return s[:, 0]


def _timelike_split(X: np.ndarray, timelike_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Return the timelike column and the spacelike columns (in order)."""
    n_cols = X.shape[1]
    if not -n_cols <= timelike_dim < n_cols:
        raise ValueError(
            f"timelike_dim={timelike_dim} is out of range for hyperboloid input with "
            f"{n_cols} columns."
        )
    t = timelike_dim % n_cols
    if t in (0, n_cols - 1):  # a view: no copy of the rows
        return X[:, t], X[:, 1:] if t == 0 else X[:, :t]
    return X[:, t], np.delete(X, t, axis=1)


def hyperboloid_to_klein(X: np.ndarray, timelike_dim: int = 0) -> np.ndarray:
    """``k_i = x_i / x_0`` (unit-ball Klein coordinates; curvature does not enter)."""
    x0, xs = _timelike_split(np.asarray(X, dtype=np.float64), timelike_dim)
    return xs / x0[:, None]


def poincare_to_klein(P: np.ndarray, curvature: float = -1.0) -> np.ndarray:
    """``k = 2 q / (1 + |q|^2)`` with ``q = p / R``."""
    q = np.asarray(P, dtype=np.float64) / curvature_radius(curvature)
    return 2.0 * q / (1.0 + sum_of_squares(q))[:, None]


def klein_to_poincare(Kc: np.ndarray, curvature: float = -1.0) -> np.ndarray:
    """Unit-ball Klein coordinates to the Poincare ball of radius R."""
    k = np.asarray(Kc, dtype=np.float64)
    q = k / (1.0 + np.sqrt(1.0 - sum_of_squares(k)))[:, None]
    return curvature_radius(curvature) * q


def klein_to_hyperboloid(
    Kc: np.ndarray, curvature: float = -1.0, timelike_dim: int = 0
) -> np.ndarray:
    """Unit-ball Klein coordinates to the hyperboloid ``x_0^2 - |x_s|^2 = R^2``."""
    k = np.asarray(Kc, dtype=np.float64)
    x0 = curvature_radius(curvature) / np.sqrt(1.0 - sum_of_squares(k))
    xs = x0[:, None] * k
    return np.insert(xs, timelike_dim % (k.shape[1] + 1), x0, axis=1)


def hyperboloid_to_poincare(
    X: np.ndarray, curvature: float = -1.0, timelike_dim: int = 0
) -> np.ndarray:
    """``p = R x_s / (R + x_0)``."""
    R = curvature_radius(curvature)
    x0, xs = _timelike_split(np.asarray(X, dtype=np.float64), timelike_dim)
    return R * xs / (R + x0)[:, None]


def as_points(X: np.ndarray, what: str = "X") -> np.ndarray:
    """``X`` as a 2-D numeric array, or an InvalidPointError naming ``what`` and the shape it has."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise InvalidPointError(
            f"{what} must be a 2-D array of points (n_samples, n_features), got an array of "
            f"shape {X.shape}. Reshape a single point with X.reshape(1, -1)."
        )
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise InvalidPointError(f"{what} must hold real numbers, got dtype {X.dtype}.")
    return X.astype(np.float64, copy=False)


def raise_rows(bad: np.ndarray, message: str, fix: str) -> None:
    """Raise [`InvalidPointError`][hyp2onnx.errors.InvalidPointError] naming the rows ``bad`` marks, if any."""
    rows = np.flatnonzero(bad)
    if rows.size == 0:
        return
    shown = ", ".join(str(r) for r in rows[:5]) + (", ..." if rows.size > 5 else "")
    problem = f"{rows.size} row(s) {message} (rows {shown})"
    error = InvalidPointError(f"{problem}. {fix}")
    # The two parts, for callers that show them apart (the command line): the
    # message may hold ". " itself ("0 .. 2147483647"), so splitting the text fails.
    error.problem, error.fix = problem, fix
    raise error


def check_finite(X: np.ndarray) -> None:
    """Reject NaN and infinity, naming the rows (the per-row pass only on failure)."""
    if not np.isfinite(X).all():
        raise_rows(
            ~np.isfinite(X).all(axis=1),
            "contain NaN or infinity",
            "Hyperbolic points must be finite; drop or impute those rows first.",
        )


def check_representable(X: np.ndarray, dtype: Any) -> np.ndarray:
    """``X`` cast to ``dtype``, if every value is finite and stays finite in ``dtype``.

    What a graph's caller checks before feeding it: an ONNX graph cannot
    raise, so a NaN row, or a far point whose coordinates overflow float32
    (hyperbolic radius above about 89) and become infinity in the cast,
    would get a confident label. Rejected with the rows named. Values too
    small for ``dtype`` round to zero or a subnormal, as any cast does.
    """
    X = as_points(np.asarray(X), "X")
    check_finite(X)
    dtype = np.dtype(dtype)
    limit = float(np.finfo(dtype).max)
    if X.size and float(np.abs(X).max()) > limit:
        raise_rows(
            (np.abs(X) > limit).any(axis=1),
            f"hold values beyond {dtype.name}'s largest, {limit:.4g}, which would become "
            "infinity in the graph's input",
            "Export the graph with dtype='float64' (--dtype float64) for such far points.",
        )
    return X.astype(dtype)


#: Rows a check computes at once: its temporaries stay a block's size, not the data's.
_CHECK_BLOCK = 1 << 14


def _row_by_row(n: int, values: Callable[[slice], np.ndarray], dtype: Any) -> np.ndarray:
    """``values`` of each block of the ``n`` rows (a row's value its own alone, so the same
    as of all rows at once) in one array."""
    out = np.empty(n, dtype=dtype)
    for start in range(0, n, _CHECK_BLOCK):
        rows = slice(start, start + _CHECK_BLOCK)
        out[rows] = values(rows)
    return out


def _off_hyperboloid(
    x0: np.ndarray, xs: np.ndarray, R: float, rtol: float, rows: slice
) -> np.ndarray:
    """Whether each of ``rows`` is off the hyperboloid of radius ``R`` (`check_points`).

    Scaled by the row's largest magnitude, so that no square overflows:
    ``x0 * x0`` of ``[1e200, 1, 0]`` is inf, and ``inf > rtol * inf`` is False.
    ``R / m`` may still overflow (a row of tiny values): then the deviation is
    inf and the row is refused, as it should be.
    """
    m = np.maximum(x0[rows], np.abs(xs[rows]).max(axis=1, initial=0.0))
    with np.errstate(over="ignore", under="ignore"):
        a = (x0[rows] / m) ** 2
        b = sum_of_squares(xs[rows] / m[:, None])
        r = R / m
        return np.abs(a - b - r * r) > rtol * (a + b)


def _ball_norm2(X: np.ndarray, R: float, rows: slice) -> np.ndarray:
    """``|x / R|^2`` of each of ``rows`` (`check_points`; an overflow is inf, refused)."""
    with np.errstate(over="ignore", under="ignore"):
        return sum_of_squares(X[rows] if R == 1.0 else X[rows] / R)  # x / 1.0 is x


def check_points(
    X: np.ndarray,
    geometry: str,
    curvature: float = -1.0,
    timelike_dim: int = 0,
    *,
    rtol: float = DEFAULT_RTOL,
) -> np.ndarray:
    """Validate points of a hyperbolic model; return them as float64.

    Rejects, with the offending rows named: a non-2-D array, NaN or inf,
    hyperboloid points with ``x_0 <= 0`` or off the hyperboloid
    (``|<x, x>_L + R^2| > rtol * (x_0^2 + |x_s|^2)``, a test that stays
    meaningful for far points stored in float32), and ball points with
    ``|p| >= R``. Both tests are computed on the row scaled by its largest
    magnitude, so no finite input overflows into a pass (``[1e200, 1, 0]``
    is refused). An accepted hyperboloid point's Klein coordinates satisfy
    ``|k|^2 <= (1 + rtol) / (1 - rtol)``: inside the unit ball up to the
    tolerance that far points stored in float32 need.
    """
    _check_geometry(geometry)
    R = curvature_radius(curvature)
    X = as_points(X)
    if X.shape[1] < (2 if geometry == "hyperboloid" else 1):
        raise InvalidPointError(
            f"{geometry} points need at least {2 if geometry == 'hyperboloid' else 1} "
            f"column(s), got {X.shape[1]}."
        )
    check_finite(X)
    skip = " Pass check_manifold=False to skip this check for trusted data."
    if geometry == "hyperboloid":
        x0, xs = _timelike_split(X, timelike_dim)
        raise_rows(
            x0 <= 0,
            f"have a timelike coordinate x_0 <= 0 (column {timelike_dim % X.shape[1]})",
            "Points on the hyperboloid's upper sheet have x_0 > 0; check timelike_dim.",
        )

        raise_rows(
            _row_by_row(X.shape[0], functools.partial(_off_hyperboloid, x0, xs, R, rtol), bool),
            f"are off the hyperboloid x_0^2 - |x_s|^2 = R^2 with R = {R:g} "
            f"(curvature {curvature}; relative tolerance {rtol:g})",
            "Check the curvature and timelike_dim, or project the points onto the manifold." + skip,
        )
    else:
        raise_rows(
            _row_by_row(X.shape[0], functools.partial(_ball_norm2, X, R), np.float64) >= 1.0,
            f"lie on or outside the {geometry} ball of radius R = {R:g} (curvature {curvature})",
            "Check the curvature and input_geometry." + skip,
        )
    return X


def to_klein(
    X: np.ndarray,
    geometry: str = "hyperboloid",
    curvature: float = -1.0,
    timelike_dim: int = 0,
    *,
    check: bool = True,
    rtol: float = DEFAULT_RTOL,
    copy: bool = True,
) -> np.ndarray:
    """Unit-ball Klein coordinates (float64) of points given in ``geometry``.

    With ``check=False`` only the array's shape and finiteness are checked;
    use it for large data known to be on the manifold. With ``copy=False``,
    float64 Klein points of curvature -1 come back as they are (the map is
    the identity), not copied.
    """
    _check_geometry(geometry)
    if check:
        X = check_points(X, geometry, curvature, timelike_dim, rtol=rtol)
    else:
        X = as_points(X)
        check_finite(X)
    if geometry == "hyperboloid":
        return hyperboloid_to_klein(X, timelike_dim)
    if geometry == "poincare":
        return poincare_to_klein(X, curvature)
    radius = curvature_radius(curvature)
    return X if radius == 1.0 and not copy else X / radius


def from_klein(
    Kc: np.ndarray, geometry: str = "hyperboloid", curvature: float = -1.0, timelike_dim: int = 0
) -> np.ndarray:
    """Inverse of [`to_klein`][hyp2onnx.geometry.to_klein]: unit-ball Klein coordinates to ``geometry``."""
    _check_geometry(geometry)
    if geometry == "hyperboloid":
        return klein_to_hyperboloid(Kc, curvature, timelike_dim)
    if geometry == "poincare":
        return klein_to_poincare(Kc, curvature)
    return np.asarray(Kc, dtype=np.float64) * curvature_radius(curvature)


def einstein_midpoint(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """1-D Einstein midpoint of unit-ball Klein coordinates ``a`` and ``b``.

    ``m = (g(a) a + g(b) b) / (g(a) + g(b))`` with ``g(t) = 1 / sqrt(1 - t^2)``,
    which equals ``tanh((artanh a + artanh b) / 2)``: the point halfway
    between ``a`` and ``b`` in hyperbolic distance. It does not depend on the
    curvature. Inputs lie in [-1, 1]; an endpoint at +-1 (a point that
    rounded onto the ideal boundary) gives the limit, that endpoint.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        ga = 1.0 / np.sqrt((1.0 - a) * (1.0 + a))
        gb = 1.0 / np.sqrt((1.0 - b) * (1.0 + b))
        m = (ga * a + gb * b) / (ga + gb)
        bad = ~np.isfinite(m)
        if np.any(bad):
            limit = np.tanh((np.arctanh(a) + np.arctanh(b)) / 2.0)
            m = np.where(bad, np.nan_to_num(limit, nan=0.0), m)
    return m


def gnomonic_midpoint(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Midpoint of gnomonic coordinates ``a`` and ``b`` of a sphere, along their great circle.

    ``tan((atan a + atan b) / 2)``: the point halfway between them in angle,
    the spherical twin of [`einstein_midpoint`][hyp2onnx.geometry.einstein_midpoint]; independent of the
    curvature (see [`hyp2onnx.blocks`][hyp2onnx.blocks]).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return np.tan((np.arctan(a) + np.arctan(b)) / 2.0)


# -- far points: centroids and boosts from hyperboloid coordinates ------------------------------


def _norms(v: np.ndarray) -> np.ndarray:
    """Row-wise Euclidean norms that neither overflow nor underflow (rows scaled by their largest)."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", v, v))
    redo = ~(norms > 1e-150) | ~(norms < 1e150)  # a square may have overflowed or underflowed
    if not redo.any():
        return norms
    w = v[redo]
    scale = np.abs(w).max(axis=1, initial=0.0)
    safe = np.where((scale > 0) & np.isfinite(scale), scale, 1.0)
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = scale * np.sqrt(np.einsum("ij,ij->i", w / safe[:, None], w / safe[:, None]))
    norms[redo] = np.where(np.isinf(scale), np.inf, scaled)
    return norms


def unit_hyperboloid(
    X: np.ndarray, geometry: str = "hyperboloid", curvature: float = -1.0, timelike_dim: int = 0
) -> np.ndarray:
    """Rows ``(x_0, x_s)`` of the unit hyperboloid (``x_0`` first) for points given in ``geometry``.

    Computed without Klein coordinates, which lose a far point's distance
    from the origin (``|k|^2`` rounds to 1 from radius about 18.7): the
    spatial part is taken as given (hyperboloid input, divided by ``R``) or
    from the Poincare ball (``2 q / (1 - |q|^2)``, which keeps radii to about
    37), and ``x_0 = sqrt(1 + |x_s|^2)`` is recomputed from it, so each row
    lies on the hyperboloid to rounding. Far rows' ``x_0`` and ``|x_s|``
    differ by ``1 / (x_0 + |x_s|)``: see [move_to_origin][hyp2onnx.geometry.move_to_origin]
    for arithmetic that keeps it.
    """
    _check_geometry(geometry)
    R = curvature_radius(curvature)
    X = np.asarray(X, dtype=np.float64)
    if geometry == "hyperboloid":
        _, xs = _timelike_split(X, timelike_dim)
        xs = xs / R
    elif geometry == "poincare":
        q = X / R
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            n = _norms(q)
            xs = 2.0 * q / ((1.0 - n) * (1.0 + n))[:, None]
    else:
        k = X / R
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            n = _norms(k)
            xs = k / np.sqrt((1.0 - n) * (1.0 + n))[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        x0 = np.hypot(1.0, _norms(xs))
    return np.concatenate([x0[:, None], xs], axis=1)


def lorentzian_centroid(x: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
    """``m / sqrt(-<m, m>_L)`` for ``m`` the sum of the unit-hyperboloid rows ``x``
    (each times its ``weight``, if given: non-negative, not all zero).

    ``-<m, m>_L = (m_0 - |m_s|)(m_0 + |m_s|)``, and ``m_0 - |m_s|``, a
    difference of two numbers as large as the rows (``e^r``), is summed
    row by row from terms that are all positive,

        x_0 - s . x_s = 1 / (x_0 + |x_s|) + |x_s| |x_s / |x_s| - s|^2 / 2

    (``s = m_s / |m_s|``), so no cancellation occurs at any radius; the
    naive ``m_0^2 - |m_s|^2`` loses every digit from radius about 18. The
    result's ``x_0`` is recomputed from its spatial part.
    """
    x = np.asarray(x, dtype=np.float64)
    w = None if weight is None else np.asarray(weight, dtype=np.float64)
    m = x.sum(axis=0) if w is None else (x * w[:, None]).sum(axis=0)
    direction = _direction(m)
    terms = None
    if direction is not None:  # row terms a block at a time: no n x d temporaries
        terms = np.empty(x.shape[0])
        for start in range(0, x.shape[0], _CENTROID_BLOCK):
            rows = slice(start, start + _CENTROID_BLOCK)
            block = x[rows]
            terms[rows] = _lower_terms(direction, block[:, 0], *_centroid_row_terms(block))
    return _centroid_from(m, terms, w)


#: Rows whose centroid terms are computed at once (each row's alone: any block gives
#: the same terms; their sum runs over all of them).
_CENTROID_BLOCK = 1 << 14


def _centroid_row_terms(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The terms of [lorentzian_centroid][hyp2onnx.geometry.lorentzian_centroid] that depend
    on each row alone: ``|x_s|``, ``x_s / |x_s|`` and ``1 / (x_0 + |x_s|)``.

    Computed once for many centroids of subsets of the same rows (the nodes
    of a tree), they give each centroid bit for bit (every term is row-wise).
    """
    spatial = _norms(x[:, 1:])
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = x[:, 1:] / spatial[:, None]
        inverse = 1.0 / (x[:, 0] + spatial)
    return spatial, unit, inverse


def _centroid_of_sum(
    m: np.ndarray,
    x0: np.ndarray,
    spatial: np.ndarray,
    unit: np.ndarray,
    inverse: np.ndarray,
    *,
    all_spatial: bool = False,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """The centroid of rows whose sum is ``m``, from their `_centroid_row_terms` and ``x_0``.

    ``all_spatial`` says that every row has ``|x_s| > 0`` (no row at the
    origin), which spares selecting ``x_0`` for the others.
    """
    direction = _direction(m)
    terms = None
    if direction is not None:
        terms = _lower_terms(direction, x0, spatial, unit, inverse, all_spatial=all_spatial)
    return _centroid_from(m, terms, weight)


def _direction(m: np.ndarray) -> np.ndarray | None:
    """``m_s / |m_s|`` of a rows' sum ``m``, None if ``m_s`` is 0."""
    ms = m[1:]
    s = math.hypot(*ms.tolist())
    if not s > 0:
        return None
    with np.errstate(invalid="ignore"):  # the rows' sum overflowed: inf / inf
        return ms / s


def _lower_terms(
    direction: np.ndarray,
    x0: np.ndarray,
    spatial: np.ndarray,
    unit: np.ndarray,
    inverse: np.ndarray,
    *,
    all_spatial: bool = False,
) -> np.ndarray:
    """Each row's ``x_0 - s . x_s`` (``s`` the sum's ``direction``), summed from terms that
    are all positive: ``1 / (x_0 + |x_s|) + |x_s| |x_s / |x_s| - s|^2 / 2``; row by row."""
    diff = unit - direction
    # inverse + spatial * |diff|^2 / 2, in place (products and sums commute exactly)
    gap = np.einsum("ij,ij->i", diff, diff)
    gap *= spatial
    gap /= 2.0
    gap += inverse
    return gap if all_spatial else np.where(spatial > 0, gap, x0)


def _centroid_from(
    m: np.ndarray, terms: np.ndarray | None, weight: np.ndarray | None
) -> np.ndarray:
    """The centroid of rows whose sum is ``m`` from their `_lower_terms` (None: ``m_s`` is 0)."""
    ms = m[1:]
    s = math.hypot(*ms.tolist())
    m0 = float(m[0])
    lower = m0 if terms is None else float((terms if weight is None else terms * weight).sum())
    mu_s = ms / (math.sqrt(lower) * math.sqrt(m0 + s))
    mu = np.empty(m.shape[0])
    mu[0] = math.hypot(1.0, *mu_s.tolist())
    mu[1:] = mu_s
    return mu


def move_to_origin(x: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``x`` moved by the Lorentz boost that takes ``mu`` to the origin, and their distances to ``mu``.

    The product ``B x`` of the boost matrix and a far row subtracts numbers
    of size ``e^(r + r_mu)`` to get ``cosh d(x, mu)``, and loses every digit
    when ``e^(r + r_mu) 2^-53`` reaches 1 (two points near radius 18). Here
    the rows go through the Poincare ball, where ``1 - |p|^2 = 2 / (1 + x_0)``
    comes without subtraction, and the boost is the Mobius translation

        y = ((1 - |a|^2)(b - a) - |b - a|^2 a) / (|b - a|^2 + (1 - |a|^2)(1 - |b|^2))

    (``a`` the Poincare point of ``mu``, ``b`` of the row), whose every term
    keeps its relative precision; ``cosh d = 1 + 2 |b - a|^2 / ((1 - |a|^2)(1 - |b|^2))``.
    Returns the moved unit-hyperboloid rows and ``d(x, mu)``.
    """
    x = np.asarray(x, dtype=np.float64)
    mu = np.asarray(mu, dtype=np.float64)
    ratio, z0, y = _mobius_to_origin(*_ball_terms(x), mu)
    moved = np.concatenate([z0[:, None], (1.0 + z0)[:, None] * y], axis=1)
    return moved, 2.0 * np.arcsinh(np.sqrt(ratio))


def _ball_terms(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's Poincare point ``b = x_s / (1 + x_0)`` and ``1 - |b|^2 = 2 / (1 + x_0)``.

    Row-wise, so computed once for many moves of subsets of the same rows.
    """
    return x[:, 1:] / (1.0 + x[:, :1]), 2.0 / (1.0 + x[:, 0])


def _mobius_to_origin(
    b: np.ndarray, tb: np.ndarray, mu: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The move of [move_to_origin][hyp2onnx.geometry.move_to_origin] from the rows'
    `_ball_terms`: ``sinh^2(d / 2)``, the moved ``x_0`` and the moved Poincare point."""
    m0 = float(mu[0])
    a = mu[1:] / (1.0 + m0)
    ta = 2.0 / (1.0 + m0)
    diff = b - a
    dd = np.einsum("ij,ij->i", diff, diff)
    ratio = dd / ta
    ratio /= tb  # sinh^2(d / 2)
    z0 = 2.0 * ratio
    z0 += 1.0
    # y = (ta diff - dd a) / (dd + ta tb), in place (products and sums commute exactly)
    y = diff
    y *= ta
    y -= dd[:, None] * a
    denominator = ta * tb
    denominator += dd
    y /= denominator[:, None]
    return ratio, z0, y


def hyperbolic_radius(x: np.ndarray) -> np.ndarray:
    """Distance from the origin (in units of ``R``) of unit-hyperboloid rows ``x``: ``asinh |x_s|``."""
    x = np.asarray(x, dtype=np.float64)
    return np.arcsinh(_norms(x[:, 1:]))


def name_far_rows(rows: np.ndarray, radii: np.ndarray) -> str:
    """``"rows 3 (radius 20.1), 7 (radius 19.5), ..."``: the first five, farthest first."""
    rows = np.asarray(rows)
    radii = np.asarray(radii, dtype=np.float64)
    order = np.argsort(-np.nan_to_num(radii, nan=np.inf), kind="stable")[:5]
    shown = ", ".join(f"{int(rows[i])} (radius {radii[i]:.2f})" for i in order)
    return f"rows {shown}" + (", ..." if rows.size > 5 else "")
