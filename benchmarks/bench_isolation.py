"""Hyperbolic isolation forests against scikit-learn's on Euclidean coordinates of the same points.

Detection (ROC-AUC and average precision, mean +- standard error over seeds;
every forest has 100 trees of ``max_samples="auto"`` (256) rows, fitted on
all rows, inliers and outliers alike, and scored on them):

* ``hierarchy H^d``: a tree of branching 3 and depth 4 embedded in H^d
  (children ``STEP`` further out than their parent, fanned out around it,
  leaves at distance 6 from the origin), inliers drawn around every node by
  wrapped normals of standard deviation 0.3, 5 % outliers off the
  hierarchy (random direction, radius uniform in 1 .. 6, at least 2 from
  every node of the tree); ``boosted``: the same points moved by one
  random isometry (rotation, boost of rapidity 3, rotation);
* ``mixture d``: `hyp2onnx.datasets.make_wrapped_normal_mixture`
  (4 classes) with 5 % radial outliers (random direction, radius beyond
  the inliers' 95th percentile by 0.5 to 2);
* ``near origin``: the d = 4 mixture and its outliers scaled into the ball
  of hyperbolic radius 0.01, where hyperbolic space is nearly Euclidean;
  the Euclidean extended isolation forest (random unit normal, threshold
  uniform between the node's smallest and largest projection) on log-map
  coordinates is the reference there.

Detectors: scikit-learn's ``IsolationForest`` on Klein, Poincare and
log-map (at the origin) coordinates; ``HyperbolicIsolationForest`` with
axis-parallel splits and the distance law, and with node-centred splits
under both laws. (Axis-parallel with the Klein law *is* scikit-learn's on
Klein coordinates: same draws, same scores; the parity is tested.) The
default subsample of 256 rows holds about two rows per node of the
hierarchies (120 nodes), which is what limits every forest there: the last
two columns repeat scikit-learn's forest on Klein coordinates and the
default design with ``max_samples=512``.

Speed: scoring 10,000 Klein points of H^d (d = 2, 4, 8) with onnxruntime
(one thread; the graphs called in turn 40 times, each one's fastest call in
CPU time of the calling thread):
skl2onnx's graph of ``IsolationForest`` (float32 input, the only one it
takes) against hyp2onnx's exact graphs. ``--speed-only`` reruns this part
alone and keeps the detection tables of the results file.

``--skip-speed`` measures detection only and keeps the speed section of
the results file already there.

    python benchmarks/bench_isolation.py [--quick] [--seeds 10] [--skip-speed | --speed-only]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import add_output_args, environment, md_table, output_dir, steps, text_table, write

from hyp2onnx import HyperbolicIsolationForest, to_onnx
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.geometry import hyperboloid_to_klein, hyperboloid_to_poincare

STEP = 1.5
BRANCHING = 3
DEPTH = 4
NOISE = 0.3
BOOST = 3.0
#: Trees per forest, every detector and every graph timed.
N_TREES = 100


# -- geometry (unit hyperboloid, timelike column 0) -------------------------------------


def exp_origin(v: np.ndarray) -> np.ndarray:
    """``exp_o(v)`` for tangent vectors ``v`` [n, d] at the origin."""
    r = np.linalg.norm(v, axis=1, keepdims=True)
    safe = np.where(r > 0, r, 1.0)
    return np.concatenate([np.cosh(r), np.sinh(r) * v / safe], axis=1)


def boost_from_origin(mu: np.ndarray) -> np.ndarray:
    """The boost carrying the origin to the hyperboloid point ``mu``."""
    m0, ms = mu[0], mu[1:]
    d = ms.size
    B = np.empty((d + 1, d + 1))
    B[0, 0], B[0, 1:], B[1:, 0] = m0, ms, ms
    B[1:, 1:] = np.eye(d) + np.outer(ms, ms) / (1.0 + m0)
    return B


def distance(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pairwise hyperbolic distances [n, m]."""
    inner = x[:, :1] @ y[:, :1].T - x[:, 1:] @ y[:, 1:].T
    return np.arccosh(np.maximum(inner, 1.0))


def log_origin(x: np.ndarray) -> np.ndarray:
    r = np.arccosh(np.maximum(x[:, 0], 1.0))
    norm = np.linalg.norm(x[:, 1:], axis=1)
    return x[:, 1:] * (r / np.where(norm > 0, norm, 1.0))[:, None]


