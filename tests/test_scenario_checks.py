"""Invalid scenarios are rejected with messages that name the fields and every term."""

import pytest

from simengine.config import ModelSpec, StrategySpec, load_scenario
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
