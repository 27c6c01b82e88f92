"""Hyperbolic multi-layer perceptrons: scikit-learn's MLP with ReLU on Klein coordinates.

A hyperplane ``w . k + c = 0`` in Klein coordinates is the geodesic
hyperplane ``c x_0 + w . x_s = 0`` of the hyperboloid, so a ReLU network
fitted on ``k`` is piecewise affine with geodesic boundaries between its
pieces, in every layer (docs/math.md, "Networks on Klein coordinates").

Centred networks (``centre="centroid"``, the default). Hyperbolic embeddings
fix no origin, and a network on Klein coordinates depends on where the
embedding put it. ``fit`` therefore fits a Lorentz matrix ``L`` on the
training rows (`centring_frame`: their Lorentzian centroid boosted to the
origin, the tangent principal axes turned onto the coordinate axes) and the
network reads ``k'``, the Klein coordinates of ``L x``: linear-fractional in
``k`` (`hyp2onnx.ir.frames`), computed in one fixed order of float64
operations that the graph repeats. Moving the data by an isometry ``G``
moves ``L`` to ``L G^-1``, so the network sees the same inputs up to
rounding. ``L`` is linear on the hyperboloid, so every boundary
``w . k' + c = 0`` is still the geodesic hyperplane ``(c, w) L x = 0``.
``centre="origin"`` reads ``k`` itself. Far points follow the rotation
forests' frames: training rows with ``x_0 L_00`` past ``cosh(17)^2`` are
refused (`FarPointError`), such rows to predict are named in a
`FarPointWarning`.

A centred network also standardises what scikit-learn's optimiser sees: it
is fitted on ``z = (k' - input_offset_) / input_scale_`` (`input_standardisation`:
the training rows' mean of ``k'`` and each axis's standard deviation, floored
at half the largest), a function of ``k'`` alone, so the isometry invariance
stays. The affine map is folded into the first layer when the network is
described (`hyp2onnx.ir.network.fold_input_map`): `network` reads ``k'``,
its boundaries are still affine in ``k'`` (geodesic), and the model's
outputs, the region tree's and the graphs' are the folded network's
arithmetic.
``centre="origin"`` does not standardise (``input_offset_`` and
``input_scale_`` are None): it is the network on the input's own Klein
coordinates, as fitted.

``fit`` projects the points to unit-ball Klein coordinates (then centres
them) and fits scikit-learn's ``MLPClassifier`` / ``MLPRegressor``
(``estimator_``) on them; its weights are the model. Prediction does not call ``estimator_``: its
forward pass uses a BLAS product whose order of additions neither numpy nor
onnxruntime promises. The model's outputs are defined by
`hyp2onnx.ir.network.Network`'s fixed-order arithmetic (each sum
added left to right, in float64), which the exported graph reproduces bit
for bit (``encoding="exact"``) or within a stated bound with exact labels
(``encoding="fast"``, the default; `hyp2onnx.emit.network`). Labels
are taken from the logits: the first largest (several classes), or
``z > 0`` (two classes, one logistic output). ``estimator_.predict`` may
thus differ from ``predict`` on rows within rounding of a tie.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ..errors import FarPointError, FarPointWarning, warn_user
from ..geometry import (
    GEOMETRIES,
    lorentzian_centroid,
    to_klein,
    unit_hyperboloid,
)
from ..ir.frames import Frames, frame_features
from ..ir.network import Network, fold_input_map, label_indices, link
from ._base import GEOMETRY_DEFAULTS, generate_init
from ._isolation import lorentz_boost_to_origin
from ._rotation import _log_vectors, _pca_axes, _Points, check_frame_precision
from ._transaction import FitTransaction, transactional
from ._weights import checked_weights

__all__ = ["HyperbolicMLPClassifier", "HyperbolicMLPRegressor"]

#: The geometry parameters a network takes (no midpoints, tree spaces or blocks: no thresholds).
NETWORK_GEOMETRY: dict[str, Any] = {
    name: GEOMETRY_DEFAULTS[name]
    for name in ("input_geometry", "curvature", "timelike_dim", "check_manifold")
}

#: What the far-point messages call the network's frame.
_FRAME = "the network's centred frame"

#: Where the network's frame is centred (the rotation forests' vocabulary, module doc).
CENTRES = ("centroid", "origin")


def centring_frame(x: np.ndarray, weight: np.ndarray | None = None) -> np.ndarray:
    """The Lorentz matrix ``L = diag(1, R) B`` that centres unit-hyperboloid rows ``x``.

    ``B`` boosts their Lorentzian centroid to the origin; ``R``'s rows are
    the principal axes of the log-map vectors at the centroid, by decreasing
    variance, each signed so that the third moment of its projections is not
    negative. Both are functions of the rows alone, computed without
    cancellation (`hyp2onnx.geometry.lorentzian_centroid`,
    `hyp2onnx.geometry.move_to_origin`), so moving the rows by an isometry
    ``G`` gives ``L G^-1`` up to rounding. With ``weight`` (sample weights) the
    centroid, the scatter and the third moments are weighted: a row of weight 2
    counts as two rows.
    """
    x = np.asarray(x, dtype=np.float64)
    return _centring_frame(x.__getitem__, x.shape, weight, x)


def _centring_frame(
    points: Callable[[Any], np.ndarray],
    shape: tuple[int, int],
    weight: np.ndarray | None,
    whole: np.ndarray | None = None,
) -> np.ndarray:
    """`centring_frame` of the ``shape`` rows ``points`` gives by index or slice (``whole``:
    all of them, if at hand): all rows at once for the centroid only (its sums run
    over the whole array), then a block at a time, as the log-map vectors are."""
    mu = lorentzian_centroid(points(slice(None)) if whole is None else whole, weight)
    B = lorentz_boost_to_origin(mu)
    v = _log_vectors(points, shape[0], shape[1] - 1, mu)  # a block at a time
    R = (_pca_axes(v, overwrite=True) if weight is None else _weighted_axes(v, weight)).T
    L = np.empty_like(B)
    L[0, :] = B[0, :]
    L[1:, :] = R @ B[1:, :]
    return L


def _weighted_axes(v: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """`_pca_axes` of rows ``v`` with ``weight``: weighted mean, scatter and third moments."""
    w = np.asarray(weight, dtype=np.float64)
    centred = v - (w @ v) / w.sum()
    _, vectors = np.linalg.eigh((centred * w[:, None]).T @ centred)
    vectors = vectors[:, ::-1]
    skew = w @ ((centred @ vectors) ** 3)
    return vectors * np.where(skew < 0, -1.0, 1.0)


#: A centred network's axes are scaled to unit standard deviation, but by at most
#: this many times the widest axis's factor: an axis of little spread is not blown up.
SCALE_FLOOR = 0.5


def _squared_deviations(k: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """``(k - offset) ** 2`` with one temporary of ``k``'s size instead of two."""
    deviations = k - offset
    return np.square(deviations, out=deviations)


