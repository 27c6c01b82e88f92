"""What kind of model is this: decided here once, for ``to_onnx``, ``verify`` and the CLI.

Three kinds export:

- ``"hyperbolic"``: a hyp2onnx estimator, which records its geometry;
- ``"plain"``: a fitted tree model of a registered backend, trained on
  unit-ball Klein coordinates; the caller states the geometry;
- ``"hyperdt"``: a model of the original HyperDT (``hyperdt`` 0.0.3),
  reproduced with HyperDT's own split arithmetic;
- ``"network"``: a hyperbolic MLP or its region tree (`._network`),
  which records its geometry.
"""

from __future__ import annotations

from typing import Any, Literal

from ..estimators import backend_for
from . import hyperdt
from ._network import is_network

__all__ = ["Kind", "kind_of"]

Kind = Literal["hyperbolic", "plain", "hyperdt", "network"]


def kind_of(model: Any) -> Kind:
    """The kind of ``model``; [`UnsupportedModelError`][hyp2onnx.errors.UnsupportedModelError] if none.

    The error lists the supported model classes.
    """
    if is_network(model):
        return "network"
    if hyperdt.handles(model):
        return "hyperdt"
    # Imported here, not at the top: the estimators' base imports scikit-learn, which the
    # scoring commands (inspect, predict), reaching this module through the export
    # package, must not load (tests/test_layout.py).
    from ..estimators._base import HyperbolicTreeModel

    if isinstance(model, HyperbolicTreeModel):
        return "hyperbolic"
    backend_for(model)  # raises, naming what is supported
    return "plain"
