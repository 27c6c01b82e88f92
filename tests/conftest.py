"""Fixtures the Dask and Spark test modules share: a real cluster and a real session.

Each pytest worker builds at most one of each, on first use, and every module
it runs shares them (the suite runs a module on one worker, ``--dist
loadfile``); both import their engine only when a test asks for them. A docs
page that stops its own Spark session stops this one too (``getOrCreate``
hands it the live one), so each module asks for the live session again and
gets a new one if it was stopped.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest


@pytest.fixture(scope="session")
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


@pytest.fixture(scope="session")
def _spark_builder():
    """The builder of the tests' Spark session; the live session stops when the worker ends."""
    pytest.importorskip("pyspark", reason="the 'spark' extra is not installed")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)")
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    here = os.path.dirname(os.path.abspath(__file__))
    worker_path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("hyp2onnx-tests")
        .config("spark.ui.enabled", "false")
        # workers fork from a daemon that has imported the scoring modules (_spark_daemon.py)
        .config("spark.python.daemon.module", "_spark_daemon")
        .config("spark.executorEnv.PYTHONPATH", worker_path)
        .config("spark.sql.shuffle.partitions", "2")
        # small Arrow batches: a partition reaches the scorer in several pieces
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    )
    yield builder
    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()


@pytest.fixture(scope="module")
def spark(_spark_builder):
    """A ``local[2]`` Spark session whose executors run this interpreter: the worker's live
    one, or a new one if none is live."""
    return _spark_builder.getOrCreate()
