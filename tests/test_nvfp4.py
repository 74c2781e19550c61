"""NVFP4 training (StrategySpec.dtype = 'nvfp4': TransformerEngine NVFP4BlockScaling under
Megatron-Core's fp4 recipe): the GEMMs at the FP4 peak and its measured level (cost/compute.py
``gemm_level``), the quantizer's casts and NVFP4 all-gathers (workload/fp8_recipes.py), 0.5625 B per
element wherever an fp8 recipe keeps 1 B (saved inputs, TE's weight copies, the parameter gather),
the checks, and the published Megatron-Bridge NVFP4 rows."""

from __future__ import annotations

import pytest

from scenarios import make, scenario_dict
from simengine import api, presets
from simengine.config import load_scenario
from simengine.cost.compute import FP4_OVER_FP8, ComputeModel, gemm_level
from simengine.cost.dp import param_gather_bytes
from simengine.cost.static_memory import stage_params, static_memory
from simengine.errors import ConfigError
from simengine.workload.builder import build_workload, scenario_blocks
from simengine.workload.fp8_recipes import NV_CAST
from simengine.workload.ops import NVFP4_BYTES, Attention, Collective, Gemm, GroupedGemm, Memory

B200, GB200, GB300, B300, H100 = "b200-sxm-180gb", "gb200-nvl72", "gb300-nvl72", "b300-sxm-288gb", "h100-sxm5-80gb"
BIG = Gemm("fwd:fc1:mlp", m=16384, n=16384, k=16384)


def _make(system: str = GB200, **kw):
    return make(system_preset=system, system={"num_gpus": 8}, **kw)


def _cfg(system: str = GB200, **kw) -> dict:
    return scenario_dict(system_preset=system, system={"num_gpus": 8}, **kw)


def _st(dtype: str, **kw) -> dict:
    st = {"dtype": dtype, "framework": "megatron-te", "global_batch_size": 64}
    if dtype == "fp8":
        st["fp8_recipe"] = "mxfp8"
    return st | kw


def _flop_seconds(system: str, dtype: str, op: Gemm = BIG) -> float:
    cm = ComputeModel(presets.load_spec("systems", system), dtype)
    return op.flops / (cm.peak * cm.gemm_efficiency(op.m, op.n, op.k, op.b, op.layout))


def test_nvfp4_peaks_of_the_blackwell_presets():
    """Dense FP4 peaks: HGX B200 72 PF / 8, GB200 NVL72 720 PF / 72, HGX B300 105 PF / 8, GB300
    NVL72 1,080 PF / 72; Hopper has none."""
    want = {B200: 9000.0, GB200: 10000.0, B300: 13125.0, GB300: 15000.0, H100: None}
    assert {s: presets.load_spec("systems", s).gpu.peak_tflops.fp4 for s in want} == want


@pytest.mark.parametrize("system", [B200, GB200, B300, GB300])
def test_an_nvfp4_gemm_runs_190_percent_of_its_fp8_gemm(system):
    """TE's B300 GEMM profiling: NVFP4 1.90× MXFP8, kernel only. Every Blackwell preset's FP4 peak is
    at least 2× its FP8 peak, so the measured ratio holds, not the peak ratio."""
    assert _flop_seconds(system, "fp8") / _flop_seconds(system, "nvfp4") == pytest.approx(FP4_OVER_FP8, rel=1e-12)
    cm = ComputeModel(presets.load_spec("systems", system), "nvfp4")
    assert cm.peak == presets.load_spec("systems", system).gpu.peak_tflops.fp4 * 1e12
    # MoE expert GEMMs too (a review found them at the FP4/FP8 peak ratio, 3× on GB300)
    g = GroupedGemm("fwd:expert_fc1", groups=8, m=4096, n=4096, k=7168)
    cm8 = ComputeModel(presets.load_spec("systems", system), "fp8")
    ratio = (cm.peak * cm.grouped_efficiency(g)) / (cm8.peak * cm8.grouped_efficiency(g))
    assert ratio == pytest.approx(FP4_OVER_FP8, rel=1e-12)


