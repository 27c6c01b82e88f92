"""Short batches take the exact scores, long ones the fast scores: each with its own bound.

The default graph sends batches of up to ``short_batch_rows`` rows (its
metadata) through an ``If`` to the exact encoding's ordered sums, the Python
model's values bit for bit, and longer batches to the fast scores and their
near-tie guard (values within ``value_bound``, labels exact). Every batch size
from 1 to 64, and those around the crossover, is scored from rows at ties,
near-ties and every split's threshold and its neighbours, and compared with
the Python model and with the graph's two sides built on their own: a batch
sent to the side whose bound is not the one recorded for its size fails.
Each batch starts with a row that the two sides score differently, so that
the side taken shows.
"""

from __future__ import annotations

import _oracle as oracle
import numpy as np
import pytest
from test_fast import MODELS, N_CLASSES, symmetric, training_rows

import hyp2onnx as h
from hyp2onnx._runtime import session
from hyp2onnx.emit.strategy import GraphOverrides
from hyp2onnx.export import describe, read_metadata
from hyp2onnx.export._compile import compile_model
from hyp2onnx.verification import default_rtol, default_tolerance, verify

#: forests of three classes (the opset-3 class values): shallow ones whose leaves
#: hold fractions k/n, and unlimited ones whose votes tie exactly
CASES = ("forest_fractions", "forest_votes")
#: layouts whose fast side was the faster at every batch size: no If, no crossover
NO_SPLIT = ("forest_binary", "xgb_multi", "lgbm_binary")


def _fit(name: str):
    k = training_rows()
    X, y = symmetric(k, N_CLASSES[name])
    model = MODELS[name]().fit(X, y)
    probes = oracle.probe_rows(oracle.native(model), X, np.float64).k
    return model, np.concatenate([X, probes])


@pytest.fixture(scope="module", params=CASES)
def case(request):
    model, rows = _fit(request.param)
    described = describe(model)

    def graph(encoding: str = "fast", short_rows: int | None = None):
        overrides = GraphOverrides(short_rows=short_rows)
        return compile_model(
            described, dtype="float64", encoding=encoding, opset=18, overrides=overrides
        )

    # the two sides built without the If: the exact encoding, and the fast scores alone
    sides = [session(g, threads=1) for g in (graph("exact"), graph(short_rows=0))]
    return request.param, model, rows, graph(), *sides


def _outputs(s, X: np.ndarray) -> dict[str, np.ndarray]:
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, {"X": X})))


def _python(model, X: np.ndarray) -> dict[str, np.ndarray]:
    return {"label": model.predict(X), "probabilities": model.predict_proba(X)}


def _same(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[key], b[key]) for key in a)


def test_each_batch_takes_the_side_its_size_records(case) -> None:
    name, model, rows, graph, exact_side, fast_side = case
    meta = read_metadata(graph)
    crossover = meta["short_batch_rows"]
    assert crossover > 0 and meta["short_batch_value_bound"] == 0.0
    assert meta["value_bound"] > 0
    default = session(graph, threads=1)
    # a row the two sides score differently shows which side a batch took
    tell = next(
        (
            rows[i : i + 1]
            for i in range(len(rows))
            if not _same(
                _outputs(exact_side, rows[i : i + 1]), _outputs(fast_side, rows[i : i + 1])
            )
        ),
        None,
    )
    assert tell is not None, "no row tells the two sides apart"
    short_tol = default_tolerance(meta, rows=1)
    long_tol = default_tolerance(meta, rows=crossover + 1)
    assert short_tol < long_tol
    # the last, one batch of every row
    sizes = sorted({*range(1, 65), crossover, crossover + 1, crossover + 2, len(rows) + 1})
    start, told = 0, 0
    for n in sizes:
        more = n - len(tell)
        picked = np.take(rows, np.arange(start, start + more), axis=0, mode="wrap")
        start += more
        X = np.concatenate([tell, picked])
        got, want = _outputs(default, X), _python(model, X)
        sides = _outputs(exact_side, X), _outputs(fast_side, X)
        told += not _same(*sides)
        side = sides[0] if n <= crossover else sides[1]
        assert _same(got, side), f"{name}: a batch of {n} rows took the other side"
        tolerance = short_tol if n <= crossover else long_tol
        assert np.array_equal(got["label"], want["label"]), f"{name}, {n} rows: labels"
        delta = np.abs(got["probabilities"] - want["probabilities"])
        assert np.all(delta <= tolerance + default_rtol(meta) * np.abs(want["probabilities"])), (
            f"{name}, {n} rows: values beyond the recorded bound {tolerance}"
        )
    assert told == len(sizes), f"{name}: the sides differ on {told} of {len(sizes)} batches"


def test_verify_checks_the_short_side_too(case) -> None:
    name, model, rows, graph, *_ = case
    report = verify(model, graph, rows[:300])
    assert report.ok, report
    assert report.short_batch is not None and report.short_batch.ok
    assert report.short_batch.rows == read_metadata(graph)["short_batch_rows"]
    # the short side's tolerance: the ordered sums' (no value_bound)
    assert report.short_batch.atol < report.atol
    bound = read_metadata(graph)["value_bound"]
    assert report.short_batch.atol == pytest.approx(report.atol - bound, rel=1e-12, abs=0)


@pytest.mark.parametrize("name", NO_SPLIT)
def test_other_layouts_keep_one_path(name: str) -> None:
    """Binary forests and boosters: no If on the batch size, no crossover recorded."""
    k = training_rows()
    X, y = symmetric(k, N_CLASSES[name])
    graph = h.to_onnx(MODELS[name]().fit(X, y))
    meta = read_metadata(graph)
    assert "short_batch_rows" not in meta and meta["value_bound"] > 0
    assert not any(n.name.startswith("short_batch/") for n in graph.graph.node)
