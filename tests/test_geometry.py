"""The maps between hyperbolic models, the Einstein midpoint and input validation.

Formulas: docs/math.md, "Models and maps" and "Einstein midpoint". Every test compares numbers.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from hyp2onnx import InvalidPointError, geometry
from tests._data import klein_points

CURVATURES = [-0.25, -1.0, -3.7]
TIMELIKE_DIMS = [0, 2, -1]
GEOMETRIES = ["hyperboloid", "poincare", "klein"]


def minkowski_norm2(X: np.ndarray, timelike_dim: int) -> np.ndarray:
    """``x_0^2 - |x_s|^2`` of hyperboloid rows (plain numpy, not the package's code)."""
    t = timelike_dim % X.shape[1]
    spacelike = np.delete(X, t, axis=1)
    return X[:, t] ** 2 - (spacelike**2).sum(axis=1)


# -- maps ---------------------------------------------------------------------


@pytest.mark.parametrize("curvature", CURVATURES)
@pytest.mark.parametrize("timelike_dim", TIMELIKE_DIMS)
def test_round_trips_between_all_models(curvature: float, timelike_dim: int) -> None:
    k = klein_points(500, 3, seed=1, max_radius=6.0)
    R = 1.0 / math.sqrt(-curvature)
    X = geometry.klein_to_hyperboloid(k, curvature, timelike_dim)
    P = geometry.klein_to_poincare(k, curvature)

    # The images lie on their manifolds.
    np.testing.assert_allclose(minkowski_norm2(X, timelike_dim), R * R, rtol=1e-9)
    assert np.all(X[:, timelike_dim % 4] > 0)
    assert np.all(np.linalg.norm(P, axis=1) < R)

    # Every model maps back to the same Klein coordinates ...
    np.testing.assert_allclose(
        geometry.hyperboloid_to_klein(X, timelike_dim), k, rtol=0, atol=1e-13
    )
    np.testing.assert_allclose(geometry.poincare_to_klein(P, curvature), k, rtol=0, atol=1e-13)
    for name, pts in [("hyperboloid", X), ("poincare", P), ("klein", k * R)]:
        back = geometry.to_klein(pts, name, curvature, timelike_dim)
        np.testing.assert_allclose(back, k, rtol=0, atol=1e-13, err_msg=name)
        # ... and from_klein inverts to_klein (x_0 = R / sqrt(1 - |k|^2) amplifies
        # rounding by about e^(2r) / 4 at hyperbolic radius r: 4e4 at r = 6).
        np.testing.assert_allclose(
            geometry.from_klein(back, name, curvature, timelike_dim), pts, rtol=1e-10, atol=1e-13
        )
    # hyperboloid -> Poincare directly equals the route through Klein.
    np.testing.assert_allclose(
        geometry.hyperboloid_to_poincare(X, curvature, timelike_dim), P, rtol=1e-12, atol=1e-14
    )


def test_known_values_at_unit_and_other_curvature() -> None:
    # Poincare p = (0.5, 0) at K = -1 has Klein k = 2p / (1 + |p|^2) = (0.8, 0).
    np.testing.assert_allclose(geometry.poincare_to_klein(np.array([[0.5, 0.0]])), [[0.8, 0.0]])
    # The same point in a ball of radius R = 0.5 (K = -4) is p = (0.25, 0).
    np.testing.assert_allclose(
        geometry.poincare_to_klein(np.array([[0.25, 0.0]]), curvature=-4.0), [[0.8, 0.0]]
    )
    # A hyperboloid point at distance 1 along x_1: k = tanh(1), whatever the curvature.
    x = np.array([[math.cosh(1.0), math.sinh(1.0), 0.0]])
    np.testing.assert_allclose(geometry.hyperboloid_to_klein(x), [[math.tanh(1.0), 0.0]])
    np.testing.assert_allclose(
        geometry.to_klein(x * 3.0, curvature=-1 / 9), [[math.tanh(1.0), 0.0]]
    )
    # Klein -> Poincare is k / (1 + sqrt(1 - |k|^2)), then times R.
    np.testing.assert_allclose(
        geometry.klein_to_poincare(np.array([[0.8, 0.0]]), -4.0), [[0.25, 0.0]]
    )


@pytest.mark.parametrize("timelike_dim", TIMELIKE_DIMS)
def test_klein_coordinates_agree_across_input_models(timelike_dim: int) -> None:
    curvature = -2.5
    k = klein_points(400, 3, seed=2, max_radius=8.0)
    inputs = {name: geometry.from_klein(k, name, curvature, timelike_dim) for name in GEOMETRIES}
    out = {name: geometry.to_klein(X, name, curvature, timelike_dim) for name, X in inputs.items()}
    np.testing.assert_allclose(out["hyperboloid"], out["poincare"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(out["hyperboloid"], out["klein"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(out["klein"], k, rtol=0, atol=1e-15)


@pytest.mark.parametrize("curvature", [-0.25, -3.7, -1e-4, -50.0])
def test_curvature_rescales_points_not_klein_coordinates(curvature: float) -> None:
    """Points at curvature K are the K = -1 points scaled by R, with equal Klein coordinates."""
    R = 1.0 / math.sqrt(-curvature)
    k = klein_points(300, 2, seed=3, max_radius=5.0)
    X1 = geometry.klein_to_hyperboloid(k, -1.0)
    P1 = geometry.klein_to_poincare(k, -1.0)
    for name, unit in [("hyperboloid", X1), ("poincare", P1), ("klein", k)]:
        at_minus_one = geometry.to_klein(unit, name, -1.0)
        at_K = geometry.to_klein(unit * R, name, curvature)
        np.testing.assert_allclose(at_K, at_minus_one, rtol=0, atol=1e-13, err_msg=name)
    # The reference implementation's slip: Poincare input pushed through the
    # Klein -> Poincare map. That is not what we compute.
    wrong = geometry.klein_to_poincare(P1, -1.0)
    assert np.max(np.abs(geometry.to_klein(P1, "poincare") - wrong)) > 0.1


# -- the Einstein midpoint ----------------------------------------------------


def angular_midpoint_klein(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """HyperDT's hyperbolic angular midpoint (paper, eq. for m_L), as a Klein coordinate.

    Angles are ``theta = arccot(k)`` in (0, pi); with
    ``alpha = sin(2 t1 - 2 t2) / (2 sin(t1 + t2) sin(t2 - t1))`` and
    ``beta = sign(t1 + t2 - pi)`` the midpoint angle has cotangent
    ``-alpha + beta sqrt(alpha^2 - 1)`` (as HyperDT's code computes it; the
    paper prints the opposite sign, which is the mirror image ``-m``).
    """
    t1 = np.arctan2(1.0, a)
    t2 = np.arctan2(1.0, b)
    alpha = np.sin(2 * t1 - 2 * t2) / (2 * np.sin(t1 + t2) * np.sin(t2 - t1))
    beta = np.sign(t1 + t2 - np.pi)
    return -alpha + beta * np.sqrt(alpha * alpha - 1.0)


def midpoint_pairs() -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``a != b`` in (-0.95, 0.95), away from ``a = -b`` where the angular formula cancels."""
    grid = np.linspace(-0.95, 0.95, 77)
    a, b = np.meshgrid(grid, grid)
    a, b = a.ravel(), b.ravel()
    keep = (np.abs(a + b) > 0.05) & (a != b)
    return a[keep], b[keep]


def test_einstein_midpoint_is_tanh_of_mean_rapidity() -> None:
    a, b = midpoint_pairs()
    m = geometry.einstein_midpoint(a, b)
    np.testing.assert_allclose(m, np.tanh((np.arctanh(a) + np.arctanh(b)) / 2), rtol=0, atol=1e-13)
    # Halfway in hyperbolic distance: d(a, m) = d(m, b) with d = |artanh x - artanh y|.
    np.testing.assert_allclose(
        np.abs(np.arctanh(m) - np.arctanh(a)), np.abs(np.arctanh(b) - np.arctanh(m)), atol=1e-12
    )


def test_einstein_midpoint_equals_hyperdt_angular_midpoint() -> None:
    a, b = midpoint_pairs()
    np.testing.assert_allclose(
        geometry.einstein_midpoint(a, b), angular_midpoint_klein(a, b), rtol=0, atol=1e-13
    )
    # The arithmetic midpoint (what a Euclidean tree uses) is something else.
    assert np.max(np.abs(geometry.einstein_midpoint(a, b) - (a + b) / 2)) > 0.1


def test_einstein_midpoint_symmetries_and_bounds() -> None:
    a, b = midpoint_pairs()
    m = geometry.einstein_midpoint(a, b)
    np.testing.assert_array_equal(m, geometry.einstein_midpoint(b, a))
    np.testing.assert_allclose(geometry.einstein_midpoint(-a, -b), -m, atol=1e-15)
    assert np.all((np.minimum(a, b) < m) & (m < np.maximum(a, b)))
    np.testing.assert_allclose(geometry.einstein_midpoint(a, a), a, atol=1e-15)
    # On the positive side the hyperbolic midpoint lies farther out than the arithmetic one.
    pos = (a > 0) & (b > 0)
    assert np.all(m[pos] > (a[pos] + b[pos]) / 2)


def test_einstein_midpoint_handles_ideal_endpoints() -> None:
    a = np.array([1.0, 0.5, -1.0, -0.3, -1.0, 1.0, -1.0, 0.999999])
    b = np.array([0.5, 1.0, -0.3, -1.0, 1.0, 1.0, -1.0, 1.0])
    with np.errstate(all="raise"):  # no warnings escape
        m = geometry.einstein_midpoint(a, b)
    np.testing.assert_array_equal(m, [1.0, 1.0, -1.0, -1.0, 0.0, 1.0, -1.0, 1.0])


# -- the fixed summation order --------------------------------------------------


def pairwise_sum_reference(row: list[float]) -> float:
    """The documented order, one row, in plain Python floats."""
    s = [v * v for v in row]
    width = 1
    while width < len(s):
        width *= 2
    s += [0.0] * (width - len(s))
    while len(s) > 1:
        half = len(s) // 2
        s = [s[j] + s[j + half] for j in range(half)]
    return s[0]


def sequential_sum(q: np.ndarray) -> np.ndarray:
    """Left-to-right sums of squares, for contrast."""
    out = np.zeros(q.shape[0])
    for j in range(q.shape[1]):
        out = out + q[:, j] * q[:, j]
    return out


@pytest.mark.parametrize("width", [1, 2, 3, 4, 5, 7, 8, 9, 16, 17])
def test_sum_of_squares_uses_the_documented_pairwise_order(width: int) -> None:
    rng = np.random.default_rng(width)
    # Magnitudes spread over 16 decades: the order of additions shows in the last bits.
    q = rng.normal(size=(400, width)) * 10.0 ** rng.uniform(-8, 8, size=(400, width))
    got = geometry.sum_of_squares(q)
    expected = np.array([pairwise_sum_reference(list(map(float, row))) for row in q])
    np.testing.assert_array_equal(got, expected)
    if width >= 3:
        assert np.any(sequential_sum(q) != expected), "test data too tame: order does not matter"


def test_sum_of_squares_keeps_float32() -> None:
    q = np.array([[3.0, 4.0, 12.0]], dtype=np.float32)
    s = geometry.sum_of_squares(q)
    assert s.dtype == np.float32
    np.testing.assert_array_equal(s, [169.0])


# -- validation -----------------------------------------------------------------


def valid(geometry_name: str, n: int = 8, curvature: float = -1.0) -> np.ndarray:
    return geometry.from_klein(klein_points(n, 2, seed=4), geometry_name, curvature)


@pytest.mark.parametrize("geometry_name", GEOMETRIES)
def test_wrong_ndim_and_dtype_are_rejected(geometry_name: str) -> None:
    with pytest.raises(InvalidPointError, match=r"2-D array.*shape \(3,\)"):
        geometry.check_points(np.zeros(3), geometry_name)
    with pytest.raises(InvalidPointError, match=r"shape \(2, 2, 2\)"):
        geometry.to_klein(np.zeros((2, 2, 2)), geometry_name, check=False)
    with pytest.raises(InvalidPointError, match="real numbers"):
        geometry.check_points(np.array([["a", "b", "c"]]), geometry_name)
    with pytest.raises(InvalidPointError, match="real numbers"):
        geometry.check_points(np.ones((2, 3), dtype=complex), geometry_name)


@pytest.mark.parametrize("geometry_name", GEOMETRIES)
@pytest.mark.parametrize("check", [True, False])
def test_nan_and_inf_rows_are_named(geometry_name: str, check: bool) -> None:
    X = valid(geometry_name)
    X[1, 0] = np.nan
    X[3, -1] = np.inf
    X[6, 0] = -np.inf
    message = r"3 row\(s\) contain NaN or infinity \(rows 1, 3, 6\)"
    with pytest.raises(InvalidPointError, match=message):
        geometry.to_klein(X, geometry_name, check=check)


def test_nonpositive_timelike_coordinate_is_named() -> None:
    X = valid("hyperboloid")
    X[2] *= -1.0  # lower sheet: still x_0^2 - |x_s|^2 = 1
    X[5, 0] = 0.0
    message = r"2 row\(s\) have a timelike coordinate x_0 <= 0 \(column 0\) \(rows 2, 5\)"
    with pytest.raises(InvalidPointError, match=message):
        geometry.check_points(X, "hyperboloid")
    # The timelike column is where timelike_dim says.
    Y = np.roll(valid("hyperboloid"), 1, axis=1)
    Y[4, 1] = -Y[4, 1]
    with pytest.raises(InvalidPointError, match=r"column 1\) \(rows 4\)"):
        geometry.check_points(Y, "hyperboloid", timelike_dim=1)


def test_off_hyperboloid_rows_are_named_with_a_relative_tolerance() -> None:
    curvature = -0.5
    X = valid("hyperboloid", n=9, curvature=curvature)
    X[0, 0] *= 1.001
    X[7, 0] *= 0.99
    message = r"2 row\(s\) are off the hyperboloid.*\(rows 0, 7\)"
    with pytest.raises(InvalidPointError, match=message):
        geometry.check_points(X, "hyperboloid", curvature)
    # The same points are fine with a looser tolerance ...
    geometry.check_points(X, "hyperboloid", curvature, rtol=0.1)
    # ... and points off by 1e-9 relative pass the default one.
    Y = valid("hyperboloid", curvature=curvature) * (1 + 1e-9)
    geometry.check_points(Y, "hyperboloid", curvature)
    # Wrong curvature: every row is off.
    with pytest.raises(InvalidPointError, match=r"9 row\(s\).*\(rows 0, 1, 2, 3, 4, \.\.\.\)"):
        geometry.check_points(valid("hyperboloid", n=9), "hyperboloid", curvature)


def test_far_points_stored_in_float32_pass_the_manifold_check() -> None:
    k = klein_points(200, 3, seed=5, max_radius=12.0)
    X = geometry.klein_to_hyperboloid(k).astype(np.float32)
    assert X[:, 0].max() > 1e4
    geometry.check_points(X, "hyperboloid")


@pytest.mark.parametrize("geometry_name", ["poincare", "klein"])
def test_points_outside_the_ball_are_named(geometry_name: str) -> None:
    curvature = -4.0  # R = 0.5
    X = valid(geometry_name, curvature=curvature)
    X[4] = [0.5, 0.0]  # on the boundary
    X[6] = [0.4, 0.4]  # outside
    message = rf"2 row\(s\) lie on or outside the {geometry_name} ball of radius R = 0.5"
    with pytest.raises(InvalidPointError, match=message + r".*\(rows 4, 6\)"):
        geometry.to_klein(X, geometry_name, curvature)
    # A point of the unit ball can be outside the ball of radius 0.5.
    with pytest.raises(InvalidPointError, match=r"1 row\(s\) lie on or outside.*\(rows 1\)"):
        geometry.check_points(np.array([[0.3, 0.0], [0.6, 0.0]]), geometry_name, curvature)


def test_check_false_skips_only_the_manifold_test() -> None:
    X = valid("hyperboloid")
    X[3, 0] *= 2.0  # off the hyperboloid
    with pytest.raises(InvalidPointError):
        geometry.to_klein(X, "hyperboloid")
    k = geometry.to_klein(X, "hyperboloid", check=False)
    np.testing.assert_allclose(k, X[:, 1:] / X[:, :1])
    B = np.array([[2.0, 0.0], [0.1, 0.2]])
    np.testing.assert_allclose(geometry.to_klein(B, "klein", -4.0, check=False), B * 2.0)


@pytest.mark.parametrize("curvature", [0, 0.0, 1.0, np.nan, np.inf, -np.inf, "minus one", None])
def test_bad_curvature_is_rejected(curvature: object) -> None:
    with pytest.raises(ValueError, match="curvature must be"):
        geometry.to_klein(valid("klein"), "klein", curvature)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="curvature must be"):
        geometry.curvature_radius(curvature)  # type: ignore[arg-type]


def test_curvature_radius() -> None:
    assert geometry.curvature_radius(-1) == 1.0
    assert geometry.curvature_radius(-4.0) == 0.5
    assert geometry.curvature_radius(-1e-6) == pytest.approx(1000.0, rel=1e-15)


def test_bad_geometry_name_and_timelike_dim_are_rejected() -> None:
    message = "input_geometry must be one of 'hyperboloid', 'poincare', 'klein', got 'lorentz'"
    with pytest.raises(ValueError, match=message):
        geometry.to_klein(valid("klein"), "lorentz")
    with pytest.raises(ValueError, match="input_geometry"):
        geometry.from_klein(valid("klein"), "Klein")
    with pytest.raises(ValueError, match="input_geometry"):
        geometry.n_klein_features(3, "sphere")
    message = "timelike_dim=3 is out of range for hyperboloid input with 3 columns"
    with pytest.raises(ValueError, match=message):
        geometry.to_klein(valid("hyperboloid"), "hyperboloid", timelike_dim=3)
    with pytest.raises(InvalidPointError, match="hyperboloid points need at least 2 column"):
        geometry.check_points(np.ones((4, 1)), "hyperboloid")


def test_n_klein_features() -> None:
    assert geometry.n_klein_features(5, "hyperboloid") == 4
    assert geometry.n_klein_features(5, "poincare") == 5
    assert geometry.n_klein_features(5, "klein") == 5


def test_klein_points_are_not_copied_unless_asked() -> None:
    """``copy=False`` hands float64 unit-ball Klein points back as they are (the map is
    the identity); the default, other curvatures and other models give a new array,
    and a fitted estimator's ``to_klein`` never returns the caller's own array."""
    from hyp2onnx import HyperbolicDecisionTreeClassifier
    from hyp2onnx.geometry import to_klein

    k = np.array([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.0]])
    assert to_klein(k, "klein", copy=False) is k
    assert not np.shares_memory(to_klein(k, "klein"), k)
    assert not np.shares_memory(to_klein(k * 0.5, "klein", -4.0, copy=False), k)
    assert not np.shares_memory(to_klein(k, "poincare", copy=False), k)
    model = HyperbolicDecisionTreeClassifier(input_geometry="klein").fit(k, [0, 1, 0])
    out = model.to_klein(k)
    assert not np.shares_memory(out, k) and out.tobytes() == k.tobytes()


@pytest.mark.parametrize(
    ("model", "timelike_dim"),
    [("hyperboloid", 0), ("hyperboloid", 2), ("hyperboloid", 3), ("poincare", 0), ("klein", 0)],
)
def test_the_manifold_check_names_the_same_rows_a_block_at_a_time(
    model: str, timelike_dim: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs a block of rows at a time (bounded temporaries); with 3-row blocks it
    refuses and names exactly the rows it names all at once: bad rows in the first, a
    middle and the last block (timelike column first, inside or last)."""
    rng = np.random.default_rng(5)
    k = rng.uniform(-0.5, 0.5, size=(20, 3)) / 2.0
    X = geometry.from_klein(k, model, -1.0, timelike_dim)
    bad = [1, 9, 19]
    if model == "hyperboloid":  # off the hyperboloid
        X[bad, 1 if timelike_dim == 0 else 0] *= 3.0
    else:  # outside the ball
        X[bad, 0] = 1.2
    messages = []
    for block in (3, 1 << 14):
        monkeypatch.setattr(geometry, "_CHECK_BLOCK", block)
        with pytest.raises(InvalidPointError) as error:
            geometry.check_points(X, model, -1.0, timelike_dim)
        messages.append(str(error.value))
        ok = np.delete(X, bad, axis=0)
        assert geometry.check_points(ok, model, -1.0, timelike_dim).shape == ok.shape
        klein = geometry.to_klein(ok, model, -1.0, timelike_dim)
        np.testing.assert_allclose(klein, np.delete(k, bad, axis=0), rtol=1e-12, atol=1e-15)
    assert messages[0] == messages[1]
    assert "3 row(s)" in messages[0] and "(rows 1, 9, 19)" in messages[0]
