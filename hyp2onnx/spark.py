"""Score a Spark DataFrame's points with an exported graph.

Needs the ``spark`` extra: ``pip install 'hyp2onnx[spark]'`` (pyspark and
pyarrow; Spark itself needs a Java runtime). :func:`predict` broadcasts the
graph once and scores every partition with ``mapInPandas``; each executor's
Python worker process builds one onnxruntime session for the graph (cached
by its hash, see :mod:`hyp2onnx._scoring`) and reuses it for every batch and
task it runs (Spark reuses its Python workers by default).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _scoring

__all__ = ["predict"]


def _pyspark() -> Any:
    """The ``pyspark.sql`` module, or an ImportError naming the extra to install."""
    try:
        import pyarrow  # noqa: F401  (mapInPandas moves batches as Arrow)
        import pyspark.sql
    except ImportError as exc:
        raise ImportError(
            "hyp2onnx.spark needs pyspark and pyarrow: pip install 'hyp2onnx[spark]'"
        ) from exc
    return pyspark.sql


def _spark_type(dtype: np.dtype) -> Any:
    types = _pyspark().types
    if dtype == np.dtype(object):
        return types.StringType()
    if dtype == np.dtype(np.int64):
        return types.LongType()
    return types.DoubleType()  # float32 outputs are widened exactly


def _column_dtype(dtype: np.dtype) -> np.dtype:
    """The pandas column dtype matching :func:`_spark_type`."""
    return dtype if dtype.kind in "iO" else np.dtype(np.float64)


def predict(
    graph: Any,
    df: Any,
    columns: list[str],
    *,
    threads: int = 1,
    output_prefix: str = "",
) -> Any:
    """``df`` with the graph's outputs appended, computed by ``mapInPandas``.

    ``graph`` is an ONNX model exported by hyp2onnx (``onnx.ModelProto``,
    bytes or a path); ``columns`` names ``df``'s point columns, in the
    graph's input order. The appended columns are ``label`` (string or long)
    and ``probability_<i>`` (double, one per class in the graph's ``classes``
    order), or ``variable`` (``variable_<j>`` for several targets), each
    name preceded by ``output_prefix``. ``threads`` is the intra-op thread
    count of each session (Spark already runs one task per core). Lazy, like
    any Spark transformation.
    """
    sql = _pyspark()
    blob = _scoring.graph_bytes(graph)
    spec = _scoring.OutputSpec.of(blob)
    key = _scoring.graph_key(blob)
    columns = list(columns)
    names = spec.table_columns(list(df.columns), columns, output_prefix)
    dtypes = {name: dtype for name, dtype, _ in spec.outputs}
    added = [
        sql.types.StructField(col, _spark_type(dtypes[out]), nullable=False)
        for out, cols in names.items()
        for col in cols
    ]
    schema = sql.types.StructType([*df.schema.fields, *added])
    shared = df.sparkSession.sparkContext.broadcast(blob)
    casts = {col: _column_dtype(dtypes[out]) for out, cols in names.items() for col in cols}

    def score(batches: Any) -> Any:
        session = _scoring.session(key, lambda: shared.value, threads)
        for batch in batches:
            result = _scoring.run(session, batch[columns].to_numpy(dtype=np.float64))
            out = _scoring.columns_of(result, names)
            yield batch.assign(**{c: np.asarray(v, dtype=casts[c]) for c, v in out.items()})

    return df.mapInPandas(score, schema)
