"""A Mamba-2 layer of a hybrid stack (Dao & Gu 2024, "Transformers are SSMs", arXiv:2405.21060;
Megatron-Core ``ssm/mamba_layer.py`` / ``ssm/mamba_mixer.py`` ``MambaMixer``), per rank and micro-batch.

Forward, as MambaMixer runs it: the pre-norm fused into in_proj (TE LayerNormColumnParallelLinear)
h → [z, x, B, C, dt] (2·d_inner + 2·G·N + H, split over TP by heads and groups); the causal
depthwise conv1d + SiLU over x, B, C (``causal_conv1d_fn``, one kernel); the SSD chunked scan
(``mamba_chunk_scan_combined``, §6 "the SSD algorithm": with chunk length Q, per chunk
C·Bᵀ (Q × Q × N, per group), the masked (C·Bᵀ∘L)·X (Q × Q × P, per head), the chunk states Bᵀ·X
(N × Q × P) and their contribution C·state (Q × N × P) — four batched GEMMs); the gated RMSNorm
of y by SiLU(z) (one fused kernel); out_proj d_inner → h (row-parallel); the residual add.
Backward runs each SSD product about twice (the gradients of both operands) and the conv and
norm kernels once more. The SSD GEMMs run in bf16 Triton kernels, outside TE's FP8 autocast.
Context parallelism (Mamba's own CP) is not modelled (config/scenario.py refuses cp > 1)."""

from __future__ import annotations

import math

from ..config.model import ModelSpec
from .dims import Dims
from .layers import _norm, _residual
from .ops import BF16, Gemm, Memory
from .phases import Phases, column_linear, row_linear


def mamba_dims(m: ModelSpec, tp: int) -> tuple[int, int, int, int]:
    """(d_inner, heads, groups, in_proj width) per TP rank."""
    return m.mamba_inner // tp, (m.mamba_num_heads or 0) // tp, m.mamba_num_groups // tp, m.mamba_in_proj // tp


def mamba_block(d: Dims, m: ModelSpec) -> Phases:
    ph = Phases()
    S, tp, sp = d.tokens, d.tp, d.sp
    di, H, G, w_in = mamba_dims(m, tp)
    N, P, Q = m.mamba_state_dim, m.mamba_head_dim, m.mamba_chunk_size
    conv = m.mamba_conv_dim // tp
    _norm(ph, "ln:mamba", d.sp_tokens, d.h, d.stack)
    column_linear(ph, "in_proj:mamba", S, d.h, w_in, tp, sp)
    ph.fwd.append(Memory("conv1d:mamba", 2 * BF16 * S * conv))
    ph.bwd.append(Memory("conv1d-bwd:mamba", 4 * BF16 * S * conv))
    chunks = d.b * math.ceil(d.s / Q)
    q = min(Q, d.s)
    ssd = (("cb", q, q, N, chunks * G), ("diag", q, P, q, chunks * H), ("states", N, P, q, chunks * H),
           ("off", q, P, N, chunks * H))
    for name, mm, nn, kk, batch in ssd:
        ph.fwd.append(Gemm(f"ssd-{name}:ssd", m=mm, n=nn, k=kk, b=batch))
        ph.bwd.append(Gemm(f"ssd-bwd-{name}:ssd", m=mm, n=nn, k=kk, b=batch, count=2))
    ph.fwd.append(Memory("norm_gated:mamba", 3 * BF16 * S * di))
    ph.bwd.append(Memory("norm_gated-bwd:mamba", 5 * BF16 * S * di))
    row_linear(ph, "out_proj:mamba", S, di, d.h, tp, sp)
    _residual(ph, "mamba", d)
    return ph


def ssd_flops_per_token(m: ModelSpec) -> float:
    """Forward FLOPs of the SSD scan per token of one Mamba layer (the four products above, full
    heads and groups): 2·(Q·N·G + Q·P·H + 2·N·P·H) for a whole chunk length Q."""
    H, N, P, Q, G = m.mamba_num_heads or 0, m.mamba_state_dim, m.mamba_head_dim, m.mamba_chunk_size, m.mamba_num_groups
    return 2.0 * (Q * N * G + Q * P * H + 2 * N * P * H)
