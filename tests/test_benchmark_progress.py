"""Benchmarks show progress on a terminal only: a bar with counts and a time estimate on
stderr when stderr is a terminal, nothing when it is a pipe, a log or the suite's capture.

The terminal is a real pseudo-terminal (``pty``) with a window size, as a user's is.
"""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from contextlib import redirect_stdout
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"


def _on_a_terminal(args: list[str]) -> tuple[int, str, str]:
    """Run ``python args`` with stderr on a 24x120 pseudo-terminal and stdout on a pipe;
    returns the exit status, stdout and what the terminal received."""
    main, side = pty.openpty()
    fcntl.ioctl(side, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    with subprocess.Popen(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=side
    ) as child:
        os.close(side)
        seen = bytearray()
        while True:  # read as it comes: a full terminal buffer would stall the child
            ready, _, _ = select.select([main], [], [], 60)
            if not ready:
                child.kill()
                raise AssertionError("no output for 60 s")
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed its side
                break
            if not chunk:
                break
            seen += chunk
        stdout = child.stdout.read().decode() if child.stdout else ""
        status = child.wait(timeout=60)
    os.close(main)
    return status, stdout, seen.decode(errors="replace")


def test_a_benchmark_shows_counts_and_time_left_on_a_terminal(tmp_path: Path) -> None:
    """bench_product --quick (two signatures, one seed: two tasks) draws a bar that counts
    1/2 then 2/2 with elapsed<left times. Planted: its loop without `steps`: no bar."""
    status, stdout, terminal = _on_a_terminal(
        [str(BENCHMARKS / "bench_product.py"), "--quick", "--jobs", "1", "--out", str(tmp_path)]
    )
    assert status == 0, stdout + terminal
    assert (tmp_path / "product.md").read_text(encoding="utf-8").startswith("# ")
    assert "\r" in terminal
    for count in ("1/2", "2/2"):
        assert re.search(rf"product: +\d+%\|[^\r]*\| {count} \[\d\d:\d\d<\d\d:\d\d", terminal), (
            terminal
        )
    assert "\r" not in stdout


def test_no_bar_without_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same benchmark with stderr captured (not a terminal) writes no bar at all.
    Planted: the bar shown whatever stderr is: a carriage return on stderr."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import bench_product
    finally:
        sys.path.remove(str(BENCHMARKS))
    assert bench_product.main(["--quick", "--jobs", "1", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "\r" not in captured.err and "product:" not in captured.err
    assert (tmp_path / "product.md").exists()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_prints_in_the_loop_reach_stdout_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """While the bar shows, the loop's prints (part lines too) reach stdout unchanged and in
    order, and stdout is given back after the loop. Planted: the part line left at the
    loop's end dropped."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from _report import steps
    finally:
        sys.path.remove(str(BENCHMARKS))
    monkeypatch.setattr(sys, "stderr", _Terminal())
    stdout = io.StringIO()
    with redirect_stdout(stdout):
        for i in steps(range(3), "demo"):
            print(f"case {i}", end="", flush=True)
            print(" done")
            print(f"part {i}", end=" ", flush=True)
        assert sys.stdout is stdout
        print("end")
    assert stdout.getvalue() == (
        "case 0 done\npart 0 case 1 done\npart 1 case 2 done\npart 2 end\n"
    )
    assert "demo: " in sys.stderr.getvalue()


def without_a_bar(folder: Path) -> list[str]:
    """Benchmark scripts (``bench_*.py``) of ``folder`` that never count their work with
    ``_report.steps``."""
    return [
        path.name
        for path in sorted(folder.glob("bench_*.py"))
        if not re.search(r"\bsteps\(", path.read_text(encoding="utf-8"))
    ]


def test_every_benchmark_counts_its_work(tmp_path: Path) -> None:
    """Every benchmark shows a bar on a terminal. Planted: a script without `steps` is
    named (the check itself, on a folder of two scripts)."""
    assert without_a_bar(BENCHMARKS) == []
    (tmp_path / "bench_counted.py").write_text("for x in steps(cases, 'cases'):\n    pass\n")
    (tmp_path / "bench_silent.py").write_text("for x in cases:\n    pass\n")
    assert without_a_bar(tmp_path) == ["bench_silent.py"]


def without_a_results_file(folder: Path) -> list[str]:
    """Benchmark scripts of ``folder`` that never write a results file with ``_report.write``."""
    return [
        path.name
        for path in sorted(folder.glob("bench_*.py"))
        if not re.search(r"\bwrite\(", path.read_text(encoding="utf-8"))
    ]


def test_every_benchmark_writes_its_results(tmp_path: Path) -> None:
    """Figures live in results files, not only on a terminal. Planted: a script that only
    prints is named."""
    assert without_a_results_file(BENCHMARKS) == []
    (tmp_path / "bench_kept.py").write_text("write(out / 'kept.md', text)\n")
    (tmp_path / "bench_printed.py").write_text("print(text)\n")
    assert without_a_results_file(tmp_path) == ["bench_printed.py"]
