"""Sliding-window attention with a per-layer pattern (GPT-OSS, Gemma 3, Mistral).

``ModelSpec.attention_window`` w and ``full_attention_interval`` n: layer i attends over the last
w keys unless (i+1) % n == 0 (HF ``layer_types``: GPT-OSS alternates "sliding_attention" and
"full_attention", sliding_window 128). When every layer is windowed the model's one attention
block carries the window (``Dims.attention_window``). With a mixed pattern the windowed layers
need their own block: ``window_attention_block`` builds it and ``windowed_layers`` counts a
chunk's windowed layers (the workload builder and the stage pricer add them next to "attn").

Activation memory does not change with the window: flash attention saves q, k, v, the output and
the log-sum-exp per query whatever the band (Dao et al. 2022), and the unfused path materialises
the masked s² scores in both cases (Megatron ``FusedScaleMaskSoftmax``).
"""

from __future__ import annotations

from dataclasses import replace

from ..config.model import ModelSpec
from .dims import Dims
from .layers import attention_block
from .phases import Phases


def windowed_layers(model: ModelSpec, layers: tuple[int, ...] | range) -> int:
    """How many of ``layers`` (0-based indices) use the sliding window."""
    return sum(1 for i in layers if model.attention_window_of(i) is not None)


def window_attention_block(d: Dims, model: ModelSpec, cp_comm: str) -> Phases:
    """The attention sub-block of a windowed layer (same ops, core attention over the band)."""
    return attention_block(replace(d, attention_window=int(model.attention_window or 0)), model, cp_comm)


def causal_pairs(s: int, w: int | None) -> float:
    """(query, key) pairs of causal attention over s tokens with a window of w keys (None = full):
    Σ_{i=1..s} min(i, w) = w·s − w(w−1)/2 once s ≥ w (the model-FLOPs count, no tiles)."""
    if w is None or w >= s:
        return s * (s + 1) / 2.0
    return w * s - w * (w - 1) / 2.0


def attention_flops_ratio(model: ModelSpec, seq_len: int) -> float:
    """Mean over the layers of windowed / full causal attention pairs: the factor on the attention
    term of the model-FLOPs count (1.0 without a window)."""
    full = causal_pairs(seq_len, None)
    total = sum(causal_pairs(seq_len, model.attention_window_of(i)) for i in range(model.num_layers))
    return total / (model.num_layers * full)
