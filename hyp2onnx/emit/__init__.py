"""ONNX emitters, and the registry of encodings.

An encoding is one entry of `ENCODINGS` (its name, help text and
properties) and one tree emitter, ``emit(builder, k, k_dtype, ensemble,
**options)``, that turns the Klein coordinates ``k`` into the raw scores
``[N, n_outputs]``; ``hyp2onnx.emit.strategy.TREE_EMITTERS`` maps each name
to its emitter, and ``hyp2onnx.emit.strategy.choose_graph`` decides which
graph a model gets. Every list of encodings (the export's check, the command
line's choices and help, the skl2onnx options, the verification tolerance)
is read from `ENCODINGS`. This module imports no ONNX code, so the
command line can list encodings cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ENCODINGS", "Encoding", "encoding"]


@dataclass(frozen=True, kw_only=True)
class Encoding:
    """One way of writing the trees as ONNX nodes."""

    name: str
    summary: str  #: one line for help texts
    tree_operator: bool  #: uses the ai.onnx.ml tree operator (the emitter takes ``plan=``)
    float32: bool  #: compares and adds in float32 whatever the model does (legacy operator)
    #: has set-membership nodes (categorical splits of input blocks)
    categories: bool = True
    #: adds the trees in the runtime's order: values within a bound the emitter
    #: returns with the scores (``hyp2onnx.emit.fast.Guarded``), labels guarded
    value_bound: bool = False
    #: what it builds for a network or region tree (``hyp2onnx.export``'s network
    #: graphs); None: trees only
    networks: str | None = None


ENCODINGS: dict[str, Encoding] = {
    e.name: e
    for e in (
        Encoding(
            name="fast",
            summary="exact routing and labels, values within a stated bound; the runtime's "
            "order of sums (default)",
            tree_operator=True,
            float32=False,
            value_bound=True,
            networks="Gemm per layer in the runtime's order, near-tie rows rescored in fixed order",
        ),
        Encoding(
            name="exact",
            summary="values bit for bit, slower on many cores",
            tree_operator=True,
            float32=False,
            networks="every sum in the Python model's fixed order (bit for bit)",
        ),
        Encoding(
            name="compat",
            summary="legacy operator, float32 sums, for older runtimes",
            tree_operator=True,
            float32=True,
            categories=False,
        ),
        Encoding(
            name="standard",
            summary="exact, standard ONNX operators only (no ai.onnx.ml)",
            tree_operator=False,
            float32=False,
        ),
    )
}


def encoding(name: str) -> Encoding:
    """The registered encoding ``name``, or a ValueError listing them."""
    try:
        return ENCODINGS[name]
    except (KeyError, TypeError):
        raise ValueError(f"encoding must be one of {tuple(ENCODINGS)}, got {name!r}.") from None
