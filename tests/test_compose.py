"""hyp2onnx.compose: an ONNX encoder in front of a model's graph.

The oracle is the encoder's forward pass written in numpy from its formulas
(``tests/_encoders.py``) followed by the Python model's own ``predict``; the
encoders are built with ``onnx.helper`` (an MLP, then an exponential map).
Routing is exact *given the encoder's outputs*: the composed graph's labels
equal the Python model's on the encoder's onnxruntime outputs on every row,
rows on and beside every threshold included; against the numpy encoder they
may differ only where numpy's and onnxruntime's rounding of the encoder
moves a point across a split, which the tests count.
"""

from __future__ import annotations

import warnings

import _oracle as oracle
import numpy as np
import onnx
import pytest
from _encoders import Encoder, run
from onnx import TensorProto, helper, numpy_helper

import hyp2onnx as h
from hyp2onnx import compose, read_metadata, save_onnx, to_onnx, verify
from hyp2onnx.errors import InvalidPointError
from hyp2onnx.export import encoder_sha256
from hyp2onnx.verification import run_onnx

RNG = np.random.default_rng(0)
X_RAW = RNG.normal(size=(1500, 5))


def _classes(E: np.ndarray, geometry: str) -> np.ndarray:
    k = h.geometry.to_klein(E, geometry, -1.0, 0, check=False) if geometry else E
    return (k[:, 0] > 0).astype(int) + (k[:, 1] > 0.2).astype(int)


@pytest.fixture(scope="module")
def hyperboloid():
    """A float32 MLP encoder onto the hyperboloid (K = -1) and a forest fitted on its points."""
    enc = Encoder(5, 16, 3, dtype=np.float32, seed=1, scale=2.0)
    model = enc.onnx()
    E = run(model, X_RAW)["points"].astype(np.float64)
    forest = h.HyperbolicRandomForestClassifier(n_estimators=8, max_depth=6, random_state=0)
    return enc, model, forest.fit(E, _classes(E, "hyperboloid"))


def _labels_against_numpy(composed, model, enc, X, *, max_moved=0.01):
    """Composed labels == the Python model on the numpy encoder, but for rows the two
    encoders' rounding moves across a split (at most ``max_moved`` of them); and == the
    model on onnxruntime's encoder outputs everywhere."""
    got = run(composed, X)
    ort_points = run(enc.onnx(), X)["points"].astype(np.float64)
    np_points = enc.numpy(X).astype(np.float64)
    np.testing.assert_allclose(ort_points, np_points, rtol=2e-5, atol=1e-6)
    on_ort = model.predict(ort_points)
    on_numpy = model.predict(np_points)
    np.testing.assert_array_equal(got["label"], on_ort)
    moved = on_ort != on_numpy
    assert moved.mean() <= max_moved
    np.testing.assert_array_equal(got["label"][~moved], on_numpy[~moved])
    return got


def test_hyperboloid_encoder_against_numpy_oracle(hyperboloid):
    enc, enc_model, forest = hyperboloid
    composed = compose(enc_model, forest)
    X = RNG.normal(size=(800, 5)) * 1.5
    got = _labels_against_numpy(composed, forest, enc, X)
    assert got["on_manifold"].all()
    report = verify(forest, composed, X)
    assert report.ok and report.label_mismatches == 0, report
    assert verify(forest, composed, X, encoder=enc_model).ok


