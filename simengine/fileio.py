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
    Any exception (from ``write`` or the file system) removes the temporary file and propagates."""
    target = Path(path)
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
