"""``hyp2onnx predict``: score a data file with an exported graph, chunk by chunk, into CSV."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import numpy as np

from ..ir import Task
from ._common import (
    EXIT_CODES_HELP,
    EXIT_OK,
    InputError,
    atomic_output,
    check_output,
    debug_option,
    echo_written,
    progress,
    run,
    subcommand,
    with_suffix,
)
from ._data import DEFAULT_CHUNK_ROWS, refuse_flagged_rows
from ._inputs import match_data, open_inputs
from ._models import load_onnx, onnx_metadata, onnx_session

if TYPE_CHECKING:
    from ..export._metadata import GraphMetadata

__all__ = [
    "SCORING_BUDGET",
    "PredictResult",
    "chunk_rows_for",
    "command",
    "default_predictions",
    "predict_file",
]


@dataclass(frozen=True)
class PredictResult:
    """Where the predictions went and how many rows were scored."""

    onnx_path: Path
    data_path: Path
    output: Path
    rows: int

    exit_code = EXIT_OK


#: Bytes a chunk's scoring may take beyond the libraries' own memory (about 320 MB).
SCORING_BUDGET = 256 * 2**20


def chunk_rows_for(onnx_model: Any, metadata: GraphMetadata, requested: int) -> int:
    """Rows per chunk: at most ``requested``, fewer when the graph's working set is wide.

    Each row of a chunk costs memory in proportion to the trees times the
    output columns: the exact and compat encodings hold one leaf per tree
    and output, the standard encoding several gathered tables of that
    width; the per-row costs below come from ``benchmarks/bench_predict_memory.py``
    (benchmarks/results/predict_memory.md). The chunk is sized so that this
    stays under `SCORING_BUDGET`.
    """
    width = (metadata.n_trees or 1) * max(_n_output_columns(onnx_model, metadata), 1)
    per_tree_output = 48 if metadata["encoding"] == "standard" else 8
    per_row = per_tree_output * width + 4096
    return max(1, min(requested, SCORING_BUDGET // per_row))


def _n_output_columns(onnx_model: Any, metadata: GraphMetadata) -> int:
    if metadata["classes"] is not None:
        return len(metadata["classes"])
    dims = onnx_model.graph.output[0].type.tensor_type.shape.dim
    return int(dims[1].dim_value) if len(dims) > 1 and dims[1].dim_value else 1


def default_predictions(data_path: Path) -> Path:
    """``DATA`` with its suffix replaced by ``.predictions.csv``."""
    return with_suffix(data_path, ".predictions.csv", "data")


#: Per-row outputs written after the answer's columns, under their own names: a region
#: tree's ``covered`` (whether a region holds the row) and ``region`` (its number, -1: none).
EXTRA_OUTPUTS = ("covered", "region")


def _header(metadata: GraphMetadata, outputs: dict[str, Any]) -> list[str]:
    extra = [name for name in EXTRA_OUTPUTS if name in outputs]
    if metadata["task"] == Task.ANOMALY:  # isolation forests
        return ["label", "score", "path_length", *extra]
    if metadata["task"] == Task.CLASSIFICATION:
        classes = metadata["classes"]
        n = outputs["probabilities"].shape[1]
        names = classes if classes is not None and len(classes) == n else list(range(n))
        return ["label", *(f"probability_{c}" for c in names), *extra]
    n = outputs["variable"].shape[1] if outputs["variable"].ndim == 2 else 1
    return (["value"] if n == 1 else [f"value_{i}" for i in range(n)]) + extra


#: First characters that make a spreadsheet read a cell as a formula (OWASP, CSV injection).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _field(value: Any) -> str:
    """One CSV field of text: quoted when it holds a comma, quote or line break.

    Text starting like a formula (``=``, ``+``, ``-``, ``@``, tab, carriage
    return) gets a leading ``'``, as OWASP's CSV-injection guidance says, so
    a spreadsheet shows a class label such as ``=HYPERLINK(...)`` as text.
    """
    text = str(value)
    if text.startswith(_FORMULA_STARTS):
        text = "'" + text
    if any(c in text for c in ',"\r\n\t'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _float_format(dtype: np.dtype) -> str:
    """Shortest exact text: 9 significant digits round-trip float32, repr does float64."""
    return "%.9g" if dtype == np.float32 else "%r"


def _lines(metadata: GraphMetadata, outputs: dict[str, Any]) -> str:
    """The CSV rows of one chunk's outputs."""
    if metadata["task"] == Task.ANOMALY:  # isolation forests: label, score, path length
        first = np.asarray(outputs["label"]).tolist()
        values = np.stack([outputs["scores"], outputs["path_length"]], axis=1)
    elif metadata["task"] == Task.CLASSIFICATION:
        labels = np.asarray(outputs["label"])
        first = labels.tolist()
        if not (np.issubdtype(labels.dtype, np.number) or labels.dtype == np.bool_):
            first = [_field(x) for x in first]
        values = np.asarray(outputs["probabilities"])
    else:
        first = None
        values = np.asarray(outputs["variable"])
        values = values.reshape(values.shape[0], -1)
    fmt = ",".join([_float_format(values.dtype)] * values.shape[1])
    if first is None:
        rows = [fmt % tuple(r) for r in values.astype(np.float64).tolist()]
    else:
        fmt = "%s," + fmt
        rows = [fmt % (a, *r) for a, r in zip(first, values.astype(np.float64).tolist())]
    extra = [np.asarray(outputs[name]).tolist() for name in EXTRA_OUTPUTS if name in outputs]
    if extra:  # bool as True/False, integers as they are
        rows = [",".join([row, *map(str, more)]) for row, *more in zip(rows, *extra, strict=True)]
    return "".join(row + "\n" for row in rows)


