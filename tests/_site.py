"""Reading the built documentation site: what test_docs.py checks on the rendered pages.

Each function takes the built site's folder (or one page's HTML) and returns
the defects it finds as lines ``page: what``, so a test can print them all.
The checks read the HTML mkdocs-material and mkdocstrings write; they look
at the text a reader sees (code blocks and inline code aside), the API
pages' parameter tables and the navigation.
"""

from __future__ import annotations

import ast
import html
import importlib
import inspect
import re
import typing
from pathlib import Path
from typing import Any

#: The page's article (the content column, without navigation and footer).
_ARTICLE = re.compile(r'<article class="md-content__inner[^"]*">(.*?)</article>', re.S)
_PRE = re.compile(r"<pre\b.*?</pre>", re.S)
_CODE = re.compile(r"<code\b[^>]*>(.*?)</code>", re.S)
_TAG = re.compile(r"<[^>]+>")


def pages(site: Path) -> list[Path]:
    """The site's HTML pages (not its 404 page)."""
    return [p for p in sorted(site.rglob("*.html")) if p.name != "404.html"]


def article(page: Path) -> str:
    """The page's content column, scripts and styles removed."""
    text = page.read_text()
    found = _ARTICLE.search(text)
    body = found.group(1) if found else ""
    return re.sub(r"<(script|style)\b.*?</\1>", "", body, flags=re.S)


def prose(body: str) -> str:
    """``body`` without code blocks or inline code (their text may hold anything)."""
    return _CODE.sub("<code></code>", _PRE.sub("", body))


def _where(site: Path, page: Path) -> str:
    return page.relative_to(site).as_posix()


# -- Markdown that went wrong -------------------------------------------------

#: Bold or emphasis glued to a word on either side (``2**24 ... 2**31`` read as bold).
_GLUED = re.compile(r"\w<(strong|em)>|</(strong|em)>\w")


def stray_emphasis(site: Path) -> list[str]:
    """Asterisks left in the text, and bold glued to a word (a bare ``2**31`` outside code)."""
    found = []
    for page in pages(site):
        text = prose(article(page))
        for m in list(re.finditer(r"\*\*|\\\*", text)) + list(_GLUED.finditer(text)):
            snippet = _TAG.sub("", text[max(0, m.start() - 50) : m.end() + 50])
            found.append(f"{_where(site, page)}: ...{' '.join(snippet.split())}...")
    return found


#: A list marker at the start of a line inside a paragraph.
_MARKER = re.compile(r"(?:^|\n)[ \t]*(?:[-*+]|\d+[.)])[ \t]+\S")


def merged_lists(site: Path) -> list[str]:
    """Paragraphs holding a line that starts with a list marker (a list Markdown did not see)."""
    found = []
    for page in pages(site):
        for para in re.findall(r"<p\b[^>]*>(.*?)</p>", prose(article(page)), re.S):
            text = html.unescape(_TAG.sub("", para))
            m = _MARKER.search(text)
            if m:
                snippet = " ".join(text[m.start() : m.start() + 80].split())
                found.append(f"{_where(site, page)}: {snippet!r}")
    return found


# -- the API reference ---------------------------------------------------------


#: Modules whose classes public methods may return without being public themselves: the
#: intermediate representation (``HyperbolicMLPClassifier.network()`` returns its ``Network``).
INTERNAL = ("hyp2onnx.ir",)


def api_names(package: str = "hyp2onnx") -> dict[str, Any]:
    """Identifier -> object: the package's ``__all__`` and the public classes its
    public functions and methods return (``region_tree`` returns ``RegionTree``,
    whose ``explain`` returns ``Region``), found from their return annotations."""
    module = importlib.import_module(package)
    names = {f"{package}.{n}": getattr(module, n) for n in module.__all__ if n != "__version__"}
    todo = list(names.values())
    seen: set[int] = set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        callables = [obj]
        if inspect.isclass(obj):
            callables += [
                m
                for n, m in inspect.getmembers(obj, inspect.isfunction)
                if not n.startswith("_") and m.__module__.startswith(package)
            ]
        for f in callables:
            returned = _returned(f)
            if returned is not None and returned not in names.values():
                names[f"{package}.{returned.__name__}"] = returned
                todo.append(returned)
    return names


def _returned(f: Any) -> type | None:
    """The public class of ``package`` that ``f`` is annotated to return, if any."""
    try:
        hint = typing.get_type_hints(f.__init__ if inspect.isclass(f) else f).get("return")
    except Exception:  # annotations naming what the module does not import
        return None
    if (
        inspect.isclass(hint)
        and hint.__module__.startswith("hyp2onnx")
        and not hint.__module__.startswith(INTERNAL)
        and not hint.__name__.startswith("_")
    ):
        return hint
    return None


def missing_entries(known: set[str], names: dict[str, Any]) -> list[str]:
    """Public names with no object of the site's inventory (no API entry)."""
    return sorted(name for name in names if name not in known)


#: An object's heading on an API page, and a section title of its docstring.
_OBJECT = re.compile(r'<h[1-6] id="(hyp2onnx[\w.]*)"')
_SECTION = re.compile(r'<span class="doc-section-title">([^<]*)</span>')
_ROW = re.compile(r'<tr class="doc-section-item">(.*?)</tr>', re.S)


