"""ONNX emitters, and the registry of encodings. Add an encoding here, nowhere else.

An encoding is one emitter function, ``emit(g, k, k_dtype, ensemble)`` (plus
``plan=`` a `TreePlan` when it uses the
ai.onnx.ml tree operator), that turns the Klein coordinates ``k`` into the
raw scores ``[N, n_outputs]``; `hyp2onnx.export.compile_model` adds the
projection before it and the outputs after it. Every list of encodings (the
export's check, the command line's choices and help, the skl2onnx
options, the verification tolerance) is read from `ENCODINGS`. This
module imports no ONNX code, so the command line can list encodings cheaply.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the annotation only: this module imports no ONNX code
    from .fast import Guarded

__all__ = ["ENCODINGS", "Encoding", "encoding"]


@dataclass(frozen=True)
class Encoding:
    """One way of writing the trees as ONNX nodes."""

    name: str
    emitter: str  #: "module:function" under `hyp2onnx.emit`
    summary: str  #: one line for help texts
    tree_operator: bool  #: uses the ai.onnx.ml tree operator (the emitter takes ``plan=``)
    float32: bool  #: compares and adds in float32 whatever the model does (legacy operator)
    #: has set-membership nodes (categorical splits of input blocks)
    categories: bool = True
    #: adds the trees in the runtime's order: values within a bound the emitter
    #: returns with the scores (`hyp2onnx.emit.fast.Guarded`), labels guarded
    value_bound: bool = False

    def emit_function(self) -> Callable[..., str | Guarded]:
        """The emitter: the raw scores' name, or a `Guarded`
        holding it (``value_bound`` encodings)."""
        module, function = self.emitter.split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), function)


ENCODINGS: dict[str, Encoding] = {
    e.name: e
    for e in (
        Encoding(
            "fast",
            "fast:emit_fast",
            "exact routing and labels, values within a stated bound; the runtime's order of sums (default)",
            True,
            False,
            value_bound=True,
        ),
        Encoding(
            "exact", "trees:emit_exact", "values bit for bit, slower on many cores", True, False
        ),
        Encoding(
            "compat",
            "trees:emit_compat",
            "legacy operator, float32 sums, for older runtimes",
            True,
            True,
            False,
        ),
        Encoding(
            "standard",
            "standard:emit_standard",
            "exact, standard ONNX operators only (no ai.onnx.ml)",
            False,
            False,
        ),
    )
}


def encoding(name: str) -> Encoding:
    """The registered encoding ``name``, or a ValueError listing them."""
    try:
        return ENCODINGS[name]
    except (KeyError, TypeError):
        raise ValueError(f"encoding must be one of {tuple(ENCODINGS)}, got {name!r}.") from None
