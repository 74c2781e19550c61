"""What an FP8 scaling recipe adds to a block's op lists (``StrategySpec.fp8_recipe``).

The GEMMs themselves run at the FP8 rate either way (``cost/compute.py``); the recipes differ in
the memory-bound kernels around them and in which TP collectives async TP can fuse.

- ``tensorwise`` — one scale per tensor, computed from the tensor itself (TransformerEngine
  ``Float8CurrentScaling``, Megatron ``--fp8-recipe tensorwise``; torchao
  ``Float8LinearRecipeName.TENSORWISE``). A cast reads bf16 and writes fp8 and its transpose for the
  wgrad (4 B per element; 3 B on TransformerEngine where FP8 GEMMs take any layout — datacenter
  Blackwell — whose quantizers then write no transpose, csrc/quantizer.cpp ``with_transpose``) after an amax pass over the same tensor (read 2 B): TE
  ``Float8CurrentScalingQuantizer::quantize_impl`` (pytorch/csrc/quantizer.cpp, v2.7) runs
  ``nvte_compute_amax`` and then ``nvte_quantize_v2``, except on a LayerNorm-fused linear's input,
  whose norm kernel writes the amax itself (pytorch/csrc/extensions/normalization.cpp
  ``FUSED_NORM_AMAX_FP8`` / ``create_hp_tensor_with_amax`` then ``quantize_with_amax``); torch
  eager runs torchao's amax as its own kernel (torchao/testing/training/roofline_utils.py
  ``get_tensor_memory_traffic_ovhd_s``, tensorwise kernel 1: "x_bf16 -> max_abs_stage_1"), which
  Inductor fuses into the producer under torch.compile (the same function's ``fuse_with_prev``:
  kernel 1 costs 0). So 6 B per element on megatron-te (4 B on the norm-fused inputs) and
  torch-native, 4 B on torch-compile. Weights are cast once per step and cached across
  micro-batches (TE ``is_first_microbatch``), which is negligible per micro-batch.
- ``delayed`` — TransformerEngine ``DelayedScaling`` (Megatron-Core's default ``fp8_recipe``,
  transformer_config.py; the only TE recipe before v2.2, so NeMo 24.x): the scale comes from past
  amaxes, so a cast is one pass (``fp8_cast_transpose_fused``: 4 B) and the LayerNorm-fused
  linears' norm writes fp8 itself (normalization.cpp: "Always used fused kernel for FP8 delayed
  scaling"; v1.9 module/layernorm_linear.py ``ln_out_dtype = torch.uint8``): no cast, only the
  transpose the norm API adds for the wgrad on TN-only GPUs (common/normalization/rmsnorm/
  rmsnorm_api.cpp ``nvte_transpose``: read 1, write 1).
- ``mxfp8`` — TransformerEngine ``MXFP8BlockScaling`` on Blackwell: a scale per 32 values, the
  rowwise and columnwise copies quantized from bf16 in one kernel (read 2, write 1 + 1: 4 B, no
  amax pass, no transpose). The norm is not fused by default (normalization.cpp: the fused MXFP8
  norm is cuDNN's, only under ``NVTE_NORM_FWD_USE_CUDNN``), so its inputs pay the 4 B cast too.
- ``nvfp4`` — TransformerEngine ``NVFP4BlockScaling`` (``StrategySpec.dtype = 'nvfp4'``; Megatron-Core
  ``fp4_recipe='nvfp4'``): fprop, dgrad and wgrad GEMMs in FP4 (E2M1) with an E4M3 scale per 16
  values and an fp32 one per tensor, so the cast needs the tensor's amax first; the wgrad operands
  (the columnwise copies of the input and the output gradient) go through a 16×16 random Hadamard
  transform (common/recipe/__init__.py: ``fp4_quant_fwd_inp`` / ``fp4_quant_bwd_grad``
  ``random_hadamard_transform=True``). TE runs one amax kernel over the bf16 tensor that gives
  the rowwise and the post-transform columnwise amax (pytorch/csrc/quantizer.cpp
  ``NVFP4Quantizer::quantize_impl``: ``nvte_hadamard_transform_amax``, read 2 B) and one kernel
  that writes both copies (``nvte_quantize_with_hadamard_transform``: read 2, write 2 × 0.5625):
  5.125 B per element. No norm is fused with it (pytorch/csrc/extensions/normalization.cpp: the
  norm's NVFP4 amax fusion only without the transform, which the default recipe has), so every
  input pays the cast. Weights are quantized once per step (2D 16×16 blocks, cached across
  micro-batches like FP8's). TP reductions stay bf16 (the NVFP4 paper, arXiv 2509.25149 §4.1).
- The LayerNorm-fused linears are Megatron-Core's ``TELayerNormColumnParallelLinear`` (models/gpt/
  gpt_layer_specs.py: ``linear_qkv``, the dense MLP's ``linear_fc1``, MLA's ``linear_q_up_proj``
  and ``linear_kv_up_proj`` with q/kv layernorm; models/mamba/mamba_layer_specs.py ``in_proj``).
  The MoE layer's ``pre_mlp_layernorm`` and MLA's ``input_layernorm`` are separate ``TENorm``
  modules: the router, experts and down projections cast their input like any other.
- ``rowwise`` — torchao's ``ROWWISE`` recipe (torchao/float8/config.py; the torch stacks only,
  config/precision.py ``fp8_recipe_checks``). Each GEMM is fed operands scaled along its own
  reduction dimension (torchao/float8/float8_linear.py ``matmul_with_hp_or_float8_args``: x along
  dim −1 for the forward, dy along dim −1 for dgrad, both along dim 0 for wgrad), always cast from
  the saved bf16 tensor, so x and dy are each quantised twice. torchao's own roofline model
  (torchao/testing/training/roofline_utils.py ``get_tensor_memory_traffic_ovhd_s``) counts 8 B
  per element for each: a cast (read 2, write fp8 1) and a transposed bf16 copy (write 2) then a
  second cast (read 2, write 1). Here: 3 B per element of x in the forward, 3 B per element of
  dy before dgrad, 5 B per element of each of x and dy before wgrad.
  Backward GEMMs run without fast accumulation, which torchao routes through the tensorwise cuBLAS
  kernel with unit scales followed by ``output *= post_inverse_scale`` (torchao/float8/float8_ops.py
  ``addmm_float8_unwrapped``: "The rowwise CUTLASS-based kernel is so slow without fast-accum
  that we'd rather use the tensorwise cuBLAS-based kernel and do the scaling manually
  afterwards"): one more read and write of each dgrad and wgrad output (4 B per element; ao issue
  #2184: "at least one extra triton kernel per GEMM"). The forward's CUTLASS rowwise kernel runs
  at 90–100 % of the tensorwise one on most shapes (pytorch/pytorch#147971), priced as equal.
  There is no float8 all-gather for rowwise (torchao ``Float8LinearConfig.__post_init__``:
  "float8 all-gather only supports tensorwise scaling granularity"): TP collectives move bf16,
  as they already do here. With async TP, Inductor's micro-pipeline pass fuses the matmul →
  reduce-scatter with rowwise scales (pytorch/pytorch#149247) but not the all-gather → matmul
  (pytorch/pytorch#149990 "all-gather-matmuls not fusing properly when rowwise scales are used"),
  so the TP all-gathers are not decomposable.

Under TP with sequence parallelism both stacks quantize the *shard* and all-gather fp8 (1 B per
element instead of 2): TransformerEngine's ``gather_along_first_dim(inp, group, quantizer=...)``
(transformer_engine/pytorch/distributed.py, v2.x: "Cast input tensor" then ``_all_gather_fp8`` /
``_all_gather_mxfp8`` / ``_all_gather_fp8_blockwise``; v1.9 casts the norm output to fp8 and
gathers it) for the LayerNorm-fused column-parallel inputs (module/layernorm_linear.py, also the
backward re-gather of the saved input) and the row-parallel layers' output gradients
(module/base.py ``grad_output_preprocess``: "FP8 with all-gather: unfused bgrad, fused cast +
transpose"); torchao's tensorwise TP classes (torchao/float8/float8_tensor_parallel.py, which
torchtitan applies whenever float8 is tensorwise: ``parallelize_llama.py``
``enable_float8_tensorwise_tp``) the same way — ``Float8ColwiseParallel`` and
``PrepareFloat8ModuleInput`` cast "before the all-gather (i.e. Shard -> Replicate) so that if there
are multiple float8 users of the input activation, we perform fp8 allgather only once",
``Float8RowwiseParallel`` casts the output gradient on its shard. So a gathered input is cast once
on tokens/tp rows (read bf16 2, write fp8 1: 3 B per element), shared by the column-parallel GEMMs
that read it, and its wgrad reads a transpose of the gathered fp8 copy (TE v1.9
``tex.fp8_transpose`` of the gathered gradient, ``_create_transpose`` in v2; read 1, write 1: 2 B
per gathered element) — on GPUs whose FP8 GEMMs take only the TN layout: datacenter Blackwell runs
any layout (TE utils.py ``is_non_tn_fp8_gemm_supported``: sm100–sm119) and skips it. MXFP8 quantizes
the shard along both axes (4 B per element) and gathers the rowwise copy in the forward and the
columnwise one in the backward re-gather, 1 B each (distributed.py ``_all_gather_mxfp8``: one
all-gather per usage the quantizer holds); a row-parallel output gradient is gathered for dgrad
and wgrad at once, both copies (layernorm_linear.py / linear.py backward:
``grad_output_quantizer.set_usage(rowwise=True, columnwise=True)``), as many bytes as bf16.
NVFP4 quantizes the shard (both copies, 5.125 B per element) and gathers NVFP4 data
(distributed.py ``_all_gather_nvfp4``): the rowwise copy forward, the columnwise one in the
backward re-gather, both copies of a row-parallel output gradient — 0.5625 B per element a copy.
Delayed scaling's norm writes the fp8 shard itself (no shard cast on the LayerNorm-fused inputs);
current scaling adds the amax read of the shards it casts. Rowwise communicates bf16 (above);
DeepSpeed's stack keeps the cast on the gathered input.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import TypeGuard

from .dims import Dims
from .ops import BF16, BF16_ONLY_GEMMS, NVFP4_BYTES, Collective, Gemm, GroupedGemm, Memory, Op
from .phases import Phases

TENSORWISE_CAST = 4.0      # B per element of a GEMM input: read bf16 2, write fp8 + its transpose 2
AMAX_READ = 2.0            # current scaling's amax pass over the bf16 tensor (TE nvte_compute_amax)
MX_CAST = 4.0              # MXFP8: read bf16 2, write the rowwise and the columnwise copy 1 + 1
NV_CAST = 2.0 + 2.0 + 2 * NVFP4_BYTES   # NVFP4: amax read 2, then read 2, write both copies (docstring)
_BOTH_COPIES = ("mxfp8", "nvfp4")      # recipes whose cast writes the columnwise (wgrad) copy itself
NORM_TRANSPOSE = 2.0       # delayed scaling's fused norm: the fp8 output's transpose (read 1, write 1)
ROWWISE_FIRST_CAST = 3.0   # read bf16 2, write fp8 1 (roofline_utils: the cast half of kernel 1)
ROWWISE_SECOND_CAST = 5.0  # transposed bf16 copy (write 2), then read 2 and write fp8 1
RESCALE = 4.0              # read and write the bf16 GEMM output once more
SHARD_CAST = 3.0           # read bf16 2, write fp8 1, on the tokens/tp shard before an fp8 all-gather
ANY_LAYOUT_CAST = 3.0      # read bf16 2, write fp8 1: TE where FP8 GEMMs take any layout writes no transpose
GATHERED_TRANSPOSE = 2.0   # read fp8 1, write its transpose 1, on the gathered copy (the wgrad's operand)
_SHARD_STACKS = ("megatron-te", "torch-native", "torch-compile")
_AMAX_STACKS = ("megatron-te", "torch-native")   # tensorwise's amax pass is its own kernel (docstring)
# the inputs of Megatron-Core's TELayerNormColumnParallelLinear modules (docstring)
_NORM_FUSED = ("fwd:qkv", "fwd:fc1:mlp", "fwd:q_up", "fwd:kv_up", "fwd:in_proj:mamba")


def add_fp8_ops(ph: Phases, d: Dims) -> None:
    """The recipe's casts (and rowwise's rescales and unfused all-gathers) on a block's op lists."""
    fp8 = [op for op in ph.fwd + ph.bwd + ph.wgt
           if isinstance(op, (Gemm, GroupedGemm)) and not op.name.endswith(BF16_ONLY_GEMMS)]
    if d.fp8_recipe == "rowwise":
        _rowwise(ph, fp8)
        return
    done = _sharded_casts(ph, d, {op.name for op in fp8}) if d.sp and d.stack.name in _SHARD_STACKS else set()
    for ops, pre in ((ph.fwd, "fwd:"), (ph.bwd, "dgrad:")):
        for op in fp8:
            if op.name.startswith(pre) and op.name not in done and (nbytes := _cast_bytes(d, op.name)):
                ops.append(Memory("fp8-cast:" + op.name, nbytes * _elems(op, "a")))


