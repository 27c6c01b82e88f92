"""The ``"quantiles"`` tree space: far points on a cluster, with bounded driver traffic.

The single-machine ``"ranks"`` space (`tree_space`) maps every feature
through all of its distinct training values, which on a cluster would all
have to reach the driver. Here each feature is mapped through at most
``size`` *edges* ``E`` instead, taken from a mergeable quantile sketch of its
values (`QuantileSketch`): each partition sketches its rows, sketches
merge in any tree shape, and only the final one (``size`` values and weights
per feature, whatever the number of rows) reaches the driver. Edges are
quantiles *by rank*, so they crowd where the values crowd: far from the
origin, where Klein values lie ``e^{-2r}`` apart, they are as dense as
anywhere else.

The learner reads the bucket ``b(k) = 1 + #{e in E : e < k}`` of each Klein
value ``k`` (`QuantileMap`): a non-decreasing step function with
integer values, exact in float32 and float64. It may merge values (those of
one bucket), never misorder them. Every split of the learner, ``b(k) < t``
(or ``<=``), is therefore one float64 split of the Klein value itself,
``k <= E[m - 1]`` with ``m`` the number of buckets sent left
(`QuantileMap.klein_trees`). The threshold correction runs on those
Klein trees and the float64 Klein rows, exactly as on Klein coordinates
(the distributed neighbour search of `summaries`), and places every
threshold at the Einstein midpoint of its two nearest training values, in
the learner's precision if it separates them, else in float64 through split
indices (`SplitIndex`). The fitted model reads Klein
coordinates or split indices, never buckets, so its exported graph routes
every row as it does.

Near the origin the learner's own precision separates the Klein values, and
the map is the identity (`QuantileSketch.near`): the model is the one
the ``"klein"`` space gives, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..ir.trees import Op, TreeArrays

__all__ = ["NEAR_RADIUS", "SKETCH_SIZE", "QuantileMap", "QuantileSketch"]

#: Edges kept per feature (the driver receives 16 bytes per edge and feature).
SKETCH_SIZE = 1 << 14
#: Training points within this geodesic distance of the origin (curvature -1) are
#: fitted on their Klein coordinates (the ``"klein"`` space): float32 separates
#: points there to about 3e-4 in distance along a ray (XGBoost's Klein
#: coordinates hold on the ray test to about 6).
NEAR_RADIUS = 5.0


def _compress(values: np.ndarray, weights: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """At most ``size`` (>= 2) of the sorted ``values``, at evenly spaced cumulative weights.

    A kept value stands for itself and the dropped values just below it (its
    weight becomes theirs plus its own); the smallest and largest values are
    always kept. Deterministic, and exact (nothing dropped) up to ``size`` values.
    """
    if values.size <= size:
        return values, weights
    cumulative = np.cumsum(weights)
    # At most size - 2 changes of bucket, and the two ends: size values at most.
    bucket = np.floor(cumulative * ((size - 2) / cumulative[-1])).astype(np.int64)
    keep = np.empty(values.size, dtype=bool)
    keep[:-1] = bucket[:-1] != bucket[1:]
    keep[-1] = True
    keep[0] = True
    kept = np.flatnonzero(keep)
    totals = cumulative[kept]
    return values[kept], np.diff(totals, prepend=0.0)


@dataclass(frozen=True, eq=False)
class QuantileSketch:
    """Per feature, at most ``size`` sorted distinct float64 values with weights (the
    rows each stands for), and the largest squared Klein norm of the rows sketched.

    Exact (every distinct value, weight its count) until a feature has more than
    ``size`` distinct values; each compression then moves a value's weight to
    a kept value at most ``total / size`` rows of rank above it.
    """

    values: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray, ...]
    max_norm2: float
    size: int = SKETCH_SIZE

    @classmethod
    def of(cls, Xk: np.ndarray, size: int = SKETCH_SIZE) -> QuantileSketch:
        """The sketch of Klein rows ``Xk`` (one partition)."""
        Xk = np.asarray(Xk, dtype=np.float64)
        if size < 2:
            raise ValueError(f"a sketch keeps at least 2 values per feature, got size={size}")
        if Xk.ndim != 2:
            raise ValueError(f"Xk must be 2-D, got shape {Xk.shape}")
        values, weights = [], []
        for f in range(Xk.shape[1]):
            u, counts = np.unique(Xk[:, f] + 0.0, return_counts=True)  # -0.0 is 0.0
            v, w = _compress(u, counts.astype(np.float64), size)
            values.append(v)
            weights.append(w)
        norm2 = float(np.max(np.einsum("ij,ij->i", Xk, Xk), initial=0.0))
        return cls(tuple(values), tuple(weights), norm2, size)

    def merge(self, other: QuantileSketch) -> QuantileSketch:
        """The sketch of both sketches' rows (sizes: the smaller)."""
        if len(self.values) != len(other.values):
            raise ValueError(
                f"cannot merge sketches of {len(self.values)} and {len(other.values)} features"
            )
        size = min(self.size, other.size)
        values, weights = [], []
        for va, wa, vb, wb in zip(
            self.values, self.weights, other.values, other.weights, strict=True
        ):
            v = np.concatenate([va, vb])
            w = np.concatenate([wa, wb])
            order = np.argsort(v, kind="stable")
            v, w = v[order], w[order]
            u, first = np.unique(v, return_index=True)
            w = np.add.reduceat(w, first) if v.size else w
            u, w = _compress(u, w, size)
            values.append(u)
            weights.append(w)
        return QuantileSketch(
            tuple(values), tuple(weights), max(self.max_norm2, other.max_norm2), size
        )

    def near(self, radius: float = NEAR_RADIUS) -> bool:
        """Whether every sketched row lies within ``radius`` of the origin."""
        return self.max_norm2 <= np.tanh(radius) ** 2

    @property
    def nbytes(self) -> int:
        return int(sum(v.nbytes + w.nbytes for v, w in zip(self.values, self.weights, strict=True)))


