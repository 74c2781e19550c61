"""The software stack as an input: what each training framework's code actually launches.

A framework is a set of *mechanisms*, each read off that framework's source, never a fitted
speed factor: which memory-bound steps are one fused kernel or several eager PyTorch kernels
(bytes moved through HBM and launches), whether Q/K/V and gate/up are one GEMM or several, the
attention kernel family, whether TP communication can overlap GEMMs, and how the optimizer step
is implemented. ``StrategySpec.framework`` picks one row of :data:`FRAMEWORKS`.

Byte counts are per element of the tensor the step works on (bf16 activations = 2 B, fp32
intermediates = 4 B), read + write, counted from the op sequence of each implementation:

- ``megatron-te`` — Megatron-Core + TransformerEngine: TE ``RMSNorm``/``LayerNorm`` (one kernel:
  read x, write y; bwd read x, dy, write dx), ``megatron/core/fusions/fused_bias_swiglu.py``
  (one kernel: read 2f, write f; bwd read 2f + df, write 2f), ``fused_bias_dropout.py`` (BDA),
  TE ``fused_apply_rotary_pos_emb`` (``apply_rope_fusion``), one fused QKV and one fused gate+up
  GEMM (``linear_qkv``, ``linear_fc1``), TE/cuDNN fused attention, TE userbuffers TP overlap,
  TE/Apex ``FusedAdam`` (``megatron/core/optimizer/__init__.py``). These are the counts the rest of
  the workload already uses (the B200 validation rows), so this row changes nothing.
- ``torch-native`` — torchtitan in eager mode (pytorch/torchtitan @ba24697, 2024-12,
  ``torchtitan/models/norms.py`` ``RMSNorm``: ``x.float()``, ``pow(2)``, ``mean``, ``+eps``,
  ``rsqrt``, ``x*r``, ``type_as``, ``*weight`` = 8 kernels, 6+8+4+8+6+4 = 36 B/element; its autograd
  backward ≈ 12 kernels, 72 B/element; ``models/llama/model.py``: ``w2(F.silu(w1(x)) * w3(x))`` =
  silu + mul (10 B per element of f) and bwd mul-grad ×2 + silu-backward (18 B); separate ``wq``,
  ``wk``, ``wv`` and ``w1``, ``w3`` GEMMs; ``apply_rotary_emb`` = ``float()``, complex multiply,
  ``type_as`` per tensor, 20 B/element each way; ``F.scaled_dot_product_attention`` (PyTorch
  SDPA, flash-attention-2 kernels) on K and V that ``repeat_kv`` has expanded to the query heads
  (``Stack.repeat_kv``: SDPA saves them at that width); no TP comm overlap (async TP needs compile:
  ``parallelize_llama.py`` "Async TP requires --training.compile"); ``torch.optim.AdamW`` with
  ``foreach=True`` (``optimizer.fused`` defaults to False, ``torchtitan/optimizer.py``).
- ``torch-compile`` — the same model with ``torch.compile`` per TransformerBlock
  (``apply_compile``, fullgraph): Inductor fuses each norm, the SiLU·mul and the RoPE casts into
  one generated kernel each (the fused byte counts); GEMMs stay separate, attention stays SDPA,
  async TP (micro-pipelined symmetric-memory TP, ``Stack.tp_overlap_impl``) becomes available
  inside the compiled TransformerBlocks; optimizer as eager. Both torch stacks run TP through
  DTensor on the sequence dim (``Stack.dtensor_tp``: a cat copy per collective, no backward
  re-gather; workload/builder.py ``_torch_tp``).
- ``deepspeed`` — DeepSpeed with Megatron-DeepSpeed's model code (deepspeedai/Megatron-DeepSpeed:
  apex ``MixedFusedRMSNorm``/``FusedLayerNorm``, fused bias-GeLU / SwiGLU, fused QKV and
  ``dense_h_to_4h``), ``flash_attn`` v2 when flash attention is on, DeepSpeed ``FusedAdam``
  (``deepspeed/ops/adam/fused_adam.py``, multi-tensor-apply), no TP comm overlap (DeepSpeed's TP
  is Megatron-style synchronous all-reduce), ZeRO-3 as its FSDP pattern.

``FsdpPattern`` ``zero3-2021`` is DeepSpeed's ZeRO-3 as v0.3 (2021, on PyTorch 1.8) ran it —
per-tensor list collectives, blocking fetch, the live-parameter / persistence / reuse defaults
(cost/deepspeed_v03.py); the published mapping selects it for Narayanan et al. 2021 Table 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FrameworkName = Literal["megatron-te", "torch-native", "torch-compile", "deepspeed"]
AttentionKernel = Literal["cudnn", "flash3", "flash2", "sdpa"]
FsdpPattern = Literal["megatron-fsdp", "fsdp2", "zero3", "zero3-2021"]


@dataclass(frozen=True, slots=True)
class Pass:
    """One memory-bound step: bytes per element moved (read + write) and kernels launched."""

    fwd_bytes: float
    fwd_kernels: int
    bwd_bytes: float
    bwd_kernels: int


@dataclass(frozen=True, slots=True)
class Stack:
    name: str
    norm: Pass            # per element of the normalised tensor
    swiglu: Pass          # per element of the activation output (width f)
    gelu: Pass            # per element of the activation output
    rope: Pass            # per element of q and of k
    fused_qkv: bool       # one QKV GEMM (else q, k, v separately)
    fused_gate_up: bool   # one gate+up GEMM of width 2f (else two of width f)
    attention_kernel: AttentionKernel
    tp_overlap: bool      # TP collectives can be decomposed with their GEMMs
    fsdp: FsdpPattern
    optimizer: Literal["fused", "foreach"]
    # kernels only some frameworks ship; the strategy's default when the user does not set it
    # (StrategySpec._stack_defaults): TE's fused vocab-parallel cross-entropy
    # (``parallel_cross_entropy``; torchtitan computes ``cross_entropy(pred.float(), ...)``,
    # Megatron-DeepSpeed the fp32 vocab-parallel path) and gradient-accumulation fusion (wgrad GEMM
    # into the fp32 main grad, Megatron's ``fused_weight_gradient_mlp_cuda``; not in FSDP2 autograd)
    fused_cross_entropy: bool
    grad_accumulation_fusion: bool
    summary: str          # one line for StrategySpec.framework's description (the studio's help)
    # what recompute="selective" runs: Megatron-Core's recompute_modules, or torchtitan's per-op
    # selective AC (workload/recompute.py ``op_sac``; torchtitan's llama3 configs default to it)
    selective_ac: Literal["modules", "op"] = "modules"
    # per element of the activation output: relu(x)² as Megatron-Core runs it
    # (megatron/core/activations.py ``squared_relu`` = ``torch.pow(F.relu(x), 2)``, called by
    # MLP.forward with bias_activation_fusion off, as every Nemotron recipe sets it)
    squared_relu: Pass = Pass(8, 2, 14, 3)
    # context parallelism: TransformerEngine's ring/all-gather/all-to-all attention
    # (attn_forward_func_with_cp), or PyTorch's ``context_parallel`` ring attention that torchtitan
    # uses (torch/distributed/tensor/experimental/_attention.py; workload/layers.py ``_torch_cp``),
    # eager (its collectives overlap the next kernel) or traced by torch.compile (waited at once)
    cp_impl: Literal["te", "torch-eager", "torch-compiled"] = "te"
    # tensor parallelism: how tp_comm_overlap decomposes a TP collective with its GEMMs —
    # TransformerEngine's userbuffers, or PyTorch's async TP (Inductor's micro-pipeline pass and
    # the symmetric-memory fused ops: cost/phase.py ``_symm_mem``) — and whether TP runs through
    # DTensor with sequence parallelism on the sequence dim (``Shard(1)``, torchtitan
    # ``parallelize_llama.py``), whose collectives copy the buffer once more (``Collective.cat_copy``)
    tp_overlap_impl: Literal["userbuffers", "symm_mem"] = "userbuffers"
    dtensor_tp: bool = False
    # GQA K and V expanded to the query heads before the attention kernel, so the kernel saves them
    # (and its backward writes dK, dV) at query-head width: torchtitan's ``Attention.forward`` calls
    # ``repeat_kv`` (unsqueeze → expand → reshape, a copy) on the roped k and on v before
    # ``F.scaled_dot_product_attention`` / FlexAttention (torchtitan/models/llama/model.py from
    # c22d1a8, 2024-04, to models/llama3/model/model.py up to ff0829c, 2026-01-27, "GQA without kv
    # repeats", which passes ``enable_gqa`` instead); cost/activations.py ``attention_activations``
    repeat_kv: bool = False


# Fused kernels: norm reads x and writes y (2+2 B), bwd reads x, dy and writes dx (6 B);
# SwiGLU reads 2f writes f (6 B per output element), bwd reads 2f + df and writes 2f (10 B);
# GeLU reads and writes f (4 B), bwd reads 2, writes 1 (6 B); fused RoPE reads and writes (4 B).
_FUSED_NORM = Pass(4, 1, 6, 1)
_FUSED_SWIGLU = Pass(6, 1, 10, 1)
_FUSED_GELU = Pass(4, 1, 6, 1)
_FUSED_ROPE = Pass(4, 1, 4, 1)

# Squared ReLU, eager: relu reads x and writes r (4 B), pow reads r and writes y (4 B); backward
# (autograd) pow_backward reads dy and r and writes dr (6 B, two kernels: r·2, ·dy), relu's
# threshold_backward reads dr and r and writes dx (6 B) — 14 B, 3 kernels. Fused (torch.compile):
# one kernel each way, GeLU's bytes.
_SQRELU_FUSED = Pass(4, 1, 6, 1)

# Eager PyTorch (torchtitan @ba24697, counted op by op as in the module docstring). GeLU eager is
# one ``F.gelu`` kernel each way: the same bytes as the fused count.
_EAGER_NORM = Pass(36, 8, 72, 12)
_EAGER_SWIGLU = Pass(10, 2, 18, 3)
_EAGER_ROPE = Pass(20, 3, 20, 3)

FRAMEWORKS: dict[str, Stack] = {
    "megatron-te": Stack("megatron-te", _FUSED_NORM, _FUSED_SWIGLU, _FUSED_GELU, _FUSED_ROPE,
                         True, True, "cudnn", True, "megatron-fsdp", "fused", True, True,
                         "Megatron-Core + TransformerEngine fused kernels"),
    "torch-native": Stack("torch-native", _EAGER_NORM, _EAGER_SWIGLU, _FUSED_GELU, _EAGER_ROPE,
                          False, False, "sdpa", False, "fsdp2", "foreach", False, False,
                          "torchtitan eager: unfused norms/SwiGLU/RoPE, separate q/k/v and w1/w3 GEMMs, SDPA, foreach AdamW, "
                          "per-op selective AC", selective_ac="op", cp_impl="torch-eager", dtensor_tp=True, repeat_kv=True),
    "torch-compile": Stack("torch-compile", _FUSED_NORM, _FUSED_SWIGLU, _FUSED_GELU, _FUSED_ROPE,
                           False, False, "sdpa", True, "fsdp2", "foreach", False, False,
                           "the same with torch.compile fusing the pointwise ops", selective_ac="op", cp_impl="torch-compiled",
                           squared_relu=_SQRELU_FUSED, tp_overlap_impl="symm_mem", dtensor_tp=True,
                           repeat_kv=True),
    "deepspeed": Stack("deepspeed", _FUSED_NORM, _FUSED_SWIGLU, _FUSED_GELU, _FUSED_ROPE,
                       True, True, "flash2", False, "zero3", "fused", False, True,
                       "Megatron-DeepSpeed kernels, flash-attention-2, no TP overlap"),
}


def framework_help() -> str:
    """StrategySpec.framework's description: every row of :data:`FRAMEWORKS` with its summary."""
    rows = ", ".join(f"{name} ({stack.summary})" for name, stack in FRAMEWORKS.items())
    return f"Training framework whose kernels are priced: {rows}."


def stack_of(framework: str) -> Stack:
    return FRAMEWORKS[framework]


# Optimizer step per local (sharded) parameter, fp32 master weights and states.
# Fused (Apex/TE/DeepSpeed FusedAdam, one multi-tensor-apply kernel): read p, g, m, v and write
# p, m, v = 28 B. Foreach (torch/optim/adamw.py ``_multi_tensor_adamw``): weight decay mul_ (8),
# exp_avg lerp_ (12), exp_avg_sq mul_ + addcmul_ (8 + 12), sqrt (8), div_ by the bias correction
# (8), add_ eps (8), params addcdiv_ (16) = 80 B over 7 foreach ops (each its own launches).
OPTIMIZER_BYTES_PER_PARAM = {"fused": 28.0, "foreach": 80.0}
OPTIMIZER_OPS = {"fused": 1, "foreach": 7}


def optimizer_adam_cost(framework: str) -> tuple[float, int]:
    """(bytes per local parameter, multi-tensor ops) of the Adam update of ``framework``."""
    impl = stack_of(framework).optimizer
    return OPTIMIZER_BYTES_PER_PARAM[impl], OPTIMIZER_OPS[impl]
