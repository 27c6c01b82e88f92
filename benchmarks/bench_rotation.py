"""Hyperbolic rotation forests against Fast-HyperRF, oblique trees, aeon and raw coordinates.

The paper's 8-class mixtures of wrapped normals (1000 points, 80/20 split,
``hyp2onnx.datasets.make_wrapped_normal_mixture``), d = 2, 4, 8, 16, in the
paper's setup (depth 3, 12 trees) and with full-depth 100-tree forests. Every
model is fitted on the same split of each seed (paired) and again on the
same data moved by a random isometry (a random rotation, then a boost of
rapidity 3). Models:

- ``Fast-HyperRF``: ``HyperbolicRandomForestClassifier``;
- ``oblique``: one ``HyperbolicHouseholderTreeClassifier`` of the same depth;
- ``aeon RotF``: aeon's ``RotationForestClassifier`` on Klein coordinates
  (its trees limited to the same depth), when aeon imports;
- ``sklearn RF raw``: ``RandomForestClassifier`` on the raw hyperboloid coordinates;
- ``ours haar``, ``ours pca``: ``HyperbolicRotationForestClassifier``.

Reported: mean test accuracy ± standard error over seeds, paired
differences, the change under the isometry, fit time against Fast-HyperRF
with the same tree parameters, and scoring throughput of the exported graph
(default encoding, float64 input, one onnxruntime thread) against the plain
forest graph of the same trees reading Klein coordinates.

    python benchmarks/bench_rotation.py [--quick] [--seeds N] [--full-seeds N]
        [--only fit,scoring]

``--only`` reruns just the named sections (``fit``: fit time against
Fast-HyperRF with the same trees; ``scoring``: throughput) and keeps the
other sections' numbers from the results folder's ``rotation.json``; the
page says which section was measured when. (The accuracy section needs aeon,
whose numba refuses numpy 2.4: it ran in a side environment.)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _report
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

import hyp2onnx as h
from hyp2onnx.datasets import make_wrapped_normal_mixture
from hyp2onnx.geometry import to_klein

try:  # the benchmark extra; runs without it
    from aeon.classification.sklearn import RotationForestClassifier as AeonRotationForest
except Exception:
    AeonRotationForest = None

SETTINGS = {"paper": (12, 3), "full": (100, None)}


class _Klein:
    """A model fitted on the Klein coordinates of hyperboloid points."""

    def __init__(self, model):
        self.model = model

    def fit(self, X, y):
        self.model.fit(to_klein(X, "hyperboloid"), y)
        return self

    def score(self, X, y):
        return self.model.score(to_klein(X, "hyperboloid"), y)


def models(n_trees: int, depth: int | None, seed: int) -> dict:
    out = {
        "Fast-HyperRF": lambda: h.HyperbolicRandomForestClassifier(
            n_estimators=n_trees, max_depth=depth, random_state=seed
        ),
        "oblique": lambda: h.HyperbolicHouseholderTreeClassifier(
            max_depth=depth, random_state=seed
        ),
        "sklearn RF raw": lambda: RandomForestClassifier(
            n_estimators=n_trees, max_depth=depth, random_state=seed
        ),
        "ours haar": lambda: h.HyperbolicRotationForestClassifier(
            n_estimators=n_trees, max_depth=depth, rotation="haar", random_state=seed
        ),
        "ours pca": lambda: h.HyperbolicRotationForestClassifier(
            n_estimators=n_trees, max_depth=depth, rotation="pca", random_state=seed
        ),
    }
    if AeonRotationForest is not None:
        out["aeon RotF"] = lambda: _Klein(
            AeonRotationForest(
                n_estimators=n_trees,
                base_estimator=DecisionTreeClassifier(criterion="entropy", max_depth=depth),
                random_state=seed,
            )
        )
    return out


def isometry(d: int, rapidity: float, seed: int) -> np.ndarray:
    """A random rotation, then a boost of ``rapidity`` along a random direction."""
    rng = np.random.default_rng(10_000 + seed)
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    rotation = np.eye(d + 1)
    rotation[1:, 1:] = q * np.sign(np.diag(r))
    n = rng.standard_normal(d)
    n /= np.linalg.norm(n)
    boost = np.eye(d + 1)
    boost[0, 0] = math.cosh(rapidity)
    boost[0, 1:] = boost[1:, 0] = math.sinh(rapidity) * n
    boost[1:, 1:] += (math.cosh(rapidity) - 1.0) * np.outer(n, n)
    return boost @ rotation


def moved(X: np.ndarray, G: np.ndarray) -> np.ndarray:
    Y = X @ G.T
    Y[:, 0] = np.sqrt(1.0 + np.einsum("ij,ij->i", Y[:, 1:], Y[:, 1:]))
    return Y


def accuracy_runs(dims, seeds: int, setting: str, n_samples: int) -> list[dict]:
    n_trees, depth = SETTINGS[setting]
    runs = []
    for d, seed in _report.steps(
        [(d, s) for d in dims for s in range(seeds)], f"accuracy, {setting}", unit="runs"
    ):
        X, y = make_wrapped_normal_mixture(n_samples, d, 8, random_state=seed)
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.2, random_state=seed, stratify=y)
        G = isometry(d, 3.0, seed)
        for name, make in models(n_trees, depth, seed).items():
            for copy, (A, B) in {
                "original": (Xtr, Xte),
                "isometry": (moved(Xtr, G), moved(Xte, G)),
            }.items():
                start = time.perf_counter()
                model = make().fit(A, ytr)
                fit_s = time.perf_counter() - start
                runs.append(
                    {
                        "setting": setting,
                        "d": d,
                        "seed": seed,
                        "model": name,
                        "data": copy,
                        "accuracy": float(model.score(B, yte)),
                        "fit_s": fit_s,
                    }
                )
        print(f"{setting} d={d} seed={seed} done", flush=True)
    return runs


def same_tree_fit_times(dims, seeds: int, setting: str, n_samples: int) -> list[dict]:
    """Fit seconds of Fast-HyperRF with our trees' parameters (all features, no bootstrap)."""
    n_trees, depth = SETTINGS[setting]
    out = []
    for d, seed in _report.steps(
        [(d, s) for d in dims for s in range(seeds)], f"fit times, {setting}", unit="runs"
    ):
        X, y = make_wrapped_normal_mixture(n_samples, d, 8, random_state=seed)
        for name, model in {
            "Fast-HyperRF same trees": h.HyperbolicRandomForestClassifier(
                n_estimators=n_trees,
                max_depth=depth,
                max_features=None,
                bootstrap=False,
                random_state=seed,
            ),
            "ours pca": h.HyperbolicRotationForestClassifier(
                n_estimators=n_trees, max_depth=depth, random_state=seed
            ),
        }.items():
            start = time.perf_counter()
            model.fit(X, y)
            out.append(
                {
                    "setting": setting,
                    "d": d,
                    "model": name,
                    "fit_s": time.perf_counter() - start,
                }
            )
    return out


