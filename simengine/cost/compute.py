"""Compute-op time: roofline × efficiency plus a per-kernel overhead.

t = max(FLOPs / (peak · eff), bytes / (HBM · eff_hbm)) + kernel_overhead   (Williams et al. 2009,
"Roofline"; the fixed overhead models launch and tail effects that dominate small kernels, e.g.
~5 µs for a 256³ GEMM in OpenXLA's measured H100 table, shared/validation/gemm_sweeps).

GEMM efficiency: a measured table (``Efficiency.gemm_table``) interpolated when present, else the
default curve eff_max · Π_d d/(d + d_half) over d ∈ {m, n, k}, which falls off for thin shapes.

Isolated kernel → in-step (``GPUSpec.sustained_clock_ratio``): under its board power limit a GPU
lowers the SM clock until the power drawn over the controller's window fits (NVML
``nvmlClocksEventReasonSwPowerCap``); the memory clock stays. A training step holds that limit for
seconds; a short isolated benchmark does not reach it. The measured B200 table shows it: the same
flash-attention forward kernels timed at s = 131072 (20 spans of ~30 ms) reach 0.83–0.85 of their
efficiency at s = 32768 (~1.6 ms spans, a ~40 ms burst; SimuMax test_fa_efficiency.py), although causal
flash attention does not get less efficient with length (Dao 2023, FlashAttention-2, Fig. 5–6).
The backward pairs (0.87–1.01, benchmarks/b200_transfer.py) are no second estimate of it: at
s = 32768 their calls already last 5–75 ms and the ratio rises with that length (0.865 at 5 ms, 0.948
at 11 ms, 1.01 at 75 ms), as a throttle reached within the shorter run would make it, while the
forward ratio stays at 0.84 from 1.6 ms to 24 ms calls. So the pairs do not separate a clock from a
length effect, and one ratio for both phases is an assumption; a per-phase ratio read off the pairs
would make the B200 CP rows faster still (they are under-predicted already).
Attention and grouped-GEMM efficiencies — per shape or the scalars taken from the same isolated
measurements — are multiplied by the ratio. Dense GEMM efficiencies are used as measured: they
transfer to the B200 dense runs without a derate (the table's long GEMMs, ≥ 4 ms per call, show the
throttled level themselves: max efficiency 0.50 against 0.65 for ≤ 0.26 ms calls; why the short ones
transfer too is open). Every efficiency is capped at 1 (achieved ≤ peak).
"""

from __future__ import annotations

import math

from ..config.system import SystemSpec
from ..workload.ops import BF16, BF16_ONLY_GEMMS, Attention, Gemm, GroupedGemm, Memory, operand_bytes
from ..calibration.table import gemm_efficiency as _table_lookup  # measured-table interpolation
from .attention_kernels import kernel_scale




# An NVFP4 GEMM against the FP8 one of the same shape, when ``Efficiency.fp4_gemm`` is unset:
# TransformerEngine's GEMM profiling tutorial (docs/examples/gemm_profiling/gemm_profiling.rst, B300,
# pre-quantized operands, a 5B model's 12 GEMM shapes) measured NVFP4 3.764 ms against MXFP8 7.161
# ms a layer, "NVFP4 vs MXFP8: 1.90x", where the B300's dense FP4/FP8 peak ratio is 2.92 (HGX B300:
# 105 and 36 PF over 8 GPUs): the FP4 kernels are held by what their tensor cores do not speed up
# (operand delivery, scales, the epilogue), which Blackwell Ultra shares with Blackwell. So an NVFP4
# GEMM runs at most 1.90× its FP8 GEMM, and at most at the FP8 level's fraction of the FP4 peak:
# level = fp8 level × min(1, 1.90 × FP8 peak / FP4 peak) — 0.65 × on B300, 0.63 × on GB300, 0.95 ×
# on B200 and GB200 (peak ratio 2; unmeasured there: an assumption).
FP4_OVER_FP8 = 1.90


