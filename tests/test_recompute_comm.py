"""A recompute's collectives run as a forward's do (sim/graph.py ``_Rank._recompute``): the part
beside the recomputed compute on the comm stream from its start, the rest on the compute stream
after the backward's kernels, each counted under its own kind — never as recompute time."""

from __future__ import annotations

import pytest

from simengine import api, presets
from simengine.config import load_scenario
from simengine.cost.stage import build_plan
from simengine.pipeline import pipeline_input
from simengine.sim import ChunkCost, CommTask, PipelineInput, StageCost, pipeline_metrics, simulate
from simengine.sim.overlap import by_kind, kinds


def _one(rc: tuple[CommTask, ...], slowdown: float = 1.0, m: int = 1) -> PipelineInput:
    ch = ChunkCost(1.0, 2.0, recompute_s=1.0, recompute_comm=rc)
    return PipelineInput((StageCost(chunks=(ch,)),), m, "1f1b", overlap_slowdown=slowdown)


def test_hidden_part_runs_on_the_comm_stream_beside_the_recompute_and_the_rest_after_it():
    """The exposed part runs after the backward's kernels (sim/graph.py ``_recompute``: the two
    kernels stay one program entry); the step is the same sum wherever it sits."""
    tl = simulate(_one((CommTask("dp_comm", 0.6, window_s=1.0), CommTask("tp_comm", 0.3))))
    spans = {(s.stream, s.kind): s for s in tl.spans}
    r, hid, exp, b = spans[("compute", "R")], spans[("comm", "dp_comm")], spans[("compute", "tp_comm")], spans[("compute", "B")]
    assert (hid.start_s, hid.end_s) == pytest.approx((r.start_s, r.start_s + 0.6))
    assert b.start_s == pytest.approx(r.end_s)
    assert (exp.start_s, exp.end_s) == pytest.approx((b.end_s, b.end_s + 0.3))
    assert tl.step_time_s == pytest.approx(1.0 + 1.0 + 0.3 + 2.0)
    met = tl.metrics
    assert met.compute(0)["recompute"] == pytest.approx(1.0)  # the collectives are not recompute time
    assert met.comm(0, "hidden")["dp_comm"] == pytest.approx(0.6)
    assert met.comm(0, "exposed") == pytest.approx({"dp_comm": 0.0, "tp_comm": 0.3})
    assert pipeline_metrics(_one((CommTask("dp_comm", 0.6, window_s=1.0), CommTask("tp_comm", 0.3)))).comm(0, "hidden")[
        "dp_comm"] == pytest.approx(0.6)


def test_contention_slows_the_recompute_by_the_overlap_rule():
    """sim/overlap.py ``resolve``: a collective longer than its slowed window hides g·slowdown,
    exposes the rest (after the backward's kernels) and slows the recompute by (slowdown − 1)·g."""
    s = 1.25
    tl = simulate(_one((CommTask("dp_comm", 2.0, window_s=1.0),), slowdown=s))
    met = tl.metrics
    assert met.compute(0)["recompute"] == pytest.approx(1.0 + (s - 1.0) * 1.0)
    assert met.comm(0, "hidden")["dp_comm"] == pytest.approx(1.0 * s)
    assert met.comm(0, "exposed")["dp_comm"] == pytest.approx(2.0 - s)
    assert tl.step_time_s == pytest.approx(1.0 + s + (2.0 - s) + 2.0)


def test_recompute_collectives_queue_on_the_comm_stream_and_the_next_compute_waits():
    """Two kinds each hiding 0.8 s beside 1 s of recompute queue on the one comm stream (1.6 s),
    running on under the backward; the next compute (GPipe: the next micro-batch's recompute)
    waits for them only if the backward is shorter. Here it is 0.2 s, so it starts when the
    second ends."""
    ch = ChunkCost(1.0, 0.2, recompute_s=1.0,
                   recompute_comm=(CommTask("dp_comm", 0.8, window_s=1.0), CommTask("tp_comm", 0.8, window_s=1.0)))
    tl = simulate(PipelineInput((StageCost(chunks=(ch,)),), 2, "gpipe"))
    spans = sorted(tl.spans, key=lambda s: s.start_s)
    r = next(s for s in spans if s.kind == "R")
    b = next(s for s in spans if s.kind == "B" and s.mb == r.mb)
    tp = next(s for s in spans if s.kind == "tp_comm" and s.stream == "comm" and s.mb == r.mb)
    assert b.start_s == pytest.approx(r.end_s)
    assert tp.end_s == pytest.approx(r.start_s + 1.6)
    later = [s for s in spans if s.stream == "compute" and s.kind in ("R", "B") and s.start_s > b.start_s]
    assert later and later[0].start_s == pytest.approx(tp.end_s)
    # per micro-batch: 0.2 s of the tp part under the recompute's end, 0.2 s under the backward
    assert tl.metrics.comm(0, "hidden")["tp_comm"] == pytest.approx(2 * (0.2 + 0.2))


