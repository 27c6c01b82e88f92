"""An oracle for thresholds and a generator of probe rows, independent of hyp2onnx.

Nothing here imports hyp2onnx's threshold, tree-walking or geometry code:
trees are read from each library's own public model format (scikit-learn's
``tree_`` arrays, XGBoost's JSON model, LightGBM's ``dump_model``, the oblique
tree's ``tree_`` arrays), rows are routed by each library's own leaf routing
(``apply``, ``pred_leaf=True``), and the midpoint is the formula of docs/math.md,
"Einstein midpoint", written out again below. So a slip in hyp2onnx's correction, rounding or routing
cannot be copied into the expected values.

`threshold_errors` checks every stored threshold against the Einstein
midpoint of the largest training value routed left and the smallest routed
right, in the backend's comparison and precision. `probe_rows` builds,
for every split, rows that reach it (a training row that reaches it, with the
split's coordinate moved) and whose tested value is the threshold's float32
and float64 neighbours; `probe_coverage` says which splits saw both
sides of their flip point, by the library's own routing.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: How far (absolute, in unit-ball Klein units) two algebraically equal forms of
#: the Einstein midpoint may differ in float64: a few hundred ulps of 1.
MIDPOINT_TOL = 1e-14


@dataclass(frozen=True)
class Tree:
    """One tree as parallel arrays (local node ids, root 0, -1 at leaves)."""

    column: np.ndarray  #: column of ``values(k)`` the node tests, -1 at leaves
    threshold: np.ndarray  #: float64
    left: np.ndarray
    right: np.ndarray

    @property
    def parent(self) -> np.ndarray:
        parent = np.full(self.left.shape[0], -1, dtype=np.int64)
        internal = np.flatnonzero(self.left >= 0)
        parent[self.left[internal]] = internal
        parent[self.right[internal]] = internal
        return parent


@dataclass(frozen=True)
class Native:
    """A fitted model as its library sees it."""

    trees: list[Tree]
    op: str  #: go left iff ``value OP threshold``
    compare: type  #: np.float32 or np.float64: precision values are compared in
    threshold_dtype: type
    #: Klein rows [n, d] -> the values the nodes test [n, columns], in float64
    #: holding ``compare`` values (axis-parallel: the Klein coordinates rounded;
    #: oblique: every node's projection).
    values: Callable[[np.ndarray], np.ndarray]
    #: Klein rows -> leaf (local node id) of each tree [n, n_trees], by the library.
    leaves: Callable[[np.ndarray], np.ndarray]
    #: Training rows (indices into the training set) each tree was grown on.
    rows: Callable[[int], list[np.ndarray]]
    #: Oblique splits: per tree, [n_nodes, d] normals; None for axis-parallel.
    normals: list[np.ndarray] | None = None


def _as(dtype: type) -> Callable[[np.ndarray], np.ndarray]:
    return lambda k: np.asarray(k, dtype=np.float64).astype(dtype).astype(np.float64)


def _sklearn(est) -> Native:
    trees = list(getattr(est, "estimators_", [est]))
    out = []
    for t in trees:
        s = t.tree_
        internal = s.children_left >= 0
        out.append(
            Tree(
                np.where(internal, s.feature, -1).astype(np.int64),
                s.threshold.astype(np.float64),
                np.where(internal, s.children_left, -1).astype(np.int64),
                np.where(internal, s.children_right, -1).astype(np.int64),
            )
        )

    def leaves(k):
        return est.apply(k).reshape(k.shape[0], -1)

    def rows(n):
        if getattr(est, "bootstrap", False):
            return [np.unique(s) for s in est.estimators_samples_]
        return [np.arange(n)] * len(trees)

    return Native(out, "<=", np.float32, np.float64, _as(np.float32), leaves, rows)


def _xgboost(est) -> Native:
    import xgboost

    booster = est.get_booster()
    raw = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]
    out = []
    for t in raw:
        left = np.asarray(t["left_children"], dtype=np.int64)
        internal = left >= 0
        out.append(
            Tree(
                np.where(internal, t["split_indices"], -1).astype(np.int64),
                np.asarray(t["split_conditions"], dtype=np.float64)
                .astype(np.float32)
                .astype(np.float64),
                np.where(internal, left, -1),
                np.where(internal, np.asarray(t["right_children"], dtype=np.int64), -1),
            )
        )

    def leaves(k):
        return (
            booster.predict(xgboost.DMatrix(k), pred_leaf=True)
            .astype(np.int64)
            .reshape(k.shape[0], -1)
        )

    return Native(
        out,
        "<",
        np.float32,
        np.float32,
        _as(np.float32),
        leaves,
        lambda n: [np.arange(n)] * len(out),
    )


def _lightgbm(est) -> Native:
    booster = est.booster_
    out, leaf_nodes = [], []
    for info in booster.dump_model()["tree_info"]:
        column, threshold, left, right, leaf_of = [], [], [], [], {}

        def visit(node: dict) -> int:
            i = len(column)
            column.append(-1)
            threshold.append(0.0)
            left.append(-1)
            right.append(-1)
            if "split_feature" in node:
                if node["decision_type"] != "<=":
                    raise ValueError(f"unexpected LightGBM split {node['decision_type']!r}")
                column[i], threshold[i] = node["split_feature"], float(node["threshold"])
                left[i] = visit(node["left_child"])
                right[i] = visit(node["right_child"])
            else:
                leaf_of[node.get("leaf_index", 0)] = i
            return i

        visit(info["tree_structure"])
        out.append(Tree(*(np.asarray(a) for a in (column, threshold, left, right))))
        table = np.zeros(max(leaf_of) + 1, dtype=np.int64)
        table[list(leaf_of)] = list(leaf_of.values())
        leaf_nodes.append(table)

    def leaves(k):
        index = np.asarray(booster.predict(k, pred_leaf=True)).reshape(k.shape[0], -1)
        return np.stack([leaf_nodes[i][index[:, i]] for i in range(len(out))], axis=1)

    return Native(
        out,
        "<=",
        np.float64,
        np.float64,
        _as(np.float64),
        leaves,
        lambda n: [np.arange(n)] * len(out),
    )


def project_in_order(k: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """``k @ normals.T`` added strictly left to right over features, in float64."""
    total = k[:, 0:1] * normals[:, 0]
    for f in range(1, k.shape[1]):
        total = total + k[:, f : f + 1] * normals[:, f]
    return total


def _oblique(model) -> Native:
    s = model.tree_
    internal = s.left >= 0
    tree = Tree(
        np.where(internal, np.arange(s.left.shape[0]), -1),
        np.asarray(s.threshold, dtype=np.float64),
        np.asarray(s.left, dtype=np.int64),
        np.asarray(s.right, dtype=np.int64),
    )
    normals = np.asarray(s.normal, dtype=np.float64)
    return Native(
        [tree],
        "<=",
        np.float64,
        np.float64,
        lambda k: project_in_order(np.asarray(k, dtype=np.float64), normals),
        lambda k: s.apply(np.asarray(k, dtype=np.float64))[:, None],
        lambda n: [np.arange(n)],
        normals=[normals],
    )


def native(model) -> Native:
    """The fitted hyperbolic estimator ``model`` as its own library sees it."""
    if hasattr(model, "tree_") and hasattr(model.tree_, "normal"):
        return _oblique(model)
    est = model.estimator_
    module = type(est).__module__
    if module.startswith("sklearn"):
        reader = _sklearn(est)
    elif module.startswith("xgboost"):
        reader = _xgboost(est)
    elif module.startswith("lightgbm"):
        reader = _lightgbm(est)
    else:
        raise TypeError(f"no oracle for {type(est).__name__}")
    index = getattr(model, "split_index_", None)
    return reader if index is None else _through_split_indices(reader, index)


def _through_split_indices(reader: Native, index) -> Native:
    """A native model that reads split indices (``split_index_``, far from the origin).

    Its split on index ``j + 1.5`` of feature ``f`` is the Klein split
    ``k_f <= T_f[j]`` (``T_f``: the index's sorted thresholds), compared in
    float64; the library still routes every row (on ``split_index_.transform(k)``).
    """
    trees = []
    for tree in reader.trees:
        klein = np.zeros_like(tree.threshold)
        for f in np.unique(tree.column[tree.column >= 0]):
            at = np.flatnonzero(tree.column == f)
            j = np.rint(tree.threshold[at] - 1.5).astype(np.int64)
            assert np.all(tree.threshold[at] == j + 1.5), "split-index thresholds are j + 1.5"
            klein[at] = index.thresholds[f][j]
        trees.append(Tree(tree.column, klein, tree.left, tree.right))
    return Native(
        trees,
        "<=",
        np.float64,
        np.float64,
        _as(np.float64),
        lambda k: reader.leaves(index.transform(k)),
        reader.rows,
    )


# -- the midpoint, written out from docs/math.md, "Einstein midpoint" ----------


def einstein_midpoint(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """m = (g(a) a + g(b) b) / (g(a) + g(b)), g(t) = 1 / sqrt(1 - t^2).

    docs/math.md, "Einstein midpoint".
    """
    ga = 1.0 / np.sqrt(1.0 - a * a)
    gb = 1.0 / np.sqrt(1.0 - b * b)
    return (ga * a + gb * b) / (ga + gb)


def next_up(x: np.ndarray, dtype: type) -> np.ndarray:
    return np.nextafter(np.asarray(x).astype(dtype), dtype(np.inf)).astype(np.float64)


def next_down(x: np.ndarray, dtype: type) -> np.ndarray:
    return np.nextafter(np.asarray(x).astype(dtype), dtype(-np.inf)).astype(np.float64)


def round_down(x: np.ndarray, dtype: type) -> np.ndarray:
    """Largest ``dtype`` value <= x (as float64)."""
    r = np.asarray(x, dtype=np.float64).astype(dtype).astype(np.float64)
    return np.where(r > x, next_down(r, dtype), r)


def round_up(x: np.ndarray, dtype: type) -> np.ndarray:
    """Smallest ``dtype`` value >= x (as float64)."""
    r = np.asarray(x, dtype=np.float64).astype(dtype).astype(np.float64)
    return np.where(r < x, next_up(r, dtype), r)


# -- neighbours and the threshold check ----------------------------------------


@dataclass(frozen=True)
class Neighbours:
    """Per tree and node: the largest training value routed left, the smallest
    routed right (+-inf where none), and a training row holding each."""

    L: list[np.ndarray]
    R: list[np.ndarray]
    row_L: list[np.ndarray]
    row_R: list[np.ndarray]


def neighbours(model: Native, k: np.ndarray, *, training: bool = True) -> Neighbours:
    """Route rows ``k`` (unit-ball Klein, float64) by the library itself.

    ``training``: ``k`` is the training set, and each tree only sees the rows
    it was grown on; otherwise every tree sees every row.
    """
    leaves = model.leaves(k)
    values = model.values(k)
    out = Neighbours([], [], [], [])
    all_rows = model.rows(k.shape[0]) if training else [np.arange(k.shape[0])] * len(model.trees)
    for i, (tree, rows) in enumerate(zip(model.trees, all_rows, strict=True)):
        n_nodes = tree.left.shape[0]
        parent = tree.parent
        # Walk every row up from its leaf: one (node, value, side, row) per ancestor.
        at, value, left, row = [], [], [], []
        node = leaves[rows, i]
        alive = np.arange(rows.shape[0])
        while alive.size:
            p = parent[node[alive]]
            up = p >= 0
            alive, p, child = alive[up], p[up], node[alive][up]
            at.append(p)
            value.append(values[rows[alive], tree.column[p]])
            left.append(child == tree.left[p])
            row.append(rows[alive])
            node[alive] = p
        at, value, left, row = (
            np.concatenate(a) if a else np.zeros(0) for a in (at, value, left, row)
        )
        at, left = at.astype(np.int64), left.astype(bool)
        L, R = np.full(n_nodes, -np.inf), np.full(n_nodes, np.inf)
        np.maximum.at(L, at[left], value[left])
        np.minimum.at(R, at[~left], value[~left])
        # A row holding each extreme (any of them).
        row_L, row_R = np.full(n_nodes, -1), np.full(n_nodes, -1)
        hit_L, hit_R = left & (value == L[at]), ~left & (value == R[at])
        row_L[at[hit_L]] = row[hit_L]
        row_R[at[hit_R]] = row[hit_R]
        out.L.append(L)
        out.R.append(R)
        out.row_L.append(row_L)
        out.row_R.append(row_R)
    return out


def expected_thresholds(
    m: np.ndarray, L: np.ndarray, R: np.ndarray, op: str, dtype: type
) -> tuple[np.ndarray, np.ndarray]:
    """Lowest and highest admissible stored threshold for midpoint ``m`` of ``L < R``.

    ``m`` kept on the training rows' sides (``L <= t < R`` for ``<=``,
    ``L < t <= R`` for ``<``) and rounded to the storage dtype toward -inf
    for ``<=`` and +inf for ``<`` (docs/math.md, "Comparisons per backend"); the two ends allow for the
    float64 rounding of m itself (``MIDPOINT_TOL``).
    """
    ends = []
    for x in (m - MIDPOINT_TOL, m + MIDPOINT_TOL):
        if op == "<=":
            t = np.minimum(np.maximum(round_down(x, dtype), L), next_down(R, np.float64))
        else:
            t = np.minimum(np.maximum(round_up(x, dtype), next_up(L, dtype)), R)
        ends.append(t)
    return ends[0], ends[1]


@dataclass(frozen=True)
class ThresholdCheck:
    n_checked: int  #: splits with training rows on both sides
    n_unreached: int
    n_telling: int  #: splits where the arithmetic midpoint would give another threshold
    errors: list[str]


def threshold_errors(model: Native, k: np.ndarray) -> ThresholdCheck:
    """Every reached split's stored threshold against the oracle's."""
    nb = neighbours(model, k)
    errors, checked, unreached, telling = [], 0, 0, 0
    for i, tree in enumerate(model.trees):
        internal = tree.left >= 0
        reached = internal & np.isfinite(nb.L[i]) & np.isfinite(nb.R[i])
        unreached += int(np.sum(internal & ~reached))
        L, R, t = nb.L[i][reached], nb.R[i][reached], tree.threshold[reached]
        checked += int(L.size)
        if not L.size:
            continue
        low, high = expected_thresholds(
            einstein_midpoint(L, R), L, R, model.op, model.threshold_dtype
        )
        stored_ok = t.astype(model.threshold_dtype).astype(np.float64) == t
        bad = ~((low <= t) & (t <= high) & stored_ok)
        a_low, a_high = expected_thresholds(L / 2 + R / 2, L, R, model.op, model.threshold_dtype)
        telling += int(np.sum((a_high < low) | (a_low > high)))
        for j in np.flatnonzero(bad)[:5]:
            node = np.flatnonzero(reached)[j]
            errors.append(
                f"tree {i} node {node}: threshold {t[j]!r}, expected [{low[j]!r}, {high[j]!r}] "
                f"from L={L[j]!r}, R={R[j]!r}"
            )
    return ThresholdCheck(checked, unreached, telling, errors)


# -- probe rows -------------------------------------------------------------------


@dataclass(frozen=True)
class Probes:
    k: np.ndarray  #: unit-ball Klein rows (float64 holding ``dtype`` values)
    tree: np.ndarray  #: the split each row was built for: tree ...
    node: np.ndarray  #: ... and node
    side: np.ndarray  #: -1: the flip value going left, +1: going right, 0: another neighbour
    run: np.ndarray  #: rows of one run: one base row, one split (oblique: consecutive steps)
    n_splits: int


def flip_values(
    t: np.ndarray, op: str, compare: type, dtype: type
) -> tuple[np.ndarray, np.ndarray]:
    """Largest value (representable in ``dtype``) the split sends left, smallest sent right."""
    coarse = np.float32 if np.float32 in (compare, dtype) else np.float64
    if op == "<=":
        left = round_down(t, coarse)
        return left, next_up(left, coarse)
    right = round_up(t, coarse)  # "<": t itself when it is a float32 value
    return next_down(right, coarse), right


def _axis_values(
    t: np.ndarray, model: Native, dtype: type, steps: int
) -> tuple[np.ndarray, list[int]]:
    """[splits, values]: the flip values, then t rounded to float32 and float64 and its neighbours."""
    columns = list(flip_values(t, model.op, model.compare, dtype))
    side = [-1, 1]
    for d in (np.float32, np.float64):
        down = up = np.asarray(t).astype(d).astype(np.float64)
        columns.append(down)
        for _ in range(steps):
            down, up = next_down(down, d), next_up(up, d)
            columns += [down, up]
    side += [0] * (len(columns) - 2)
    return np.stack(columns, axis=1).astype(dtype).astype(np.float64), side


def _oblique_values(base, normals, t, dtype, steps, f) -> np.ndarray:
    """[splits, values] of coordinate ``f``: consecutive ``dtype`` steps around the crossing."""
    n = np.arange(base.shape[0])
    p = np.sum(base * normals, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        centre = base[n, f] + (t - p) / normals[n, f]
    centre = np.where(np.isfinite(centre), centre, base[n, f]).astype(dtype).astype(np.float64)
    down, up, columns = centre, centre, [centre]
    for _ in range(steps):
        down, up = next_down(down, dtype), next_up(up, dtype)
        columns = [down, *columns, up]
    return np.stack(columns, axis=1)


def probe_rows(model: Native, k: np.ndarray, dtype: type = np.float64, *, steps: int = 2) -> Probes:
    """Rows at, and float32/float64 neighbours of, every split's threshold.

    Each split's rows start from a row of ``k`` that reaches it (the one
    holding its largest value on the left, and the one holding its smallest
    on the right; ``k`` is best the training set, which reaches every split): every ancestor's condition holds for both rows, and on the
    split's own coordinate for every value between them, so moving that one
    coordinate to the threshold's neighbours keeps the row at the split.
    Oblique splits move the coordinate of the normal's largest weight to
    where the projection meets the threshold, then step it float by float.
    ``dtype`` is the input precision: every row holds ``dtype`` values.
    """
    nb = neighbours(model, k, training=False)
    blocks, trees, nodes, sides, runs = [], [], [], [], []
    n_splits = n_runs = 0
    d = k.shape[1]
    for i, tree in enumerate(model.trees):
        internal = np.flatnonzero(tree.left >= 0)
        n_splits += internal.size
        # Oblique splits: move each coordinate in turn (moving one may change
        # an ancestor's side where another does not).
        moves = range(d) if model.normals is not None else [None]
        for base_rows, move in itertools.product((nb.row_L[i], nb.row_R[i]), moves):
            have = internal[base_rows[internal] >= 0]
            if not have.size:
                continue
            base = k[base_rows[have]].astype(dtype).astype(np.float64)
            t = tree.threshold[have]
            if model.normals is None:
                f = tree.column[have]
                values, side = _axis_values(t, model, dtype, steps)
            else:
                f = np.full(have.size, move)
                values = _oblique_values(base, model.normals[i][have], t, dtype, 3 * steps, f)
                side = [0] * values.shape[1]
            width = values.shape[1]
            rows = np.repeat(base, width, axis=0)
            rows[np.arange(rows.shape[0]), np.repeat(f, width)] = values.ravel()
            blocks.append(rows)
            trees.append(np.full(rows.shape[0], i))
            nodes.append(np.repeat(have, width))
            sides.append(np.tile(np.asarray(side), have.size))
            runs.append(n_runs + np.repeat(np.arange(have.size), width))
            n_runs += have.size
    if not blocks:  # no split (single-leaf trees)
        empty = np.zeros(0, dtype=np.int64)
        return Probes(np.zeros((0, k.shape[1])), empty, empty, empty, empty, n_splits)
    k_out, tree_of, node_of, side_of, run_of = map(
        np.concatenate, (blocks, trees, nodes, sides, runs)
    )
    # Strictly inside the unit ball (whatever the summation order).
    keep = np.sum(k_out * k_out, axis=1) < 1.0 - 1e-12
    return Probes(k_out[keep], tree_of[keep], node_of[keep], side_of[keep], run_of[keep], n_splits)


def _reaches(model: Native, leaves: np.ndarray, tree: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Whether each row's leaf in tree ``tree[r]`` lies at or below node ``target[r]``."""
    node = leaves[np.arange(leaves.shape[0]), tree].copy()
    found = node == target
    parents = [t.parent for t in model.trees]
    while True:
        alive = np.flatnonzero(~found & (node >= 0))
        if not alive.size:
            return found
        for i in np.unique(tree[alive]):
            at = alive[tree[alive] == i]
            node[at] = parents[i][node[at]]
        found |= node == target


