"""Per-rank dimensions of one micro-batch: what TP, SP, CP, EP do to each shape."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config.framework import FRAMEWORKS, Stack
from ..config.generation import gpu_generation
from ..config.scenario import Scenario
from .ops import operand_bytes


@dataclass(frozen=True, slots=True)
class Dims:
    h: int            # hidden size
    tokens: int       # S = b·s/cp: tokens of one micro-batch on this rank before the SP shard
    sp_tokens: int    # tokens held between TP regions: S/tp with sequence parallelism, else S
    b: int
    s: int            # full sequence length
    tp: int
    cp: int
    sp: bool
    heads: int        # query heads on this rank
    kv_heads: int     # kv heads on this rank (replicated when tp > num_kv_heads)
    d_qk: int
    d_v: int
    ffn: int          # dense FFN width per rank
    gated: bool       # SwiGLU: FC1 produces 2·ffn
    activation: str   # ModelSpec.activation: which pointwise kernels run between FC1 and FC2
    vocab: int        # padded vocab per rank
    dropout: bool
    attn_dropout: bool
    unfused_attention: bool
    fp8: bool         # GEMM inputs quantized by a low-precision recipe (fp8 or nvfp4; workload/fp8_recipes.py)
    # MoE (zeros on dense models)
    experts_local: int
    moe_ffn: int      # expert FFN width per rank (÷ etp)
    moe_tokens: int   # tokens entering the router on this rank
    tokens_per_expert: int  # tokens each local expert processes (hottest rank, after padding/imbalance)
    shared_ffn: int   # shared-expert width per rank
    ep: int
    etp: int
    # software stack (StrategySpec.framework): kernel fusion, GEMM grouping, attention kernel
    stack: Stack = FRAMEWORKS["megatron-te"]
    attention_kernel: str = "cudnn"
    moe_dispatch_dtype: str = "bf16"   # forward dispatch precision (StrategySpec.moe_dispatch_dtype)
    moe_imbalance: float = 1.0         # hottest rank's tokens / mean (StrategySpec.moe_load_imbalance)
    attention_window: int = 0          # sliding window of the block's core attention (0 = full)
    lora: str = ""                     # LoRA targets (StrategySpec.lora_targets) when peft="lora", else ""
    lora_rank: int = 0
    doc_len: int = 0                   # packed documents' length (StrategySpec.packed_doc_len), 0 = not packed
    moe_dim: int = 0                   # width of the routed tokens (ModelSpec.moe_dim: h, or the latent size); 0 on dense models
    fp8_recipe: str = "tensorwise"     # StrategySpec.fp8_recipe when fp8, "nvfp4" under NVFP4, else "tensorwise" (workload/fp8_recipes.py)
    q_bytes: float = 1.0               # bytes per element of a quantized GEMM operand (ops.operand_bytes: fp8 1, nvfp4 0.5625)
    fp8_tn_only: bool = True           # the GPU's FP8 GEMMs take only the TN layout (all but datacenter Blackwell)
    grad_accum_bytes: float = 0.0      # per weight element, a separate gradient-accumulation pass (``grad_accumulation_bytes``)


def dims_of(sc: Scenario) -> Dims:
    m, st = sc.model, sc.strategy
    tp, cp = st.tp, st.cp
    tokens = st.micro_batch_size * st.seq_len // cp
    sp = st.sequence_parallel and tp > 1
    heads = m.num_attention_heads // tp
    kv = m.num_attention_heads if m.attention == "mla" else m.kv_heads
    kv_local = max(kv // tp, 1)
    experts_local = moe_ffn = moe_tokens = tpe = shared = 0
    ep, etp = st.ep, st.etp_size
    if m.is_moe:
        experts_local = m.num_experts // ep
        moe_ffn = m.expert_ffn // etp
        # Megatron-Core MoE: the layer input is the SP shard; each TP rank routes its own tokens
        # (token_dispatcher.py, tokens are split over TP before dispatch when tp>1).
        moe_tokens = max(tokens // tp, 1)
        routed = moe_tokens * m.top_k
        if m.capacity_factor is not None and m.pad_to_capacity:
            # Capacity padding: every expert receives exactly ceil(T·k/E·cf) tokens from each of the
            # ep·etp source ranks (Megatron --moe-pad-expert-input-to-capacity; validation README).
            per_src = math.ceil(routed * m.capacity_factor / m.num_experts)
            tpe = per_src * ep * etp
        elif m.capacity_factor is not None:
            # Drop without padding: an expert keeps at most its capacity, so the hottest one holds
            # min(imbalance, cf) × the mean (Megatron topk_routing_with_capacity drops the rest
            # before dispatch)
            tpe = math.ceil(routed * ep * etp / m.num_experts * min(st.moe_load_imbalance, m.capacity_factor))
        else:
            # Dropless: balanced routing gives T·k·ep·etp/E per local expert (after the EP all-to-all
            # the tokens are all-gathered over ETP); the hottest rank gets moe_load_imbalance times
            # the mean (the step follows the slowest rank).
            tpe = math.ceil(routed * ep * etp / m.num_experts * st.moe_load_imbalance)
        shared = m.shared_ffn // tp
    return Dims(
        h=m.hidden_size, tokens=tokens, sp_tokens=tokens // tp if sp else tokens,
        b=st.micro_batch_size, s=st.seq_len, tp=tp, cp=cp, sp=sp,
        heads=heads, kv_heads=kv_local, d_qk=m.qk_head_dim, d_v=m.v_dim,
        ffn=m.ffn_hidden_size // tp, gated=m.activation == "swiglu", activation=m.activation,
        vocab=sc.vocab_padded // tp, dropout=m.hidden_dropout > 0,
        attn_dropout=m.attention_dropout > 0, unfused_attention=st.attention_impl == "unfused",
        fp8=st.dtype in ("fp8", "nvfp4"), q_bytes=operand_bytes(st.dtype) if st.dtype != "bf16" else 1.0,
        experts_local=experts_local, moe_ffn=moe_ffn, moe_tokens=moe_tokens,
        tokens_per_expert=tpe, shared_ffn=shared, ep=ep, etp=etp,
        stack=FRAMEWORKS[st.framework], attention_kernel=st.attention_kernel_name,
        moe_dispatch_dtype=st.moe_dispatch_dtype, moe_imbalance=_hot_rank_load(m, st.moe_load_imbalance),
        attention_window=_uniform_window(m),
        lora=st.lora_targets if st.peft == "lora" else "", lora_rank=st.lora_rank if st.peft == "lora" else 0,
        doc_len=st.packed_doc_len if st.packed_doc_len and st.packed_doc_len < st.seq_len else 0,
        moe_dim=m.moe_dim if m.is_moe else 0,
        fp8_recipe={"fp8": st.fp8_recipe, "nvfp4": "nvfp4"}.get(st.dtype, "tensorwise"),
        # TransformerEngine utils.py is_non_tn_fp8_gemm_supported: sm100–sm119 (and sm130+) run FP8
        # GEMMs in any layout, so a gathered FP8 tensor needs no transposed copy there
        fp8_tn_only=st.dtype != "fp8" or gpu_generation(sc.system.gpu.name) != "blackwell",
        grad_accum_bytes=grad_accumulation_bytes(st),
    )


def grad_accumulation_bytes(st) -> float:
    """Bytes per weight element that accumulating one micro-batch's weight gradient moves when the
    wgrad GEMM does not accumulate it itself, 0 when it does.

    Megatron-LM without gradient-accumulation fusion: the wgrad GEMM writes a fresh bf16 gradient
    and the DDP backward hook adds it to the accumulated one, one ``add_`` kernel per parameter
    (megatron/core/distributed/distributed_data_parallel.py ``_make_backward_post_hook``:
    ``param.main_grad.add_(param.grad.data)``; the same hook in the 2021 code,
    megatron/model/distributed.py ``_make_param_hook``; without contiguous buffers autograd's
    AccumulateGrad does the same ``grad += new`` from the second micro-batch on, counted here for
    every micro-batch, ≤ 1/m of it): read the new gradient (2 B) and read and write the accumulated
    one (4 B each in fp32, ``fp32_main_grads``; 2 B in half precision). With the fusion
    (``fused_weight_gradient_mlp_cuda``, Megatron-LM 83b1e42f30, 2022-02) the GEMM accumulates into
    the fp32 main grad in its epilogue (cost/compute.py prices that output). Only Megatron's stack
    is priced so: FSDP2 (the torch stacks) reduce-scatters each micro-batch's unsharded gradient
    and accumulates the 1/dp shard, and DeepSpeed accumulates in its own engine buffers."""
    if st.gradient_accumulation_fusion or st.framework != "megatron-te":
        return 0.0
    return 2.0 + 2.0 * (4.0 if st.fp32_main_grads else 2.0)


def _hot_rank_load(m, imbalance: float) -> float:
    """The hottest receiving rank's load / mean in the all-to-all: capacity caps it when tokens
    are dropped (unpadded; padding is handled in workload/dispatch.py)."""
    if m.capacity_factor is not None and not m.pad_to_capacity:
        return min(imbalance, m.capacity_factor)
    return imbalance


def _uniform_window(m) -> int:
    """The window every layer shares (the attention block is built once for all layers); with a
    mixed pattern (``full_attention_interval``) the block stays full attention and
    ``simengine.workload.window`` prices the windowed layers."""
    return int(m.attention_window or 0) if m.full_attention_interval is None else 0
