"""Running the command line in-process and checking its error contract, for the test modules."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

from hyp2onnx.cli import main

#: The command line as a subprocess, for what only a process shows (signals, crashes).
CLI = [sys.executable, "-m", "hyp2onnx.cli"]


def cli(*args: str | Path) -> tuple[int, str, str]:
    """``main(argv)`` in-process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def assert_usage_error(code: int, err: str, *, match: str | None = None) -> None:
    """Exit 2, explained in one ``error:`` line (and at most one ``fix:`` line), no traceback."""
    assert code == 2, err
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "unexpected" not in err, err
    if match is not None:
        assert match in err, err
