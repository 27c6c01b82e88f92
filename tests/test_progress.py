"""Long work shows its progress on a terminal, and only there.

``verify`` (and so ``convert --check``) compares data larger than
``CHUNK_ROWS`` chunk by chunk with a bar counting the rows; its report must
be the one a single pass gives (oracle: the same call with one chunk).
"""

from __future__ import annotations

import io
import sys

import numpy as np
import pytest
from _data import labels, points

import hyp2onnx
import hyp2onnx.verification as verify_module  # the module (hyp2onnx.verify is the function)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(scope="module")
def forest_and_rows():
    X, k = points(2_600, 2, seed=11)
    model = hyp2onnx.HyperbolicRandomForestClassifier(n_estimators=4, max_depth=5).fit(
        X[:600], labels(k[:600], 3)
    )
    return model, hyp2onnx.to_onnx(model), X


@pytest.mark.parametrize("terminal", [True, False])
def test_verify_in_chunks_reports_what_one_pass_does(forest_and_rows, monkeypatch, terminal):
    model, graph, X = forest_and_rows
    whole = hyp2onnx.verify(model, graph, X)
    monkeypatch.setattr(verify_module, "CHUNK_ROWS", 700)  # 2,600 rows: 4 chunks, the last short
    stderr = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    chunked = hyp2onnx.verify(model, graph, X)
    assert chunked == whole and chunked.rows == len(X) and chunked.ok
    shown = stderr.getvalue()
    if terminal:
        assert "verify" in shown and "/2.60k" in shown and "rows" in shown, shown
    else:
        assert shown == ""


def test_verify_in_chunks_counts_every_disagreement(forest_and_rows, monkeypatch):
    """Another model against the graph: every row where they differ is counted, the last
    (short) chunk's too."""
    model, graph, X = forest_and_rows
    monkeypatch.setattr(verify_module, "CHUNK_ROWS", 700)
    other = hyp2onnx.HyperbolicRandomForestClassifier(n_estimators=4, max_depth=5).fit(
        X[:600], np.roll(model.predict(X[:600]), 1)
    )
    report = hyp2onnx.verify(other, graph, X)
    differ = other.predict(X) != model.predict(X)
    assert differ[2_100:].any()  # the last chunk holds some
    assert not report.ok and report.label_mismatches == int(differ.sum())


@pytest.mark.parametrize("terminal", [True, False])
@pytest.mark.parametrize(
    ("make", "desc"),
    [
        (
            lambda: hyp2onnx.HyperbolicRandomForestClassifier(n_estimators=5, max_depth=4),
            "correcting thresholds",
        ),
        (
            lambda: hyp2onnx.HyperbolicRotationForestClassifier(n_estimators=5, max_depth=4),
            "growing rotation trees",
        ),
    ],
    ids=["forest-correction", "rotation-growth"],
)
def test_long_fits_count_their_trees_on_a_terminal_only(monkeypatch, terminal, make, desc):
    """A forest's correction (trees routed one by one) and a rotation forest's growth
    count trees on a terminal; the fitted model is the one a silent fit gives."""
    X, k = points(400, 2, seed=5)
    y = labels(k, 3)
    silent = make().set_params(random_state=0).fit(X, y)
    stderr = _Terminal() if terminal else io.StringIO()
    monkeypatch.setattr(sys, "stderr", stderr)
    shown_fit = make().set_params(random_state=0).fit(X, y)
    monkeypatch.undo()
    np.testing.assert_array_equal(shown_fit.predict_proba(X), silent.predict_proba(X))
    shown = stderr.getvalue()
    if terminal:
        assert desc in shown and "/5 " in shown and "trees" in shown, shown
        assert shown.count("%|") == shown.count(desc + ":"), shown  # no other bar
    else:
        assert shown == ""
