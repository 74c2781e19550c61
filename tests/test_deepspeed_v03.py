"""ZeRO-3 as DeepSpeed v0.3 (2021) ran it (cost/deepspeed_v03.py) and NCCL's ring latency across
domains (cost/comm.py): each mechanism is tested against the scenario without it."""

from __future__ import annotations

import pytest

from simengine import api
from simengine.config import load_scenario
from simengine.cost import deepspeed_v03
from simengine.cost.comm import CommModel
from simengine.cost.phase import PhaseCost

from scenarios import scenario_dict


def cfg_of(model="gpt3-175b", gpus=256, system="a100-sxm4-80gb", **strategy):
    base = {"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": gpus, "seq_len": 2048, "zero_stage": 3,
            "overlap_grad_reduce": True, "overlap_param_gather": True, "recompute": "full", "fsdp_pattern": "zero3-2021"}
    base.update(strategy)
    return scenario_dict(model, system, system={"num_gpus": gpus}, strategy=base)


def test_cross_domain_ring_pays_network_latency_only_between_domains():
    """NCCL tuning.cc: nInterSteps = nNodes−1 of an all-gather's n−1 steps are network steps."""
    sc = load_scenario(cfg_of(gpus=64))
    comm = CommModel(sc)
    net, nvl = sc.system.scale_out.latency_us * 1e-6, sc.system.scale_up.latency_us * 1e-6
    tiny = comm.time("all_gather", 8.0, "dps") - comm.tiers[("all_gather", "scale_out")].overhead_s
    assert tiny == pytest.approx(7 * net + 56 * nvl, rel=1e-3)  # 8 domains of 8 ranks
    ar = comm.time("all_reduce", 8.0, "dps") - comm.tiers[("all_reduce", "scale_out")].overhead_s
    assert ar == pytest.approx(14 * net + 112 * nvl, rel=1e-3)


def test_gpt3_layer_has_twelve_tensors_each_its_own_call():
    sc = load_scenario(cfg_of())
    subs = deepspeed_v03.gemm_submodules(sc)
    assert sum(1 + len(o) for _, o in subs) == 12  # 4 weights + 4 biases + 2 LayerNorms × (scale, shift)
    h = 12288
    assert [w for w, _ in subs] == [3 * h * h, h * h, 4 * h * h, 4 * h * h]
    llama = load_scenario(cfg_of("llama3-8b"))
    assert sum(1 + len(o) for _, o in deepspeed_v03.gemm_submodules(llama)) == 6  # no biases, RMSNorm scale only


def _phases(sc, layers=4, **kw):
    fwd, bwd, rc = PhaseCost(compute_s=1.0), PhaseCost(compute_s=2.0), PhaseCost(compute_s=1.0)
    deepspeed_v03.add_layer_comm(sc, CommModel(sc), layers, fwd, bwd, rc, **kw)
    return fwd, bwd, rc


def _alone(pc):
    return sum(s * n for (_, s, w, _), n in pc.comm.items() if w == 0.0)


def _total(pc):
    return sum(s * n for (_, s, _, _), n in pc.comm.items())


def _hbm_Bps(sc):
    return sc.system.gpu.hbm_bandwidth_gbs * 1e9 * sc.system.efficiency.hbm


def _launch(sc):
    return sc.system.efficiency.kernel_overhead_us * 1e-6


def test_host_work_per_rank_grows_with_the_group_and_runs_alone():
    small, big = load_scenario(cfg_of(gpus=128)), load_scenario(cfg_of(gpus=512))
    assert deepspeed_v03.host_s(big, 10, 512) == pytest.approx(4 * deepspeed_v03.host_s(small, 10, 128))
    assert deepspeed_v03.host_s(big, 10, 512, "reduce_scatter") > deepspeed_v03.host_s(big, 10, 512)
    f_small, _, _ = _phases(small)
    f_big, _, _ = _phases(big)
    # the forward gathers the four weights of 4 layers (biases and norms persist); the Python loop of
    # one narrow view per rank before each ring runs alone (175B: every gather itself is prefetched)
    assert _alone(f_big) - _alone(f_small) == pytest.approx(4 * 4 * (512 - 128) * _launch(big))


