"""Files the user names: atomic writes (the new content goes to a temporary file in the target's
folder, then ``os.replace`` swaps it in, atomic on POSIX and Windows, so a failure part-way leaves
the old file intact and never a truncated one, with the old file's permissions), why a path to
read is no regular file, and bounded reads (never more than a limit, never a device or a pipe)."""

from __future__ import annotations

import errno
import os
import stat
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
    other process's ``/dev/stdout``) with a plain file. It is opened without waiting: a named pipe
    that no process reads is an ``OSError`` at once, never a wait for a reader that may never come.
    A symbolic link is followed, so the file it points at is replaced, not the link."""
    given = Path(path)
    if given.exists() and not given.is_file() and not given.is_dir():  # stat follows links
        with os.fdopen(_open_in_place(given), "w", encoding="utf-8") as fh:
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
        Path(tmp).chmod(_mode_for(target))   # mkstemp makes it 0600: keep the old file's mode, else the umask's
        Path(tmp).replace(target)
    except BaseException:
        with contextlib.suppress(OSError):
            Path(tmp).unlink()
        raise


def _open_in_place(path: Path) -> int:
    """A write descriptor on the device or pipe at ``path``, opened without blocking (a FIFO with
    no reader: ``OSError`` ENXIO with a readable reason), then set back to blocking writes."""
    nonblock = getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | nonblock)
    except OSError as e:
        if e.errno == errno.ENXIO and stat.S_ISFIFO(path.stat().st_mode):
            raise OSError(errno.ENXIO, "a named pipe that no process is reading: start the reader first, "
                                       "or give a regular file") from e
        raise
    if nonblock:
        os.set_blocking(fd, True)   # the reader is there: writes wait for it as any pipe's do
    return fd


def _mode_for(target: Path) -> int:
    """The permission bits the replaced file had, or what ``open`` would give a new file (0666
    less the process's umask, read without changing it: /proc, else set and restored)."""
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except OSError:
        pass
    try:
        with Path("/proc/self/status").open(encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def read_bounded(path: str | os.PathLike, limit: int) -> bytes:
    """The content of the regular file at ``path``, refused (``ValueError`` with the reason) when
    it is no regular file — a device such as /dev/zero never ends, a pipe may never open — or
    longer than ``limit`` bytes. Never reads more than ``limit`` + 1 bytes, whatever the file's
    size says (a file that grows while read, a size the file system misreports). ``OSError`` as
    the operating system raises it."""
    why = not_a_file(path)
    if why:
        raise ValueError(why)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))   # a pipe swapped in since: no wait
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > limit:   # refused before a byte is read
            raise ValueError(f"{st.st_size:,} bytes, more than the {limit:,} accepted")
        raw = fh.read(limit + 1)
    if len(raw) > limit:   # it grew since, or its size was misreported
        raise ValueError(f"more than the {limit:,} bytes accepted")
    return raw


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
