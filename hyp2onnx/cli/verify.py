"""``hyp2onnx verify``: compare an exported graph with its model on data."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from ._common import (
    EXIT_CODES_HELP,
    EXIT_DISAGREE,
    EXIT_OK,
    InputError,
    debug_option,
    first_line,
    run,
    subcommand,
    tolerance_options,
)
from ._inputs import match_data, open_inputs
from ._models import load_model, load_onnx, onnx_metadata, onnx_session

__all__ = ["VerifyResult", "command", "verify_files"]


@dataclass(frozen=True)
class VerifyResult:
    """The agreement report of one model, graph and data file."""

    model_path: Path
    onnx_path: Path
    data_path: Path
    report: Any  #: a hyp2onnx.verification.VerifyReport

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.report.ok else EXIT_DISAGREE

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": str(self.model_path),
            "onnx": str(self.onnx_path),
            "data": str(self.data_path),
            **self.report.to_dict(),
        }


def verify_files(
    model_path: Path,
    onnx_path: Path,
    data_path: Path,
    *,
    atol: float | None = None,
    rtol: float | None = None,
) -> VerifyResult:
    """Run [`hyp2onnx.verify`][hyp2onnx.verification.verify] on the three files, naming the file at fault on error."""
    onnx_model = load_onnx(onnx_path)
    metadata = onnx_metadata(onnx_model, onnx_path)
    onnx_session(onnx_model, onnx_path)  # a graph onnxruntime refuses is the file's fault
    data = match_data(open_inputs(data_path), onnx_model, metadata, onnx_path)
    model = load_model(model_path)
    if type(model).__name__ != metadata["estimator_class"]:
        raise InputError(
            onnx_path,
            f"was exported from a {metadata['estimator_class']}, but {model_path} holds a "
            f"{type(model).__name__}",
            "pass the model file the graph was converted from",
        )
    X = data.read_all()
    data.check_points(X, 0)
    data.feeds(X, 0)  # the data's faults, named as the data file's

    from ..verification import verify

    try:
        report = verify(model, onnx_model, X, atol=atol, rtol=rtol)
    except (ValueError, TypeError) as exc:
        raise InputError(model_path, first_line(exc)) from exc
    return VerifyResult(model_path, onnx_path, data_path, report)


HELP = f"""Check that ONNX graph GRAPH agrees with MODEL on the points in DATA.

Runs MODEL in Python on the points as DATA holds them (float64) and the
graph in onnxruntime on what it receives (the points cast to its input
type), and reports label differences and the largest
difference of every numeric output. The exit status is 1 if any label
differs or any value differs by more than ATOL + RTOL x |value| (by
default both 0 for exact scikit-learn graphs; see
hyp2onnx.verification.default_tolerance and default_rtol; --atol alone sets an
absolute tolerance).

MODEL is read as by 'hyp2onnx convert'; a pickle runs arbitrary code when
loaded, so pass only pickles you trust (prefer .skops). DATA is .npy,
.csv or .parquet and is read into memory. A graph with an encoder in front
takes the encoder's raw inputs: for several inputs, or integer or bool
ones, DATA is an .npz file (numpy.savez) with one array per input, named
after it; the encoder is run on them in onnxruntime, then MODEL on its
outputs.

\b
Examples:
  hyp2onnx verify forest.pkl forest.onnx --data sample.npy
  hyp2onnx verify forest.skops forest.onnx --data sample.csv --json
  hyp2onnx verify forest.pkl composed.onnx --data inputs.npz

{EXIT_CODES_HELP}
"""


def _report_text(result: VerifyResult) -> None:
    click.echo(str(result.report))


def _report_json(result: VerifyResult) -> None:
    click.echo(json.dumps(result.to_dict(), indent=2))


@subcommand("verify", HELP, "Check a graph against its model on data.")
@click.argument("model", type=click.Path(path_type=Path))
@click.argument("onnx_file", metavar="GRAPH", type=click.Path(path_type=Path))
@click.option(
    "--data",
    "data",
    required=True,
    type=click.Path(path_type=Path),
    help="Points to compare on (.npy/.csv/.parquet), or a composed graph's inputs "
    "(.npz, one array per input name).",
)
@tolerance_options
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@debug_option
def command(
    model: Path,
    onnx_file: Path,
    data: Path,
    atol: float | None,
    rtol: float | None,
    as_json: bool,
    debug: bool,
) -> int:
    return run(
        lambda: verify_files(model, onnx_file, data, atol=atol, rtol=rtol),
        debug=debug,
        report=_report_json if as_json else _report_text,
    )
