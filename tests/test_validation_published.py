"""simengine/validation/data/published_runs.csv: the mapping of published runs onto scenarios, that every
mapped run estimates, and the current accuracy per source pinned as a regression bound."""

from __future__ import annotations

import csv
import io

import pytest

from simengine.validation.data import read_text
from simengine.validation.published import (evaluate, flops_eq3, flops_eq7, flops_megatron, flops_megatron_bridge,
                                            flops_megatron_bridge_hybrid, predict_metrics,
                                            published_runs, summarize, torchtitan_flops_per_token)


@pytest.fixture(scope="module")
def mapped():
    runs, skipped = published_runs(read_text("published_runs.csv"))  # bundled: missing fails, never skips
    return {r.run_id: r for r in runs}, {s.run_id: s for s in skipped}


@pytest.fixture(scope="module")
def evaluated(mapped):
    runs, _ = mapped
    return evaluate(list(runs.values()))


# ---- (a) the mapping, by value -----------------------------------------------------------------

def test_counts(mapped):
    runs, skipped = mapped
    assert len(runs) + len(skipped) == 333
    assert len(runs) == 321
    assert len(skipped) == 12


def test_deepseek_v3_report_run(mapped, evaluated):
    """The DeepSeek-V3 technical report's pre-training (arXiv:2412.19437 §3.2): 2048 H800s, DualPipe
    over 16 stages, ep 64 across 8 nodes, ZeRO-1, no TP, RMSNorm and MLA up-projections recomputed,
    SwiGLU inputs cached and outputs recomputed, AdamW moments in BF16 (§3.3), FP8, MTP depth 1; 180K GPU hours per
    trillion tokens = 1543 tokens/s/GPU."""
    runs, _ = mapped
    r = runs["deepseekv3_report_2048xH800"]
    st = r.config["strategy"]
    assert (st["tp"], st["pp"], st["ep"], st["dp"], st["schedule"], st["zero_stage"]) == (1, 16, 64, 128, "dualpipe", 1)
    assert st["recompute_modules"] == ["layernorm", "mla_up_proj", "moe_act"] and st["dtype"] == "fp8"
    assert st["adam_moments_dtype"] == "bf16"
    assert r.config["system"]["gpu"]["name"].startswith("NVIDIA H800") and r.config["model"]["mtp_layers"] == 1
    assert r.measured["tokens_per_sec_per_gpu"] == pytest.approx(1e12 / (180e3 * 3600), abs=0.5)
    assert r.weak and any("micro-batch" in x for x in r.assumptions)
    comps, _ = evaluated
    (c,) = [c for c in comps if c.run_id == r.run_id]
    assert abs(c.error_pct) < 15


def test_llama3_report_runs(mapped, evaluated):
    """The Llama 3 report's Table 4 (arXiv:2407.21783 §3.3.2): 405B on 8,192 / 16,384 H100s of Meta's
    RoCE cluster, tp 8 · pp 16, interleaved with one layer fewer on the end stages, no activation
    checkpointing; 430 / 400 TFLOPs per GPU in PaLM's model-FLOP count. The long-context cp 16 row
    is skipped with its reason (Meta's all-gather CP is not the torch stack's)."""
    runs, skipped = mapped
    r = runs["llama3_report_405B_16384gpu"]
    st = r.config["strategy"]
    assert (st["tp"], st["pp"], st["dp"], st["vpp"], st["schedule"]) == (8, 16, 128, 8, "interleaved")
    assert st["pipeline_layers"][0] == st["pipeline_layers"][-1] == 0 and sum(st["pipeline_layers"]) == 126
    assert st["recompute"] == "none" and st["micro_batch_size"] == 1 and st["framework"] == "torch-native"
    assert "RoCE" in r.config["system"]["name"]
    assert r.weak and any("micro-batch" in x for x in r.assumptions)
    assert "context parallelism" in skipped["llama3_report_405B_16384gpu_cp16"].reason
    comps, _ = evaluated
    got = {c.run_id: c for c in comps if c.source == "llama3-report"}
    assert set(got) == {"llama3_report_405B_8192gpu", "llama3_report_405B_16384gpu"}
    assert (got["llama3_report_405B_8192gpu"].measured, got["llama3_report_405B_16384gpu"].measured) == (430.0, 400.0)
    for c in got.values():
        assert abs(c.error_pct) < 15


def test_the_published_fp8_moe_runs_fit(mapped):
    """Every Megatron-Bridge FP8 MoE run ran on its GPUs, so each must fit in our memory model:
    before TransformerEngine's fp8 copies of the expert GEMMs' inputs were priced
    (cost/activations.py ``moe_activations``) nine of them were over capacity by 1–10 %."""
    import json

    from simengine.api import estimate

    runs, _ = mapped
    seen: dict[str, bool] = {}
    for r in runs.values():
        st = r.config["strategy"]
        if r.source != "megatron-bridge" or st.get("dtype") != "fp8" or not r.config["model"].get("num_experts"):
            continue
        key = json.dumps({k: v for k, v in r.config.items() if k != "name"}, sort_keys=True, default=str)
        if key not in seen:
            seen[key] = estimate(r.config).fits
            assert seen[key], r.run_id
    assert len(seen) >= 30


def test_torchtitan_async_tp_page_rows(mapped):
    """benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md runs llama3_{8b,70b}.toml without a
    seq_len override (8192 at torchtitan 820504e); async TP only where the run says so, in its
    dtype cell or, as llama3_h100_202412 Table 4's "2D + AsyncTP", its name."""
    runs, _ = mapped
    page = [r for rid, r in runs.items() if rid.startswith("torchtitan202506_asynctp_")]
    assert len(page) == 12
    for r in page:
        st = r.config["strategy"]
        assert st["seq_len"] == 8192 and any("820504e" in a for a in r.assumptions)
        assert st["tp_comm_overlap"] is r.run_id.endswith("asyncTP"), r.run_id
        assert st["framework"] == "torch-compile" and st["tp"] == 8
    assert runs["torchtitan202412_70B_256gpu_2D_AsyncTP"].config["strategy"]["tp_comm_overlap"] is True
    assert runs["torchtitan202412_70B_256gpu_2D"].config["strategy"]["tp_comm_overlap"] is False


