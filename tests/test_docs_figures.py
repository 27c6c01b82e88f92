"""Pages the documentation generates: they must show what the code does today.

* docs/figures.py --check: the neural and isolation pages' figures show the
  classes (and regions) the models give every grid point now;
* docs/troubleshooting.py --check: the troubleshooting page shows, word for
  word, what each command prints now.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from _docs import ROOT, env


@pytest.mark.parametrize("script", ["figures.py", "troubleshooting.py"])
def test_generated_pages_are_up_to_date(script):
    if script == "figures.py":
        pytest.importorskip("matplotlib", reason="matplotlib (extra 'plot') is not installed")
    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / script), "--check"],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
