"""mkdocs hook: publish files that live outside docs/ but that the pages link to.

The benchmark results (``benchmarks/results/*.md`` and their figures) and the
JavaScript example's README stay where the scripts write them. Pages link to
them with ordinary relative links (``../benchmarks/results/far.md``), which
also work when the Markdown is read on a code host; this hook adds each such
file to the site under the same relative name, so that mkdocs resolves,
checks and renders those links like any other. Each published page is also
put in the navigation, at the end of the section ``OUTSIDE`` names for its
folder (the results under "Results", after the overview page), titled by its
first heading, so that no page of the site is reachable only by a link.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files, InclusionLevel

#: Folders (relative to the repository root), the file patterns published from each and
#: the navigation section their pages join.
OUTSIDE = {
    "benchmarks/results": (("*.md", "*.png"), "Results"),
    "examples/js": (("README.md",), "User guide"),
}


def on_files(files: Files, config) -> Files:
    docs = Path(config["docs_dir"])
    root = docs.parent
    for folder, (patterns, section) in OUTSIDE.items():
        for pattern in patterns:
            for path in sorted((root / folder).glob(pattern)):
                rel = path.relative_to(root).as_posix()
                if rel.endswith(".md"):
                    _add_to_nav(config["nav"], section, "../" + rel)
                dest = rel[:-3] + "/index.html" if rel.endswith(".md") else rel
                if not config["use_directory_urls"] and rel.endswith(".md"):
                    dest = rel[:-3] + ".html"
                files.append(
                    File(
                        "../" + rel,
                        str(docs),
                        config["site_dir"],
                        config["use_directory_urls"],
                        dest_uri=dest,
                        inclusion=InclusionLevel.INCLUDED,
                    )
                )
    return files


def _add_to_nav(nav: list, section: str, path: str) -> None:
    """Append ``path`` to the navigation's top-level ``section`` (a page becomes the
    section's "Overview"); a path already there is left (``mkdocs serve`` rebuilds)."""
    for entry in nav:
        if isinstance(entry, dict) and section in entry:
            children = entry[section]
            if isinstance(children, str):
                children = entry[section] = [{"Overview": children}]
            if path not in children:
                children.append(path)
            return
    raise KeyError(f"mkdocs.yml's nav has no section {section!r} for {path}")
