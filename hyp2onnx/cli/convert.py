"""``hyp2onnx convert``: a trained model file to an ONNX graph taking raw hyperbolic points."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from ..emit import ENCODINGS
from ..geometry import GEOMETRIES
from ._common import (
    EXIT_CODES_HELP,
    EXIT_DISAGREE,
    EXIT_OK,
    InputError,
    atomic_output,
    check_output,
    debug_option,
    describe_contents,
    existing_file,
    first_line,
    is_stream,
    run,
    subcommand,
    tolerance_options,
    with_suffix,
)
from ._inputs import match_data, open_inputs
from ._models import check_convertible, load_model, model_kind, native_formats_help

if TYPE_CHECKING:
    from ..export._metadata import GraphMetadata

__all__ = [
    "ConvertOptions",
    "ConvertResult",
    "command",
    "convert_file",
    "default_output",
    "ort_outputs",
]

GEOMETRY_CHOICES = GEOMETRIES


@dataclass(frozen=True)
class ConvertOptions:
    """How to export: [`hyp2onnx.to_onnx`][hyp2onnx.to_onnx]'s keywords as the command line gives them."""

    dtype: Literal["float32", "float64"] | None = None  #: None: the model's comparison precision
    encoding: str = "fast"
    geometry: str | None = None
    curvature: float | None = None
    timelike_dim: int | None = None
    opset: int | None = None
    #: False: [`hyp2onnx.edge.without_row_blocks`][hyp2onnx.export.edge.without_row_blocks]
    row_blocks: bool = True
    #: True: tensors in ``OUT.data`` beside ``OUT`` (onnx's external data);
    #: None: only when the graph is over 2 GiB, which one file cannot hold.
    external_data: bool | None = None
    #: ``--check``'s tolerances ([`hyp2onnx.verification.verify`][hyp2onnx.verification.verify])
    atol: float | None = None
    rtol: float | None = None
    #: ``--encoder``: an ONNX encoder put in front of the graph (`hyp2onnx.compose`)
    encoder: Path | None = None
    encoder_output: str | None = None  #: ``--encoder-output``: its output holding the points


@dataclass(frozen=True, kw_only=True)
class ConvertResult:
    """What ``convert`` did; ``output`` is None when ``--check`` failed and nothing was written."""

    model_path: Path
    output: Path | None
    intended_output: Path
    n_bytes: int
    metadata: GraphMetadata
    check: Any = None  #: the VerifyReport of --check, if asked
    check_path: Path | None = None
    ort_output: Path | None = None  #: the .ort file of --ort
    config_output: Path | None = None  #: its required_operators.config
    data_output: Path | None = None  #: OUT.data, when written with external data

    @property
    def exit_code(self) -> int:
        return EXIT_DISAGREE if self.check is not None and not self.check.ok else EXIT_OK


def default_output(model_path: Path) -> Path:
    """``MODEL`` with its suffix replaced by ``.onnx``."""
    return with_suffix(model_path, ".onnx", "model")


def ort_outputs(output: Path) -> tuple[Path, Path]:
    """The ``.ort`` file and operator list ``--ort`` writes beside ``output``."""
    from ..export.edge import config_path_for

    ort_path = output.with_suffix(".ort")
    return ort_path, config_path_for(ort_path)


def convert_file(
    model_path: Path,
    output: Path,
    options: ConvertOptions,
    *,
    check_data: Path | None = None,
    force: bool = False,
    ort: bool = False,
) -> ConvertResult:
    """Export the model in ``model_path`` to ``output``, checked on ``check_data`` if given.

    With ``ort`` the graph is also written in onnxruntime's ``.ort`` format
    with its ``required_operators.config`` ([`hyp2onnx.edge.to_ort`][hyp2onnx.export.edge.to_ort]),
    beside ``output``. Nothing is written unless every step succeeds and
    the check (if any) finds no disagreement.
    """
    extra = _check_outputs(model_path, output, force=force, ort=ort)
    source = open_inputs(check_data) if check_data is not None else None
    model, onnx_model = _export(model_path, options)
    from ..export import needs_external_data, read_metadata

    metadata = read_metadata(onnx_model)
    external = options.external_data
    if external is None:
        external = needs_external_data(onnx_model)
    if external and ort:
        raise InputError(
            output,
            "holds its tensors in a separate data file, which --ort cannot take",
            "leave out --ort",
        )
    data = b"" if external else onnx_model.SerializeToString()
    report = None if source is None else _check(model, onnx_model, source, metadata, options)
    unwritten = ConvertResult(
        model_path=model_path,
        output=None,
        intended_output=output,
        n_bytes=len(data),
        metadata=metadata,
        check=report,
        check_path=source.path if source else None,
    )
    if report is not None and not report.ok:
        return unwritten
    if external:
        return _write_external(onnx_model, unwritten, force=force)
    if not ort:
        with atomic_output(output, force=force, binary=True) as f:
            f.write(data)
        return replace(unwritten, output=output)
    return _write_with_ort(onnx_model, data, unwritten, extra, force=force)


