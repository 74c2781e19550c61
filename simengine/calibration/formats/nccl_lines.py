"""Classify one line of nccl-tests stdout and pull out what it says.

nccl-tests (github.com/NVIDIA/nccl-tests, ``src/common.cu``) prints, per test:

  # nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 …
  # Using devices
  #  Rank  0 Group  0 Pid 1234 on host device  0 [0x0f] NVIDIA H100 80GB HBM3     (newer)
  #   Rank  0 Pid   3801 on host device  0 [0x00] Tesla V100-SXM2-32GB          (older, no Group)
  #       size   count   type   redop   root   time  algbw  busbw  #wrong   time  algbw  busbw  #wrong
  #        (B) (elements)                      (us) (GB/s) (GB/s)            (us) (GB/s) (GB/s)
         8388608  2097152  float  sum  -1  132.6  63.24  118.57  0  131.4  63.85  119.72  0
  # Out of bounds values : 0 OK
  # Avg bus bandwidth    : 139.56

Older versions have no ``root`` column and an ``error`` column holding a float; ``-c 0`` prints
``N/A`` for ``#wrong``; some renderers drop the leading ``# ``; mpirun ``--tag-output``/``srun -l``
and pdsh prefix every line. Nothing here raises: a line that does not parse is "other".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<\w+>:|\d{1,6}:\s|[A-Za-z0-9][\w.\-]{0,100}:\s)")
_INT = re.compile(r"^-?\d{1,19}$")
_UINT = re.compile(r"^\d{1,19}$")
_FLOAT = re.compile(r"^[+-]?(?:\d{1,30}(?:\.\d{0,30})?|\.\d{1,30})(?:[eE][+-]?\d{1,3})?$")
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,40}$")

_STARTING = re.compile(r"Collective test starting:\s*([A-Za-z_]+?)(?:_perf)?(?:_mpi)?\b")
_CONCLUDED = re.compile(r"Collective test concluded")
_NTHREAD = re.compile(r"\bnThread\s+(\d{1,6})\s+nGpus\s+(\d{1,6})")
_DEVICE = re.compile(r"\bRank\s+(\d{1,7})\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\b"
                     r"(?:\s+\d+\s+\[[^\]]{0,40}\]\s+(.{1,80}))?")
_NRANKS = re.compile(r"\bnranks\s+(\d{1,7})\b")
_NCCL_VERSION = re.compile(r"\bNCCL version\s+(\S+)")
_TESTS_VERSION = re.compile(r"nccl-tests version\s+(\S+)")
_PERF_BIN = re.compile(r"(?:^|[\s/])([a-z_]+?)_perf(?:_mpi)?(?=\s|$)")
_SUMMARY = re.compile(r"^(?:Out of bounds values|Avg bus bandwidth)\b")


@dataclass(frozen=True, slots=True)
class Layout:
    """Which optional columns a data row has (from its header, or guessed from the token count)."""

    redop: bool = True
    root: bool = True
    groups: int = 2      # out-of-place, then in-place
    width: int = 4       # time algbw busbw [#wrong|error]

    @property
    def n_tokens(self) -> int:
        return 3 + self.redop + self.root + self.groups * self.width


@dataclass(frozen=True, slots=True)
class RawRow:
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    wrong: str | None
    inplace_time_us: float | None
    inplace_algbw_gbs: float | None
    inplace_busbw_gbs: float | None


def strip_line(line: str) -> str:
    """Remove a launcher prefix (``[1,0]<stdout>:``, ``0: ``, ``host: ``) and comment ``#``s."""
    s = line.strip()
    m = _PREFIX.match(s)
    if m and s[m.end():].strip():
        s = s[m.end():]
    return s.lstrip("#").strip()


def header_layout(tokens: list[str]) -> Layout | None:
    """Column header (``size count type redop root time algbw busbw #wrong …``) → Layout."""
    low = [t.lower().lstrip("#") for t in tokens]
    if not low or low[0] != "size" or "count" not in low or "time" not in low:
        return None
    groups = low.count("time")
    has_wrong = any(t in ("wrong", "error", "errors") for t in low)
    return Layout(redop="redop" in low, root="root" in low, groups=max(1, min(groups, 2)), width=4 if has_wrong else 3)


def parse_number(tok: str) -> float | None:
    if not _FLOAT.match(tok):
        return None
    v = float(tok)
    return v if v == v and v not in (float("inf"), float("-inf")) else None


def parse_row(tokens: list[str], layout: Layout | None) -> RawRow | None:
    """A data row, read with ``layout`` when it fits, else with the first layout that does."""
    if len(tokens) < 6 or not _UINT.match(tokens[0]) or not _UINT.match(tokens[1]) or not _WORD.match(tokens[2]):
        return None
    layouts = [layout] if layout is not None and layout.n_tokens == len(tokens) else []
    layouts += [lay for lay in _GUESSES if lay.n_tokens == len(tokens) and lay not in layouts]
    for lay in layouts:
        row = _read(tokens, lay)
        if row is not None:
            return row
    return None


