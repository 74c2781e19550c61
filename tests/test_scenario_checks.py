"""Invalid scenarios are rejected with messages that name the fields and every term."""

import pytest

from simengine import presets
from simengine.config import ModelSpec, StrategySpec, SystemSpec, check_scenario, load_scenario
from simengine.errors import ConfigError

from scenarios import scenario_dict


def issues_of(**kw):
    with pytest.raises(ConfigError) as e:
        load_scenario(scenario_dict(**kw))
    return e.value.issues


def test_tp_must_divide_heads():
    iss = issues_of(model_preset="llama3-70b", system={"num_gpus": 3}, strategy={"tp": 3, "global_batch_size": 3})
    assert ("strategy.tp", "tp=3 does not divide num_attention_heads=64") in iss


def test_world_size_mismatch_names_every_term():
    iss = issues_of(system={"num_gpus": 64}, strategy={"tp": 4, "pp": 4, "dp": 6, "global_batch_size": 96})
    assert ("strategy.dp", "tp*pp*cp*dp = 4*4*1*6 = 96 but system.num_gpus = 64") in iss


def test_batch_divisibility():
    iss = issues_of(system={"num_gpus": 8}, strategy={"global_batch_size": 12})
    assert any(f == "strategy.global_batch_size" and "micro_batch_size*dp = 1*8" in m for f, m in iss)


def test_field_level_errors_carry_dotted_paths():
    iss = issues_of(strategy={"tp": 0}, system={"gpu": {"name": "x"}})
    fields = {f for f, _ in iss}
    assert "strategy.tp" in fields
    assert any(f.startswith("system.gpu.") for f in fields)


def test_unknown_field_rejected():
    iss = issues_of(model={"hiden_size": 4096})
    assert any(f == "model.hiden_size" for f, _ in iss)


def test_model_self_checks():
    with pytest.raises(ValueError, match="num_attention_heads=32 is not a multiple of num_kv_heads=5"):
        ModelSpec(hidden_size=4096, num_layers=2, num_attention_heads=32, num_kv_heads=5, ffn_hidden_size=10, vocab_size=10)
    with pytest.raises(ValueError, match="attention='mla' needs"):
        ModelSpec(hidden_size=64, num_layers=2, num_attention_heads=4, ffn_hidden_size=10, vocab_size=10, attention="mla")


def test_strategy_self_checks():
    with pytest.raises(ValueError, match="vpp=2 needs schedule='interleaved'"):
        StrategySpec(vpp=2, global_batch_size=8, seq_len=128)


def test_moe_checks():
    iss = issues_of(model_preset="mixtral-8x7b", system={"num_gpus": 16}, strategy={"ep": 16, "global_batch_size": 16})
    assert ("strategy.ep", "ep=16 does not divide num_experts=8") in iss
    iss = issues_of(strategy={"ep": 2})
    assert ("strategy.ep", "ep=2 needs an MoE model (num_experts > 0)") in iss


def test_fp8_needs_a_peak():
    iss = issues_of(system_preset="a100-sxm4-80gb", system={"num_gpus": 8}, strategy={"dtype": "fp8"})
    assert any(f == "strategy.dtype" for f, _ in iss)


def test_not_an_object():
    with pytest.raises(ConfigError):
        load_scenario([1, 2])
    with pytest.raises(ConfigError) as e:
        load_scenario({"model": 1, "system": None, "strategy": "x", "extra": {}})
    assert {f for f, _ in e.value.issues} == {"model", "system", "strategy", "extra"}


def cp_issues(model_preset, **strategy):
    """The strategy.cp issues of a scenario (others, e.g. MoE layout, may be present too)."""
    world = strategy.get("tp", 1) * strategy.get("cp", 1)
    cfg = scenario_dict(model_preset=model_preset, system={"num_gpus": world},
                        strategy={"global_batch_size": 8, "cp_comm_type": "a2a", **strategy})
    specs = (ModelSpec.model_validate(cfg["model"]), SystemSpec.model_validate(cfg["system"]),
             StrategySpec.model_validate(cfg["strategy"]))
    return [(f, msg) for f, msg in check_scenario(*specs) if f == "strategy.cp"]


