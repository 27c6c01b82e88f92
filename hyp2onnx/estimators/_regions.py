"""A fitted hyperbolic MLP read as a geodesic region tree (Aytekin's construction).

``region_tree(network, X)`` builds the tree of the activation patterns the
points ``X`` reach (`hyp2onnx.ir.regions`): each internal node tests
the sign of one hidden unit's pre-activation, an affine function of the
Klein coordinates and so a geodesic half-space; each leaf holds its
region's affine map. Rows that reach a pattern the tree lacks are scored by
the network itself, and `RegionTree.covered` (the graph's
``covered`` output) says which. `RegionTree.explain` describes the
region of any row from its own pattern, covered or not.

Contract: the tree's tests and leaf maps are collapsed weights, whose
rounding differs from the layer-by-layer network; a row within that
rounding of a boundary may take the neighbouring leaf, whose map agrees
with the network there to within ``value_bound_`` (the network is
continuous). Classifier rows whose top two logits lie within twice the
bound (one logistic logit: within the bound of 0) are rescored by the
network, so labels equal the network's on every row.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import Tags, get_tags
from sklearn.utils.validation import check_is_fitted

from .._progress import bar
from ..errors import MissingExtraError, UnsupportedModelError
from ..geometry import curvature_radius, klein_to_poincare
from ..ir.network import Network, collapse, label_indices, link
from ..ir.regions import AffineTree, build
from ._mlp import _HyperbolicMLP

__all__ = ["Region", "RegionTree", "region_tree"]


@dataclass(frozen=True)
class Region:
    """One row's linear region, from its own activation pattern (what ``explain`` returns).

    Half-space ``h`` (one per hidden unit, layers in order) is
    ``side[h] * (klein_normals[h] . k + klein_offsets[h]) > 0`` for
    ``side = +1`` (active unit) and ``>= 0`` for ``side = -1`` (inactive,
    pre-activation ``<= 0``). On the hyperboloid the same set is
    ``side[h] * <minkowski_normals[h], x>_L`` of the same sign, with
    ``<n, x>_L = -n_0 x_0 + n_1 x_1 + ... + n_d x_d`` (``x_0`` the timelike
    coordinate, listed first whatever the model's ``timelike_dim``): the
    normal is ``(-offset, w)``. In the region the outputs (logits, or values)
    are ``k' @ affine_weights + affine_offset`` for ``k'`` the network's input
    (``network_input``: ``k`` itself for ``centre="origin"``, else the Klein
    coordinates of ``L x``). A centred network's half-spaces are given in the
    point's own coordinates: ``w . k' + c`` has the sign of ``(c, w) L x``, so
    the normal is ``(c, w) L`` (``L^T`` applied to it).
    """

    pattern: np.ndarray
    klein_normals: np.ndarray  #: [n_hidden_units, d]
    klein_offsets: np.ndarray  #: [n_hidden_units]
    side: np.ndarray  #: [n_hidden_units], +1 or -1
    minkowski_normals: np.ndarray  #: [n_hidden_units, d + 1]
    affine_weights: np.ndarray  #: [d, n_outputs]
    affine_offset: np.ndarray  #: [n_outputs]
    layer: np.ndarray  #: [n_hidden_units]: the hidden layer of each half-space
    covered: bool  #: the tree holds this pattern's region
    region: int  #: the pattern's region number in the tree, -1 if it lacks it
    klein: np.ndarray  #: the row's Klein coordinates

    def contains(self, k: np.ndarray) -> np.ndarray:
        """Whether Klein rows ``k`` satisfy every half-space (exact arithmetic aside)."""
        s = np.atleast_2d(k) @ self.klein_normals.T + self.klein_offsets
        return np.all(np.where(self.side > 0, s > 0, s <= 0), axis=1)

    def faces(self, n: int = 400) -> list[tuple[int, np.ndarray]]:
        """The region's own faces at d = 2: ``(half-space, Klein points of its edge)``.

        A half-space is a face where a stretch of its boundary line inside
        the disk satisfies every other half-space (to ``1e-12``); the others
        are implied by these. Each edge is sampled at ``n`` points of its line.
        """
        self._need_2d()
        faces = []
        for h, (w, c) in enumerate(zip(self.klein_normals, self.klein_offsets, strict=True)):
            line = _chord(w, c, n)
            if line is None:
                continue
            values = line @ self.klein_normals.T + self.klein_offsets  # [n, h]
            ok = np.all((self.side * values >= -1e-12) | (np.arange(self.side.size) == h), axis=1)
            if ok.any():
                faces.append((h, line[ok]))
        return faces

    def _need_2d(self) -> None:
        if self.klein.shape[0] != 2:
            raise ValueError(
                f"a picture needs d = 2, this region lives in d = {self.klein.shape[0]}"
            )

    def plot(
        self,
        ax: Any = None,
        *,
        points: Any = None,
        labels: Any = None,
        resolution: int = 400,
    ) -> Any:
        """Draw the region in the Poincaré disk (d = 2): its faces are geodesic arcs.

        The region is shaded, its own faces drawn in the colour of their
        hidden layer (the other half-spaces, which do not touch it, faintly),
        the row it was made from starred; ``points`` (Klein coordinates,
        e.g. ``RegionTree.to_klein(X)``) are drawn over it, coloured by
        ``labels``. Needs matplotlib (``pip install 'hyp2onnx[plot]'``).
        Returns the axes.
        """
        self._need_2d()
        try:
            from ..plot import disk_grid, draw_disk, plt
        except ImportError as exc:
            raise MissingExtraError(
                "Region.plot needs matplotlib: pip install 'hyp2onnx[plot]'"
            ) from exc
        if ax is None:
            ax = plt.figure(figsize=(5.5, 5)).add_subplot()
        xx, yy, inside, k = disk_grid(resolution, "poincare")
        mask = np.zeros(xx.shape)
        mask[inside] = self.contains(k)
        ax.contourf(xx, yy, mask, levels=[0.5, 1.5], colors=["tab:blue"], alpha=0.3)
        self._draw_lines(ax, plt.get_cmap("tab10")(np.arange(10)))
        if points is not None:
            q = klein_to_poincare(np.asarray(points, dtype=np.float64))
            ax.scatter(
                q[:, 0],
                q[:, 1],
                s=8,
                c=None if labels is None else np.unique(np.asarray(labels), return_inverse=True)[1],
                cmap="tab10",
                vmin=0,
                vmax=9,
                edgecolors="black",
                linewidths=0.2,
                zorder=4,
            )
        here = klein_to_poincare(self.klein[None, :])[0]
        ax.plot(*here, "k*", ms=12, zorder=5, label="the row explained")
        draw_disk(ax, "poincare")
        handles, names = ax.get_legend_handles_labels()
        unique = dict(zip(names, handles, strict=True))
        ax.legend(
            unique.values(), unique.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8
        )
        ax.set_title(f"region {self.region}" if self.covered else "region not in the tree")
        return ax

    def _draw_lines(self, ax: Any, colors: np.ndarray) -> None:
        """Every half-space's chord faintly, then the region's own faces in the colour
        of their hidden layer."""
        for w, c in zip(self.klein_normals, self.klein_offsets, strict=True):
            line = _chord(w, c)
            if line is not None:
                q = klein_to_poincare(line)
                ax.plot(q[:, 0], q[:, 1], color="0.8", lw=0.4, zorder=1)
        for h, edge in self.faces():
            q = klein_to_poincare(edge)
            layer = int(self.layer[h])
            ax.plot(
                q[:, 0],
                q[:, 1],
                color=colors[(layer + 1) % 10],
                lw=2.2,
                zorder=3,
                label=f"face, hidden layer {layer + 1}",
            )


def _chord(w: np.ndarray, c: float, n: int = 200) -> np.ndarray | None:
    """Points of the Klein line ``w . k + c = 0`` inside the unit disk, or None."""
    norm = float(np.hypot(w[0], w[1]))
    if norm == 0.0 or abs(c) >= norm:
        return None
    foot = -c * w / norm**2
    direction = np.array([-w[1], w[0]]) / norm
    half = math.sqrt(max(1.0 - float(foot @ foot), 0.0))
    s = np.linspace(-half, half, n)[1:-1]
    return foot + s[:, None] * direction


class RegionTree(BaseEstimator):
    """A hyperbolic MLP's region tree, built from the patterns of given points.

    ``RegionTree(network).fit(X)`` (or [`region_tree`][hyp2onnx.region_tree])
    holds the regions the points ``X`` reach; a scikit-learn estimator, so
    `sklearn.base.clone` and `sklearn.base.is_classifier` work on it (a clone
    holds an unfitted network, which ``fit(X, y)`` fits first). It predicts as the network does (labels equal on every row; values
    within ``value_bound_``), exports with ``hyp2onnx.to_onnx`` and is
    checked with ``hyp2onnx.verify`` like every model.

    Attributes
    ----------
    network_ : HyperbolicMLPClassifier or HyperbolicMLPRegressor
    tree_ : hyp2onnx.ir.regions.AffineTree
    n_regions_ : int
        Leaves (activation patterns the points reached).
    max_regions_ : int
        ``2 ** sum(hidden_layer_sizes)``, Aytekin's bound on the leaves.
    n_nodes_ : int
        Nodes of the tree, missing leaves included.
    counts_ : ndarray
        Points of ``X`` in each region (0 for a certified one).
    n_certified_ : int
        Regions no point of ``X`` reached, added by ``certify_radius``.
    witnesses_ : ndarray
        ``[n_regions_, d]``: for a certified region, the network input (``network_input``) of a
        point inside it and within the radius, whose pattern the network
        computes as the region's (NaN for the regions ``X`` reached).
    value_bound_ : float
        Largest difference between a leaf's outputs and the network's on a row routed there.
    """

    def __init__(
        self,
        network: Any = None,
        *,
        certify_radius: float | None = None,
        max_certified: int = 10_000,
        verbose: int = 0,
    ) -> None:
        self.network = network
        self.certify_radius = certify_radius
        self.max_certified = max_certified
        self.verbose = verbose

    def __sklearn_tags__(self) -> Tags:
        """A classifier's or a regressor's tags, as its network's (`is_classifier` reads them)."""
        tags = super().__sklearn_tags__()
        if self.network is not None:
            tags.estimator_type = get_tags(self.network).estimator_type
        return tags

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "network" not in state and "network_" in state:  # pickled before it had parameters
            state = dict(state, network=state["network_"], certify_radius=None)
            state.setdefault("max_certified", 10_000)
            state.setdefault("verbose", 0)
        super().__setstate__(state)

    def fit(self, X: Any, y: Any = None) -> RegionTree:
        """Build the tree of the regions the points ``X`` reach (and, with
        ``certify_radius``, of those certified near the origin).

        A fitted ``network`` is read as it is (and kept, not copied); an
        unfitted one (a `sklearn.base.clone` of this tree holds one) is first
        fitted on ``X, y``, as a copy.
        """
        network = self._fitted_network(X, y)
        ir = network.network()
        patterns = ir.pattern(network.network_input(X))
        witnesses = np.zeros((0, ir.n_features))
        if self.certify_radius is not None:
            klein_radius = _klein_radius(self.certify_radius, float(network.curvature))
            limit = self.max_certified
            if not isinstance(limit, (int, np.integer)) or isinstance(limit, bool) or limit < 0:
                raise ValueError(f"max_certified must be a count >= 0, got {limit!r}.")
            witnesses = certified_witnesses(
                ir, patterns, klein_radius, int(limit), verbose=self.verbose
            )
        self.network_ = network
        self._numbers: dict[bytes, int] | None = None  # filled by _region_numbers
        self._build(ir, patterns, witnesses)
        for name in ("input_geometry", "curvature", "timelike_dim", "n_features_in_"):
            setattr(self, name, getattr(network, name))
        if network._classifier:
            self.classes_ = network.classes_
        return self

    def _fitted_network(self, X: Any, y: Any) -> _HyperbolicMLP:
        network = self.network
        if not isinstance(network, _HyperbolicMLP):
            raise UnsupportedModelError(
                f"a region tree reads a HyperbolicMLPClassifier or HyperbolicMLPRegressor, "
                f"got {type(network).__name__}."
            )
        try:
            check_is_fitted(network)
            return network
        except NotFittedError:
            if y is None:
                raise NotFittedError(
                    f"this RegionTree's {type(network).__name__} is not fitted: pass a fitted "
                    "network, or y to fit(X, y) to fit a copy of it on X first."
                ) from None
            return clone(network).fit(X, y)

    def _build(self, ir: Network, patterns: np.ndarray, witnesses: np.ndarray) -> None:
        """The tree of ``patterns`` and of the witnesses' patterns, and what it counts."""
        found = ir.pattern(witnesses)
        self.tree_: AffineTree = build(ir, np.concatenate([patterns, found]))
        unique, counts = np.unique(patterns, axis=0, return_counts=True)
        numbers = self._region_numbers()
        self.counts_ = np.zeros(self.tree_.n_regions, dtype=np.int64)
        self.counts_[[numbers[np.packbits(p).tobytes()] for p in unique]] = counts
        #: Klein coordinates of one point in each certified region (NaN: a region X reached)
        self.witnesses_ = np.full((self.tree_.n_regions, ir.n_features), np.nan)
        if len(found):
            self.witnesses_[[numbers[np.packbits(p).tobytes()] for p in found]] = witnesses
        self.n_certified_ = int(len(found))
        self.n_regions_ = self.tree_.n_regions
        self.max_regions_ = 2 ** sum(ir.hidden_sizes)
        self.n_nodes_ = self.tree_.ensemble.n_nodes
        self.value_bound_ = self.tree_.value_bound

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        if not hasattr(self, "tree_"):  # unfitted: its parameters, as scikit-learn shows them
            return super().__repr__(N_CHAR_MAX)
        network = self.network_
        sizes = tuple(getattr(network, "hidden_layer_sizes", ()))
        certified = f", {self.n_certified_} certified" if self.n_certified_ else ""
        return (
            f"RegionTree({type(network).__name__}(hidden_layer_sizes={sizes}): "
            f"{self.n_regions_} regions of at most 2**{sum(self.tree_.network.hidden_sizes)}"
            f"{certified}, {self.n_nodes_} nodes, value_bound_={self.value_bound_:.3g})"
        )

    def _region_numbers(self) -> dict[bytes, int]:
        """Each region's number, by its packed pattern."""
        numbers: dict[bytes, int] | None = getattr(self, "_numbers", None)
        if numbers is None:
            packed = np.packbits(self.tree_.patterns, axis=1)
            numbers = {row.tobytes(): i for i, row in enumerate(packed)}
            self._numbers = numbers
        return numbers

    @property
    def is_classifier(self) -> bool:
        """Whether the network is a classifier."""
        return self.tree_.network.is_classifier

    def to_klein(self, X: Any) -> np.ndarray:
        """Unit-ball Klein coordinates of points ``X`` (the network's geometry)."""
        return self.network_.to_klein(X)

    def network_input(self, X: Any) -> np.ndarray:
        """What the tree reads: the network's input (centred Klein coordinates, if centred)."""
        return self.network_.network_input(X)

    def apply(self, X: Any) -> np.ndarray:
        """The region (0-based) each point's row reaches in the tree; -1 where the tree lacks it."""
        return self.tree_.leaf(self.network_input(X)) - 1

    def covered(self, X: Any) -> np.ndarray:
        """Whether the tree holds each point's region (else the network scores it)."""
        return self.apply(X) >= 0

    def decision_function(self, X: Any) -> np.ndarray:
        """Leaf outputs, or the network's where the row is uncovered or near a tie."""
        return self.tree_.logits(self.network_input(X))[0]

    def predict(self, X: Any) -> np.ndarray:
        """Labels (the network's, on every row) or values (within ``value_bound_`` of them)."""
        out = self.decision_function(X)
        if self.is_classifier:
            return self.classes_.take(label_indices(self.tree_.network, out))
        return out[:, 0] if out.shape[1] == 1 else out

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Accuracy for a classifier's tree, R² for a regressor's (scikit-learn's mixins' scores)."""
        if self.is_classifier:
            return float(accuracy_score(y, self.predict(X), sample_weight=sample_weight))
        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities from `decision_function` (classifiers only)."""
        if not self.is_classifier:
            raise AttributeError("predict_proba: this region tree is a regressor's")
        return link(self.tree_.network, self.decision_function(X))

    def plot(
        self, X: Any = None, *, disk: str = "poincare", resolution: int = 300, ax: Any = None
    ) -> Any:
        """Draw the tree's partition at d = 2: each region of the disk in its own colour
        (the network's regions the tree lacks in grey), with the points ``X`` coloured by
        their region. A [`DecisionRegionDisplay`][hyp2onnx.plot.DecisionRegionDisplay] of
        `apply`; needs matplotlib (``pip install 'hyp2onnx[plot]'``)."""
        try:
            from ..plot import DecisionRegionDisplay
        except ImportError as exc:
            raise MissingExtraError(
                "RegionTree.plot needs matplotlib: pip install 'hyp2onnx[plot]'"
            ) from exc
        return DecisionRegionDisplay.from_estimator(
            self, X, disk=disk, resolution=resolution, response_method="apply", ax=ax
        )

    def explain(self, x: Any) -> Region:
        """The region of one point ``x`` (any row, covered or not) from its own pattern."""
        X = np.asarray(x, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.shape[0] != 1:
            raise ValueError(f"explain takes one point, got {X.shape[0]} rows")
        k = self.to_klein(X)
        ir = self.tree_.network
        pattern = ir.pattern(self.network_input(X))[0]
        c = collapse(ir, pattern)
        normals = np.concatenate([W.T for W in c.weights[:-1]], axis=0)
        offsets = np.concatenate(c.offsets[:-1])
        L = getattr(self.network_, "centring_", None)
        if L is not None:  # w . k' + c on L x is (c, w) . L x: the normal (c, w) L in x's frame
            ambient = np.concatenate([offsets[:, None], normals], axis=1) @ L
            offsets, normals = ambient[:, 0], ambient[:, 1:]
        layer = np.repeat(np.arange(len(ir.hidden_sizes)), ir.hidden_sizes)
        leaf = self._region_numbers().get(np.packbits(pattern).tobytes(), -1)
        return Region(
            pattern=pattern,
            klein_normals=normals,
            klein_offsets=offsets,
            side=np.where(pattern, 1, -1),
            minkowski_normals=np.concatenate([-offsets[:, None], normals], axis=1),
            affine_weights=c.weights[-1],
            affine_offset=c.offsets[-1],
            layer=layer,
            covered=leaf >= 0,
            region=leaf,
            klein=k[0],
        )


def region_tree(
    network: Any,
    X: Any,
    *,
    certify_radius: float | None = None,
    max_certified: int = 10_000,
    verbose: int = 0,
) -> RegionTree:
    """The region tree of a fitted hyperbolic MLP, holding the regions the points ``X`` reach.

    ``X`` are points in the network's input geometry (training points, or a
    sample of the data it will see). With ``certify_radius`` (a hyperbolic
    distance from the network's origin, in its curvature: the training
    rows' centroid for a centred network) the tree also holds
    regions no point of ``X`` reached but that meet the ball of that radius,
    each certified by a witness point inside it (the tree's ``witnesses_``), up
    to ``max_certified`` of them; ``verbose`` prints each round's progress to
    stderr (certifying can take minutes: benchmarks/results/neural.md). Returns a
    [`RegionTree`][hyp2onnx.RegionTree]; its
    [`explain`][hyp2onnx.RegionTree.explain] gives any point's
    [`Region`][hyp2onnx.Region].
    """
    if not isinstance(network, _HyperbolicMLP):
        raise UnsupportedModelError(
            f"region_tree takes a fitted HyperbolicMLPClassifier or HyperbolicMLPRegressor, "
            f"got {type(network).__name__}."
        )
    check_is_fitted(network)
    tree = RegionTree(
        network, certify_radius=certify_radius, max_certified=max_certified, verbose=verbose
    )
    return tree.fit(X)


def _klein_radius(radius: Any, curvature: float) -> float:
    """The unit-ball Klein radius of the ball of hyperbolic radius ``radius``: ``tanh(radius / R)``."""
    if isinstance(radius, bool) or not isinstance(radius, (int, float, np.integer, np.floating)):
        raise ValueError(f"certify_radius must be a positive number, got {radius!r}.")
    if not (math.isfinite(radius) and radius > 0):
        raise ValueError(f"certify_radius must be a positive finite number, got {radius!r}.")
    return math.tanh(float(radius) / curvature_radius(curvature))


def certified_witnesses(
    network: Network, patterns: np.ndarray, klein_radius: float, limit: int, *, verbose: int = 0
) -> np.ndarray:
    """Klein points, one in each region next to a known one that meets the ball ``|k| <
    klein_radius`` and that ``patterns`` lacks, found breadth first from ``patterns``.

    Crossing one boundary of the network's arrangement flips one hidden unit
    (every pre-activation is continuous), so the regions meeting the ball are
    reached from any of them through patterns one flip apart. For a
    candidate pattern linear programs look for a point of its region: the
    largest margin ``t`` from every boundary (normals scaled to unit
    length), then the point of least 1-norm at half that margin (or at a
    sixteenth, or 1/256 of it, while the point falls outside the ball). The
    candidate is certified only if that point lies in the ball and the
    network's own forward pass gives it the candidate's pattern: the
    programs only propose, the network decides. Returns ``[n, d]`` points,
    at most ``limit``. On a terminal a progress bar per round counts the
    candidates looked at and the regions certified, with the time left.
    """
    programs = _LinearPrograms()
    d = network.n_features
    known = {np.packbits(p).tobytes() for p in np.asarray(patterns, dtype=bool)}
    frontier = list(np.unique(np.asarray(patterns, dtype=bool), axis=0))
    found: list[np.ndarray] = []
    rounds = 0
    while frontier and len(found) < limit:
        rounds += 1
        if verbose:
            print(
                f"region_tree: round {rounds}, {len(frontier)} regions to look beside, "
                f"{len(found)} certified so far",
                file=sys.stderr,
            )
        next_frontier = []
        with bar(
            len(frontier) * frontier[0].size, f"certify, round {rounds}", "candidates"
        ) as shown:
            for pattern in frontier:
                for unit in range(pattern.size):
                    shown.update()
                    candidate = pattern.copy()
                    candidate[unit] = not candidate[unit]
                    key = np.packbits(candidate).tobytes()
                    if key in known:
                        continue
                    known.add(key)
                    point = _witness(network, candidate, klein_radius, programs)
                    if point is not None:
                        found.append(point)
                        next_frontier.append(candidate)
                        shown.set_postfix(certified=len(found))  # drawn now: a region is rare
                        if len(found) == limit:
                            return np.array(found)
        frontier = next_frontier
    return np.array(found).reshape(-1, d)


class _LinearPrograms:
    """``min c.x`` subject to ``A x <= b`` and bounds, solved by one HiGHS instance.

    The solver of ``scipy.optimize.linprog(method="highs")``, called through highspy
    and kept between programs: certifying solves thousands of small programs, and
    linprog's checks of its inputs and options cost about twice the solve
    (docs/neural.md, "Regions certified feasible").
    """

    def __init__(self) -> None:
        import highspy
        from highspy._core import _Highs

        self._highspy = highspy
        # The compiled solver that highspy.Highs extends with Python callbacks: Highs()
        # prints HiGHS's banner while installing them, before its log can be turned off.
        self._solver = _Highs()
        self._solver.setOptionValue("output_flag", False)
        # The programs are small and dense: presolve costs more than it saves (4.97 ->
        # 4.18 s certifying 227 regions of a [16, 16] network at d = 2).
        self._solver.setOptionValue("presolve", "off")

    def minimise(
        self, c: np.ndarray, A: np.ndarray, b: np.ndarray, lower: np.ndarray, upper: np.ndarray
    ) -> tuple[np.ndarray, float] | None:
        """The optimal point and value, or None when the program has no optimum
        (infeasible, unbounded or stopped). Infinite bounds are ``±np.inf``."""
        hs = self._highspy
        rows, cols = A.shape
        lp = hs.HighsLp()
        lp.num_col_, lp.num_row_ = cols, rows
        lp.col_cost_ = np.ascontiguousarray(c, dtype=np.float64)
        lp.col_lower_ = np.asarray(lower, dtype=np.float64)  # HiGHS's infinity is inf
        lp.col_upper_ = np.asarray(upper, dtype=np.float64)
        lp.row_lower_ = np.full(rows, -hs.kHighsInf)
        lp.row_upper_ = np.ascontiguousarray(b, dtype=np.float64)
        lp.a_matrix_.format_ = hs.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.arange(0, rows * cols + 1, rows, dtype=np.int32)
        lp.a_matrix_.index_ = np.tile(np.arange(rows, dtype=np.int32), cols)
        lp.a_matrix_.value_ = np.asarray(A, dtype=np.float64).ravel(order="F")
        solver = self._solver
        solver.passModel(lp)
        solver.run()
        if solver.getModelStatus() != hs.HighsModelStatus.kOptimal:
            return None
        x = np.array(solver.getSolution().col_value, dtype=np.float64)
        return x, float(solver.getInfo().objective_function_value)


def _witness(
    network: Network, pattern: np.ndarray, radius: float, programs: _LinearPrograms
) -> Any:
    """A Klein point of ``pattern``'s region with ``|k| < radius``, or None."""
    c = collapse(network, pattern)
    normals = np.concatenate([W.T for W in c.weights[:-1]], axis=0)  # [h, d]
    offsets = np.concatenate(c.offsets[:-1])
    side = np.where(pattern, 1.0, -1.0)
    lengths = np.linalg.norm(normals, axis=1)
    d = normals.shape[1]
    # side (n . k + o) >= t |n|  <=>  -side n . k + t |n| <= side o
    rows = np.concatenate([-side[:, None] * normals, lengths[:, None]], axis=1)
    first = programs.minimise(
        np.r_[np.zeros(d), -1.0],
        rows,
        side * offsets,
        np.r_[np.full(d, -radius), -np.inf],
        np.r_[np.full(d, radius), 1.0],
    )
    if first is None or -first[1] <= 0:
        return None
    margin = -first[1]
    # least |k|_1 at a fraction of the largest margin: k = u - v, u, v >= 0; a smaller
    # margin lets the point come nearer the origin where the region meets the ball thinly
    A = np.concatenate([-side[:, None] * normals, side[:, None] * normals], axis=1)
    for fraction in (0.5, 1 / 16, 1 / 256):
        second = programs.minimise(
            np.ones(2 * d),
            A,
            side * offsets - fraction * margin * lengths,
            np.zeros(2 * d),
            np.full(2 * d, radius),
        )
        if second is None:
            continue
        point = second[0][:d] - second[0][d:]
        if float(point @ point) >= radius * radius:
            continue
        if np.array_equal(network.pattern(point[None, :])[0], pattern):
            return point
    return None
