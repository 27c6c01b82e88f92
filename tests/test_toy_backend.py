"""The documented recipe for a new backend, followed from outside the package.

Step one is a file (``tests/_toy_backend.py``: a toy regression stump, its
`Backend` subclass and its hyperbolic estimator); step two is its registry
line, which a package outside hyp2onnx adds with
`hyp2onnx.estimators.register_backend`. Nothing else is written: the
estimator then fits, corrects its threshold to an Einstein midpoint, exports
and verifies like the built-in ones, and the command line reads the
library's native files (``.stump``), checks them and the pickles holding its
models through the backend, and names its refusals, as it does CatBoost's.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import onnx
import pytest
from _cli import assert_usage_error, cli
from _data import points, targets

import hyp2onnx as h
from hyp2onnx.cli._common import error_lines
from hyp2onnx.estimators import _registry
from hyp2onnx.estimators._registry import BackendSpec, backend_for, register_backend
from hyp2onnx.geometry import einstein_midpoint, to_klein
from hyp2onnx.verification import run_onnx

SPEC = BackendSpec(
    module="_toy_backend",
    backend="StumpBackend",
    library="_toy_backend",
    extra=None,
    estimators=("HyperbolicStumpRegressor",),
    formats=(".stump",),
    title="toy stump",
    crashes_on_damage=True,
    refusal_error="_toy_backend.StumpError",
)


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setattr(_registry, "BACKENDS", _registry.BACKENDS)  # undone after the test
    register_backend(SPEC)
    import _toy_backend

    return _toy_backend


def test_a_backend_from_outside_fits_exports_and_verifies(registered):
    X, k = points(200, 2, seed=6, max_radius=2.0)
    y = targets(k, seed=6)
    model = h.estimators.HyperbolicStumpRegressor(min_leaf=5).fit(X, y)
    assert type(backend_for(model.estimator_)).__name__ == "StumpBackend"
    # the threshold is the Einstein midpoint of its two neighbouring training values
    f, t = model.estimator_.feature_, model.estimator_.threshold_
    column = np.sort(np.unique(model.to_klein(X)[:, f]))
    below, above = column[column <= t].max(), column[column > t].min()
    assert t == pytest.approx(float(einstein_midpoint(below, above)), abs=1e-15)
    graph = h.to_onnx(model)
    assert h.read_metadata(graph).backend == "stump"
    report = h.verify(model, graph, X)
    assert report.ok and report.max_abs_diff["variable"] == 0.0, report


def test_registration_is_checked(registered):
    with pytest.raises(ValueError, match="clashes"):
        register_backend(SPEC)
    with pytest.raises(ValueError, match="in full"):
        register_backend(
            BackendSpec(module="._x", backend="X", library="x", extra=None, estimators=())
        )


def _plain_stump(registered):
    X, k = points(200, 2, seed=6, max_radius=2.0)
    return registered.StumpRegressor(min_leaf=5).fit(to_klein(X), targets(k, seed=6))


def test_the_cli_reads_a_registered_backends_native_files(registered, tmp_path: Path) -> None:
    stump = _plain_stump(registered)
    registered.save_stump(stump, tmp_path / "toy_model.stump")
    code, _, err = cli("convert", tmp_path / "toy_model.stump", "--geometry", "klein")
    assert code == 0, err
    graph = onnx.load(tmp_path / "toy_model.onnx")
    assert h.read_metadata(graph).backend == "stump"
    k = np.zeros((3, 2))  # on the threshold, one step above it, and far below
    k[:, stump.feature_] = [stump.threshold_, np.nextafter(stump.threshold_, 1), -0.5]
    got = run_onnx(graph, k)["variable"].ravel()
    np.testing.assert_array_equal(got, stump.predict(k))
    assert got[0] != got[1]
    code, _, err = cli("convert", tmp_path / "toy_model.unknown", "--geometry", "klein")
    assert_usage_error(code, err, match=".stump (_toy_backend)")


def test_the_cli_checks_files_and_pickles_through_the_backend(registered, tmp_path) -> None:
    (tmp_path / "crash.stump").write_text('{"crash": 1}')
    code, _, err = cli("convert", tmp_path / "crash.stump", "--geometry", "klein")
    assert_usage_error(code, err, match="crash.stump: not a readable stump file (the toy library")
    stump = _plain_stump(registered)
    stump.threshold_ = np.nan
    (tmp_path / "nan.pkl").write_bytes(pickle.dumps(stump))
    code, _, err = cli("convert", tmp_path / "nan.pkl", "--geometry", "klein")
    assert_usage_error(code, err, match="nan.pkl: holds a damaged toy stump model (the threshold")


def test_the_librarys_refusal_is_named_by_the_cli(registered) -> None:
    lines = error_lines(registered.StumpError("bad bytes"))
    assert lines[0] == "error: toy stump refused the model: bad bytes", lines
