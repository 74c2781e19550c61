"""Ops of one transformer block for one micro-batch on one rank: attention (MHA/GQA or MLA),
dense MLP or MoE, norms and residuals.

Memory-bound kernels count the bytes they move in HBM (read + write, bf16): a fused RMSNorm/LN
reads x and writes y (bwd reads x, dy and writes dx); SwiGLU reads 2f and writes f (bwd reads 2f
and df, writes 2f); the fused bias-dropout-add reads two streams and writes one. The framework
(``Dims.stack``, simengine/config/framework.py) says whether a norm, activation or RoPE is that one
fused kernel or a chain of eager PyTorch kernels (more bytes, more launches), and whether Q/K/V and
gate/up are one GEMM or several.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Literal

from ..config.framework import FRAMEWORKS, Pass, Stack
from ..config.model import ModelSpec
from .dims import Dims
from .dispatch import ep_alltoall
from .ops import BF16, Attention, AttentionImpl, Collective, CollectiveKind, GroupedGemm, Memory
from .phases import Phases, column_linear, gemm_triple, row_linear

_FUSED = FRAMEWORKS["megatron-te"]


def _passes(ph: Phases, name: str, elems: float, p: Pass) -> None:
    """A memory-bound step over ``elems`` elements: its bytes and launches each way."""
    ph.fwd.append(Memory(name, elems * p.fwd_bytes, kernels=p.fwd_kernels))
    ph.bwd.append(Memory(name.replace(":", "-bwd:", 1) if ":" in name else name + "-bwd", elems * p.bwd_bytes,
                         kernels=p.bwd_kernels))


def _norm(ph: Phases, name: str, tokens: int, width: int, stack: Stack = _FUSED) -> None:
    _passes(ph, "norm:" + name, tokens * width, stack.norm)


def _residual(ph: Phases, name: str, d: Dims) -> None:
    x = d.sp_tokens * d.h * BF16
    mask = d.sp_tokens * d.h if d.dropout else 0
    ph.fwd.append(Memory("bda:" + name, 3 * x + mask))
    if d.dropout:
        ph.bwd.append(Memory("bda-bwd:" + name, 2 * x + mask))


def _ring_steps(ph: Phases, d: Dims, heads: int, kv: int, impl: AttentionImpl, kernel: str, window: int,
                kv_bytes: float, fwd: Attention, bwd: Attention) -> None:
    """CP ring attention as TransformerEngine runs it (``AttnFuncWithCPAndKVP2P.forward``): with
    the load-balanced split (rank i holds sequence chunks i and 2cp−1−i, L = s/cp tokens), step 0
    is causal attention of the local queries over the local keys (L × L), and each of the cp−1
    later steps is a non-causal kernel over half of that block (L × L/2: all local queries against
    the first remote chunk, or the second local chunk against both) — the same FLOPs as 1/cp of
    the causal work, but in kernels of L, not s, tokens (what an efficiency table is looked up at).
    Each step's K,V (and in backward dK,dV) transfer overlaps the kernel of the step before."""
    cp, L = d.cp, d.s // d.cp
    if window:  # a sliding window skips ring steps outside its band: keep one kernel over the band
        ph.fwd.append(fwd)
        ph.fwd.append(Collective("cp-ring:kv", "p2p", kv_bytes * (cp - 1), "cp", cp, overlap_with="attn"))
        ph.bwd.append(bwd)
        ph.bwd.append(Collective("cp-ring:dkv", "p2p", 2 * kv_bytes * (cp - 1), "cp", cp, overlap_with="attn-bwd"))
        return
    ph.fwd.extend(_ring_ops("fwd", cp, L, d.b, heads, kv, d.d_qk, d.d_v, impl, kernel, kv_bytes, "kv"))
    ph.bwd.extend(_ring_ops("bwd", cp, L, d.b, heads, kv, d.d_qk, d.d_v, impl, kernel, 2 * kv_bytes, "dkv"))