def throughput(dims, setting: str, n_rows: int, repeats: int) -> list[dict]:
    """Rows per second of both designs' graphs and of the plain forest graph of the same trees.

    ``routing="frames"`` and ``routing="hyperplanes"`` grow the same trees (the
    routing is chosen after growing); the plain forest graph reads the
    frames model's splits as Klein features. All three take turns in one process.
    """
    import onnxruntime as ort

    from hyp2onnx.export._compile import compile_model

    n_trees, depth = SETTINGS[setting]
    out = []
    for d in _report.steps(dims, f"scoring, {setting}", unit="dims"):
        X, y = make_wrapped_normal_mixture(2000, d, 8, random_state=0)
        irs = {}
        # Full-depth forests routed by hyperplanes would project every row onto each of
        # their tens of thousands of splits (the walk's perfect tables do not fit): one
        # such graph exhausted 22 GB of memory, so only their frames are measured.
        for routing in ("frames", "hyperplanes") if depth is not None else ("frames",):
            try:
                model = h.HyperbolicRotationForestClassifier(
                    n_estimators=n_trees, max_depth=depth, random_state=0, routing=routing
                ).fit(X, y)
            except ValueError as error:  # a training row within a rounding of a split
                print(f"{setting} d={d}: {error}")
                continue
            irs[f"ours ({routing})"] = model.to_ir()
        auto = h.HyperbolicRotationForestClassifier(
            n_estimators=n_trees, max_depth=depth, random_state=0
        ).fit(X, y)
        described = irs["ours (frames)"]
        e = described.ensemble
        irs["plain forest"] = replace(
            described,
            ensemble=replace(e, frames=None, feature=np.where(e.feature >= 0, e.feature % d, -1)),
        )
        count = n_rows if depth is not None else n_rows // 5
        rows, _ = make_wrapped_normal_mixture(count, d, 8, random_state=1)
        sessions = {}
        for name, ir in irs.items():
            graph = compile_model(ir, dtype="float64", encoding="fast", opset=18)
            options = ort.SessionOptions()
            options.intra_op_num_threads = options.inter_op_num_threads = 1
            sessions[name] = ort.InferenceSession(graph.SerializeToString(), options)
            sessions[name].run(None, {"X": rows})
        # The graphs take turns, so that a change of the machine's load falls on all alike.
        best = dict.fromkeys(sessions, math.inf)
        for _ in range(repeats):
            for name, session in sessions.items():
                start = time.perf_counter()
                session.run(None, {"X": rows})
                best[name] = min(best[name], time.perf_counter() - start)
        for name, seconds in best.items():
            out.append({"setting": setting, "d": d, "graph": name, "rows_per_s": count / seconds})
        out.append(
            {"setting": setting, "d": d, "graph": "default routing", "routing": auto.routing_}
        )
    return out