@pytest.mark.parametrize("window", [0.0, 0.5, 1.0])
def test_an_overlap_of_the_recompute_collectives_never_makes_a_step_slower(window):
    alone = pipeline_metrics(_one((CommTask("dp_comm", 0.7),), slowdown=1.3, m=4)).step_time_s
    beside = pipeline_metrics(_one((CommTask("dp_comm", 0.7, window_s=window),), slowdown=1.3, m=4)).step_time_s
    assert beside <= alone * (1 + 1e-12)


def _scenario(**strategy):
    cfg = presets.size_scenario("medium")
    cfg["strategy"].update(strategy)
    return load_scenario(cfg)


def test_full_recompute_tp_collectives_are_tp_comm_in_the_breakdown():
    """Full recompute re-runs the forward's TP collectives (Korthikanti et al. 2022 §4): on the
    critical rank the breakdown's recompute is the recompute's kernels alone, and its exposed TP
    collectives are in tp_comm (they used to be counted as recompute)."""
    sc = _scenario(recompute="full", tp_comm_overlap=False)
    rep = api.estimate(sc)
    inp = pipeline_input(sc, build_plan(sc))
    slow = float(inp.overlap_slowdown)
    chunks = inp.stages[rep.critical_rank].chunks
    m = sc.num_microbatches
    rec = [by_kind(ch.recompute_comm, slow) for ch in chunks]
    assert any(sum(e) > 0 for _, e, _ in rec)
    assert rep.breakdown_s["recompute"] == pytest.approx(m * sum(ch.recompute_s + x for ch, (_, _, x) in zip(chunks, rec)))
    fwd_bwd = [by_kind(ch.forward_comm, slow)[1] + by_kind(ch.backward_comm, slow)[1] for ch in chunks]
    assert rep.breakdown_s["tp_comm"] >= m * sum(sum(e) for _, e, _ in rec) + m * sum(sum(x) for x in fwd_bwd) * (1 - 1e-9) - 1e-12


def test_fsdp_collectives_beside_a_recompute_are_reported_hidden():
    """FSDP2 with full recompute: the gathers and reduce-scatters that hide beside the recompute
    (cost/zero.py ``zero_per_microbatch``) are in the estimate's hidden communication."""
    on = _scenario(recompute="full", zero_stage=3, fsdp_pattern="fsdp2", pp=1, vpp=1, schedule="1f1b")
    rep = api.estimate(on)
    inp = pipeline_input(on, build_plan(on))
    slow = float(inp.overlap_slowdown)
    ch = inp.stages[0].chunks[0]
    rh = dict(zip((k for k, _ in kinds(ch.recompute_comm)), by_kind(ch.recompute_comm, slow)[0]))
    assert rh.get("dp_comm", 0.0) > 0
    fh = dict(zip((k for k, _ in kinds(ch.forward_comm)), by_kind(ch.forward_comm, slow)[0]))
    bh = dict(zip((k for k, _ in kinds(ch.backward_comm)), by_kind(ch.backward_comm, slow)[0]))
    m = on.num_microbatches
    want = m * (rh["dp_comm"] + fh.get("dp_comm", 0.0) + bh.get("dp_comm", 0.0))
    assert rep.hidden_comm_s["dp_comm"] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("schedule,vpp", [("1f1b", 1), ("interleaved", 2)])
def test_long_pipelines_with_recompute_collectives_take_the_periodic_path(schedule, vpp):
    """The recompute's gate belongs to its backward's action (sim/periodic.py ``_GATE_PHASE``), so
    the steady state stays certifiable and equals the whole program."""
    from simengine.sim.engine import _ends, _prepare, full_metrics
    from simengine.sim.metrics import step_metrics
    from simengine.sim.periodic import periodic_metrics

    rc = (CommTask("dp_comm", 0.05, window_s=0.2), CommTask("tp_comm", 0.02))
    mid = ChunkCost(0.3, 0.6, 0.0, recompute_s=0.2, recompute_comm=rc, forward_comm=(CommTask("tp_comm", 0.02),))
    last = ChunkCost(0.4, 0.7, 0.0, recompute_s=0.2, recompute_comm=rc)
    stages = tuple(StageCost(chunks=(mid,) * (vpp - 1) + (last if r == 3 else mid,), p2p_s=0.01) for r in range(4))
    inp = PipelineInput(stages, 96, schedule, vpp, overlap_slowdown=1.2)
    fast = periodic_metrics(inp, _prepare, _ends, step_metrics)
    assert fast is not None
    full = full_metrics(inp)
    assert fast.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    assert fast.hidden_s == pytest.approx(full.hidden_s, rel=1e-9, abs=1e-9 * full.step_time_s)
    assert fast.exposed_s == pytest.approx(full.exposed_s, rel=1e-9, abs=1e-9 * full.step_time_s)


