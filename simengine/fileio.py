"""Atomic file writes: the new content goes to a temporary file in the target's folder, then
``os.replace`` swaps it in (atomic on POSIX and Windows), so a failure part-way leaves the old file
intact and never a truncated one."""

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