def predict_file(
    onnx_path: Path,
    data_path: Path,
    output: Path,
    *,
    chunk_rows: int | None = None,
    force: bool = False,
    check_manifold: bool = True,
    compiled: Path | None = None,
) -> PredictResult:
    """Write the graph's outputs for every row of ``data_path`` to the CSV ``output``.

    Rows are read, checked and scored ``chunk_rows`` (default
    `DEFAULT_CHUNK_ROWS`) at a time, so memory stays bounded. An ``.npz``
    whose inputs cannot be split into rows (`hyp2onnx.cli._inputs`) is
    scored whole; asking for ``chunk_rows`` then is an error. ``output``
    appears complete or not at all. ``compiled``: the fitted model file the
    graph was exported from, scored instead by its compiled trees
    (`_compiled_scorer`).
    """
    check_output(output, force=force)
    if output.resolve() in (data_path.resolve(), onnx_path.resolve()):
        raise InputError(output, "is one of the input files", "choose another name with -o")
    onnx_model = load_onnx(onnx_path)
    metadata = onnx_metadata(onnx_model, onnx_path)
    data = match_data(open_inputs(data_path), onnx_model, metadata, onnx_path)
    if chunk_rows is not None and data.split_problem is not None:
        raise InputError(
            data_path,
            f"--chunk-rows cannot split these inputs into rows: {data.split_problem}",
            "leave out --chunk-rows; the file is then scored whole",
        )
    session = onnx_session(onnx_model, onnx_path)
    size = chunk_rows_for(onnx_model, metadata, chunk_rows or DEFAULT_CHUNK_ROWS)
    names = [o.name for o in session.get_outputs()]
    score = lambda chunk, first: dict(
        zip(names, _scored(session, data.feeds(chunk, first), data_path, first))
    )
    if compiled is not None:
        score = _compiled_scorer(compiled, metadata, score)

    rows = 0
    with atomic_output(output, force=force) as f, progress(data.n_rows, "predict") as bar:
        header_written = False
        for first, chunk in data.chunks(size):
            data.check_points(chunk, first, manifold=check_manifold)
            outputs = score(chunk, first)
            refuse_flagged_rows(outputs, data_path, first)
            if not header_written:
                f.write(",".join(map(_field, _header(metadata, outputs))) + "\n")
                header_written = True
            f.write(_lines(metadata, outputs))
            n = int(np.shape(outputs[names[0]])[0])  # the graph's rows
            rows += n
            bar.update(n)
        if not header_written:  # no rows: still a valid CSV with its header
            outputs = dict(zip(names, session.run(None, data.feeds(data.empty(), 0))))
            f.write(",".join(map(_field, _header(metadata, outputs))) + "\n")
    return PredictResult(onnx_path, data_path, output, rows)


def _scored(session: Any, feeds: dict[str, Any], data_path: Path, first: int) -> list[Any]:
    """The graph's outputs for one chunk; an `InputError` naming the data's rows and input
    where the graph fails on them (an encoder given an id beyond its table)."""
    from .._runtime import run
    from ..errors import GraphRunError

    try:
        return run(session, feeds, first_row=first)
    except GraphRunError as exc:
        raise InputError(data_path, exc.problem, exc.fix) from exc


#: Rows of the first chunk the compiled scorer and the graph must agree on.
AGREEMENT_ROWS = 256


def _compiled_scorer(model_path: Path, metadata: GraphMetadata, graph: Any) -> Any:
    """``score(chunk, first)`` by the compiled trees of the model in ``model_path``
    (`hyp2onnx.export.compiled`), checked on the first chunk against the graph's
    ``score``: the same labels and values within the graph's bound, else an error
    (a model file the graph was not exported from)."""
    from ..errors import MissingExtraError, UnsupportedModelError
    from ..export import kind_for
    from ..export.compiled import compile_model_lleaves
    from ..verification import default_tolerance
    from ._models import load_model

    model = load_model(model_path)
    stated = {}
    if kind_for(model).geometry == "stated":  # the graph's metadata says the points' geometry
        stated = {k: metadata[k] for k in ("input_geometry", "curvature", "timelike_dim")}
    try:
        scorer = compile_model_lleaves(model, **stated)
    except (MissingExtraError, UnsupportedModelError) as exc:
        raise InputError(model_path, str(exc).rstrip("."), "score with the graph alone") from exc
    name = "X"
    checked = False

    def score(chunk: dict[str, np.ndarray], first: int) -> dict[str, np.ndarray]:
        nonlocal checked
        points = np.asarray(chunk[name], dtype=np.float64)
        outputs = scorer.predict_outputs(points, check=False)
        if not checked:
            head = {name: chunk[name][:AGREEMENT_ROWS]}
            want = graph(head, first)
            n = len(head[name])
            tolerance = default_tolerance(metadata, rows=n) + 1e-15
            agree = all(
                np.array_equal(outputs[k][:n], want[k])
                if k == "label"
                else np.all(np.abs(outputs[k][:n] - want[k]) <= tolerance * (1 + np.abs(want[k])))
                for k in want
                if k in outputs
            )
            if not agree:
                raise InputError(
                    model_path,
                    "its compiled trees do not give the graph's outputs on the first rows",
                    "give --compiled the model file the graph was exported from",
                )
            checked = True
        return outputs

    return score


