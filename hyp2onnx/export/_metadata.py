"""A graph's hyp2onnx metadata: written here for every model kind, read back as one record.

Every key a graph carries is named in this module: the trees' keys
(`tree_metadata`), a network's and its region tree's (`network_metadata`),
and the encoder's keys that `hyp2onnx.export.composition` adds
(`composed_metadata`); `write_metadata` puts them on the model under
hyp2onnx's prefix. `read_metadata` returns a frozen `GraphMetadata`: the
model kind, whether an encoder is composed in front, and the counts that
apply to that kind (trees and nodes, or hidden layers and regions). Files
written before a key existed still read: a missing key reads as None.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import onnx

from .._version import __version__ as _version
from ..blocks import Block, blocks_from_json, blocks_to_json
from ..errors import DamagedMetadataError
from ..ir import InputSpace, Model, Task
from ..ir.network import Network

__all__ = [
    "GraphKind",
    "GraphMetadata",
    "composed_metadata",
    "network_metadata",
    "read_metadata",
    "tree_metadata",
    "write_metadata",
]

META_PREFIX = "hyp2onnx."
#: What a graph evaluates: an ensemble of trees, a ReLU network, or a network's region tree.
GraphKind = Literal["trees", "network", "region_tree"]
_FLOAT_KEYS = ("curvature", "value_bound", "tie_margin", "short_batch_value_bound")
_INT_KEYS = ("timelike_dim", "n_features_in", "n_trees", "n_nodes", "n_regions", "short_batch_rows")


def _space_entries(space: InputSpace) -> dict[str, str]:
    return {
        "input_geometry": space.geometry,
        "curvature": repr(float(space.curvature)),
        "timelike_dim": str(space.timelike_dim),
        "n_features_in": str(space.n_input_features),
    }


def _classes(classes: Any) -> str:
    return json.dumps(None if classes is None else np.asarray(classes).tolist())


def tree_metadata(
    ir_model: Model, encoding: str, dtype: str, extra: dict[str, str]
) -> dict[str, str]:
    """The metadata of a tree model's graph, ``extra`` (the encoding's bounds) last.

    ``value_bound`` (fast encoding): how far any raw score may be from the exact
    one; ``tie_margin``: rows whose top two probabilities are closer get exact
    scores, in graphs with a near-tie guard (classifiers whose sums no order
    changes have none: ``hyp2onnx.emit.fast.labels_need_guard``); ``short_batch_rows``: batches of up to that many rows take the exact
    scores instead, within ``short_batch_value_bound`` (0).
    """
    space, ensemble = ir_model.space, ir_model.ensemble
    entries = _space_entries(space) | {
        "backend": ir_model.backend,
        "estimator_class": ir_model.estimator_class,
        "task": ir_model.task.value,
        "classes": _classes(ensemble.classes),
        "n_trees": str(ensemble.n_trees),
        "n_nodes": str(ensemble.n_nodes),  # for `inspect`: walked trees have no tree operator
        "encoding": encoding,
        "input_dtype": dtype,
        # What the verification tolerance follows from (hyp2onnx.verification.default_tolerance).
        "sum_dtype": ensemble.sum_dtype,
        "post_transform": ensemble.post_transform,
        "version": _version,
    }
    if space.blocks is not None:
        entries["blocks"] = blocks_to_json(space.blocks)
    entries.update({k: v for k, v in ir_model.metadata.items() if k not in entries})
    entries.update(extra)
    return entries


def network_metadata(network: Network, space: InputSpace, facts: dict[str, str]) -> dict[str, str]:
    """The metadata of a network's (or region tree's) graph; ``facts``: its class, encoding,
    input dtype, hidden layers and bounds. No tree count: a network has no trees."""
    task = Task.CLASSIFICATION if network.is_classifier else Task.REGRESSION
    return _space_entries(space) | {
        "backend": "sklearn-mlp",
        "task": str(task),
        "classes": _classes(network.classes),
        "sum_dtype": "float64",
        "post_transform": network.output,
        "version": _version,
        **facts,
    }


def composed_metadata(
    model: GraphMetadata,
    *,
    sha256: str,
    output: str,
    output_dtype: str,
    inputs: list[str],
    n_features_in: str,
    prefix: str,
    precision: str,
    manifold_rtol: float | None,
) -> dict[str, str]:
    """The keys `hyp2onnx.export.composition` adds to the model graph's: the encoder's sha256,
    the output that holds the points and their geometry, its inputs, the manifold check."""
    points = {k: model[k] for k in ("input_geometry", "curvature", "timelike_dim")}
    return {
        "encoder_sha256": sha256,
        "encoder_output": output,
        "encoder_output_dtype": output_dtype,
        "encoder_points": json.dumps(points | {"n_features_in": model.n_features_in}),
        "encoder_inputs": json.dumps(inputs),
        # columns of the (first) input, "" where the encoder leaves them open
        "encoder_n_features_in": n_features_in,
        "encoder_prefix": prefix,
        "encoder_precision": precision,
        "manifold_check": "none" if manifold_rtol is None else repr(manifold_rtol),
    }


def write_metadata(onnx_model: onnx.ModelProto, entries: Mapping[str, str]) -> None:
    """Add ``entries`` to ``onnx_model``'s metadata under hyp2onnx's prefix, in order."""
    for key, value in entries.items():
        prop = onnx_model.metadata_props.add()
        prop.key, prop.value = META_PREFIX + key, value


@dataclass(frozen=True, eq=False)
class GraphMetadata(Mapping[str, Any]):
    """A graph's hyp2onnx metadata, parsed (`read_metadata`).

    The fields every graph has, and the counts of its kind: ``n_trees`` and
    ``n_nodes`` for trees; ``hidden_layer_sizes`` (and ``n_regions`` for a
    region tree) for networks; the others are None. Every key, those of an
    encoding (``value_bound``, ``tie_margin``, ...) included, also reads by
    name: ``metadata["value_bound"]``, ``metadata.get("tie_margin")``.
    """

    kind: GraphKind
    is_composed: bool  #: an encoder is composed in front (`hyp2onnx.export.composition`)
    input_geometry: str
    curvature: float
    timelike_dim: int
    n_features_in: int
    backend: str
    estimator_class: str
    task: str
    classes: list[Any] | None
    encoding: str
    input_dtype: str
    blocks: tuple[Block, ...] | None
    n_trees: int | None
    n_nodes: int | None
    hidden_layer_sizes: list[int] | None
    n_regions: int | None
    doc_string: str
    entries: Mapping[str, Any] = field(repr=False)  #: every key, parsed

    @classmethod
    def parse(cls, raw: Mapping[str, str], doc_string: str = "") -> GraphMetadata:
        """The record of ``raw`` (the keys without hyp2onnx's prefix, as written)."""
        parsed: dict[str, Any] = dict(raw)
        for key in _FLOAT_KEYS:
            if key in raw:
                parsed[key] = float(raw[key])
        for key in _INT_KEYS:
            if key in raw:
                parsed[key] = int(raw[key])
        try:
            parsed["classes"] = json.loads(raw["classes"]) if "classes" in raw else None
            parsed["blocks"] = blocks_from_json(raw["blocks"]) if "blocks" in raw else None
            layers = json.loads(raw["hidden_layer_sizes"]) if "hidden_layer_sizes" in raw else None
        except RecursionError:
            raise DamagedMetadataError(
                "this ONNX model's hyp2onnx metadata (classes or blocks) is nested too deeply "
                "to read: the file is damaged or was not written by hyp2onnx"
            ) from None
        kind: GraphKind = "trees"
        if layers is not None:
            kind = "region_tree" if "n_regions" in raw else "network"
            parsed.pop("n_trees", None)  # older files wrote a network as one tree
        parsed["doc_string"] = doc_string
        return cls(
            kind=kind,
            is_composed="encoder_sha256" in raw,
            input_geometry=raw["input_geometry"],
            curvature=parsed["curvature"],
            timelike_dim=parsed["timelike_dim"],
            n_features_in=parsed["n_features_in"],
            backend=raw.get("backend", ""),
            estimator_class=raw.get("estimator_class", ""),
            task=raw.get("task", ""),
            classes=parsed["classes"],
            encoding=raw.get("encoding", ""),
            input_dtype=raw.get("input_dtype", "float64"),
            blocks=parsed["blocks"],
            n_trees=parsed.get("n_trees"),
            n_nodes=parsed.get("n_nodes") if kind == "trees" else None,
            hidden_layer_sizes=layers,
            n_regions=parsed.get("n_regions"),
            doc_string=doc_string,
            entries=MappingProxyType(parsed),
        )

    def __getitem__(self, key: str) -> Any:
        return self.entries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def to_dict(self) -> dict[str, Any]:
        """Every key and its parsed value, as a plain dict (``inspect --json``)."""
        return dict(self.entries)


def read_metadata(model_or_path: onnx.ModelProto | str | os.PathLike) -> GraphMetadata:
    """The hyp2onnx metadata of an exported model, parsed into a `GraphMetadata`.

    Raises `ValueError` if the model carries no hyp2onnx metadata.
    """
    onnx_model = (
        model_or_path
        if isinstance(model_or_path, onnx.ModelProto)
        else onnx.load(os.fspath(model_or_path), load_external_data=False)
    )
    raw = {
        p.key[len(META_PREFIX) :]: p.value
        for p in onnx_model.metadata_props
        if p.key.startswith(META_PREFIX)
    }
    if not raw:
        raise ValueError("this ONNX model has no hyp2onnx metadata (was it exported by hyp2onnx?)")
    try:
        return GraphMetadata.parse(raw, onnx_model.doc_string)
    except KeyError as exc:
        raise ValueError(
            f"this ONNX model's hyp2onnx metadata lacks {exc.args[0]!r}: the file is damaged "
            "or was not written by hyp2onnx"
        ) from None
