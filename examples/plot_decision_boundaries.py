"""Decision boundaries of a hyperbolic tree in the Poincare and the Klein disk (paper's Figure 1).

Fits hyp2onnx's ``HyperbolicDecisionTreeClassifier`` on a 2-D mixture of
wrapped normals and draws its partition twice: in the Beltrami-Klein disk,
where every split ``k_i <= t`` is a straight chord, and in the Poincare disk,
where the same splits are geodesics: circular arcs meeting the boundary at
right angles (or diameters). Each split is drawn only inside the region of
its node; thicker lines are splits nearer the root. The background shows
the predicted class, the dots the training points.

Needs matplotlib (``pip install 'hyp2onnx[plot]'``).

    python examples/plot_decision_boundaries.py [-o decision_boundaries.png] [--depth 3] [--seed 3]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from hyp2onnx import HyperbolicDecisionTreeClassifier, geometry
from hyp2onnx.datasets import make_wrapped_normal_mixture


def split_segments(tree) -> list[tuple[int, np.ndarray]]:
    """(depth, Klein points along the split's chord) for every split of a fitted scikit-learn tree.

    A node's region is the unit disk cut by its ancestors' axis-parallel
    half-planes, so its split is the chord ``k_f = t`` clipped to the box of
    those half-planes and to the disk.
    """
    t_ = tree.tree_
    segments = []

    def walk(node: int, lo: np.ndarray, hi: np.ndarray, depth: int) -> None:
        if t_.children_left[node] == -1:
            return
        f, t = int(t_.feature[node]), float(t_.threshold[node])
        other = 1 - f
        half = np.sqrt(max(1.0 - t * t, 0.0)) * (1.0 - 1e-12)  # stay inside the disk
        a, b = max(lo[other], -half), min(hi[other], half)
        if a < b:
            # Cosine spacing: dense near the ends, where the chord meets the
            # boundary and its Poincare image bends fastest.
            s = a + (b - a) * (1.0 - np.cos(np.linspace(0.0, np.pi, 1000))) / 2.0
            pts = np.empty((s.size, 2))
            pts[:, f], pts[:, other] = t, s
            segments.append((depth, pts))
        left_hi, right_lo = hi.copy(), lo.copy()
        left_hi[f], right_lo[f] = t, t
        walk(int(t_.children_left[node]), lo, left_hi, depth + 1)
        walk(int(t_.children_right[node]), right_lo, hi, depth + 1)

    walk(0, np.array([-1.0, -1.0]), np.array([1.0, 1.0]), 0)
    return segments


def klein_to_poincare(k: np.ndarray) -> np.ndarray:
    return geometry.klein_to_poincare(k)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", type=Path, default=Path("decision_boundaries.png"))
    parser.add_argument("--depth", type=int, default=3, help="max_depth of the tree")
    parser.add_argument("--classes", type=int, default=4)
    parser.add_argument("--seed", type=int, default=3, help="data set seed")
    parser.add_argument("--resolution", type=int, default=400, help="background grid per axis")
    args = parser.parse_args(argv)
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: pip install 'hyp2onnx[plot]'")
        return 2
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    X, y = make_wrapped_normal_mixture(600, 2, args.classes, noise_std=1.0, random_state=args.seed)
    model = HyperbolicDecisionTreeClassifier(max_depth=args.depth, random_state=0).fit(X, y)
    k = model.to_klein(X)
    p = klein_to_poincare(k)
    segments = split_segments(model.estimator_)

    colors = plt.get_cmap("tab10").colors[: args.classes]
    cmap = ListedColormap(colors)
    g = np.linspace(-1, 1, args.resolution)
    gx, gy = np.meshgrid(g, g)
    disk = np.column_stack([gx.ravel(), gy.ravel()])
    inside = np.sum(disk**2, axis=1) < 0.999

    fig, axes = plt.subplots(1, 2, figsize=(11, 5.6))
    panels = (
        (axes[0], "poincare", p, "Poincaré disk: splits are geodesic arcs"),
        (axes[1], "klein", k, "Klein disk: splits are straight chords"),
    )
    for ax, model_name, points, title in panels:
        grid_points = geometry.from_klein(
            geometry.to_klein(disk[inside], model_name), "hyperboloid"
        )
        labels = np.full(disk.shape[0], np.nan)
        labels[inside] = model.predict(grid_points)
        ax.imshow(
            labels.reshape(gx.shape),
            origin="lower",
            extent=(-1, 1, -1, 1),
            cmap=cmap,
            alpha=0.25,
            vmin=-0.5,
            vmax=args.classes - 0.5,
            interpolation="nearest",
        )
        ax.scatter(
            points[:, 0],
            points[:, 1],
            c=y,
            cmap=cmap,
            s=9,
            vmin=-0.5,
            vmax=args.classes - 0.5,
            edgecolors="k",
            linewidths=0.2,
        )
        for depth, seg in segments:
            line = seg if model_name == "klein" else klein_to_poincare(seg)
            ax.plot(line[:, 0], line[:, 1], color="k", lw=max(2.6 - 0.7 * depth, 0.8))
        ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, color="k", lw=1.2))
        ax.set(xlim=(-1.03, 1.03), ylim=(-1.03, 1.03), aspect="equal", title=title)
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(
        f"hyp2onnx HyperbolicDecisionTreeClassifier (max_depth={args.depth}) on a "
        f"{args.classes}-class wrapped-normal mixture"
    )
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
