"""Parameter counts against published figures (within 0.5 % unless the source rounds)."""

import pytest

from simengine import presets
from simengine.config import ModelSpec
from simengine.workload.params import count_parameters, embedding_params

# (preset, published total, published active or None, relative tolerance, source)
PUBLISHED = [
    ("llama3-8b", 8.03e9, None, 0.005, "Meta Llama 3 model card"),
    ("llama3-70b", 70.6e9, None, 0.005, "Meta Llama 3 model card"),
    ("llama3-405b", 405.9e9, None, 0.005, "Dubey et al. 2024, Table 3 (405B)"),
    ("gpt3-175b", 175.0e9, None, 0.005, "Brown et al. 2020, Table 2.1"),
    ("llama2-7b", 6.74e9, None, 0.005, "Touvron et al. 2023 (6.74 B)"),
    ("llama2-70b", 68.98e9, None, 0.005, "Touvron et al. 2023 (68.98 B)"),
    ("deepseek-v3", 671e9, 37e9, 0.015, "DeepSeek-V3 report: 671 B total, 37 B activated (rounded)"),
    ("deepseek-v2", 236e9, 21e9, 0.02, "DeepSeek-V2 paper: 236 B total, 21 B activated (rounded)"),
    ("mixtral-8x7b", 46.7e9, 12.9e9, 0.005, "Mistral AI: 46.7 B total, 12.9 B active"),
    ("qwen3-235b-a22b", 235e9, 22e9, 0.02, "Qwen3 report: 235 B total, 22 B activated (rounded)"),
    # config.json arithmetic gives 1.026 T / 32.9 B; the report prints 1.04 T / 32.6 B (rounded)
    ("kimi-k2", 1.04e12, 32.6e9, 0.015, "Kimi K2 report arXiv:2507.20534: 1.04 T total, 32.6 B activated"),
    ("gpt-oss-120b", 116.83e9, None, 0.0005, "gpt-oss model card arXiv:2508.10925 Table 1: 116.83 B total"),
    ("gpt-oss-20b", 20.91e9, None, 0.0005, "gpt-oss model card arXiv:2508.10925 Table 1: 20.91 B total"),
]


@pytest.mark.parametrize("name,active", [("gpt-oss-120b", 5.13e9), ("gpt-oss-20b", 3.61e9)])
def test_gpt_oss_active_without_the_input_embedding(name, active):
    """The gpt-oss card counts the unembedding but not the embedding lookup as active."""
    m = ModelSpec.model_validate(presets.load_preset("models", name))
    _, a = count_parameters(m)
    assert a - embedding_params(m, m.vocab_size) == pytest.approx(active, rel=0.002)


def test_attention_sinks_and_biases_are_counted():
    m = ModelSpec.model_validate(presets.load_preset("models", "gpt-oss-20b"))
    plain = m.model_copy(update={"attention_sinks": False, "linear_bias": False})
    t, _ = count_parameters(m)
    t0, _ = count_parameters(plain)
    h, a, kv, d, E, f, L = m.hidden_size, m.num_attention_heads, m.kv_heads, m.d_head, m.num_experts, int(m.moe_ffn_hidden_size), m.num_layers
    per_layer = a + (a + 2 * kv) * d + h + E * (2 * f + h) + E  # sinks, qkv+o biases, expert biases, router bias
    assert t - t0 == L * per_layer


@pytest.mark.parametrize("name,total,active,tol,source", PUBLISHED)
def test_published_counts(name, total, active, tol, source):
    m = ModelSpec.model_validate(presets.load_preset("models", name))
    t, a = count_parameters(m)
    assert t == pytest.approx(total, rel=tol), source
    if active is not None:
        assert a == pytest.approx(active, rel=tol), source


def test_dense_active_equals_total():
    m = ModelSpec.model_validate(presets.load_preset("models", "llama3-70b"))
    t, a = count_parameters(m)
    assert t == a


def test_narayanan_eq2_exact():
    """Narayanan et al. 2021 Eq. 2: P = 12·l·h²·(1 + 13/12h + (V+s)/12lh) for their GPT family
    (biases, LayerNorm, learned positions, tied embeddings); Table 1 prints it rounded."""
    for name, billions in [("gpt-1.7b", 1.7), ("gpt-18.4b", 18.4), ("gpt-145.6b", 145.6), ("gpt-1008b", 1008.0)]:
        m = ModelSpec.model_validate(presets.load_preset("models", name))
        l, h, V, s = m.num_layers, m.hidden_size, m.vocab_size, m.max_position_embeddings
        eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))
        t, _ = count_parameters(m)
        assert t == pytest.approx(eq2, rel=1e-4), name
        assert t / 1e9 == pytest.approx(billions, rel=0.03), name
