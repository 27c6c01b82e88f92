"""Write a file completely or not at all; write into FIFOs and devices as streams.

What a write does depends on what the path names (`output_target`):

* nothing, or a regular file: a temporary file in its folder, renamed over
  it at the end (atomic: the file appears complete or not at all);
* a symbolic link to a regular file, or a chain of them: the same, to the
  final target, as ``cp`` and ``sort -o`` write through links; the links
  stay links;
* a FIFO, a character device (``/dev/null``, a terminal) or an open file
  descriptor's link (``/dev/stdout``, ``/dev/fd/3``, ``/proc/self/fd/1``,
  whatever it leads to): a stream, opened for appending and written in
  place, as a shell's ``>>`` would. Nothing is replaced, so no
  ``overwrite`` is needed, and a reader may see part of the output if the
  writer fails;
* anything else (a folder, a link to nothing or in a loop, a block device,
  a socket): refused with `UnwritableOutputError` before anything is
  written.

Errors name the caller's path, never the temporary file.
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from .errors import Hyp2OnnxError

__all__ = ["OutputTarget", "UnwritableOutputError", "atomic_write", "output_target"]


class UnwritableOutputError(Hyp2OnnxError, OSError):
    """An output path names something a file cannot be written to (a folder, a socket, ...)."""

    def __init__(self, path: Path | str, problem: str, fix: str | None = None) -> None:
        super().__init__(f"{path}: {problem}" + (f"; {fix}" if fix else ""))
        self.path = path
        self.problem = problem
        self.fix = fix


@dataclass(frozen=True)
class OutputTarget:
    """What writing to ``path`` does (see the module doc)."""

    path: Path  #: the caller's path
    target: Path  #: the regular file replaced or created (``path``, or a link's final target)
    stream: bool  #: True: a FIFO or character device, written in place
    exists: bool  #: whether ``target`` exists (always True for a stream)


def output_target(path: str | os.PathLike) -> OutputTarget:
    """What a write to ``path`` would do, or `UnwritableOutputError` if none may."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return OutputTarget(path, path, stream=False, exists=False)
    except OSError as exc:  # a parent that is a file, no permission, a name too long
        raise UnwritableOutputError(path, f"cannot be looked up ({exc.strerror})", _FIX) from None
    linked = stat.S_ISLNK(mode)
    if linked:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            raise UnwritableOutputError(
                path,
                f"is a symbolic link to {os.readlink(path)}, which does not exist",
                "create the target first, remove the link, or choose another output",
            ) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UnwritableOutputError(path, "is a symbolic link in a loop", _FIX) from None
            raise UnwritableOutputError(
                path, f"cannot be looked up ({exc.strerror})", _FIX
            ) from None
    if linked and _through_descriptor(path):
        return OutputTarget(path, path, stream=True, exists=True)
    if stat.S_ISREG(mode):
        target = Path(os.path.realpath(path)) if linked else path
        return OutputTarget(path, target, stream=False, exists=True)
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return OutputTarget(path, path, stream=True, exists=True)
    what = (
        "a folder"
        if stat.S_ISDIR(mode)
        else "a block device"
        if stat.S_ISBLK(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "not a regular file"
    )
    if linked:
        what = f"a symbolic link to {what}"
    raise UnwritableOutputError(path, f"is {what}", _FIX)


def _through_descriptor(path: Path) -> bool:
    """Whether the links from ``path`` pass through ``/proc/*/fd`` or ``/dev/fd``.

    Such a link is a process's open file (``/dev/stdout`` is one): its
    real path may be a pipe's pseudo-name or a file the shell opened for
    appending, so it is written through the link, never replaced.
    """
    here = Path(os.path.abspath(path))
    for _ in range(40):  # the kernel's own limit on links followed
        folder = here.parent
        if str(folder) == "/dev/fd" or (folder.name == "fd" and folder.parts[:2] == ("/", "proc")):
            return True
        if not here.is_symlink():
            return False
        here = Path(os.path.abspath(folder / os.readlink(here)))
    return False


_FIX = "give the name of a regular file, a FIFO or a character device such as /dev/stdout"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_write(
    path: str | os.PathLike, *, overwrite: bool, binary: bool = True
) -> Iterator[IO[Any]]:
    """Write ``path``: atomically if it is a regular file or missing, as a stream if not.

    See the module doc for each kind of path. A regular file (or a link's
    target) is written through a temporary file in its folder, moved into
    place at the end; on any error the temporary file is removed and the
    target is untouched. With ``overwrite=False`` an existing file raises
    `FileExistsError`, also one created while writing (the final
    step is then a hard link, which fails if the name exists). The file gets
    the usual permissions (``0666`` less the umask), not ``mkstemp``'s
    owner-only ``0600``. FIFOs and character devices are opened and written
    in place, with or without ``overwrite``.
    """
    out = output_target(path)
    mode = "wb" if binary else "w"
    newline = None if binary else ""  # newline=None is open()'s default, the only binary value
    if out.stream:
        try:
            f = open(out.path, mode.replace("w", "a"), newline=newline)
        except OSError as exc:
            raise _named(exc, out.path, "cannot be opened for writing") from None
        with f:
            yield f
        return
    target = out.target
    if not overwrite and out.exists:
        raise FileExistsError(f"{out.path} exists; not overwritten")
    tmp: Path | None = None
    try:
        # A signal arriving between the file's creation and `tmp` naming it would
        # leave it behind: held until then, it is raised inside this `try`.
        try:
            with _signals_held():
                fd, tmp_name = tempfile.mkstemp(
                    prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
                )
                tmp = Path(tmp_name)
        except OSError as exc:
            raise _named(
                exc, out.path, f"cannot be written: no file can be created in {target.parent}"
            ) from None
        os.chmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode, newline=newline) as f:
            yield f
        _recheck(out)
        _move_into_place(tmp, out, overwrite=overwrite)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


def _move_into_place(tmp: Path, out: OutputTarget, *, overwrite: bool) -> None:
    """Rename the written temporary file to ``out``'s target: a replace, or without
    ``overwrite`` a hard link that fails if the name appeared meanwhile (a replace after
    checking, on a file system without hard links)."""
    target = out.target
    try:
        if overwrite:
            os.replace(tmp, target)
            return
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise FileExistsError(f"{out.path} appeared while writing; not overwritten") from None
        except OSError:  # a file system without hard links
            if os.path.lexists(target):
                raise FileExistsError(
                    f"{out.path} appeared while writing; not overwritten"
                ) from None
            os.replace(tmp, target)
    except FileExistsError:
        raise
    except OSError as exc:
        raise _named(exc, out.path, "cannot be replaced") from None


def _recheck(out: OutputTarget) -> None:
    """Refuse if what ``out.path`` names changed kind while writing (a FIFO made in its place)."""
    now = output_target(out.path)
    if now.stream or now.target != out.target:
        raise UnwritableOutputError(
            out.path, "changed while writing (now a different file or a stream)", "run again"
        )


def _named(exc: OSError, path: Path, what: str) -> UnwritableOutputError:
    """``exc`` told again naming the caller's ``path``, never a temporary file."""
    return UnwritableOutputError(path, f"{what} ({exc.strerror or type(exc).__name__})")


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP in this thread; pending ones arrive on leaving."""
    names = ("SIGINT", "SIGTERM", "SIGHUP")
    held = {getattr(signal, n) for n in names if hasattr(signal, n)}
    if not hasattr(signal, "pthread_sigmask") or not held:
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