def test_metadata_and_ml_opset_kept(hyperboloid, tmp_path):
    """ai.onnx.ml stays imported (onnx.compose.merge_models drops it, onnx#4474)."""
    enc, enc_model, forest = hyperboloid
    path = tmp_path / "encoder.onnx"
    onnx.save(enc_model, path)
    for encoding in ("fast", "exact"):
        composed = compose(path, forest, encoding=encoding)
        graph = to_onnx(forest, encoding=encoding)
        ml = {o.domain: o.version for o in graph.opset_import}["ai.onnx.ml"]
        assert {o.domain: o.version for o in composed.opset_import}["ai.onnx.ml"] == ml
        np.testing.assert_array_equal(
            run(composed, X_RAW[:300])["label"],
            run(compose(enc_model, graph), X_RAW[:300])["label"],
        )
    meta = read_metadata(composed)
    assert meta["encoder_sha256"] == encoder_sha256(path)
    assert meta["encoder_output"] == "points"
    assert meta["input_geometry"] == "hyperboloid" and meta["n_features_in"] == 4
    assert meta["encoder_precision"].startswith("none")
    assert [i.name for i in composed.graph.input] == ["x"]
    assert [o.name for o in composed.graph.output] == ["label", "probabilities", "on_manifold"]


def test_merges_what_merge_models_refuses(hyperboloid):
    """onnx.compose.merge_models needs equal IR versions (and equal opsets per domain);
    an encoder saved by another tool rarely has ours. compose brings them together."""
    _, enc_model, forest = hyperboloid
    graph = to_onnx(forest)
    enc_model = onnx.ModelProto.FromString(enc_model.SerializeToString())
    enc_model.ir_version = graph.ir_version + 1  # as another exporter may write it
    with pytest.raises(ValueError, match="IR version mismatch"):
        onnx.compose.merge_models(
            onnx.compose.add_prefix(enc_model, "e/"), graph, io_map=[("e/points", "X")]
        )
    composed = compose(enc_model, graph)
    assert composed.ir_version == max(enc_model.ir_version, graph.ir_version)
    assert {o.domain for o in composed.opset_import} == {"", "ai.onnx.ml"}


def test_poincare_encoder_at_another_curvature():
    """A float64 encoder onto the Poincare ball of radius sqrt(2) (K = -0.5), a regressor."""
    enc = Encoder(5, 12, 2, target="poincare", curvature=-0.5, dtype=np.float64, seed=3, scale=3.0)
    E = enc.numpy(X_RAW)
    model = h.HyperbolicRandomForestRegressor(
        n_estimators=5, max_depth=6, random_state=0, input_geometry="poincare", curvature=-0.5
    ).fit(E, E[:, 0] - 2 * E[:, 1] ** 2)
    composed = compose(enc.onnx(), model)
    assert read_metadata(composed)["curvature"] == -0.5
    X = RNG.normal(size=(600, 5))
    got = run(composed, X)
    want = model.predict(enc.numpy(X))
    ort_points = run(enc.onnx(), X)["points"]
    np.testing.assert_allclose(ort_points, enc.numpy(X), rtol=1e-12, atol=1e-14)
    assert got["on_manifold"].all()
    np.testing.assert_allclose(got["variable"][:, 0], model.predict(ort_points), rtol=0, atol=1e-12)
    close = np.isclose(got["variable"][:, 0], want, rtol=0, atol=1e-12)
    assert close.mean() >= 0.99
    assert verify(model, composed, X).ok


def test_plain_klein_model_with_the_time_column_last():
    """A plain scikit-learn tree on Klein coordinates, told the encoder's convention."""
    from sklearn.tree import DecisionTreeClassifier

    enc = Encoder(5, 16, 3, dtype=np.float64, seed=4, scale=2.0, timelike_last=True)
    E = enc.numpy(X_RAW)
    k = h.geometry.to_klein(E, "hyperboloid", -1.0, -1)
    tree = DecisionTreeClassifier(max_depth=5, random_state=0).fit(k, _classes(k, ""))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "exported with its own (Euclidean) thresholds"
        composed = compose(enc.onnx(), tree, input_geometry="hyperboloid", timelike_dim=-1)
        with pytest.raises(ValueError, match="plain Euclidean model"):
            compose(enc.onnx(), tree)
    X = RNG.normal(size=(500, 5))
    got = run(composed, X)
    points = run(enc.onnx(), X)["points"]
    np.testing.assert_array_equal(
        got["label"], tree.predict(h.geometry.to_klein(points, "hyperboloid", -1.0, -1))
    )
    assert verify(tree, composed, X).ok


