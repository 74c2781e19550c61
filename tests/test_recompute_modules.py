"""Selective recompute of Megatron-Core submodules (``recompute_modules``): each module drops exactly
its saved tensors (cost/activations.py), re-runs exactly its forward ops (workload/recompute.py),
and the scenario refuses what Megatron-Core refuses or what recomputes nothing."""

from __future__ import annotations

import pytest
from scenarios import make

from simengine.cost.activations import BF16, attention_activations, moe_activations
from simengine.cost.compute import ComputeModel
from simengine.cost.stage import build_plan
from simengine.errors import ConfigError
from simengine.estimate import estimate
from simengine.workload.builder import build_workload
from simengine.workload.dims import dims_of
from simengine.workload.recompute import recomputed_ops

DSV3 = ("deepseek-v3", "h100-sxm5-80gb")  # MLA, MoE with a shared expert, first 3 layers dense
DSV3_SYS = {"num_gpus": 64}
DSV3_MODEL = {"num_layers": 19, "mtp_layers": 0}  # 3 dense + 16 MoE layers: stage 0 holds the dense ones
DSV3_ST = {"tp": 2, "pp": 4, "ep": 8, "etp": 1, "sequence_parallel": True, "seq_len": 4096, "global_batch_size": 64,
           "decoder_first_pipeline_num_layers": 4}


def _dsv3(modules, recompute="selective", **extra):
    return make(*DSV3, model=DSV3_MODEL, system=DSV3_SYS,
                strategy={**DSV3_ST, "recompute": recompute, "recompute_modules": modules, **extra})


def _chunk(sc, rank):
    return build_plan(sc).stages[rank].chunks[0]


def test_core_attn_alone_is_the_old_selective_recompute():
    """recompute='selective' with the default modules (core_attn, as Megatron-Core defaults them) is
    the selective recompute of Korthikanti et al. 2022 §4.2: per layer it drops exactly what the
    attention core saves (``attention_activations(...).selective``) and re-runs exactly the attention
    core's forward, nothing else."""
    from simengine.config.strategy import StrategySpec
    from simengine.workload.ops import Attention

    assert tuple(StrategySpec.model_fields["recompute_modules"].default) == ("core_attn",)
    none = make(*DSV3, model=DSV3_MODEL, system=DSV3_SYS, strategy={**DSV3_ST, "recompute": "none"})
    sel = make(*DSV3, model=DSV3_MODEL, system=DSV3_SYS, strategy={**DSV3_ST, "recompute": "selective"})
    att = attention_activations(dims_of(sel), sel.model)
    core = [op for op in build_workload(sel).blocks["attn"].fwd if isinstance(op, Attention)]
    assert core and att.selective > 0
    for rank in (0, 2):   # the dense first stage and a MoE stage
        a, b = _chunk(none, rank), _chunk(sel, rank)
        n = len(a.work.layers)
        assert a.activation_bytes - b.activation_bytes == pytest.approx(n * att.selective, rel=1e-12)
        assert b.recompute.flops == pytest.approx(n * sum(op.flops for op in core), rel=1e-12)
        assert a.recompute.compute_s == 0.0 < b.recompute.compute_s


def test_each_module_drops_exactly_its_saved_tensors():
    base = _dsv3(["core_attn"])
    d = dims_of(base)
    m = base.model
    R = d.tokens_per_expert * d.experts_local
    moe_parts = dict(moe_activations(d, m).modules)
    att_parts = dict(attention_activations(d, m).modules)
    expect = {  # bytes per MoE layer each module drops on top of core_attn
        "moe_act": BF16 * R * d.moe_ffn,
        "layernorm": BF16 * d.moe_tokens * d.h + att_parts["layernorm"],
        "mla_up_proj": att_parts["mla_up_proj"],
        "shared_experts": moe_parts["shared_experts"],
    }
    assert expect["layernorm"] > BF16 * d.moe_tokens * d.h > 0 and expect["shared_experts"] > 0
    rank = 2  # a middle stage: MoE layers only
    c0 = _chunk(base, rank)
    n = c0.work.moe_layers
    assert n == len(c0.work.layers) > 0
    for mod, per_layer in expect.items():
        c = _chunk(_dsv3(["core_attn", mod]), rank)
        assert c0.activation_bytes - c.activation_bytes == pytest.approx(n * per_layer, rel=1e-12), mod


