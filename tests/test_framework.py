"""The software stack as an input (simengine/config/framework.py): each framework mechanism changes
the workload or its price the way that framework's code does, and megatron-te stays the reference."""

from __future__ import annotations

from typing import get_args

import pytest
from scenarios import VALIDATION
from scenarios import make as _make
from scenarios import scenario_dict as _scenario_dict

from simengine.api import estimate
from simengine.config import load_scenario
from simengine.config.framework import FRAMEWORKS, FrameworkName, optimizer_adam_cost
from simengine.config.generation import gpu_generation
from simengine.cost.attention_kernels import FA2_ON_HOPPER, kernel_scale
from simengine.cost.compute import ComputeModel
from simengine.errors import ConfigError
from simengine.workload.builder import build_workload
from simengine.workload.ops import Attention, Gemm, Memory


ONE_NODE = {"num_gpus": 8}


def make(system_preset="h100-sxm5-80gb", strategy=None):
    return _make(system_preset=system_preset, system=ONE_NODE, strategy=strategy)


def scenario_dict(strategy=None):
    return _scenario_dict(system=ONE_NODE, strategy=strategy)


def _blocks(framework: str, **strategy):
    sc = make(strategy={"framework": framework, **strategy})
    return sc, build_workload(sc)


def _memory(ops):
    mem = [op for op in ops if isinstance(op, Memory)]
    return sum(op.bytes for op in mem), sum(op.kernels for op in mem)


def test_every_framework_has_a_row_and_megatron_te_is_the_default():
    assert set(FRAMEWORKS) == set(get_args(FrameworkName))
    assert make().strategy.framework == "megatron-te"
    assert make().strategy.attention_kernel_name == "cudnn"


@pytest.mark.parametrize("block", ["attn", "mlp"])
@pytest.mark.parametrize("phase", ["fwd", "bwd"])
def test_torch_native_moves_more_bytes_and_launches_more_kernels(block, phase):
    _, te = _blocks("megatron-te")
    _, eager = _blocks("torch-native")
    b_te, k_te = _memory(getattr(te.blocks[block], phase))
    b_eager, k_eager = _memory(getattr(eager.blocks[block], phase))
    assert b_eager > 1.5 * b_te
    assert k_eager > k_te


def test_torch_compile_fuses_the_pointwise_ops_like_megatron():
    _, te = _blocks("megatron-te")
    _, compiled = _blocks("torch-compile")
    for block in ("attn", "mlp"):
        for phase in ("fwd", "bwd"):
            assert _memory(getattr(te.blocks[block], phase)) == _memory(getattr(compiled.blocks[block], phase))


def test_megatron_te_norm_and_swiglu_counts_are_the_fused_kernels():
    sc, wl = _blocks("megatron-te")
    d = wl.dims
    norm = next(op for op in wl.blocks["attn"].fwd if op.name == "norm:ln1")
    swiglu_bwd = next(op for op in wl.blocks["mlp"].bwd if op.name == "swiglu-bwd:mlp")
    assert norm.bytes == 2 * d.sp_tokens * d.h * 2 and norm.kernels == 1  # read x, write y (bf16)
    assert swiglu_bwd.bytes == 5 * d.tokens * d.ffn * 2 and swiglu_bwd.kernels == 1


@pytest.mark.parametrize("tp", [1, 2])
def test_separate_qkv_and_gate_up_gemms_conserve_flops(tp):
    _, te = _blocks("megatron-te", tp=tp)
    _, eager = _blocks("torch-native", tp=tp)
    for block in ("attn", "mlp"):
        g_te = [op for op in te.blocks[block].fwd if isinstance(op, Gemm)]
        g_eager = [op for op in eager.blocks[block].fwd if isinstance(op, Gemm)]
        assert sum(op.flops for op in g_te) == pytest.approx(sum(op.flops for op in g_eager))
    names = {op.name for op in eager.blocks["attn"].fwd if isinstance(op, Gemm)}
    assert {"fwd:q", "fwd:k", "fwd:v"} <= names
    assert len([op for op in eager.blocks["mlp"].fwd if isinstance(op, Gemm)]) == 3  # w1, w3, w2
    # the shared input is gathered once, not once per GEMM
    for wl in (te, eager):
        colls = [op.name for op in wl.blocks["attn"].fwd if op.name.startswith("ag:")]
        assert len(colls) == (1 if tp > 1 else 0)