def _paired(window: float, rc_s: float, schedule: str, p: int, vpp: int, fb: bool) -> PipelineInput:
    from simengine.schedule import get_schedule

    ch = ChunkCost(2.0, 0.5, recompute_s=0.5, forward_comm=(CommTask("ep_comm", 0.5),),
                   backward_comm=(CommTask("ep_comm", 2.5),),
                   recompute_comm=(CommTask("tp_comm", rc_s, window_s=window),) if rc_s else ())
    k = get_schedule(schedule).chunks_per_rank(vpp)
    return PipelineInput(tuple(StageCost(chunks=(ch,) * k) for _ in range(p)), 8, schedule, vpp,
                         overlap_slowdown=1.5, fb_overlap=fb)


@pytest.mark.parametrize("schedule,p,vpp,fb", [("1f1b", 1, 1, True), ("dualpipev", 2, 1, False),
                                               ("interleaved", 2, 2, True)])
def test_in_an_f_and_b_pair_the_recompute_collectives_queue_behind_the_pairs_all_to_all(schedule, p, vpp, fb):
    """The B's all-to-all hides from the pair's start (graph.py ``backward``); the recompute's
    collectives, which wait for the recompute's start, queue behind it on the comm stream rather
    than ahead of it. Hiding them then never makes the step slower than leaving them exposed
    (ahead, they held the all-to-all back: 45.5 s against 36.4 s exposed on combined 1F1B)."""
    exposed = pipeline_metrics(_paired(0.0, 0.3, schedule, p, vpp, fb)).step_time_s
    hidden = pipeline_metrics(_paired(0.5, 0.3, schedule, p, vpp, fb)).step_time_s
    none = pipeline_metrics(_paired(0.0, 0.0, schedule, p, vpp, fb)).step_time_s
    assert none <= hidden <= exposed
    tl = simulate(_paired(0.5, 0.3, schedule, p, vpp, fb))
    assert tl.step_time_s == pytest.approx(hidden, rel=1e-12)


def test_the_gradient_send_waits_for_the_recompute_collectives():
    """A backward's gradient leaves after the action's hidden collectives, as a forward's output
    does, whether or not the backward has collectives of its own (a 1 µs one used to add 0.4 s)."""
    rc = (CommTask("dp_comm", 0.8, window_s=1.0), CommTask("tp_comm", 0.8, window_s=1.0))

    def step(bcomm):
        s0 = StageCost(chunks=(ChunkCost(1.0, 1.0),))
        s1 = StageCost(chunks=(ChunkCost(1.0, 0.2, recompute_s=1.0, recompute_comm=rc, backward_comm=bcomm),))
        return simulate(PipelineInput((s0, s1), 1, "1f1b", p2p_blocking=False)).step_time_s

    assert step(()) == pytest.approx(step((CommTask("tp_comm", 1e-6, window_s=0.1),)), abs=1e-5)
    assert step(()) == pytest.approx(1.0 + 1.0 + 1.6 + 1.0)  # F, F, R and its queued collectives, the first stage's B


@pytest.mark.parametrize("schedule,p,vpp,fb", [("1f1b", 1, 1, True), ("dualpipev", 2, 1, False), ("dualpipe", 2, 1, False),
                                               ("interleaved", 2, 2, True)])
def test_pairs_with_recompute_collectives_equal_the_per_task_reference(schedule, p, vpp, fb):
    """Random chunks whose recompute has hidden and exposed collectives, in F&B pairs: the folded
    program's metrics equal every task timed alone (tests/test_fast_path.py ``reference``)."""
    import random
    from dataclasses import replace

    from test_fast_path import assert_fast_equals_reference
    from test_sim import random_input

    rng = random.Random(f"pairs-{schedule}-{p}-{vpp}")
    for _ in range(4):
        inp = random_input(rng, schedule, p, 8, vpp)
        stages = tuple(replace(st, chunks=tuple(replace(
            ch, recompute_s=ch.recompute_s or 0.2,
            recompute_comm=(CommTask("tp_comm", rng.uniform(0, 0.3), window_s=rng.uniform(0, 0.4)),
                            CommTask("ep_comm", rng.uniform(0, 0.3)))) for ch in st.chunks)) for st in inp.stages)
        assert_fast_equals_reference(replace(inp, stages=stages, fb_overlap=fb))
