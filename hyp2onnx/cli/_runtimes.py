"""Which runtimes each kind of graph is known to run in, from ``runtimes.json``.

``runtimes.json`` (beside this module) is written by
``benchmarks/compat_table.py``, which runs every encoding in every runtime
it can install and also writes ``docs/compatibility.md`` from the same
results: the one source of truth. Only what that script ran is listed.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..export._metadata import GraphMetadata

__all__ = ["NETWORK_KINDS", "compatibility", "network_kind", "runtimes_for", "runtimes_for_kind"]

_RUNS = ("agrees", "runs")
#: Rows of the table of every model kind that hold networks' graphs (`network_kind`).
NETWORK_KINDS = ("MLP 4 classes", "MLP regressor", "MLP 4 classes, exact chain", "MLP region tree")


@lru_cache(maxsize=1)
def compatibility() -> dict[str, Any]:
    """The measured table: runtimes, graph variants and one result per pair."""
    text = resources.files(__package__).joinpath("runtimes.json").read_text(encoding="utf-8")
    return json.loads(text)


def _variant(
    data: dict[str, Any], encoding: str, *, row_blocks: bool, ort_format: bool, dtype: str
) -> str | None:
    """The measured variant for this graph: the same input type if measured, else float32."""
    fmt = "ort" if ort_format else "onnx"
    matches = [
        key
        for key, v in data["variants"].items()
        if v["encoding"] == encoding and v["row_blocks"] == row_blocks and v["format"] == fmt
    ]
    exact_type = [k for k in matches if data["variants"][k].get("dtype", "float32") == dtype]
    float32 = [k for k in matches if data["variants"][k].get("dtype", "float32") == "float32"]
    return (exact_type or float32 or [None])[0]


def _how_it_differs(data: dict[str, Any], variant: str, runtime: str) -> str:
    """How a runtime that runs ``variant`` with other outputs differs, from the table of every
    model kind: where its labels differ (at thresholds, at near ties: rows whose top two
    scores lie closest), and how far its values are off elsewhere."""
    cells = [
        per_variant[variant][runtime]
        for kind, per_variant in data.get("kinds", {}).items()
        if runtime in per_variant.get(variant, {}) and kind not in NETWORK_KINDS
    ]
    if not cells or any(c["status"] not in _RUNS for c in cells):
        return "outputs differ"
    ran = [c for c in cells if c["status"] == "runs"]
    away = [c[k] for c in ran for k in ("held-out", "far")]
    if any(r["labels_differ"] for r in away):
        return "outputs differ"
    where = [
        place
        for place, key in (("thresholds", "at thresholds"), ("near ties", "near ties"))
        if sum(c[key]["labels_differ"] for c in ran if key in c)
    ]
    worst = max((r["max_abs_diff"] for r in away if r["values_beyond"]), default=0.0)
    labels = f"labels differ at {' and '.join(where)} only" if where else "labels agree"
    return labels + (f"; values by up to {worst:.1g} elsewhere" if worst else "")


def _entry(data: dict[str, Any], variant: str, key: str, cell: dict[str, Any]) -> str:
    runtime = data["runtimes"][key]
    name = f"{runtime['name']} {runtime['version']}"
    if cell["status"] == "agrees":
        return name
    return f"{name} (runs; {_how_it_differs(data, variant, key)})"


def _running(data: dict[str, Any], variant: str) -> dict[str, str]:
    return {
        key: _entry(data, variant, key, cell)
        for key, cell in data["results"][variant].items()
        if cell["status"] in _RUNS
    }


def runtimes_for(
    encoding: str | None,
    *,
    row_blocks: bool = True,
    ort_format: bool = False,
    dtype: str = "float32",
) -> list[str]:
    """The runtimes a graph of ``encoding`` is known to run in, with versions.

    "agrees" runtimes are listed by name and version, those that run the
    graph with different outputs are marked so (docs/compatibility.md
    says how they differ). For a graph with row blocks, runtimes that run
    it only without them are named last; a graph without row blocks whose
    encoding was measured only with them gets that encoding's runtimes.
    Empty for an unknown encoding.
    """
    data = compatibility()
    variant = _variant(
        data, encoding or "", row_blocks=row_blocks, ort_format=ort_format, dtype=dtype
    )
    if variant is None and not row_blocks:  # runs at least where the blocked graph runs
        variant = _variant(
            data, encoding or "", row_blocks=True, ort_format=ort_format, dtype=dtype
        )
    if variant is None:
        return []
    running = _running(data, variant)
    out = list(running.values())
    if row_blocks and not ort_format:
        flat = _variant(data, encoding or "", row_blocks=False, ort_format=False, dtype=dtype)
        extra = [v for k, v in _running(data, flat).items() if k not in running] if flat else []
        if extra:
            out.append(f"without row blocks (convert --no-row-blocks) also: {', '.join(extra)}")
    return out


def network_kind(metadata: GraphMetadata) -> str | None:
    """The row of the table of every model kind that measured a network's graph like this
    one (None: not a network's graph). Networks have no encodings to tell apart there."""
    if metadata.kind == "trees":
        return None
    classifier, regressor, chain, region_tree = NETWORK_KINDS
    if metadata.kind == "region_tree":
        return region_tree
    if metadata.encoding == "exact":
        return chain
    return regressor if metadata.task == "regression" else classifier


def _cell_differences(cell: dict[str, Any], kind: str) -> str:
    rows = [cell[k] for k in ("held-out", "at thresholds", "far", "near ties") if k in cell]
    labels = sum(r["labels_differ"] for r in rows)
    parts = [f"{labels} of {sum(r['rows'] for r in rows)} labels differ"] if labels else []
    if kind == NETWORK_KINDS[3]:  # a region tree: its region output on boundary rows
        # off the boundaries only probabilities differ; on one, a runtime computing in
        # float32 may route the row to the neighbouring region (its region number differs)
        away = [cell[k] for k in ("held-out", "far") if k in cell]
        worst = max((r["max_abs_diff"] for r in away if r["values_beyond"]), default=0.0)
        parts += [f"probabilities within {worst:.1g}"] if worst else []
        if cell.get("at thresholds", {}).get("max_abs_diff", 0.0) > max(worst, 1e-3):
            parts.append("a row on a region boundary may get the neighbouring region number")
        return ", ".join(parts) or "outputs differ"
    worst = max((r["max_abs_diff"] for r in rows if r["values_beyond"]), default=0.0)
    parts += [f"values by up to {worst:.1g}"] if worst else []
    return ", ".join(parts) or "outputs differ"


def runtimes_for_kind(kind: str, *, dtype: str = "float32") -> list[str]:
    """The runtimes the graph of one row of the table of every model kind (``kind``, see
    `network_kind`) is known to run in, for input of ``dtype``."""
    data = compatibility()
    measured = data.get("kinds", {}).get(kind, {})
    same_type = [v for v in measured if data["variants"][v].get("dtype", "float32") == dtype]
    cells = measured[same_type[0]] if same_type else {}
    out = []
    for key, cell in cells.items():
        if cell["status"] not in _RUNS:
            continue
        runtime = data["runtimes"][key]
        name = f"{runtime['name']} {runtime['version']}"
        out.append(
            name
            if cell["status"] == "agrees"
            else f"{name} (runs; {_cell_differences(cell, kind)})"
        )
    return out
