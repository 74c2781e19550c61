"""Small kernels (cost/launch.py): the kernels each op launches, the GPU work per launch on the
critical stage, and the warning below NVIDIA's ~50 µs launch-bound symptom — a flag, never a change
of the estimate's numbers."""

from __future__ import annotations

import pytest
from scenarios import make

from simengine.api import estimate
from simengine.cost.compute import ComputeModel
from simengine.cost.launch import LAUNCH_BOUND_US, gpu_us_per_launch, launch_warning
from simengine.cost.phase import price_ops
from simengine.cost.stage import build_plan
from simengine.workload.ops import Attention, Collective, Gemm, GroupedGemm, Memory

QWEN_NODE = {"num_gpus": 8}
QWEN = {"tp": 1, "pp": 1, "ep": 8, "micro_batch_size": 1, "global_batch_size": 64, "seq_len": 4096,
        "dtype": "fp8", "moe_dispatcher": "alltoall"}


def _qwen(**strategy):
    return make("qwen3-30b-a3b", "b200-sxm-180gb", system=QWEN_NODE, strategy={**QWEN, **strategy})


def test_each_op_launches_what_its_implementation_issues():
    """A GEMM its count of cuBLAS calls, a grouped GEMM one per local expert (TE
    multi_stream_cublas_gemm loops over them), fused attention 1 forward and 2 backward
    (dot(dO, O) preprocess + main), unfused 4 and 8, a memory-bound step its kernels."""
    launches = ComputeModel.launches
    assert launches(Gemm("fwd:qkv", 4096, 1024, 4096, count=3)) == 3
    assert launches(GroupedGemm("fwd:expert_fc1", 16, 256, 1536, 2048)) == 16
    att = {"b": 1, "heads": 32, "kv_heads": 4, "s_q": 4096, "s_kv": 4096, "d_qk": 128, "d_v": 128, "causal": True}
    assert launches(Attention("attn", phase="fwd", **att)) == 1
    assert launches(Attention("attn-bwd", phase="bwd", **att)) == 2
    assert launches(Attention("attn", phase="fwd", impl="unfused", **att)) == 4
    assert launches(Attention("attn-bwd", phase="bwd", impl="unfused", **att)) == 8
    assert launches(Memory("norm", 1e6, kernels=8)) == 8


def test_a_phase_counts_the_kernels_of_its_layer_by_hand():
    """Llama-3 8B's attention block under Megatron-Core + TE, bf16, tp 1, counted from its op list
    (workload/layers.py attention_block): forward norm, QKV GEMM, RoPE, flash attention, out-proj,
    bias-dropout-add = 6; backward norm, QKV dgrad, RoPE, attention (2 kernels), out-proj dgrad
    = 6; weight gradients 2. Qwen3-30B-A3B's MoE block at ep 8 (16 local experts) launches 16
    GEMMs for each grouped GEMM, and no collective counts."""
    sc = make("llama3-8b", system={"num_gpus": 8}, strategy={"tp": 1, "pp": 1, "micro_batch_size": 1,
                                                             "global_batch_size": 8, "seq_len": 4096})
    plan = build_plan(sc)
    cm = ComputeModel(sc.system, sc.strategy.dtype)
    from simengine.workload.builder import scenario_blocks
    attn = scenario_blocks(sc)["attn"]
    assert [price_ops(list(getattr(attn, ph)), cm, plan.comm).kernels for ph in ("fwd", "bwd", "wgt")] == [6, 6, 2]
    moe_sc = _qwen()
    moe = scenario_blocks(moe_sc)["moe"]
    grouped = [op for op in moe.fwd if isinstance(op, GroupedGemm)]
    assert [op.groups for op in grouped] == [16, 16]
    others = [op for op in moe.fwd if not isinstance(op, (GroupedGemm, Collective))]
    pc = price_ops(list(moe.fwd), ComputeModel(moe_sc.system, moe_sc.strategy.dtype), build_plan(moe_sc).comm)
    assert pc.kernels == 32 + sum(ComputeModel.launches(op) for op in others)


