"""Every graph kind hyp2onnx writes, scored on Dask and Spark; composed graphs from raw inputs.

Graph kinds: trees of every backend and encoding, isolation and rotation
forests, MLP classifiers and regressors, region trees (bool ``covered``,
int64 ``region``), a HyperDT model, a composed graph. Between them their
outputs hold every type the scorers return: int64 and string labels,
float32 and float64 values, bool flags.

Oracle: the graph run in onnxruntime in this process, on all rows at once;
for a composed graph, its encoder run on its own in onnxruntime and the
model's graph then run on the encoder's points, row by row as the
composed graph must. Values agree bit for bit (one thread, as the workers'
sessions run).

Composed graphs take raw inputs: an int64 id into an embedding table, a
bool flag through ``Where``, a float64 offset, then the exponential map to
the hyperboloid, all written with ``onnx.helper``. Bad rows of every sort
(an id past the table, which makes the graph fail; a fractional id; a flag
of 2; NaN; an SQL null; a point that overflows off the manifold) are named
by their global row (Dask) or partition and row (Spark), or nulled.
"""

from __future__ import annotations

import functools
import re
import warnings

import numpy as np
import onnx
import pytest
from _data import labels, points, targets
from onnx import TensorProto, helper, numpy_helper

pytest.importorskip("distributed", reason="the 'dask' extra is not installed")

import dask
import dask.array as da
import dask.dataframe as dd
import pandas as pd

import hyp2onnx
import hyp2onnx.dask as hdask
from hyp2onnx.distributed import _scoring
from hyp2onnx.verification import run_onnx

