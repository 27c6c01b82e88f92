"""The Dask section of docs/distributed.md, in a file of its own so that the suite's workers
share the load (see _docs.py; test_docs_spark.py runs the Spark sections)."""

from __future__ import annotations

import pytest
from _docs import page_id, pages_for, run_page


@pytest.mark.parametrize("page", pages_for(__file__), ids=page_id)
def test_every_block_of_the_page_runs(page, tmp_path, monkeypatch):
    assert run_page(page, tmp_path, monkeypatch) > 0  # a page in this list has blocks to run
