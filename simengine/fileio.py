"""Files the user names: atomic writes (the new content goes to a temporary file in the target's
folder, then ``os.replace`` swaps it in, atomic on POSIX and Windows, so a failure part-way leaves
the old file intact and never a truncated one), and why a path to read is no regular file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO
import contextlib


def write_atomic(path: str | os.PathLike, write: Callable[[IO[str]], object]) -> None:
    """Call ``write(fh)`` on a temporary text file next to ``path``, then replace ``path`` with it.
    Any exception (from ``write`` or the file system) removes the temporary file and propagates.

    A path that is not a regular file — a device or pipe such as ``/dev/stdout``, ``/dev/full`` or a
    FIFO — is written in place: renaming onto it would replace the device node itself (and every
    other process's ``/dev/stdout``) with a plain file. A symbolic link is followed, so the file
    it points at is replaced, not the link."""
    given = Path(path)
    if given.exists() and not given.is_file() and not given.is_dir():  # stat follows links
        with given.open("w", encoding="utf-8") as fh:
            write(fh)
            fh.flush()
        return
    target = Path(os.path.realpath(given)) if given.is_symlink() else given
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent if str(target.parent) else ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        Path(tmp).replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise


def not_a_file(path: str | os.PathLike) -> str:
    """Why ``path`` is no regular file to read ("" when it is one): "no such file", "a directory,
    not a file", "not a regular file" (a device or pipe: /dev/zero would never end), or the
    operating system's reason (a name too long for the file system). Never raises, where
    ``Path.is_file`` raises OSError on a name longer than the system's limit."""
    try:
        given = Path(path)
        if given.is_file():
            return ""
        return "no such file" if not given.exists() else ("a directory, not a file" if given.is_dir() else "not a regular file")
    except (OSError, ValueError) as e:   # ENAMETOOLONG, an embedded NUL
        return str(getattr(e, "strerror", None) or e)[:200]
