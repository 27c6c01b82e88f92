"""Isolation trees grown level by level, all trees of a forest at once.

Every node of a level is split in one pass of numpy calls: the rows of a
level are held ordered by node (a node's rows are one segment), and each
node's sums, minima and maxima are segment reductions (``np.add.reduceat``
and its kin), so the per-node Python loop is gone. Each tree keeps its own
streams of draws (`Streams`); at each level a tree draws for its nodes in
node order, so a tree does not depend on which trees it grows with (nor on
``n_jobs``). Nodes are numbered breadth first; children follow their parents.

Every sum has a fixed order, the same whatever else the level holds: a
node's sums over its rows are segment reductions (whose result does not
depend on the segment's place in the array), and a row's sums over its
features run in feature order (`_row_dot`), as the graph projects
(`hyp2onnx.ir.projection.project`). The split stored is the split that
routes: a row goes left iff its float64 value (Klein coordinate, or the
projection on the stored unit normal) is at most the stored threshold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..geometry import _ball_terms, _centroid_row_terms

#: Draws of a centred node's direction before it is left a leaf (the rows project onto one value).
DIRECTION_TRIES = 4


@dataclass(frozen=True, eq=False)
class IsolationNodes:
    """The node arrays of isolation trees (those of
    `hyp2onnx.estimators._isolation.IsolationTree`, one tree's; `GrownTrees`, several
    trees' end to end). ``normal`` is None for axis trees."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    n_node_samples: np.ndarray
    depth: np.ndarray
    normal: np.ndarray | None = None


class GrownTrees(NamedTuple):
    """The nodes of several trees, end to end: tree ``t`` holds nodes
    ``offsets[t]:offsets[t + 1]`` (root first); ``left``/``right`` are tree-local."""

    offsets: np.ndarray
    nodes: IsolationNodes


def _row_dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per column of the feature-major ``[d, n]`` arrays, ``a . b`` added in feature order
    (``(a_0 b_0 + a_1 b_1) + ...``, as `hyp2onnx.ir.projection.project` adds)."""
    out = a[0] * b[0]
    for j in range(1, a.shape[0]):
        out += a[j] * b[j]
    return out


def _row_norms(v: np.ndarray) -> np.ndarray:
    """Per column of ``[d, n]``, ``|v|``; columns whose square would under- or overflow are
    scaled by their largest entry first."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        norms = np.sqrt(_row_dot(v, v))
    redo = ~(norms > 1e-150) | ~(norms < 1e150)
    if redo.any():
        w = v[:, redo]
        scale = np.abs(w).max(axis=0, initial=0.0)
        safe = np.where((scale > 0) & np.isfinite(scale), scale, 1.0)
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = scale * np.sqrt(_row_dot(w / safe, w / safe))
        norms[redo] = np.where(np.isinf(scale), np.inf, scaled)
    return norms


def thresholds(lo: np.ndarray, hi: np.ndarray, u: np.ndarray, law: str) -> np.ndarray:
    """``lo <= t < hi`` for each node from its uniform draw ``u`` by ``law`` (``lo < hi`` in (-1, 1)):
    uniform in the Klein coordinate, or in hyperbolic distance (``tanh`` of uniform ``artanh``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        if law == "klein":
            t = lo + (hi - lo) * u
        else:
            a = np.arctanh(np.maximum(lo, -1.0 + 1e-16))
            b = np.arctanh(np.minimum(hi, 1.0 - 1e-16))
            t = np.tanh(a + (b - a) * u)
    return np.minimum(np.maximum(t, lo), np.nextafter(hi, -np.inf))


_MASK = (1 << 64) - 1


def stream_seed(seed: int, depth: int, attempt: int) -> int:
    """The 32-bit seed of tree ``seed``'s draws at level ``depth``, try ``attempt``
    (SplitMix64's finaliser of the three mixed): a stream of its own for each."""
    x = (int(seed) * 0x9E3779B97F4A7C15 + int(depth) * 0xBF58476D1CE4E5B9 + attempt + 1) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return (x ^ (x >> 31)) & 0xFFFFFFFF


class Streams(NamedTuple):
    """Each tree's random draws: tree ``t`` (seed ``seeds[t]``) draws a level's nodes,
    at each try, from ``rng`` seeded anew by `stream_seed` (a reseed costs microseconds,
    a ``RandomState`` of its own a millisecond)."""

    rng: np.random.RandomState
    seeds: list[int]

    def draws(
        self,
        trees: np.ndarray,
        depth: int,
        attempt: int,
        make: Callable[[np.random.RandomState, int], np.ndarray],
    ) -> np.ndarray:
        """``make(rng, c)`` for each tree with ``c`` nodes in ``trees`` (sorted), end to end."""
        ids, counts = np.unique(trees, return_counts=True)
        out = []
        for t, c in zip(ids.tolist(), counts.tolist(), strict=True):
            self.rng.seed(stream_seed(self.seeds[t], depth, attempt))
            out.append(make(self.rng, c))
        return np.concatenate(out)


def _segments(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, seg)``: where each node's rows begin, and the node of each row."""
    starts = np.cumsum(sizes) - sizes
    return starts, np.repeat(np.arange(sizes.size), sizes)


class _Level(NamedTuple):
    """The nodes of one level (ordered by tree, then node) and their rows, ordered by node."""

    tree: np.ndarray  # each node's tree
    ident: np.ndarray  # each node's tree-local index
    sizes: np.ndarray  # each node's row count
    slots: np.ndarray  # the rows, as indices into the forest's rows


class _Nodes:
    """The nodes made so far, recorded level by level, then assembled into `GrownTrees`."""

    def __init__(self, n_trees: int, psi: int, d: int) -> None:
        self.count = np.ones(n_trees, dtype=np.int64)
        trees = np.arange(n_trees)
        zero = np.zeros(n_trees, dtype=np.int64)
        self.made = [(trees, zero, np.full(n_trees, psi, dtype=np.int64), zero)]
        self.splits: list[tuple[np.ndarray, ...]] = []
        self.d = d

    def split(
        self, level: _Level, split: np.ndarray, found: tuple, n_left: np.ndarray, depth: int
    ) -> _Level:
        """Record the splits of nodes ``split`` (their ``(feature, threshold, normal)``) and
        their children, at ``depth``; return the children as a level (rows still to order)."""
        tree, ident = level.tree[split], level.ident[split]
        first = np.searchsorted(tree, tree)  # each tree's first split of the level
        left = self.count[tree] + 2 * (np.arange(tree.size) - first)
        self.count += 2 * np.bincount(tree, minlength=self.count.size)
        self.splits.append((tree, ident, left, *found))
        n_rows = level.sizes[split]
        sizes = np.stack([n_left, n_rows - n_left], axis=1).ravel()
        children = np.stack([left, left + 1], axis=1).ravel()
        trees = np.repeat(tree, 2)
        self.made.append((trees, children, sizes, np.full(sizes.size, depth, dtype=np.int64)))
        return _Level(trees, children, sizes, level.slots)

    def assemble(self, centred: bool) -> GrownTrees:
        offsets = np.concatenate([[0], np.cumsum(self.count)])
        total = int(offsets[-1])
        n_samples, depth = np.zeros(total, np.int64), np.zeros(total, np.int64)
        for tree, ident, sizes, level in self.made:
            n_samples[offsets[tree] + ident], depth[offsets[tree] + ident] = sizes, level
        feature = np.full(total, -1, np.int64)
        left, right = np.full(total, -1, np.int64), np.full(total, -1, np.int64)
        threshold = np.zeros(total)
        normal = np.zeros((total, self.d)) if centred else None
        for tree, ident, first, f, t, w in self.splits:
            at = offsets[tree] + ident
            feature[at], threshold[at], left[at], right[at] = f, t, first, first + 1
            if normal is not None:
                normal[at] = w
        nodes = IsolationNodes(feature, threshold, left, right, n_samples, depth, normal)
        return GrownTrees(offsets, nodes)


def grow_forest(
    k: np.ndarray,
    lorentz: Callable[[np.ndarray], np.ndarray] | None,
    samples: list[np.ndarray],
    features: list[np.ndarray],
    streams: Streams,
    *,
    law: str,
    max_depth: int,
    n_directions: int,
) -> GrownTrees:
    """Grow tree ``t`` on the Klein rows ``k[samples[t]]``, its draws from ``streams``,
    all trees level by level.

    Axis splits on ``features[t]`` if ``lorentz`` is None, else centred splits (whose
    centroids and moves use the hyperboloid rows ``lorentz(rows)`` gives). A node is split
    unless it lies at ``max_depth`` or holds fewer than two rows.
    """
    n_trees, psi, d = len(samples), samples[0].size, k.shape[1]
    rows = np.concatenate(samples)
    # feature-major: a row's terms are a column, so each term is a contiguous vector
    table = _centred_table(k[rows], lorentz(rows)) if lorentz is not None else k[rows].T.copy()
    allowed = np.zeros((d, n_trees), dtype=bool)
    for t, f in enumerate(features):
        allowed[f, t] = True
    nodes = _Nodes(n_trees, psi, d)
    zero = np.zeros(n_trees, dtype=np.int64)
    level = _Level(np.arange(n_trees), zero, np.full(n_trees, psi), np.arange(rows.size))
    for depth in range(max_depth):
        keep = level.sizes > 1
        if not keep.all():
            _, seg = _segments(level.sizes)
            tree, ident, sizes = level.tree[keep], level.ident[keep], level.sizes[keep]
            level = _Level(tree, ident, sizes, level.slots[keep[seg]])
        if not level.tree.size:
            break
        starts, seg = _segments(level.sizes)
        here = np.take(table, level.slots, axis=1)  # the level's rows, in node order
        if lorentz is None:
            found, ok, goes_left = _axis_level(
                here, level.tree, starts, seg, allowed, streams, depth, law
            )
        else:
            found, ok, goes_left = _centred_level(
                here, level, starts, seg, streams, depth, law, n_directions
            )
        split = np.flatnonzero(ok)
        n_left = np.add.reduceat(goes_left.astype(np.int64), starts)[split]
        children = nodes.split(level, split, tuple(a[split] for a in found), n_left, depth + 1)
        moves = ok[seg]  # rows of split nodes, each to its child: left first, in row order
        order = np.argsort(2 * seg[moves] + ~goes_left[moves], kind="stable")
        level = children._replace(slots=level.slots[moves][order])
    return nodes.assemble(lorentz is not None)


def _axis_level(
    values: np.ndarray,
    tree: np.ndarray,
    starts: np.ndarray,
    seg: np.ndarray,
    allowed: np.ndarray,
    streams: Streams,
    depth: int,
    law: str,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
    """Each node's axis split: a feature drawn among its tree's ``allowed`` features that
    vary in the node, a threshold between their least and greatest value. ``values``:
    the level's Klein rows, ``[d, rows]``. Returns ``((feature, threshold, normal), split
    or not, each row goes left)``."""
    lo = np.minimum.reduceat(values, starts, axis=1)
    hi = np.maximum.reduceat(values, starts, axis=1)
    varying = (lo < hi) & allowed[:, tree]
    count = varying.sum(axis=0)
    u = streams.draws(tree, depth, 0, lambda r, c: r.random_sample((c, 2)))
    pick = np.minimum((u[:, 0] * count).astype(np.int64), np.maximum(count - 1, 0))
    feature = np.argmax(np.cumsum(varying, axis=0) > pick, axis=0)
    node = np.arange(feature.size)
    threshold = thresholds(lo[feature, node], hi[feature, node], u[:, 1], law)
    ok = count > 0
    goes_left = (values[feature[seg], np.arange(seg.size)] <= threshold[seg]) & ok[seg]
    return (feature, threshold, np.zeros((feature.size, 0))), ok, goes_left


def _centred_table(k: np.ndarray, lorentz: np.ndarray) -> np.ndarray:
    """``[4 d + 4, n]``: the rows' terms the centred splits use that do not depend on the
    node (`hyp2onnx.geometry`'s `_centroid_row_terms` and `_ball_terms`), computed once:
    the hyperboloid row, ``x_s / |x_s|``, ``x_s / (1 + x_0)``, ``k``, ``|x_s|``,
    ``1 / (x_0 + |x_s|)`` and ``2 / (1 + x_0)``; `_Terms` names them."""
    spatial, unit, inverse = _centroid_row_terms(lorentz)
    ball, ball_scale = _ball_terms(lorentz)
    columns = [lorentz, unit, ball, k, spatial[:, None], inverse[:, None], ball_scale[:, None]]
    return np.concatenate(columns, axis=1).T.copy()


class _Terms(NamedTuple):
    """The level's rows of `_centred_table`, by name (feature-major views)."""

    x: np.ndarray
    unit: np.ndarray
    ball: np.ndarray
    klein: np.ndarray
    spatial: np.ndarray
    inverse: np.ndarray
    ball_scale: np.ndarray

    @classmethod
    def of(cls, t: np.ndarray) -> _Terms:
        d = (t.shape[0] - 4) // 4
        x, unit, ball, klein = (
            t[: d + 1],
            t[d + 1 : 2 * d + 1],
            t[2 * d + 1 : 3 * d + 1],
            t[3 * d + 1 : 4 * d + 1],
        )
        return cls(x, unit, ball, klein, t[4 * d + 1], t[4 * d + 2], t[4 * d + 3])


def _centroids(t: _Terms, starts: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Each node's Lorentzian centroid ``mu``, ``[d + 1, nodes]``, by
    `hyp2onnx.geometry.lorentzian_centroid`'s arithmetic (``m_0 - |m_s|`` summed from
    positive terms, no cancellation at any radius), its sums in this module's orders."""
    m = np.add.reduceat(t.x, starts, axis=1)
    m0, ms = m[0], m[1:]
    s = _row_norms(ms)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        diff = t.unit - (ms / s)[:, seg]
        gap = _row_dot(diff, diff)
        gap *= t.spatial
        gap /= 2.0
        gap += t.inverse
        terms = np.where(t.spatial > 0, gap, t.x[0])
        lower = np.where(s > 0, np.add.reduceat(terms, starts), m0)
        mu_s = ms / (np.sqrt(lower) * np.sqrt(m0 + s))
    return np.concatenate([np.hypot(1.0, _row_norms(mu_s))[None], mu_s])


def _moved(t: _Terms, mu: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """The rows' Klein coordinates, ``[d, rows]``, after the move of their node's ``mu`` to
    the origin (`hyp2onnx.geometry.move_to_origin`'s Mobius translation through the ball)."""
    a = (mu[1:] / (1.0 + mu[0]))[:, seg]
    ta = (2.0 / (1.0 + mu[0]))[seg]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        diff = t.ball - a
        dd = _row_dot(diff, diff)
        z0 = 2.0 * (dd / ta / t.ball_scale) + 1.0
        y = diff * ta - dd * a
        y /= ta * t.ball_scale + dd
        y *= 1.0 + z0
        y /= z0
    return y


def _centred_level(
    table: np.ndarray,
    level: _Level,
    starts: np.ndarray,
    seg: np.ndarray,
    streams: Streams,
    depth: int,
    law: str,
    n_directions: int,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray, np.ndarray]:
    """Each node's centred split, its direction redrawn (up to `DIRECTION_TRIES` times)
    for the nodes it does not split; ``table``: the level's rows of `_centred_table`.
    Returns as `_axis_level` does."""
    t = _Terms.of(table)
    mu = _centroids(t, starts, seg)
    moved = _moved(t, mu, seg)
    m, d = starts.size, moved.shape[0]
    threshold, normal = np.zeros(m), np.zeros((m, d))
    ok, goes_left = np.zeros(m, dtype=bool), np.zeros(seg.size, dtype=bool)
    pending = np.arange(m)
    for attempt in range(DIRECTION_TRIES):
        waiting = np.zeros(m, dtype=bool)
        waiting[pending] = True
        rows = np.flatnonzero(waiting[seg])
        sub_starts, sub_seg = _segments(level.sizes[pending])
        u = streams.draws(
            level.tree[pending], depth, attempt, lambda r, c: _direction(r, c, d, n_directions)
        )
        split, tau, w, left = _centred_try(
            moved[:, rows], t.klein[:, rows], sub_starts, sub_seg, mu[:, pending], u.T, law
        )
        done = pending[split]
        threshold[done], normal[done], ok[done] = tau[split], w.T[split], True
        goes_left[rows] = left & split[sub_seg]
        pending = pending[~split]
        if not pending.size:
            break
    return (np.zeros(m, dtype=np.int64), threshold, normal), ok, goes_left


def _direction(r: np.random.RandomState, c: int, d: int, n_directions: int) -> np.ndarray:
    """``[c, d + 1]``: per node a direction (normal on ``n_directions`` random axes, 0 on the
    others) and a uniform draw for the threshold."""
    if n_directions >= d:
        u = r.standard_normal((c, d))
    else:
        axes = np.argsort(r.random_sample((c, d)), axis=1)[:, :n_directions]
        u = np.zeros((c, d))
        np.put_along_axis(u, axes, r.standard_normal((c, n_directions)), axis=1)
    return np.concatenate([u, r.random_sample((c, 1))], axis=1)


def boosted_normal(mu: np.ndarray, u: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(n_0, n_s) = M^T (-s, u)`` per column, ``M`` the boost taking ``mu`` to the origin
    (`lorentz_boost_to_origin`), without the matrix: ``n_0 = -s mu_0 - mu_s . u`` and
    ``n_s = u + mu_s (s + mu_s . u / (1 + mu_0))``."""
    mu0, mu_s = mu[0], mu[1:]
    along = _row_dot(mu_s, u)
    return -s * mu0 - along, u + mu_s * (s + along / (1.0 + mu0))


def _centred_try(
    moved: np.ndarray,
    k: np.ndarray,
    starts: np.ndarray,
    seg: np.ndarray,
    mu: np.ndarray,
    drawn: np.ndarray,
    law: str,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One draw of each node's split: a direction ``u`` at the origin of its centred frame,
    a threshold ``s`` along it, mapped back by the boost ``M`` (`lorentz_boost_to_origin`):
    ``n = M^T (-s, u)``, the split ``n_s . k <= -n_0`` stored with a unit normal. Arrays
    feature-major; returns ``(split or not, threshold, normal, each row goes left)``."""
    u, q = drawn[:-1], drawn[-1]
    norm = _row_norms(u)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        u = u / norm
        p_moved = _row_dot(moved, u[:, seg])
        lo, hi = np.minimum.reduceat(p_moved, starts), np.maximum.reduceat(p_moved, starts)
        inside = (-1.0 < lo) & (hi < 1.0)
        s = thresholds(np.maximum(lo, -1.0), np.minimum(hi, 1.0), q, law)
        s = np.where(inside, s, lo / 2 + hi / 2)
        n0, ns = boosted_normal(mu, u, s)
        scale = _row_norms(ns)
        w, tau = ns / scale, -n0 / scale
        p = _row_dot(k, w[:, seg])  # what routes: the graph's projection, in feature order
    p_lo, p_hi = np.minimum.reduceat(p, starts), np.maximum.reduceat(p, starts)
    split = (norm > 0) & (lo < hi) & (p_lo < p_hi)
    tau = np.minimum(np.maximum(tau, p_lo), np.nextafter(p_hi, -np.inf))
    return split, tau, w, p <= tau[seg]