def _cast_bytes(d: Dims, gemm: str, shard: bool = False) -> float:
    """B per element to quantize the input of ``gemm`` (a fwd or dgrad GEMM) under the tensorwise,
    delayed, mxfp8 or nvfp4 recipe (module docstring): on the whole tensor, or with ``shard`` on the SP
    shard before its fp8 all-gather (rowwise only, its transpose made after the gather; MXFP8 both
    copies)."""
    if d.fp8_recipe == "mxfp8":
        return MX_CAST
    if d.fp8_recipe == "nvfp4":
        return NV_CAST
    fused = _norm_fused(d, gemm)
    cast = SHARD_CAST if shard else TENSORWISE_CAST
    if not shard and not d.fp8_tn_only and d.stack.name == "megatron-te":
        # TE's per-tensor quantizers write no transposed copy where FP8 GEMMs take any layout:
        # transformer_engine/pytorch/csrc/quantizer.cpp (Float8Quantizer / Float8CurrentScalingQuantizer
        # ::create_tensor, TE main d0067d0): ``with_transpose = columnwise_usage &&
        # !is_non_tn_fp8_gemm_supported`` (sm100+), the wgrad reading the rowwise copy in another
        # layout. So the cast reads bf16 2 and writes fp8 1 (3 B, 5 B with current scaling's amax)
        cast = ANY_LAYOUT_CAST
    if d.fp8_recipe == "delayed":   # the fused norm writes fp8 (and, unsharded, its transpose)
        return (0.0 if shard or not d.fp8_tn_only else NORM_TRANSPOSE) if fused else cast
    return cast + (AMAX_READ if d.stack.name in _AMAX_STACKS and not fused else 0.0)