def random_isometry(d: int, rng: np.random.Generator, rapidity: float = BOOST) -> np.ndarray:
    """Rotation, boost of ``rapidity`` along the first axis, rotation."""

    def rotation() -> np.ndarray:
        q, r = np.linalg.qr(rng.standard_normal((d, d)))
        R = np.eye(d + 1)
        R[1:, 1:] = q * np.sign(np.diag(r))
        return R

    B = np.eye(d + 1)
    B[0, 0] = B[1, 1] = np.cosh(rapidity)
    B[0, 1] = B[1, 0] = np.sinh(rapidity)
    return rotation() @ B @ rotation()


def on_manifold(x: np.ndarray) -> np.ndarray:
    """Recompute ``x_0`` from the spacelike part (rounding drift after isometries)."""
    return np.concatenate(
        [np.sqrt(1.0 + (x[:, 1:] ** 2).sum(axis=1, keepdims=True)), x[:, 1:]], axis=1
    )


# -- data -------------------------------------------------------------------------------


def tree_nodes(d: int, rng: np.random.Generator) -> np.ndarray:
    """Hyperboloid points of the hierarchy's nodes (root excluded)."""
    nodes = []
    frontier = [(np.zeros(d), None, 0)]
    while frontier:
        position, direction, level = frontier.pop()
        if level == DEPTH:
            continue
        for j in range(BRANCHING):
            if direction is None:  # the root's children: spread around the origin
                if d == 2:
                    a = 2 * np.pi * j / BRANCHING + rng.uniform(0, 2 * np.pi / BRANCHING)
                    v = np.array([np.cos(a), np.sin(a)])
                else:
                    v = rng.standard_normal(d)
                    v /= np.linalg.norm(v)
            else:
                w = rng.standard_normal(d)
                w -= (w @ direction) * direction
                w /= np.linalg.norm(w)
                if d == 2:
                    spread = np.pi / BRANCHING ** (level + 1) * (j - (BRANCHING - 1) / 2) * 2
                    w = np.array([-direction[1], direction[0]])
                else:
                    spread = 0.6 / 2 ** (level - 1)
                v = np.cos(spread) * direction + np.sin(spread) * w
            child = (level + 1) * STEP * v
            nodes.append(child)
            frontier.append((child, v, level + 1))
    return exp_origin(np.array(nodes))


