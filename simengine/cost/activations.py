"""Activation memory of one micro-batch: the tensors each block saves for backward.

Follows Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
(arXiv:2205.05198) §4: per layer 34·sbh + 5·a·s²·b bytes without parallelism, built from the
saved tensors listed below. With TP the tensors inside the TP region divide by t; with SP the
rest too; selective recompute drops the s² softmax terms; full recompute keeps only the block
input. Flash attention (Dao et al. 2022) keeps q, k, v, the output and the fp32 log-sum-exp
instead of the s² scores. TransformerEngine's LayerNormLinear keeps both the norm input and its
output (the QKV / FC1 input), as in Korthikanti's accounting.

FP8 (TransformerEngine): a Linear saves its input already cast to fp8 (1 B) — with SP the local
shard, not the all-gathered input (NVFP4: its columnwise copy, 0.5625 B, ``Dims.q_bytes``): _LayerNormLinear.forward quantizes ``ln_out`` before the
all-gather, frees ``ln_out_total`` after the GEMM and saves ``ln_out``; backward re-gathers it for
the wgrad GEMM (transformer_engine/pytorch/module/layernorm_linear.py, ``ln_out_needs_gather``) —
and core attention then keeps its bf16 output separately because the out-projection saved only
the fp8 copy (peer_model_notes.md §6). Other stacks (torchao float8 under DTensor SP) keep the
earlier accounting: the all-gathered fp8 input (peer_model_notes.md §6, not re-checked here).

Selective recompute of Megatron-Core submodules (transformer_config.py ``recompute_modules``):
``moe_act``, ``layernorm`` and ``mla_up_proj`` use output-discarding checkpoints
(tensor_parallel.CheckpointWithoutOutput: the module's output is freed once its consumer has run
and re-made in backward), so they drop that output — the expert activation output (the FC2
input), the separate norms' output (MoE pre-MLP norm; MLA's input norm — a GQA layer's input norm
is fused into TE's LayerNormLinear and is an IdentityOp, transformer_layer.py
``recompute_input_layernorm``), MLA's q, k, v. ``mlp``, ``moe`` and ``shared_experts`` are normal
checkpoints: the module keeps its input and drops everything inside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.model import ModelSpec
from ..workload.dims import Dims
from ..workload.lora import TARGETS

BF16 = 2


@dataclass(frozen=True, slots=True)
class BlockActivations:
    saved: float        # bytes kept from forward to backward
    selective: float    # part of ``saved`` that recomputing the attention core drops (``core_attn``)
    bwd_transient: float  # extra bytes live at the block's backward peak (gradients of its widest tensor)
    # (recompute module, bytes of ``saved`` it drops) for the other Megatron-Core recompute_modules;
    # a whole-module checkpoint ("mlp", "moe") keeps its input and drops the rest (module docstring)
    modules: tuple[tuple[str, float], ...] = ()
    # bytes of ``saved`` that torchtitan's per-op selective AC drops (``kept_outputs``; cost/stage.py)
    op_sac: float = 0.0

    def dropped(self, modules: tuple[str, ...]) -> float:
        """Bytes of ``saved`` the selective ``modules`` drop. "moe" checkpoints the whole MoE layer,
        so its parts (moe_act, shared_experts) drop nothing more."""
        parts = dict(self.modules)
        mods = set(modules)
        if "moe" in mods:
            mods -= {"moe_act", "shared_experts"}
        out = sum(b for m, b in parts.items() if m in mods)
        return out + (self.selective if "core_attn" in mods else 0.0)


def kept_outputs(ops) -> float:
    """Bytes of the outputs of ``ops`` that a selective checkpoint keeps (workload/recompute.py
    ``op_sac``): a GEMM's bf16 output, SDPA's output and its fp32 log-sum-exp, a reduce-scatter's
    shard."""
    from ..workload.ops import Attention, Collective, Gemm

    out = 0.0
    for op in ops:
        if isinstance(op, Gemm):
            out += BF16 * op.b * op.m * op.n * op.count
        elif isinstance(op, Attention):
            out += op.b * op.s_q * op.heads * (BF16 * op.d_v + 4.0)
        elif isinstance(op, Collective):
            out += op.bytes / max(op.size, 1)
    return out


def fp8_gemm_input(d: Dims) -> float:
    """Bytes a column-parallel fp8 GEMM saves of its input: TransformerEngine the 1-B local (SP)
    shard (module docstring: layernorm_linear.py ``ln_out_needs_gather``), others the gathered input."""
    return d.q_bytes * (d.sp_tokens * d.h if d.stack.name == "megatron-te" else d.tokens * d.h)


def attention_activations(d: Dims, m: ModelSpec) -> BlockActivations:
    S, Ssp, h = d.tokens, d.sp_tokens, d.h
    ln_in = BF16 * Ssp * h
    qkv_in = fp8_gemm_input(d) if d.fp8 else BF16 * Ssp * h
    mask = Ssp * h if d.dropout else 0  # 1-byte dropout mask after the out-projection
    s_kv = d.doc_len or d.s  # packed sequences: the unfused scores are per document
    if m.attention == "mla":
        qr, kvr = m.mla.q_lora_rank, m.mla.kv_lora_rank
        latent = BF16 * Ssp * (2 * qr + 2 * kvr)   # q_norm in, q_up in, kv_norm in, kv_up in (SP shards)
        q = BF16 * S * d.heads * d.d_qk
        k = BF16 * S * d.heads * d.d_qk
        v = BF16 * S * d.heads * d.d_v
        core = q + k + v
        extra: float = latent
    else:
        # the K,V the attention kernel saves: at kv_heads, or expanded to the query heads where the
        # framework repeats them first (Stack.repeat_kv: torchtitan's ``repeat_kv`` output is the
        # SDPA key/value, which ``_scaled_dot_product_flash_attention`` / ``_efficient_attention`` /
        # ``_cudnn_attention`` keep for their backward, tools/autograd/derivatives.yaml; nothing keeps
        # the kv_heads k, v: the expand's and reshape's backward need only sizes, RoPE's complex
        # multiply only freqs_cis. Under torch.compile AOTAutograd's partitioner saves the expanded
        # copy too: its backward user, the SDPA backward, cannot fuse with it, so it is banned from
        # recompute, torch/_functorch/partitioners.py ``is_materialized_backwards``). The backward's
        # dK, dV (``bwd`` below) are at that width too before the expand's sum reduces them.
        kv_w = d.heads if d.stack.repeat_kv else d.kv_heads
        q = BF16 * S * d.heads * d.d_qk
        k = BF16 * S * kv_w * d.d_qk
        v = BF16 * S * kv_w * d.d_v
        core = q + k + v
        extra = 0.0
        if m.qk_norm:
            # q_layernorm / k_layernorm (TE RMSNorm over head_dim): each keeps its input, the
            # pre-norm q and k, and an fp32 rsigma per (token, head) for its backward
            # (transformer_engine/pytorch/module/rmsnorm.py → ops/basic/rmsnorm.py save_for_backward)
            rows = S * (d.heads + d.kv_heads)
            extra = BF16 * rows * d.d_qk + 4.0 * rows
    out_in = (d.q_bytes + BF16) * S * d.heads * d.d_v if d.fp8 else BF16 * S * d.heads * d.d_v
    softmax: float
    selective: float
    if d.unfused_attention:
        scores = d.b * d.heads * (S // d.b) * s_kv
        softmax = BF16 * scores + (scores + BF16 * scores if d.attn_dropout else 0)  # probs, mask, dropped probs
        selective = softmax
    else:
        softmax = 4.0 * S * d.heads  # fp32 log-sum-exp per query and head
        selective = softmax
    saved = ln_in + qkv_in + extra + core + softmax + out_in + mask
    # backward peak: grads of q, k, v live together with the saved tensors
    bwd = core
    mla = m.attention == "mla"
    # MLA's input norm is its own module (gpt_layer_specs.py: input_layernorm=backend.layer_norm for
    # MLASelfAttention); its output is the down-projections' input
    parts = (("layernorm", qkv_in if mla else 0.0), ("mla_up_proj", core if mla else 0.0))
    return BlockActivations(saved, selective, bwd, parts)


def torch_cp_bwd_transient(d: Dims, allgather: bool) -> float:
    """Bytes live at the peak of one layer's attention backward under PyTorch's ``context_parallel``
    ring attention as torchtitan runs it (workload/layers.py ``_torch_cp``: cp > 1, rotate method
    "allgather" or "alltoall"), in place of the plain flash backward's dQ, dK, dV. From
    ``_templated_ring_attention_backward`` (torch/distributed/tensor/experimental/_attention.py,
    torch 2.6 / pytorch 1963fc8 that torchtitan's 2024-12 benchmarks ran), with K and V expanded
    to the query heads (torchtitan models/llama/model.py ``repeat_kv`` before SDPA), per element of
    the local K,V (``kv``) and Q (``q``):

    - the other ranks' K,V: ``_AllGatherRotater`` keeps the one all-gather of the concatenated
      K,V, cp chunks of bf16 (2·cp·kv), for the whole backward; ``_AllToAllRotater`` the K,V
      in flight to the next rank and the ones received (2 × 2·kv);
    - ``next_kv = torch.cat([key.flatten(), value.flatten()])``, the bf16 copy made before each
      step's exchange (2·kv);
    - the fp32 accumulators (``_cp_options.convert_to_f32``): ``grad_query`` (4·q) and the dK,dV
      that ``dkv_rotater`` passes on every step as an fp32 all-to-all permute — the buffer
      received (``next_buffer``, into which ``grad_key``/``grad_value`` are views) and the
      ``torch.cat`` sent on (2 × 4·kv);
    - the step's flash-backward outputs dQ, dK, dV in bf16 (2·q + 2·kv).
    """
    heads = d.heads
    kv = d.tokens * heads * (d.d_qk + d.d_v)
    q = d.tokens * heads * d.d_qk
    rotate = BF16 * d.cp * kv if allgather else 2 * BF16 * kv
    return rotate + BF16 * kv + 4.0 * q + 2 * 4.0 * kv + BF16 * (q + kv)


def mlp_activations(d: Dims, width: int) -> BlockActivations:
    """Norm input, FC1 input, activation input, FC2 input (and the dropout mask). Under LoRA a
    frozen FC1 / FC2 without an adapter keeps no input (workload/lora.py: TE saves a linear's
    input only for its wgrad), and FC1's input is not gathered again in backward."""
    S, Ssp, h = d.tokens, d.sp_tokens, d.h
    f_in = (2 if d.gated else 1) * width
    keep1 = keep2 = 1.0
    if d.lora:
        targets = TARGETS[d.lora]
        keep1, keep2 = float("fc1" in targets), float("fc2" in targets)
    if d.fp8:  # fc1 input: the fp8 local shard (module docstring), fc2 input in fp8; the activation input stays bf16
        saved = BF16 * Ssp * h + keep1 * fp8_gemm_input(d) + BF16 * S * f_in + keep2 * d.q_bytes * S * width + (Ssp * h if d.dropout else 0)
    else:
        saved = BF16 * (Ssp * h + keep1 * Ssp * h + S * f_in + keep2 * S * width) + (Ssp * h if d.dropout else 0)
    gathered = keep1 * BF16 * S * h if d.sp else 0  # all-gathered input re-made for the wgrad GEMM
    # "mlp": a checkpoint of the whole MLP (its pre-MLP norm is fused into TE's fc1) keeps its input
    return BlockActivations(saved, 0.0, BF16 * S * f_in + gathered, (("mlp", saved - BF16 * Ssp * h),))


def moe_activations(d: Dims, m: ModelSpec) -> BlockActivations:
    """MoE MLP: norm input, router input (shared with the shared experts' FC1 input), routing
    probabilities and map (fp32 + int/bool, 8 B per token·expert as in Megatron-Core's
    ``MoEAlltoAllTokenDispatcher``), and per routed token the grouped FC1 input, activation input
    and FC2 input.

    FP8 on TransformerEngine: the expert GEMMs (``GroupedLinear``, or one TE Linear per expert)
    save their inputs quantised, the columnwise fp8 copy the wgrad GEMM reads, 1 B per element
    (transformer_engine/pytorch/module/grouped_linear.py ``_GroupedLinear.forward``:
    ``inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)`` before
    ``save_for_backward``); the activation function keeps its bf16 input. With ``moe_act``
    recompute Megatron-Core has FC2 save its original input instead (moe/experts.py:
    ``set_save_original_input(self.linear_fc2)`` under fp8), the checkpointed activation output
    that is freed after FC2 and re-made in backward: nothing held. The shared experts' FC2 (a TE
    row-parallel Linear) saves its fp8 input the same way.

    Latent MoE (``ModelSpec.moe_latent_size``): the routed rows are latent-wide, so is the experts'
    FC1 input; ``fc1_latent_proj`` reads the norm output already kept for the router, and
    ``fc2_latent_proj`` (a TE Linear) saves its latent-wide input, the unpermuted combine output."""
    T, Ssp, h, x = d.moe_tokens, d.sp_tokens, d.h, d.moe_dim
    R = d.tokens_per_expert * d.experts_local
    f_in = (2 if d.gated else 1) * d.moe_ffn
    kept = BF16 * (Ssp * h + T * h)  # the pre-MLP norm's input and output (the MoE layer's input)
    saved = kept + 8.0 * T * m.num_experts
    gemm_in = d.q_bytes if d.fp8 and d.stack.name == "megatron-te" else BF16   # FC1's and FC2's saved inputs
    fc2_in = gemm_in * R * d.moe_ffn
    saved += gemm_in * R * x + BF16 * R * f_in + fc2_in
    if x != h:
        saved += gemm_in * T * x   # fc2_latent_proj's input
    shared = 0.0
    if d.shared_ffn:
        fs = (2 if d.gated else 1) * d.shared_ffn
        shared = d.tokens * (BF16 * fs + gemm_in * d.shared_ffn)   # activation input, FC2 input (a TE Linear too)
        saved += shared
    saved += Ssp * h if d.dropout else 0
    parts = (("layernorm", BF16 * T * h), ("moe_act", fc2_in), ("shared_experts", shared),
             ("moe", saved - kept))
    return BlockActivations(saved, 0.0, BF16 * R * f_in, parts)


def mamba_activations(d: Dims, m: ModelSpec) -> BlockActivations:
    """A Mamba-2 layer (workload/mamba.py): the norm input, in_proj's input (TE LayerNormLinear keeps
    it), in_proj's output z·xBC·dt and the scan output y — Megatron-Core's memory-efficient path
    (``use_mamba_mem_eff_path``, default on) runs conv, scan and gated norm as mamba_ssm's
    ``MambaSplitConv1dScanCombinedFn``, which saves zxbcdt and out_x and re-makes the conv output
    and the chunk states in backward — and out_proj's input (the normed y)."""
    from ..workload.mamba import mamba_dims

    S, Ssp, h = d.tokens, d.sp_tokens, d.h
    di, _, _, w_in = mamba_dims(m, d.tp)
    saved = BF16 * (2 * Ssp * h + S * (w_in + 2 * di)) + (Ssp * h if d.dropout else 0)
    return BlockActivations(saved, 0.0, BF16 * S * w_in)


def layer_input(d: Dims) -> float:
    """What a fully recomputed block keeps: its input (SP shard), Korthikanti et al. 2022 §5."""
    return BF16 * d.sp_tokens * d.h


def head_activations(d: Dims, fused_ce: bool, ce: str = "megatron") -> BlockActivations:
    """Final norm input, LM-head input, and the logits state the loss keeps: fused CE keeps the
    bf16 logits-grad buffer it computes in forward; unfused Megatron CE keeps the fp32 softmax and
    has the bf16 logits plus an fp32 copy alive at its forward peak.

    The torch stacks (torchtitan) compute ``cross_entropy(pred.flatten(0, 1).float(), labels)``
    (torchtitan 9dec370 train.py ``loss_fn``; components/loss.py ``cross_entropy_loss`` later), so
    ``ce`` (``head_ce``) is one of:

    - ``"aten"`` — eager, no TP: ``log_softmax`` keeps its fp32 output (4 B a logit). Backward
      holds at once that output, ``nll_loss_backward``'s dense fp32 grad (``zeros_like`` + scatter)
      and ``_log_softmax_backward_data``'s fp32 result: 8 B a logit on top of the kept 4 (the
      forward's bf16 logits + fp32 copy, 6 B, are less; train.py ``del pred`` frees the logits
      before backward).
    - ``"loss-parallel"`` — eager under torchtitan's default loss parallelism when tp > 1
      (torch/distributed/tensor/parallel/loss.py): ``_log_softmax`` keeps ``result`` (4 B), and
      ``_nll_loss_and_log_softmax_backward`` evaluates ``grad_input = torch.zeros_like(x)`` then
      ``(grad_input + torch.exp(x)) * grad_output``: ``grad_input``, ``exp(x)`` and their sum are live
      together beside the kept ``x``, 12 B a logit on top of the kept 4.
    - ``"compiled"`` — torchtitan compiles the loss with ``training.compile``
      (components/loss.py ``build_cross_entropy_loss``, since pytorch/torchtitan#1033, bbb1b616e,
      2025-04-02): Inductor fuses the fp32 upcast, log-softmax and NLL into reductions over the
      bf16 logits, which the compiled graph keeps (2 B a logit, ``del pred`` no longer frees them),
      and its backward writes the bf16 logits grad in one kernel (2 B a logit).

    On the torch stacks the final norm runs eager (torchtitan compiles the TransformerBlocks only,
    ``apply_compile``): models/norms.py ``RMSNorm.forward`` = ``self._norm(x.float()).type_as(x) *
    self.weight`` saves the fp32 copy of its input (``pow`` and ``mul``) and its bf16 output (the
    weight ``mul``), 6 B per element of its (sequence-sharded) input. With TP the LM head
    (``ColwiseParallel(input_layouts=Shard(1))``, parallelize_llama.py ``apply_tp``) all-gathers that
    output in its input hook and ``F.linear`` saves the gathered [S, h] (Megatron saves its shard
    and gathers it again); without SP the head's input is the norm output itself."""
    S, Ssp, h, V = d.tokens, d.sp_tokens, d.h, d.vocab
    if ce in ("aten", "loss-parallel", "compiled"):
        base = (4.0 + BF16) * Ssp * h + (BF16 * S * h if Ssp != S else 0.0)
    else:
        base = BF16 * ((1 if d.lora else 2) * Ssp * h)  # a frozen LM head keeps no input (workload/lora.py)
    if fused_ce:
        return BlockActivations(base + BF16 * S * V, 0.0, BF16 * S * h + 16.0 * S)
    if ce == "aten":
        return BlockActivations(base + 4.0 * S * V, 0.0, 8.0 * S * V)
    if ce == "loss-parallel":
        return BlockActivations(base + 4.0 * S * V, 0.0, 12.0 * S * V)
    if ce == "compiled":
        return BlockActivations(base + BF16 * S * V, 0.0, BF16 * S * V)
    return BlockActivations(base + 4.0 * S * V, 0.0, (BF16 + 4.0) * S * V)