def _norm_fused(d: Dims, gemm: str) -> bool:
    """The GEMM's input comes out of a TransformerEngine LayerNorm-fused linear's norm (module docstring)."""
    return d.stack.name == "megatron-te" and gemm.startswith(_NORM_FUSED)


def _sharded_casts(ph: Phases, d: Dims, fp8: set[str]) -> set[str]:
    """Quantize-then-gather under SP (module docstring): each TP all-gather feeding fp8 / nvfp4 GEMMs
    drops to ``Dims.q_bytes`` per element (in place: 1 B fp8, 0.5625 B nvfp4; MXFP8's and NVFP4's
    output-gradient gathers carry both copies),
    its tensor gets one cast on the shard and one transpose of the gathered copy where FP8 GEMMs
    are TN-only; returns the GEMMs whose input that cast covers (no cast of their own)."""
    done: set[str] = set()
    for ops, phase in ((ph.fwd, "fwd:"), (ph.bwd, "dgrad:")):
        for i, op in enumerate(list(ops)):
            # forward: a column-parallel input; backward: a row-parallel output gradient (no partner GEMM)
            if not _tp_gather(op) or (phase == "dgrad:" and op.overlap_with):
                continue
            readers = _readers(ops, i, phase, fp8)
            if not readers:
                continue
            # one copy forward; a row-parallel output gradient carries both (MXFP8: bf16's bytes)
            copies = 2.0 if phase == "dgrad:" and d.fp8_recipe in _BOTH_COPIES else 1.0
            ops[i] = replace(op, bytes=op.bytes * copies * d.q_bytes / BF16)
            first = readers[0]
            elems = _elems(first, "a")
            nbytes = _cast_bytes(d, first.name, shard=True)
            if nbytes:
                ops.append(Memory("fp8-cast:" + first.name, nbytes * elems / d.tp))
            if d.fp8_tn_only and d.fp8_recipe not in _BOTH_COPIES:   # MXFP8 / NVFP4 quantized the columnwise copy itself
                ph.wgt.append(Memory("fp8-transpose:" + first.name, GATHERED_TRANSPOSE * elems))
            done.update(g.name for g in readers)
    for i, op in enumerate(ph.bwd):   # the column-parallel re-gather of a saved fp8 input (wgrad's)
        if _tp_gather(op) and op.name.startswith("ag-bwd:") and op.overlap_with and "fwd:" + op.name.split(":", 1)[1] in done:
            ph.bwd[i] = replace(op, bytes=op.bytes * d.q_bytes / BF16)
    return done


