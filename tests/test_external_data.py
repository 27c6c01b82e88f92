"""Graphs written with external data (``.onnx`` plus ``.onnx.data``).

Graphs over 2 GiB are written so automatically; building one takes minutes
and gigabytes (``benchmarks/bench_export.py --large`` measures it), so the
tests force the path on small models and check that onnxruntime reads the
pair back to the very same outputs, that the tree operator's tensors move to
the data file, and that a failure leaves neither file.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _data import all_nodes, labels, points

import hyp2onnx as h
from hyp2onnx.cli import main
from hyp2onnx.emit import strategy
from hyp2onnx.export import external_data_path, needs_external_data, save_onnx


@pytest.fixture(scope="module")
def forest() -> tuple[h.HyperbolicRandomForestClassifier, np.ndarray]:
    X, k = points(3000, 4, seed=3)
    model = h.HyperbolicRandomForestClassifier(n_estimators=12, max_depth=7, random_state=0)
    return model.fit(X, labels(k, 5)), X.astype(np.float32)


def _outputs(source: bytes | str, X: np.ndarray) -> list[np.ndarray]:
    session = ort.InferenceSession(source, providers=["CPUExecutionProvider"])
    return session.run(None, {"X": X})


def _external_tensors(path: Path) -> list[str]:
    model = onnx.load(str(path), load_external_data=False)
    found = [
        t.name for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
    ]
    for node in all_nodes(model.graph):
        found += [
            f"{node.name}.{a.name}"
            for a in node.attribute
            if a.type == onnx.AttributeProto.TENSOR
            and a.t.data_location == onnx.TensorProto.EXTERNAL
        ]
    return found


def test_forced_external_data_gives_the_same_outputs(forest, tmp_path: Path) -> None:
    model, X = forest
    onx = h.to_onnx(model)
    before = onx.SerializeToString()
    path = tmp_path / "forest.onnx"
    save_onnx(onx, path, external_data=True)
    assert onx.SerializeToString() == before  # the in-memory model is left as it was
    data = external_data_path(path)
    assert data.name == "forest.onnx.data" and data.stat().st_size > 1024
    assert "trees/leaf_values" in _external_tensors(path)
    assert path.stat().st_size < len(before) - 1024
    onnx.checker.check_model(str(path), full_check=True)
    for ours, reference in zip(_outputs(str(path), X), _outputs(before, X), strict=True):
        np.testing.assert_array_equal(ours, reference)
    assert h.read_metadata(path)["n_trees"] == 12


def test_opset5_tree_attributes_move_to_the_data_file(forest, tmp_path: Path, monkeypatch) -> None:
    """Past LEGACY_MAX_NODES the exact encoding uses TreeEnsemble, whose tensors move out."""
    model, X = forest
    reference = h.to_onnx(model, encoding="exact")
    monkeypatch.setattr(strategy, "LEGACY_MAX_NODES", 10)
    onx = h.to_onnx(model, encoding="exact")
    assert {n.op_type for n in all_nodes(onx.graph)} >= {"TreeEnsemble"}
    path = tmp_path / "big.onnx"
    save_onnx(onx, path, external_data=True)
    moved = _external_tensors(path)
    assert "trees/TreeEnsemble.nodes_splits" in moved and "trees/TreeEnsemble.leaf_weights" in moved
    for ours, theirs in zip(
        _outputs(str(path), X), _outputs(reference.SerializeToString(), X), strict=True
    ):
        np.testing.assert_array_equal(ours, theirs)


def test_small_graphs_stay_in_one_file(forest, tmp_path: Path) -> None:
    model, _ = forest
    onx = h.to_onnx(model)
    assert not needs_external_data(onx)
    path = tmp_path / "forest.onnx"
    save_onnx(onx, path)
    assert path.exists() and not external_data_path(path).exists()


def test_no_overwrite_refuses_when_the_data_file_exists(forest, tmp_path: Path) -> None:
    model, _ = forest
    path = tmp_path / "forest.onnx"
    external_data_path(path).write_bytes(b"keep")
    with pytest.raises(FileExistsError, match="forest.onnx.data"):
        save_onnx(h.to_onnx(model), path, overwrite=False, external_data=True)
    assert not path.exists() and external_data_path(path).read_bytes() == b"keep"


def test_failure_leaves_neither_file(forest, tmp_path: Path, monkeypatch) -> None:
    model, _ = forest
    onx = h.to_onnx(model)
    before = onx.SerializeToString()
    path = tmp_path / "forest.onnx"

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(onnx.ModelProto, "SerializeToString", broken)
    with pytest.raises(OSError, match="disk full"):
        save_onnx(onx, path, external_data=True)
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert onx.SerializeToString() == before


def test_cli_writes_external_data_on_request(forest, tmp_path: Path, capsys) -> None:
    model, X = forest
    with open(tmp_path / "forest.pkl", "wb") as f:
        pickle.dump(model, f)
    out = tmp_path / "forest.onnx"
    code = main(["convert", str(tmp_path / "forest.pkl"), "-o", str(out), "--external-data"])
    assert code == 0
    assert "forest.onnx.data" in capsys.readouterr().out
    assert external_data_path(out).stat().st_size > 1024
    for ours, reference in zip(
        _outputs(str(out), X), _outputs(h.to_onnx(model).SerializeToString(), X), strict=True
    ):
        np.testing.assert_array_equal(ours, reference)