def test_nemo_models_named_but_not_spelled_out_come_from_presets(mapped):
    """NeMo 24.07's GPT3-5B/20B and Nemotron rows give only the model's name: the NeMo recipes'
    architectures (presets/models/gpt3-*.json, nemotron*.json) stand in, with a note."""
    runs, skipped = mapped
    for rid, preset, layout in (("nemo2407_Pretraining_GPT3-5B_pretrain_64gpu", "gpt3-5b", (1, 1, 64, 1)),
                                ("nemo2407_Pretraining_GPT3-20B_pretrain_64gpu", "gpt3-20b", (2, 1, 32, 1)),
                                ("nemo2407_Pretraining_Nemotron-8B_pretrain_64gpu", "nemotron3-8b", (2, 1, 32, 1)),
                                ("nemo2407_Pretraining_Nemotron-22B_pretrain_64gpu", "nemotron3-22b", (2, 4, 8, 10)),
                                ("nemo2407_Pretraining_Nemotron-340B_pretrain_128gpu", "nemotron4-340b", (8, 8, 2, 12))):
        run = runs[rid]
        st, m = run.config["strategy"], run.config["model"]
        assert f"architecture from preset {preset}" in run.assumptions
        assert m["source"].endswith(f"(preset {preset})")
        assert (st["tp"], st["pp"], st["dp"], st["vpp"]) == layout
    assert runs["nemo2407_Pretraining_Nemotron-340B_pretrain_128gpu"].config["model"]["activation"] == "squared_relu"
    nano = [r for rid, r in runs.items() if "nemotron_3_nano" in rid.lower()]
    assert len(nano) == 5 and all(r.config["model"]["hybrid_pattern"].count("M") == 23 for r in nano)
    # Nemotron 3 Super: the MXFP8 rows from the latent-MoE preset (40 Mamba, 40 MoE layers, MTP "*E" run at
    # two depths); the NVFP4 ones run the recipe's per-module BF16 overrides, which are not modelled
    super_ = [r for rid, r in runs.items() if "nemotron_3_super" in rid.lower()]
    assert len(super_) == 2 and all(r.config["model"]["moe_latent_size"] == 1024 and r.config["model"]["mtp_repeated_layer"]
                                    and r.config["model"]["hybrid_pattern"].count("M") == 40 for r in super_)
    # the recipe's own settings, and what of it is not priced, said per row
    assert all(r.config["strategy"]["moe_dispatcher"] == "deepep" and r.config["strategy"]["recompute_modules"] == ["moe_act", "layernorm"]
               and any("keep_mtp_spec_in_bf16" in x for x in r.assumptions) for r in super_)
    fp4 = [s for rid, s in skipped.items() if "nemotron_3_super" in rid.lower()]
    assert len(fp4) == 2 and all("NVFP4 with per-module BF16 overrides" in s.reason for s in fp4)


def test_a_row_contradicting_its_preset_is_skipped():
    head, *rows = read_text("published_runs.csv").splitlines()
    cells = next(csv.reader([r for r in rows if r.startswith("nemo2407_Pretraining_Nemotron-8B_pretrain_64gpu,")][0:1]))
    cells[head.split(",").index("layers")] = "40"  # the 8B recipe has 32
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(cells)
    runs, skipped = published_runs(head + "\n" + buf.getvalue())
    assert not runs and "layers=40 in the row but 32 in preset nemotron3-8b" in skipped[0].reason


def test_narayanan_1_7b(mapped):
    run = mapped[0]["narayanan21_t1_1.7B"]
    st, m, sy = run.config["strategy"], run.config["model"], run.config["system"]
    assert (st["tp"], st["pp"], st["dp"], st["cp"]) == (1, 1, 32, 1)
    assert (st["micro_batch_size"], st["global_batch_size"], st["seq_len"]) == (16, 512, 2048)  # sc21 script
    assert st["recompute"] == "full" and st["schedule"] == "1f1b" and st["vpp"] == 1
    assert st["overlap_grad_reduce"] is True  # torch DDP
    assert st["attention_impl"] == "unfused" and st["sequence_parallel"] is False and st["zero_stage"] == 0
    assert (m["hidden_size"], m["num_layers"], m["num_attention_heads"], m["ffn_hidden_size"], m["vocab_size"]) == (2304, 24, 24, 9216, 51200)
    assert (m["activation"], m["norm"], m["position_embedding"], m["tie_embeddings"], m["linear_bias"]) == ("gelu", "layernorm", "learned", True, True)
    assert sy["num_gpus"] == 32 and sy["gpu"]["peak_tflops"]["bf16"] == 312.0 and sy["scale_out"]["bandwidth_gbs"] == 25.0
    assert not run.weak
    F = flops_eq3(512, 2048, 24, 2304, 51200)
    assert pytest.approx(96 * 512 * 2048 * 24 * 2304**2 * (1 + 2048 / (6 * 2304) + 51200 / (16 * 24 * 2304))) == F
    assert pytest.approx(1.5467e16, rel=1e-4) == F  # by hand: 1.28251e16 · 1.20597
    # 137 TFLOP/s/GPU on 32 GPUs means a step of F / (32 * 137e12) = 3.53 s
    rep = type("R", (), {"step_time_s": F / (32 * 137e12)})()
    pred = predict_metrics(run, rep)
    assert pred["achieved_tflops_per_gpu"] == pytest.approx(137.0)
    assert pred["pct_of_theoretical_peak"] == pytest.approx(100 * 137 / 312)
    assert pred["aggregate_pflops"] == pytest.approx(32 * 137 / 1000)


