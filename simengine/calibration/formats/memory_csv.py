"""Memory-bandwidth sweep CSV (what ``python -m simengine.measure memory`` writes):
``bytes,time_us`` [``gbs``] — one device-to-device copy of ``bytes`` per row, which reads and writes
them (2 × bytes through HBM). ``time_ms`` / ``time_ns`` / ``time_s`` are accepted too.
"""

from __future__ import annotations

import os

from ...errors import ConfigError
from ..csvutil import Issues, cell, norm_header, pos_float, pos_int, read_rows
from ..source import read_text

FIELD = "memory_csv"
_TIME = {"time_us": 1e-6, "time_ms": 1e-3, "time_ns": 1e-9, "time_s": 1.0}


def read_memory_csv(source: str | bytes | os.PathLike) -> tuple[tuple[int, float], ...]:
    """Rows → ((bytes copied, seconds), …) sorted by size."""
    text, _ = read_text(source, FIELD)
    header, rows = read_rows(text, FIELD, "bytes,time_us")
    idx = {norm_header(h): i for i, h in enumerate(header)}
    tcol = next((c for c in _TIME if c in idx), None)
    if "bytes" not in idx or tcol is None:
        raise ConfigError([(FIELD, f"missing column bytes or time_us (header: {', '.join(header)[:200]})")])
    issues = Issues(FIELD)
    out = []
    for line, cells in rows:
        b = pos_int(cell(cells, idx["bytes"]), line, "bytes", issues)
        t = pos_float(cell(cells, idx[tcol]), line, tcol, issues)
        if b is not None and t is not None:
            out.append((b, t * _TIME[tcol]))
    issues.raise_if_any()
    if not out:
        raise ConfigError([(FIELD, "no data rows")])
    return tuple(sorted(out))
