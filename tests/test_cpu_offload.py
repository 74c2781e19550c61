"""CPU activation offloading (StrategySpec.cpu_offload_layers, cost/offload.py): the GPU holds
L − N layers' activations, and the copies cost time only where they outlast the compute beside them
(TransformerEngine's default scheduling, docs/features/other_optimizations/cpu_offloading)."""

from __future__ import annotations

import pytest
from scenarios import scenario_dict

from simengine import api
from simengine.config import ModelSpec, StrategySpec, SystemSpec, check_scenario
from simengine.cost.offload import stalls

GB = 1e9
STRATEGY = {"tp": 1, "pp": 1, "micro_batch_size": 2, "global_batch_size": 256, "seq_len": 8192, "zero_stage": 3}


def _cfg(n: int, link: float = 450.0, **strategy):
    cfg = scenario_dict(model_preset="llama3-70b", system_preset="gb200-nvl72", system={"num_gpus": 64},
                        strategy={**STRATEGY, "cpu_offload_layers": n, **strategy})
    cfg["system"]["gpu"] = {**cfg["system"]["gpu"], "host_link_gbs": link}
    return cfg


def test_copies_shorter_than_a_layer_hide_entirely():
    """Two or more sets on the GPU and a copy shorter than a layer: no stall either way."""
    assert stalls([1 * GB] * 10, 20, 0.010, 0.020, 450.0) == (0.0, 0.0)


def test_one_set_on_the_gpu_cannot_overlap():
    """N = L − 1: "compute and transfers cannot overlap" — every later layer waits for the copy of
    the one before it (forward) and every offloaded layer for its reload (backward)."""
    c = 4.5 * GB / (450.0 * GB)
    f, b = stalls([4.5 * GB] * 9, 10, 0.5, 1.0, 450.0)
    assert f == pytest.approx(9 * c) and b == pytest.approx(9 * c)


def test_a_slow_link_stalls_by_what_the_copies_outlast():
    """Copies longer than a layer (c > f) run back to back: the forward ends N·c − (L − 2)·f late."""
    n, L, f = 30, 80, 0.010
    c = 2 * GB / (64.0 * GB)
    assert c > f
    s_f, s_b = stalls([2 * GB] * n, L, f, 2 * f, 64.0)
    assert s_f == pytest.approx(max(0.0, n * c - (L - 2) * f))
    assert 0.0 <= s_b <= s_f  # the backward's longer layers hide more


def test_the_gpu_holds_the_other_layers_activations():
    """Peak activations fall by exactly the offloaded layers' share of the layers' activations."""
    base = api.estimate(_cfg(0)).memory_by_stage[0]
    half = api.estimate(_cfg(40)).memory_by_stage[0]
    quarter = api.estimate(_cfg(20)).memory_by_stage[0]
    drop40 = base.activations_gib - half.activations_gib
    drop20 = base.activations_gib - quarter.activations_gib
    assert drop40 > 0 and drop40 == pytest.approx(2 * drop20, rel=1e-9)
    assert half.weights_gib == base.weights_gib and half.optimizer_gib == base.optimizer_gib


@pytest.mark.parametrize("link", [450.0, 64.0, 16.0])
def test_offloading_more_never_saves_time_or_costs_memory(link):
    runs = [api.estimate(_cfg(n, link)) for n in (0, 10, 40, 70, 79)]
    steps = [r.step_time_s for r in runs]
    peaks = [r.peak_memory_gib for r in runs]
    assert steps == sorted(steps) and peaks == sorted(peaks, reverse=True)
    assert runs[0].breakdown_s.get("offload_comm", 0.0) == 0.0
    assert sum(runs[-1].breakdown_s.values()) == pytest.approx(runs[-1].step_time_s, rel=1e-9)


def test_a_pcie_host_link_stalls_where_nvlink_c2c_does_not():
    c2c, pcie = api.estimate(_cfg(40, 450.0)), api.estimate(_cfg(40, 64.0))
    assert c2c.breakdown_s.get("offload_comm", 0.0) == 0.0
    assert pcie.breakdown_s["offload_comm"] > 0 and pcie.step_time_s > c2c.step_time_s


