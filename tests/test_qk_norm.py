"""Per-head q/k RMSNorm (Qwen3 ``q_norm``/``k_norm``, Megatron-Core ``qk_layernorm``): two norm
kernels each way over this rank's query and key heads, their inputs and fp32 rsigma saved, 2·head_dim
replicated parameters per layer; the Qwen3 presets and the HF importer's qwen3 families carry it."""

from __future__ import annotations

import pytest
from scenarios import make

from simengine.api import estimate, import_hf_config
from simengine.config import ModelSpec
from simengine.cost.activations import attention_activations
from simengine.presets import load_preset
from simengine.workload.builder import build_workload
from simengine.workload.dims import dims_of
from simengine.workload.ops import Memory
from simengine.workload.params import count_parameters

STRAT = {"tp": 2, "pp": 1, "micro_batch_size": 2, "global_batch_size": 8, "seq_len": 4096}


def _sc(qk_norm: bool, **strategy):
    return make("qwen3-8b", system={"num_gpus": 8}, model={"qk_norm": qk_norm}, strategy={**STRAT, **strategy})


def _norms(sc, phase):
    return {op.name: op for op in getattr(build_workload(sc).blocks["attn"], phase)
            if isinstance(op, Memory) and op.name.split(":")[-1] in ("q", "k")}


def test_two_norm_kernels_each_way_over_this_ranks_heads():
    on, off = _sc(True), _sc(False)
    m, s = on.model, on.strategy
    tokens = s.micro_batch_size * s.seq_len
    q_el = tokens * m.num_attention_heads // s.tp * m.d_head
    k_el = tokens * m.kv_heads // s.tp * m.d_head
    fwd, bwd = _norms(on, "fwd"), _norms(on, "bwd")
    assert set(fwd) == {"norm:q", "norm:k"} and set(bwd) == {"norm-bwd:q", "norm-bwd:k"}
    # the fused norm's bytes per element (config/framework.py: 4 forward, 6 backward), one kernel each
    assert (fwd["norm:q"].bytes, fwd["norm:k"].bytes) == (4 * q_el, 4 * k_el)
    assert (bwd["norm-bwd:q"].bytes, bwd["norm-bwd:k"].bytes) == (6 * q_el, 6 * k_el)
    assert all(op.kernels == 1 for op in (*fwd.values(), *bwd.values()))
    assert _norms(off, "fwd") == {} and _norms(off, "bwd") == {}


def test_the_norm_inputs_and_rsigma_are_saved():
    on, off = _sc(True), _sc(False)
    d = dims_of(on)
    rows = d.tokens * (d.heads + d.kv_heads)
    extra = attention_activations(d, on.model).saved - attention_activations(dims_of(off), off.model).saved
    assert extra == 2 * rows * d.d_qk + 4 * rows


def test_two_head_dim_weights_per_layer():
    base = load_preset("models", "qwen3-8b")
    on, off = ModelSpec(**{**base, "qk_norm": True}), ModelSpec(**{**base, "qk_norm": False})
    assert count_parameters(on)[0] - count_parameters(off)[0] == 2 * on.d_head * on.num_layers
    # the published total (Qwen3-8B model card: 8.2 B)
    assert count_parameters(on)[0] == pytest.approx(8.19e9, rel=0.005)


def test_it_costs_a_pointwise_pass_and_some_memory():
    on, off = estimate(_sc(True)), estimate(_sc(False))
    assert off.step_time_s < on.step_time_s < 1.05 * off.step_time_s
    assert on.peak_memory_gib > off.peak_memory_gib
    # 6·N counts every parameter (PaLM App. B), the two head_dim weights per layer included
    sc = _sc(True)
    added = 2 * sc.model.d_head * sc.model.num_layers
    assert on.model_flops_per_step - off.model_flops_per_step == pytest.approx(6 * added * sc.tokens_per_step, rel=1e-9)


def test_qwen3_presets_and_importer_carry_it_and_others_do_not():
    for name in ("qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b"):
        assert load_preset("models", name)["qk_norm"] is True
    assert "qk_norm" not in load_preset("models", "llama3-8b")
    cfg = {"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
           "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
           "hidden_act": "silu", "tie_word_embeddings": False}
    assert import_hf_config(cfg).model["qk_norm"] is True
    assert import_hf_config({**cfg, "model_type": "qwen2"}).model["qk_norm"] is False


def test_not_with_mla():
    with pytest.raises(ValueError, match="qk_norm"):
        ModelSpec(**{**load_preset("models", "deepseek-v3"), "qk_norm": True})
