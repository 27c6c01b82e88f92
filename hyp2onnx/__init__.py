"""hyp2onnx: hyperbolic decision trees and forests, exported to exact ONNX graphs.

Train on hyperboloid, Poincare or Klein points with scikit-learn-style
estimators (Fast-HyperDT: a Euclidean tree on Klein coordinates with
Einstein-midpoint thresholds), then export one ONNX graph that takes the
raw hyperbolic points.

Names are imported on first use: ``import hyp2onnx`` loads no tree library,
and each backend's library (XGBoost, LightGBM, CatBoost) is imported only
when one of its estimators is used. skl2onnx learns to convert hyperbolic
estimators after [`register_skl2onnx_converters`][hyp2onnx.register_skl2onnx_converters].
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from . import verification as _verification
from ._version import __version__
from .errors import (
    CompatRoutingWarning,
    FarPointError,
    FarPointWarning,
    Hyp2OnnxError,
    InvalidPointError,
    MissingExtraError,
    UnsupportedModelError,
    VerificationError,
)
from .estimators import __all__ as _estimators
from .verification import VerifyReport, verify  # numpy only

# The module's name until the function verify shadowed it: ``from hyp2onnx.verify import
# default_tolerance`` and pickles made then still load; `hyp2onnx.verify` is the function.
sys.modules[f"{__name__}.verify"] = _verification

#: Public names imported on first use, and their modules.
_LAZY = {
    **{
        n: "estimators"
        for n in _estimators
        if n.startswith("Hyperbolic") and n != "HyperbolicTreeModel"
    },
    "region_tree": "estimators",
    "RegionTree": "estimators",
    "Region": "estimators",
    "to_onnx": "export",
    "compose": "export",
    "save_onnx": "export",
    "read_metadata": "export",
    "GraphMetadata": "export",
    "register_skl2onnx_converters": "export.skl2onnx",
}
_SUBMODULES = ("conventions", "datasets", "geometry")

__all__ = sorted(
    [
        "CompatRoutingWarning",
        "FarPointError",
        "FarPointWarning",
        "Hyp2OnnxError",
        "InvalidPointError",
        "MissingExtraError",
        "UnsupportedModelError",
        "VerificationError",
        "VerifyReport",
        "__version__",
        "verify",
        *_LAZY,
        *_SUBMODULES,
    ]
)


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
