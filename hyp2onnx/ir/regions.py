"""A ReLU network on Klein coordinates read as an oblique tree with affine leaves.

Where a network's activation pattern is fixed, every pre-activation is
affine in ``k`` (`hyp2onnx.ir.network.collapse`), so its sign test
``w . k + c > 0`` is a geodesic half-space (``c x_0 + w . x_s > 0`` on the
hyperboloid). Aytekin's construction writes the network as a tree of such
tests, one level per hidden unit, layer after layer; a leaf holds its
pattern's affine map. `build` keeps only the patterns given (those
some points reach): a node whose other side no given pattern takes gets a
*missing* leaf there, and rows that reach one are evaluated by the network
itself (the fallback), never approximated.

Arithmetic: node ``j`` tests ``project(k, normals)[:, j] <= threshold[j]``
(inactive: left), ``threshold = -c``; a leaf's output is
``project``-order ``k . A + offset``. The tree is an `hyp2onnx.ir.Ensemble`
with oblique splits whose leaf value is the leaf's number plus one (0:
missing), so the same routing code and emitters serve it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import Ensemble
from .network import Network, collapse, error_bounds, label_indices, near_tie, region_bound

__all__ = ["AffineTree", "build"]


@dataclass(frozen=True, eq=False)
class AffineTree:
    """A network's region tree as the exporter reads it: the tree, its leaves' affine maps and
    patterns, and the stated bound (`hyp2onnx.RegionTree` is the estimator that holds it).

    ``maps[0]``/``offsets[0]`` are zeros (the missing leaf); leaf ``i >= 1``
    holds pattern ``patterns[i - 1]``. ``value_bound`` bounds, for every row
    the tree routes to a leaf, the difference between the leaf's computed
    outputs and the network's computed logits (or values).
    """

    network: Network
    ensemble: Ensemble
    maps: np.ndarray  #: [n_leaves + 1, d, n_outputs]
    offsets: np.ndarray  #: [n_leaves + 1, n_outputs]
    patterns: np.ndarray  #: [n_leaves, sum(hidden sizes)] bool
    value_bound: float

    @property
    def n_regions(self) -> int:
        return int(self.patterns.shape[0])

    def leaf(self, k: np.ndarray) -> np.ndarray:
        """The leaf number (1-based) each Klein row reaches; 0: a missing leaf, or
        a row outside the unit cube (``|k_f| > 1``: no point of the space)."""
        k = np.asarray(k, dtype=np.float64)
        e = self.ensemble
        assert e.projection is not None  # built with one normal per internal node
        node = np.zeros(k.shape[0], dtype=np.int64)
        # Level by level, projecting each row onto its own node's normal only (projecting
        # onto every node's would cost rows x nodes), in project()'s order: the same products
        # added left to right, so the same values.
        for _ in range(self.depth):
            column = e.feature[node]
            inside = column >= 0
            if not inside.any():
                break
            w = e.projection[:, np.where(inside, column, 0)]  # [d, n]
            p = k[:, 0] * w[0]
            for f in range(1, k.shape[1]):
                p += k[:, f] * w[f]
            left = p <= e.threshold[node]
            node = np.where(inside, np.where(left, e.left[node], e.right[node]), node)
        reached = e.value[node, 0].astype(np.int64)
        return np.where(np.abs(k).max(axis=1, initial=0.0) <= 1.0, reached, 0)

    @property
    def depth(self) -> int:
        """Levels of the tree: one per hidden unit."""
        return int(self.patterns.shape[1])

    def leaf_outputs(self, k: np.ndarray, leaf: np.ndarray) -> np.ndarray:
        """``k . maps[leaf] + offsets[leaf]``, the products added in feature order."""
        A = self.maps[leaf]  # [n, d, C]
        terms = np.asarray(k, dtype=np.float64)[:, :, None] * A
        total = terms[:, 0, :].copy()
        for f in range(1, terms.shape[1]):
            total += terms[:, f, :]
        return total + self.offsets[leaf]

    def logits(self, k: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Outputs before the link, the leaf reached, and which rows the network scored.

        Covered rows get their leaf's affine map; rows on a missing leaf, and
        (classifiers) rows whose label the bound could change, get the
        network's own logits (`Network.forward`).
        """
        k = np.asarray(k, dtype=np.float64)
        leaf = self.leaf(k)
        out = self.leaf_outputs(k, leaf)
        redo = leaf == 0
        if self.network.is_classifier:
            redo |= near_tie(self.network, out, self.value_bound)
        if redo.any():
            out[redo] = self.network.logits(k[redo])
        return out, leaf, redo

    def labels(self, k: np.ndarray) -> np.ndarray:
        return label_indices(self.network, self.logits(k)[0])


