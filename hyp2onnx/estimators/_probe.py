"""Reading a model file in a child process first, where a damaged one can crash a library.

XGBoost, LightGBM and CatBoost check their files' structure only partly:
some damaged files crash their process (a segmentation fault, an abort).
A backend whose library does (``crashes_on_damage`` in the registry) reads
a file in a child first (``Backend.check_file``); the command line does the
same for pickles and ``.skops`` files. Whatever the child's crash or refusal,
the caller gets an `UnreadableFileError` saying what is wrong with the file.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["UnreadableFileError", "child_timeout", "native_error", "read_natively", "run_child"]

#: The child's script for XGBoost and LightGBM files: it imports only the standard library.
_NATIVE_PROBE = Path(__file__).with_name("_native_probe.py")


#: Seconds a child may take to read any file (it starts Python and imports its library)...
CHILD_SECONDS = 60.0
#: ... and per MB of the file (LightGBM's child reads about 2 MB a second on a loaded machine).
CHILD_SECONDS_PER_MB = 10.0


class UnreadableFileError(Exception):
    """A model file that a child process could not read: the message says why."""


def child_timeout(path: Path) -> float:
    """Seconds a child may take to read ``path``: a damaged file can make a library spin.

    60 s and 10 s per MB: far more than a good file takes to read (docs/guarantees.md),
    yet a hang on a small file ends in a minute, not ten.
    """
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    return CHILD_SECONDS + CHILD_SECONDS_PER_MB * size / 1e6


def run_child(args: list[str], path: Path, *, crash: str, slow: str) -> Any:
    """Run ``python ARGS PATH`` with this process's module path; its completed process.

    ``crash`` (with ``{signal}``) and ``slow`` (with ``{seconds}``) are the problems
    raised, as `UnreadableFileError`, if the child dies of a signal or runs past
    `child_timeout`.
    """
    timeout = child_timeout(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        done = subprocess.run(
            [sys.executable, *args, str(path.resolve())],
            capture_output=True,
            text=True,
            errors="replace",
            stdin=subprocess.DEVNULL,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired as exc:
        raise UnreadableFileError(slow.format(seconds=f"{timeout:.0f}")) from exc
    if done.returncode < 0:
        raise UnreadableFileError(crash.format(signal=signal.Signals(-done.returncode).name))
    return done


def read_natively(path: Path, library: str, kind: str, shared_library: str) -> None:
    """Read ``path`` with the native ``shared_library`` alone, in a child; raise if it fails.

    ``kind`` picks the child's calls (``_native_probe.py``: "XGBoost" or
    "LightGBM"); ``library`` names the library in messages. The child loads
    only the shared library, so it starts quickly.
    """
    done = run_child(
        ["-I", "-S", str(_NATIVE_PROBE), kind, shared_library],
        path,
        crash=f"not a readable {library} model file ({library} crashed reading it: {{signal}})",
        slow=f"{library} did not finish reading it in {{seconds}} s",
    )
    if done.returncode != 0:
        raise UnreadableFileError(f"not a readable {library} model file ({native_error(done)})")


def native_error(done: Any) -> str:
    """The native library's own complaint, from a failed child's output."""
    lines = [line.strip() for line in (done.stderr + "\n" + done.stdout).splitlines()]
    fatal = [line.split("[Fatal]", 1)[1] for line in lines if "[Fatal]" in line]
    errors = [line.split("Error: ", 1)[1] for line in lines if line.startswith("Error: ")]
    text = (fatal or errors or [line for line in lines if line] or ["it could not be read"])[0]
    # XGBoost's messages start "[12:00:00] /path/to/json.cc:518: ", CatBoost's "path/x.cpp:507: "
    text = re.sub(r"^\[[0-9:]+\]\s+\S+:\d+:\s*", "", text.strip())
    return re.sub(r"^\S+\.(?:cpp|h|pyx):\d+:\s*", "", text)[:200]
