"""The fit path as it was before issue 40 made it faster, kept verbatim as the
reference the new code must match bit for bit (tests/test_fit_reference.py).

Each function is the old body, lifted out of its class or module: do not
"improve" it; it is what the new code is compared with.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hyp2onnx.errors import InvalidPointError


def old_float32_keeps_outputs(model: Any, X: np.ndarray) -> bool:
    """``HyperbolicTreeModel._float32_keeps_outputs`` before issue 40: the library's
    outputs on every moved training row, float64 and rounded to float32."""
    rounded = X.astype(np.float32).astype(np.float64)
    moved = np.flatnonzero((rounded != X).any(axis=1))
    if moved.size == 0:
        return True
    outputs = getattr(model.estimator_, "predict_proba", model.estimator_.predict)
    try:
        seen = outputs(model._tree_input(rounded[moved]))
    except InvalidPointError:  # rounding put a point off the manifold: keep float64
        return False
    return bool(np.array_equal(seen, outputs(model._tree_input(X[moved]))))
