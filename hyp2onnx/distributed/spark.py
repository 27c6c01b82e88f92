"""Hyperbolic XGBoost trained on Spark, and exported graphs scored on Spark.

Training. [`HyperbolicSparkXGBClassifier`][hyp2onnx.distributed.spark.HyperbolicSparkXGBClassifier] and [`HyperbolicSparkXGBRegressor`][hyp2onnx.distributed.spark.HyperbolicSparkXGBRegressor]
follow Spark ML's conventions: ``fit(df)`` returns a fitted model
(`HyperbolicSparkXGBClassifierModel`, `HyperbolicSparkXGBRegressorModel`),
columns are named by ``featuresCol`` (a vector column, or a list of point
columns), ``labelCol`` and ``weightCol``, and the model's ``transform(df)``
appends ``predictionCol`` (and, for classifiers, ``probabilityCol``). ``fit``
projects every partition to Klein coordinates where it lies (``mapInPandas``),
trains with ``xgboost.spark.SparkXGBClassifier`` / ``SparkXGBRegressor`` on
them, then corrects the thresholds as a map-reduce on the executors: each
partition finds every split's largest value routed left and smallest routed
right among its rows (`hyp2onnx.correction.summarise`, the search the
single-machine estimator runs), the summaries merge by element-wise max/min
in a tree reduce on the executors (``RDD.treeReduce``), and the driver
receives one, ``4 * splits`` numbers, however many rows there are. The
single-machine placement then runs on it, so the thresholds are
bit-identical to those of the single-machine estimator
(``tree_space="klein"``) correcting the same booster on the same rows.

The fitted model is a single-machine hyperbolic model (a subclass of
[`hyp2onnx.HyperbolicXGBClassifier`][hyp2onnx.HyperbolicXGBClassifier] / ``Regressor``) that holds the
corrected booster and no Spark session: [`hyp2onnx.to_onnx`][hyp2onnx.to_onnx],
[`hyp2onnx.verify`][hyp2onnx.verification.verify], pickling and ``hyp2onnx convert`` treat it like any
other, and ``predict`` takes numpy points.

The booster is fitted on Klein coordinates (the ``"klein"`` tree space):
reliable on the ray test to a distance of about 6 from the origin. Far points
train on Dask (``tree_space="quantiles"``) or on one machine. LightGBM on Spark
needs SynapseML, a Scala package; it is not supported here.

Scoring. Score a Spark DataFrame's points with an exported graph.

Needs the ``spark`` extra: ``pip install 'hyp2onnx[spark]'`` (pyspark and
pyarrow; Spark itself needs a Java runtime). [`predict`][hyp2onnx.distributed.spark.predict] broadcasts the
graph once and scores every partition with ``mapInPandas``; each executor's
Python worker process builds one onnxruntime session for the graph (cached
by its hash, see `hyp2onnx.distributed._scoring`) and reuses it for every batch and
task it runs (Spark reuses its Python workers by default).
"""

from __future__ import annotations

import importlib
import pickle
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..correction import SplitSummary, correct, from_summary, klein_space, summarise
from ..errors import InvalidPointError
from ..estimators._base import GEOMETRY_DEFAULTS, comparison_of, write_back
from ..estimators._registry import backend_for
from ..estimators._weights import rows_text, weight_error
from ..geometry import n_klein_features, to_klein
from . import _scoring
from ._rows import training_rows

__all__ = [
    "HyperbolicSparkXGBClassifier",
    "HyperbolicSparkXGBClassifierModel",
    "HyperbolicSparkXGBRegressor",
    "HyperbolicSparkXGBRegressorModel",
    "distributed_summary",
    "predict",
]


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
    if dtype.kind == "b":
        return types.BooleanType()
    if dtype.kind in "iu":
        return types.LongType()
    return types.DoubleType()  # float32 outputs are widened exactly


def _column_dtype(dtype: np.dtype) -> np.dtype:
    """The pandas column dtype matching `_spark_type`."""
    if dtype.kind in "iu":
        return np.dtype(np.int64)
    return dtype if dtype.kind in "Ob" else np.dtype(np.float64)


