"""GPU peak TFLOP/s per dtype, and dtype spellings, shared by every reader that turns a time or a
throughput into an efficiency (achieved / peak)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from ..config.system import PeakTflops
from ..errors import ConfigError
from .csvutil import norm_header

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
    # NVFP4 by its own name only: "fp4" / "e2m1" name MXFP4's elements too, whose scales differ
    "nvfp4": "nvfp4", "nv_fp4": "nvfp4",
    "fp32": "fp32", "f32": "fp32", "float32": "fp32", "float": "fp32", "tf32": "fp32",
    "f32xf32_f32": "fp32", "torch_float32": "fp32",
}


@lru_cache(maxsize=256)
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
        if peak.fp4 is not None:
            out["nvfp4"] = peak.fp4
        return out
    if isinstance(peak, (int, float)) and not isinstance(peak, bool):
        if not peak > 0:
            raise ConfigError([(FIELD, f"peak_tflops must be positive, got {peak}")])
        return {"bf16": float(peak), "fp8": float(peak), "nvfp4": float(peak), "fp32": float(peak)}
    if isinstance(peak, Mapping):
        out = {}
        for k, v in peak.items():
            d = normalize_dtype(str(k))
            if d is None or not isinstance(v, (int, float)) or not v > 0:
                raise ConfigError([(FIELD, f"peak_tflops entry {k!r}: {v!r} is not a positive TFLOP/s for bf16|fp8|nvfp4|fp32")])
            out[d] = float(v)
        return out
    raise ConfigError([(FIELD, f"peak_tflops must be a number, a mapping or PeakTflops, got {type(peak).__name__}")])


# A measured value column, normalised header → (kind, factor): an efficiency, a throughput in
# TFLOP/s, or a time in seconds. Shared by the attention and grouped-GEMM readers.
VALUE_COLUMNS: dict[str, tuple[str, float]] = {
    "efficiency": ("eff", 1.0), "eff": ("eff", 1.0), "efficiency_pct": ("eff", 0.01),
    "tflops": ("tflops", 1.0), "tflop_s": ("tflops", 1.0), "tflops_s": ("tflops", 1.0),
    "time_us": ("time", 1e-6), "time_ms": ("time", 1e-3), "time_ns": ("time", 1e-9), "time_s": ("time", 1.0),
}
MIN_EFFICIENCY, MAX_EFFICIENCY = 1e-4, 1.0  # GEMM/attention/grouped *Point.efficiency bounds (config/system.py): achieved/peak ≤ 1


def efficiency_from(kind: str, value: float, flops: float, peak_tflops: float | None) -> float | None:
    """achieved / peak from an efficiency, a TFLOP/s or a time (achieved = flops / time);
    ``None`` when a throughput or time has no peak to compare with."""
    if kind == "eff":
        return value
    if not peak_tflops:
        return None
    achieved = value if kind == "tflops" else flops / value * 1e-12
    return achieved / peak_tflops
