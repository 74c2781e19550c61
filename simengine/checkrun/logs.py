"""Read a training log: Megatron-LM or torchtitan stdout → per-iteration step times and memory.

Megatron-LM (megatron/training/training.py ``training_log``; megatron/training/utils.py
``report_memory``) prints, per logged iteration::

    [2024-04-06 02:59:36] iteration   43/  100 | consumed samples: 5504 | elapsed time per iteration (ms): 5444.9 |
        throughput per GPU (TFLOP/s/GPU): 239.8 | learning rate: ... | lm loss: 1.82E+00 | ...
    [Rank 0] (after 10 iterations) memory (MB) | allocated: 1234.5 | max allocated: 2345.6 | reserved: ... | max reserved: ...

``memory (MB)`` is MiB (``mega_bytes = 1024.0 * 1024.0``); older versions say ``cached`` for
``reserved``. The elapsed time is averaged over the log interval.

torchtitan (torchtitan/components/metrics.py ``MetricsProcessor.log``) prints::

    [rank0]:[titan] ... - root - INFO - step: 200  loss:  6.1384  memory: 49.66GiB(52.28%)  tps: 5,856  tflops: 339.16  mfu: 34.29%

``memory`` is the peak *reserved* memory (``device_memory_monitor.get_peak_stats().max_reserved_gib``)
and ``tps`` is tokens per second per GPU (``ntokens_since_last_log / (time_delta ·
non_data_parallel_size)``), so step time = global tokens per step / (tps × GPUs).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import NoReturn

from ..calibration.source import read_text
from ..errors import ConfigError
from .stated import MAX_DIGITS, parse_stated

FIELD = "log"
MAX_LINES = 2_000_000
# a logged step time outside these bounds is a corrupt or hand-edited line, not a training step:
# no GPU step takes under a microsecond (one kernel launch takes several), and none a week
STEP_S_RANGE = (1e-6, 7 * 24 * 3600.0)
# the same for the other logged figures: no GPU does an exaFLOP/s (B200 dense fp8: 4.5 PFLOP/s), holds
# 100 TiB, or trains 10^8 tokens/s (a 1B model on one B200 runs ~10^5); under 0.01 tokens/s a step of
# even 1,024 tokens on one GPU takes more than a day
MAX_TFLOPS = 1e6
MAX_MEMORY_MB = 1e8
TPS_RANGE = (0.01, 1e8)

# one way to split a digit run (``[0-9,]*\.?[0-9]*`` had n: a long run not followed by what the
# pattern wants took quadratic time)
_NUM = r"(-?[0-9][0-9,]*(?:\.[0-9]*)?(?:[eE][+-]?\d+)?)"
# an iteration line is a head and, further on, a tail; ``_after`` finds the pair
_MEGATRON_HEAD = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_MEGATRON_TIME = re.compile(r"elapsed time per iteration \(ms\):\s*" + _NUM)
_MEGATRON_DATE = re.compile(r"^\s*\[(\d{4}-\d{2}-\d{2})[ T]\d")  # training_log: [%Y-%m-%d %H:%M:%S]
_MEGATRON_TFLOPS = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*" + _NUM)
_MEGATRON_MEM = re.compile(r"\[Rank\s+(\d+)\]\s+\(after\s+(\d+)\s+iterations\)\s+memory \(MB\)\s*\|\s*allocated:\s*"
                           + _NUM + r"\s*\|\s*max allocated:\s*" + _NUM
                           + r"(?:\s*\|\s*(?:reserved|cached):\s*" + _NUM + r"\s*\|\s*max (?:reserved|cached):\s*" + _NUM + ")?")
_TITAN_HEAD = re.compile(r"\bstep:\s*(\d+)\s+loss:\s*\S")
# torchtitan colours its console lines (``disable_color_printing`` is False by default:
# torchtitan/tools/utils.py Color): SGR sequences such as ESC[31m sit between the fields
_SGR = re.compile(r"\x1b\[[0-9;]*m")
_TITAN_TAIL = re.compile(r"memory:\s*" + _NUM + r"\s*GiB\(\s*" + _NUM + r"%\)\s+tps:\s*" + _NUM
                         + r"(?:\s+tflops:\s*" + _NUM + r")?(?:\s+mfu:\s*" + _NUM + "%)?")


@dataclass(frozen=True, slots=True)
class Iteration:
    step: int
    time_s: float | None = None          # Megatron: elapsed time per iteration
    tokens_per_s_per_gpu: float | None = None  # torchtitan tps
    tflops_per_gpu: float | None = None
    memory_gib: float | None = None      # torchtitan: peak reserved


@dataclass(frozen=True)
class RunLog:
    framework: str                       # megatron | torchtitan
    iterations: tuple[Iteration, ...]
    max_allocated_gib: float | None = None   # Megatron report_memory, max over ranks
    max_reserved_gib: float | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)
    stated: dict[str, int | str] = field(default_factory=dict)  # setup the log prints (stated.py), Megatron only
    date: str | None = None              # YYYY-MM-DD of the first dated Megatron iteration line
    sha256: str = ""                     # of the text parsed (``digest``: a refit's provenance)


def _f(raw: str | None) -> float | None:
    return None if raw is None else float(raw.replace(",", ""))


def _checked(value: float | None, what: str, lineno: int, field_name: str, lo: float = 0.0, hi: float = math.inf) -> float | None:
    """``value`` when it is absent or a finite number in [lo, hi]; else ConfigError naming the line
    (``1e309`` parses as inf, and a time of 1e308 ms or 1e-9 ms would print a meaningless comparison)."""
    if value is None or (math.isfinite(value) and lo <= value <= hi):
        return value
    expected = f"{lo:g} to {hi:g}" if hi < math.inf else f"a finite number ≥ {lo:g}"
    return _bad(f"line {lineno}: {what} {value:g} is not a plausible value (expected {expected})", field_name)


def _step(raw: str, lineno: int, field_name: str) -> int:
    """The iteration number of a line: at most ``MAX_DIGITS`` digits (an int64, as the frameworks
    count; int() raises ValueError beyond 4300)."""
    if len(raw) > MAX_DIGITS:
        _bad(f"line {lineno}: iteration number of {len(raw)} digits is not a plausible value", field_name)
    return int(raw)


def _after(head: re.Pattern, tail: re.Pattern, line: str) -> tuple[re.Match, re.Match] | None:
    """The line's first ``head`` and the first ``tail`` after it, or None: what ``head.*?tail``
    finds, in linear time (as one pattern, every head of a line without a tail re-scanned the rest
    of the line: a 64 MB line of 'iteration 1/1 |' would have taken days)."""
    h = head.search(line)
    t = tail.search(line, h.end()) if h else None
    return (h, t) if h and t else None


def _validation(line: str, head: re.Match) -> bool:
    """A torchtitan validation line ("validate step: N  loss: …", torchtitan/components/validate.py
    logs with the same fields): not a training step (its tps counted as one made a 2.8 s step 0.16 s)."""
    return line[:head.start()].rstrip().lower().endswith("validate")


def _bad(msg: str, field_name: str) -> NoReturn:
    raise ConfigError([(field_name, msg)])


def parse_training_log(source, *, field_name: str = FIELD) -> RunLog:
    """Parse Megatron-LM or torchtitan stdout (text, bytes or a ``pathlib.Path``).

    Duplicate lines (every rank printing the same step) are merged: one Iteration per step.
    ConfigError when the text has neither format's iteration lines."""
    text, _ = read_text(source, field_name)
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        raise ConfigError([(field_name, f"{len(lines):,} lines, more than the {MAX_LINES:,} accepted")])
    mega: dict[int, Iteration] = {}
    titan: dict[int, Iteration] = {}
    alloc: list[float] = []
    reserved: list[float] = []
    date = None
    lo_s, hi_s = STEP_S_RANGE
    for no, line in enumerate(lines, 1):
        if "\x1b" in line:
            line = _SGR.sub("", line)
        if it := _after(_MEGATRON_HEAD, _MEGATRON_TIME, line):
            step, tail = _step(it[0].group(1), no, field_name), it[1]
            if date is None and (d := _MEGATRON_DATE.search(line)):
                date = d.group(1)
            t = _MEGATRON_TFLOPS.search(line)
            ms = _checked(_f(tail.group(1)), "elapsed time per iteration (ms)", no, field_name, lo_s * 1e3, hi_s * 1e3)
            mega.setdefault(step, Iteration(step, time_s=ms / 1e3,  # type: ignore[operator]
                                            tflops_per_gpu=_checked(_f(t.group(1)), "TFLOP/s/GPU", no, field_name, 0.0, MAX_TFLOPS) if t else None))
        elif m := _MEGATRON_MEM.search(line):
            # MiB → GiB; a 0 (nothing measured) is skipped as a tps of 0 is
            if got := _checked(_f(m.group(4)), "max allocated (MB)", no, field_name, 0.0, MAX_MEMORY_MB):
                alloc.append(got / 1024.0)
            if m.group(6) and (got := _checked(_f(m.group(6)), "max reserved (MB)", no, field_name, 0.0, MAX_MEMORY_MB)):
                reserved.append(got / 1024.0)
        elif (it := _after(_TITAN_HEAD, _TITAN_TAIL, line)) and not _validation(line, it[0]):
            step, tail = _step(it[0].group(1), no, field_name), it[1]
            tps = _f(tail.group(3))
            if tps != 0:   # a step time comes from it, tokens / (tps · GPUs); a 0 is skipped (compare.step_times)
                _checked(tps, "tps", no, field_name, *TPS_RANGE)
            mem = _checked(_f(tail.group(1)), "memory (GiB)", no, field_name, 0.0, MAX_MEMORY_MB / 1024.0)
            titan.setdefault(step, Iteration(step, tokens_per_s_per_gpu=tps,
                                             tflops_per_gpu=_checked(_f(tail.group(4)), "tflops", no, field_name, 0.0, MAX_TFLOPS),
                                             memory_gib=mem or None))   # 0.00GiB: not measured (a CPU run)
    warnings: list[str] = []
    if mega and titan:
        warnings.append("the log has both Megatron-LM and torchtitan lines; using the one with more iterations")
    if not mega and not titan:
        raise ConfigError([(field_name, "no training iterations found (expected Megatron-LM 'iteration N/M | ... "
                                        "elapsed time per iteration (ms): X' or torchtitan 'step: N loss: ... tps: X')")])
    if len(mega) >= len(titan):
        its = tuple(sorted(mega.values(), key=lambda i: i.step))
        return RunLog("megatron", its, max(alloc) if alloc else None, max(reserved) if reserved else None, tuple(warnings),
                      parse_stated(lines), date, digest(text))
    its = tuple(sorted(titan.values(), key=lambda i: i.step))
    peak = max((i.memory_gib for i in its if i.memory_gib is not None), default=None)
    return RunLog("torchtitan", its, None, peak, tuple(warnings), sha256=digest(text))


def digest(text: str) -> str:
    """sha256 of a log's text (UTF-8), as a refit's provenance names it."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
