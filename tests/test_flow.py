"""The data-flow bound (search/flow.py): below the engine on every schedule, exact where the
closed form is known, tighter than the path bound on DualPipe, and the search that uses it
finds the brute force's best while timing fewer candidates."""

from __future__ import annotations

import itertools

import pytest

from simengine import api
from simengine.config import load_scenario
from simengine.pipeline import sim_microbatches
from simengine.search import make_space, search
from simengine.search.bound import pipeline_bound
from simengine.search.flow import flow_bound, flow_of
from simengine.search.orders import order_terms
from simengine.search.prune import dp_tails, plan_a2a, plan_phases, priced
from test_search import PAIR_MOE, SYSTEM, TINY, brute_force

WIDE = {**TINY, "num_layers": 16, "hidden_size": 4096, "ffn_hidden_size": 14336, "num_attention_heads": 32, "num_kv_heads": 8}


def _bounds(schedule: str, pp: int, vpp: int, p2p: bool, ogr: bool, rc: str, gbs: int = 64, model=WIDE, extra=None,
            dp_stream: bool = True):
    strat = {"tp": 2, "pp": pp, "vpp": vpp, "cp": 1, "schedule": schedule, "micro_batch_size": 1, "zero_stage": 1,
             "recompute": rc, "global_batch_size": gbs, "seq_len": 2048, "overlap_p2p_comm": p2p,
             "overlap_grad_reduce": ogr, "overlap_param_gather": False, "tp_comm_overlap": False, **(extra or {})}
    sc = load_scenario({"model": model, "system": dict(SYSTEM, num_gpus=64), "strategy": strat})
    plan, _ = priced(sc)
    pipe, _, off, link = plan_phases(plan, sc)
    m, inline = sim_microbatches(sc), not sc.strategy.p2p_overlapped
    tails, grads = dp_tails(lambda: sc, plan, strat)
    a2a = plan_a2a(plan, sc)
    path = pipeline_bound(pipe, off, m, tails, link, inline, order=order_terms(schedule, pp, m, vpp), grads=grads, a2a=a2a)
    flow = flow_bound(schedule, pp, m, vpp, inline, off, link, tails, None if a2a is None else a2a.stages,
                      grads if dp_stream else None)
    return path, flow, api.estimate(sc).step_time_s


@pytest.mark.parametrize("schedule,pp,vpp", [("dualpipe", 4, 1), ("dualpipev", 4, 1), ("zb-h1", 4, 1), ("zb-h2", 4, 1),
                                             ("interleaved", 4, 2), ("1f1b", 4, 1)])
def test_flow_bound_stays_below_the_engine(schedule, pp, vpp):
    """Every duration a lower bound, every edge one the engine has: never above the estimate,
    with inline or overlapped p2p, DP overlap (its buckets left to the engine) and recompute."""
    for p2p, ogr, rc in itertools.product((False, True), (False, True), ("none", "full")):
        _, flow, step = _bounds(schedule, pp, vpp, p2p, ogr, rc)
        assert 0 < flow <= step * (1 + 1e-12), (p2p, ogr, rc, flow / step)


def test_flow_bound_is_tighter_than_the_path_bound_on_dualpipe():
    """DualPipe's cool-down waits (a middle rank's last backwards wait for gradients that come
    back through busy ranks) are in the data flow, not in any one path term (here 0.90-0.95 of the step -> 0.975-0.99)."""
    for pp, p2p in itertools.product((4, 8), (False, True)):
        path, flow, step = _bounds("dualpipe", pp, 1, p2p, False, "none")
        assert path * 1.02 < flow <= step * (1 + 1e-12), (pp, p2p, path / step, flow / step)
        assert flow > 0.97 * step


@pytest.mark.parametrize("schedule", ["dualpipe", "dualpipev", "zb-h1", "zb-h2"])
def test_flow_bound_holds_the_gradient_buckets_on_the_dp_stream(schedule):
    """With overlap_grad_reduce each chunk's last gradient action launches its group of buckets
    on the rank's one DP stream (graph.py _split, _grad_piece), and the optimizer waits for the
    last: a group starts no earlier than its action and the group before it. In the data flow that
    start holds the cool-down's waits (here, DualPipe at pp 4: 0.92 -> 0.98 of the step), and it
    stays below the engine and at or above the path bound, whose bucket term counts the rank's
    own work alone."""
    for pp, p2p in itertools.product((4, 8), (False, True)):
        path, flow, step = _bounds(schedule, pp, 1, p2p, True, "none")
        _, alone, _ = _bounds(schedule, pp, 1, p2p, True, "none", dp_stream=False)
        assert alone <= flow <= step * (1 + 1e-12), (pp, p2p, alone / step, flow / step)
        assert flow >= path * (1 - 1e-9), (pp, p2p, flow / step, path / step)
    if schedule == "dualpipe":
        _, flow, step = _bounds(schedule, 4, 1, False, True, "none")
        _, alone, _ = _bounds(schedule, 4, 1, False, True, "none", dp_stream=False)
        assert flow > 1.05 * alone and flow > 0.975 * step


