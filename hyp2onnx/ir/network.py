"""ReLU networks on Klein coordinates: the arithmetic the Python model and its graphs share.

A network is a list of affine layers ``z_i = a_{i-1} W_i + b_i`` with
``a_i = relu(z_i)`` between them (``a_0 = k``, the unit-ball Klein
coordinates); the last layer's ``z`` are the logits (classifiers) or the
values (regressors). Its Python model is defined in one arithmetic, which
the exact graph repeats node for node: each entry of ``a W`` is the strict
left-to-right sum of correctly rounded float64 products
(`hyp2onnx.ir.projection.project`), then ``+ b``. A BLAS product's
order is neither numpy's nor onnxruntime's, so it is not used here.

Labels come from the logits, never from the probabilities: the first
largest logit (softmax classifiers), or ``z > 0`` (one logistic column).
Probabilities are the link function of the logits.

`error_bounds` gives, for inputs with ``|k_f| <= 1`` (every Klein
point), a per-unit bound on the difference between any order of each
layer's sums and the exact value, by interval propagation of the standard
bound ``|fl(x . w + b) - (x . w + b)| <= gamma(n + 1) (|x| . |w| + |b|)``
(docs/math.md, "Networks on Klein coordinates"). ``relu`` is 1-Lipschitz,
so a row whose rounded pre-activation lands on the other side of 0 stays
within the bound too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .projection import project

__all__ = [
    "UNIT_ROUNDOFF",
    "Network",
    "collapse",
    "error_bounds",
    "fold_input_map",
    "gamma",
    "label_indices",
    "link",
    "near_tie",
    "tie_margin",
]

#: Unit roundoff of float64.
UNIT_ROUNDOFF = 2.0**-53


def gamma(n: int | np.ndarray) -> np.ndarray:
    """``gamma(n) = n u / (1 - n u)``: the relative error bound of a sum of ``n`` products."""
    n = np.asarray(n, dtype=np.float64)
    return n * UNIT_ROUNDOFF / (1.0 - n * UNIT_ROUNDOFF)


@dataclass(frozen=True, eq=False)
class Network:
    """Weights ``[n_in, n_out]`` and biases of every layer, hidden layers first.

    ``output`` is the link of the last layer: ``"softmax"`` (several
    classes), ``"logistic"`` (two classes, one logit) or ``"identity"``
    (regression). ``classes`` are the class labels in output order (None
    for regressors).
    """

    weights: tuple[np.ndarray, ...]
    biases: tuple[np.ndarray, ...]
    output: Literal["identity", "logistic", "softmax"]
    classes: np.ndarray | None = None

    def __post_init__(self) -> None:
        if len(self.weights) != len(self.biases) or not self.weights:
            raise ValueError("Network: one bias per layer, and at least one layer")
        for i, (W, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if W.ndim != 2 or b.shape != (W.shape[1],):
                raise ValueError(f"Network: layer {i} has weights {W.shape} and bias {b.shape}")
            if i and W.shape[0] != self.weights[i - 1].shape[1]:
                raise ValueError(f"Network: layer {i} takes {W.shape[0]} inputs")
        if self.output == "logistic" and self.n_outputs != 1:
            raise ValueError("Network: a logistic output has one column")

    @property
    def n_features(self) -> int:
        return int(self.weights[0].shape[0])

    @property
    def hidden_sizes(self) -> tuple[int, ...]:
        return tuple(int(W.shape[1]) for W in self.weights[:-1])

    @property
    def n_outputs(self) -> int:
        return int(self.weights[-1].shape[1])

    @property
    def is_classifier(self) -> bool:
        return self.classes is not None

    def forward(self, k: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Logits ``[n, n_outputs]`` and every hidden layer's pre-activations, in fixed order."""
        a = np.asarray(k, dtype=np.float64)
        hidden = []
        for W, b in zip(self.weights[:-1], self.biases[:-1], strict=True):
            z = project(a, W) + b
            hidden.append(z)
            a = np.maximum(z, 0.0)
        return project(a, self.weights[-1]) + self.biases[-1], hidden

    def logits(self, k: np.ndarray) -> np.ndarray:
        """The last layer's outputs (logits or values) for Klein rows ``k``."""
        return self.forward(k)[0]

    def pattern(self, k: np.ndarray) -> np.ndarray:
        """``[n, sum(hidden_sizes)]`` bool: which hidden units are active (``z > 0``)."""
        hidden = self.forward(k)[1]
        if not hidden:
            return np.zeros((np.shape(k)[0], 0), dtype=bool)
        return np.concatenate([z > 0 for z in hidden], axis=1)