@pytest.mark.parametrize("enc_dtype", [np.float32, np.float64])
def test_rows_on_every_threshold_route_exactly(enc_dtype):
    """An encoder that scales Klein points by R = 2 (exact) lets rows land on each
    threshold and its float neighbours; every one routes as the Python model does."""
    enc = Encoder(2, 1, 2, target="scaled", curvature=-0.25, dtype=enc_dtype)
    base = h.datasets.make_wrapped_normal_mixture(600, 2, 3, random_state=2)[0]
    k = h.geometry.to_klein(base, "hyperboloid")
    model = h.HyperbolicDecisionTreeClassifier(
        max_depth=6, input_geometry="klein", curvature=-0.25
    ).fit(2 * k, _classes(k, ""))
    probes = oracle.probe_rows(oracle.native(model), k, enc_dtype).k
    assert probes.shape[0] > 50
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        composed = compose(enc.onnx(), model, dtype="float64")
    # widening float32 is exact: said in the metadata, not in a warning
    assert not [w for w in caught if "precision lost" in str(w.message)]
    if enc_dtype == np.float32:
        assert "float32" in read_metadata(composed)["encoder_precision"]
        assert any(
            n.op_type == "Cast" and n.input[0] == "encoder/points" for n in composed.graph.node
        )
    got = run(composed, probes)
    np.testing.assert_array_equal(got["label"], model.predict(enc.numpy(probes).astype(np.float64)))
    assert verify(model, composed, probes).ok


def test_float64_encoder_into_a_float32_graph_says_what_is_lost(hyperboloid):
    _, _, forest = hyperboloid
    enc = Encoder(5, 16, 3, dtype=np.float64, seed=1, scale=2.0)
    graph = to_onnx(forest, dtype="float32")
    with pytest.warns(UserWarning, match="rounded to float32 at the junction"):
        composed = compose(enc.onnx(), graph)
    assert "rounded to float32" in read_metadata(composed)["encoder_precision"]
    got = run(composed, X_RAW[:200])
    points = run(enc.onnx(), X_RAW[:200])["points"].astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(got["label"], forest.predict(points))


def _if_encoder(clashing: dict[str, str]) -> onnx.ModelProto:
    """The hyperboloid encoder's output passed through an If whose branches hold names
    the model's graph also uses (and an initializer named like one)."""
    enc = Encoder(5, 16, 3, dtype=np.float32, seed=1, scale=2.0)
    base = enc.onnx(names=clashing)
    g = base.graph
    points = g.output[0].name
    branch = lambda tag: helper.make_graph(
        [helper.make_node("Identity", [points], ["probabilities"], name=f"{tag}/node")],
        f"branch_{tag}",
        [],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 4])],
    )
    cond = numpy_helper.from_array(np.array(True), "label")
    g.initializer.append(cond)
    g.node.append(
        helper.make_node(
            "If", ["label"], ["out"], then_branch=branch("then"), else_branch=branch("else")
        )
    )
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 4]))
    return base