@pytest.mark.parametrize("framework", ["torch-native", "deepspeed"])
def test_framework_without_tp_overlap_never_overlaps(framework):
    cfg = scenario_dict(strategy={"framework": framework, "tp": 2, "tp_comm_overlap": True})
    with pytest.raises(ConfigError) as e:
        load_scenario(cfg)
    assert e.value.field.startswith("strategy") and framework in str(e.value)
    for ok in ("megatron-te", "torch-compile"):
        assert make(strategy={"framework": ok, "tp": 2, "tp_comm_overlap": True}).strategy.tp_comm_overlap


def test_attention_kernel_family_scales_only_where_it_differs():
    assert gpu_generation("NVIDIA H100 80GB HBM3") == "hopper"
    assert gpu_generation("NVIDIA B200") == "blackwell" and gpu_generation("NVIDIA A100-SXM4-80GB") == "ampere"
    assert kernel_scale("cudnn", "NVIDIA H100 80GB HBM3") == 1.0
    assert kernel_scale("flash3", "NVIDIA H100 80GB HBM3") == 1.0
    assert kernel_scale("sdpa", "NVIDIA H100 80GB HBM3") == FA2_ON_HOPPER < 1.0
    assert kernel_scale("flash3", "NVIDIA B200") == FA2_ON_HOPPER  # FA3 is sm90-only
    assert kernel_scale("sdpa", "NVIDIA A100-SXM4-80GB") == 1.0  # FA2 is Ampere's reference
    assert kernel_scale("flash2", "custom GPU") == 1.0


@pytest.mark.parametrize("system,slower", [("h100-sxm5-80gb", True), ("a100-sxm4-80gb", False)])
def test_sdpa_attention_is_slower_on_hopper_only(system, slower):
    times = {}
    for fw in ("megatron-te", "torch-native"):
        sc = make(system_preset=system, strategy={"framework": fw})
        wl = build_workload(sc)
        core = next(op for op in wl.blocks["attn"].fwd if isinstance(op, Attention))
        times[fw] = ComputeModel(sc.system).attention(core)
    assert (times["torch-native"] > 1.2 * times["megatron-te"]) is slower
    if not slower:
        assert times["torch-native"] == pytest.approx(times["megatron-te"])


def test_attention_kernel_override_beats_the_framework_default():
    sc = make(strategy={"framework": "torch-native", "attention_kernel": "cudnn"})
    core = next(op for op in build_workload(sc).blocks["attn"].fwd if isinstance(op, Attention))
    assert core.kernel == "cudnn"


def test_eager_step_is_slower_than_megatron_te_on_the_same_layout():
    te = estimate(scenario_dict(strategy={"framework": "megatron-te"}))
    eager = estimate(scenario_dict(strategy={"framework": "torch-native"}))
    compiled = estimate(scenario_dict(strategy={"framework": "torch-compile"}))
    assert te.step_time_s < compiled.step_time_s < eager.step_time_s
    assert te.num_parameters == eager.num_parameters


def test_foreach_adam_moves_more_bytes_than_fused():
    fused, fused_ops = optimizer_adam_cost("megatron-te")
    foreach, foreach_ops = optimizer_adam_cost("torch-native")
    assert fused == 28.0  # read p, g, m, v; write p, m, v (fp32)
    assert foreach > 2 * fused and foreach_ops > fused_ops


def test_fsdp_pattern_defaults_to_the_framework_and_can_be_overridden():
    assert make(strategy={"framework": "torch-native"}).strategy.fsdp_pattern_name == "fsdp2"
    assert make(strategy={"framework": "deepspeed"}).strategy.fsdp_pattern_name == "zero3"
    assert make(strategy={"framework": "deepspeed", "fsdp_pattern": "fsdp2"}).strategy.fsdp_pattern_name == "fsdp2"


def test_unknown_framework_names_the_field():
    with pytest.raises(ConfigError) as e:
        load_scenario(scenario_dict(strategy={"framework": "jax"}))
    assert e.value.field == "strategy.framework"


CSV = VALIDATION / "published_runs.csv"


