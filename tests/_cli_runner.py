"""Run command lines for the tests, each in its own process, from one interpreter that has
already imported the libraries they load.

``python _cli_runner.py MAX_RUNNING MODULE...`` imports the MODULEs, then reads
jobs from stdin, one JSON object a line::

    {"name": ..., "argv": [...], "cwd": ..., "stdout": FILE, "stderr": FILE, "fresh": false,
     "priority": 0, "script": null}

and writes one line ``{"name": ..., "returncode": ..., "timed_out": ...}`` on
stdout as each job ends, at most MAX_RUNNING running at once: the waiting
job of highest priority starts next, in the order read among equals. It
exits when stdin is closed and every job has ended.

A job with ``"fresh": false`` is ``python -m hyp2onnx.cli ARGV``: a child
forked from this process changes to ``cwd``, reads stdin from ``/dev/null``,
writes stdout and stderr to the two files, and runs the package's
``__main__`` as ``-m`` does (``sys.argv[0]`` the script, ``sys.path[0]`` the
folder); it then ends as the interpreter does: the status ``SystemExit``
carries, or 1 after printing the traceback of any other exception, once
threads that are not daemons have ended, exit handlers have run and the
streams are flushed. With a ``"script"`` path the child runs that file
instead, as ``python SCRIPT ARGV`` does (``sys.argv[0]`` the script,
``sys.path[0]`` its folder). A job with ``"fresh": true`` runs
``argv`` as a new program (a subprocess, as `subprocess.run` starts it).

Why: a fresh interpreter spends most of a short command (and several seconds
of a script's quick mode) importing scikit-learn, XGBoost, LightGBM and skops;
a forked child starts with them imported and is still a process of its own
(its own exit status, streams, signals and crashes). This process only imports: it runs no
command, creates no onnxruntime session (onnxruntime is left out of the
modules for that reason: importing it starts a thread) and starts no
OpenMP work, so every child starts from the state a fresh interpreter
reaches after the same imports, and no child inherits another's state.
The MODULEs must import silently: whatever this process writes while
importing goes to its own stderr, which the caller checks is empty (a
fresh process would have written it into every command's stderr).
"""

from __future__ import annotations

import atexit
import heapq
import importlib
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Any

#: A job running longer than this is killed and reported with ``"timed_out": true``.
TIMEOUT_S = 300.0

#: How often running jobs are polled, in seconds.
POLL_S = 0.005

_PACKAGE = "hyp2onnx.cli"

#: This script's folder, which the interpreter put first on the module path.
_HERE = os.path.dirname(os.path.abspath(__file__))


def _redirect(job: dict[str, Any]) -> None:
    """fd 0 from /dev/null, fds 1 and 2 to the job's files (created or emptied)."""
    null = os.open(os.devnull, os.O_RDONLY)
    out = os.open(job["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    err = os.open(job["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for fd, target in ((null, 0), (out, 1), (err, 2)):
        os.dup2(fd, target)
        os.close(fd)


def _exit_status(code: object) -> int:
    """The exit status the interpreter gives ``SystemExit(code)`` (printing a non-int code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _run_as_main(job: dict[str, Any], close: list[int]) -> int:
    """In the forked child: ``python -m hyp2onnx.cli ARGV`` (or ``python SCRIPT ARGV``) from
    here on; its exit status."""
    for fd in close:
        os.close(fd)
    os.chdir(job["cwd"])
    _redirect(job)
    script = job.get("script")
    try:
        if script is None:
            sys.argv = ["-m", *job["argv"]]  # runpy puts the script's path in sys.argv[0]
            sys.path[sys.path.index(_HERE)] = os.getcwd()  # as -m does, for this script's folder
            runpy.run_module(_PACKAGE, run_name="__main__", alter_sys=True)
        else:
            script = os.path.abspath(script)
            sys.argv = [script, *job["argv"]]
            sys.path[sys.path.index(_HERE)] = os.path.dirname(script)  # as python SCRIPT does
            runpy.run_path(script, run_name="__main__")
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except KeyboardInterrupt:  # the interpreter dies of SIGINT after the traceback
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    # Then as the interpreter ends (and as multiprocessing ends a forked child): wait for
    # the threads that are not daemons, run the exit handlers, flush the streams.
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # the interpreter reports a failed flush and exits 120
            status = 120
    return status


def _start(job: dict[str, Any], close: list[int]) -> Any:
    """A fresh job's `subprocess.Popen`, or a forked job's process id."""
    if job["fresh"]:
        with open(job["stdout"], "wb") as out, open(job["stderr"], "wb") as err:
            return subprocess.Popen(
                job["argv"], cwd=job["cwd"], stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            status = _run_as_main(job, close)
        finally:
            os._exit(status)
    return pid


def _poll(process: Any) -> int | None:
    """The return code of an ended job (negative: the signal that ended it), else None."""
    if isinstance(process, subprocess.Popen):
        return process.poll()
    pid, status = os.waitpid(process, os.WNOHANG)
    return None if pid == 0 else os.waitstatus_to_exitcode(status)


def _kill(process: Any) -> int:
    if isinstance(process, subprocess.Popen):
        process.kill()
        return process.wait()
    os.kill(process, signal.SIGKILL)
    return os.waitstatus_to_exitcode(os.waitpid(process, 0)[1])


def serve(max_running: int, jobs_fd: int, reports_fd: int) -> None:
    """Run the jobs read from ``jobs_fd``; report each on ``reports_fd`` as it ends."""
    reports = os.fdopen(reports_fd, "w", buffering=1)
    queue: list[tuple[int, int, dict[str, Any]]] = []  # (-priority, order read, job)
    running: dict[str, tuple[Any, float]] = {}
    pending, done_reading, read = b"", False, 0
    while not done_reading or queue or running:
        while queue and len(running) < max_running:
            _, _, job = heapq.heappop(queue)
            running[job["name"]] = (_start(job, [jobs_fd, reports_fd]), time.monotonic())
        if not done_reading:
            ready, _, _ = select.select([jobs_fd], [], [], POLL_S if running else None)
            if ready:
                chunk = os.read(jobs_fd, 1 << 16)
                done_reading = not chunk
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for job in (json.loads(line) for line in lines if line.strip()):
                    heapq.heappush(queue, (-job["priority"], read, job))
                    read += 1
        else:
            time.sleep(POLL_S)
        for name, (process, started) in list(running.items()):
            code, timed_out = _poll(process), False
            if code is None and time.monotonic() - started > TIMEOUT_S:
                code, timed_out = _kill(process), True
            if code is not None:
                del running[name]
                report = {"name": name, "returncode": code, "timed_out": timed_out}
                reports.write(json.dumps(report) + "\n")
    reports.close()


def main(args: list[str]) -> None:
    max_running, *modules = args
    # Jobs and reports on their own descriptors; this process's stdout goes to its stderr,
    # so that anything a library prints shows there.
    jobs_fd, reports_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    for module in modules:
        importlib.import_module(module)
    serve(int(max_running), jobs_fd, reports_fd)


if __name__ == "__main__":
    main(sys.argv[1:])
