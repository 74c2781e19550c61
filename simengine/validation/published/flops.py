"""The FLOP formulas each source reports its throughput with."""

from __future__ import annotations

from typing import Any


def flops_eq3(B: int, s: int, l: int, h: int, V: int) -> float:
    """Narayanan et al. 2021 Eq. 3: FLOPs per iteration with full recompute (counts the extra forward)."""
    return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h))


def flops_eq7(B: int, s: int, l: int, h: int, V: int) -> float:
    """Korthikanti et al. 2022 Eq. 7: model FLOPs per iteration (no recompute)."""
    return 72.0 * B * l * s * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * l))


def flops_eq8(B: int, s: int, l: int, h: int, V: int) -> float:
    """Korthikanti et al. 2022 Eq. 8: hardware FLOPs with selective recompute (attention core twice)."""
    return 72.0 * B * l * s * h * h * (1.0 + s / (3.0 * h) + V / (12.0 * h * l))


def flops_megatron(B: int, s: int, l: int, h: int, heads: int, kv: int, ffn: int, V: int, gated: bool = False) -> float:
    """Megatron-LM (core r0.8) ``num_floating_point_operations`` for a dense GPT: 12·B·s·L·h²·((1 + kv/heads
    + s/h) + ffn/h·(2 if gated else 1) + V/(2·L·h)); equals Eq. 7 for MHA with ffn = 4h."""
    return 12.0 * B * s * l * h * h * ((1.0 + kv / heads + s / h) + ffn / h * (2 if gated else 1) + V / (2.0 * l * h))


def torchtitan_flops_per_token(model: dict[str, Any], seq_len: int) -> float:
    """torchtitan ``get_num_flop_per_token``: 6·N (parameters without the token embedding) + 12·L·H·Q·T."""
    h, L = int(model["hidden_size"]), int(model["num_layers"])
    heads = int(model["num_attention_heads"])
    kv = int(model.get("num_kv_heads") or heads)
    hd = h // heads
    f, V = int(model["ffn_hidden_size"]), int(model["vocab_size"])
    per_layer = h * heads * hd + 2 * h * kv * hd + heads * hd * h + 3 * h * f + 2 * h
    n = L * per_layer + h + h * V  # + final norm + output projection
    return 6.0 * n + 12.0 * L * heads * hd * seq_len


