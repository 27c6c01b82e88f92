"""Property test: random data, depths, curvatures and geometries; exact and default graphs.

Test rows include every split's probe rows (``_oracle.probe_rows``): the
tested value on the threshold and its float32/float64 neighbours, in Klein
coordinates as the model sees them, mapped to the input geometry.
"""

from __future__ import annotations

import _oracle as oracle
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hyp2onnx as h
from hyp2onnx import geometry
from hyp2onnx.export import to_onnx
from hyp2onnx.verification import run_onnx, verify


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(2, 120),
    d=st.integers(1, 5),
    depth=st.integers(1, 9),
    curvature=st.one_of(st.just(-1.0), st.floats(-6.0, -0.05)),
    geometry_name=st.sampled_from(["hyperboloid", "poincare", "klein"]),
    timelike=st.integers(0, 5),
    forest=st.booleans(),
    classify=st.booleans(),
    dtype=st.sampled_from(["float32", "float64"]),
    radius=st.floats(0.01, 6.0),
    n_values=st.integers(1, 6),
)
def test_exact_graph_matches_model(
    seed, n, d, depth, curvature, geometry_name, timelike, forest, classify, dtype, radius, n_values
):
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True) + 1e-300
    # Few distinct radii: many ties and repeated coordinates.
    k = direction * np.tanh(rng.choice(rng.uniform(0, radius, n_values), size=(n, 1)))
    timelike_dim = timelike % (d + 1)
    X = geometry.from_klein(k, geometry_name, curvature, timelike_dim)
    y = rng.integers(0, 3, n) if classify else rng.normal(size=n)
    params = dict(
        input_geometry=geometry_name,
        curvature=curvature,
        timelike_dim=timelike_dim,
        max_depth=depth,
        random_state=seed % 1000,
    )
    if forest:
        cls = h.HyperbolicRandomForestClassifier if classify else h.HyperbolicRandomForestRegressor
        model = cls(n_estimators=3, **params)
    else:
        cls = h.HyperbolicDecisionTreeClassifier if classify else h.HyperbolicDecisionTreeRegressor
        model = cls(**params)
    model.fit(X, y)
    k_seen = model.to_klein(X)
    native = oracle.native(model)
    probes = oracle.probe_rows(native, k_seen, np.dtype(dtype).type)
    if geometry_name == "klein" and curvature == -1.0:  # the rows reach the trees unchanged
        assert oracle.probe_coverage(native, probes) >= 0.99
    X_test = np.concatenate(
        [
            X,
            geometry.from_klein(
                np.concatenate([k[::-1] * 0.999, probes.k]), geometry_name, curvature, timelike_dim
            ),
        ]
    )
    Xt = X_test.astype(dtype)
    # The exact encoding: values bit for bit. The default graph: labels identical,
    # values within the bound it records (verify's default tolerance).
    assert verify(model, to_onnx(model, dtype=dtype), Xt).ok
    got = run_onnx(to_onnx(model, dtype=dtype, encoding="exact"), Xt)
    if classify:
        np.testing.assert_array_equal(got["label"], model.predict(Xt))
        np.testing.assert_array_equal(got["probabilities"], model.predict_proba(Xt))
    else:
        np.testing.assert_array_equal(got["variable"][:, 0], model.predict(Xt))
