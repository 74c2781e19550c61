"""Squared ReLU (Nemotron-3/4): the MLP's pointwise step as Megatron-Core runs it, the Hugging Face
mapping of ``hidden_act="relu2"``, and the Nemotron presets against their reports' parameter counts."""

from __future__ import annotations

import pytest
from scenarios import make

from simengine.api import estimate, import_hf_config
from simengine.config import ModelSpec
from simengine.config.framework import FRAMEWORKS
from simengine.presets import load_preset
from simengine.workload.builder import build_workload
from simengine.workload.ops import Memory
from simengine.workload.params import count_parameters, embedding_params

NODE = {"num_gpus": 8}
STRAT = {"tp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8, "seq_len": 4096}


def _act_ops(sc, phase):
    return [op for op in getattr(build_workload(sc).blocks["mlp"], phase)
            if isinstance(op, Memory) and op.name.split(":")[0] in ("gelu", "sqrelu", "gelu-bwd", "sqrelu-bwd")]


def _sc(activation, framework="megatron-te", **strategy):
    return make("nemotron4-15b", system=NODE, model={"activation": activation},
                strategy={**STRAT, "framework": framework, **strategy})


@pytest.mark.parametrize("framework, fwd, bwd", [("megatron-te", (8, 2), (14, 3)), ("torch-compile", (4, 1), (6, 1))])
def test_squared_relu_is_two_eager_kernels_forward_three_backward(framework, fwd, bwd):
    """relu then pow (megatron/core/activations.py squared_relu), autograd's pow and threshold
    backward; torch.compile fuses them into one kernel each way."""
    sc = _sc("squared_relu", framework)
    elems = sc.strategy.micro_batch_size * sc.strategy.seq_len * sc.model.ffn_hidden_size // sc.strategy.tp
    for phase, (per_elem, kernels) in (("fwd", fwd), ("bwd", bwd)):
        (op,) = _act_ops(sc, phase)
        assert op.name.startswith("sqrelu")
        assert op.bytes == per_elem * elems and op.kernels == kernels
    assert FRAMEWORKS["torch-native"].squared_relu == FRAMEWORKS["megatron-te"].squared_relu


def test_squared_relu_costs_more_than_relu_and_holds_the_same_memory():
    sq, relu = estimate(_sc("squared_relu")), estimate(_sc("relu"))
    assert sq.step_time_s > relu.step_time_s
    assert sq.step_time_s < 1.02 * relu.step_time_s  # a pointwise pass: well under 2 % of the step
    assert sq.model_flops_per_step == relu.model_flops_per_step
    assert sq.peak_memory_gib == pytest.approx(relu.peak_memory_gib, rel=1e-12)


def test_hf_nemotron_config_maps_to_the_nemotron4_15b_preset():
    """transformers' NemotronConfig (models/nemotron/configuration_nemotron.py) defaults are
    Nemotron-4 15B; its relu2 MLP, LayerNorm1P, rotary positions and untied head."""
    cfg = {"architectures": ["NemotronForCausalLM"], "model_type": "nemotron", "vocab_size": 256000,
           "hidden_size": 6144, "intermediate_size": 24576, "num_hidden_layers": 32, "num_attention_heads": 48,
           "head_dim": 128, "num_key_value_heads": 8, "hidden_act": "relu2", "max_position_embeddings": 4096,
           "initializer_range": 0.0134, "norm_eps": 1e-05, "use_cache": True, "bos_token_id": 2, "eos_token_id": 3,
           "tie_word_embeddings": False, "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
           "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False, "torch_dtype": "bfloat16"}
    res = import_hf_config(cfg)
    ref = ModelSpec.model_validate(load_preset("models", "nemotron4-15b")).model_dump(mode="json")
    assert {k: res.model[k] for k in ref if k not in ("name", "source")} == {k: v for k, v in ref.items() if k not in ("name", "source")}
    assert res.unmapped == []


# (preset, embedding parameters (input + output), non-embedding, source): the reports round to 0.1 B
REPORTED = [
    ("nemotron4-15b", 3.2e9, 12.5e9, "Nemotron-4 15B report arXiv:2402.16819 §2: 3.2 B embedding, 12.5 B non-embedding"),
    ("nemotron4-340b", 9.4e9, 331.6e9, "Nemotron-4 340B report arXiv:2406.11704 §2.1: 9.4 B embedding, 331.6 B non-embedding"),
]


@pytest.mark.parametrize("name, emb, rest, source", REPORTED)
def test_nemotron4_parameter_counts(name, emb, rest, source):
    m = ModelSpec.model_validate(load_preset("models", name))
    total, active = count_parameters(m)
    e = 2 * embedding_params(m, m.vocab_size)  # untied: the input embedding and the output layer
    assert total == active
    assert e == pytest.approx(emb, abs=0.06e9), source
    assert total - e == pytest.approx(rest, abs=0.06e9), source
