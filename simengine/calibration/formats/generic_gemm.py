"""Generic GEMM sweep CSV: ``m,n,k`` [``b``] [``dtype``] [``layout``] and one value column.

The value is one of: ``efficiency`` (``efficiency_pct``), ``flops_per_second`` / ``tflops`` /
``gflops``, or a time (``time_ns`` / ``time_us`` / ``time_ms`` / ``time_s``). Headers are
case-insensitive with common spellings (``M``, ``batch``, ``Time (µs)``, ``TFLOP/s``). Throughputs and
times need the GPU peak of the row's dtype; FLOPs = 2·b·m·n·k (one multiply-add = 2 FLOPs per output
element per k, the cuBLAS convention). A missing dtype means bf16, a missing b means 1. The OpenXLA
table (:mod:`.xla_matmul`) is this format with a ``flops_per_second`` column.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping

from ...config.system import GemmPoint
from ...errors import ConfigError
from ..csvutil import Issues, cell, find_column, norm_header, pos_float, pos_int
from ..peaks import FIELD, MAX_EFFICIENCY, MIN_EFFICIENCY, normalize_dtype

MAX_SECONDS = 60  # wall-clock bound of one read (200k rows take ~10 s on one core)
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


def read_generic_rows(
    header: list[str], rows: list[tuple[int, list[str]]], peaks: Mapping[str, float], keep: Collection[str] | None,
) -> tuple[tuple[GemmPoint, ...], dict[str, int], tuple[str, ...]]:
    """Rows of a generic sweep → (points, skipped rows per dtype, notes); ConfigError per bad cell."""
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
    m_col, n_col, k_col, vidx = cols["m"][0], cols["n"][0], cols["k"][0], cols[value_key][0]
    if m_col is None or n_col is None or k_col is None or vidx is None:  # ruled out just above
        raise ConfigError([(FIELD, f"missing column m, n, k or {value_key}")])
    issues = Issues(FIELD)
    points: list[GemmPoint] = []
    skipped: dict[str, int] = {}
    vname = header[vidx]
    deadline = time.monotonic() + MAX_SECONDS
    for i, (line, cells) in enumerate(rows):
        if i % 10_000 == 0 and time.monotonic() > deadline:
            raise ConfigError([(FIELD, f"reading stopped at line {line}: longer than {MAX_SECONDS} s; sample the sweep")])
        raw_dtype = cell(cells, cols["dtype"][0])
        dtype = normalize_dtype(raw_dtype) if raw_dtype else "bf16"
        if dtype is None:
            issues.add(line, _name(header, cols["dtype"][0], "dtype"), f"dtype {raw_dtype[:30]!r} is not bf16, fp8, nvfp4 or fp32")
            continue
        if keep is not None and dtype not in keep:
            skipped[dtype] = skipped.get(dtype, 0) + 1
            continue
        m = pos_int(cell(cells, m_col), line, header[m_col], issues)
        n = pos_int(cell(cells, n_col), line, header[n_col], issues)
        k = pos_int(cell(cells, k_col), line, header[k_col], issues)
        bcol = cols["b"][0]
        b = pos_int(cell(cells, bcol), line, _name(header, bcol, "b"), issues, default=1)
        layout = cell(cells, cols["layout"][0]).upper() or None
        if layout is not None and layout not in _LAYOUTS:
            issues.add(line, _name(header, cols["layout"][0], "layout"), f"layout {layout[:10]!r} is not TN, NN or NT")
            continue
        value = pos_float(cell(cells, vidx), line, vname, issues)
        if m is None or n is None or k is None or b is None or value is None:
            continue
        if max(m, n, k) > 2**31 or b > 2**20:
            issues.add(line, "", "m, n and k must be at most 2^31 and b at most 2^20 (GemmPoint bounds)")
            continue
        eff = _efficiency(value_key, value, dtype, m, n, k, b, peaks, cells, cols, header, line, issues)
        if eff is None:
            continue
        points.append(GemmPoint(m=m, n=n, k=k, b=b, dtype=dtype, layout=layout, efficiency=eff))
    issues.raise_if_any()
    if not points:
        raise ConfigError([(FIELD, f"no rows left after filtering dtypes (skipped: {skipped})")])
    return tuple(points), skipped, ()


def _name(header: list[str], idx: int | None, default: str) -> str:
    """The header cell of column ``idx``; ``default`` for a column the file does not have."""
    return header[idx] if idx is not None else default


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
        # FLOPs = 2·b·m·n·k: one multiply-add (2 FLOPs) per output element per k (cuBLAS convention)
        achieved = (value * _TO_TFLOPS[key] if key in _TO_TFLOPS
                    else 2.0 * b * m * n * k / (value * _TO_SECONDS[key]) * 1e-12)
        eff = achieved / peaks[dtype]
    if not MIN_EFFICIENCY <= eff <= MAX_EFFICIENCY:
        if key in ("efficiency", "efficiency_pct"):
            hint = " (a percentage? name the column efficiency_pct)" if key == "efficiency" and 1 < eff <= 100 else ""
            issues.add(line, col, f"efficiency {eff:.4g} is outside [{MIN_EFFICIENCY:g}, {MAX_EFFICIENCY:g}]{hint}")
        else:   # said in what the user wrote: achieved TFLOP/s against the system's peak
            issues.add(line, col, f"{achieved:.4g} TFLOP/s achieved is {eff:.3g}× the system's {dtype} peak of "
                                  f"{peaks[dtype]:g} TFLOP/s (a GEMM reaches at most the peak: another GPU's sweep, "
                                  "or a time in other units?)")
        return None
    return eff
