"""Smoke tests: the examples run end to end, as subprocesses, as users run them.

Figures are checked only where matplotlib is installed; the hierarchy
example needs gensim.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from _cli import CommandRunner
from _quick import HAVE_MATPLOTLIB, ROOT, run


@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="matplotlib (extra 'plot') is not installed")
def test_decision_boundary_example_writes_a_png(
    script_runner: CommandRunner, tmp_path: Path
) -> None:
    out = tmp_path / "boundaries.png"
    done = run(
        script_runner,
        [
            str(ROOT / "examples" / "plot_decision_boundaries.py"),
            "-o",
            str(out),
            "--resolution",
            "60",
        ],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(
    not HAVE_MATPLOTLIB or importlib.util.find_spec("gensim") is None,
    reason="gensim and matplotlib (extra 'dev') are needed",
)
def test_hierarchy_example_runs_end_to_end(script_runner: CommandRunner, tmp_path: Path) -> None:
    out = tmp_path / "hierarchy.png"
    done = run(
        script_runner, [str(ROOT / "examples" / "hierarchy_poincare.py"), "--quick", "-o", str(out)]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "labels agree on 100.0000% (0 differ)" in done.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_mixed_data_example_converts_verifies_and_scores(script_runner: CommandRunner) -> None:
    """The mixed-input example: skops file, CLI convert --check and predict, 100% agreement."""
    done = run(script_runner, [str(ROOT / "examples" / "mixed_data.py")])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "label agreement CLI graph/Python:  100.00%" in done.stdout
    assert "labels agree on 100.0000% (0 differ)" in done.stdout