def test_whole_moe_checkpoint_keeps_its_input_and_subsumes_its_parts():
    rank = 2
    d = dims_of(_dsv3(["core_attn"]))
    whole = _chunk(_dsv3(["moe"]), rank)
    with_parts = _chunk(_dsv3(["moe", "moe_act", "shared_experts"]), rank)
    assert whole.activation_bytes == with_parts.activation_bytes
    none = _chunk(_dsv3([]), rank)
    kept = BF16 * (d.sp_tokens * d.h + d.moe_tokens * d.h)
    moe = moe_activations(d, _dsv3([]).model)
    assert none.activation_bytes - whole.activation_bytes == pytest.approx(whole.work.moe_layers * (moe.saved - kept), rel=1e-12)


def test_dense_mlp_checkpoint_on_the_dense_first_stage():
    base, mlp = _chunk(_dsv3([]), 0), _chunk(_dsv3(["mlp"]), 0)
    assert base.work.dense_layers == 3
    assert mlp.activation_bytes < base.activation_bytes
    assert mlp.recompute.compute_s > 0 == base.recompute.compute_s


def test_each_module_re_runs_exactly_its_forward_ops():
    sc = _dsv3(["core_attn"])
    wl = build_workload(sc)
    cm = ComputeModel(sc.system, sc.strategy.dtype)
    rank = 2
    base = _chunk(sc, rank)
    act = [op for op in wl.blocks["moe"].fwd if op.name == "swiglu:experts"]
    assert recomputed_ops("moe", wl.blocks["moe"].fwd, ["moe_act"], True) == act
    with_act = _chunk(_dsv3(["core_attn", "moe_act"]), rank)
    added = with_act.recompute.compute_s - base.recompute.compute_s
    assert added == pytest.approx(base.work.moe_layers * cm.memory(act[0]), rel=1e-9)
    up = [op.name for op in recomputed_ops("attn", wl.blocks["attn"].fwd, ["mla_up_proj"], True)]
    assert {"fwd:q_up", "fwd:kv_up", "rope"} <= set(up) and "attn" not in up and "fwd:proj" not in up
    # GQA's input norm is fused into TE's LayerNormLinear: "layernorm" re-runs nothing in attention
    gqa = build_workload(make("qwen3-30b-a3b", "h100-sxm5-80gb", system={"num_gpus": 8},
                              strategy={"ep": 8, "seq_len": 4096, "global_batch_size": 8}))
    assert recomputed_ops("attn", gqa.blocks["attn"].fwd, ["layernorm"], False) == []
    assert [op.name for op in recomputed_ops("moe", gqa.blocks["moe"].fwd, ["layernorm"], False)] == ["norm:ln2"]
    # the whole MoE layer re-runs its token all-to-alls too, never its norm or residual add
    whole = [op.name for op in recomputed_ops("moe", wl.blocks["moe"].fwd, ["moe"], True)]
    assert "ep-a2a:dispatch" in whole and "norm:ln2" not in whole and "bda:moe" not in whole


@pytest.mark.parametrize("mods", [["core_attn", "moe_act"], ["core_attn", "layernorm", "moe_act", "mla_up_proj"],
                                  ["moe", "mla_up_proj", "layernorm"]])
def test_more_modules_never_hold_more_and_never_run_faster(mods):
    few, more = estimate(_dsv3(mods[:1])), estimate(_dsv3(mods))
    assert more.peak_memory_gib <= few.peak_memory_gib
    assert more.step_time_s >= few.step_time_s


