"""Readers for measured GEMM sweeps → ``tuple[GemmPoint, ...]``.

Three formats, detected from the header (:func:`detect_gemm_format`):

* ``b200``   — SimuMax's flattened system file (``table,op,shape_key,efficiency,…,k_m,k_n,k_k``);
  see :mod:`.b200` (it also carries attention, grouped-GEMM and memory-bandwidth rows).
* ``xla``    — OpenXLA's measured matmul table (``b,m,n,k,dtype,…,flops_per_second``), e.g.
  ``xla_sm90_h100_matmul_perf_table.csv``.
* ``generic``— any CSV with ``m,n,k`` [``b``] [``dtype``] [``layout``] and one of: ``efficiency``
  (``efficiency_pct``), ``flops_per_second`` / ``tflops`` / ``gflops``, or a time
  (``time_ns`` / ``time_us`` / ``time_ms`` / ``time_s``). Headers are case-insensitive with
  common spellings (``M``, ``batch``, ``Time (µs)``, ``TFLOP/s``). Throughputs and times need the
  GPU peak of the row's dtype; FLOPs = 2·b·m·n·k (one multiply-add = 2 FLOPs per output element
  per k). A missing dtype means bf16, a missing b means 1.

Every bad cell is reported as ``ConfigError`` issues ``("gemm_csv", "line L, column C: …")``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from ..config.system import GemmPoint, PeakTflops
from ..errors import ConfigError
from .csvutil import Issues, cell, find_column, norm_header, pos_float, pos_int, read_rows
from .source import read_text

FIELD = "gemm_csv"
PeakLike = float | Mapping[str, float] | PeakTflops | None

# NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16 1,979 and TF32 989 TFLOP/s "with sparsity";
# dense = half. OpenXLA's f32 rows run on TF32 tensor cores (they reach ~400 TFLOP/s, far above
# the 67 TFLOP/s FP32 CUDA-core peak), so their efficiency is taken against the TF32 peak.
H100_SXM_DENSE_PEAK_TFLOPS: dict[str, float] = {"bf16": 989.4, "fp8": 1978.9, "fp32": 494.7}

_DTYPES = {
    "bf16": "bf16", "bfloat16": "bf16", "torch_bfloat16": "bf16", "bf16xbf16_bf16": "bf16",
    "bf16_bf16_bf16": "bf16", "bf16xbf16_f32": "bf16",
    "fp8": "fp8", "f8": "fp8", "e4m3": "fp8", "e5m2": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8",
    "float8": "fp8", "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "f8e4m3": "fp8", "f8e5m2": "fp8",
    "f8e4m3fn": "fp8",
    "fp32": "fp32", "f32": "fp32", "float32": "fp32", "float": "fp32", "tf32": "fp32",
    "f32xf32_f32": "fp32", "torch_float32": "fp32",
}
_LAYOUTS = ("TN", "NN", "NT")

_ALIASES = {
    "m": ("m",), "n": ("n",), "k": ("k",),
    "b": ("b", "batch", "batch_size", "batch_count", "bs"),
    "dtype": ("dtype", "data_type", "datatype", "precision", "type", "input_dtype", "in_dtype"),
    "layout": ("layout", "gemm_layout", "trans", "transpose"),
    "peak_tflops": ("peak_tflops",),
    "efficiency": ("efficiency", "eff", "efficiency_factor", "efficient_factor", "utilization"),
    "efficiency_pct": ("efficiency_pct", "eff_pct", "efficiency_percent", "utilization_pct"),
    "flops_per_second": ("flops_per_second", "flops_s", "flop_s", "flops_per_sec"),
    "tflops": ("tflops", "tflop_s", "tflops_s", "achieved_tflops", "tflops_achieved"),
    "gflops": ("gflops", "gflop_s", "gflops_s"),
    "time_ns": ("time_ns", "ns", "latency_ns", "duration_ns", "runtime_ns", "time_ns_derived"),
    "time_us": ("time_us", "us", "latency_us", "duration_us", "runtime_us", "time_usec"),
    "time_ms": ("time_ms", "ms", "latency_ms", "duration_ms", "runtime_ms"),
    "time_s": ("time_s", "seconds", "time_sec", "latency_s"),
}
_VALUE_ORDER = ("efficiency", "efficiency_pct", "flops_per_second", "tflops", "gflops",
                "time_ns", "time_us", "time_ms", "time_s")
_TO_TFLOPS = {"flops_per_second": 1e-12, "tflops": 1.0, "gflops": 1e-3}
_TO_SECONDS = {"time_ns": 1e-9, "time_us": 1e-6, "time_ms": 1e-3, "time_s": 1.0}


@dataclass(frozen=True)
class GemmLoad:
    """What a reader found: the points plus bookkeeping for the calibration summary."""

    points: tuple[GemmPoint, ...]
    format: str
    skipped_dtypes: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    b200: object | None = None  # B200Tables when format == "b200"


def normalize_dtype(raw: str) -> str | None:
    key = norm_header(raw)
    return _DTYPES.get(key)


def peak_map(peak: PeakLike) -> dict[str, float]:
    """``989.4`` (all dtypes), ``{"bf16": 989.4}`` or a ``PeakTflops`` → ``{dtype: TFLOP/s}``."""
    if peak is None:
        return {}
    if isinstance(peak, PeakTflops):
        out = {"bf16": peak.bf16, "fp32": peak.fp32}
        if peak.fp8 is not None:
            out["fp8"] = peak.fp8
        return out
    if isinstance(peak, (int, float)) and not isinstance(peak, bool):
        if not peak > 0:
            raise ConfigError([(FIELD, f"peak_tflops must be positive, got {peak}")])
        return {"bf16": float(peak), "fp8": float(peak), "fp32": float(peak)}
    if isinstance(peak, Mapping):
        out = {}
        for k, v in peak.items():
            d = normalize_dtype(str(k))
            if d is None or not isinstance(v, (int, float)) or not v > 0:
                raise ConfigError([(FIELD, f"peak_tflops entry {k!r}: {v!r} is not a positive TFLOP/s for bf16|fp8|fp32")])
            out[d] = float(v)
        return out
    raise ConfigError([(FIELD, f"peak_tflops must be a number, a mapping or PeakTflops, got {type(peak).__name__}")])


def detect_gemm_format(header: list[str]) -> str:
    names = {norm_header(h) for h in header}
    if {"table", "op", "efficiency"} <= names and ("k_m" in names or "shape_key" in names):
        return "b200"
    if "xla_dtype_key" in names or ("flops_per_second" in names and "gpu_arch" in names):
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


def read_xla_matmul_table(
    source: str | bytes | os.PathLike,
    *,
    peak_tflops: PeakLike = None,
    dtypes: Collection[str] | None = None,
) -> tuple[GemmPoint, ...]:
    """OpenXLA's measured matmul table. Without ``peak_tflops`` the H100 SXM dense peaks are used
    (the sm_90 table), with f32 rows measured against the TF32 tensor-core peak."""
    peak = H100_SXM_DENSE_PEAK_TFLOPS if peak_tflops is None else peak_tflops
    return load_gemm_csv(source, peak_tflops=peak, dtypes=dtypes).points


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
        from .b200 import read_b200_rows  # local: b200 imports this module's helpers

        tables = read_b200_rows(header, rows, peaks=peaks, wgrad_out_dtype=wgrad_out_dtype)
        pts = tables.matmul
        skipped: dict[str, int] = {}
        if keep is not None:
            for p in pts:
                if p.dtype not in keep:
                    skipped[p.dtype] = skipped.get(p.dtype, 0) + 1
            pts = tuple(p for p in pts if p.dtype in keep)
        return GemmLoad(pts, fmt, skipped, tables.notes, tables)
    points, skipped, notes = _read_generic(header, rows, peaks, keep)
    return GemmLoad(points, fmt, skipped, notes)


def _read_generic(header, rows, peaks, keep):
    index: dict[str, int] = {}
    for i, h in enumerate(header):
        index.setdefault(norm_header(h), i)
    cols = {key: find_column(index, *aliases) for key, aliases in _ALIASES.items()}
    missing = [k for k in ("m", "n", "k") if cols[k][0] is None]
    value_key = next((k for k in _VALUE_ORDER if cols[k][0] is not None), None)
    if missing or value_key is None:
        need = [f"'{m}'" for m in missing]
        if value_key is None:
            need.append("one of efficiency | tflops | flops_per_second | time_us | time_ms | time_ns")
        raise ConfigError([(FIELD, f"missing column {', '.join(need)} (header: {', '.join(header)[:200]})")])
    if not rows:
        raise ConfigError([(FIELD, "no data rows")])
    issues = Issues(FIELD)
    points: list[GemmPoint] = []
    skipped: dict[str, int] = {}
    vidx, vname = cols[value_key][0], header[cols[value_key][0]]
    for line, cells in rows:
        raw_dtype = cell(cells, cols["dtype"][0])
        dtype = normalize_dtype(raw_dtype) if raw_dtype else "bf16"
        if dtype is None:
            issues.add(line, header[cols["dtype"][0]], f"dtype {raw_dtype[:30]!r} is not bf16, fp8 or fp32")
            continue
        if keep is not None and dtype not in keep:
            skipped[dtype] = skipped.get(dtype, 0) + 1
            continue
        m = pos_int(cell(cells, cols["m"][0]), line, header[cols["m"][0]], issues)
        n = pos_int(cell(cells, cols["n"][0]), line, header[cols["n"][0]], issues)
        k = pos_int(cell(cells, cols["k"][0]), line, header[cols["k"][0]], issues)
        bcol = cols["b"][0]
        b = pos_int(cell(cells, bcol), line, header[bcol] if bcol is not None else "b", issues, default=1)
        layout = cell(cells, cols["layout"][0]).upper() or None
        if layout is not None and layout not in _LAYOUTS:
            issues.add(line, header[cols["layout"][0]], f"layout {layout[:10]!r} is not TN, NN or NT")
            continue
        value = pos_float(cell(cells, vidx), line, vname, issues)
        if None in (m, n, k, b, value):
            continue
        eff = _efficiency(value_key, value, dtype, m, n, k, b, peaks, cells, cols, header, line, issues)  # type: ignore[arg-type]
        if eff is None:
            continue
        points.append(GemmPoint(m=m, n=n, k=k, b=b, dtype=dtype, layout=layout, efficiency=eff))  # type: ignore[arg-type]
    issues.raise_if_any()
    if not points:
        raise ConfigError([(FIELD, f"no rows left after filtering dtypes (skipped: {skipped})")])
    return tuple(points), skipped, ()


def _efficiency(key, value, dtype, m, n, k, b, peaks, cells, cols, header, line, issues) -> float | None:
    col = header[cols[key][0]]
    if key in ("efficiency", "efficiency_pct"):
        eff = value / 100.0 if key == "efficiency_pct" else value
        pidx = cols["peak_tflops"][0]
        if pidx is not None and dtype in peaks and cell(cells, pidx):
            row_peak = pos_float(cell(cells, pidx), line, header[pidx], issues)
            if row_peak is None:
                return None
            eff = eff * row_peak / peaks[dtype]  # same achieved TFLOP/s, against the system's peak
    else:
        if dtype not in peaks:
            issues.add(line, col, f"'{col}' needs the GPU's {dtype} peak TFLOP/s (pass peak_tflops)")
            return None
        if key in _TO_TFLOPS:
            achieved = value * _TO_TFLOPS[key]
        else:
            # FLOPs = 2·b·m·n·k: one multiply-add (2 FLOPs) per output element per k (cuBLAS convention)
            achieved = 2.0 * b * m * n * k / (value * _TO_SECONDS[key]) * 1e-12
        eff = achieved / peaks[dtype]
    if not 0 < eff <= 1.0:  # achieved / peak cannot exceed 1: a wrong unit or a wrong peak
        hint = " (a percentage? name the column efficiency_pct)" if key == "efficiency" and 1 < eff <= 100 else ""
        issues.add(line, col, f"efficiency {eff:.4g} is outside (0, 1] of the {dtype} peak{hint}")
        return None
    return eff
