"""Hybrid Mamba-2 / attention / MLP / MoE stacks (ModelSpec.hybrid_pattern; workload/mamba.py):
each layer one mixer, priced, held and counted by its own kind."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from scenarios import make, scenario_dict

from simengine import api
from simengine.config import ModelSpec
from simengine.cost.static_memory import stage_params
from simengine.errors import ConfigError
from simengine.estimate import model_flops_per_step
from simengine.presets import load_preset
from simengine.workload.builder import build_workload
from simengine.workload.mamba import ssd_flops_per_token
from simengine.workload.ops import Gemm
from simengine.workload.params import count_parameters, embedding_params, gemm_parameters_active

H8 = {"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 16, "seq_len": 8192}


def _h8(**strategy):
    return make("nemotron-h-8b", system={"num_gpus": 8}, strategy={**H8, **strategy})


def test_nemotron_3_nano_parameter_counts():
    """NVIDIA-Nemotron-3-Nano-30B-A3B: 31.6 B parameters, 3.6 B active per token with the
    embeddings, 3.2 B without the input embedding lookup (NVIDIA's model card, rounded)."""
    m = ModelSpec.model_validate(load_preset("models", "nemotron3-nano-30b-a3b"))
    total, active = count_parameters(m)
    assert (m.num_mamba_layers, m.num_moe_layers, m.num_attention_layers, m.num_dense_layers) == (23, 23, 6, 0)
    assert total == pytest.approx(31.6e9, rel=0.002)
    assert active == pytest.approx(3.6e9, rel=0.01)
    assert active - embedding_params(m, m.vocab_size) == pytest.approx(3.2e9, rel=0.02)


@pytest.mark.parametrize("update, text", [({"hybrid_pattern": "M*-"}, "num_layers"),
                                          ({"mamba_num_heads": None}, "mamba_num_heads"),
                                          ({"hybrid_pattern": "E" + "M-" * 25 + "*"}, "MoE layers"),
                                          ({"hybrid_pattern": "M*X" * 17 + "M"}, "not 'X'")])
def test_a_bad_pattern_names_itself(update, text):
    with pytest.raises(ValidationError) as e:
        ModelSpec.model_validate({**load_preset("models", "nemotron-h-8b"), **update})
    assert text in str(e.value)


def test_each_layer_is_one_mixer_in_the_workload_and_the_parameters():
    sc = _h8(pp=2)
    wl = build_workload(sc)
    chunks = [c for rank in wl.ranks for c in rank]
    assert sum(c.mamba_layers for c in chunks) == 24 and sum(c.dense_layers for c in chunks) == 24
    assert sum(c.attn_layers for c in chunks) == 4 and sum(c.moe_layers for c in chunks) == 0
    # the stages' parameters add up to the model's (tp 1: nothing split)
    per_stage = [stage_params(sc, rank) for rank in wl.ranks]
    assert sum(p.total for p in per_stage) == pytest.approx(count_parameters(sc.model)[0], rel=1e-12)


def test_the_ssd_scan_is_four_batched_gemms_of_the_papers_flops():
    sc = _h8()
    m = sc.model
    fwd = [op for op in build_workload(sc).blocks["mamba"].fwd if isinstance(op, Gemm) and op.name.endswith(":ssd")]
    assert len(fwd) == 4
    assert sum(op.flops for op in fwd) == pytest.approx(ssd_flops_per_token(m) * sc.strategy.seq_len, rel=1e-12)
    in_proj = next(op for op in build_workload(sc).blocks["mamba"].fwd if op.name == "fwd:in_proj:mamba")
    assert (in_proj.k, in_proj.n) == (4096, 2 * 8192 + 2 * 8 * 128 + 128)


def test_model_flops_count_attention_only_on_attention_layers():
    sc = _h8()
    m = sc.model
    n = gemm_parameters_active(m, sc.vocab_padded)
    attn = 3 * 2 * 8192 * m.num_attention_heads * (m.qk_head_dim + m.v_dim) * 4
    per_token = 6 * n + attn + 3 * 24 * ssd_flops_per_token(m)
    assert model_flops_per_step(sc) == pytest.approx(sc.tokens_per_step * per_token, rel=1e-12)


def test_recompute_and_parallelism_behave():
    base, full = api.estimate(_h8()), api.estimate(_h8(recompute="full"))
    assert full.peak_memory_gib < base.peak_memory_gib and full.step_time_s > base.step_time_s
    tp2 = api.estimate(_h8(tp=2, sequence_parallel=True))
    assert tp2.memory_by_stage[0].weights_gib < base.memory_by_stage[0].weights_gib


@pytest.mark.parametrize("strategy, field", [({"tp": 16}, "strategy.tp"), ({"cp": 2}, "strategy.cp"),
                                             ({"pp": 2, "vpp": 2, "schedule": "interleaved"}, "strategy.schedule"),
                                             ({"peft": "lora"}, "strategy.peft")])
def test_what_hybrids_are_not_modelled_with_is_refused_naming_the_field(strategy, field):
    with pytest.raises(ConfigError) as e:
        api.estimate(scenario_dict("nemotron-h-8b", system={"num_gpus": 16}, strategy={**H8, **strategy}))
    assert any(f == field for f, _ in e.value.issues), e.value.issues


def test_non_hybrid_models_are_unchanged_by_the_hybrid_fields():
    m = ModelSpec.model_validate(load_preset("models", "llama3-8b"))
    assert (m.num_attention_layers, m.num_dense_layers, m.num_mamba_layers) == (32, 32, 0)
    assert all(c.attn_layers == len(c.layers) and c.mamba_layers == 0
               for rank in build_workload(make("llama3-8b", system={"num_gpus": 8}, strategy={**H8, "pp": 2})).ranks for c in rank)


# NVIDIA's configuration_nemotron_h.py NemotronHConfig defaults (Nemotron-H 8B) as its config.json
# stores them (the attributes: n_groups, conv_kernel, chunk_size, ...), max_position_embeddings 8192
NEMOTRON_H_8B_CONFIG = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "vocab_size": 131072,
    "tie_word_embeddings": False, "hidden_size": 4096, "intermediate_size": 21504, "num_hidden_layers": 52,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", "num_attention_heads": 32,
    "head_dim": 128, "num_key_value_heads": 8, "mlp_hidden_act": "relu2", "attention_bias": False, "mlp_bias": False,
    "use_bias": False, "initializer_range": 0.02, "layer_norm_epsilon": 1e-5, "residual_in_fp32": False,
    "use_cache": True, "num_logits_to_keep": 1, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "sliding_window": None, "max_position_embeddings": 8192, "attention_dropout": 0.0, "hidden_dropout": 0.0,
    "use_mamba_kernels": True, "n_groups": 8, "mamba_head_dim": 64, "ssm_state_size": 128, "mamba_num_heads": 128,
    "conv_kernel": 4, "expand": 2, "mamba_hidden_act": "silu", "time_step_min": 0.001, "time_step_max": 0.1,
    "time_step_limit": [0.0, 1e9], "time_step_floor": 1e-4, "use_conv_bias": True, "mamba_proj_bias": False,
    "chunk_size": 128, "rescale_prenorm_residual": True, "torch_dtype": "bfloat16",
}


def test_hf_nemotron_h_config_maps_to_the_nemotron_h_8b_preset():
    res = api.import_hf_config(NEMOTRON_H_8B_CONFIG)
    ref = ModelSpec.model_validate(load_preset("models", "nemotron-h-8b")).model_dump(mode="json")
    assert {k: res.model[k] for k in ref if k not in ("name", "source")} == {k: v for k, v in ref.items() if k not in ("name", "source")}
    assert res.unmapped == []
    assert any("no position embedding" in w for w in res.warnings)
    bad = api.import_hf_config(dict(NEMOTRON_H_8B_CONFIG, expand=3))
    assert any("expand=3" in w for w in bad.warnings)
    with pytest.raises(ConfigError):
        api.import_hf_config(dict(NEMOTRON_H_8B_CONFIG, hybrid_override_pattern=["M"]))