def _mean_se(values) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    se = a.std(ddof=1) / math.sqrt(a.size) if a.size > 1 else float("nan")
    return float(a.mean()), float(se)


def _pm(values, scale: float = 100.0) -> str:
    m, se = _mean_se(values)
    if math.isnan(se):  # one seed (quick mode): no spread to state
        return f"{scale * m:.1f}"
    return f"{scale * m:.1f} ± {scale * se:.1f}"


def _accuracy(runs, setting, d, model, data="original") -> np.ndarray:
    chosen = [
        r
        for r in runs
        if (r["setting"], r["d"], r["model"], r["data"]) == (setting, d, model, data)
    ]
    return np.array([r["accuracy"] for r in sorted(chosen, key=lambda r: r["seed"])])


def report(runs, fits, speeds, dims, seeds: dict, quick: bool, measured: dict) -> str:
    """The results page; ``measured``: section ("accuracy", "fit", "scoring") -> where and when."""
    names = list(dict.fromkeys(r["model"] for r in runs))
    rerun = {k: v for k, v in measured.items() if v != measured["accuracy"]}
    lines = [
        "# Hyperbolic rotation forests",
        "",
        "`benchmarks/bench_rotation.py`"
        + (" --quick (smoke test sizes: not results)" if quick else "")
        + ". The paper's 8-class wrapped-normal mixtures, 1000 points, 80/20 split; "
        "test accuracy in points, mean ± standard error over "
        + ", ".join(f"{n} seeds ({s})" for s, n in seeds.items())
        + "; the same split of each seed for every model (paired). "
        "`oblique` is one HHCART tree of the same depth. "
        + ("" if "aeon RotF" in names else "aeon did not import: no aeon column. ")
        + measured["accuracy"]
        + (
            " Rerun later with `--only " + ",".join(rerun) + "`, as each section says."
            if rerun
            else ""
        ),
        "",
    ]
    for setting in seeds:
        n_trees, depth = SETTINGS[setting]
        lines += [f"## Accuracy: {setting} setup ({n_trees} trees, depth {depth or 'full'})", ""]
        rows = [[d, *(_pm(_accuracy(runs, setting, d, m)) for m in names)] for d in dims]
        lines += [_report.md_table(["d", *names], rows), ""]
        lines += ["Paired differences (points, mean ± SE):", ""]
        pairs = [("ours pca", "Fast-HyperRF"), ("ours haar", "Fast-HyperRF")]
        if "aeon RotF" in names:
            pairs += [("ours pca", "aeon RotF"), ("ours haar", "aeon RotF")]
        rows = [
            [
                d,
                *(
                    _pm(_accuracy(runs, setting, d, a) - _accuracy(runs, setting, d, b))
                    for a, b in pairs
                ),
            ]
            for d in dims
        ]
        lines += [_report.md_table(["d", *(f"{a} − {b}" for a, b in pairs)], rows), ""]
        lines += ["Change under the isometry (boost of 3; points, moved − original):", ""]
        rows = [
            [
                d,
                *(
                    _pm(_accuracy(runs, setting, d, m, "isometry") - _accuracy(runs, setting, d, m))
                    for m in names
                ),
            ]
            for d in dims
        ]
        lines += [_report.md_table(["d", *names], rows), ""]
        lines += ["Mean fit seconds (original data):", ""]
        rows = []
        for d in dims:
            cells = []
            for m in names:
                t = [
                    r["fit_s"]
                    for r in runs
                    if (r["setting"], r["d"], r["model"], r["data"]) == (setting, d, m, "original")
                ]
                cells.append(f"{np.mean(t):.3f}")
            rows.append([d, *cells])
        lines += [_report.md_table(["d", *names], rows), ""]
    lines += [
        "## Fit time against Fast-HyperRF with the same trees",
        "",
        "Fast-HyperRF with our trees' parameters (every feature at each node, no "
        "bootstrap): mean seconds and the ratio."
        + (f" {measured['fit']}" if "fit" in rerun else ""),
        "",
    ]
    rows = []
    for setting in seeds:
        for d in dims:
            t = {
                m: np.mean(
                    [
                        f["fit_s"]
                        for f in fits
                        if (f["setting"], f["d"], f["model"]) == (setting, d, m)
                    ]
                )
                for m in ("Fast-HyperRF same trees", "ours pca")
            }
            ratio = t["ours pca"] / t["Fast-HyperRF same trees"]
            rows.append(
                [
                    setting,
                    d,
                    f"{t['Fast-HyperRF same trees']:.3f}",
                    f"{t['ours pca']:.3f}",
                    f"{ratio:.2f}x",
                ]
            )
    lines += [_report.md_table(["setup", "d", "Fast-HyperRF", "ours pca", "ratio"], rows), ""]
    lines += [
        "## Scoring throughput",
        "",
        "Rows per second of the exported graph (default encoding, float64 input, one "
        "onnxruntime thread, best of several runs) against the plain forest graph of the "
        "same trees reading Klein coordinates (the two graphs take turns)."
        + (f" {measured['scoring']}" if "scoring" in rerun else ""),
        "",
    ]
    rows = []
    for setting in seeds:
        for d in dims:
            at = [x for x in speeds if (x["setting"], x["d"]) == (setting, d)]
            s = {x["graph"]: x["rows_per_s"] for x in at if "rows_per_s" in x}
            default = next((x["routing"] for x in at if "routing" in x), "frames")
            plain = s["plain forest"]

            def ratio(name: str, s=s, plain=plain) -> str:
                return f"{s[name] / plain:.2f}x" if name in s else "—"

            rows.append(
                [
                    setting,
                    d,
                    f"{plain:,.0f}",
                    ratio("ours (frames)"),
                    ratio("ours (hyperplanes)"),
                    f"{default}: {ratio(f'ours ({default})')}",
                ]
            )
    lines += [
        _report.md_table(
            ["setup", "d", "plain forest rows/s", "frames", "hyperplanes", "default"], rows
        ),
        "",
        "Ratios to the plain forest graph. `hyperplanes`: the forest routed by its split "
        "hyperplanes, exported as a level walk where its perfect tables fit (depth-3 trees) "
        "and as projections onto every split for the tree operator otherwise; `default`: "
        'the design `routing="auto"` chose for these trees.',
        "",
    ]
    return "\n".join(lines)


