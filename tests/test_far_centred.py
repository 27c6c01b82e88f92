"""Far training sets for the centred designs: isolation and rotation forests.

Both designs centre their work on Lorentzian centroids, so their answers must
not depend on where the embedding put its origin, as far as float64 holds
(radius ``CENTRED_RADIUS`` = 17), and beyond it they must refuse or warn,
naming the rows and their radius, never answer blankly. The oracles are
independent of the code under test: 80-digit decimal arithmetic of the
textbook formulas, the same model fitted on the data before the boost, and
isometries built in ``tests/_data.py`` from their definitions.
"""

from __future__ import annotations

import warnings
from decimal import Decimal, getcontext

import numpy as np
import pytest
from _data import isometric_copy, points, random_isometry

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.geometry import (
    CENTRED_RADIUS,
    lorentzian_centroid,
    move_to_origin,
    unit_hyperboloid,
)


def boost(X: np.ndarray, rapidity: float, axis: int = 1) -> np.ndarray:
    """The issue's reproducer: hyperboloid rows boosted by ``rapidity`` along ``axis``."""
    B = np.eye(X.shape[1])
    B[0, 0] = B[axis, axis] = np.cosh(rapidity)
    B[0, axis] = B[axis, 0] = np.sinh(rapidity)
    return X @ B.T


@pytest.fixture(scope="module")
def mixture() -> tuple[np.ndarray, np.ndarray]:
    return make_wrapped_normal_mixture(600, 2, 3, random_state=0)


# -- the arithmetic, against 80-digit decimals --------------------------------------------------


def _exact_hyperboloid(xs: np.ndarray) -> list[list[Decimal]]:
    return [
        [(1 + sum(Decimal(v) ** 2 for v in row)).sqrt()] + [Decimal(v) for v in row] for row in xs
    ]


def _exact_distance(a: list[Decimal], b: list[Decimal]) -> float:
    c = a[0] * b[0] - sum(p * q for p, q in zip(a[1:], b[1:], strict=True))
    return float((c + (c * c - 1).sqrt()).ln()) if c > 1 else 0.0


@pytest.mark.parametrize("radius", [0.0, 5.0, 15.0, 20.0, 30.0])
def test_centroid_and_moved_rows_hold_at_every_radius(radius: float) -> None:
    """The naive ``m_0^2 - |m_s|^2`` loses every digit near radius 18; the stable sums
    hold the centroid and the distances to it as well as float64 holds a point there."""
    getcontext().prec = 80
    rng = np.random.default_rng(int(radius))
    direction = np.array([0.6, 0.8])
    xs = rng.normal(size=(40, 2)) * 0.5 + np.sinh(radius) * direction * np.exp(
        rng.normal(size=(40, 1))
    )
    exact = _exact_hyperboloid(xs)
    m = [sum(row[j] for row in exact) for j in range(3)]
    norm = (m[0] ** 2 - sum(v * v for v in m[1:])).sqrt()
    truth = [v / norm for v in m]

    x = unit_hyperboloid(np.column_stack([np.zeros(len(xs)), xs]))
    mu = lorentzian_centroid(x)
    # float64 coordinates hold a point at radius r to about e^r 2^-53 (its direction)
    held = 1e-15 * np.exp(radius + 1.0) + 1e-15
    assert _exact_distance(_exact_hyperboloid(mu[None, 1:])[0], truth) < held
    moved, distance = move_to_origin(x, mu)
    mu_exact = _exact_hyperboloid(mu[None, 1:])[0]
    for row, d in zip(exact, distance, strict=True):
        # a float64 row at radius r holds its position to about e^r 2^-53
        assert abs(_exact_distance(row, mu_exact) - d) <= 10 * held
    assert np.allclose(np.arccosh(np.maximum(moved[:, 0], 1.0)), distance, atol=1e-6)