def test_names_are_prefixed_everywhere(hyperboloid):
    """Encoder names equal to the model graph's (nodes, initializers, If bodies) stay apart."""
    enc, _, forest = hyperboloid
    graph = to_onnx(forest, encoding="exact")  # Loops over row blocks in the model's graph
    inner = {n for node in graph.graph.node for n in node.output} - {"label", "probabilities"}
    taken = sorted(inner)[:6]
    clashing = dict(zip(["h0", "h1", "h", "v0", "v", "vv"], taken))
    clashing["W1"] = graph.graph.initializer[0].name
    encoder = _if_encoder(clashing)
    composed = compose(encoder, graph, output="out")
    want = forest.predict(run(encoder, X_RAW[:400])["out"].astype(np.float64))
    np.testing.assert_array_equal(run(composed, X_RAW[:400])["label"], want)
    names = [i.name for i in composed.graph.initializer]
    assert len(names) == len(set(names))
    head, tail = taken[0].split("/", 1)  # an encoder name that the prefix makes a model's
    with pytest.raises(ValueError, match="another prefix"):
        compose(_if_encoder({"h0": tail}), graph, output="out", prefix=head + "/")
    bad = _if_encoder({})
    bad.graph.input[0].name = "on_manifold"
    for node in bad.graph.node:
        node.input[:] = ["on_manifold" if i == "x" else i for i in node.input]
    with pytest.raises(ValueError, match="name of a model output"):
        compose(bad, graph, output="out")


def test_bad_encoders_get_clear_errors(hyperboloid):
    _, enc_model, forest = hyperboloid
    wide = Encoder(5, 8, 4, dtype=np.float32).onnx()
    with pytest.raises(ValueError, match="'points' has 5 columns; the model takes hyperboloid"):
        compose(wide, forest)
    with pytest.raises(ValueError, match="no output 'z'; its outputs are: points"):
        compose(enc_model, forest, output="z")
    two = Encoder(5, 16, 3, dtype=np.float32, seed=1, scale=2.0).onnx(extra_outputs=True)
    with pytest.raises(ValueError, match="has 2 outputs \\(points, v\\): name the one"):
        compose(two, forest)
    assert run(compose(two, forest, output="points"), X_RAW[:5])["on_manifold"].all()
    with pytest.raises(ValueError, match="contradicts the model's own input_geometry"):
        compose(enc_model, forest, input_geometry="poincare")
    with pytest.raises(ValueError, match="hyp2onnx metadata"):
        compose(enc_model, enc_model)
    # A width the graph leaves open is found by shape inference ...
    open_width = Encoder(5, 8, 4, dtype=np.float32).onnx(width_known=False)
    with pytest.raises(ValueError, match="has 5 columns"):
        compose(open_width, forest)
    # ... or, where it follows the input's, checked when the graph runs, never read wrongly.
    passing = Encoder(4, 1, 4, target="scaled", dtype=np.float32).onnx(width_known=False)
    composed = compose(passing, forest)
    assert run_onnx(composed, np.array([[2.0, 1.0, 1.0, 1.0]]))["on_manifold"].all()
    with pytest.raises(Exception, match="(?i)broadcast|dimension|shape"):
        run(composed, np.array([[2.0, 1.0, 1.0, 1.0, 0.0]]))


