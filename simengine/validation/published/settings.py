"""Each source's settings of a published run: what its paper, README or recipe page fixes (or
leaves out) beyond the cells every row carries. One function per source, each filling in a
:class:`Draft`; ``SOURCE_SETTINGS`` maps the source key (types.SOURCES) to its function."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .cells import NARAYANAN_T1, NOT_STATED, _GPU_PEAK_BF16, _recompute, _s, _zero
from .mbridge_recipes import apply_recipe
from .types import _Skip


@dataclass
class Draft:
    """A run being mapped (mapping._draft reads the common cells; a source's settings complete it)."""

    row: dict[str, str]
    rid: str
    model: dict[str, Any]
    gpus: int
    layers: int
    seq: int
    dtype: str
    tp: int
    pp: int
    dp: int
    mb: int | None              # micro-batch size; None = not stated
    gbs: int | None             # global batch (sequences); None = not stated
    sp: bool | None             # sequence parallelism; None = not stated
    vpp: int
    strat: dict[str, Any]       # the strategy dict being built
    flop_basis: dict[str, Any]  # inputs of the source's own FLOP formula
    a: list[str]                # assumptions (settings guessed, not printed by the source)

    def gpt_flop_basis(self) -> None:
        self.flop_basis.update(B=self.gbs, s=self.seq, l=self.layers, h=int(self.model["hidden_size"]),
                               V=int(self.model["vocab_size"]))


def _narayanan21(d: Draft) -> None:
    """Narayanan et al. 2021 (SC21) Tables 1 and 2: the sc21 scripts' micro-batch and virtual
    stages (Table 1), PTD-P vs the DeepSpeed ZeRO-3 baseline (Table 2)."""
    row, layers, tp, pp, a = d.row, d.layers, d.tp, d.pp, d.a
    key = _s(row, "params_B")
    if "_t2_" not in d.rid:
        if key not in NARAYANAN_T1:
            raise _Skip(f"no sc21 script settings for {key}B")
        d.mb, lpv, ddp = NARAYANAN_T1[key]
        if lpv:
            d.vpp = (layers // pp) // lpv
    else:
        ddp = "deepspeed" if tp == 1 and pp == 1 else "local"
        if ddp == "local":
            # PTD-P rows of Table 2 reuse Table 1's 530B layout (tp 8, pp 35, 1 layer per virtual stage)
            _, lpv, _ = NARAYANAN_T1.get(key, (1, None, "local"))
            if lpv and pp > 1:
                d.vpp = (layers // pp) // lpv
                a.append(f"vpp {d.vpp} ({lpv} layer per virtual stage) from Table 1's {key}B settings")
    rec = _recompute(row, math.ceil(layers / pp), a, "recompute not stated: full (Eq.3 FLOP accounting assumes it)")
    if "assumed" in _s(row, "recompute").lower():
        a.append("full recompute assumed (not restated for Table 2)")
    if rec["recompute"] == "none" and not _s(row, "recompute"):
        rec = {"recompute": "full"}
    zero = 3 if ddp == "deepspeed" else 0
    d.strat.update(rec)
    d.strat.update(sequence_parallel=False, p2p_scatter_gather=True, zero_stage=zero, attention_impl="unfused", fused_cross_entropy=False,
                   overlap_p2p_comm=False,  # Megatron-LM gained it in 2023-05 (f9283c5a8a "Add option to overlap p2p communication")
                   # torch DDP overlaps the bucketed all-reduce with backward; Megatron's 'local' DDP
                   # reduces after backward; DeepSpeed ZeRO-3 overlaps (overlap_comm defaults to True at stage 3)
                   overlap_grad_reduce=ddp in ("torch", "deepspeed"), overlap_param_gather=ddp == "deepspeed")
    if ddp != "deepspeed":
        # the 2021 code as the sc21 scripts run it (examples/sc21/CONFIG.sh: --fp16, --DDP-impl local
        # or torch, no --accumulate-allreduce-grads-in-fp32 or --use-contiguous-buffers-in-ddp): each
        # weight's fp16 gradient accumulates over the micro-batches in autograd's own add and is
        # all-reduced in fp16 (megatron/model/distributed.py allreduce_gradients, or torch DDP's
        # buckets of the fp16 grads); gradient-accumulation fusion came in 2022 (83b1e42f30)
        d.strat.update(gradient_accumulation_fusion=False, fp32_main_grads=False)
    if ddp == "deepspeed":
        a.append("DeepSpeed ZeRO-3 overlap_comm (stage-3 default) and parameter prefetch = overlapped")
        # the paper (SC21, April 2021) ran the ZeRO-3 of its time: DeepSpeed v0.3 (cost/deepspeed_v03.py)
        d.strat["fsdp_pattern"] = "zero3-2021"
        a.append("ZeRO-3 as DeepSpeed v0.3 (2021) ran it: per-tensor collectives, blocking fetch, 1e9 live-parameter prefetch limit")
    d.gpt_flop_basis()


def _korthikanti22(d: Draft) -> None:
    """Korthikanti et al. 2022 (sequence parallelism and selective recompute)."""
    rec = _recompute(d.row, math.ceil(d.layers / d.pp), d.a, None)
    d.strat.update(rec)
    if d.sp is None:
        d.sp = False
        d.a.append("sequence parallelism not restated: off (full-recompute baseline)")
    zero = _zero(d.row, d.a, 0, None)
    d.strat.update(sequence_parallel=d.sp, p2p_scatter_gather=True, zero_stage=zero, attention_impl="unfused", fused_cross_entropy=False,
                   overlap_grad_reduce=False,  # "8-way DP without grad all-reduce overlap"
                   overlap_p2p_comm=False)     # not in Megatron-LM before 2023-05 (f9283c5a8a)
    if "layer" in d.rid:
        d.gbs = d.mb  # one micro-batch through one layer (Table 4)
    d.gpt_flop_basis()


def _megatron_readme(d: Draft) -> None:
    """Megatron-Core r0.8 README table: overlaps stated; dtype/recompute/micro-batch not stated.

    Checked against the source (NVIDIA/Megatron-LM images/model_table.png, README at f2e5db402c):
    the CSV's heads/hidden/layers/TP/PP/DP/GPUs/batch match the table. What the r0.8 code fixes:
    gradients are reduced in fp32 under --bf16 (megatron/training/arguments.py forces
    accumulate_allreduce_grads_in_fp32; StrategySpec.fp32_main_grads defaults to it); the DP
    reduce-scatter overlaps only the last micro-batch's backward (pipeline_parallel/schedules.py
    runs the others under no_sync); "PP overlap (default)" is overlap_p2p_comm, which arguments.py
    turns off without an interleaved schedule, so it implies no virtual stages. The micro-batch is
    the guess that matters: at 1 (4 micro-batches per DP rank) the 32B row (TP 8, one DP rank per
    node) cannot reach its measured step even at the NIC's line rate — its fp32 reduce-scatter and
    bf16 all-gather outlast the one backward and one forward they may hide under. Megatron has no
    default micro-batch (arguments.py: ``assert args.micro_batch_size is not None``), so the run
    set one the table does not print; the 32B row is −29 / −15 / +13 % at 1 / 2 / 4 (+13 % is
    where the 1.7B and 7.1B rows, whose DP traffic always hides, sit). One guess serves every row."""
    tp, a, model = d.tp, d.a, d.model
    if d.mb is None:
        d.mb = 1
        a.append("micro-batch not stated: 1")
    d.strat.update(_recompute(d.row, d.layers, a, "recompute not stated: none"))
    d.strat.update(sequence_parallel=tp > 1, zero_stage=_zero(d.row, a, 1, None), overlap_grad_reduce=True,
                   overlap_param_gather=True, tp_comm_overlap=tp > 1, fused_cross_entropy=False)
    a.append("kv_heads = heads (MHA), ffn = 4h, GPT-2 style blocks")
    if d.pp > 1:
        a.append("plain 1F1B (virtual pipeline size not stated)")
    d.flop_basis.update(B=d.gbs, s=d.seq, l=d.layers, h=int(model["hidden_size"]), heads=int(model["num_attention_heads"]),
                        kv=int(model["num_kv_heads"]), ffn=int(model["ffn_hidden_size"]), V=int(model["vocab_size"]))


def _async_tp(dtype_cell: str, rid: str) -> bool:
    """torchtitan's async TP (``enable_async_tensor_parallel``): named in the dtype cell, or only in
    the run's name where the table's column does ("2D + AsyncTP", llama3_h100_202412 Table 4)."""
    return "asynctp" in dtype_cell.replace(" ", "") or rid.lower().endswith("asynctp")


# torchao's FSDP2 float8 all-gather where the run's own source turns it on: the Aug-2024 405B table
# came in the PR (#554, 9515a140b) that also set ``enable_fsdp_float8_all_gather = true`` and
# ``precompute_float8_dynamic_scale_for_fsdp = true`` in the 405B preset it measured. Not the
# Dec-2024 page: its runs were launched by flags (the 8B and 70B presets of its commit 9dec370 have
# float8 off, yet it has Float8 rows), it names "Float8" where torchao's README names "float8
# all-gather", and its 405B peak memories sit above a gather kept in fp8 (already 4–15 % above
# the bf16 one); torchao's default, off, stands there.
_FLOAT8_AG_PRESETS = {
    "torchtitan202408_405B": "train_configs/llama3_405b.toml @9515a140b, set in the PR that published the table",
}


def _float8_all_gather(rid: str, dtype_cell: str) -> str:
    """Where a torchtitan row's FSDP2 gathers float8 (``enable_fsdp_float8_all_gather``): the
    row's own words ("float8 all-gather", "fsdp float8 all-gather") or its preset at the run's
    commit; "" when neither says so."""
    if "float8 all-gather" in dtype_cell and "bfloat16 all-gather" not in dtype_cell:
        return "stated in the row"
    for prefix, src in _FLOAT8_AG_PRESETS.items():
        if rid.startswith(prefix):
            return src
    return ""


_TITAN_9DEC370 = "torchtitan202412_"  # the Dec-2024 page's runs (torchtitan 9dec370)

# Runs on a torchtitan that compiles the loss with ``training.compile`` (components/loss.py
# ``build_cross_entropy_loss``, since pytorch/torchtitan#1033, bbb1b616e, 2025-04-02; 9dec370 kept it
# eager: "TODO: compiling loss function causes CUDA errors, turning off for now").
_TITAN_COMPILED_LOSS = {
    "torchtitan_trainy_": "torchtitan e7c0cae (2025-06-11)",
    "torchtitan202506_": "torchtitan 820504e (2025-06)",
}


def titan_split(layers: int, stages: int) -> list[int]:
    """Layers per pipeline stage as torchtitan 9dec370 splits them when no split points are given
    (parallelisms/pipelining_utils.py ``generate_split_points``): ``layers // stages`` each, the
    remainder one extra to the middle stages from the second on; the last stage takes the rest.
    A multi-stage schedule (interleaved) defaults to 2 stages per rank, placed in a loop
    (``stage_ids_this_rank(style="loop")``: rank r holds stages r, r + pp, …), which is
    ``pipeline_layers``' order."""
    if stages < 2:
        return [layers]
    base, extra = divmod(layers, stages)
    out = [base] + [base + (i < extra) for i in range(stages - 2)]
    return out + [layers - sum(out)]


def _torchtitan(d: Draft) -> None:
    """torchtitan benchmark pages: the local batch, FSDP (ZeRO-3), per-op SAC, asyncTP."""
    row, pp, a = d.row, d.pp, d.a
    local_bs = d.mb
    if local_bs is None:
        raise _Skip("local batch (micro_batch) not stated")
    if pp > 1:
        if d.rid.startswith(_TITAN_9DEC370):
            if d.vpp == NOT_STATED:
                d.vpp = 2
                a.append("interleaved: 2 stages per rank (torchtitan 9dec370's default for a multi-stage schedule)")
            d.strat["pipeline_layers"] = titan_split(d.layers, pp * d.vpp)
            a.append("layers per stage as torchtitan 9dec370 generates them (parallelisms/pipelining_utils.py "
                     "generate_split_points; the page gives no split points)")
        # torchtitan: the local batch is split into pipeline_parallel_microbatches, default = the pp degree
        # (pipelining_utils.py build_pipeline_schedule), for single- and multi-stage schedules alike
        d.mb = max(local_bs // pp, 1)
        a.append(f"local batch {local_bs} split into {pp} pipeline micro-batches (torchtitan default = pp degree)")
    if d.gbs is None:
        d.gbs = local_bs * d.dp
        a.append(f"global batch = local batch {local_bs} x dp {d.dp}")
    rec = _recompute(row, math.ceil(d.layers / pp), a, None)
    zero = _zero(row, a, 3, None)
    dt = _s(row, "dtype").lower()
    d.strat.update(rec)
    d.strat.update(sequence_parallel=d.tp > 1, zero_stage=zero, overlap_grad_reduce=True, overlap_param_gather=True,
                   tp_comm_overlap=_async_tp(dt, d.rid), fused_cross_entropy=False,
                   gradient_accumulation_fusion=False, cp_comm_type="allgather")
    if rec["recompute"] == "selective":
        a.append("torchtitan per-op SAC mapped to selective (attention core) recompute")
    titan = next((src for prefix, src in _TITAN_COMPILED_LOSS.items() if d.rid.startswith(prefix)), "")
    if titan and "compile" in dt:
        d.strat["compiled_loss"] = True
        a.append(f"loss compiled with the model ({titan} compiles it under training.compile)")
    ag = _float8_all_gather(d.rid, dt)
    if d.dtype == "fp8" and zero >= 3 and ag:
        d.strat["fp8_param_gather"] = True
        a.append(f"FSDP2 float8 all-gather ({ag})")
    g = _s(row, "gpu_type").lower()
    if "h100" in g and ("500w" in g.replace(" ", "") or "lower tdp" in g):
        a.append("power-limited Grand Teton H100 (HBM2e 2.4 TB/s, 500 W): dense peaks interpolated in board power "
                 "between the H100 NVL (400 W) and SXM5 (700 W) datasheets, 887 bf16 TFLOP/s")
    # torchtitan MFU: its Float8 rows report half the MFU per token/s of the bf16 rows
    # (2024-08 405B table: 23.46 % at 177 tok/s vs 29.0 % at 109 tok/s), i.e. against the FP8 peak
    gpu = "a100" if "a100" in g else "h100"
    d.flop_basis.update(peak=_GPU_PEAK_BF16[gpu] * (2.0 if d.dtype == "fp8" else 1.0))


def _nemo(d: Draft) -> None:
    """NeMo and Megatron-Bridge performance pages (the recipe scripts' defaults)."""
    tp, a, mb, gbs = d.tp, d.a, d.mb, d.gbs
    if mb is None:
        raise _Skip("micro-batch not stated")
    d.strat.update(_recompute(d.row, d.layers, a, "recompute not stated (recipe script): none"))
    if d.sp is None:
        d.sp = tp > 1
        a.append("sequence parallelism (recipe script) = on when tp > 1")
    zero = _zero(d.row, a, 1, "distributed optimizer (ZeRO-1) presumed")
    d.strat.update(sequence_parallel=d.sp, zero_stage=zero, overlap_grad_reduce=True, overlap_param_gather=True,
                   tp_comm_overlap=tp > 1, fused_cross_entropy=True)
    # Pipeline sends off the compute stream with virtual stages: Megatron-Bridge's CommOverlapConfig,
    # which every performance recipe carries, sets overlap_p2p_comm = True and batch_p2p_comm =
    # False when vp > 1 (src/megatron/bridge/training/comm_overlap.py _get_model_comm_overlap_cfgs,
    # "PP overlap", r0.1.0 … r0.4.0); NeMo 24.07's launcher configs do the same for their
    # interleaved recipes (NeMo-Framework-Launcher launcher_scripts/conf/training gpt3/175b.yaml,
    # llama/llama2_13b.yaml, llama2_70b.yaml, llama3_70b.yaml, nemotron/nemotron_22b.yaml,
    # nemotron_340b.yaml: ``overlap_p2p_comm: True``; the plain-1F1B ones False).
    d.strat["overlap_p2p_comm"] = d.vpp > 1
    task = d.rid.lower()
    if "sft" in task or "finetuning" in task:
        a.append("SFT on packed sequences: attention spans shorter than seq_len (modelled as pretraining)")
    ga = re.search(r"GA=(\d+)", d.row.get("notes") or "")
    if ga and gbs and mb and int(ga.group(1)) != gbs // (mb * d.dp):
        a.append(f"notes say GA={ga.group(1)} but gbs/(mb*dp) = {gbs // (mb * d.dp)}")


def _megatron_bridge(d: Draft) -> None:
    """Megatron-Bridge performance summary: the NeMo recipe defaults, then the MoE mechanisms of the
    release's performance recipe (mbridge_recipes.py: dispatcher, all-to-all overlaps, TP overlap,
    MTP, pipeline layout — NVIDIA-NeMo/Megatron-Bridge scripts/performance, cited per recipe).

    Gradients in bf16: every performance recipe sets ``grad_reduce_in_fp32 = False`` (r0.1.0
    scripts/performance/configs/*/*_llm_pretrain.yaml ``mixed_precision``; r0.2.0, r0.3.0, r0.4.0,
    c0b9a0003, 63b08b397 configs/*/*_llm_pretrain.py set_*_common_configs: ``cfg.ddp`` and
    ``cfg.mixed_precision``), so Megatron-Core's grad buffer and its reduce-scatter are in the param
    dtype (megatron/core/distributed/param_and_grad_buffer.py group_params_for_buffers: grad_dtype =
    float if grad_reduce_in_fp32 else param.dtype).

    Dense Llama rows get these defaults on every system (H100, B200, GB200, GB300): the GB200 / GB300
    recipes set the B200 ones (userbuffers_*_b200_* TP-overlap configs), and their Megatron-FSDP runs
    offload activations to the Grace CPU (``_grace_offload``). Not priced, left out here: CUDA graphs
    (the 8B recipes' ``cuda_graph_impl = "local"``) and Megatron-FSDP's double buffer."""
    _nemo(d)
    _grace_offload(d)
    d.strat["fp32_main_grads"] = False
    # FP8 primary weights: Megatron-Bridge's mixed-precision recipes (src/megatron/bridge/training/
    # mixed_precision.py, r0.1.0 … r0.4.0) set ``fp8_param_gather = True`` for delayed, current and
    # MX scaling and False only for subchannel (blockwise) scaling — the H100 "alternate
    # quantization granularity" rows (128x128 weights / 1x128 activations, the notes column)
    label = _s(d.row, "dtype").lower()
    subchannel = "alternate" in label and "h100" in _s(d.row, "gpu_type").lower()
    if d.dtype == "fp8" and not subchannel and d.strat.get("zero_stage", 1) >= 1 and d.strat.get("peft") != "lora":
        d.strat["fp8_param_gather"] = True
        d.a.append("FP8 primary weights (fp8_param_gather, the recipe's mixed-precision config)")
    if d.dtype == "nvfp4":
        _nvfp4_weights(d)
    _account_split(d)
    apply_recipe(d)


def _nvfp4_weights(d: Draft) -> None:
    """Megatron-Bridge's ``bf16_with_nvfp4_mixed`` (src/megatron/bridge/training/mixed_precision.py):
    every block linear in NVFP4, no BF16 first/last layers (Bridge's defaults 0 and 0); FP4 primary
    weights (``fp4_param_gather = True``) only from ecbd4ead5 (#3364, 2026-04-21, first in v0.5.0:
    the 26.06 table's 63b08b397) — r0.3.0 (26.02.01) and r0.4.0 (26.04, 26.04.01) set
    ``fp8_param_gather = False`` and no FP4 gather, so the weights keep their bf16 copy there."""
    primary = d.rid.startswith("mbridge_26.06_") and d.strat.get("zero_stage", 1) >= 1 and d.strat.get("peft") != "lora"
    if primary:
        d.strat["fp8_param_gather"] = True
    d.a.append("every block linear in NVFP4 (bf16_with_nvfp4_mixed)" + (
        "; FP4 primary weights (fp4_param_gather, from v0.5.0)" if primary else "; bf16 primary weights (no fp4_param_gather before v0.5.0)"))


# Megatron-Bridge's activation offload on the Grace superchips, per (model, system): the FP8
# current-scaling Megatron-FSDP recipes set ``cpu_offloading_num_layers`` (r0.1.0 configs/llama3/
# llama3_70b_llm_pretrain.yaml gb200 fp8_cs 40, configs/llama31/llama31_405b_llm_pretrain.yaml gb200
# fp8_cs 95; r0.2.0 … r0.4.0 configs/llama*/…workload_base_configs.py LLAMA3_70B_…_GB200_FP8_CS 40,
# GB300 20, LLAMA31_405B_GB200_FP8_CS 92, GB300 10)
_GRACE_OFFLOAD = {("llama3_70b", "gb200"): 40, ("llama3_70b", "gb300"): 20,
                  ("llama3.1_405b", "gb200"): 92, ("llama3.1_405b", "gb300"): 10}


def _grace_offload(d: Draft) -> None:
    """The recipe's CPU activation offload on a GB200 / GB300 Megatron-FSDP FP8 run (pp 1, no
    recompute: what Megatron-Core allows it with); 95 layers for the 405B in 25.09 (r0.1.0)."""
    gpu = _s(d.row, "gpu_type").lower()
    system = "gb300" if "gb300" in gpu else "gb200" if "gb200" in gpu else None
    if system is None or d.dtype != "fp8" or d.strat.get("zero_stage") != 3 or d.pp != 1:
        return
    n = _GRACE_OFFLOAD.get((_s(d.row, "model").lower(), system))
    if n is None:
        return
    if n == 92 and d.rid.startswith("mbridge_25.09_"):
        n = 95
    d.strat["cpu_offload_layers"] = n
    d.a.append(f"{n} layers' activations offloaded to the Grace CPU (the release's recipe: cpu_offloading_num_layers)")


def _account_split(d: Draft) -> None:
    """Llama 3.1 405B's pipeline split: its recipe counts the embedding and the loss as one layer each
    (src/megatron/bridge/recipes/llama/llama3.py llama31_405b_pretrain_config,
    ``account_for_embedding_in_pipeline_split`` and ``account_for_loss_in_pipeline_split`` = True,
    r0.2.0 … 63b08b397), so each of the pp·vp virtual stages holds (126 + 2) / (pp·vp) slots and the
    first and last one decoder layer fewer — config/layout.py's even_split for every layout printed.
    At pp 16 × vp 8 = 128 stages (the GB200 MXFP8 rows) the two end stages hold the embedding and the
    loss alone, which the default split's one-layer-per-stage rule refuses: given explicitly there."""
    model = _s(d.row, "model").lower()
    stages = d.pp * d.vpp
    if "405b" not in model or "llama" not in model or stages <= d.layers or (d.layers + 2) % stages:
        return
    d.strat["pipeline_layers"] = _ends_as_layers(d.layers, stages)
    d.a.append(f"pipeline split with the embedding and the loss counted as layers ({d.layers} + 2 over {stages} "
               f"virtual stages, the end stages without a decoder layer: the recipe's account_for_*_in_pipeline_split)")


def _ends_as_layers(layers: int, stages: int) -> list[int]:
    """Decoder layers per virtual stage when the embedding and the loss count as one layer each
    ((layers + 2) / stages slots per stage, the two end stages one decoder layer short)."""
    each = (layers + 2) // stages
    return [each - 1] + [each] * (stages - 2) + [each - 1]


def _deepseek_v3_report(d: Draft) -> None:
    """The DeepSeek-V3 technical report's pre-training run (arXiv:2412.19437): §3.2.1 DualPipe over
    the 16 pipeline stages, §3.2 "64-way Expert Parallelism spanning 8 nodes, and ZeRO-1 Data
    Parallelism", no tensor parallelism (§3.2.3: "we can train DeepSeek-V3 without using costly
    Tensor Parallelism"), §3.2.3 "Recomputation of RMSNorm and MLA Up-Projection", §3.3 (low-precision
    storage) "we only cache the inputs of the SwiGLU operator and recompute its output in the
    backward pass" (Megatron-Core's ``moe_act``) and "BF16 ... to track the first and second moments
    in the AdamW optimizer" (``adam_moments_dtype``), §3.2.2 its own all-to-all kernels (warp-specialised, 20 SMs;
    DeepEP is their open-source release: the deepep dispatcher), §3.3 FP8 training (Linear inputs
    cached in fp8, as TransformerEngine's). Its HAI-LLM framework's other kernels are priced as
    Megatron-Core's. Not modelled, and said so: the E5M6 cache of the attention output projection's
    input and the CPU-held EMA of §3.2.3 / §3.3 (memory only)."""
    if d.mb is None:
        d.mb = 1
        d.a.append("micro-batch size not stated: 1")
    d.strat.update(schedule="dualpipe", zero_stage=1, recompute="selective",
                   recompute_modules=["layernorm", "mla_up_proj", "moe_act"], moe_dispatcher="deepep",
                   overlap_grad_reduce=True, overlap_param_gather=True, sequence_parallel=False,
                   adam_moments_dtype="bf16",
                   # DualPipe commits its sends with the next receives and waits on all of them before
                   # the next chunk (deepseek-ai/DualPipe dualpipe.py ``_commit_and_wait_comm``:
                   # batch_isend_irecv, then ``req.wait()`` on each): the compute stream waits for the sends
                   overlap_p2p_comm=False)
    d.a.append("HAI-LLM's kernels priced as Megatron-Core + TransformerEngine's; its all-to-all as DeepEP's")
    d.a.append("E5M6-cached attention outputs (report §3.3) not modelled: memory only")


def _llama3_report(d: Draft) -> None:
    """Llama 3 405B pre-training as the Llama 3 report describes it (Dubey et al. 2024,
    arXiv:2407.21783 §3.3.2, Table 4): the interleaved schedule with one decoder layer fewer on the
    first and the last stage, no activation checkpointing for 8K sequences (the row's recompute
    cell), asynchronous point-to-point sends, FSDP that keeps the parameters gathered from forward
    to backward (priced as the distributed optimizer: gradients kept whole through the micro-batches
    and reduce-scattered once, parameters all-gathered once, both overlapped). Not stated, and said:
    the micro-batch size (1), the virtual stages (8: one decoder layer each, the two end stages the
    embedding and the loss alone, as Megatron-Bridge's 405B recipe at pp 16 runs, ``_account_split``),
    sequence parallelism with TP (Korthikanti et al. 2022)."""
    if d.strat["cp"] > 1:
        # §3.3.2: all-gather the K and V, then attention of the local Q chunk, in Meta's own code;
        # the torch stacks' CP here is PyTorch's context_parallel (ring attention), which it is not
        raise _Skip("Meta's own all-gather context parallelism (Llama 3 report §3.3.2) is not PyTorch's "
                    "context_parallel, the only CP of a PyTorch stack modelled here")
    if d.mb is None:
        d.mb = 1
        d.a.append("micro-batch size not stated: 1")
    d.vpp = (d.layers + 2) // d.pp if (d.layers + 2) % d.pp == 0 else 1
    stages = d.pp * d.vpp
    d.strat["pipeline_layers"] = _ends_as_layers(d.layers, stages)
    d.a.append(f"virtual stages not stated: {d.vpp} per rank, one decoder layer each, the first and the last "
               f"holding the embedding and the loss alone ({d.layers} + 2 = {stages} slots; §3.3.2 takes one "
               "layer from each end stage)")
    d.strat.update(schedule="interleaved", recompute="none", zero_stage=1, overlap_grad_reduce=True,
                   overlap_param_gather=True, overlap_p2p_comm=True, sequence_parallel=True)
    d.a.append("FSDP without resharding after forward priced as the distributed optimizer (ZeRO-1): gradients "
               "reduce-scattered once a step, parameters all-gathered once, both overlapped")
    d.a.append("sequence parallelism with TP (not stated)")


def _dgxc(d: Draft) -> None:
    """NVIDIA/dgxc-benchmarking's NeMo performance recipes (MIT): the NeMo pages' recipe defaults
    (``_nemo``) and what the recipes' code sets beyond them. Its READMEs up to v25.05.05 state no
    recompute, overlap or FP8 recipe (the FP8 one is said from v25.07: "Per-tensor delayed scaling
    recipe is used for FP8 training here"; mapping.py ``_fp8_recipe``)."""
    _nemo(d)
    # bf16 gradients: NeMo's recipes under the NeMo checkout dgxc v25.04.02 runs (NEMO_COMMIT
    # d2b21556, llama3.1/setup.sh and nemotron/setup.sh @0efdb23; the same in v2.2.0 and in the
    # 25.04.00 container of v25.05.05): every pretrain_performance_optimizations
    # (nemo/collections/llm/recipes/llama3_8b.py, llama3_70b.py, llama31_405b.py, nemotron4_15b.py,
    # nemotron4_340b.py) sets ``recipe.trainer.plugins.grad_reduce_in_fp32 = False``, dgxc's
    # llama3.1/pretrain_llama31.py the same on its FP8 path; GPT-3's NeMo 1 config
    # (nemo_megatron/cfg/gpt3_175b_hydra.yaml) ``optim.grad_sync_dtype: bf16``
    d.strat["fp32_main_grads"] = False
    d.a.append("bf16 gradients (the recipes' grad_reduce_in_fp32 = False / grad_sync_dtype: bf16)")
    if d.dtype == "fp8":
        # FP8 primary weights: NeMo 2's bf16_with_fp8_mixed sets ``fp8_params = True``
        # (recipes/precision/mixed_precision.py); GPT-3's config ``fp8_params: true``
        d.strat["fp8_param_gather"] = True
        d.a.append("FP8 primary weights (fp8_params = True in bf16_with_fp8_mixed / the GPT-3 config)")


SOURCE_SETTINGS: dict[str, Callable[[Draft], None]] = {
    "narayanan21": _narayanan21, "korthikanti22": _korthikanti22, "megatron-readme": _megatron_readme,
    "torchtitan": _torchtitan, "nemo": _nemo, "megatron-bridge": _megatron_bridge,
    "deepseek-v3-report": _deepseek_v3_report, "dgxc-benchmarking": _dgxc, "llama3-report": _llama3_report,
}
