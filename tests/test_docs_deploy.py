"""The blocks of the documentation pages that take longest to run, in a file of their own
so that the suite's workers share the load (see _docs.py; test_docs.py runs the rest)."""

from __future__ import annotations

import pytest
from _docs import page_id, pages_for, run_page


@pytest.mark.parametrize("page", pages_for(__file__), ids=page_id)
def test_every_block_of_the_page_runs(page, tmp_path, monkeypatch, page_runner):
    assert (
        run_page(page, tmp_path, monkeypatch, page_runner) > 0
    )  # a page in this list has blocks to run
