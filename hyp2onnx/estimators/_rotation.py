"""Hyperbolic rotation forests: every tree grown in its own frame, exported exactly.

Hyperbolic embeddings have no privileged axes, yet an axis-parallel tree on
Klein coordinates depends on them. A rotation forest (Rodriguez et al.,
2006) grows each tree on its own rotation of the features; here each tree
``t`` sees the data through an isometry of the hyperboloid

    M_t = diag(1, R_t) B_t,

``B_t`` a Lorentz boost taking a centre ``mu_t`` to the origin and ``R_t``
an orthogonal map of the spatial coordinates there:

``centre="class_subset"`` (default)
    ``mu_t`` is the Lorentzian centroid ``m / sqrt(-<m, m>_L)`` of a random
    subset of the rows: the rows of a random non-empty subset of the classes
    (regressors: all rows), of which ``remove_proportion`` are left out at
    random, as rotation forests draw the rows of their groups.
    ``centre="origin"``: ``B_t = I``.
``rotation="pca"`` (default)
    A Haar-random rotation ``H_t``, then the principal axes of the log-map
    vectors at the centre in random groups of ``group_size`` of its axes
    (each group on its own class subset and row sample, as in the rotation
    forest literature), each axis signed so that the third moment of its
    projections is not negative. Block-diagonal orthonormal bases times
    ``H_t``: ``R_t`` is orthogonal. With one group (``group_size >= d``)
    ``H_t`` drops out and the frame is a function of the data: moving the
    data by an isometry moves every frame with it.
    ``"haar"``: ``R_t`` Haar-random; ``"identity"``: ``R_t = I``.

In the frame, Klein coordinates are linear-fractional in the original ones
(`hyp2onnx.ir.frames`), computed in one fixed order of float64
operations. Each tree is a Fast-HyperDT tree on them: a scikit-learn
decision tree fitted on the tree space of the frame coordinates (``ranks`` by
default, `hyp2onnx.correction.tree_space`) with every threshold moved to
the Einstein midpoint of its two nearest training frame coordinates, by the
shared correction. A split ``k'_j <= t`` is a geodesic hyperplane of the
original space.

The trees are drawn as scikit-learn's ``RandomForestClassifier`` draws them
(the same seeds, bootstrap rows and feature draws; the frames come from a
separate stream), so ``centre="origin", rotation="identity",
bootstrap=True, max_features="sqrt"`` reproduces
``HyperbolicRandomForestClassifier`` with the same ``random_state``, its
predictions bit for bit (near the origin, where no tree needs split indices).

Exactness: the exported graph computes each frame coordinate some split
reads with the same ``Mul``/``Add`` chain and ``Div`` (`hyp2onnx.emit.frames`)
and compares it in float64 with a float64 threshold that routes every
float64 value as the tree does (a float32 comparison ``float32(x) <= t`` is
the float64 comparison ``x <= T`` for the largest ``T`` that rounds to at
most ``t``, `float32_cut`). Frames far from the data can make
float32 input move points across splits: ``input_dtype_`` is "float64" when
rounding the training points to float32 changes the leaf any of them reaches
in any tree, and [`hyp2onnx.to_onnx`][hyp2onnx.to_onnx] then warns on ``dtype="float32"``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin, is_classifier
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._progress import bar
from ..correction import TreeSpace, correct, from_rows
from ..errors import FarPointError
from ..geometry import (
    CENTRED_RADIUS,
    hyperbolic_radius,
    lorentzian_centroid,
    move_to_origin,
    name_far_rows,
    to_klein,
    unit_hyperboloid,
)
from ..ir import Ensemble, Model
from ..ir.frames import Frames, frame_columns, frame_features
from ._base import (
    GEOMETRY_DEFAULTS,
    HyperbolicTreeModel,
    comparison_of,
    generate_init,
    input_space,
)
from ._isolation import lorentz_boost_to_origin
from ._sklearn import SklearnBackend
from ._weights import checked_weights

__all__ = [
    "HyperbolicRotationForestClassifier",
    "HyperbolicRotationForestRegressor",
    "check_frame_precision",
    "draw_frame",
    "float32_cut",
    "haar_rotation",
    "lorentzian_centroid",
]

ROTATIONS = ("pca", "haar", "identity")
CENTRES = ("class_subset", "origin")
ROUTINGS = ("auto", "hyperplanes", "frames")
#: ``routing="auto"`` routes by hyperplanes only when every tree is at most this
#: deep: the exported walk then computes a row's path only, while deeper trees
#: (thousands of splits, each a normal of its own) keep their frames, whose few
#: frame columns every split of a tree shares (docs/rotation.md measures both).
HYPERPLANE_MAX_DEPTH = 8
_MAX_INT = np.iinfo(np.int32).max
#: Mixed into each tree's seed for the frame's own random stream.
_FRAME_STREAM = 0x726F74


#: Rows a fit works on at once where it needs a few values per row (the
#: unit-hyperboloid rows and log-map vectors of a frame, the float32 and routing
#: checks of a tree): temporaries of a few hundred kilobytes each.
_BLOCK_ROWS = 1 << 12


def _row_blocks(n: int) -> list[slice]:
    """``[0, n)`` in consecutive blocks of `_BLOCK_ROWS` rows."""
    return [slice(start, min(start + _BLOCK_ROWS, n)) for start in range(0, n, _BLOCK_ROWS)]


def _tree_rows(tree_weight: np.ndarray | None, n: int) -> np.ndarray:
    """The rows a tree is grown on: those of non-zero weight (None: all ``n``)."""
    return np.arange(n) if tree_weight is None else np.flatnonzero(tree_weight != 0)


def haar_rotation(d: int, rng: np.random.Generator) -> np.ndarray:
    """A Haar-random orthogonal ``d x d`` matrix (QR of a Gaussian, signs fixed)."""
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


def _log_at_origin(x: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """Log-map vectors at the origin of unit-hyperboloid rows ``x`` at ``distance`` from it."""
    spatial = x[:, 1:]
    norm = np.linalg.norm(spatial, axis=1, keepdims=True)
    return np.divide(spatial * distance[:, None], norm, out=np.zeros_like(spatial), where=norm > 0)


class _Rows:
    """The rows a frame may be drawn from (None: all ``n``, no index array held), their
    classes looked up once per tree."""

    def __init__(self, y: np.ndarray | None, rows: np.ndarray | None, n: int = 0) -> None:
        self.rows, self.n = rows, n
        self.y = None if y is None else y if rows is None else y[rows]
        self.classes = None if self.y is None else np.unique(self.y)

    def sample(self, rng: np.random.Generator, remove: float) -> np.ndarray:
        """Rows of a random non-empty class subset (all rows without classes), less ``remove``."""
        rows = np.arange(self.n) if self.rows is None else self.rows
        if self.y is not None:
            assert self.classes is not None
            classes = self.classes
            chosen = rng.choice(classes, size=int(rng.integers(1, classes.size + 1)), replace=False)
            wanted = np.zeros(int(classes[-1]) + 1, dtype=bool)  # encoded classes: 0 .. C - 1
            wanted[chosen] = True
            rows = rows[wanted[self.y]]
        keep = max(1, int(round((1.0 - remove) * rows.size)))
        return np.sort(rng.choice(rows, size=keep, replace=False))


def _log_vectors(
    points: Callable[[Any], np.ndarray], n: int, d: int, mu: np.ndarray | None
) -> np.ndarray:
    """``[n, d]`` log-map vectors at ``mu`` (None: the origin) of the rows ``points`` gives,
    computed a block of rows at a time (each row's by the same operations as all at once)."""
    out = np.empty((n, d))
    for rows in _row_blocks(n):
        x = points(rows)
        if mu is None:
            moved, distance = x, np.arcsinh(np.linalg.norm(x[:, 1:], axis=1))
        else:
            moved, distance = move_to_origin(x, mu)
        out[rows] = _log_at_origin(moved, distance)
    return out


class _Points:
    """The training points' unit-hyperboloid rows, made when asked for (by index or
    slice), never all at once, each from its own input row as `unit_hyperboloid`
    of the whole input makes it; the least and largest ``x_0`` (NaN if any is)
    kept for the frames' precision check."""

    def __init__(self, X: np.ndarray, d: int, geometry: tuple[str, float, int]) -> None:
        self.X, self.geometry, self.shape = X, geometry, (X.shape[0], d + 1)

    @functools.cached_property
    def x0_ends(self) -> np.ndarray:
        """Each block's least and largest ``x_0`` (made on first use: a pass over the rows)."""
        ends = [(x0.min(), x0.max()) for b in _row_blocks(self.shape[0]) for x0 in [self(b)[:, 0]]]
        return np.array(ends).reshape(-1)  # np.min/np.max: NaN if any x_0 is NaN

    def __call__(self, rows: Any) -> np.ndarray:
        """The rows ``rows`` (a slice or an index array), made a block at a time."""
        if isinstance(rows, slice):
            start, stop, _ = rows.indices(self.shape[0])
            if stop - start <= _BLOCK_ROWS and rows.step in (None, 1):
                return unit_hyperboloid(self.X[rows], *self.geometry)
            rows = np.arange(self.shape[0])[rows]
        out = np.empty((len(rows), self.shape[1]))
        for block in _row_blocks(len(rows)):
            out[block] = unit_hyperboloid(self.X[rows[block]], *self.geometry)
        return out

    def check_precision(self, M: np.ndarray, **names: str) -> None:
        """`check_frame_precision` of ``M`` on every row, and where it fails the same
        call on the whole rows (its error). Its test ``x_0 M_00 <= cosh(17)^2`` holds
        on every row iff it holds at the least and the largest ``x_0``: a product
        with one number, correctly rounded, is monotone in the other (NaN fails)."""
        with np.errstate(over="ignore", invalid="ignore"):
            scale = np.array([self.x0_ends.min(), self.x0_ends.max()]) * float(M[0, 0])
        if not (np.isfinite(M).all() and np.all(scale <= math.cosh(CENTRED_RADIUS) ** 2)):
            check_frame_precision(M, self(slice(None)), **names)


def _pca_axes(v: np.ndarray, *, overwrite: bool = False) -> np.ndarray:
    """Columns: principal axes of the rows ``v``, by decreasing variance, third moment >= 0.

    ``overwrite``: centre ``v`` in place (the caller's scratch array), the same values
    with one ``n x d`` temporary less.
    """
    mean = v.mean(axis=0)
    centred = np.subtract(v, mean, out=v if overwrite else None)
    _, vectors = np.linalg.eigh(centred.T @ centred)
    vectors = vectors[:, ::-1]
    projections = centred @ vectors
    np.power(projections, 3, out=projections)  # ``** 3`` in place: one n x d temporary less
    skew = projections.sum(axis=0)
    return vectors * np.where(skew < 0, -1.0, 1.0)


def draw_frame(
    points: Callable[[Any], np.ndarray],
    shape: tuple[int, int],
    y: np.ndarray | None,
    rows: np.ndarray | None,
    *,
    centre: str,
    rotation: str,
    group_size: int,
    remove_proportion: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """One tree's frame ``M = diag(1, R) B`` (``(d + 1) x (d + 1)``; module doc).

    ``points`` gives the ``shape`` unit-hyperboloid rows by index or slice
    ([unit_hyperboloid][hyp2onnx.geometry.unit_hyperboloid] of the input, never
    of Klein rows, which lose far points' radii; ``x.__getitem__`` of a whole
    array), ``y`` the encoded classes (None for regression), ``rows`` the rows
    the frame may be drawn from (None: every row). The centroid and the rows
    seen from it are computed without cancellation
    ([lorentzian_centroid][hyp2onnx.geometry.lorentzian_centroid],
    [move_to_origin][hyp2onnx.geometry.move_to_origin]), so the frame follows
    the data at any radius the input holds. Rows are made a block at a time:
    only the log-map vectors (``n x d``) and their product with ``H`` are
    whole, the one product the whole computation made, bit for bit.
    """
    n, d = shape[0], shape[1] - 1
    B = np.eye(d + 1)
    mu = None
    pool = _Rows(y, rows, n)
    if centre == "class_subset":
        mu = lorentzian_centroid(points(pool.sample(rng, remove_proportion)))
        B = lorentz_boost_to_origin(mu)
    if rotation == "identity":
        R = np.eye(d)
    elif rotation == "haar":
        R = haar_rotation(d, rng)
    else:
        H = haar_rotation(d, rng)
        # Log-map vectors at the centre, in H's axes: the product of the whole array
        # (a BLAS product's rows depend on how many rows it is given).
        v = _log_vectors(points, n, d, mu) @ H.T
        order = rng.permutation(d)
        axes = []
        for start in range(0, d, group_size):
            group = order[start : start + group_size]
            picked = pool.sample(rng, remove_proportion)
            basis = _pca_axes(v[np.ix_(picked, group)])
            for j in range(basis.shape[1]):
                axis = np.zeros(d)
                axis[group] = basis[:, j]
                axes.append(axis @ H)
        R = np.array(axes)
    M = np.eye(d + 1)
    M[1:, :] = R @ B[1:, :]
    M[0, :] = B[0, :]
    return M


def check_frame_precision(
    M: np.ndarray,
    x: np.ndarray,
    *,
    frame: str = "a tree's frame",
    rows_are: str = "training row(s)",
) -> None:
    """Refuse a frame whose coordinates float64 cannot hold for some row of ``x`` (FarPointError).

    A frame coordinate is a ratio of dot products of ``M``'s rows with a
    point's coordinates; the denominator, ``cosh d(x, c) / x_0``, comes out
    of a sum of terms ``cosh(r) cosh(r_c)`` times larger (``r`` the point's
    radius, ``r_c`` the frame centre's), so it carries an error of about
    ``2^-53 cosh(r) cosh(r_c)``. Past ``cosh(CENTRED_RADIUS)^2`` (a point and
    a centre both at radius 17) the frame coordinates, and the trees grown on
    them, would depend on where the embedding put its origin; from about
    ``cosh(18.4)^2`` they can be infinite or of the wrong sign.
    """
    centre = float(M[0, 0])
    with np.errstate(over="ignore", invalid="ignore"):
        scale = x[:, 0] * centre
    bad = ~(scale <= math.cosh(CENTRED_RADIUS) ** 2)  # NaN is bad too
    if not np.isfinite(M).all():
        bad[:] = True
    if not bad.any():
        return
    rows = np.flatnonzero(bad)
    radii = hyperbolic_radius(x[rows])
    centre_radius = math.acosh(centre) if math.isfinite(centre) and centre >= 1 else math.inf
    error = FarPointError(
        f"{rows.size} {rows_are} lie too far from the origin for float64 to hold their "
        f"coordinates in {frame}, centred at radius {centre_radius:.1f}: "
        f"{name_far_rows(rows, radii)}. Frame coordinates are computed to about "
        f"2^-53 cosh(r) cosh(r_centre), which must stay below 2^-53 cosh({CENTRED_RADIUS:g})^2 "
        "(about 0.016; a point and a centre both at radius 17); beyond it predictions would "
        "depend on where the embedding put its origin. Move the data nearer the origin by "
        "an isometry (hyp2onnx.geometry.move_to_origin, to its Lorentzian centroid), or drop "
        "those rows."
    )
    error.rows, error.radii = rows.tolist(), radii.tolist()
    raise error


def float32_cut(threshold: np.ndarray) -> np.ndarray:
    """The largest float64 ``T`` with ``float32(x) <= t`` iff ``x <= T``, for each ``t``.

    ``f``, the largest float32 not above ``t``, and the next float32 ``g``:
    a float64 ``x`` rounds (to nearest, ties to even) to at most ``f`` iff
    ``x`` is below their midpoint, or on it when ``f`` is the even one. The
    midpoint of two float32 numbers is exact in float64.
    """
    t = np.asarray(threshold, dtype=np.float64)
    f = t.astype(np.float32)
    f = np.where(f.astype(np.float64) > t, np.nextafter(f, np.float32(-np.inf)), f)
    g = np.nextafter(f, np.float32(np.inf))
    mid = (f.astype(np.float64) + g.astype(np.float64)) / 2.0
    even = (f.view(np.uint32) & 1) == 0
    return np.where(even, mid, np.nextafter(mid, -np.inf))


#: The trees' own parameters (scikit-learn's names and defaults), after ``criterion``.
_TREE_DEFAULTS: dict[str, Any] = {
    "max_depth": None,
    "min_samples_split": 2,
    "min_samples_leaf": 1,
    "min_weight_fraction_leaf": 0.0,
    "max_features": None,
    "max_leaf_nodes": None,
    "min_impurity_decrease": 0.0,
}
_TREE_PARAMS = ("criterion", *_TREE_DEFAULTS)


class _RotationForest(HyperbolicTreeModel):
    """Shared fitting, prediction and export of the two rotation forests."""

    _tree: ClassVar[Any]  #: the scikit-learn tree class (its _parameter_constraints are read)
    _defaults: ClassVar[dict[str, Any]]
    _parameter_constraints: ClassVar[dict] = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "group_size": [Interval(Integral, 1, None, closed="left")],
        "remove_proportion": [Interval(Real, 0.0, 1.0, closed="left")],
        "rotation": [StrOptions(set(ROTATIONS))],
        "centre": [StrOptions(set(CENTRES))],
        "routing": [StrOptions(set(ROUTINGS))],
        "bootstrap": ["boolean"],
        "max_samples": [
            None,
            Interval(Integral, 1, None, closed="left"),
            Interval(Real, 0.0, 1.0, closed="right"),
        ],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        **{
            k: v
            for k, v in HyperbolicTreeModel._parameter_constraints.items()
            if k != "input_blocks"
        },
    }

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_defaults" not in cls.__dict__:
            return
        cls._parameter_constraints = {
            **{k: v for k, v in cls._tree._parameter_constraints.items() if k in _TREE_PARAMS},
            **_RotationForest._parameter_constraints,
            **(
                {"class_weight": [dict, list, StrOptions({"balanced"}), None]}
                if "class_weight" in cls._defaults
                else {}
            ),
        }
        own = {
            "n_estimators": 100,
            "group_size": 3,
            "remove_proportion": 0.5,
            "rotation": "pca",
            "centre": "class_subset",
            "routing": "auto",
            "criterion": cls._defaults["criterion"],
            **_TREE_DEFAULTS,
            "bootstrap": False,
            "max_samples": None,
            **{k: v for k, v in cls._defaults.items() if k != "criterion"},
            "random_state": None,
            "n_jobs": None,
            **{k: v for k, v in GEOMETRY_DEFAULTS.items() if k != "input_blocks"},
        }
        generate_init(cls, (), own)

    def _make_estimator(self, random_state: Any = None) -> Any:
        return self._tree(
            **{name: getattr(self, name) for name in _TREE_PARAMS}, random_state=random_state
        )

    # -- training ------------------------------------------------------------

    def fit(self, X: Any, y: Any, sample_weight: Any = None, **fit_params: Any):
        """Grow every tree in its own frame on hyperbolic points ``X`` and correct it."""
        if fit_params:
            raise TypeError(
                f"{type(self).__name__}.fit takes no fit parameters, got {sorted(fit_params)}."
            )
        from joblib import Parallel, delayed

        self._validate_params()
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=False)
        if sample_weight is not None:  # scikit-learn trees: negative weights are refused
            sample_weight = checked_weights(sample_weight, X, negative_ok=False)
        k = self._features(X)
        n = k.shape[0]
        y_fit, weight, classes = self._targets(y, sample_weight)
        n_draw = self._n_draw(n, weight)
        # The rows the tree spaces are fitted on: those of non-zero sample weight.
        # None: every row (no index array of n rows held through the fit).
        fitted_on = None if sample_weight is None else np.flatnonzero(sample_weight != 0)
        if fitted_on is not None and fitted_on.size in (0, n):
            fitted_on = None
        # One seed per tree, drawn as scikit-learn's forests draw them.
        rng = check_random_state(self.random_state)
        seeds = [int(rng.randint(_MAX_INT)) for _ in range(self.n_estimators)]
        x = _Points(X, k.shape[1], (self.input_geometry, self.curvature, self.timelike_dim))

        def one(seed: int) -> tuple:
            return self._grow_in_frame(seed, x, k, y_fit, classes, weight, n_draw, fitted_on)

        # On a terminal, a bar counts the trees grown (silent elsewhere).
        parallel = Parallel(n_jobs=self.n_jobs, prefer="threads", return_as="generator")
        grown = []
        with bar(len(seeds), "growing rotation trees", unit="trees", unit_scale=False) as shown:
            for tree in parallel(delayed(one)(s) for s in seeds):
                grown.append(tree)
                shown.update()
        self.frames_ = [g[0] for g in grown]
        self.estimators_ = [g[1] for g in grown]
        self.split_indices_ = [g[2] for g in grown]
        self.corrections_ = [g[3] for g in grown]
        self.n_outputs_ = 1
        self.hyperplanes_ = [self._hyperplanes_of(t) for t in range(len(self.estimators_))]
        self.routing_ = self._choose_routing(k)
        self.input_dtype_ = "float32" if self._float32_keeps(X, k) else "float64"
        return self

    def _targets(
        self, y: np.ndarray, sample_weight: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """The fitted targets, the weights with ``class_weight`` applied, and the class
        codes the frames are drawn with (None for a regressor)."""
        if not is_classifier(self):
            return np.asarray(y, dtype=np.float64), sample_weight, None
        check_classification_targets(y)
        self.classes_, y_fit = np.unique(y, return_inverse=True)
        weight = sample_weight
        if self.class_weight is not None:
            expanded = compute_sample_weight(self.class_weight, y)
            weight = expanded if weight is None else weight * expanded
        return y_fit, weight, y_fit

    def _n_draw(self, n: int, weight: np.ndarray | None) -> int:
        """Rows each tree's bootstrap draws (scikit-learn's ``max_samples`` rule)."""
        if not self.bootstrap and self.max_samples is not None:
            raise ValueError("max_samples needs bootstrap=True (as in scikit-learn's forests).")
        if not (self.bootstrap and self.max_samples is not None):
            return n
        if isinstance(self.max_samples, Integral):
            return int(self.max_samples)
        total = n if weight is None else float(weight.sum())
        return max(int(self.max_samples * total), 1)

    def _grow_in_frame(
        self,
        seed: int,
        x: _Points,
        k: np.ndarray,
        y_fit: np.ndarray,
        classes: np.ndarray | None,
        weight: np.ndarray | None,
        n_draw: int,
        fitted_on: np.ndarray | None,
    ) -> tuple:
        """One tree: its bootstrap draw, its Lorentz frame, then the tree grown and
        corrected on the frame's coordinates (``(frame, tree, split indices, corrections)``)."""
        n = k.shape[0]
        if self.bootstrap:
            r = np.random.RandomState(seed)
            if weight is None:
                drawn = np.asarray(r.randint(0, n, n_draw))
            else:
                drawn = np.asarray(r.choice(n, n_draw, replace=True, p=weight / np.sum(weight)))
            tree_weight: np.ndarray | None = np.bincount(drawn.astype(np.int32), minlength=n)
        else:
            tree_weight = weight
        M = draw_frame(
            x,
            x.shape,
            classes,
            None if tree_weight is None else _tree_rows(tree_weight, n),
            centre=self.centre,
            rotation=self.rotation,
            group_size=int(self.group_size),
            remove_proportion=float(self.remove_proportion),
            rng=np.random.default_rng((seed, _FRAME_STREAM)),
        )
        x.check_precision(M)
        return (M, *self._grow(k, M, y_fit, tree_weight, fitted_on, seed))

    def _choose_routing(self, k: np.ndarray) -> str:
        """``"hyperplanes"`` or ``"frames"``, as ``routing`` asks, checked on the training rows.

        Hyperplane routing is a model of its own: a row within a rounding of a
        split can fall on the other side of ``w . k <= c`` than of
        ``k' <= T``. It is taken only where every training row reaches the
        same leaf of every tree both ways, so the fitted leaves stay those
        the trees were grown and corrected with; ``"auto"`` otherwise keeps
        the frames (for the whole forest), ``"hyperplanes"`` raises.
        """
        if self.routing == "frames":
            return "frames"
        if self.routing == "auto" and any(
            tree.get_depth() > HYPERPLANE_MAX_DEPTH for tree in self.estimators_
        ):
            return "frames"
        for t, tree in enumerate(self.estimators_):  # a tree at a time, in blocks of rows
            moved = np.concatenate(
                [
                    rows.start + np.flatnonzero(framed != self._hyperplane_leaves(k[rows], t))
                    for rows in _row_blocks(k.shape[0])
                    for framed in [tree.apply(self._compared(k[rows], t))]
                ]
            )
            if moved.size == 0:
                continue
            if self.routing == "auto":
                return "frames"
            raise ValueError(
                f"routing='hyperplanes': {moved.size} training rows (first: row {moved[0]}) "
                f"reach another leaf of tree {t} through its split hyperplanes than through "
                "its frame coordinates (they lie within a rounding of a split); fit with "
                "routing='frames' or routing='auto' to keep the frames."
            )
        return "hyperplanes"

    def _split_thresholds(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Tree ``t``'s frame columns and float64 thresholds: node ``j`` tests ``k'_col <= T``."""
        tree = self.estimators_[t]
        (a,) = SklearnBackend().read_trees(tree)
        internal = a.feature >= 0
        index = self.split_indices_[t]
        if index is None:  # the tree compares float32(k') with float64 thresholds
            threshold = float32_cut(a.threshold)
        else:
            threshold = index.klein_thresholds(a.feature, a.threshold)
        return np.where(internal, a.feature, -1), np.where(internal, threshold, 0.0)

    def _hyperplanes_of(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Tree ``t``'s splits as hyperplanes ``w . k <= c`` of Klein coordinates.

        ``k'_j <= T`` with ``k'_j = (M_j . (1, k)) / (M_0 . (1, k))`` and a
        positive denominator is ``(M_j - T M_0) . (1, k) <= 0``: ``w`` is that
        normal's Klein part and ``c = -(M_j0 - T M_00)``, each rounded once
        from the float64 products. Returns ``[d, n_nodes]`` normals and
        ``[n_nodes]`` offsets, zero at leaves.
        """
        M = self.frames_[t]
        column, threshold = self._split_thresholds(t)
        internal = column >= 0
        rows = M[1 + np.where(internal, column, 0)]  # [n_nodes, d + 1]
        normal = rows - threshold[:, None] * M[0][None, :]
        normal[~internal] = 0.0
        return np.ascontiguousarray(normal[:, 1:].T), -normal[:, 0]

    def _hyperplane_leaves(self, k: np.ndarray, t: int) -> np.ndarray:
        """``[n]``: the leaf of tree ``t`` each Klein row reaches by hyperplane routing.

        Node by node along each row's path: ``w . k`` added in feature order
        (``k_0 w_0``, then ``+ k_1 w_1``, ...: `hyp2onnx.ir.projection.project`'s
        order, which the exported walk repeats), then ``<= c`` goes left.
        """
        normals, offsets = self.hyperplanes_[t]
        tree = self.estimators_[t].tree_
        node = np.zeros(k.shape[0], dtype=np.int64)
        for _ in range(tree.max_depth):
            rows = np.flatnonzero(tree.children_left[node] >= 0)
            if rows.size == 0:
                break
            at = node[rows]
            w = normals[:, at]
            p = k[rows, 0] * w[0]
            for f in range(1, k.shape[1]):
                p += k[rows, f] * w[f]
            node[rows] = np.where(p <= offsets[at], tree.children_left[at], tree.children_right[at])
        return node

    def _leaves(self, k: np.ndarray, every: np.ndarray | None = None) -> np.ndarray:
        """``[n, n_estimators]`` leaves of Klein rows ``k`` by the fitted routing."""
        if getattr(self, "routing_", "frames") == "hyperplanes":  # pickles before routing_
            return np.stack(
                [self._hyperplane_leaves(k, t) for t in range(len(self.estimators_))], axis=1
            )
        every = self._frame_features(k) if every is None else every
        return np.stack(
            [
                tree.apply(np.ascontiguousarray(self._tree_features(k, t, every), np.float32))
                for t, tree in enumerate(self.estimators_)
            ],
            axis=1,
        )

    def _frame_input(
        self, k: np.ndarray, M: np.ndarray, fitted_on: np.ndarray | None
    ) -> tuple[TreeSpace, np.ndarray]:
        """The tree space of frame ``M``'s coordinates of Klein rows ``k``, and its float32
        image of them: what the tree trains on.

        In ranks on every row (the default), the frame coordinates come a
        column at a time and the ranks straight as float32 (exact below 2**24
        rows): no ``n x d`` float64 array. Otherwise the coordinates are made
        whole and their image cast in blocks. The same numbers either way.
        """
        frames = Frames.from_lorentz([M])
        dtype = SklearnBackend.compare_dtype
        if fitted_on is None and self.tree_space == "ranks":
            done = TreeSpace.ranks_of_columns(
                frame_columns(k, frames), k.shape, dtype, compact=True
            )
            if done is not None:
                return done
        kf = frame_features(k, frames)
        if fitted_on is None:
            space, Xt = TreeSpace.fit_transform(kf, self.tree_space, dtype, compact=True)
            return space, np.ascontiguousarray(Xt, dtype=np.float32)
        space = TreeSpace.fit(kf[fitted_on], self.tree_space, dtype)
        compared = np.empty(kf.shape, dtype=np.float32)
        for rows in _row_blocks(kf.shape[0]):
            compared[rows] = space.transform(kf[rows])
        return space, compared

    def _grow(
        self,
        k: np.ndarray,
        M: np.ndarray,
        y: np.ndarray,
        tree_weight: np.ndarray | None,
        fitted_on: np.ndarray | None,
        seed: int,
    ) -> tuple[Any, Any, Any]:
        """One Fast-HyperDT tree on frame ``M``'s coordinates of ``k``: fit, then correct."""
        backend = SklearnBackend()
        space, compared = self._frame_input(k, M, fitted_on)
        tree = self._make_estimator(seed)
        # As scikit-learn's forests grow their trees: the inputs are float32
        # and one output already, so the tree skips validating them again
        # (its missing-value mask still computed as its fit would).
        tree._fit(
            compared,
            y,
            sample_weight=tree_weight,
            check_input=False,
            missing_values_in_feature_mask=tree._compute_missing_values_in_feature_mask(compared),
        )
        trees = backend.read_trees(tree)
        comparison = comparison_of(backend)
        rows = _tree_rows(tree_weight, k.shape[0])  # made again here: not held through the fit
        neighbours = from_rows(trees, compared, [rows], comparison, self.midpoint)
        done = correct(trees, space, neighbours, comparison, self.midpoint)
        return backend.write_thresholds(tree, done.thresholds), done.split_index, done.report

    def _float32_keeps(self, X: np.ndarray, k: np.ndarray) -> bool:
        """Whether the training points rounded to float32 reach the same leaves in every tree.

        A tree compares float32 values: a row whose float32 tree features are
        unchanged by the rounding reaches the same leaf, so only the others
        are routed.
        """
        geometry = (self.input_geometry, self.curvature, self.timelike_dim)
        blocks = _row_blocks(X.shape[0])
        rounded = (X[rows].astype(np.float32) for rows in blocks)
        if all(np.array_equal(r.astype(np.float64), X[rows]) for r, rows in zip(rounded, blocks)):
            return True
        if not all(np.isfinite(X[rows].astype(np.float32)).all() for rows in blocks):
            # A value float32 cannot hold: the whole array's error, naming its rows.
            to_klein(X.astype(np.float32).astype(np.float64), *geometry, check=False)
        hyperplanes = getattr(self, "routing_", "frames") == "hyperplanes"  # pickles before
        for rows in blocks:  # a block of rows at a time, tree by tree
            r32 = X[rows].astype(np.float32).astype(np.float64)
            k32, kb = to_klein(r32, *geometry, check=False), k[rows]
            if hyperplanes:
                moved = np.flatnonzero(np.any(k32 != kb, axis=1))
                if not np.array_equal(self._leaves(kb[moved]), self._leaves(k32[moved])):
                    return False
                continue
            for t, tree in enumerate(self.estimators_):
                a, b = self._tree_features(kb, t), self._tree_features(k32, t)
                moved = np.flatnonzero(np.any(a.astype(np.float32) != b.astype(np.float32), axis=1))
                if moved.size and not np.array_equal(
                    tree.tree_.apply(np.ascontiguousarray(a[moved], dtype=np.float32)),
                    tree.tree_.apply(np.ascontiguousarray(b[moved], dtype=np.float32)),
                ):
                    return False
        return True

    # -- prediction ----------------------------------------------------------

    def frame_coordinates(self, X: Any, tree: int) -> np.ndarray:
        """Klein coordinates of points ``X`` in the frame of tree ``tree`` (float64)."""
        check_is_fitted(self)
        return frame_features(self._klein(X, reset=False), self._frames([self.frames_[tree]]))

    @staticmethod
    def _frames(matrices: list[np.ndarray]) -> Frames:
        """``matrices`` as frame features, if finite: a forest fitted before ``fit`` refused
        non-finite frames (or edited since) is refused rather than asked for answers."""
        if not all(np.isfinite(M).all() for M in matrices):
            raise FarPointError(
                "This rotation forest holds a frame that is not finite (it was fitted on points "
                "float64 could not hold, by a version that did not refuse them); fit it again."
            )
        return Frames.from_lorentz(matrices)

    def _frame_features(self, k: np.ndarray) -> np.ndarray:
        """``[n, T * d]``: every tree's frame coordinates of Klein rows ``k``, side by side.

        Each column is its own fixed-order sum, so this is the frames one by one, at once.
        """
        return frame_features(k, self._frames(self.frames_))

    def _tree_features(self, k: np.ndarray, t: int, every: np.ndarray | None = None) -> np.ndarray:
        """What tree ``t`` reads for Klein rows ``k``: frame coordinates or split indices.

        ``every``, if given, is `_frame_features` of ``k``.
        """
        if every is None:
            kf = frame_features(k, self._frames([self.frames_[t]]))
        else:
            d = k.shape[1]
            kf = every[:, t * d : (t + 1) * d]
        index = self.split_indices_[t]
        return kf if index is None else index.transform(kf)

    def _compared(self, k: np.ndarray, t: int) -> np.ndarray:
        """Tree ``t``'s input for Klein rows ``k``, as its ``apply`` reads it (float32)."""
        return np.ascontiguousarray(self._tree_features(k, t), dtype=np.float32)

    def _mean(self, X: Any, method: str) -> np.ndarray:
        """The trees' outputs added in tree order in float64, divided by their number."""
        check_is_fitted(self)
        k = self._klein(X, reset=False)
        if getattr(self, "routing_", "frames") == "hyperplanes":  # pickles before routing_
            per_tree = self._leaf_outputs(self._leaves(k))
        else:
            every = self._frame_features(k)
            per_tree = (
                getattr(tree, method)(self._tree_features(k, t, every))
                for t, tree in enumerate(self.estimators_)
            )
        total: np.ndarray | None = None
        for out in per_tree:
            total = out.astype(np.float64) if total is None else total + out
        assert total is not None  # a fitted forest has at least one tree
        return total / len(self.estimators_)

    def _leaf_outputs(self, leaves: np.ndarray) -> Any:
        """Each tree's output at its ``leaves`` column, as its ``predict`` or
        ``predict_proba`` gives it for a row reaching that leaf."""
        for t, tree in enumerate(self.estimators_):
            value = tree.tree_.value[leaves[:, t], 0]
            yield value[:, : len(self.classes_)] if is_classifier(self) else value[:, 0]

    def apply(self, X: Any) -> np.ndarray:
        """``[n, n_estimators]``: the leaf each point reaches in each tree."""
        check_is_fitted(self)
        return self._leaves(self._klein(X, reset=False))

    @property
    def feature_importances_(self) -> np.ndarray:
        """Impurity importances of the frame coordinates, ``[n_estimators, d]``, one row per tree.

        A frame coordinate mixes every Klein feature, so no per-feature
        importance of the original coordinates is claimed.
        """
        check_is_fitted(self)
        return np.stack([tree.feature_importances_ for tree in self.estimators_])

    # -- export --------------------------------------------------------------

    def to_ir(self) -> Model:
        """The forest as an `Model`: float64 comparisons of frame coordinates, or, routed
        by hyperplanes, oblique splits ``w . k <= c`` (`hyp2onnx.ir.projection`)."""
        check_is_fitted(self)
        d = self.frames_[0].shape[0] - 1
        classifier = is_classifier(self)
        hyperplanes = getattr(self, "routing_", "frames") == "hyperplanes"
        arrays, values, normals = [], [], []
        n_columns = 0
        for t, tree in enumerate(self.estimators_):
            (a,) = SklearnBackend().read_trees(tree)
            internal = a.feature >= 0
            if hyperplanes:
                w, c = self.hyperplanes_[t]
                column = np.full(a.feature.shape, -1, dtype=np.int64)
                column[internal] = n_columns + np.arange(int(internal.sum()))
                n_columns += int(internal.sum())
                normals.append(w[:, internal])
                arrays.append(a._replace(feature=column, threshold=np.where(internal, c, 0.0)))
            else:
                column, threshold = self._split_thresholds(t)
                arrays.append(
                    a._replace(feature=np.where(internal, column + t * d, -1), threshold=threshold)
                )
            v = tree.tree_.value
            leaf = v[:, 0, : len(self.classes_)] if classifier else v[:, :, 0]
            values.append(np.where(internal[:, None], 0.0, leaf))
        ensemble = Ensemble.from_trees(
            arrays,
            values,
            op="<=",
            compare_dtype="float64",
            threshold_dtype="float64",
            n_features=d,
            aggregate="mean",
            base_values=np.zeros(values[0].shape[1]),
            post_transform="identity",
            sum_dtype="float64",
            classes=np.asarray(self.classes_) if classifier else None,
            frames=None if hyperplanes else self._frames(self.frames_),
            projection=np.ascontiguousarray(np.concatenate(normals, axis=1))
            if hyperplanes
            else None,
        )
        return Model(
            ensemble=ensemble,
            space=input_space(self),
            backend="sklearn-rotation",
            estimator_class=type(self).__name__,
            input_dtype="float64" if self.input_dtype_ == "float64" else "float32",
        )


_DOC = """{summary}

    Each tree is a Fast-HyperDT tree (a scikit-learn decision tree, thresholds at
    Einstein midpoints) grown on the Klein coordinates of the points seen in its
    own frame ``M_t = diag(1, R_t) B_t``: a boost of a random centre to the origin
    and an orthogonal map there (see `hyp2onnx.estimators._rotation` and
    ``docs/rotation.md``). Its splits are geodesic hyperplanes in any direction.

    Parameters
    ----------
    n_estimators : int, default=100
        Number of trees.
    group_size : int, default=3
        ``rotation="pca"``: features per group of the principal-axis rotation.
    remove_proportion : float in [0, 1), default=0.5
        Share of the rows left out at random when a centre or a group's axes are
        drawn (after the random class subset).
    rotation : {{"pca", "haar", "identity"}}, default="pca"
        The orthogonal part ``R_t``: principal axes of the log-map vectors at the
        centre in groups (after a Haar rotation), a Haar-random rotation, or none.
    centre : {{"class_subset", "origin"}}, default="class_subset"
        The boosted centre: the Lorentzian centroid of a random class subset's rows
        (regressors: of a random share of the rows), or the origin (no boost).
    criterion, max_depth, min_samples_split, min_samples_leaf, min_weight_fraction_leaf, max_features, max_leaf_nodes, min_impurity_decrease
        The trees' parameters, as for `sklearn.tree.{tree}`.
    bootstrap : bool, default=False
        Grow each tree on a bootstrap sample (scikit-learn's forests' draws).
    max_samples : int, float or None, default=None
        Rows drawn per tree with ``bootstrap`` (scikit-learn's rule).{extra}
    random_state : int, RandomState or None, default=None
        Seeds the trees, the bootstrap draws and the frames.
    n_jobs : int or None, default=None
        Threads growing the trees (the trees do not depend on it).
    input_geometry, curvature, timelike_dim, midpoint, check_manifold, tree_space
        As for [`HyperbolicDecisionTreeClassifier`][hyp2onnx.HyperbolicDecisionTreeClassifier].

    Attributes
    ----------
    estimators_ : list of {tree}
        The corrected trees; tree ``t`` reads the frame coordinates of ``frames_[t]``
        (or their split indices, ``split_indices_[t]``, far from the origin).
    frames_ : list of ndarray
        Each tree's Lorentz matrix ``M_t``, ``(d + 1) x (d + 1)``.
    input_dtype_ : str
        "float32" if float32 input keeps every training point's leaves, else "float64".

    Raises
    ------
    FarPointError
        From ``fit``, when a training row and its tree's frame centre lie so far
        from the origin that float64 cannot hold the row's frame coordinates
        (``cosh(r) cosh(r_centre)`` above ``cosh(17)^2``); the error names the rows.
"""


class HyperbolicRotationForestClassifier(ClassifierMixin, _RotationForest):
    __doc__ = _DOC.format(
        summary="Hyperbolic rotation forest classifier: each tree in its own hyperbolic frame.",
        tree="DecisionTreeClassifier",
        extra='\n    class_weight : dict, list, "balanced" or None, default=None\n'
        "        Class weights multiplied into the sample weights (scikit-learn's rule).",
    )
    _tree = DecisionTreeClassifier
    _defaults: ClassVar[dict[str, Any]] = {"criterion": "gini", "class_weight": None}

    def predict_proba(self, X: Any) -> np.ndarray:
        """Mean class probabilities of the trees, columns in ``classes_`` order."""
        return self._mean(X, "predict_proba")

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of `predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """The first class of highest mean probability for each point."""
        proba = self.predict_proba(X)  # first: it says when the model is not fitted
        return self.classes_.take(np.argmax(proba, axis=1))


class HyperbolicRotationForestRegressor(RegressorMixin, _RotationForest):
    __doc__ = _DOC.format(
        summary="Hyperbolic rotation forest regressor: each tree in its own hyperbolic frame.",
        tree="DecisionTreeRegressor",
        extra="",
    )
    _tree = DecisionTreeRegressor
    _defaults: ClassVar[dict[str, Any]] = {"criterion": "squared_error"}

    def predict(self, X: Any) -> np.ndarray:
        """Mean of the trees' predictions."""
        return self._mean(X, "predict")
