"""Property test: the distributed scorers answer as the model would, or refuse the rows.

Generated tables of hyperboloid points, some rows made bad (NaN, infinity,
SQL null, off the hyperboloid, on its lower sheet, overflowing finite values
such as ``[1e200, 1, 0]``), go through ``hyp2onnx.dask.predict`` (a real
LocalCluster) and ``hyp2onnx.spark.predict`` (a local[2] Spark session) in
both ``bad_rows`` modes. The oracle says which rows are bad in exact rational
arithmetic (no square can overflow there), independent of
`hyp2onnx.geometry`: ``"error"`` must refuse exactly when a row is bad
and name only bad rows, by their row number; ``"null"`` must give null
outputs for exactly the bad rows and onnxruntime's answers for the others.

The overflow cases need the overflow-safe manifold check of
`hyp2onnx.geometry.check_points` (issue 23, item 1).
"""

from __future__ import annotations

import re
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("distributed", reason="the 'dask' extra is not installed")

import dask
import dask.array as da
import pandas as pd

import hyp2onnx
import hyp2onnx.dask as hdask
from hyp2onnx.geometry import DEFAULT_RTOL
from hyp2onnx.verification import run_onnx

KINDS = ("nan", "inf", "-inf", "off", "sheet")
SETTINGS = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _hyperboloid(k: np.ndarray) -> np.ndarray:
    x0 = 1.0 / np.sqrt(1.0 - np.sum(k * k, axis=1))
    return np.column_stack([x0, x0[:, None] * k])


@pytest.fixture(scope="module")
def graph():
    """A float64 graph (so far points reach the manifold check, not the float32 cast)."""
    rng = np.random.default_rng(0)
    k = rng.uniform(-0.6, 0.6, size=(400, 2))
    y = (k[:, 0] > 0).astype(np.int64) + (k[:, 1] > 0.2)
    model = hyp2onnx.HyperbolicXGBClassifier(n_estimators=3, max_depth=3).fit(_hyperboloid(k), y)
    return hyp2onnx.to_onnx(model, dtype="float64")


def _is_bad(row: np.ndarray) -> bool:
    """Whether the model must refuse ``row`` (curvature -1): exact arithmetic."""
    if not np.isfinite(row).all():
        return True
    x0, xs = Fraction(float(row[0])), [Fraction(float(v)) for v in row[1:]]
    if x0 <= 0:
        return True
    s = sum(v * v for v in xs)
    return abs(x0 * x0 - s - 1) > Fraction(DEFAULT_RTOL) * (x0 * x0 + s)


@st.composite
def tables(draw, kinds=KINDS, overflow=False):
    """(points, bad rows, partition sizes): valid points with some rows spoiled."""
    n = draw(st.integers(1, 12))
    k = np.array(
        draw(
            st.lists(st.tuples(st.floats(-0.6, 0.6), st.floats(-0.6, 0.6)), min_size=n, max_size=n)
        )
    )
    X = _hyperboloid(k)
    for i in range(n):
        kind = draw(st.sampled_from(("ok", "ok", *kinds, *(("overflow",) if overflow else ()))))
        column = draw(st.integers(0, 2))
        if kind in ("nan", "inf", "-inf"):
            X[i, column] = float(kind)
        elif kind == "off":
            X[i, column] += draw(st.sampled_from((0.5, -0.25, 3.0)))
        elif kind == "sheet":
            X[i, 0] = -X[i, 0]
        elif kind == "overflow":  # finite, but x0 * x0 overflows float64
            big = draw(st.floats(1.4e154, 1.7e308))
            X[i] = [big, draw(st.sampled_from((1.0, big, -big / 3))), 0.0]
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=2)))
    sizes = tuple(np.diff([0, *cuts, n]).tolist())
    bad = [i for i in range(n) if _is_bad(X[i])]
    return X, bad, sizes


