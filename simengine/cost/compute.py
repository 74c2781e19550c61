"""Compute-op time: roofline × efficiency plus a per-kernel overhead.

t = max(FLOPs / (peak · eff), bytes / (HBM · eff_hbm)) + kernel_overhead   (Williams et al. 2009,
"Roofline"; the fixed overhead models launch and tail effects that dominate small kernels, e.g.
~5 µs for a 256³ GEMM in OpenXLA's measured H100 table, shared/validation/gemm_sweeps).

GEMM efficiency: a measured table (``Efficiency.gemm_table``) interpolated when present, else the
default curve eff_max · Π_d d/(d + d_half) over d ∈ {m, n, k}, which falls off for thin shapes.
"""

from __future__ import annotations

from ..config.system import SystemSpec
from ..workload.ops import BF16, Attention, Gemm, GroupedGemm, Memory

try:  # the calibration package provides measured-table interpolation
    from ..calibration.table import gemm_efficiency as _table_lookup
except ImportError:  # pragma: no cover - calibration is part of the package
    _table_lookup = None


class ComputeModel:
    """Prices compute ops for one system and dtype. Cheap to build; memoises GEMM efficiencies."""

    __slots__ = ("peak", "eff", "hbm", "overhead", "dtype", "_cache", "table", "elem")

    def __init__(self, system: SystemSpec, dtype: str = "bf16"):
        g, e = system.gpu, system.efficiency
        self.dtype = dtype
        fp8 = dtype == "fp8" and g.peak_tflops.fp8 is not None
        self.peak = (g.peak_tflops.fp8 if fp8 else g.peak_tflops.bf16) * 1e12
        self.eff = e
        self.hbm = g.hbm_bandwidth_gbs * 1e9 * e.hbm
        self.overhead = e.kernel_overhead_us * 1e-6
        self.table = e.gemm_table
        self.elem = 1 if fp8 else BF16
        self._cache: dict[tuple, float] = {}

    def gemm_efficiency(self, m: int, n: int, k: int, b: int = 1, layout: str | None = None) -> float:
        key = (m, n, k, b, layout)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        eff = None
        if self.table and _table_lookup is not None:
            eff = _table_lookup(self.table, m, n, k, b=b, dtype=self.dtype, layout=layout)
        if eff is None:
            e = self.eff
            base = e.fp8_gemm if self.dtype == "fp8" else e.gemm
            half = e.gemm_half_dim
            eff = base * (m / (m + half)) * (n / (n + half)) * (k / (k + half))
        self._cache[key] = eff
        return eff

    def gemm(self, op: Gemm) -> float:
        eff = self.gemm_efficiency(op.m, op.n, op.k, op.b, op.layout)
        t_flop = op.flops / (self.peak * eff)
        e = self.elem
        out = 4 if op.layout == "NT" else BF16  # wgrad accumulates into fp32 main_grad
        bytes_ = op.count * op.b * (op.m * op.k * e + op.k * op.n * e + op.m * op.n * out)
        return max(t_flop, bytes_ / self.hbm) + op.count * self.overhead

    def grouped_gemm(self, op: GroupedGemm) -> float:
        # One grouped kernel; efficiency of the per-expert shape scaled by the grouped-GEMM
        # efficiency relative to a plain GEMM (measured B200: 0.30 vs 0.49, b200_op_efficiency.csv).
        e = self.eff
        shape = self.gemm_efficiency(op.m, op.n, op.k, 1, op.layout) / (e.fp8_gemm if self.dtype == "fp8" else e.gemm)
        eff = max(e.grouped_gemm * shape, 1e-4)
        t_flop = op.flops / (self.peak * eff)
        bytes_ = op.groups * (op.m * op.k + op.k * op.n + op.m * op.n) * self.elem
        return max(t_flop, bytes_ / self.hbm) + self.overhead

    def attention(self, op: Attention) -> float:
        # Flash attention runs in bf16 even in fp8 recipes (TransformerEngine default).
        e = self.eff
        eff = e.attention_fwd if op.phase == "fwd" else e.attention_bwd
        peak = self.peak if self.dtype != "fp8" else self.peak / 2
        t = max(op.flops / (peak * eff), op.bytes / self.hbm)
        n_kernels = 1 if op.phase == "fwd" else 2  # bwd: dot(do,o) preprocess + main kernel
        return t + n_kernels * self.overhead

    def memory(self, op: Memory) -> float:
        return op.bytes / self.hbm + self.overhead
