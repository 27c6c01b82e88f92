"""hyp2onnx.spark on a real local[2] Spark session (pyspark with the installed JDK).

Oracle: onnxruntime run on the whole array in this process, on one thread as the
executors' sessions run (predict's default): the default (fast) graph adds the trees
in the order onnxruntime's threads take them, so only then must values agree bit for
bit.
"""

from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest

pytest.importorskip("pyspark", reason="the 'spark' extra is not installed")
pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
]

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs a Java runtime (java on PATH or JAVA_HOME)", allow_module_level=True)

from _boosting_data import as_points, klein_with_ties, labels

import hyp2onnx
import hyp2onnx.spark as hspark
from hyp2onnx.distributed import _scoring
from hyp2onnx.verification import run_onnx


def _model(task: str):
    k = klein_with_ties(2000, 2, seed=11)
    X = as_points(k, "hyperboloid")
    if task == "anomaly":  # isolation forests score like any other model
        model = hyp2onnx.HyperbolicIsolationForest(n_estimators=20, random_state=0)
        return hyp2onnx.to_onnx(model.fit(X)), X
    if task == "rotation":  # every tree in its own frame: the graph's frame chain per partition
        y = labels(k, "multiclass", seed=11)
        model = hyp2onnx.HyperbolicRotationForestClassifier(
            n_estimators=8, max_depth=6, random_state=0
        )
        return hyp2onnx.to_onnx(model.fit(X, y)), X
    y = labels(k, task, seed=11)
    if task == "multiclass":
        y = np.array(["a", "b", "c"])[y]
        model = hyp2onnx.HyperbolicXGBClassifier(n_estimators=5, max_depth=3)
    else:
        model = hyp2onnx.HyperbolicLGBMRegressor(n_estimators=5, num_leaves=7, verbose=-1)
    return hyp2onnx.to_onnx(model.fit(X, y)), X


@pytest.mark.parametrize("task", ["multiclass", "regression", "anomaly", "rotation"])
def test_spark_scores_like_onnxruntime(spark, task):
    graph, X = _model(task)
    import pandas as pd

    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"]).assign(id=np.arange(X.shape[0]))
    df = spark.createDataFrame(frame).repartition(3)
    scored = hspark.predict(graph, df, ["x0", "x1", "x2"]).toPandas().sort_values("id")
    want = run_onnx(graph, X, threads=1)
    spec = _scoring.OutputSpec.of(graph.SerializeToString())
    for out, cols in spec.column_names().items():
        value = want[out].reshape(X.shape[0], -1)
        for i, col in enumerate(cols):
            got = scored[col].to_numpy()
            np.testing.assert_array_equal(got.astype(value.dtype), value[:, i])
    np.testing.assert_array_equal(scored[["x0", "x1", "x2"]].to_numpy(), X)


def test_spark_refuses_clashes_and_bad_columns(spark):
    graph, X = _model("multiclass")
    import pandas as pd

    df = spark.createDataFrame(pd.DataFrame(X[:10], columns=["x0", "x1", "label"]))
    with pytest.raises(ValueError, match="output_prefix"):
        hspark.predict(graph, df, ["x0", "x1", "label"])
    assert "p_label" in hspark.predict(graph, df, ["x0", "x1", "label"], output_prefix="p_").columns
    with pytest.raises(ValueError, match="not in the DataFrame"):
        hspark.predict(graph, df, ["x0", "x1", "nope"])
    with pytest.raises(ValueError, match="graph takes"):
        hspark.predict(graph, df, ["x0", "x1"])


