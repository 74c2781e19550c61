"""Model states per rank: weights, gradients, optimizer states (by ZeRO stage), framework buffers.

Mixed-precision Adam (Rajbhandari et al. 2020, ZeRO §3; Megatron-LM distributed optimizer docs):
bf16 weights 2 B + fp32 main grads 4 B + fp32 master weights, Adam m and v 12 B = 18 B/param.
ZeRO-1 (Megatron ``--use-distributed-optimizer``) shards the 12 B over the data-parallel×context
group: 6 + 12/DP. ZeRO-2 also shards the grads, ZeRO-3 the weights (FSDP). Expert parameters
shard their states over the expert-data-parallel group instead (Megatron-Core MoE).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.model import ModelSpec
from ..config.scenario import Scenario, padded_vocab
from ..memo import config_cache
from ..workload.builder import ChunkWork
from ..workload.lora import adapter_params
from ..workload.mamba import mamba_dims
from ..workload.ops import operand_bytes
from ..workload.params import (attention_params, dense_mlp_params, embedding_params, head_params, mamba_params, moe_params,
                              mtp_module_params)


@dataclass(frozen=True, slots=True)
class StageParams:
    dense: float    # parameters on this rank on the dense (DP×CP) grid
    expert: float   # routed-expert parameters on this rank (EDP grid)
    gemm_shapes: tuple[tuple[int, int], ...]  # unique (out, in) weight shapes for TE wgrad buffers
    ends: float = 0.0  # embedding and LM-head parameters among ``dense``
    # LoRA (workload/lora.py): ``dense`` holds the trainable adapters, and the frozen base
    # weights — bf16, no gradient, no optimizer state, no DP traffic — are counted here
    frozen: float = 0.0
    frozen_ends: float = 0.0  # embedding and LM-head parameters among ``frozen``

    @property
    def total(self) -> float:
        return self.dense + self.expert


def optimizer_state_bytes(moments: str) -> float:
    """Optimizer-state bytes per parameter: the fp32 master weight and Adam's two moments, fp32
    (4 + 4 + 4) or bf16 moments (4 + 2 + 2: Megatron-Core's precision-aware optimizer,
    megatron/core/optimizer/optimizer_config.py ``exp_avg_dtype``/``exp_avg_sq_dtype``)."""
    return 4.0 + 2.0 * (2.0 if moments == "bf16" else 4.0)


def stage_params(sc: Scenario, chunks: tuple[ChunkWork, ...]) -> StageParams:
    """Parameters held by the rank running ``chunks``: a pure function of the frozen model and
    strategy and of the (frozen) chunks, memoised on exactly those (``memo.config_cache``; the
    result is immutable). Keyed on the only strategy fields it reads (tp, ep, etp): a search
    asks for the same chunks under many ZeRO stages, flags and schedules."""
    st = sc.strategy
    p = _stage_params(sc.model, st.tp, st.ep, st.etp_size, tuple(chunks))
    if st.peft == "lora":
        return _lora_params(sc.model, st.tp, st.lora_targets, st.lora_rank, tuple(chunks), p)
    return p


@config_cache
def _lora_params(m: ModelSpec, tp: int, targets: str, rank: int, chunks: tuple[ChunkWork, ...],
                 base: StageParams) -> StageParams:
    """LoRA: the base parameters frozen, the adapters of the rank's layers trained, split over TP
    (workload/lora.py ``adapter_params``)."""
    attn, mlp = adapter_params(m, targets, rank)
    adapters = sum(c.attn_layers * attn + c.dense_layers * mlp for c in chunks) / tp
    return StageParams(adapters, 0.0, (), 0.0, frozen=base.total, frozen_ends=base.ends)


@config_cache
def _stage_params(m: ModelSpec, tp: int, ep: int, etp: int, chunks: tuple[ChunkWork, ...]) -> StageParams:
    att, dense = attention_params(m), dense_mlp_params(m)
    moe = moe_params(m) if m.is_moe else None
    n_attn = sum(c.attn_layers for c in chunks)
    n_moe = sum(c.moe_layers for c in chunks)
    n_dense = sum(c.dense_layers for c in chunks)
    p_dense = n_attn * (att.tp_sharded / tp + att.replicated) + n_dense * (dense.tp_sharded / tp + dense.replicated)
    n_mamba = sum(c.mamba_layers for c in chunks)
    if n_mamba:
        mb = mamba_params(m)
        p_dense += n_mamba * (mb.tp_sharded / tp + mb.replicated)
    p_expert = 0.0
    if moe is not None and n_moe:
        p_dense += n_moe * (moe.tp_sharded / tp + moe.replicated)
        p_expert = n_moe * moe.experts / (ep * etp)
    V = padded_vocab(m.vocab_size, tp)  # Scenario.vocab_padded
    holds_first = any(c.first for c in chunks)
    embed = embedding_params(m, V) / tp
    ends = 0.0  # embedding and LM-head parameters (bf16 even in fp8 recipes)
    for c in chunks:
        if c.first:
            ends += embed
        if c.last:
            # a tied LM head on another rank than the embedding keeps its own copy (Megatron
            # allocates it on the last stage and all-reduces the embedding grads between them)
            p_dense += head_params(m, V) - (0 if m.tie_embeddings else V * m.hidden_size)  # final norm
            if not m.tie_embeddings or not holds_first:
                ends += V * m.hidden_size / tp
        if c.mtp:
            # MTP modules (workload/params.py mtp_module_params; one copy when the depths share one,
            # mtp_repeated_layer); the MTP stage also builds its own copy of the input embedding
            # (Megatron-Core ``pre_process or mtp_process``), kept in sync with the first stage's
            if not holds_first:
                ends += embed
            mod, copies = mtp_module_params(m), m.mtp_weight_copies
            p_dense += copies * (mod.tp_sharded / tp + mod.replicated)
            p_expert += copies * mod.experts / (ep * etp)
    p_dense += ends
    shapes = _gemm_shapes(m, tp, V, n_dense > 0, n_moe > 0, any(c.last for c in chunks), n_mamba > 0)
    return StageParams(p_dense, p_expert, shapes, ends)


def _gemm_shapes(m: ModelSpec, tp: int, vocab_padded: int, has_dense: bool, has_moe: bool,
                 has_head: bool, has_mamba: bool = False) -> tuple[tuple[int, int], ...]:
    h = m.hidden_size
    shapes: set[tuple[int, int]] = set()
    if has_mamba:  # in_proj and out_proj (workload/mamba.py)
        di, _, _, w_in = mamba_dims(m, tp)
        shapes |= {(w_in, h), (h, di)}
    if m.attention == "mla":
        a = m.num_attention_heads // tp
        qr, kvr, nope, rope, dv = m.mla
        if qr:
            shapes |= {(qr, h), (a * (nope + rope), qr)}
        else:
            shapes.add((a * (nope + rope), h))
        shapes |= {(kvr + rope, h), (a * (nope + dv), kvr), (h, a * dv)}
    else:
        a, kv, d = m.num_attention_heads // tp, max(m.kv_heads // tp, 1), m.d_head
        shapes |= {((a + 2 * kv) * d, h), (h, a * d)}
    g = 2 if m.activation == "swiglu" else 1
    if has_dense:
        f = m.ffn_hidden_size // tp
        shapes |= {(g * f, h), (h, f)}
    if has_moe and m.shared_ffn:
        f = m.shared_ffn // tp
        shapes |= {(g * f, h), (h, f)}
    if has_moe and m.moe_latent_size is not None:  # fc1_latent_proj / fc2_latent_proj (TE Linears, replicated over TP)
        shapes |= {(m.moe_latent_size, h), (h, m.moe_latent_size)}
    if has_head:
        shapes.add((vocab_padded // tp, h))
    return tuple(sorted(shapes))


@dataclass(frozen=True, slots=True)
class StaticMemory:
    weights: float
    grads: float
    optimizer: float
    buffers: float    # framework buffers (TE dummy wgrad, ZeRO-3 gathered layers, fp8 weight casts)
    # reserved, not allocated at the peak: what other CUDA streams' caches hold (FSDP2's all-gather
    # buffers); estimate.py adds it to the reserved memory only
    pools: float = 0.0


def shards(sc: Scenario) -> bool:
    """Whether ZeRO has a group to shard over: the shard group (dp_shard·cp) or the expert DP group
    larger than one. Without one a ZeRO stage changes nothing: torchtitan applies ``fully_shard``
    only where ``parallel_dims.fsdp_enabled`` (dp_shard > 1; parallelize_llama), and a distributed
    optimizer over one rank holds the whole state, as ZeRO-0 does."""
    return sc.dp_shard * sc.strategy.cp > 1 or sc.edp > 1


def keeps_gathered(sc: Scenario) -> bool:
    """ZeRO-3 as FSDP2 runs it under a pipeline: the parameters are gathered once per step and kept
    until the step's last backward, the gradients accumulate unsharded and are reduce-scattered
    once. torchtitan ``apply_fsdp``: ``reshard_after_forward_policy="default"`` sets
    ``reshard_after_forward = not pp_enabled`` ("to avoid per-microbatch all-gathers");
    torch.distributed.pipelining ``stage.py`` ``backward_maybe_with_nosync`` runs every backward
    but the last with ``set_requires_gradient_sync(False)`` and ``set_reshard_after_backward(False)``,
    and FSDP2 keeps the unsharded gradient in the reduce dtype meanwhile
    (``FSDPParam.to_accumulated_grad_if_needed``; torchtitan reduces in fp32). So the step runs
    ZeRO-1's collectives — one gather of the parameters before the first forward, one
    reduce-scatter of the gradients after the last backward (cost/dp.py ``_chunk_collectives``) — and holds
    the stage's unsharded parameters and gradients (``static_memory``)."""
    st = sc.strategy
    return st.zero_stage >= 3 and st.pp > 1 and st.fsdp_pattern_name == "fsdp2" and shards(sc)


