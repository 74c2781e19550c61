"""Small CSV helpers shared by the GEMM readers: tolerant header names, typed cells, and error
collection that names the line and column of every bad cell (``ConfigError``)."""

from __future__ import annotations

import csv
import io
import math
import re
import sys
from collections.abc import Mapping

from ..errors import ConfigError

MAX_ISSUES = 10
MAX_ROWS = 200_000  # a sweep with more rows is not a sweep; bounds memory and time (a 60 MB CSV took 97 s)


def norm_header(name: str) -> str:
    """``'Time (µs)'`` → ``time_us``; ``'TFLOP/s'`` → ``tflop_s``; ``'Efficiency (%)'`` → ``efficiency_pct``."""
    s = name.strip().lstrip("\ufeff").lower().replace("µ", "u").replace("μ", "u").replace("%", " pct ")
    return re.sub(r"[^a-z0-9]+", "_", s).strip("_")


def read_rows(text: str, field: str, example: str = "m,n,k,efficiency") -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header cells and ``(line number, cells)`` of each data row; blank and ``#`` lines skipped.
    ``example``: the header the format expects, quoted when there is none."""
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    try:
        end = 0   # the line the previous row ended on
        for cells in reader:
            start, end = end + 1, reader.line_num
            if any("\n" in c or "\r" in c for c in cells):
                # no sweep cell spans lines: an unclosed quote took the rest of the file into one
                # cell (a header's took every row, and the message quoted the whole file)
                raise ConfigError([(field, f"line {start}: a quote (\") opens a cell that runs on to line {end}; "
                                           "close it or remove it")])
            if not cells or all(not c.strip() for c in cells) or cells[0].lstrip().startswith("#"):
                continue
            if header is None:
                header = [c.strip() for c in cells]
                continue
            if len(rows) >= MAX_ROWS:
                raise ConfigError([(field, f"more than {MAX_ROWS:,} data rows (line {reader.line_num}); "
                                           "split the sweep or sample it")])
            rows.append((reader.line_num, cells))
    except csv.Error as exc:   # Python's text ("new-line character seen in unquoted field …") means nothing to a user
        text = str(exc)
        why = ("a stray carriage return or NUL byte — a binary file, or not saved as text" if "new-line" in text or "NUL" in text
               else f"a cell longer than {csv.field_size_limit():,} characters" if "field limit" in text
               else "a malformed quoted field")
        raise ConfigError([(field, f"line {reader.line_num}: not valid CSV ({why})")]) from None
    if header is None:
        raise ConfigError([(field, f"no header row (expected e.g. '{example}')")])
    return header, rows


class Issues:
    """Collects ``(field, 'line L, column C: …')`` and raises them together."""

    def __init__(self, field: str):
        self.field = field
        self.items: list[tuple[str, str]] = []

    def add(self, line: int, column: str, msg: str) -> None:
        if len(self.items) < MAX_ISSUES:
            where = f"line {line}" + (f", column '{column}'" if column else "")
            self.items.append((self.field, f"{where}: {msg}"))
        elif len(self.items) == MAX_ISSUES:
            self.items.append((self.field, "… further bad rows not listed"))

    def raise_if_any(self) -> None:
        if self.items:
            raise ConfigError(self.items)


_WHOLE_RE = re.compile(r"[+]?(\d+)(?:\.0*)?")   # a whole number, as a cell may write it ("12", "+12", "12.0")
_FLOAT_RE = re.compile(r"^[+-]?(?:\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][+-]?\d{1,3})?$")


def cell(cells: list[str], idx: int | None) -> str:
    return cells[idx].strip() if idx is not None and idx < len(cells) else ""


def pos_int(raw: str, line: int, col: str, issues: Issues, *, default: int | None = None) -> int | None:
    if raw == "" and default is not None:
        return default
    whole = _WHOLE_RE.fullmatch(raw)
    digits = whole.group(1).lstrip("0") if whole else ""
    if len(digits) > 15:   # a whole number (leading zeros aside) past any shape a GPU runs
        issues.add(line, col, f"{raw[:40]!r} is too large (at most 15 digits)")
        return None
    if not digits:   # not a whole number, or zero
        issues.add(line, col, f"{raw[:40]!r} is not a positive integer")
        return None
    return int(digits)


def pos_float(raw: str, line: int, col: str, issues: Issues, *, allow_zero: bool = False) -> float | None:
    """A finite number > 0 (or 0 with ``allow_zero``); a subnormal one (below ~2.2e-308: "1e-320")
    is refused too, since its unit conversion (× 1e-6 for µs) rounds to 0 and divides by it."""
    v = float(raw) if _FLOAT_RE.match(raw) else math.nan
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        issues.add(line, col, f"{raw[:40]!r} is not a positive number")
        return None
    if 0 < v < sys.float_info.min:
        issues.add(line, col, f"{raw[:40]!r} is too small to compute with (below {sys.float_info.min:.1e})")
        return None
    return v


def find_column(index: Mapping[str, int], *aliases: str) -> tuple[int | None, str]:
    """First of ``aliases`` (normalised names) present in ``index`` → (position, alias)."""
    for a in aliases:
        if a in index:
            return index[a], a
    return None, ""
