"""The figures of the neural and isolation pages, drawn by hyp2onnx.plot from models fitted here.

    python docs/figures.py            # writes docs/figures/*.png and figures.npz
    python docs/figures.py --check    # exits 1 if what the figures show is out of date

mkdocs cannot run code, so the pictures are files. Beside them, figures.npz
keeps what each one shows (the class or region of every grid point, and the
data): ``--check`` (run by tests/test_docs_figures.py) recomputes that and
fails when more than 0.5% of the grid disagrees, i.e. when the models, the
data or the plotting code changed without the figures being redrawn.
Needs matplotlib (``pip install 'hyp2onnx[plot]'``).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

import hyp2onnx
from hyp2onnx.datasets import make_wrapped_normal_mixture

HERE = Path(__file__).resolve().parent / "figures"
RESOLUTION = 240
#: Share of grid points that may differ from the record (BLAS sums a network's
#: training steps in an order of its own, so another machine may move a boundary a little).
TOLERANCE = 0.005


def _network() -> tuple[object, np.ndarray, np.ndarray]:
    X, y = make_wrapped_normal_mixture(600, 2, 4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not converged at max_iter: the picture does not care
        net = hyp2onnx.HyperbolicMLPClassifier(
            hidden_layer_sizes=(16, 16), max_iter=300, random_state=0
        ).fit(X, y)
    return net, X, y


def displays(plot: bool) -> dict[str, list]:
    """Each figure's name -> the displays (or region pictures) it holds."""
    from hyp2onnx.plot import DecisionRegionDisplay

    net, X, y = _network()
    tree = hyp2onnx.region_tree(net, X)
    one = dict(resolution=RESOLUTION, plot=plot)
    poincare = DecisionRegionDisplay.from_estimator(net, X, y, disk="poincare", **one)
    klein = DecisionRegionDisplay.from_estimator(net, X, y, disk="klein", **one)
    regions = DecisionRegionDisplay.from_estimator(
        tree, X, disk="poincare", response_method="apply", **one
    )
    Xi, _ = make_wrapped_normal_mixture(500, 2, 3, random_state=1)
    forest = hyp2onnx.HyperbolicIsolationForest(random_state=0, contamination=0.05).fit(Xi)
    isolation = DecisionRegionDisplay.from_estimator(forest, Xi, resolution=RESOLUTION, plot=False)
    isolation.names = ["outlier (-1)", "inlier (+1)"]
    isolation.title = "HyperbolicIsolationForest, contamination=0.05"
    if plot:
        isolation.plot()
    return {
        "neural_regions": [poincare, klein],
        "neural_region_tree": [regions],
        "isolation_regions": [isolation],
        "_tree": [tree, X, y],
    }


def _record(found: dict[str, list]) -> dict[str, np.ndarray]:
    return {
        f"{name}_{i}": np.nan_to_num(d.response, nan=-9).astype(np.int32)
        for name, shown in found.items()
        if not name.startswith("_")
        for i, d in enumerate(shown)
    }


def write() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    HERE.mkdir(exist_ok=True)
    found = displays(plot=False)
    for name, shown in found.items():
        if name.startswith("_"):
            continue
        fig, axes = plt.subplots(1, len(shown), figsize=(6.2 * len(shown), 5), squeeze=False)
        for ax, d in zip(axes[0], shown, strict=True):
            d.plot(ax=ax)
        fig.tight_layout()
        fig.savefig(HERE / f"{name}.png", dpi=90, metadata={"Software": None})
        plt.close(fig)
    tree, X, y = found["_tree"]
    region = tree.explain(X[5])
    ax = region.plot(points=tree.to_klein(X), labels=y)
    ax.figure.savefig(HERE / "neural_region.png", dpi=90, bbox_inches="tight")
    np.savez_compressed(HERE / "figures.npz", **_record(found))


def check() -> int:
    recorded = dict(np.load(HERE / "figures.npz"))
    now = _record(displays(plot=False))
    bad = []
    for key in sorted(set(recorded) | set(now)):
        if key not in recorded or key not in now or recorded[key].shape != now[key].shape:
            bad.append(f"{key}: missing or reshaped")
            continue
        share = float(np.mean(recorded[key] != now[key]))
        if share > TOLERANCE:
            bad.append(f"{key}: {share:.2%} of the grid differs")
    for line in bad:
        print(f"out of date: {line}; run python docs/figures.py", file=sys.stderr)
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Compare, write nothing.")
    if parser.parse_args().check:
        return check()
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