def static_memory(sc: Scenario, p: StageParams) -> StaticMemory:
    st = sc.strategy
    dpcp, edp = sc.dp_shard * st.cp, sc.edp  # ZeRO shards over the HSDP shard group (all of DP by default)
    z = st.zero_stage if shards(sc) else 0   # nothing to shard: ZeRO-0's memory (``shards``)
    grad_b = 4.0 if st.fp32_main_grads else 2.0
    opt_b = optimizer_state_bytes(st.adam_moments_dtype)  # fp32 master + Adam m + v
    w = 2.0 * (p.dense / (dpcp if z >= 3 else 1) + p.expert / (edp if z >= 3 else 1)) + 2.0 * p.frozen
    if st.fp8_param_gather and st.framework == "megatron-te":
        # (torchao's float8 all-gather on the torch stacks keeps the fp32 shards and their bf16
        # handling as they were: it casts each shard to fp8 only to gather it)
        # FP8 primary weights: the transformer-block GEMM weights exist only as TE fp8 tensors (the
        # fp8 data and its transpose, counted in ``buffers`` below), with no bf16 copy — Megatron-Core
        # builds them under TE ``fp8_model_init`` and the distributed optimizer casts its fp32 master
        # straight into them (megatron/core/optimizer/distrib_optimizer.py
        # _copy_main_params_to_model_params → quantize_param_shard); the embedding and head stay bf16.
        w -= 2.0 * (max(p.dense - p.ends, 0.0) / (dpcp if z >= 3 else 1) + p.expert / (edp if z >= 3 else 1))
    g = grad_b * (p.dense / (dpcp if z >= 2 else 1) + p.expert / (edp if z >= 2 else 1))
    o = opt_b * (p.dense / (dpcp if z >= 1 else 1) + p.expert / (edp if z >= 1 else 1))
    fsdp2 = z >= 3 and st.fsdp_pattern_name == "fsdp2"
    if fsdp2 and not p.frozen:
        # FSDP2 keeps no bf16 copy of the parameters: the sharded parameters are the fp32 ones the
        # optimizer updates (torchtitan builds the model in fp32 and fully_shard's
        # MixedPrecisionPolicy(param_dtype=bf16) casts each shard to bf16 only for the all-gather:
        # _fsdp_param.py ``FSDPParam.all_gather_inputs``), so the fp32 "master" is the weight itself —
        # weights 4 B (the fp32 shard) and optimizer states Adam's m and v, not 2 B + 4 + m + v.
        shard = p.dense / dpcp + p.expert / edp
        w, o = 4.0 * shard, o - 4.0 * shard
    buffers = 0.0
    if st.gradient_accumulation_fusion:
        # TransformerEngine >= 2.3 keeps one bf16 "dummy" wgrad buffer per unique weight shape when
        # gradients accumulate into main_grad (te/pytorch/module/base.py get_dummy_wgrad;
        # peer_model_notes.md §5).
        buffers += sum(2.0 * a * b for a, b in p.gemm_shapes)
    q = operand_bytes(st.dtype)   # a quantized weight copy: fp8 1 B, nvfp4 0.5625 B a parameter
    gathered_b = q if st.fp8_param_gather else 2.0   # gathered quantized with FP8 / FP4 primary weights
    if z >= 3 and keeps_gathered(sc):
        # FSDP2 under a pipeline (``keeps_gathered``): the stage's parameters stay gathered
        # for the whole step, and its gradients accumulate unsharded in the reduce dtype across the
        # micro-batches (fp32: FSDPParam.to_accumulated_grad_if_needed) until the last backward
        # reduce-scatters them — both are held at the peak, the last backwards
        buffers += gathered_b * p.total
        g += grad_b * p.total
    elif fsdp2 and st.pp == 1:
        # FSDP2 without a pipeline (torchtitan ``apply_fsdp``: each TransformerBlock is its own
        # fully_shard unit, the model the root unit holding the embedding, final norm and output
        # layer): the running and the prefetched block are gathered, and the root is never
        # resharded after forward — FSDPState._lazy_init sets the root group's
        # ``post_forward_mesh_info = None`` ("For the root, do not reshard after forward since for
        # training, the parameters would be freed and all-gathered immediately",
        # torch/distributed/_composable/fsdp/_fsdp_state.py) — so the embedding and LM head stay
        # gathered, in bf16 (torchao's float8 conversion skips ``output``; the embedding is no
        # Linear), from the first forward to the end of backward: through the activation peak.
        layers = max(1, sc.model.num_layers)
        buffers += min(2, layers) * gathered_b * max(p.total - p.ends, 0.0) / layers + 2.0 * p.ends
    elif z >= 3:
        # FSDP keeps the gathered weights of the running and the prefetched layer
        # (torch/distributed/fsdp/_fully_shard/_fsdp_state.py: one unit's forward prefetches the
        # next unit's all-gather); a stage of one layer has no second layer to hold.
        layers = max(1, sc.model.num_layers // st.pp)
        buffers += min(2, layers) * gathered_b * p.total / layers
    if st.dtype in ("fp8", "nvfp4") and st.framework in ("torch-native", "torch-compile"):
        # torchao's Float8Linear keeps no fp8 weight across the step: each forward casts the weight
        # (``Float8Linear.forward`` → ``cast_weight_to_float8_t(self.weight, ...)``, the gathered
        # weight under FSDP2; torchao/float8/float8_linear.py @eab345c) and the matmul's autograd
        # Function saves that cast for backward. Under activation checkpointing (full, or torchtitan's
        # per-op selective AC, whose _save_list has no cast op) the cast is re-run in backward and
        # nothing outlives the layer; without it each layer's fp8 weight is saved with the
        # micro-batch (1 B per block parameter, unsharded). With the float8 all-gather the gathered
        # parameter already is the fp8 weight: no copy.
        if st.recompute == "none" and not st.fp8_param_gather:
            buffers += q * max(p.total - p.ends, 0.0)
    elif st.dtype in ("fp8", "nvfp4"):
        # TE caches an fp8 copy and its transpose of every transformer-block GEMM weight (1 B + 1 B
        # per param; NVFP4 its rowwise and columnwise copies, 0.5625 B each: tensor/nvfp4_tensor.py);
        # the embedding and the LM head (a plain ColumnParallelLinear) stay bf16.
        # Under LoRA those are the frozen weights' (the bf16 adapters are plain Megatron linears).
        if p.frozen:
            buffers += 2.0 * q * max(p.frozen - p.frozen_ends, 0.0)
        else:
            buffers += 2.0 * q * max(p.total - p.ends, 0.0) / (dpcp if z >= 3 else 1)
    pools = 0.0
    if fsdp2:
        # FSDP2 allocates each group's flat all-gather buffer on its all-gather copy-in stream
        # (_fsdp_collectives.py ``foreach_all_gather``: ``all_gather_output`` under
        # ``torch.cuda.stream(all_gather_copy_in_stream)``), and ``FSDPParamGroup.wait_for_unshard``
        # keeps the previous group's buffer (``comm_ctx.all_gather_state``) until the next one is
        # issued: two groups' buffers at once, the root's (embedding + LM head, bf16) and the first
        # block's the largest pair. The caching allocator hands a cached block only to the stream
        # it was allocated on (CUDACachingAllocator.cpp ``get_free_block``: the pool is searched
        # for the requesting stream), so that stream's cache stays reserved beside the default
        # stream's peak; torchtitan logs max_reserved.
        block = gathered_b * max(p.total - p.ends, 0.0) / max(1, sc.model.num_layers // st.pp)
        pools = (2.0 * p.ends if p.ends else block) + block
    return StaticMemory(w, g, o, buffers, pools)
