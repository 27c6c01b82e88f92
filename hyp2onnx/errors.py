"""Exceptions raised by hyp2onnx.

Every error a user can cause subclasses [`Hyp2OnnxError`][hyp2onnx.errors.Hyp2OnnxError]; those that
describe bad input values also subclass `ValueError`, so code written
against scikit-learn's conventions keeps working.
"""

from __future__ import annotations

import os
import sys
import warnings

#: Every module of the package lies under this folder.
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn, pointing at the first frame outside hyp2onnx: the user's line that
    called into the package, however deep inside it the warning is raised."""
    if sys.version_info >= (3, 12):
        warnings.warn(message, category, skip_file_prefixes=(_PACKAGE,))
        return
    level, frame = 2, sys._getframe(1)  # 2: the caller of this function
    while frame.f_code.co_filename.startswith(_PACKAGE) and frame.f_back is not None:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


class Hyp2OnnxError(Exception):
    """Base class of every error raised on purpose by hyp2onnx."""


class InvalidPointError(Hyp2OnnxError, ValueError):
    """Input points are not valid points of the stated hyperbolic model."""

    # Set only by geometry.raise_rows (the message's two parts, for the command
    # line); annotations alone, so that an error without them still lacks them.
    problem: str
    fix: str


class FarPointError(Hyp2OnnxError, ValueError):
    """Points lie too far from the origin for float64 to hold the geometry a model needs.

    The message names the rows and their hyperbolic radius; ``rows`` and
    ``radii`` hold them for code. Raised when a centred design (a rotation
    forest's frames) would compute meaningless coordinates, instead of a
    model that answers blankly.
    """

    rows: list[int]
    radii: list[float]


class FarPointWarning(UserWarning):
    """Some training points lie beyond the radius to which a model's design holds in float64.

    The model is fitted and finite; those points are seen with less
    precision than the design promises (an isolation forest routes them by
    direction alone). The message names the rows and their radius.
    """


class DamagedMetadataError(Hyp2OnnxError, ValueError):
    """A graph's hyp2onnx metadata is there but cannot be read (damaged or hand-made)."""


class UnsupportedModelError(Hyp2OnnxError, TypeError):
    """The estimator or model file is not one hyp2onnx can train, correct or export."""


class DamagedModelError(UnsupportedModelError, ValueError):
    """A model breaks an invariant of its own format: a damaged file or a hand-edited model.

    Trees whose children lie outside the tree or have two parents, NaN or
    infinite thresholds or leaf values, CatBoost borders out of order: the
    library may still load and predict such a model, but a graph cannot
    agree with it (its reading of the model is undefined). The message says
    what is wrong and where.
    """


class GraphRunError(Hyp2OnnxError, ValueError):
    """A graph failed to compute on the data: an error in the data, not in hyp2onnx.

    A node of the graph (an encoder's ``Gather`` given an id beyond its
    table) refused the values it was handed. ``inputs`` names the inputs
    that make it fail and ``rows`` the failing rows, where bisecting the
    batch finds them (empty otherwise); the message says both.
    """

    def __init__(self, problem: str, fix: str, inputs: list[str], rows: list[int]) -> None:
        super().__init__(f"{problem}; {fix}")
        self.problem, self.fix, self.inputs, self.rows = problem, fix, inputs, rows


class VerificationError(Hyp2OnnxError):
    """An exported graph does not agree with the model it came from."""


class MissingExtraError(Hyp2OnnxError, ImportError):
    """A backend's library is not installed; the message names the extra that installs it."""


class CompatRoutingWarning(UserWarning):
    """A compat-encoded graph may route rows at a threshold differently from the model.

    The compat encoding's legacy operator compares in float32; models that
    compare in float64 (LightGBM, oblique trees' projections) keep their
    routing only where the compared values are float32 already.
    """
