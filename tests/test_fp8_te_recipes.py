"""TransformerEngine's FP8 recipes (StrategySpec.fp8_recipe tensorwise / delayed / mxfp8,
workload/fp8_recipes.py): where each one casts, fuses and gathers, read off TE v2.7's quantizers,
normalization kernels and all-gathers, and what the published NeMo and Megatron-Bridge rows ran."""

from __future__ import annotations

import pytest

from scenarios import VALIDATION, make, scenario_dict
from simengine import api, presets
from simengine.errors import ConfigError
from simengine.validation.published.mapping import published_runs
from simengine.workload.builder import scenario_blocks
from simengine.workload.ops import Collective, Gemm, GroupedGemm, Memory

H100, B200 = "h100-sxm5-80gb", "b200-sxm-180gb"


def _blocks(recipe: str, tp: int = 1, system: str = H100, model: str = "llama3-8b", sp: bool = True):
    st = {"tp": tp, "dtype": "fp8", "fp8_recipe": recipe, "framework": "megatron-te", "sequence_parallel": sp,
          "global_batch_size": 64}
    if model != "llama3-8b":
        st.update(ep=8, etp=1, global_batch_size=512)
    return scenario_blocks(make(model_preset=model, system_preset=system, strategy=st))


def _casts(ph, phase: str) -> dict[str, float]:
    ops = {"fwd": ph.fwd, "bwd": ph.bwd, "wgt": ph.wgt}[phase]
    return {op.name.split(":", 1)[1]: op.bytes for op in ops if isinstance(op, Memory) and op.name.startswith("fp8-cast:")}


def _per_elem(ph, phase: str) -> dict[str, float]:
    """B per element of each cast (over the GEMM's input A, whole tensor)."""
    g = {op.name: op for op in ph.fwd + ph.bwd if isinstance(op, (Gemm, GroupedGemm))}
    out = {}
    for name, nbytes in _casts(ph, phase).items():
        op = g[name]
        elems = op.groups * op.m * op.k if isinstance(op, GroupedGemm) else op.b * op.m * op.k * op.count
        out[name] = nbytes / elems
    return out


def _gathers(ph) -> dict[str, float]:
    return {op.name: op.bytes for op in ph.fwd + ph.bwd if isinstance(op, Collective) and op.kind == "all_gather"}


def test_current_scaling_pays_an_amax_pass_except_behind_a_fused_norm():
    """TE Float8CurrentScalingQuantizer: nvte_compute_amax then the cast-transpose (6 B per element);
    the LayerNorm-fused linears' norm writes the amax itself (FUSED_NORM_AMAX_FP8: 4 B)."""
    attn, mlp = (_blocks("tensorwise")[k] for k in ("attn", "mlp"))
    assert _per_elem(attn, "fwd") == {"fwd:qkv": 4.0, "fwd:proj": 6.0}
    assert _per_elem(mlp, "fwd") == {"fwd:fc1:mlp": 4.0, "fwd:fc2:mlp": 6.0}
    assert set(_per_elem(mlp, "bwd").values()) == {6.0}      # output gradients: no norm before them


@pytest.mark.parametrize("system,transpose,cast", [(H100, 2.0, 4.0), (B200, 0.0, 3.0)])
def test_delayed_scaling_fuses_the_cast_into_the_norm(system, transpose, cast):
    """DelayedScaling: the norm kernel writes fp8 (normalization.cpp: "Always used fused kernel for FP8
    delayed scaling"), leaving only the transpose for the wgrad where FP8 GEMMs are TN-only; every
    other cast is one cast-transpose pass (4 B), no amax pass — on datacenter Blackwell one cast
    without the transpose (3 B: csrc/quantizer.cpp ``with_transpose`` only where FP8 GEMMs are TN-only)."""
    attn = _blocks("delayed", system=system)["attn"]
    want = {"fwd:proj": cast} | ({"fwd:qkv": transpose} if transpose else {})
    assert _per_elem(attn, "fwd") == want
    assert set(_per_elem(attn, "bwd").values()) == {cast}


def test_delayed_scaling_under_sp_gathers_the_norms_fp8_shard_without_a_cast():
    tp = 8
    d, t = _blocks("delayed", tp=tp)["attn"], _blocks("tensorwise", tp=tp)["attn"]
    g = {op.name: op for op in d.fwd + d.bwd if isinstance(op, Gemm)}
    dy = g["dgrad:proj"]
    assert "fwd:qkv" not in _casts(d, "fwd") and "fwd:qkv" in _casts(t, "fwd")
    assert _casts(d, "bwd")["dgrad:proj"] == 3.0 * dy.m * dy.k / tp
    assert _casts(t, "bwd")["dgrad:proj"] == 5.0 * dy.m * dy.k / tp
    assert _gathers(d) == _gathers(t)


