"""Check an exported graph against the Python model it came from.

[`verify`][hyp2onnx.verification.verify] compares the Python model's own ``predict`` /
``predict_proba`` on the points as the user holds them (float64) with the
graph's outputs in onnxruntime on what the graph receives (the points cast
to its input type), labels and every numeric output. Casting the model's
input too would hide what the cast loses: a float32 graph that misroutes
categorical codes above ``2**24`` or far points would pass. Tests, the command
line and users share it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _runtime
from ._feeds import feeds, input_specs, named_arrays
from ._progress import bar
from .errors import VerificationError
from .geometry import raise_rows

if TYPE_CHECKING:
    import onnx

    from .export._metadata import GraphMetadata

__all__ = [
    "VerifyReport",
    "default_rtol",
    "default_tolerance",
    "reference_evaluator",
    "run_onnx",
    "verify",
]

#: Isolation forests: accepted difference of a graph's anomaly score from numpy's
#: (scores lie in [-1, 0); 4 ulps of 1). The summed path lengths and labels are exact.
ANOMALY_SCORE_ATOL = 4.5e-16


@dataclass(frozen=True)
class VerifyReport:
    """How an ONNX graph's outputs compare with the Python model's."""

    rows: int
    atol: float
    label_mismatches: int | None  #: None for regressors
    max_abs_diff: dict[str, float] = field(default_factory=dict)  #: per numeric output
    worst_rows: list[int] = field(default_factory=list)  #: rows that differ most (up to 5)
    rtol: float = 0.0
    #: per numeric output, how many values differ by more than ``atol + rtol * |expected|``
    beyond_tolerance: dict[str, int] = field(default_factory=dict)
    #: per numeric output whose absolute tolerance is not ``atol``, the one it got
    #: (an isolation forest's ``scores``: ``atol`` + `ANOMALY_SCORE_ATOL`)
    output_atol: dict[str, float] = field(default_factory=dict)
    #: the first ``short_batch_rows`` rows again, as one batch, against the short side's
    #: tolerance (graphs whose short batches take the exact scores; None otherwise)
    short_batch: VerifyReport | None = None

    @property
    def ok(self) -> bool:
        """No label differs and every numeric value is within ``atol + rtol * |expected|``
        (in the short batch too)."""
        short_ok = self.short_batch is None or self.short_batch.ok
        return short_ok and not self.label_mismatches and not any(self.beyond_tolerance.values())

    def to_dict(self) -> dict[str, Any]:
        short = None if self.short_batch is None else self.short_batch.to_dict()
        return {**asdict(self), "ok": self.ok, "short_batch": short}

    def __str__(self) -> str:
        parts = [f"{self.rows} rows"]
        if self.label_mismatches is not None:
            agree = 1.0 - self.label_mismatches / self.rows if self.rows else 1.0
            parts.append(f"labels agree on {agree:.4%} ({self.label_mismatches} differ)")
        relative = f" + {self.rtol:.3g} x |value|" if self.rtol else ""
        for name, diff in self.max_abs_diff.items():
            tolerance = f"{self.output_atol.get(name, self.atol):.3g}{relative}"
            parts.append(f"max |{name} difference| {diff:.3g} (tolerance {tolerance})")
            if self.beyond_tolerance.get(name):
                parts.append(f"{self.beyond_tolerance[name]} {name} values beyond it")
        if self.worst_rows and not self.ok:
            parts.append("worst rows " + ", ".join(map(str, self.worst_rows)))
        if self.short_batch is not None:
            parts.append(f"as one short batch, {self.short_batch}")
        return ("OK: " if self.ok else "MISMATCH: ") + "; ".join(parts)

    def raise_if_failed(self) -> VerifyReport:
        """Raise [`VerificationError`][hyp2onnx.errors.VerificationError] unless [`ok`][hyp2onnx.verification.VerifyReport.ok]; return self."""
        if not self.ok:
            raise VerificationError(str(self))
        return self


def default_tolerance(metadata: Mapping[str, Any], *, rows: int | None = None) -> float:
    """Largest output difference accepted for a graph, from how it computes.

    Follows from the model's description, which the export records: the
    precision leaf values are added in (``sum_dtype``) and the link function
    (``post_transform``), and from whether the encoding computes in float32
    whatever the model does. Float64 sums in the model's order with no link
    function give the Python model's values bit for bit (0); a logistic or
    softmax is evaluated by the runtime's own ``exp``, which differs from the C
    library's in the last bit (1e-15); float32 sums,
    as XGBoost adds, carry float32 rounding of the link (1e-6); an encoding
    that adds in float32 in its own order differs by float32 roundings of
    the sum (1e-5). An encoding that adds the trees in the runtime's order
    (``fast``) adds the bound it records in the metadata (``value_bound``):
    the largest difference two orders of the sums can make; a batch of
    ``rows`` rows, at most its ``short_batch_rows``, takes the ordered sums
    instead (``short_batch_value_bound``, 0), and gets the tolerance of those.
    """
    base = _ordered_tolerance(metadata)
    if not _encoding_of(metadata).value_bound:
        return base
    if rows is not None and rows <= metadata.get("short_batch_rows", 0):
        return base + float(metadata["short_batch_value_bound"])
    if "value_bound" not in metadata:
        raise ValueError(
            "the graph's metadata lacks value_bound (exported by an older hyp2onnx): "
            "re-export it, or pass atol."
        )
    return base + float(metadata["value_bound"])


def _encoding_of(metadata: Mapping[str, Any]) -> Any:
    from .emit import encoding

    return encoding(metadata["encoding"])


def _ordered_tolerance(metadata: Mapping[str, Any]) -> float:
    """[`default_tolerance`][hyp2onnx.verification.default_tolerance] of a graph that adds its trees in the model's order."""
    if _encoding_of(metadata).float32:
        return 1e-5
    missing = [key for key in ("sum_dtype", "post_transform") if key not in metadata]
    if missing:
        raise ValueError(
            f"the graph's metadata lacks {', '.join(missing)} (exported by an older hyp2onnx): "
            "re-export it, or pass atol."
        )
    if metadata["sum_dtype"] == "float32":
        return 1e-6
    return 0.0 if metadata["post_transform"] == "identity" else 1e-15


