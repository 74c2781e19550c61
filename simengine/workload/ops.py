"""The operations of one micro-batch on one rank.

Every op is a small immutable record; ``cost/`` turns it into seconds. Shapes are per rank (after
TP/CP/EP splits). GEMM shape conventions follow cuBLAS/TransformerEngine as SimuMax keys its
measured tables (peer_model_notes.md §1), so a measured table hits exactly:

- forward  ``TN``: m = tokens, k = in,  n = out
- dgrad    ``NN``: m = tokens, k = out, n = in
- wgrad    ``NT``: m = out,    k = tokens, n = in   (accumulates into fp32 main_grad)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

CollectiveKind = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]
AttentionImpl = Literal["flash", "unfused"]
GroupName = Literal["tp", "cp", "ep", "etp", "dp", "edp", "pp"]
BF16 = 2
# NVFP4 (TransformerEngine NVFP4BlockScaling): E2M1 values packed two per byte and one E4M3 scale per
# 16 values (transformer_engine/pytorch/tensor/nvfp4_tensor.py ``inner_tensor_specs``: data [A, B/2],
# scales [A, B/16]), per copy; the per-tensor fp32 scale is negligible
NVFP4_BYTES = 0.5 + 1.0 / 16.0


def operand_bytes(dtype: str) -> float:
    """Bytes per element of a GEMM operand of the training precision ``dtype`` (StrategySpec.dtype)."""
    return {"fp8": 1.0, "nvfp4": NVFP4_BYTES}.get(dtype, float(BF16))


@dataclass(frozen=True, slots=True)
class Gemm:
    name: str
    m: int
    n: int
    k: int
    layout: str = "TN"
    b: int = 1
    count: int = 1  # identical GEMMs issued back to back (e.g. q and kv projections)

    @property
    def flops(self) -> float:
        return 2.0 * self.b * self.m * self.n * self.k * self.count


@dataclass(frozen=True, slots=True)
class GroupedGemm:
    """``groups`` experts, each an (m × k)·(k × n) GEMM with m tokens (MoE grouped GEMM)."""

    name: str
    groups: int
    m: int
    n: int
    k: int
    layout: str = "TN"

    @property
    def flops(self) -> float:
        return 2.0 * self.groups * self.m * self.n * self.k


@dataclass(frozen=True, slots=True)
class Attention:
    """Core attention (softmax(QKᵀ)V) of one micro-batch on one rank.

    FLOPs: QKᵀ and PV are 2·b·h·s_q·s_kv·d each (d_qk and d_v); causal masking computes only the
    lower triangle, a fraction (s+1)/(2s) of the pairs (FlashAttention-2, Dao 2023, §3.1 skips
    the masked blocks). Backward is 2.5× forward: five matmuls (recomputed QKᵀ, dV, dP, dQ, dK)
    against two (Dao 2023, §3.2).
    """

    name: str
    b: int
    heads: int
    kv_heads: int
    s_q: int
    s_kv: int
    d_qk: int
    d_v: int
    causal: bool
    phase: Literal["fwd", "bwd"]
    impl: AttentionImpl = "flash"
    kernel: str = "cudnn"  # attention kernel family (cost/attention_kernels.py)
    window: int = 0  # sliding window (keys per query, the query included); 0 = full causal

    @property
    def causal_fraction(self) -> float:
        # unfused softmax attention computes the full s² scores and masks them afterwards
        if not self.causal or self.impl == "unfused":
            return 1.0
        s = max(self.s_kv, 1)
        causal = (s + 1) / (2.0 * s)
        if 0 < self.window < s:
            return min(causal, window_tile_pairs(s, self.window) / float(s * s))
        return causal

    @property
    def flops(self) -> float:
        fwd = 2.0 * self.b * self.heads * self.s_q * self.s_kv * (self.d_qk + self.d_v) * self.causal_fraction
        if self.phase == "fwd":
            return fwd
        # flash: 5 matmuls incl. the recomputed QKᵀ (2.5×); unfused keeps P: dQ, dK, dP, dV (2×)
        return (2.0 if self.impl == "unfused" else 2.5) * fwd

    @property
    def bytes(self) -> float:
        # Flash attention streams q, k, v and o once (plus lse) per pass; bwd also dq, dk, dv, do.
        q = self.b * self.s_q * self.heads * self.d_qk * BF16
        kv = self.b * self.s_kv * self.kv_heads * (self.d_qk + self.d_v) * BF16
        o = self.b * self.s_q * self.heads * self.d_v * BF16
        base = q + kv + o
        if self.impl == "unfused":
            # per score element: QKᵀ writes 2 B, the fused scale-mask-softmax reads 2 and writes 2,
            # PV reads 2 — 8 B (Megatron FusedScaleMaskSoftmax). Attention dropout is taken as fused
            # into that pass: Korthikanti et al. 2022 Table 4 measures the whole recomputed core
            # attention (QKᵀ, softmax, dropout, PV) of GPT-22B at 1.3 ms, which 13 B would exceed.
            base += 8 * self.b * self.heads * self.s_q * self.s_kv
        return base if self.phase == "fwd" else 2.0 * base + o


def window_tile_pairs(s: int, w: int, tile: int = 128) -> float:
    """(query, key) pairs flash attention computes for a causal sliding window of ``w`` keys:
    whole ``tile``×``tile`` blocks, skipping those outside the band (flash-attn ≥ 2.3
    ``window_size=(w−1, 0)``: ``n_block_min`` in flash_fwd_kernel.h). Query tile i touches key
    tiles ⌊max(0, i·B − w + 1)/B⌋ … i, i.e. i + 1 tiles while i·B < w − 1, then 1 + ⌈(w−1)/B⌉."""
    n_tiles = -(-s // tile)
    reach = -(-(w - 1) // tile)
    early = min(n_tiles, reach)
    blocks = early * (early + 1) // 2 + (n_tiles - early) * (1 + reach)
    return float(blocks) * tile * tile


@dataclass(frozen=True, slots=True)
class Memory:
    """Memory-bound kernels moving ``bytes`` through HBM (norms, activations, residuals, casts);
    ``kernels`` counts the launches when one logical step is several small kernels."""

    name: str
    bytes: float
    flops: float = 0.0
    kernels: int = 1


@dataclass(frozen=True, slots=True)
class Collective:
    """A collective on ``group``. ``bytes`` is the full (gathered / unreduced) buffer size per rank,
    the ``size`` of nccl-tests; the ring factor is applied in cost/comm.py."""

    name: str
    kind: CollectiveKind
    bytes: float
    group: GroupName
    size: int
    overlap_with: str = ""  # name of the GEMM this comm runs beside (TE/Megatron async backward)
    # whether ``tp_comm_overlap`` can decompose it with one GEMM: a reduce-scatter of a *sum* of
    # several GEMMs' outputs cannot be split into per-chunk GEMM + send steps (torch's
    # micro-pipeline TP fuses a reduce-scatter only with its single producer matmul:
    # torch/_inductor/fx_passes/micro_pipeline_tp.py ``fuse_matmul_reduce_scatter`` →
    # ``_find_producer_matmul``, which gives up on anything but mm / reshape-mm-reshape)
    decomposable: bool = True
    # how ``tp_comm_overlap`` decomposes it (cost/phase.py): "userbuffers" (TransformerEngine: the
    # layer's own GEMM split with its collective) or "symm_mem" (PyTorch async TP: Inductor's
    # micro-pipeline pass replaces it with a symmetric-memory fused op,
    # torch/distributed/_symmetric_memory/__init__.py ``fused_all_gather_matmul`` /
    # ``fused_matmul_reduce_scatter``; set on the torch-compile stack's compiled blocks,
    # workload/builder.py ``_torch_tp``)
    overlap_impl: Literal["userbuffers", "symm_mem"] = "userbuffers"
    # an ``aten.cat`` copy of the whole buffer on the compute stream beside it: PyTorch's functional
    # collectives gather and scatter along dim 0 only, so a DTensor all-gather along the sequence
    # dim (torchtitan's ``Shard(1)``) is followed by ``torch.cat(torch.chunk(res, group_size, dim=0),
    # dim=gather_dim)`` and a reduce-scatter preceded by ``torch.cat(torch.chunk(self, group_size,
    # dim=scatter_dim))`` (torch/distributed/_functional_collectives.py ``all_gather_tensor``,
    # ``reduce_scatter_tensor``): "incurs an extra `aten.cat` after each collective"
    # (pytorch/torchtitan#437). Read + write of ``bytes``; none where async TP fuses it (the fused op
    # takes the split/cat pattern in: micro_pipeline_tp.py ``find_all_gather_patterns``)
    cat_copy: bool = False
    # async TP's fused all-gather hands the gathered tensor back sequence-major (gather dim first),
    # which a reader viewing it as [batch·seq, h] rows must copy when the local batch is > 1
    # (cost/phase.py ``_symm_mem``)
    seq_major: bool = False


Op = Gemm | GroupedGemm | Attention | Memory | Collective

# GEMM names (suffix) that stay in bf16 in fp8 recipes: Megatron's LM head (a plain
# ColumnParallelLinear outside TE's fp8_autocast), LoRA adapters (workload/lora.py), the SSD
# scan's Triton GEMMs (workload/mamba.py) and the MoE router (Megatron-Core
# transformer/moe/router.py ``TopKRouter.gating`` → moe_utils.py ``RouterGatingLinearFunction``:
# torch.mm in bf16 or fp32, not a TE module; torchtitan's float8 configs filter "router.gate")
BF16_ONLY_GEMMS = (":lm_head", ":lora_a", ":lora_b", ":ssd", ":router")
