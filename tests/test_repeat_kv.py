"""torchtitan's GQA attention expands K and V to the query heads before SDPA (``repeat_kv``;
config/framework.py ``Stack.repeat_kv``): the attention kernel saves, and its backward writes the
gradients of, K and V at query-head width on the torch stacks (cost/activations.py
``attention_activations``); Megatron-Core's stack hands TE/cuDNN the kv_heads K, V."""

from __future__ import annotations

from dataclasses import replace

import pytest

from simengine.config import load_scenario
from simengine.config.framework import FRAMEWORKS
from simengine.cost.activations import BF16, attention_activations
from simengine.cost.stage import build_plan
from simengine.workload.dims import dims_of

from scenarios import scenario_dict


def _cfg(framework="torch-compile", recompute="none", tp=8, pp=1, **kw):
    strategy = {"tp": tp, "pp": pp, "micro_batch_size": 1, "global_batch_size": 8, "seq_len": 8192,
                "framework": framework, "recompute": recompute, "zero_stage": 3, "sequence_parallel": True, **kw}
    return scenario_dict("llama3-70b", "h100-sxm5-80gb", system={"num_gpus": 8 * pp}, strategy=strategy)


@pytest.mark.parametrize("framework", ["torch-native", "torch-compile"])
def test_torch_stacks_save_k_and_v_at_query_heads(framework):
    """Llama-3-70B at tp 8: 8 query heads and 1 KV head of 128 per rank, S = 8192 tokens. The
    expanded K, V add 2·(8 − 1)·128 bf16 values per token to what the layer saves, and the
    backward's dK, dV are as wide as dQ."""
    sc = load_scenario(_cfg(framework))
    m, d = sc.model, dims_of(sc)
    assert (d.heads, d.kv_heads, d.d_qk, d.tokens) == (8, 1, 128, 8192)
    torch = attention_activations(d, m)
    plain = attention_activations(replace(d, stack=replace(d.stack, repeat_kv=False)), m)
    assert torch.saved - plain.saved == pytest.approx(BF16 * 8192 * 2 * (8 - 1) * 128, rel=1e-12)
    assert torch.bwd_transient == pytest.approx(BF16 * 8192 * 3 * 8 * 128, rel=1e-12)
    assert plain.bwd_transient == pytest.approx(BF16 * 8192 * (8 + 2) * 128, rel=1e-12)


def test_megatron_keeps_kv_heads():
    sc = load_scenario(_cfg("megatron-te"))
    d = dims_of(sc)
    assert not FRAMEWORKS["megatron-te"].repeat_kv and not FRAMEWORKS["deepspeed"].repeat_kv
    att = attention_activations(d, sc.model)
    assert att.bwd_transient == pytest.approx(BF16 * 8192 * (8 + 2) * 128, rel=1e-12)


def _without_repeat(monkeypatch, framework):
    monkeypatch.setitem(FRAMEWORKS, framework, replace(FRAMEWORKS[framework], repeat_kv=False))


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_checkpointing_drops_the_expanded_kv_until_backward(monkeypatch, recompute):
    """Per-op SAC keeps SDPA's outputs, not its inputs, and full AC keeps only the block input: the
    expanded K, V are not held between forward and backward — the held bytes do not change — but
    the recomputed layer holds them again at its backward, beside the wider dK, dV (pipeline
    stage 0: the loss's transient, larger, is on the last stage)."""
    sc = load_scenario(_cfg(recompute=recompute, pp=2))
    with_rep = build_plan(sc).stages[0].chunks[0]
    with monkeypatch.context() as mp:
        _without_repeat(mp, "torch-compile")
        plain = build_plan(load_scenario(_cfg(recompute=recompute, pp=2))).stages[0].chunks[0]
    assert with_rep.activation_bytes == pytest.approx(plain.activation_bytes, rel=1e-12)
    kv = BF16 * 8192 * 2 * (8 - 1) * 128
    # SAC re-runs the whole layer at its backward (all its dropped tensors at once, the expanded
    # K, V among them, on top of the block transient); full AC holds the recomputed layer's saved
    # tensors beside the largest block transient (the MLP's, wider than the attention's here)
    assert with_rep.peak_extra_bytes - plain.peak_extra_bytes == pytest.approx(kv, rel=1e-12)
