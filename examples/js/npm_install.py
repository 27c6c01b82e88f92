"""Install the pinned npm packages of examples/js, once, for Python callers.

The tests (tests/test_js.py) and the compatibility table
(benchmarks/compat_table.py) both need onnxruntime-node and onnxruntime-web
here. ``ONNXRUNTIME_NODE_INSTALL=skip``: the package's CPU binaries ship in
the npm tarball, and its post-install download cannot reach the internet.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

JS = Path(__file__).resolve().parent


def installed() -> bool:
    """Whether node_modules holds the versions package.json pins."""
    wanted = json.loads((JS / "package.json").read_text())["dependencies"]
    for name, version in wanted.items():
        meta = JS / "node_modules" / name / "package.json"
        if not meta.is_file() or json.loads(meta.read_text())["version"] != version:
            return False
    return True


def npm_ci(timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run ``npm ci`` unless the packages are there; None when nothing was run.

    Holds a file lock so that concurrent callers install once. Raises
    `FileNotFoundError` without node or npm on PATH and
    `subprocess.TimeoutExpired` after ``timeout`` seconds.
    """
    npm = shutil.which("npm")
    if shutil.which("node") is None or npm is None:
        raise FileNotFoundError("node and npm are needed (not on PATH)")
    lock = Path(tempfile.gettempdir()) / "hyp2onnx-examples-js-npm.lock"
    with lock.open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        if installed():
            return None
        return subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            check=False,
            cwd=JS,
            env={**os.environ, "ONNXRUNTIME_NODE_INSTALL": "skip"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
