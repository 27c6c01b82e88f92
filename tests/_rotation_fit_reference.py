"""The rotation forest's fit as it was before issue 40 bounded its memory, kept
verbatim as the reference the new fit must match bit for bit
(tests/test_rotation_fit_reference.py).

Each function is the old body, lifted out of its class or module (``self``
is the estimator being fitted): do not "improve" it; it is what the new code
is compared with. Helpers the change left alone (``_targets``, ``_n_draw``,
``_hyperplanes_of``, ``_hyperplane_leaves``, ``_split_thresholds``) are the
estimator's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils import check_random_state
from sklearn.utils.validation import validate_data

from hyp2onnx.correction import TreeSpace, correct, from_rows
from hyp2onnx.estimators._base import comparison_of
from hyp2onnx.estimators._isolation import lorentz_boost_to_origin
from hyp2onnx.estimators._rotation import (
    _FRAME_STREAM,
    _MAX_INT,
    HYPERPLANE_MAX_DEPTH,
    _log_at_origin,
    _pca_axes,
    _Rows,
    check_frame_precision,
    haar_rotation,
)
from hyp2onnx.estimators._sklearn import SklearnBackend
from hyp2onnx.estimators._weights import checked_weights
from hyp2onnx.geometry import lorentzian_centroid, move_to_origin, to_klein, unit_hyperboloid
from hyp2onnx.ir.frames import Frames
from hyp2onnx.ir.projection import project


def old_frame_features(k: np.ndarray, frames: Frames) -> np.ndarray:
    """``hyp2onnx.ir.frames.frame_features``: all rows at once."""
    k = np.asarray(k, dtype=np.float64)
    extended = np.concatenate([np.ones((k.shape[0], 1)), k], axis=1)
    numerator = project(extended, frames.numerator)
    denominator = project(extended, frames.denominator)
    return numerator / denominator[:, frames.frame]


def old_draw_frame(
    x: np.ndarray,
    y: np.ndarray | None,
    rows: np.ndarray,
    *,
    centre: str,
    rotation: str,
    group_size: int,
    remove_proportion: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """``hyp2onnx.estimators._rotation.draw_frame``: every row moved at once."""
    d = x.shape[1] - 1
    B = np.eye(d + 1)
    mu = None
    pool = _Rows(y, rows)
    if centre == "class_subset":
        mu = lorentzian_centroid(x[pool.sample(rng, remove_proportion)])
        B = lorentz_boost_to_origin(mu)
    if rotation == "identity":
        R = np.eye(d)
    elif rotation == "haar":
        R = haar_rotation(d, rng)
    else:
        H = haar_rotation(d, rng)
        if mu is None:
            moved, distance = x, np.arcsinh(np.linalg.norm(x[:, 1:], axis=1))
        else:
            moved, distance = move_to_origin(x, mu)
        v = _log_at_origin(moved, distance) @ H.T  # log-map vectors at the centre, in H's axes
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


def old_rotation_fit(self: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
    """``_RotationForest.fit`` (one thread, no progress bar: the trees do not depend on it)."""
    self._validate_params()
    X, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=False)
    if sample_weight is not None:
        sample_weight = checked_weights(sample_weight, X, negative_ok=False)
    k = self._features(X)
    n = k.shape[0]
    y_fit, weight, classes = self._targets(y, sample_weight)
    n_draw = self._n_draw(n, weight)
    fitted_on = np.arange(n) if sample_weight is None else np.flatnonzero(sample_weight != 0)
    if fitted_on.size == 0:
        fitted_on = np.arange(n)
    rng = check_random_state(self.random_state)
    seeds = [int(rng.randint(_MAX_INT)) for _ in range(self.n_estimators)]
    x = unit_hyperboloid(X, self.input_geometry, self.curvature, self.timelike_dim)
    grown = [
        old_grow_in_frame(self, s, x, k, y_fit, classes, weight, n_draw, fitted_on) for s in seeds
    ]
    self.frames_ = [g[0] for g in grown]
    self.estimators_ = [g[1] for g in grown]
    self.split_indices_ = [g[2] for g in grown]
    self.corrections_ = [g[3] for g in grown]
    self.n_outputs_ = 1
    self.hyperplanes_ = [self._hyperplanes_of(t) for t in range(len(self.estimators_))]
    self.routing_ = old_choose_routing(self, k)
    self.input_dtype_ = "float32" if old_float32_keeps(self, X, k) else "float64"
    return self


def old_grow_in_frame(
    self: Any,
    seed: int,
    x: np.ndarray,
    k: np.ndarray,
    y_fit: np.ndarray,
    classes: np.ndarray | None,
    weight: np.ndarray | None,
    n_draw: int,
    fitted_on: np.ndarray,
) -> tuple:
    """``_RotationForest._grow_in_frame``."""
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
    rows = np.arange(n) if tree_weight is None else np.flatnonzero(tree_weight != 0)
    M = old_draw_frame(
        x,
        classes,
        rows,
        centre=self.centre,
        rotation=self.rotation,
        group_size=int(self.group_size),
        remove_proportion=float(self.remove_proportion),
        rng=np.random.default_rng((seed, _FRAME_STREAM)),
    )
    check_frame_precision(M, x)
    features = old_frame_features(k, Frames.from_lorentz([M]))
    return (M, *old_grow(self, features, y_fit, tree_weight, rows, fitted_on, seed))


def old_grow(
    self: Any,
    kf: np.ndarray,
    y: np.ndarray,
    tree_weight: np.ndarray | None,
    rows: np.ndarray,
    fitted_on: np.ndarray,
    seed: int,
) -> tuple[Any, Any, Any]:
    """``_RotationForest._grow``."""
    backend = SklearnBackend()
    if fitted_on.size == kf.shape[0]:
        space, Xt = TreeSpace.fit_transform(kf, self.tree_space, backend.compare_dtype)
    else:
        space = TreeSpace.fit(kf[fitted_on], self.tree_space, backend.compare_dtype)
        Xt = space.transform(kf)
    compared = np.ascontiguousarray(Xt, dtype=np.float32)
    tree = self._make_estimator(seed)
    tree._fit(
        compared,
        y,
        sample_weight=tree_weight,
        check_input=False,
        missing_values_in_feature_mask=tree._compute_missing_values_in_feature_mask(compared),
    )
    trees = backend.read_trees(tree)
    comparison = comparison_of(backend)
    neighbours = from_rows(trees, compared, [rows], comparison, self.midpoint)
    done = correct(trees, space, neighbours, comparison, self.midpoint)
    return backend.write_thresholds(tree, done.thresholds), done.split_index, done.report


def old_frame_features_of(self: Any, k: np.ndarray) -> np.ndarray:
    """``_RotationForest._frame_features``."""
    return old_frame_features(k, self._frames(self.frames_))


def old_tree_features(self: Any, k: np.ndarray, t: int, every: np.ndarray | None = None) -> Any:
    """``_RotationForest._tree_features``."""
    if every is None:
        kf = old_frame_features(k, self._frames([self.frames_[t]]))
    else:
        d = k.shape[1]
        kf = every[:, t * d : (t + 1) * d]
    index = self.split_indices_[t]
    return kf if index is None else index.transform(kf)


def old_leaves(self: Any, k: np.ndarray) -> np.ndarray:
    """``_RotationForest._leaves`` as the old float32 check reached it (hyperplanes)."""
    return np.stack([self._hyperplane_leaves(k, t) for t in range(len(self.estimators_))], axis=1)


def old_choose_routing(self: Any, k: np.ndarray) -> str:
    """``_RotationForest._choose_routing``."""
    if self.routing == "frames":
        return "frames"
    if self.routing == "auto" and any(
        tree.get_depth() > HYPERPLANE_MAX_DEPTH for tree in self.estimators_
    ):
        return "frames"
    every = old_frame_features_of(self, k)
    for t, tree in enumerate(self.estimators_):
        framed = tree.apply(np.ascontiguousarray(old_tree_features(self, k, t, every), np.float32))
        moved = np.flatnonzero(framed != self._hyperplane_leaves(k, t))
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


def old_float32_keeps(self: Any, X: np.ndarray, k: np.ndarray) -> bool:
    """``_RotationForest._float32_keeps``."""
    rounded = X.astype(np.float32).astype(np.float64)
    if np.array_equal(rounded, X):
        return True
    k32 = to_klein(rounded, self.input_geometry, self.curvature, self.timelike_dim, check=False)
    if self.routing_ == "hyperplanes":
        moved = np.flatnonzero(np.any(k32 != k, axis=1))
        return bool(np.array_equal(old_leaves(self, k[moved]), old_leaves(self, k32[moved])))
    here, there = old_frame_features_of(self, k), old_frame_features_of(self, k32)
    for t, tree in enumerate(self.estimators_):
        a, b = old_tree_features(self, k, t, here), old_tree_features(self, k32, t, there)
        moved = np.flatnonzero(np.any(a.astype(np.float32) != b.astype(np.float32), axis=1))
        if moved.size and not np.array_equal(
            tree.tree_.apply(np.ascontiguousarray(a[moved], dtype=np.float32)),
            tree.tree_.apply(np.ascontiguousarray(b[moved], dtype=np.float32)),
        ):
            return False
    return True
