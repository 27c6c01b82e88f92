"""hyp2onnx: hyperbolic decision trees and forests, exported to exact ONNX graphs.

Train on hyperboloid, Poincare or Klein points with scikit-learn-style
estimators (Fast-HyperDT: a Euclidean tree on Klein coordinates with
Einstein-midpoint thresholds), then export one ONNX graph that takes the
raw hyperbolic points.
"""

from . import conventions
from . import datasets
from . import geometry
from ._version import __version__
from .errors import CompatRoutingWarning, Hyp2OnnxError, InvalidPointError, UnsupportedModelError, VerificationError
from .estimators import (
    HyperbolicDecisionTreeClassifier,
    HyperbolicDecisionTreeRegressor,
    HyperbolicEstimator,
    HyperbolicHouseholderTreeClassifier,
    HyperbolicHouseholderTreeRegressor,
    HyperbolicLGBMClassifier,
    HyperbolicLGBMRegressor,
    HyperbolicRandomForestClassifier,
    HyperbolicRandomForestRegressor,
    HyperbolicXGBClassifier,
    HyperbolicXGBRegressor,
)
from .export import read_metadata, save_onnx, to_onnx
from .skl2onnx_converter import register_skl2onnx_converters
from .verify import VerifyReport, verify

register_skl2onnx_converters()

__all__ = [
    "CompatRoutingWarning",
    "Hyp2OnnxError",
    "HyperbolicDecisionTreeClassifier",
    "HyperbolicDecisionTreeRegressor",
    "HyperbolicEstimator",
    "HyperbolicHouseholderTreeClassifier",
    "HyperbolicHouseholderTreeRegressor",
    "HyperbolicLGBMClassifier",
    "HyperbolicLGBMRegressor",
    "HyperbolicRandomForestClassifier",
    "HyperbolicRandomForestRegressor",
    "HyperbolicXGBClassifier",
    "HyperbolicXGBRegressor",
    "InvalidPointError",
    "UnsupportedModelError",
    "VerificationError",
    "VerifyReport",
    "__version__",
    "conventions",
    "datasets",
    "geometry",
    "read_metadata",
    "save_onnx",
    "to_onnx",
    "verify",
]
