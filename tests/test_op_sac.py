"""torchtitan's per-op selective activation checkpointing (workload/recompute.py ``op_sac``): what
recompute="selective" means on the torch stacks (config/framework.py ``Stack.selective_ac``) —
which forward ops are kept and re-run, the memory it holds and the recompute it adds."""

from __future__ import annotations

import pytest

from simengine import api
from simengine.config import load_scenario
from simengine.cost.activations import BF16, kept_outputs, layer_input
from simengine.cost.stage import build_plan
from simengine.workload.builder import build_workload
from simengine.workload.recompute import gemms, op_sac

from scenarios import scenario_dict


def _cfg(framework="torch-native", recompute="selective", tp=1, **kw):
    strategy = {"tp": tp, "pp": 1, "micro_batch_size": 2, "global_batch_size": 16, "seq_len": 4096,
                "framework": framework, "recompute": recompute, "zero_stage": 3, **kw}
    return scenario_dict("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 8}, strategy=strategy)


@pytest.mark.parametrize("tp", [1, 2])
def test_the_policy_keeps_odd_gemms_sdpa_and_reduce_scatters(tp):
    """A TransformerBlock's GEMMs counted from its attention's: wq 1 kept, wk 2 re-run, wv 3 kept,
    wo 4 re-run, w1 5 kept, w3 6 re-run, w2 7 kept; SDPA and the SP reduce-scatters kept; norms,
    RoPE, SwiGLU, residual adds and the SP all-gathers re-run."""
    wl = build_workload(load_scenario(_cfg(tp=tp)))
    attn, mlp = wl.blocks["attn"].fwd, wl.blocks["mlp"].fwd
    rerun, kept = op_sac(attn)
    rs = ["rs:proj"] if tp > 1 else []
    assert [o.name for o in kept] == ["fwd:q", "fwd:v", "attn"] + rs
    assert {o.name for o in rerun} == {"norm:ln1", "fwd:k", "rope", "fwd:proj", "bda:attn"} | ({"ag:q"} if tp > 1 else set())
    assert gemms(attn) == 4
    rerun, kept = op_sac(mlp, 1 + gemms(attn))
    assert [o.name for o in kept] == ["fwd:fc1:mlp", "fwd:fc2:mlp"] + (["rs:fc2:mlp"] if tp > 1 else [])
    assert {o.name for o in rerun} == {"norm:ln2", "fwd:fc3:mlp", "swiglu:mlp", "bda:mlp"} | ({"ag:fc1:mlp"} if tp > 1 else set())


def test_held_activations_are_the_block_input_and_the_kept_outputs():
    """Per layer (tp 1, S = 2 × 4096 tokens, h 4096, 32 heads of 128, 8 KV heads, f 14336): the block
    input, q, v, SDPA's output and fp32 log-sum-exp, w1's and w2's outputs — nothing else."""
    sc = load_scenario(_cfg())
    S, h, f, heads, kv, d = 8192, 4096, 14336, 32, 8, 128
    by_hand = BF16 * S * (h + heads * d + kv * d + heads * d + f + h) + 4.0 * S * heads
    wl = build_workload(sc)
    kept = layer_input(wl.dims) + kept_outputs(op_sac(wl.blocks["attn"].fwd)[1]) \
        + kept_outputs(op_sac(wl.blocks["mlp"].fwd, 5)[1])
    assert kept == pytest.approx(by_hand, rel=1e-12)
    none = build_plan(load_scenario(_cfg(recompute="none"))).stages[0].chunks[0]
    sac = build_plan(sc).stages[0].chunks[0]
    layers = len(sac.work.layers)
    assert sac.activation_bytes < none.activation_bytes   # flash attention: Megatron's selective drops ~nothing
    from simengine.cost.stage import _priced   # the blocks' full saved bytes, as without recompute
    pr = _priced(sc, wl)
    assert none.activation_bytes - sac.activation_bytes == pytest.approx(layers * (pr.att.saved + pr.mlp.saved - by_hand), rel=1e-12)


def test_the_recompute_reruns_those_ops_and_not_the_attention_core():
    sc = load_scenario(_cfg())
    wl = build_workload(sc)
    rerun = op_sac(wl.blocks["attn"].fwd)[0] + op_sac(wl.blocks["mlp"].fwd, 5)[0]
    rc = build_plan(sc).stages[0].chunks[0].recompute
    layers = len(build_plan(sc).stages[0].chunks[0].work.layers)
    assert rc.flops == pytest.approx(layers * sum(getattr(o, "flops", 0.0) for o in rerun), rel=1e-12)
    assert rc.compute_s > 0
    # Megatron's stack: "selective" is its recompute_modules (default the attention core)
    mega = build_plan(load_scenario(_cfg(framework="megatron-te"))).stages[0].chunks[0]
    assert mega.recompute.flops != rc.flops


def test_op_sac_costs_time_and_saves_memory_between_none_and_full():
    reps = {r: api.estimate(_cfg(recompute=r)) for r in ("none", "selective", "full")}
    assert reps["none"].step_time_s < reps["selective"].step_time_s < reps["full"].step_time_s
    assert reps["none"].peak_memory_gib > reps["selective"].peak_memory_gib > reps["full"].peak_memory_gib


def test_mla_keeps_the_recompute_modules_meaning_and_megatron_its_own():
    from types import SimpleNamespace

    from simengine.workload.recompute import op_sac_stack as _sac_stack

    def sc(framework, attention):
        return SimpleNamespace(strategy=SimpleNamespace(framework=framework), model=SimpleNamespace(attention=attention))
    assert _sac_stack(sc("torch-native", "gqa")) and _sac_stack(sc("torch-compile", "gqa"))
    assert not _sac_stack(sc("torch-native", "mla"))
    assert not _sac_stack(sc("megatron-te", "gqa")) and not _sac_stack(sc("deepspeed", "gqa"))
