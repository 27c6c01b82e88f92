"""The documented recipe for a new backend, followed from outside the package.

Step one is a file (``tests/_toy_backend.py``: a toy regression stump, its
`Backend` subclass and its hyperbolic estimator); step two is its registry
line, which a package outside hyp2onnx adds with
`hyp2onnx.estimators.register_backend`. Nothing else is written: the
estimator then fits, corrects its threshold to an Einstein midpoint, exports
and verifies like the built-in ones.
"""

from __future__ import annotations

import numpy as np
import pytest
from _data import points, targets

import hyp2onnx as h
from hyp2onnx.estimators import _registry
from hyp2onnx.estimators._registry import BackendSpec, backend_for, register_backend
from hyp2onnx.geometry import einstein_midpoint

SPEC = BackendSpec(
    module="_toy_backend",
    backend="StumpBackend",
    library="_toy_backend",
    extra=None,
    estimators=("HyperbolicStumpRegressor",),
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