def _check_outputs(model_path: Path, output: Path, *, force: bool, ort: bool) -> tuple[Path, ...]:
    """Refuse outputs that are the model file or exist (without ``force``); the ``.ort``
    file and its operator list when ``ort``."""
    model_kind(model_path)
    if output.resolve() == model_path.resolve():
        raise InputError(output, "is the model file itself", "choose another name with -o")
    check_output(output, force=force)
    extra: tuple[Path, ...] = ort_outputs(output) if ort else ()
    if output in extra:
        raise InputError(output, "would also be the .ort file's name", "give -o a .onnx name")
    for path in extra:
        if path.resolve() == model_path.resolve():
            raise InputError(path, "is the model file itself", "choose another name with -o")
        check_output(path, force=force)
    return extra


def _export(model_path: Path, options: ConvertOptions) -> tuple[Any, Any]:
    """The model read from ``model_path`` and its graph, errors as the command line's."""
    from ..export import check_opset, to_onnx

    if options.encoder_output is not None and options.encoder is None:
        raise InputError(None, "--encoder-output needs --encoder", "add --encoder ENCODER.onnx")
    try:
        check_opset(options.opset)
    except ValueError as exc:
        raise InputError(None, f"--opset: {first_line(exc)}") from exc
    model = load_model(model_path)
    check_convertible(
        model,
        model_path,
        geometry=options.geometry,
        curvature=options.curvature,
        timelike_dim=options.timelike_dim,
    )
    export_kwargs: dict[str, Any] = dict(
        dtype=options.dtype,
        encoding=options.encoding,
        target_opset=options.opset,
        input_geometry=options.geometry,
        curvature=options.curvature,
        timelike_dim=options.timelike_dim,
    )
    if options.encoder is not None:
        onnx_model = _with_encoder(model, options, export_kwargs)
    else:
        try:
            onnx_model = to_onnx(model, **export_kwargs)
        except (ValueError, TypeError) as exc:  # UnsupportedModelError is a TypeError
            raise InputError(model_path, first_line(exc)) from exc
    if not options.row_blocks:
        from ..export.edge import without_row_blocks

        onnx_model = without_row_blocks(onnx_model)
    return model, onnx_model


def _check(
    model: Any, onnx_model: Any, source: Any, metadata: GraphMetadata, options: ConvertOptions
) -> Any:
    """``--check``: the graph against the model on the points of ``source``."""
    from ..verification import verify

    data = match_data(source, onnx_model, metadata, options.encoder or source.path)
    X = data.read_all()
    data.check_points(X, 0)
    data.feeds(X, 0)  # the data's faults, named as the data file's
    try:
        return verify(
            model, onnx_model, X, atol=options.atol, rtol=options.rtol, encoder=options.encoder
        )
    except (ValueError, TypeError) as exc:
        raise InputError(source.path, first_line(exc)) from exc


def _write_external(onnx_model: Any, unwritten: ConvertResult, *, force: bool) -> ConvertResult:
    """``output`` and ``OUT.data`` (onnx's external data), both or neither."""
    from ..export import external_data_path, save_onnx

    output = unwritten.intended_output
    data_path = external_data_path(output)
    check_output(data_path, force=force)
    try:
        save_onnx(onnx_model, output, overwrite=force, external_data=True)
    except FileExistsError as exc:
        raise InputError(None, f"{exc}; nothing written", "pass --force") from None
    n_bytes = output.stat().st_size + data_path.stat().st_size
    return replace(unwritten, output=output, n_bytes=n_bytes, data_output=data_path)