def test_missing_extra_is_named(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(ImportError, match=r"hyp2onnx\[spark\]"):
        hspark._pyspark()


def _bad_frame(spark, X):
    """A DataFrame of X with an SQL null, NaN, infinity and an off-manifold row (ids 5, 6,
    7, 8), in one partition so that the rows' numbers in it are known."""
    import pandas as pd
    from pyspark.sql import functions as F

    bad = X[:300].copy()
    bad[6, 1], bad[7, 2], bad[8, 0] = np.nan, np.inf, bad[8, 0] + 0.5
    frame = pd.DataFrame(bad, columns=["x0", "x1", "x2"]).assign(id=np.arange(300))
    df = spark.createDataFrame(frame).coalesce(1)
    return df.withColumn("x1", F.when(F.col("id") == 5, None).otherwise(F.col("x1"))), bad


def test_spark_refuses_bad_rows_naming_them(spark):
    from pyspark.sql import functions as F

    graph, X = _model("multiclass")
    df, _ = _bad_frame(spark, X)
    scored = hspark.predict(graph, df, ["x0", "x1", "x2"])  # lazy: refused when run
    # SQL nulls are missing values, refused as NaN is.
    with pytest.raises(
        Exception,
        match=r"InvalidPointError: 3 row\(s\) contain NaN or infinity "
        r"\(rows 5, 6, 7 of partition 0\)",
    ):
        scored.collect()
    off = df.filter(~F.col("id").isin([5, 6, 7])).coalesce(1)  # id 8 is now row 5
    with pytest.raises(
        Exception,
        match=r"InvalidPointError: 1 row\(s\) are off the hyperboloid.*"
        r"\(rows 5 of partition 0\)",
    ):
        hspark.predict(graph, off, ["x0", "x1", "x2"]).collect()
    with pytest.raises(TypeError, match=r"not numeric: x1 \(string\)"):
        hspark.predict(graph, df.withColumn("x1", F.col("x1").cast("string")), ["x0", "x1", "x2"])
    with pytest.raises(ValueError, match="bad_rows must be"):
        hspark.predict(graph, df, ["x0", "x1", "x2"], bad_rows="skip")


def test_spark_fit_names_missing_columns_null_labels_and_bad_weights(spark):
    """Checked on the driver before xgboost.spark runs: it failed with a bare KeyError, a
    TypeError comparing None, or "failed barrier ResultStage" for every bad weight."""
    import pandas as pd
    from pyspark.ml.feature import VectorAssembler
    from pyspark.sql import functions as F

    X, y, _ = _training_data("multiclass")
    frame = pd.DataFrame(X[:200], columns=["x0", "x1", "x2"]).assign(
        y=y[:200], w=np.ones(200), id=np.arange(200)
    )
    df = spark.createDataFrame(frame).coalesce(2)
    est = hspark.HyperbolicSparkXGBClassifier
    with pytest.raises(ValueError, match=r"featuresCol: .*no column 'features'; its columns: x0"):
        est(labelCol="y").fit(df)
    with pytest.raises(ValueError, match=r"no column 'x9'; its columns: x0, x1, x2, y, w, id"):
        est(featuresCol=["x0", "x1", "x9"], labelCol="y").fit(df)
    with pytest.raises(ValueError, match=r"labelCol: .*no column 'label'"):
        est(featuresCol=["x0", "x1", "x2"]).fit(df)
    vectors = VectorAssembler(inputCols=["x0", "x1", "x2"], outputCol="v").transform(df)
    with pytest.raises(ValueError, match=r"no column 'features'; its columns: .*\bv\b"):
        est(labelCol="y").fit(vectors)
    cols = ["x0", "x1", "x2"]
    nulls = df.withColumn("y", F.when(F.col("id").isin(3, 150), None).otherwise(F.col("y")))
    with pytest.raises(ValueError, match=r"labelCol 'y' holds nulls at rows 3, 150\b"):
        est(featuresCol=cols, labelCol="y").fit(nulls)
    bad = df.withColumn(
        "w",
        F.when(F.col("id") == 4, F.lit(None))
        .when(F.col("id").isin(7, 120), F.lit(float("nan")))
        .when(F.col("id") == 130, F.lit(float("inf")))
        .when(F.col("id").isin(9, 199), F.lit(-1.0))
        .otherwise(F.col("w")),
    )
    with pytest.raises(ValueError, match=r"weightCol 'w' must be finite and non-negative") as e:
        est(featuresCol=cols, labelCol="y", weightCol="w").fit(bad)
    for found in ("null at row 4;", "NaN at rows 7, 120;", "infinite at row 130;"):
        assert found in str(e.value), e.value
    assert "negative at rows 9, 199." in str(e.value), e.value
    with pytest.raises(ValueError, match=r"every weight is zero \(200 rows\)"):
        est(featuresCol=cols, labelCol="y", weightCol="w").fit(df.withColumn("w", F.lit(0.0)))


def test_spark_fit_names_nan_labels_infinite_targets_and_text_weights(spark):
    """Round 5 (issue 39, re-test): a NaN label gave scikit-learn's "Input y contains NaN"
    without rows, a NaN or infinite regression target a Py4JJavaError from the barrier
    stage, a weight 'abc' Spark's own NumberFormatException; a column named in another
    case, which Spark itself would resolve, is named with the exact match."""
    import pandas as pd
    from pyspark.sql import functions as F

    X, y, _ = _training_data("regression")
    frame = pd.DataFrame(X[:200], columns=["x0", "x1", "x2"]).assign(
        y=(y[:200] > 0).astype(float), w=np.ones(200), id=np.arange(200)
    )
    df = spark.createDataFrame(frame).coalesce(2)
    cols = ["x0", "x1", "x2"]
    nan = df.withColumn("y", F.when(F.col("id").isin(3, 150), float("nan")).otherwise(F.col("y")))
    with pytest.raises(ValueError, match=r"labelCol 'y' holds nulls at rows 3, 150 \(null or NaN;"):
        hspark.HyperbolicSparkXGBClassifier(featuresCol=cols, labelCol="y").fit(nan)
    inf = df.withColumn("y", F.when(F.col("id") == 4, float("-inf")).otherwise(F.col("y")))
    for bad, rows in ((nan, "rows 3, 150"), (inf, "row 4")):
        with pytest.raises(ValueError, match=rf"holds nulls at {rows} \(null or NaN or infinite;"):
            hspark.HyperbolicSparkXGBRegressor(featuresCol=cols, labelCol="y").fit(bad)
    text = df.withColumn(
        "w", F.when(F.col("id") == 5, F.lit("abc")).otherwise(F.col("w").cast("string"))
    )
    with pytest.raises(ValueError, match=r"weightCol 'w' .* found not a number at row 5\."):
        hspark.HyperbolicSparkXGBClassifier(featuresCol=cols, labelCol="y", weightCol="w").fit(text)
    with pytest.raises(
        ValueError, match=r"no column 'X0'; its columns: .* \(names are matched exactly: 'x0'\?\)"
    ):
        hspark.HyperbolicSparkXGBClassifier(featuresCol=["X0", "x1", "x2"], labelCol="y").fit(df)


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_spark_gives_null_outputs_for_bad_rows_on_request(spark, task):
    graph, X = _model(task)
    df, bad = _bad_frame(spark, X)
    scored = hspark.predict(graph, df, ["x0", "x1", "x2"], bad_rows="null").toPandas()
    scored = scored.sort_values("id")
    spec = _scoring.OutputSpec.of(graph.SerializeToString())
    good = np.setdiff1d(np.arange(300), [5, 6, 7, 8])
    want = run_onnx(graph, bad[good], threads=1)
    for out, cols in spec.column_names().items():
        value = want[out].reshape(good.size, -1)
        for i, col in enumerate(cols):
            got = scored[col].to_numpy()
            np.testing.assert_array_equal(
                np.flatnonzero(scored[col].isna().to_numpy()), [5, 6, 7, 8]
            )
            np.testing.assert_array_equal(got[good].astype(value.dtype), value[:, i])


# -- training on Spark ---------------------------------------------------------------------

TRAIN = dict(n_estimators=5, max_depth=3, num_workers=1)


def _training_data(task: str):
    k = klein_with_ties(1500, 2, seed=12)
    y = labels(k, task, seed=12)
    if task == "multiclass":
        y = np.array(["a", "b", "c"])[y]
    w = np.where(np.random.default_rng(12).random(k.shape[0]) < 0.1, 0.0, 1.0)
    return as_points(k, "hyperboloid"), y, w


@pytest.fixture(scope="module")
def spark_fits(spark):
    """Each Spark model trained once, with the booster as trained and the summary."""
    import copy

    import pandas as pd
    from pyspark.ml.feature import VectorAssembler

    cache = {}

    def get(task: str):
        if task in cache:
            return cache[task]
        X, y, w = _training_data(task)
        frame = pd.DataFrame(X, columns=["x0", "x1", "x2"]).assign(y=y, w=w, id=np.arange(len(y)))
        df = spark.createDataFrame(frame).repartition(3)
        recorded = {}
        original = hspark.distributed_summary

        def record(df, backend, fitted, width, weighted):
            recorded.update(fitted=copy.deepcopy(fitted))
            recorded["summary"] = original(df, backend, fitted, width, weighted)
            return recorded["summary"]

        hspark.distributed_summary = record
        try:
            if task == "multiclass":  # point columns
                est = hspark.HyperbolicSparkXGBClassifier(
                    featuresCol=["x0", "x1", "x2"], labelCol="y", weightCol="w", **TRAIN
                )
            else:  # a vector column, Spark ML's default name
                df = VectorAssembler(inputCols=["x0", "x1", "x2"], outputCol="features").transform(
                    df
                )
                est = hspark.HyperbolicSparkXGBRegressor(labelCol="y", weightCol="w", **TRAIN)
            model = est.fit(df)
        finally:
            hspark.distributed_summary = original
        cache[task] = model, recorded, (X, y, w), df
        return cache[task]

    return get


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_spark_thresholds_bit_identical_to_the_single_machine_estimator(spark_fits, task):
    """Oracle: the single-machine estimator (tree_space="klein") correcting the very booster
    Spark trained, on all its rows in this process."""
    from hyp2onnx.correction.tree_space import TreeSpace
    from hyp2onnx.estimators import backend_for

    model, recorded, (X, y, w), _ = spark_fits(task)
    fitted = recorded["fitted"]
    backend = backend_for(fitted)
    if task == "multiclass":
        single = hyp2onnx.HyperbolicXGBClassifier(tree_space="klein", n_estimators=5, max_depth=3)
        y_train = np.unique(y, return_inverse=True)[1]
        assert list(model.classes_) == ["a", "b", "c"]
    else:
        single = hyp2onnx.HyperbolicXGBRegressor(tree_space="klein", n_estimators=5, max_depth=3)
        y_train = y
    Xk = model.to_klein(X)
    space = TreeSpace.fit(Xk[w != 0], "klein", backend.compare_dtype)
    (want_model, want_report, want_index, want_dtype), _ = single._correct(
        backend, fitted, space.transform(Xk), y_train, w, space
    )
    assert model.correction_ == want_report and want_report.n_moved > 0
    assert model.split_index_ is None and want_index is None
    assert model.input_dtype_ == want_dtype
    for got, want in zip(
        backend.read_trees(model.estimator_), backend.read_trees(want_model), strict=True
    ):
        np.testing.assert_array_equal(got.threshold.view(np.int64), want.threshold.view(np.int64))
    # The driver received one summary: 4 float32 numbers per split.
    n_splits = sum(int((t.feature >= 0).sum()) for t in backend.read_trees(fitted))
    assert recorded["summary"].nbytes == model.summary_nbytes_ == 4 * 4 * n_splits


@pytest.mark.parametrize("task", ["multiclass", "regression"])
def test_spark_model_exports_pickles_converts_and_transforms(spark_fits, task, tmp_path):
    import pickle

    from hyp2onnx.cli import main

    model, _, (X, _, _), df = spark_fits(task)
    graph = hyp2onnx.to_onnx(model, dtype="float64")
    assert hyp2onnx.verify(model, graph, X).ok
    blob = pickle.dumps(model)  # no Spark session inside
    assert b"SparkSession" not in blob and b"SparkContext" not in blob
    loaded = pickle.loads(blob)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    path = tmp_path / "model.pkl"
    path.write_bytes(blob)
    np.save(tmp_path / "X.npy", X[:300])
    out = tmp_path / "model.onnx"
    args = ["convert", str(path), "-o", str(out), "--dtype", "float64"]
    assert main([*args, "--check", str(tmp_path / "X.npy")]) == 0
    scored = model.transform(df).toPandas().sort_values("id")
    np.testing.assert_array_equal(scored["prediction"].to_numpy(), model.predict(X))
    if task == "multiclass":
        np.testing.assert_array_equal(np.stack(scored["probability"]), model.predict_proba(X))