def test_ulysses_a2a_needs_q_and_kv_heads_per_tp_rank_divisible_by_cp():
    # TransformerEngine context_parallel.py AttnFuncWithCPAndQKVOA2A.forward asserts both
    iss = cp_issues("llama3-8b", tp=2, cp=8)  # 32 q heads, 8 kv heads
    assert iss == [("strategy.cp", "cp=8 does not divide the K/V heads per TP rank num_kv_heads/tp = 8/2 = 4 "
                                   "(cp_comm_type='a2a' splits K/V heads over cp; use cp_comm_type='p2p' or 'allgather')")]
    iss = cp_issues("llama3-8b", tp=4, cp=16)
    assert ("strategy.cp", "cp=16 does not divide num_attention_heads/tp = 32/4 = 8 (cp_comm_type='a2a' splits heads over cp)") in iss
    assert cp_issues("llama3-8b", tp=2, cp=4) == []  # 16 q, 4 kv heads per TP rank
    assert cp_issues("llama3-8b", tp=2, cp=8, cp_comm_type="p2p") == []  # ring attention splits no heads
    assert cp_issues("deepseek-v3", tp=2, cp=8) == []  # MLA: K/V up-projected to all 64 heads per rank


def test_vpp_not_dividing_the_layers_says_what_megatron_does():
    sc = load_scenario(scenario_dict(model_preset="llama3-70b", system={"num_gpus": 4},
                                     strategy={"pp": 4, "vpp": 7, "schedule": "interleaved", "global_batch_size": 8}))
    (field, msg), = sc.notes
    assert field == "strategy.vpp"
    assert msg.startswith("num_layers=80 is not divisible by pp*vpp = 4*7 = 28: Megatron-LM refuses it "
                          "(get_num_layers_to_build asserts num_layers/pp = 80/4 = 20 divisible by vpp=7); "
                          "simengine places 2-3 layers per virtual stage (first 2, last 2)")
    even = load_scenario(scenario_dict(model_preset="llama3-70b", system={"num_gpus": 4},
                                       strategy={"pp": 4, "vpp": 5, "schedule": "interleaved", "global_batch_size": 8}))
    assert even.notes == []


def test_pp_not_dividing_the_layers_names_the_megatron_equivalent():
    sc = load_scenario(scenario_dict(model_preset="llama3-405b", system={"num_gpus": 16},
                                     strategy={"pp": 16, "global_batch_size": 16}))
    (field, msg), = sc.notes
    assert field == "strategy.pp" and "num_layers=126 is not divisible by pp=16" in msg
    assert msg.endswith("Megatron gives the same split with decoder_first_pipeline_num_layers=7, "
                        "decoder_last_pipeline_num_layers=7")
    explicit = load_scenario(scenario_dict(model_preset="llama3-405b", system={"num_gpus": 16}, strategy={
        "pp": 16, "global_batch_size": 16, "decoder_first_pipeline_num_layers": 7, "decoder_last_pipeline_num_layers": 7}))
    assert explicit.notes == []


def test_schedule_rules_come_from_the_schedule_module():
    iss = issues_of(system={"num_gpus": 4}, strategy={"pp": 4, "schedule": "interleaved", "vpp": 2, "global_batch_size": 6})
    assert ("strategy.global_batch_size", "interleaved schedule needs micro-batches per step m=6 divisible by pp=4") in iss
    iss = issues_of(system={"num_gpus": 4}, strategy={"pp": 4, "schedule": "dualpipev", "global_batch_size": 4})
    assert any(f == "strategy.global_batch_size" and "m=4 >= 2*pp = 8" in m for f, m in iss)
    iss = issues_of(system={"num_gpus": 2}, strategy={"pp": 2, "vpp": 2, "schedule": "zb-h1"})
    assert any(f == "strategy.vpp" and "vpp=2 needs schedule='interleaved'" in m for f, m in iss)


