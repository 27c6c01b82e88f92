"""What the quick-mode smoke tests share: running a script as users run it, and
checking the Markdown tables it writes.

The smoke tests live in three files (test_benchmarks_quick.py,
test_benchmarks_quick_distributed.py, test_examples_quick.py) so that the
suite's workers, which take one file at a time, share them. Each file runs
its scripts in processes forked from one interpreter that imported what they
import (conftest.py's ``script_runner``, `scripts` here): each is still a
process of its own, run as ``python SCRIPT ARGS`` runs it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from _cli import CommandRunner

ROOT = Path(__file__).resolve().parent.parent
HAVE_HYPERDT = importlib.util.find_spec("hyperdt") is not None
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
NEEDS_HYPERDT = pytest.mark.skipif(
    not HAVE_HYPERDT, reason="hyperdt (the original HyperDT, extra 'bench') is not installed"
)

NEEDS_DASK = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None,
    reason="dask (extra 'dask') is not installed",
)


def tables_are_well_formed(text: str) -> bool:
    """Every Markdown table has a separator row and the same number of cells in each row."""
    tables: list[list[str]] = []
    previous = False
    for line in text.splitlines():
        is_row = line.startswith("|")
        if is_row and not previous:
            tables.append([])
        if is_row:
            tables[-1].append(line)
        previous = is_row
    return bool(tables) and all(
        len(t) >= 3
        and set(t[1].replace("|", "").split()) <= {":---", "---:", ":---:"}
        and len({row.count("|") for row in t}) == 1
        for t in tables
    )


#: What the scripts import, imported once by the interpreter their processes fork from
#: (`scripts`); not onnxruntime, whose import starts a thread (see _cli_runner.py).
PRELOAD = tuple(
    module
    for module in (
        "numpy",
        "sklearn.ensemble",
        "sklearn.tree",
        "sklearn.model_selection",
        "sklearn.neural_network",
        "onnx",
        "hyp2onnx",
        "hyp2onnx.datasets",
        "hyp2onnx.export",
        "hyp2onnx.verification",
        "xgboost",
        "lightgbm",
        "matplotlib.pyplot",
    )
    if importlib.util.find_spec(module.split(".")[0]) is not None
)


@contextlib.contextmanager
def scripts(streams: Path) -> Iterator[CommandRunner]:
    """Runs scripts each in its own process, forked from one interpreter that imported
    `PRELOAD` (a fresh interpreter spends seconds of each quick mode on those imports);
    on leaving, checks that those imports printed nothing. ``PYTHONPATH`` names this
    checkout first: the installed package may be another checkout's (an editable
    install in a git worktree)."""
    env = dict(os.environ)  # the scripts import this checkout's hyp2onnx, as the tests do
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with CommandRunner(streams, PRELOAD, max_running=1, env=env) as runner:
        yield runner
        runner.finish()


def run(runner: CommandRunner, args: list[str]) -> subprocess.CompletedProcess:
    """``python SCRIPT ARGS...`` in the repository's root, as a process forked by ``runner``."""
    script, *argv = args
    return runner.run(argv, ROOT, script=Path(script))


def check_quick_mode(
    runner: CommandRunner, tmp_path: Path, script: str, markdown: str, figure: str | None
) -> str:
    """``script --quick --out tmp_path`` exits 0 and writes ``markdown`` (and ``figure``);
    returns the Markdown written."""
    done = run(runner, [str(ROOT / "benchmarks" / script), "--quick", "--out", str(tmp_path)])
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / markdown).read_text(encoding="utf-8")
    assert text.startswith("# ")
    assert tables_are_well_formed(text)
    if figure is not None and HAVE_MATPLOTLIB:
        assert (tmp_path / figure).stat().st_size > 10_000
        assert f"]({figure})" in text
    return text