def input_standardisation(
    k: np.ndarray, weight: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(offset, scale)``: the mean of the rows ``k`` and a scale per column.

    Each column's scale is its standard deviation, raised to at least
    `SCALE_FLOOR` times the largest (an axis of little spread, mostly noise,
    is not blown up past twice the widest axis's factor). The columns are a
    centred frame's axes, fixed by the data (`centring_frame`: principal
    axes by decreasing variance, signed by their third moments), so moving
    the rows by an isometry changes neither. With ``weight`` the mean and
    the deviations are weighted (a row of weight 2 counts as two rows).
    Rows that do not spread at all (largest deviation 0, or not finite) get
    scale 1.
    """
    k = np.asarray(k, dtype=np.float64)
    if weight is None:
        offset = k.mean(axis=0)
        variance = _squared_deviations(k, offset).mean(axis=0)
    else:
        w = np.asarray(weight, dtype=np.float64) / np.sum(weight)
        offset = w @ k
        variance = w @ _squared_deviations(k, offset)
    deviation = np.sqrt(variance)
    widest = float(deviation.max(initial=0.0))
    if not (np.isfinite(widest) and widest > 0.0):
        return offset, np.ones(k.shape[1])
    return offset, np.maximum(deviation, SCALE_FLOOR * widest)


class _HyperbolicMLP(FitTransaction, BaseEstimator):
    """Shared fitting, prediction and description of the two hyperbolic MLPs."""

    _wrapped: ClassVar[Any]
    _wrapped_params: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "_wrapped" not in cls.__dict__:
            return
        cls._wrapped_params = generate_init(
            cls, (cls._wrapped,), {**NETWORK_GEOMETRY, "centre": "centroid"}
        )
        cls._parameter_constraints = {
            **cls._wrapped._parameter_constraints,
            "activation": [StrOptions({"relu"})],
            "input_geometry": [StrOptions(set(GEOMETRIES))],
            "curvature": [Interval(Real, None, 0, closed="neither")],
            "timelike_dim": [Integral],
            "check_manifold": ["boolean"],
            "centre": [StrOptions(set(CENTRES))],
        }

    # -- data ----------------------------------------------------------------

    def _klein(self, X: Any, *, reset: bool) -> np.ndarray:
        # NaN and infinity are left to the geometry check, which names the rows.
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        return to_klein(
            X, self.input_geometry, self.curvature, self.timelike_dim, check=self.check_manifold
        )

    def to_klein(self, X: Any) -> np.ndarray:
        """Unit-ball Klein coordinates (float64) of points ``X``."""
        check_is_fitted(self)
        return self._klein(X, reset=False)

    def frames(self) -> Frames | None:
        """The centring as `hyp2onnx.ir.frames.Frames` (one frame), or None (``centre="origin"``)."""
        check_is_fitted(self)
        L = getattr(self, "centring_", None)
        return None if L is None else Frames.from_lorentz([L])

    def network_input(self, X: Any) -> np.ndarray:
        """What the network reads for points ``X``: the Klein coordinates of ``L x``
        (``centring_``; ``centre="origin"``: of ``x``), in fixed-order float64.

        A centred network warns (`FarPointWarning`, rows named) of rows so far
        from the training rows' centroid that float64 cannot hold their centred
        coordinates (the frames' radius, `check_frame_precision`): their
        outputs are still the graph's, but no longer a function of the point.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=False)
        k = to_klein(
            X, self.input_geometry, self.curvature, self.timelike_dim, check=self.check_manifold
        )
        L = getattr(self, "centring_", None)
        if L is not None:
            try:
                check_frame_precision(
                    L, unit_hyperboloid(X, *self._geometry()), frame=_FRAME, rows_are="row(s)"
                )
            except FarPointError as error:
                warn_user(str(error), FarPointWarning)
        return self._network_input(k)

    def _geometry(self) -> tuple[str, float, int]:
        return self.input_geometry, self.curvature, self.timelike_dim

    def _network_input(self, k: np.ndarray) -> np.ndarray:
        L = getattr(self, "centring_", None)
        return k if L is None else frame_features(k, Frames.from_lorentz([L]))

    def _fit_centring(self, X: np.ndarray, sample_weight: np.ndarray | None) -> None:
        """``centring_`` from the training points, weighted (None for ``centre="origin"``).

        Refuses (`FarPointError`, rows named) training rows so far from the
        centroid that float64 cannot hold their centred coordinates, as the
        rotation forests' frames do (`check_frame_precision`).
        """
        if self.centre == "origin":
            self.centring_ = None
            return
        # unit-hyperboloid rows, made a block at a time when asked: all of them are
        # held for the centroid only
        d = X.shape[1] - (self.input_geometry == "hyperboloid")
        points = _Points(X, d, self._geometry())
        weighted = sample_weight is not None and bool(sample_weight.any())
        L = _centring_frame(points, points.shape, sample_weight if weighted else None)
        points.check_precision(L, frame=_FRAME)
        self.centring_ = L

    def _fit_standardisation(self, k: np.ndarray, sample_weight: np.ndarray | None) -> None:
        """``input_offset_`` and ``input_scale_`` from the network inputs ``k`` (centred
        networks; None for ``centre="origin"``)."""
        if self.centre == "origin":
            self.input_offset_ = self.input_scale_ = None
            return
        weighted = sample_weight is not None and bool(sample_weight.any())
        offset, scale = input_standardisation(k, sample_weight if weighted else None)
        self.input_offset_, self.input_scale_ = offset, scale

    def _standardised(self, k: np.ndarray, *, in_place: bool = False) -> np.ndarray:
        """What scikit-learn's network reads: ``(k - input_offset_) / input_scale_``
        (``in_place``: written over ``k``, the same values)."""
        offset = getattr(self, "input_offset_", None)
        if offset is None:
            return k
        out = np.subtract(k, offset, out=k if in_place else None)
        out /= self.input_scale_  # in place: the same division, one n x d array less
        return out

    # -- training ------------------------------------------------------------

    def fit(self, X: Any, y: Any, sample_weight: Any = None):
        """Fit the network on the Klein coordinates of hyperbolic points ``X``.

        With ``warm_start=True`` a fitted network goes on from its weights, as
        scikit-learn's MLPs do; a refused fit leaves the model as it was.
        """
        warm = bool(self.warm_start) and hasattr(self, "estimator_")
        k, y, sample_weight = self._training_data(X, y, sample_weight, reset=not warm)
        native = self._native(continued=warm)
        kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
        self._fitted(native.fit(k, y, **kwargs))
        return self

    @available_if(lambda self: self.solver in ("sgd", "adam"))
    @transactional
    def partial_fit(self, X: Any, y: Any, sample_weight: Any = None, **kwargs: Any):
        """One pass over ``X``, from the current weights (stochastic solvers, as in scikit-learn).

        The classifier's first call needs ``classes``, every class the network
        will see; later calls must give rows of those classes only.
        """
        continued = hasattr(self, "estimator_")
        k, y, sample_weight = self._training_data(X, y, sample_weight, reset=not continued)
        native = self._native(continued=continued)
        if sample_weight is not None:
            kwargs["sample_weight"] = sample_weight
        self._fitted(native.partial_fit(k, y, **kwargs))
        return self

    def _training_data(
        self, X: Any, y: Any, sample_weight: Any, *, reset: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Checked parameters, the network's input, labels and weights (rows named on a bad one)."""
        if getattr(self, "activation", "relu") != "relu":
            raise ValueError(
                f"activation={self.activation!r}: only 'relu' keeps the network piecewise "
                "affine in Klein coordinates (geodesic boundaries) and exportable exactly; "
                "use activation='relu'."
            )
        self._validate_params()
        # Classifiers are single-output: a 2-D y (multilabel) is refused here.
        X, y = validate_data(
            self,
            X,
            y,
            reset=reset,
            dtype=np.float64,
            multi_output=not self._classifier,
            ensure_all_finite=False,
        )
        if sample_weight is not None:  # a weighted loss: negative weights make it unbounded
            kind = "classifiers" if self._classifier else "regressors"
            sample_weight = checked_weights(
                sample_weight, X, negative_ok=False, backend=f"MLP {kind}"
            )
        # Klein input of curvature -1 is used as it is (read, never written): no copy.
        k = to_klein(
            X,
            self.input_geometry,
            self.curvature,
            self.timelike_dim,
            check=self.check_manifold,
            copy=False,
        )
        if reset:  # a new fit; a warm start or a later partial_fit keeps the first centring
            self._fit_centring(X, sample_weight)
        own = self._network_input(k)
        if reset:
            self._fit_standardisation(own, sample_weight)
        # A centred network's input is made here: standardised in place.
        return self._standardised(own, in_place=own is not k), y, sample_weight

    def _native(self, *, continued: bool) -> Any:
        """The scikit-learn network to train: new, or a copy of the fitted one to go on from.

        A copy, so that a refused continuation leaves the previous fit whole.
        """
        params = {name: getattr(self, name) for name in self._wrapped_params}
        if not continued:
            return self._wrapped(**params)
        return copy.deepcopy(self.estimator_).set_params(**params)

    def _fitted(self, native: Any) -> None:
        """Take the trained scikit-learn network as this model's weights."""
        if self._classifier:
            if len(native.classes_) < 2:
                raise ValueError(
                    f"{type(self).__name__} needs samples of at least two classes; y holds "
                    f"one class only: {native.classes_[0]!r}."
                )
            self.classes_ = native.classes_
        self.estimator_ = native
        self.n_outputs_ = int(native.n_outputs_)
        self.n_iter_ = native.n_iter_

    # -- the model's arithmetic ------------------------------------------------

    _classifier: ClassVar[bool] = False

    def network(self) -> Network:
        """The fitted network as `hyp2onnx.ir.network.Network` (its weights, in float64), on
        what `network_input` gives: a centred network's standardisation folded into its first
        layer (`hyp2onnx.ir.network.fold_input_map`). This is the model's arithmetic."""
        check_is_fitted(self)
        native = self.estimator_
        output = {"softmax": "softmax", "logistic": "logistic"}.get(native.out_activation_)
        network = Network(
            weights=tuple(np.asarray(W, dtype=np.float64) for W in native.coefs_),
            biases=tuple(np.asarray(b, dtype=np.float64) for b in native.intercepts_),
            output=output or "identity",  # type: ignore[arg-type]
            classes=np.asarray(self.classes_) if self._classifier else None,
        )
        offset, scale = getattr(self, "input_offset_", None), getattr(self, "input_scale_", None)
        if offset is None or scale is None:  # centre="origin": the network as fitted
            return network
        return fold_input_map(network, offset, scale)

    def _outputs(self, X: Any) -> np.ndarray:
        """The last layer's outputs (logits, or the values), in the model's fixed order."""
        return self.network().logits(self.network_input(X))

    def activation_pattern(self, X: Any) -> np.ndarray:
        """``[n, sum(hidden_layer_sizes)]`` bool: hidden units with a positive pre-activation."""
        return self.network().pattern(self.network_input(X))

    @property
    def coefs_(self) -> list[np.ndarray]:
        """The fitted weight matrices (``estimator_.coefs_``; a centred network's first one
        reads the standardised inputs, `network` holds it folded)."""
        check_is_fitted(self)
        return self.estimator_.coefs_

    @property
    def intercepts_(self) -> list[np.ndarray]:
        """The fitted bias vectors (``estimator_.intercepts_``)."""
        check_is_fitted(self)
        return self.estimator_.intercepts_

    @property
    def loss_curve_(self) -> list[float]:
        """The training loss after each iteration (``estimator_.loss_curve_``; not kept by
        ``solver="lbfgs"``)."""
        check_is_fitted(self)
        return self.estimator_.loss_curve_

    @property
    def best_loss_(self) -> float | None:
        """The lowest training loss reached (``estimator_.best_loss_``; None with
        ``early_stopping``, whose best is a validation score)."""
        check_is_fitted(self)
        return self.estimator_.best_loss_


def _native_rows(wrapped: type) -> str:
    """One numpydoc row per parameter of ``wrapped``: its own type line and the first
    sentence of its own description (``activation`` takes "relu" only)."""
    section = (wrapped.__doc__ or "").partition("Parameters\n    ----------\n")[2]
    rows = {
        m.group(1): (
            m.group(2),
            re.split(r"(?<=\.)\s", " ".join(m.group(3).split()), maxsplit=1)[0],
        )
        for m in re.finditer(r"^    (\w+) : ([^\n]*)\n((?:(?:        [^\n]*)?\n)*)", section, re.M)
    }
    rows["activation"] = (
        '{"relu"}, default="relu"',
        "Only ReLU keeps the pieces affine in Klein coordinates.",
    )
    return "\n".join(
        f"    {name} : {rows.get(name, ('', ''))[0]}\n        {rows.get(name, ('', ''))[1]}"
        for name in inspect.signature(wrapped).parameters
        if name != "self"
    )


_DOC = """{summary}

    scikit-learn's ``{wrapped}`` with ReLU activations, fitted on the unit-ball
    Klein coordinates of the points; every boundary between its linear pieces
    is a geodesic hyperplane. Its outputs follow the fixed-order arithmetic of
    `hyp2onnx.ir.network.Network`, which the exported graph reproduces.
    ``warm_start=True`` and ``partial_fit`` (stochastic solvers) go on from the
    fitted weights, with scikit-learn's arithmetic and rules; sample weights
    must be finite and non-negative (the rows are named).

    Parameters
    ----------
    input_geometry : {{"hyperboloid", "poincare", "klein"}}, default="hyperboloid"
        Model of hyperbolic space the input points are given in.
    curvature : float < 0, default=-1.0
        Curvature ``K`` of the space.
    timelike_dim : int, default=0
        Column of the timelike coordinate ``x_0`` (hyperboloid input only).
    check_manifold : bool, default=True
        Refuse points off the manifold, naming the rows.
    centre : {{"centroid", "origin"}}, default="centroid"
        The network's frame: the training rows' Lorentzian centroid moved to
        the origin and their tangent principal axes onto the coordinate axes
        (predictions do not depend on where the embedding put its origin), or
        the input's own Klein coordinates. A centred network is also fitted on
        standardised inputs (``input_offset_``, ``input_scale_``). Warm starts
        and ``partial_fit`` keep the frame and the standardisation of the first
        fit.
{native}

    Attributes
    ----------
    centring_ : ndarray of shape (d + 1, d + 1) or None
        The Lorentz matrix ``L`` of the frame (None for ``centre="origin"``).
    input_offset_, input_scale_ : ndarray of shape (d,) or None
        A centred network's standardisation: ``estimator_`` reads ``(k' -
        input_offset_) / input_scale_`` (the training rows' mean and each
        axis's standard deviation, at least half the largest), folded into
        the first layer of `network` (None for ``centre="origin"``).
    estimator_ : {wrapped}
        The network fitted on (centred, standardised) Klein coordinates (its ``predict``
        uses a BLAS product; this model's outputs do not).
    loss_curve_ : list of float
        The training loss after each iteration (not kept by ``solver="lbfgs"``).
    best_loss_ : float or None
        The lowest training loss (None with ``early_stopping``).
"""


class HyperbolicMLPClassifier(ClassifierMixin, _HyperbolicMLP):
    __doc__ = _DOC.format(
        summary="Hyperbolic MLP classifier: a ReLU network on Klein coordinates.",
        wrapped="MLPClassifier",
        native=_native_rows(MLPClassifier),
    )
    _wrapped = MLPClassifier
    _classifier = True

    def decision_function(self, X: Any) -> np.ndarray:
        """The logits ``[n, n_outputs]`` (one column for two classes), in the model's fixed order."""
        return self._outputs(X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (softmax, or logistic for two classes), in ``classes_`` order."""
        network = self.network()
        return link(network, network.logits(self.network_input(X)))

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of `predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def predict(self, X: Any) -> np.ndarray:
        """The class of the first largest logit (two classes: ``z > 0``)."""
        network = self.network()
        return self.classes_.take(label_indices(network, network.logits(self.network_input(X))))


class HyperbolicMLPRegressor(RegressorMixin, _HyperbolicMLP):
    __doc__ = _DOC.format(
        summary="Hyperbolic MLP regressor: a ReLU network on Klein coordinates.",
        wrapped="MLPRegressor",
        native=_native_rows(MLPRegressor),
    )
    _wrapped = MLPRegressor

    def predict(self, X: Any) -> np.ndarray:
        """The network's values (one column: a 1-D array, as scikit-learn returns)."""
        values = self._outputs(X)
        return values[:, 0] if values.shape[1] == 1 else values
