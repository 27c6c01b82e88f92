"""Shared plumbing of the benchmark scripts: output folder, Markdown tables, figures, timing,
progress.

Full runs write to ``benchmarks/results/``; ``--quick`` runs (smoke tests)
write to a temporary folder unless ``--out`` says otherwise, so a smoke test
never replaces the committed results.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from pathlib import Path
from typing import Any, TypeVar

from hyp2onnx._progress import bar

T = TypeVar("T")

RESULTS = Path(__file__).resolve().parent / "results"


def add_output_args(parser: argparse.ArgumentParser) -> None:
    """``--quick`` and ``--out`` for every benchmark."""
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test in seconds")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for the Markdown/PNG results "
        "(default: benchmarks/results, or a temporary folder with --quick)",
    )


def have_hyperdt() -> bool:
    """True if PyPI's hyperdt is importable; otherwise say how to install it."""
    try:
        import hyperdt  # noqa: F401
    except ImportError:
        print("hyperdt is not installed: pip install hyperdt==0.0.3 (or '.[bench]')")
        return False
    return True


def output_dir(args: argparse.Namespace) -> Path:
    """The folder results go to (created)."""
    if args.out is not None:
        out = Path(args.out)
    elif args.quick:
        out = Path(tempfile.gettempdir()) / "hyp2onnx-bench-quick"
    else:
        out = RESULTS
    out.mkdir(parents=True, exist_ok=True)
    return out


def md_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None
) -> str:
    """A GitHub Markdown table; ``align``: ``l``/``r``/``c`` per column (default: first left)."""
    align = align or "l" + "r" * (len(headers) - 1)
    marks = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = [
        "| " + " | ".join(map(str, headers)) + " |",
        "| " + " | ".join(marks[a] for a in align) + " |",
    ]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def text_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The same table as plain aligned text for the terminal."""
    cells = [list(map(str, headers))] + [list(map(str, r)) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    out = []
    for j, row in enumerate(cells):
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))
            )
        )
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def environment() -> str:
    """One line saying where and with what the numbers were measured."""
    import numpy
    import sklearn

    parts = [
        f"{os.cpu_count()} cores",
        f"Python {platform.python_version()}",
        f"numpy {numpy.__version__}",
        f"scikit-learn {sklearn.__version__}",
    ]
    for name in ("xgboost", "lightgbm", "catboost", "onnxruntime", "hyperdt"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        version = getattr(module, "__version__", None)
        if version is None and name == "hyperdt":
            from importlib.metadata import version as _version

            version = _version("hyperdt")
        parts.append(f"{name} {version}")
    try:
        load = f", load average {os.getloadavg()[0]:.1f}"
    except OSError:
        load = ""
    return f"Measured {datetime.date.today().isoformat()} on {', '.join(parts)}{load}."


def write(path: Path, text: str) -> None:
    """Write ``text`` and say where."""
    path.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    print(f"wrote {path}")


def pyplot() -> Any | None:
    """matplotlib's pyplot on the Agg backend, or None (with a note) if matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no figure (pip install 'hyp2onnx[bench]')")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def timed(call: Callable[[], Any]) -> float:
    """Wall time of one call, in seconds."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def to_spread(value: float, low: float, high: float) -> float:
    """``value`` rounded to the decimal place of the leading digit of its spread ``high - low``.

    A figure measured as 4,151 with a spread of 700 reads 4,200: digits below
    the spread are noise. At least one significant figure is kept; no spread
    (one run) keeps three.
    """
    if value == 0 or not math.isfinite(value):
        return value
    leading = math.floor(math.log10(abs(value)))
    width = abs(high - low)
    place = leading - 2 if not math.isfinite(width) or width == 0 else math.floor(math.log10(width))
    return round(value, -min(place, leading))


class _AboveBar:
    """Standard output that prints whole lines above the progress bars on stderr: the bars
    are cleared, the lines written, then the bars drawn again (tqdm's ``write`` does the
    same for one line), so a loop's own prints stay readable."""

    def __init__(self, stream: Any, progress: Any) -> None:
        self._stream, self._progress, self._pending = stream, progress, ""

    def write(self, text: str) -> int:
        lines, newline, self._pending = (self._pending + text).rpartition("\n")
        if newline:
            with self._progress.external_write_mode(file=self._progress.fp):
                self._stream.write(lines + newline)
                self._stream.flush()
        return len(text)

    def flush(self) -> None:  # a part line waits for its end: written now, it would join the bar
        self._stream.flush()

    def release(self) -> Any:
        """The stream wrapped, after writing any part line left."""
        self._stream.write(self._pending)
        self._stream.flush()
        return self._stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def steps(
    items: Iterable[T], desc: str, total: int | None = None, unit: str = "cases"
) -> Iterator[T]:
    """``items``, one at a time, counted on a progress bar (count, rate, time left).

    The bar goes to stderr and only when stderr is a terminal (``hyp2onnx._progress``),
    so results files, logs and captured output are unchanged. While it shows, the loop's
    prints to stdout land above it (lines for stderr: `note`). ``total`` defaults to
    ``len(items)``.
    """
    if total is None and isinstance(items, Sized):
        total = len(items)
    progress = bar(total, desc, unit, unit_scale=False)
    if progress.disable:
        yield from items
        return
    out = _AboveBar(sys.stdout, progress)
    sys.stdout = out  # type: ignore[assignment]
    try:
        for item in items:
            yield item
            progress.update(1)
            progress.refresh()  # every count drawn: tqdm skips draws within 0.1 s of the last
    finally:
        progress.close()
        sys.stdout = out.release()


def note(text: str) -> None:
    """Print a line to stderr, above any progress bar of `steps` (plain ``print`` there
    would write the line into the bar)."""
    from tqdm import tqdm

    tqdm.write(text, file=sys.stderr)
