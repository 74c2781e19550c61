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