def test_report_gives_the_critical_stages_work_per_launch():
    """Σ compute seconds / Σ kernels of one micro-batch through the critical rank's chunks — the
    selective recompute of the attention cores counting its kernels (one flash forward per layer)
    as well as its seconds."""
    sc = make("llama3-70b", system={"num_gpus": 16},
              strategy={"tp": 4, "pp": 4, "micro_batch_size": 1, "global_batch_size": 16, "seq_len": 4096,
                        "recompute": "selective"})
    rep = estimate(sc)
    stage = build_plan(sc).stages[rep.critical_rank]
    (chunk,) = stage.chunks
    assert chunk.recompute.kernels == len(chunk.work.layers) and chunk.recompute.compute_s > 0
    phases = [ph for c in stage.chunks for ph in (c.fwd, c.bwd, c.wgt, c.recompute)]
    want = sum(ph.compute_s for ph in phases) / sum(ph.kernels for ph in phases) * 1e6
    assert rep.gpu_us_per_launch == pytest.approx(want, rel=1e-12)
    assert rep.gpu_us_per_launch > LAUNCH_BOUND_US  # a dense 70B layer: long kernels, no warning
    assert not any("small kernels" in w for w in rep.warnings)


def test_fine_grained_moe_at_micro_batch_one_is_flagged_and_a_larger_micro_batch_clears_it():
    """Qwen3-30B-A3B on 8 B200s, ep 8 (16 experts per GPU): the Megatron-Bridge micro-batch-1
    layout the estimate over-predicts by 46 % is flagged; micro-batch 4 (the later recipe,
    within 13 %) does four times the work per launch and is not. The numbers are not changed."""
    one, four = estimate(_qwen()), estimate(_qwen(micro_batch_size=4))
    assert one.gpu_us_per_launch < LAUNCH_BOUND_US < four.gpu_us_per_launch
    (w,) = [w for w in one.warnings if w.startswith("small kernels")]
    assert "dropless MoE layer" in w and "CUDA graphs" in w and "not model" in w
    assert not any(x.startswith("small kernels") for x in four.warnings)


def test_more_local_experts_launch_more_expert_gemms():
    """ep 4 puts 32 experts on each GPU, ep 8 16: the expert GEMMs are launched per local expert,
    so a micro-batch launches more kernels at ep 4 for the same routed tokens per GPU."""
    k4 = gpu_us_per_launch(build_plan(_qwen(ep=4)).stages[0])[1]
    k8 = gpu_us_per_launch(build_plan(_qwen(ep=8)).stages[0])[1]
    assert k4 > k8


def test_the_warning_is_only_below_the_threshold():
    assert launch_warning(LAUNCH_BOUND_US, 100, 0, False) is None
    assert launch_warning(LAUNCH_BOUND_US + 1, 100, 0, True) is None
    assert launch_warning(12.0, 0, 0, True) is None  # nothing launched: nothing to say
    dense = launch_warning(12.3, 400, 2, False)
    assert dense is not None and "stage 2" in dense and "about 12 µs" in dense and "400 kernels" in dense
    assert "MoE" not in dense


def test_search_candidates_carry_the_work_per_launch_of_their_estimate():
    from simengine import presets
    from simengine.search import make_space, search
    from simengine.search.prune import scenario

    choices = {"tp": (1,), "pp": (1,), "cp": (1,), "ep": (8,), "zero_stage": (1,), "recompute": ("none",),
               "tp_comm_overlap": (False,), "overlap_param_gather": (True,), "overlap_grad_reduce": (True,)}
    space = make_space(presets.load_preset("models", "qwen3-30b-a3b"), presets.load_preset("systems", "b200-sxm-180gb"),
                       global_batch=64, seq_len=4096, gpus=[8], choices=choices)
    res = search(space, top=3)
    assert res.candidates
    for c in res.candidates:
        rep = estimate(scenario(space, c.gpus, c.strategy))
        assert c.gpu_us_per_launch == rep.gpu_us_per_launch > 0
        assert c.to_json()["gpu_us_per_launch"] == c.gpu_us_per_launch