def test_narayanan_interleaving_from_script_table(mapped):
    runs = mapped[0]
    # layers per virtual stage (README table) -> virtual chunks per rank
    for rid, mb, vpp in (("narayanan21_t1_76.1B", 2, 3), ("narayanan21_t1_145.6B", 2, 2), ("narayanan21_t1_310.1B", 1, 2),
                         ("narayanan21_t1_529.6B", 1, 3), ("narayanan21_t1_1008.0B", 1, 1), ("narayanan21_t1_39.1B", 4, 1)):
        st = runs[rid].config["strategy"]
        assert (st["micro_batch_size"], st["vpp"]) == (mb, vpp), rid
        assert st["schedule"] == ("interleaved" if vpp > 1 else "1f1b")
        assert st["overlap_grad_reduce"] is False  # 'local' DDP
    zero3 = runs["narayanan21_t2_ZeRO-3_174.6B_384gpu"].config["strategy"]
    assert (zero3["zero_stage"], zero3["tp"], zero3["pp"], zero3["dp"], zero3["micro_batch_size"]) == (3, 1, 1, 384, 4)
    assert runs["narayanan21_t2_ZeRO-3_174.6B_384gpu"].weak


def test_korthikanti_mapping(mapped):
    runs = mapped[0]
    sel = runs["korthikanti22_175B_sp_selective"].config["strategy"]
    assert (sel["tp"], sel["pp"], sel["vpp"], sel["schedule"], sel["recompute"], sel["sequence_parallel"]) == (8, 8, 3, "interleaved", "selective", True)
    full = runs["korthikanti22_175B_fullrecompute"].config["strategy"]
    assert (full["recompute"], full["sequence_parallel"]) == ("full", False)
    layer = runs["korthikanti22_22B_layer_baseline_no_recompute"].config
    assert layer["model"]["num_layers"] == 1 and layer["strategy"]["global_batch_size"] == 4
    # Eq. 7 for GPT equals Megatron's FLOP formula with MHA and ffn = 4h
    assert flops_eq7(64, 2048, 96, 12288, 51200) == pytest.approx(flops_megatron(64, 2048, 96, 12288, 96, 96, 4 * 12288, 51200))


def test_torchtitan_and_bridge_mapping(mapped):
    runs, skipped = mapped
    pp = runs["torchtitan202412_405B_512gpu_1F1B"].config["strategy"]
    assert (pp["tp"], pp["pp"], pp["dp"], pp["micro_batch_size"], pp["global_batch_size"]) == (8, 8, 8, 4, 256)
    assert pp["zero_stage"] == 3 and pp["dtype"] == "fp8" and pp["tp_comm_overlap"] is True
    a100 = runs["torchtitan202408_llama3_8B_64a100_selectivelayer"].config["strategy"]
    assert (a100["recompute"], a100["recompute_num_layers"]) == ("full", 16)
    assert runs["torchtitan202404_llama2_13B_64a100_bs2_none"].config["model"]["vocab_size"] == 32000
    # Float8 MFU is reported against the FP8 peak
    assert runs["torchtitan202408_405B_128gpu_Float8"].flop_basis["peak"] == 2 * runs["torchtitan202408_405B_128gpu_None"].flop_basis["peak"]
    fpt = torchtitan_flops_per_token(runs["torchtitan202408_405B_128gpu_None"].config["model"], 8192)
    assert 100 * fpt * 109 / 989e12 == pytest.approx(29.0, abs=0.3)  # the table's own MFU at its own tokens/s
    q = runs["mbridge_25.09_Pre-Training_Qwen3_30B_a3B_DGX-B200_FP8_(precision_column_absent)_8gpu_v0"].config
    assert q["model"]["capacity_factor"] == 1.0 and q["model"]["num_experts"] == 128 and q["strategy"]["ep"] == 8
    ds = runs["mbridge_25.11_Pre-Training_DeepSeekV3_DGX-B200_FP8-MX_256gpu_v0"].config["model"]
    assert ds["mtp_layers"] == 1 and ds.get("capacity_factor") is None
    fs = runs["mbridge_25.11_Pre-Training_LLAMA3_8B_DGX-H100_FP8-CS_8gpu_v0"].config["strategy"]
    assert fs["zero_stage"] == 3 and fs["dtype"] == "fp8"
    lora = runs["mbridge_26.06_LoRA_LLAMA3_70B_DGX-H100_FP8_8gpu_v0"]
    assert (lora.config["strategy"]["peft"], lora.config["strategy"]["lora_targets"]) == ("lora", "qkv")
    assert "tp/pp not stated" in skipped["mcore080_h100_strong_177B_96"].reason
    assert "microbatch-level" in skipped["korthikanti22_175B_sp_selective_microbatch_recompute"].reason
    # GPT-OSS from its preset; HybridEP at ep 8 from r0.4.0, the row's ep 8 against r0.2.0's ep 64 left at defaults
    oss = runs["mbridge_26.04_Pre-Training_GPT_OSS_120B_DGX-B200_BF16_64gpu_v0"].config
    assert oss["model"]["attention_sinks"] and oss["model"]["attention_window"] == 128 and oss["strategy"]["moe_dispatcher"] == "deepep"
    old = runs["mbridge_25.11_Pre-Training_GPT_OSS_120B_DGX-B200_BF16_64gpu_v0"]
    assert "moe_dispatcher" not in old.config["strategy"] and any("differs from the release recipe" in x for x in old.assumptions)


