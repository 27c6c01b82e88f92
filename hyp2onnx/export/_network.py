"""Compile a hyperbolic MLP, or its region tree, into one ONNX graph.

The graph takes raw points ``X`` [N, D] in the model's input geometry,
projects them to float64 Klein coordinates as the Python model does
(`hyp2onnx.emit.projection`), evaluates the network
(`hyp2onnx.emit.network`) and returns ``label`` + ``probabilities``
(classifiers) or ``variable`` (regressors); a region tree adds ``covered``
(bool: the tree holds the row's region; else the network scored it) and
``region`` (int64, -1 where uncovered). Only standard ONNX operators.

Encodings: a network's ``"fast"`` (default) is the ``Gemm`` graph with its
near-tie guard (labels exact, values within ``value_bound``), ``"exact"``
the fixed-order chain (bit for bit); a region tree has one graph, which
reproduces its Python model (labels exact; values bit for bit but for the
runtime's ``exp`` in the link), recorded as ``"exact"``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Any

import numpy as np
import onnx
from onnx import helper

from .._version import __version__ as _version
from ..emit import ENCODINGS
from ..emit._graph import GraphBuilder
from ..emit.frames import frames_map
from ..emit.network import (
    emit_chain,
    emit_guarded,
    emit_klein,
    emit_klein_with_ones,
    emit_network_outputs,
    emit_region_tree,
    network_head,
)
from ..errors import warn_user
from ..ir import InputSpace
from ..ir.network import Network, error_bounds, tie_margin
from ._metadata import network_metadata
from ._model_file import wrap_model

__all__ = ["NETWORK_ENCODINGS", "compile_network", "is_network", "network_value_bound"]

#: The encodings a network takes, and what each builds: the registry's entries
#: with a network graph (`hyp2onnx.emit.Encoding.networks`).
NETWORK_ENCODINGS = {e.name: e.networks for e in ENCODINGS.values() if e.networks is not None}


#: The modules of the classes exported here (`hyp2onnx.estimators._mlp`, ``._regions``).
_NETWORK_MODULES = ("hyp2onnx.estimators._mlp", "hyp2onnx.estimators._regions")


def is_network(model: Any) -> bool:
    """Whether ``model`` is a hyperbolic MLP or a region tree (exported here).

    Decided without importing the estimators: they import scikit-learn, which
    the scoring commands (inspect, predict), reaching this module through the
    export package, must not load (tests/test_layout.py). A class defined in
    their modules is one of them only if its module is already imported.
    """
    for name in _NETWORK_MODULES:
        module = sys.modules.get(name)
        if module is None:
            continue
        classes = tuple(
            getattr(module, n) for n in ("_HyperbolicMLP", "RegionTree") if hasattr(module, n)
        )
        if isinstance(model, classes):
            return True
    return False


def network_value_bound(network: Network) -> float:
    """Largest difference between a ``Gemm`` graph's logit and the fixed-order one.

    Both lie within `hyp2onnx.ir.network.error_bounds` of the exact
    value, whatever their order: twice that bound, largest over the outputs.
    """
    return float(2.0 * error_bounds(network)[0][-1].max(initial=0.0))


def compile_network(
    model: Any,
    *,
    dtype: str | None,
    encoding: str,
    opset: int,
    name: str | None = None,
    class_indices: bool = False,
    **stated: Any,
) -> onnx.ModelProto:
    """Emit, check and return the ONNX model of a fitted hyperbolic MLP or region tree.

    ``class_indices``: a classifier's labels are ``0 .. n-1`` instead of its
    classes (skl2onnx's ``nocl`` option).
    """
    # Imported here: the estimators import scikit-learn, which importing the export
    # package must not load (see is_network).
    from ..estimators._regions import RegionTree

    tree = isinstance(model, RegionTree)
    dtype = _check_request(model, dtype, encoding, stated)
    network = model.tree_.network if tree else model.network()
    region_tree = model.tree_ if tree else None
    if class_indices and network.classes is not None:
        network = replace(network, classes=np.arange(len(network.classes)))
        region_tree = replace(model.tree_, network=network) if tree else None
    space = InputSpace(
        geometry=model.input_geometry,
        curvature=float(model.curvature),
        timelike_dim=int(model.timelike_dim),
        n_input_features=int(model.n_features_in_),
    )
    frames = (model.network_ if tree else model).frames()
    builder = GraphBuilder(opset)
    builder.reserve("X", "label", "probabilities", "variable", "covered", "region")
    whole_rows = not tree and encoding == "fast" and frames is None
    k, ones_column = _klein_rows(builder, space, dtype, whole_rows=whole_rows)
    if frames is not None:  # a centred network reads the Klein coordinates of L x
        k = frames_map(builder, "float64", frames)(builder, k)
    extra: dict[str, str] = {"hidden_layer_sizes": json.dumps(list(network.hidden_sizes))}
    if frames is not None:
        extra["centre"] = "centroid"
    head, outputs_extra, encoding = _emit_head(
        builder, k, network, region_tree, encoding, ones_column, extra
    )
    outputs = emit_network_outputs(builder, head, network) + outputs_extra
    estimator_class = "RegionTree" if tree else type(model).__name__
    graph = builder.points_graph(
        name or f"hyp2onnx_{estimator_class}", dtype, space.n_input_features, outputs
    )
    facts = {"estimator_class": estimator_class, "encoding": encoding, "input_dtype": dtype}
    return _finish(graph, opset, network, space, {**facts, **extra})


def _emit_head(
    builder: GraphBuilder,
    k: str,
    network: Any,
    region_tree: Any,
    encoding: str,
    ones_column: int | None,
    extra: dict[str, str],
) -> tuple[Any, list[helper.ValueInfoProto], str]:
    """The network's last layer (or the region tree's), its extra outputs and the encoding
    the graph records; the bounds it states go into ``extra``."""
    if region_tree is not None:
        head, _, _ = emit_region_tree(builder, k, region_tree)
        outputs_extra = [
            helper.make_tensor_value_info("covered", onnx.TensorProto.BOOL, ["N"]),
            helper.make_tensor_value_info("region", onnx.TensorProto.INT64, ["N"]),
        ]
        extra["network_bound"] = repr(region_tree.value_bound)
        extra["n_regions"] = str(region_tree.n_regions)
        return head, outputs_extra, "exact"
    if encoding == "exact":
        return network_head(builder, emit_chain(builder, k, network), network), [], encoding
    bound = network_value_bound(network)
    head = emit_guarded(builder, k, network, bound, ones_column=ones_column)
    extra["value_bound"] = repr(bound)
    extra["tie_margin"] = repr(tie_margin(network, bound))
    return head, [], encoding


def _klein_rows(
    builder: GraphBuilder, space: InputSpace, dtype: str, *, whole_rows: bool
) -> tuple[str, int | None]:
    """The Klein rows the network reads, and their column of ones if ``whole_rows`` asks for
    hyperboloid rows divided by ``x_0`` whole and the input allows it (`emit_klein_with_ones`)."""
    with_ones = emit_klein_with_ones(builder, "X", space, input_dtype=dtype) if whole_rows else None
    if with_ones is None:
        return emit_klein(builder, "X", space, input_dtype=dtype), None
    return with_ones


def _check_request(model: Any, dtype: str | None, encoding: str, stated: dict[str, Any]) -> str:
    """The input dtype to emit (float64 by default), after refusing what cannot be exported."""
    from sklearn.utils.validation import check_is_fitted  # see compile_network

    if any(v is not None for v in stated.values()):
        raise ValueError(
            f"{type(model).__name__} records its own geometry: leave out input_geometry, "
            "curvature and timelike_dim."
        )
    check_is_fitted(model)  # a region tree too: a scikit-learn estimator, fitted by fit
    if encoding not in NETWORK_ENCODINGS:
        raise ValueError(
            f"a network's encoding must be one of {tuple(NETWORK_ENCODINGS)}, got {encoding!r}; "
            "both use standard ONNX operators only (docs/compatibility.md lists the "
            "runtimes that run each)."
        )
    if dtype == "float32":
        warn_user(
            "float32 input rounds the points before they are projected: near a boundary "
            "between the network's regions, or a tie, labels will differ from the model's "
            "on float64 input. Use dtype='float64' (the default here)."
        )
    return dtype or "float64"


def _finish(
    graph: onnx.GraphProto,
    opset: int,
    network: Network,
    space: InputSpace,
    facts: dict[str, str],
) -> onnx.ModelProto:
    """The checked model: opset, doc string and hyp2onnx's metadata (`._metadata`)."""
    doc_string = (
        f"{facts['estimator_class']} (ReLU network on Klein coordinates, hidden layers "
        f"{list(network.hidden_sizes)}) exported by hyp2onnx {_version}. Input X: points "
        f"in the {space.geometry} model of hyperbolic space of curvature "
        f"{space.curvature:g}, {space.n_input_features} columns. Encoding: "
        f"{facts['encoding']}."
    )
    opsets = [helper.make_opsetid("", opset)]
    metadata = network_metadata(network, space, facts)
    return wrap_model(graph, opsets=opsets, doc_string=doc_string, metadata=metadata)