def test_the_fp4_level_is_capped_at_the_fp8_level_and_can_be_set():
    """A GPU whose FP4 peak is under 1.90× its FP8 one runs FP4 at the FP8 level's fraction of its
    own peak (the tensor cores bind first); ``efficiency.fp4_gemm`` overrides the default."""
    sysd = presets.load_preset("systems", GB200)
    eff = presets.load_spec("systems", GB200).efficiency
    slow = presets.load_spec("systems", GB200).gpu.peak_tflops.model_copy(update={"fp4": 7500.0})
    assert gemm_level(eff, "nvfp4", slow) == eff.fp8_gemm
    assert gemm_level(eff, "nvfp4", presets.load_spec("systems", GB200).gpu.peak_tflops) == pytest.approx(
        eff.fp8_gemm * FP4_OVER_FP8 * 5000 / 10000)
    set_ = load_scenario(scenario_dict(system_preset=GB200, system={"num_gpus": 8, "efficiency": {
        **sysd.get("efficiency", {}), "fp4_gemm": 0.4}}, strategy=_st("nvfp4")))
    assert ComputeModel(set_.system, "nvfp4").level == 0.4


def test_bf16_only_gemms_stay_bf16_under_nvfp4():
    """The LM head (a plain ColumnParallelLinear) and the MoE router run at the bf16 rate."""
    cm4, cm16 = (ComputeModel(presets.load_spec("systems", GB200), d) for d in ("nvfp4", "bf16"))
    for name in ("fwd:lm_head", "fwd:router"):
        op = Gemm(name, m=8192, n=16384, k=8192)
        assert cm4.gemm(op) == cm16.gemm(op)
    assert cm4.gemm(BIG) < cm16.gemm(BIG) / 3
    # unfused attention's batched GEMMs too (they took the NVFP4 level at the BF16 peak: slower than bf16)
    for phase in ("fwd", "bwd"):
        att = Attention("core", b=1, heads=8, kv_heads=8, s_q=4096, s_kv=4096, d_qk=128, d_v=128, causal=True,
                        phase=phase, impl="unfused")
        assert cm4.attention(att) == cm16.attention(att)


def _casts(ph, ops) -> dict[str, float]:
    return {op.name.split(":", 1)[1]: op.bytes for op in ops if isinstance(op, Memory) and op.name.startswith("fp8-cast:")}


def test_every_gemm_input_pays_the_amax_pass_and_the_hadamard_cast():
    """NVFP4Quantizer: nvte_hadamard_transform_amax (read 2 B) then one kernel writing both copies
    (read 2, write 2 × 0.5625): 5.125 B per element, the norm-fused inputs too (no fused norm)."""
    assert NV_CAST == 5.125
    blocks = scenario_blocks(_make(strategy=_st("nvfp4")))
    for key in ("attn", "mlp"):
        ph = blocks[key]
        g = {op.name: op for op in ph.fwd + ph.bwd if isinstance(op, Gemm)}
        for ops in (ph.fwd, ph.bwd):
            casts = _casts(ph, ops)
            assert casts
            for name, nbytes in casts.items():
                op = g[name]
                assert nbytes == NV_CAST * op.b * op.m * op.k * op.count, name


def _gathers(ph) -> dict[str, float]:
    return {op.name: op.bytes for op in ph.fwd + ph.bwd if isinstance(op, Collective) and op.kind == "all_gather"}


def test_under_sp_nvfp4_is_quantized_on_the_shard_and_gathered_in_fp4():
    """distributed.py _all_gather_nvfp4: the rowwise copy forward and the columnwise one in the
    backward re-gather (0.5625 B an element), both copies of a row-parallel output gradient."""
    tp = 8
    nv = scenario_blocks(_make(strategy=_st("nvfp4", tp=tp, sequence_parallel=True)))["attn"]
    bf = scenario_blocks(_make(strategy={"tp": tp, "sequence_parallel": True, "global_batch_size": 64}))["attn"]
    ag, ag_bf = _gathers(nv), _gathers(bf)
    assert ag["ag:qkv"] == pytest.approx(ag_bf["ag:qkv"] * NVFP4_BYTES / 2)
    assert ag["ag-bwd:qkv"] == pytest.approx(ag_bf["ag-bwd:qkv"] * NVFP4_BYTES / 2)
    assert ag["ag-bwd:proj"] == pytest.approx(ag_bf["ag-bwd:proj"] * NVFP4_BYTES)
    x = next(op for op in nv.fwd if isinstance(op, Gemm) and op.name == "fwd:qkv")
    assert _casts(nv, nv.fwd)["fwd:qkv"] == pytest.approx(NV_CAST * x.m * x.k / tp)
    # the quantizer writes the columnwise copy itself: no transposes
    assert not [op for op in nv.wgt if isinstance(op, Memory) and op.name.startswith("fp8-transpose:")]


