"""Every way a fitted model leaves Python.

- `to_onnx` / `save_onnx`: one ONNX graph that takes the raw
  hyperbolic points, its metadata (`read_metadata`), and external data
  for graphs past protobuf's 2 GiB (``_model_file``).
- `compose`: an ONNX encoder in front of a model's graph (`hyp2onnx.export.composition`).
- `skl2onnx`: converters that teach ``skl2onnx.to_onnx`` our estimators.

The graph takes raw points ``X`` [N, D] in the model's input geometry,
projects the columns the trees read to Klein coordinates, evaluates the
ensemble and returns ``label`` + ``probabilities`` (classifiers) or
``variable`` (regressors). See `hyp2onnx.emit` for the encodings.
"""

from __future__ import annotations

import sys

from ..emit import ENCODINGS
from . import composition
from ._compile import (
    DEFAULT_OPSET,
    MIN_OPSET,
    check_opset,
    compat_routes_exactly,
    compile_model,
    describe,
    input_dtype,
    max_opset,
)
from ._kinds import MODEL_KINDS, Kind, ModelKind, kind_for, kind_of, save_onnx, to_onnx
from ._metadata import GraphMetadata, read_metadata
from ._model_file import (
    PROTOBUF_LIMIT,
    check_model,
    external_data_path,
    finish_model,
    needs_external_data,
)
from .composition import ON_MANIFOLD, compose, encoder_of, encoder_sha256, is_composed

# The module's name until the function compose shadowed it: imports of
# ``hyp2onnx.export.compose``'s names still load; `hyp2onnx.export.compose` is the function.
sys.modules[f"{__name__}.compose"] = composition

__all__ = [
    "DEFAULT_OPSET",
    "ENCODINGS",
    "MIN_OPSET",
    "check_opset",
    "compose",
    "describe",
    "external_data_path",
    "GraphMetadata",
    "Kind",
    "MODEL_KINDS",
    "ModelKind",
    "input_dtype",
    "kind_for",
    "kind_of",
    "max_opset",
    "needs_external_data",
    "read_metadata",
    "save_onnx",
    "to_onnx",
]