def default_rtol(metadata: Mapping[str, Any]) -> float:
    """Largest relative difference accepted on top of [`default_tolerance`][hyp2onnx.verification.default_tolerance].

    Float32 arithmetic errs in proportion to the values: a compat graph's
    float32 sums of regression targets near 1000 differ by about 1e-4, far
    above an absolute 1e-5, and XGBoost's float32 scores likewise. The
    exact scikit-learn, oblique and LightGBM graphs stay bit exact (0). The
    figures are [`default_tolerance`][hyp2onnx.verification.default_tolerance]'s, read as relative differences,
    without the ``value_bound`` of the fast encoding (an absolute bound).
    """
    return _ordered_tolerance(metadata)


def run_onnx(
    onnx_model: onnx.ModelProto, X: Any, *, threads: int | None = None
) -> dict[str, np.ndarray]:
    """Run ``onnx_model`` in onnxruntime on ``X``; outputs by name.

    ``X`` is one array for a graph with one input (hyp2onnx's own graphs
    take float rows ``X``), or a mapping {input name: array} naming every
    input of a graph with several (a composed graph takes its encoder's
    inputs). Each array is checked against its input and cast to its type
    only where nothing is lost (`hyp2onnx._feeds.feeds`):
    NaN, infinity, and values a float input cannot hold (float32 overflow)
    raise [`InvalidPointError`][hyp2onnx.errors.InvalidPointError] naming the rows
    ([`hyp2onnx.geometry.check_representable`][hyp2onnx.geometry.check_representable]), as do
    fractional or out-of-range values for an integer input; a wrong rank,
    dimension, element kind or input name raises ValueError. The graph
    itself cannot refuse such values and would return confident labels.
    """
    session = _runtime.session(onnx_model, threads=threads)
    fed = feeds(input_specs(onnx_model), X)
    outputs = _runtime.run(session, fed)
    named = {o.name: value for o, value in zip(session.get_outputs(), outputs, strict=True)}
    refuse_off_manifold(named)
    return named