@pytest.mark.parametrize("model,strategy,text", [
    ("llama3-8b", {"recompute": "selective", "recompute_modules": ["mla_up_proj"]}, "multi-latent attention"),
    ("llama3-8b", {"recompute": "selective", "recompute_modules": ["moe_act"]}, "an MoE model"),
    ("qwen3-30b-a3b", {"recompute": "selective", "recompute_modules": ["shared_experts"]}, "shared experts"),
    ("llama3-8b", {"recompute": "none", "recompute_modules": ["mlp"]}, "needs recompute='selective'"),
    ("llama3-8b", {"recompute": "selective", "recompute_modules": ["mlp"], "framework": "torch-native"}, "Megatron-Core"),
])
def test_scenario_refuses_modules_that_cannot_run(model, strategy, text):
    with pytest.raises(ConfigError) as e:
        make(model, "h100-sxm5-80gb", system={"num_gpus": 8}, strategy={"seq_len": 4096, "global_batch_size": 8, **strategy})
    assert "strategy.recompute_modules" in str(e.value) and text in str(e.value)


def test_modules_as_text_and_twice():
    sc = make("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 8},
              strategy={"recompute": "selective", "recompute_modules": "core_attn, mlp"})
    assert sc.strategy.recompute_modules == ("core_attn", "mlp")
    with pytest.raises(ConfigError, match="twice"):
        make("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 8},
             strategy={"recompute": "selective", "recompute_modules": ["mlp", "mlp"]})


@pytest.mark.parametrize("framework, gemm_in", [("megatron-te", 1.0), ("torch-native", BF16)])
def test_fp8_expert_gemms_save_their_inputs_in_fp8_on_transformer_engine(framework, gemm_in):
    """TE's GroupedLinear saves the columnwise fp8 copy of FC1's and FC2's inputs (1 B), the shared
    expert's FC2 too; the activations keep their bf16 inputs; other stacks keep the bf16 accounting."""
    bf16, fp8 = _dsv3(["core_attn"], framework=framework), _dsv3(["core_attn"], framework=framework, dtype="fp8")
    d, d8 = dims_of(bf16), dims_of(fp8)
    R = d.tokens_per_expert * d.experts_local
    saved, saved8 = moe_activations(d, bf16.model).saved, moe_activations(d8, fp8.model).saved
    # the routed experts' FC1 and FC2 inputs and the shared expert's FC2 input (DeepSeek-V3 has one)
    assert d.shared_ffn > 0
    assert saved - saved8 == pytest.approx((BF16 - gemm_in) * (R * (d.h + d.moe_ffn) + d.tokens * d.shared_ffn), rel=1e-12)
    # moe_act: FC2 saves the checkpointed activation output, which is freed: what FC2 held goes
    assert dict(moe_activations(d8, fp8.model).modules)["moe_act"] == pytest.approx(gemm_in * R * d.moe_ffn, rel=1e-12)


@pytest.mark.parametrize("framework", ["megatron-te", "torch-native"])
@pytest.mark.parametrize("attention_impl", ["unfused", "flash"])
def test_selective_recompute_never_peaks_below_full_recompute(framework, attention_impl):
    """A layer's backward rematerialises what selective recompute dropped (the s² scores of unfused
    attention): selective peaked at 12.8 GiB where full recompute, which re-runs the whole layer,
    peaked at 14.8 (gpt3-5b, 2 layers, seq 4096). Megatron reruns one module at a time, torchtitan's
    per-op SAC the whole layer: the dropped bytes are back on top of the backward's transient."""
    from simengine import api, presets

    def run(recompute):
        model, system = presets.load_preset("models", "gpt3-5b"), presets.load_preset("systems", "h100-sxm5-80gb")
        model["num_layers"], system["num_gpus"] = 2, 1
        return api.estimate({"model": model, "system": system, "strategy": {
            "global_batch_size": 1, "seq_len": 4096, "attention_impl": attention_impl, "recompute": recompute,
            "framework": framework}})

    none, sel, full = (run(r) for r in ("none", "selective", "full"))
    assert none.peak_memory_gib >= sel.peak_memory_gib >= full.peak_memory_gib
