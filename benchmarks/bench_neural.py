"""Hyperbolic MLPs and their region trees: exactness, coverage, accuracy, isometry, speed.

Sections (each writes a table of ``neural.md``):

- **exactness**: labels of the exported graphs (``fast``: ``Gemm`` and a
  near-tie guard; ``exact``: the fixed-order chain; the region tree's graph)
  against the Python model on held-out points, on points at hyperbolic
  radius 10 to 15, and on rows found by bisection where a hidden unit's
  computed pre-activation changes sign (0 or one ulp from it) or where the
  label changes (a tie); the region tree's labels against the network's,
  and its largest value difference against its stated bound.
- **coverage**: the share of held-out rows from the training distribution
  whose region the tree holds, for trees built from more and more points;
  regions reached against Aytekin's ``2^(sum m)`` bound, and tree sizes;
  and the same for trees built from few points with regions certified
  within the training points' largest radius (``certify_radius``).
- **accuracy**: test accuracy of the MLP on Klein coordinates (ours)
  against the same MLP on Poincaré and log-map (tangent at the origin)
  coordinates, Fast-HyperRF and Fast-HyperXGB, on the paper's wrapped-normal
  mixtures and on hierarchies; the same after one random isometry of the
  data (a rotation, a boost of rapidity 3, a rotation).
- **speed**: rows per second of the ``fast`` and ``exact`` graphs (raw
  hyperboloid points in) against skl2onnx's graph of the same
  ``MLPClassifier`` fed precomputed Klein coordinates (float64, and float32),
  at 1 and 2 onnxruntime threads (at 2 also with the pool threads'
  spinning off), each graph timed in turn, repeats interleaved; the region
  tree's graph against the network's.

    python benchmarks/bench_neural.py [--quick] [--out DIR] [--seeds N] [--only speed]

``--only speed`` reruns the speed section alone and replaces it in an
existing ``neural.md`` (the other sections stay as measured).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report
from bench_isolation import exp_origin, log_origin, on_manifold, random_isometry
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.geometry import hyperboloid_to_poincare
from hyp2onnx.ir.frames import frame_features
from hyp2onnx.verification import run_onnx

BOOST = 3.0


def hierarchy(d: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Points around the nodes of a tree (branching 3, depth 3, 1.5 per level), each labelled
    by the top-level subtree its node lies in (3 classes)."""
    rng = np.random.default_rng(seed)
    nodes, labels = [], []

    def grow(position: np.ndarray, direction: np.ndarray | None, level: int, label: int) -> None:
        if level == 3:
            return
        for j in range(3):
            v = rng.standard_normal(d)
            if direction is not None:
                v = direction + 0.6 / 2**level * v / np.linalg.norm(v)
            v /= np.linalg.norm(v)
            child = position + 1.5 * v
            nodes.append(child)
            labels.append(j if level == 0 else label)
            grow(child, v, level + 1, j if level == 0 else label)

    grow(np.zeros(d), None, 0, 0)
    centres = exp_origin(np.array(nodes))
    at = rng.integers(0, len(nodes), n)
    noise = exp_origin(rng.standard_normal((n, d)) * 0.3)
    X = np.stack([_boost_from_origin(centres[i]) @ p for i, p in zip(at, noise, strict=True)])
    return on_manifold(X), np.asarray(labels)[at]


def _boost_from_origin(mu: np.ndarray) -> np.ndarray:
    m0, ms = mu[0], mu[1:]
    B = np.empty((ms.size + 1, ms.size + 1))
    B[0, 0], B[0, 1:], B[1:, 0] = m0, ms, ms
    B[1:, 1:] = np.eye(ms.size) + np.outer(ms, ms) / (1.0 + m0)
    return B


