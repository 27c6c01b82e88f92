"""Spark's Python worker daemon, with what the tests' tasks import already imported.

Spark forks one Python worker per task from this daemon, and a worker whose
task raised (as every refused row does here) is not reused: each such task
would import hyp2onnx, onnxruntime, pandas and pyarrow again. Imported once
here, before the forks, they cost nothing per task. Nothing here starts a
thread or a session, so forking stays safe; the tests' ``spark`` fixture
names this module in ``spark.python.daemon.module``.
"""

import onnxruntime  # noqa: F401
import pandas  # noqa: F401
import pyarrow  # noqa: F401
from pyspark import daemon

import hyp2onnx.distributed._scoring
import hyp2onnx.distributed.spark  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