def test_bridge_moe_mechanisms_from_release_recipes(mapped):
    """Megatron-Bridge MoE rows get the dispatcher and overlaps of their release's perf recipe
    (simengine/validation/published/mbridge_recipes.py), not the engine defaults."""
    runs, _ = mapped
    st = lambda rid: runs[rid].config["strategy"]  # noqa: E731
    # Qwen3-235B on H100 (r0.4.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_H100_FP8_CS_V2): alltoall + moe_a2a_overlap, no TP overlap
    q235 = st("mbridge_26.04.01_Pre-Training_Qwen3_235B_a22B_DGX-H100_FP8_256gpu_v0")
    assert (q235["moe_dispatcher"], q235["overlap_moe_expert_parallel_comm"], q235["tp_comm_overlap"]) == ("alltoall", True, False)
    # ... but 25.09 (r0.1.0 run_script.py) ran it without the a2a overlap and with TP overlap
    q235_old = st("mbridge_25.09_Pre-Training_Qwen3_235B_a22B_DGX-H100_FP8_(precision_column_absent)_256gpu_v0")
    assert (q235_old["overlap_moe_expert_parallel_comm"], q235_old["tp_comm_overlap"]) == (False, True)
    # Qwen3-30B on two H100 nodes: flex + HybridEP → the hierarchical (deepep) dispatcher
    assert st("mbridge_26.04_Pre-Training_Qwen3_30B_a3B_DGX-H100_FP8_16gpu_v0")["moe_dispatcher"] == "deepep"
    # DeepSeek-V3 B200 26.04: hybridep (so no shared-expert overlap), MTP 1, the recipe's pp16 layout
    ds = runs["mbridge_26.04_Pre-Training_DeepSeekV3_DGX-B200_MXFP8_256gpu_v0"].config
    assert ds["strategy"]["moe_dispatcher"] == "deepep" and ds["strategy"]["moe_shared_expert_overlap"] is False
    assert ds["model"]["mtp_layers"] == 1 and ds["strategy"]["pipeline_layers"] == [4] * 15 + [1]
    # DeepSeek-V3 B200 25.09 (tokendrop: DeepEP off): alltoall with the provider's shared-expert overlap
    ds_old = st("mbridge_25.09_Pre-Training_DeepSeekV3_DGX-B200_FP8_(precision_column_absent)_256gpu_v0")
    assert (ds_old["moe_dispatcher"], ds_old["moe_shared_expert_overlap"]) == ("alltoall", True)
    # DeepSeek-V3 H100 25.09: DeepEP + A2A_1F1B, "Et|(tt|)*30mL", no grad-reduce overlap
    dh = st("mbridge_25.09_Pre-Training_DeepSeekV3_DGX-H100_FP8_(precision_column_absent)_1024gpu_v0")
    assert (dh["moe_dispatcher"], dh["overlap_moe_expert_parallel_comm"], dh["overlap_grad_reduce"]) == ("deepep", True, False)
    assert dh["pipeline_layers"] == [1] + [2] * 30 + [0]
    # GPT-OSS B200 V2: ep 64 alltoall at c0b9a0003 (26.02); ep 8 hybridep from r0.3.0 (26.02.01) through the
    # 26.04 table; alltoall again after r0.4.0 78934c150 (#3614), so in the 26.04.01 table
    oss = {rel: st(f"mbridge_{rel}_Pre-Training_GPT_OSS_120B_DGX-B200_BF16_64gpu_v0").get("moe_dispatcher")
           for rel in ("26.02", "26.02.01", "26.04", "26.04.01")}
    assert oss == {"26.02": "alltoall", "26.02.01": "deepep", "26.04": "deepep", "26.04.01": "alltoall"}
    # a row whose layout is not its release recipe's keeps the defaults and says so
    odd = runs["mbridge_26.02_Pre-Training_Qwen3_30B_a3B_DGX-H100_FP8_16gpu_v0"]
    assert "moe_dispatcher" not in odd.config["strategy"]
    assert any("differs from the release recipe" in x for x in odd.assumptions)


def test_blackwell_rack_systems(mapped):
    """DGX-GB200 / DGX-GB300 rows on the NVL72 presets ('gb200' holds 'b200'): a job within one rack
    keeps the 72-GPU NVLink domain, a 256-GPU one the launcher's 16-tray Slurm segments (64 GPUs);
    DGX-B300 on the B300 preset; DGX-B200 stays B200. Llama 3.1 405B at pp 16 x vp 8 (128 virtual
    stages, 126 layers): the recipe's split counting embedding and loss, the ends without a layer."""
    from simengine.validation.published.cells import _system, nvl72_segment_gpus

    runs, _ = mapped
    sysof = lambda rid: runs[rid].config["system"]  # noqa: E731
    gb200 = sysof("mbridge_26.04.01_Pre-Training_LLAMA3.1_405B_DGX-GB200_FP8_256gpu_v0")
    assert gb200["name"].startswith("GB200 NVL72") and gb200["num_gpus"] == 256 and gb200["scale_up"]["domain_size"] == 64
    gb300 = sysof("mbridge_26.04.01_Pre-Training_LLAMA3_70B_DGX-GB300_FP8_64gpu_v0")
    assert gb300["name"].startswith("GB300 NVL72") and gb300["scale_up"]["domain_size"] == 72
    assert sysof("mbridge_25.11_Pre-Training_LLAMA3_8B_DGX-B200_FP8-CS_8gpu_v0")["name"].startswith("B200 SXM")
    src = "NVIDIA-NeMo/Megatron-Bridge performance summary (NeMo container releases)"
    assert _system({"gpu_type": "B300 (DGX-B300)", "source": src}, 64)["name"].startswith("B300 SXM")
    assert [nvl72_segment_gpus(n) for n in (8, 72, 128, 256, 1024)] == [72, 72, 64, 64, 64]
    st = runs["mbridge_26.06_Pre-Training_LLAMA3.1_405B_DGX-GB200_MXFP8_256gpu_v0"].config["strategy"]
    assert (st["pp"], st["vpp"]) == (16, 8) and st["pipeline_layers"] == [0] + [1] * 126 + [0]
    assert "pipeline_layers" not in runs["mbridge_26.06_Pre-Training_LLAMA3.1_405B_DGX-GB200_FP8_256gpu_v0"].config["strategy"]


