"""GEMM sweeps → ``tuple[GemmPoint, ...]``: detect the file's format from its header and hand it
to that format's reader under :mod:`.formats`:

* ``b200``    — SimuMax's flattened operator table (:mod:`.formats.simumax_op_table`; it also
  carries attention, grouped-GEMM and memory-bandwidth rows);
* ``xla``     — OpenXLA's measured matmul table (:mod:`.formats.xla_matmul`);
* ``generic`` — any ``m,n,k`` CSV with an efficiency, throughput or time (:mod:`.formats.generic_gemm`).

Every bad cell is reported as ``ConfigError`` issues ``("gemm_csv", "line L, column C: …")``.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass, field

from ..config.system import GemmPoint
from .csvutil import norm_header, read_rows
from .formats.generic_gemm import read_generic_rows
from .formats.simumax_op_table import read_simumax_rows
from .formats.xla_matmul import is_xla_header, read_xla_matmul_table
from .peaks import FIELD, H100_SXM_DENSE_PEAK_TFLOPS, PeakLike, normalize_dtype, peak_map
from .source import read_text

__all__ = ["FIELD", "GemmLoad", "H100_SXM_DENSE_PEAK_TFLOPS", "detect_gemm_format", "load_gemm_csv", "normalize_dtype",
           "peak_map", "read_gemm_csv", "read_xla_matmul_table"]


@dataclass(frozen=True)
class GemmLoad:
    """What a reader found: the points plus bookkeeping for the calibration summary."""

    points: tuple[GemmPoint, ...]
    format: str
    skipped_dtypes: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    b200: object | None = None  # B200Tables when format == "b200"


def detect_gemm_format(header: list[str]) -> str:
    names = {norm_header(h) for h in header}
    if {"table", "op", "efficiency"} <= names and ("k_m" in names or "shape_key" in names):
        return "b200"
    if is_xla_header(header):
        return "xla"
    return "generic"


def read_gemm_csv(
    source: str | bytes | os.PathLike,
    *,
    peak_tflops: PeakLike = None,
    dtypes: Collection[str] | None = None,
    wgrad_out_dtype: str | None = "fp32",
) -> tuple[GemmPoint, ...]:
    """Read any of the three formats (detected from the header) → GemmPoints."""
    return load_gemm_csv(source, peak_tflops=peak_tflops, dtypes=dtypes, wgrad_out_dtype=wgrad_out_dtype).points


def load_gemm_csv(
    source: str | bytes | os.PathLike,
    *,
    peak_tflops: PeakLike = None,
    dtypes: Collection[str] | None = None,
    wgrad_out_dtype: str | None = "fp32",
) -> GemmLoad:
    text, _ = read_text(source, FIELD)
    header, rows = read_rows(text, FIELD)
    fmt = detect_gemm_format(header)
    peaks = peak_map(peak_tflops)
    keep = None if dtypes is None else {normalize_dtype(d) or d for d in dtypes}
    if fmt == "b200":
        tables = read_simumax_rows(header, rows, peaks=peaks, wgrad_out_dtype=wgrad_out_dtype)
        pts = tables.matmul
        skipped: dict[str, int] = {}
        if keep is not None:
            for p in pts:
                if p.dtype not in keep:
                    skipped[p.dtype] = skipped.get(p.dtype, 0) + 1
            pts = tuple(p for p in pts if p.dtype in keep)
        return GemmLoad(pts, fmt, skipped, tables.notes, tables)
    points, skipped, notes = read_generic_rows(header, rows, peaks, keep)
    return GemmLoad(points, fmt, skipped, notes)
