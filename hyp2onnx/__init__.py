"""hyp2onnx: hyperbolic decision trees and forests, exported to exact ONNX graphs.

Train on hyperboloid, Poincare or Klein points with scikit-learn-style
estimators (Fast-HyperDT: a Euclidean tree on Klein coordinates with
Einstein-midpoint thresholds), then export one ONNX graph that takes the
raw hyperbolic points.
"""

from importlib.metadata import PackageNotFoundError, version

from . import geometry
from .errors import Hyp2OnnxError, InvalidPointError, UnsupportedModelError, VerificationError
from .estimators import (
    HyperbolicDecisionTreeClassifier,
    HyperbolicDecisionTreeRegressor,
    HyperbolicEstimator,
    HyperbolicRandomForestClassifier,
    HyperbolicRandomForestRegressor,
)

try:
    __version__ = version("hyp2onnx")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "Hyp2OnnxError",
    "HyperbolicDecisionTreeClassifier",
    "HyperbolicDecisionTreeRegressor",
    "HyperbolicEstimator",
    "HyperbolicRandomForestClassifier",
    "HyperbolicRandomForestRegressor",
    "InvalidPointError",
    "UnsupportedModelError",
    "VerificationError",
    "__version__",
    "geometry",
]
