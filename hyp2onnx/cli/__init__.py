"""The ``hyp2onnx`` command line: convert, verify, inspect, predict.

Each subcommand lives in its own module, as a click command over a typed
work function (``convert_file``, ``verify_files``, ``inspect_file``,
``predict_file``) that returns a result object; the command's exit status
is that result's ``exit_code``. :func:`main` takes the argument list, so
``main(["inspect", "model.onnx"])`` runs like the console script.

Exit status: 0 success; 1 the graph disagrees with the model (``verify``,
``convert --check``); 2 usage or input error, reported as one or two
``error:`` lines on stderr (``--debug`` adds the traceback); 130 when
interrupted.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from .._version import __version__
from . import convert, inspect, predict, verify
from ._common import EXIT_CODES_HELP, EXIT_USAGE

__all__ = ["COMMANDS", "EXIT_INTERRUPTED", "cli", "main"]

EXIT_INTERRUPTED = 130

#: Every subcommand, by name.
COMMANDS: dict[str, click.Command] = {
    "convert": convert.command,
    "verify": verify.command,
    "inspect": inspect.command,
    "predict": predict.command,
}

HELP = f"""Export hyperbolic tree models to ONNX and use the graphs.

\b
  convert  trained model file -> .onnx graph taking raw hyperbolic points
  verify   check a graph against its model on data
  inspect  describe a graph: geometry, inputs/outputs, operators, runtimes
  predict  score a data file in chunks, write CSV

MODEL files may be pickles: a pickle runs arbitrary code when loaded, so
convert only pickles you trust and prefer .skops files.

\b
Examples:
  hyp2onnx convert forest.pkl --check sample.npy
  hyp2onnx inspect forest.onnx
  hyp2onnx predict forest.onnx points.npy -o predictions.csv

Run 'hyp2onnx COMMAND --help' for a command's options.

{EXIT_CODES_HELP}
"""


@click.group(
    "hyp2onnx", help=HELP, no_args_is_help=True, context_settings={"max_content_width": 100}
)
@click.version_option(__version__, prog_name="hyp2onnx")
@click.option("--debug", is_flag=True, help="Show the full traceback of an error.")
def cli(debug: bool) -> None:
    """Group entry point; ``--debug`` is read by the subcommands."""


for _name, _command in COMMANDS.items():
    cli.add_command(_command, _name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    try:
        result = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="hyp2onnx",
            standalone_mode=False,
        )
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    return result if isinstance(result, int) else 0
