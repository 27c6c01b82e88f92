"""Score a Spark DataFrame's points with an exported graph.

Needs the ``spark`` extra: ``pip install 'hyp2onnx[spark]'`` (pyspark and
pyarrow; Spark itself needs a Java runtime). :func:`predict` broadcasts the
graph once and scores every partition with ``mapInPandas``; each executor's
Python worker process builds one onnxruntime session for the graph (cached
by its hash, see :mod:`hyp2onnx.distributed._scoring`) and reuses it for every batch and
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


def _check_numeric(df: Any, columns: list[str]) -> None:
    """A TypeError naming the point columns that are not numeric (before Spark runs)."""
    types = _pyspark().types
    fields = {f.name: f.dataType for f in df.schema.fields}
    bad = [c for c in columns if not isinstance(fields[c], types.NumericType)]
    if bad:
        shown = ", ".join(f"{c} ({fields[c].simpleString()})" for c in bad[:5])
        raise TypeError(
            f"the point columns must be numeric; not numeric: {shown}. Cast them first, e.g. "
            "df.withColumn(name, pyspark.sql.functions.col(name).cast('double'))."
        )


def predict(
    graph: Any,
    df: Any,
    columns: list[str],
    *,
    threads: int = 1,
    output_prefix: str = "",
    bad_rows: str = "error",
    check_manifold: bool = True,
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

    Every batch is checked first, as ``hyp2onnx predict`` checks a file:
    points on the graph's manifold (its geometry or input blocks; skipped
    with ``check_manifold=False``), finite (an SQL null is a missing value:
    refused like NaN), representable in the graph's input type, valid
    categorical codes. Non-numeric point columns are refused at once
    (TypeError). ``bad_rows="error"`` (the default): running the result
    fails with hyp2onnx's :class:`~hyp2onnx.errors.InvalidPointError`,
    naming the rows by Spark partition and row within it (Spark reports it as
    a ``PythonException`` whose message holds that line).
    ``bad_rows="null"``: those rows get null outputs, the others their
    answers.
    """
    sql = _pyspark()
    bad_rows = _scoring.check_bad_rows(bad_rows)
    blob = _scoring.graph_bytes(graph)
    spec = _scoring.OutputSpec.of(blob)
    check = _scoring.RowCheck.of(blob, check_manifold=check_manifold)
    key = _scoring.graph_key(blob)
    columns = list(columns)
    names = spec.table_columns(list(df.columns), columns, output_prefix)
    _check_numeric(df, columns)
    dtypes = {name: dtype for name, dtype, _ in spec.outputs}
    nullable = bad_rows == "null"
    added = [
        sql.types.StructField(col, _spark_type(dtypes[out]), nullable=nullable)
        for out, cols in names.items()
        for col in cols
    ]
    schema = sql.types.StructType([*df.schema.fields, *added])
    shared = df.sparkSession.sparkContext.broadcast(blob)
    casts = {col: _column_dtype(dtypes[out]) for out, cols in names.items() for col in cols}
    if nullable:  # integer labels as pandas' nullable Int64: <NA> becomes an SQL null
        casts = {c: "Int64" if np.dtype(d).kind == "i" else d for c, d in casts.items()}

    def score(batches: Any) -> Any:
        from pyspark import TaskContext

        session = _scoring.session(key, lambda: shared.value, threads)
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        row = 0  # this partition's rows so far
        for batch in batches:
            points = batch[columns].to_numpy(dtype=np.float64, na_value=np.nan)
            result = _scoring.score(
                session,
                points,
                check,
                spec,
                bad_rows,
                partition=partition,
                first_in_partition=row,
            )
            row += len(batch)
            out = _scoring.columns_of(result, names)
            yield batch.assign(**{c: _as_column(v, casts[c]) for c, v in out.items()})

    return df.mapInPandas(score, schema)


def _as_column(values: np.ndarray, dtype: Any) -> Any:
    if dtype == "Int64":
        import pandas as pd

        return pd.array(values, dtype="Int64")  # NaN becomes <NA>
    return np.asarray(values, dtype=dtype)
