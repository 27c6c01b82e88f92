"""Write a file completely or not at all."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextmanager
def atomic_write(
    path: str | os.PathLike, *, overwrite: bool, binary: bool = True
) -> Iterator[IO[Any]]:
    """Write ``path`` through a temporary file in its folder, moved into place at the end.

    On any error the temporary file is removed and ``path`` is untouched.
    With ``overwrite=False`` an existing ``path`` raises `FileExistsError`,
    also one created while writing (the final step is then a hard link,
    which fails if the name exists). The file gets the usual permissions
    (``0666`` less the umask), not ``mkstemp``'s owner-only ``0600``.
    """
    path = Path(path)
    if not overwrite and path.exists():
        raise FileExistsError(f"{path} exists; not overwritten")
    tmp: Path | None = None
    try:
        # A signal arriving between the file's creation and `tmp` naming it would
        # leave it behind: held until then, it is raised inside this `try`.
        with _signals_held():
            fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            tmp = Path(tmp_name)
        os.chmod(fd, 0o666 & ~_umask())
        # newline=None is open()'s default, the only value binary mode takes.
        with os.fdopen(fd, "wb" if binary else "w", newline=None if binary else "") as f:
            yield f
        if overwrite:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise FileExistsError(f"{path} appeared while writing; not overwritten") from None
        except OSError:  # a file system without hard links
            if path.exists():
                raise FileExistsError(f"{path} appeared while writing; not overwritten") from None
            os.replace(tmp, path)
    finally:
        if tmp is not None:
            tmp.unlink(missing_ok=True)


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