def _check_numeric(df: Any, columns: list[str], *, booleans: bool = False) -> None:
    """A TypeError naming the point columns that are not numeric (``booleans``: nor
    boolean), before Spark runs."""
    types = _pyspark().types
    fields = {f.name: f.dataType for f in df.schema.fields}
    kinds = (types.NumericType, types.BooleanType) if booleans else types.NumericType
    bad = [c for c in columns if not isinstance(fields[c], kinds)]
    if bad:
        shown = ", ".join(f"{c} ({fields[c].simpleString()})" for c in bad[:5])
        raise TypeError(
            f"the {'input' if booleans else 'point'} columns must be numeric; not numeric: "
            f"{shown}. Cast them first, e.g. "
            "df.withColumn(name, pyspark.sql.functions.col(name).cast('double'))."
        )


def predict(
    graph: Any,
    df: Any,
    columns: Any = None,
    *,
    threads: int = 1,
    output_prefix: str = "",
    bad_rows: str = "error",
    check_manifold: bool = True,
    compiled: Any = None,
) -> Any:
    """``df`` with the graph's outputs appended, computed by ``mapInPandas``.

    ``graph`` is an ONNX model exported by hyp2onnx (``onnx.ModelProto``,
    bytes or a path); ``columns`` names ``df``'s point columns, in the
    graph's input order (default: all). The appended columns are ``label`` (string or long)
    and ``probability_<i>`` (double, one per class in the graph's ``classes``
    order), or ``variable`` (``variable_<j>`` for several targets), and any
    other output under its own name (a region tree's ``covered``, boolean,
    and ``region``, long), each
    name preceded by ``output_prefix``. ``threads`` is the intra-op thread
    count of each session (Spark already runs one task per core). Lazy, like
    any Spark transformation.

    A composed graph (`hyp2onnx.compose`) takes its encoder's inputs:
    ``columns`` = {input name: column or list of columns} (default: the
    input's name, ``<name>_<i>`` for the columns of a matrix input); numeric
    and boolean columns; its ``on_manifold`` output is appended too.

    Every batch is checked first, as ``hyp2onnx predict`` checks a file:
    points on the graph's manifold (its geometry or input blocks; skipped
    with ``check_manifold=False``), finite (an SQL null is a missing value:
    refused like NaN), representable in the graph's input type, valid
    categorical codes; a composed graph's inputs each against its type, and
    its rows are also bad where the graph fails on them (an id past an
    embedding table) or returns ``on_manifold`` false. Non-numeric point
    columns are refused at once (TypeError). ``bad_rows="error"`` (the
    default): running the result fails with hyp2onnx's
    [`InvalidPointError`][hyp2onnx.errors.InvalidPointError],
    naming the rows by Spark partition and row within it (Spark reports it as
    a ``PythonException`` whose message holds that line).
    ``bad_rows="null"``: those rows get null outputs, the others their
    answers.

    ``compiled``: the graph's model as a compiled scorer
    (``hyp2onnx.export.compiled.compile_model_lleaves``), which then scores the
    rows in place of the graph, its compiled trees loaded once per worker process.
    """
    _pyspark()  # without pyspark: the error naming the extra, first
    bad_rows = _scoring.check_bad_rows(bad_rows)
    blob, spec, check, key = _scoring.opened(
        graph, check_manifold=check_manifold, compiled=compiled
    )
    layout = check.layout(list(df.columns), columns)
    names = spec.table_columns(list(df.columns), output_prefix)
    points = isinstance(layout, list)
    _check_numeric(
        df,
        layout if points else [c for cs in layout.values() for c in cs],
        booleans=not points,
    )
    schema, casts = _output_schema(df, spec, names, nullable=bad_rows == "null")
    shared = df.sparkSession.sparkContext.broadcast(blob)

    def score(batches: Any) -> Any:
        from pyspark import TaskContext

        if compiled is not None:  # compiled trees, loaded once per worker process
            session = compiled.as_session()
        else:
            session = _scoring.session(key, lambda: shared.value, threads)
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        row = 0  # this partition's rows so far
        for batch in batches:
            result = _scoring.score(
                session,
                check.frame_rows(batch, layout),
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


def _output_schema(
    df: Any, spec: Any, names: dict[str, list[str]], *, nullable: bool
) -> tuple[Any, dict[str, Any]]:
    """``df``'s schema with the appended output columns, and each column's pandas dtype:
    a numpy dtype, or the name of a pandas nullable dtype ("Int64", "boolean") where
    ``bad_rows="null"`` lets integer and bool outputs hold nulls."""
    sql = _pyspark()
    dtypes = {name: dtype for name, dtype, _ in spec.outputs}
    added = [
        sql.types.StructField(col, _spark_type(dtypes[out]), nullable=nullable)
        for out, cols in names.items()
        for col in cols
    ]
    schema = sql.types.StructType([*df.schema.fields, *added])
    casts: dict[str, np.dtype | str] = {
        col: _column_dtype(dtypes[out]) for out, cols in names.items() for col in cols
    }
    if nullable:  # <NA> is an SQL null
        casts = {c: _NULLABLE.get(np.dtype(d).kind, d) for c, d in casts.items()}
    return schema, casts


#: pandas' nullable dtypes of integer and bool outputs that may hold nulls.
_NULLABLE = {"i": "Int64", "b": "boolean"}


def _as_column(values: np.ndarray, dtype: Any) -> Any:
    if dtype in ("Int64", "boolean"):
        import pandas as pd

        return pd.array(values, dtype=dtype)  # NaN becomes <NA>
    return np.asarray(values, dtype=dtype)


# -- training ------------------------------------------------------------------------------

#: Column names of the projected rows (Klein coordinates, label, weight).
_K, _LABEL, _WEIGHT = "__hyp2onnx_k", "__hyp2onnx_label", "__hyp2onnx_weight"
#: Parameters of the Spark estimators that are not XGBoost's.
_SPARK_PARAMS = ("featuresCol", "labelCol", "weightCol", "predictionCol", "probabilityCol")
#: xgboost.spark parameters that configure the Spark job, not the booster.
_JOB_PARAMS = (
    "num_workers",
    "device",
    "use_gpu",
    "force_repartition",
    "repartition_random_shuffle",
)


def _points(df: Any, features: Any) -> tuple[Any, list[str]]:
    """``df`` with its point columns (numeric) and their names: the list ``features``, or the
    entries of the vector (or array) column ``features``, spread into columns."""
    sql = _pyspark()
    types = sql.types
    _check_columns(df, [features] if isinstance(features, str) else list(features), "featuresCol")
    if isinstance(features, str):
        field = df.schema[features].dataType
        from pyspark.ml.functions import vector_to_array
        from pyspark.ml.linalg import VectorUDT

        column = sql.functions.col(features)
        if isinstance(field, VectorUDT):
            column = vector_to_array(column)
        elif not isinstance(field, types.ArrayType):
            raise TypeError(
                f"featuresCol={features!r} must be a vector or array column (or give a list "
                f"of point columns), got {field.simpleString()}."
            )
        width = len(df.select(column.alias("v")).first()["v"])
        names = [f"__hyp2onnx_x{i}" for i in range(width)]
        spread = [column.getItem(i).cast("double").alias(n) for i, n in enumerate(names)]
        return df.select(*spread, *[c for c in df.columns if c != features]), names
    names = list(features)
    _check_numeric(df, names)
    return df, names


def _check_columns(df: Any, names: list[str], param: str) -> None:
    """A ValueError naming the columns ``param`` gives that ``df`` lacks, and those it has."""
    missing = [n for n in names if n not in df.columns]
    if missing:
        shown = ", ".join(map(repr, missing))
        # Spark itself resolves names case-insensitively by default; these are matched exactly.
        lower = {c.lower(): c for c in df.columns}
        near = [lower[n.lower()] for n in missing if n.lower() in lower]
        hint = f" (names are matched exactly: {', '.join(map(repr, near))}?)" if near else ""
        raise ValueError(
            f"{param}: the DataFrame has no column {shown}; its columns: "
            f"{', '.join(df.columns) or '(none)'}{hint}."
        )


def _check_labels_and_weights(
    df: Any, label: str, weight: str | None, *, classes: bool = False
) -> list[Any] | None:
    """A ValueError naming the rows whose label is null or whose weight is unusable; with
    ``classes``, the distinct labels (else None).

    One aggregate pass, which also gathers the labels; on a failure a second
    one finds the first rows, numbered from 0 in the DataFrame's own order
    (partition by partition). Without this, xgboost.spark fails with "failed
    barrier ResultStage" and the label set with a TypeError comparing None.
    """
    sql = _pyspark()
    F = sql.functions
    missing = F.col(label).isNull()
    if isinstance(df.schema[label].dataType, (sql.types.DoubleType, sql.types.FloatType)):
        missing = missing | F.isnan(F.col(label))  # NaN: no label either
        if not classes:  # a regressor's target must be finite too
            missing = missing | F.col(label).isin(float("inf"), float("-inf"))
    kinds = {"label null": missing}
    if weight is not None:
        w = F.col(weight).try_cast("double")  # cast() fails on text in ANSI mode
        kinds.update(
            {
                "not a number": F.col(weight).isNotNull() & w.isNull(),
                "null": F.col(weight).isNull(),
                "NaN": F.isnan(w),
                "infinite": w.isin(float("inf"), float("-inf")),
                "negative": w < 0,
            }
        )
    counts = [F.sum(F.coalesce(c, F.lit(False)).cast("long")).alias(k) for k, c in kinds.items()]
    counts.append(F.count(F.lit(1)).alias("rows"))
    if weight is not None:
        counts.append(F.sum((F.col(weight).try_cast("double") != 0).cast("long")).alias("nonzero"))
    if classes:
        counts.append(F.collect_set(F.col(label)).alias("classes"))
    found = df.agg(*counts).first().asDict()
    bad = [k for k in kinds if found[k]]
    first: dict[str, list[int]] = {k: [] for k in bad}
    if bad:  # only now: where they are
        flags = df.select(*[F.coalesce(kinds[k], F.lit(False)).alias(k) for k in bad])
        for row, i in flags.rdd.zipWithIndex().filter(lambda r: any(r[0])).take(100):
            for k in bad:
                if row[k] and len(first[k]) < 5:
                    first[k].append(i)
    if "label null" in bad:
        raise ValueError(
            f"labelCol {label!r} holds nulls at {rows_text(first['label null'], found['label null'])} "
            f"(null or NaN{'' if classes else ' or infinite'}; counting from 0 in the DataFrame's "
            "order): every training row needs a label; "
            "drop or fill them first, e.g. df.dropna(subset=[labelCol])."
        )
    labels = list(found["classes"]) if classes else None
    if weight is None:
        return labels
    problems = [f"{k} at {rows_text(first[k], found[k])}" for k in bad]
    error = weight_error(
        problems,
        int(found["nonzero"] or 0),
        int(found["rows"]),
        negative_ok=False,
        what=f"weightCol {weight!r}",
        backend="xgboost models",
    )
    if error is not None:
        raise ValueError(f"{error} (rows counted from 0 in the DataFrame's order)")
    return labels


class _Projection:
    """The ``mapInPandas`` step: Klein coordinates, encoded labels and weights of a partition."""

    def __init__(self, model: Any, columns: list[str], label: str, weight: Any, labels: Any):
        self.model, self.columns, self.label, self.weight = model, columns, label, weight
        self.labels = labels

    def __call__(self, batches: Any) -> Any:
        import pandas as pd
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        first = 0
        m = self.model
        for batch in batches:
            X = batch[self.columns].to_numpy(dtype=np.float64, na_value=np.nan)
            try:
                k = to_klein(
                    X, m.input_geometry, m.curvature, m.timelike_dim, check=m.check_manifold
                )
            except InvalidPointError as exc:  # named by partition and row within it
                where = dict(partition=partition, first_in_partition=first)
                raise InvalidPointError(_scoring.locate(str(exc), **where)) from None
            first += len(batch)
            out = {f"{_K}{i}": k[:, i] for i in range(k.shape[1])}
            y = batch[self.label].to_numpy()
            if self.labels is not None:
                index = np.minimum(np.searchsorted(self.labels, y), self.labels.size - 1)
                if np.any(self.labels[index] != y):
                    raise ValueError(f"labels {np.setdiff1d(y, self.labels)[:5]} are unknown")
                y = index
            out[_LABEL] = np.asarray(y, dtype=np.float64)
            if self.weight is not None:
                out[_WEIGHT] = batch[self.weight].to_numpy(dtype=np.float64)
            yield pd.DataFrame(out)


class _Summary:
    """The ``mapInPandas`` map step of the correction: one partition's split summary."""

    def __init__(self, shared: Any, width: int, weighted: bool):
        self.shared, self.width, self.weighted = shared, width, weighted

    def __call__(self, batches: Any) -> Any:
        import pandas as pd

        backend_type, fitted, trees = self.shared.value
        backend = backend_type()
        parts = list(batches)
        frame = pd.concat(parts) if parts else pd.DataFrame()
        columns = [f"{_K}{i}" for i in range(self.width)]
        X = frame[columns].to_numpy(dtype=np.float64) if len(frame) else np.empty((0, self.width))
        y = frame[_LABEL].to_numpy() if len(frame) else np.empty(0)
        w = frame[_WEIGHT].to_numpy() if self.weighted and len(frame) else None
        rows = training_rows(backend, fitted, X, y, w)
        summary = summarise(trees, rows, backend.op)
        yield pd.DataFrame({"summary": [pickle.dumps(summary)]})


def distributed_summary(df: Any, backend: Any, fitted: Any, width: int, weighted: bool) -> Any:
    """The split summary of the training rows of ``fitted`` held in ``df`` (projected rows:
    Klein columns, label, weight): one summary per partition on the executors, merged
    there by ``treeReduce``; the driver receives one `SplitSummary`."""
    sql = _pyspark()
    context = df.sparkSession.sparkContext
    shared = context.broadcast((type(backend), fitted, backend.read_trees(fitted)))
    schema = sql.types.StructType([sql.types.StructField("summary", sql.types.BinaryType())])
    try:
        summaries = df.mapInPandas(_Summary(shared, width, weighted), schema).rdd
        return summaries.map(lambda row: pickle.loads(row[0])).treeReduce(SplitSummary.merge)
    finally:
        shared.unpersist()


class _SparkEstimator:
    """A hyperbolic XGBoost estimator trained with ``xgboost.spark`` (Spark ML conventions)."""

    _model_name: ClassVar[str]
    _spark_class: ClassVar[str]
    _classifier: ClassVar[bool]

    def __init__(
        self,
        *,
        featuresCol: Any = "features",
        labelCol: str = "label",
        weightCol: str | None = None,
        predictionCol: str = "prediction",
        probabilityCol: str = "probability",
        input_geometry: str = GEOMETRY_DEFAULTS["input_geometry"],
        curvature: float = GEOMETRY_DEFAULTS["curvature"],
        timelike_dim: int = GEOMETRY_DEFAULTS["timelike_dim"],
        midpoint: str = GEOMETRY_DEFAULTS["midpoint"],
        check_manifold: bool = GEOMETRY_DEFAULTS["check_manifold"],
        **xgb_params: Any,
    ) -> None:
        self.featuresCol, self.labelCol, self.weightCol = featuresCol, labelCol, weightCol
        self.predictionCol, self.probabilityCol = predictionCol, probabilityCol
        self.input_geometry, self.curvature, self.timelike_dim = (
            input_geometry,
            curvature,
            timelike_dim,
        )
        self.midpoint, self.check_manifold = midpoint, check_manifold
        self.xgb_params = dict(xgb_params)

    def getParams(self) -> dict[str, Any]:
        """Every parameter (Spark columns, geometry, XGBoost's) by name."""
        names = (*_SPARK_PARAMS, "input_geometry", "curvature", "timelike_dim", "midpoint")
        return {
            **{n: getattr(self, n) for n in names},
            "check_manifold": self.check_manifold,
            **self.xgb_params,
        }

    def setParams(self, **params: Any) -> _SparkEstimator:
        for name, value in params.items():
            if hasattr(self, name) and name != "xgb_params":
                setattr(self, name, value)
            else:
                self.xgb_params[name] = value
        return self

    def copy(self, extra: dict | None = None) -> _SparkEstimator:
        return type(self)(**{**self.getParams(), **(extra or {})})

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.xgb_params.items())
        return f"{type(self).__name__}(featuresCol={self.featuresCol!r}, {shown})"

    def fit(self, df: Any) -> Any:
        """Train on the Spark DataFrame ``df`` of hyperbolic points; the fitted model."""
        import xgboost

        sql = _pyspark()
        _check_columns(df, [self.labelCol], "labelCol")
        if self.weightCol is not None:
            _check_columns(df, [self.weightCol], "weightCol")
        points, columns = _points(df, self.featuresCol)
        found = _check_labels_and_weights(
            points, self.labelCol, self.weightCol, classes=self._classifier
        )
        local_class = xgboost.XGBClassifier if self._classifier else xgboost.XGBRegressor
        known = set(local_class().get_params())
        native = {k: v for k, v in self.xgb_params.items() if k in known}
        model = self._local_model(native, len(columns))
        d = n_klein_features(len(columns), self.input_geometry)
        labels = None
        if found is not None:
            labels = np.unique(np.array(found))
            from sklearn.utils.multiclass import check_classification_targets

            check_classification_targets(labels)
        fields = [sql.types.StructField(f"{_K}{i}", sql.types.DoubleType()) for i in range(d)]
        fields.append(sql.types.StructField(_LABEL, sql.types.DoubleType()))
        if self.weightCol is not None:
            fields.append(sql.types.StructField(_WEIGHT, sql.types.DoubleType()))
        project = _Projection(model, columns, self.labelCol, self.weightCol, labels)
        klein = points.mapInPandas(project, sql.types.StructType(fields)).cache()
        try:
            fitted = local_class(**native)
            fitted.load_model(self._trained_booster(klein, d))
            backend = backend_for(fitted)
            backend.to_ensemble(fitted)  # refuse now what export would refuse
            summary = distributed_summary(klein, backend, fitted, d, self.weightCol is not None)
        finally:
            klein.unpersist()
        trees = backend.read_trees(fitted)
        space = klein_space(trees, summary, d, backend.compare_dtype, backend.zero_band)
        comparison = comparison_of(backend)
        rules = model._midpoint_rules()
        done = correct(
            trees, space, from_summary(trees, summary, comparison, rules), comparison, rules
        )
        model.estimator_, model.correction_, model.split_index_, model.input_dtype_ = write_back(
            backend, fitted, done
        )
        model.summary_nbytes_ = summary.nbytes
        if self._classifier:
            model._labels = labels
            model.classes_ = labels
        model.n_outputs_ = 1
        for name in _SPARK_PARAMS:
            setattr(model, name, getattr(self, name))
        return model

    def _local_model(self, native: dict[str, Any], n_features: int) -> Any:
        """The single-machine twin that receives the corrected booster, its parameters checked."""
        model = (globals().get(self._model_name) or __getattr__(self._model_name))(
            input_geometry=self.input_geometry,
            curvature=self.curvature,
            timelike_dim=self.timelike_dim,
            midpoint=self.midpoint,
            check_manifold=self.check_manifold,
            tree_space="klein",
            **native,
        )
        model._validate_params()
        model.n_features_in_ = n_features
        return model

    def _trained_booster(self, klein: Any, d: int) -> bytearray:
        """xgboost.spark's booster trained on the projected rows, as UBJSON bytes."""
        from xgboost import spark as xspark

        spark_class = getattr(xspark, self._spark_class)
        trainer = spark_class(
            features_col=[f"{_K}{i}" for i in range(d)],
            label_col=_LABEL,
            **({} if self.weightCol is None else {"weight_col": _WEIGHT}),
            **self.xgb_params,
        )
        return bytearray(trainer.fit(klein).get_booster().save_raw(raw_format="ubj"))