def test_mxfp8_quantizes_both_axes_once_and_gathers_both_copies_of_an_output_gradient():
    """MXFP8BlockScaling on B200: every cast (norm included: the fused MXFP8 norm is cuDNN's, off by
    default) reads bf16 and writes both copies (4 B); under SP the forward gathers the rowwise copy
    and the backward re-gather the columnwise one (1 B each), while a row-parallel output gradient
    is gathered with both copies (bf16's bytes); Blackwell needs no transposes."""
    tp = 8
    mx = _blocks("mxfp8", tp=tp, system=B200)["attn"]
    bf = scenario_blocks(make(system_preset=B200, strategy={"tp": tp, "sequence_parallel": True, "global_batch_size": 64}))["attn"]
    g = {op.name: op for op in mx.fwd + mx.bwd if isinstance(op, Gemm)}
    x, o, dy = g["fwd:qkv"], g["fwd:proj"], g["dgrad:proj"]
    assert _casts(mx, "fwd") == {"fwd:qkv": 4.0 * x.m * x.k / tp, "fwd:proj": 4.0 * o.m * o.k}
    assert _casts(mx, "bwd")["dgrad:proj"] == 4.0 * dy.m * dy.k / tp
    assert not [op for op in mx.wgt if isinstance(op, Memory) and op.name.startswith("fp8-transpose:")]
    ag, ag_bf = _gathers(mx), _gathers(bf)
    assert ag["ag:qkv"] == ag_bf["ag:qkv"] / 2 and ag["ag-bwd:qkv"] == ag_bf["ag-bwd:qkv"] / 2
    assert ag["ag-bwd:proj"] == ag_bf["ag-bwd:proj"]


def test_moe_router_stays_bf16_and_its_tensornorm_is_not_fused():
    """Megatron-Core's router is a torch.mm (moe_utils.RouterGatingLinearFunction), not a TE module:
    no fp8 cast, bf16 rate. The MoE layer's pre_mlp_layernorm is a separate TENorm, so even under
    delayed scaling the experts cast their input."""
    for recipe in ("tensorwise", "delayed"):
        moe = _blocks(recipe, model="qwen3-30b-a3b")["moe"]
        fwd = _casts(moe, "fwd")
        assert not any("router" in n for n in fwd) and not any("router" in n for n in _casts(moe, "bwd"))
        assert fwd["fwd:expert_fc1"] > 0


@pytest.mark.parametrize("tp", [1, 8])
def test_delayed_scaling_is_faster_than_current_scaling(tp):
    """Same GEMMs and gathers, fewer bytes cast: never slower."""
    t = {r: api.estimate(scenario_dict(strategy={"tp": tp, "dtype": "fp8", "fp8_recipe": r, "framework": "megatron-te",
                                                 "sequence_parallel": tp > 1, "global_batch_size": 64})).step_time_s
         for r in ("tensorwise", "delayed")}
    assert t["delayed"] < t["tensorwise"]


def test_the_te_recipes_need_their_stack_and_mxfp8_a_blackwell_gpu():
    for framework, recipe, system in (("torch-compile", "delayed", H100), ("deepspeed", "mxfp8", B200),
                                      ("megatron-te", "mxfp8", H100)):
        st = {"dtype": "fp8", "fp8_recipe": recipe, "framework": framework, "global_batch_size": 64}
        with pytest.raises(ConfigError) as e:
            make(system_preset=system, strategy=st)
        assert [f for f, _ in e.value.issues] == ["strategy.fp8_recipe"], (framework, recipe, system)
    make(system_preset=B200, strategy={"dtype": "fp8", "fp8_recipe": "mxfp8", "framework": "megatron-te",
                                       "global_batch_size": 64})
    # a what-if GPU whose name names no known generation may run MXFP8, without Hopper's transposes
    sc = make(system_preset=B200, system={"gpu": {**presets.load_preset("systems", B200)["gpu"], "name": "X1000"}},
              strategy={"dtype": "fp8", "fp8_recipe": "mxfp8", "framework": "megatron-te", "tp": 8,
                        "sequence_parallel": True, "global_batch_size": 64})
    attn = scenario_blocks(sc)["attn"]
    assert not [op for op in attn.wgt if isinstance(op, Memory) and op.name.startswith("fp8-transpose:")]
    bf = api.estimate(scenario_dict(strategy={"fp8_recipe": "delayed", "framework": "torch-compile", "global_batch_size": 64}))
    assert bf.step_time_s == api.estimate(scenario_dict(strategy={"framework": "torch-compile", "global_batch_size": 64})).step_time_s


def test_published_rows_map_onto_the_recipe_their_stack_ran():
    """NeMo 24.07 (TE 1.x: delayed scaling only); Megatron-Bridge's FP8-MX / MXFP8 columns and 25.09's
    alternate granularity on B200 (MX); every other Megatron-Bridge FP8 row current scaling."""
    runs, _ = published_runs((VALIDATION / "published_runs.csv").read_text())
    recipes = {r.run_id: r.config["strategy"].get("fp8_recipe") for r in runs if r.config["strategy"].get("dtype") == "fp8"}
    nemo = {k: v for k, v in recipes.items() if k.startswith("nemo2407_")}
    mb = {k: v for k, v in recipes.items() if k.startswith("mbridge_")}
    assert len(nemo) == 18 and set(nemo.values()) == {"delayed"}
    mx = {k for k in mb if "MX" in k or ("alternate" in k and "B200" in k)}
    assert len(mx) >= 15 and all(mb[k] == "mxfp8" for k in mx)
    assert all(v == "tensorwise" for k, v in mb.items() if k not in mx)
