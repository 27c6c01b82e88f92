"""Tests of hyp2onnx.datasets.make_wrapped_normal_mixture."""

from __future__ import annotations

import numpy as np
import pytest

import hyp2onnx
from hyp2onnx import geometry
from hyp2onnx.datasets import make_wrapped_normal_mixture


def _minkowski_residual(X: np.ndarray, curvature: float) -> np.ndarray:
    """``|x_0^2 - |x_s|^2 - R^2|`` relative to ``x_0^2 + |x_s|^2``."""
    R2 = 1.0 / -curvature
    s = np.sum(X[:, 1:] ** 2, axis=1)
    return np.abs(X[:, 0] ** 2 - s - R2) / (X[:, 0] ** 2 + s)


def test_exported_from_package() -> None:
    assert hyp2onnx.datasets.make_wrapped_normal_mixture is make_wrapped_normal_mixture


@pytest.mark.parametrize("curvature", [-1.0, -0.25, -4.0, -1e-3])
@pytest.mark.parametrize("d", [1, 2, 16, 128])
def test_points_on_the_hyperboloid(curvature: float, d: int) -> None:
    X, y = make_wrapped_normal_mixture(500, d, 8, curvature=curvature, random_state=d)
    assert X.shape == (500, d + 1) and y.shape == (500,)
    assert X.dtype == np.float64 and np.isfinite(X).all()
    assert np.all(X[:, 0] > 0)
    assert _minkowski_residual(X, curvature).max() < 1e-9
    geometry.check_points(X, "hyperboloid", curvature, rtol=1e-9)


def test_rows_lie_at_the_drawn_distance_from_their_class_mean() -> None:
    """Curvature changes the Klein picture, not geodesic distances (absolute tangent units)."""
    d, seed = 4, 3
    dists = []
    for curvature in (-1.0, -3.0):
        X, _ = make_wrapped_normal_mixture(300, d, 3, curvature=curvature, random_state=seed)
        R = 1.0 / np.sqrt(-curvature)
        dists.append(R * np.arccosh(np.maximum(X[:, 0] / R, 1.0)))  # distance to the origin
    # Same tangent draws: class means and spreads agree; distances to the origin are close.
    assert np.corrcoef(dists[0], dists[1])[0, 1] > 0.99


@pytest.mark.parametrize("curvature", [-1.0, -2.5])
@pytest.mark.parametrize("geometry_name", ["poincare", "klein"])
def test_geometries_agree_through_klein(geometry_name: str, curvature: float) -> None:
    kwargs = dict(curvature=curvature, random_state=7)
    H, yh = make_wrapped_normal_mixture(400, 5, 4, **kwargs)
    B, yb = make_wrapped_normal_mixture(400, 5, 4, geometry=geometry_name, **kwargs)
    assert B.shape == (400, 5)
    np.testing.assert_array_equal(yh, yb)
    k_h = geometry.to_klein(H, "hyperboloid", curvature)
    k_b = geometry.to_klein(B, geometry_name, curvature)
    np.testing.assert_allclose(k_b, k_h, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", [1, 7, 16, 1000, 1001])
def test_exactly_the_rows_asked_for(n: int) -> None:
    for regression in (False, True):
        X, y = make_wrapped_normal_mixture(n, 3, 8, regression=regression, random_state=n)
        assert X.shape[0] == n == y.shape[0]


def test_class_labels_and_weights() -> None:
    counts = []
    for seed in range(20):
        _, y = make_wrapped_normal_mixture(1000, 2, 8, random_state=seed)
        assert y.dtype == np.int64
        c = np.bincount(y, minlength=8)
        assert c.size == 8 and c.sum() == 1000
        assert c.min() >= 2  # every class can be split and stratified
        counts.append(c / 1000)
    shares = np.array(counts)
    # Uniform-draw weights normalised: each class averages about 1/8, and the
    # shares vary between data sets (they are random, not equal).
    assert np.allclose(shares.mean(axis=0), 1 / 8, atol=0.06)
    assert shares.std(axis=0).mean() > 0.02


def test_tiny_weights_still_give_two_rows_per_class() -> None:
    # 64 classes and 130 rows: many draws fail the two-row rule; the result still obeys it.
    for seed in range(5):
        _, y = make_wrapped_normal_mixture(130, 2, 64, random_state=seed)
        assert np.bincount(y, minlength=64).min() >= 2


def test_reproducible_with_random_state() -> None:
    a = make_wrapped_normal_mixture(200, 6, 5, random_state=11)
    b = make_wrapped_normal_mixture(200, 6, 5, random_state=11)
    c = make_wrapped_normal_mixture(200, 6, 5, random_state=12)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])
    g = make_wrapped_normal_mixture(200, 6, 5, random_state=np.random.default_rng(11))
    np.testing.assert_array_equal(a[0], g[0])