class _SparkModel:
    """What the fitted Spark models add to their single-machine twins: ``transform(df)``."""

    featuresCol: Any = "features"
    predictionCol: str = "prediction"
    probabilityCol: str = "probability"
    # What the single-machine twin (after this mixin in the MRO) provides; annotations
    # only, so that nothing here shadows its definitions (nor makes hasattr(self,
    # "classes_") true for regressors).
    classes_: np.ndarray
    predict: Callable[[Any], np.ndarray]
    predict_proba: Callable[[Any], np.ndarray]

    def transform(self, df: Any) -> Any:
        """``df`` with ``predictionCol`` (and ``probabilityCol``: an array of class
        probabilities in ``classes_`` order) appended, by ``mapInPandas``."""
        sql = _pyspark()
        types = sql.types
        points, columns = _points(df, self.featuresCol)
        classifier = hasattr(self, "classes_")
        if classifier:
            kind = np.asarray(self.classes_).dtype
            label_type = _spark_type(kind if kind.kind in "iO" else np.dtype(np.float64))
            if kind.kind == "U":
                label_type = types.StringType()
        else:
            label_type = types.DoubleType()
        added = [types.StructField(self.predictionCol, label_type)]
        if classifier:
            added.append(
                types.StructField(self.probabilityCol, types.ArrayType(types.DoubleType()))
            )
        keep = [f for f in points.schema.fields if not f.name.startswith("__hyp2onnx_x")]
        schema = types.StructType([*keep, *added])
        model, names = self, [f.name for f in keep]

        def score(batches: Any) -> Any:
            for batch in batches:
                X = batch[columns].to_numpy(dtype=np.float64, na_value=np.nan)
                out = batch[names].copy()
                out[model.predictionCol] = model.predict(X)
                if classifier:
                    out[model.probabilityCol] = list(model.predict_proba(X))
                yield out

        return points.mapInPandas(score, schema)


