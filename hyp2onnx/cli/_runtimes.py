"""Which runtimes each encoding is known to run in: the one place that says so.

Only what has been run is listed. ``exact`` graphs use ai.onnx.ml opset 5
``TreeEnsemble`` (or the legacy opset-1 operator when routing is float32)
inside a row-block ``Loop``; ``compat`` graphs use only the legacy opset-1
``TreeEnsembleRegressor`` besides standard ai.onnx operators.
"""

from __future__ import annotations

__all__ = ["KNOWN_RUNTIMES", "runtimes_for"]

KNOWN_RUNTIMES: dict[str, tuple[str, ...]] = {
    "exact": (
        "onnxruntime >= 1.18 (Python)",
        "onnx.reference.ReferenceEvaluator (same labels; values within verify's tolerance)",
    ),
    "compat": (
        "any runtime with ai.onnx.ml opset 1 TreeEnsembleRegressor and the graph's ai.onnx "
        "opset, e.g. onnxruntime and onnx.reference.ReferenceEvaluator",
    ),
}


def runtimes_for(encoding: str | None) -> list[str]:
    """The runtimes ``encoding`` is known to run in (empty when unknown)."""
    return list(KNOWN_RUNTIMES.get(encoding or "", ()))