def test_move_to_origin_is_the_boost_that_takes_the_centre_to_the_origin() -> None:
    rng = np.random.default_rng(0)
    x, _ = points(50, 3, seed=1, max_radius=4.0)
    mu = lorentzian_centroid(x)
    moved, _ = move_to_origin(x, mu)
    # the boost from its definition: the origin's image under the inverse boost is mu
    g, b = mu[0], mu[1:] / mu[0]
    B = np.eye(4)
    B[0, 0] = g
    B[0, 1:] = B[1:, 0] = -g * b
    B[1:, 1:] += (g - 1.0) * np.outer(b, b) / (b @ b)
    assert np.allclose(moved, x @ B.T, atol=1e-10)
    assert np.allclose(move_to_origin(mu[None, :], mu)[0], [[1.0, 0, 0, 0]], atol=1e-12)
    G = random_isometry(3, 2.0, rng)
    # equivariance: the centroid moves with the data
    assert np.allclose(lorentzian_centroid(isometric_copy(x, G)), G @ mu, atol=1e-9)


# -- isolation forests ------------------------------------------------------------------------


@pytest.mark.parametrize("rapidity", [16.0, 17.0, 20.0])
def test_isolation_forest_on_the_issues_boosted_mixture_does_not_go_blank(
    mixture, rapidity: float
) -> None:
    """Issue 31: boosted by 16 every row scored -0.5 and predict said 100% outliers
    (Klein rows with |k|^2 = 1 made x_0 = 6.7e153 and the centroid overflowed)."""
    X, _ = mixture
    Xb = boost(X, rapidity)
    with pytest.warns(h.FarPointWarning, match=r"beyond radius 17.*\(radius 2\d\.\d\d\)") as caught:
        model = h.HyperbolicIsolationForest(random_state=0).fit(Xb)
    scores = model.score_samples(Xb)
    assert np.isfinite(scores).all()
    assert np.unique(scores).size > 100
    assert 0.0 < np.mean(model.predict(Xb) == -1) < 0.6
    far = np.arccosh(Xb[:, 0]) > CENTRED_RADIUS
    message = str(caught[0].message)
    assert message.startswith(f"{int(far.sum())} training row(s)")
    worst = int(np.argmax(Xb[:, 0]))
    assert f"rows {worst} (radius {np.arccosh(Xb[worst, 0]):.2f})" in message
    if rapidity == 16.0:  # rows at 14 to 21: the ranking is the unboosted model's
        near = h.HyperbolicIsolationForest(random_state=0).fit(X).score_samples(X)
        assert np.corrcoef(np.argsort(np.argsort(scores)), np.argsort(np.argsort(near)))[0, 1] > 0.9


def test_a_point_at_radius_20_is_scored_as_the_same_point_at_radius_16(mixture) -> None:
    """Issue 31: a single training point at radius 20 among 600 near the origin broke
    every centroid it entered (it scored -0.57, as an inlier would, against -0.74 at
    radius 16) and moved every other score."""
    X, _ = mixture

    def far(r: float) -> np.ndarray:
        return np.array([[np.cosh(r), 0.6 * np.sinh(r), 0.8 * np.sinh(r)]])

    fitted = {}
    for r in (12.0, 16.0, 20.0):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", h.FarPointWarning)
            fitted[r] = h.HyperbolicIsolationForest(random_state=0).fit(np.vstack([X, far(r)]))
    own = {r: float(m.score_samples(far(r))[0]) for r, m in fitted.items()}
    assert abs(own[20.0] - own[16.0]) < 0.02, own
    assert own[20.0] < -0.7 and fitted[20.0].predict(far(20.0))[0] == -1
    others = {r: m.score_samples(X) for r, m in fitted.items()}
    ranks = [np.argsort(np.argsort(others[r])) for r in (12.0, 20.0)]
    assert np.corrcoef(*ranks)[0, 1] > 0.98
    assert np.abs(others[20.0] - others[12.0]).max() < 0.06


def test_isolation_refuses_rows_whose_radius_float64_cannot_hold() -> None:
    """Klein input on the unit sphere (accepted without the manifold check) is at infinity."""
    k = np.array([[0.1, 0.2], [0.3, -0.1], [0.6, 0.8], [0.0, 0.5]])
    with pytest.raises(h.FarPointError, match=r"1 training row\(s\).*rows 2 \(radius inf\)"):
        h.HyperbolicIsolationForest(
            input_geometry="klein", check_manifold=False, random_state=0
        ).fit(k)


