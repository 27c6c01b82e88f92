"""What the wrapped learner is fitted on, and how its splits become Klein splits.

A split on a monotone function of a Klein coordinate is the same split on
the coordinate itself, so the learner may be fitted on any per-feature
monotone image of the Klein coordinates. That matters far from the origin:
the Klein positions of the split hyperplanes crossing a geodesic ray at
radius ``r`` are about ``e^{-2r}`` apart, below float32's spacing (6e-8 near
``|k| = 1``) and scikit-learn's 1e-7 splitter tolerance from ``r`` of about
6 on (see docs/math.md, "Far from the origin: tree spaces"). Tree spaces:

* ``"ranks"`` (the default): each value's rank among the feature's distinct float64
  training values (1, 2, ...): distinct training values are 1 apart in any
  precision, so every backend can split wherever float64 Klein coordinates
  differ;
* ``"rapidity"``: ``artanh(k)``, which spreads values only near the axes'
  ideal points (kept as an option to measure it);
* ``"klein"``: the coordinates themselves (the paper's design), compared
  in the backend's own precision (LightGBM's float64 comparisons hold to
  about radius 15 on the ray test; its binning merges values closer still).

In every tree space each split goes back to a Klein threshold at the
Einstein midpoint of the float64 Klein values of its two nearest training
rows (`KleinPlacer`; for ``"klein"`` this is the correction of
`hyp2onnx.correction.midpoints` as it always was). If the backend's own comparison separates
every split's two neighbours (near the origin: always), the thresholds are
written back in the backend's precision and ``estimator_`` reads Klein
coordinates, as with ``"klein"``. Otherwise they are float64 thresholds
compared with ``k <= t`` in float64, and the native model is rewritten to
test *split indices* (`SplitIndex`): it reads
``z_f = 1 + #{t in T_f : t < k_f}`` for the sorted distinct Klein thresholds
``T_f`` of feature ``f`` and sends a row left at the split on ``T_f[j]`` iff
``z_f < j + 1.5``, which is ``k_f <= T_f[j]`` exactly, in any backend's
precision. So the Python model and the exported graph, which compares
``k`` with ``T`` in float64, route every row alike.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .._threads import thread_pool
from ..ir.crossings import Margins
from ..ir.trees import Op, as_compared
from .midpoints import KEEP, Array, Midpoint, place_thresholds

__all__ = ["TREE_SPACES", "KleinPlacer", "ResolutionError", "SplitIndex", "TreeSpace"]

TREE_SPACES: tuple[str, ...] = ("ranks", "rapidity", "klein")
Space = Literal["ranks", "rapidity", "klein"]

#: Integers a float32 holds exactly (ranks and split indices must stay below).
_EXACT_INTS = {"float32": 1 << 24, "float64": 1 << 53}


def _zeroed(Xk: np.ndarray, zero_band: float) -> np.ndarray:
    return np.where(np.abs(Xk) <= zero_band, 0.0, Xk) if zero_band else Xk


def _plus_zero(u: np.ndarray) -> np.ndarray:
    """``u`` with -0.0 made +0.0, in place: ``np.unique`` keeps whichever zero its sort
    puts first, and that order depends on the CPU's sort kernels (AVX-512 or not)."""
    u += 0.0
    return u


