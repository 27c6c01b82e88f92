"""A graph's metadata read back as one typed record, for every model kind.

`read_metadata` returns a frozen `GraphMetadata`: the kind of model the
graph evaluates, whether an encoder is composed in front, and the counts
that apply to that kind (trees and nodes for trees; hidden layers and
regions for networks), never a count that does not apply. Files written
before a key existed still read.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import onnx
import pytest
from _cli import cli
from _data import labels, points
from onnx import TensorProto, helper
from sklearn.exceptions import ConvergenceWarning

import hyp2onnx as h
from hyp2onnx.export import GraphMetadata, read_metadata


@pytest.fixture(scope="module")
def data():
    X, k = points(300, 2, seed=5, max_radius=2.0)
    return X, labels(k, 3, seed=5)


@pytest.fixture(scope="module")
def mlp(data):
    X, y = data
    model = h.HyperbolicMLPClassifier(hidden_layer_sizes=(6, 5), max_iter=40, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def _forest(data):
    X, y = data
    return h.HyperbolicRandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y)


def _with_prop(graph: onnx.ModelProto, key: str, value: str | None) -> onnx.ModelProto:
    """A copy of ``graph`` with hyp2onnx's ``key`` set to ``value`` (None: removed)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(graph)
    kept = [p for p in copy.metadata_props if p.key != "hyp2onnx." + key]
    del copy.metadata_props[:]
    copy.metadata_props.extend(kept)
    if value is not None:
        prop = copy.metadata_props.add()
        prop.key, prop.value = "hyp2onnx." + key, value
    return copy


def test_trees_record_their_counts(data):
    forest = _forest(data)
    meta = read_metadata(h.to_onnx(forest))
    assert isinstance(meta, GraphMetadata)
    assert meta.kind == "trees" and not meta.is_composed
    assert meta.n_trees == 3 and meta.n_nodes == forest.to_ir().ensemble.n_nodes
    assert meta.hidden_layer_sizes is None and meta.n_regions is None
    assert meta.estimator_class == "HyperbolicRandomForestClassifier"
    assert meta.n_features_in == 3 and meta.classes == [0, 1, 2]
    assert meta["n_trees"] == 3 and "value_bound" in meta  # every key reads by name too
    with pytest.raises(dataclasses.FrozenInstanceError):
        meta.n_trees = 4  # type: ignore[misc]


def test_a_network_has_no_trees(mlp, data):
    meta = read_metadata(h.to_onnx(mlp))
    assert meta.kind == "network" and not meta.is_composed
    assert meta.hidden_layer_sizes == [6, 5]
    assert meta.n_trees is None and meta.n_nodes is None and meta.n_regions is None
    assert "n_trees" not in meta
    tree = h.region_tree(mlp, data[0][:100])
    meta = read_metadata(h.to_onnx(tree))
    assert meta.kind == "region_tree" and meta.n_regions == tree.tree_.n_regions
    assert meta.n_trees is None and meta.hidden_layer_sizes == [6, 5]


def test_convert_says_what_a_network_holds(mlp, tmp_path):
    import pickle

    (tmp_path / "mlp.pkl").write_bytes(pickle.dumps(mlp))
    code, out, err = cli("convert", tmp_path / "mlp.pkl", "-o", tmp_path / "mlp.onnx")
    assert code == 0, err
    said = out + err
    assert "ReLU network, hidden layers [6, 5]" in said and "tree" not in said, said


def _identity_encoder() -> onnx.ModelProto:
    """An encoder that passes hyperboloid points through: the smallest composable one."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["E"], ["points"])],
        "identity",
        [helper.make_tensor_value_info("E", TensorProto.DOUBLE, ["N", 3])],
        [helper.make_tensor_value_info("points", TensorProto.DOUBLE, ["N", 3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_composed_graph_says_so(data):
    composed = h.compose(_identity_encoder(), _forest(data))
    meta = read_metadata(composed)
    assert meta.is_composed and meta.kind == "trees" and meta.n_trees == 3
    assert h.export.is_composed(meta)


def test_older_files_read(mlp, data):
    """A network written with the fake tree count of older versions reads without it; a
    tree graph from before ``n_nodes`` reads it as None; a missing required key is a
    ValueError naming it."""
    network = _with_prop(h.to_onnx(mlp), "n_trees", "1")
    meta = read_metadata(network)
    assert meta.kind == "network" and meta.n_trees is None and "n_trees" not in meta
    trees = _with_prop(h.to_onnx(_forest(data)), "n_nodes", None)
    assert read_metadata(trees).n_nodes is None and read_metadata(trees).n_trees == 3
    broken = _with_prop(trees, "n_features_in", None)
    with pytest.raises(ValueError, match="n_features_in"):
        read_metadata(broken)


def test_inspect_json_keeps_the_keys(data, tmp_path):
    path = tmp_path / "forest.onnx"
    h.save_onnx(_forest(data), path)
    code, out, err = cli("inspect", path, "--json")
    assert code == 0, err
    import json

    meta = json.loads(out)["hyp2onnx"]
    assert meta["n_trees"] == 3 and meta["encoding"] == "fast" and "kind" not in meta


def test_a_scorer_describes_itself_as_a_graph_would(data):
    """`CompiledScorer.metadata` parses what a graph would carry through the same record."""
    pytest.importorskip("lleaves")
    pytest.importorskip("lightgbm")
    X, y = data
    model = h.HyperbolicLGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1).fit(X, y)
    from hyp2onnx.export.compiled import compile_model_lleaves

    mine = compile_model_lleaves(model).metadata()
    graph = read_metadata(h.to_onnx(model, encoding="exact"))
    for key in ("n_trees", "n_features_in", "classes", "curvature", "estimator_class"):
        assert mine[key] == graph[key]
    assert mine.kind == "trees" and np.isfinite(mine.curvature)
