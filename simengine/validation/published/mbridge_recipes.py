"""What the Megatron-Bridge performance recipes ran for the published MoE rows (DeepSeek-V3, Qwen3).

The performance-summary tables print the parallel layout only; the MoE mechanisms (token dispatcher,
all-to-all overlaps, TP overlap, MTP, pipeline layout) live in the recipe scripts of the release the
table belongs to (NVIDIA-NeMo/Megatron-Bridge, read at the commits below). One :class:`Recipe` per
(model, GPU, release); :func:`apply_recipe` sets those fields on a :class:`settings.Draft`, and only
when the row's tp/pp/ep are the recipe's own (otherwise the row ran something else: noted, not set).

Release → source (NVIDIA-NeMo/Megatron-Bridge):
  25.09 r0.1.0 scripts/performance/run_script.py main() + configs/*/…_llm_pretrain.yaml
  25.11 r0.2.0 scripts/performance/configs/{deepseek,qwen3}/workload_base_configs.py, utils/helpers.py
  26.02 c0b9a0003 ("26.02 perf summary") configs/{deepseek,qwen}/*_workload_base_configs.py
  26.02.01 r0.3.0, 26.04 / 26.04.01 r0.4.0, 26.06 63b08b397 ("26.06 perf summary"): the same files,
  utils/overrides.py set_workload_base_configs.
Mechanisms the recipes set that every release shares:
- ``moe_flex_dispatcher_backend`` deepep or hybridep → ``moe_token_dispatcher_type = "flex"`` and
  ``moe_shared_expert_overlap = False`` (src/megatron/bridge/training/flex_dispatcher_backend.py
  apply_flex_dispatcher_backend). HybridEP is DeepEP's NVIDIA hierarchical kernel (DeepEP hybrid-ep
  docs/README_Hybrid-EP.md: RDMA between nodes, TMA over NVLink inside one, a token sent once per
  destination node / rank) — the same per-tier bytes as DeepEP's normal kernels, so both map to
  simengine's ``deepep`` dispatcher. Otherwise the provider's ``alltoall`` (models/deepseek/
  deepseek_provider.py, models/qwen/qwen_provider.py: moe_token_dispatcher_type = "alltoall").
- ``moe_a2a_overlap`` → ``overlap_moe_expert_parallel_comm = True``, ``delay_wgrad_compute = True``,
  ``moe_shared_expert_overlap = False`` (utils/overrides.py _set_moe_a2a_overlap_overrides; r0.2.0
  utils/helpers.py set_moe_a2a_overlap_overrides; r0.1.0 run_script.py ``A2A_1F1B`` for DeepSeek H100).
- DeepSeek-V3: ``mtp_num_layers = 1`` (recipes/deepseek/deepseek_v3.py, every release; no perf script
  turns it off), the precision-aware optimizer with bf16 ``exp_avg_dtype`` / ``exp_avg_sq_dtype`` (same file), ``moe_shared_expert_overlap = True`` unless flex or the a2a overlap turned it off
  (DeepSeekModelProvider default), ``CommOverlapConfig(tp_comm_overlap=False)`` (deepseek_v3.py), the
  pipeline layout of set_deepseek_v3_pipeline_model_parallel_layout's (pp, vp) map or the H100
  ``pp_layout="Et|(tt|)*30mL"``; H100 ``overlap_grad_reduce = False``, B200 True (deepseek_llm_pretrain.py).
- Qwen3-235B: ``account_for_embedding_in_pipeline_split`` and ``..._loss_...`` (recipes/qwen/qwen3_moe.py
  qwen3_235b_a22b_pretrain_config; r0.1.0 qwen3_235b_a22b.py): (94 + 2) / (pp·vp) per virtual stage, the
  ends one decoder layer short — for these layouts exactly config/layout.py's even_split, so no override.
- ``recompute_modules`` → ``recompute = "selective"`` with those modules (DeepSeek-V3 mla_up_proj [+ mlp on
  H100], GPT-OSS layernorm + moe_act; Qwen3 none).
Not modelled (noted per row): CUDA graphs,
``moe_router_fusion`` / ``moe_permute_fusion``. HybridEP's ``moe_hybridep_num_sms = 32``
(utils/overrides.py): its bandwidth at ≥ 16 SMs is cost/hybridep.py's; the SMs it takes from compute
cost nothing here, since no HybridEP recipe overlaps the dispatch with compute (overrides.py: "TODO:
This needs to be adjusted when overlapping HybridEP with computation").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .settings import Draft


# set_deepseek_v3_pipeline_model_parallel_layout's map (recipes/deepseek/deepseek_v3.py; r0.1.0
# ``map_pp_vp_to_layout``), (pp, vp) = (16, 1) or (8, 2): embedding + 4 decoder layers, fourteen
# stages of 4, then 1 + mtp + loss (61 layers)
_DSV3_16 = (4,) * 15 + (1,)
# "Et|(tt|)*30mL" (DEEPSEEK_V3_*_H100 pp_layout; r0.1.0 run_script.py): embedding + 1 layer, thirty
# stages of 2, then mtp + loss alone (pp 8 × vp 4 = 32 virtual stages)
_DSV3_H100 = (1,) + (2,) * 30 + (0,)


@dataclass(frozen=True)
class Recipe:
    cite: str
    tp: int
    pp: int
    ep: int
    vp: int = 1
    mb: int = 1
    flex: bool = False          # deepep or hybridep backend (→ simengine "deepep")
    a2a_overlap: bool = False   # moe_a2a_overlap (→ overlap_moe_expert_parallel_comm)
    tp_comm_overlap: bool = True
    overlap_grad_reduce: bool = True
    dsv3: bool = False          # DeepSeek-V3 recipe: MTP 1, shared-expert overlap unless flex/a2a
    layout: tuple[int, ...] | None = None  # decoder layers per virtual stage (pipeline_model_parallel_layout)
    # the GLU's activation is quick_gelu, not silu (models/gpt_oss/gpt_oss_bridge.py provider_bridge:
    # activation_func = quick_gelu), so Bridge's FLOP count (training/utils/flop_utils.py transformer_flops
    # gated_linear_multiplier = 3/2 only for gated_linear_unit with F.silu) counts the MLP as two GEMMs
    quick_gelu_glu: bool = False
    # selective recompute of these Megatron-Core submodules (the workload config's recompute_modules;
    # utils/overrides.py _set_recompute_overrides also sets recompute_granularity = "selective")
    recompute_modules: tuple[str, ...] = ()
    note: str = ""              # a setting of the recipe simengine does not price, said on the row


_R1 = "r0.1.0 scripts/performance/run_script.py main() + configs/{}/{}_llm_pretrain.yaml perf_matrix.{}"
_R2 = "r0.2.0 scripts/performance/configs/{}/workload_base_configs.py {}"
_WB = "{} scripts/performance/configs/{}_workload_base_configs.py {}"

# every GPT-OSS 120B B200 / H100 workload config: recompute_modules=["layernorm", "moe_act"]
# (r0.2.0 configs/gpt_oss/workload_base_configs.py; c0b9a0003, r0.3.0, r0.4.0 gpt_oss_workload_base_configs.py)
_OSS_RECOMPUTE = ("layernorm", "moe_act")
# DeepSeek-V3: recompute_granularity "selective" (deepseek_llm_pretrain.py) with recompute_modules
# ["mla_up_proj", "mlp"] on H100 and ["mla_up_proj"] on B200 (r0.1.0 run_script.py main(); r0.2.0
# DEEPSEEK_V3_{H100,B200}_BASE_CONFIG; c0b9a0003 / r0.3.0 / r0.4.0 DEEPSEEK_V3_PRETRAIN_CONFIG_{H100,B200}_V1/V2)
_DSV3_RECOMPUTE = {"h100": ("mla_up_proj", "mlp"), "b200": ("mla_up_proj",)}

RECIPES: dict[tuple[str, str, str], Recipe] = {
    # ---- DeepSeek-V3 ----
    ("deepseek-v3", "b200", "25.09"): Recipe(_R1.format("deepseek", "deepseek_v3", "b200") + " (tokendrop: no DeepEP, no A2A_1F1B)",
                                             1, 16, 8, layout=_DSV3_16, dsv3=True, tp_comm_overlap=False),
    ("deepseek-v3", "h100", "25.09"): Recipe(_R1.format("deepseek", "deepseek_v3", "h100") + " (enable_deepep, A2A_1F1B)",
                                             2, 8, 64, vp=4, flex=True, a2a_overlap=True, tp_comm_overlap=False,
                                             overlap_grad_reduce=False, dsv3=True, layout=_DSV3_H100),
    ("deepseek-v3", "b200", "25.11"): Recipe(_R2.format("deepseek", "DEEPSEEK_V3_B200_BASE_CONFIG (no flex backend)"),
                                             1, 16, 8, layout=_DSV3_16, dsv3=True, tp_comm_overlap=False),
    ("deepseek-v3", "b200", "26.02"): Recipe(_WB.format("c0b9a0003", "deepseek/deepseek", "DEEPSEEK_V3_PRETRAIN_CONFIG_B200_V2 (hybridep)"),
                                             1, 16, 8, layout=_DSV3_16, flex=True, dsv3=True, tp_comm_overlap=False),
    ("deepseek-v3", "b200", "26.02.01"): Recipe(_WB.format("r0.3.0", "deepseek/deepseek", "DEEPSEEK_V3_PRETRAIN_CONFIG_B200_V2 (hybridep)"),
                                                1, 16, 8, layout=_DSV3_16, flex=True, dsv3=True, tp_comm_overlap=False),
    ("deepseek-v3", "b200", "26.04"): Recipe(_WB.format("r0.4.0", "deepseek/deepseek", "DEEPSEEK_V3_PRETRAIN_CONFIG_B200_V2 (hybridep)"),
                                             1, 16, 8, layout=_DSV3_16, flex=True, dsv3=True, tp_comm_overlap=False),
    ("deepseek-v3", "b200", "26.04.01"): Recipe(_WB.format("r0.4.0", "deepseek/deepseek", "DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 (deepep, moe_a2a_overlap, "
                                                "recompute_modules=['mla_up_proj', 'mlp'])"),
                                                1, 8, 32, vp=2, flex=True, a2a_overlap=True, dsv3=True, layout=_DSV3_16, tp_comm_overlap=False,
                                                recompute_modules=("mla_up_proj", "mlp")),
    # ---- Qwen3-235B-A22B (no shared experts) ----
    ("qwen3-235b-a22b", "h100", "25.09"): Recipe(_R1.format("qwen3", "qwen3_235b_a22b", "h100") + " (CommOverlapConfig(tp_comm_overlap=True))",
                                                 2, 8, 32, vp=4),
    ("qwen3-235b-a22b", "b200", "25.09"): Recipe(_R1.format("qwen3", "qwen3_235b_a22b", "b200"), 1, 8, 8, vp=2),
    ("qwen3-235b-a22b", "h100", "25.11"): Recipe(_R2.format("qwen3", "QWEN3_235B_A22B_H100_FP8_CS_BASE_CONFIG; qwen3_llm_pretrain.py "
                                                            "qwen3_235b_a22b_h100_config tp_comm_overlap=False"),
                                                 2, 8, 32, vp=4, a2a_overlap=True, tp_comm_overlap=False),
    ("qwen3-235b-a22b", "b200", "25.11"): Recipe(_R2.format("qwen3", "QWEN3_235B_A22B_B200_FP8_CS_BASE_CONFIG"), 1, 8, 8, vp=4, a2a_overlap=True),
    **{("qwen3-235b-a22b", "h100", rel): Recipe(_WB.format(tag, "qwen/qwen3", "QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2; qwen3_llm_pretrain.py "
                                                           "qwen3_235b_a22b_pretrain_config_h100 tp_comm_overlap=False, alltoall"),
                                                2, 8, 32, vp=4, a2a_overlap=True, tp_comm_overlap=False)
       for rel, tag in (("26.02", "c0b9a0003"), ("26.02.01", "r0.3.0"), ("26.04", "r0.4.0"), ("26.04.01", "r0.4.0"))},
    **{("qwen3-235b-a22b", "b200", rel): Recipe(_WB.format(tag, "qwen/qwen3", "QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_FP8_CS_V2; "
                                                           "qwen3_235b_a22b_pretrain_config_b200 alltoall"), 1, 8, 8)
       for rel, tag in (("26.02", "c0b9a0003"), ("26.02.01", "r0.3.0"), ("26.04", "r0.4.0"), ("26.04.01", "r0.4.0"))},
    # ---- Qwen3-30B-A3B ----
    ("qwen3-30b-a3b", "b200", "25.09"): Recipe(_R1.format("qwen3", "qwen3_30b_a3b", "b200"), 1, 1, 8),
    ("qwen3-30b-a3b", "h100", "25.09"): Recipe(_R1.format("qwen3", "qwen3_30b_a3b", "h100"), 1, 2, 8, vp=12, mb=2),
    ("qwen3-30b-a3b", "b200", "25.11"): Recipe(_R2.format("qwen3", "QWEN3_30B_A3B_B200_FP8_CS_BASE_CONFIG (no flex backend)"), 1, 1, 8),
    ("qwen3-30b-a3b", "h100", "25.11"): Recipe(_R2.format("qwen3", "QWEN3_30B_A3B_H100_FP8_CS_BASE_CONFIG (moe_a2a_overlap)"),
                                               1, 2, 8, vp=12, a2a_overlap=True),
    ("qwen3-30b-a3b", "b200", "26.02"): Recipe(_WB.format("c0b9a0003", "qwen/qwen3", "QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_CS_V1 (no flex backend)"), 1, 1, 8),
    **{("qwen3-30b-a3b", "b200", rel): Recipe(_WB.format(tag, "qwen/qwen3", "QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1 (hybridep)"), 1, 1, 8, mb=4, flex=True)
       for rel, tag in (("26.02.01", "r0.3.0"), ("26.04", "r0.4.0"), ("26.04.01", "r0.4.0"))},
    **{("qwen3-30b-a3b", "h100", rel): Recipe(_WB.format(tag, "qwen/qwen3", "QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 (hybridep)"), 1, 1, 16, flex=True)
       for rel, tag in (("26.02", "c0b9a0003"), ("26.02.01", "r0.3.0"), ("26.04", "r0.4.0"), ("26.04.01", "r0.4.0"), ("26.06", "63b08b397"))},
    # ---- GPT-OSS 120B (recipes/gpt_oss/gpt_oss.py gpt_oss_120b_pretrain_config: alltoall dispatcher, no TP
    # comm overlap, overlap_grad_reduce; configs/gpt_oss/*workload_base_configs.py: ep, mb, flex backend) ----
    ("gpt-oss-120b", "b200", "25.11"): Recipe(_R2.format("gpt_oss", "GPT_OSS_120B_B200_BF16_BASE_CONFIG"), 1, 1, 64, mb=4,
                                              tp_comm_overlap=False, quick_gelu_glu=True, recompute_modules=_OSS_RECOMPUTE),
    ("gpt-oss-120b", "b200", "26.02"): Recipe(_WB.format("c0b9a0003", "gpt_oss/gpt_oss", "GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2"),
                                              1, 1, 64, mb=4, tp_comm_overlap=False, quick_gelu_glu=True, recompute_modules=_OSS_RECOMPUTE),
    # B200 V2 from r0.3.0 on: ep 8 with moe_flex_dispatcher_backend="hybridep" (904597bd3 #2915, 2026-03-21, the
    # day of the 26.02.01 table cfeddcd94); r0.4.0 dropped the backend line on 2026-05-11 (78934c150, #3614
    # "switch GPT-OSS B200 V2 dispatcher default to alltoall"): after the 26.04 table (f171d7d30, 2026-04-20,
    # recipe still hybridep), before the 26.04.01 table (2b82f6f17, 2026-05-27, alltoall)
    **{("gpt-oss-120b", "b200", rel): Recipe(_WB.format(tag, "gpt_oss/gpt_oss", "GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2 (hybridep)"),
                                             1, 1, 8, mb=4, flex=True, tp_comm_overlap=False, quick_gelu_glu=True, recompute_modules=_OSS_RECOMPUTE)
       for rel, tag in (("26.02.01", "r0.3.0"), ("26.04", "r0.4.0@f171d7d30"))},
    ("gpt-oss-120b", "b200", "26.04.01"): Recipe(_WB.format("r0.4.0@2b82f6f17", "gpt_oss/gpt_oss",
                                                            "GPT_OSS_120B_PRETRAIN_CONFIG_B200_BF16_V2 (alltoall since 78934c150)"),
                                                 1, 1, 8, mb=4, tp_comm_overlap=False, quick_gelu_glu=True, recompute_modules=_OSS_RECOMPUTE),
    ("gpt-oss-120b", "h100", "25.11"): Recipe(_R2.format("gpt_oss", "GPT_OSS_120B_H100_BF16_BASE_CONFIG"), 1, 4, 8,
                                              tp_comm_overlap=False, quick_gelu_glu=True, recompute_modules=_OSS_RECOMPUTE),
    **{("gpt-oss-120b", "h100", rel): Recipe(_WB.format(tag, "gpt_oss/gpt_oss", "GPT_OSS_120B_PRETRAIN_CONFIG_H100_BF16_V2"),
                                             1, 4, 8, tp_comm_overlap=False, quick_gelu_glu=True, recompute_modules=_OSS_RECOMPUTE)
       for rel, tag in (("26.02", "c0b9a0003"), ("26.02.01", "r0.3.0"), ("26.04", "r0.4.0"), ("26.04.01", "r0.4.0"))},
    # ---- Nemotron 3 Nano (configs/nemotronh/nemotron_3{,_nano}_workload_base_configs.py, the same in r0.3.0,
    # r0.4.0 and 63b08b397: hybridep everywhere; H100 FP8_CS_V1 recompute_modules moe, layernorm, core_attn, moe_act;
    # B200 FP8_MX_V1 = BF16_V1, micro-batch 2) ----
    **{("nemotron-3-nano", "h100", rel): Recipe(_WB.format(tag, f"nemotronh/{base}", "NEMOTRON_3_NANO_PRETRAIN_CONFIG_H100_FP8_CS_V1 (hybridep)"),
                                                1, 1, 8, flex=True, tp_comm_overlap=False,
                                                recompute_modules=("moe", "layernorm", "core_attn", "moe_act"))
       for rel, tag, base in (("26.02.01", "r0.3.0", "nemotron_3_nano"), ("26.04", "r0.4.0", "nemotron_3"),
                              ("26.04.01", "r0.4.0", "nemotron_3"), ("26.06", "63b08b397", "nemotron_3"))},
    ("nemotron-3-nano", "b200", "26.04.01"): Recipe(_WB.format("r0.4.0", "nemotronh/nemotron_3", "NEMOTRON_3_NANO_PRETRAIN_CONFIG_B200_FP8_MX_V1 "
                                                               "= B200_BF16_V1 (hybridep)"), 1, 1, 8, mb=2, flex=True, tp_comm_overlap=False),
    # ---- Nemotron 3 Super (recipes/nemotronh/nemotron_3_super.py nemotron_3_super_pretrain_config: mtp_num_layers 2
    # with mtp_use_repeated_layer — the preset's —, overlap_grad_reduce; configs/nemotronh/nemotron_3_llm_pretrain.py
    # set_nemotron_3_super_common_configs: grad_reduce_in_fp32 False, forced load balancing) ----
    **{("nemotron-3-super", "b200", rel): Recipe(_WB.format("r0.4.0", "nemotronh/nemotron_3",
                                                            "NEMOTRON_3_SUPER_PRETRAIN_CONFIG_B200_FP8_MX_V1 (hybridep, no CUDA graphs)"),
                                                 1, 1, 64, flex=True, tp_comm_overlap=False, recompute_modules=("moe_act", "layernorm"),
                                                 note="the recipe keeps the MTP block in bf16 (keep_mtp_spec_in_bf16); priced in fp8 "
                                                      "like the other layers")
       for rel in ("26.04", "26.04.01")},
}

# Rows whose printed layout every release's recipe contradicts: the 26.02.01 table's DGX-GB300 Llama 3
# 70B MXFP8 and NVFP4 rows print micro-batch 2 with pp 4 and no virtual stages (MXFP8), and tp 1 pp 1
# without Megatron-FSDP (NVFP4: 515 GiB a GPU, which no GPU holds), where LLAMA3_70B_PRETRAIN_CONFIG_
# GB300_{FP8_MX,NVFP4}_{V1,V2} run pp 4 · vp 5 at micro-batch 1 in r0.3.0 (the release of 26.02.01)
# and every release after it (scripts/performance/configs/llama/llama3_workload_base_configs.py);
# the FSDP FP8 row beside them has micro-batch 2. Skipped rather than mapped onto either layout.
_MISPRINT = ("the 26.02.01 table prints {} for this row, which the release's recipe contradicts (pp 4 · vp 5, "
             "micro-batch 1: llama3_workload_base_configs.py LLAMA3_70B_PRETRAIN_CONFIG_GB300_{}_V2, r0.3.0)")
MISPRINTED = {
    "mbridge_26.02.01_Pre-Training_LLAMA3_70B_DGX-GB300_MXFP8_64gpu_v0": _MISPRINT.format("pp 4, no vp, micro-batch 2", "FP8_MX"),
    "mbridge_26.02.01_Pre-Training_LLAMA3_70B_DGX-GB300_NVFP4_64gpu_v0": _MISPRINT.format(
        "tp 1 · pp 1 without Megatron-FSDP (no GPU holds it), micro-batch 2", "NVFP4"),
}


_MODEL_KEYS = (("deepseek", "deepseek-v3"), ("qwen3_235b", "qwen3-235b-a22b"), ("qwen3_30b", "qwen3-30b-a3b"),
               ("gpt_oss_120b", "gpt-oss-120b"), ("nemotron_3_super", "nemotron-3-super"), ("nemotron_3_nano", "nemotron-3-nano"))


def recipe_key(run_id: str, model: str, gpu_type: str) -> tuple[str, str, str] | None:
    """(model, gpu, release) of a Megatron-Bridge row: release from the run id (mbridge_<release>_…)."""
    m = re.match(r"mbridge_(\d\d\.\d\d(?:\.\d\d)?)_", run_id)
    name = model.lower().replace(" ", "_")
    mk = next((key for frag, key in _MODEL_KEYS if frag in name), None)
    g = gpu_type.lower()
    gpu = "h100" if "h100" in g else "b200" if "b200" in g and "gb200" not in g else None
    if not (m and mk and gpu):
        return None
    return mk, gpu, m.group(1)


def apply_recipe(d: "Draft") -> None:
    """Set the MoE mechanisms of the row's recipe on the draft (strategy and MTP)."""
    key = recipe_key(d.rid, d.row.get("model") or "", d.row.get("gpu_type") or "")
    if key is None or not d.model.get("num_experts"):
        return
    r = RECIPES.get(key)
    s, a = d.strat, d.a
    if r is None:
        a.append(f"no Megatron-Bridge recipe read for {key}: MoE mechanisms left at defaults")
        return
    if r.quick_gelu_glu:
        d.flop_basis["glu_silu"] = False
    if (d.tp, d.pp, s["ep"]) != (r.tp, r.pp, r.ep):
        a.append(f"row layout tp{d.tp} pp{d.pp} ep{s['ep']} differs from the release recipe's tp{r.tp} pp{r.pp} ep{r.ep} "
                 f"({r.cite}): MoE mechanisms left at defaults")
        return
    if (d.vpp, d.mb) != (r.vp, r.mb):
        a.append(f"row vp{d.vpp} mb{d.mb} vs recipe vp{r.vp} mb{r.mb}: the row's kept")
    upd: dict[str, Any] = {
        "moe_dispatcher": "deepep" if r.flex else "alltoall",
        "overlap_moe_expert_parallel_comm": r.a2a_overlap and (d.pp == 1 or d.vpp > 1),
        "moe_shared_expert_overlap": bool(r.dsv3 and not r.flex and not r.a2a_overlap),
        "tp_comm_overlap": r.tp_comm_overlap and d.tp > 1,
        "overlap_grad_reduce": r.overlap_grad_reduce,
    }
    if r.a2a_overlap and not upd["overlap_moe_expert_parallel_comm"]:
        a.append("recipe's moe_a2a_overlap needs pp = 1 or vp > 1; the row's pp/vp leave it off")
    if r.layout is not None and len(r.layout) == d.pp * d.vpp:
        upd["pipeline_layers"] = list(r.layout)
    # a recipe's own recompute_modules (e.g. r0.4.0's B200_FP8_MX_V2) over the DeepSeek-V3 default
    modules = r.recompute_modules or (_DSV3_RECOMPUTE[key[1]] if r.dsv3 else ())
    if modules:
        upd.update(recompute="selective", recompute_modules=list(modules))
    if r.dsv3:
        # the DeepSeek-V3 recipe's precision-aware optimizer with bf16 moments (recipes/deepseek/
        # deepseek_v3.py, r0.1.0 … r0.5.0: exp_avg_dtype = exp_avg_sq_dtype = torch.bfloat16), kept by
        # every perf script (only the Megatron-FSDP path turns the precision-aware optimizer off)
        upd["adam_moments_dtype"] = "bf16"
    s.update(upd)
    if r.dsv3:
        d.model["mtp_layers"] = 0 if "w/o mtp" in (d.row.get("model") or "").lower() else 1
        a.append("AdamW moments in bf16 (the recipe's precision-aware optimizer)")
    a.append(f"MoE mechanisms from the recipe: {r.cite}")
    if r.note:
        a.append(r.note)
    if modules:
        a.append(f"selective recompute of {', '.join(modules)} (the recipe's recompute_modules)")