def build(network: Network, patterns: np.ndarray) -> AffineTree:
    """The tree holding ``patterns`` (one row of hidden-unit signs each).

    Node at depth ``t`` tests hidden unit ``t`` (layers in order); its
    normal and offset are the collapsed weights of the layers before its
    own, which every pattern below it shares. Children are adjacent (right
    = left + 1), built breadth first.
    """
    patterns = np.unique(np.asarray(patterns, dtype=bool), axis=0)
    n_bits = sum(network.hidden_sizes)
    if patterns.ndim != 2 or patterns.shape[1] != n_bits:
        raise ValueError(f"patterns must have {n_bits} columns (one per hidden unit)")
    d = network.n_features
    layer_of = np.repeat(np.arange(len(network.hidden_sizes)), network.hidden_sizes)
    unit_of = np.concatenate([np.arange(m) for m in network.hidden_sizes] or [np.zeros(0, int)])
    collapsed = [collapse(network, p) for p in patterns]
    chain_error = error_bounds(network)[0][-1]
    bound = max((region_bound(network, c, chain_error) for c in collapsed), default=0.0)

    feature, threshold, left, right, value, normals = _pattern_nodes(
        patterns, collapsed, layer_of, unit_of
    )
    n_leaves = patterns.shape[0]
    maps = np.zeros((n_leaves + 1, d, network.n_outputs))
    offsets = np.zeros((n_leaves + 1, network.n_outputs))
    for p, c in enumerate(collapsed):
        maps[p + 1] = c.weights[-1]
        offsets[p + 1] = c.offsets[-1]
    projection = np.stack(normals, axis=1) if normals else np.zeros((d, 1))
    ensemble = Ensemble(
        feature=np.asarray(feature, dtype=np.int64),
        threshold=np.asarray(threshold, dtype=np.float64),
        left=np.asarray(left, dtype=np.int64),
        right=np.asarray(right, dtype=np.int64),
        value=np.asarray(value, dtype=np.float64)[:, None],
        roots=np.zeros(1, dtype=np.int64),
        op="<=",
        compare_dtype="float64",
        threshold_dtype="float64",
        n_features=d,
        aggregate="sum",
        base_values=np.zeros(1),
        post_transform="identity",
        projection=projection,
    )
    return AffineTree(network, ensemble, maps, offsets, patterns, bound)


def _pattern_nodes(
    patterns: np.ndarray, collapsed: list, layer_of: np.ndarray, unit_of: np.ndarray
) -> tuple[list[int], list[float], list[int], list[int], list[float], list[np.ndarray]]:
    """The nodes of `build`'s tree, breadth first: ``feature``, ``threshold``, ``left``,
    ``right``, ``value`` (a leaf's pattern number + 1) and the tested normals."""
    n_bits = patterns.shape[1]
    feature: list[int] = [-1]
    threshold: list[float] = [0.0]
    left: list[int] = [-1]
    right: list[int] = [-1]
    value: list[float] = [0.0]
    normals: list[np.ndarray] = []
    # (node, depth, indices of the patterns below it)
    queue = [(0, 0, np.arange(patterns.shape[0]))] if patterns.shape[0] else []
    while queue:
        node, depth, below = queue.pop(0)
        if depth == n_bits:
            value[node] = float(below[0] + 1)
            continue
        c = collapsed[below[0]]
        i, j = int(layer_of[depth]), int(unit_of[depth])
        feature[node] = len(normals)
        normals.append(c.weights[i][:, j])
        threshold[node] = float(-c.offsets[i][j])
        left[node], right[node] = len(feature), len(feature) + 1
        for side in (False, True):
            child = len(feature)
            feature.append(-1)
            threshold.append(0.0)
            left.append(-1)
            right.append(-1)
            value.append(0.0)
            mine = below[patterns[below, depth] == side]
            if mine.size:
                queue.append((child, depth + 1, mine))
    return feature, threshold, left, right, value, normals


#: The class's name before it was told apart from the estimator `hyp2onnx.RegionTree`: region
#: trees pickled then hold this name.
RegionTree = AffineTree
