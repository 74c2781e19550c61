"""The preset catalogue: every file validates, cites a source, and the intended combinations
form valid scenarios; the loader rejects unknown names and paths."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from simengine.config import ModelSpec, StrategySpec, SystemSpec, load_scenario
from simengine.errors import ConfigError
from simengine.presets import (
    KINDS, PRESET_DIR, SCENARIO_SIZES, list_presets, load_preset, load_spec, size_scenario,
)

CLASSES = {"models": ModelSpec, "systems": SystemSpec, "strategies": StrategySpec}
ALL = [(kind, name) for kind in KINDS for name in list_presets(kind)]

# Named strategy -> (model preset, system preset, num_gpus) it is meant for. StrategySpec forbids
# extra fields, so the pairing lives here.
PAIRINGS = {
    "megatron-gpt-175b-1024xa100": ("gpt3-175b", "a100-sxm4-80gb", 1024),
    "megatron-gpt-145.6b-1536xa100": ("gpt-145.6b", "a100-sxm4-80gb", 1536),
    "megatron-gpt-18.4b-256xa100": ("gpt-18.4b", "a100-sxm4-80gb", 256),
    "megatron-gpt-1008b-3072xa100": ("gpt-1008b", "a100-sxm4-80gb", 3072),
    "llama3-70b-tp4-pp4": ("llama3-70b", "h100-sxm5-80gb", 64),
    "llama3-70b-nvfp4-gb300": ("llama3-70b", "gb300-nvl72", 64),
    "deepseek-v3-ep64": ("deepseek-v3", "h100-sxm5-80gb", 1024),
    "mixtral-8x7b-ep8": ("mixtral-8x7b", "h100-sxm5-80gb", 64),
    "qwen3-30b-a3b-ep8": ("qwen3-30b-a3b", "b200-sxm-180gb", 8),
    "llama3-8b-fsdp": ("llama3-8b", "h100-sxm5-80gb", 8),
}

EXPECTED_MODELS = {
    "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b", "qwen3-8b", "qwen3-32b",
    "gpt3-175b", "gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b", "gpt-39.1b", "gpt-76.1b", "gpt-145.6b",
    "gpt-310.1b", "gpt-529.6b", "gpt-1008b", "deepseek-v2", "deepseek-v2-lite", "deepseek-v3", "mixtral-8x7b",
    "mixtral-8x22b", "qwen3-30b-a3b", "qwen3-235b-a22b", "kimi-k2", "small", "medium", "large",
}
EXPECTED_SYSTEMS = {
    "a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb", "b200-sxm-180gb", "gb200-nvl72", "mi300x",
    "small", "medium", "large",
    # hardware generations and export variants (datasheets cited in each file)
    "b300-sxm-288gb", "gb300-nvl72", "h800-sxm5-80gb", "a800-sxm4-80gb", "v100-sxm3-32gb-dgx2", "l40s-48gb", "mi325x",
    # the H100 node on the common scale-out fabrics
    "h100-ib-ndr-rail", "h100-roce-400g", "h100-efa-p5",
}
NETWORK_PRESETS = ("h100-ib-ndr-rail", "h100-roce-400g", "h100-efa-p5")


def test_preset_dir_is_the_repo_folder():
    assert Path(__file__).resolve().parent.parent / "presets" == PRESET_DIR
    assert all((PRESET_DIR / kind).is_dir() for kind in KINDS)


def test_catalogue_contents():
    assert set(list_presets("models")) >= EXPECTED_MODELS
    assert set(list_presets("systems")) >= EXPECTED_SYSTEMS
    assert set(SCENARIO_SIZES) | set(PAIRINGS) <= set(list_presets("strategies"))
    assert list_presets("models") == sorted(list_presets("models"))


@pytest.mark.parametrize("kind,name", ALL)
def test_every_preset_validates(kind, name):
    assert re.fullmatch(r"[a-z0-9][a-z0-9.-]*", name), "file names are lowercase with dashes"
    raw = json.loads((PRESET_DIR / kind / f"{name}.json").read_text(encoding="utf-8"))
    spec = load_spec(kind, name)
    assert isinstance(spec, CLASSES[kind])
    assert spec == CLASSES[kind].model_validate(raw)
    assert spec.name and spec.name != "custom"
    if kind in ("models", "systems"):
        assert len(spec.source.strip()) > 40, "cite the paper / config.json / datasheet"


@pytest.mark.parametrize("size", SCENARIO_SIZES)
def test_size_presets_form_valid_scenarios(size):
    scenario = load_scenario(size_scenario(size))
    assert scenario.model.name.startswith(size)
    assert scenario.system.name.startswith(size)
    assert scenario.strategy.name.startswith(size)


@pytest.mark.parametrize("size,base", [("small", "llama3-8b"), ("medium", "llama3-70b"), ("large", "llama3-405b")])
def test_size_models_copy_a_real_model(size, base):
    a, b = load_preset("models", size), load_preset("models", base)
    for d in (a, b):
        d.pop("name"), d.pop("source")
    assert a == b


@pytest.mark.parametrize("size,num_gpus", [("small", 8), ("medium", 64), ("large", 16384)])
def test_size_systems_are_h100(size, num_gpus):
    a, b = load_preset("systems", size), load_preset("systems", "h100-sxm5-80gb")
    assert a.pop("num_gpus") == num_gpus
    for d in (a, b):
        d.pop("name"), d.pop("source"), d.pop("num_gpus", None)
    assert a == b


@pytest.mark.parametrize("name", NETWORK_PRESETS)
def test_network_presets_are_the_h100_node_on_another_fabric(name):
    """A network preset changes only the scale-out tier (and the price where the cloud differs)."""
    net, base = load_preset("systems", name), load_preset("systems", "h100-sxm5-80gb")
    for d in (net, base):
        d.pop("name"), d.pop("source"), d.pop("scale_out"), d["gpu"].pop("price_per_hour")
    assert net == base
    assert "scale_out" in load_spec("systems", name).model_dump()


def test_export_variants_cut_only_nvlink():
    h800, h100 = load_spec("systems", "h800-sxm5-80gb"), load_spec("systems", "h100-sxm5-80gb")
    a800, a100 = load_spec("systems", "a800-sxm4-80gb"), load_spec("systems", "a100-sxm4-80gb")
    assert h800.gpu.peak_tflops == h100.gpu.peak_tflops and h800.gpu.hbm_bandwidth_gbs == h100.gpu.hbm_bandwidth_gbs
    assert a800.gpu.peak_tflops == a100.gpu.peak_tflops
    assert h800.scale_up.bandwidth_gbs == a800.scale_up.bandwidth_gbs == 200.0  # 400 GB/s bidirectional
    v100 = load_spec("systems", "v100-sxm3-32gb-dgx2")
    assert v100.gpu.peak_tflops.fp8 is None and v100.scale_up.domain_size == v100.gpus_per_node == 16
    assert load_spec("systems", "gb300-nvl72").scale_up.domain_size == 72
    assert load_spec("systems", "mi325x").scale_up.topology == "mesh"


@pytest.mark.parametrize("strategy", sorted(PAIRINGS))
def test_named_strategies_fit_their_model_and_system(strategy):
    model, system, num_gpus = PAIRINGS[strategy]
    sys_dict = load_preset("systems", system)
    sys_dict["num_gpus"] = num_gpus
    scenario = load_scenario({"model": load_preset("models", model), "system": sys_dict,
                              "strategy": load_preset("strategies", strategy)})
    from simengine import api

    rep = api.estimate(scenario)   # valid, and it fits: a named layout a user loads must run
    assert rep.fits, (strategy, rep.reserved_memory_gib, rep.memory_capacity_gib)
    assert rep.step_time_s > 0 and scenario.dp * scenario.strategy.tp * scenario.strategy.pp * scenario.strategy.cp == num_gpus


def test_every_named_strategy_has_a_pairing():
    assert set(list_presets("strategies")) - set(SCENARIO_SIZES) == set(PAIRINGS)


def test_published_counts_spot_checks():
    v3 = load_spec("models", "deepseek-v3")
    assert (v3.num_experts, v3.top_k, v3.first_k_dense_layers, v3.mtp_layers, v3.router) == (256, 8, 3, 1, "sigmoid")
    lite = load_spec("models", "deepseek-v2-lite")
    assert lite.q_lora_rank is None and lite.kv_lora_rank == 512
    k2 = load_spec("models", "kimi-k2")
    assert (k2.num_experts, k2.num_attention_heads, k2.first_k_dense_layers) == (384, 64, 1)
    l405 = load_spec("models", "llama3-405b")
    assert (l405.num_layers, l405.hidden_size, l405.ffn_hidden_size, l405.kv_heads) == (126, 16384, 53248, 8)
    q32 = load_spec("models", "qwen3-32b")
    assert q32.d_head == 128 and q32.hidden_size != q32.num_attention_heads * q32.d_head
    a100 = load_spec("systems", "a100-sxm4-80gb")
    assert a100.gpu.peak_tflops.fp8 is None


B200_CSV = Path(__file__).resolve().parents[1] / "simengine" / "validation" / "data" / "b200_op_efficiency.csv"


def test_b200_efficiency_matches_measured_table():
    rows = {(r["table"], r["op"]): float(r["efficiency"]) for r in csv.DictReader(B200_CSV.open())
            if r["table"] in ("op_default", "mem_bw")}
    eff = load_spec("systems", "b200-sxm-180gb").efficiency
    assert eff.gemm == pytest.approx(rows[("op_default", "matmul")], abs=1e-3)
    assert eff.grouped_gemm == pytest.approx(rows[("op_default", "group_matmul")], abs=1e-3)
    big = {}  # the large-shape attention rows (128 heads, 16 kv heads, s 4096), causal-converted
    for r in csv.DictReader(B200_CSV.open()):
        if r["op"] in ("sdp_fwd", "sdp_bwd") and (r["k_head_num"], r["k_kv_head_num"], r["k_seq_len"]) == ("128", "16", "4096"):
            big.setdefault(r["op"], []).append(float(r["efficiency"]) * 4097 / 8192)
    assert eff.attention_fwd == pytest.approx(sum(big["sdp_fwd"]) / 2, abs=2e-3)
    assert eff.attention_bwd == pytest.approx(sum(big["sdp_bwd"]) / 2, abs=2e-3)
    assert eff.hbm == pytest.approx(rows[("mem_bw", "default")] * 2**30 / 1e9, abs=1e-3)  # GiB/s → GB/s
    assert eff.kernel_overhead_us == 30.0 and "b200_op_efficiency.csv" in eff.source


# ---- loader behaviour ----------------------------------------------------------------------

def test_unknown_preset_lists_known_names():
    with pytest.raises(ConfigError) as e:
        load_preset("models", "llama9-1t")
    assert e.value.field == "model"   # the section it fills, as the CLI's --model names it (not "models")
    assert "unknown model preset 'llama9-1t'" in str(e.value) and "llama3-8b" in str(e.value)
    with pytest.raises(ConfigError):
        load_spec("systems", "tpu-v9")


def test_unknown_kind_and_size():
    with pytest.raises(ConfigError) as e:
        list_presets("gpus")
    assert e.value.field == "kind"
    with pytest.raises(ConfigError):
        load_preset("scenarios", "small")
    with pytest.raises(ConfigError) as e:
        size_scenario("huge")
    assert e.value.field == "size"


@pytest.mark.parametrize("bad", ["../systems/small", "..", "../../etc/passwd", "/etc/passwd", "models/small",
                                 "..\\small", ".hidden", "", "small/../large"])
def test_path_traversal_rejected(bad):
    with pytest.raises(ConfigError):
        load_preset("models", bad)


def test_json_suffix_is_accepted_for_names():
    assert load_preset("models", "llama3-8b.json") == load_preset("models", "llama3-8b")


def test_returned_dicts_are_copies():
    d = load_preset("systems", "h100-sxm5-80gb")
    d["gpu"]["memory_gib"] = 1.0
    d["name"] = "changed"
    fresh = load_preset("systems", "h100-sxm5-80gb")
    assert fresh["gpu"]["memory_gib"] != 1.0 and fresh["name"] != "changed"
    s = size_scenario("small")
    s["model"]["hidden_size"] = 8
    assert size_scenario("small")["model"]["hidden_size"] == 4096


def test_load_spec_from_path(tmp_path):
    raw = load_preset("strategies", "small")
    raw["tp"] = 4
    p = tmp_path / "mine.json"
    p.write_text(json.dumps(raw))
    assert load_spec("strategies", p).tp == 4
    assert load_spec("strategies", str(p)).tp == 4
    p.write_text(json.dumps(dict(raw, tp=1)))
    assert load_spec("strategies", p).tp == 1, "user files are re-read, not cached"


def test_load_spec_bad_json_names_the_file(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"hidden_size": 4096,,}')
    with pytest.raises(ConfigError) as e:
        load_spec("models", p)
    assert "broken.json" in str(e.value) and e.value.field == "model"
    with pytest.raises(ConfigError) as e:
        load_spec("models", tmp_path / "missing.json")
    assert "missing.json" in str(e.value)
    p.write_text("[1, 2]")
    with pytest.raises(ConfigError):
        load_spec("models", p)


def test_load_spec_invalid_field_is_named(tmp_path):
    raw = load_preset("models", "llama3-8b")
    raw["hidden_size"] = -1
    raw["colour"] = "blue"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(raw))
    with pytest.raises(ConfigError) as e:
        load_spec("models", p)
    fields = {f for f, _ in e.value.issues}
    assert {"model.hidden_size", "model.colour"} <= fields


def test_flash_attention_is_refused_on_volta_where_it_does_not_run():
    """The V100 preset's own source says flash attention does not run on Volta; TransformerEngine
    disables FlashAttention and FusedAttention below compute capability 8.0. The check names the
    field and the way out; unfused attention runs, and an Ampere GPU keeps flash."""
    def scenario(system: str, attention_impl: str) -> dict:
        sys_dict = load_preset("systems", system)
        sys_dict["num_gpus"] = 16
        return {"model": load_preset("models", "llama3-8b"), "system": sys_dict,
                "strategy": {"tp": 2, "global_batch_size": 64, "seq_len": 2048, "attention_impl": attention_impl}}

    with pytest.raises(ConfigError) as err:
        load_scenario(scenario("v100-sxm3-32gb-dgx2", "flash"))
    assert [f for f, _ in err.value.issues] == ["strategy.attention_impl"]
    assert "attention_impl='unfused'" in err.value.issues[0][1]
    load_scenario(scenario("v100-sxm3-32gb-dgx2", "unfused"))
    load_scenario(scenario("a100-sxm4-80gb", "flash"))


def test_a_search_on_volta_searches_unfused_attention_unless_told_otherwise():
    """Every candidate was refused for the default flash attention: 'no layout of this space is valid'."""
    from simengine.search import make_space, search

    model, system = load_preset("models", "gpt-1.7b"), dict(load_preset("systems", "v100-sxm3-32gb-dgx2"), num_gpus=16)
    space = make_space(model, system, global_batch=64, seq_len=2048, choices={"tp": (2,), "pp": (1,), "cp": (1,)})
    assert space.base["attention_impl"] == "unfused"
    assert search(space, top=1).candidates
    told = make_space(model, system, global_batch=64, seq_len=2048, base={"attention_impl": "flash"})
    assert told.base["attention_impl"] == "flash"
    assert "attention_impl" not in make_space(model, dict(load_preset("systems", "a100-sxm4-80gb"), num_gpus=16),
                                              global_batch=64, seq_len=2048).base


@pytest.mark.parametrize("name", [n for n in list_presets("systems")
                                  if "Maximum Achievable Matmul FLOPS" in (load_preset("systems", n).get("efficiency") or {}).get("source", "")])
def test_mamf_scaled_gemm_levels_are_what_their_source_says(name):
    """A GEMM level scaled from the MAMF table is the default times the GPU's MAMF efficiency over
    the H100's, both as the source quotes them (A100/A800 above Hopper, MI300X/MI325X below)."""
    eff = load_preset("systems", name)["efficiency"]
    ratio = re.search(r"gemm ([\d.]+) = the default 0\.70 \(Hopper/Blackwell\) x ([\d.]+)/80\.3", eff["source"])
    assert ratio and float(ratio.group(1)) == eff["gemm"]
    gpu_eff = float(ratio.group(2))
    quoted = re.search(r"BF16 table: [^;]*? ([\d.]+) of ([\d.]+) TFLOP/s = ([\d.]+) %", eff["source"])
    assert quoted and float(quoted.group(3)) == gpu_eff == round(100 * float(quoted.group(1)) / float(quoted.group(2)), 1)
    assert eff["gemm"] == round(0.70 * gpu_eff / 80.3, 3)
    for key, default in (("grouped_gemm", 0.43), ("fp8_gemm", 0.55)):
        if key in eff:
            assert eff[key] == round(default * gpu_eff / 80.3, 3)
