"""Linear-fractional features: Klein coordinates of points seen in other frames.

An isometry ``M`` of the hyperboloid (a Lorentz matrix with ``M^T J M = J``,
``J = diag(-1, 1, ..., 1)``, ``M_00 >= 1``) moves the point ``x = x_0 (1, k)``
to ``M x``, whose Klein coordinates are

    k'_j = (M_j0 + sum_f M_jf k_f) / (M_00 + sum_f M_0f k_f),

linear-fractional in the original Klein coordinates ``k``, with a positive
denominator on the ball. A split ``k'_j <= t`` is therefore the flat set
``sum_f (M_jf - t M_0f) k_f <= t M_00 - M_j0``: a geodesic hyperplane.

`Frames` holds such features, many frames at once: column ``c`` is
``numerator[:, c] . (1, k)`` over ``denominator[:, frame[c]] . (1, k)``.
Both dot products are added in one fixed order, the constant first and then
``k_0``, ``k_1``, ...: `frame_features` is
`project` of ``(1, k)``, whose first product
``1 * a`` is ``a`` exactly, and the ONNX emitter (`hyp2onnx.emit.frames`)
repeats the same ``Mul``/``Add`` chain and the one ``Div``, so the graph's
frame coordinates are the Python model's bit for bit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .projection import project

__all__ = ["Frames", "frame_columns", "frame_features"]


@dataclass(frozen=True, eq=False)
class Frames:
    """Linear-fractional features of Klein coordinates (module doc).

    ``numerator`` is ``[d + 1, m]`` (row 0 the constants, row ``1 + f`` the
    weights of ``k_f``), ``denominator`` ``[d + 1, n_frames]`` and ``frame``
    ``[m]``: the denominator column each feature is divided by.
    """

    numerator: np.ndarray
    denominator: np.ndarray
    frame: np.ndarray

    def __post_init__(self) -> None:
        rows = self.numerator.shape[0]
        if self.numerator.ndim != 2 or self.denominator.ndim != 2:
            raise ValueError("Frames: numerator and denominator must be 2-D")
        if self.denominator.shape[0] != rows:
            raise ValueError("Frames: numerator and denominator need the same rows (1 + d)")
        if self.frame.shape != (self.numerator.shape[1],):
            raise ValueError("Frames: frame must give one denominator per numerator column")
        if self.frame.size and (
            self.frame.min() < 0 or self.frame.max() >= self.denominator.shape[1]
        ):
            raise ValueError("Frames: a feature names a denominator that does not exist")

    @classmethod
    def from_lorentz(cls, matrices: list[np.ndarray]) -> Frames:
        """The Klein coordinates of every frame ``M_t`` side by side (``d`` columns each)."""
        numerators = [np.asarray(M, dtype=np.float64)[1:, :].T for M in matrices]
        d = numerators[0].shape[1] if numerators else 0
        return cls(
            numerator=np.ascontiguousarray(np.concatenate(numerators, axis=1)),
            denominator=np.ascontiguousarray(
                np.stack([np.asarray(M, dtype=np.float64)[0, :] for M in matrices], axis=1)
            ),
            frame=np.repeat(np.arange(len(matrices), dtype=np.int64), d),
        )

    @property
    def n_klein_features(self) -> int:
        return int(self.numerator.shape[0] - 1)

    @property
    def n_columns(self) -> int:
        return int(self.numerator.shape[1])

    def select(self, columns: np.ndarray) -> Frames:
        """The frames of ``columns`` only, denominators renumbered in order of first use."""
        columns = np.asarray(columns, dtype=np.int64)
        used, frame = np.unique(self.frame[columns], return_inverse=True)
        return Frames(
            np.ascontiguousarray(self.numerator[:, columns]),
            np.ascontiguousarray(self.denominator[:, used]),
            frame.astype(np.int64),
        )

    def used_features(self) -> np.ndarray:
        """Klein features with a non-zero weight in some numerator or denominator."""
        weights = np.concatenate([self.numerator[1:], self.denominator[1:]], axis=1)
        return np.flatnonzero(np.any(weights != 0, axis=1))


#: Values a block of `frame_features` works on at once (rows times columns):
#: its temporaries stay near a megabyte whatever the number of rows.
BLOCK_VALUES = 1 << 17


def frame_features(k: np.ndarray, frames: Frames) -> np.ndarray:
    """``[n, m]`` frame coordinates of the Klein rows ``k`` (float64, fixed order; module doc).

    Computed in blocks of rows, each value by the same operations as all at
    once (every one is its own row's), so the temporaries stay bounded: the
    output is the only array of ``n`` rows.
    """
    k = np.asarray(k, dtype=np.float64)
    n, m = k.shape[0], frames.n_columns
    out = np.empty((n, m))
    step = max(1, BLOCK_VALUES // max(m, k.shape[1] + 1))
    for start in range(0, n, step):
        block = k[start : start + step]
        extended = np.concatenate([np.ones((block.shape[0], 1)), block], axis=1)
        numerator = project(extended, frames.numerator)
        denominator = project(extended, frames.denominator)
        np.divide(numerator, denominator[:, frames.frame], out=out[start : start + step])
    return out


def frame_columns(k: np.ndarray, frames: Frames) -> Iterator[np.ndarray]:
    """The columns of ``frame_features(k, frames)`` one at a time, each bit for bit.

    Each dot product starts from its constant (``1 * a`` is ``a`` exactly)
    and adds ``k_0``'s term, then ``k_1``'s, ...: `project`'s order. Holds
    the denominators and one column, never ``n x m`` values.
    """
    k = np.asarray(k, dtype=np.float64)

    def dot(weights: np.ndarray) -> np.ndarray:
        out = np.full(k.shape[0], weights[0])
        for f in range(k.shape[1]):
            out += k[:, f] * weights[1 + f]
        return out

    denominators = [dot(frames.denominator[:, c]) for c in range(frames.denominator.shape[1])]
    for j in range(frames.n_columns):
        yield dot(frames.numerator[:, j]) / denominators[frames.frame[j]]