def gemm_level(e, dtype: str, peaks=None) -> float:
    """The GEMM efficiency level of ``dtype`` (the default curve's maximum): gemm, fp8_gemm, or
    fp4_gemm (unset: ``FP4_OVER_FP8`` against the FP8 level, on the GPU's ``peaks``)."""
    if dtype == "fp8":
        return e.fp8_gemm
    if dtype == "nvfp4":
        if e.fp4_gemm is not None:
            return e.fp4_gemm
        ratio = FP4_OVER_FP8 * peaks.fp8 / peaks.fp4 if peaks is not None and peaks.fp8 and peaks.fp4 else 1.0
        return e.fp8_gemm * min(1.0, ratio)
    return e.gemm


class ComputeModel:
    """Prices compute ops for one system and dtype. Cheap to build; memoises GEMM efficiencies."""

    __slots__ = ("peak", "peak_bf16", "eff", "hbm", "overhead", "dtype", "_cache", "table", "elem", "clock", "gpu_name", "level")

    def __init__(self, system: SystemSpec, dtype: str = "bf16"):
        g, e = system.gpu, system.efficiency
        peak = g.peak_tflops.of(dtype)
        if peak is None:   # no peak of that precision: the GEMMs run in bf16
            dtype, peak = "bf16", g.peak_tflops.bf16
        self.dtype = dtype
        self.peak = peak * 1e12
        self.peak_bf16 = g.peak_tflops.bf16 * 1e12
        self.eff = e
        self.hbm = g.hbm_bandwidth_gbs * 1e9 * e.hbm
        self.overhead = e.kernel_overhead_us * 1e-6
        self.table = e.gemm_table
        self.elem = operand_bytes(dtype)
        self.level = gemm_level(e, dtype, g.peak_tflops)
        self.clock = g.sustained_clock_ratio  # isolated (boost) → in-step clock, module docstring
        self.gpu_name = g.name
        self._cache: dict[tuple, float] = {}

    def gemm_efficiency(self, m: int, n: int, k: int, b: int = 1, layout: str | None = None) -> float:
        return self._efficiency(self.dtype, self.level, m, n, k, b, layout)

    def _efficiency(self, dtype: str, level: float, m: int, n: int, k: int, b: int, layout: str | None) -> float:
        """The table's points of ``dtype`` when it has them, else the default curve at ``level``."""
        key = (dtype, m, n, k, b, layout)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        eff: float | None = None
        if self.table:
            eff = _table_lookup(self.table, m, n, k, b=b, dtype=dtype, layout=layout)
        if eff is None:
            half = self.eff.gemm_half_dim
            eff = level * (m / (m + half)) * (n / (n + half)) * (k / (k + half))
        eff = min(eff, 1.0)
        self._cache[key] = eff
        return eff

    def gemm(self, op: Gemm) -> float:
        if self.dtype != "bf16" and op.name.endswith(BF16_ONLY_GEMMS):
            return self._bf16_gemm(op)
        eff = self.gemm_efficiency(op.m, op.n, op.k, op.b, op.layout)
        t_flop = op.flops / (self.peak * eff)
        e = self.elem
        out = 4 if op.layout == "NT" else BF16  # wgrad accumulates into fp32 main_grad
        bytes_ = op.count * op.b * (op.m * op.k * e + op.k * op.n * e + op.m * op.n * out)
        return max(t_flop, bytes_ / self.hbm) + op.count * self.overhead

    def _bf16_gemm(self, op: Gemm) -> float:
        """A GEMM that stays in bf16 in fp8 and nvfp4 recipes (Megatron-Core's output layer is a plain
        ColumnParallelLinear, outside TransformerEngine's fp8 autocast)."""
        eff = self.bf16_efficiency(op.m, op.n, op.k, op.b, op.layout)
        out = 4 if op.layout == "NT" else BF16
        bytes_ = op.count * op.b * (op.m * op.k * BF16 + op.k * op.n * BF16 + op.m * op.n * out)
        return max(op.flops / (self.peak_bf16 * eff), bytes_ / self.hbm) + op.count * self.overhead

    def bf16_efficiency(self, m: int, n: int, k: int, b: int = 1, layout: str | None = None) -> float:
        """The efficiency of a GEMM that runs in bf16 whatever the recipe (the LM head, the router,
        the batched GEMMs of unfused attention): the table's bf16 points, else the bf16 curve."""
        return self._efficiency("bf16", self.eff.gemm, m, n, k, b, layout)

    def grouped_efficiency(self, op: GroupedGemm) -> float:
        """Measured grouped-GEMM table (nearest forward shape of the same pass) when present, else
        the per-expert GEMM efficiency scaled by grouped/plain (measured B200: 0.30 vs 0.49)."""
        key = ("grouped", op.groups, op.m, op.n, op.k, op.layout)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        e = self.eff
        table = [p for p in e.grouped_gemm_table if p.layout == op.layout]
        if table and self.dtype == "bf16":   # (grouped_measured: the same condition)
            # back to the forward shape (tokens, out, in) the table is keyed by
            fwd = {"TN": (op.m, op.n, op.k), "NN": (op.m, op.k, op.n), "NT": (op.k, op.m, op.n)}[op.layout]
            want = (op.groups, *fwd)
            best = min(table, key=lambda p: sum((math.log2(a) - math.log2(max(b, 1))) ** 2
                                                for a, b in zip((p.groups, p.m, p.n, p.k), want, strict=True)))
            eff = best.efficiency
        else:
            # the shape factor of the plain-GEMM curve or table, at most 1 (a table above the scalar
            # must not lift the grouped GEMM above its own level)
            shape = min(self.gemm_efficiency(op.m, op.n, op.k, 1, op.layout) / self.level, 1.0)
            # the grouped level is one fraction of the FP8 peak and of the BF16 one; an NVFP4 grouped
            # GEMM keeps the dense GEMMs' FP4/FP8 ratio (``gemm_level``: at most 1.90× its FP8 one)
            eff = e.grouped_gemm * shape * (self.level / e.fp8_gemm if self.dtype == "nvfp4" else 1.0)
        eff = min(max(eff * self.clock, 1e-4), 1.0)
        self._cache[key] = eff
        return eff

    def grouped_measured(self, op: GroupedGemm) -> bool:
        """Whether ``grouped_efficiency`` reads the op off a measured table of grouped shapes
        (else the scalar grouped level times the plain GEMM's shape factor)."""
        return self.dtype == "bf16" and any(p.layout == op.layout for p in self.eff.grouped_gemm_table)

    def grouped_gemm(self, op: GroupedGemm) -> float:
        eff = self.grouped_efficiency(op)
        t_flop = op.flops / (self.peak * eff)
        bytes_ = op.groups * (op.m * op.k + op.k * op.n + op.m * op.n) * self.elem
        return max(t_flop, bytes_ / self.hbm) + self.overhead

    def attention_efficiency(self, op: Attention) -> float:
        """Measured table (nearest shape in log2 space) when present, else the scalar × a
        parallelism curve: flash attention launches one thread block per (batch, head, 128-query
        tile) (Dao 2023 §3.3); with few blocks per SM the GPU idles, so efficiency follows
        N/(N + N_half) with N = b·heads·⌈s_q/128⌉ (B200 microbenchmarks halve from 16 to 8 heads
        at s = 4096)."""
        key = (op.phase, op.b, op.heads, op.kv_heads, op.s_q, op.s_kv, op.d_qk, op.d_v)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        e = self.eff
        table = [p for p in e.attention_table if p.phase == op.phase]
        if table:
            want = (op.b, op.s_kv, op.heads, op.kv_heads, op.d_qk, op.d_v)
            best = min(table, key=lambda p: sum((math.log2(a) - math.log2(max(b, 1))) ** 2 for a, b in zip(
                (p.batch, p.seq_len, p.heads, p.kv_heads, p.d_qk, p.d_v), want, strict=True)))
            eff = best.efficiency
        else:
            base = e.attention_fwd if op.phase == "fwd" else e.attention_bwd
            half = e.attention_half_blocks_fwd if op.phase == "fwd" else e.attention_half_blocks_bwd
            blocks = op.b * op.heads * math.ceil(op.s_q / 128)
            eff = base * blocks / (blocks + half)
        eff = min(max(eff * self.clock, 1e-4), 1.0)
        self._cache[key] = eff
        return eff

    def attention(self, op: Attention) -> float:
        if op.impl == "unfused":
            return self._unfused_attention(op)
        # Flash attention runs in bf16 even in fp8 recipes (TransformerEngine default).
        eff = self.attention_efficiency(op) * kernel_scale(op.kernel, self.gpu_name)  # kernel family (H7)
        peak = self.peak_bf16
        t = max(op.flops / (peak * eff), op.bytes / self.hbm)
        return t + self.launches(op) * self.overhead  # bwd: dot(do,o) preprocess + main kernel

    def _unfused_attention(self, op: Attention) -> float:
        """Unfused attention (Megatron's core attention before flash attention): two batched
        cuBLAS GEMMs over b·heads (QKᵀ: s_q×s_kv×d_qk, PV: s_q×d_v×s_kv) priced with the GEMM
        efficiency of their shapes, plus the memory-bound softmax/dropout passes over the s² scores
        (``Attention.bytes``); the backward runs each GEMM twice."""
        bh = op.b * op.heads
        per = 2.0 * op.s_q * op.s_kv * bh
        peak = self.peak_bf16  # batched attention GEMMs run in bf16 in fp8 and nvfp4 recipes too
        t_qk = per * op.d_qk / (peak * self.bf16_efficiency(op.s_q, op.s_kv, op.d_qk, bh, "TN"))
        t_pv = per * op.d_v / (peak * self.bf16_efficiency(op.s_q, op.d_v, op.s_kv, bh, "TN"))
        times = 1.0 if op.phase == "fwd" else 2.0
        return times * (t_qk + t_pv) + op.bytes / self.hbm + self.launches(op) * self.overhead

    def memory(self, op: Memory) -> float:
        return op.bytes / self.hbm + op.kernels * self.overhead

    @staticmethod
    def launches(op: Gemm | GroupedGemm | Attention | Memory) -> int:
        """Kernels the op launches on the compute stream: a GEMM ``count`` cuBLAS calls; a grouped
        GEMM one cuBLAS GEMM per local expert (TransformerEngine ``GroupedLinear`` →
        ``general_grouped_gemm`` → ``multi_stream_cublas_gemm``, transformer_engine/common/gemm/
        cublaslt_gemm.cpp: a loop over the GEMMs on four compute streams; Megatron's legacy
        ``grouped_gemm`` package loops over cuBLAS the same way — ``grouped_gemm`` still charges
        the fixed per-kernel cost once, a simplification kept from before this count); fused
        attention 1 forward, 2 backward (the dot(dO, O) preprocess and the main kernel), unfused 4
        and 8 (two batched GEMMs, softmax, dropout; twice each backward); a memory-bound step its
        ``kernels``. ``attention`` and ``_unfused_attention`` charge the fixed cost per launch
        counted here. The host issues each one (``cost/launch.py``)."""
        if isinstance(op, Gemm):
            return op.count
        if isinstance(op, GroupedGemm):
            return op.groups
        if isinstance(op, Attention):
            fwd = op.phase == "fwd"
            if op.impl == "unfused":
                return 4 if fwd else 8
            return 1 if fwd else 2
        return op.kernels
