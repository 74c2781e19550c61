"""StrategySpec: parallel layout, batch, precision, memory and overlap knobs.

Rank order is Megatron-Core's: TP innermost, then CP, then DP (EP folds into DP×CP for experts),
PP outermost (megatron/core/parallel_state.py, ``RankGenerator(order="tp-cp-ep-dp-pp")``).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from ..schedule import SCHEDULE_NAMES, get_schedule
from .spec import Spec
from .framework import FRAMEWORKS, AttentionKernel, FrameworkName, FsdpPattern, framework_help

# The names come from the schedule registry (one module per schedule), so the JSON schema's enum
# and the studio's schedule switcher list exactly the schedules the engine has.
ScheduleName = Literal[SCHEDULE_NAMES]  # type: ignore[valid-type]
# Megatron-Core TransformerConfig.recompute_modules choices of a decoder layer (transformer_config.py)
RecomputeModule = Literal["core_attn", "layernorm", "moe_act", "mla_up_proj", "mlp", "moe", "shared_experts"]

MAX_VPP = 128   # StrategySpec.vpp


class StrategySpec(Spec):

    name: str = Field("custom", max_length=120, description="Display name of the strategy.")
    tp: int = Field(1, ge=1, le=1024, description="Tensor-parallel size.")
    pp: int = Field(1, ge=1, le=1024, description="Pipeline-parallel stages.")
    dp: int | None = Field(None, ge=1, le=10_000_000, description="Data-parallel size; None = num_gpus / (tp·pp·cp).")
    cp: int = Field(1, ge=1, le=1024, description="Context-parallel size (sequence split for attention).")
    ep: int = Field(1, ge=1, le=65_536, description="Expert-parallel size (MoE), carved out of DP×CP.")
    etp: int | None = Field(None, ge=1, le=1024, description="Expert tensor-parallel size; None = tp (Megatron-LM arguments.py: expert_tensor_parallel_size defaults to tensor_model_parallel_size).")
    vpp: int = Field(1, ge=1, le=MAX_VPP, description="Virtual pipeline chunks per rank (interleaved schedule).")
    sequence_parallel: bool = Field(True, description="Megatron sequence parallelism (norms/dropout sharded over TP; AG/RS instead of AR).")
    micro_batch_size: int = Field(1, ge=1, le=65_536, description="Sequences per micro-batch.")
    global_batch_size: int = Field(..., ge=1, le=100_000_000, description="Sequences per optimizer step.")
    seq_len: int = Field(..., ge=1, le=16_777_216, description="Tokens per sequence.")
    dtype: Literal["bf16", "fp8", "nvfp4"] = Field("bf16", description=(
        "GEMM precision; master weights stay fp32. fp8: the scaling recipe is fp8_recipe. nvfp4: TransformerEngine "
        "NVFP4BlockScaling (Megatron-Core --fp4-format e2m1 --fp4-recipe nvfp4): every transformer-block linear's "
        "fprop, dgrad and wgrad GEMM in FP4 with a scale per 16 values, the wgrad operands through a random "
        "Hadamard transform (workload/fp8_recipes.py); needs megatron-te and a GPU with an FP4 peak."))
    fp8_recipe: Literal["tensorwise", "delayed", "mxfp8", "rowwise"] = Field("tensorwise", description=(
        "With dtype='fp8', how tensors are scaled (workload/fp8_recipes.py). tensorwise = one scale per tensor from "
        "the tensor itself (TransformerEngine Float8CurrentScaling, Megatron --fp8-recipe tensorwise; torchao "
        "TENSORWISE): an amax pass before each cast. delayed = TransformerEngine DelayedScaling (Megatron's default "
        "--fp8-recipe delayed): scales from past amaxes, so the LayerNorm-fused linears' norm writes fp8 itself. "
        "mxfp8 = TransformerEngine MXFP8BlockScaling on Blackwell (a scale per 32 values, both axes quantized at "
        "once). delayed and mxfp8 need framework megatron-te; rowwise = torchao's ROWWISE recipe on the torch "
        "stacks (a scale per row: each GEMM operand cast twice, along each axis, a rescale after each backward "
        "GEMM, and no async-TP fusion of the all-gathers). Ignored for bf16."))
    dp_shard: int | None = Field(None, ge=1, le=10_000_000, description=(
        "HSDP: the ZeRO shard group inside DP (torchtitan data_parallel_shard_degree; Megatron partial distributed "
        "optimizer, num_distributed_optimizer_instances = dp/dp_shard). Weights/grads/optimizer states shard over "
        "dp_shard·cp; the dp/dp_shard replicas all-reduce the sharded gradients once per step. None = all of DP."))
    zero_stage: int = Field(1, ge=0, le=3, description="0 = DDP; 1 = optimizer states sharded (Megatron distributed optimizer); 2 = + gradients; 3 = + weights (FSDP).")
    recompute: Literal["none", "selective", "full"] = Field("none", description="Activation recomputation: selective = the recompute_modules (default the attention core, Korthikanti et al. 2022) on Megatron's and DeepSpeed's stacks, torchtitan's per-op selective AC on the torch stacks (every other GEMM output and SDPA kept, the rest re-run); full = whole block.")
    recompute_num_layers: int | None = Field(None, ge=0, le=1024, description="With full recompute: layers per stage that are recomputed (None = all).")
    recompute_modules: tuple[RecomputeModule, ...] = Field(("core_attn",), description=(
        "With selective recompute: the Megatron-Core submodules re-run in backward (--recompute-modules; "
        "transformer_config.py recompute_modules, default ['core_attn']): core_attn (attention core), layernorm "
        "(the norms that are separate modules: MoE pre-MLP and MLA input norms), moe_act (expert activation), "
        "mla_up_proj (MLA up-projections and RoPE), mlp (dense MLP), moe (the whole MoE layer, all-to-all included), "
        "shared_experts."))
    schedule: ScheduleName = Field("1f1b", description="Pipeline schedule.")
    decoder_first_pipeline_num_layers: int | None = Field(None, ge=1, le=1024, description="Transformer layers on the first pipeline stage (Megatron-LM --decoder-first-pipeline-num-layers); the middle stages split the rest evenly. None = even split.")
    decoder_last_pipeline_num_layers: int | None = Field(None, ge=1, le=1024, description="Transformer layers on the last pipeline stage (Megatron-LM --decoder-last-pipeline-num-layers). None = even split.")
    pipeline_layers: list[Annotated[int, Field(ge=0, le=1024)]] | None = Field(None, max_length=4096, description="Explicit transformer layers per virtual pipeline stage, in data-flow stage order (pp·vpp entries, entry v·pp + rank is rank's chunk v; 2·pp for dualpipev's V; pp for dualpipe, whose two directions hold the same split), like Megatron-Core's pipeline_model_parallel_layout. None = even split.")
    overlap_grad_reduce: bool = Field(False, description="Overlap the DP gradient reduce-scatter / all-reduce with backward (bucketed).")
    overlap_param_gather: bool = Field(False, description="Overlap the parameter all-gather (ZeRO-1/3) with forward.")
    tp_comm_overlap: bool = Field(False, description="Overlap TP collectives with GEMMs (TransformerEngine userbuffers).")
    overlap_p2p_comm: bool = Field(True, description=(
        "Non-blocking pipeline sends on their own stream (Megatron --overlap-p2p-communication); otherwise the compute "
        "stream waits for each send/recv. On megatron-te only the interleaved schedule reads it (Megatron-LM turns it "
        "off without virtual stages; its other schedules send in place). Default: on for megatron-te (Megatron-LM's default since 2023-05, "
        "--no-overlap-p2p-communication turns it off), off for the other stacks."))
    overlap_slowdown: float = Field(1.05, ge=1.0, le=3.0, description="Compute slowdown while communication overlaps it (SM and HBM contention).")
    moe_dispatcher: Literal["alltoall", "allgather", "deepep"] = Field("alltoall", description="MoE token dispatcher: Megatron alltoall (one copy per routed expert), allgather, or deepep (Megatron flex + DeepEP: one copy per destination node over the scale-out network, then fanned out over NVLink).")
    moe_dispatch_dtype: Literal["bf16", "fp8"] = Field("bf16", description="Precision of the forward token dispatch (DeepEP FP8 dispatch / Megatron moe_dispatch_fwd_dtype=mxfp8: 1 B per element plus a scale per 32); combine and backward stay bf16.")
    moe_shared_expert_overlap: bool = Field(False, description=(
        "Megatron-Core --moe-shared-expert-overlap: the shared expert runs on its own stream beside the token "
        "all-to-all (fc1 beside the dispatch, fc2 beside the combine, and their backward beside the reverse "
        "all-to-alls; transformer/moe/token_dispatcher.py, shared_experts.py). Needs shared experts, ep > 1 and "
        "the alltoall or deepep (flex) dispatcher."))
    overlap_moe_expert_parallel_comm: bool = Field(False, description=(
        "Megatron-Core --overlap-moe-expert-parallel-comm (the 1F1B A2A overlap): in the steady state the forward "
        "of one micro-batch and the backward of another run as one overlapped pair, each one's dispatch/combine "
        "hidden behind the other's compute (pipeline_parallel/combined_1f1b.py). Needs ep > 1, the alltoall or "
        "deepep (flex) dispatcher, no full recompute, pp = 1 with schedule 1f1b or schedule interleaved, and "
        "excludes moe_shared_expert_overlap."))
    moe_load_imbalance: float = Field(1.0, ge=1.0, le=64.0, description="Tokens on the hottest expert rank / mean; the step follows the slowest rank.")
    cp_comm_type: Literal["a2a", "p2p", "allgather"] = Field("p2p", description="Context-parallel attention: Ulysses all-to-all, ring p2p, or KV all-gather.")
    attention_impl: Literal["flash", "unfused"] = Field("flash", description="Flash attention (no s² activations) or unfused softmax attention (stores the s² scores, Korthikanti et al. 2022).")
    p2p_scatter_gather: bool = Field(False, description="Without SP, each TP rank sends 1/tp of the pipeline activation and the receiver all-gathers it (Megatron-LM ≤ 2022, Narayanan et al. 2021 §4.1); Megatron-Core sends the full tensor.")
    fused_cross_entropy: bool = Field(True, description="Fused vocab-parallel cross-entropy (no fp32 copy of the logits).")
    gradient_accumulation_fusion: bool = Field(True, description="wgrad GEMMs accumulate straight into fp32 main grads (Megatron).")
    compiled_loss: bool = Field(False, description=(
        "torch stacks: the loss function itself runs under torch.compile (torchtitan compiles it with "
        "training.compile since pytorch/torchtitan#1033, 2025-04-02; before that it ran eager). Only the "
        "loss's memory reads it (cost/activations.py head_activations)."))
    cpu_offload_layers: int = Field(0, ge=0, le=100_000, description=(
        "Megatron-Core --cpu-offloading-num-layers (activations only): the saved activations of the first this-many "
        "transformer layers are copied to host memory in the forward and back before their backward "
        "(TransformerEngine cpu_offload), over system.gpu.host_link_gbs. Megatron-Core allows it without pipeline "
        "parallelism and recompute, and for fewer layers than the model has."))
    fp32_main_grads: bool = Field(True, description="Gradients kept and reduced in fp32 (4 B/param); False = bf16.")
    adam_moments_dtype: Literal["fp32", "bf16"] = Field("fp32", description=(
        "Adam's first and second moments: fp32 (4 + 4 B/param) or bf16 (2 + 2 B/param; Megatron-Core "
        "--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16, TE FusedAdam; the "
        "DeepSeek-V3 report §3.3 and Megatron-Bridge's DeepSeek/Qwen3 MoE perf recipes). The fp32 master "
        "weights stay: the optimizer states go from 12 to 8 B/param."))
    fp8_param_gather: bool = Field(False, description=(
        "Parameters all-gathered in fp8 (1 B/param for the transformer-block weights). On megatron-te: FP8 "
        "primary weights (Megatron --fp8-param-gather; every Megatron-Bridge FP8 recipe but subchannel), the "
        "block weights live only in TE's fp8 storage (no bf16 copy); needs zero_stage >= 1. On the torch "
        "stacks: torchao's FSDP2 float8 all-gather (torchtitan enable_fsdp_float8_all_gather), the fp32 "
        "shards cast to fp8 before the gather; needs FSDP (zero_stage 3) and fp8_recipe='tensorwise'. "
        "Needs dtype='fp8'. With dtype='nvfp4': Megatron-Core --fp4-param-gather (FP4 primary weights, 0.5625 "
        "B/param gathered: the rowwise copy, the columnwise one re-made by a transpose)."))
    packed_doc_len: int | None = Field(None, ge=1, le=16_777_216, description=(
        "Sequence packing (SFT): documents of this many tokens packed into each seq_len sequence, attention "
        "confined to each document (THD layout with cu_seqlens, TransformerEngine fused attention; Megatron-Bridge "
        "packed_sequence_specs). Attention work then grows with the document, not the sequence: s·L/2 causal "
        "pairs instead of s²/2. The mean document length; varied lengths cost more (Σ L² ≥ n·mean²). "
        "Must divide seq_len; not with cp > 1. None = one document per sequence."))
    # ---- parameter-efficient fine-tuning (workload/lora.py) ----
    peft: Literal["none", "lora"] = Field("none", description=(
        "Fine-tuning with LoRA (Hu et al. 2021): the base weights are frozen (bf16, no gradients, no optimizer "
        "states, no weight-gradient GEMMs, no DP gradient traffic) and a rank-r adapter A·B beside each target "
        "linear trains (NeMo ParallelLinearAdapter / Megatron-Bridge LoRALinear). Dense models; not with ZeRO-3."))
    lora_rank: int = Field(32, ge=1, le=4096, description="LoRA adapter rank r (NeMo lora_tuning.adapter_dim, Megatron-Bridge LoRA dim: 32).")
    lora_targets: Literal["qkv", "all"] = Field("qkv", description=(
        "Linears with an adapter: qkv = the fused QKV projection (NeMo 1.0 target_modules ['attention_qkv'], "
        "Megatron-Bridge performance recipes ['linear_qkv']); all = QKV, out-projection, FC1 and FC2 "
        "(NeMo 2.0 / Megatron-Bridge LoRA default). The other linears are frozen without one."))
    allocator_overhead: float = Field(0.05, ge=0.0, le=1.0, description="Reserved/allocated − 1 of PyTorch's caching allocator (fragmentation).")
    straggler_factor: float = Field(1.0, ge=1.0, le=3.0, description="Multiplier on the pipeline time for node-to-node variation.")
    # ---- software stack and overheads at scale (simengine/config/framework.py, cost/scale.py) ----
    framework: FrameworkName = Field("megatron-te", description=framework_help())
    attention_kernel: AttentionKernel | None = Field(None, description=(
        "Attention kernel family: cudnn (TE fused attention), flash3, flash2, sdpa (PyTorch SDPA = flash-attention-2 "
        "kernels); None = the framework's own."))
    fsdp_pattern: FsdpPattern | None = Field(None, description=(
        "How ZeRO-3 is implemented: megatron-fsdp, fsdp2 (PyTorch fully_shard), zero3 (DeepSpeed), zero3-2021 (DeepSpeed v0.3 on PyTorch 1.8: per-tensor list collectives, blocking fetch — cost/deepspeed_v03.py); None = the framework's own."))
    step_overhead_ms: float = Field(0.0, ge=0.0, le=1e6, description=(
        "Per-step host work outside the model: data-loader next(), loss/grad-norm logging syncs, LR scheduler, ms. "
        "Default 0: no measurement here supports another (a prefetched loader hands over a ready batch); set it from "
        "your logs for on-the-fly tokenisation or heavy logging."))
    jitter_cv: float = Field(0.0, ge=0.0, le=0.5, description=(
        "Coefficient of variation of one GPU's compute speed (clocks, thermals, OS noise); the step waits for the "
        "slowest of all synchronising GPUs: × (1 + cv·E[max of N normals]) (cost/scale.py). Default 0: with 0.01 "
        "(Sinha et al. SC22) the published Megatron runs at scale get 1.2–1.4 points worse, so the data do not support "
        "a nonzero default; set it from your cluster's measured spread."))

    @model_validator(mode="before")
    @classmethod
    def _stack_defaults(cls, data):
        """Kernels a framework does not ship default to off when not given (``Stack.fused_cross_entropy``,
        ``Stack.grad_accumulation_fusion`` in config/framework.py: TE's fused vocab-parallel cross-entropy
        exists only in megatron-te, gradient-accumulation fusion only in Megatron code), and so does the
        p2p overlap outside Megatron."""
        if isinstance(data, dict) and isinstance(data.get("framework"), str) and data["framework"] in FRAMEWORKS:
            data = dict(data)
            for name, value in stack_defaults(data["framework"]).items():
                data.setdefault(name, value)
        return data

    @model_validator(mode="after")
    def _check_stack(self) -> "StrategySpec":
        stack = FRAMEWORKS[self.framework]
        if self.tp_comm_overlap and self.tp > 1 and not stack.tp_overlap:
            raise ValueError(f"tp_comm_overlap=True needs a framework that overlaps TP communication with GEMMs; "
                             f"framework='{self.framework}' has none (megatron-te: TE userbuffers; torch-compile: async TP)")
        return self

    @property
    def attention_kernel_name(self) -> str:
        return self.attention_kernel or FRAMEWORKS[self.framework].attention_kernel

    @property
    def fsdp_pattern_name(self) -> str:
        return self.fsdp_pattern or FRAMEWORKS[self.framework].fsdp

    @property
    def defers_weight_grad(self) -> bool:
        """Whether the schedule runs the weight gradient as a task of its own, after the input
        gradient (``Schedule.splits_weight_grad``: ZB-H1/H2, DualPipe, DualPipeV)."""
        return get_schedule(self.schedule).splits_weight_grad

    @field_validator("pipeline_layers", mode="before")
    @classmethod
    def _layers_from_text(cls, v):
        """The studio edits a list as text: accept "[4, 4, 1]" or "4 4 1" (integers only, no eval)."""
        if isinstance(v, str):
            text = v.strip().removeprefix("[").removesuffix("]").strip()
            if not text:
                return None
            parts = [p for p in re.split(r"[,\s]+", text) if p]
            if len(parts) > 4096 or not all(re.fullmatch(r"\d{1,4}", p) for p in parts):
                raise ValueError("pipeline_layers must be a list of layer counts such as [4, 4, 4, 1]")
            return [int(p) for p in parts]
        return v

    @field_validator("recompute_modules", mode="before")
    @classmethod
    def _modules_from_text(cls, v):
        """The studio edits it as text: accept "core_attn, moe_act" or "['core_attn', 'moe_act']" (names only)."""
        if isinstance(v, str):
            if len(v) > 400:
                raise ValueError("recompute_modules must be a short list of module names such as core_attn, moe_act")
            text = v.strip().removeprefix("[").removesuffix("]").removeprefix("(").removesuffix(")")
            parts = [p.strip("'\" ") for p in re.split(r"[,\s]+", text) if p.strip("'\" ")]
            if len(parts) > 8 or not all(re.fullmatch(r"[a-z_]{1,20}", p) for p in parts):
                raise ValueError("recompute_modules must be a list of module names such as core_attn, moe_act")
            return tuple(parts)
        return v

    @model_validator(mode="after")
    def _check(self) -> "StrategySpec":
        # the schedule's own rules (simengine/schedule/<name>.py ``requirements``), those a strategy
        # alone can decide; micro-batches and layers are checked again in the Scenario
        rules = get_schedule(self.schedule).requirements(self.pp, None, self.vpp, None)
        if rules:
            raise ValueError("; ".join(msg for _, msg in rules))
        if self.pipeline_layers is not None and (self.decoder_first_pipeline_num_layers is not None
                                                 or self.decoder_last_pipeline_num_layers is not None):
            raise ValueError("pipeline_layers=[...] cannot be combined with decoder_first_pipeline_num_layers / "
                             "decoder_last_pipeline_num_layers (Megatron-Core TransformerConfig: the layout "
                             "'cannot be set with other pipeline layout arguments')")
        if self.global_batch_size % self.micro_batch_size:
            raise ValueError(f"micro_batch_size={self.micro_batch_size} does not divide global_batch_size={self.global_batch_size}")
        if self.recompute_num_layers is not None and self.recompute != "full":
            raise ValueError("recompute_num_layers needs recompute='full'")
        if len(set(self.recompute_modules)) != len(self.recompute_modules):
            raise ValueError(f"recompute_modules lists a module twice: {list(self.recompute_modules)}")
        return self

    @property
    def etp_size(self) -> int:
        return self.etp if self.etp is not None else self.tp

    @property
    def p2p_overlapped(self) -> bool:
        """Whether the pipeline sends leave the compute stream (``p2p_overlapped``)."""
        return p2p_overlapped(self.framework, self.schedule, self.overlap_p2p_comm)


def stack_defaults(framework: str) -> dict[str, bool]:
    """The fields whose default depends on the software stack, with ``framework``'s defaults
    (``StrategySpec._stack_defaults`` fills them in when a strategy leaves them out)."""
    stack = FRAMEWORKS[framework]
    return {"fused_cross_entropy": stack.fused_cross_entropy,
            "gradient_accumulation_fusion": stack.grad_accumulation_fusion,
            # Megatron-LM's --overlap-p2p-communication is on by default (training/arguments.py:
            # ``--no-overlap-p2p-communication`` stores False); the other stacks' default is off
            "overlap_p2p_comm": stack.name == "megatron-te"}


def fp8_gather_min_zero(framework: str) -> int:
    """The least ZeRO stage ``fp8_param_gather`` runs with: Megatron-LM's distributed optimizer
    (arguments.py validate_args: "--fp8-param-gather only supported with distributed optimizer,
    torch fsdp2, megatron fsdp"); on the torch stacks torchao's float8 all-gather, which is FSDP2's."""
    return 1 if framework == "megatron-te" else 3


def follow_framework(old: dict, new: dict) -> dict:
    """``new`` (a strategy dict whose ``framework`` an edit changed from ``old``'s) with every
    stack-dependent field that still holds the old stack's default dropped, so the new stack's
    default applies; a value the user chose (not the old default, or changed in the same edit)
    stays. An editor holding every field explicitly would otherwise keep megatron-te's fused
    kernels and p2p overlap on a torch stack."""
    fo, fn = old.get("framework"), new.get("framework")
    if fo == fn or fo not in FRAMEWORKS or fn not in FRAMEWORKS:
        return new
    out = dict(new)
    for name, value in stack_defaults(fo).items():
        if name in out and out[name] == value and old.get(name) == value:
            del out[name]
    return out


def p2p_overlapped(framework: str, schedule: str, overlap_p2p_comm: bool) -> bool:
    """``overlap_p2p_comm`` as the stack runs it: Megatron-Core reads it only in
    ``forward_backward_pipelining_with_interleaving`` (pipeline_parallel/schedules.py; the
    non-interleaved 1F1B sends and receives in place), and Megatron-LM's arguments.py sets
    ``args.overlap_p2p_comm = False`` without a virtual pipeline. On megatron-te the other
    schedules send in place too (the zero-bubble ones as Megatron's 1F1B; DualPipe's reference
    implementation waits on its sends with the next receives, deepseek-ai/DualPipe dualpipe.py
    ``_commit_and_wait_comm``). The other stacks' sends follow the flag."""
    return overlap_p2p_comm and (framework != "megatron-te" or schedule == "interleaved")
