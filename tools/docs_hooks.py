"""mkdocs hook: publish files that live outside docs/ but that the pages link to.

The benchmark results (``benchmarks/results/*.md`` and their figures) and the
JavaScript example's README stay where the scripts write them. Pages link to
them with ordinary relative links (``../benchmarks/results/far.md``), which
also work when the Markdown is read on a code host; this hook adds each such
file to the site under the same relative name, so that mkdocs resolves,
checks and renders those links like any other.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File, Files, InclusionLevel

#: Folders (relative to the repository root) and the file patterns published from each.
OUTSIDE = {"benchmarks/results": ("*.md", "*.png"), "examples/js": ("README.md",)}


def on_files(files: Files, config) -> Files:
    docs = Path(config["docs_dir"])
    root = docs.parent
    for folder, patterns in OUTSIDE.items():
        for pattern in patterns:
            for path in sorted((root / folder).glob(pattern)):
                rel = path.relative_to(root).as_posix()
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
                        inclusion=InclusionLevel.NOT_IN_NAV,
                    )
                )
    return files
