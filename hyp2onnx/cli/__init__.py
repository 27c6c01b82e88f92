"""The ``hyp2onnx`` command line: convert, verify, inspect, predict.

Each subcommand lives in its own module, as a click command over a typed
work function (``convert_file``, ``verify_files``, ``inspect_file``,
``predict_file``) that returns a result object; the command's exit status
is that result's ``exit_code``. `main` takes the argument list, so
``main(["inspect", "model.onnx"])`` runs like the console script.

Exit status: 0 success; 1 the graph disagrees with the model (``verify``,
``convert --check``); 2 usage or input error, reported as one or two
``error:`` lines on stderr (``--debug`` adds the traceback); 130 when
interrupted
(Ctrl-C), 128 + the signal's number on SIGTERM or SIGHUP; an interrupted
command leaves no file behind.
"""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import click

from .._version import __version__
from . import convert, inspect, predict, verify
from ._common import EXIT_CODES_HELP, EXIT_USAGE, error_lines

__all__ = ["COMMANDS", "EXIT_INTERRUPTED", "cli", "main"]

EXIT_INTERRUPTED = 130

#: Every subcommand, by name.
COMMANDS: dict[str, click.Command] = {
    "convert": convert.command,
    "verify": verify.command,
    "inspect": inspect.command,
    "predict": predict.command,
}

HELP = f"""Export hyperbolic models (trees, forests, networks) to ONNX and use the graphs.

\b
  convert  trained model file -> .onnx graph taking raw hyperbolic points
           (--encoder puts an encoder's ONNX graph in front)
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


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwind like Ctrl-C, so every temporary file is removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signum)


@contextmanager
def _unwind_on_termination() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into `Terminated` while the command runs.

    Without this the process dies at once and the partly written temporary
    file of an atomic write stays behind; as an exception, the ``finally``
    blocks that remove it run, as they do for Ctrl-C. A signal the process
    was told to ignore (``nohup``) stays ignored; the old handlers come back
    afterwards.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in _UNWIND_SIGNALS:
        old = signal.getsignal(signum)
        if old is signal.SIG_IGN:
            continue
        previous[signum] = old
        signal.signal(signum, _raise_terminated)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


_UNWIND_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


#: click (8.2+) raises this for a command given without arguments; older versions print help.
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); return the exit status.

    Never raises: an error no command anticipated still becomes ``error:``
    lines and exit status 2 (the traceback only with ``--debug``); Ctrl-C
    gives 130, SIGTERM/SIGHUP 128 + the signal's number, after removing
    any partly written output.
    """
    args = list(argv) if argv is not None else sys.argv[1:]
    try:
        with _unwind_on_termination():
            result = cli.main(args=args, prog_name="hyp2onnx", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("interrupted", err=True)
        return EXIT_INTERRUPTED
    except Terminated as exc:
        click.echo(f"terminated by {exc}; nothing written", err=True)
        return 128 + exc.signum
    except _NO_ARGS_IS_HELP as exc:  # a bare command: its help, as asked
        exc.show()
        return EXIT_USAGE
    except click.UsageError as exc:  # in one or two lines, like every other error
        click.echo(f"error: {exc.format_message()}", err=True)
        where = exc.ctx.command_path if exc.ctx is not None else "hyp2onnx"
        click.echo(f"  fix: see '{where} --help'", err=True)
        return EXIT_USAGE
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except Exception as exc:  # a bug: still one line, never a bare traceback
        if "--debug" in args:
            traceback.print_exception(exc, file=sys.stderr)
        for line in error_lines(exc):
            click.echo(line, err=True)
        return EXIT_USAGE
    return result if isinstance(result, int) else 0