def _write_with_ort(
    onnx_model: Any,
    data: bytes,
    unwritten: ConvertResult,
    extra: tuple[Path, ...],
    *,
    force: bool,
) -> ConvertResult:
    """``output``, its ``.ort`` file and operator list, all or none."""
    from ..export.edge import ort_package, write_all

    output = unwritten.intended_output
    ort_path, config_path = extra
    package = ort_package(onnx_model, name=ort_path.stem)
    try:
        write_all(
            {output: data, ort_path: package.ort, config_path: package.config.encode()},
            overwrite=force,
        )
    except FileExistsError as exc:
        raise InputError(None, f"{exc}; nothing written", "pass --force") from None
    return replace(unwritten, output=output, ort_output=ort_path, config_output=config_path)


def _with_encoder(model: Any, options: ConvertOptions, export_kwargs: dict[str, Any]) -> Any:
    """``--encoder``: the model exported behind the encoder (`hyp2onnx.compose`)."""
    from ..export import compose

    assert options.encoder is not None
    existing_file(options.encoder, "encoder ONNX")
    try:
        return compose(options.encoder, model, output=options.encoder_output, **export_kwargs)
    except (ValueError, TypeError) as exc:
        if type(exc.__cause__).__name__ == "DecodeError":  # protobuf cannot parse the file
            raise InputError(
                options.encoder,
                "not an ONNX model (protobuf cannot read it)",
                "pass the encoder's .onnx file to --encoder (the data go to --check)",
            ) from exc
        raise InputError(options.encoder, first_line(exc)) from exc


def report_convert(result: ConvertResult) -> None:
    """Print what was written (stdout, or stderr when OUT is a stream) or why not (stderr)."""
    meta = result.metadata
    err = is_stream(result.intended_output)  # written into /dev/stdout: report beside it
    if result.check is not None:
        click.echo(f"check on {result.check_path}: {result.check}", err=err)
    if result.output is None:
        click.echo(
            f"error: {result.intended_output} not written: the graph disagrees with "
            f"{result.model_path} on {result.check_path}",
            err=True,
        )
        return
    click.echo(
        f"wrote {result.output} ({result.n_bytes} bytes): {meta['estimator_class']}, "
        f"{describe_contents(meta)}, {meta['input_geometry']} input, "
        f"{meta['encoding']} encoding, {meta['input_dtype']}",
        err=err,
    )
    if meta.is_composed:
        click.echo(
            f"with the encoder in front (output {meta['encoder_output']!r}, sha256 "
            f"{meta['encoder_sha256'][:16]}...): it takes the encoder's raw inputs"
        )
    if result.data_output is not None:
        click.echo(f"wrote its tensors to {result.data_output} (external data)", err=err)
    if result.ort_output is not None:
        click.echo(f"wrote {result.ort_output} and {result.config_output}", err=err)


