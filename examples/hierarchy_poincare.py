"""A real hierarchy, end to end: embed, classify, export, verify, draw.

The hierarchy is the Python standard library's own package tree, read from
the running interpreter's files (nobody here designed it): every module and
subpackage is a child of its package, and each package of the largest few
top-level packages (``email``, ``xml``, ``asyncio``, ...) is a class. The
script

1. embeds the tree in the Poincare disk with gensim's ``PoincareModel``
   (trained on the transitive closure of "is inside", as Nickel & Kiela
   embed WordNet's noun hierarchy);
2. reads the embedding's convention with `hyp2onnx.conventions`
   (unit ball, K = -1) and fits ``HyperbolicRandomForestClassifier`` on
   the raw Poincare vectors to predict each module's top-level package;
3. compares it with scikit-learn's ``RandomForestClassifier`` on the same
   raw coordinates (held-out accuracy);
4. exports the hyperbolic forest to ONNX, verifies it on the held-out
   points and on a grid covering the disk (labels identical, probabilities
   bit for bit);
5. draws the ONNX graph's decision regions on the Poincare disk, with the
   modules as dots.

Needs gensim and matplotlib (``pip install 'hyp2onnx[dev]'``). ``--quick``
trains briefly on a smaller hierarchy (the test suite runs it so).

    python examples/hierarchy_poincare.py [-o hierarchy_poincare.png] [--quick] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
from collections import Counter
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

import hyp2onnx
from hyp2onnx.conventions import convention_of, gensim_points
from hyp2onnx.verification import run_onnx

ROOT_NODE = "<stdlib>"
SKIP = {"site-packages", "dist-packages", "__pycache__", "test", "tests", "idle_test"}


def stdlib_tree() -> dict[str, str]:
    """``{module: parent}`` for the standard library's packages and modules (from its files)."""
    base = Path(sysconfig.get_paths()["stdlib"])
    parent: dict[str, str] = {}

    def visit(folder: Path, name: str) -> None:
        for entry in sorted(folder.iterdir()):
            if (
                entry.name in SKIP
                or entry.name.startswith((".", "_"))
                and entry.name != "__init__.py"
            ):
                continue
            if entry.is_dir() and (entry / "__init__.py").exists():
                child = f"{name}.{entry.name}" if name else entry.name
                parent[child] = name or ROOT_NODE
                visit(entry, child)
            elif entry.suffix == ".py" and entry.name != "__init__.py" and name:
                parent[f"{name}.{entry.stem}"] = name

    visit(base, "")
    return parent


def closure(parent: dict[str, str]) -> list[tuple[str, str]]:
    """(node, ancestor) for every node and each of its ancestors but the root."""
    pairs = []
    for node in parent:
        up = parent[node]
        while up != ROOT_NODE:
            pairs.append((node, up))
            up = parent[up]
        pairs.append((node, ROOT_NODE))
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--out", type=Path, default=Path("hierarchy_poincare.png"))
    parser.add_argument("--quick", action="store_true", help="short training, small hierarchy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--classes", type=int, default=6, help="largest top-level packages to keep")
    args = parser.parse_args(argv)

    from gensim.models.poincare import PoincareModel

    parent = stdlib_tree()
    top = {node: node.split(".")[0] for node in parent}
    sizes = Counter(top[n] for n in parent if "." in n)
    kept = {name for name, _ in sizes.most_common(args.classes)}
    if args.quick:  # at most 60 modules per package
        per: Counter = Counter()
        keep_nodes = set()
        for node in sorted(parent, key=lambda n: (n.count("."), n)):
            if top[node] in kept and per[top[node]] < 60:
                keep_nodes.add(node)
                per[top[node]] += 1
        parent = {
            n: p
            for n, p in parent.items()
            if n in keep_nodes and (p in keep_nodes or p == ROOT_NODE)
        }
    else:
        parent = {n: p for n, p in parent.items() if top[n] in kept}
    relations = closure(parent)
    print(
        f"standard library of Python {sys.version.split()[0]}: {len(parent)} modules and "
        f"packages under {sorted(kept)}, {len(relations)} closure relations"
    )

    epochs = 30 if args.quick else 200
    embedding = PoincareModel(relations, size=2, negative=8, burn_in=10, seed=args.seed, workers=1)
    embedding.train(epochs=epochs, batch_size=32)
    conv = convention_of(embedding)
    keys, P = gensim_points(embedding)
    print(f"embedded in 2-D over {epochs} epochs; convention: {conv}")

    nodes = [i for i, k in enumerate(keys) if k != ROOT_NODE and "." in k]
    X = P[nodes]
    names = np.array(sorted(kept))
    y = np.searchsorted(names, [top[keys[i]] for i in nodes])
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, random_state=args.seed, stratify=y
    )
    n_trees = 20 if args.quick else 100
    hyperbolic = hyp2onnx.HyperbolicRandomForestClassifier(
        n_estimators=n_trees, max_depth=6, random_state=args.seed, **conv.kwargs()
    ).fit(X_train, y_train)
    euclidean = RandomForestClassifier(n_estimators=n_trees, max_depth=6, random_state=args.seed)
    euclidean.fit(X_train, y_train)
    print(
        f"held-out accuracy ({len(y_test)} modules): hyperbolic forest "
        f"{hyperbolic.score(X_test, y_test):.3f}, Euclidean forest on the raw Poincare "
        f"coordinates {euclidean.score(X_test, y_test):.3f}"
    )

    onnx_model = hyp2onnx.to_onnx(hyperbolic, dtype="float64")
    resolution = 150 if args.quick else 500
    u = np.linspace(-1, 1, resolution)
    gx, gy = np.meshgrid(u, u)
    inside = gx**2 + gy**2 < 0.999
    grid = np.stack([gx[inside], gy[inside]], axis=1)
    report = hyp2onnx.verify(hyperbolic, onnx_model, np.vstack([X_test, grid]))
    print(f"ONNX graph vs the Python forest: {report}")
    if not report.ok:
        return 1

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    regions = np.full(gx.shape, np.nan)
    regions[inside] = run_onnx(onnx_model, grid)["label"]
    fig, ax = plt.subplots(figsize=(7, 7))
    cmap = plt.get_cmap("tab10", len(names))
    ax.imshow(
        regions,
        origin="lower",
        extent=(-1, 1, -1, 1),
        cmap=cmap,
        alpha=0.35,
        vmin=-0.5,
        vmax=len(names) - 0.5,
        interpolation="nearest",
    )
    for c, name in enumerate(names):
        ax.scatter(*X[y == c].T, s=8, color=cmap(c), label=name, edgecolors="none")
    ax.add_patch(plt.Circle((0, 0), 1, fill=False, color="black", lw=1))
    ax.set_xlim(-1.02, 1.02)
    ax.set_ylim(-1.02, 1.02)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.legend(loc="upper left", fontsize=8, markerscale=2, frameon=False)
    ax.set_title(
        "Python standard library modules in the Poincare disk (gensim), "
        "regions of the exported hyperbolic forest",
        fontsize=9,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110, bbox_inches="tight")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
