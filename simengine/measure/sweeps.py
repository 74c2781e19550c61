"""Run one sweep (gemm | grouped-gemm | attention | memory) on a backend and write its CSV.

Each row holds the shape, the median time of ``repeats`` calls after ``warmup`` untimed ones
(``backends`` module docstring) and the achieved TFLOP/s (or GB/s), with the FLOP counts of
simengine's ops (workload/ops.py): GEMM 2·b·m·n·k, grouped 2·g·m·n·k, attention
2·b·h·s²·(d_qk+d_v)·(s+1)/(2s) causal forward and 2.5× that backward
(``calibration/formats/attention_csv.py``). The header (``#`` comment lines) records the backend,
device, GPU name, clocks, library versions, warm-up, repeats and the statistic. The files are the
formats ``python -m simengine calibrate`` reads (``--gemm``, ``--grouped-gemm``, ``--attention``).
Writes are atomic (temp file + ``os.replace``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from ..fileio import write_atomic as _write_atomic
from ..calibration.formats.attention_csv import attention_flops
from .backends import median_s
from .shapes import AttentionShape, GemmShape, GroupedShape

COLUMNS = {
    "gemm": "m,n,k,b,dtype,layout,time_us,tflops",
    "grouped-gemm": "groups,m,n,k,layout,dtype,time_us,tflops",
    "attention": "phase,batch,seq_len,heads,kv_heads,d_qk,d_v,causal,time_us,tflops",
    "memory": "bytes,time_us,gbs",
}


def _flops(kind: str, shape) -> float:
    if kind == "gemm":
        return 2.0 * shape.b * shape.m * shape.n * shape.k
    if kind == "grouped-gemm":
        return 2.0 * shape.groups * shape.m * shape.n * shape.k
    if kind == "attention":
        return attention_flops(shape.phase, shape.batch, shape.seq_len, shape.heads, shape.d_qk, shape.d_v, shape.causal)
    return 2.0 * shape  # memory: a copy reads and writes the bytes


def _kernel(backend, kind: str, shape):
    if kind == "gemm":
        return backend.gemm(shape.m, shape.n, shape.k, shape.b, shape.layout)
    if kind == "grouped-gemm":
        return backend.grouped_gemm(shape.groups, shape.m, shape.n, shape.k, shape.layout)
    if kind == "attention":
        return backend.attention(shape.phase, shape.batch, shape.seq_len, shape.heads, shape.kv_heads,
                                 shape.d_qk, shape.d_v, shape.causal)
    return backend.memory(int(shape))


def _row(kind: str, shape, dtype: str, t: float, work: float) -> str:
    rate = repr(work / t * 1e-12) if kind != "memory" else repr(work / t * 1e-9)
    us = repr(t * 1e6)
    if kind == "gemm":
        s: GemmShape = shape
        return f"{s.m},{s.n},{s.k},{s.b},{dtype},{s.layout},{us},{rate}"
    if kind == "grouped-gemm":
        g: GroupedShape = shape
        return f"{g.groups},{g.m},{g.n},{g.k},{g.layout},{dtype},{us},{rate}"
    if kind == "attention":
        a: AttentionShape = shape
        return f"{a.phase},{a.batch},{a.seq_len},{a.heads},{a.kv_heads},{a.d_qk},{a.d_v},{int(a.causal)},{us},{rate}"
    return f"{int(shape)},{us},{rate}"


def run_sweep(backend, kind: str, shapes: Iterable, *, warmup: int = 3, repeats: int = 10,
              max_flops: float | None = None) -> tuple[list[str], list[str]]:
    """Time every shape → (CSV lines with the header comments, notes on skipped shapes)."""
    info = backend.info()
    lines = [f"# simengine.measure {kind}", *(f"# {k}: {v}" for k, v in info.items()),
             f"# warmup: {warmup}  repeats: {repeats}  statistic: median", f"# date: {time.strftime('%Y-%m-%d %H:%M:%S')}",
             COLUMNS[kind]]
    notes: list[str] = []
    for shape in shapes:
        work = _flops(kind, shape)
        if max_flops is not None and kind != "memory" and work > max_flops:
            notes.append(f"skipped {shape}: {work:.3g} FLOPs over --max-flops {max_flops:.3g}")
            continue
        fn = _kernel(backend, kind, shape)
        if fn is None:
            notes.append(f"skipped {shape}: not supported by the {backend.name} backend")
            continue
        t = median_s(backend.time(fn, warmup, repeats))
        if t <= 0:
            notes.append(f"skipped {shape}: timer resolution (measured {t} s)")
            continue
        lines.append(_row(kind, shape, backend.dtype, t, work))
    lines += [f"# {n}" for n in notes]
    return lines, notes


def write_atomic(path: str | os.PathLike, lines: list[str]) -> Path:
    """Write ``lines`` to ``path`` atomically (simengine/fileio.py)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic(p, lambda fh: fh.write("\n".join(lines) + "\n"))
    return p
