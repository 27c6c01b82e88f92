"""The command line for the test modules: run in-process or in processes; its error contract."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from _cli_runner import TIMEOUT_S

from hyp2onnx.cli import main

#: The command line as a subprocess, for what only a process shows (signals, crashes).
CLI = [sys.executable, "-m", "hyp2onnx.cli"]

#: The script of `CommandRunner`'s process.
RUNNER = Path(__file__).with_name("_cli_runner.py")

#: What the commands load, imported once by `CommandRunner`'s process; not onnxruntime
#: (see _cli_runner.py), which a command imports in a few milliseconds.
PRELOAD = (
    "hyp2onnx.cli",
    "hyp2onnx.export",
    "hyp2onnx.estimators._sklearn",
    "hyp2onnx.estimators._xgboost",
    "hyp2onnx.estimators._lightgbm",
    "sklearn.linear_model",
    "joblib",
    "skops.io",
)

Done = subprocess.CompletedProcess[str]


def cli(*args: str | Path) -> tuple[int, str, str]:
    """``main(argv)`` in-process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def cli_process(*args: str | Path, cwd: Path | None = None) -> Done:
    """``python -m hyp2onnx.cli ARGS`` in a process of its own, in ``cwd`` (stdin from
    ``/dev/null``, text output, at most 300 s): for what only a process shows (an exit
    status rather than a signal, a crash)."""
    return subprocess.run(
        [*CLI, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def convert_and_verify(model: Path, graph: Path, data: Path) -> str:
    """``convert MODEL -o GRAPH --check DATA``, then ``verify MODEL GRAPH --data DATA``,
    in-process: both exit 0; verify's report."""
    code, out, err = cli("convert", model, "-o", graph, "--check", data)
    assert code == 0, out + err
    code, out, err = cli("verify", model, graph, "--data", data)
    assert code == 0, out + err
    return out


def predicted_lines(graph: Path, data: Path, table: Path) -> list[str]:
    """``predict GRAPH DATA -o TABLE``, in-process: exit 0; the CSV's lines (header first)."""
    code, out, err = cli("predict", graph, data, "-o", table)
    assert code == 0, out + err
    return table.read_text().splitlines()


def assert_usage_error(code: int, err: str, *, match: str | None = None) -> None:
    """Exit 2, explained in one ``error:`` line (and at most one ``fix:`` line), no traceback."""
    assert code == 2, err
    lines = [line for line in err.splitlines() if not line.startswith("warning:")]
    assert 1 <= len(lines) <= 2 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and "unexpected" not in err, err
    if match is not None:
        assert match in err, err


class CommandRunner:
    """Commands run each in its own process, started by one preloaded interpreter (``_cli_runner.py``).

    `submit` queues a command: by default ``python -m hyp2onnx.cli ARGV``,
    run in a child forked from an interpreter that imported ``preload``
    once; with ``script`` that file as ``python SCRIPT ARGV``, forked the
    same way; with ``fresh=True`` ``argv`` itself, as a new program. At most
    ``max_running`` run at once, in ``env`` (default: this process's
    environment as the runner starts). `wait` returns their results as
    `subprocess.run` does (stdin from ``/dev/null``, text output); `run`
    submits one command and waits for it.
    `finish` checks that the runner itself printed nothing (an import that
    warns would otherwise warn only there, not in each command) and exited 0.
    Use it as a context manager; leaving kills whatever still runs.
    """

    def __init__(
        self,
        streams: Path,
        preload: Sequence[str] = PRELOAD,
        *,
        max_running: int = 4,
        env: dict[str, str] | None = None,
    ) -> None:
        self._streams = streams  # each job's stdout and stderr files, and the runner's stderr
        self._own_err = streams / "runner.stderr"
        with self._own_err.open("wb") as err:
            self._process = subprocess.Popen(
                [sys.executable, str(RUNNER), str(max_running), *preload],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                start_new_session=True,  # leaving kills the runner's children too
                env=env,
            )
        self._jobs: dict[str, list[str]] = {}
        self._done: dict[str, Done] = {}

    def submit(
        self,
        name: str,
        argv: Sequence[str],
        cwd: Path,
        *,
        fresh: bool = False,
        priority: int = 0,
        script: Path | None = None,
    ) -> None:
        """Queue one command; ``argv`` are hyp2onnx's arguments, a ``script``'s (run forked as
        ``python SCRIPT ARGV``), or a whole program's if ``fresh``.
        Of the commands waiting, those of highest ``priority`` start first."""
        assert name not in self._jobs, name
        assert not (fresh and script), "a fresh program names its script in argv"
        if fresh:
            self._jobs[name] = list(argv)
        elif script is not None:
            self._jobs[name] = [sys.executable, str(script), *argv]
        else:
            self._jobs[name] = [*CLI, *argv]
        job = {
            "name": name,
            "argv": list(argv),
            "cwd": str(cwd),
            "stdout": str(self._streams / f"{name}.stdout"),
            "stderr": str(self._streams / f"{name}.stderr"),
            "fresh": fresh,
            "priority": priority,
            "script": None if script is None else str(script),
        }
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(job) + "\n")
        self._process.stdin.flush()

    @property
    def names(self) -> list[str]:
        """Every command submitted, in order."""
        return list(self._jobs)

    def run(self, argv: Sequence[str], cwd: Path, *, script: Path | None = None) -> Done:
        """``python -m hyp2onnx.cli ARGV`` (or ``python SCRIPT ARGV``) in ``cwd``, forked, once
        it has ended."""
        name = f"command{len(self._jobs)}"
        self.submit(name, argv, cwd, script=script)
        return self.wait([name])[name]

    def result(self, name: str) -> Done | None:
        """The result of the command ``name`` if it has ended and been read, else None."""
        return self._done.get(name)

    def wait(self, names: Sequence[str]) -> dict[str, Done]:
        """The results of the commands ``names``, once each has ended."""
        while missing := [n for n in names if n not in self._done]:
            self.next_done(missing)
        return {name: self._done[name] for name in names}

    def next_done(self, awaited: Sequence[str] = ()) -> str:
        """Wait for the next command to end (of those submitted); its name."""
        assert self._process.stdout is not None
        line = self._process.stdout.readline()
        if not line:
            raise RuntimeError(f"the runner ended before {awaited}: {self._own_errors()}")
        report = json.loads(line)
        name = report["name"]
        if report["timed_out"]:
            raise subprocess.TimeoutExpired(self._jobs[name], TIMEOUT_S)
        self._done[name] = subprocess.CompletedProcess(
            self._jobs[name],
            report["returncode"],
            (self._streams / f"{name}.stdout").read_text(),
            (self._streams / f"{name}.stderr").read_text(),
        )
        return name

    def finish(self) -> None:
        """Wait for every command, end the runner; an error if it printed anything or failed."""
        self.wait(list(self._jobs))
        assert self._process.stdin is not None
        self._process.stdin.close()
        code = self._process.wait(timeout=60)
        if code != 0 or self._own_errors():
            raise RuntimeError(f"the runner exited {code}: {self._own_errors()}")

    def _own_errors(self) -> str:
        return self._own_err.read_text()

    def __enter__(self) -> CommandRunner:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
        for pipe in (self._process.stdin, self._process.stdout):
            if pipe is not None:
                pipe.close()