def test_bridge_gradients_reduced_in_bf16(mapped):
    """Every Megatron-Bridge performance recipe sets ``ddp.grad_reduce_in_fp32 = False`` (r0.1.0
    configs/*_llm_pretrain.yaml mixed_precision; r0.2.0-r0.4.0 and 26.06 *_llm_pretrain.py
    set_*_common_configs), so Megatron-Core's grad buffer holds bf16 (param_and_grad_buffer.py
    group_params_for_buffers): 2 B/param of gradients, not the fp32 4 B of the framework default."""
    runs, _ = mapped
    bridge = [r for r in runs.values() if r.source == "megatron-bridge"]
    assert bridge and all(r.config["strategy"]["fp32_main_grads"] is False for r in bridge)
    assert "fp32_main_grads" not in runs["nemo2407_Pretraining_GPT3-175B_pretrain_128gpu"].config["strategy"]
    from simengine.api import estimate
    l70 = runs["mbridge_25.11_Pre-Training_LLAMA3_70B_DGX-H100_FP8-CS_64gpu_v0"].config
    bf16_weights = {**l70, "strategy": {**l70["strategy"], "fp8_param_gather": False}}
    mem = estimate(bf16_weights).memory_by_stage[0]
    assert mem.grads_gib == pytest.approx(mem.weights_gib, rel=1e-6)  # bf16 grads = bf16 weights, per stage
    fp8 = estimate(l70).memory_by_stage[0]   # the recipe's FP8 primary weights: no bf16 block weights
    assert fp8.grads_gib == pytest.approx(mem.grads_gib, rel=1e-12) and fp8.weights_gib < 0.2 * mem.weights_gib  # stage 0: the bf16 embedding alone


def test_bridge_moe_cross_node_tokens(mapped, evaluated):
    """Cross-node MoE rows (ep·etp beyond one 8-GPU NVLink domain): median tokens/s error within 15 %
    (it was −27.5 % with the engine-default dispatcher and no all-to-all overlap)."""
    import statistics

    runs, _ = mapped
    comps, _ = evaluated

    def cross(rid: str) -> bool:
        s = runs[rid].config["strategy"]
        return s["ep"] * s.get("etp", 1) > runs[rid].config["system"]["scale_up"]["domain_size"]

    rows = [c for c in comps if c.source == "megatron-bridge" and c.metric == "tokens_per_sec_per_gpu" and cross(c.run_id)]
    assert len(rows) == 15
    assert abs(statistics.median(c.error_pct for c in rows)) <= 15.0


def test_bridge_nvfp4_rows(mapped, evaluated):
    """Megatron-Bridge's NVFP4 recipes (Llama 3 70B and 3.1 405B on GB200 / GB300, bf16_with_nvfp4_mixed):
    every block linear in NVFP4, FP4 primary weights from v0.5.0 (26.06) only. Their tokens/s within 10 % at the median and
    20 % each; and NVFP4 beats the same layout's MXFP8 where the page ran both (405B on GB200, 70B on
    GB300: pp 4 · vp 5)."""
    import statistics

    runs, _ = mapped
    comps, _ = evaluated
    nv = [r for r in runs.values() if r.config["strategy"]["dtype"] == "nvfp4"]
    assert len(nv) == 17
    assert all(r.config["strategy"].get("fp8_param_gather", False) is r.run_id.startswith("mbridge_26.06_") for r in nv)
    rows = [c for c in comps if c.run_id in {r.run_id for r in nv} and c.metric == "tokens_per_sec_per_gpu"]
    assert len(rows) == 17
    assert abs(statistics.median(abs(c.error_pct) for c in rows)) <= 10.0
    assert max(abs(c.error_pct) for c in rows) <= 20.0
    pred = {c.run_id: c.predicted for c in comps if c.metric == "tokens_per_sec_per_gpu"}
    for a, b in (("mbridge_26.04_Pre-Training_LLAMA3.1_405B_DGX-GB200_NVFP4_256gpu_v0",
                  "mbridge_26.04_Pre-Training_LLAMA3.1_405B_DGX-GB200_MXFP8_256gpu_v0"),
                 ("mbridge_26.04_Pre-Training_LLAMA3_70B_DGX-GB300_NVFP4_64gpu_v0",
                  "mbridge_26.04_Pre-Training_LLAMA3_70B_DGX-GB300_MXFP8_64gpu_v0")):
        la, lb = (runs[x].config["strategy"] for x in (a, b))
        assert {k: la[k] for k in ("tp", "pp", "vpp", "cp")} == {k: lb[k] for k in ("tp", "pp", "vpp", "cp")}
        assert pred[a] > 1.2 * pred[b]