def test_c10d_copies_are_issued_while_the_ring_runs_and_the_buffer_is_zero_filled_first():
    sc = load_scenario(cfg_of(gpus=512))
    comm, launch, hbm = CommModel(sc), _launch(sc), _hbm_Bps(sc)
    _, tiny = deepspeed_v03.gather_s(sc, comm, 1e3, 512)
    assert comm.time("all_gather", 2e3, "dps") < 512 * launch
    assert tiny == pytest.approx(512 * launch)  # the ring ends before the host has issued 512 copies
    n = 4 * 12288 ** 2
    before, big = deepspeed_v03.gather_s(sc, comm, n, 512)
    assert big == pytest.approx(comm.time("all_gather", 2 * n, "dps") + 4 * n / hbm + launch)  # read + write after the ring
    assert before == pytest.approx(2 * n / hbm + launch + 512 * launch)  # torch.zeros, then the narrow loop


def test_every_fetch_reads_each_parameter_again_for_its_debug_norm():
    """With every tensor persistent nothing is gathered, but each submodule's fetch still computes
    the norm of each of its parameters (fetch_sub_module's print_rank_0 f-string)."""
    sc = load_scenario(cfg_of(gpus=512))
    layers = 4
    fwd, bwd, rc = _phases(sc, layers, persist=float("inf"))
    norms = sum(2.0 * n / _hbm_Bps(sc) + _launch(sc) for w, o in deepspeed_v03.gemm_submodules(sc) for n in (w, *o))
    assert _total(fwd) == pytest.approx(layers * norms)
    assert _total(rc) == pytest.approx(layers * norms)


def test_the_ipg_copy_applies_to_gradients_that_fit_the_bucket():
    sc = load_scenario(cfg_of(gpus=512))
    comm, n = CommModel(sc), 1e8
    fits = deepspeed_v03.reduce_scatter_s(sc, comm, n, 512, bucket=n)
    too_big = deepspeed_v03.reduce_scatter_s(sc, comm, n, 512, bucket=n - 1)
    assert fits - too_big == pytest.approx(4 * n / _hbm_Bps(sc) + _launch(sc))
    # the rest: divide in place, view + narrow per rank, c10d's flatten, the ring
    flatten = max(512 * _launch(sc), 4 * n / _hbm_Bps(sc) + _launch(sc))
    ring = comm.time("reduce_scatter", 2 * n, "dps")
    assert too_big == pytest.approx(4 * n / _hbm_Bps(sc) + _launch(sc) + 2 * 512 * _launch(sc) + flatten + ring)


def test_small_tensors_persist_and_are_not_gathered_per_pass():
    sc = load_scenario(cfg_of(gpus=512))
    default, _, _ = _phases(sc)
    every, _, _ = _phases(sc, persist=0.0)
    assert _total(every) > _total(default)
    comm = CommModel(sc)
    small = [n for _, o in deepspeed_v03.gemm_submodules(sc) for n in o]
    assert len(small) == 8 and max(small) < deepspeed_v03.PERSISTENCE_THRESHOLD
    # 4 layers: each of the 8 small tensors' zero-fill and narrow loop, alone, before its ring
    assert _alone(every) - _alone(default) == pytest.approx(4 * sum(deepspeed_v03.gather_s(sc, comm, n, 512)[0] for n in small))