def _negative(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not value < 0:
        raise click.BadParameter(f"curvature must be negative, got {value:g}")
    return value


HELP = f"""Convert a trained MODEL file to an ONNX graph taking raw hyperbolic points.

MODEL is a hyp2onnx estimator saved as .pkl/.pickle/.joblib or .skops, or a
plain tree model trained on unit-ball Klein coordinates (scikit-learn
pickle, {native_formats_help()}), which then needs --geometry.
The graph is written to OUT (default: MODEL with .onnx) only if every step
succeeds; an existing file is replaced only with --force. A symbolic
link is written through to its target; a FIFO or device (/dev/stdout) is
written as a stream, without --force.

A pickle runs arbitrary code when it is loaded: convert only pickles you
trust. Prefer .skops files (skops.io.dump), which are loaded with an
explicit list of trusted types.

\b
Examples:
  hyp2onnx convert forest.pkl
  hyp2onnx convert forest.skops -o forest.onnx --check sample.npy
  hyp2onnx convert forest.pkl --dtype float64 --encoding compat --force
  hyp2onnx convert forest.pkl --ort        # also forest.ort + its operator list
  hyp2onnx convert forest.pkl --encoding standard         # OpenVINO, tract
  hyp2onnx convert booster.json --geometry poincare --curvature -0.5
  hyp2onnx convert mlp.pkl --check sample.npy       # a HyperbolicMLPClassifier
  hyp2onnx convert mlp.pkl --encoding exact     # bit for bit, not the fast default
  hyp2onnx convert regions.pkl --check sample.npy  # hyp2onnx.region_tree(net, X)
  hyp2onnx convert forest.pkl --encoder encoder.onnx --check raw.npy
  hyp2onnx convert forest.pkl --encoder encoder.onnx --check inputs.npz

{EXIT_CODES_HELP}
"""


@subcommand("convert", HELP, "Trained model file -> .onnx graph taking raw hyperbolic points.")
@click.argument("model", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Output .onnx file.")
@click.option(
    "--dtype",
    type=click.Choice(["float32", "float64"]),
    default=None,
    help="Type of the graph's input tensor [default: the precision the model compares in: "
    "float64 if float32 cannot separate its splits (points far from the origin), else float32].",
)
@click.option(
    "--encoding",
    type=click.Choice(list(ENCODINGS)),
    default="fast",
    show_default=True,
    help="; ".join(
        f"{e.name}: {e.summary}" + ("" if e.networks else " (trees only)")
        for e in ENCODINGS.values()
    )
    + ".",
)
@click.option(
    "--geometry",
    type=click.Choice(GEOMETRY_CHOICES),
    help="Geometry of the input points (plain Klein models only; hyperbolic estimators "
    "know theirs).",
)
@click.option("--curvature", type=float, callback=_negative, help="Curvature K < 0 (default -1).")
@click.option(
    "--timelike-dim", type=int, help="Column of the timelike coordinate (hyperboloid; default 0)."
)
@click.option(
    "--opset",
    type=click.IntRange(min=13),
    help="ai.onnx opset: 13 up to the newest the installed onnx knows (default 18).",
)
@click.option(
    "--check",
    "check_data",
    type=click.Path(path_type=Path),
    help="Points (.npy/.csv/.parquet) to verify the graph on; nothing is written on "
    "any disagreement. With --encoder: the encoder's raw inputs, as an .npz file with one "
    "array per input name where it takes several, or integer or bool ones.",
)
@click.option(
    "--ort",
    is_flag=True,
    help="Also write the graph as OUT with suffix .ort (onnxruntime's format for mobile "
    "and minimal builds) and its operator list, OUT with suffix "
    ".required_operators.config (for --include_ops_by_config).",
)
@click.option(
    "--no-row-blocks",
    "no_row_blocks",
    is_flag=True,
    help="Exact encoding: compute all rows at once, without the Loop over row blocks, "
    "for runtimes without sequence operators; large batches run slower. (The standard "
    "encoding never has row blocks.)",
)
@click.option(
    "--external-data",
    is_flag=True,
    help="Write the graph's tensors to OUT.data beside OUT (onnx's external data). "
    "Graphs over 2 GiB, which one file cannot hold, are always written so.",
)
@click.option(
    "--encoder",
    type=click.Path(path_type=Path),
    help="An ONNX encoder whose output is the model's points: the graph then takes the "
    "encoder's raw inputs (hyp2onnx.compose); --check data are then raw inputs too.",
)
@click.option(
    "--encoder-output",
    help="The encoder's output that holds the points (needed when it has several).",
)
@tolerance_options
@click.option("--force", is_flag=True, help="Replace OUT (and the --ort files) if they exist.")
@debug_option
def command(
    model: Path,
    output: Path | None,
    dtype: Literal["float32", "float64"] | None,  # click.Choice: one of the two
    encoding: str,
    geometry: str | None,
    curvature: float | None,
    timelike_dim: int | None,
    opset: int | None,
    check_data: Path | None,
    ort: bool,
    no_row_blocks: bool,
    external_data: bool,
    encoder: Path | None,
    encoder_output: str | None,
    atol: float | None,
    rtol: float | None,
    force: bool,
    debug: bool,
) -> int:
    options = ConvertOptions(
        dtype,
        encoding,
        geometry,
        curvature,
        timelike_dim,
        opset,
        row_blocks=not no_row_blocks,
        external_data=True if external_data else None,
        atol=atol,
        rtol=rtol,
        encoder=encoder,
        encoder_output=encoder_output,
    )
    return run(
        lambda: convert_file(
            model,
            output if output is not None else default_output(model),
            options,
            check_data=check_data,
            force=force,
            ort=ort,
        ),
        debug=debug,
        report=report_convert,
    )
