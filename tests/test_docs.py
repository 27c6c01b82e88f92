"""The documentation holds: the site builds, every example runs, every public name is documented.

* ``mkdocs build --strict`` fails on a broken link, a missing page, a
  docstring griffe cannot read or a cross-reference that names no object of
  the site;
* no built page shows a Sphinx role (``:class:`...` ``), which mkdocstrings
  prints as text, or a cross-reference left unresolved; every
  ``[name][hyp2onnx.path]`` of the package's source, rendered or not, names
  an object of the API pages, and the source holds no Sphinx role;
* every ```python block of README.md and docs/*.md runs, a page's blocks in
  order in one namespace, in a fresh temporary folder per page; every
  ```bash/console block runs there too, after the Python blocks before it,
  line by line, and each line must be a ``hyp2onnx`` command that exits 0.
  A block that cannot run here says so in an HTML comment right before it,
  ``<!-- not run: reason -->``, with a reason;
* every public class and function of the public modules has a docstring.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import shlex
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _docs_extension():
    """tools/griffe_lazy.py, the mkdocs extension: its list of public modules is the one
    the API pages document, so the docstring check reads the same list."""
    spec = importlib.util.spec_from_file_location("griffe_lazy", ROOT / "tools" / "griffe_lazy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_EXTENSION = _docs_extension()
PUBLIC_MODULES = _EXTENSION.PUBLIC

#: A fenced block with the line before it: (marker line or "", language, body).
_FENCE = re.compile(
    r"(?:^(<!--.*?-->)[ \t]*\n)?^```([A-Za-z]*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S
)
_NOT_RUN = re.compile(r"<!--\s*not run:\s*(.*?)\s*-->")
#: The command line of the package, for the current interpreter and checkout.
_CLI = [sys.executable, "-c", "import sys; from hyp2onnx.cli import main; sys.exit(main())"]


def blocks(page: Path) -> list[tuple[str, str, str | None]]:
    """``(language, body, reason not run or None)`` of each fenced block of ``page``."""
    found = []
    for marker, language, body in _FENCE.findall(page.read_text()):
        reason = None
        if marker:
            m = _NOT_RUN.fullmatch(marker.strip())
            assert m, f"{page.name}: a comment before a block must read '<!-- not run: reason -->'"
            reason = m.group(1)
            assert reason, f"{page.name}: '<!-- not run: -->' needs a reason"
        found.append((language, body, reason))
    return found


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once for this file's checks of it."""
    env = _env()
    env["NO_MKDOCS_2_WARNING"] = "1"
    out = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_site_builds_strictly(site):
    assert (site / "reference" / "hyp2onnx" / "index.html").exists()


#: A Sphinx role as mkdocstrings prints it (``:class:`x` `` becomes ``:class:<code>x</code>``).
_ROLE = re.compile(r":(?:py:)?[a-z]+:(?:<code>|`)")
#: A cross-reference autorefs left as text: ``[name][identifier]``.
_UNRESOLVED = re.compile(r"\]\[[A-Za-z_][\w.]*\]")
#: A cross-reference in the source, ``[name][hyp2onnx.path]``.
_REFERENCE = re.compile(r"\]\[(hyp2onnx(?:\.\w+)*)\]")


def _text(html: str) -> str:
    """The page without its scripts and styles (whose code may hold anything)."""
    return re.sub(r"<(script|style)\b.*?</\1>", "", html, flags=re.S)


def test_no_page_shows_a_raw_role_or_an_unresolved_reference(site):
    found = []
    for page in sorted(site.rglob("*.html")):
        text = _text(page.read_text())
        for pattern in (_ROLE, _UNRESOLVED):
            for m in pattern.finditer(text):
                where = page.relative_to(site).as_posix()
                found.append(f"{where}: ...{text[max(0, m.start() - 60) : m.end() + 40]}...")
    assert not found, (
        f"{len(found)} raw roles or unresolved references on the built site; write "
        "[name][hyp2onnx.full.path] for objects of the API pages and `name` for others:\n"
        + "\n".join(found[:20])
    )


def _identifiers(site: Path) -> set[str]:
    """Every identifier of the site's ``objects.inv`` (the objects autorefs can link to)."""
    header, _, _, _, body = (site / "objects.inv").read_bytes().split(b"\n", 4)
    assert header.startswith(b"# Sphinx inventory version 2"), header
    return {line.split()[0] for line in zlib.decompress(body).decode().splitlines()}


def test_every_reference_of_the_source_names_an_object_of_the_site(site):
    """Also the docstrings the site does not render (private modules): a reference
    there must still name a documented object, and no Sphinx role may wait there
    for the day a page renders it."""
    known = _identifiers(site)
    unknown, roles = [], []
    for path in sorted((ROOT / "hyp2onnx").rglob("*.py")):
        text = path.read_text()
        where = path.relative_to(ROOT).as_posix()
        unknown += [
            f"{where}: {m.group(1)}" for m in _REFERENCE.finditer(text) if m.group(1) not in known
        ]
        roles += [
            f"{where}: {m.group(0)}"
            for m in re.finditer(r":(?:class|func|mod|meth|attr|data|exc|obj|ref):`[^`]*`", text)
        ]
    assert not unknown, f"references to no object of the API pages: {unknown}"
    assert not roles, f"Sphinx roles (write [name][hyp2onnx.path] or `name`): {roles}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_block_of_the_page_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT))
    namespace: dict = {"__name__": "__main__"}
    for number, (language, body, reason) in enumerate(blocks(page), 1):
        where = f"{page.name}, block {number}"
        if reason is not None:
            continue
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
                done = subprocess.run(
                    [*_CLI, *words[1:]], env=_env(), capture_output=True, text=True
                )
                assert done.returncode == 0, f"{where}: {line}\n{done.stdout}{done.stderr}"


def test_markers_name_a_reason_and_precede_a_block():
    for page in PAGES:
        text = page.read_text()
        markers = len(_NOT_RUN.findall(text))
        marked = sum(reason is not None for _, _, reason in blocks(page))
        assert markers == marked, (
            f"{page.name}: a '<!-- not run -->' marker is not right before a block"
        )


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_a_docstring(module_name):
    module = importlib.import_module(module_name)
    assert (module.__doc__ or "").strip(), f"{module_name} has no docstring"
    missing = []
    for name in _EXTENSION.public_names(module):
        obj = getattr(module, name)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and not (obj.__doc__ or "").strip():
            missing.append(name)
    assert not missing, f"{module_name}: no docstring for {missing}"