class _SparkXGBClassifier(_SparkEstimator):
    _model_name = "HyperbolicSparkXGBClassifierModel"
    _spark_class = "SparkXGBClassifier"
    _classifier = True


class _SparkXGBRegressor(_SparkEstimator):
    _model_name = "HyperbolicSparkXGBRegressorModel"
    _spark_class = "SparkXGBRegressor"
    _classifier = False


class HyperbolicSparkXGBClassifier(_SparkXGBClassifier):
    """Hyperbolic XGBoost classifier trained on Spark (``xgboost.spark``); see
    [`hyp2onnx.spark`][hyp2onnx.distributed.spark]. ``fit(df)`` returns a `HyperbolicSparkXGBClassifierModel`.

    ``featuresCol``: a vector (or array) column of hyperbolic points, or a list of
    point columns in order; ``labelCol``: labels (any values, strings too);
    ``weightCol``: sample weights (optional). ``input_geometry``, ``curvature``,
    ``timelike_dim``, ``midpoint``, ``check_manifold``: as for
    [`hyp2onnx.HyperbolicXGBClassifier`][hyp2onnx.HyperbolicXGBClassifier]. Every other keyword goes to
    ``xgboost.spark.SparkXGBClassifier`` (``n_estimators``, ``max_depth``,
    ``num_workers``, ...); the booster's own ones are kept on the fitted model.
    """