def test_weights_used_again_soon_after_the_recompute_are_kept_for_the_backward():
    sc = load_scenario(cfg_of(gpus=512))
    _, kept, _ = _phases(sc)
    _, regathered, _ = _phases(sc, reuse=0.0)
    assert _total(regathered) > _total(kept)
    # 175B: only 4h→h stays — h→4h's reuse distance counts 4h→h's recompute and its backward,
    # 2·(4h² + h) > 1e9 (get_reuse_distance_in_numel over the trace); without a recompute nothing is kept
    subs, h = deepspeed_v03.gemm_submodules(sc), 12288
    assert deepspeed_v03.reuse_distance(subs, 3) == 0.0
    assert deepspeed_v03.reuse_distance(subs, 2) == pytest.approx(2 * (4 * h * h + h))
    assert deepspeed_v03.reuse_distance(subs, 2) > deepspeed_v03.MAX_REUSE_DISTANCE > 4 * h * h
    fwd, bwd, rc = PhaseCost(compute_s=1.0), PhaseCost(compute_s=2.0), PhaseCost()
    deepspeed_v03.add_layer_comm(sc, CommModel(sc), 4, fwd, bwd, rc)
    fwd2, bwd2, rc2 = PhaseCost(compute_s=1.0), PhaseCost(compute_s=2.0), PhaseCost()
    deepspeed_v03.add_layer_comm(sc, CommModel(sc), 4, fwd2, bwd2, rc2, reuse=0.0)
    assert _total(bwd) == pytest.approx(_total(bwd2))


def test_a_submodule_over_the_live_parameter_limit_blocks_the_next_prefetch():
    """530B: QKV, h→4h and 4h→h are each over 1e9 elements — the gather after each runs alone."""
    sc = load_scenario(cfg_of("gpt-529.6b", gpus=512))
    gated, _, _ = _phases(sc)
    free, _, _ = _phases(sc, max_live=float("inf"))
    assert _alone(gated) > _alone(free)
    sc175 = load_scenario(cfg_of(gpus=512))  # every 175B weight is under 1e9: nothing is gated
    assert _alone(_phases(sc175)[0]) == pytest.approx(_alone(_phases(sc175, max_live=float("inf"))[0]))


def test_per_tensor_calls_and_host_work_cost_more_than_todays_deepspeed():
    new = api.estimate(cfg_of(gpus=512)).breakdown_s["dp_comm"]
    today = api.estimate(cfg_of(gpus=512, fsdp_pattern="zero3")).breakdown_s["dp_comm"]
    assert new > today


@pytest.mark.parametrize("gpus", [64, 512])
def test_zero3_2021_never_beats_zero1_when_comm_cannot_hide(gpus):
    common = {"overlap_grad_reduce": False, "overlap_param_gather": False}
    t1 = api.estimate(cfg_of("gpt-18.4b", gpus, **{**common, "zero_stage": 1})).step_time_s
    t3 = api.estimate(cfg_of("gpt-18.4b", gpus, **common)).step_time_s
    assert t3 >= t1


def test_reduce_scatters_run_alone_because_the_next_fetch_synchronises_the_device():
    sc = load_scenario(cfg_of(gpus=512))
    comm = CommModel(sc)
    layers = 4
    _, bwd, _ = _phases(sc, layers)
    rs = layers * sum(comm.time("reduce_scatter", deepspeed_v03.GRAD_BYTES * n, "dps")
                      for w, o in deepspeed_v03.gemm_submodules(sc) for n in (w, *o))
    host = deepspeed_v03.host_s(sc, 12 * layers, 512, "reduce_scatter")
    assert _alone(bwd) >= rs + host


def test_moe_models_fall_back_to_deepspeed_submodule_units():
    from simengine.cost.dp import DEEPSPEED_SUBMODULES_PER_LAYER, zero_units

    sc = load_scenario(cfg_of("mixtral-8x7b", gpus=64, system="h100-sxm5-80gb", ep=8))
    assert zero_units(sc, 4, 1e9)[0] == 4 * DEEPSPEED_SUBMODULES_PER_LAYER
    assert api.estimate(sc.to_json_dict()).step_time_s > 0