_GUESSES = tuple(
    Layout(redop=r, root=o, groups=g, width=w)
    for w in (4, 3) for g in (2, 1) for r in (True, False) for o in (True, False)
)


def _read(tokens: list[str], lay: Layout) -> RawRow | None:
    i = 3
    redop: str | None = None
    root: int | None = None
    if lay.redop:
        if not _WORD.match(tokens[i]):
            return None
        redop = tokens[i]
        i += 1
    if lay.root:
        if not _INT.match(tokens[i]):
            return None
        root = int(tokens[i])
        i += 1
    groups = [tokens[i + g * lay.width: i + (g + 1) * lay.width] for g in range(lay.groups)]
    time_us, algbw, busbw = (parse_number(t) for t in groups[0][:3])
    if time_us is None or algbw is None or busbw is None:
        return None
    if time_us <= 0 or algbw < 0 or busbw < 0:
        return None
    wrong = groups[0][3] if lay.width == 4 else None
    if wrong is not None and parse_number(wrong) is None and wrong.upper() not in ("N/A", "NA", "-"):
        return None
    ip: list[float | None] = [None, None, None]
    if lay.groups == 2:
        ip = [parse_number(t) for t in groups[1][:3]]
        if ip[0] is None and groups[1][0].upper() not in ("N/A", "NA", "-"):
            return None
        if ip[0] is not None and ip[0] <= 0:
            ip = [None, None, None]
    size, count = int(tokens[0]), int(tokens[1])
    if size > 1 << 60:
        return None
    return RawRow(size, count, tokens[2], redop, root, time_us, algbw, busbw, wrong, ip[0], ip[1], ip[2])


@dataclass(frozen=True, slots=True)
class Command:
    """What a launch command line tells: the test, and processes × threads × GPUs per process."""

    test: str | None
    procs: int | None
    threads: int
    gpus: int


def parse_command(line: str) -> Command | None:
    """``mpirun -np 16 … ./build/all_reduce_perf -b 8 -e 16G -f 2 -g 1`` → Command."""
    m = _PERF_BIN.search(line)
    if not m:
        return None
    tokens = line.split()
    stem = m.group(1)
    bin_idx = next((i for i, t in enumerate(tokens) if re.search(r"_perf(?:_mpi)?$", t)), len(tokens))
    procs = None
    launcher = tokens[:bin_idx]
    for i, t in enumerate(launcher):
        name, _, val = t.partition("=")
        if name in ("-np", "--np", "-n", "--n", "--ntasks"):
            v = val or (launcher[i + 1] if i + 1 < len(launcher) else "")
            if v.isdigit() and len(v) < 8:
                procs = int(v)
    threads, gpus = 1, 1
    args = tokens[bin_idx + 1:]
    for i, t in enumerate(args):
        name, _, val = t.partition("=")
        v = val or (args[i + 1] if i + 1 < len(args) else "")
        if not (v.isdigit() and len(v) < 7):
            continue
        if name in ("-g", "--ngpus"):
            gpus = max(int(v), 1)
        elif name in ("-t", "--nthreads"):
            threads = max(int(v), 1)
    return Command(stem, procs, threads, gpus)


@dataclass(frozen=True, slots=True)
class Line:
    """One classified line. ``kind`` is one of: row, header, starting, concluded, nthread, device,
    nranks, version, command, summary, blank, other."""

    kind: str
    tokens: tuple[str, ...] = ()
    value: object = None


def classify(raw: str) -> Line:
    s = strip_line(raw)
    if not s:
        return Line("blank")
    tokens = s.split()
    if _UINT.match(tokens[0]) and len(tokens) >= 6:
        return Line("row", tuple(tokens))
    if (lay := header_layout(tokens)) is not None:
        return Line("header", tuple(tokens), lay)
    if m := _STARTING.search(s):
        return Line("starting", value=m.group(1))
    if _CONCLUDED.search(s):
        return Line("concluded")
    if m := _NTHREAD.search(s):
        return Line("nthread", value=(int(m.group(1)), int(m.group(2))))
    if m := _DEVICE.search(s):
        return Line("device", value=(int(m.group(1)), m.group(2), (m.group(3) or "").strip()))
    if _SUMMARY.match(s):
        return Line("summary")
    if m := _NRANKS.search(s):
        return Line("nranks", value=int(m.group(1)))
    if m := _TESTS_VERSION.search(s):
        return Line("version", value=("tests", m.group(1)))
    if m := _NCCL_VERSION.search(s):
        return Line("version", value=("nccl", m.group(1)))
    if (cmd := parse_command(s)) is not None:
        return Line("command", value=cmd)
    return Line("other")
