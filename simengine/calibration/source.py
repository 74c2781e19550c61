"""Turn what a caller hands the calibration readers (text, bytes or a file path) into text.

Every failure becomes a ``ConfigError`` naming ``field`` so the UI can show it next to the upload.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ConfigError
from ..fileio import read_bounded

MAX_INPUT_BYTES = 64 * 1024 * 1024  # a benchmark log or sweep larger than this is not a benchmark log


def read_text(source: str | bytes | os.PathLike, field: str) -> tuple[str, str]:
    """Return ``(text, name)``.

    ``bytes`` are decoded as UTF-8 (invalid bytes replaced, a BOM dropped). A ``str`` is always the
    content itself (so text a user pasted can never name a file to read); only a ``PathLike``
    (``pathlib.Path``) is read from disk. ``name`` is the file name (empty for content), useful as
    a hint such as ``..._all_reduce_16gpu.log``.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        raw = bytes(source)
        if len(raw) > MAX_INPUT_BYTES:
            raise ConfigError([(field, f"input is {len(raw)} bytes, more than the {MAX_INPUT_BYTES} accepted")])
        return _decode(raw), ""
    if isinstance(source, str):
        if len(source) > MAX_INPUT_BYTES:
            raise ConfigError([(field, f"input is {len(source)} characters, more than the {MAX_INPUT_BYTES} accepted")])
        return source.lstrip("\ufeff"), ""
    if not isinstance(source, os.PathLike):
        raise ConfigError([(field, f"expected text, bytes or a file path, got {type(source).__name__}")])
    path = Path(source)
    try:
        raw = read_bounded(path, MAX_INPUT_BYTES)   # no device or pipe (/dev/zero never ends), never past the limit
    except ValueError as exc:  # a missing file, a directory, a device, too large
        raise ConfigError([(field, f"cannot read {str(source)[:200]!r}: {exc}")]) from None
    except OSError as exc:
        raise ConfigError([(field, f"cannot read {str(source)[:200]!r}: {exc.__class__.__name__}")]) from None
    return _decode(raw), path.name


def _decode(raw: bytes) -> str:
    """UTF-8, or UTF-16 where the bytes say so (Excel's "Unicode text" export: a byte-order mark,
    or a NUL beside every ASCII character), which read as UTF-8 gave a header like "\ufffd\ufffdm"
    and a "missing column" error."""
    text = raw.decode(_utf16(raw) or "utf-8", errors="replace")
    return text.lstrip("\ufeff")


def _utf16(raw: bytes) -> str | None:
    """"utf-16" (a byte-order mark), "utf-16-le"/"-be" (NULs in every other byte of the first
    512, the ASCII text of a BOM-less file), else None."""
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16"
    head = raw[:512]
    if len(head) >= 8:
        odd, even = head[1::2], head[0::2]
        if odd.count(0) >= 0.9 * len(odd) and even.count(0) == 0:
            return "utf-16-le"
        if even.count(0) >= 0.9 * len(even) and odd.count(0) == 0:
            return "utf-16-be"
    return None