def test_saved_inputs_and_weight_copies_shrink_to_nvfp4_bytes():
    """Where an fp8 recipe keeps 1 B an element (a linear's saved input, TE's two cached copies of
    each block weight), NVFP4 keeps 0.5625 B; the bf16 tensors are the same."""
    fp8, nv = (_make(strategy=_st(d, zero_stage=1)) for d in ("fp8", "nvfp4"))
    a8, a4 = (api.estimate(_cfg(strategy=_st(d, zero_stage=1))) for d in ("fp8", "nvfp4"))
    assert a4.memory_by_stage[0].activations_gib < a8.memory_by_stage[0].activations_gib
    p = stage_params(nv, build_workload(nv).ranks[0])
    s8, s4 = static_memory(fp8, p), static_memory(nv, p)
    block = max(p.total - p.ends, 0.0)
    assert s8.buffers - s4.buffers == pytest.approx(2.0 * (1.0 - NVFP4_BYTES) * block)


def test_fp4_primary_weights_are_gathered_at_0_5625_bytes():
    """Megatron-Core --fp4-param-gather: the distributed optimizer gathers the rowwise NVFP4 copy of
    the block weights; the embedding and the head stay bf16."""
    sc = _make(strategy=_st("nvfp4", zero_stage=1, fp8_param_gather=True))
    p = stage_params(sc, build_workload(sc).ranks[0])
    want = (2.0 * p.ends + NVFP4_BYTES * (p.dense - p.ends)) / p.dense
    assert param_gather_bytes(sc, p, expert=False) == pytest.approx(want)
    assert param_gather_bytes(sc, p, expert=True) == NVFP4_BYTES


@pytest.mark.parametrize("system,framework,field", [(H100, "megatron-te", "strategy.dtype"),
                                                     (GB200, "torch-native", "strategy.framework")])
def test_nvfp4_needs_an_fp4_peak_and_transformer_engine(system, framework, field):
    with pytest.raises(ConfigError) as e:
        _make(system, strategy=_st("nvfp4", framework=framework))
    assert [f for f, _ in e.value.issues] == [field]
    assert "nvfp4" in e.value.issues[0][1]


def test_fp4_param_gather_on_another_stack_is_refused_once_by_the_framework():
    """(A browser audit found fp8_param_gather "needs dtype='fp8' or 'nvfp4' (dtype='nvfp4')" beside
    the framework's refusal on torch-native.)"""
    with pytest.raises(ConfigError) as e:
        _make(strategy=_st("nvfp4", framework="torch-native", zero_stage=3, fp8_param_gather=True))
    assert [f for f, _ in e.value.issues] == ["strategy.framework"]


def test_fp4_param_gather_needs_the_distributed_optimizer():
    with pytest.raises(ConfigError) as e:
        _make(strategy=_st("nvfp4", zero_stage=0, fp8_param_gather=True))
    assert [f for f, _ in e.value.issues] == ["strategy.fp8_param_gather"]
    _make(strategy=_st("nvfp4", zero_stage=1, fp8_param_gather=True))


@pytest.mark.parametrize("system", [GB200, GB300])
def test_nvfp4_trains_faster_than_mxfp8_and_counts_the_same_flops(system):
    """A compute-bound step (one GPU, 8B): the GEMMs gain 1.90×, the casts cost more bytes; the model
    FLOPs do not depend on the precision."""
    est = {d: api.estimate(scenario_dict(system_preset=system, system={"num_gpus": 1},
                                         strategy=_st(d, recompute="full", global_batch_size=8))) for d in ("fp8", "nvfp4")}
    assert est["nvfp4"].step_time_s < est["fp8"].step_time_s
    assert est["nvfp4"].model_flops_per_step == est["fp8"].model_flops_per_step
    assert est["nvfp4"].tokens_per_s / est["fp8"].tokens_per_s < FP4_OVER_FP8


def test_a_measured_nvfp4_gemm_table_is_read_against_the_fp4_peak_and_used():
    """Calibration: an uploaded GEMM CSV's NVFP4 rows (dtype 'nvfp4') become points against the FP4
    peak, which an NVFP4 estimate then reads instead of the default curve; 'fp4' or 'e2m1', which
    name MXFP4's elements too, are refused by line."""
    from simengine.calibration.gemm import load_gemm_csv

    gpu = presets.load_spec("systems", GB200).gpu
    csv = "m,n,k,dtype,tflops\n8192,8192,8192,nvfp4,5000\n8192,8192,8192,bf16,1500\n"
    pts = load_gemm_csv(csv.encode(), peak_tflops=gpu.peak_tflops, dtypes=("bf16", "fp8", "nvfp4")).points
    by = {p.dtype: p.efficiency for p in pts}
    with pytest.raises(ConfigError) as e:
        load_gemm_csv(b"m,n,k,dtype,tflops\n8192,8192,8192,e2m1,5000\n", peak_tflops=gpu.peak_tflops)
    assert "line 2" in str(e.value) and "'e2m1' is not bf16, fp8, nvfp4 or fp32" in str(e.value)
    assert by == {"nvfp4": pytest.approx(0.5), "bf16": pytest.approx(0.6)}
    sysd = presets.load_preset("systems", GB200)
    eff = {**sysd.get("efficiency", {}), "gemm_table": [p.model_dump() for p in pts]}
    sc = load_scenario(scenario_dict(system_preset=GB200, system={"num_gpus": 8, "efficiency": eff}, strategy=_st("nvfp4")))
    assert ComputeModel(sc.system, "nvfp4").gemm_efficiency(8192, 8192, 8192) == pytest.approx(0.5)


