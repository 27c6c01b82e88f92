"""Checks that no finite input slips through, and that ``verify`` compares as the user holds data.

Cases of issue 23. Oracles are plain numpy written here, independent of the
code under test: a hyperboloid row is on the manifold iff
``x_0^2 - |x_s|^2 = R^2`` computed on the row divided by its largest value
(no overflow); a code is exact in float32 iff ``float32(c) == c``.
"""

from __future__ import annotations

import numpy as np
import pytest

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.blocks import Categorical, Hyperbolic, Spherical, to_features
from hyp2onnx.errors import InvalidPointError

from _cli import assert_usage_error, cli

#: Finite rows whose squares overflow float64: x0*x0 is inf, and inf > rtol * inf is False.
OVERFLOWING = np.array([[1e200, 1.0, 0.0, 0.0], [1e155, 1e155, 1e155, 0.0], [1e300, 0.0, 1e299, 0.0]])


def _minkowski_off(X: np.ndarray, R: float = 1.0, rtol: float = 1e-5) -> np.ndarray:
    """Independent oracle: off the hyperboloid, computed on rows scaled to max |x| = 1."""
    m = np.abs(X).max(axis=1, keepdims=True)
    Y = X / m
    with np.errstate(over="ignore"):
        r2 = (R / m[:, 0]) ** 2
    q = Y[:, 0] ** 2 - (Y[:, 1:] ** 2).sum(axis=1)
    return ~(np.abs(q - r2) <= rtol * (Y**2).sum(axis=1))


# -- 1. overflowing points -----------------------------------------------------------------


def test_overflowing_hyperboloid_rows_are_refused_everywhere() -> None:
    assert _minkowski_off(OVERFLOWING).all()  # the oracle: none of them is on the hyperboloid
    for row in OVERFLOWING:
        with pytest.raises(InvalidPointError, match="off the hyperboloid"):
            geometry.check_points(row[None], "hyperboloid")
        with pytest.raises(InvalidPointError, match="off the hyperboloid"):
            geometry.to_klein(row[None], "hyperboloid")
        with pytest.raises(InvalidPointError, match="off the hyperboloid"):
            to_features(row[None], [Hyperbolic(3)])


def test_overflowing_spherical_rows_are_refused() -> None:
    for row in ([1e200, 1.0, 0.0], [1e155, 1e155, 1e155]):
        with pytest.raises(InvalidPointError, match="off the sphere"):
            to_features(np.array([row]), [Spherical(2)])


def test_accepted_far_points_keep_their_klein_coordinates_in_the_ball() -> None:
    """Points the check accepts give |k|^2 <= (1 + rtol) / (1 - rtol); rows it refuses do not."""
    rng = np.random.default_rng(3)
    scale = 10.0 ** rng.uniform(-300, 300, size=(400, 1))
    X = np.abs(rng.normal(size=(400, 4))) * scale
    X[:, 0] = np.abs(X[:, 0]) + np.sqrt((X[:, 1:] ** 2).sum(axis=1) / 4.0)  # some near the cone
    X = np.vstack([X, OVERFLOWING])
    for x in X:
        try:
            k = geometry.to_klein(x[None], "hyperboloid")
        except InvalidPointError:
            continue
        assert not _minkowski_off(x[None])[0]
        assert (k**2).sum() <= (1 + 1e-5) / (1 - 1e-5)


def test_cli_refuses_overflowing_rows_for_a_float64_graph(tmp_path) -> None:
    from _data import labels, points

    X, k = points(120, 3, seed=7)
    model = h.HyperbolicDecisionTreeClassifier(max_depth=3, random_state=0).fit(X, labels(k, 2, seed=7))
    import pickle

    (tmp_path / "m.pkl").write_bytes(pickle.dumps(model))
    code, _, err = cli("convert", tmp_path / "m.pkl", "-o", tmp_path / "m.onnx", "--dtype", "float64")
    assert code == 0, err
    np.save(tmp_path / "far.npy", np.vstack([X[:3], OVERFLOWING]))
    for args in (
        ("predict", tmp_path / "m.onnx", tmp_path / "far.npy", "-o", tmp_path / "p.csv"),
        ("verify", tmp_path / "m.pkl", tmp_path / "m.onnx", "--data", tmp_path / "far.npy"),
        ("convert", tmp_path / "m.pkl", "-o", tmp_path / "c.onnx", "--dtype", "float64",
         "--check", tmp_path / "far.npy"),
    ):
        code, _, err = cli(*args)
        assert_usage_error(code, err, match="off the hyperboloid")
        assert "rows 3, 4, 5" in err, err