def fold_input_map(network: Network, offset: np.ndarray, scale: np.ndarray) -> Network:
    """The network on ``k`` of ``network`` read on ``(k - offset) / scale``, per input column.

    An affine map of the inputs followed by an affine layer is one affine
    layer: the first layer becomes ``W_f = W / scale`` (per row) and
    ``b_f = b - sum_i offset_i W_f[i]``, the sum taken in input order from
    ``b`` (a fixed order of correctly rounded float64 operations, so the
    folded weights are the same on every machine). The later layers are
    shared. The folded network agrees with the unfolded one on every row
    up to the rounding of the fold (a few units in the last place of each
    term); the fitted model is defined as the folded network.
    """
    offset = np.asarray(offset, dtype=np.float64)
    scale = np.asarray(scale, dtype=np.float64)
    W, b = network.weights[0], network.biases[0]
    if offset.shape != (W.shape[0],) or scale.shape != (W.shape[0],):
        raise ValueError(
            f"fold_input_map: the network reads {W.shape[0]} inputs; offset {offset.shape}, "
            f"scale {scale.shape}"
        )
    folded = W / scale[:, None]
    bias = np.array(b, dtype=np.float64)
    for i in range(folded.shape[0]):
        bias = bias - offset[i] * folded[i]
    return Network(
        weights=(folded, *network.weights[1:]),
        biases=(bias, *network.biases[1:]),
        output=network.output,
        classes=network.classes,
    )


def link(network: Network, logits: np.ndarray) -> np.ndarray:
    """Probabilities (classifiers, in ``classes`` order) or values (regressors) of the logits."""
    if network.output == "identity":
        return logits
    if network.output == "logistic":
        p = 1.0 / (1.0 + np.exp(-logits[:, 0]))
        return np.stack([1.0 - p, p], axis=1)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def label_indices(network: Network, logits: np.ndarray) -> np.ndarray:
    """Index of each row's class: ``z > 0`` (one logistic column), else the first largest logit."""
    if network.output == "logistic":
        return (logits[:, 0] > 0).astype(np.int64)
    return np.argmax(logits, axis=1)


def tie_margin(network: Network, bound: float) -> float:
    """How near a tie a row's logits may be and still be rescored, when each may be off by
    ``bound``: one logistic logit within ``bound`` of 0; of several, one within twice the
    bound of the largest. The one rule for `near_tie`, the graphs' guards and the metadata."""
    return (1.0 if network.output == "logistic" else 2.0) * bound


def near_tie(network: Network, logits: np.ndarray, bound: float) -> np.ndarray:
    """Rows whose label could change if every logit moved by up to ``bound``.

    One logistic column: ``|z| <= bound``. Several: two or more logits have
    ``z_j + 2 bound >= max z`` (the largest itself, and another within twice the
    bound of it; rounding is monotone and the maximum a float, so no row whose
    exact gap is at most ``2 bound`` is missed). The graphs test the same.
    """
    margin = tie_margin(network, bound)
    if network.output == "logistic":
        return np.abs(logits[:, 0]) <= margin
    largest = logits.max(axis=1, keepdims=True)
    return ((logits + margin) >= largest).sum(axis=1) >= 2


