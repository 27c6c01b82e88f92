"""What the quick-mode smoke tests share: running a script as users run it, and
checking the Markdown tables it writes.

The smoke tests live in three files (test_benchmarks_quick.py,
test_benchmarks_quick_distributed.py, test_examples_quick.py) so that the
suite's workers, which take one file at a time, share them.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

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


def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=240
    )


def check_quick_mode(tmp_path: Path, script: str, markdown: str, figure: str | None) -> str:
    """``script --quick --out tmp_path`` exits 0 and writes ``markdown`` (and ``figure``);
    returns the Markdown written."""
    done = run([str(ROOT / "benchmarks" / script), "--quick", "--out", str(tmp_path)])
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / markdown).read_text(encoding="utf-8")
    assert text.startswith("# ")
    assert tables_are_well_formed(text)
    if figure is not None and HAVE_MATPLOTLIB:
        assert (tmp_path / figure).stat().st_size > 10_000
        assert f"]({figure})" in text
    return text
