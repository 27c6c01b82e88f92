"""docs/layout.md lists every module of the package, and no module that is gone.

The page's one-line-per-module tree (the fenced block under "One line per
module") is where a newcomer starts; a module missing from it is one they
cannot find from there.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hyp2onnx"
LAYOUT = ROOT / "docs" / "layout.md"


def listed_modules(text: str) -> set[str]:
    """Module paths (``hyp2onnx/emit/fast.py``) of the tree block: each name is under the
    nearest folder line above it with less indentation."""
    block = text.split("## One line per module", 1)[1].split("```", 2)[1]
    folders: list[tuple[int, str]] = []
    found = set()
    for line in block.splitlines():
        # "a.py", or "a.py, b.py" on one line
        match = re.match(r"^( *)([^\s,]+(?:, [^\s,]+)*)", line)
        if match is None:
            continue
        indent, names = len(match.group(1)), match.group(2).split(", ")
        while folders and folders[-1][0] >= indent:
            folders.pop()
        if names[0].endswith("/"):
            folders.append((indent, names[0].rstrip("/")))
            continue
        found |= {"/".join([f for _, f in folders] + [n]) for n in names if n.endswith(".py")}
    return found


def test_every_module_is_listed():
    modules = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py")}
    listed = listed_modules(LAYOUT.read_text())
    assert not modules - listed, f"modules missing from docs/layout.md: {sorted(modules - listed)}"
    assert not listed - modules, (
        f"docs/layout.md lists modules that are gone: {sorted(listed - modules)}"
    )


def test_the_reader_finds_nested_names():
    text = (
        "## One line per module\n\n```\nhyp2onnx/\n  a.py   x\n  sub/\n    b.py   y\n  c.py\n```\n"
    )
    assert listed_modules(text) == {"hyp2onnx/a.py", "hyp2onnx/sub/b.py", "hyp2onnx/c.py"}
