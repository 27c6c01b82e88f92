"""Progress bars for long work: tqdm on stderr, shown only when stderr is a terminal.

Shared by the command line (``predict``, reading data) and by long Python
calls (``region_tree(..., certify_radius=r)``), so that a script or a log
file never gets a bar's carriage returns.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["bar"]


def bar(
    total: int | None,
    desc: str,
    unit: str = "rows",
    *,
    leave: bool = False,
    unit_scale: bool = True,
    show: bool = True,
) -> Any:
    """A tqdm bar of ``total`` ``unit`` (counts, rate and time left), or a silent one
    when stderr is not a terminal. ``unit_scale=False`` shows small counts as ``3/40``
    rather than ``3.00/40.0``; ``show=False`` silences it anywhere (work too short to count)."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit_scale,
        file=sys.stderr,
        disable=not (show and sys.stderr.isatty()),
        leave=leave,
    )
