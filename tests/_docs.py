"""Running the documentation's code blocks: what test_docs.py and the files that share
its pages use.

Every ```python block of README.md and docs/*.md runs, a page's blocks in
order in one namespace, in a fresh temporary folder per page; every
```bash/console block runs there too, after the Python blocks before it,
line by line, and each line must be a ``hyp2onnx`` command that exits 0
(the test files run them through `command_runner`, which spares each
command the imports of a fresh interpreter).
A block that cannot run here says so in an HTML comment right before it,
``<!-- not run: reason -->``, with a reason.

The pages whose blocks take longest run from files of their own
(``SLOW_PAGES``): the suite runs one file per worker at a time, so one file
holding them all would bound the whole run. A page whose sections stand
alone (each starts its own cluster or session) may be split by heading,
``"page#heading"``: each such part is a test of its own, its blocks run in
a namespace of their own, and every block the page runs must fall in one
listed part.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from _cli import CommandRunner

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Page (relative to the root), or ``page#heading`` for the blocks under one heading of it ->
#: the test file that runs them; the other pages: test_docs.py.
SLOW_PAGES = {
    "docs/distributed.md#Dask": "test_docs_distributed.py",
    "docs/distributed.md#Training": "test_docs_spark.py",
    "docs/distributed.md#Scoring": "test_docs_spark.py",
    "docs/cli.md": "test_docs_deploy.py",
    "docs/deploy.md": "test_docs_deploy.py",
}
#: What one test runs: a page, or the blocks under one heading of it.
Part = tuple[Path, "str | None"]

#: A fenced block with the line before it: (marker line or "", language, body).
_FENCE = re.compile(
    r"(?:^(<!--.*?-->)[ \t]*\n)?^```([A-Za-z]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S
)
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*$", re.M)
NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->")
#: The command line of the package, for the current interpreter and checkout.
_CLI = [sys.executable, "-c", "import sys; from hyp2onnx.cli import main; sys.exit(main())"]


def page_id(part: Part | Path) -> str:
    page, heading = part if isinstance(part, tuple) else (part, None)
    name = page.relative_to(ROOT).as_posix()
    return name if heading is None else f"{name}#{heading}"


def pages_for(test_file: str | Path) -> list[Part]:
    """The pages, or parts of pages, whose blocks ``test_file`` runs."""
    name = Path(test_file).name
    parts: list[Part] = []
    for page in PAGES:
        listed = [k for k in SLOW_PAGES if k.partition("#")[0] == page_id(page)]
        if not listed:
            parts += [(page, None)] if name == "test_docs.py" else []
        for key in listed:
            if SLOW_PAGES[key] == name:
                heading = key.partition("#")[2]
                parts.append((page, heading or None))
    return parts


def headings(page: Path) -> list[str | None]:
    """The heading each fenced block of ``page`` stands under (None before the first)."""
    text = page.read_text()
    fences = [m.span() for m in _FENCE.finditer(text)]
    titles = [
        (m.start(), m.group(1))
        for m in _HEADING.finditer(text)
        if not any(a <= m.start() < b for a, b in fences)
    ]
    return [
        next((title for at, title in reversed(titles) if at < start), None) for start, _ in fences
    ]


def blocks(page: Path) -> list[tuple[str, str, str | None]]:
    """``(language, body, reason not run or None)`` of each fenced block of ``page``."""
    found = []
    for marker, language, body in _FENCE.findall(page.read_text()):
        reason = None
        if marker:
            m = NOT_RUN.fullmatch(marker.strip())
            assert m, f"{page.name}: a comment before a block must read '<!-- not run: reason -->'"
            reason = m.group(1)
            assert reason, f"{page.name}: '<!-- not run: -->' needs a reason"
        found.append((language, body, reason))
    return found


def env() -> dict[str, str]:
    """The environment of a subprocess that imports this checkout's hyp2onnx."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), out.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out.setdefault("PYSPARK_PYTHON", sys.executable)
    return out


def command_runner(streams: Path) -> CommandRunner:
    """A runner of the pages' commands, forked from one interpreter that imported what they
    load (see _cli.py), in the environment of `env`; one at a time, as a page runs them."""
    return CommandRunner(streams, env=env(), max_running=1)


def run_page(part: Part, tmp_path: Path, monkeypatch, runner: CommandRunner | None = None) -> int:
    """Run every block of the page (or of its part) that is not marked, in ``tmp_path``;
    the number run. The ``hyp2onnx`` commands run through ``runner`` if given (see
    `command_runner`), else each in a fresh interpreter."""
    page, heading = part
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    namespace: dict = {"__name__": "__main__"}
    ran = 0
    under = headings(page)
    for number, (language, body, reason) in enumerate(blocks(page), 1):
        where = f"{page.name}, block {number}"
        if reason is not None or (heading is not None and under[number - 1] != heading):
            continue
        ran += 1
        if language == "python":
            exec(compile(body, where, "exec"), namespace)
        elif language in ("bash", "console", "sh", "shell"):
            for line in body.splitlines():
                words = shlex.split(line, comments=True)
                if not words:
                    continue
                assert words[0] == "hyp2onnx", (
                    f"{where}: '{line}' is not a hyp2onnx command; "
                    "mark the block '<!-- not run: reason -->' if it cannot run in the tests"
                )
                if runner is not None:
                    done = runner.run(words[1:], tmp_path)
                else:
                    done = subprocess.run(
                        [*_CLI, *words[1:]], env=env(), capture_output=True, text=True
                    )
                assert done.returncode == 0, f"{where}: {line}\n{done.stdout}{done.stderr}"
    return ran
