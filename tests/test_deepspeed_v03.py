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


def test_host_work_per_rank_grows_with_the_group_and_runs_alone():
    small, big = load_scenario(cfg_of(gpus=128)), load_scenario(cfg_of(gpus=512))
    assert deepspeed_v03.host_s(big, 10, 512) == pytest.approx(4 * deepspeed_v03.host_s(small, 10, 128))
    assert deepspeed_v03.host_s(big, 10, 512, "reduce_scatter") > deepspeed_v03.host_s(big, 10, 512)
    f_small, _, _ = _phases(small)
    f_big, _, _ = _phases(big)
    # the forward gathers the four weights (biases and norms persist): their host work runs alone
    host_big = deepspeed_v03.host_s(big, 4 * 4, 512)
    assert _alone(f_big) >= host_big
    assert _alone(f_big) - _alone(f_small) >= host_big - deepspeed_v03.host_s(small, 4 * 4, 128)


def test_small_tensors_persist_and_are_not_gathered_per_pass():
    sc = load_scenario(cfg_of(gpus=512))
    default, _, _ = _phases(sc)
    every, _, _ = _phases(sc, persist=0.0)
    assert _total(every) > _total(default)
    assert _alone(every) - _alone(default) == pytest.approx(deepspeed_v03.host_s(sc, 8 * 4, 512))


def test_weights_used_again_soon_after_the_recompute_are_kept_for_the_backward():
    sc = load_scenario(cfg_of(gpus=512))
    _, kept, _ = _phases(sc)
    _, regathered, _ = _phases(sc, reuse=0.0)
    assert _total(regathered) > _total(kept)
    # 175B: h→4h and 4h→h (4h² each, under 1e9) stay; without a recompute nothing is kept
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
