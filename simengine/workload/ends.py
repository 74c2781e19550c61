"""Ops at the two ends of the pipeline: input embedding (first stage), final norm, LM head and
cross-entropy loss (last stage)."""

from __future__ import annotations

from .dims import Dims
from .ops import BF16, Collective, CollectiveKind, Memory
from .phases import Phases, column_linear


def embedding(d: Dims, learned_positions: bool) -> Phases:
    """Vocab-parallel embedding (Megatron ``VocabParallelEmbedding``): a lookup, then an
    all-reduce over TP (reduce-scatter with SP). Backward scatters into the fp32 main grad of
    the V/tp × h table: one zero-fill and one accumulate pass over it (peer_model_notes.md §1)."""
    ph = Phases()
    out = d.tokens * d.h * BF16
    ph.fwd.append(Memory("embed", 2 * out * (2 if learned_positions else 1)))
    if d.tp > 1:
        kind: CollectiveKind = "reduce_scatter" if d.sp else "all_reduce"
        ph.fwd.append(Collective("embed-" + kind, kind, out, "tp", d.tp))
        if d.sp:
            ph.bwd.append(Collective("embed-ag-bwd", "all_gather", out, "tp", d.tp))
    ph.wgt.append(Memory("embed-wgrad", 2 * 4 * d.vocab * d.h + out))
    return ph


def head(d: Dims, fused_ce: bool) -> Phases:
    """Final norm, LM head (column-parallel over the padded vocab) and vocab-parallel
    cross-entropy (Megatron ``vocab_parallel_cross_entropy``): an all-reduce of the max logit and
    one (fused) or two all-reduces of the sums, fp32 per token. Fused CE (TransformerEngine
    ``parallel_cross_entropy``) reads the bf16 logits once and writes the grad in place; the
    unfused path makes ~10 passes over fp32 logits (peer_model_notes.md §1)."""
    ph = Phases()
    n = d.sp_tokens * d.h  # final norm: fused or eager as the framework runs it (config/framework.py)
    ph.fwd.append(Memory("norm:final", n * d.stack.norm.fwd_bytes, kernels=d.stack.norm.fwd_kernels))
    ph.bwd.append(Memory("norm-bwd:final", n * d.stack.norm.bwd_bytes, kernels=d.stack.norm.bwd_kernels))
    column_linear(ph, "lm_head", d.tokens, d.h, d.vocab, d.tp, d.sp)
    logits = d.tokens * d.vocab
    if fused_ce:
        ph.fwd.append(Memory("ce-fused", 2 * logits * BF16 + 4 * d.tokens))
        ph.bwd.append(Memory("ce-fused-bwd", 2 * logits * BF16 + 4 * d.tokens))
    else:
        ph.fwd.append(Memory("ce", 6 * logits * 4))
        ph.bwd.append(Memory("ce-bwd", 4 * logits * 4))
    if d.tp > 1:
        ph.fwd.append(Collective("ce-ar:max", "all_reduce", d.tokens * 4, "tp", d.tp))
        ph.fwd.append(Collective("ce-ar:sum", "all_reduce", d.tokens * 4 * 2, "tp", d.tp))
        if not fused_ce:
            ph.fwd.append(Collective("ce-ar:target", "all_reduce", d.tokens * 4, "tp", d.tp))
    return ph


def mtp_projection(d: Dims) -> Phases:
    """The glue of one multi-token-prediction module (DeepSeek-V3 report §2.2, Megatron-Core
    ``MultiTokenPredictionLayer``): RMSNorm of the hidden state and of the shifted token
    embedding, concatenation, and the 2h → h projection; its transformer block and the shared
    output head are priced as the model's own blocks."""
    ph = Phases()
    x = d.sp_tokens * d.h * BF16
    ph.fwd.append(Memory("mtp-norms-concat", 6 * x))
    ph.bwd.append(Memory("mtp-norms-concat-bwd", 8 * x))
    column_linear(ph, "mtp_proj", d.tokens, 2 * d.h, d.h // d.tp, d.tp, d.sp)
    return ph
