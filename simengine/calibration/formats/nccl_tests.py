"""Parse raw nccl-tests stdout into result tables (one per test run found in the text).

Accepts what users actually paste: old and new column layouts, ``#wrong`` = ``N/A`` or float
``error`` columns, comment lines with or without the leading ``#``, launcher prefixes, NCCL
INFO / MPI warning lines anywhere, the output of two processes interleaved, one-row tables and
fragments with only a command line and rows. Each table gets its collective and rank count from
the strongest evidence available (see :func:`parse_nccl_log`), and every row is checked against
nccl-tests' own arithmetic (``doc/PERFORMANCE.md``): algbw = size / time and busbw = algbw × the
collective's bus factor (:mod:`.collectives`).

Anything unusable raises ``ConfigError([("nccl_log", reason)])``; nothing else escapes.
"""

from __future__ import annotations

import os
import re
import statistics
from dataclasses import dataclass, field

from ...errors import ConfigError
from ..collectives import KINDS, bus_factor, kind_from_test_name, kind_from_text, normalize_kind, ranks_from_factor
from ..source import read_text
from .nccl_lines import Command, Layout, RawRow, classify, parse_row

FIELD = "nccl_log"
MAX_LINES = 500_000

# nccl-tests ``ncclDataType_t`` names (src/common.cu ``test_typenames``) → bytes per element.
ELEMENT_BYTES = {
    "int8": 1, "uint8": 1, "char": 1, "int32": 4, "uint32": 4, "int": 4, "int64": 8, "uint64": 8,
    "half": 2, "float16": 2, "fp16": 2, "float": 4, "float32": 4, "double": 8, "float64": 8,
    "bfloat16": 2, "bf16": 2, "f8e4m3": 1, "f8e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1,
}
_REDUCING_OPS = ("sum", "prod", "max", "min", "avg", "mulsum")


@dataclass(frozen=True, slots=True)
class NcclRow:
    """One message size. Times in µs, bandwidths in GB/s (10^9 B/s) as nccl-tests prints them."""

    size_bytes: int
    count: int
    dtype: str
    time_us: float
    algbw_gbs: float
    busbw_gbs: float
    inplace_time_us: float | None = None
    inplace_algbw_gbs: float | None = None
    inplace_busbw_gbs: float | None = None
    redop: str | None = None
    root: int | None = None
    wrong: str | None = None


@dataclass(frozen=True, slots=True)
class NcclTable:
    """The rows of one test run. ``collective`` is a simengine kind (``all_reduce`` … ``p2p``) or an
    nccl-tests collective simengine does not model (``broadcast`` …; ``supported`` is False)."""

    collective: str
    n_ranks: int | None
    rows: tuple[NcclRow, ...]
    n_hosts: int | None = None
    collective_source: str = ""   # log | command | caller | name | inferred
    rank_source: str = ""         # caller | devices | nranks | command | data | nthread | name | unknown
    warnings: tuple[str, ...] = ()
    gpu: str = ""                 # device name from the "Rank N … device" list, e.g. "NVIDIA H100 80GB HBM3"

    @property
    def supported(self) -> bool:
        return self.collective in KINDS

    @property
    def bus_factor(self) -> float | None:
        return bus_factor(self.collective, self.n_ranks) if self.n_ranks else None


@dataclass(frozen=True, slots=True)
class NcclLog:
    tables: tuple[NcclTable, ...]
    name: str = ""
    nccl_version: str | None = None       # "NCCL version 2.26.2+cuda12.8"
    tests_version: str | None = None      # "# nccl-tests version 2.17.8 …"
    warnings: tuple[str, ...] = ()

    @property
    def collectives(self) -> tuple[str, ...]:
        return tuple(t.collective for t in self.tables)

    def table(self, collective: str | None = None) -> NcclTable:
        """The only table (of ``collective``); ConfigError when there is none or more than one."""
        found = [t for t in self.tables if collective is None or t.collective == normalize_kind(collective)]
        if len(found) != 1:
            raise ConfigError([(FIELD, f"{len(found)} tables match {collective or 'any collective'} in {self.name or 'the log'}")])
        return found[0]


@dataclass
class _Draft:
    layout: Layout | None
    collective: tuple[str, str] | None          # (kind, source)
    devices: dict[int, str]
    nthread: tuple[int, int] | None
    command: Command | None
    rows: list[RawRow] = field(default_factory=list)
    closed: bool = False