def _named_rows(message: str) -> list[int]:
    found = re.search(r"\(rows ([0-9, .]+)", message)
    assert found, message
    return [int(r) for r in re.findall(r"\d+", found.group(1))]


def _check_dask(graph, client, table) -> None:
    X, bad, sizes = table
    good = np.setdiff1d(np.arange(X.shape[0]), bad)
    points = da.from_array(X, chunks=(sizes, -1))
    if bad:
        with pytest.raises(hyp2onnx.InvalidPointError) as caught:
            dask.compute(hdask.predict(graph, points))
        assert set(_named_rows(str(caught.value))) <= set(bad)
    else:
        got = dask.compute(hdask.predict(graph, points))[0]
        for name, value in run_onnx(graph, X, threads=1).items():
            np.testing.assert_array_equal(got[name], value)
    got = dask.compute(hdask.predict(graph, points, bad_rows="null"))[0]
    want = run_onnx(graph, X[good], threads=1) if good.size else None
    for name, value in got.items():
        nulls = pd.isna(value).reshape(X.shape[0], -1)
        np.testing.assert_array_equal(np.flatnonzero(nulls.any(axis=1)), bad)
        if want is not None:
            np.testing.assert_array_equal(value[good], want[name])


def _check_spark(graph, spark, table, nulls=()) -> None:
    """``nulls``: rows whose x1 becomes an SQL null."""
    from pyspark.sql import functions as F

    X, bad, _ = table
    n = X.shape[0]
    nulls = sorted({int(i) for i in nulls if i < n})
    bad = sorted(set(bad) | set(nulls))
    frame = pd.DataFrame(X, columns=["x0", "x1", "x2"]).assign(id=np.arange(n))
    df = spark.createDataFrame(frame).coalesce(1)  # one partition: its rows are the rows
    if nulls:
        df = df.withColumn("x1", F.when(F.col("id").isin(nulls), None).otherwise(F.col("x1")))
    good = np.setdiff1d(np.arange(n), bad)
    columns = ["x0", "x1", "x2"]
    if bad:
        with pytest.raises(Exception, match="InvalidPointError") as caught:
            hspark_predict(graph, df, columns).collect()
        line = [x for x in str(caught.value).splitlines() if "InvalidPointError:" in x][-1]
        assert set(_named_rows(line)) <= set(bad) and "of partition 0" in line
    scored = hspark_predict(graph, df, columns, bad_rows="null").toPandas().sort_values("id")
    np.testing.assert_array_equal(np.flatnonzero(scored["label"].isna().to_numpy()), bad)
    if good.size:
        want = run_onnx(graph, X[good], threads=1)
        np.testing.assert_array_equal(
            scored["label"].to_numpy()[good].astype(np.int64), want["label"]
        )
        for i in range(want["probabilities"].shape[1]):
            np.testing.assert_array_equal(
                scored[f"probability_{i}"].to_numpy()[good], want["probabilities"][:, i]
            )


def hspark_predict(*args, **kwargs):
    import hyp2onnx.spark as hspark

    return hspark.predict(*args, **kwargs)


@SETTINGS
@given(table=tables())
def test_dask_scoring_answers_as_the_model_or_refuses(graph, client, table):
    _check_dask(graph, client, table)


@SETTINGS
@given(table=tables(overflow=True))
def test_dask_scoring_refuses_overflowing_points(graph, client, table):
    """Needs the overflow-safe manifold check (issue 23, item 1)."""
    _check_dask(graph, client, table)


@settings(SETTINGS, max_examples=6)
@given(table=tables(), nulls=st.lists(st.integers(0, 11), max_size=2))
def test_spark_scoring_answers_as_the_model_or_refuses(graph, spark, table, nulls):
    _check_spark(graph, spark, table, nulls)


@settings(SETTINGS, max_examples=6)
@given(table=tables(overflow=True))
def test_spark_scoring_refuses_overflowing_points(graph, spark, table):
    """Needs the overflow-safe manifold check (issue 23, item 1)."""
    _check_spark(graph, spark, table)
