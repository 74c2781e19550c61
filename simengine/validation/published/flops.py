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
