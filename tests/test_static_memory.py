"""Megatron's bytes per parameter: 18 (2 bf16 weight + 4 fp32 grad + 12 Adam state) without the
distributed optimizer and 6 + 12/DP with it (Megatron-LM docs, distributed optimizer); ZeRO-2/3
shard the grads and weights too (Rajbhandari et al. 2020)."""

import pytest

from simengine.cost.static_memory import stage_params, static_memory
from simengine.workload.builder import build_workload

from scenarios import make


def per_param(zero, dp, **strategy):
    sc = make("llama3-8b", system={"num_gpus": dp},
              strategy={"zero_stage": zero, "gradient_accumulation_fusion": False, "global_batch_size": dp, **strategy})
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


@pytest.mark.parametrize("zero, dp", [(0, 8), (1, 8), (1, 64), (3, 8)])
def test_bf16_adam_moments_are_8_bytes_of_optimizer_state(zero, dp):
    """Megatron-Core's precision-aware optimizer with bf16 exp_avg / exp_avg_sq: fp32 master (4) +
    m (2) + v (2) = 8 B/param of optimizer state instead of 12, sharded as before."""
    _, fp32 = per_param(zero, dp)
    _, bf16 = per_param(zero, dp, adam_moments_dtype="bf16")
    assert bf16.optimizer == pytest.approx(fp32.optimizer * 8.0 / 12.0)
    assert (bf16.weights, bf16.grads, bf16.buffers) == (fp32.weights, fp32.grads, fp32.buffers)


def test_bf16_adam_moments_read_and_write_8_fewer_bytes_per_sharded_param():
    """The Adam update reads and writes m and v at 2 B (cost/dp.py ``_optimizer_s``)."""
    from simengine.cost.dp import _optimizer_s

    sc = make("llama3-8b", system={"num_gpus": 8}, strategy={"zero_stage": 1, "global_batch_size": 8})
    sc16 = make("llama3-8b", system={"num_gpus": 8}, strategy={"zero_stage": 1, "global_batch_size": 8, "adam_moments_dtype": "bf16"})
    p = stage_params(sc, build_workload(sc).ranks[0])
    hbm = sc.system.gpu.hbm_bandwidth_gbs * 1e9 * sc.system.efficiency.hbm
    assert _optimizer_s(sc, p) - _optimizer_s(sc16, p) == pytest.approx(8.0 * p.total / 8 / hbm, rel=1e-9)


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


@pytest.mark.parametrize("framework", ["torch-native", "megatron-te"])
@pytest.mark.parametrize("pp", [1, 2])
def test_a_zero_stage_with_nothing_to_shard_is_zero0(framework, pp):
    """At dp = cp = 1 (no experts) ZeRO has no group to shard over: torchtitan applies no
    fully_shard and a distributed optimizer over one rank holds it all. ZeRO-3 under FSDP2 with a
    pipeline held an unsharded gradient copy and the gathered parameters (+27 % peak), and
    Megatron-FSDP two gathered layers, for nothing."""
    from simengine import api, presets

    def report(zero):
        model, system = presets.load_preset("models", "llama3-8b"), presets.load_preset("systems", "h100-sxm5-80gb")
        model["num_layers"], system["num_gpus"] = 8, pp
        return api.estimate({"model": model, "system": system, "strategy": {
            "pp": pp, "dp": 1, "global_batch_size": 8, "seq_len": 2048, "zero_stage": zero, "framework": framework}})

    base = report(0)
    for zero in (1, 2, 3):
        r = report(zero)
        assert r.peak_memory_gib == pytest.approx(base.peak_memory_gib, rel=1e-12)
        assert r.step_time_s == pytest.approx(base.step_time_s, rel=1e-12)


def _titan(dp, tp=1, **strategy):
    return make("llama3-8b", system={"num_gpus": dp * tp},
                strategy={"framework": "torch-compile", "zero_stage": 3, "tp": tp, "sequence_parallel": tp > 1,
                          "global_batch_size": dp, **strategy})


def test_fsdp2_keeps_no_bf16_weight_copy():
    """FSDP2 (torchtitan): the fp32 shard is the weight the optimizer updates (MixedPrecisionPolicy
    casts it to bf16 only for the all-gather), so 4 (fp32 shard) + 4 (grad) + 8 (Adam m, v) =
    16 B/param sharded, not Megatron-FSDP's 2 + 4 + 12 = 18."""
    sc = _titan(8)
    p = stage_params(sc, build_workload(sc).ranks[0])
    mem = static_memory(sc, p)
    assert (mem.weights + mem.grads + mem.optimizer) / (p.total / 8) == pytest.approx(16.0)
    assert mem.weights == pytest.approx(4.0 * p.total / 8)


def test_fsdp2_root_stays_gathered_without_a_pipeline():
    """torchtitan's root fully_shard unit (embedding, final norm, LM head) is never resharded after
    forward (FSDPState._lazy_init: the root's post_forward_mesh_info = None): beside the running
    and the prefetched block its bf16 parameters are held through the activation peak. The
    all-gather buffers live in the copy-in stream's pool: reserved, not allocated."""
    sc = _titan(8)
    p = stage_params(sc, build_workload(sc).ranks[0])
    mem = static_memory(sc, p)
    block = (p.total - p.ends) / sc.model.num_layers
    assert mem.buffers == pytest.approx(2.0 * p.ends + 2 * 2.0 * block)
    assert mem.pools == pytest.approx(2.0 * p.ends + 2.0 * block)
    from simengine import api
    r = api.estimate(sc)
    stage = r.memory_by_stage[0]
    assert stage.reserved_gib == pytest.approx(stage.peak_gib * (1 + sc.strategy.allocator_overhead) + mem.pools / 2**30)


def test_torchao_float8_keeps_no_fp8_weight_copy_under_recompute():
    """torchao's Float8Linear casts its weight in every forward (no module cache, unlike TE): under
    activation checkpointing nothing fp8 outlives the layer, so fp8 adds no model-state buffer."""
    bf16, fp8 = _titan(8, recompute="full"), _titan(8, recompute="full", dtype="fp8")
    p = stage_params(bf16, build_workload(bf16).ranks[0])
    assert static_memory(fp8, p).buffers == pytest.approx(static_memory(bf16, p).buffers)
