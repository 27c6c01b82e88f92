"""Fixtures the test modules share (a Dask cluster, a Spark session, runners of the quick
scripts and of the docs pages' commands), and how the suite's workers share the files.

Scheduling (``--dist loadfile --no-loadscope-reorder``, pyproject.toml):
a test file runs on one worker, so its module fixtures are built once; the
files that start Spark go to one worker together (`pytest_xdist_make_scheduler`),
so that its one Spark session serves them all (each start of a session
costs several seconds). Files are handed out in collection order, which
`pytest_collection_modifyitems` makes the slowest first (`SLOWEST_FIRST`),
so that no long file starts last and runs alone.

The Dask cluster is module-scoped (a module runs on one worker): one left
running beside a docs page's own LocalCluster made the page's XGBoost
training hang. The Spark session is built once per pytest
worker and shared by every module it runs; a docs page that stops its own
session stops this one too (``getOrCreate`` hands it the live one), so each
module asks for the live session again and gets a new one if it was
stopped. Both import their engine only when a test asks for them.
"""

from __future__ import annotations

import os
import shutil
import sys

import pytest

#: Files whose tests use a Spark session: one unit of work. The docs page stops its
#: session (``spark.stop()``), so it runs last of them.
SPARK_FILES = (
    "test_spark.py",
    "test_distributed_property.py",
    "test_distributed_graphs.py",
    "test_docs_spark.py",
)

#: Files (the Spark files as "spark") by their seconds in a whole run
#: (``--durations=0``), longest first; the rest follow in file order. Only the
#: suite's wall time depends on this list.
SLOWEST_FIRST = (
    "spark",
    "test_dask.py",
    "test_benchmarks_quick.py",
    "test_isolation.py",
    "test_guarantees_property.py",
    "test_catboost.py",
    "test_standard.py",
    "test_cli.py",
    "test_examples_quick.py",
    "test_benchmarks_quick_distributed.py",
    "test_rotation.py",
    "test_guarantees.py",
    "test_docs.py",
    "test_blocks.py",
    "test_export_boosting.py",
    "test_js.py",
)


def _group(item: pytest.Item) -> str:
    name = item.path.name
    return "spark" if name in SPARK_FILES else name


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slowest files first (the Spark files together, in their order), the rest as
    collected."""
    rank = {group: i for i, group in enumerate(SLOWEST_FIRST)}
    spark_order = {name: i for i, name in enumerate(SPARK_FILES)}
    items.sort(
        key=lambda item: (rank.get(_group(item), len(rank)), spark_order.get(item.path.name, 0))
    )


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's file-by-file scheduler, with the Spark files as one unit of work."""
    from xdist.scheduler import LoadFileScheduling

    class SparkTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return "spark" if scope.rsplit("/", 1)[-1] in SPARK_FILES else scope

    return SparkTogether(config, log)


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


@pytest.fixture(scope="module")
def script_runner(tmp_path_factory):
    """Runs the quick-mode scripts of a module, each in a process forked from one interpreter
    that imported what they import (`_quick.scripts`)."""
    from _quick import scripts

    with scripts(tmp_path_factory.mktemp("script_streams")) as runner:
        yield runner


@pytest.fixture(scope="module")
def page_runner(tmp_path_factory):
    """The docs pages' hyp2onnx commands of a module, forked from one interpreter that
    imported what they load (`_docs.command_runner`)."""
    from _docs import command_runner

    with command_runner(tmp_path_factory.mktemp("commands")) as started:
        yield started
        started.finish()