HELP = f"""Score the points in DATA with ONNX graph GRAPH and write the predictions as CSV.

DATA (.npy, .csv or .parquet) is read at most CHUNK_ROWS rows at a time,
fewer for wide graphs (many trees times classes), so scoring takes at most
about 256 MiB beyond the libraries' own memory whatever the file's size; a
progress bar is shown when stderr is a terminal. A graph with an encoder in
front that takes several inputs, or integer or bool ones, reads DATA as an
.npz file (numpy.savez) with one array per input, named after it (an .npz
of one array serves a one-input graph); it is read into memory whole. Its
arrays are cut into row chunks only if every input's first axis is the rows
(the same named first dimension in every input, and nowhere else); other
inputs (an edge list beside node features) are scored whole, and
--chunk-rows is then an error. Points are checked to lie
on the graph's manifold first (--no-manifold-check skips that for trusted
data); NaN, infinity, values the graph's input type cannot hold and
invalid categorical codes are refused either way. Labels starting with =, +, -, @, tab or carriage return
are written with a leading ' so spreadsheets do not run them as formulas. The CSV has a header
and one row per point: label and one probability_<class> column per class
for classifiers, value (value_0, ... for several targets) for regressors,
label (+1 inlier, -1 outlier), score and path_length for isolation forests;
a region tree's graph adds covered (True where one of its regions holds the
row) and region (the region's number, -1 for none).
With --compiled MODEL (the fitted model file GRAPH was exported from), the
points are scored by MODEL's trees compiled to machine code by lleaves (pip
install 'hyp2onnx[compiled]'; compiled once, then cached): the same labels,
values within the exact graph's bound, checked against GRAPH on the first rows.
It is written to PREDICTIONS (default: DATA with .predictions.csv) only if
every chunk succeeds; an existing file is replaced only with --force.
A symbolic link is written through to its target; a FIFO or device
(/dev/stdout) is written as a stream, without --force.

\b
Examples:
  hyp2onnx predict forest.onnx points.npy -o predictions.csv
  hyp2onnx predict forest.onnx points.parquet --chunk-rows 100000 --force
  hyp2onnx predict composed.onnx inputs.npz -o predictions.csv

{EXIT_CODES_HELP}
"""


@subcommand("predict", HELP, "Score a data file in chunks with a graph; write CSV.")
@click.argument("onnx_file", metavar="GRAPH", type=click.Path(path_type=Path))
@click.argument("data", type=click.Path(path_type=Path))
@click.option(
    "-o", "--output", metavar="PREDICTIONS", type=click.Path(path_type=Path), help="Output CSV."
)
@click.option(
    "--chunk-rows",
    type=click.IntRange(min=1),
    default=None,
    help=f"Most rows scored at a time (fewer when the graph is wide) [default: "
    f"{DEFAULT_CHUNK_ROWS}]. An error for .npz inputs that cannot be split into rows.",
)
@click.option(
    "--no-manifold-check",
    is_flag=True,
    help="Do not check that the points are on the manifold (categorical codes, NaN and "
    "infinity are still checked).",
)
@click.option("--force", is_flag=True, help="Replace PREDICTIONS if it exists.")
@click.option(
    "--compiled",
    metavar="MODEL",
    type=click.Path(path_type=Path),
    default=None,
    help="Score with the compiled trees of MODEL, the fitted model file GRAPH came from "
    "(the [compiled] extra; cached after the first compile).",
)
@debug_option
def command(
    onnx_file: Path,
    data: Path,
    output: Path | None,
    chunk_rows: int | None,
    no_manifold_check: bool,
    force: bool,
    compiled: Path | None,
    debug: bool,
) -> int:

    def report(result: PredictResult) -> None:
        echo_written(result.output, f"wrote {result.output} ({result.rows} rows)")

    return run(
        lambda: predict_file(
            onnx_file,
            data,
            output if output is not None else default_predictions(data),
            chunk_rows=chunk_rows,
            force=force,
            check_manifold=not no_manifold_check,
            compiled=compiled,
        ),
        debug=debug,
        report=report,
    )