def test_published_runs_say_which_framework_they_used():
    from simengine.validation.published import published_runs
    runs, _ = published_runs(CSV.read_text())
    fw = {r.run_id: r.config["strategy"]["framework"] for r in runs}
    assert fw["torchtitan202408_llama3_8B_64a100_selectivelayer"] == "torch-native"  # "bf16 (eager)"
    assert fw["torchtitan202412_8B_8gpu_FSDP_torch.compile"] == "torch-compile"
    assert fw["narayanan21_t1_1.7B"] == "megatron-te"
    assert {f for rid, f in fw.items() if rid.startswith(("nemo", "megatron-bridge"))} == {"megatron-te"}
    ds = [rid for rid, r in ((r.run_id, r) for r in runs) if r.config["strategy"].get("zero_stage") == 3 and rid.startswith("narayanan21")]
    assert ds and all(fw[rid] == "deepspeed" for rid in ds)


def test_kernels_a_framework_lacks_default_off_but_an_explicit_value_wins():
    te, eager, ds = (make(strategy={"framework": f}).strategy for f in ("megatron-te", "torch-native", "deepspeed"))
    assert te.fused_cross_entropy and te.gradient_accumulation_fusion
    assert not eager.fused_cross_entropy and not eager.gradient_accumulation_fusion
    assert not ds.fused_cross_entropy and ds.gradient_accumulation_fusion
    assert make(strategy={"framework": "torch-native", "fused_cross_entropy": True}).strategy.fused_cross_entropy


def test_final_norm_follows_the_framework():
    _, te = _blocks("megatron-te")
    _, eager = _blocks("torch-native")
    n_te = next(op for op in te.blocks["head"].fwd if op.name == "norm:final")
    n_eager = next(op for op in eager.blocks["head"].fwd if op.name == "norm:final")
    assert n_eager.bytes == 9 * n_te.bytes and n_eager.kernels == 8  # 36 vs 4 B per element


def _tp_comm(framework: str, block: str, phase: str, name: str, overlap: bool):
    """(seconds, window, share) of TP collective ``name`` in one priced phase."""
    from simengine.cost.comm import CommModel
    from simengine.cost.moe_comm import collective_time
    from simengine.cost.phase import price_ops
    sc = make(strategy={"framework": framework, "tp": 8, "sequence_parallel": True, "tp_comm_overlap": overlap})
    wl = build_workload(sc)
    ops = getattr(wl.blocks[block], phase)
    (op,) = [o for o in ops if getattr(o, "name", "") == name]
    cm, comm = ComputeModel(sc.system, sc.strategy.dtype), CommModel(sc)
    seconds = collective_time(comm, op)   # its own time (a DTensor one also prices its cat copy)
    (key,) = [k for k in price_ops(ops, cm, comm, overlap).comm if k[0] == "tp_comm" and k[1] == seconds]
    return op, key[2:]  # (window the simulator may hide it under, the share of it that can hide)


@pytest.mark.parametrize("block, first", [("attn", "q"), ("mlp", "fc1:mlp")])
def test_the_reduce_scatter_of_a_sum_of_dgrads_is_not_decomposed(block, first):
    """torchtitan's separate wq/wk/wv (w1/w3) leave their input's gradient as a sum of dgrads;
    micro-pipeline TP fuses a reduce-scatter only with its single producer matmul
    (torch/_inductor/fx_passes/micro_pipeline_tp.py), so async TP leaves it to NCCL, where TE
    userbuffers decompose Megatron's one fused QKV (fc1) dgrad."""
    op, (window, share) = _tp_comm("torch-compile", block, "wgt", "rs-bwd:" + first, True)
    async_share = ComputeModel(make().system, "bf16").eff.async_overlap  # 0 on Hopper: NCCL beside a persistent GEMM
    assert op.decomposable is False and (share == async_share < 1.0 or window == 0.0)
    te_name = "rs-bwd:qkv" if block == "attn" else "rs-bwd:fc1:mlp"
    te_op, (te_window, te_share) = _tp_comm("megatron-te", block, "wgt", te_name, True)
    assert te_op.decomposable is True and te_share == 1.0 and te_window > 0


def test_async_tp_never_slows_a_torch_compile_step():
    cfg = scenario_dict({"framework": "torch-compile", "tp": 8, "sequence_parallel": True})
    off = estimate({**cfg, "strategy": {**cfg["strategy"], "tp_comm_overlap": False}}).step_time_s
    on = estimate({**cfg, "strategy": {**cfg["strategy"], "tp_comm_overlap": True}}).step_time_s
    assert on < off
