"""Smoke tests: the results benchmarks run in --quick mode.

Each runs as a subprocess, as the README tells users to run it, writing into
a temporary folder. The HyperDT comparisons need PyPI's ``hyperdt==0.0.3``
(the ``bench`` extra) and are skipped without it; figures are checked only
where matplotlib is installed. The distributed and far-point benchmarks run
from test_benchmarks_quick_distributed.py, the examples from
test_examples_quick.py, so that the suite's workers share the load.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from _cli import CommandRunner
from _quick import NEEDS_HYPERDT, check_quick_mode

NEEDS_LLEAVES = pytest.mark.skipif(
    importlib.util.find_spec("lleaves") is None,
    reason="lleaves is not installed: pip install 'hyp2onnx[compiled]'",
)

# script, the Markdown it writes, the figure it writes (None: no figure)
CASES = [
    pytest.param("bench_vs_hyperdt.py", "vs_hyperdt.md", "vs_hyperdt.png", marks=NEEDS_HYPERDT),
    pytest.param("bench_agreement.py", "agreement.md", "agreement.png", marks=NEEDS_HYPERDT),
    pytest.param("bench_accuracy.py", "accuracy.md", "accuracy.png"),
    pytest.param("bench_inference.py", "inference.md", None),
    pytest.param("bench_product.py", "product.md", None),
    pytest.param("bench_neural.py", "neural.md", None),
    pytest.param("bench_compose.py", "compose.md", None),
    pytest.param("bench_multiclass.py", "multiclass.md", None),
    pytest.param("bench_standard_compaction.py", "standard_compaction.md", None),
    pytest.param("bench_label_rules.py", "label_rules.md", None),
    pytest.param("bench_fit.py", "fit.md", None),
    pytest.param("bench_short_batches.py", "short_batches.md", None),
    pytest.param("bench_compiled.py", "compiled.md", None, marks=NEEDS_LLEAVES),
]


@pytest.mark.parametrize(("script", "markdown", "figure"), CASES)
def test_quick_mode_runs(
    script_runner: CommandRunner, tmp_path: Path, script: str, markdown: str, figure: str | None
) -> None:
    assert check_quick_mode(script_runner, tmp_path, script, markdown, figure).startswith("# ")
