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

import re
from dataclasses import dataclass, field

from ..calibration.source import read_text
from ..errors import ConfigError
from .stated import parse_stated

FIELD = "log"
MAX_LINES = 2_000_000

_NUM = r"([0-9][0-9,]*\.?[0-9]*(?:[eE][+-]?\d+)?)"
_MEGATRON_ITER = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|.*?elapsed time per iteration \(ms\):\s*" + _NUM)
_MEGATRON_DATE = re.compile(r"^\s*\[(\d{4}-\d{2}-\d{2})[ T]\d")  # training_log: [%Y-%m-%d %H:%M:%S]
_MEGATRON_TFLOPS = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*" + _NUM)
_MEGATRON_MEM = re.compile(r"\[Rank\s+(\d+)\]\s+\(after\s+(\d+)\s+iterations\)\s+memory \(MB\)\s*\|\s*allocated:\s*"
                           + _NUM + r"\s*\|\s*max allocated:\s*" + _NUM
                           + r"(?:\s*\|\s*(?:reserved|cached):\s*" + _NUM + r"\s*\|\s*max (?:reserved|cached):\s*" + _NUM + ")?")
_TITAN_STEP = re.compile(r"\bstep:\s*(\d+)\s+loss:\s*\S+.*?memory:\s*" + _NUM + r"\s*GiB\(\s*" + _NUM + r"%\)\s+tps:\s*" + _NUM
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


def _f(raw: str | None) -> float | None:
    return None if raw is None else float(raw.replace(",", ""))


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
    for line in lines:
        if m := _MEGATRON_ITER.search(line):
            step = int(m.group(1))
            if date is None and (d := _MEGATRON_DATE.search(line)):
                date = d.group(1)
            t = _MEGATRON_TFLOPS.search(line)
            mega.setdefault(step, Iteration(step, time_s=_f(m.group(3)) / 1e3,  # type: ignore[operator]
                                            tflops_per_gpu=_f(t.group(1)) if t else None))
        elif m := _MEGATRON_MEM.search(line):
            alloc.append(_f(m.group(4)) / 1024.0)  # type: ignore[operator]  # MiB → GiB
            if m.group(6):
                reserved.append(_f(m.group(6)) / 1024.0)  # type: ignore[operator]
        elif m := _TITAN_STEP.search(line):
            step = int(m.group(1))
            titan.setdefault(step, Iteration(step, tokens_per_s_per_gpu=_f(m.group(4)), tflops_per_gpu=_f(m.group(5)),
                                             memory_gib=_f(m.group(2))))
    warnings: list[str] = []
    if mega and titan:
        warnings.append("the log has both Megatron-LM and torchtitan lines; using the one with more iterations")
    if not mega and not titan:
        raise ConfigError([(field_name, "no training iterations found (expected Megatron-LM 'iteration N/M | ... "
                                        "elapsed time per iteration (ms): X' or torchtitan 'step: N loss: ... tps: X')")])
    if len(mega) >= len(titan):
        its = tuple(sorted(mega.values(), key=lambda i: i.step))
        return RunLog("megatron", its, max(alloc) if alloc else None, max(reserved) if reserved else None, tuple(warnings),
                      parse_stated(lines), date)
    its = tuple(sorted(titan.values(), key=lambda i: i.step))
    peak = max((i.memory_gib for i in its if i.memory_gib is not None), default=None)
    return RunLog("torchtitan", its, None, peak, tuple(warnings))