#: From this many rows `QuantileMap.transform` sorts a column before searching it.
_SORTED_SEARCH_ROWS = 4096


@dataclass(frozen=True, eq=False)
class QuantileMap:
    """The map ``k -> 1 + #{e in edges[f] : e < k}`` of each feature ``f`` (after reading
    ``|k| <= zero_band`` as 0, as LightGBM does)."""

    edges: tuple[np.ndarray, ...]
    zero_band: float = 0.0

    @classmethod
    def of(cls, sketch: QuantileSketch, zero_band: float = 0.0) -> QuantileMap:
        return cls(tuple(np.asarray(v, dtype=np.float64) for v in sketch.values), zero_band)

    def transform(self, Xk: np.ndarray) -> np.ndarray:
        """The buckets (float64 integers from 1) of Klein rows ``Xk``."""
        Xk = np.asarray(Xk, dtype=np.float64)
        if self.zero_band:
            Xk = np.where(np.abs(Xk) <= self.zero_band, 0.0, Xk)
        out = np.empty(Xk.shape, dtype=np.float64)
        for f, e in enumerate(self.edges):
            column = Xk[:, f]
            if column.shape[0] < _SORTED_SEARCH_ROWS:
                out[:, f] = np.searchsorted(e, column, side="left") + 1.0
                continue
            # The same counts, searched in increasing order: each search starts
            # from the last one's place, in cache, where random keys miss it
            # (250,000 rows into 16,384 edges: 25 ms a column, 10 ms sorted first).
            order = np.argsort(column)
            out[order, f] = np.searchsorted(e, column.take(order), side="left") + 1.0
        return out

    def klein_thresholds(self, feature: np.ndarray, threshold: np.ndarray, op: Op) -> np.ndarray:
        """Float64 Klein thresholds ``c`` of learner splits ``b(k) op t``: ``b(k) op t`` iff
        ``k <= c`` for every float64 ``k`` (``c`` may be ``-inf`` or ``inf``)."""
        out = np.zeros(feature.shape[0])
        side: Literal["left", "right"] = "left" if op == "<" else "right"
        for f in np.unique(feature[feature >= 0]):
            at = np.flatnonzero(feature == f)
            e = self.edges[f]
            buckets = np.arange(1.0, e.size + 2.0)  # every bucket b(k) takes
            m = np.searchsorted(buckets, threshold[at], side=side)  # buckets sent left
            # b(k) <= m  iff  #{e < k} <= m - 1  iff  k <= e[m - 1].
            c = np.where(m >= 1, e[np.clip(m - 1, 0, max(e.size - 1, 0))], -np.inf)
            out[at] = np.where(m > e.size, np.inf, c)
        return out

    def klein_trees(self, trees: list[TreeArrays], op: Op) -> list[TreeArrays]:
        """The learner's trees as splits of Klein values with the same ``op``, in float64:
        ``k <= c`` is ``k <= c`` for ``"<="`` and ``k < next(c)`` for ``"<"``."""
        out = []
        for tree in trees:
            c = self.klein_thresholds(tree.feature, np.asarray(tree.threshold, np.float64), op)
            if op == "<":
                c = np.nextafter(c, np.inf)
            out.append(tree._replace(threshold=np.where(tree.feature >= 0, c, tree.threshold)))
        return out