def _readers(ops: list, i: int, phase: str, fp8: set[str]) -> list:
    """The fp8 GEMMs of ``phase`` that read what the all-gather ``ops[i]`` gathers: forward, the
    GEMMs right after it (the column-parallel linears sharing one input); backward, the dgrad of the
    row-parallel layer whose output gradient it gathers."""
    if phase == "fwd:":
        run = itertools.takewhile(lambda o: isinstance(o, Gemm) and o.name.startswith("fwd:"), ops[i + 1:])
        return [g for g in run if g.name in fp8]
    name = "dgrad:" + ops[i].name.split(":", 1)[1]
    return [g for g in ops if isinstance(g, (Gemm, GroupedGemm)) and g.name == name and name in fp8]


def _rowwise(ph: Phases, fp8: list) -> None:
    """torchao ROWWISE (module docstring): per GEMM, its operands' casts and, in backward, the rescale."""
    for op in fp8:
        if op.name.startswith("fwd:"):
            ph.fwd.append(Memory("fp8-cast:" + op.name, ROWWISE_FIRST_CAST * _elems(op, "a")))
        elif op.name.startswith("dgrad:"):
            ph.bwd.append(Memory("fp8-cast:" + op.name, ROWWISE_FIRST_CAST * _elems(op, "a")))
            ph.bwd.append(Memory("fp8-rescale:" + op.name, RESCALE * _elems(op, "out")))
        elif op.name.startswith("wgrad:"):
            ph.wgt.append(Memory("fp8-cast:" + op.name, ROWWISE_SECOND_CAST * (_elems(op, "a") + _elems(op, "b"))))
            ph.wgt.append(Memory("fp8-rescale:" + op.name, RESCALE * _elems(op, "out")))
    for ops in (ph.fwd, ph.bwd, ph.wgt):
        ops[:] = [_unfused(op) for op in ops]


def _unfused(op: Op) -> Op:
    """A TP all-gather async TP cannot fuse with its matmul under rowwise scales (module docstring)."""
    return replace(op, decomposable=False) if _tp_gather(op) else op


def _tp_gather(op: Op) -> TypeGuard[Collective]:
    """A TP all-gather of a linear layer's input or output gradient whose GEMMs run in fp8 (not the
    embedding's, not the bf16 LM head's: ``BF16_ONLY_GEMMS``)."""
    return (isinstance(op, Collective) and op.group == "tp" and op.kind == "all_gather"
            and op.name.startswith(("ag:", "ag-bwd:")) and not op.name.endswith(BF16_ONLY_GEMMS))


def _elems(op, which: str) -> float:
    """Elements of a GEMM's operand A (m×k), operand B (k×n) or output (m×n), over its count or groups."""
    rows, cols = {"a": (op.m, op.k), "b": (op.k, op.n), "out": (op.m, op.n)}[which]
    if isinstance(op, GroupedGemm):
        return float(op.groups * rows * cols)
    return float(op.b * rows * cols * op.count)
