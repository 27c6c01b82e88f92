"""Edge packaging: onnxruntime's .ort format, its operator list, and graphs without row blocks.

The .ort file is loaded in onnxruntime and compared with the .onnx graph
(bit for bit) and with the Python model (labels equal, values within
verify's tolerance), for every encoding, on random, threshold-adjacent and
far rows, batches above the 1024-row block size included.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _data import labels, points, targets
from test_export import adversarial_klein

import hyp2onnx as h
from hyp2onnx import edge, geometry
from hyp2onnx.cli import main
from hyp2onnx.export import read_metadata, to_onnx
from hyp2onnx.verification import default_tolerance, run_onnx

ENCODINGS = ("exact", "compat", "standard")
ML = "ai.onnx.ml"


@pytest.fixture(scope="module")
def models() -> dict[str, object]:
    X, k = points(600, 3, seed=41)
    return {
        "forest_clf": h.HyperbolicRandomForestClassifier(
            n_estimators=5, max_depth=5, random_state=0
        ).fit(X, labels(k, 3)),
        "forest_reg": h.HyperbolicRandomForestRegressor(
            n_estimators=4, max_depth=5, random_state=0
        ).fit(X, targets(k)),
        "lgbm_binary": h.HyperbolicLGBMClassifier(n_estimators=5, verbose=-1, n_jobs=1).fit(
            X, labels(k, 2)
        ),
    }


@pytest.fixture(scope="module")
def rows(models) -> dict[str, np.ndarray]:
    """Per model: random rows, every threshold and its neighbours, far rows; > 1024 in all."""
    out = {}
    for name, model in models.items():
        X, k = points(900, 3, seed=42)
        out[name] = np.concatenate(
            [
                X,
                geometry.from_klein(adversarial_klein(model, k), "hyperboloid"),
                points(200, 3, seed=43, max_radius=12.0)[0],
            ]
        )
    return out


def _session(data: bytes | str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def _run(session: ort.InferenceSession, X: np.ndarray) -> dict[str, np.ndarray]:
    dtype = np.float64 if session.get_inputs()[0].type == "tensor(double)" else np.float32
    values = session.run(None, {session.get_inputs()[0].name: X.astype(dtype)})
    return {o.name: v for o, v in zip(session.get_outputs(), values, strict=True)}


def _python(model, X: np.ndarray) -> dict[str, np.ndarray]:
    if hasattr(model, "predict_proba"):
        return {"label": model.predict(X), "probabilities": model.predict_proba(X)}
    return {"variable": model.predict(X).reshape(len(X), -1)}


def _graph_ops(graph: onnx.GraphProto) -> set[tuple[str, str]]:
    ops = set()
    for node in graph.node:
        ops.add((node.domain or "ai.onnx", node.op_type))
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                ops |= _graph_ops(attr.g)
    return ops


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("name", ["forest_clf", "forest_reg", "lgbm_binary"])
def test_ort_file_agrees(models, rows, name, encoding, dtype, tmp_path):
    model, X = models[name], rows[name]
    onx = to_onnx(model, encoding=encoding, dtype=dtype)
    ort_path, config_path = edge.to_ort(onx, tmp_path / "m.ort")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.ort", "m.required_operators.config"]

    got = _run(_session(str(ort_path)), X)
    same_graph = run_onnx(onx, X, threads=1)
    for output, value in same_graph.items():  # the .ort file is the .onnx graph, bit for bit
        np.testing.assert_array_equal(got[output], value)
    operators = edge.required_operators(config_path.read_text())
    assert (ML in operators) == (encoding != "standard")
    if encoding == "compat":
        assert operators[ML] == {1: ["TreeEnsembleRegressor"]}

    want = _python(model, X.astype(dtype))
    atol = default_tolerance(read_metadata(onx))
    if encoding == "compat" and name.startswith("lgbm"):
        # LightGBM compares float64 Klein coordinates; the compat graph rounds them
        # to float32 (docs/export.md), so it is the model on those rounded rows.
        k32 = model.to_klein(X.astype(dtype)).astype(np.float32).astype(np.float64)
        index = model.split_index_  # the native model reads split indices far out
        z = k32 if index is None else index.transform(k32)
        want = {
            "label": model.estimator_.predict(z),
            "probabilities": model.estimator_.predict_proba(z),
        }
    for output, value in want.items():
        if output == "label":
            np.testing.assert_array_equal(got[output], value)
        else:
            np.testing.assert_allclose(got[output], value, rtol=0, atol=atol)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_config_lists_the_optimized_graphs_operators(models, encoding, tmp_path):
    """The config names exactly the operators of the graph the .ort file holds."""
    onx = to_onnx(models["forest_clf"], encoding=encoding)
    package = edge.ort_package(onx, name="forest")
    assert "# - forest.ort" in package.config and "hyp2onnx-ort-" not in package.config
    listed = {
        (domain, op)
        for domain, by_opset in package.operators.items()
        for ops in by_opset.values()
        for op in ops
    }
    options = ort.SessionOptions()  # what the converter does: level "all", no NCHWc layouts
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(
        onx.SerializeToString(),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=["NchwcTransformer"],
    )
    optimized = onnx.load(str(tmp_path / "optimized.onnx"))
    assert listed == _graph_ops(optimized.graph)
    assert listed <= _graph_ops(onx.graph)
    tree_ops = {op for domain, op in listed if domain == ML}
    assert (
        tree_ops
        == {
            "exact": {"TreeEnsembleRegressor"},
            "compat": {"TreeEnsembleRegressor"},
            "standard": set(),
        }[encoding]
    )


def test_to_ort_names_and_overwrite(models, tmp_path):
    onx = to_onnx(models["forest_reg"])
    h.save_onnx(onx, tmp_path / "forest.onnx")
    out = tmp_path / "out"
    out.mkdir()
    ort_path, config_path = edge.to_ort(tmp_path / "forest.onnx", out)
    assert (ort_path, config_path) == (out / "forest.ort", out / "forest.required_operators.config")
    before = ort_path.read_bytes()
    with pytest.raises(FileExistsError):
        edge.to_ort(onx, ort_path)
    config_path.unlink()
    with pytest.raises(FileExistsError):  # either file existing refuses both
        edge.to_ort(onx, ort_path)
    assert not config_path.exists() and ort_path.read_bytes() == before
    edge.to_ort(onx, ort_path, overwrite=True)
    assert config_path.exists()
    with pytest.raises(ValueError, match="ort file name"):
        edge.to_ort(onx, tmp_path / "forest.onnx2")


def test_to_ort_leaves_nothing_on_failure(models, tmp_path, monkeypatch):
    onx = to_onnx(models["forest_reg"])
    broken = onnx.ModelProto()
    broken.CopyFrom(onx)
    broken.graph.node[0].op_type = "NoSuchOperator"
    with pytest.raises(ValueError, match="could not convert"):
        edge.to_ort(broken, tmp_path / "m.ort")
    assert list(tmp_path.iterdir()) == []

    real = edge.atomic_write
    calls = []

    def failing_second(path, **kwargs):  # the config's write fails: the .ort must go too
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        return real(path, **kwargs)

    monkeypatch.setattr(edge, "atomic_write", failing_second)
    with pytest.raises(OSError, match="disk full"):
        edge.to_ort(onx, tmp_path / "m.ort")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_without_row_blocks_same_outputs(models, rows, encoding):
    model, X = models["forest_clf"], rows["forest_clf"]
    assert len(X) > 1024  # the blocked graph takes its Loop branch
    onx = to_onnx(model, encoding=encoding)
    flat = edge.without_row_blocks(onx)
    assert not edge.has_row_blocks(flat)
    ops = {op for _, op in _graph_ops(flat.graph)}
    assert not ops & {"Loop", "If", "SplitToSequence", "SequenceInsert", "ConcatFromSequence"}
    assert edge.has_row_blocks(onx) == (encoding == "exact")  # standard: all rows at once
    got, want = run_onnx(flat, X), run_onnx(onx, X)
    for output, value in want.items():
        np.testing.assert_array_equal(got[output], value)
    assert edge.without_row_blocks(flat).SerializeToString() == flat.SerializeToString()
    assert onx.SerializeToString() == to_onnx(model, encoding=encoding).SerializeToString()
    assert read_metadata(flat)["encoding"] == encoding


def test_without_row_blocks_inlines_the_nested_loops_of_a_large_model(models, rows, monkeypatch):
    """Past SHORT_PATH_MAX_NODES the exact graph has no If: the operator's Loop holds
    the sums' Loop. Both are inlined, and the outputs stay the same bit for bit."""
    from hyp2onnx.emit import strategy, trees

    monkeypatch.setattr(strategy, "SHORT_PATH_MAX_NODES", 0)
    monkeypatch.setattr(trees, "OPERATOR_BLOCK_ROWS", 2048)
    model, X = models["forest_clf"], rows["forest_clf"]
    onx = to_onnx(model, encoding="exact")
    assert {op for _, op in _graph_ops(onx.graph)} >= {"Loop"} and edge.has_row_blocks(onx)
    flat = edge.without_row_blocks(onx)
    assert not {op for _, op in _graph_ops(flat.graph)} & {"Loop", "If", "SplitToSequence"}
    got, want = run_onnx(flat, X), run_onnx(onx, X)
    for output, value in want.items():
        np.testing.assert_array_equal(got[output], value)