pytestmark = [
    pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas"),
    pytest.mark.filterwarnings("ignore:The copy keyword is deprecated"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

N_SCORED = 240
TABLE_ROWS = 16


def _fit(estimator, X, y=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimator.fit(X) if y is None else estimator.fit(X, y)


def _mlp(kind: str, X, k):
    if kind == "classifier":
        est = hyp2onnx.HyperbolicMLPClassifier(hidden_layer_sizes=(6,), max_iter=60, random_state=0)
        return _fit(est, X, labels(k))
    est = hyp2onnx.HyperbolicMLPRegressor(hidden_layer_sizes=(6,), max_iter=60, random_state=0)
    return _fit(est, X, targets(k))


def _model_graph(kind: str, X, k) -> onnx.ModelProto:
    """The graph of one kind, fitted on the points ``X`` (Klein coordinates ``k``)."""
    y, t, to_onnx = labels(k), targets(k), hyp2onnx.to_onnx
    trees = dict(max_depth=4, random_state=0)
    if kind == "tree_fast_string_labels":
        model = _fit(
            hyp2onnx.HyperbolicDecisionTreeClassifier(**trees), X, np.array(list("abc"))[y]
        )
        return to_onnx(model)
    if kind == "forest_exact_float64":
        model = _fit(hyp2onnx.HyperbolicRandomForestRegressor(n_estimators=3, **trees), X, t)
        return to_onnx(model, dtype="float64", encoding="exact")
    if kind == "tree_standard":
        return to_onnx(
            _fit(hyp2onnx.HyperbolicDecisionTreeClassifier(**trees), X, y), encoding="standard"
        )
    if kind == "forest_compat":
        model = _fit(hyp2onnx.HyperbolicRandomForestClassifier(n_estimators=3, **trees), X, y)
        return to_onnx(model, encoding="compat")
    if kind == "householder":
        return to_onnx(_fit(hyp2onnx.HyperbolicHouseholderTreeClassifier(**trees), X, y))
    if kind == "xgboost":
        return to_onnx(_fit(hyp2onnx.HyperbolicXGBClassifier(n_estimators=3, max_depth=3), X, y))
    if kind == "lightgbm_exact":
        model = hyp2onnx.HyperbolicLGBMRegressor(n_estimators=3, num_leaves=7, verbose=-1)
        return to_onnx(_fit(model, X, t), encoding="exact")
    if kind == "catboost_standard":
        model = hyp2onnx.HyperbolicCatBoostClassifier(iterations=3, depth=3, verbose=0)
        return to_onnx(_fit(model, X, y), encoding="standard")
    if kind == "isolation":
        return to_onnx(_fit(hyp2onnx.HyperbolicIsolationForest(n_estimators=5, random_state=0), X))
    if kind == "rotation":
        model = hyp2onnx.HyperbolicRotationForestClassifier(
            n_estimators=3, max_depth=4, random_state=0
        )
        return to_onnx(_fit(model, X, y))
    if kind in ("mlp_classifier", "mlp_regressor_exact"):
        model = _mlp(kind.split("_")[1], X, k)
        return to_onnx(model, encoding="exact" if kind.endswith("exact") else "fast")
    if kind in ("region_tree_classifier", "region_tree_regressor"):
        # the regions of a few rows only: the scored rows are covered and uncovered
        return to_onnx(hyp2onnx.region_tree(_mlp(kind.split("_")[2], X, k), X[:10]))
    if kind == "hyperdt":
        tree = pytest.importorskip("hyperdt.tree", reason="hyperdt (extra 'bench') not installed")
        model = _fit(tree.HyperbolicDecisionTreeClassifier(max_depth=3), X, y)
        return to_onnx(model, dtype="float64", encoding="exact")
    raise AssertionError(kind)


KINDS = [
    "tree_fast_string_labels",
    "forest_exact_float64",
    "tree_standard",
    "forest_compat",
    "householder",
    "xgboost",
    "lightgbm_exact",
    "catboost_standard",
    "isolation",
    "rotation",
    "mlp_classifier",
    "mlp_regressor_exact",
    "region_tree_classifier",
    "region_tree_regressor",
    "hyperdt",
    "composed",
]


# -- the encoder: ids, a flag and an offset to the hyperboloid ---------------------------------


def encoder() -> onnx.ModelProto:
    """ids (int64 [N]) -> table row; flag (bool [N]) keeps or negates it (Where); plus
    offset (float64 [N, 2]); then the exponential map onto H^2 (time column first).
    ``cosh`` and ``sinh`` from one ``Exp``, which onnxruntime has in float64."""
    table = np.random.default_rng(5).uniform(-0.8, 0.8, size=(TABLE_ROWS, 2))
    const = {
        "table": table,
        "axis": np.array([1], np.int64),
        "eps": np.array(1e-30),
        "half": np.array(0.5),
    }
    node = helper.make_node
    nodes = [
        node("Gather", ["table", "ids"], ["row"], axis=0),
        node("Neg", ["row"], ["negated"]),
        node("Unsqueeze", ["flag", "axis"], ["flag2"]),
        node("Where", ["flag2", "row", "negated"], ["signed"]),
        node("Add", ["signed", "offset"], ["v"]),
        node("Mul", ["v", "v"], ["vv"]),
        node("ReduceSum", ["vv", "axis"], ["n2"], keepdims=1),
        node("Add", ["n2", "eps"], ["n2e"]),
        node("Sqrt", ["n2e"], ["n"]),
        node("Exp", ["n"], ["e"]),
        node("Reciprocal", ["e"], ["ie"]),
        node("Add", ["e", "ie"], ["c2"]),
        node("Sub", ["e", "ie"], ["s2"]),
        node("Mul", ["c2", "half"], ["x0"]),
        node("Div", ["s2", "n"], ["s2n"]),
        node("Mul", ["s2n", "half"], ["r"]),
        node("Mul", ["r", "v"], ["xs"]),
        node("Concat", ["x0", "xs"], ["points"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "ids_flag_offset",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["N"]),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, ["N"]),
            helper.make_tensor_value_info("offset", TensorProto.DOUBLE, ["N", 2]),
        ],
        [helper.make_tensor_value_info("points", TensorProto.DOUBLE, ["N", 3])],
        [numpy_helper.from_array(v, name) for name, v in const.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def raw_inputs(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "ids": rng.integers(0, TABLE_ROWS, n),
        "flag": rng.random(n) < 0.5,
        "offset": rng.normal(scale=0.4, size=(n, 2)),
    }


def encode(inputs: dict[str, np.ndarray]) -> np.ndarray:
    """The encoder run on its own in onnxruntime (the oracle's first step)."""
    return run_onnx(encoder(), inputs, threads=1)["points"]


@functools.cache
def composed_case() -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """(composed graph, the model's own graph behind it)."""
    X = encode(raw_inputs(400, seed=1))
    y = (X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 0.3)
    model = _fit(hyp2onnx.HyperbolicRandomForestClassifier(n_estimators=3, max_depth=5), X, y)
    graph = hyp2onnx.to_onnx(model, dtype="float64")
    return hyp2onnx.compose(encoder(), graph), graph


@functools.cache
def case(kind: str) -> tuple[onnx.ModelProto, object, dict[str, np.ndarray]]:
    """(graph, its rows as the scorers take them, the oracle's outputs)."""
    if kind == "composed":
        graph, model_graph = composed_case()
        inputs = raw_inputs(N_SCORED, seed=2)
        want = dict(run_onnx(model_graph, encode(inputs), threads=1))
        want["on_manifold"] = np.ones(N_SCORED, dtype=bool)
        return graph, inputs, want
    X, k = points(300, 2, seed=3, max_radius=2.5)
    graph = _model_graph(kind, X, k)
    scored, _ = points(N_SCORED, 2, seed=4, max_radius=2.5)
    return graph, scored, run_onnx(graph, scored, threads=1)


def test_every_output_type_is_covered():
    """The kinds' outputs hold every type the scorers return (if a kind is dropped, this
    says which type went untested)."""
    pytest.importorskip("hyperdt.tree", reason="hyperdt (extra 'bench') not installed")
    kinds = {np.asarray(v).dtype.kind for kind in KINDS for v in case(kind)[2].values()}
    dtypes = {np.asarray(v).dtype for kind in KINDS for v in case(kind)[2].values()}
    assert {"i", "f", "b", "O"} <= kinds or {"i", "f", "b", "U"} <= kinds, kinds
    assert {np.dtype(np.float32), np.dtype(np.float64)} <= dtypes


def _frame(rows) -> tuple[pd.DataFrame, object]:
    """A pandas table of the rows and the scorers' ``columns``."""
    if isinstance(rows, dict):
        table = {"ids": rows["ids"], "flag": rows["flag"]}
        table |= {f"offset_{j}": rows["offset"][:, j] for j in range(2)}
        return pd.DataFrame(table), None
    columns = [f"x{j}" for j in range(rows.shape[1])]
    return pd.DataFrame(rows, columns=columns), columns


def _assert_column(got, want, where: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype.kind in "OU":
        np.testing.assert_array_equal(got.astype(str), want.astype(str), err_msg=where)
        return
    assert got.dtype.kind == want.dtype.kind or (got.dtype.kind, want.dtype.kind) == ("f", "f")
    np.testing.assert_array_equal(got, want, err_msg=where)


def _assert_table(scored: pd.DataFrame, graph, want: dict) -> None:
    spec = _scoring.OutputSpec.of(graph.SerializeToString())
    assert [o[0] for o in spec.outputs] == list(want)
    for out, cols in spec.column_names().items():
        value = np.asarray(want[out]).reshape(len(scored), -1)
        for i, col in enumerate(cols):
            _assert_column(scored[col].to_numpy(), value[:, i], f"{out} {col}")


@pytest.mark.parametrize("kind", KINDS)
def test_dask_scores_every_graph_kind(client, kind):
    graph, rows, want = case(kind)
    if isinstance(rows, dict):
        data = {name: da.from_array(a, chunks=(80,) + a.shape[1:]) for name, a in rows.items()}
    else:
        data = da.from_array(rows, chunks=(80, -1))
    frame, columns = _frame(rows)
    ddf = dd.from_pandas(frame.assign(id=np.arange(len(frame))), npartitions=3)
    (got,) = dask.compute(hdask.predict(graph, data))
    table = hdask.predict(graph, ddf, columns=columns).compute()
    assert list(got) == list(want)
    for name, value in want.items():
        assert got[name].dtype == value.dtype, name
        _assert_column(got[name], value, name)
    _assert_table(table.sort_values("id"), graph, want)


@pytest.mark.parametrize("kind", KINDS)
def test_dask_nulls_a_bad_row_of_every_graph_kind(client, kind):
    """A NaN row (a NaN offset for the composed graph): null in every output column, of
    its nullable type; the other rows their answers."""
    graph, rows, want = case(kind)
    bad = 7
    if isinstance(rows, dict):
        rows = {**rows, "offset": rows["offset"].copy()}
        rows["offset"][bad, 1] = np.nan
    else:
        rows = rows.copy()
        rows[bad, 1] = np.nan
    frame, columns = _frame(rows)
    ddf = dd.from_pandas(frame.assign(id=np.arange(len(frame))), npartitions=3)
    table = hdask.predict(graph, ddf, columns=columns, bad_rows="null").compute()
    good = np.setdiff1d(np.arange(len(frame)), [bad])
    for out, cols in _scoring.OutputSpec.of(graph.SerializeToString()).column_names().items():
        value = np.asarray(want[out]).reshape(len(frame), -1)
        for i, col in enumerate(cols):
            column = table[col]
            np.testing.assert_array_equal(np.flatnonzero(column.isna().to_numpy()), [bad])
            _assert_column(column.to_numpy()[good].astype(value.dtype), value[good, i], col)


@pytest.mark.parametrize("kind", KINDS)
def test_spark_scores_every_graph_kind(spark, kind):
    import hyp2onnx.spark as hspark

    graph, rows, want = case(kind)
    frame, columns = _frame(rows)
    df = spark.createDataFrame(frame.assign(id=np.arange(len(frame)))).repartition(2)
    scored = hspark.predict(graph, df, columns)
    types = {f.name: f.dataType.simpleString() for f in scored.schema.fields}
    spec = _scoring.OutputSpec.of(graph.SerializeToString())
    for out, cols in spec.column_names().items():
        sql = {"b": "boolean", "i": "bigint", "f": "double"}.get(want[out].dtype.kind, "string")
        assert [types[c] for c in cols] == [sql] * len(cols), out
    _assert_table(scored.toPandas().sort_values("id"), graph, want)


# -- composed graphs: raw inputs, bad rows -------------------------------------------------------

BAD_ROW = 170  # in the third partition of 80 rows


def _spoil(inputs: dict[str, np.ndarray], kind: str, row: int) -> dict[str, np.ndarray]:
    """``inputs`` with ``row`` made bad in the way ``kind`` says (arrays copied)."""
    out = {name: a.copy() for name, a in inputs.items()}
    if kind == "id past the table":  # the encoder's Gather fails
        out["ids"][row] = TABLE_ROWS
    elif kind == "negative id past the table":  # Gather takes -16 .. 15
        out["ids"][row] = -TABLE_ROWS - 1
    elif kind == "fractional id":
        out["ids"] = out["ids"].astype(np.float64)
        out["ids"][row] = 2.5
    elif kind == "flag of 2":
        out["flag"] = out["flag"].astype(np.int64)
        out["flag"][row] = 2
    elif kind == "NaN offset":
        out["offset"][row, 0] = np.nan
    elif kind == "off the manifold":  # exp overflows: x_0 infinite, on_manifold false
        out["offset"][row] = [800.0, 0.0]
    else:
        raise AssertionError(kind)
    return out


#: Each kind of bad row and the words that name its problem.
BAD_KINDS = {
    "id past the table": "make the graph fail",
    "negative id past the table": "make the graph fail",
    "fractional id": "input 'ids'",
    "flag of 2": "input 'flag'",
    "NaN offset": "input 'offset'",
    "off the manifold": "off the model's manifold",
}


def _named_rows(message: str) -> list[int]:
    found = re.search(r"\(rows ([0-9, .]+)", message)
    assert found, message
    return [int(r) for r in re.findall(r"\d+", found.group(1))]


def _assert_nulled(got: dict, want: dict, bad: list[int]) -> None:
    """Null outputs on the rows ``bad`` only, the oracle's answers on the others."""
    n = len(next(iter(want.values())))
    good = np.setdiff1d(np.arange(n), bad)
    for name, value in want.items():
        nulls = pd.isna(got[name]).reshape(n, -1).any(axis=1)
        np.testing.assert_array_equal(np.flatnonzero(nulls), bad, err_msg=name)
        np.testing.assert_array_equal(got[name][good].astype(value.dtype), value[good], name)


@pytest.mark.parametrize("kind", list(BAD_KINDS))
def test_dask_composed_graph_names_or_nulls_bad_rows(client, kind):
    graph, inputs, want = case("composed")
    spoilt = _spoil(inputs, kind, BAD_ROW)
    data = {name: da.from_array(a, chunks=(80,) + a.shape[1:]) for name, a in spoilt.items()}
    with pytest.raises(hyp2onnx.InvalidPointError, match=re.escape(BAD_KINDS[kind])) as caught:
        dask.compute(hdask.predict(graph, data))
    assert _named_rows(str(caught.value)) == [BAD_ROW]
    (got,) = dask.compute(hdask.predict(graph, data, bad_rows="null"))
    _assert_nulled(got, want, [BAD_ROW])


def test_dask_composed_graph_from_a_dataframe_with_nulls_and_named_columns(client):
    """Input columns named by columns=, in pandas' nullable dtypes: a missing id or flag is
    a bad row like any other; one session per worker process."""
    graph, inputs, want = case("composed")
    frame = pd.DataFrame(
        {
            "entity": pd.array(inputs["ids"], dtype="Int64"),
            "keep": pd.array(inputs["flag"], dtype="boolean"),
            "dx": inputs["offset"][:, 0],
            "dy": inputs["offset"][:, 1],
        }
    )
    frame.loc[3, "entity"] = pd.NA
    frame.loc[90, "keep"] = pd.NA
    frame.loc[200, "entity"] = TABLE_ROWS + 4
    columns = {"ids": "entity", "flag": "keep", "offset": ["dx", "dy"]}
    ddf = dd.from_pandas(frame, npartitions=3)
    before = client.run(_scoring.sessions_created)
    scored = hdask.predict(graph, ddf, columns=columns, bad_rows="null").compute()
    after = client.run(_scoring.sessions_created)
    assert all(after[w] - before[w] <= 1 for w in after)
    got = {"label": scored["label"].to_numpy(), "on_manifold": scored["on_manifold"].to_numpy()}
    got["probabilities"] = scored[[f"probability_{i}" for i in range(3)]].to_numpy()
    _assert_nulled(got, want, [3, 90, 200])
    with pytest.raises(hyp2onnx.InvalidPointError, match=r"of partition \d; index (3|90|200)\)"):
        hdask.predict(graph, ddf, columns=columns).compute()


def test_dask_composed_graph_refuses_what_it_cannot_score(client):
    graph, inputs, _ = case("composed")
    data = {name: da.from_array(a, chunks=80) for name, a in inputs.items()}
    with pytest.raises(ValueError, match="named \\['flag', 'ids'\\]; the graph takes ids"):
        hdask.predict(graph, {k: data[k] for k in ("ids", "flag")})
    with pytest.raises(TypeError, match="pass a dict"):
        hdask.predict(graph, data["offset"])
    uneven = {**data, "flag": da.from_array(inputs["flag"][:-1], chunks=80)}
    with pytest.raises(ValueError, match="same rows"):
        hdask.predict(graph, uneven)
    # other chunks of the same rows are aligned
    rechunked = {**data, "flag": da.from_array(inputs["flag"], chunks=50)}
    np.testing.assert_array_equal(
        dask.compute(hdask.predict(graph, rechunked))[0]["label"], case("composed")[2]["label"]
    )
    frame, _ = _frame(inputs)
    with pytest.raises(ValueError, match="no columns \\['offset_1'\\]"):
        hdask.predict(graph, dd.from_pandas(frame.drop(columns="offset_1"), npartitions=2))
    with pytest.raises(ValueError, match="takes 2 column"):
        hdask.predict(graph, dd.from_pandas(frame, npartitions=2), columns={"offset": "offset_0"})


def test_spark_composed_graph_names_or_nulls_bad_rows(spark):
    """One partition (its rows are the rows): SQL nulls in the id and flag columns, a
    fractional id in a double column, a flag of 2, an id past the table, a row off the
    manifold; named by partition and row, or nulled."""
    from pyspark.sql import functions as F

    import hyp2onnx.spark as hspark

    graph, inputs, want = case("composed")
    spoilt = _spoil(_spoil(inputs, "fractional id", 11), "flag of 2", 12)
    spoilt = _spoil(_spoil(spoilt, "id past the table", 13), "off the manifold", 14)
    frame, _ = _frame(spoilt)
    df = spark.createDataFrame(frame.assign(id=np.arange(len(frame)))).coalesce(1)
    df = df.withColumn("ids", F.when(F.col("id") == 15, None).otherwise(F.col("ids")))
    df = df.withColumn("flag", F.when(F.col("id") == 16, None).otherwise(F.col("flag")))
    with pytest.raises(Exception, match="InvalidPointError") as caught:
        hspark.predict(graph, df).collect()
    line = [x for x in str(caught.value).splitlines() if "InvalidPointError:" in x][-1]
    assert set(_named_rows(line)) <= set(range(11, 17)) and "of partition 0" in line
    scored = hspark.predict(graph, df, bad_rows="null").toPandas().sort_values("id")
    assert scored["on_manifold"].dtype == object or str(scored["on_manifold"].dtype) == "boolean"
    got = {"label": scored["label"].to_numpy(), "on_manifold": scored["on_manifold"].to_numpy()}
    got["probabilities"] = scored[[f"probability_{i}" for i in range(3)]].to_numpy()
    _assert_nulled(got, want, list(range(11, 17)))


# -- the command line: a region tree's columns ----------------------------------------------------


@pytest.mark.parametrize("kind", ["region_tree_classifier", "region_tree_regressor"])
def test_cli_predict_writes_a_region_trees_covered_and_region(tmp_path, kind):
    from hyp2onnx.cli.predict import predict_file

    graph, rows, want = case(kind)
    assert want["covered"].any() and not want["covered"].all()
    hyp2onnx.save_onnx(graph, tmp_path / "tree.onnx")
    np.save(tmp_path / "rows.npy", rows)
    predict_file(
        tmp_path / "tree.onnx", tmp_path / "rows.npy", tmp_path / "out.csv", chunk_rows=100
    )
    written = pd.read_csv(tmp_path / "out.csv", float_precision="round_trip")  # exact, as written
    assert list(written.columns[-2:]) == ["covered", "region"]
    np.testing.assert_array_equal(written["covered"].to_numpy(), want["covered"])
    np.testing.assert_array_equal(written["region"].to_numpy(), want["region"])
    first = "label" if "label" in want else "value"
    np.testing.assert_array_equal(
        written[first].to_numpy(), np.ravel(want.get("label", want.get("variable")))
    )
