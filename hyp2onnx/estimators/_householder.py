"""Oblique hyperbolic trees: HHCART on Beltrami-Klein coordinates.

A split ``w . k <= t`` on unit-ball Klein coordinates ``k`` is a geodesic
hyperplane of hyperbolic space for any normal ``w``, so an oblique tree on
``k`` is a hyperbolic tree with arbitrary (not only axis-parallel) geodesic
splits. For a unit normal the projection ``w . k`` is a Klein coordinate
along ``w``, and the threshold goes to the Einstein midpoint of the two
nearest projections, exactly as for axis-parallel splits (docs/math.md, "Oblique splits"; the
paper's "oblique decision trees" extension).

Each node is split as HHCART (Wickramarachchi et al., 2015) does it: for
every class the dominant eigenvector ``v`` of that class's scatter matrix
at the node gives a Householder reflection ``H = I - 2 u u^T / u^T u``
(``u = e_1 - v``, so ``H e_1 = v``), the node's rows are reflected, and the
best axis-parallel split of the reflected rows is a split on one column of
``H``. The node's own axes are candidates too. All candidates are scored at
once by scikit-learn's splitter: a depth-1 decision tree on the projections
onto every candidate normal, weighted by the node's sample weights.
Regression uses target-weighted scatters (see `_regression_directions`).

``directions="hhcart+fisher"`` (the default) adds the reflections onto each
class's Fisher discriminant direction (regression: the least-squares
direction): a class's widest spread is often not the direction that
separates it. On the paper's 8-class mixtures at depth 3 this lifted test
accuracy over plain HHCART by 4 points at d = 8 and 10 points at d = 16
(``benchmarks/bench_oblique.py``); ``"hhcart"`` is the published method.

The plain (Euclidean) oblique trees, `HouseholderTreeClassifier` and
`HouseholderTreeRegressor`, grow on Klein coordinates with each
threshold at the arithmetic midpoint of the nearest projections, as
scikit-learn places its thresholds; `HouseholderBackend` puts them
behind the same `Backend` interface as every library, so the
hyperbolic estimators are corrected and described by the shared code (the
values a split compares are the projections, `HouseholderBackend.compared_values`).

Exactness: the projections are computed by `hyp2onnx.ir.projection.project`
(a fixed left-to-right sum that the ONNX graph repeats operation for
operation). scikit-learn sees those float64 projections rounded to float32;
float32 rounding is monotone, so its partition ``f32(p) <= t`` is also a
partition of the float64 projections with ``max(left) < min(right)``, and the
corrected threshold between them routes every training row of the node
exactly as the splitter did, in float64, in Python and in the graph.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils import Tags, check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from ..correction.midpoints import place_thresholds
from ..ir import Ensemble
from ..ir.projection import project
from ..ir.trees import TreeArrays, apply
from ._base import GEOMETRY_DEFAULTS, HyperbolicClassifierMixin, WrappedParamsModel, generate_init
from ._interface import Array, Backend, Weights

__all__ = [
    "HouseholderBackend",
    "HouseholderTree",
    "HouseholderTreeClassifier",
    "HouseholderTreeRegressor",
    "HyperbolicHouseholderTreeClassifier",
    "HyperbolicHouseholderTreeRegressor",
]


@dataclass(frozen=True, eq=False)
class HouseholderTree:
    """A fitted oblique tree: node arrays, root 0, children after parents.

    Internal node ``j`` sends a row left iff ``project(k, normal[j]) <=
    threshold[j]`` (float64). ``normal`` is ``[n_nodes, d]`` with zero rows at
    leaves; ``value`` holds the leaf class fractions (classifiers) or means
    (regressors), zero rows at internal nodes; ``improvement`` is the weighted
    impurity decrease of each split (zero at leaves).
    """

    normal: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    n_node_samples: np.ndarray
    weighted_n_node_samples: np.ndarray
    improvement: np.ndarray
    depth: np.ndarray

    @property
    def node_count(self) -> int:
        return int(self.threshold.shape[0])

    @property
    def is_leaf(self) -> np.ndarray:
        return self.left < 0

    def columns(self) -> tuple[np.ndarray, np.ndarray]:
        """``(feature, normals)``: internal node ``j`` tests column ``feature[j]``
        of ``project(k, normals)`` (-1 at leaves); ``normals`` is ``[d, n_splits]``."""
        internal = ~self.is_leaf
        feature = np.where(internal, np.cumsum(internal) - 1, -1).astype(np.int64)
        return feature, np.ascontiguousarray(self.normal[internal].T)

    def apply(self, k: np.ndarray) -> np.ndarray:
        """Leaf reached by each unit-ball Klein row of ``k``."""
        feature, normals = self.columns()
        arrays = TreeArrays(feature, self.threshold, self.left, self.right)
        return apply(arrays, project(k, normals), "<=")


@dataclass
class _Split:
    normal: np.ndarray
    threshold: float
    goes_left: np.ndarray
    improvement: float


#: Shrinkage of the within scatter toward its mean eigenvalue in the Fisher and
#: least-squares directions: keeps them finite and stable at small nodes.
_SHRINKAGE = 0.1


def _unit(v: np.ndarray) -> np.ndarray | None:
    """``v / |v|`` with its largest component positive, or None for a zero or non-finite ``v``.

    The sign is fixed because ``H(v)`` and ``H(-v)`` reflect onto different
    bases: an eigenvector's arbitrary sign must not change the candidates.
    """
    norm = np.linalg.norm(v)
    if not np.isfinite(norm) or norm <= 0:
        return None
    return v / (norm if v[np.argmax(np.abs(v))] > 0 else -norm)


def _scatter(k: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``sum w (k - mean)(k - mean)^T`` with the ``w``-weighted mean."""
    centered = k - (w @ k) / w.sum()
    return (centered * w[:, None]).T @ centered


