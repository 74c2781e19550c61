"""Parameter counts: per block kind, totals, active-per-token, and per-rank shards.

Counts use the unpadded vocabulary (as published figures do); memory uses the padded one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.model import ModelSpec


@dataclass(frozen=True, slots=True)
class BlockParams:
    """Parameters of one block, split by how they are sharded."""

    tp_sharded: int      # split over tp (column/row-parallel weights)
    replicated: int      # replicated over tp (norms, MLA down-projections, router)
    experts: int = 0     # routed-expert weights, split over ep·etp
    active_experts: int = 0  # routed-expert weights touched per token (top_k of them)

    @property
    def total(self) -> int:
        return self.tp_sharded + self.replicated + self.experts

    @property
    def active(self) -> int:
        return self.tp_sharded + self.replicated + self.active_experts


def _norm_params(m: ModelSpec, width: int) -> int:
    return width * (2 if m.norm == "layernorm" else 1)


def attention_params(m: ModelSpec) -> BlockParams:
    h, a = m.hidden_size, m.num_attention_heads
    norm = _norm_params(m, h)
    if m.attention == "mla":
        qr, kvr, nope, rope, dv = m.mla
        rep = norm + h * (kvr + rope) + kvr  # kv down-projection + kv latent norm
        shard = kvr * a * (nope + dv) + a * dv * h
        if qr:
            rep += h * qr + qr
            shard += qr * a * (nope + rope)
        else:
            shard += h * a * (nope + rope)
        return BlockParams(shard, rep)
    d, kv = m.d_head, m.kv_heads
    shard = h * a * d + 2 * h * kv * d + a * d * h
    if m.attention_sinks:
        shard += a  # one learned sink logit per head (GPT-OSS GptOssAttention.sinks)
    if m.qk_norm:
        # q_norm and k_norm: one RMSNorm weight of head_dim each, shared by every head and replicated
        # over TP (HF Qwen3Attention q_norm/k_norm = Qwen3RMSNorm(head_dim); Megatron-Core
        # SelfAttention q_layernorm/k_layernorm built with hidden_size=head_dim)
        norm += 2 * d
    if m.linear_bias:
        shard += (a + 2 * kv) * d
        norm += h  # row-parallel output bias is replicated
    return BlockParams(shard, norm)


def mlp_params(m: ModelSpec, width: int, dim: int | None = None) -> int:
    """An MLP of intermediate ``width`` on inputs of ``dim`` (default h; a latent MoE's experts: the latent size)."""
    gated = m.activation == "swiglu"
    dim = m.hidden_size if dim is None else dim
    p = (3 if gated else 2) * dim * width
    if m.linear_bias:
        p += (2 if gated else 1) * width + dim  # FC1 (gate+up) and FC2 biases
    return p


def dense_mlp_params(m: ModelSpec) -> BlockParams:
    h = m.hidden_size
    rep = _norm_params(m, h) + (h if m.linear_bias else 0)
    return BlockParams(mlp_params(m, m.ffn_hidden_size) - (h if m.linear_bias else 0), rep)


def moe_params(m: ModelSpec) -> BlockParams:
    h, E = m.hidden_size, m.num_experts
    # DeepSeek-V3 e_score_correction_bias (sigmoid router) / a Linear router bias (GPT-OSS)
    router = h * E + (E if m.expert_bias or m.linear_bias else 0)
    expert = mlp_params(m, m.expert_ffn, m.moe_dim)
    shared = mlp_params(m, m.shared_ffn) if m.shared_ffn else 0
    rep = _norm_params(m, h) + router
    if m.moe_latent_size is not None:
        # Megatron-Core MoELayer fc1_latent_proj (h → latent) and fc2_latent_proj (latent → h):
        # TELinear with parallel_mode="duplicated", i.e. replicated over TP (moe/moe_layer.py)
        lat = m.moe_latent_size
        rep += 2 * h * lat + ((lat + h) if m.linear_bias else 0)
    return BlockParams(shared, rep, E * expert, m.top_k * expert)


def mtp_block_params(m: ModelSpec) -> BlockParams:
    """The transformer block of one MTP module: attention + MoE or MLP (``ModelSpec.mtp_moe``: as the
    last main layer, DeepSeek-V3 report §2.2; in a hybrid stack Megatron-Bridge Nemotron 3 Super's
    ``mtp_hybrid_override_pattern`` "*E"), each with its pre-norm."""
    return _with_attention(m, moe_params(m) if m.mtp_moe else dense_mlp_params(m))


def mtp_module_params(m: ModelSpec) -> BlockParams:
    """One whole MTP module: its block, three norms (enorm, hnorm and the final one; replicated) and
    the 2h×h projection eh_proj (column-parallel) — Megatron-Core multi_token_prediction.py
    ``MultiTokenPredictionLayer``."""
    b, h = mtp_block_params(m), m.hidden_size
    return BlockParams(b.tp_sharded + 2 * h * h, b.replicated + 3 * _norm_params(m, h), b.experts, b.active_experts)


def _with_attention(m: ModelSpec, mlp: BlockParams) -> BlockParams:
    """A transformer layer: the attention block and ``mlp`` (dense or MoE)."""
    att = attention_params(m)
    return BlockParams(att.tp_sharded + mlp.tp_sharded, att.replicated + mlp.replicated, mlp.experts, mlp.active_experts)


def mamba_params(m: ModelSpec) -> BlockParams:
    """A Mamba-2 layer (Dao & Gu 2024, §7 "Mamba-2 architecture"; Megatron-Core ssm/mamba_mixer.py
    MambaMixer): pre-norm; in_proj h → [z, x, B, C, dt] = 2·d_inner + 2·G·N + H; the depthwise causal
    conv over x, B, C (weight and bias); per-head dt_bias, A_log and D; the gated RMSNorm over
    d_inner; out_proj d_inner → h. Everything but the pre-norm is split over TP (heads and groups)."""
    h, di = m.hidden_size, m.mamba_inner
    shard = h * m.mamba_in_proj + di * h + di + _mamba_pointwise_per_layer(m)
    return BlockParams(shard, _norm_params(m, h))


def embedding_params(m: ModelSpec, vocab: int) -> int:
    pos = m.max_position_embeddings * m.hidden_size if m.position_embedding == "learned" else 0
    return vocab * m.hidden_size + pos


def head_params(m: ModelSpec, vocab: int) -> int:
    """Final norm plus the output projection (0 extra when tied to the input embedding)."""
    return _norm_params(m, m.hidden_size) + (0 if m.tie_embeddings else vocab * m.hidden_size)


def layer_params(m: ModelSpec, index: int) -> BlockParams:
    kind = m.layer_kind(index)
    if kind:  # a hybrid layer: one mixer
        return {"M": mamba_params, "*": attention_params, "-": dense_mlp_params, "E": moe_params}[kind](m)
    return _with_attention(m, moe_params(m) if m.is_moe_layer(index) else dense_mlp_params(m))


def count_parameters(m: ModelSpec) -> tuple[int, int]:
    """(total, active per token) for the main model (MTP modules excluded, as published)."""
    att = attention_params(m)
    dense = dense_mlp_params(m)
    n_moe = m.num_moe_layers
    total = m.num_attention_layers * att.total + m.num_dense_layers * dense.total
    if m.num_mamba_layers:
        total += m.num_mamba_layers * mamba_params(m).total
    active = total
    if n_moe:
        moe = moe_params(m)
        total += n_moe * moe.total
        active += n_moe * moe.active
    ends = embedding_params(m, m.vocab_size) + head_params(m, m.vocab_size)
    return total + ends, active + ends


def gemm_parameters_active(m: ModelSpec, vocab: int) -> int:
    """Parameters that take part in a GEMM per token (excludes the embedding lookup and norms):
    the N of the 6·N·tokens model-FLOPs rule (Kaplan et al. 2020; PaLM App. B) with the LM head."""
    _, active = count_parameters(m)
    del vocab  # counted unpadded, as the published MFU formulas do
    tied_head = m.vocab_size * m.hidden_size if m.tie_embeddings else 0
    return active - embedding_params(m, m.vocab_size) - _norms_total(m) - _mamba_pointwise(m) + tied_head


def _mamba_pointwise(m: ModelSpec) -> int:
    """Mamba parameters outside a GEMM, over the model."""
    return m.num_mamba_layers * _mamba_pointwise_per_layer(m) if m.num_mamba_layers else 0


def _mamba_pointwise_per_layer(m: ModelSpec) -> int:
    """One Mamba layer's parameters outside a GEMM: the depthwise conv (weight and bias), dt_bias, A_log, D."""
    return m.mamba_conv_dim * (m.mamba_conv_kernel + 1) + 3 * (m.mamba_num_heads or 0)


def _norms_total(m: ModelSpec) -> int:
    per = _norm_params(m, m.hidden_size)
    if m.hybrid_pattern is not None:  # one pre-norm per layer, and each Mamba layer's gated norm over d_inner
        return m.num_layers * per + per + m.num_mamba_layers * m.mamba_inner
    n = 2 * m.num_layers * per + per
    if m.attention == "mla":
        n += m.num_layers * (m.mla.kv_lora_rank + m.mla.q_lora_rank)
    return n