SECTIONS = ("accuracy", "fit", "scoring")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _report.add_output_args(parser)
    parser.add_argument("--seeds", type=int, default=30, help="seeds of the paper setup")
    parser.add_argument("--full-seeds", type=int, default=10, help="seeds of the full setup")
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help="comma-separated sections to run (accuracy, fit, scoring); the others are "
        "read from the results folder's rotation.json",
    )
    args = parser.parse_args()
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    if not only or any(s not in SECTIONS for s in only):
        parser.error(f"--only takes sections among {SECTIONS}, got {args.only!r}")
    if args.quick:
        dims, seeds, n_samples = (2,), {"paper": 1, "full": 1}, 200
        SETTINGS["full"] = (10, None)
        n_rows, repeats = 1_000, 1
    else:
        dims, seeds, n_samples = (2, 4, 8, 16), {"paper": args.seeds, "full": args.full_seeds}, 1000
        n_rows, repeats = 100_000, 5
    out = _report.output_dir(args)
    kept: dict = {"runs": [], "fit_same_trees": [], "throughput": [], "measured": {}}
    if len(only) < len(SECTIONS):
        kept = {**kept, **json.loads((out / "rotation.json").read_text(encoding="utf-8"))}
        if "accuracy" not in only:  # the seeds the kept accuracy runs used
            seeds = {s: len({r["seed"] for r in kept["runs"] if r["setting"] == s}) for s in seeds}
            dims = tuple(sorted({r["d"] for r in kept["runs"]}))
    now = _report.environment()
    measured = {
        s: now if s in only else kept["measured"].get(s, _old_environment(out)) for s in SECTIONS
    }
    runs, fits, speeds = kept["runs"], kept["fit_same_trees"], kept["throughput"]
    if "accuracy" in only:
        runs = [
            r for setting, n in seeds.items() for r in accuracy_runs(dims, n, setting, n_samples)
        ]
    if "fit" in only:
        fits = [
            f
            for setting, n in seeds.items()
            for f in same_tree_fit_times(dims, min(n, 3), setting, n_samples)
        ]
    if "scoring" in only:
        speeds = [x for setting in seeds for x in throughput(dims, setting, n_rows, repeats)]
    text = report(runs, fits, speeds, dims, seeds, args.quick, measured)
    _report.write(out / "rotation.md", text)
    (out / "rotation.json").write_text(
        json.dumps(
            {"runs": runs, "fit_same_trees": fits, "throughput": speeds, "measured": measured},
            indent=1,
        ),
        encoding="utf-8",
    )
    print(text)


def _old_environment(out: Path) -> str:
    """The "Measured ..." sentence of an earlier results page (its JSON predates ``measured``)."""
    try:
        text = (out / "rotation.md").read_text(encoding="utf-8")
    except OSError:
        return "Measured at an unrecorded date."
    start = text.find("Measured ")
    return (
        text[start : text.index(".\n", start) + 1]
        if start >= 0
        else "Measured at an unrecorded date."
    )


if __name__ == "__main__":
    main()