def error_bounds(network: Network) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per layer: bound ``r`` on ``|computed z - exact z|``, and bound ``A`` on ``|exact z|``.

    For any order of each layer's sums and inputs with ``|k_f| <= 1``:
    ``A_i = |W_i|^T A_{i-1} + |b_i|`` (``A_0 = 1``), and
    ``r_i = gamma(n + 1) (|W_i|^T (A_{i-1} + r_{i-1}) + |b_i|) + |W_i|^T r_{i-1}``
    (the computed inputs are within ``r_{i-1}`` of the exact ones, ``relu``
    moves no value further, and the sum of ``n`` products and the bias rounds
    by ``gamma(n + 1)`` of its absolute terms).
    """
    A = np.ones(network.n_features)
    r = np.zeros(network.n_features)
    errors, magnitudes = [], []
    for W, b in zip(network.weights, network.biases, strict=True):
        aW, ab = np.abs(W), np.abs(b)
        computed = A + r
        r = gamma(W.shape[0] + 1) * (computed @ aW + ab) + r @ aW
        A = A @ aW + ab
        errors.append(r * _SAFETY)
        magnitudes.append(A)
    return errors, magnitudes


#: Covers the float64 rounding of the bounds themselves (a few ulps of each).
_SAFETY = 1.0 + 2.0**-40


@dataclass(frozen=True, eq=False)
class Collapsed:
    """The affine maps of one activation pattern, layer by layer, with their rounding.

    ``weights[i]`` ``[d, m_i]`` and ``offsets[i]`` ``[m_i]``: layer ``i``'s
    pre-activations are ``k weights[i] + offsets[i]`` wherever the pattern
    holds (the last entry: the output). ``test_error[i]`` bounds, per unit,
    how far the computed ``project(k, weights[i]) + offsets[i]`` may be from
    the exact pre-activation of the pattern's affine map, for ``|k_f| <= 1``.
    """

    weights: tuple[np.ndarray, ...]
    offsets: tuple[np.ndarray, ...]
    test_error: tuple[np.ndarray, ...]


def collapse(network: Network, pattern: np.ndarray) -> Collapsed:
    """Effective weights ``W_1 D_1 W_2 ... W_i`` of the pattern (one bool per hidden unit).

    The products are computed in float64 (any order) and their error is
    bounded alongside, elementwise, by ``|fl(X Y) - X Y| <= gamma(n) |X| |Y|``
    plus the inherited error of ``X`` times ``|Y|``.
    """
    pattern = np.asarray(pattern, dtype=bool)
    d = network.n_features
    T, c = network.weights[0].astype(np.float64), network.biases[0].astype(np.float64)
    E, Ec = np.zeros_like(T), np.zeros_like(c)
    weights, offsets, errors = [T], [c], [_test_error(T, c, E, Ec, d)]
    start = 0
    for W, b in zip(network.weights[1:], network.biases[1:], strict=True):
        m = W.shape[0]
        D = pattern[start : start + m].astype(np.float64)
        start += m
        aW = np.abs(W)
        X, x = T * D, c * D
        T = X @ W
        c = x @ W + b
        E = gamma(m) * (np.abs(X) @ aW) + (E * D) @ aW
        Ec = gamma(m + 1) * (np.abs(x) @ aW + np.abs(b)) + (Ec * D) @ aW
        weights.append(T)
        offsets.append(c)
        errors.append(_test_error(T, c, E, Ec, d))
    if start != pattern.shape[0]:
        raise ValueError(f"a pattern of {pattern.shape[0]} bits for {start} hidden units")
    return Collapsed(tuple(weights), tuple(offsets), tuple(errors))


def _test_error(T: np.ndarray, c: np.ndarray, E: np.ndarray, Ec: np.ndarray, d: int) -> np.ndarray:
    """Bound on ``|fl(project(k, T) + c) - exact|`` per unit for ``|k_f| <= 1``."""
    return (gamma(d + 1) * (np.abs(T).sum(axis=0) + np.abs(c)) + E.sum(axis=0) + Ec) * _SAFETY


def region_bound(network: Network, collapsed: Collapsed, chain_error: np.ndarray) -> float:
    """Largest difference between a region's computed affine output and the network's.

    For a row the region tree sends to this pattern's leaf (its computed tests
    said so, whatever the row's exact pattern): ``delta_1 = 0``,
    ``delta_{i+1} = |W_{i+1}|^T (delta_i + e_i)`` bounds how far the
    pattern's exact pre-activations are from the network's exact ones
    (a unit whose exact sign differs from the pattern's is within its test
    error ``e_i`` of 0); the output adds the leaf map's own rounding and
    the network's (``chain_error``, `error_bounds`).
    """
    delta = np.zeros(network.weights[0].shape[1])
    for i, W in enumerate(network.weights[1:]):
        delta = (delta + collapsed.test_error[i]) @ np.abs(W)
    total = collapsed.test_error[-1] + delta + chain_error
    return float(total.max(initial=0.0)) * _SAFETY
