"""Results files rewritten in part: ``bench_export.py --models`` replaces some rows.

A rerun of some models must replace their rows where they were and add the
rows of models the file lacks, keeping every other line. Planted: a model the
file lacks dropped (what the first version did with a model newly added to
the benchmark).
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _merge_rows():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from bench_export import _merge_rows
    finally:
        sys.path.remove(str(BENCHMARKS))
    return _merge_rows


def test_rerun_rows_replace_theirs_and_new_models_join_the_table(tmp_path: Path) -> None:
    headers = ["model", "graph", "ratio"]
    path = tmp_path / "export.md"
    path.write_text(
        "# title\n\n| model | graph | ratio |\n| :--- | :--- | ---: |\n"
        "| A | fast | 1.0x |\n| A | exact | 2.0x |\n| B, wide | fast | 3.0x |\n\nfooter\n",
        encoding="utf-8",
    )
    rows = [["A", "fast", "1.5x"], ["A", "exact", "2.5x"], ["C", "fast", "4.0x"]]
    merged = _merge_rows()(path, headers, rows, ["A", "C"])
    assert merged == [
        "# title",
        "",
        "| model | graph | ratio |",
        "| :--- | :--- | ---: |",
        "| A | fast | 1.5x |",
        "| A | exact | 2.5x |",
        "| B, wide | fast | 3.0x |",
        "| C | fast | 4.0x |",
        "",
        "footer",
    ]
