"""Megatron's bytes per parameter: 18 (2 bf16 weight + 4 fp32 grad + 12 Adam state) without the
distributed optimizer and 6 + 12/DP with it (Megatron-LM docs, distributed optimizer); ZeRO-2/3
shard the grads and weights too (Rajbhandari et al. 2020)."""

import pytest

from simengine.cost.static_memory import stage_params, static_memory
from simengine.workload.builder import build_workload

from scenarios import make


def per_param(zero, dp):
    sc = make("llama3-8b", system={"num_gpus": dp},
              strategy={"zero_stage": zero, "gradient_accumulation_fusion": False, "global_batch_size": dp})
    wl = build_workload(sc)
    p = stage_params(sc, wl.ranks[0])
    mem = static_memory(sc, p)
    return (mem.weights + mem.grads + mem.optimizer) / p.total, mem


@pytest.mark.parametrize("dp", [1, 8, 64])
def test_megatron_18_bytes(dp):
    b, _ = per_param(0, dp)
    assert b == pytest.approx(18.0)


@pytest.mark.parametrize("dp", [2, 8, 64])
def test_distributed_optimizer_6_plus_12_over_dp(dp):
    b, _ = per_param(1, dp)
    assert b == pytest.approx(6.0 + 12.0 / dp)


@pytest.mark.parametrize("dp", [2, 8])
def test_zero2_and_zero3(dp):
    assert per_param(2, dp)[0] == pytest.approx(2.0 + 16.0 / dp)
    b3, mem = per_param(3, dp)
    assert (mem.weights + mem.grads + mem.optimizer) / (mem.weights / 2 * dp) == pytest.approx(18.0 / dp)


def test_te_dummy_wgrad_buffer_per_unique_shape():
    """One bf16 buffer per unique GEMM weight shape (TE get_dummy_wgrad)."""
    sc = make("llama3-8b", system={"num_gpus": 8}, strategy={"gradient_accumulation_fusion": True})
    wl = build_workload(sc)
    p = stage_params(sc, wl.ranks[0])
    h, f, V = 4096, 14336, sc.vocab_padded
    expected = 2 * (6144 * h + h * h + 2 * f * h + h * f + V * h)
    assert static_memory(sc, p).buffers == expected


@pytest.mark.parametrize("size", ["small", "medium", "large"])
def test_memoised_stage_params_equal_a_fresh_count_and_follow_the_strategy(size):
    """stage_params is memoised on (model, tp, ep, etp, chunks): every rank's result equals the
    uncached count, and a scenario that differs only in tp gets its own (not the cached) result."""
    from simengine import presets
    from simengine.config import load_scenario
    from simengine.cost.static_memory import _stage_params

    cfg = presets.size_scenario(size)
    sc = load_scenario(cfg)
    for chunks in build_workload(sc).ranks:
        assert stage_params(sc, chunks) == _stage_params.__wrapped__(sc.model, sc.strategy.tp, sc.strategy.ep, sc.strategy.etp_size, chunks)
    st = cfg["strategy"]
    if st.get("tp", 1) > 1:
        tp = st["tp"] // 2
        narrow = load_scenario({**cfg, "system": {**cfg["system"], "num_gpus": cfg["system"]["num_gpus"] // 2},
                                "strategy": {**st, "tp": tp}})
        wide, half = stage_params(sc, build_workload(sc).ranks[0]), stage_params(narrow, build_workload(narrow).ranks[0])
        assert half == _stage_params.__wrapped__(narrow.model, narrow.strategy.tp, narrow.strategy.ep, narrow.strategy.etp_size,
                                             build_workload(narrow).ranks[0])
        assert half.dense > wide.dense
