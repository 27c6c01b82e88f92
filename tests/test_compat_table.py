"""The compatibility table: its data, the page made from it, and what ``inspect`` reads from it.

``benchmarks/compat_table.py`` writes ``hyp2onnx/cli/runtimes.json`` and
``docs/compatibility.md``; these tests check that the committed page is
exactly what the script makes of the committed data, that the data covers
every graph variant and runtime, and that the script's cells are judged
as ``hyp2onnx.verify`` judges (run in onnxruntime here, in-process).
"""

from __future__ import annotations

import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from _data import labels, points

import hyp2onnx as h
from hyp2onnx.cli._runtimes import NETWORK_KINDS, compatibility, network_kind, runtimes_for
from hyp2onnx.cli.inspect import inspect_file
from hyp2onnx.emit import ENCODINGS

ROOT = Path(__file__).resolve().parents[1]
STATUSES = {"agrees", "runs", "fails", "not installed", "n/a"}


@pytest.fixture(scope="module")
def table():
    """benchmarks/compat_table.py as a module."""
    spec = importlib.util.spec_from_file_location(
        "compat_table", ROOT / "benchmarks" / "compat_table.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["compat_table"] = module
    spec.loader.exec_module(module)
    return module


def test_page_is_made_from_the_data(table):
    page = (ROOT / "docs" / "compatibility.md").read_text()
    assert page == table.markdown(compatibility())


def test_data_covers_every_variant_and_runtime(table):
    data = compatibility()
    assert set(data["variants"]) == {v.key for v in table.VARIANTS}
    # every encoding to_onnx makes is measured, the default included: inspect names its runtimes
    assert {v["encoding"] for v in data["variants"].values()} == set(ENCODINGS)
    for variant, cells in data["results"].items():
        assert set(cells) == set(data["runtimes"]), variant
        for cell in cells.values():
            assert cell["status"] in STATUSES
            if cell["status"] in ("agrees", "runs", "fails"):
                assert {r["status"] for r in cell["models"].values()} <= {"agrees", "runs", "fails"}
    # every encoding agrees in onnxruntime, .ort files included
    assert all(cells["onnxruntime"]["status"] == "agrees" for cells in data["results"].values())
    # the standard encoding runs in a runtime without ai.onnx.ml operators (if one was installed)
    without_ml = [k for k, r in data["runtimes"].items() if not r["ml_ops"] and r["version"]]
    if without_ml:
        standard = [k for k, v in data["variants"].items() if v["encoding"] == "standard"]
        assert any(
            data["results"][v][r]["status"] in ("agrees", "runs")
            for v in standard
            for r in without_ml
        )


def test_inspect_reads_the_runtimes():
    version = compatibility()["runtimes"]["onnxruntime"]["version"]
    for encoding in ENCODINGS:
        assert f"onnxruntime (Python) {version}" in runtimes_for(encoding), encoding
    assert runtimes_for("no such encoding") == []
    assert runtimes_for(None) == []
    # compat graphs have no row blocks; their runtimes are those measured for compat
    assert runtimes_for("compat", row_blocks=False) == runtimes_for("compat")
    data = compatibility()
    running = {
        key: {r for r, c in data["results"][key].items() if c["status"] in ("agrees", "runs")}
        for key in ("exact", "exact-no-row-blocks")
    }
    only_flat = running["exact-no-row-blocks"] - running["exact"]
    blocked = runtimes_for("exact")
    assert len(runtimes_for("exact", row_blocks=False)) == len(running["exact-no-row-blocks"])
    if only_flat:  # named after the blocked graph's runtimes, with the option that helps
        assert len(blocked) == len(running["standard"]) + 1
        assert blocked[-1].startswith("without row blocks (convert --no-row-blocks) also: ")
        for key in only_flat:
            assert data["runtimes"][key]["name"] in blocked[-1]


def test_cells_are_judged_like_verify(table, tmp_path):
    models, rows, at_threshold = table.make_models(quick=True)
    runtime = table.onnxruntime_python()
    for name, model in models.items():
        graph = h.to_onnx(model, encoding="standard")
        path = tmp_path / f"{name}.onnx"
        h.save_onnx(graph, path)
        X = rows[name].astype(np.float32)
        cell = table.run_cell(runtime, path, model, X, 0.0, at_threshold[name])
        assert cell["status"] == "agrees", cell
        assert h.verify(model, graph, X).ok

        def shifted(path, X, run=runtime.run):  # a runtime whose values are off by 1e-9
            out = run(path, X)
            key = "probabilities" if "probabilities" in out else "variable"
            return {**out, key: out[key] + 1e-9}

        off = table.Runtime("off", "off", "0", shifted)
        cell = table.run_cell(off, path, model, X, 0.0, at_threshold[name])
        assert cell["status"] == "runs" and cell["max_abs_diff_off_thresholds"] > 0

        def broken(path, X):
            raise RuntimeError(
                "Exception from src/x.cpp:1:\nCheck 'x' failed at src/y.cpp:2:\nno Loop"
            )

        cell = table.run_cell(
            table.Runtime("b", "b", "0", broken), path, model, X, 0.0, at_threshold[name]
        )
        assert cell == {"status": "fails", "error": "no Loop"}


def test_inspect_says_where_labels_differ():
    """A runtime whose labels differ only at thresholds or near ties (every model kind
    measured) is listed with where, and with how far its values are off elsewhere; one that
    agrees bit for bit on every kind is listed plainly. Planted: every runs-cell called
    "labels differ at thresholds only" (tract, whose labels all agree, was then misnamed);
    the near-tie rows left out of inspect's reading (OpenVINO's entry lost "near ties")."""
    data = compatibility()
    for variant in ("standard", "standard-float64"):
        for runtime in ("openvino", "tract"):
            cells = [
                per[variant][runtime]
                for kind, per in data["kinds"].items()
                if kind not in NETWORK_KINDS  # networks have no standard encoding
            ]
            if any(c["status"] not in ("agrees", "runs") for c in cells):
                continue
            entry = next(
                e
                for e in runtimes_for(
                    "standard", dtype=variant.replace("standard-", "") or "float32"
                )
                if e.startswith(data["runtimes"][runtime]["name"])
            )
            away = sum(
                c[k]["labels_differ"]
                for c in cells
                if c["status"] == "runs"
                for k in ("held-out", "far")
            )
            ran = [c for c in cells if c["status"] == "runs"]
            at = sum(c["at thresholds"]["labels_differ"] for c in ran)
            near = sum(c["near ties"]["labels_differ"] for c in ran if "near ties" in c)
            if all(c["status"] == "agrees" for c in cells):
                assert "(runs" not in entry or "labels agree" in entry
            elif away:
                assert "outputs differ" in entry
            elif at and near:
                assert "labels differ at thresholds and near ties only" in entry
            elif at or near:
                place = "thresholds" if at else "near ties"
                assert f"labels differ at {place} only" in entry
            else:
                assert "labels agree" in entry


def test_inspect_names_where_network_graphs_run(tmp_path):
    """A network's graph is looked up in the table of every model kind, not as a tree
    encoding of the same name: each runtime that ran that kind's graph is listed, and
    none that failed it (tract fails the fast graph, runs the exact chain). Planted:
    inspect looking networks up by encoding (OpenVINO, which runs them, went missing)."""
    data = compatibility()
    X, k = points(300, 2, seed=5)
    mlp = h.HyperbolicMLPClassifier(hidden_layer_sizes=(6,), max_iter=30, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # stopped before convergence
        mlp.fit(X, labels(k, 3, seed=5))
    graphs = {
        "MLP 4 classes": h.to_onnx(mlp),
        "MLP 4 classes, exact chain": h.to_onnx(mlp, encoding="exact"),
        "MLP region tree": h.to_onnx(h.region_tree(mlp, X)),
    }
    for kind, graph in graphs.items():
        assert network_kind(h.read_metadata(graph)) == kind
        path = tmp_path / "network.onnx"
        h.save_onnx(graph, path)
        listed = inspect_file(path).runtimes
        cells = data["kinds"][kind]["standard-float64"]
        for key, cell in cells.items():
            name = data["runtimes"][key]["name"]
            shown = any(entry.startswith(name + " ") for entry in listed)
            assert shown == (cell["status"] in ("agrees", "runs")), (kind, key, listed)
    tree = h.HyperbolicDecisionTreeClassifier(max_depth=3).fit(X, labels(k, 3, seed=5))
    assert network_kind(h.read_metadata(h.to_onnx(tree))) is None


def test_near_tie_rows_reach_every_backends_margin(table):
    """The table's near-tie rows reach the graph's near-tie margin (``NEAR_TIE``: the rows
    whose softmax is done again) for every backend, in the data and in the script's built
    models, with the rows as float64 and as float32 input. Planted: the built leaves without
    their ulp and margin bands (every gap from ``2**-28`` on): fails."""
    from hyp2onnx.datasets import make_wrapped_normal_mixture

    reach = compatibility()["near_ties"]
    for backend in ("RF", "XGBoost", "LightGBM", "CatBoost"):
        assert any(n.startswith(backend) and r["within_margin"] for n, r in reach.items())
    X, y = make_wrapped_normal_mixture(300, 4, 4, random_state=0)
    built = table.near_tie_models(X, y)
    assert set(built) == set(table.NEAR_TIE_MODELS)
    for name, model in built.items():
        for rows in (X, X.astype(np.float32).astype(np.float64)):
            assert table.near_tie_reach(model, rows)["within_margin"] > 0, name