def parse_nccl_log(
    source: str | bytes | os.PathLike,
    *,
    name: str = "",
    collective: str | None = None,
    n_ranks: int | None = None,
) -> NcclLog:
    """Parse nccl-tests stdout (text, bytes, or a path) into tables.

    ``name`` is a file-name hint (``…_all_gather_16gpu.log``). Collective, strongest first: a
    ``Collective test starting: X`` line, the ``X_perf`` command line, ``collective=``, the name
    hint, then the data (redop ``sum`` with busbw > algbw is all_reduce, < algbw reduce_scatter).
    Rank count: ``n_ranks=`` (caller override), the ``Rank N`` device list, NCCL INFO ``nranks``,
    the launch command (``-np`` × ``-t`` × ``-g``), the data itself (busbw/algbw inverts the bus
    factor; for all_gather/reduce_scatter/alltoall size/(count·element) = n), ``nThread × nGpus``,
    then ``16gpu``/``n2g8`` in the name. When the log's own statement disagrees with the data the
    data wins (nccl-tests computed busbw with the real rank count) and a warning says so.
    """
    text, file_name = read_text(source, FIELD)
    name = name or file_name
    if collective is not None:
        try:
            collective = normalize_kind(collective)
        except ValueError as exc:
            raise ConfigError([(FIELD, str(exc))]) from None
    if n_ranks is not None and not (isinstance(n_ranks, int) and 1 <= n_ranks <= 10_000_000):
        raise ConfigError([(FIELD, f"n_ranks must be a positive integer, got {n_ranks!r}")])

    drafts, versions, nranks_info, last_devices, unparsed, models = _scan(text)
    warnings: list[str] = []
    gpu = max(models, key=models.__getitem__) if models else ""   # the model most ranks report
    if len(models) > 1:   # a run across GPU models: its bandwidths are its slowest ranks'
        warnings.append("its ranks report several GPU models (" + ", ".join(f"{g}: {n} ranks" for g, n in models.items())
                        + f"); its tables are labelled {gpu}, the model most ranks report, but the slowest sets their speed")
    if unparsed:
        warnings.append(f"{unparsed} line(s) looked like result rows but did not parse; ignored")
    tables: list[NcclTable] = []
    for i, d in enumerate(drafts):
        if not d.rows:
            continue
        t = _finish(d, i, name, collective, n_ranks, nranks_info, last_devices, gpu)
        if isinstance(t, str):
            warnings.append(t)
            continue
        if any(_same(t, u) for u in tables):
            warnings.append(f"table {i + 1}: duplicate of an earlier table; dropped")
            continue
        tables.append(t)
    if not tables:
        reason = warnings[-1] if warnings else (
            "no nccl-tests result rows found (expected lines such as "
            "'1048576  262144  float  sum  -1  35.66  29.40  51.46  0 …')")
        raise ConfigError([(FIELD, f"{name + ': ' if name else ''}{reason}")])
    return NcclLog(tuple(tables), name, versions.get("nccl"), versions.get("tests"), tuple(warnings))


def _scan(text: str) -> tuple[list[_Draft], dict[str, str], int | None, dict[int, str], int, dict[str, int]]:
    drafts: list[_Draft] = []
    coll: tuple[str, str] | None = None
    devices: dict[int, str] = {}
    last_devices: dict[int, str] = {}
    nthread: tuple[int, int] | None = None
    command: Command | None = None
    versions: dict[str, str] = {}
    gpus: dict[int, str] = {}
    nranks_info: int | None = None
    unparsed = 0
    last_appended: _Draft | None = None
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise ConfigError([(FIELD, f"{len(lines):,} lines, more than the {MAX_LINES:,} an nccl-tests log has")])
    for line in _join_continuations(lines):
        c = classify(line)
        # Each kind carries the value classify() gives it; the class patterns narrow its type.
        match c.kind, c.value:
            case "row", _:
                layout = next((d.layout for d in reversed(drafts) if not d.closed), None)
                row = parse_row(list(c.tokens), layout)
                if row is None:
                    unparsed += 1
                    continue
                target = next((d for d in reversed(drafts) if not d.closed and _fits(d, row, len(c.tokens))), None)
                if target is None:
                    target = _Draft(None, coll, dict(devices), nthread, command)
                    drafts.append(target)
                target.rows.append(row)
                last_appended = target
            case "header", Layout() as header:
                drafts.append(_Draft(header, coll, dict(devices), nthread, command))
            case "starting", _:
                kind = kind_from_test_name(str(c.value)) or kind_from_text(str(c.value))
                coll = (kind, "log") if kind else coll
                devices = {}
            case ("summary" | "concluded"), _:
                if last_appended is not None:
                    last_appended.closed = True
            case "nthread", (int() as n_threads, int() as n_gpus):
                nthread = (n_threads, n_gpus)
                devices = {}
            case "device", (int() as rank, str() as host, str() as device_gpu):
                devices[rank] = host
                last_devices = devices
                if device_gpu:
                    gpus[rank] = device_gpu
            case "nranks", int() as nranks:
                nranks_info = max(nranks_info or 0, nranks)
            case "version", (str() as which, str() as version):
                versions.setdefault(which, version)
            case "command", Command() as cmd:
                command = cmd
                kind = kind_from_test_name(cmd.test or "") if cmd.test else None
                if kind:
                    coll = (kind, "command")
    models = {g: list(gpus.values()).count(g) for g in sorted(set(gpus.values()))}   # GPU model → its ranks
    return drafts, versions, nranks_info, dict(last_devices), unparsed, models


