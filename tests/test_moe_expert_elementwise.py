"""The routed experts' eager elementwise work that Megatron-Core runs outside its fused kernels for
a biased, clamped-GLU MoE (GPT-OSS): ``TEGroupedMLP._apply_bias`` (fc2's bias times the routing
probability, per local expert) and the clamps + concatenation before the fused quick-GEGLU
(fusions/fused_bias_geglu.py ``weighted_bias_quick_geglu_impl``). workload/layers.py prices both."""

from __future__ import annotations

from simengine.config.scenario import load_scenario
from simengine.presets import load_preset
from simengine.workload.builder import build_workload
from simengine.workload.recompute import recomputed_ops


def _scenario(**model_overrides):
    model = dict(load_preset("models", "gpt-oss-120b"), **model_overrides)
    return load_scenario({"model": model, "system": dict(load_preset("systems", "h100-sxm5-80gb"), num_gpus=64),
                          "strategy": {"tp": 1, "pp": 4, "dp": 16, "ep": 8, "seq_len": 4096, "micro_batch_size": 1,
                                       "global_batch_size": 1280, "recompute": "selective",
                                       "recompute_modules": ["layernorm", "moe_act"]}})


def _ops(sc, phase):
    return {op.name: op for op in getattr(build_workload(sc).blocks["moe"], phase)}


def test_gpt_oss_experts_price_the_bias_and_clamp_passes():
    sc = _scenario()
    fwd, bwd = _ops(sc, "fwd"), _ops(sc, "bwd")
    elems = 16 * 1024 * 2880   # 16 local experts × 1024 routed rows each × 2880 (h = f for GPT-OSS)
    assert fwd["expert-fc2-bias"].bytes == 12 * elems and fwd["expert-fc2-bias"].kernels == 2 * 16 + 1
    assert bwd["expert-fc2-bias-bwd"].bytes == 16 * elems and bwd["expert-fc2-bias-bwd"].kernels == 6 * 16 + 2
    assert fwd["glu-clamp:experts"].bytes == 16 * elems and bwd["glu-clamp-bwd:experts"].bytes == 30 * elems


def test_moe_act_recompute_reruns_the_clamp_but_not_the_bias():
    sc = _scenario()
    rerun = {op.name for op in recomputed_ops("moe", build_workload(sc).blocks["moe"].fwd, ["moe_act"], False)}
    assert "glu-clamp:experts" in rerun and "swiglu:experts" in rerun and "expert-fc2-bias" not in rerun


def test_unbiased_unclamped_experts_have_neither():
    fwd = _ops(_scenario(linear_bias=False, swiglu_limit=None), "fwd")
    assert "expert-fc2-bias" not in fwd and "glu-clamp:experts" not in fwd