def refuse_off_manifold(outputs: dict[str, np.ndarray]) -> None:
    """Raise `InvalidPointError` for rows a composed graph flags.

    A graph with an encoder in front (`hyp2onnx.compose`) returns
    ``on_manifold`` [N]: false where the encoder's point is off the model's
    manifold, whose outputs are then not answers.
    """
    from .export.composition import ON_MANIFOLD

    if ON_MANIFOLD in outputs:
        raise_rows(
            ~np.asarray(outputs[ON_MANIFOLD], dtype=bool),
            "give encoder outputs off the model's manifold (the graph's on_manifold is false)",
            "The encoder's points must lie on the manifold the model was trained for: check "
            "the encoder's output geometry, curvature and timelike column, and its inputs.",
        )


def reference_evaluator(onnx_model: onnx.ModelProto) -> Any:
    """``onnx.reference.ReferenceEvaluator`` for ``onnx_model``, with GatherElements and
    the opset-3 TreeEnsembleRegressor's double attributes fixed.

    onnx's reference GatherElements (1.23) is built on ``np.choose``, which
    takes at most 64 choices, and its fallback reads the wrong elements for
    larger tables (ours have up to ``2**12`` rows); this class follows the
    operator's definition with ``np.take_along_axis``.
    """
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.aionnxml.op_tree_ensemble_regressor import (
        TreeEnsembleRegressor as Regressor,
    )

    class GatherElements(OpRun):
        def _run(self, data, indices, axis=None):
            axis = 0 if axis is None else int(axis)
            indices = np.where(indices < 0, indices + data.shape[axis], indices)
            return (np.take_along_axis(data, indices.astype(np.int64), axis=axis),)

    class TreeEnsembleRegressor(Regressor):
        op_domain = "ai.onnx.ml"

        def _run(self, X, **attributes):  # type: ignore[override]
            # onnx 1.23 reads only nodes_values and target_weights, never their
            # double *_as_tensor forms (the fast graph of multi-class forests)
            for name in ("nodes_values", "target_weights"):
                tensor = attributes.get(f"{name}_as_tensor")
                if attributes.get(name) is None and tensor is not None:
                    attributes[name] = np.asarray(tensor, dtype=np.float64)
            # and returns the input's type where the operator's output is float32
            (y,) = super()._run(X, **attributes)
            return (y.astype(np.float32),)

    return ReferenceEvaluator(onnx_model, new_ops=[GatherElements, TreeEnsembleRegressor])


def _encoder_points(
    composed: onnx.ModelProto,
    metadata: GraphMetadata,
    fed: dict[str, np.ndarray],
    encoder: onnx.ModelProto | str | os.PathLike | None,
) -> np.ndarray:
    """The encoder's outputs (float64) for the arrays ``fed`` to the composed graph, run
    in onnxruntime on their own."""
    from .export.composition import encoder_of, encoder_sha256

    if encoder is None:
        part, output = encoder_of(composed)
    else:
        digest = encoder_sha256(encoder)
        if digest != metadata["encoder_sha256"]:
            raise ValueError(
                f"this encoder (sha256 {digest[:16]}...) is not the one composed into the graph "
                f"(sha256 {metadata['encoder_sha256'][:16]}...)."
            )
        part, output = _runtime.load(encoder), metadata["encoder_output"]
    # the composed graph's inputs are the encoder's, by name and type
    (points,) = _runtime.run(
        _runtime.session(part), feeds(input_specs(part), fed), outputs=[output]
    )
    return np.asarray(points, dtype=np.float64)


def _python_outputs(model: Any, X: np.ndarray, metadata: GraphMetadata) -> dict[str, np.ndarray]:
    """The model's own answers on the graph's input rows ``X``, as its kind gives them."""
    from .export import kind_for

    return kind_for(model).python_outputs(model, X, metadata)


