"""Smoke tests: the distributed and far-from-the-origin benchmarks run in --quick mode
(beside test_benchmarks_quick.py, in a file of their own so that the suite's workers
share the load)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _quick import NEEDS_DASK, check_quick_mode

# script, the Markdown it writes, the figure it writes (None: no figure)
CASES = [
    pytest.param("bench_distributed.py", "distributed.md", None, marks=NEEDS_DASK),
    pytest.param("bench_far.py", "far.md", None),
]


@pytest.mark.parametrize(("script", "markdown", "figure"), CASES)
def test_quick_mode_runs(tmp_path: Path, script: str, markdown: str, figure: str | None) -> None:
    assert check_quick_mode(tmp_path, script, markdown, figure).startswith("# ")
