"""The estimate's fast path (sim/chains.py: chains of compute-stream communication folded into one
program entry; sim/metrics.py: totals from the value table) gives the metrics of the unfolded
program, measured here by a plain reference: every task's own interval from the full list
scheduler, and interval unions per rank as sim/metrics.py defines exposed and hidden time —
on every named preset × schedule, the B200 validation rows and random inputs."""

from __future__ import annotations

import bisect
import random
from dataclasses import replace

import numpy as np
import pytest

from simengine import presets
from simengine.config import load_scenario
from simengine.cost.stage import build_plan
from simengine.errors import ConfigError
from simengine.pipeline import pipeline_input
from simengine.schedule import SCHEDULES
from simengine.sim import pipeline_metrics
from simengine.sim.chains import folded_for
from simengine.sim.compiled import compiled_for
from simengine.sim.layout import CATEGORY, K_EXP, K_GATE, K_HID, NSTREAM, S_COMM, S_COMPUTE, S_DP, S_PP
from simengine.sim.metrics import COMPUTE_CATS, _slot_names
from simengine.sim.values import build_values
from simengine.validation import b200_runs

from test_one_owner import _scenarios, _with_schedule
from test_sim import CASES, random_input

REL = 1e-9


def _union(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _covered(union: list[tuple[float, float]], s: float, e: float) -> float:
    i = max(bisect.bisect_right(union, (s, float("inf"))) - 1, 0)
    got = 0.0
    while i < len(union) and union[i][0] < e:
        got += max(0.0, min(e, union[i][1]) - max(s, union[i][0]))
        i += 1
    return got


def reference(inp):
    """(step, {(rank, category): [total, exposed, hidden]}, bubble per rank) of the unfolded
    program: every task timed on its own, the definitions of sim/metrics.py applied per rank."""
    comp = compiled_for(inp)
    g = comp.graph
    D = comp.getter(build_values(inp, comp).tolist())
    end = [0.0]
    for a, b, d in zip(comp.A, comp.B, D):
        end.append(max(end[a], end[b]) + d)
    step = max(end)
    names = _slot_names(comp)
    per: dict = {}
    streams = [[[] for _ in range(NSTREAM)] for _ in range(g.p)]
    for t, k in enumerate(g.kind):
        if k == K_GATE:
            continue
        r, local = divmod(g.stream[t], NSTREAM)
        cat = names[g.val[t]] if k in (K_HID, K_EXP) else CATEGORY[k]
        e = end[comp.pos[t]]
        d = D[comp.pos[t] - 1]
        streams[r][local].append((e - d, e, cat))
        per.setdefault((r, cat), [0.0, 0.0, 0.0])[0] += d
    bubble = []
    for r in range(g.p):
        cs = streams[r][S_COMPUTE]
        kernels = _union([(s, e) for s, e, c in cs if c in COMPUTE_CATS])
        busy = [(s, e) for s, e, _ in cs]
        for s, e, c in cs:
            if c not in COMPUTE_CATS:
                per[(r, c)][1] += e - s  # communication on the compute stream: exposed in full
        for local in (S_PP, S_COMM, S_DP):
            union = _union(busy)
            for s, e, c in streams[r][local]:
                per[(r, c)][1] += max(e - s - _covered(union, s, e), 0.0)
                per[(r, c)][2] += _covered(kernels, s, e)
            busy += [(s, e) for s, e, _ in streams[r][local]]
        work = sum(v[0] for (rr, c), v in per.items() if rr == r and c in COMPUTE_CATS)
        exposed = sum(v[1] for (rr, c), v in per.items() if rr == r and c not in COMPUTE_CATS)
        bubble.append(max(step - work - exposed, 0.0))
    return step, per, bubble


def assert_fast_equals_reference(inp) -> None:
    met = pipeline_metrics(inp)
    step, per, bubble = reference(inp)
    tol = REL * step
    assert met.step_time_s == pytest.approx(step, rel=REL)
    for (r, c), (total, exposed, hidden) in per.items():
        i = met.names.index(c)
        assert met.time_s[r, i] == pytest.approx(total, rel=REL, abs=tol), (r, c)
        assert met.exposed_s[r, i] == pytest.approx(exposed, rel=REL, abs=tol), (r, c)
        assert met.hidden_s[r, i] == pytest.approx(hidden, rel=REL, abs=tol), (r, c)
    assert np.allclose(met.bubble_s, bubble, rtol=REL, atol=tol)
    low = min(bubble)
    assert met.critical_rank == next(r for r, b in enumerate(bubble) if b <= low + tol)


def _inputs(cfg: dict):
    sc = load_scenario(cfg)
    return pipeline_input(sc, build_plan(sc))


@pytest.mark.parametrize("name", list(presets.named_scenarios()))
@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
def test_fast_path_equals_reference_on_every_preset_and_schedule(name, schedule):
    cfg = _with_schedule(_scenarios()[name], schedule)
    try:
        inp = _inputs(cfg)
    except ConfigError as e:
        pytest.skip(f"{name} with {schedule}: {e}")
    assert_fast_equals_reference(inp)


def test_fast_path_equals_reference_on_validation_rows(validation_dir):
    runs = b200_runs((validation_dir / "b200_megatron_runs.csv").read_text(),
                     presets.load_preset("systems", "b200-sxm-180gb"))
    assert len(runs) == 20
    for run in runs:
        assert_fast_equals_reference(_inputs(run.config))


@pytest.mark.parametrize("name,p,m,v", CASES)
def test_fast_path_equals_reference_on_random_inputs(name, p, m, v):
    rng = random.Random(31 * p + m + 7 * v)
    for _ in range(4):
        assert_fast_equals_reference(random_input(rng, name, p, m, v))


def test_folding_removes_chained_sends_and_keeps_every_task():
    cfg = presets.size_scenario("large")  # interleaved, blocking p2p: a send after every F and B
    cfg["strategy"]["overlap_p2p_comm"] = False
    comp = compiled_for(_inputs(cfg))
    prog = folded_for(comp)
    assert len(prog.A) < 0.6 * len(comp.A)
    assert len(prog.slots) == len(comp.A)  # every entry's value slot is summed exactly once
    assert sorted(prog.slots.tolist()) == sorted(comp.V)


def test_hidden_time_counts_only_the_kernel_of_a_folded_chain():
    """A collective hidden beside F that outlasts F runs on into the exposed part and the send
    folded after F: that stretch is covered by the compute stream but not by a kernel."""
    from simengine.sim import ChunkCost, CommTask, PipelineInput, StageCost

    ch = ChunkCost(0.5, 1.0, forward_comm=(CommTask("tp_comm", 0.8, window_s=2.0), CommTask("cp_comm", 0.3)))
    inp = PipelineInput(tuple(StageCost(chunks=(ch,), p2p_s=0.1) for _ in range(3)), 4, "1f1b")
    assert len(folded_for(compiled_for(inp)).A) < len(compiled_for(inp).A)
    met = pipeline_metrics(inp)
    tp = met.names.index("tp_comm")
    assert met.hidden_s[0, tp] == pytest.approx(4 * 0.5)  # the F kernels only, not the 0.3 s after them
    assert_fast_equals_reference(inp)


@pytest.fixture
def always_reduce(monkeypatch):
    """Every program with DP piece runs reduced, however few entries that removes (closed.py
    ``MIN_REMOVED``), so the closed forms themselves are checked; structures are compiled afresh
    before and after (a folded program keeps its reduction)."""
    from simengine.sim import closed
    from simengine.sim.compiled import clear_cache

    clear_cache()
    monkeypatch.setattr(closed, "MIN_REMOVED", 0.0)
    yield
    clear_cache()


@pytest.mark.parametrize("schedule,vpp", [("1f1b", 1), ("interleaved", 2), ("interleaved", 4)])
@pytest.mark.parametrize("gather_s", [0.01, 0.3])  # gathers hidden behind the pieces, or the pieces waiting on them
def test_dp_piece_runs_in_closed_form_equal_the_list_scheduler(schedule, vpp, gather_s, always_reduce):
    """sim/closed.py replaces each run of DP bucket pieces by a few entries; the ends it writes
    back give the same metrics as the per-task reference, whichever side of each max binds."""
    from simengine.sim import ChunkCost, PipelineInput, StageCost
    from simengine.sim.closed import reduced_for

    rng = random.Random(int(gather_s * 100) + vpp)
    stages = tuple(StageCost(
        chunks=tuple(ChunkCost(rng.uniform(0.5, 1.0), rng.uniform(0.8, 1.6), rng.uniform(0.0, 0.5),
                               recompute_s=rng.uniform(0.0, 0.3)) for _ in range(vpp)),
        p2p_s=0.05, dp_grad_buckets_s=tuple(rng.uniform(0.5, 1.5) * gather_s for _ in range(16)),
        dp_param_buckets_s=tuple(rng.uniform(0.5, 1.5) * gather_s for _ in range(16)), optimizer_s=0.2)
        for _ in range(4))
    inp = PipelineInput(stages, 8, schedule, vpp, overlap_grad_reduce=True, overlap_param_gather=True,
                        overlap_slowdown=1.1)
    comp = compiled_for(inp)
    prog = folded_for(comp)
    red = reduced_for(comp, prog)
    assert red is not None and red.n < 0.8 * len(prog.A)
    assert_fast_equals_reference(inp)


def test_benchmark_layouts_reduce_their_dp_pieces(always_reduce):
    """The README's 405B benchmark layouts (25 + 25 DP buckets on the first rank, the only one
    Megatron buckets, cost/dp.py ``dp_work``): the closed forms remove ~75 entries there and
    give the per-task reference's metrics."""
    from simengine.sim.closed import reduced_for

    for schedule, vpp in (("1f1b", 1), ("interleaved", 4)):
        cfg = presets.size_scenario("large")
        cfg["strategy"].update(schedule=schedule, vpp=vpp)
        inp = _inputs(cfg)
        comp = compiled_for(inp)
        prog = folded_for(comp)
        red = reduced_for(comp, prog)
        assert red is not None and len(prog.A) - red.n >= 70  # ~75 entries fewer on the first rank
        assert_fast_equals_reference(inp)


def test_a_program_is_reduced_only_where_that_removes_enough():
    """A reduction that removes less than ``MIN_REMOVED`` of the entries is not built (its loop
    saving is below its numpy overhead, and it costs up to ~0.2 s at pp 64): the 405B 'large'
    preset (16 micro-batches, a third of its entries in DP piece runs) runs its folded program
    as it is, with the reference's metrics; its 1F1B at pp 2 and 4 micro-batches has them as
    most of its entries (the first rank's 25 + 25 buckets, cost/dp.py ``dp_work``), and is reduced."""
    from simengine.sim import closed
    from simengine.sim.closed import reduce_program, reduced_for
    from simengine.sim.compiled import clear_cache

    clear_cache()
    cfg = presets.size_scenario("large")
    inp = _inputs(cfg)
    comp = compiled_for(inp)
    prog = folded_for(comp)
    assert reduced_for(comp, prog) is None
    closed.MIN_REMOVED, keep = 0.0, closed.MIN_REMOVED
    try:
        red = reduce_program(comp, prog)
    finally:
        closed.MIN_REMOVED = keep
    assert red is not None and (len(prog.A) - red.n) < keep * len(prog.A)
    assert_fast_equals_reference(inp)
    cfg["strategy"].update(schedule="1f1b", vpp=1, pp=2)
    short = replace(_inputs(cfg), num_microbatches=4)
    comp = compiled_for(short)
    prog = folded_for(comp)
    red = reduced_for(comp, prog)
    assert red is not None and (len(prog.A) - red.n) >= keep * len(prog.A)
    clear_cache()


def test_backward_folds_into_its_recompute_and_keeps_the_kernel_time():
    """B's only input is its recompute R (the gradient wait sits on R), so the two kernels run
    back to back as one entry; a DP bucket beside them is hidden by both (sim/metrics.py reads
    the entry's leading kernels, ``Folded.kernel_run``)."""
    from simengine.sim import ChunkCost, PipelineInput, StageCost

    ch = ChunkCost(0.5, 1.0, recompute_s=0.25)
    st = StageCost(chunks=(ch,), p2p_s=0.1, dp_grad_buckets_s=(3.0,))
    inp = PipelineInput((st, st, st), 4, "1f1b")  # non-overlapped buckets after the last backward
    plain = PipelineInput((StageCost(chunks=(ChunkCost(0.5, 1.0),), p2p_s=0.1, dp_grad_buckets_s=(3.0,)),) * 3, 4, "1f1b")
    prog, prog_plain = folded_for(compiled_for(inp)), folded_for(compiled_for(plain))
    assert len(prog.A) == len(prog_plain.A)  # every R+B pair is one entry
    assert int((prog.kernel_run >= 2).sum()) == 12  # each R heads its B: 3 ranks x 4 micro-batches
    assert_fast_equals_reference(inp)
    ogr = PipelineInput((st, st, st), 4, "1f1b", overlap_grad_reduce=True, overlap_slowdown=1.2)
    assert_fast_equals_reference(ogr)


def test_gate_after_a_recompute_folds_and_the_hidden_collective_starts_at_its_end():
    """R, then the gate opening B's hidden collective, then B (graph.py backward): the gate
    joins R's entry, and the collective beside B still starts when R ends."""
    from simengine.sim import ChunkCost, CommTask, PipelineInput, StageCost
    from simengine.sim.layout import K_GATE

    ch = ChunkCost(0.5, 1.0, recompute_s=0.25, backward_comm=(CommTask("tp_comm", 0.6, window_s=1.0),))
    inp = PipelineInput(tuple(StageCost(chunks=(ch,), p2p_s=0.1) for _ in range(3)), 4, "1f1b", overlap_slowdown=1.1)
    comp = compiled_for(inp)
    prog = folded_for(comp)
    gates = [t for t, k in enumerate(comp.graph.kind) if k == K_GATE]
    assert gates and all(prog.folded[t] for t in gates)
    assert_fast_equals_reference(inp)


def test_grouped_piece_durations_follow_the_overlap_rule_piece_by_piece():
    """sim/overlap.py ``piece_durations`` over ``piece_groups``: each piece is its chunk's base,
    slowed by ``(slowdown − 1)·min(base, bucket / slowdown)`` when a bucket runs beside it."""
    from simengine.sim.overlap import piece_durations, piece_groups

    rng = random.Random(5)
    for _ in range(200):
        infos: list = []
        for c in range(rng.randint(1, 4)):
            n = rng.randint(1, 6)
            infos += [(c, n, rng.choice([-1, rng.randrange(8)])) for _ in range(n)]
            if rng.random() < 0.3:
                infos.append(None)
        buckets = tuple(rng.choice([0.0, rng.random()]) for _ in range(8))
        bases = {c: rng.choice([0.0, rng.random()]) for c in range(4)}
        slow = rng.choice([1.0, 1.05, 1.7])
        got = piece_durations(piece_groups(infos), buckets, lambda info, bases=bases: bases[info[0]], slow)
        want = []
        for info in infos:
            if info is None:
                want.append(0.0)
                continue
            base, j = bases[info[0]], info[-1]
            b = buckets[j] if j >= 0 else 0.0
            want.append(base + (slow - 1.0) * min(base, b / slow) if b > 0 and base > 0 else base)
        assert got == want
