"""HF config.json → group-limited routing and sliding-window fields (ui/hf_import.py)."""

from __future__ import annotations

from simengine.config import ModelSpec
from simengine.presets import load_preset
from simengine.workload.params import count_parameters
from ui.hf_import import hf_to_model

# openai/gpt-oss-120b config.json (the fields the mapping reads)
GPT_OSS_120B = {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
                "num_hidden_layers": 36, "num_local_experts": 128, "num_experts_per_tok": 4, "num_attention_heads": 64,
                "num_key_value_heads": 8, "head_dim": 64, "sliding_window": 128, "hidden_act": "silu",
                "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(36)],
                "max_position_embeddings": 131072, "attention_bias": True, "vocab_size": 201088,
                "tie_word_embeddings": False, "rms_norm_eps": 1e-05, "swiglu_limit": 7.0}


def test_gpt_oss_config_maps_onto_the_preset():
    model, notes = hf_to_model(GPT_OSS_120B)
    ref = ModelSpec.model_validate(load_preset("models", "gpt-oss-120b"))
    got = ModelSpec.model_validate(model)
    for k in ("attention_window", "full_attention_interval", "attention_sinks", "linear_bias", "num_experts", "top_k",
              "swiglu_limit"):
        assert getattr(got, k) == getattr(ref, k), k
    assert count_parameters(got) == count_parameters(ref)
    assert not any(n.startswith("bias terms") for n in notes)


def test_group_limited_routing_is_imported_and_trivial_groups_are_not():
    base = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_act": "silu", "hidden_size": 1024,
            "intermediate_size": 4096, "moe_intermediate_size": 512, "n_routed_experts": 64, "num_experts_per_tok": 6,
            "num_attention_heads": 16, "num_hidden_layers": 4, "vocab_size": 32000, "scoring_func": "sigmoid"}
    grouped, _ = hf_to_model({**base, "n_group": 8, "topk_group": 3})
    assert (grouped["n_group"], grouped["topk_group"]) == (8, 3)
    flat, _ = hf_to_model({**base, "n_group": 1, "topk_group": 1})   # Kimi-K2: no group limit
    assert flat["n_group"] is None and flat["topk_group"] is None


def test_all_full_layer_types_mean_no_window():
    cfg = {**GPT_OSS_120B, "model_type": "other", "layer_types": ["full_attention"] * 36}
    model, _ = hf_to_model(cfg)
    assert model["attention_window"] is None


def test_glm45_air_imports_as_its_family_builds_it():
    """zai-org/GLM-4.5-Air's config.json (tests/data/hf/glm-4.5-air.json): transformers' Glm4Moe
    routes with DeepSeek-V3's sigmoid router and selection bias (its config has no scoring_func), has
    q/k norms only where use_qk_norm says so, a dense first layer and one MTP module. The model card:
    106 B parameters, 12 B active (without the embedding and the output layer)."""
    import json
    from pathlib import Path

    from simengine.workload.params import embedding_params, head_params

    cfg = json.loads((Path(__file__).parent / "data" / "hf" / "glm-4.5-air.json").read_text())
    model, notes = hf_to_model(cfg)
    m = ModelSpec.model_validate(model)
    assert (m.router, m.expert_bias, m.qk_norm, m.first_k_dense_layers, m.mtp_layers) == ("sigmoid", True, False, 1, 1)
    assert (m.head_dim, m.num_experts, m.top_k, m.shared_ffn) == (128, 128, 8, 1408)
    assert not any("is not a family this importer knows" in n for n in notes)
    total, active = count_parameters(m)
    assert abs(total / 106e9 - 1) < 0.01
    ends = embedding_params(m, m.vocab_size) + head_params(m, m.vocab_size)
    assert abs((active - ends) / 12e9 - 1) < 0.02
    qk, _ = hf_to_model({**cfg, "use_qk_norm": True})   # GLM-4.5's larger sibling turns them on
    assert qk["qk_norm"] is True