def test_rows_their_release_recipe_contradicts_are_skipped(mapped):
    """The 26.02.01 table's GB300 Llama 3 70B MXFP8 and NVFP4 rows print layouts that r0.3.0's recipe
    (pp 4 · vp 5, micro-batch 1) contradicts; the NVFP4 one (tp 1 · pp 1 without FSDP) holds no 70B."""
    runs, skipped = mapped
    bad = {rid: s.reason for rid, s in skipped.items() if rid.startswith("mbridge_26.02.01_Pre-Training_LLAMA3_70B_DGX-GB300")}
    assert set(bad) == {f"mbridge_26.02.01_Pre-Training_LLAMA3_70B_DGX-GB300_{d}_64gpu_v0" for d in ("MXFP8", "NVFP4")}
    assert all("recipe contradicts" in r and "r0.3.0" in r for r in bad.values())
    assert "mbridge_26.02.01_Pre-Training_LLAMA3_70B_DGX-GB300_FP8_64gpu_v0" in runs   # the FSDP row beside them


def test_megatron_bridge_flop_count_reproduces_the_table(mapped):
    """Megatron-Bridge's own FLOP count (flop_utils.num_floating_point_operations) gives the table's
    model TFLOP/s per token/s for every row — dense, MoE, MLA, and DeepSeek-V3 only with its MTP block."""
    runs, _ = mapped
    ratios, hybrid = [], []
    for r in runs.values():
        if r.source != "megatron-bridge" or "model_tflops_per_gpu" not in r.measured:
            continue
        st = r.config["strategy"]
        table = r.measured["model_tflops_per_gpu"] * 1e12 / r.measured["tokens_per_sec_per_gpu"]
        if r.config["model"].get("hybrid_pattern"):  # Bridge's hybrid branch (hybrid_flops): Nemotron 3 Nano and Super
            hybrid.append(flops_megatron_bridge_hybrid(r.config["model"], st["seq_len"], st["tp"]) / st["seq_len"] / table)
            continue
        if st.get("peft") == "lora":  # its page counts LoRA otherwise (1.56x fewer): not compared (evaluate._lora)
            assert "model_tflops_per_gpu" not in predict_metrics(r, type("R", (), {"step_time_s": 1.0, "tokens_per_s_per_gpu": 1.0})())
            continue
        ratios.append(flops_megatron_bridge(r.config["model"], st["seq_len"], st["tp"], r.flop_basis.get("glu_silu", True))
                      / st["seq_len"] / table)
    assert len(ratios) == 135   # 17 of them NVFP4 runs (the same FLOP count: precision changes no FLOP)
    # the hybrid rows (five Nano, two Super): the tables print TFLOP/s and tokens/s to 3–5 digits
    assert len(hybrid) == 7 and max(abs(x - 1) for x in hybrid) <= 0.006
    assert max(abs(x - 1) for x in ratios) <= 0.025  # two rows' printed figures round to 2 %
    assert sorted(ratios)[len(ratios) // 2] == pytest.approx(1.0, abs=0.002)
    ds = runs["mbridge_26.04_Pre-Training_DeepSeekV3_DGX-B200_MXFP8_256gpu_v0"]
    no_mtp = dict(ds.config["model"], mtp_layers=0)
    table = ds.measured["model_tflops_per_gpu"] * 1e12 / ds.measured["tokens_per_sec_per_gpu"]
    assert flops_megatron_bridge(no_mtp, 4096, 1) / 4096 / table < 0.985  # the table counted the MTP block
    # GPT-OSS: Bridge counts its quick_gelu GLU as two GEMMs (gated multiplier 3/2 only for silu)
    oss = runs["mbridge_26.04.01_Pre-Training_GPT_OSS_120B_DGX-B200_BF16_64gpu_v0"]
    assert oss.flop_basis["glu_silu"] is False
    table = oss.measured["model_tflops_per_gpu"] * 1e12 / oss.measured["tokens_per_sec_per_gpu"]
    assert flops_megatron_bridge(oss.config["model"], 4096, 1, False) / 4096 / table == pytest.approx(1.0, abs=0.01)
    assert flops_megatron_bridge(oss.config["model"], 4096, 1) / 4096 / table > 1.2


# ---- (b) every mapped run estimates ---------------------------------------------------------------

def test_all_mapped_runs_estimate(mapped, evaluated):
    comps, failed = evaluated
    assert failed == [], [f"{f.run_id}: {f.reason}" for f in failed]
    covered = {c.run_id for c in comps}
    assert covered == set(mapped[0])
    for c in comps:
        assert c.predicted > 0 and c.predicted == c.predicted, (c.run_id, c.metric)


# ---- (c) accuracy pinned per source (MAPE %, all mapped metric rows) -------------------------------
# Measured at the time of writing (narayanan 25.5, korthikanti 5.4, megatron-readme 8.8-9.7, torchtitan
# 34.7-36.1, nemo 7.7-8.0, megatron-bridge 22.6-24.2 while the engine was being edited), rounded up by
# ~3 points; tighten when the engine improves. "strong" = runs whose mapping needs no guessed setting (PublishedRun.weak False).

MAPE_BOUND = {
    "narayanan21": 24.0,      # dominated by DeepSpeed ZeRO-3 rows (Table 2), still predicted too fast
    "korthikanti22": 10.5,    # unfused attention priced as batched GEMMs + 8 B/score (was 5.3 with causal-discounted flash pricing)
    "megatron-readme": 12.5,
    "torchtitan": 12.5,       # 10.2 (13.1 before the 500 W H100's peak, 10.7 before torchao's float8 all-gather): eager kernels and SDPA (framework='torch-native'/'torch-compile'), FSDP2 kept gathered under PP, per-op selective AC; CP scaling
    "nemo": 11.0,
    "megatron-bridge": 17.5,  # 15.1 (17.2 before the default grouped GEMM took B200's measured grouped/plain ratio): MoE mechanisms from the release recipes, model TFLOP/s in Bridge's own FLOP count
}
STRONG_BOUND = {"narayanan21": 6.0, "korthikanti22": 10.5}


def test_accuracy_per_source(evaluated):
    comps, _ = evaluated
    per = summarize(comps)
    for src, bound in MAPE_BOUND.items():
        assert src in per, src
        assert per[src]["mape"] <= bound, f"{src}: MAPE {per[src]['mape']:.1f} % > {bound} %"
    strong = summarize([c for c in comps if not c.weak])
    for src, bound in STRONG_BOUND.items():
        assert strong[src]["mape"] <= bound, f"{src} (strong runs): MAPE {strong[src]['mape']:.1f} % > {bound} %"


def test_torchtitan_405b_pipeline_rows_peak_memory(evaluated):
    """torchtitan's Llama 3.1 405B on 512 H100 (tp 8, pp 8, FSDP2, 1F1B; the CP rows too): measured
    75–85 GiB. FSDP resharded after every forward said 37 GiB (−51…−56 %); as torchtitan runs it
    under a pipeline (cost/dp.py keeps_gathered) the stage stays gathered with its fp32 unsharded
    gradients."""
    comps, _ = evaluated
    rows = [c for c in comps if c.run_id.startswith("torchtitan202412_405B") and c.metric == "peak_memory"]
    assert len(rows) >= 5
    for c in rows:
        assert abs(c.error_pct) < 20, (c.run_id, c.measured, c.predicted)


def test_torchtitan_8b_selective_op_rows_peak_memory(evaluated):
    """torchtitan's Llama 3.1 8B with FSDP2 and its default per-op selective AC: measured 62–82 GiB.
    Read as Megatron's selective (the attention core, which flash attention does not keep) it said
    +34…+52 %; with the per-op policy (workload/recompute.py op_sac) the kept outputs only."""
    comps, _ = evaluated
    rows = [c for c in comps if c.metric == "peak_memory" and
            (c.run_id.startswith("torchtitan202412_8B_8gpu") or c.run_id.startswith("torchtitan202412_8B_128gpu"))]
    assert len(rows) == 6
    for c in rows:
        assert abs(c.error_pct) < 20, (c.run_id, c.measured, c.predicted)


def test_megatron_table1_throughput(evaluated):
    """Narayanan Table 1 (the best-documented runs): achieved TFLOP/s per GPU within 15 % each."""
    comps, _ = evaluated
    rows = [c for c in comps if c.run_id.startswith("narayanan21_t1_") and c.metric == "achieved_tflops_per_gpu"]
    assert len(rows) == 10
    assert max(abs(c.error_pct) for c in rows) <= 16.0
    assert sum(abs(c.error_pct) for c in rows) / len(rows) <= 8.0


def _zero3_rows(evaluated, params: str = "") -> dict[str, float]:
    comps, _ = evaluated
    return {c.run_id: c.error_pct for c in comps
            if c.run_id.startswith("narayanan21_t2_ZeRO-3_" + params) and c.metric == "achieved_tflops_per_gpu"}


def test_narayanan_table2_zero3_175b_rows_within_15_percent(evaluated):
    """Narayanan Table 2's DeepSpeed ZeRO-3 baseline (cost/deepspeed_v03.py): the 174.6B rows on
    384/768/1536 A100s within 15 % (issue 11's done-when)."""
    rows = _zero3_rows(evaluated, "174.6B")
    assert len(rows) == 3
    assert max(map(abs, rows.values())) <= 15.0, rows


@pytest.mark.xfail(strict=True, reason=(
    "open: with A100 GEMMs at Ampere's own level (presets/systems/a100-sxm4-80gb.json: Korthikanti's "
    "per-layer rows and the matmul maxima agree) the 529.6B ZeRO-3 rows on 640 and 1120 GPUs are "
    "+16…+20 % too fast; the DeepSpeed v0.3 overhead that makes them slower is not found (README)"))
def test_narayanan_table2_zero3_530b_rows_within_15_percent(evaluated):
    rows = _zero3_rows(evaluated, "529.6B")
    assert len(rows) == 3
    assert max(map(abs, rows.values())) <= 15.0, rows


def test_narayanan_table2_zero3_rows_no_worse_than_now(evaluated):
    """The six rows as the model stands (the 530B gap above): none beyond 21 %, and the 530B rows
    all too fast (a missing overhead, not noise)."""
    rows = _zero3_rows(evaluated)
    assert len(rows) == 6
    assert max(map(abs, rows.values())) <= 21.0, rows
    assert all(e > 0 for k, e in rows.items() if "529.6B" in k), rows


def test_bridge_fp8_rows_keep_fp8_primary_weights_except_subchannel(mapped):
    """Megatron-Bridge's mixed-precision recipes set fp8_param_gather for delayed, current and MX
    scaling, not for subchannel scaling (the H100 "alternate quantization granularity" rows), and
    fp4_param_gather for NVFP4 from v0.5.0 (mixed_precision.py ``bf16_with_nvfp4_mixed``, ecbd4ead5)."""
    runs, _ = mapped
    bridge = [r for r in runs.values() if r.source == "megatron-bridge"]
    for r in bridge:
        s, row = r.config["strategy"], r.run_id.lower()
        sub = "alternate_quantization" in row and "h100" in row
        lora = s.get("peft") == "lora"  # frozen weights have no fp32 master to cast from
        # bf16_with_nvfp4_mixed sets fp4_param_gather (the same field here) from v0.5.0 (26.06) on
        nv = s["dtype"] == "nvfp4" and r.run_id.startswith("mbridge_26.06_")
        assert s.get("fp8_param_gather", False) is ((s["dtype"] == "fp8" or nv) and not sub and not lora), r.run_id
    assert any("alternate_quantization" in r.run_id.lower() and "h100" in r.run_id.lower() for r in bridge)
    assert sum(r.config["strategy"]["dtype"] == "nvfp4" for r in bridge) == 17


def test_the_deepseek_v3_recipe_keeps_adam_moments_in_bf16(mapped):
    """recipes/deepseek/deepseek_v3.py (r0.1.0 … r0.5.0) sets the precision-aware optimizer with bf16
    exp_avg / exp_avg_sq; the Qwen3 and GPT-OSS recipes leave the moments in fp32."""
    runs, _ = mapped
    bridge = [r for r in runs.values() if r.source == "megatron-bridge" and r.config["model"].get("num_experts")]
    dsv3 = [r for r in bridge if "DeepSeekV3" in r.run_id]
    others = [r for r in bridge if "Qwen3" in r.run_id or "GPT_OSS" in r.run_id]
    assert len(dsv3) >= 8 and len(others) >= 20
    recipe = [r for r in dsv3 if any(a.startswith("MoE mechanisms from the recipe") for a in r.assumptions)]
    assert recipe and all(r.config["strategy"].get("adam_moments_dtype") == "bf16" for r in recipe)
    assert all(r.config["strategy"].get("adam_moments_dtype", "fp32") == "fp32" for r in others)


def test_torchtitan_compiles_the_loss_only_from_2025_04(mapped):
    """torchtitan compiles its loss with training.compile since #1033 (bbb1b616e, 2025-04-02); the
    Dec-2024 page's runs (9dec370) computed it eager (cost/activations.py head_activations)."""
    runs = mapped[0]
    trainy = [r for rid, r in runs.items() if rid.startswith("torchtitan_trainy_")]
    dec = [r for rid, r in runs.items() if rid.startswith("torchtitan202412_")]
    assert trainy and dec
    assert all(r.config["strategy"].get("compiled_loss") for r in trainy)
    assert not any(r.config["strategy"].get("compiled_loss") for r in dec)


def test_grand_teton_h100_peak_is_the_500w_bracket(mapped):
    """torchtitan's H100s run at a 500 W power limit, "between SXM and NVL": their dense peaks sit
    between the NVL (400 W) and SXM5 (700 W) datasheets, linear in board power; the datasheet
    H100s, and the points themselves, are unchanged."""
    from simengine.validation.published.cells import power_capped_peak

    assert power_capped_peak(989.0, 835.5, 700.0) == 989.0 and power_capped_peak(989.0, 835.5, 400.0) == 835.5
    assert power_capped_peak(989.0, 835.5, 900.0) == 989.0 and power_capped_peak(989.0, 835.5, 300.0) == 835.5
    assert power_capped_peak(989.0, 835.5, 500.0) == pytest.approx(886.67, abs=0.01)
    runs, _ = mapped
    gt = runs["torchtitan202412_8B_8gpu_FSDP"].config["system"]["gpu"]
    assert gt["peak_tflops"]["bf16"] == pytest.approx(886.67, abs=0.01)
    assert gt["peak_tflops"]["fp8"] == pytest.approx(1773.33, abs=0.01) and gt["hbm_bandwidth_gbs"] == 2400.0
    assert gt["peak_tflops"]["fp32"] == pytest.approx(62.33, abs=0.01)
    assert runs["torchtitan202408_405B_128gpu_None"].config["system"]["gpu"]["peak_tflops"]["bf16"] < 900  # "lower TDP"
    sxm = runs["torchao_float8_8B_8gpu_bf16"].config["system"]["gpu"]  # clocks and power not stated: the datasheet part
    assert sxm["peak_tflops"]["bf16"] == 989.0


def test_torchtitan_float8_all_gather_where_the_run_says_so(mapped):
    """torchao's FSDP2 float8 all-gather where the row names it or the preset published with its
    table sets it (Aug-2024 405B, PR #554); not on the Dec-2024 page, nor on bf16 or rowwise rows."""
    runs, _ = mapped

    def ag(rid):
        return runs[rid].config["strategy"].get("fp8_param_gather", False)

    assert ag("torchtitan202408_405B_128gpu_Float8") and ag("torchtitan202408_405B_128gpu_Float8+AsyncTP")
    assert ag("torchtitan_trainy_h200_8B_4nodes") and ag("torchao_float8_8B_8gpu_tensorwise")
    assert not ag("torchtitan202408_405B_128gpu_None") and not ag("torchao_float8_8B_8gpu_rowwise")
    assert not ag("torchtitan202412_405B_cp1") and not ag("torchtitan202412_8B_8gpu_FSDP_torch.compile_Float8")
    assert any("9515a140b" in x for x in runs["torchtitan202408_405B_128gpu_Float8"].assumptions)


def test_torchtitan_dec_2024_pipeline_split_and_interleaving_from_its_code(mapped):
    """The Dec-2024 page names "Interleaved 1F1B" without a stage count: torchtitan 9dec370 gives a
    multi-stage schedule 2 stages per rank and splits the layers itself (generate_split_points)."""
    from simengine.validation.published.settings import titan_split

    assert titan_split(126, 16) == [7] + [8] * 14 + [7] and titan_split(126, 8) == [15] + [16] * 6 + [15]
    assert titan_split(32, 4) == [8, 8, 8, 8] and titan_split(10, 4) == [2, 3, 3, 2] and titan_split(12, 1) == [12]
    runs, skipped = mapped
    il = runs["torchtitan202412_405B_512gpu_Interleaved1F1B"].config["strategy"]
    assert (il["schedule"], il["vpp"], il["pp"], il["micro_batch_size"]) == ("interleaved", 2, 8, 4)
    assert il["pipeline_layers"] == [7] + [8] * 14 + [7]
    assert runs["torchtitan202412_405B_512gpu_1F1B"].config["strategy"]["pipeline_layers"] == [15] + [16] * 6 + [15]
    assert not any("stages per rank not stated" in s.reason for s in skipped.values() if s.run_id.startswith("torchtitan"))