def _both_sides(
    model: Any,
    onnx_model: onnx.ModelProto,
    metadata: GraphMetadata,
    X: Any,
    encoder: onnx.ModelProto | str | os.PathLike | None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
    """The graph's outputs, the Python model's, and the number of rows (the graph's)."""
    specs = input_specs(onnx_model)
    if metadata.is_composed:  # the encoder's inputs, one array or a mapping by name
        fed = feeds(specs, X)  # checked and cast as in use, before either side runs
        got = run_onnx(onnx_model, fed)
        points = _encoder_points(onnx_model, metadata, fed, encoder)
        return got, _python_outputs(model, points, metadata), int(points.shape[0])
    if encoder is not None:
        raise ValueError("encoder= is for composed graphs; this graph has no encoder.")
    X = np.asarray(named_arrays(specs, X)[0][specs[0].name])  # {"X": array} is X too
    width = metadata["n_features_in"]
    if X.ndim != 2 or X.shape[1] != width:
        raise ValueError(f"X must have shape (n_samples, {width}) for this model, got {X.shape}.")
    feeds(specs, X)  # refuse NaN, inf and overflow before either side runs
    X = np.asarray(X, dtype=np.float64)  # the data as the user holds it
    if X.shape[0] > CHUNK_ROWS:
        return (*_in_chunks(model, onnx_model, metadata, X), int(X.shape[0]))
    got = run_onnx(onnx_model, X)  # cast to the graph's input type, as in use
    return got, _python_outputs(model, X, metadata), int(X.shape[0])


#: Rows per step when verify compares large data (a progress bar counts them on a terminal).
CHUNK_ROWS = 65_536


def _in_chunks(
    model: Any, onnx_model: onnx.ModelProto, metadata: GraphMetadata, X: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Both sides, ``CHUNK_ROWS`` rows at a time (one session), with a progress bar on a
    terminal; each output joined over the chunks."""
    session = _runtime.session(onnx_model)
    specs = input_specs(onnx_model)
    got: list[dict[str, np.ndarray]] = []
    want: list[dict[str, np.ndarray]] = []
    with bar(X.shape[0], "verify") as shown:
        for start in range(0, X.shape[0], CHUNK_ROWS):
            part = X[start : start + CHUNK_ROWS]
            outputs = session.run(None, feeds(specs, part))
            got.append({o.name: v for o, v in zip(session.get_outputs(), outputs, strict=True)})
            want.append(_python_outputs(model, part, metadata))
            shown.update(part.shape[0])
    return _joined(got), _joined(want)


def _joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {name: np.concatenate([np.asarray(p[name]) for p in parts]) for name in parts[0]}


def verify(
    model: Any,
    onnx_model_or_path: onnx.ModelProto | str | os.PathLike | Any,
    X: Any,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    encoder: onnx.ModelProto | str | os.PathLike | None = None,
) -> VerifyReport:
    """Compare an exported graph with ``model`` on the points ``X``.

    The model answers on ``X`` as given (as float64); the graph on ``X``
    cast to its input type, which is what it receives in use. A float32
    graph is thus checked against the model on the user's data, and what
    the cast loses (close angles of far points, codes float32 cannot hold)
    shows as a disagreement. NaN, infinity and values the graph's input type
    cannot hold are refused first ([`run_onnx`][hyp2onnx.verification.run_onnx]). A value passes when it
    differs by at most ``atol + rtol * |expected|``. Neither given: by
    encoding and backend ([`default_tolerance`][hyp2onnx.verification.default_tolerance], [`default_rtol`][hyp2onnx.verification.default_rtol]);
    ``atol`` alone: that absolute tolerance (``rtol`` 0); ``rtol`` alone:
    the default ``atol``. Label differences are counted exactly. More than
    ``CHUNK_ROWS`` rows are compared a chunk at a time, with a progress bar
    on a terminal (a plain graph's; a composed graph's run whole).

    A composed graph (`hyp2onnx.compose`) takes the encoder's raw
    inputs ``X``: one array for an encoder with one input, else a mapping
    {input name: array} naming each (integer and bool inputs included, each
    checked against its declared type, rank and dimensions as
    [`run_onnx`][hyp2onnx.verification.run_onnx] does). The number of rows is the
    graph's: the rows of the encoder's output. The model answers on the encoder's outputs, run in
    onnxruntime from ``encoder`` (the encoder file or model, which must be
    the one composed: its sha256 is checked) or, without it, from the
    encoder part cut out of the graph. Routing and labels are thus checked
    exactly given the encoder's outputs; rows whose encoder point is off the
    manifold are refused (`refuse_off_manifold`).

    A compiled scorer (``hyp2onnx.export.compiled.CompiledScorer``) in place of
    the graph is checked the same way, with the exact encoding's tolerance.
    """
    from .export import read_metadata
    from .export.compiled import CompiledScorer

    if isinstance(onnx_model_or_path, CompiledScorer):
        return _verify_compiled(model, onnx_model_or_path, X, atol=atol, rtol=rtol)
    onnx_model = _runtime.load(onnx_model_or_path)
    metadata = read_metadata(onnx_model)
    got, want, n_rows = _both_sides(model, onnx_model, metadata, X, encoder)
    report = _compare(got, want, n_rows, metadata, atol=atol, rtol=rtol)
    short = metadata.get("short_batch_rows", 0)
    if short and n_rows > short and encoder is None and not metadata.is_composed:
        # the exact side of the graph, and the bound recorded for it: its first rows as one batch
        specs = input_specs(onnx_model)
        first = np.asarray(named_arrays(specs, X)[0][specs[0].name])[:short]
        got, want, rows = _both_sides(model, onnx_model, metadata, first, None)
        report = replace(
            report, short_batch=_compare(got, want, rows, metadata, atol=atol, rtol=rtol)
        )
    return report


def _verify_compiled(
    model: Any, scorer: Any, X: Any, *, atol: float | None, rtol: float | None
) -> VerifyReport:
    """`verify` of a compiled scorer (``hyp2onnx.export.compiled``): its outputs on the
    points as the user holds them, with the exact encoding's tolerance."""
    metadata = scorer.metadata()
    X = np.asarray(X, dtype=np.float64)
    width = metadata["n_features_in"]
    if X.ndim != 2 or X.shape[1] != width:
        raise ValueError(f"X must have shape (n_samples, {width}) for this model, got {X.shape}.")
    got = scorer.predict_outputs(X)
    return _compare(
        got, _python_outputs(model, X, metadata), len(X), metadata, atol=atol, rtol=rtol
    )


def _compare(
    got: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    n_rows: int,
    metadata: GraphMetadata,
    *,
    atol: float | None,
    rtol: float | None,
) -> VerifyReport:
    """The graph's outputs ``got`` against the model's ``want`` on a batch of ``n_rows`` rows,
    with the tolerance of that batch (`verify`)."""
    tolerance = default_tolerance(metadata, rows=n_rows) if atol is None else float(atol)
    relative = (
        float(rtol) if rtol is not None else (default_rtol(metadata) if atol is None else 0.0)
    )
    if not (tolerance >= 0 and relative >= 0):  # NaN fails too
        raise ValueError(f"atol and rtol must be >= 0, got {tolerance} and {relative}.")

    label_mismatches = None
    row_error = np.zeros(n_rows)
    diffs: dict[str, float] = {}
    beyond: dict[str, int] = {}
    own_atol: dict[str, float] = {}
    if "label" in want:
        differs = got["label"] != want["label"]
        label_mismatches = int(differs.sum())
        row_error = np.where(differs, np.inf, row_error)
    for name in ("probabilities", "variable", "path_length", "scores", "covered"):
        if name in want:
            expected = want[name].reshape(got[name].shape).astype(np.float64)
            delta = np.abs(got[name].astype(np.float64) - expected)
            diffs[name] = float(delta.max()) if delta.size else 0.0
            # The runtime's Pow may differ from numpy's 2 ** x in the last bits.
            slack = ANOMALY_SCORE_ATOL if name == "scores" and atol is None else 0.0
            if slack:
                own_atol[name] = tolerance + slack
            bound = tolerance + slack + relative * np.abs(expected)
            # ~(delta <= bound) also counts NaN outputs as beyond
            beyond[name] = int(np.count_nonzero(~(delta <= bound)))
            if delta.ndim == 1:
                delta = delta[:, None]
            row_error = np.maximum(row_error, delta.max(axis=1) if delta.size else row_error)
    worst = [int(i) for i in np.argsort(-row_error, kind="stable")[:5] if row_error[i] > 0]
    return VerifyReport(
        rows=n_rows,
        atol=tolerance,
        label_mismatches=label_mismatches,
        max_abs_diff=diffs,
        worst_rows=worst,
        rtol=relative,
        beyond_tolerance=beyond,
        output_atol=own_atol,
    )
