"""Fixtures the Dask and Spark test modules share: a real cluster and a real session.

Both are module-scoped, so each module builds its own once (the suite runs a
module on one worker, ``--dist loadfile``), and both import their engine only
when a test asks for them.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest


@pytest.fixture(scope="module")
def client():
    """A 2-process Dask LocalCluster (1 thread each) and its client."""
    pytest.importorskip("distributed", reason="the 'dask' extra is not installed")
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


@pytest.fixture(scope="module")
def spark():
    """A ``local[2]`` Spark session whose executors run this interpreter."""
    pytest.importorskip("pyspark", reason="the 'spark' extra is not installed")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("hyp2onnx-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # small Arrow batches: a partition reaches the scorer in several pieces
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
        .getOrCreate()
    )
    yield session
    session.stop()