def far_points(d: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """Hyperboloid points at hyperbolic radius 10 to 15 in random directions."""
    v = rng.standard_normal((n, d))
    v *= (rng.uniform(10.0, 15.0, n) / np.linalg.norm(v, axis=1))[:, None]
    return on_manifold(exp_origin(v))


# -- rows on boundaries ----------------------------------------------------------------------


def sign_changes(f: Any, a: np.ndarray, b: np.ndarray, steps: int = 70) -> np.ndarray:
    """Hyperboloid rows on both sides of where the bool ``f`` of Klein rows changes, found by
    bisection on the segments ``a[i] -> b[i]`` (Klein rows whose ``f`` differ)."""
    lo, hi = a.copy(), b.copy()
    flo = f(lo)
    for _ in range(steps):
        mid = (lo + hi) / 2.0
        fm = f(mid)
        same = fm == flo
        lo = np.where(same[:, None], mid, lo)
        hi = np.where(same[:, None], hi, mid)
    k = np.concatenate([lo, hi])
    x0 = 1.0 / np.sqrt(1.0 - (k * k).sum(axis=1, keepdims=True))
    return np.concatenate([x0, k * x0], axis=1)


def boundary_rows(model: Any, k: np.ndarray, rng: np.random.Generator, n: int) -> dict:
    """Rows where a hidden unit's pre-activation changes sign, and where the label changes."""
    net, inputs = model.network(), _inputs(model)
    rows: dict[str, list[np.ndarray]] = {"pre-activation 0": [], "label tie": []}
    for _ in range(n):
        i, j = rng.integers(0, k.shape[0], 2)
        a, b = k[i : i + 1], k[j : j + 1]
        pa, pb = net.pattern(inputs(a))[0], net.pattern(inputs(b))[0]
        units = np.flatnonzero(pa != pb)
        if units.size:
            u = int(rng.choice(units))
            rows["pre-activation 0"].append(
                sign_changes(lambda q: net.pattern(inputs(q))[:, u], a, b)
            )
        la, lb = model.predict(_hyper(a)), model.predict(_hyper(b))
        if la[0] != lb[0]:
            rows["label tie"].append(
                sign_changes(lambda q: model.predict(_hyper(q)) == la[0], a, b)
            )
    return {
        name: np.concatenate(r) if r else np.zeros((0, k.shape[1] + 1)) for name, r in rows.items()
    }


def _hyper(k: np.ndarray) -> np.ndarray:
    x0 = 1.0 / np.sqrt(1.0 - (k * k).sum(axis=1, keepdims=True))
    return np.concatenate([x0, k * x0], axis=1)


def fit_mlp(
    X: np.ndarray,
    y: np.ndarray,
    hidden: tuple[int, ...],
    seed: int,
    iters: int,
    centre: str = "origin",
) -> Any:
    """``HyperbolicMLPClassifier``; ``centre="origin"`` (Klein coordinates) unless asked."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return h.HyperbolicMLPClassifier(
            hidden_layer_sizes=hidden, max_iter=iters, random_state=seed, centre=centre
        ).fit(X, y)


def _inputs(model: Any) -> Any:
    """The map from Klein rows to what the network reads (its centring, if any)."""
    frames = model.frames()
    return (lambda q: q) if frames is None else (lambda q: frame_features(q, frames))


# -- sections --------------------------------------------------------------------------------


CENTRES = ("centroid", "origin")


def exactness(quick: bool, centres: tuple[str, ...] = CENTRES) -> list[list[Any]]:
    rng = np.random.default_rng(1)
    rows = []
    cases = [(d, c, centre) for d, c in ((2, 4), (8, 2)) for centre in centres]
    for d, classes, centre in _report.steps(cases[:1] if quick else cases, "exactness"):
        X, y = make_wrapped_normal_mixture(600 if quick else 3000, d, classes, random_state=d)
        Xtr, Xte, ytr, _ = train_test_split(X, y, test_size=0.5, random_state=0)
        model = fit_mlp(Xtr, ytr, (16, 16), 0, 60 if quick else 300, centre)
        tree = h.region_tree(model, Xtr)
        k = model.to_klein(Xte)
        sets = {
            "held-out": Xte,
            "radius 10-15": far_points(d, 100 if quick else 2000, rng),
            **boundary_rows(model, k, rng, 10 if quick else 400),
        }
        graphs = {
            "fast": h.to_onnx(model),
            "exact": h.to_onnx(model, encoding="exact"),
        }
        tree_graph = h.to_onnx(tree)
        for name, points in sets.items():
            want = model.predict(points)
            diffs = [int((run_onnx(o, points)["label"] != want).sum()) for o in graphs.values()]
            got_tree = run_onnx(tree_graph, points)
            tree_vs_own = int((got_tree["label"] != tree.predict(points)).sum())
            tree_vs_net = int((got_tree["label"] != want).sum())
            covered = got_tree["covered"]
            inputs = model.network_input(points)
            leaf = tree.tree_.leaf(inputs)
            net = model.decision_function(points)
            own = tree.tree_.leaf_outputs(inputs, leaf)
            value_gap = float(np.abs(own - net)[covered].max(initial=0.0))
            rows.append(
                [
                    f"d = {d}, {classes} classes, {centre}",
                    name,
                    len(points),
                    *diffs,
                    tree_vs_own,
                    tree_vs_net,
                    f"{covered.mean():.1%}",
                    f"{value_gap:.2g} / {tree.value_bound_:.2g}",
                ]
            )
    return rows


def coverage(quick: bool) -> tuple[list[list[Any]], list[list[Any]]]:
    sizes = [250, 1000] if quick else [1000, 4000, 16000, 64000]
    d_hidden = (
        [(2, (16, 16))]
        if quick
        else [(2, (16,)), (2, (8, 8)), (2, (16, 16)), (4, (16, 16)), (8, (16, 16))]
    )
    rows, growth = [], []
    for d, hidden in _report.steps(d_hidden, "region growth"):
        n_max = max(sizes)
        n_test = 1000 if quick else 10000
        X, y = make_wrapped_normal_mixture(n_max + n_test, d, 4, random_state=d)
        Xtr, ytr, Xte = X[:n_max], y[:n_max], X[n_max:]
        model = fit_mlp(Xtr[:2000], ytr[:2000], hidden, 0, 30 if quick else 300)
        for n in sizes:
            start = time.perf_counter()
            tree = h.region_tree(model, Xtr[:n])
            built = time.perf_counter() - start
            share = float(tree.covered(Xte).mean())
            growth.append(
                [
                    f"d = {d}, hidden {list(hidden)}",
                    n,
                    tree.n_regions_,
                    f"2^{sum(hidden)}",
                    tree.n_nodes_,
                    f"{share:.2%}",
                    f"{built:.2f}",
                ]
            )
        rows.append([f"d = {d}, hidden {list(hidden)}", n_max, growth[-1][2], growth[-1][5]])
    return rows, growth


def certified(quick: bool) -> list[list[Any]]:
    """Coverage of held-out rows by trees built from few points, without and with regions
    certified within the training points' largest radius (``certify_radius``)."""
    cases = [(2, 100)] if quick else [(2, 100), (2, 1000), (4, 100), (4, 1000)]
    rows = []
    for d, n in _report.steps(cases, "certified regions"):
        X, y = make_wrapped_normal_mixture(2000 + 10000, d, 4, random_state=d)
        Xtr, ytr, Xte = X[:2000], y[:2000], X[2000:]
        model = fit_mlp(Xtr, ytr, (16, 16), 0, 30 if quick else 300)
        radius = float(np.max(np.arccosh(Xtr[:, 0])))
        plain = h.region_tree(model, Xtr[:n])
        start = time.perf_counter()
        tree = h.region_tree(
            model, Xtr[:n], certify_radius=radius, max_certified=20 if quick else 10_000
        )
        built = time.perf_counter() - start
        assert np.array_equal(tree.predict(Xte), model.predict(Xte))
        within = np.arccosh(Xte[:, 0]) < radius
        rows.append(
            [
                f"d = {d}, hidden [16, 16]",
                n,
                f"{radius:.2f}",
                plain.n_regions_,
                tree.n_certified_,
                f"{plain.covered(Xte).mean():.2%}",
                f"{tree.covered(Xte).mean():.2%}",
                f"{tree.covered(Xte[within]).mean():.2%}",
                f"{built:.1f}",
            ]
        )
    return rows


def accuracy(
    quick: bool, seeds: int, jobs: int = 1, only: tuple[str, ...] | None = None
) -> list[list[Any]]:
    """Accuracy before and after an isometry, per data set and model; seeds run in ``jobs``
    processes."""
    from joblib import Parallel, delayed

    hidden, iters = (16, 16), (30 if quick else 500)
    datasets = {
        "wrapped normals d = 2": lambda s: make_wrapped_normal_mixture(1000, 2, 8, random_state=s),
        "wrapped normals d = 8": lambda s: make_wrapped_normal_mixture(1000, 8, 8, random_state=s),
        "hierarchy H^2": lambda s: hierarchy(2, 1000, s),
        "hierarchy H^8": lambda s: hierarchy(8, 1000, s),
    }
    if quick:
        datasets = dict(list(datasets.items())[:1])

    def plain_mlp(features: Any) -> Any:
        def fit_score(Xtr, ytr, Xte, yte, seed):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                m = MLPClassifier(hidden, max_iter=iters, random_state=seed)
                m.fit(features(Xtr), ytr)
            return m.score(features(Xte), yte)

        return fit_score

    def ours(centre: str) -> Any:
        def fit_score(Xtr, ytr, Xte, yte, seed):
            return fit_mlp(Xtr, ytr, hidden, seed, iters, centre).score(Xte, yte)

        return fit_score

    def forest(Xtr, ytr, Xte, yte, seed):
        return (
            h.HyperbolicRandomForestClassifier(n_estimators=20 if quick else 100, random_state=seed)
            .fit(Xtr, ytr)
            .score(Xte, yte)
        )

    def xgb(Xtr, ytr, Xte, yte, seed):
        return (
            h.HyperbolicXGBClassifier(n_estimators=100, random_state=seed, n_jobs=1)
            .fit(Xtr, ytr)
            .score(Xte, yte)
        )

    models = {
        "MLP centred (ours, default)": ours("centroid"),
        "MLP on Klein (centre='origin')": ours("origin"),
        "MLP on Poincaré": plain_mlp(hyperboloid_to_poincare),
        "MLP on log-map": plain_mlp(log_origin),
        "Fast-HyperRF": forest,
        "Fast-HyperXGB": xgb,
    }
    if only is not None:
        models = {name: fit for name, fit in models.items() if name.startswith(only)}
    rows = []
    for data_name, make in _report.steps(list(datasets.items()), "accuracy", unit="data sets"):

        def one_seed(seed: int, make: Any = make) -> dict[str, tuple[float, float]]:
            X, y = make(seed)
            y = np.unique(y, return_inverse=True)[1]
            G = random_isometry(X.shape[1] - 1, np.random.default_rng(1000 + seed), BOOST)
            moved = on_manifold(X @ G.T)
            got: dict[str, list[float]] = {name: [] for name in models}
            for data in (X, moved):
                Xtr, Xte, ytr, yte = train_test_split(
                    data, y, test_size=0.2, random_state=seed, stratify=y
                )
                for name, fit_score in models.items():
                    got[name].append(100.0 * fit_score(Xtr, ytr, Xte, yte, seed))
            return {name: (v[0], v[1]) for name, v in got.items()}

        per_seed = Parallel(n_jobs=jobs)(delayed(one_seed)(seed) for seed in range(seeds))
        for name in models:
            a = np.array([got[name][0] for got in per_seed])
            b = np.array([got[name][1] for got in per_seed])
            se = a.std(ddof=1) / np.sqrt(a.size) if a.size > 1 else float("nan")
            change = b - a
            sd = change.std(ddof=1) if change.size > 1 else float("nan")
            rows.append(
                [
                    data_name,
                    name,
                    f"{a.mean():.1f} ± {se:.1f}",
                    f"{b.mean():.1f}",
                    f"{change.mean():+.1f} ± {sd / np.sqrt(change.size):.1f}",
                    f"{sd:.1f} ({change.min():+.1f} to {change.max():+.1f})",
                ]
            )
    return rows


def speed(quick: bool) -> list[list[Any]]:
    import onnxruntime as ort
    import skl2onnx
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    n_rows = 2000 if quick else 50000
    repeats = 2 if quick else 60

    def session(onnx_model: Any, threads: int, spinning: bool) -> Any:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", str(int(spinning)))
        return ort.InferenceSession(
            onnx_model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )

    rows = []
    for d in _report.steps((2,) if quick else (2, 8), "speed", unit="dims"):
        X, y = make_wrapped_normal_mixture(n_rows + 2000, d, 4, random_state=d)
        model = fit_mlp(X[:2000], y[:2000], (16, 16), 0, 20 if quick else 300)
        tree = h.region_tree(model, X[:2000])
        points = X[2000:]
        k = model.to_klein(points)
        graphs = {
            "fast": (h.to_onnx(model), points),
            "exact": (h.to_onnx(model, encoding="exact"), points),
            "region tree": (h.to_onnx(tree), points),
            "skl2onnx f64": (
                skl2onnx.to_onnx(
                    model.estimator_,
                    initial_types=[("X", DoubleTensorType([None, d]))],
                    options={"zipmap": False},
                ),
                k,
            ),
            "skl2onnx f32": (
                skl2onnx.to_onnx(
                    model.estimator_,
                    initial_types=[("X", FloatTensorType([None, d]))],
                    options={"zipmap": False},
                ),
                k.astype(np.float32),
            ),
        }
        # onnxruntime's default lets idle pool threads spin; off, a session's threads do not
        # take the cores from the next session's, and two-thread ratios repeat.
        for threads, spinning in ((1, True), (2, True), (2, False)):
            sessions = {name: session(g, threads, spinning) for name, (g, _) in graphs.items()}
            times: dict[str, list[float]] = {name: [] for name in graphs}
            for name, s in sessions.items():  # warm up
                s.run(None, {s.get_inputs()[0].name: graphs[name][1]})
            for _ in range(repeats):
                for name, s in sessions.items():
                    feed = {s.get_inputs()[0].name: graphs[name][1]}
                    # an untimed call first: the previous session's threads may still
                    # be spinning on the two cores
                    s.run(None, feed)
                    start = time.perf_counter()
                    s.run(None, feed)
                    times[name].append(time.perf_counter() - start)
            rate = {name: n_rows / float(np.min(t)) for name, t in times.items()}
            peer = rate["skl2onnx f64"]
            rows.append(
                [
                    f"d = {d}",
                    threads,
                    "on" if spinning else "off",
                    *(f"{rate[name] / 1e6:.2f}" for name in graphs),
                    f"{rate['fast'] / peer:.2f}x",
                    f"{rate['exact'] / peer:.2f}x",
                    f"{rate['fast'] / rate['skl2onnx f32']:.2f}x",
                    f"{rate['region tree'] / rate['fast']:.2f}x",
                ]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _report.add_output_args(parser)
    parser.add_argument("--seeds", type=int, default=None, help="seeds of the accuracy table")
    parser.add_argument("--jobs", type=int, default=1, help="processes for the accuracy seeds")
    parser.add_argument(
        "--centred-only",
        action="store_true",
        help="with --only exactness/accuracy: rerun the centred networks (exactness) or the "
        "MLPs (accuracy) alone, keeping the other rows as last measured",
    )
    parser.add_argument(
        "--only",
        choices=["speed", "exactness", "accuracy", "certified"],
        default=None,
        help="rerun one section alone, in place in an existing neural.md",
    )
    args = parser.parse_args()
    out = _report.output_dir(args)
    seeds = args.seeds or (1 if args.quick else 5)
    environment = _report.environment()
    start = time.perf_counter()
    if args.only == "speed":
        rerun_speed(out / "neural.md", args.quick, environment)
        return
    if args.only is not None:
        measured = f"Re-measured alone (`--only {args.only}`): {environment}\n"
        if args.only == "exactness":
            rows = exactness(args.quick, ("centroid",) if args.centred_only else CENTRES)
            if args.centred_only:  # the networks on Klein coordinates as last measured
                earlier = earlier_rows(out / "neural.md", "exactness")
                rows += [
                    [r[0] if r[0].endswith("origin") else f"{r[0]}, origin", *r[1:]]
                    for r in earlier
                    if not r[0].endswith("centroid")
                ]
                measured += "Rows of `origin` networks: from the last full run.\n"
            text = exactness_section(rows, measured)
        elif args.only == "certified":
            text = certified_section(certified(args.quick), measured)
        else:
            only = ("MLP",) if args.centred_only else None
            rows = accuracy(args.quick, seeds, args.jobs, only)
            if args.centred_only:  # the forests as last measured
                earlier = earlier_rows(out / "neural.md", "accuracy")
                earlier = [r[:5] for r in earlier if not r[1].startswith("MLP")]
                rows = merge_earlier(rows, earlier, "(last full run: 5 seeds, not rerun)")
            text = accuracy_section(rows, seeds, args.quick, measured)
        print(text)
        rerun_section(out / "neural.md", args.only, text)
        return
    exact_rows = exactness(args.quick)
    print(_report.text_table(EXACT_HEADERS, exact_rows))
    cover_rows, growth_rows = coverage(args.quick)
    print(_report.text_table(GROWTH_HEADERS, growth_rows))
    certified_rows = certified(args.quick)
    print(_report.text_table(CERTIFIED_HEADERS, certified_rows))
    speed_rows = speed(args.quick)
    print(_report.text_table(SPEED_HEADERS, speed_rows))
    accuracy_rows = accuracy(args.quick, seeds, args.jobs)
    print(_report.text_table(ACCURACY_HEADERS, accuracy_rows))
    text = f"""# Hyperbolic MLPs and their region trees

{environment} Written by `benchmarks/bench_neural.py{" --quick" if args.quick else ""}` in
{time.perf_counter() - start:.0f} s. Networks: scikit-learn's `MLPClassifier` with ReLU on
Klein coordinates (`HyperbolicMLPClassifier`), hidden layers as stated.

{exactness_section(exact_rows)}## Coverage

Share of 10,000 held-out rows (same distribution) whose region the tree holds, for trees built
from the first `n` training points; regions reached against Aytekin's `2^(Σm)` bound, nodes of
the tree (missing leaves included) and build time in seconds.

{_report.md_table(GROWTH_HEADERS, growth_rows)}

{certified_section(certified_rows)}
{accuracy_section(accuracy_rows, seeds, args.quick)}{speed_section(speed_rows, args.quick)}"""
    _report.write(out / "neural.md", text)


def exactness_section(rows: list[list[Any]], measured: str = "") -> str:
    return f"""## Exactness

Label differences of each exported graph against the Python model (`fast`: `Gemm` with its
near-tie guard; `exact`: the fixed-order chain), and of the region tree's graph against the
region tree's Python model and against the network. Boundary rows are found by bisection
between two held-out points (on both sides of where a hidden unit's computed pre-activation
changes sign, or the label changes). The last column is the largest difference between a
covered row's leaf outputs (before the label guard) and the network's logits, against the
stated bound (`value_bound_`). Networks: centred (`centroid`, the default: the training rows'
Lorentzian centroid moved to the origin, principal axes turned onto the coordinate axes) and
on Klein coordinates (`origin`); rows at radius 10 to 15 from the origin. The coverage,
certified-region and speed sections measure networks on Klein coordinates (`centre="origin"`).

{measured}
{_report.md_table(EXACT_HEADERS, rows)}
"""


def certified_section(rows: list[list[Any]], measured: str = "") -> str:
    return f"""Regions certified feasible: trees built from the first `n` of 2,000 training points, without
and with `certify_radius` set to the training points' largest hyperbolic radius. Each
certified region holds a witness point within that radius whose pattern the network computes
as the region's; coverage of 10,000 held-out rows, all of them and those within the radius;
the certified tree's build time in seconds. Labels equal the network's on every held-out row
(checked).

{measured}
{_report.md_table(CERTIFIED_HEADERS, rows)}
"""


def accuracy_section(rows: list[list[Any]], seeds: int, quick: bool, measured: str = "") -> str:
    return f"""## Accuracy and isometry

Test accuracy (%, mean ± standard error over {seeds} seed(s), 80/20 split), before and after one
random isometry of the data (a rotation, a boost of rapidity {BOOST:g}, a rotation), and the
paired change (mean ± standard error), and its spread over the seeds (standard deviation,
smallest and largest). MLPs: hidden layers [16, 16], Adam, `max_iter` {30 if quick else 500};
ours centred (the default) and on Klein coordinates (`centre="origin"`); forests:
{20 if quick else 100} trees, default depth.

{measured}
{_report.md_table(ACCURACY_HEADERS, rows, "llrrrr")}
"""


#: The sections ``--only`` reruns: their title, and the title of the section after them.
SECTIONS = {
    "exactness": ("## Exactness", "## Coverage"),
    "accuracy": ("## Accuracy and isometry", "## Speed"),
    "certified": ("Regions certified feasible:", "## Accuracy and isometry"),
}


def rerun_section(path: Path, which: str, text: str) -> None:
    """Put the section ``which`` (measured again, ``text``) in place of the one in ``path``."""
    if not path.exists():
        sys.exit(f"{path} does not exist: run the whole benchmark first")
    title, after = SECTIONS[which]
    head, marker, rest = path.read_text().partition(title)
    _, marker_after, tail = rest.partition(after)
    if not (marker and marker_after):
        sys.exit(f"{path} has no {which} section: run the whole benchmark again")
    _report.write(path, head + text.rstrip("\n") + "\n\n" + after + tail)


def earlier_rows(path: Path, which: str) -> list[list[str]]:
    """The rows of the table in section ``which`` of ``path`` as it stands (cells as text)."""
    if not path.exists():
        return []
    title, after = SECTIONS[which]
    section = path.read_text().partition(title)[2].partition(after)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]
    return [row for row in rows if not row[0].startswith((":--", "---"))]


def merge_earlier(rows: list[list[Any]], earlier: list[list[str]], note: str) -> list[list[Any]]:
    """``rows``, then each earlier row of the same data set (first cell) that ``rows`` lack
    (second cell), ``note`` appended: rows kept from the last full run."""
    have = {(str(r[0]), str(r[1])) for r in rows}
    out: list[list[Any]] = []
    for data in dict.fromkeys(str(r[0]) for r in rows):
        out += [r for r in rows if str(r[0]) == data]
        out += [[*r, note] for r in earlier if r[0] == data and (r[0], r[1]) not in have]
    return out


def speed_section(rows: list[list[Any]], quick: bool, measured: str = "") -> str:
    return f"""## Speed

Millions of rows per second, {2000 if quick else 50000} rows a call, best of interleaved
repeats (each timed call after an untimed one of the same graph, as another session's threads
may still be spinning); our graphs take raw hyperboloid points (float64), skl2onnx's graphs of the same
`MLPClassifier` take precomputed Klein coordinates (float64, or float32). Ratios: ours over
skl2onnx's float64 graph; `fast` over the float32 one; the region tree's graph over `fast`.
Spinning: onnxruntime's `session.intra_op.allow_spinning`, on by default; with it off, idle
pool threads sleep and do not take the cores from the next session's.
{measured}
{_report.md_table(SPEED_HEADERS, rows)}
"""


def rerun_speed(path: Path, quick: bool, environment: str) -> None:
    """Measure the speed section again and put it in place of the one in ``path``."""
    if not path.exists():
        sys.exit(f"{path} does not exist: run the whole benchmark first")
    head, marker, _ = path.read_text().partition("## Speed")
    if not marker:
        sys.exit(f"{path} has no speed section: run the whole benchmark again")
    rows = speed(quick)
    print(_report.text_table(SPEED_HEADERS, rows))
    measured = f"Re-measured alone (`--only speed`): {environment}\n"
    _report.write(path, head + speed_section(rows, quick, measured))


EXACT_HEADERS = [
    "network",
    "rows",
    "n",
    "fast vs Python",
    "exact vs Python",
    "tree graph vs tree",
    "tree graph vs network",
    "covered",
    "leaf vs network (max / bound)",
]
GROWTH_HEADERS = ["network", "built from", "regions", "bound", "nodes", "coverage", "build s"]
ACCURACY_HEADERS = [
    "data",
    "model",
    "accuracy",
    "after isometry",
    "change",
    "spread of the change (sd; min to max)",
]
CERTIFIED_HEADERS = [
    "network",
    "built from",
    "radius",
    "regions reached",
    "certified",
    "coverage",
    "with certified",
    "within the radius",
    "build s",
]

SPEED_HEADERS = [
    "d",
    "threads",
    "spinning",
    "fast",
    "exact",
    "region tree",
    "skl2onnx f64",
    "skl2onnx f32",
    "fast / peer",
    "exact / peer",
    "fast / f32 peer",
    "tree / fast",
]


if __name__ == "__main__":
    main()
