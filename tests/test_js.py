"""The JavaScript examples (examples/js) against the Python models.

Runs ``predict-node.js`` (onnxruntime-node) and ``predict-web.js``
(onnxruntime-web's WebAssembly backend, in Node.js), both on one thread,
on exact, compat and standard graphs of a forest classifier and regressor
and on an ``.ort`` file, and compares their JSON with the Python model:
labels equal, values within verify's tolerance. The npm packages are
installed into examples/js/node_modules (git-ignored) with ``npm ci`` when
they are missing; the test is skipped when node or npm is absent or the
install cannot reach the registry.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from _data import labels, points, targets
from test_export import adversarial_klein

import hyp2onnx as h
from hyp2onnx import edge, geometry
from hyp2onnx.export import read_metadata
from hyp2onnx.verification import default_tolerance


def _load_module(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


JS = Path(__file__).resolve().parents[1] / "examples" / "js"
npm_install = _load_module(JS / "npm_install.py")
INSTALL_TIMEOUT = 300  # s; a cold npm cache downloads about 80 MB
RUN_TIMEOUT = 60  # s per script run
_NETWORK = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "network")


@pytest.fixture(scope="module")
def node() -> str:
    """The node executable, with examples/js's npm packages installed."""
    try:
        done = npm_install.npm_ci(INSTALL_TIMEOUT)
    except FileNotFoundError:
        pytest.skip("node and npm are needed for the JavaScript examples (not on PATH)")
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm ci in examples/js did not finish in {INSTALL_TIMEOUT} s")
    if done is not None and done.returncode != 0:
        offline = [line for line in done.stderr.splitlines() if any(w in line for w in _NETWORK)]
        if offline:
            pytest.skip(f"npm ci could not reach the npm registry: {offline[0].strip()}")
        pytest.fail(f"npm ci in examples/js failed: {done.stderr[-2000:]}")
    node = shutil.which("node")
    assert node is not None
    return node


#: The graphs the scripts run, one test each: a forest classifier (float32) and regressor
#: (float64) in every encoding, and the classifier's exact graph as an ``.ort`` file.
CASES = [
    *(
        f"{tag}/{encoding}"
        for tag in ("clf", "reg")
        for encoding in ("exact", "compat", "standard")
    ),
    "clf/exact .ort",
]


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, tuple[Path, Path, object, str]]:
    """Each case's (graph file, data file, model, dtype), by name (`CASES`)."""
    work = tmp_path_factory.mktemp("js")
    X, k = points(500, 3, seed=51)
    clf = h.HyperbolicRandomForestClassifier(n_estimators=6, max_depth=6, random_state=0)
    reg = h.HyperbolicRandomForestRegressor(n_estimators=4, max_depth=6, random_state=0)
    clf.fit(X, labels(k, 3))
    reg.fit(X, targets(k))
    out = {}
    for model, dtype, tag in ((clf, "float32", "clf"), (reg, "float64", "reg")):
        # > 1024 rows, so that the row-block Loop runs, with every threshold's neighbours
        rows = np.concatenate(
            [
                points(800, 3, seed=52)[0],
                geometry.from_klein(adversarial_klein(model, k), "hyperboloid"),
                points(100, 3, seed=53, max_radius=12.0)[0],
            ]
        ).astype(dtype)
        data = work / f"{tag}.npy"
        np.save(data, rows)
        for encoding in ("exact", "compat", "standard"):
            graph = work / f"{tag}_{encoding}.onnx"
            h.save_onnx(model, graph, encoding=encoding, dtype=dtype)
            out[f"{tag}/{encoding}"] = (graph, data, model, dtype)
    ort_path, _ = edge.to_ort(work / "clf_exact.onnx", work / "clf_exact.ort")
    out["clf/exact .ort"] = (ort_path, work / "clf.npy", clf, "float32")
    assert list(out) == CASES
    return out


def _run(node: str, script: str, graph: Path, data: Path) -> dict[str, list]:
    done = subprocess.run(
        [node, str(JS / script), str(graph), str(data)],
        check=False,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 0, f"{script} {graph.name}: {done.stderr.strip()}"
    return json.loads(done.stdout)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("script", ["predict-node.js", "predict-web.js"])
def test_js_predictions_match_python(node, cases, script, case):
    graph, data, model, _dtype = cases[case]
    got = _run(node, script, graph, data)
    X = np.load(data)
    atol = default_tolerance(read_metadata(graph.with_suffix(".onnx")))
    if hasattr(model, "predict_proba"):
        assert set(got) == {"label", "probabilities"}
        np.testing.assert_array_equal(got["label"], model.predict(X))
        np.testing.assert_allclose(got["probabilities"], model.predict_proba(X), rtol=0, atol=atol)
    else:
        assert set(got) == {"variable"}
        np.testing.assert_allclose(
            np.asarray(got["variable"])[:, 0], model.predict(X), rtol=0, atol=atol
        )


def test_js_usage_error(node):
    done = subprocess.run(
        [node, str(JS / "predict-node.js")],
        check=False,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 2 and done.stderr.startswith("usage: node predict-node.js")