@lru_cache(maxsize=4096)
def _ring_ops(phase: Literal["fwd", "bwd"], cp: int, L: int, b: int, heads: int, kv: int, d_qk: int, d_v: int,
              impl: AttentionImpl, kernel: str, comm_bytes: float, name: str) -> tuple:
    """One phase of ``_ring_steps``: the causal local step, then cp − 1 pairs of a K,V transfer
    and the kernel it overlaps. Memoised on every value it is built from (the ops are frozen
    dataclasses: the same values, the same ops); a search builds the same ring for every block
    kind that shares them (DeepSeek-V3 on 16,384 GPUs: cp up to 64, 2·(cp − 1) ops a phase)."""
    tag = "attn" if phase == "fwd" else "attn-bwd"
    out: list = [Attention(tag, b, heads, kv, L, L, d_qk, d_v, True, phase, impl, kernel=kernel)]
    for j in range(1, cp):
        prev = tag if j == 1 else f"{tag}:ring{j - 1}"
        out.append(Collective(f"cp-ring:{name}{j}", "p2p", comm_bytes, "cp", cp, overlap_with=prev))
        out.append(Attention(f"{tag}:ring{j}", b, heads, kv, L, L // 2, d_qk, d_v, False, phase, impl, kernel=kernel))
    return tuple(out)


def _torch_cp(ph: Phases, d: Dims, heads: int, impl: AttentionImpl, kernel: str, compiled: bool,
              allgather: bool) -> None:
    """PyTorch's ``context_parallel`` ring attention as torchtitan runs it (torch 2.6,
    torch/distributed/tensor/experimental/_attention.py; torchtitan train.py
    ``create_context_parallel_ctx``, load balancing on), with its rotate method "allgather"
    (torchtitan's default: ``cp_comm_type="allgather"``) or "alltoall" (a ring of permutes, one
    hop of the local K,V per step: ``cp_comm_type="p2p"``):

    - K and V reach the ring already expanded to the query heads: torchtitan's Attention calls
      ``repeat_kv`` before ``F.scaled_dot_product_attention`` (models/llama/model.py), so the
      all-gather moves ``heads``, not ``kv_heads``, per token;
    - forward: one all-gather of the concatenated K,V (alltoall: a hop of the local K,V before
      each step after the first, issued as the step before starts), then cp SDPA calls — the causal local block
      (L × L) and cp − 1 non-causal half blocks (L × L/2) — each merged into an fp32 output by
      ``_SDPAMerger`` (``out.to(float32)``, ``out − sigmoid(lse_b − lse)·(out − out_b)``,
      ``lse − logsigmoid(lse − lse_b)``: about 38 B per output element and 7 kernels a step on
      the slowest rank of the group, whose merges are all full), the result cast back to bf16;
    - backward (``_templated_ring_attention_backward``): the K,V all-gather (or hops) again, fp32 zero
      buffers for dQ and dK,dV, cp flash backward calls of the same shapes, each step's dQ and
      dK,dV added into the fp32 buffers (~10 B per element), the ``torch.cat`` copies of K,V and
      of dK,dV (also inside ``_partial_update``), and dK,dV passed to the next rank in fp32 after
      every step (``dkv_rotater``: an all-to-all permute whatever the rotate method), the grads
      cast to bf16 at the end. Two hops beside one kernel run one after the other on the CP
      group: they are one collective here (a partner kernel hides at most its own length).

    Eager, a collective's wait comes at its first use, so the all-gather overlaps the local
    causal step and each dK,dV hop the next step's kernel. Under torch.compile the trace waits
    at once (``_maybe_wrap_tensor`` → ``wait_tensor``; Inductor's
    ``reorder_for_compute_comm_overlap`` is off by default): every collective is exposed."""
    cp, L, b = d.cp, d.s // d.cp, d.b
    kv_el = d.tokens * heads * (d.d_qk + d.d_v)  # expanded to the query heads (repeat_kv)

    def steps(phase: Literal["fwd", "bwd"], tag: str) -> list[Attention]:
        local = Attention(tag, b, heads, heads, L, L, d.d_qk, d.d_v, True, phase, impl, kernel=kernel)
        return [local] + [Attention(f"{tag}:ring{j}", b, heads, heads, L, L // 2, d.d_qk, d.d_v, False, phase, impl,
                                    kernel=kernel) for j in range(1, cp)]

    def hop(name: str, kind: CollectiveKind, nbytes: float, kernel_beside: Attention | None) -> Collective:
        partner = "" if compiled or kernel_beside is None else kernel_beside.name
        return Collective(name, kind, nbytes, "cp", cp, overlap_with=partner)

    ph.fwd.extend(_torch_cp_forward(steps("fwd", "attn"), hop, d, heads, kv_el, allgather))
    ph.bwd.extend(_torch_cp_backward(steps("bwd", "attn-bwd"), hop, d, heads, kv_el, allgather))


def _torch_cp_forward(fwd: list[Attention], hop, d: Dims, heads: int, kv_el: float, allgather: bool) -> list:
    """``_torch_cp``'s forward: the K,V of the other ranks (one all-gather beside the local step,
    or a hop of the local K,V before each step j ≥ 1, issued as step j − 1 starts), the cp
    kernels, the K,V concatenation (once for the all-gather, before each hop for alltoall) and
    the fp32 merges."""
    cp = len(fwd)
    if allgather:
        ops: list = [hop("cp-ag:kv", "all_gather", kv_el * BF16 * cp, fwd[0]), *fwd]
    else:
        ops = [fwd[0]]
        for j in range(1, cp):
            ops += [hop(f"cp-ring:kv{j}", "p2p", kv_el * BF16, fwd[j - 1]), fwd[j]]
    out_el = d.tokens * heads * d.d_v
    ops.append(Memory("cp-kv-cat", 4 * kv_el * (1 if allgather else cp - 1)))
    ops.append(Memory("cp-merge", out_el * (6 + 38 * (cp - 1) + 6), kernels=2 + 7 * (cp - 1)))
    return ops


def _torch_cp_backward(bwd: list[Attention], hop, d: Dims, heads: int, kv_el: float, allgather: bool) -> list:
    """``_torch_cp``'s backward: the K,V again, fp32 zero buffers, and beside each step j ≥ 1,
    on the CP group one after the other, step j − 1's dK,dV (fp32) and, for alltoall, the K,V
    step j + 1 needs; the last dK,dV hop waited at the end; then the memory passes."""
    cp = len(bwd)
    q_el = d.tokens * heads * d.d_qk
    ops: list = [hop("cp-ag:kv-bwd", "all_gather", kv_el * BF16 * cp, bwd[0])] if allgather else []
    ops += [Memory("cp-grad-zeros", 4 * (q_el + kv_el), kernels=3), bwd[0]]  # fp32 dQ, dK and dV buffers
    if not allgather and cp > 1:  # the K,V for step 1 travel while step 0 computes
        ops.append(hop("cp-ring:kv-bwd1", "p2p", kv_el * BF16, bwd[0]))
    for j in range(1, cp):
        nxt = kv_el * BF16 if not allgather and j + 1 < cp else 0.0
        ops += [hop(f"cp-ring:dkv{j}", "p2p", kv_el * 4 + nxt, bwd[j]), bwd[j]]
    ops.append(hop(f"cp-ring:dkv{cp}", "p2p", kv_el * 4, None))
    # per step: dQ and dK,dV added into the fp32 buffers (~10 B per element, 4 kernels), the K,V
    # concatenated for the next step (bf16, all steps but the last), dK,dV concatenated in fp32
    # before its hop and again by ``_partial_update`` on the slowest rank (8 B each); the grads
    # cast to bf16 at the end (6 B)
    accum = 10 * (q_el + kv_el) * cp + 4 * kv_el * (cp - 1) + 16 * kv_el * cp + 6 * (q_el + kv_el)
    ops.append(Memory("cp-grad-accum", accum, kernels=4 * cp + (cp - 1) + 2 * cp + 2))
    return ops


def _core_attention(ph: Phases, d: Dims, model: ModelSpec, cp_comm: str) -> None:
    """Core attention with context parallelism.

    CP (Megatron-Core / TransformerEngine ``attn_forward_func_with_cp``): the sequence is split in
    2·cp chunks, rank i holds chunks i and 2cp−1−i so causal work is balanced; each rank computes
    its queries against all keys, i.e. 1/cp of the causal work.
    - p2p (ring): cp−1 steps each pass the local K,V chunk to the next rank, overlapped with the
      attention of the previous chunk; bwd passes K,V and dK,dV (2×).
    - a2a (Ulysses, Jacobs et al. 2023): all-to-all of q,k,v before and of o after, so each rank
      attends over the full sequence with heads/cp; bwd the reverse.
    - allgather: all-gather K,V over cp before attention; bwd all-gather + reduce-scatter of dK,dV.
    """
    cp = d.cp
    heads, kv, s_q, s_kv = d.heads, d.kv_heads, d.tokens // d.b, d.s
    if cp > 1 and cp_comm == "a2a":
        heads, kv, s_q = max(heads // cp, 1), max(kv // cp, 1) if kv >= cp else kv, d.s
    impl: AttentionImpl = "unfused" if d.unfused_attention else "flash"
    # sliding-window attention (Dims.attention_window, ModelSpec.attention_window) skips the key
    # blocks outside the band: FLOPs ~ s·w instead of s²/2 (ops.window_tile_pairs)
    k, w = d.attention_kernel, d.attention_window
    b = d.b
    if d.doc_len:
        # packed sequences (StrategySpec.packed_doc_len; cp = 1): the varlen kernel attends within each
        # document, i.e. s/L sequences of L tokens per micro-batch sequence (TE THD, cu_seqlens)
        b, s_q, s_kv = d.b * (d.s // d.doc_len), d.doc_len, d.doc_len
    fwd = Attention("attn", b, heads, kv, s_q, s_kv, d.d_qk, d.d_v, True, "fwd", impl, kernel=k, window=w)
    bwd = Attention("attn-bwd", b, heads, kv, s_q, s_kv, d.d_qk, d.d_v, True, "bwd", impl, kernel=k, window=w)
    if cp > 1:
        qkv_bytes = d.tokens * (d.heads * d.d_qk + d.kv_heads * (d.d_qk + d.d_v)) * BF16
        o_bytes = d.tokens * d.heads * d.d_v * BF16
        kv_bytes = d.tokens * d.kv_heads * (d.d_qk + d.d_v) * BF16
        if cp_comm == "a2a":
            # TransformerEngine flash_attn_a2a_communicate: q, k, v (and o) are made contiguous
            # before the all-to-all and their sequence chunks reordered after it — two read+write
            # passes per tensor each way
            ph.fwd.append(Memory("cp-a2a-reorder", 4 * (qkv_bytes + o_bytes)))
            ph.bwd.append(Memory("cp-a2a-reorder-bwd", 4 * (qkv_bytes + o_bytes)))
            # one torch.distributed.all_to_all_single per tensor (the same function's loop over
            # a2a_inputs; AttnFuncWithCPAndQKVOA2A passes [q, k, v] before and [dq, dk, dv] after
            # attention), so each pays its own launch and latency
            q_bytes, k_bytes = d.tokens * d.heads * d.d_qk * BF16, d.tokens * d.kv_heads * d.d_qk * BF16
            v_bytes = d.tokens * d.kv_heads * d.d_v * BF16
            for x, size in (("q", q_bytes), ("k", k_bytes), ("v", v_bytes)):
                ph.fwd.append(Collective(f"cp-a2a:{x}", "all_to_all", size, "cp", cp))
            ph.fwd.append(fwd)
            ph.fwd.append(Collective("cp-a2a:o", "all_to_all", o_bytes, "cp", cp))
            ph.bwd.append(Collective("cp-a2a:do", "all_to_all", o_bytes, "cp", cp))
            ph.bwd.append(bwd)
            for x, size in (("dq", q_bytes), ("dk", k_bytes), ("dv", v_bytes)):
                ph.bwd.append(Collective(f"cp-a2a:{x}", "all_to_all", size, "cp", cp))
        elif cp_comm in ("allgather", "p2p") and d.stack.cp_impl != "te" and not w:
            _torch_cp(ph, d, heads, impl, k, d.stack.cp_impl == "torch-compiled", cp_comm == "allgather")
        elif cp_comm == "allgather":
            ph.fwd.append(Collective("cp-ag:kv", "all_gather", kv_bytes * cp, "cp", cp))
            ph.fwd.append(fwd)
            ph.bwd.append(Collective("cp-ag-bwd:kv", "all_gather", kv_bytes * cp, "cp", cp))
            ph.bwd.append(bwd)
            ph.bwd.append(Collective("cp-rs:dkv", "reduce_scatter", kv_bytes * cp, "cp", cp))
        else:  # ring p2p, overlapped with the attention of the chunk already present
            # TE AttnFuncWithCPAndKVP2P: one attention kernel per ring step, then the partial
            # outputs are merged with their log-sum-exp (a read+write of o per step)
            ph.fwd.append(Memory("cp-ring-merge", (cp - 1) * 2 * o_bytes))
            ph.bwd.append(Memory("cp-ring-merge-bwd", (cp - 1) * 2 * o_bytes))
            _ring_steps(ph, d, heads, kv, impl, k, w, kv_bytes, fwd, bwd)
    else:
        ph.fwd.append(fwd)
        ph.bwd.append(bwd)


def attention_block(d: Dims, model: ModelSpec, cp_comm: str) -> Phases:
    """Pre-norm attention sub-block: norm → QKV → (RoPE) → core attention → out-proj → residual."""
    ph = Phases()
    S, h, tp, sp = d.tokens, d.h, d.tp, d.sp
    _norm(ph, "ln1", d.sp_tokens, h, d.stack)
    if model.attention == "mla":
        _mla_projections(ph, d, model)
    else:
        if d.stack.fused_qkv:
            column_linear(ph, "qkv", S, h, (d.heads + 2 * d.kv_heads) * d.d_qk, tp, sp)
        else:  # torchtitan Attention: wq, wk, wv (models/llama/model.py)
            _column_group(ph, S, h, (("q", d.heads * d.d_qk), ("k", d.kv_heads * d.d_qk), ("v", d.kv_heads * d.d_qk)), tp, sp)
        if model.qk_norm:
            # per-head RMSNorm of q and of k before RoPE, two norm modules (Megatron-Core
            # SelfAttention.get_query_key_value_tensors: q_layernorm(query), k_layernorm(key);
            # HF Qwen3Attention.forward: q_norm, k_norm), over this rank's heads
            _norm(ph, "q", S, d.heads * d.d_qk, d.stack)
            _norm(ph, "k", S, d.kv_heads * d.d_qk, d.stack)
        if model.position_embedding == "rope":
            _passes(ph, "rope", S * (d.heads + d.kv_heads) * d.d_qk, d.stack.rope)
    _core_attention(ph, d, model, cp_comm)
    row_linear(ph, "proj", S, d.heads * d.d_v, h, tp, sp)
    _residual(ph, "attn", d)
    return ph


def _mla_projections(ph: Phases, d: Dims, model: ModelSpec) -> None:
    """DeepSeek-V2 MLA (arXiv:2405.04434 §2.1.2) as Megatron-Core ``MLASelfAttention`` lays it
    out under TP/SP: the down-projections are duplicated Linears applied to the SP shard, the
    latents are normalised on the shard, and only the latents are all-gathered by the
    column-parallel up-projections (q_up, kv_up), plus the decoupled RoPE key."""
    S, Ssp, h, tp, sp = d.tokens, d.sp_tokens, d.h, d.tp, d.sp
    qr, kvr, nope, rope, dv = model.mla
    if qr:
        gemm_triple(ph, "q_down", Ssp, h, qr)
        _norm(ph, "q_norm", Ssp, qr, d.stack)
        column_linear(ph, "q_up", S, qr, d.heads * (nope + rope), tp, sp)
    else:
        column_linear(ph, "q_proj", S, h, d.heads * (nope + rope), tp, sp)
    gemm_triple(ph, "kv_down", Ssp, h, kvr + rope)
    _norm(ph, "kv_norm", Ssp, kvr, d.stack)
    column_linear(ph, "kv_up", S, kvr, d.heads * (nope + dv), tp, sp)
    if tp > 1 and sp:
        k_pe = S * rope * BF16
        ph.fwd.append(Collective("ag:k_pe", "all_gather", k_pe, "tp", tp))
        ph.bwd.append(Collective("rs-bwd:k_pe", "reduce_scatter", k_pe, "tp", tp))
    _passes(ph, "rope", S * (d.heads + 1) * rope, d.stack.rope)


def _activation(ph: Phases, name: str, tokens: int, width: int, kind: str, stack: Stack = _FUSED) -> None:
    """The pointwise step between FC1 and FC2 (ModelSpec.activation); plain ReLU is one kernel
    each way like GeLU, squared ReLU two forward and three backward (config/framework.py)."""
    if kind == "swiglu":
        _passes(ph, "swiglu:" + name, tokens * width, stack.swiglu)
    elif kind == "squared_relu":
        _passes(ph, "sqrelu:" + name, tokens * width, stack.squared_relu)
    else:
        _passes(ph, "gelu:" + name, tokens * width, stack.gelu)


def _column_group(ph: Phases, tokens: int, k_in: int, outs: tuple[tuple[str, int], ...], tp: int, sp: bool) -> None:
    """Several column-parallel linears reading the same input (torchtitan's separate wq/wk/wv and
    w1/w3): the input is all-gathered once (``PrepareModuleInput`` to Replicate, SP) and its
    gradient reduced once after all their dgrads — the collectives of one ``column_linear``,
    the GEMMs of each. That gradient is the sum of several dgrads (autograd accumulates them
    into the shared input's grad), so no single GEMM can carry its reduction in chunks: TP
    overlap decomposes the forward all-gather with the GEMMs that read it, not this one
    (``Collective.decomposable``)."""
    full = tokens * k_in * BF16
    first = outs[0][0]
    one = len(outs) == 1
    if tp > 1 and sp:
        ph.fwd.append(Collective("ag:" + first, "all_gather", full, "tp", tp))
    for name, n in outs:
        gemm_triple(ph, name, tokens, k_in, n)
    if tp > 1 and sp:
        ph.bwd.append(Collective("ag-bwd:" + first, "all_gather", full, "tp", tp, overlap_with="dgrad:" + first))
        ph.wgt.append(Collective("rs-bwd:" + first, "reduce_scatter", full, "tp", tp, overlap_with="wgrad:" + first,
                                 decomposable=one))
    elif tp > 1:
        ph.wgt.append(Collective("ar-bwd:" + first, "all_reduce", full, "tp", tp, overlap_with="wgrad:" + first,
                                 decomposable=one))


def dense_mlp_block(d: Dims, name: str = "mlp", width: int | None = None) -> Phases:
    """Pre-norm MLP: norm → FC1 (gate+up for SwiGLU) → activation → FC2 → residual."""
    ph = Phases()
    f = d.ffn if width is None else width
    _norm(ph, "ln2", d.sp_tokens, d.h, d.stack)
    _mlp_body(ph, d, name, f)
    _residual(ph, name, d)
    return ph


def _mlp_body(ph: Phases, d: Dims, name: str, f: int) -> None:
    S, h, tp, sp = d.tokens, d.h, d.tp, d.sp
    if d.gated and not d.stack.fused_gate_up:  # torchtitan FeedForward: w1 and w3 (models/llama/model.py)
        _column_group(ph, S, h, (("fc1:" + name, f), ("fc3:" + name, f)), tp, sp)
    else:
        column_linear(ph, "fc1:" + name, S, h, (2 if d.gated else 1) * f, tp, sp)
    _activation(ph, name, S, f, d.activation, d.stack)
    row_linear(ph, "fc2:" + name, S, f, h, tp, sp)


def moe_block(d: Dims, model: ModelSpec, dispatcher: str, shared_overlap: bool = False) -> Phases:
    """MoE MLP (Megatron-Core ``MoELayer``): router GEMM, permute, token dispatch over EP, grouped
    expert GEMMs, combine, unpermute; shared experts run as a dense MLP beside the routed ones.

    Token dispatch: the alltoall and deepep dispatchers as simengine/workload/dispatch.py describes
    them (per-tier pricing in simengine/cost/moe_comm.py). The all-gather dispatcher
    (``MoEAllGatherTokenDispatcher``) gathers all ep ranks' tokens instead and reduce-scatters the
    expert outputs.

    Latent MoE (``ModelSpec.moe_latent_size``; Megatron-Core ``MoELayer.preprocess`` /
    ``postprocess``): the router reads the h-wide tokens, ``fc1_latent_proj`` (h → latent) runs
    before the permutation, and everything routed — permute, all-to-all, expert GEMMs, combine,
    unpermute — is ``latent`` wide, then ``fc2_latent_proj`` (latent → h); the shared experts read
    the h-wide tokens (moe_layer.py: "the shared expert must run on the full hidden_states").
    """
    ph = Phases()
    T, h = d.moe_tokens, d.h
    x = d.moe_dim  # the routed width: h, or the latent size
    routed = d.tokens_per_expert * d.experts_local  # tokens processed on the hottest rank
    _norm(ph, "ln2", d.sp_tokens, h)
    gemm_triple(ph, "router", T, h, model.num_experts)
    if x != h:
        gemm_triple(ph, "latent_fc1", T, h, x)
    # Router after the gating GEMM (Megatron-Core TopKRouter / moe_utils): softmax or sigmoid,
    # group-limited top-k (group max, top groups, mask, masked fill, top-k), probability scaling,
    # scatter of the gates and of the routing map, tokens-per-expert count, and the auxiliary
    # load-balancing loss (a second softmax, sums, means, the loss scaler) — about 20 small
    # kernels forward and 10 in backward, each paying the per-kernel overhead.
    ph.fwd.append(Memory("router-softmax-topk-aux", 6 * T * model.num_experts * 4, kernels=20))
    ph.bwd.append(Memory("router-bwd", 4 * T * model.num_experts * 4, kernels=10))
    if model.is_moe and model.expert_bias:
        # aux-loss-free balancing (DeepSeek-V3 report §2.1.2; Megatron-Core TopKRouter with
        # moe_router_enable_expert_bias): scores + bias for the top-k choice (read the fp32 scores,
        # write the biased copy) and the per-expert token count kept for the step's bias update
        ph.fwd.append(Memory("router-expert-bias", 2 * T * model.num_experts * 4 + model.num_experts * 4, kernels=2))
    permute = (T + routed) * x * BF16
    ph.fwd.append(Memory("permute", 2 * permute, kernels=2))  # TE moe_permute: row-id map + gather
    ph.bwd.append(Memory("permute-bwd", 2 * permute, kernels=2))
    if d.ep > 1:
        if dispatcher == "allgather":
            ph.fwd.append(Collective("ep-ag:dispatch", "all_gather", T * x * BF16 * d.ep, "ep", d.ep))
            ph.fwd.append(Collective("ep-rs:combine", "reduce_scatter", T * x * BF16 * d.ep, "ep", d.ep))
            ph.bwd.append(Collective("ep-ag:dcombine", "all_gather", T * x * BF16 * d.ep, "ep", d.ep))
            ph.bwd.append(Collective("ep-rs:ddispatch", "reduce_scatter", T * x * BF16 * d.ep, "ep", d.ep))
        else:
            ep_alltoall(ph, d, model, dispatcher, d.moe_dispatch_dtype, d.moe_imbalance)
    if d.etp > 1:
        # Expert TP (Megatron-Core MoEAlltoAllTokenDispatcher.dispatch_postprocess /
        # combine_preprocess): the rows received from the EP all-to-all are all-gathered over the
        # expert-TP group (gather_from_sequence_parallel_region, group=tp_group) and the expert
        # output reduce-scattered back. The full buffer is etp × the rows received, i.e. ``routed``,
        # the rows the local experts process (tokens_per_expert already counts the etp gather).
        gathered = routed * x * BF16
        ph.fwd.append(Collective("etp-ag", "all_gather", gathered, "etp", d.etp))
        ph.fwd.append(Collective("etp-rs", "reduce_scatter", gathered, "etp", d.etp))
        ph.bwd.append(Collective("etp-ag-bwd", "all_gather", gathered, "etp", d.etp))
        ph.bwd.append(Collective("etp-rs-bwd", "reduce_scatter", gathered, "etp", d.etp))
        if dispatcher == "alltoall":
            # dispatch_postprocess gathers the a2a'd routing probabilities over etp as well (fp32 per
            # row, like the probs all-to-all in dispatch.py); their gradient is reduce-scattered back.
            ph.fwd.append(Collective("etp-ag:probs", "all_gather", routed * 4, "etp", d.etp))
            ph.bwd.append(Collective("etp-rs:dprobs", "reduce_scatter", routed * 4, "etp", d.etp))
    g, mt, f = d.experts_local, d.tokens_per_expert, d.moe_ffn
    if g and mt:
        fc1_out = (2 if d.gated else 1) * f
        ph.fwd.append(GroupedGemm("fwd:expert_fc1", g, mt, fc1_out, x, "TN"))
        ph.bwd.append(GroupedGemm("dgrad:expert_fc1", g, mt, x, fc1_out, "NN"))
        ph.wgt.append(GroupedGemm("wgrad:expert_fc1", g, fc1_out, x, mt, "NT"))
        if model.swiglu_limit and d.gated and d.stack.name == "megatron-te":
            _glu_clamp(ph, g * mt * f)
        _activation(ph, "experts", g * mt, f, d.activation)
        ph.fwd.append(GroupedGemm("fwd:expert_fc2", g, mt, x, f, "TN"))
        ph.bwd.append(GroupedGemm("dgrad:expert_fc2", g, mt, f, x, "NN"))
        ph.wgt.append(GroupedGemm("wgrad:expert_fc2", g, x, f, mt, "NT"))
        if model.linear_bias and d.stack.name == "megatron-te":
            _expert_fc2_bias(ph, g, g * mt * x)
    ph.fwd.append(Memory("unpermute", 2 * permute, kernels=2))
    ph.bwd.append(Memory("unpermute-bwd", 2 * permute, kernels=2))
    if x != h:
        gemm_triple(ph, "latent_fc2", T, x, h)
    if d.shared_ffn:
        _mlp_body(ph, d, "shared", d.shared_ffn)
        if shared_overlap and d.ep > 1:
            _shared_beside_a2a(ph)
    _residual(ph, "moe", d)
    return ph


def _glu_clamp(ph: Phases, elems: int) -> None:
    """The clamped GLU of the routed experts (``ModelSpec.swiglu_limit``; GPT-OSS: Megatron-Bridge
    gpt_oss_bridge.py ``activation_func_clamp_value = 7.0``), ``elems`` = routed rows × f.

    Megatron-Core ``TEGroupedMLP.bias_act_func`` → ``weighted_bias_quick_geglu_impl``
    (megatron/core/fusions/fused_bias_geglu.py, core_v0.15 to core_v0.19) clamps in eager PyTorch
    before its fused GLU kernel: ``x_glu, x_linear = input.chunk(2, -1)``, then
    ``torch.cat((x_glu.clamp(max=c), x_linear.clamp(min=-c, max=c)), -1)``. Forward (bf16): each
    clamp reads and writes one half (4 B per element of f each), the concatenation reads and writes
    both halves (8 B) → 16 B, 3 kernels. Backward, autograd's ``clamp_backward`` (PyTorch
    FunctionsManual.cpp: ``where(self <= max, grad, 0)``; with both bounds
    ``where((self >= min).logical_and_(self <= max), grad, 0)``, each with an ``at::scalar_tensor``
    zero): the gate's comparison (read 2, write a 1-byte mask) and ``where`` (read the mask and
    the gradient, write 2) → 8 B; the linear half's two comparisons, ``logical_and_`` and
    ``where`` → 14 B; the ``chunk``'s backward concatenates the two gradients (8 B) → 30 B, 9
    kernels. Under the ``moe_act`` recompute module the forward runs again in backward
    (workload/recompute.py). The fused GLU itself is the activation pass priced next to it."""
    ph.fwd.append(Memory("glu-clamp:experts", 16 * elems, kernels=3))
    ph.bwd.append(Memory("glu-clamp-bwd:experts", 30 * elems, kernels=9))


def _expert_fc2_bias(ph: Phases, experts: int, elems: int) -> None:
    """The routed experts' second-linear bias, added outside the GEMM (models with biased linears,
    e.g. GPT-OSS: Megatron-Bridge gpt_oss_bridge.py provider_bridge ``add_bias_linear = True``).

    Megatron-Core ``TEGroupedMLP`` builds ``linear_fc2`` with ``skip_bias_add=True`` (TE
    ``GroupedLinear(return_bias=True)``: the bias is returned, not put in the GEMM epilogue) and
    then runs ``TEGroupedMLP._apply_bias`` (megatron/core/transformer/moe/experts.py, core_v0.15
    to core_v0.19): ``torch.cat([t + b * p for t, b, p in zip(split(out, tokens_per_expert),
    biases, split(probs, tokens_per_expert))])`` — eager PyTorch, per local expert a multiply and
    an add, then one concatenation. fc1's bias is not this: ``skip_bias_add=False`` puts it in
    the cuBLAS epilogue (TE grouped_linear.py, ``general_grouped_gemm(..., bias=biases)``) and its
    gradient in the weight-gradient GEMM's epilogue.

    Bytes per routed element (bf16: the probabilities have the router's dtype, the input's unless
    ``moe_router_dtype`` is set, which the GPT-OSS bridge leaves unset):
      forward  b·p writes 2, t + b·p reads 4 and writes 2, the concatenation reads 2 and writes 2
               → 12 B, 2 kernels per expert + 1;
      backward autograd of the product (MulBackward0 → ``grad * other`` then ``sum_to_size``)
               for b (over the rows) and for p (over the features): 2 · (read 2, write 2, read 2),
               and SplitWithSizesBackward's ``cat`` of the per-expert input gradients (read 2,
               write 2) → 16 B, 4 kernels per expert + 2 (the input's and the probabilities'
               concatenations); then every expert bias's gradient, fc1's (from TE's weight-gradient
               epilogue) and fc2's, is added into its main_grad by Megatron-Core's DDP hook
               (distributed/distributed_data_parallel.py ``_make_backward_post_hook``:
               ``param.main_grad.add_(param.grad.data)``), one tiny kernel each: 2 per expert."""
    ph.fwd.append(Memory("expert-fc2-bias", 12 * elems, kernels=2 * experts + 1))
    ph.bwd.append(Memory("expert-fc2-bias-bwd", 16 * elems, kernels=6 * experts + 2))


# --moe-shared-expert-overlap (Megatron-Core MoEAlltoAllTokenDispatcher.token_dispatch /
# token_combine with SharedExpertMLP on its own stream): "tokens A2A -> shared experts fc1 ->
# probs A2A" forward, fc2 (linear_fc2_forward) beside the combine; in backward the autograd
# stream waits (_BackwardStreamWait) put fc1's / fc2's input gradient beside the reverse
# all-to-alls. The probs all-to-all stays alone (fc1 is launched before it).
_SHARED_PARTNER = {"ep-a2a:dispatch": "fwd:fc1:shared", "ep-a2a:combine": "fwd:fc2:shared",
                   "ep-a2a:dcombine": "dgrad:fc2:shared", "ep-a2a:ddispatch": "dgrad:fc1:shared"}


def _shared_beside_a2a(ph: Phases) -> None:
    for ops in (ph.fwd, ph.bwd):
        for i, op in enumerate(ops):
            partner = _SHARED_PARTNER.get(getattr(op, "name", ""))
            if partner and isinstance(op, Collective):
                ops[i] = replace(op, overlap_with=partner)
