"""OpenXLA's measured matmul table (``b,m,n,k,dtype,…,flops_per_second``), e.g.
``xla_sm90_h100_matmul_perf_table.csv`` (openxla/xla ``xla/backends/gpu/…/matmul_perf_table``).

It is the generic GEMM format (:mod:`.generic_gemm`) with a ``flops_per_second`` column; what is
specific is recognising it and its default peak: without ``peak_tflops`` the H100 SXM dense peaks
are used (the sm_90 table), with f32 rows measured against the TF32 tensor-core peak.
"""

from __future__ import annotations

import os
from collections.abc import Collection

from ...config.system import GemmPoint
from ..csvutil import norm_header, read_rows
from ..peaks import FIELD, H100_SXM_DENSE_PEAK_TFLOPS, PeakLike, normalize_dtype, peak_map
from ..source import read_text
from .generic_gemm import read_generic_rows


def is_xla_header(header: list[str]) -> bool:
    names = {norm_header(h) for h in header}
    return "xla_dtype_key" in names or ("flops_per_second" in names and "gpu_arch" in names)


def read_xla_matmul_table(
    source: str | bytes | os.PathLike,
    *,
    peak_tflops: PeakLike = None,
    dtypes: Collection[str] | None = None,
) -> tuple[GemmPoint, ...]:
    """The table's points against ``peak_tflops`` (default: H100 SXM dense peaks)."""
    text, _ = read_text(source, FIELD)
    header, rows = read_rows(text, FIELD)
    peaks = peak_map(H100_SXM_DENSE_PEAK_TFLOPS if peak_tflops is None else peak_tflops)
    keep = None if dtypes is None else {normalize_dtype(d) or d for d in dtypes}
    return read_generic_rows(header, rows, peaks, keep)[0]