def _cli_model(tmp_path: Path, models) -> Path:
    path = tmp_path / "forest.pkl"
    with path.open("wb") as f:
        pickle.dump(models["forest_clf"], f)
    return path


def test_cli_convert_ort(models, rows, tmp_path, capsys):
    model_path = _cli_model(tmp_path, models)
    np.save(tmp_path / "X.npy", rows["forest_clf"][:200])
    args = ["convert", str(model_path), "--encoding", "standard", "--ort"]
    assert main([*args, "--check", str(tmp_path / "X.npy")]) == 0
    assert "wrote" in capsys.readouterr().out
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [
        "X.npy",
        "forest.onnx",
        "forest.ort",
        "forest.pkl",
        "forest.required_operators.config",
    ]
    got = _run(_session(str(tmp_path / "forest.ort")), rows["forest_clf"])
    want = _python(models["forest_clf"], rows["forest_clf"].astype(np.float32))
    np.testing.assert_array_equal(got["label"], want["label"])
    np.testing.assert_array_equal(got["probabilities"], want["probabilities"])
    assert ML not in (tmp_path / "forest.required_operators.config").read_text()

    # an existing .ort file: refused without --force, and no file is touched
    (tmp_path / "forest.onnx").unlink()
    (tmp_path / "forest.ort").write_bytes(b"keep")
    assert main(args) == 2
    assert "forest.ort: already exists" in capsys.readouterr().err
    assert not (tmp_path / "forest.onnx").exists()
    assert (tmp_path / "forest.ort").read_bytes() == b"keep"
    assert main([*args, "--force", "--no-row-blocks"]) == 0
    flat = onnx.load(str(tmp_path / "forest.onnx"))
    assert not edge.has_row_blocks(flat)
    assert (tmp_path / "forest.ort").read_bytes() != b"keep"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("kind", ["rotation", "isolation"])
def test_ort_file_of_the_paper_future_work_models(kind, tmp_path):
    """Rotation forests (frame chain) and isolation forests (tree walks) package for the edge:
    the .ort file is the .onnx graph bit for bit, and its labels are the Python model's."""
    X, k = points(700, 3, seed=44)
    if kind == "rotation":
        model = h.HyperbolicRotationForestClassifier(n_estimators=6, max_depth=6, random_state=0)
        model.fit(X, labels(k, 3))
    else:
        model = h.HyperbolicIsolationForest(n_estimators=10, random_state=0).fit(X)
    rows = np.concatenate([X, points(500, 3, seed=45, max_radius=12.0)[0]])  # > 1024 rows
    onx = to_onnx(model)
    ort_path, _ = edge.to_ort(onx, tmp_path / "m.ort")
    got = _run(_session(str(ort_path)), rows)
    for output, value in run_onnx(onx, rows, threads=1).items():
        np.testing.assert_array_equal(got[output], value)
    dtype = np.float64 if onx.graph.input[0].type.tensor_type.elem_type == 11 else np.float32
    np.testing.assert_array_equal(got["label"], model.predict(rows.astype(dtype)))
