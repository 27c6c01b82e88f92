"""Pieces every subcommand shares: exit codes, input errors, atomic output, progress.

Work functions raise `InputError` (a file and what to do about it)
and return a result object whose ``exit_code`` the command returns;
`run` turns any exception into one or two stderr lines and exit code
2, with the traceback only under ``--debug``.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

import click

from .._atomic import UnwritableOutputError, atomic_write, output_target
from .._progress import bar
from ..estimators._registry import refusing_library

if TYPE_CHECKING:
    from ..export._metadata import GraphMetadata

__all__ = [
    "EXIT_CODES_HELP",
    "EXIT_DISAGREE",
    "EXIT_OK",
    "EXIT_USAGE",
    "InputError",
    "Result",
    "atomic_output",
    "check_output",
    "debug_option",
    "echo_written",
    "error_lines",
    "first_line",
    "existing_file",
    "is_stream",
    "progress",
    "run",
    "tolerance_options",
    "with_suffix",
]

EXIT_OK = 0
#: The graph and the model disagree (``verify``, ``convert --check``).
EXIT_DISAGREE = 1
#: Bad usage or input: a missing or unreadable file, an unsupported model, invalid data.
EXIT_USAGE = 2

EXIT_CODES_HELP = (
    "\b\nExit status:\n"
    "  0  success\n"
    "  1  the ONNX graph disagrees with the model (verify, convert --check)\n"
    "  2  usage or input error (message on stderr; --debug shows the traceback)"
)


class InputError(Exception):
    """A problem with one of the user's files, with what to do about it."""

    def __init__(self, path: Path | str | None, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.fix = fix

    def lines(self) -> list[str]:
        """The one or two stderr lines: what is wrong with which file, then the fix."""
        where = f"{self.path}: " if self.path is not None else ""
        out = [f"error: {where}{self.message}"]
        if self.fix:
            out.append(f"  fix: {self.fix}")
        return out


class Result(Protocol):
    """What a work function returns: the command's exit status comes from it."""

    @property
    def exit_code(self) -> int: ...


R = TypeVar("R", bound=Result)


def existing_file(path: Path, what: str) -> Path:
    """``path`` if it is an existing regular file, else an `InputError`."""
    if not path.exists():
        raise InputError(path, f"no such {what} file", "check the path and the current folder")
    if not path.is_file():
        raise InputError(path, f"is a folder, not a {what} file", f"pass the {what} file itself")
    return path


def with_suffix(path: Path, suffix: str, what: str) -> Path:
    """``path`` with ``suffix`` in place of its own: the default name of a command's output.

    A path without a file name (``.``, ``/``, ``..``) has no default output
    name: an `InputError` asking for the file itself.
    """
    if path.name in ("", ".", ".."):
        raise InputError(path, f"is a folder, not a {what} file", f"pass the {what} file itself")
    return path.with_suffix(suffix)


def check_output(path: Path, *, force: bool) -> Path:
    """Fail early unless ``path`` can be written (see `hyp2onnx._atomic`).

    A regular file, or a symbolic link to one, is replaced only with
    ``force``, and its folder must exist; a FIFO or character device is
    written as a stream, with or without ``force``; anything else (a
    folder, a dangling link, a block device, a socket) is refused.
    """
    try:
        out = output_target(path)
    except UnwritableOutputError as exc:
        fix = "give a file name with -o" if exc.problem == "is a folder" else exc.fix
        raise InputError(path, exc.problem, fix) from None
    if out.stream:
        return path
    if out.exists and not force:
        raise InputError(
            path, "already exists; not overwritten", "pass --force to replace it, or choose -o"
        )
    if not out.target.parent.is_dir():
        raise InputError(
            path, f"folder {out.target.parent} does not exist", "create it or choose -o"
        )
    return path


def is_stream(path: Path) -> bool:
    """Whether ``path`` is written as a stream (a FIFO, a device, ``/dev/stdout``)."""
    try:
        return output_target(path).stream
    except UnwritableOutputError:
        return False


def echo_written(path: Path, line: str) -> None:
    """Print a command's "wrote ..." line: on stdout, or on stderr when ``path`` is a stream.

    Written into ``/dev/stdout`` or a pipe, the output must not end with
    the report line.
    """
    click.echo(line, err=is_stream(path))


@contextmanager
def atomic_output(path: Path, *, force: bool, binary: bool = False) -> Iterator[IO[Any]]:
    """`hyp2onnx._atomic.atomic_write` with the CLI's checks and messages."""
    check_output(path, force=force)
    try:
        with atomic_write(path, overwrite=force, binary=binary) as f:
            yield f
    except FileExistsError:
        raise InputError(path, "appeared while writing; not overwritten", "pass --force") from None
    except UnwritableOutputError as exc:
        raise InputError(exc.path, exc.problem, exc.fix) from None


def progress(total: int | None, desc: str) -> Any:
    """A tqdm bar on stderr, shown only when stderr is a terminal."""
    return bar(total, desc)


def tolerance_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--atol`` and ``--rtol`` ([`hyp2onnx.verification.verify`][hyp2onnx.verification.verify]'s tolerances) to a command."""
    f = click.option(
        "--rtol",
        type=click.FloatRange(min=0),
        help="Largest accepted difference relative to the model's value (default: by "
        "encoding and backend; 0 when only --atol is given).",
    )(f)
    return click.option(
        "--atol",
        type=click.FloatRange(min=0),
        help="Largest accepted absolute output difference (default: by encoding and backend).",
    )(f)


def debug_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--debug`` (show tracebacks) to a command."""
    return click.option("--debug", is_flag=True, help="Show the full traceback of an error.")(f)


def _debug_requested(debug: bool) -> bool:
    ctx = click.get_current_context(silent=True)
    root = ctx.find_root() if ctx is not None else None
    return debug or bool(root is not None and root.params.get("debug"))


def _warning_lines(caught: list[warnings.WarningMessage]) -> list[str]:
    seen: list[str] = []
    for w in caught:
        if not issubclass(w.category, UserWarning):
            continue  # library deprecations are for developers, not for this command's user
        text = "warning: " + str(w.message).strip().splitlines()[0]
        if text not in seen:
            seen.append(text)
    return seen


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type's name if it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def error_lines(exc: BaseException) -> list[str]:
    if isinstance(exc, InputError):
        return exc.lines()
    if isinstance(exc, UnwritableOutputError):
        return InputError(exc.path, exc.problem, exc.fix).lines()
    message = first_line(exc)
    if isinstance(exc, (ValueError, TypeError, OSError)):
        return [f"error: {message}"]
    refusing = refusing_library(exc)
    if refusing is not None:  # a library refusing its own model: a damaged one
        return [
            f"error: {refusing.shown} refused the model: {message}",
            "  fix: the model file is damaged; save the fitted model again",
        ]
    return [
        f"error: unexpected {type(exc).__name__}: {message}",
        "  fix: rerun with --debug and report the traceback",
    ]


def run(work: Callable[[], R], *, debug: bool, report: Callable[[R], None]) -> int:
    """Call ``work``, print its result with ``report`` and return its exit code.

    Warnings raised on the way become ``warning:`` lines on stderr; an
    exception becomes one or two ``error:`` lines and `EXIT_USAGE`.
    """
    debug = _debug_requested(debug)
    error: Exception | None = None
    result: R | None = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        try:
            result = work()
        except Exception as exc:
            error = exc
    for line in _warning_lines(caught):
        click.echo(line, err=True)
    if error is not None:
        if debug:
            traceback.print_exception(error, file=sys.stderr)
        for line in error_lines(error):
            click.echo(line, err=True)
        return EXIT_USAGE
    assert result is not None
    report(result)
    return result.exit_code


def subcommand(
    name: str, help_text: str, short_help: str
) -> Callable[[Callable[..., Any]], click.Command]:
    """The click command ``name``: full help, one-line help, and help when given no arguments."""
    return click.command(name, help=help_text, short_help=short_help, no_args_is_help=True)


def describe_contents(metadata: GraphMetadata) -> str:
    """What a hyp2onnx graph holds, from its metadata: a network (and its region tree) or
    trees."""
    if metadata.kind != "trees":
        network = f"ReLU network, hidden layers {metadata.hidden_layer_sizes}"
        if metadata.kind == "region_tree":
            network += f"; region tree of {metadata.n_regions} regions"
        return network
    n = metadata.n_trees
    return f"{n} tree" if n == 1 else f"{n} trees"
