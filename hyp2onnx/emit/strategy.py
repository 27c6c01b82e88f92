"""Which tree operator a graph uses, and what it carries.

The choice needs the fast encoding's bound (:mod:`hyp2onnx.emit.fast`) as
well as the tree operators (:mod:`hyp2onnx.emit.trees`), so it lives above
both: ``trees`` and ``fast`` import nothing from here.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..ir import Ensemble
from .fast import complement_defect, value_bound
from .trees import TreePlan, per_class_trees

#: Leaf indices travel as the ensemble's float type; float32 holds integers exactly below this.
_FLOAT32_EXACT_INTS = 1 << 24
#: Above this many nodes the exact encoding uses opset-5 ``TreeEnsemble`` even
#: where the legacy operator would do: the legacy operator keeps every node's
#: fields in attribute lists, which stay in the protobuf and cannot exceed
#: 2 GiB, while ``TreeEnsemble`` holds thresholds, modes and leaf weights in
#: tensors, which move to external data.
LEGACY_MAX_NODES = 30_000_000


def plan_trees(ensemble: Ensemble, encoding: str, *, legacy_only: bool = False) -> TreePlan:
    """Choose the operator and what it carries (see :class:`TreePlan`).

    ``legacy_only`` (for hosts such as skl2onnx that cap ai.onnx.ml below
    opset 5) raises :class:`ValueError` when the exact encoding needs v5.
    """
    if encoding == "compat":
        return TreePlan("legacy", "values")
    if ensemble.categories is not None:
        # Set-membership splits exist only in opset 5 (BRANCH_MEMBER).
        if legacy_only:
            raise ValueError(
                "the exact encoding of a model with categorical splits needs ai.onnx.ml opset 5"
            )
        carries: Literal["values", "leaf_rows"] = (
            "values" if per_class_trees(ensemble) is not None else "leaf_rows"
        )
        return TreePlan("v5", carries)
    if encoding == "fast" and not legacy_only:
        if complement_defect(ensemble) is not None and value_bound(ensemble) > 0:
            # Binary class fractions: the fast graph's one-target operator in double,
            # and its guard's exact rescoring in the same opset.
            return TreePlan("v5", "leaf_rows")
    leaves = int(np.sum(ensemble.feature < 0))
    float32_routing = ensemble.compare_dtype == "float32"
    small = legacy_only or ensemble.n_nodes <= LEGACY_MAX_NODES
    if per_class_trees(ensemble) is not None:
        if float32_routing and ensemble.sum_dtype == "float32" and small:
            return TreePlan("legacy", "values")
        if not legacy_only:
            return TreePlan("v5", "values")
    if float32_routing and leaves < _FLOAT32_EXACT_INTS and small:
        return TreePlan("legacy", "leaf_rows")
    if legacy_only:
        raise ValueError(
            "the exact encoding of this model needs ai.onnx.ml opset 5 (float64 routing)"
        )
    return TreePlan("v5", "leaf_rows")
