"""Where Megatron's parallel groups sit on the scale-up domains (cost/comm.py group_placements):
a group whose size does not divide the domain has a member block cut by a domain boundary, and
that cut group sets the collective's time (from a browser audit: tp 2 on 3-GPU nodes was priced
on NVLink although ranks 2–3 sit on two nodes)."""

from __future__ import annotations

import pytest

from simengine import api, presets
from simengine.config import load_scenario
from simengine.cost.comm import CommModel, group_placements


def scenario(domain: int, gpus: int, **strategy) -> dict:
    system = presets.load_preset("systems", "small")
    system.update(num_gpus=gpus, gpus_per_node=domain)
    system["scale_up"] = dict(system["scale_up"], domain_size=domain)
    cfg = presets.size_scenario("small")
    return {**cfg, "system": system, "strategy": {**cfg["strategy"], **strategy}}


def brute_force(domain: int, size: int, stride: int, world: int) -> int:
    """The fewest members of any group in one domain it occupies, group by group."""
    least = size
    for base in range(world):
        if (base // stride) % size:   # not a group's first member
            continue
        members = [base + i * stride for i in range(size)]
        if members[-1] >= world:
            continue
        counts: dict[int, int] = {}
        for m in members:
            counts[m // domain] = counts.get(m // domain, 0) + 1
        least = min(least, min(counts.values()))
    return least


@pytest.mark.parametrize("domain, size, stride", [(3, 2, 1), (8, 3, 1), (72, 16, 1), (72, 64, 1), (8, 8, 1), (8, 16, 1),
                                                  (8, 2, 4), (72, 8, 2), (72, 16, 4), (16, 4, 4), (6, 4, 1)])
def test_the_members_a_domain_holds_are_the_cut_groups_least(domain, size, stride):
    """The tp group (stride 1) and the cp group (stride tp) against every group of a brute force."""
    from types import SimpleNamespace

    tp, cp = (size, 1) if stride == 1 else (stride, size)
    st = SimpleNamespace(tp=tp, cp=cp, pp=1, etp_size=1, ep=1)
    span = size * stride
    # the job's own groups only: one group, a few, part of a domain, many domains (64 GPUs of a
    # 72-GPU rack cut no group)
    for world in sorted({span, 2 * span, 3 * span, 64 // span * span or span, 4 * span * domain}):
        sc = SimpleNamespace(strategy=st, dp=1, dp_shard=1, dp_replicas=1, edp=1,
                             system=SimpleNamespace(domain=domain, num_gpus=world))
        got = group_placements(sc)["tp" if stride == 1 else "cp"].in_domain
        assert got == brute_force(domain, size, stride, world), world


def test_a_job_inside_one_nvl72_rack_cuts_no_group():
    """64 GPUs of a 72-GPU rack: ep 16 and dp 16 stay on NVLink (an earlier rule cut them as in an
    endless world, 8 + 8, and a qwen3-30b step went 0.39 → 0.99 s)."""
    from types import SimpleNamespace

    st = SimpleNamespace(tp=4, cp=1, pp=1, etp_size=1, ep=16)
    sc = SimpleNamespace(strategy=st, dp=16, dp_shard=16, dp_replicas=1, edp=4,
                         system=SimpleNamespace(domain=72, num_gpus=64))
    places = group_placements(sc)
    assert all(p.in_domain == p.size for p in places.values())


def test_tp_cut_by_a_node_boundary_is_priced_across_nodes():
    aligned = api.estimate(scenario(4, 8, tp=2))
    cut = api.estimate(scenario(3, 8, tp=2))       # ranks 2–3 and 8… sit on two nodes
    assert CommModel(load_scenario(scenario(3, 8, tp=2))).tier_of("tp") == "scale_out"
    assert CommModel(load_scenario(scenario(4, 8, tp=2))).tier_of("tp") == "scale_up"
    assert cut.breakdown_s["tp_comm"] > 2 * aligned.breakdown_s["tp_comm"]