def test_regression_targets() -> None:
    X, y = make_wrapped_normal_mixture(1000, 4, 8, regression=True, random_state=0)
    Xc, labels = make_wrapped_normal_mixture(1000, 4, 8, random_state=0)
    np.testing.assert_array_equal(X, Xc)  # same points with and without regression
    assert y.dtype == np.float64
    assert y.min() == 0.0 and y.max() == 1.0
    assert np.all((y >= 0) & (y <= 1))
    # Per-class intercepts dominate: the class explains most of the variance.
    class_means = np.array([y[labels == c].mean() for c in range(8)])
    explained = np.var(class_means[labels]) / np.var(y)
    assert explained > 0.5


def test_noise_std_scales_the_spread() -> None:
    def spread(noise_std: float) -> float:
        X, _ = make_wrapped_normal_mixture(2000, 3, 1, noise_std=noise_std, random_state=0)
        return float(np.median(np.arccosh(X[:, 0])))

    assert spread(0.1) < spread(1.0) < spread(4.0)
    X, _ = make_wrapped_normal_mixture(10, 3, 1, noise_std=0.0, random_state=0)
    np.testing.assert_allclose(X, np.repeat(X[:1], 10, axis=0))  # all at the class mean


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(n_samples=0), "n_samples"),
        (dict(n_samples=2.5), "n_samples"),
        (dict(n_features=0), "n_features"),
        (dict(n_classes=0), "n_classes"),
        (dict(noise_std=-1.0), "noise_std"),
        (dict(noise_std=float("nan")), "noise_std"),
        (dict(curvature=0.0), "curvature"),
        (dict(curvature=1.0), "curvature"),
        (dict(geometry="sphere"), "geometry"),
    ],
)
def test_clear_errors(kwargs: dict, match: str) -> None:
    args = dict(n_samples=10, n_features=2, n_classes=2) | kwargs
    with pytest.raises(ValueError, match=match):
        make_wrapped_normal_mixture(**args)


def test_points_that_round_onto_the_ball_boundary_are_refused() -> None:
    with pytest.raises(ValueError, match="boundary"):
        make_wrapped_normal_mixture(200, 2, 2, noise_std=2000.0, geometry="klein", random_state=0)


def test_product_mixture_blocks_lie_on_their_manifolds():
    from hyp2onnx.blocks import as_blocks, to_features
    from hyp2onnx.datasets import make_product_mixture

    signature = [(-0.5, 3), (0.0, 2), (0.25, 2)]
    X, y = make_product_mixture(500, signature, 4, random_state=3)
    assert X.shape == (500, 4 + 2 + 3) and set(np.unique(y)) == {0, 1, 2, 3}
    H, S = X[:, :4], X[:, 6:]
    R2 = 1 / 0.5  # hyperboloid of curvature -0.5: x_0^2 - |x_s|^2 = R^2 = 2
    np.testing.assert_allclose(H[:, 0] ** 2 - (H[:, 1:] ** 2).sum(1), R2, rtol=1e-9)
    assert (H[:, 0] > 0).all()
    np.testing.assert_allclose((S**2).sum(1), 4.0, rtol=1e-12)  # sphere of radius 2
    X2, y2 = make_product_mixture(500, signature, 4, random_state=3)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    on = S[:, 0] > 0
    assert 0.8 < on.mean() < 1.0  # mostly on the base hemisphere at this radius
    assert to_features(X[on], as_blocks(signature)).shape == (on.sum(), 3 + 2 + 2)
    _, t = make_product_mixture(300, signature, 3, regression=True, random_state=0)
    assert t.min() == 0.0 and t.max() == 1.0
    with pytest.raises(ValueError, match="signature"):
        make_product_mixture(10, [(-1.0, 0)], 2)
    with pytest.raises(ValueError, match="signature"):
        make_product_mixture(10, [], 2)


def test_product_mixture_sphere_rows_are_at_the_sampled_distance():
    """Without noise every row of a class is that class's mean, one point of the unit sphere;
    with noise, rows spread around it by geodesic distances of the tangent samples' size."""
    from hyp2onnx.datasets import make_product_mixture

    X, y = make_product_mixture(200, [(1.0, 2)], 3, noise_std=0.0, random_state=1)
    for c in np.unique(y):
        rows = X[y == c]
        np.testing.assert_allclose(rows, np.repeat(rows[:1], len(rows), 0), atol=1e-15)
        np.testing.assert_allclose((rows[0] ** 2).sum(), 1.0, rtol=1e-15)
    # Tangent samples u ~ N(0, A A^T * s / d): E|u|^2 = s * E|A|_F^2 / d = s * d.
    Xn, yn = make_product_mixture(20000, [(1.0, 2)], 1, noise_std=0.01, random_state=2)
    mean = Xn.mean(axis=0) / np.linalg.norm(Xn.mean(axis=0))
    angle = np.arccos(np.clip(Xn @ mean, -1, 1))
    assert 0.5 * 0.02 < np.mean(angle**2) < 2.0 * 0.02