def test_points_off_the_manifold_are_flagged_and_refused(hyperboloid):
    """A hyperboloid of the wrong radius, points outside the ball, and infinity."""
    _, _, forest = hyperboloid
    wrong = Encoder(5, 16, 3, dtype=np.float32, seed=1, scale=2.0, curvature=-0.25)  # R = 2
    composed = compose(wrong.onnx(), forest)
    got = run(composed, X_RAW[:50])
    assert not got["on_manifold"].any()
    assert np.isnan(got["probabilities"]).all()
    with pytest.raises(InvalidPointError, match="50 row\\(s\\) give encoder outputs off"):
        run_onnx(composed, X_RAW[:50])
    with pytest.raises(InvalidPointError, match="off the model's manifold"):
        verify(forest, composed, X_RAW[:50])

    scaled = Encoder(2, 1, 2, target="scaled", curvature=-4.0, dtype=np.float32)  # R = 0.5
    k = h.geometry.to_klein(h.datasets.make_wrapped_normal_mixture(200, 2, 2)[0], "hyperboloid")
    model = h.HyperbolicDecisionTreeClassifier(max_depth=3, input_geometry="klein").fit(
        k, (k[:, 0] > 0).astype(int)
    )
    composed = compose(scaled.onnx(), model)  # R = 0.5 Klein points given to a unit-ball model
    rows = np.array([[0.5, 0.5], [1.5, 0.0], [2.2, 0.0], [3e38, 0.0], [1.99, 0.0], [2.0, 0.0]])
    ok = run(composed, rows)["on_manifold"]  # the encoder's outputs are the rows halved
    np.testing.assert_array_equal(ok, [True, True, False, False, True, False])
    hyper = compose(Encoder(5, 16, 3, dtype=np.float32, seed=1, scale=40.0).onnx(), forest)
    flags = run(hyper, X_RAW[:200] * 30)["on_manifold"]  # cosh overflows float32: inf
    assert not flags.all()
    with pytest.raises(InvalidPointError):
        run_onnx(hyper, X_RAW[:200] * 30)
    # A finite time coordinate beside an infinite space coordinate (float32 overflow in
    # the encoder), a point of radius 2, and the lower sheet's (-1, 0, 0, 0).
    doubling = Encoder(4, 1, 4, target="scaled", curvature=-0.25, dtype=np.float32).onnx()
    rows = np.array([[1.0, 3e38, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [-0.5, 0.0, 0.0, 0.0]])
    flags = run(compose(doubling, forest), rows)
    np.testing.assert_array_equal(flags["on_manifold"], [False, False, False])
    flags = run(compose(doubling, forest), np.array([[0.5, 0.0, 0.0, 0.0]]))
    assert flags["on_manifold"].all()  # (1, 0, 0, 0): the origin


def test_external_data_on_both_sides(hyperboloid, tmp_path, monkeypatch):
    """An encoder stored with external data; the composed graph written as a graph over
    protobuf's limit is (the limit lowered, as a real 2 GiB graph takes minutes)."""
    from hyp2onnx.export import _model_file

    _, enc_model, forest = hyperboloid
    path = tmp_path / "encoder.onnx"
    copy = onnx.ModelProto()
    copy.CopyFrom(enc_model)  # save_model moves the tensors out of the model it is given
    onnx.save_model(
        copy, path, save_as_external_data=True, all_tensors_to_one_file=True, size_threshold=0
    )
    monkeypatch.setattr(_model_file, "PROTOBUF_LIMIT", 4096)
    composed = compose(path, forest)  # checked as written with external data
    out = tmp_path / "composed.onnx"
    save_onnx(composed, out)  # over the limit: external data without being asked
    assert (tmp_path / "composed.onnx.data").stat().st_size > 0
    import onnxruntime as ort

    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (labels,) = session.run(["label"], {"x": X_RAW[:100].astype(np.float32)})
    np.testing.assert_array_equal(labels, run(composed, X_RAW[:100])["label"])
    assert verify(forest, str(out), X_RAW[:100], encoder=path).ok


def test_opsets_are_brought_together(hyperboloid):
    enc, _, forest = hyperboloid
    old = enc.onnx(opset=14)
    composed = compose(old, forest)  # the model is exported at the encoder's opset
    assert {o.domain: o.version for o in composed.opset_import}[""] == 14
    graph = to_onnx(forest, target_opset=17)
    composed = compose(old, graph)  # the encoder is converted up to the graph's
    assert {o.domain: o.version for o in composed.opset_import}[""] == 17
    want = forest.predict(run(old, X_RAW[:300])["points"].astype(np.float64))
    np.testing.assert_array_equal(run(composed, X_RAW[:300])["label"], want)


def test_verify_refuses_another_encoder(hyperboloid):
    enc, enc_model, forest = hyperboloid
    composed = compose(enc_model, forest)
    other = Encoder(5, 16, 3, dtype=np.float32, seed=9).onnx()
    with pytest.raises(ValueError, match="not the one composed"):
        verify(forest, composed, X_RAW[:10], encoder=other)
    with pytest.raises(ValueError, match="shape \\(n_samples, 5\\)"):
        verify(forest, composed, X_RAW[:10, :4])
    with pytest.raises(ValueError, match="encoder= is for composed graphs"):
        verify(forest, to_onnx(forest), X_RAW[:10], encoder=enc_model)


# -- the command line -------------------------------------------------------------------


def test_convert_with_an_encoder_then_predict(hyperboloid, tmp_path):
    import pickle

    from _cli import assert_usage_error, cli

    enc, enc_model, forest = hyperboloid
    (tmp_path / "forest.pkl").write_bytes(pickle.dumps(forest))
    onnx.save(enc_model, tmp_path / "encoder.onnx")
    np.save(tmp_path / "raw.npy", X_RAW[:300])
    out = tmp_path / "composed.onnx"
    code, stdout, err = cli(
        "convert", tmp_path / "forest.pkl", "--encoder", tmp_path / "encoder.onnx",
        "--check", tmp_path / "raw.npy", "-o", out,
    )  # fmt: skip
    assert code == 0, err
    assert "check on" in stdout and "OK" in stdout and "encoder in front" in stdout
    assert read_metadata(out)["encoder_sha256"] == encoder_sha256(tmp_path / "encoder.onnx")
    code, shown, err = cli("inspect", out)
    assert code == 0 and "output 'points' (float32) gives the points" in shown, err
    code, _, err = cli("predict", out, tmp_path / "raw.npy", "-o", tmp_path / "p.csv")
    assert code == 0, err
    labels = np.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)[:, 0]
    want = forest.predict(run(enc_model, X_RAW[:300])["points"].astype(np.float64))
    np.testing.assert_array_equal(labels, want)

    two = tmp_path / "two.onnx"
    onnx.save(enc.onnx(extra_outputs=True), two)
    code, _, err = cli(
        "convert", tmp_path / "forest.pkl", "--encoder", two, "-o", tmp_path / "t.onnx"
    )
    assert_usage_error(code, err, match="has 2 outputs")
    assert not (tmp_path / "t.onnx").exists()
    code, _, err = cli(
        "convert", tmp_path / "forest.pkl", "--encoder", two, "--encoder-output", "points",
        "-o", tmp_path / "t.onnx",
    )  # fmt: skip
    assert code == 0, err
    np.save(tmp_path / "narrow.npy", X_RAW[:10, :4])
    code, _, err = cli(
        "convert", tmp_path / "forest.pkl", "--encoder", tmp_path / "encoder.onnx",
        "--check", tmp_path / "narrow.npy", "-o", tmp_path / "n.onnx",
    )  # fmt: skip
    assert_usage_error(code, err, match="the graph's encoder takes 5")

    wrong = tmp_path / "wrong.onnx"  # hyperboloid points of radius 2 for a K = -1 model
    onnx.save(Encoder(5, 16, 3, seed=1, scale=2.0, curvature=-0.25).onnx(), wrong)
    bad = tmp_path / "bad.onnx"
    save_onnx(compose(wrong, forest), bad)
    code, _, err = cli("predict", bad, tmp_path / "raw.npy", "-o", tmp_path / "q.csv")
    assert_usage_error(code, err, match="300 row(s) give encoder outputs off the model's manifold")
    assert not (tmp_path / "q.csv").exists()


def test_an_encoder_whose_output_is_its_input(hyperboloid):
    """A graph passing its input through (output named as the input) composes and verifies."""
    _, enc_model, forest = hyperboloid
    value = helper.make_tensor_value_info("p", TensorProto.FLOAT, ["N", 4])
    passing = helper.make_model(
        helper.make_graph([], "pass", [value], [value]), opset_imports=[helper.make_opsetid("", 18)]
    )
    composed = compose(passing, forest)
    points = run(enc_model, X_RAW[:300])["points"]
    np.testing.assert_array_equal(
        run(composed, points)["label"], forest.predict(points.astype(np.float64))
    )
    assert verify(forest, composed, points).ok