class HyperbolicSparkXGBRegressor(_SparkXGBRegressor):
    """Hyperbolic XGBoost regressor trained on Spark (``xgboost.spark``); see
    [`hyp2onnx.spark`][hyp2onnx.distributed.spark] and [`HyperbolicSparkXGBClassifier`][hyp2onnx.distributed.spark.HyperbolicSparkXGBClassifier] for the parameters.
    ``fit(df)`` returns a `HyperbolicSparkXGBRegressorModel`."""


#: The fitted models: what they add, and the single-machine estimator they extend.
_MODELS = {
    "HyperbolicSparkXGBClassifierModel": (_SparkModel, "HyperbolicXGBClassifier"),
    "HyperbolicSparkXGBRegressorModel": (_SparkModel, "HyperbolicXGBRegressor"),
}


def __getattr__(name: str) -> Any:
    """The fitted model classes, built on first use (they need xgboost, scoring does not)."""
    if name not in _MODELS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    adds, single = _MODELS[name]
    base = getattr(importlib.import_module("..estimators", __package__), single)
    doc = (
        f"A hyperbolic XGBoost model trained on Spark: a {single} (exports, verifies and "
        "pickles like one, without any Spark session) with ``transform(df)`` for Spark "
        "DataFrames."
    )
    cls = type(name, (adds, base), {"__doc__": doc, "__module__": __name__})
    cls.__qualname__ = name
    globals()[name] = cls  # built once; pickle finds it by name
    return cls


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODELS])
