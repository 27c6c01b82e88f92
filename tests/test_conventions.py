"""Embedding conventions: the helpers against the libraries themselves, where they install.

For each library, points it places on its manifold must pass hyp2onnx's
manifold check under the convention the helper returns, and the library's
own distances must equal hyp2onnx's (`hyp2onnx.conventions.distance`,
through `hyp2onnx.geometry`) and a closed-form distance written here.
gensim is in the ``dev`` extra; geoopt and hypll need torch and geomstats
2.8 does not import with numpy >= 2.4 (it imports ``numpy.trapz``), so
those are in the ``embeddings`` extra and their tests skip without them.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest

from hyp2onnx.conventions import Convention, convention, convention_of, distance, gensim_points
from hyp2onnx.geometry import check_points

RNG = np.random.default_rng(0)


def _poincare_distance(p: np.ndarray, q: np.ndarray, K: float) -> np.ndarray:
    """Closed form on the ball of radius R: R arccosh(1 + 2 R^2 |p-q|^2 / ((R^2-|p|^2)(R^2-|q|^2)))."""
    R2 = -1.0 / K
    num = 2 * R2 * np.sum((p - q) ** 2, axis=1)
    den = (R2 - np.sum(p * p, axis=1)) * (R2 - np.sum(q * q, axis=1))
    return np.sqrt(R2) * np.arccosh(1 + num / den)


def _lorentz_distance(x: np.ndarray, y: np.ndarray, K: float) -> np.ndarray:
    """Closed form on x_0^2 - |x_s|^2 = R^2: R arccosh((x_0 y_0 - x_s . y_s) / R^2)."""
    R2 = -1.0 / K
    return np.sqrt(R2) * np.arccosh((x[:, 0] * y[:, 0] - np.sum(x[:, 1:] * y[:, 1:], axis=1)) / R2)


#: geoopt and hypll keep their curvature parameters in float32 and clamp inside
#: arccosh; measured: their float64 distances differ from the closed forms by
#: up to 2e-8 relative.
LIBRARY_RTOL = 1e-6


def _agree(points: np.ndarray, library_dist: np.ndarray, conv: Convention, closed_form) -> None:
    check_points(points, conv.input_geometry, conv.curvature, conv.timelike_dim)
    half = points.shape[0] // 2
    x, y = points[:half], points[half : 2 * half]
    ours = distance(x, y, conv)
    np.testing.assert_allclose(ours, closed_form(x, y, conv.curvature), rtol=1e-10)
    np.testing.assert_allclose(ours, library_dist, rtol=LIBRARY_RTOL)


def test_table() -> None:
    assert convention("gensim") == Convention("poincare", -1.0, 0, "gensim")
    assert convention("geoopt.PoincareBall", c=2.0).curvature == -2.0
    assert convention("geoopt.Lorentz", k=4.0).kwargs() == {
        "input_geometry": "hyperboloid",
        "curvature": -0.25,
        "timelike_dim": 0,
    }
    assert convention("geoopt.Stereographic", k=-0.5).curvature == -0.5
    assert convention("geomstats.Hyperboloid").input_geometry == "hyperboloid"
    assert convention("geomstats.PoincareBall").curvature == -1.0
    assert convention("hypll").curvature == pytest.approx(-math.log1p(math.e), rel=1e-15)  # 1.3133
    assert convention("hypll", raw=0.0).curvature == pytest.approx(-math.log(2.0))
    assert convention("hypll", c=0.3).curvature == -0.3
    assert convention("hgcn", c=0.5).kwargs()["curvature"] == -0.5


@pytest.mark.parametrize(
    ("source", "params", "match"),
    [
        ("geoopt.Stereographic", {"k": 0.5}, "spherical"),
        ("geoopt.Stereographic", {"k": 0.0}, "flat"),
        ("geoopt.PoincareBall", {}, "need c="),
        ("geoopt.PoincareBall", {"c": -1.0}, "positive"),
        ("geoopt.Lorentz", {"c": 1.0, "k": 1.0}, "takes no c="),
        ("hypll", {"c": 1.0, "raw": 1.0}, "not both"),
        ("nope", {}, "unknown source"),
    ],
)
def test_bad_parameters_are_refused(source: str, params: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        convention(source, **params)


def test_unknown_object_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot tell the convention"):
        convention_of(object())


def test_distance_matches_closed_forms_without_libraries() -> None:
    K = -0.7
    R = 1 / math.sqrt(-K)
    p = RNG.normal(size=(20, 3))
    p = R * 0.97 * p / (1 + np.linalg.norm(p, axis=1, keepdims=True))
    conv = Convention("poincare", K)
    np.testing.assert_allclose(
        distance(p[:10], p[10:], conv), _poincare_distance(p[:10], p[10:], K), rtol=1e-10
    )


@pytest.mark.skipif(
    importlib.util.find_spec("gensim") is None, reason="gensim (extra 'dev') is not installed"
)
def test_gensim_poincare_model() -> None:
    from gensim.models.poincare import PoincareModel

    relations = [
        ("mammal", "animal"),
        ("dog", "mammal"),
        ("cat", "mammal"),
        ("bird", "animal"),
        ("owl", "bird"),
        ("fish", "animal"),
        ("shark", "fish"),
        ("wolf", "dog"),
    ]
    model = PoincareModel(relations, size=3, negative=2, seed=0)
    model.train(epochs=20)
    conv = convention_of(model)
    assert conv == convention("gensim") == convention_of(model.kv)
    keys, X = gensim_points(model)
    pairs = [(keys[i], keys[-1 - i]) for i in range(len(keys) // 2)]
    lib = np.array([model.kv.distance(a, b) for a, b in pairs])
    ordered = np.array([X[keys.index(a)] for a, _ in pairs] + [X[keys.index(b)] for _, b in pairs])
    _agree(ordered, lib, conv, _poincare_distance)


def _torch_points(R: float = 1.0, n: int = 16, d: int = 3):
    """Tangent vectors at the origin, for points within about 6 R of each other.

    Farther out, the libraries' own Poincare formulas (artanh of a Mobius sum
    near 1) lose digits: at 10 R apart they differ from the closed form by 1e-5.
    """
    import torch

    return torch.from_numpy(RNG.normal(size=(n, d)) * 0.6 * R)


@pytest.mark.skipif(
    importlib.util.find_spec("geoopt") is None,
    reason="geoopt is not installed (extra 'embeddings', left out of 'dev': it pulls in torch)",
)
@pytest.mark.parametrize("c", [0.3, 1.0, 2.5])
def test_geoopt_poincare_ball(c: float) -> None:
    import geoopt

    for manifold in (
        geoopt.PoincareBall(c=c),
        geoopt.PoincareBallExact(c=c),
        geoopt.Stereographic(k=-c),
    ):
        conv = convention_of(manifold)
        assert (conv.input_geometry, conv.curvature) == ("poincare", pytest.approx(-c, rel=1e-6))
        x = manifold.expmap0(_torch_points(1 / math.sqrt(c)))
        lib = manifold.dist(x[:8], x[8:]).numpy()
        _agree(x.numpy(), lib, conv, _poincare_distance)


@pytest.mark.skipif(
    importlib.util.find_spec("geoopt") is None,
    reason="geoopt is not installed (extra 'embeddings', left out of 'dev': it pulls in torch)",
)
@pytest.mark.parametrize("k", [0.5, 1.0, 3.0])
def test_geoopt_lorentz(k: float) -> None:
    import geoopt
    import torch

    manifold = geoopt.Lorentz(k=k)
    conv = convention_of(manifold)
    assert (conv.input_geometry, conv.curvature, conv.timelike_dim) == (
        "hyperboloid",
        pytest.approx(-1 / k, rel=1e-6),
        0,
    )
    u = _torch_points(math.sqrt(k))
    x = manifold.expmap0(torch.cat([torch.zeros(u.shape[0], 1, dtype=u.dtype), u], dim=1))
    lib = manifold.dist(x[:8], x[8:]).numpy()
    _agree(x.numpy(), lib, conv, _lorentz_distance)


@pytest.mark.skipif(
    importlib.util.find_spec("geoopt") is None,
    reason="geoopt is not installed (extra 'embeddings', left out of 'dev': it pulls in torch)",
)
def test_geoopt_sphere_is_refused() -> None:
    import geoopt

    with pytest.raises(ValueError, match="spherical"):
        convention_of(geoopt.Stereographic(k=0.5))


@pytest.mark.skipif(
    importlib.util.find_spec("hypll") is None,
    reason="hypll is not installed (extra 'embeddings', left out of 'dev': it pulls in torch)",
)
@pytest.mark.parametrize("raw", [None, 0.5, 3.0])
def test_hypll_poincare_ball(raw: float | None) -> None:
    from hypll.manifolds.poincare_ball import Curvature, PoincareBall
    from hypll.tensors import ManifoldTensor, TangentTensor

    manifold = PoincareBall(c=Curvature() if raw is None else Curvature(raw))
    conv = convention_of(manifold)
    assert conv.input_geometry == "poincare"
    assert conv.curvature == pytest.approx(convention("hypll", raw=raw).curvature, rel=1e-6)
    u = _torch_points(1 / math.sqrt(-conv.curvature))
    x = manifold.expmap(TangentTensor(u, man_dim=1, manifold=manifold)).tensor
    half = lambda t: ManifoldTensor(t, manifold=manifold, man_dim=1)
    lib = manifold.dist(half(x[:8]), half(x[8:])).detach().numpy()
    _agree(x.detach().numpy(), lib, conv, _poincare_distance)


def _geomstats(monkeypatch: pytest.MonkeyPatch):
    """geomstats 2.8 imports numpy.trapz, removed in numpy 2.4: alias it for the test."""
    if importlib.util.find_spec("geomstats") is None:
        pytest.skip("geomstats (extra 'embeddings') is not installed")
    if not hasattr(np, "trapz"):
        monkeypatch.setattr(np, "trapz", np.trapezoid, raising=False)
    import geomstats.geometry.hyperboloid as hyperboloid
    import geomstats.geometry.poincare_ball as poincare_ball

    return hyperboloid, poincare_ball


def test_geomstats(monkeypatch: pytest.MonkeyPatch) -> None:
    hyperboloid, poincare_ball = _geomstats(monkeypatch)
    H = hyperboloid.Hyperboloid(dim=3)
    conv = convention_of(H)
    assert conv == convention("geomstats.Hyperboloid")
    x = np.asarray(H.random_point(16))
    _agree(x, np.asarray(H.metric.dist(x[:8], x[8:])), conv, _lorentz_distance)
    B = poincare_ball.PoincareBall(dim=3)
    conv = convention_of(B)
    p = np.asarray(B.random_point(16))
    _agree(p, np.asarray(B.metric.dist(p[:8], p[8:])), conv, _poincare_distance)
