"""Fit time of a hyperbolic decision tree against plain scikit-learn.

Both fit ``max_depth=3`` classifiers on the same unit-ball Klein points
(float64, as a user would hold them): scikit-learn's
``DecisionTreeClassifier`` directly, and hyp2onnx's
``HyperbolicDecisionTreeClassifier(input_geometry="klein")``, which also
validates the points and moves every threshold to its Einstein midpoint.
Runs are interleaved; the table shows the median times, their ratio and the
median of the per-pair ratios.

Target (issue 2): at 1M rows the hyperbolic fit takes at most 1.10 x
scikit-learn's.

    python benchmarks/bench_fit.py [--sizes 1000 32000 1000000] [--repeats 5] [--dim 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from sklearn.tree import DecisionTreeClassifier

from hyp2onnx import HyperbolicDecisionTreeClassifier


def make_data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Klein points (hyperbolic radius uniform in [0, 4]) and 3-class labels with noise."""
    rng = np.random.default_rng(seed)
    direction = rng.normal(size=(n, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    k = direction * np.tanh(rng.uniform(0.0, 4.0, size=(n, 1)))
    angle = np.arctan2(k[:, 1], k[:, 0]) if d > 1 else np.pi * k[:, 0]
    y = np.floor((angle + np.pi) / (2 * np.pi) * 3).astype(np.int64) % 3
    flip = rng.random(n) < 0.1
    y[flip] = rng.integers(0, 3, size=int(flip.sum()))
    return k, y


def timed(fit: Callable[[], object]) -> float:
    """Wall time of one call, in seconds."""
    start = time.perf_counter()
    fit()
    return time.perf_counter() - start


def bench(n: int, d: int, repeats: int) -> tuple[float, float, float]:
    """Median fit times (scikit-learn, hyperbolic) and median paired ratio, interleaved runs.

    The paired ratio (each hyperbolic run over the scikit-learn run just before
    it) is steadier than the ratio of medians when the machine's load drifts.
    """
    X, y = make_data(n, d)
    plain = lambda: DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y)
    hyper = lambda: HyperbolicDecisionTreeClassifier(
        max_depth=3, random_state=0, input_geometry="klein"
    ).fit(X, y)
    plain()  # warm up both paths once
    hyper()
    t_plain, t_hyper = [], []
    for _ in range(repeats):
        t_plain.append(timed(plain))
        t_hyper.append(timed(hyper))
    paired = statistics.median(h / p for h, p in zip(t_hyper, t_plain, strict=True))
    return statistics.median(t_plain), statistics.median(t_hyper), paired


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 32_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dim", type=int, default=2, help="Klein dimensions (features)")
    args = parser.parse_args(argv)
    print(f"max_depth=3, {args.dim} Klein features, median of {args.repeats} interleaved runs")
    print(f"{'rows':>10} {'sklearn s':>11} {'hyp2onnx s':>11} {'ratio':>7} {'paired':>7}")
    for n in args.sizes:
        t_plain, t_hyper, paired = bench(n, args.dim, args.repeats)
        print(f"{n:>10} {t_plain:>11.4f} {t_hyper:>11.4f} {t_hyper / t_plain:>7.3f} {paired:>7.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