def test_a_sequence_longer_than_the_learned_position_table_is_noted():
    """Megatron-LM asserts max_position_embeddings >= seq_length; the estimate said nothing when a
    learned-position model (gpt-1.7b, 2,048 positions) ran at 65,536 tokens."""
    learned = {"position_embedding": "learned", "max_position_embeddings": 2048}
    sc = load_scenario(scenario_dict(model=learned, system={"num_gpus": 8}, strategy={"seq_len": 4096, "global_batch_size": 8}))
    assert any(f == "strategy.seq_len" and "max_position_embeddings=2048" in m for f, m in sc.notes)
    for model, seq in ((learned, 2048), ({"position_embedding": "rope", "max_position_embeddings": 2048}, 4096)):
        sc = load_scenario(scenario_dict(model=model, system={"num_gpus": 8}, strategy={"seq_len": seq, "global_batch_size": 8}))
        assert not any(f == "strategy.seq_len" for f, _ in sc.notes)


def test_a_split_megatron_builds_with_its_account_for_flags_says_so():
    """Llama-3.1-405B at pp16 vpp4 (the 'large' preset): 126 layers do not divide over 64 virtual
    stages, but (126 + 2) / 64 = 2 with the embedding and the loss counted as layers, one fewer
    built on the first and last virtual stage (Megatron-Core get_num_layers_to_build) — the
    split simengine places — so the note names the flags instead of a refusal."""
    sc = load_scenario(presets.size_scenario("large"))
    (field, msg), = sc.notes
    assert field == "strategy.pp" and "refuses it" not in msg
    assert ("(first 1, last 1), the split Megatron-LM builds with --account-for-embedding-in-pipeline-split "
            "--account-for-loss-in-pipeline-split") in msg
    # one flag: 79 layers + the embedding on pp4 vpp2 is 20 per rank, 10 per virtual stage, the first 9
    one = load_scenario(scenario_dict(model_preset="llama3-70b", model={"num_layers": 79}, system={"num_gpus": 4},
                                      strategy={"pp": 4, "vpp": 2, "schedule": "interleaved", "global_batch_size": 8}))
    (_, msg), = one.notes
    assert "(first 10, last 9), the split Megatron-LM builds with --account-for-loss-in-pipeline-split; without it" in msg
    # no flag reproduces 61 layers over 32 virtual stages (63 and 62 do not divide by pp 8): still a refusal
    dsv3 = {**presets.scenario_preset("deepseek-v3-ep64")}
    dsv3["strategy"] = {k: v for k, v in dsv3["strategy"].items() if k != "pipeline_layers"}
    (_, msg), = load_scenario(dsv3).notes
    assert "Megatron-LM refuses it" in msg


def test_a_gpu_count_that_does_not_split_reports_no_floored_dp():
    """tp 3 on 64 GPUs: the world size and tp's own errors, not a batch error about a dp of
    floor(64 / 3) = 21 the user never set (nor an EP error reading it)."""
    cfg = scenario_dict(system={"num_gpus": 64}, strategy={"tp": 3, "global_batch_size": 128})
    specs = (ModelSpec.model_validate(cfg["model"]), SystemSpec.model_validate(cfg["system"]),
             StrategySpec.model_validate(cfg["strategy"]))
    issues = check_scenario(*specs)
    assert ("strategy.tp", "tp*pp*cp = 3*1*1 = 3 does not divide system.num_gpus = 64") in issues
    assert not [m for f, m in issues if "dp" in m and f != "strategy.tp"], issues
    moe = scenario_dict(model_preset="mixtral-8x7b", system={"num_gpus": 64},
                        strategy={"tp": 3, "ep": 8, "sequence_parallel": True, "global_batch_size": 128})
    specs = (ModelSpec.model_validate(moe["model"]), SystemSpec.model_validate(moe["system"]),
             StrategySpec.model_validate(moe["strategy"]))
    assert not [m for f, m in check_scenario(*specs) if f in ("strategy.ep", "strategy.global_batch_size")]