def _join_continuations(lines: list[str]) -> list[str]:
    out: list[str] = []
    buf = ""
    for ln in lines:
        if ln.rstrip().endswith("\\") and len(buf) < 10_000:
            buf += ln.rstrip()[:-1] + " "
            continue
        out.append(buf + ln)
        buf = ""
    if buf:
        out.append(buf)
    return out


def _fits(d: _Draft, row: RawRow, n_tokens: int) -> bool:
    if d.layout is not None and d.layout.n_tokens != n_tokens and d.rows:
        return False
    return not d.rows or d.rows[-1].size_bytes < row.size_bytes


def _same(a: NcclTable, b: NcclTable) -> bool:
    return a.collective == b.collective and a.n_ranks == b.n_ranks and a.rows == b.rows


def _finish(d: _Draft, idx: int, name: str, caller_kind: str | None, caller_n: int | None,
            nranks_info: int | None, last_devices: dict[int, str], gpu: str = "") -> NcclTable | str:
    label = f"table {idx + 1}"
    warns: list[str] = []
    rows = d.rows
    # --- collective -------------------------------------------------------------------------
    if d.collective is not None:
        kind, ksrc = d.collective
        if caller_kind and caller_kind != kind:
            warns.append(f"the log says {kind} but collective={caller_kind} was given; using {kind}")
    elif caller_kind:
        kind, ksrc = caller_kind, "caller"
    elif (hint := kind_from_text(name)) is not None:
        kind, ksrc = hint, "name"
    else:
        inferred = _infer_kind(rows)
        if inferred is None:
            return (f"{label}: cannot tell which collective it measured (no 'Collective test starting' "
                    "line, no *_perf command line, no name hint); pass collective=")
        kind, ksrc = inferred, "inferred"
        warns.append(f"collective {kind} inferred from the redop and busbw/algbw columns")
    # --- rank count ---------------------------------------------------------------------------
    n, nsrc, hosts = _ranks(d, kind, rows, name, caller_n, nranks_info, last_devices, warns)
    # --- row checks (nccl-tests doc/PERFORMANCE.md) ------------------------------------------
    good: list[NcclRow] = []
    bad_alg = bad_bus = 0
    factor = bus_factor(kind, n) if n else None
    for r in rows:
        expected = r.size_bytes / (r.time_us * 1e3)  # B/µs → GB/s
        if abs(r.algbw_gbs - expected) > 0.006 + 0.01 * expected:
            bad_alg += 1
            continue
        if factor is not None and abs(r.busbw_gbs - r.algbw_gbs * factor) > 0.006 * (1 + factor) + 0.01 * r.busbw_gbs:
            bad_bus += 1
        good.append(NcclRow(r.size_bytes, r.count, r.dtype, r.time_us, r.algbw_gbs, r.busbw_gbs,
                            r.inplace_time_us, r.inplace_algbw_gbs, r.inplace_busbw_gbs, r.redop, r.root, r.wrong))
    if bad_alg:
        warns.append(f"{bad_alg} row(s) with algbw ≠ size/time dropped")
    if bad_bus:
        warns.append(f"{bad_bus} row(s) with busbw/algbw ≠ {factor:.4g} (the {kind} factor for {n} ranks)")
    if not good:
        return f"{label}: no row passed the algbw = size/time check"
    wrong = sum(1 for r in good if r.wrong and r.wrong.isdigit() and int(r.wrong) > 0)
    if wrong:
        warns.append(f"{wrong} row(s) report #wrong > 0 (data corruption): timings kept")
    return NcclTable(kind, n, tuple(good), hosts, ksrc, nsrc, tuple(f"{label}: {w}" for w in warns), gpu)


