"""Threshold correction: every split moved to the hyperbolic midpoint of its neighbours.

The package is laid out in the order the work happens:

- `midpoints`: the midpoint rules (Einstein, angular, arithmetic) and the
  placement of one threshold between its two nearest training values, rounded
  so that every training row keeps its side; one tree at a time.
- `shared_rows`: the same for a whole ensemble, trees that share their
  training rows searched together.
- `summaries`: per-partition summaries of those neighbours, merged by
  element-wise max/min (the map-reduce form, used by Dask).
- `tree_space`: what the learner is fitted on (Klein coordinates, or the
  ranks of their distinct values far from the origin) and the split indices
  that let float64 thresholds route what the learner's precision cannot.
- `correct`: the one entry point, called by the estimators and by Dask.

The formulas are in the documentation's math page (``docs/math.md``).
"""

from __future__ import annotations

from ._correct import Comparison, Correction, Neighbours, correct, from_rows, from_summary
from .midpoints import CorrectionReport, Midpoint
from .shared_rows import RowsPerTree
from .summaries import SplitSummary, klein_space, summarise
from .tree_space import TREE_SPACES, SplitIndex, TreeSpace

__all__ = [
    "TREE_SPACES",
    "Comparison",
    "Correction",
    "CorrectionReport",
    "Midpoint",
    "Neighbours",
    "RowsPerTree",
    "SplitIndex",
    "SplitSummary",
    "TreeSpace",
    "correct",
    "from_rows",
    "from_summary",
    "klein_space",
    "summarise",
]
