"""The Spark sections of docs/distributed.md (training, scoring), each a test of its own and in
a file of their own, so that the suite's workers share the load (see _docs.py).

The worker's shared Spark session (conftest.py) is started first: the page's own
``getOrCreate`` then hands its code the live session instead of starting a JVM
inside the test, and its ``spark.stop()`` ends it (the next part starts its own).
"""

from __future__ import annotations

import pytest
from _docs import page_id, pages_for, run_page


@pytest.mark.parametrize("part", pages_for(__file__), ids=page_id)
def test_every_block_of_the_section_runs(part, spark, tmp_path, monkeypatch):
    assert run_page(part, tmp_path, monkeypatch) > 0  # a part in this list has blocks to run