def _infer_kind(rows: list[RawRow]) -> str | None:
    ratios = [r.busbw_gbs / r.algbw_gbs for r in rows if r.algbw_gbs >= 1.0]
    if not ratios or not rows[0].redop or rows[0].redop.lower() not in _REDUCING_OPS:
        return None
    r = statistics.median(ratios)
    if r > 1.01:
        return "all_reduce"
    if 0.0 < r < 0.99:
        return "reduce_scatter"
    return None


def _ranks(d: _Draft, kind: str, rows: list[RawRow], name: str, caller_n: int | None,
           nranks_info: int | None, last_devices: dict[int, str],
           warns: list[str]) -> tuple[int | None, str, int | None]:
    devices = d.devices or last_devices
    hosts = len(set(devices.values())) if devices else None
    strong: list[tuple[int, str]] = []
    if devices:
        strong.append((max(len(devices), max(devices) + 1), "devices"))
    if nranks_info:
        strong.append((nranks_info, "nranks"))
    cmd = d.command
    if cmd is not None and (cmd.procs is not None or cmd.threads * cmd.gpus > 1):
        strong.append(((cmd.procs or 1) * cmd.threads * cmd.gpus, "command"))
    data_n = _ranks_from_data(kind, rows)
    if caller_n is not None:
        if data_n is not None and data_n != caller_n:
            warns.append(f"n_ranks={caller_n} was given but the busbw/count columns imply {data_n}")
        return caller_n, "caller", hosts
    if strong:
        n, src = strong[0]
        if data_n is not None and data_n != n:
            warns.append(f"the log's {src} say {n} ranks but the busbw/count columns imply {data_n}; using {data_n}")
            return data_n, "data", hosts
        return n, src, hosts
    if data_n is not None:
        how = "size/count" if kind in ("all_gather", "reduce_scatter", "all_to_all") else "busbw/algbw"
        warns.append(f"the log prints no rank count; {data_n} ranks inferred from the {how} columns")
        return data_n, "data", hosts
    if d.nthread is not None and d.nthread[0] * d.nthread[1] > 1:
        return d.nthread[0] * d.nthread[1], "nthread", hosts
    if (hint := _ranks_from_name(name)) is not None:
        return hint, "name", hosts
    if kind != "p2p":
        warns.append("rank count unknown (no device list, command line or name hint); pass n_ranks=")
    return None, "unknown", hosts


def _ranks_from_data(kind: str, rows: list[RawRow]) -> int | None:
    """Rank count implied by the numbers. For all_gather / reduce_scatter / alltoall nccl-tests
    prints the per-rank element count (``*GetCollByteCount`` in src/all_gather.cu etc.: count =
    size / nranks / element size), so size / (count·element) = n exactly; otherwise invert the
    bus factor from busbw/algbw (doc/PERFORMANCE.md), trusted only when it rounds cleanly."""
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        per: set[int] = set()
        for r in rows:
            el = ELEMENT_BYTES.get(r.dtype.lower())
            if not el or r.count <= 0 or r.size_bytes % (r.count * el):
                per.clear()
                break
            per.add(r.size_bytes // (r.count * el))
        if len(per) == 1 and (n := per.pop()) >= 1:
            return n
    raw_ests = [ranks_from_factor(kind, r.busbw_gbs / r.algbw_gbs) for r in rows if r.algbw_gbs >= 1.0]
    ests = [e for e in raw_ests if e is not None]
    if not ests:
        return None
    est = statistics.median(ests)
    n = round(est)
    if n >= 2 and abs(est - n) < 0.25 and n <= 4096:
        return n
    return None


def _ranks_from_name(name: str) -> int | None:
    low = name.lower()
    if m := re.search(r"(?<![a-z0-9])n(\d{1,4})_?g(\d{1,3})(?![0-9])", low):
        return int(m.group(1)) * int(m.group(2))
    if m := re.search(r"(\d{1,6})\s*[-_]?\s*gpus?(?![a-z])", low):
        return int(m.group(1)) or None
    return None
