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
from typing import Any

__all__ = ["compatibility", "runtimes_for"]

_RUNS = ("agrees", "runs")


@lru_cache(maxsize=1)
def compatibility() -> dict[str, Any]:
    """The measured table: runtimes, graph variants and one result per pair."""
    text = resources.files(__package__).joinpath("runtimes.json").read_text(encoding="utf-8")
    return json.loads(text)


def _variant(
    data: dict[str, Any], encoding: str, row_blocks: bool, ort_format: bool, dtype: str
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


def _entry(runtime: dict[str, Any], cell: dict[str, Any]) -> str:
    name = f"{runtime['name']} {runtime['version']}"
    return name if cell["status"] == "agrees" else f"{name} (runs; outputs differ)"


def _running(data: dict[str, Any], variant: str) -> dict[str, str]:
    runtimes = data["runtimes"]
    return {
        key: _entry(runtimes[key], cell)
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
    variant = _variant(data, encoding or "", row_blocks, ort_format, dtype)
    if variant is None and not row_blocks:  # runs at least where the blocked graph runs
        variant = _variant(data, encoding or "", True, ort_format, dtype)
    if variant is None:
        return []
    running = _running(data, variant)
    out = list(running.values())
    if row_blocks and not ort_format:
        flat = _variant(data, encoding or "", False, False, dtype)
        extra = [v for k, v in _running(data, flat).items() if k not in running] if flat else []
        if extra:
            out.append(f"without row blocks (convert --no-row-blocks) also: {', '.join(extra)}")
    return out