def _dominant_direction(k: np.ndarray, w: np.ndarray) -> np.ndarray | None:
    """Unit eigenvector of the largest eigenvalue of the ``w``-weighted scatter of ``k``."""
    # Identical rows have no direction (their computed scatter is rounding noise).
    if k.shape[0] < 2 or w.sum() <= 0 or not np.ptp(k, axis=0).any():
        return None
    scatter = _scatter(k, w)
    if not np.all(np.isfinite(scatter)) or not np.any(scatter):
        return None
    _, vectors = np.linalg.eigh(scatter)
    return _unit(vectors[:, -1])


def _whitened(scatter: np.ndarray, vectors: list[np.ndarray]) -> list[np.ndarray]:
    """``(S + s I)^-1 v`` for each ``v``, with ``s`` a fixed share of ``S``'s mean eigenvalue."""
    d = scatter.shape[0]
    ridge = _SHRINKAGE * np.trace(scatter) / d
    if not np.isfinite(ridge) or ridge <= 0:
        return [u for u in map(_unit, vectors) if u is not None]
    solved = np.linalg.solve(scatter + ridge * np.eye(d), np.stack(vectors, axis=1))
    return [u for u in map(_unit, solved.T) if u is not None]


def _householder(v: np.ndarray) -> np.ndarray | None:
    """The reflection ``H`` with ``H e_1 = v`` (columns: unit normals), or None if ``v = e_1``."""
    u = _unit(v)
    if u is None:
        return None
    u = -u
    u[0] += 1.0
    uu = u @ u
    if uu <= 1e-24:
        return None
    return np.eye(v.shape[0]) - (2.0 / uu) * np.outer(u, u)


def _classification_directions(
    k: np.ndarray, y: np.ndarray, w: np.ndarray, *, fisher: bool
) -> list[np.ndarray]:
    """HHCART: the dominant eigenvector of each class's scatter at the node.

    With ``fisher``, also each class's Fisher discriminant direction
    ``S_w^-1 (mean_c - mean)`` (``S_w``: pooled within-class scatter, shrunk).
    """
    directions, offsets = [], []
    within = np.zeros((k.shape[1], k.shape[1]))
    mean = (w @ k) / w.sum()
    for c in np.unique(y):
        rows = y == c
        v = _dominant_direction(k[rows], w[rows])
        if v is not None:
            directions.append(v)
        if fisher:
            within += _scatter(k[rows], w[rows])
            offsets.append((w[rows] @ k[rows]) / w[rows].sum() - mean)
    if fisher and len(offsets) > 1:
        directions += _whitened(within, offsets)
    return directions