@pytest.mark.parametrize("strategy, words", [
    ({"cpu_offload_layers": 80}, "below num_layers=80"),
    ({"cpu_offload_layers": 10, "pp": 2}, "pp=2"),
    ({"cpu_offload_layers": 10, "recompute": "full"}, "recompute='full'"),
    ({"cpu_offload_layers": 10, "framework": "torch-native"}, "framework"),
])
def test_megatron_cores_rules(strategy, words):
    cfg = _cfg(0, **strategy)
    issues = check_scenario(ModelSpec.model_validate(cfg["model"]), SystemSpec.model_validate(cfg["system"]),
                            StrategySpec.model_validate(cfg["strategy"]))
    assert any(f == "strategy.cpu_offload_layers" and words in m for f, m in issues), issues


def test_megatron_bridge_grace_fsdp_runs_offload_as_their_recipes():
    """The GB200 / GB300 Megatron-FSDP FP8 Llama runs offload the recipe's layers and then fit;
    no other published run offloads."""
    from scenarios import VALIDATION

    from simengine.validation.published import published_runs

    runs, _ = published_runs((VALIDATION / "published_runs.csv").read_text())
    off = {r.run_id: r.config["strategy"].get("cpu_offload_layers", 0) for r in runs}
    grace = [r for r in runs if r.source == "megatron-bridge" and "DGX-GB" in r.run_id
             and r.config["strategy"].get("zero_stage") == 3]
    assert grace and all(off[r.run_id] for r in grace)
    assert all(api.estimate(r.config).fits for r in grace)
    assert not [k for k, v in off.items() if v and k not in {r.run_id for r in grace}]


@pytest.mark.parametrize("schedule", ["dualpipev"])
def test_only_megatrons_schedule_without_pipelining(schedule):
    """At pp 1 Megatron-Core runs one micro-batch's forward, then its backward: DualPipeV's two
    chunks per rank offloaded each chunk's first layers for free. (GPipe and the zero-bubble
    schedules need pp > 1: schedule/base.py ``pipelined_rule``, tests/test_schedules.py.)"""
    cfg = _cfg(10, schedule=schedule)
    issues = check_scenario(ModelSpec.model_validate(cfg["model"]), SystemSpec.model_validate(cfg["system"]),
                            StrategySpec.model_validate(cfg["strategy"]))
    assert any(f == "strategy.cpu_offload_layers" and "schedule='1f1b'" in m for f, m in issues), issues


def test_the_smallest_change_to_fit_offers_the_fewest_offloaded_layers_that_fit():
    """Llama-3 70B on Megatron-FSDP at micro-batch 2 on GB200 does not fit without offload; the fit
    list offers offloading, with the fewest layers that fit (one fewer does not), at no stall over
    the Grace's link."""
    from simengine.api import search_fit_changes

    cfg = _cfg(0, 256.0, dtype="fp8")
    assert not api.estimate(cfg).fits
    offs = [c for c in search_fit_changes(cfg, top=50) if c["change"].startswith("cpu_offload_layers 0 → ")]
    assert len(offs) == 1
    k = offs[0]["strategy"]["cpu_offload_layers"]
    assert offs[0]["change"] == f"cpu_offload_layers 0 → {k}" and 0 < k < 79
    assert api.estimate(_cfg(k, 256.0, dtype="fp8")).fits and not api.estimate(_cfg(k - 1, 256.0, dtype="fp8")).fits
    assert offs[0]["throughput_lost"] == pytest.approx(0.0, abs=1e-9)


