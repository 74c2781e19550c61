"""The fill-and-drain floor of phase 0 (search/prune.py ``work_floor``, ``_fills``): for one chain
with one chunk per rank, step ≥ max_r (Σ_{s<r} y_s + m·y_r) ≥ Y / (1 − (1 − 1/m)^pp) for every
split of the work Y over the stages; it binds where the micro-batches are few, and it stays below
every group's pipeline bound (so the frontier may still look at groups in its order)."""

from __future__ import annotations

import random

import pytest

from simengine.search import make_space
from simengine.search import prune
from simengine.search.prune import bound_group, work_floor

from test_search import MOE_CHOICES, SMALL_GPU, TINY, TINY_MOE, _groups


def _fill(y: list[float], m: int) -> float:
    """max_r (Σ_{s<r} y_s + m·y_r): the terms of ``bound.pipeline_bound`` the floor relaxes."""
    before, out = 0.0, 0.0
    for v in y:
        out = max(out, before + m * v)
        before += v
    return out


@pytest.mark.parametrize("pp,m", [(1, 1), (1, 8), (2, 1), (4, 3), (8, 8), (16, 8), (16, 128), (64, 4)])
def test_the_closed_form_is_below_every_split_and_reached_by_the_geometric_one(pp, m):
    rng = random.Random(pp * 1000 + m)
    floor = 1.0 / (1.0 - (1.0 - 1.0 / m) ** pp)   # Y = 1
    for _ in range(2000):
        y = [rng.random() ** rng.choice((1, 3, 8)) for _ in range(pp)]
        total = sum(y)
        assert _fill([v / total for v in y], m) >= floor * (1 - 1e-12)
    q = 1.0 - 1.0 / m
    geo = [q ** r for r in range(pp)]   # every term equal: the minimum
    total = sum(geo)
    assert _fill([v / total for v in geo], m) == pytest.approx(floor, rel=1e-12)


@pytest.mark.parametrize("model,choices", [
    (TINY, {"tp": (1, 2), "pp": (1, 2, 4), "cp": (1, 2), "schedule": ("1f1b", "gpipe", "zb-h1", "zb-h2", "interleaved")}),
    (TINY_MOE, {**MOE_CHOICES, "schedule": ("1f1b", "gpipe", "zb-h1", "zb-h2", "dualpipe")}),
])
def test_the_fill_floor_binds_and_stays_below_the_group_bound(model, choices, monkeypatch):
    space = make_space(model, SMALL_GPU, global_batch=16, seq_len=4096, gpus=[8], choices=choices)
    floors = {}
    for grp in _groups(space):
        lb, rej = bound_group(space, *grp)
        if rej is None:
            floor, _ = work_floor(space, *grp)
            assert floor <= lb * (1 + 1e-12)
            floors[grp[3]] = floor
    monkeypatch.setattr(prune, "_fills", lambda schedule, vpp: 0)   # the average share alone
    prune._SHARED.clear()
    raised = {0: 0, 1: 0, 2: 0}
    for grp in _groups(space):
        if grp[3] in floors:
            kind = prune._FILLS.get(grp[1]["schedule"], 0) if (grp[1]["vpp"] or 1) == 1 else 0
            raised[kind] += floors[grp[3]] > work_floor(space, *grp)[0] * (1 + 1e-9)
    assert raised[1] > 5 and raised[2] > 5 and raised[0] == 0   # both kinds bind somewhere; no other schedule moves
