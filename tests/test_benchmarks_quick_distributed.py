"""Smoke tests: the distributed and far-from-the-origin benchmarks run in --quick mode
(beside test_benchmarks_quick.py, in a file of their own so that the suite's workers
share the load)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _cli import CommandRunner
from _quick import NEEDS_DASK, ROOT, check_quick_mode, run, tables_are_well_formed

# script, the Markdown it writes, the figure it writes (None: no figure)
CASES = [
    pytest.param("bench_distributed.py", "distributed.md", None, marks=NEEDS_DASK),
    pytest.param("bench_far.py", "far.md", None),
]


@pytest.mark.parametrize(("script", "markdown", "figure"), CASES)
def test_quick_mode_runs(
    script_runner: CommandRunner, tmp_path: Path, script: str, markdown: str, figure: str | None
) -> None:
    assert check_quick_mode(script_runner, tmp_path, script, markdown, figure).startswith("# ")


@NEEDS_DASK
def test_composed_graphs_on_dask_quick_mode_runs(
    script_runner: CommandRunner, tmp_path: Path
) -> None:
    """``bench_compose.py --distributed --quick``: both systems run and agree on every label."""
    script = str(ROOT / "benchmarks" / "bench_compose.py")
    done = run(script_runner, [script, "--distributed", "--quick", "--out", str(tmp_path)])
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / "compose_distributed.md").read_text(encoding="utf-8")
    assert text.startswith("# ") and tables_are_well_formed(text)
    assert text.rstrip().splitlines()[-1].endswith("| 0 |")  # labels ≠