def test_flow_bound_of_uniform_1f1b_is_its_closed_form():
    """1F1B on uniform stages, no p2p, no tails: (m + p - 1)(f + b) (Narayanan et al. 2021 §2.2.1)."""
    for p, m in ((2, 2), (4, 8), (8, 8), (8, 33)):
        f, b = 1.25, 2.5
        got = flow_bound("1f1b", p, m, 1, True, [(f, b, 0.0, 0.0)] * p, 0.0)
        assert got == pytest.approx((m + p - 1) * (f + b), rel=1e-12)
    # an inline send holds the sender's stream: the fill and the drain each cross p - 1 sends
    p, m, s = 4, 8, 0.1
    assert flow_bound("1f1b", p, m, 1, True, [(1.0, 2.0, 0.0, 0.0)] * p, s) >= (m + p - 1) * 3.0 + 2 * (p - 1) * s - 1e-12


@pytest.mark.parametrize("schedule", ["dualpipe", "dualpipev", "zb-h1"])
def test_flow_bound_holds_the_all_to_all_and_stays_below_the_engine(schedule):
    """A cross-node MoE: a lone F or B holds its all-to-all alone, a pair max(B, A_F) + max(F, A_B)
    (a2a.a2a_work); the data flow stays below the engine and at or above the path bound (here
    0.91-0.98 of the step -> 0.99-1.0), with recompute (never paired) too."""
    for p2p, rc in itertools.product((False, True), ("none", "full")):
        path, flow, step = _bounds(schedule, 4, 1, p2p, False, rc, gbs=256, model=PAIR_MOE, extra={"tp": 1, "ep": 16})
        assert flow <= step * (1 + 1e-12), (p2p, rc, flow / step)
        assert flow >= path * (1 - 1e-3), (p2p, rc, flow / step, path / step)


def test_flow_applies_where_the_estimate_runs_in_full():
    ph = [(1.0, 2.0, 0.5, 0.0)] * 8
    assert flow_of("dualpipe", 4, 8, 1, True, ph, 0.0, {}, False) is not None
    assert flow_of("zb-h1", 4, 8, 1, True, ph, 0.0, None, False) is not None
    assert flow_of("interleaved", 4, 8, 2, True, ph, 0.0, {}, False) is None   # two short runs (sim/periodic.py)
    assert flow_of("1f1b", 4, 8, 1, True, ph, 0.0, {}, False) is None
    assert flow_of("dualpipe", 4, 8, 1, True, ph, 0.0, {}, True) is None        # combined 1F1B: other orders


def test_search_with_the_flow_bound_times_fewer_and_finds_the_brute_force_best(monkeypatch):
    """On a DualPipe / zero-bubble space the flow step prunes candidates the path bound let
    through; the best is the brute force's, and every candidate is still timed or rejected."""
    from simengine.search import options

    choices = {"tp": (1, 2), "cp": (1,), "pp": (2, 4), "schedule": ("1f1b", "dualpipe", "dualpipev", "zb-h1", "zb-h2"),
               "zero_stage": (1,), "recompute": ("none",), "tp_comm_overlap": (False,)}
    space = make_space(TINY, SYSTEM, global_batch=64, seq_len=4096, gpus=[16], choices=choices)
    best = max(b[0] for b in brute_force(space))
    with_flow = search(space, top=2)
    assert with_flow.candidates[0].tokens_per_s == pytest.approx(best, rel=1e-12)
    assert with_flow.evaluated + sum(r.count for r in with_flow.rejections) == with_flow.space_size
    monkeypatch.setattr(options, "flow_of", lambda *a, **k: None)   # where the screen's candidates get their flows
    without = search(space, top=2)
    assert [c.step_time_s for c in without.candidates] == [c.step_time_s for c in with_flow.candidates]
    assert with_flow.evaluated < without.evaluated