def _unique_ranks(column: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The sorted distinct values of ``column`` (finite), as ``np.unique`` finds them
    (of -0.0 and 0.0 the one sorted first), writing each value's rank among them,
    from 1, into ``rank``: ``np.unique``'s inverse from the one sort it makes.

    The sorted values go once their distinct ones are taken, and the ranks
    are written through the sort order straight into ``rank`` (each the same
    integer converted once): no more than three arrays of ``column``'s size
    at a time besides it.
    """
    order = np.argsort(column)
    values = column.take(order)
    new = np.empty(values.shape[0], dtype=bool)
    new[:1] = True
    np.not_equal(values[1:], values[:-1], out=new[1:])
    distinct = values[new]
    del values
    rank[order] = np.cumsum(new)  # exact: fewer ranks than ``rank``'s dtype holds
    return distinct


class ResolutionError(Exception):
    """A split whose two nearest training values are equal in the trial precision."""


@dataclass(frozen=True, eq=False)
class TreeSpace:
    """A fitted per-feature monotone map from Klein coordinates to the learner's input.

    ``klein[f]`` holds the sorted distinct float64 Klein values of feature
    ``f`` in the training data and ``image[f]`` their images as the learner
    compares them (non-decreasing, float64 holding ``compare_dtype``
    values); read them with `values`, which makes a ranks space's one
    feature at a time from its training rows when it holds none (up to
    ``n x d`` float64 not held). Used during ``fit`` only; not kept in fitted
    models.
    """

    # Or "quantiles": hyp2onnx.dask places thresholds learnt on quantile buckets as
    # Klein splits and marks the space so (the learner's thresholds are not Klein values).
    space: Space | Literal["quantiles"]
    compare_dtype: str
    klein: tuple[np.ndarray, ...]
    image: tuple[np.ndarray, ...]
    zero_band: float = 0.0
    #: A ranks space fitted without keeping its values (``klein`` empty) reads
    #: them from these training rows when asked (`values`).
    rows: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def fit(
        cls, Xk: np.ndarray, space: Space, compare_dtype: str, zero_band: float = 0.0
    ) -> TreeSpace:
        """The map of ``space`` for training Klein rows ``Xk`` and a learner comparing in
        ``compare_dtype`` that reads ``|x| <= zero_band`` as 0 (LightGBM)."""
        if space not in TREE_SPACES:
            raise ValueError(f"tree space must be one of {TREE_SPACES}, got {space!r}")
        Xk = _zeroed(Xk, zero_band)
        klein = tuple(_plus_zero(np.unique(Xk[:, f])) for f in range(Xk.shape[1]))
        if space == "ranks":
            largest = max((u.size for u in klein), default=0)
            if largest >= _EXACT_INTS[compare_dtype]:
                raise ValueError(
                    f"a feature has {largest} distinct values, more ranks than {compare_dtype} "
                    "holds exactly; use tree_space='rapidity' or 'klein', or a backend that "
                    "compares in float64 (LightGBM)."
                )
            image = tuple(np.arange(1.0, u.size + 1.0) for u in klein)
        elif space == "klein":
            image = ()  # the values in the learner's precision: made when read (`image_of`)
        else:
            if any(np.abs(u).max(initial=0.0) >= 1.0 for u in klein):
                raise ValueError(
                    "some training points are so far from the origin that a Klein coordinate "
                    "rounds to +-1 in float64 (radius about 19 or more): their rapidity is "
                    "infinite. Use tree_space='ranks'."
                )
            image = tuple(as_compared(np.arctanh(u), compare_dtype) for u in klein)
        return cls(space, compare_dtype, klein, image, zero_band)

    @classmethod
    def fit_transform(
        cls,
        Xk: np.ndarray,
        space: Space,
        compare_dtype: str,
        zero_band: float = 0.0,
        *,
        compact: bool = False,
        lazy: bool = False,
        threads: int = 1,
    ) -> tuple[TreeSpace, np.ndarray]:
        """``fit(Xk, ...)`` and its ``transform(Xk)`` of the same rows, in one pass for ranks.

        A training value's rank is its index among the distinct values plus
        one, read off the sort that finds them (`_unique_ranks`), where
        ``transform`` searches every value again. Same numbers as the two
        calls (finite ``Xk``; otherwise the two calls are made). With
        ``compact``, ranks come as float32 when every one is exact there (fewer
        than 2**24 rows): the same numbers in half the memory, the precision
        scikit-learn and XGBoost read anyway. With ``lazy``, a ranks space keeps
        no values but reads them from ``Xk`` and its ranks when asked (`values`).
        Columns are ranked ``threads`` at a time.
        """
        if space == "ranks" and np.all(np.isfinite(Xk)):
            columns = (Xk[:, f] for f in range(Xk.shape[1]))
            done = cls.ranks_of_columns(
                columns,
                Xk.shape,
                compare_dtype,
                zero_band,
                compact=compact,
                keep_values=not lazy,
                threads=threads,
            )
            if done is not None:
                fitted, ranks = done
                return (fitted.with_rows((Xk, ranks)) if lazy else fitted), ranks
        fitted = cls.fit(Xk, space, compare_dtype, zero_band)  # raises the ranks error if ranks
        return fitted, fitted.transform(Xk)

    @classmethod
    def ranks_of_columns(
        cls,
        columns: Iterable[np.ndarray],
        shape: tuple[int, int],
        compare_dtype: str,
        zero_band: float = 0.0,
        *,
        compact: bool = False,
        keep_values: bool = True,
        threads: int = 1,
    ) -> tuple[TreeSpace, np.ndarray] | None:
        """`fit_transform` in ranks of the ``shape`` rows whose columns come one at a time
        (so that no more than ``threads`` need exist at once, ranked that many at a
        time): the same space and ranks. Without ``keep_values`` the space holds no
        values (see `with_rows`).

        None, having read no further, at a column that is not finite or has
        more distinct values than ``compare_dtype`` ranks exactly: there
        `fit_transform` of the whole rows refuses them or uses another path.
        """
        n, d = shape
        small = compact and n < _EXACT_INTS["float32"]
        out: np.ndarray = np.empty(shape, dtype=np.float32 if small else np.float64)
        klein: list[np.ndarray] = []
        sizes: list[int] = []

        def ranked(at: tuple[int, np.ndarray]) -> np.ndarray | None:
            f, column = at
            if not np.all(np.isfinite(column)):
                return None
            return _unique_ranks(_zeroed(column, zero_band), out[:, f])

        work = enumerate(itertools.islice(columns, d))
        with thread_pool(min(threads, d)) as pool:
            while batch := list(itertools.islice(work, max(threads, 1))):
                for u in pool.map(ranked, batch):
                    if u is None or u.size >= _EXACT_INTS[compare_dtype]:
                        return None
                    sizes.append(u.size)
                    if keep_values:
                        klein.append(_plus_zero(u))
        ranks = np.arange(1.0, max(sizes, default=0) + 1.0)
        image = tuple(ranks[:size] for size in sizes)  # views of one table
        return cls("ranks", compare_dtype, tuple(klein), image, zero_band), out

    @property
    def n_features(self) -> int:
        """How many features the space maps."""
        return len(self.image) or len(self.klein)

    def image_of(self, f: int) -> np.ndarray:
        """``image[f]``; a ``"klein"`` space that holds none rounds its values to the learner's
        precision when asked (a second copy of every value not held through the fit)."""
        if self.image or self.space != "klein":
            return self.image[f]
        return as_compared(self.klein[f], self.compare_dtype)

    def with_rows(self, rows: tuple[np.ndarray, np.ndarray] | None) -> TreeSpace:
        """A ranks space that reads its values from ``rows``: the training Klein rows it
        was fitted on and their ranks (its own image of them), or from nowhere (None).
        Neither is copied."""
        if self.space != "ranks" or self.klein:
            raise ValueError("only a ranks space that holds no values reads them from rows")
        return dataclasses.replace(self, rows=rows)

    def values(self, f: int) -> np.ndarray:
        """The sorted distinct float64 Klein values of feature ``f`` (``klein[f]``).

        A space that holds none reads them off its ``rows``: rows of one rank
        hold one value (or -0.0 and 0.0, made +0.0 as `fit` does), so each
        value is any row of its rank's, one scatter and no sort; the same
        bits as `fit`'s sorted distinct values.
        """
        if self.klein:
            return self.klein[f]
        if self.rows is None:
            raise ValueError("this ranks space holds neither its values nor rows to read them from")
        Xk, ranks = self.rows
        u = np.empty(self.image[f].size)
        u[ranks[:, f].astype(np.intp) - 1] = _zeroed(Xk[:, f], self.zero_band)
        return _plus_zero(u)

    def transform(self, Xk: np.ndarray) -> np.ndarray:
        """The learner's input (float64) for Klein rows ``Xk``, training rows or not.

        Ranks: a training value's rank, or halfway between the ranks of the
        two training values around it.
        """
        Xk = _zeroed(Xk, self.zero_band)
        if self.space == "klein":
            return Xk
        if self.space == "rapidity":
            return np.arctanh(Xk)
        out = np.empty(Xk.shape, dtype=np.float64)
        for f in range(self.n_features):
            u = self.values(f)
            at = np.searchsorted(u, Xk[:, f])
            hit = np.take(u, np.minimum(at, u.size - 1)) == Xk[:, f]
            out[:, f] = np.where(hit, at + 1.0, at + 0.5)
        return out

    def neighbours(
        self,
        feature: np.ndarray,
        threshold: np.ndarray,
        largest_left: np.ndarray,
        smallest_right: np.ndarray,
        op: Op,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Float64 Klein values of each split's two nearest training rows, node by node.

        ``largest_left``/``smallest_right`` are learner-space values (infinite
        where no row of the node went that way: the learner's ``threshold``
        and ``op`` then locate the split among all training values). Each is
        taken back to the largest (smallest) Klein value with that image;
        ``-inf``/``inf`` where no training value lies on that side.
        """
        n = feature.shape[0]
        lo, hi = np.full(n, -np.inf), np.full(n, np.inf)
        for f in np.unique(feature[feature >= 0]):
            at = np.flatnonzero(feature == f)
            u, v = self.values(f), self.image_of(f)
            reached = np.isfinite(largest_left[at]) & np.isfinite(smallest_right[at])
            below = np.searchsorted(v, threshold[at], side="right" if op == "<=" else "left")
            left = np.where(reached, np.searchsorted(v, largest_left[at], side="right"), below)
            right = np.where(reached, np.searchsorted(v, smallest_right[at], side="left"), below)
            lo[at] = np.where(left > 0, u[np.maximum(left - 1, 0)], -np.inf)
            hi[at] = np.where(right < u.size, u[np.minimum(right, u.size - 1)], np.inf)
        return lo, hi


class KleinPlacer:
    """Places Klein thresholds for learner splits (``place=`` of the threshold correction).

    For each split, the float64 Klein values of its two nearest training
    rows (`TreeSpace.neighbours`) are rounded to ``compare_dtype`` and
    the threshold goes between them by
    `place_thresholds` (``op``, ``threshold_dtype``,
    ``midpoint``), so that every training row stays on its side. Raises
    `ResolutionError` if ``compare_dtype`` cannot separate some
    split's two neighbours. ``float32_separates`` records whether float32
    separates them all (what float32 input keeps), and `margins` each placed
    split with its two neighbours (what the float32 check of the inputs reads).
    """

    def __init__(
        self,
        space: TreeSpace,
        learner_op: Op,
        *,
        op: Op,
        compare_dtype: str,
        threshold_dtype: str,
        midpoint: Midpoint | np.ndarray,
    ) -> None:
        self.space, self.learner_op = space, learner_op
        self.op, self.compare_dtype, self.threshold_dtype = op, compare_dtype, threshold_dtype
        self.midpoint = midpoint
        self.float32_separates = True
        #: Splits whose threshold is not the arithmetic midpoint of its two
        #: neighbours (where a Euclidean learner on Klein coordinates puts it).
        self.n_moved = 0
        self._placed: list[tuple[np.ndarray, ...]] = []

    @property
    def margins(self) -> Margins:
        """Every split placed so far: feature, threshold (in ``threshold_dtype``) and its
        two neighbours' float64 Klein values, in no particular order."""
        parts = (
            list(zip(*self._placed, strict=True)) or [[np.zeros(0, np.int64)]] + [[np.zeros(0)]] * 3
        )
        feature, threshold, lo, hi = (np.concatenate(p) for p in parts)
        return Margins(feature, as_compared(threshold, self.threshold_dtype), lo, hi)

    def __call__(
        self, feature: Array, threshold: Array, largest_left: Array, smallest_right: Array
    ) -> np.ndarray:
        lo, hi = klein = self.space.neighbours(
            feature, threshold, largest_left, smallest_right, self.learner_op
        )
        both = np.isfinite(lo) & np.isfinite(hi)
        lo32, hi32 = as_compared(lo[both], "float32"), as_compared(hi[both], "float32")
        self.float32_separates &= bool(np.all(lo32 < hi32))
        lo, hi = as_compared(lo, self.compare_dtype), as_compared(hi, self.compare_dtype)
        if np.any(lo[both] >= hi[both]):
            raise ResolutionError(self.compare_dtype)
        out = np.zeros(feature.shape[0])
        placed = functools.partial(
            place_thresholds, lo[both], hi[both], op=self.op, threshold_dtype=self.threshold_dtype
        )
        rules = self.midpoint
        if not isinstance(rules, str):  # a rule per feature (input blocks)
            rules = np.asarray(rules)[feature[both]]
            # Codes split as numbers: the learner's own (arithmetic) midpoint.
            rules = np.where(rules == KEEP, "arithmetic", rules)
        out[both] = placed(midpoint=rules)
        self.n_moved += int(np.sum(out[both] != placed(midpoint="arithmetic")))
        # A split with training values on one side only: just past them.
        dt = np.dtype(self.threshold_dtype).type
        only_left = np.isfinite(lo) & ~both
        last = lo[only_left].astype(dt)
        out[only_left] = np.nextafter(last, dt(np.inf)) if self.op == "<" else last
        only_right = np.isfinite(hi) & ~both
        first = hi[only_right].astype(dt)
        out[only_right] = first if self.op == "<" else np.nextafter(first, dt(-np.inf))
        # -0.0 and 0.0 are one training value, so which one a neighbour holds
        # depends on the order rows were seen in. Both route alike; keep +0.0
        # so that every order (partitioned or not) gives the same bits.
        out += 0.0
        z = self.space.zero_band
        if z:
            # The backend reads the zero band as 0: keep the band on one side
            # (its values are one training value, 0, so L <= t < R still holds).
            inside = (feature >= 0) & (out >= -z) & (out < z)
            out[inside] = np.where(hi[inside] > z, z, np.nextafter(-z, -np.inf))
        split = feature >= 0
        self._placed.append((feature[split], out[split], klein[0][split], klein[1][split]))
        return out


@dataclass(frozen=True, eq=False)
class SplitIndex:
    """The Klein thresholds of a fitted model, and the split indices its native model reads.

    ``thresholds[f]``: sorted distinct Klein thresholds (float64 holding
    ``compare_dtype`` values) of feature ``f``; empty if no split reads it.
    """

    compare_dtype: str
    thresholds: tuple[np.ndarray, ...]

    @classmethod
    def from_splits(
        cls, feature: np.ndarray, threshold: np.ndarray, n_features: int, compare_dtype: str
    ) -> SplitIndex:
        """Index of the Klein splits ``k[feature] <= threshold`` (``feature`` -1: leaf)."""
        internal = feature >= 0
        tables = tuple(np.unique(threshold[internal & (feature == f)]) for f in range(n_features))
        return cls(compare_dtype, tables)

    def native_thresholds(self, feature: np.ndarray, threshold: np.ndarray) -> np.ndarray:
        """Split-index thresholds ``j + 1.5`` for Klein splits (leaves: 0)."""
        if max((t.size for t in self.thresholds), default=0) >= 1 << 22:
            raise ValueError(
                "a feature has more than 4 million distinct thresholds: their indices are not "
                "exact in float32. Use fewer or shallower trees."
            )
        out = np.zeros(feature.shape[0])
        for f in np.unique(feature[feature >= 0]):
            at = np.flatnonzero(feature == f)
            out[at] = np.searchsorted(self.thresholds[f], threshold[at]) + 1.5
        return out

    def klein_thresholds(self, feature: np.ndarray, native: np.ndarray) -> np.ndarray:
        """Klein thresholds of split-index thresholds (the inverse of `native_thresholds`)."""
        out = np.zeros(feature.shape[0])
        for f in np.unique(feature[feature >= 0]):
            at = np.flatnonzero(feature == f)
            j = native[at] - 1.5
            index = j.astype(np.int64)
            if np.any(index != j) or np.any(index < 0) or np.any(index >= self.thresholds[f].size):
                raise ValueError(f"feature {f} has a split the split index does not hold")
            out[at] = self.thresholds[f][index]
        return out

    def transform(self, Xk: np.ndarray) -> np.ndarray:
        """Split indices ``1 + #{t < k}`` (float64, exact) of Klein rows ``Xk``.

        ``k`` is rounded to ``compare_dtype`` first, as the graph compares it.
        """
        Xc = as_compared(Xk, self.compare_dtype)
        out = np.empty(Xc.shape, dtype=np.float64)
        for f, table in enumerate(self.thresholds):
            out[:, f] = np.searchsorted(table, Xc[:, f], side="left") + 1.0
        return out
