"""Hyperbolic isolation forests: anomaly scores that follow the geometry, exported exactly.

An isolation forest (Liu, Ting and Zhou, 2008) scores a point by how few
random splits separate it from a random subsample: ``h(x)``, the depth of
its leaf plus ``c(n)`` for the ``n`` training rows left there, averaged over
the trees, gives ``score_samples(x) = -2 ** (-E[h(x)] / c(psi))`` (``psi``
the subsample size), scikit-learn's ``IsolationForest`` definitions. Two
designs of split, both geodesic hyperplanes of hyperbolic space:

``splits="axis"``
    The paper's direct extension: a random Klein coordinate ``k_f`` and a
    threshold ``t`` between the node's smallest and largest ``k_f``.
    ``k_f <= t`` is a geodesic hyperplane orthogonal to the ``f``-th axis
    geodesic through the origin. The origin and the axes are privileged: a
    Lorentz boost of the data changes the scores.

``splits="centred"``
    Isometry-invariant and node-centred (an extended isolation forest in
    hyperbolic space). At each node the rows' Lorentzian centroid
    ``mu = m / sqrt(-<m, m>_L)`` (``m`` their sum on the hyperboloid) is moved
    to the origin by a Lorentz boost ``M``, a direction ``u`` is drawn
    uniformly on the sphere there, a threshold ``s`` along it, and the
    hyperplane ``u . k' <= s`` is mapped back: with ``n = M^T (-s, u)`` it
    is ``n_s . k <= -n_0`` in the original Klein coordinates, an oblique
    split stored with a unit normal, exported as the oblique trees are. The
    law of the trees does not depend on where the data sits: an isometry
    moves the centroid with the data and the boost differs by a rotation,
    which the uniform direction does not see.

``threshold_law`` says how the threshold is drawn between the node's
smallest and largest coordinate ``a < b`` along the split's geodesic:
``"klein"``, uniform in the Klein coordinate (scikit-learn's law on Klein
coordinates), or ``"distance"``, uniform in hyperbolic distance along the
geodesic: ``tanh(U(artanh a, artanh b))``.

With ``splits="axis", threshold_law="klein"`` the forest *is* scikit-learn's
``IsolationForest`` fitted on the Klein coordinates (``estimator_``): same
random draws, same trees, same scores bit for bit. The other designs grow
their trees in hyp2onnx (`_isolation_growth`: level by level, all trees at
once), comparing float64 Klein coordinates (or float64 oblique projections,
`hyp2onnx.ir.projection.project`) with float64 thresholds.

Exactness: each leaf's path length ``(depth + 1 + c(n)) - 1`` is stored in
the leaf (scikit-learn's own expression and order), the forest adds them
tree by tree in float64 (`hyp2onnx.ir.predict_scores`), and the graph
repeats those additions, so the summed path lengths are bit-identical.
``predict`` is decided in path-length space: a point is an outlier iff its
summed path length is below ``path_threshold_``, the smallest float64 sum
for which ``score_samples - offset_ >= 0`` (found at fit by bisection over
the floats); the graph makes the same comparison, so labels are identical.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import OutlierMixin
from sklearn.utils import Tags, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ..errors import FarPointError, FarPointWarning, warn_user
from ..geometry import (
    CENTRED_RADIUS,
    hyperbolic_radius,
    name_far_rows,
    unit_hyperboloid,
)
from ..ir import Ensemble, Model, Task
from ..ir.projection import project
from ..ir.trees import TreeArrays, apply, as_compared
from ._base import GEOMETRY_DEFAULTS, HyperbolicTreeModel, generate_init, input_space
from ._isolation_growth import GrownTrees, IsolationNodes, Streams, grow_forest
from ._weights import checked_weights

__all__ = [
    "HyperbolicIsolationForest",
    "IsolationTree",
    "average_path_length",
    "lorentz_boost_to_origin",
    "path_threshold",
]

SPLITS = ("centred", "axis")
THRESHOLD_LAWS = ("klein", "distance")
#: Training rows (summed over trees) grown together at most. Each row holds 4 d + 4
#: floats, and a level copies them in node order and makes as many again in temporaries:
#: small batches keep a forest's growth near the size of the model it makes, and cost
#: no time (a level's numpy calls are as many; their arrays stay in cache).
_ROWS_AT_ONCE = 1 << 13


def average_path_length(n: Any) -> np.ndarray:
    """``c(n)``: the mean depth of an unsuccessful search in a binary search tree of ``n`` keys.

    scikit-learn's ``_average_path_length`` expression, operation for
    operation (0 for ``n <= 1``, 1 for ``n = 2``).
    """
    n = np.asarray(n, dtype=np.float64)
    out = np.zeros(n.shape)
    big = n > 2
    out[n == 2] = 1.0
    nb = n[big]
    out[big] = 2.0 * (np.log(nb - 1.0) + np.euler_gamma) - 2.0 * (nb - 1.0) / nb
    return out


def lorentz_boost_to_origin(mu: np.ndarray) -> np.ndarray:
    """The Lorentz boost ``M`` with ``M mu = (1, 0, ..., 0)`` for a unit hyperboloid point ``mu``.

    ``M = [[mu_0, -mu_s^T], [-mu_s, I + mu_s mu_s^T / (1 + mu_0)]]``, the inverse of
    the boost that carries the origin to ``mu``; ``M^T J M = J`` with
    ``J = diag(-1, 1, ..., 1)``.
    """
    mu = np.asarray(mu, dtype=np.float64)
    ms = mu[1:]
    d = ms.shape[0]
    M = np.empty((d + 1, d + 1))
    M[0, 0] = mu[0]
    M[0, 1:] = M[1:, 0] = -ms
    block = M[1:, 1:]
    np.multiply(ms[:, None], ms, out=block)  # the outer product, written in place
    block /= 1.0 + float(mu[0])
    block += _identity(d)
    return M


@functools.cache
def _identity(d: int) -> np.ndarray:
    """``np.eye(d)``, made once per dimension and read-only."""
    eye = np.eye(d)
    eye.flags.writeable = False
    return eye


#: Rows whose hyperboloid coordinates `_check_far_rows` makes at once.
_CHECK_ROWS = 1 << 12


def _check_far_rows(points: Callable[[slice], np.ndarray], n: int) -> None:
    """Refuse rows whose radius float64 cannot hold; warn of rows beyond ``CENTRED_RADIUS``.

    ``points(rows)`` gives the hyperboloid rows ``rows`` of the ``n`` training
    rows, read here a block at a time. The centred design computes its
    centroids and frames from the hyperboloid rows at any radius, but routes
    every point by the Klein coordinates of its input, whose ``|k|^2`` lies
    within ``1 / cosh(r)^2`` of 1: beyond radius 17 a point's distance from the
    origin is held to worse than about 0.01, from about 18.7 not at all, and
    such rows are told apart by direction alone (their scores then depend on
    where the embedding put its origin).
    """
    radius, lost = np.empty(n), np.empty(n, dtype=bool)
    for start in range(0, n, _CHECK_ROWS):
        block = slice(start, start + _CHECK_ROWS)
        x = points(block)
        radius[block] = hyperbolic_radius(x)
        lost[block] = ~np.isfinite(x).all(axis=1) | ~np.isfinite(radius[block])
    if lost.any():
        rows = np.flatnonzero(lost)
        error = FarPointError(
            f"{rows.size} training row(s) lie too far from the origin for float64 to hold "
            f"their hyperboloid coordinates: {name_far_rows(rows, radius[rows])}. "
            "Check the input geometry and curvature (Klein points on the unit sphere are at "
            "infinity), or drop those rows."
        )
        error.rows, error.radii = rows.tolist(), radius[rows].tolist()
        raise error
    far = np.flatnonzero(radius > CENTRED_RADIUS)
    if far.size:
        warn_user(
            f"{far.size} training row(s) lie beyond radius {CENTRED_RADIUS:g}, where float64 "
            "Klein coordinates hold a point's distance from the origin to worse than about "
            f"0.01 (and not at all from about 18.7): {name_far_rows(far, radius[far])}. "
            "The forest routes them mostly by direction, so their scores depend on where "
            "the embedding put its origin. Move the data nearer the origin by an isometry "
            "(hyp2onnx.geometry.move_to_origin, to its Lorentzian centroid; the centred "
            "design does not depend on it) to score them fully.",
            FarPointWarning,
        )


def _check_finite_splits(trees: list[IsolationTree], what: str) -> None:
    """FarPointError unless every split of ``trees`` is finite (``what``: "fitted" or "held")."""
    if all(
        np.isfinite(t.threshold).all() and (t.normal is None or np.isfinite(t.normal).all())
        for t in trees
    ):
        return
    if what == "fitted":
        raise FarPointError(
            "A split of the isolation forest is not finite: the training points hold values "
            "float64 cannot carry through the design. Check the input geometry and curvature."
        )
    raise FarPointError(
        "This isolation forest holds a split that is not finite (it was fitted on points "
        "float64 could not hold, by a version that did not refuse them); fit it again."
    )


@dataclass(frozen=True, eq=False)
class IsolationTree(IsolationNodes):
    """One grown isolation tree: node arrays, root 0, children after parents.

    Internal node ``j`` sends a row left iff ``k[feature[j]] <= threshold[j]``
    (axis) or ``project(k, normal[j]) <= threshold[j]`` (centred; ``normal``
    is ``[n_nodes, d]`` with zero rows at leaves, None for axis trees), in
    float64. ``n_node_samples`` counts the training rows (with repeats) that
    reached each node; ``depth`` is 0 at the root.
    """

    @property
    def is_leaf(self) -> np.ndarray:
        return self.left < 0

    def path_lengths(self) -> np.ndarray:
        """Per node: ``(depth + 1 + c(n)) - 1`` (scikit-learn's expression), 0 at internal nodes."""
        value = (
            (self.depth + 1).astype(np.float64) + average_path_length(self.n_node_samples)
        ) - 1.0
        return np.where(self.is_leaf, value, 0.0)

    def columns(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(feature, normals)``: for centred trees internal node ``j`` tests column
        ``feature[j]`` of ``project(k, normals)``, ``normals`` ``[d, n_splits]``."""
        if self.normal is None:
            return self.feature, None
        internal = ~self.is_leaf
        feature = np.where(internal, np.cumsum(internal) - 1, -1).astype(np.int64)
        return feature, np.ascontiguousarray(self.normal[internal].T)

    def arrays(self) -> TreeArrays:
        feature, _ = self.columns()
        return TreeArrays(
            feature, np.where(self.is_leaf, 0.0, self.threshold), self.left, self.right
        )

    def apply(self, k: np.ndarray) -> np.ndarray:
        """Leaf reached by each unit-ball Klein row of ``k`` (float64 comparisons)."""
        _, normals = self.columns()
        values = k if normals is None else project(k, normals)
        return apply(self.arrays(), values, "<=")


def _subsample(r: np.random.RandomState, n: int, psi: int, bootstrap: bool) -> np.ndarray:
    """A tree's ``psi`` training rows of ``n``: drawn with replacement under ``bootstrap``,
    else a uniform subset, sorted (the first ``psi`` distinct of uniform draws when few are
    taken, which spares the permutation of all ``n`` rows ``choice`` makes)."""
    if bootstrap:
        return r.randint(0, n, psi)
    if 4 * psi > n:
        return np.sort(r.choice(n, psi, replace=False))
    drawn = r.randint(0, n, 2 * psi)
    while True:
        _, first = np.unique(drawn, return_index=True)
        if first.size >= psi:
            return np.sort(drawn[np.sort(first)[:psi]])
        drawn = np.concatenate([drawn, r.randint(0, n, psi)])


def _isolation_trees(grown: GrownTrees) -> list[IsolationTree]:
    """The trees of `grow_forest`'s end-to-end arrays, each its own copy."""
    trees, nodes = [], grown.nodes
    for start, stop in zip(grown.offsets[:-1].tolist(), grown.offsets[1:].tolist(), strict=True):
        part = slice(start, stop)
        trees.append(
            IsolationTree(
                feature=nodes.feature[part].copy(),
                threshold=nodes.threshold[part].copy(),
                left=nodes.left[part].copy(),
                right=nodes.right[part].copy(),
                n_node_samples=nodes.n_node_samples[part].copy(),
                depth=nodes.depth[part].copy(),
                normal=None if nodes.normal is None else nodes.normal[part].copy(),
            )
        )
    return trees


def path_threshold(denominator: float, offset: float) -> float:
    """The smallest float64 path-length sum ``S >= 0`` whose score is not below ``offset``.

    ``score(S) = -(2 ** -(S / denominator))`` (scikit-learn's arithmetic);
    a row is an outlier iff ``S < path_threshold``. Found by bisection over
    the bit patterns of non-negative floats (ordered as the floats are).
    ``inf`` if every finite sum scores below ``offset``.
    """

    def outlier(bits: int) -> bool:
        s = np.array([bits], dtype=np.int64).view(np.float64)
        return bool((_scores(s, denominator) - offset)[0] < 0)

    lo, hi = 0, int(np.array([np.inf]).view(np.int64)[0])
    if not outlier(lo):
        return 0.0
    if outlier(hi):
        return math.inf
    while hi - lo > 1:  # outlier(lo) and not outlier(hi)
        mid = (lo + hi) // 2
        if outlier(mid):
            lo = mid
        else:
            hi = mid
    return float(np.array([hi], dtype=np.int64).view(np.float64)[0])


def _scores(total: np.ndarray, denominator: float) -> np.ndarray:
    """``score_samples`` from summed path lengths, as scikit-learn computes it."""
    total = np.asarray(total, dtype=np.float64)
    denominator = np.float64(denominator)
    scores = 2 ** (-np.divide(total, denominator, out=np.ones_like(total), where=denominator != 0))
    return -scores


#: The parameters passed on unchanged to scikit-learn's IsolationForest.
_SKLEARN_PARAMS = (
    "n_estimators",
    "max_samples",
    "contamination",
    "max_features",
    "bootstrap",
    "random_state",
    "n_jobs",
)


class HyperbolicIsolationForest(OutlierMixin, HyperbolicTreeModel):
    """Isolation forest on hyperbolic points, with scikit-learn's ``IsolationForest`` interface.

    Parameters
    ----------
    n_estimators : int, default=100
        Number of isolation trees.
    max_samples : "auto", int or float, default="auto"
        Rows drawn to grow each tree: ``min(256, n_samples)`` ("auto"), a count, or a
        fraction of the rows (scikit-learn's rule). On data with many small clusters
        (embedded hierarchies) give several rows per cluster: each tree then
        sees every cluster's density, not only which clusters it drew
        (``docs/isolation.md`` measures it).
    contamination : "auto" or float in (0, 0.5], default="auto"
        Expected share of outliers; sets ``offset_`` (``-0.5`` for "auto", else
        that percentile of the training scores).
    max_features : int or float, default=1.0
        ``splits="axis"``: Klein coordinates drawn (without replacement) for each tree,
        as scikit-learn does. ``splits="centred"``: the number of axes of the
        node's centred frame a direction is drawn in (the extended isolation
        forest's extension level + 1); below ``d`` the law is no longer
        isometry-invariant.
    bootstrap : bool, default=False
        Draw each tree's rows with replacement.
    random_state : int, RandomState or None, default=None
        Seeds every draw. With ``splits="axis", threshold_law="klein"`` the draws are
        scikit-learn's ``IsolationForest(random_state=...)``'s own.
    n_jobs : int or None, default=None
        Threads growing the trees (the trees do not depend on it).
    splits : {"centred", "axis"}, default="centred"
        The split design (module doc). "centred" is the default, by measurement
        (``benchmarks/bench_isolation.py``, ``docs/isolation.md``): its scores
        hardly move under isometries, where scikit-learn's on Klein
        coordinates degrade far from the origin.
    threshold_law : {"klein", "distance"}, default="klein"
        Uniform in the Klein coordinate along the split's normal (in the node's
        centred frame for "centred"), or uniform in hyperbolic distance along
        the split's geodesic. "klein" is the default by measurement: with
        centred splits it ranks outliers of embedded hierarchies better
        (``docs/isolation.md``).
    input_geometry, curvature, timelike_dim, check_manifold
        As for [`HyperbolicDecisionTreeClassifier`][hyp2onnx.HyperbolicDecisionTreeClassifier].

    Attributes
    ----------
    trees_ : list of IsolationTree
        The grown trees (for ``splits="axis", threshold_law="klein"``, read from
        ``estimator_``, scikit-learn's ``IsolationForest`` on Klein coordinates).
    estimators_samples_ : list of ndarray
        The training rows (indices, with repeats under ``bootstrap``) each tree grew on.
    max_samples_ : int
    offset_ : float
        ``decision_function = score_samples - offset_``.
    path_threshold_ : float
        ``predict`` says -1 (outlier) iff the summed path length is below it.

    Warns
    -----
    FarPointWarning
        ``splits="centred"``: training rows lie beyond radius 17
        (``hyp2onnx.geometry.CENTRED_RADIUS``), where float64 Klein coordinates
        barely hold their distance from the origin; the warning names them.
        Rows float64 cannot hold at all raise ``FarPointError``.
    """

    _parameter_constraints: ClassVar[dict] = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "max_samples": [
            StrOptions({"auto"}),
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0, 1, closed="right"),
        ],
        "contamination": [StrOptions({"auto"}), Interval(Real, 0, 0.5, closed="right")],
        "max_features": [
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0, 1, closed="right"),
        ],
        "bootstrap": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        "splits": [StrOptions(set(SPLITS))],
        "threshold_law": [StrOptions(set(THRESHOLD_LAWS))],
        **{
            k: v
            for k, v in HyperbolicTreeModel._parameter_constraints.items()
            if k in ("input_geometry", "curvature", "timelike_dim", "check_manifold")
        },
    }

    def _make_estimator(self) -> Any:
        from sklearn.ensemble import IsolationForest

        return IsolationForest(**{name: getattr(self, name) for name in _SKLEARN_PARAMS})

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.estimator_type = "outlier_detector"
        tags.target_tags.required = False
        return tags

    @property
    def _uses_sklearn(self) -> bool:
        return self.splits == "axis" and self.threshold_law == "klein"

    # -- training ------------------------------------------------------------

    def fit(self, X: Any, y: Any = None, sample_weight: Any = None, **fit_params: Any):
        """Grow the trees on hyperbolic points ``X`` (``y`` is ignored).

        ``sample_weight`` is passed to scikit-learn for ``splits="axis",
        threshold_law="klein"`` and refused otherwise. No other fit parameters exist.
        """
        if fit_params:
            raise TypeError(f"fit() got unexpected keyword arguments {sorted(fit_params)}")
        self._validate_params()
        X = validate_data(self, X, dtype=np.float64, ensure_all_finite=False)
        k = self._features(X)
        if sample_weight is not None and not self._uses_sklearn:
            raise ValueError(
                "sample_weight is supported with splits='axis', threshold_law='klein' only "
                "(scikit-learn's IsolationForest); leave it out."
            )
        if sample_weight is not None:  # scikit-learn's forest: negative weights are refused
            sample_weight = checked_weights(sample_weight, X, negative_ok=False)
        if self._uses_sklearn:
            self._fit_sklearn(k, sample_weight)
        else:
            self._fit_own(X, k)
        self._denominator = float(len(self.trees_) * average_path_length([self.max_samples_])[0])
        if self.contamination == "auto":
            self.offset_ = -0.5
        else:
            self.offset_ = float(np.percentile(self._score_klein(k), 100.0 * self.contamination))
        self.path_threshold_ = path_threshold(self._denominator, self.offset_)
        return self

    def _fit_sklearn(self, k: np.ndarray, sample_weight: Any) -> None:
        forest = self._make_estimator().fit(k, sample_weight=sample_weight)
        self.estimator_ = forest
        self.max_samples_ = int(forest._max_samples)
        self._samples: list[np.ndarray] | None = None  # scikit-learn draws them when asked
        trees = []
        for tree, features in zip(forest.estimators_, forest.estimators_features_, strict=True):
            t = tree.tree_
            leaf = t.children_left < 0
            feature = np.where(leaf, -1, np.asarray(features)[np.maximum(t.feature, 0)])
            depths = t.compute_node_depths() - 1
            trees.append(
                IsolationTree(
                    feature=feature.astype(np.int64),
                    threshold=np.where(leaf, 0.0, t.threshold),
                    left=t.children_left.astype(np.int64),
                    right=t.children_right.astype(np.int64),
                    n_node_samples=t.n_node_samples.astype(np.int64),
                    depth=np.asarray(depths, dtype=np.int64),
                )
            )
        self.trees_ = trees

    def _n_samples(self, n: int) -> int:
        if isinstance(self.max_samples, str):
            return min(256, n)
        if isinstance(self.max_samples, numbers.Integral):
            if int(self.max_samples) > n:
                warn_user(
                    f"max_samples ({self.max_samples}) is greater than the total number of "
                    f"samples ({n}). max_samples will be set to n_samples for estimation."
                )
                return n
            return int(self.max_samples)
        return max(1, int(self.max_samples * n))

    def _n_features(self, d: int) -> int:
        if isinstance(self.max_features, numbers.Integral):
            if int(self.max_features) > d:
                raise ValueError(
                    f"max_features must be <= n_features ({d}), got {self.max_features}."
                )
            return int(self.max_features)
        return max(1, int(self.max_features * d))

    def _fit_own(self, X: np.ndarray, k: np.ndarray) -> None:
        from joblib import Parallel, delayed, effective_n_jobs

        n, d = k.shape
        self.max_samples_ = psi = self._n_samples(n)
        max_depth = int(np.ceil(np.log2(max(psi, 2))))
        n_features = self._n_features(d)
        rng = check_random_state(self.random_state)
        seeds = rng.randint(np.iinfo(np.int32).max, size=self.n_estimators)
        lorentz = None
        if self.splits == "centred":
            # Hyperboloid rows made when read (those of the trees' samples), never all n.
            geometry = (self.input_geometry, self.curvature, self.timelike_dim)

            def lorentz(rows: Any) -> np.ndarray:
                return unit_hyperboloid(X[rows], *geometry)

            _check_far_rows(lorentz, n)

        def grow(chunk: np.ndarray) -> tuple[list[np.ndarray], GrownTrees]:
            r, samples, features = np.random.RandomState(0), [], []
            for seed in chunk.tolist():
                r.seed(seed)  # the state RandomState(seed) starts in
                samples.append(_subsample(r, n, psi, self.bootstrap))
                axis_subset = self.splits == "axis" and n_features < d
                features.append(
                    np.sort(r.choice(d, n_features, replace=False)) if axis_subset else np.arange(d)
                )
            law, depth, streams = self.threshold_law, max_depth, Streams(r, chunk.tolist())
            grown = grow_forest(
                k,
                lorentz,
                samples,
                features,
                streams,
                law=law,
                max_depth=depth,
                n_directions=n_features,
            )
            return samples, grown

        # trees grow together, a chunk per job (smaller where their rows would take too
        # much memory at once); each tree's draws are its own, so chunks do not matter
        n_chunks = max(effective_n_jobs(self.n_jobs), -(-seeds.size * psi // _ROWS_AT_ONCE))
        chunks = np.array_split(seeds, min(n_chunks, seeds.size))
        grown = Parallel(n_jobs=self.n_jobs, prefer="threads")(delayed(grow)(c) for c in chunks)
        self._samples = [rows for samples, _ in grown for rows in samples]
        self.trees_ = [tree for _, g in grown for tree in _isolation_trees(g)]
        # a guard: finite rows give finite splits, and a model never answers blankly
        _check_finite_splits(self.trees_, "fitted")

    @property
    def estimators_samples_(self) -> list[np.ndarray]:
        """The training rows (indices) each tree grew on.

        The forest grown here keeps them; scikit-learn's forest
        (``splits="axis", threshold_law="klein"``) draws them again from each
        tree's seed when asked, as its own ``estimators_samples_`` does, so a
        fit does not pay for it.
        """
        check_is_fitted(self)
        # (a model pickled before this property kept them under the public name)
        samples = self.__dict__.get("_samples", self.__dict__.get("estimators_samples_"))
        if samples is None:
            return [np.asarray(s) for s in self.estimator_.estimators_samples_]
        return samples

    # -- scoring -------------------------------------------------------------

    @property
    def _compare_dtype(self) -> str:
        # scikit-learn's trees compare float32 values with float64 thresholds.
        return "float32" if self._uses_sklearn else "float64"

    def _path_klein(self, k: np.ndarray) -> np.ndarray:
        """Summed path lengths over the trees, added in tree order in float64."""
        _check_finite_splits(self.trees_, "held")
        values = as_compared(k, self._compare_dtype)
        total = np.zeros(k.shape[0])
        for tree in self.trees_:
            total += tree.path_lengths()[tree.apply(values)]
        return total

    def _score_klein(self, k: np.ndarray) -> np.ndarray:
        return _scores(self._path_klein(k), self._denominator)

    def path_length(self, X: Any) -> np.ndarray:
        """Summed path lengths ``sum_t h_t(x)`` over the trees (``E[h] * n_estimators``)."""
        check_is_fitted(self)
        return self._path_klein(self._klein(X, reset=False))

    def score_samples(self, X: Any) -> np.ndarray:
        """scikit-learn's anomaly score: ``-2 ** (-E[h(x)] / c(max_samples_))``; lower is more abnormal."""
        check_is_fitted(self)
        return _scores(self.path_length(X), self._denominator)

    def decision_function(self, X: Any) -> np.ndarray:
        """``score_samples(X) - offset_``: negative for outliers."""
        return self.score_samples(X) - self.offset_

    def predict(self, X: Any) -> np.ndarray:
        """+1 for inliers, -1 for outliers (summed path length below ``path_threshold_``)."""
        check_is_fitted(self)
        return np.where(self.path_length(X) < self.path_threshold_, -1, 1)

    def apply(self, X: Any) -> np.ndarray:
        """``[n, n_estimators]``: the leaf (tree-local node index) each point reaches in each tree."""
        check_is_fitted(self)
        _check_finite_splits(self.trees_, "held")
        values = as_compared(self._klein(X, reset=False), self._compare_dtype)
        return np.stack([tree.apply(values) for tree in self.trees_], axis=1)

    # -- export --------------------------------------------------------------

    def to_ir(self) -> Model:
        check_is_fitted(self)
        _check_finite_splits(self.trees_, "held")
        centred = self.trees_[0].normal is not None
        arrays, values, normals = [], [], []
        offset = 0
        for tree in self.trees_:
            feature, cols = tree.columns()
            a = tree.arrays()
            if cols is not None:
                a = a._replace(feature=np.where(feature >= 0, feature + offset, -1))
                offset += cols.shape[1]
                normals.append(cols)
            arrays.append(a)
            values.append(tree.path_lengths()[:, None])
        d = int(self.n_features_in_) - (1 if self.input_geometry == "hyperboloid" else 0)
        ensemble = Ensemble.from_trees(
            arrays,
            values,
            op="<=",
            compare_dtype=self._compare_dtype,
            threshold_dtype="float64",
            n_features=d,
            aggregate="sum",
            base_values=np.zeros(1),
            post_transform="identity",
            sum_dtype="float64",
            projection=np.concatenate(normals, axis=1) if centred and offset else None,
        )
        space = input_space(self)
        return Model(
            ensemble=ensemble,
            space=space,
            backend="sklearn-iforest" if self._uses_sklearn else f"isolation-{self.splits}",
            estimator_class=type(self).__name__,
            metadata={
                "task": Task.ANOMALY.value,
                "denominator": repr(self._denominator),
                "offset": repr(float(self.offset_)),
                "path_threshold": repr(float(self.path_threshold_)),
            },
            input_dtype="float64",
        )


# scikit-learn's IsolationForest parameters and their defaults, then ours, then the
# geometry's; the generated __init__ stores each unchanged, as scikit-learn requires.
generate_init(
    HyperbolicIsolationForest,
    (),
    {
        "n_estimators": 100,
        "max_samples": "auto",
        "contamination": "auto",
        "max_features": 1.0,
        "bootstrap": False,
        "random_state": None,
        "n_jobs": None,
        "splits": "centred",
        "threshold_law": "klein",
        **{k: GEOMETRY_DEFAULTS[k] for k in ("input_geometry", "curvature", "timelike_dim")},
        "check_manifold": GEOMETRY_DEFAULTS["check_manifold"],
    },
)
