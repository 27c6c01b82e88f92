"""The documentation holds: the site builds, every example runs, every public name is documented.

* ``mkdocs build --strict`` fails on a broken link, a missing page, a
  docstring griffe cannot read or a cross-reference that names no object of
  the site;
* no built page shows a Sphinx role (``:class:`...` ``), which mkdocstrings
  prints as text, or a cross-reference left unresolved; every
  ``[name][hyp2onnx.path]`` of the package's source, rendered or not, names
  an object of the API pages, and the source holds no Sphinx role;
* every ```python and ```bash block of README.md and docs/*.md runs (how:
  _docs.py); the slowest pages, or their sections, run from
  test_docs_distributed.py, test_docs_spark.py and test_docs_deploy.py, so
  that the suite's workers share them;
* every public class and function of the public modules has a docstring;
* the rendered pages (read by _site.py) show no asterisks of a bare ``2**31``
  and no list marker inside a paragraph; every public name (and every public
  class a public method returns) has an API entry, every parameter row its
  own default; each guide page links the public names it writes as code;
  every page is in the navigation.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
import zlib
from pathlib import Path

import _site
import pytest
import yaml
from _docs import (
    NOT_RUN,
    PAGES,
    ROOT,
    SLOW_PAGES,
    blocks,
    env,
    headings,
    page_id,
    pages_for,
    run_page,
)


def _docs_extension():
    """tools/griffe_lazy.py, the mkdocs extension: its list of public modules is the one
    the API pages document, so the docstring check reads the same list."""
    spec = importlib.util.spec_from_file_location("griffe_lazy", ROOT / "tools" / "griffe_lazy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_EXTENSION = _docs_extension()
PUBLIC_MODULES = _EXTENSION.PUBLIC


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built once for this file's checks of it."""
    build_env = env()
    build_env["NO_MKDOCS_2_WARNING"] = "1"
    out = tmp_path_factory.mktemp("site") / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env=build_env,
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


@pytest.mark.parametrize("page", pages_for(__file__), ids=page_id)
def test_every_block_of_the_page_runs(page, tmp_path, monkeypatch, page_runner):
    run_page(page, tmp_path, monkeypatch, page_runner)


def test_every_page_is_run_by_one_file():
    """The pages whose blocks take longest run from files of their own, so that the
    suite's workers (one file each at a time) share the load; none is left out, and every
    block of a page split by heading is run by exactly one of its parts."""
    tests = Path(__file__).parent
    for key, name in SLOW_PAGES.items():
        page, _, heading = key.partition("#")
        assert (ROOT / page).exists(), f"{page} is no page"
        assert (tests / name).exists(), f"{name}, which runs {key}, is missing"
        assert "pages_for(__file__)" in (tests / name).read_text(), name
        if heading:
            assert heading in headings(ROOT / page), f"{page} has no heading {heading!r}"
    parts = [p for f in {"test_docs.py", *SLOW_PAGES.values()} for p in pages_for(tests / f)]
    assert {page for page, _ in parts} == set(PAGES)
    for page in PAGES:
        split = [heading for p, heading in parts if p == page and heading is not None]
        if not split:
            continue
        for number, ((_, _, reason), under) in enumerate(
            zip(blocks(page), headings(page), strict=True), 1
        ):
            if reason is None:
                assert split.count(under) == 1, f"{page.name}, block {number}: run by no part"


def test_markers_name_a_reason_and_precede_a_block():
    for page in PAGES:
        text = page.read_text()
        markers = len(NOT_RUN.findall(text))
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


# -- what a reader sees: the rendered text, the API reference, links and navigation --


def test_no_page_shows_stray_asterisks_or_bold_glued_to_a_word(site):
    """A bare ``2**31`` outside code is Markdown bold: ``2**24 ... 2**31`` shows as
    "224 ... 231" with the text between in bold. Write powers as code."""
    found = _site.stray_emphasis(site)
    assert not found, "asterisks read as emphasis; put them in `code`:\n" + "\n".join(found)


def test_no_list_marker_sits_inside_a_paragraph(site):
    """A list item's continuation indented by 2 or 3 spaces after a blank line ends the
    list, and the next item becomes text of a paragraph; indent it by 4."""
    found = _site.merged_lists(site)
    assert not found, "list items merged into paragraphs:\n" + "\n".join(found)


def test_every_public_name_has_an_api_entry(site):
    """``hyp2onnx.__all__`` and the public classes its functions and methods return."""
    missing = _site.missing_entries(_identifiers(site), _site.api_names())
    assert not missing, f"no API entry (add one to docs/reference/hyp2onnx.md): {missing}"


def test_every_parameter_row_shows_its_own_default(site):
    found = _site.wrong_defaults(site)
    assert not found, "parameter tables that contradict the signatures:\n" + "\n".join(found)


def test_guide_pages_link_the_public_names_they_use(site):
    """Each public name a guide page writes as code is linked at least once on that page."""
    found = _site.unlinked_names(site, _guide_pages(), _site.api_names())
    assert not found, "write [`name`][hyp2onnx.name] once per page:\n" + "\n".join(found)


def test_every_page_is_in_the_navigation(site):
    found = _site.outside_navigation(site)
    assert not found, f"pages the navigation does not list: {found}"


def test_no_two_pages_share_a_title_in_the_navigation(site):
    found = _site.repeated_titles(site)
    assert not found, "give each page its own title (its first heading):\n" + "\n".join(found)


def _guide_pages() -> list[str]:
    """The home page and the pages of the navigation's "User guide" section."""
    nav = yaml.load((ROOT / "mkdocs.yml").read_text(), _NavLoader)["nav"]
    guide = next(entry["User guide"] for entry in nav if "User guide" in entry)
    return ["index.md", *(page for entry in guide for page in entry.values())]


class _NavLoader(yaml.SafeLoader):
    """mkdocs.yml's loader for its ``nav``: tags (``!!python/name``) read as nothing."""


_NavLoader.add_multi_constructor("", lambda loader, suffix, node: None)
