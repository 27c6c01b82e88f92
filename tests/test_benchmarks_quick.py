"""Smoke tests: the results benchmarks and the decision-boundary example run in --quick mode.

Each runs as a subprocess, as the README tells users to run it, writing into
a temporary folder. The HyperDT comparisons need PyPI's ``hyperdt==0.0.3``
(the ``bench`` extra) and are skipped without it; figures are checked only
where matplotlib is installed.
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

# script, the Markdown it writes, the figure it writes (None: no figure)
CASES = [
    pytest.param("bench_vs_hyperdt.py", "vs_hyperdt.md", "vs_hyperdt.png", marks=NEEDS_HYPERDT),
    pytest.param("bench_agreement.py", "agreement.md", "agreement.png", marks=NEEDS_HYPERDT),
    pytest.param("bench_accuracy.py", "accuracy.md", "accuracy.png"),
    pytest.param("bench_inference.py", "inference.md", None),
    pytest.param("bench_distributed.py", "distributed.md", None, marks=NEEDS_DASK),
    pytest.param("bench_far.py", "far.md", None),
    pytest.param("bench_product.py", "product.md", None),
    pytest.param("bench_standard_compaction.py", "standard_compaction.md", None),
]


def _tables_are_well_formed(text: str) -> bool:
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


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=240
    )


@pytest.mark.parametrize(("script", "markdown", "figure"), CASES)
def test_quick_mode_runs(tmp_path: Path, script: str, markdown: str, figure: str | None) -> None:
    done = _run([str(ROOT / "benchmarks" / script), "--quick", "--out", str(tmp_path)])
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / markdown).read_text(encoding="utf-8")
    assert text.startswith("# ")
    assert _tables_are_well_formed(text)
    if figure is not None and HAVE_MATPLOTLIB:
        assert (tmp_path / figure).stat().st_size > 10_000
        assert f"]({figure})" in text


@pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="matplotlib (extra 'plot') is not installed")
def test_decision_boundary_example_writes_a_png(tmp_path: Path) -> None:
    out = tmp_path / "boundaries.png"
    done = _run(
        [
            str(ROOT / "examples" / "plot_decision_boundaries.py"),
            "-o",
            str(out),
            "--resolution",
            "60",
        ]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(
    not HAVE_MATPLOTLIB or importlib.util.find_spec("gensim") is None,
    reason="gensim and matplotlib (extra 'dev') are needed",
)
def test_hierarchy_example_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "hierarchy.png"
    done = _run([str(ROOT / "examples" / "hierarchy_poincare.py"), "--quick", "-o", str(out)])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "labels agree on 100.0000% (0 differ)" in done.stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_mixed_data_example_converts_verifies_and_scores() -> None:
    """The mixed-input example: skops file, CLI convert --check and predict, 100% agreement."""
    done = _run([str(ROOT / "examples" / "mixed_data.py")])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "label agreement CLI graph/Python:  100.00%" in done.stdout
    assert "labels agree on 100.0000% (0 differ)" in done.stdout