def hierarchy(d: int, n_in: int, n_out: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    nodes = tree_nodes(d, rng)
    at = rng.integers(0, len(nodes), n_in)
    noise = exp_origin(rng.standard_normal((n_in, d)) * NOISE)
    inliers = np.stack([boost_from_origin(nodes[i]) @ p for i, p in zip(at, noise, strict=True)])
    outliers: list[np.ndarray] = []
    while len(outliers) < n_out:
        v = rng.standard_normal(d)
        v *= rng.uniform(1.0, DEPTH * STEP) / np.linalg.norm(v)
        p = exp_origin(v[None])
        if distance(p, nodes).min() >= 2.0:
            outliers.append(p[0])
    X = on_manifold(np.vstack([inliers, np.array(outliers)]))
    return X, np.r_[np.zeros(n_in), np.ones(n_out)]


def mixture(d: int, n_in: int, n_out: int, seed: int, scale: float | None = None):
    rng = np.random.default_rng(seed + 1000)
    X, _ = make_wrapped_normal_mixture(n_in, d, 4, random_state=seed)
    v = log_origin(X)
    r = np.linalg.norm(v, axis=1)
    u = rng.standard_normal((n_out, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    out = u * (np.percentile(r, 95) + rng.uniform(0.5, 2.0, n_out))[:, None]
    v = np.vstack([v, out])
    if scale is not None:
        v *= scale / np.linalg.norm(v, axis=1).max()
    return on_manifold(exp_origin(v)), np.r_[np.zeros(n_in), np.ones(n_out)]


# -- detectors ------------------------------------------------------------------------


def euclidean_eif(Z: np.ndarray, seed: int, n_trees: int = 100, psi: int = 256) -> np.ndarray:
    """Extended isolation forest in Euclidean space (random unit normal, threshold uniform
    between the node's smallest and largest projection); returns -2 ** (-E[h] / c(psi))."""
    rng = np.random.default_rng(seed)
    n, d = Z.shape
    psi = min(psi, n)
    limit = int(np.ceil(np.log2(max(psi, 2))))

    def c(m: np.ndarray) -> np.ndarray:
        m = np.asarray(m, dtype=float)
        out = np.where(
            m > 2,
            2 * (np.log(np.maximum(m - 1, 1)) + np.euler_gamma) - 2 * (m - 1) / np.maximum(m, 1),
            0.0,
        )
        return np.where(m == 2, 1.0, out)

    total = np.zeros(n)
    for _ in range(n_trees):
        rows = rng.choice(n, psi, replace=False)
        h = np.zeros(n)

        def grow(train: np.ndarray, test: np.ndarray, depth: int) -> None:
            if depth >= limit or train.size <= 1:
                h[test] = depth + c(train.size)
                return
            w = rng.standard_normal(d)
            w /= np.linalg.norm(w)
            p = Z[train] @ w
            if p.max() <= p.min():
                h[test] = depth + c(train.size)
                return
            t = rng.uniform(p.min(), p.max())
            q = Z[test] @ w
            grow(train[p <= t], test[q <= t], depth + 1)
            grow(train[p > t], test[q > t], depth + 1)

        grow(rows, np.arange(n), 0)
        total += h
    return -(2.0 ** (-total / n_trees / c(psi)))


def detectors(seed: int, n_trees: int = N_TREES) -> dict:
    from sklearn.ensemble import IsolationForest

    def cap(max_samples, X):  # quick runs have fewer rows than 512
        return max_samples if max_samples == "auto" else min(max_samples, len(X))

    def sk(coords, max_samples="auto"):
        return lambda X: (
            IsolationForest(
                n_estimators=n_trees, max_samples=cap(max_samples, X), random_state=seed
            )
            .fit(coords(X))
            .score_samples(coords(X))
        )

    def ours(splits, law, max_samples="auto"):
        return lambda X: (
            HyperbolicIsolationForest(
                n_estimators=n_trees,
                splits=splits,
                threshold_law=law,
                max_samples=cap(max_samples, X),
                random_state=seed,
            )
            .fit(X)
            .score_samples(X)
        )

    return {
        "scikit-learn, Klein": sk(hyperboloid_to_klein),
        "scikit-learn, Poincare": sk(hyperboloid_to_poincare),
        "scikit-learn, log-map": sk(log_origin),
        "ours: axis, distance law": ours("axis", "distance"),
        "ours: centred, distance law": ours("centred", "distance"),
        "ours: centred, Klein law": ours("centred", "klein"),
        "scikit-learn, Klein, max_samples=512": sk(hyperboloid_to_klein, 512),
        "ours: centred, Klein law, max_samples=512": ours("centred", "klein", 512),
    }


def evaluate(datasets: dict, seeds: list[int], n_trees: int = N_TREES) -> dict:
    from sklearn.metrics import average_precision_score, roc_auc_score

    results: dict = {}
    for name, make in steps(datasets.items(), "detection", unit="data sets"):
        for seed in seeds:
            X, y = make(seed)
            methods = detectors(seed, n_trees)
            if name.startswith("near origin"):
                methods["Euclidean EIF, log-map"] = lambda X, seed=seed: euclidean_eif(
                    log_origin(X), seed, n_trees
                )
            for method, score in methods.items():
                anomaly = -score(X)  # higher: more abnormal
                entry = results.setdefault(name, {}).setdefault(method, {"auc": [], "ap": []})
                entry["auc"].append(float(roc_auc_score(y, anomaly)))
                entry["ap"].append(float(average_precision_score(y, anomaly)))
        print(f"  {name}: done", flush=True)
    return results


def mean_se(values: list[float]) -> str:
    v = np.asarray(values)
    se = v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else 0.0
    return f"{v.mean():.3f} ± {se:.3f}"


# -- speed ----------------------------------------------------------------------------


SPEED_DIMS = (2, 4, 8)
SPEED_REPEATS = 40
#: Quick mode (a smoke test of every code path, in seconds): its sizes.
QUICK = {"trees": 10, "seeds": 1, "rows": (150, 8), "speed_rows": 500, "repeats": 2, "dims": (2,)}
SPEED_HEADERS = ["d", "graph", "ms", "speed vs skl2onnx"]


def speed(
    n_rows: int, repeats: int, dims: tuple[int, ...] = SPEED_DIMS, n_trees: int = N_TREES
) -> list[list]:
    """Scoring time of each graph on ``n_rows`` Klein points of H^d, for each ``d``.

    Every graph of one ``d`` gets its session first; then the graphs run in
    turn, one call each, ``repeats`` times, and each graph's fastest call
    counts. A call is timed in CPU time of the calling thread, on which
    onnxruntime runs a one-thread session: on a shared machine the wall
    time also counts other processes' turns (their load moved it by 40 %
    between runs, the CPU time by a few per cent).
    """
    import onnxruntime as ort
    from skl2onnx import to_onnx as skl_to_onnx
    from sklearn.ensemble import IsolationForest

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1

    def session(model):
        return ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )

    def timing(sess, feed) -> float:
        name = sess.get_inputs()[0].name
        start = time.thread_time()
        sess.run(None, {name: feed})
        return time.thread_time() - start

    rows = []
    for d in steps(dims, "scoring speed", unit="dims"):
        X, _ = mixture(d, min(2000, n_rows), 100, 0)
        k_train = hyperboloid_to_klein(X)
        k = hyperboloid_to_klein(mixture(d, n_rows, 0, 1)[0])
        sk = IsolationForest(n_estimators=n_trees, random_state=0).fit(k_train.astype(np.float32))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sk_graph = skl_to_onnx(
                sk, k_train[:1].astype(np.float32), target_opset={"": 18, "ai.onnx.ml": 3}
            )
        graphs = [("skl2onnx, IsolationForest (float32 input)", session(sk_graph), "float32")]
        for label, splits, law, dtype in (
            ("axis, Klein law (float32 input)", "axis", "klein", "float32"),
            ("axis, Klein law (float64 input)", "axis", "klein", "float64"),
            ("axis, distance law (float64 input)", "axis", "distance", "float64"),
            ("centred, Klein law (float64 input; the default)", "centred", "klein", "float64"),
            ("centred, distance law (float64 input)", "centred", "distance", "float64"),
        ):
            model = HyperbolicIsolationForest(
                n_estimators=n_trees,
                splits=splits,
                threshold_law=law,
                random_state=0,
                input_geometry="klein",
            ).fit(k_train)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                graphs.append((f"hyp2onnx, {label}", session(to_onnx(model, dtype=dtype)), dtype))
        feeds = [k.astype(dtype) for _, _, dtype in graphs]
        best = [np.inf] * len(graphs)
        for repeat in range(repeats + 1):  # the first call of each session is a warm-up
            for i, ((_, sess, _), feed) in enumerate(zip(graphs, feeds, strict=True)):
                elapsed = timing(sess, feed)
                best[i] = min(best[i], elapsed) if repeat else best[i]
        for (label, _, _), t in zip(graphs, best, strict=True):
            rows.append([d, label, f"{t * 1e3:.1f}", f"{best[0] / t:.2f}"])
    return rows


SPEED_HEADING = "## Scoring speed"


def kept_speed(out: Path) -> tuple[list, str] | None:
    """The speed rows and section of the results already in ``out`` (None if there are none).

    The section is the file's last and carries its own line saying when and
    where it was measured, so it is kept verbatim.
    """
    md, js = out / "isolation.md", out / "isolation.json"
    if not (md.exists() and js.exists()):
        print("--skip-speed: no earlier results to keep; measuring speed")
        return None
    text = md.read_text(encoding="utf-8")
    if SPEED_HEADING not in text:
        print("--skip-speed: no speed section in the earlier results; measuring speed")
        return None
    section = SPEED_HEADING + text.split(SPEED_HEADING, 1)[1].rstrip("\n")
    rows = json.loads(js.read_text(encoding="utf-8"))["speed"]
    return rows, section


TITLE = "# Isolation forests on hyperbolic data"


def description() -> str:
    """What the results file measures: this module's docstring, without its usage line."""
    return (__doc__ or "").split("\n\n", 1)[1].split("    python")[0].strip()


def speed_section(rows: list[list], n_rows: int, repeats: int) -> str:
    """The speed table under its heading, with the machine and load it was measured on."""
    return "\n\n".join(
        [
            f"## Scoring speed ({n_rows:,} Klein points of H^d, onnxruntime, 1 thread)",
            "Milliseconds of CPU time (the calling thread's, which runs the session), "
            f"fastest of {repeats} calls made in turn with the other graphs of the same d "
            "(load average: when the run ended). " + environment(),
            md_table(SPEED_HEADERS, rows),
        ]
    )


def speed_only(out: Path, quick: bool) -> int:
    """Rerun the speed section alone, keeping the detection tables of ``out``'s results."""
    n_rows = QUICK["speed_rows"] if quick else 10_000
    repeats = QUICK["repeats"] if quick else SPEED_REPEATS
    if quick:
        rows = speed(n_rows, repeats, QUICK["dims"], QUICK["trees"])
    else:
        rows = speed(n_rows, repeats)
    section = speed_section(rows, n_rows, repeats)
    md, js = out / "isolation.md", out / "isolation.json"
    old = md.read_text(encoding="utf-8") if md.exists() else ""
    before, _, after = old.partition("## Scoring speed")
    paragraphs = [p.strip() for p in before.split("\n\n") if p.strip()]
    # This docstring's description replaces the one the detection run wrote
    # (everything up to the paragraph giving the number of points)...
    sizes = next((i for i, p in enumerate(paragraphs) if "points per data set" in p), None)
    kept = paragraphs[sizes:] if sizes is not None else []
    # ... and the detection run's own environment line stays with its tables.
    kept += [p.strip() for p in after.split("\n\n") if p.startswith("Measured") and "Run time" in p]
    write(md, "\n\n".join([TITLE, description(), *kept, section]))
    data = json.loads(js.read_text(encoding="utf-8")) if js.exists() else {}
    data["speed"] = rows
    js.write_text(json.dumps(data, indent=1), encoding="utf-8")
    print(text_table(SPEED_HEADERS, rows))
    return 0


# -- main -----------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_args(parser)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument(
        "--skip-speed",
        action="store_true",
        help="measure detection only; keep the speed section of the results file already there",
    )
    parser.add_argument(
        "--speed-only",
        action="store_true",
        help="rerun the speed section alone; the results file keeps its detection tables",
    )
    args = parser.parse_args(argv)
    out = output_dir(args)
    if args.speed_only:
        return speed_only(out, args.quick)
    n_seeds = QUICK["seeds"] if args.quick else args.seeds
    n_in, n_out = QUICK["rows"] if args.quick else (1900, 100)
    n_trees = QUICK["trees"] if args.quick else N_TREES
    seeds = list(range(n_seeds))

    def boosted(make, d):
        def inner(seed):
            X, y = make(seed)
            G = random_isometry(d, np.random.default_rng(seed + 7))
            return on_manifold(X @ G.T), y

        return inner

    datasets = {}
    # Quick mode (a smoke test): one data set of each kind.
    for d in (2,) if args.quick else (2, 8):
        plain = lambda seed, d=d: hierarchy(d, n_in, n_out, seed)
        datasets[f"hierarchy H^{d}"] = plain
        datasets[f"hierarchy H^{d}, boosted"] = boosted(plain, d)
    for d in (4,) if args.quick else (4, 8):
        datasets[f"mixture d={d}"] = lambda seed, d=d: mixture(d, n_in, n_out, seed)
    datasets["near origin (d=4, radius 0.01)"] = lambda seed: mixture(
        4, n_in, n_out, seed, scale=0.01
    )

    started = time.time()
    print(f"detection: {len(datasets)} data sets x {n_seeds} seeds")
    results = evaluate(datasets, seeds, n_trees)
    kept = kept_speed(out) if args.skip_speed else None
    if kept is None:
        print("speed")
        n_speed = QUICK["speed_rows"] if args.quick else 10_000
        repeats = QUICK["repeats"] if args.quick else SPEED_REPEATS
        if args.quick:
            speed_rows = speed(n_speed, repeats, QUICK["dims"], n_trees)
        else:
            speed_rows = speed(n_speed, repeats)
        speed_text = speed_section(speed_rows, n_speed, repeats)
    else:
        speed_rows, speed_text = kept

    methods = list(next(iter(results.values())))
    rows_auc = [
        [name, *(mean_se(results[name][m]["auc"]) if m in results[name] else "" for m in methods)]
        for name in results
    ]
    rows_ap = [
        [name, *(mean_se(results[name][m]["ap"]) if m in results[name] else "" for m in methods)]
        for name in results
    ]
    eif = {
        name: mean_se(r["Euclidean EIF, log-map"]["auc"])
        for name, r in results.items()
        if "Euclidean EIF, log-map" in r
    }
    headers = ["data", *methods]
    n_total = n_in + n_out
    text = "\n\n".join(
        [
            TITLE,
            description(),
            f"{n_total} points per data set ({n_out} outliers), {n_seeds} seeds."
            + (
                f" Quick mode: {n_trees} trees per forest, small sizes, a smoke test only."
                if args.quick
                else ""
            ),
            "## ROC-AUC (mean ± standard error)",
            md_table(headers, rows_auc),
            "## Average precision (mean ± standard error)",
            md_table(headers, rows_ap),
            "## Near the origin: the Euclidean extended isolation forest",
            md_table(["data", "Euclidean EIF, log-map (AUC)"], [[k, v] for k, v in eif.items()]),
            environment() + f" Run time {time.time() - started:.0f} s.",
            speed_text,
        ]
    )
    write(out / "isolation.md", text)
    (out / "isolation.json").write_text(
        json.dumps(
            {"results": results, "speed": speed_rows, "seeds": seeds, "n": n_total}, indent=1
        ),
        encoding="utf-8",
    )
    print(text_table(headers, rows_auc))
    if kept is None:
        print(text_table(SPEED_HEADERS, speed_rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