def flops_megatron_bridge(model: dict[str, Any], seq: int, tp: int, glu_silu: bool = True) -> float:
    """Megatron-Bridge ``num_floating_point_operations`` (src/megatron/bridge/training/utils/flop_utils.py
    transformer_flops, r0.4.0) per sequence: 12·s·L'·h·(dense ffn·g·L_dense/L' + routed k·ffn_moe·g·L_moe/L'
    + shared ffn·g·L_moe/L') + self-attention (GQA: 12·L'·h²·(1 + groups/heads + s/(2h))·q/h; MLA: its
    3·2·L'·(q, kv low-rank, rope, o projections + s·heads·(d_qk + d_v)/2) term) + MTP norms/projection
    6·mtp·(3h + 2h²) + logits 6·h·V_pad·(mtp + 1); g = 3/2 for SwiGLU, L' = L + mtp (the MTP block counted
    as one more MoE/dense layer like the last), V_pad = vocab padded to 128·tp (calculate_padded_vocab_size).
    Causal attention counts half the s² work. ``glu_silu=False``: the GLU's activation is not
    F.silu (GPT-OSS's quick_gelu), and Bridge then counts g = 1."""
    from ...config.model import ModelSpec

    m = ModelSpec(**{k: v for k, v in model.items() if k in ModelSpec.model_fields})
    h, heads, L, mtp = m.hidden_size, m.num_attention_heads, m.num_layers, m.mtp_layers
    n_moe = sum(1 for i in range(L) if m.is_moe_layer(i))
    last_moe = m.is_moe_layer(L - 1)
    n_moe += mtp if last_moe else 0
    n_layers = L + mtp
    n_dense = n_layers - n_moe
    g = 1.5 if m.activation == "swiglu" and glu_silu else 1.0
    ffn_moe = m.moe_ffn_hidden_size or m.ffn_hidden_size
    # dense layers' ffn, routed experts' k·ffn_moe and the shared experts' ffn, each times its layer count
    mlp = 12.0 * h * g * (m.ffn_hidden_size * n_dense + (ffn_moe * m.top_k + m.shared_ffn) * n_moe)
    if m.attention == "mla":
        qk, rope, dv = m.qk_nope_head_dim or 0, m.qk_rope_head_dim or 0, m.v_head_dim or 0
        q = (m.q_lora_rank * (h + heads * (qk + rope) + 1)) if m.q_lora_rank else h * heads * (qk + rope)
        kv = (m.kv_lora_rank or 0) * (h + heads * (qk + dv) + 1) + h * rope
        attn = 6.0 * n_layers * (q + kv + heads * dv * h + seq * heads * (qk + rope) / 2 + seq * heads * dv / 2)
    else:
        kv_heads = m.num_kv_heads or heads
        q_ratio = heads * m.d_head / h
        attn = 12.0 * n_layers * h * h * (1.0 + kv_heads / heads + seq / h / 2) * q_ratio
    div = 128 * tp
    v_pad = -(-m.vocab_size // div) * div
    return seq * (mlp + attn + 6.0 * mtp * (3 * h + 2 * h * h) + 6.0 * h * v_pad * (mtp + 1))


def flops_megatron_bridge_hybrid(model: dict[str, Any], seq: int, tp: int) -> float:
    """Megatron-Bridge ``num_floating_point_operations`` for a hybrid Mamba stack, per sequence
    (src/megatron/bridge/training/utils/flop_utils.py ``hybrid_flops``, r0.4.0): 3 × the forward of
    its attention layers 4·s·h·p·(h + h·g/heads + s/2) (p = heads·kv_channels/h, g the query groups),
    MLP layers 4·(ffn/h)·s·h², Mamba layers 2·s·h·(2·d_in + 2·G·N + H) + 7·s·d_in·N + 2·s·d_in·h
    (d_in = 2h), MoE layers 4·s·(x·ffn_moe·k + h·ffn_shared) with x the latent size (+ 4·s·h·x for
    the latent projections) or h, and the logits 2·s·h·V_pad·(1 + mtp); each MTP depth counts its
    block's layers (Megatron-Core ``parse_hybrid_pattern``: mtp_pattern × mtp_num_depths — Nemotron
    3 Super's "*E", our ``ModelSpec.mtp_moe``). Squared-ReLU MLPs (no GLU): scale 1. Reproduces the
    TFLOP per token of every Nemotron 3 Nano and Super row of the tables (tests/test_validation_published.py)."""
    from ...config.model import ModelSpec

    m = ModelSpec(**{k: v for k, v in model.items() if k in ModelSpec.model_fields})
    h, pat, mtp = m.hidden_size, m.hybrid_pattern or "", m.mtp_layers
    n_attn, n_mamba, n_mlp, n_moe = pat.count("*") + mtp, pat.count("M"), pat.count("-"), pat.count("E")
    n_moe, n_mlp = (n_moe + mtp, n_mlp) if m.mtp_moe else (n_moe, n_mlp + mtp)
    g = 1.5 if m.activation == "swiglu" else 1.0
    heads = m.num_attention_heads
    attn = 4.0 * seq * h * (m.d_head * heads / h) * (h + h * m.kv_heads / heads + seq / 2)
    mlp = 4.0 * (m.ffn_hidden_size / h) * g * seq * h * h
    d_in = 2 * h
    mamba = (2.0 * seq * h * (2 * d_in + 2 * m.mamba_num_groups * m.mamba_state_dim + (m.mamba_num_heads or 0))
             + 7.0 * seq * d_in * m.mamba_state_dim + 2.0 * seq * d_in * h)
    x = m.moe_dim
    moe = 0.0
    if m.is_moe:
        moe = 4.0 * seq * x * m.expert_ffn * m.top_k * g + 4.0 * seq * h * m.shared_ffn * g
        if m.moe_latent_size is not None:
            moe += 4.0 * seq * h * x
    div = 128 * tp
    v_pad = -(-m.vocab_size // div) * div
    fwd = n_attn * attn + n_mlp * mlp + n_mamba * mamba + n_moe * moe + 2.0 * seq * h * v_pad * (1 + mtp)
    return 3.0 * fwd