def parameter_rows(body: str) -> list[tuple[str, str, str | None]]:
    """(object, parameter, default text or None) for each row of each Parameters table."""
    rows = []
    events = sorted(
        [(m.start(), "object", m.group(1)) for m in _OBJECT.finditer(body)]
        + [(m.start(), "section", m.group(1)) for m in _SECTION.finditer(body)]
    )
    bounds = [e[0] for e in events] + [len(body)]
    owner = None
    for (start, kind, value), end in zip(events, bounds[1:], strict=True):
        if kind == "object":
            owner = value
            continue
        if owner is None or not value.startswith("Parameters"):
            continue
        for row in _ROW.findall(body[start:end]):
            cells = re.findall(r"<td\b[^>]*>(.*?)</td>", row, re.S)
            name = html.unescape(_TAG.sub("", cells[0])).strip()
            default = html.unescape(_TAG.sub("", cells[3])).strip() if len(cells) > 3 else None
            rows.append((owner, name, default or None))
    return rows


def _resolve(identifier: str) -> Any:
    """The object an API identifier names (``hyp2onnx.verification.verify``, ``hyp2onnx.X.f``)."""
    parts = identifier.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            obj = getattr(obj, part)
        return obj
    raise LookupError(identifier)


def _same(shown: str, actual: Any) -> bool:
    """Whether a rendered default ``shown`` says the value ``actual``."""
    try:
        return ast.literal_eval(shown) == actual and type(ast.literal_eval(shown)) is type(actual)
    except (ValueError, SyntaxError):
        name = getattr(actual, "__name__", None)
        return shown in (repr(actual), str(actual), name, f"np.{name}", f"numpy.{name}")


def wrong_defaults(site: Path) -> list[str]:
    """Parameter rows naming no parameter of the object, or giving another default."""
    found = []
    for page in pages(site):
        if "reference" not in page.parts:
            continue
        for owner, name, shown in parameter_rows(article(page)):
            obj = _resolve(owner)
            target = obj.__init__ if inspect.isclass(obj) else obj
            try:
                params = inspect.signature(target).parameters
            except (TypeError, ValueError):
                continue
            where = f"{_where(site, page)}: {owner}({name})"
            if name not in params:
                if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
                    found.append(f"{where}: no such parameter")
                continue
            actual = params[name].default
            if actual is inspect.Parameter.empty:
                if shown is not None and shown != "required":
                    found.append(f"{where}: required, shown with default {shown}")
            elif shown is None or not _same(shown, actual):
                found.append(f"{where}: default {actual!r}, shown {shown}")
    return found


# -- links and navigation --------------------------------------------------------


def unlinked_names(site: Path, guide: list[str], names: dict[str, Any]) -> list[str]:
    """Public names a guide page writes as code without any link to their API entry.

    A function whose name is also a command (``verify``, ``compose``) counts
    only as ``hyp2onnx.name`` or ``name(...)``; a class by its bare name too.
    """
    commands = {"verify", "compose", "convert", "inspect", "predict"}
    found = []
    for rel in guide:
        page = site / (rel[:-3] + "/index.html" if rel != "index.md" else "index.html")
        body = _PRE.sub("", article(page))
        codes = {html.unescape(_TAG.sub("", c)).strip() for c in _CODE.findall(body)}
        hrefs = set(re.findall(r'<a [^>]*href="[^"]*#([\w.]+)"', body))
        for identifier, obj in names.items():
            short = identifier.rsplit(".", 1)[1]
            if inspect.ismodule(obj):
                continue
            forms = re.compile(
                rf"(hyp2onnx\.)?{re.escape(short)}(\(.*\))?"
                if short not in commands
                else rf"hyp2onnx\.{re.escape(short)}(\(.*\))?|{re.escape(short)}\(.*\)"
            )
            if any(forms.fullmatch(c) for c in codes) and not (
                identifier in hrefs or _canonical(obj) in hrefs
            ):
                found.append(f"{rel}: `{short}` is never linked to {identifier}")
    return found


def _canonical(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '')}.{getattr(obj, '__qualname__', '')}"


def outside_navigation(site: Path) -> list[str]:
    """Pages the navigation (the home page's sidebar) does not list."""
    home = (site / "index.html").read_text()
    nav = re.search(r'<nav class="md-nav md-nav--primary".*?</nav>\s*</div>', home, re.S)
    listed = {"index.html"}
    for href in re.findall(r'href="([^"#]*)"', nav.group(0) if nav else ""):
        target = (site / href).resolve()
        if target.is_dir():
            target = target / "index.html"
        if target.is_relative_to(site.resolve()):
            listed.add(target.relative_to(site.resolve()).as_posix())
    return [
        where
        for page in pages(site)
        if (where := _where(site, page)) not in listed and where != "search/index.html"
    ]


def repeated_titles(site: Path) -> list[str]:
    """Titles the navigation (the home page's sidebar) shows for more than one page: a
    reader cannot tell those pages apart."""
    home = (site / "index.html").read_text()
    nav = re.search(r'<nav class="md-nav md-nav--primary".*?</nav>\s*</div>', home, re.S)
    links = re.findall(r'<a href="([^"#]*)"[^>]*>(.*?)</a>', nav.group(0) if nav else "", re.S)
    pages_of: dict[str, set[str]] = {}
    for href, label in links:
        title = " ".join(html.unescape(_TAG.sub("", label)).split())
        pages_of.setdefault(title, set()).add(href)
    return [f"{title!r}: {sorted(hrefs)}" for title, hrefs in pages_of.items() if len(hrefs) > 1]