def test_an_mfu_past_100_percent_says_its_basis():
    """Megatron-Bridge's NVFP4 70B on 64 GB300 runs ~3 PFLOP/s of model FLOPs a GPU, above the BF16
    peak MFU is counted against: the report says so, with the share of the FP4 peak."""
    cfg = scenario_dict(model_preset="llama3-70b", system_preset=GB300, strategy_preset="llama3-70b-nvfp4-gb300",
                        system={"num_gpus": 64})
    rep = api.estimate(cfg)
    assert rep.mfu > 1.0
    (note,) = [w for w in rep.notes if "counted against the dense BF16 peak" in w]
    assert not [w for w in rep.warnings if "BF16 peak" in w]   # a note, not a warning: nothing is wrong
    assert f"MFU {rep.mfu:.1%}" in note and f"NVFP4 peak (15,000 TFLOP/s) the same FLOPs are {rep.mfu * 2500 / 15000:.1%}." in note
    from ui.charts import ABOVE_PEAK, mfu_waterfall_frame
    wf = mfu_waterfall_frame(rep.model_dump(mode="json"))   # the kernels' bar is a gain, named so
    gain = wf[wf["step"] == ABOVE_PEAK].iloc[0]
    assert gain["value"] > 0 and wf.iloc[-1]["end"] == pytest.approx(rep.mfu)
    assert gain["top"] == gain["start"] > gain["end"]   # its label above the bar, not inside it
    bf = api.estimate({**cfg, "strategy": {**cfg["strategy"], "dtype": "bf16", "fp8_param_gather": False}})
    assert bf.mfu < 1.0 and not bf.notes


@pytest.mark.parametrize("system,base,field", [(H100, {"dtype": "nvfp4"}, "strategy.dtype"),
                                               (GB200, {"dtype": "nvfp4", "framework": "torch-native"}, "strategy.framework"),
                                               ("a100-sxm4-80gb", {"dtype": "fp8"}, "strategy.dtype")])
def test_a_search_of_a_precision_the_gpu_cannot_run_is_refused_whole(system, base, field):
    """(A browser audit: nvfp4 on 8 H100 searched every layout and reported 316,228 of 321,980
    candidates rejected for the same reason.)"""
    from simengine.search import make_space

    m, s = presets.load_preset("models", "llama3-8b"), presets.load_preset("systems", system)
    with pytest.raises(ConfigError) as e:
        make_space(m, s, global_batch=64, seq_len=4096, gpus=[8], base=base)
    assert [f for f, _ in e.value.issues] == [field]
    make_space(m, presets.load_preset("systems", GB200), global_batch=64, seq_len=4096, gpus=[8], base={"dtype": "nvfp4"})


def test_a_check_run_refit_scales_a_set_fp4_level_and_the_derived_one():
    """checkrun/compare.py scaled_config: an fp4_gemm the user set scales with the other levels; an
    unset one stays unset and follows fp8_gemm (a review found a set one left out)."""
    from simengine.checkrun.compare import scaled_config

    sysd = presets.load_preset("systems", GB200)
    cfg = _cfg(strategy=_st("nvfp4"))
    set_ = _cfg(strategy=_st("nvfp4"))
    set_["system"] = {**set_["system"], "efficiency": {**sysd.get("efficiency", {}), "fp4_gemm": 0.4}}
    assert scaled_config(set_, 0.5)["system"]["efficiency"]["fp4_gemm"] == pytest.approx(0.2)
    assert "fp4_gemm" not in scaled_config(cfg, 0.5)["system"]["efficiency"]
    slow, fast = (api.estimate(scaled_config(c, 0.5)).step_time_s for c in (cfg, set_))
    assert slow > api.estimate(cfg).step_time_s and fast > api.estimate(set_).step_time_s