def probe_coverage(model: Native, probes: Probes) -> float:
    """Share of splits whose flip point the probes straddle, by the library's routing.

    A split counts when a probe reaches it and goes left, and a probe whose
    tested value is the next representable one reaches it and goes right
    (axis-parallel: the two values of `flip_values`; oblique: two
    consecutive steps of the moved coordinate).
    """
    if probes.n_splits == 0:
        return 1.0
    leaves = model.leaves(probes.k)
    lefts = np.concatenate([t.left for t in model.trees])
    rights = np.concatenate([t.right for t in model.trees])
    offset = np.cumsum([0] + [t.left.shape[0] for t in model.trees])[:-1]
    at = offset[probes.tree] + probes.node
    went_left = _reaches(model, leaves, probes.tree, lefts[at])
    went_right = _reaches(model, leaves, probes.tree, rights[at])
    if model.normals is None:
        ok_left = np.unique(at[went_left & (probes.side == -1)])
        ok_right = np.unique(at[went_right & (probes.side == 1)])
        covered = np.intersect1d(ok_left, ok_right)
    else:
        same = probes.run[1:] == probes.run[:-1]
        straddle = same & ((went_left[:-1] & went_right[1:]) | (went_right[:-1] & went_left[1:]))
        covered = np.unique(at[1:][straddle])
    return covered.size / max(probes.n_splits, 1)
