"""docs/troubleshooting.md: the command line's mistakes, each with what it really prints.

    python docs/troubleshooting.py            # runs every case, writes the page
    python docs/troubleshooting.py --check    # exits 1 if the page is out of date

Each case makes its files in a fresh folder, runs one ``hyp2onnx`` command
in this interpreter and records the exit status and the ``error:`` and
``fix:`` lines it printed; the page shows them as they came, so it cannot
drift from the code (tests/test_docs_figures.py runs ``--check``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pickle
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

PAGE = Path(__file__).resolve().parent / "troubleshooting.md"

HEAD = """# Troubleshooting

Every mistake the command line can see ends in one `error:` line saying what
is wrong and, where there is one, a `fix:` line saying what to do; the exit
status is 2 (1 when a graph disagrees with its model). Below, the usual ones,
each with the command and what it prints, word for word: the page is written
by `docs/troubleshooting.py`, which runs them, and a test checks that it is
up to date. `--debug` adds the traceback to any error.

In Python the same mistakes raise a `ValueError` (points:
[`InvalidPointError`][hyp2onnx.InvalidPointError]), a `TypeError`
([`UnsupportedModelError`][hyp2onnx.UnsupportedModelError]) or, for a
missing library, [`MissingExtraError`][hyp2onnx.MissingExtraError], which
names the extra to install.
"""


def _files(folder: Path) -> None:
    """A small forest, its graph, data and a few wrong files."""
    import hyp2onnx
    from hyp2onnx.datasets import make_wrapped_normal_mixture

    X, y = make_wrapped_normal_mixture(200, 2, 3, random_state=0)
    forest = hyp2onnx.HyperbolicRandomForestClassifier(n_estimators=3, max_depth=3).fit(X, y)
    (folder / "forest.pkl").write_bytes(pickle.dumps(forest))
    hyp2onnx.save_onnx(forest, folder / "forest.onnx")
    np.save(folder / "points.npy", X[:20])
    np.save(folder / "wide.npy", np.hstack([X[:20], X[:20, :1]]))
    off = X[:20].copy()
    off[7, 0] = 0.5  # x_0 < 1: not on the hyperboloid
    np.save(folder / "off.npy", off)
    nan = X[:20].copy()
    nan[3, 1] = np.nan
    np.save(folder / "nan.npy", nan)
    (folder / "broken.pkl").write_bytes(b"not a pickle")
    from sklearn.tree import DecisionTreeClassifier

    plain = DecisionTreeClassifier(max_depth=2).fit(hyp2onnx.geometry.to_klein(X), y)
    (folder / "plain.pkl").write_bytes(pickle.dumps(plain))


#: (what went wrong, the command's arguments)
CASES: list[tuple[str, list[str]]] = [
    ("A model file given where a graph is expected", ["inspect", "forest.pkl"]),
    (
        "Data given as the encoder",
        ["convert", "forest.pkl", "-o", "new.onnx", "--encoder", "points.npy"],
    ),
    ("The output exists", ["convert", "forest.pkl", "-o", "forest.onnx"]),
    ("A file that is no model", ["convert", "broken.pkl"]),
    ("A plain tree model without its geometry", ["convert", "plain.pkl"]),
    ("A model file type hyp2onnx does not read", ["convert", "forest.h5"]),
    ("Data with a column too many", ["predict", "forest.onnx", "wide.npy"]),
    ("A point off the manifold", ["predict", "forest.onnx", "off.npy"]),
    ("NaN in the data", ["predict", "forest.onnx", "nan.npy"]),
    ("A file that does not exist", ["predict", "forest.onnx", "missing.npy"]),
    (
        "A curvature that is not negative",
        ["convert", "forest.pkl", "-o", "new.onnx", "--curvature", "1"],
    ),
    (
        "An option without the one it needs",
        ["convert", "forest.pkl", "-o", "new.onnx", "--encoder-output", "z"],
    ),
]


def _run(args: list[str], folder: Path) -> tuple[int, list[str]]:
    """Exit status and stderr lines of ``hyp2onnx ARGS`` run in ``folder``."""
    from hyp2onnx.cli import main

    err = io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                code = main(args)
    finally:
        os.chdir(cwd)
    return int(code), err.getvalue().rstrip().splitlines()


def page(run: Callable[[list[str], Path], tuple[int, list[str]]] = _run) -> str:
    """The page, from running every case."""
    parts = [HEAD]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _files(folder)
        for title, args in CASES:
            code, lines = run(args, folder)
            if code == 0:
                raise RuntimeError(f"{title}: hyp2onnx {' '.join(args)} succeeded")
            shown = "\n".join([f"$ hyp2onnx {' '.join(args)}", *lines, f"(exit status {code})"])
            parts.append(f"## {title}\n\n```text\n{shown}\n```\n")
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Compare, write nothing.")
    written = page()
    if parser.parse_args().check:
        if not PAGE.exists() or PAGE.read_text() != written:
            print(
                "docs/troubleshooting.md is out of date: run python docs/troubleshooting.py",
                file=sys.stderr,
            )
            return 1
        return 0
    PAGE.write_text(written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