def test_far_rows_past_the_first_block_are_named_by_their_own_row_number() -> None:
    """The far-row check reads the hyperboloid rows a block at a time; rows in a later
    block are still named by their row number in ``X``, lost and far ones alike."""
    rng = np.random.default_rng(3)
    k = rng.uniform(-0.4, 0.4, size=(9000, 2))
    k[8193] = [0.6, 0.8]  # on the unit sphere: at infinity
    with pytest.raises(h.FarPointError, match=r"1 training row\(s\).*rows 8193 \(radius inf\)"):
        h.HyperbolicIsolationForest(
            input_geometry="klein", check_manifold=False, n_estimators=5, random_state=0
        ).fit(k)
    x = np.column_stack([np.sqrt(1.0 + (k[:, :1] ** 2 + k[:, 1:] ** 2)), k])
    r = 17.5
    x[5000] = [np.cosh(r), 0.6 * np.sinh(r), 0.8 * np.sinh(r)]
    with pytest.warns(
        h.FarPointWarning, match=r"^1 training row\(s\).*rows 5000 \(radius 17\.50\)"
    ):
        h.HyperbolicIsolationForest(n_estimators=5, random_state=0).fit(x)


def test_near_data_fits_without_a_warning(mixture) -> None:
    X, _ = mixture
    with warnings.catch_warnings():
        warnings.simplefilter("error", h.FarPointWarning)
        h.HyperbolicIsolationForest(n_estimators=10, random_state=0).fit(boost(X, 10.0))


# -- rotation forests -------------------------------------------------------------------------


@pytest.mark.parametrize("rapidity", [16.0, 17.0, 20.0])
def test_rotation_forest_refuses_frames_float64_cannot_hold(mixture, rapidity: float) -> None:
    """Issue 31: fitted with NaN in 7 to 10 of its 10 frames; predict then raised
    scikit-learn's 'Input X contains infinity' (16) or fell to accuracy 0.59 (20)."""
    X, y = mixture
    Xb = boost(X, rapidity)
    with pytest.raises(h.FarPointError, match=r"centred at radius \d+\.\d: rows \d+ \(radius") as e:
        h.HyperbolicRotationForestClassifier(n_estimators=10, random_state=0).fit(Xb, y)
    radii = np.arccosh(Xb[e.value.rows, 0])
    assert np.allclose(radii, e.value.radii, atol=1e-6)
    # cosh(r) cosh(r_c) <= e^(r + r_c) / 2, and r_c is at most the farthest row's radius
    assert radii.min() > 2 * CENTRED_RADIUS - np.log(2.0) - np.arccosh(Xb[:, 0]).max()


@pytest.mark.parametrize("rapidity", [8.0, 12.0])
def test_rotation_forest_predicts_as_before_the_boost(rapidity: float) -> None:
    """One PCA group (d <= group_size): every frame is a function of the data, so the
    boosted model's held-out probabilities are the unboosted model's (rows to radius 17)."""
    X, y = make_wrapped_normal_mixture(900, 2, 3, random_state=1)
    params = dict(n_estimators=10, max_depth=5, random_state=0)
    near = h.HyperbolicRotationForestClassifier(**params).fit(X[:600], y[:600])
    far = h.HyperbolicRotationForestClassifier(**params).fit(boost(X[:600], rapidity), y[:600])
    assert all(np.isfinite(M).all() for M in far.frames_)
    p_near, p_far = near.predict_proba(X[600:]), far.predict_proba(boost(X[600:], rapidity))
    assert np.array_equal(p_near.argmax(axis=1), p_far.argmax(axis=1))
    assert np.abs(p_near - p_far).max() < 1e-9


def test_a_model_holding_non_finite_frames_or_splits_is_refused_not_answered(mixture) -> None:
    """What the original code fitted on the issue's data (NaN frames, verify said OK), as
    an old pickle would bring it back: predict, verify and export refuse it."""
    X, y = mixture
    rotation = h.HyperbolicRotationForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    graph = h.to_onnx(rotation)
    rotation.frames_[1] = np.full_like(rotation.frames_[1], np.nan)
    isolation = h.HyperbolicIsolationForest(n_estimators=3, random_state=0).fit(X)
    isolation.trees_[2].threshold[0] = np.nan
    for model in (rotation, isolation):
        for call in (model.predict, lambda Q, m=model: h.to_onnx(m)):
            with pytest.raises(h.FarPointError, match="fit it again"):
                call(X)
    with pytest.raises(h.FarPointError, match="fit it again"):
        h.verify(rotation, graph, X)