def _regression_directions(
    k: np.ndarray, y: np.ndarray, w: np.ndarray, *, fisher: bool
) -> list[np.ndarray]:
    """Directions along which the target changes, from target-weighted scatters.

    The cross-scatter ``c = sum w (y - mean y)(k - mean k)`` (the dominant
    eigenvector of the rank-one target-weighted scatter ``c c^T``), and, as
    HHCART's class-conditional scatters, the dominant eigenvectors of the
    scatters of the rows below and above the weighted median target. With
    ``fisher``, also the least-squares direction ``S^-1 c`` (``S`` shrunk).
    """
    total = w.sum()
    directions: list[np.ndarray] = []
    centered = k - (w @ k) / total
    cross = (w * (y - (w @ y) / total)) @ centered
    unit_cross = _unit(cross)
    if unit_cross is not None:
        directions.append(unit_cross)
        if fisher:
            directions += _whitened(_scatter(k, w), [cross])
    # Halves by target value (not by row), so repeated rows and weights agree.
    order = np.argsort(y, kind="stable")
    median = y[order[np.searchsorted(np.cumsum(w[order]), total / 2.0)]]
    below = y <= median
    for rows in (below, ~below):
        v = _dominant_direction(k[rows], w[rows])
        if v is not None:
            directions.append(v)
    return directions


def _candidate_normals(k: np.ndarray, directions: list[np.ndarray]) -> np.ndarray:
    """``[d, m]`` unit normals: the axes, then the columns of each direction's reflection."""
    d = k.shape[1]
    blocks = [np.eye(d)]
    if d > 1:
        for v in directions:
            h = _householder(v)
            if h is not None:
                blocks.append(h)
    return np.ascontiguousarray(np.concatenate(blocks, axis=1))


def _midway(low: float, high: float) -> float:
    """Threshold ``t`` with ``low <= t < high`` at the arithmetic midpoint."""
    # Projections of unit-ball points on a unit normal lie in (-1, 1) up to
    # rounding; a value rounded onto +-1 takes the limit (the endpoint).
    a, b = min(max(low, -1.0), 1.0), min(max(high, -1.0), 1.0)
    if a < b:
        t = float(place_thresholds(np.array([a]), np.array([b]), op="<=", midpoint="arithmetic")[0])
    else:
        t = low / 2.0 + high / 2.0
    return min(max(t, low), float(np.nextafter(high, -np.inf)))


#: Parameters both plain oblique trees take, with their defaults (after ``criterion``).
_TREE_DEFAULTS: dict[str, Any] = {
    "max_depth": None,
    "min_samples_split": 2,
    "min_samples_leaf": 1,
    "min_weight_fraction_leaf": 0.0,
    "min_impurity_decrease": 0.0,
    "directions": "hhcart+fisher",
}