def test_the_offloaded_activations_sit_in_host_memory_and_must_fit_there():
    """What leaves the GPU is in host memory: the activations the GPU no longer holds, per GPU;
    more than system.gpu.host_memory_gib does not fit, whatever the GPU holds."""
    base, off = api.estimate(_cfg(0, dtype="fp8")), api.estimate(_cfg(50, dtype="fp8"))
    b, o = base.memory_by_stage[0], off.memory_by_stage[0]
    assert b.host_offload_gib == 0.0
    assert o.host_offload_gib == pytest.approx(b.activations_gib - o.activations_gib, rel=1e-9)
    cfg = _cfg(50, dtype="fp8")
    cfg["system"]["gpu"]["host_memory_gib"] = o.host_offload_gib * 1.01
    assert api.estimate(cfg).fits
    cfg["system"]["gpu"]["host_memory_gib"] = o.host_offload_gib * 0.99
    tight = api.estimate(cfg)
    assert not tight.fits and tight.memory_by_stage[0].reserved_gib == pytest.approx(o.reserved_gib)
    assert any(w.startswith("does not fit in host memory") for w in tight.warnings)
    assert not any(w.startswith("does not fit:") for w in tight.warnings)   # the GPU itself fits


def test_a_shared_pcie_link_splits_fairly_with_the_nic():
    from simengine.cost.offload import shared_link

    assert shared_link(50.0, 50.0, 0.0) == 50.0            # the NIC idle: the whole link
    assert shared_link(50.0, 50.0, 1.0) == 25.0            # both streaming: half each
    assert shared_link(50.0, 10.0, 1.0) == 40.0            # the copies get what the NIC leaves
    assert shared_link(50.0, 50.0, 0.4) == pytest.approx(0.6 * 50 + 0.4 * 25)
    assert shared_link(50.0, 50.0, 3.0) == 25.0            # busy is a share: at most the whole phase


def _fsdp_70b(gpus: int, shares: bool, n: int = 60):
    cfg = scenario_dict(model_preset="llama3-70b", system_preset="h100-sxm5-80gb", system={"num_gpus": gpus},
                        strategy={"tp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 2 * gpus, "seq_len": 8192,
                                  "zero_stage": 3, "cpu_offload_layers": n, "overlap_grad_reduce": True,
                                  "overlap_param_gather": True})
    cfg["system"]["gpu"] = {**cfg["system"]["gpu"], "host_link_shares_nic": shares}
    return api.estimate(cfg)


def test_the_nics_traffic_slows_the_copies_only_where_it_crosses_the_same_link():
    """ZeRO-3 over 64 H100s gathers and reduce-scatters across nodes every micro-batch: on a PCIe
    GPU that traffic shares the link the copies take, so they stall more; on one node (the DP group
    inside NVLink) and where the link is not shared (NVLink-C2C) nothing changes."""
    shared, own = _fsdp_70b(64, True), _fsdp_70b(64, False)
    assert shared.breakdown_s["offload_comm"] > own.breakdown_s["offload_comm"] > 0
    assert shared.step_time_s > own.step_time_s
    one_node = [_fsdp_70b(8, s).breakdown_s["offload_comm"] for s in (True, False)]
    assert one_node[0] == one_node[1] > 0
    from simengine.presets import load_preset

    assert not load_preset("systems", "gb200-nvl72")["gpu"]["host_link_shares_nic"]
    assert load_preset("systems", "h100-sxm5-80gb")["gpu"].get("host_link_shares_nic", True)


def test_the_smallest_change_to_fit_offers_fewer_offloaded_layers_when_the_host_overflows():
    """An 8B step whose GPU holds every activation but whose 8 offloaded layers overfill a 3 GiB
    host: the fit list offered tp and cp changes that cost 7–19 %, never the free one."""
    from simengine.api import search_fit_changes
    from simengine.presets import size_scenario

    cfg = size_scenario("small")
    cfg["strategy"].update(cpu_offload_layers=8, recompute="none", recompute_num_layers=None, schedule="1f1b")
    cfg["system"]["gpu"]["host_memory_gib"] = 3.0
    rep = api.estimate(cfg)
    assert not rep.fits and max(m.host_offload_gib for m in rep.memory_by_stage) > 3.0
    fewer = [c for c in search_fit_changes(cfg) if c["change"].startswith("cpu_offload_layers 8 → ")]
    assert len(fewer) == 1 and fewer[0]["strategy"]["cpu_offload_layers"] < 8
    assert fewer[0]["throughput_lost"] <= 1e-9