class _HouseholderTreeModel(BaseEstimator):
    """Shared fitting and prediction of the plain oblique trees, on Klein coordinates."""

    _parameter_constraints: ClassVar[dict] = {
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "min_samples_split": [
            Interval(Integral, 2, None, closed="left"),
            Interval(Real, 0.0, 1.0, closed="right"),
        ],
        "min_samples_leaf": [
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0.0, 1.0, closed="neither"),
        ],
        "min_weight_fraction_leaf": [Interval(Real, 0.0, 0.5, closed="both")],
        "min_impurity_decrease": [Interval(Real, 0.0, None, closed="left")],
        "directions": [StrOptions({"hhcart", "hhcart+fisher"})],
        "random_state": ["random_state"],
    }
    _splitter: ClassVar[type]
    _classifier: ClassVar[bool]
    _defaults: ClassVar[dict[str, Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_defaults" not in cls.__dict__:
            return
        # One generated __init__ (every parameter stored unchanged) instead of a copy per class.
        own = {"criterion": cls._defaults["criterion"], **_TREE_DEFAULTS}
        own.update({k: v for k, v in cls._defaults.items() if k != "criterion"})
        generate_init(cls, (), {**own, "random_state": None})

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        return tags

    # -- training ------------------------------------------------------------

    def fit(self, X: Any, y: Any, sample_weight: Any = None):
        """Grow the oblique tree on unit-ball Klein coordinates ``X``.

        Rows of zero ``sample_weight`` are ignored, as scikit-learn's trees
        ignore them; negative weights are rejected.
        """
        self._validate_params()
        k, y = validate_data(self, X, y, dtype=np.float64, y_numeric=not self._classifier)
        w = (
            np.ones(k.shape[0])
            if sample_weight is None
            else _check_sample_weight(sample_weight, k, dtype=np.float64, ensure_non_negative=True)
        )
        if self._classifier and self.class_weight is not None:
            w = w * compute_sample_weight(self.class_weight, y)
        y = self._encode_targets(y)
        rows = np.flatnonzero(w > 0)
        if rows.size == 0:
            raise ValueError("sample_weight must have at least one positive entry.")
        self.tree_ = self._grow(k[rows], y[rows], w[rows], k.shape[0])
        self.n_outputs_ = 1
        return self

    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        return np.asarray(y, dtype=np.float64)

    def _leaf_value(self, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        return np.array([np.average(y, weights=w)])

    def _is_pure(self, y: np.ndarray) -> bool:
        return bool(np.all(y == y[0]))

    def _directions(self, k: np.ndarray, y: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
        return _regression_directions(k, y, w, fisher=self.directions == "hhcart+fisher")

    def _min_counts(self, n_samples: int) -> tuple[int, int]:
        """``(min_samples_split, min_samples_leaf)`` as counts, as scikit-learn resolves them."""
        leaf = self.min_samples_leaf
        if not isinstance(leaf, Integral):
            leaf = int(np.ceil(leaf * n_samples))
        split = self.min_samples_split
        if not isinstance(split, Integral):
            split = max(2, int(np.ceil(split * n_samples)))
        return max(int(split), 2 * int(leaf)), int(leaf)

    def _grow(self, k: np.ndarray, y: np.ndarray, w: np.ndarray, n_samples: int) -> HouseholderTree:
        """Depth-first growth; node ids in preorder (left subtree first), as scikit-learn."""
        rng = check_random_state(self.random_state)
        max_depth = np.iinfo(np.int32).max if self.max_depth is None else self.max_depth
        min_split, min_leaf = self._min_counts(n_samples)
        total_weight = w.sum()
        d = k.shape[1]
        nodes: list[dict[str, Any]] = []
        stack: list[tuple[np.ndarray, int, int, bool]] = [(np.arange(k.shape[0]), 0, -1, True)]
        while stack:
            rows, depth, parent, is_left = stack.pop()
            node_id = len(nodes)
            if parent >= 0:
                nodes[parent]["left" if is_left else "right"] = node_id
            node = {
                "normal": np.zeros(d),
                "threshold": 0.0,
                "left": -1,
                "right": -1,
                "value": self._leaf_value(y[rows], w[rows]),
                "n": rows.size,
                "weight": float(w[rows].sum()),
                "improvement": 0.0,
                "depth": depth,
            }
            nodes.append(node)
            if depth >= max_depth or rows.size < min_split or self._is_pure(y[rows]):
                continue
            split = self._split(
                k[rows], y[rows], w[rows], min_leaf, node["weight"] / total_weight, rng
            )
            if split is None:
                continue
            node.update(
                normal=split.normal,
                threshold=split.threshold,
                improvement=split.improvement,
                value=np.zeros_like(node["value"]),
            )
            stack.append((rows[~split.goes_left], depth + 1, node_id, False))
            stack.append((rows[split.goes_left], depth + 1, node_id, True))

        def column(key: str, dtype: Any = np.float64) -> np.ndarray:
            return np.array([node[key] for node in nodes], dtype=dtype)

        return HouseholderTree(
            normal=np.array([node["normal"] for node in nodes]).reshape(len(nodes), d),
            threshold=column("threshold"),
            left=column("left", np.int64),
            right=column("right", np.int64),
            value=np.array([node["value"] for node in nodes]),
            n_node_samples=column("n", np.int64),
            weighted_n_node_samples=column("weight"),
            improvement=column("improvement"),
            depth=column("depth", np.int64),
        )

    def _split(
        self,
        k: np.ndarray,
        y: np.ndarray,
        w: np.ndarray,
        min_leaf: int,
        weight_fraction: float,
        rng: np.random.RandomState,
    ) -> _Split | None:
        """The best split of one node among the axes and the reflected axes, or None."""
        # scikit-learn states leaf weights and impurity decreases as shares
        # of the whole training weight; a stump's root holds all of its own.
        leaf_weight = self.min_weight_fraction_leaf / weight_fraction
        if leaf_weight > 0.5:
            return None
        normals = _candidate_normals(k, self._directions(k, y, w))
        projections = project(k, normals)
        stump = self._splitter(
            criterion=self.criterion,
            max_depth=1,
            min_samples_leaf=min_leaf,
            min_weight_fraction_leaf=leaf_weight,
            min_impurity_decrease=self.min_impurity_decrease / weight_fraction,
            random_state=rng.randint(np.iinfo(np.int32).max),
        )
        stump.fit(projections, y, sample_weight=w)
        t = stump.tree_
        if t.node_count < 3:
            return None
        p = projections[:, t.feature[0]]
        goes_left = p.astype(np.float32) <= t.threshold[0]
        low, high = float(p[goes_left].max()), float(p[~goes_left].min())
        # The Euclidean midpoint, as scikit-learn places thresholds; the
        # hyperbolic estimators move it (HouseholderBackend, shared correction).
        threshold = _midway(low, high)
        n = t.weighted_n_node_samples
        improvement = n[0] * t.impurity[0] - n[1] * t.impurity[1] - n[2] * t.impurity[2]
        return _Split(
            normal=normals[:, t.feature[0]].copy(),
            threshold=threshold,
            goes_left=goes_left,
            improvement=max(float(improvement), 0.0),
        )

    # -- prediction ----------------------------------------------------------

    def apply(self, X: Any) -> np.ndarray:
        """Index of the leaf each Klein row of ``X`` reaches."""
        check_is_fitted(self)
        return self.tree_.apply(validate_data(self, X, dtype=np.float64, reset=False))

    def _leaf_values(self, X: Any) -> np.ndarray:
        leaves = self.apply(X)
        return self.tree_.value[leaves]

    def get_depth(self) -> int:
        """Depth of the tree (0 for a single leaf)."""
        check_is_fitted(self)
        return int(self.tree_.depth.max())

    def get_n_leaves(self) -> int:
        """Number of leaves."""
        check_is_fitted(self)
        return int(np.sum(self.tree_.is_leaf))

    @property
    def feature_importances_(self) -> np.ndarray:
        """Impurity decrease of each split shared among Klein features by ``w_f^2``.

        For an axis-parallel split this is scikit-learn's importance; an
        oblique split credits each feature with its share of the unit
        normal. Normalised to sum to 1 (all zeros for a single leaf).
        """
        check_is_fitted(self)
        tree = self.tree_
        importances = (tree.improvement[:, None] * tree.normal**2).sum(axis=0)
        total = importances.sum()
        return importances / total if total > 0 else importances


_PARAMS_DOC = """
    Parameters
    ----------
    criterion : <CRITERIA>, default="<DEFAULT>"
        Impurity the splitter minimises (scikit-learn's).
    max_depth : int or None, default=None
        Maximum depth; None grows until leaves are pure or too small.
    min_samples_split : int or float, default=2
        Fewest rows a node needs to be split (a float: fraction of the rows).
    min_samples_leaf : int or float, default=1
        Fewest rows on each side of a split (a float: fraction of the rows).
    min_weight_fraction_leaf : float, default=0.0
        Smallest share of the total sample weight on each side of a split.
    min_impurity_decrease : float, default=0.0
        Split only if the weighted impurity decrease, as a share of the whole
        training weight, is at least this (scikit-learn's definition).
    directions : {"hhcart", "hhcart+fisher"}, default="hhcart+fisher"
<DIRECTIONS><EXTRA>
    random_state : int, RandomState or None, default=None
        Seeds the splitter's tie-breaking between equally good splits.
"""


def _params_doc(criteria: str, default: str, directions: str, extra: str = "") -> str:
    """The parameter section of the two estimators' docstrings."""
    return (
        _PARAMS_DOC.replace("<CRITERIA>", criteria)
        .replace("<DEFAULT>", default)
        .replace("<DIRECTIONS>", directions)
        .replace("<EXTRA>", extra)
    )


class HouseholderTreeClassifier(ClassifierMixin, _HouseholderTreeModel):
    __doc__ = (
        "Oblique decision tree classifier (HHCART) on unit-ball Klein coordinates.\n\n"
        "    Each split is a geodesic hyperplane ``w . k <= t`` found among the node's axes\n"
        "    and the axes reflected onto each class's dominant scatter direction; the\n"
        "    threshold is the midpoint of the nearest projections.\n"
        + _params_doc(
            criteria='{"gini", "entropy", "log_loss"}',
            default="gini",
            directions=(
                '        Directions each node\'s axes are reflected onto. "hhcart": the\n'
                '        dominant eigenvector of each class\'s scatter (HHCART); "hhcart+fisher":\n'
                "        also each class's Fisher direction ``S_w^-1 (mean_c - mean)`` (``S_w``\n"
                "        the pooled within-class scatter, shrunk)."
            ),
            extra='\n    class_weight : dict, list, "balanced" or None, default=None\n'
            "        Class weights multiplied into the sample weights (scikit-learn's rule).",
        )
        + "\n    Attributes\n    ----------\n"
        "    tree_ : HouseholderTree\n        The fitted node arrays.\n"
        "    classes_ : ndarray\n        Class labels, in the order of ``predict_proba``'s columns.\n"
    )

    _classifier = True
    _splitter = DecisionTreeClassifier
    _defaults: ClassVar[dict[str, Any]] = {"criterion": "gini", "class_weight": None}
    _parameter_constraints: ClassVar[dict] = {
        **_HouseholderTreeModel._parameter_constraints,
        "criterion": [StrOptions({"gini", "entropy", "log_loss"})],
        "class_weight": [dict, list, StrOptions({"balanced"}), None],
    }

    def _encode_targets(self, y: np.ndarray) -> np.ndarray:
        check_classification_targets(y)
        self.classes_, encoded = np.unique(y, return_inverse=True)
        return encoded.astype(np.int64)

    def _leaf_value(self, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        counts = np.bincount(y, weights=w, minlength=len(self.classes_))
        return counts / counts.sum()

    def _directions(self, k: np.ndarray, y: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
        return _classification_directions(k, y, w, fisher=self.directions == "hhcart+fisher")

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class fractions of the leaf each point reaches, columns in ``classes_`` order."""
        return self._leaf_values(X)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of `predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """The first class of highest leaf probability for each point."""
        proba = self.predict_proba(X)
        return self.classes_.take(np.argmax(proba, axis=1))


class HouseholderTreeRegressor(RegressorMixin, _HouseholderTreeModel):
    __doc__ = (
        "Oblique decision tree regressor (HHCART) on unit-ball Klein coordinates.\n\n"
        "    Each split is a geodesic hyperplane ``w . k <= t`` found among the node's axes\n"
        "    and the axes reflected onto target-weighted scatter directions; the\n"
        "    threshold is the midpoint of the nearest projections; leaves hold\n"
        "    the weighted mean target.\n"
        + _params_doc(
            criteria='{"squared_error", "friedman_mse"}',
            default="squared_error",
            directions=(
                '        Directions each node\'s axes are reflected onto. "hhcart": the\n'
                "        cross-scatter ``c`` of target and coordinates, and the dominant\n"
                "        scatter eigenvectors of the rows below and above the median target;\n"
                '        "hhcart+fisher": also the least-squares direction ``S^-1 c`` (shrunk).'
            ),
        )
        + "\n    Attributes\n    ----------\n"
        "    tree_ : HouseholderTree\n        The fitted node arrays.\n"
    )

    _classifier = False
    _splitter = DecisionTreeRegressor
    _defaults: ClassVar[dict[str, Any]] = {"criterion": "squared_error"}
    _parameter_constraints: ClassVar[dict] = {
        **_HouseholderTreeModel._parameter_constraints,
        "criterion": [StrOptions({"squared_error", "friedman_mse"})],
    }

    def predict(self, X: Any) -> np.ndarray:
        """Mean training target of the leaf each point reaches."""
        return self._leaf_values(X)[:, 0]


# -- the backend -----------------------------------------------------------------

_PLAIN = (HouseholderTreeClassifier, HouseholderTreeRegressor)


class HouseholderBackend(Backend):
    """The plain oblique trees behind the interface every library's models use.

    A split compares a projection, not a Klein feature: split ``j`` tests
    column ``feature[j]`` of ``project(k, normals)``, so the correction is
    handed those projections (`compared_values`) and corrects each
    threshold among the node's training rows, as for axis-parallel splits.
    """

    name = "hhcart"
    op = "<="
    compare_dtype = "float64"
    threshold_dtype = "float64"
    native = _PLAIN
    feature_splits = False

    @classmethod
    def trusted_types(cls) -> list[type]:
        return [*cls.native, HouseholderTree]

    def fit(
        self, estimator: Any, Xk: Array, y: Array, sample_weight: Weights, **fit_params: Any
    ) -> Any:
        return estimator.fit(Xk, y, sample_weight=sample_weight, **fit_params)

    def training_rows(
        self, fitted: Any, y: np.ndarray, sample_weight: np.ndarray | None
    ) -> list[np.ndarray]:
        # The tree grows on the rows of positive weight (class weights included).
        w = np.ones(np.shape(y)[0]) if sample_weight is None else np.asarray(sample_weight)
        if getattr(fitted, "class_weight", None) is not None:
            w = w * compute_sample_weight(fitted.class_weight, y)
        return [np.flatnonzero(w > 0)]

    def compared_values(self, fitted: Any, Xk: np.ndarray) -> np.ndarray:
        return project(Xk, fitted.tree_.columns()[1])

    def read_trees(self, fitted: Any) -> list[TreeArrays]:
        tree = fitted.tree_
        feature = tree.columns()[0]
        return [
            TreeArrays(feature, np.where(feature >= 0, tree.threshold, 0.0), tree.left, tree.right)
        ]

    def write_thresholds(self, fitted: Any, thresholds: list[np.ndarray]) -> Any:
        (new,) = thresholds
        fitted.tree_ = dataclasses.replace(
            fitted.tree_, threshold=np.where(fitted.tree_.is_leaf, 0.0, new)
        )
        return fitted

    def to_ensemble(self, fitted: Any) -> Ensemble:
        tree = fitted.tree_
        (arrays,) = self.read_trees(fitted)
        value = np.where(tree.is_leaf[:, None], tree.value, 0.0)
        return Ensemble.from_trees(
            [arrays],
            [value],
            op=self.op,
            compare_dtype=self.compare_dtype,
            threshold_dtype=self.threshold_dtype,
            n_features=int(tree.normal.shape[1]),
            aggregate="sum",
            base_values=np.zeros(value.shape[1]),
            post_transform="identity",
            sum_dtype="float64",
            classes=np.asarray(fitted.classes_) if fitted._classifier else None,
            projection=tree.columns()[1],
        )


# -- the hyperbolic estimators ------------------------------------------------------

_HYPERBOLIC_DOC = """
    Fits `{plain}` on Klein coordinates and moves every threshold to the
    Einstein midpoint of the two nearest projections of the node's training rows.

    Parameters
    ----------
    input_geometry, curvature, timelike_dim, midpoint, check_manifold
        As for [`HyperbolicDecisionTreeClassifier`][hyp2onnx.HyperbolicDecisionTreeClassifier].

    Other Parameters
    ----------------
    **params
        Every parameter of `{plain}` (``max_depth``, ``directions``, ...).

    Attributes
    ----------
    estimator_ : {plain}
        The corrected plain tree; ``tree_`` is its node arrays.
"""


class _HyperbolicHouseholderModel(WrappedParamsModel):
    # No tree_space: oblique splits compare projections, fitted on Klein coordinates.
    # No input_blocks: a hyperplane across blocks of different geometry is no geodesic split.
    _own_params = {
        k: v for k, v in GEOMETRY_DEFAULTS.items() if k not in ("tree_space", "input_blocks")
    }

    @property
    def tree_(self) -> HouseholderTree:
        """The fitted (corrected) node arrays."""
        check_is_fitted(self)
        return self.estimator_.tree_

    def apply(self, X: Any) -> np.ndarray:
        """Index of the leaf each point of ``X`` reaches."""
        check_is_fitted(self)
        return self.tree_.apply(self._klein(X, reset=False))

    def get_depth(self) -> int:
        """Depth of the tree (0 for a single leaf)."""
        check_is_fitted(self)
        return self.estimator_.get_depth()

    def get_n_leaves(self) -> int:
        """Number of leaves."""
        check_is_fitted(self)
        return self.estimator_.get_n_leaves()


class HyperbolicHouseholderTreeClassifier(
    HyperbolicClassifierMixin, ClassifierMixin, _HyperbolicHouseholderModel
):
    __doc__ = (
        "Oblique hyperbolic decision tree classifier (HHCART on Klein coordinates).\n"
        + _HYPERBOLIC_DOC.format(plain="HouseholderTreeClassifier")
    )
    _wrapped = HouseholderTreeClassifier


class HyperbolicHouseholderTreeRegressor(RegressorMixin, _HyperbolicHouseholderModel):
    __doc__ = (
        "Oblique hyperbolic decision tree regressor (HHCART on Klein coordinates).\n"
        + _HYPERBOLIC_DOC.format(plain="HouseholderTreeRegressor")
    )
    _wrapped = HouseholderTreeRegressor
