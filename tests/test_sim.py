"""Pipeline simulator: closed forms, causality, overlap, memory, fast path, trace."""

from __future__ import annotations

import json
import random
import re
from dataclasses import replace
from pathlib import Path

import pytest

from simengine.schedule import Action, get_schedule
from simengine.sim import (
    ChunkCost, CommTask, DeadlockError, PipelineInput, StageCost, pipeline_step_time, simulate,
    to_chrome_trace,
)

SCHEDS = {  # name → (p, m, vpp) cases small enough to run many times
    "gpipe": [(1, 3, 1), (3, 5, 1), (4, 8, 1)],
    "1f1b": [(1, 3, 1), (3, 5, 1), (4, 8, 1), (4, 2, 1)],
    "interleaved": [(2, 4, 2), (4, 8, 2), (3, 6, 3)],
    "zb-h1": [(1, 3, 1), (3, 5, 1), (4, 8, 1), (4, 2, 1)],
    "dualpipev": [(1, 2, 1), (2, 5, 1), (4, 8, 1), (3, 9, 1)],
}
CASES = [(n, p, m, v) for n, cs in SCHEDS.items() for p, m, v in cs]


def nch(name, vpp):
    return get_schedule(name).chunks_per_rank(vpp)


def uniform(name, p, m, vpp=1, f=1.0, b=2.0, w=0.0, **kw):
    k = nch(name, vpp)
    ch = ChunkCost(f / k, b / k, w / k)
    return PipelineInput(tuple(StageCost(chunks=(ch,) * k) for _ in range(p)), m, name, vpp, **kw)


def random_input(rng: random.Random, name, p, m, vpp, comm=True) -> PipelineInput:
    k = nch(name, vpp)

    def comms():
        if not comm or rng.random() < 0.4:
            return ()
        return tuple(CommTask(rng.choice(("tp", "cp", "ep")), rng.uniform(0, 0.3),
                              rng.choice((0.0, rng.uniform(0, 0.5))), rng.choice((0.0, 1.0, rng.random())))
                     for _ in range(rng.randint(1, 2)))

    stages = []
    for _ in range(p):
        chunks = tuple(ChunkCost(
            rng.uniform(0.2, 1.0), rng.uniform(0.2, 1.5), rng.uniform(0.0, 0.8),
            recompute_s=rng.choice((0.0, rng.uniform(0.05, 0.4))),
            forward_comm=comms(), backward_comm=comms(), recompute_comm=comms() if rng.random() < 0.3 else (),
            activation_bytes=rng.uniform(1e8, 1e9), peak_extra_bytes=rng.uniform(0, 1e8),
        ) for _ in range(k))
        stages.append(StageCost(
            chunks=chunks, p2p_s=rng.uniform(0, 0.1) if comm else 0.0, static_bytes=rng.uniform(1e9, 5e9),
            dp_grad_buckets_s=tuple(rng.uniform(0, 0.3) for _ in range(rng.randint(0, 3))) if comm else (),
            dp_param_buckets_s=tuple(rng.uniform(0, 0.2) for _ in range(rng.randint(0, 3))) if comm else (),
            optimizer_s=rng.uniform(0, 0.2)))
    return PipelineInput(tuple(stages), m, name, vpp,
                         overlap_grad_reduce=rng.random() < 0.5, overlap_param_gather=rng.random() < 0.5,
                         overlap_slowdown=rng.choice((1.0, 1.0 + rng.random())),
                         p2p_blocking=rng.random() < 0.5)


# ---------------------------------------------------------------- closed forms


@pytest.mark.parametrize("name", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p,m", [(1, 1), (2, 3), (4, 4), (4, 16), (8, 3), (6, 13)])
def test_gpipe_1f1b_makespan_and_bubble_exact(name, p, m):
    f, b = 1.5, 2.25
    tl = simulate(uniform(name, p, m, f=f, b=b))
    assert tl.step_time_s == (m + p - 1) * (f + b)
    for bub in tl.bubble_fraction:
        assert bub == pytest.approx((p - 1) / (m + p - 1), abs=1e-12)


@pytest.mark.parametrize("p,v,k", [(2, 2, 1), (4, 2, 2), (4, 4, 1), (4, 3, 3), (8, 2, 2), (3, 4, 2)])
def test_interleaved_divides_bubble_by_vpp(p, v, k):
    m, f, b = k * p, 1.0, 2.0
    tl = simulate(uniform("interleaved", p, m, v, f=f, b=b))  # each chunk costs f/v, b/v
    assert tl.step_time_s == pytest.approx((m + (p - 1) / v) * (f + b), rel=1e-12)


def test_zb_h1_beats_1f1b_at_equal_peak_inflight():
    for p, m in [(2, 4), (4, 8), (4, 16), (8, 8), (8, 24)]:
        zb = simulate(uniform("zb-h1", p, m, f=1.0, b=1.0, w=1.0))
        f1 = simulate(uniform("1f1b", p, m, f=1.0, b=1.0, w=1.0))
        s_zb, s_f1 = get_schedule("zb-h1"), get_schedule("1f1b")
        assert max(s_zb.max_inflight(r, p, m, 1) for r in range(p)) == max(
            s_f1.max_inflight(r, p, m, 1) for r in range(p))
        assert zb.step_time_s < f1.step_time_s
        # Qi et al. 2023 §3.1: ZB-H1 bubble (p-1)(F+B-W) vs 1F1B's (p-1)(F+B+W)
        assert zb.step_time_s == 3 * m + (p - 1) * (1 + 1 - 1)
        assert f1.step_time_s == 3 * m + (p - 1) * 3


@pytest.mark.parametrize("p,m", [(1, 2), (1, 5), (2, 4), (2, 7), (3, 6), (4, 8), (4, 11), (8, 16)])
def test_dualpipev_runs_and_is_valid(p, m):
    tl = simulate(uniform("dualpipev", p, m, f=1.0, b=1.0, w=1.0))
    work = 3.0 * m  # per rank: 2 chunks × (F + B + W)/2 each
    for r in range(p):
        assert tl.step_time_s >= work
        assert tl.compute_s[r] == pytest.approx(work)
    assert_causal(tl, "dualpipev", p, m, 1)
    assert tl.step_time_s <= 3.0 * m + 3.0 * (p - 1) + 1e-9  # bubble bounded by (p-1)(F+B+W)


# ---------------------------------------------------------------- causality


def assert_causal(tl, name, p, m, vpp):
    s = get_schedule(name)
    k = s.chunks_per_rank(vpp)
    by_stream: dict = {}
    for sp in tl.spans:
        assert sp.end_s >= sp.start_s >= 0
        by_stream.setdefault((sp.rank, sp.stream), []).append(sp)
    for spans in by_stream.values():
        spans.sort(key=lambda x: (x.start_s, x.end_s))
        for a, b in zip(spans, spans[1:]):
            assert a.end_s <= b.start_s + 1e-12, f"overlap on one stream: {a} {b}"
    unit: dict = {}
    for sp in tl.spans:
        if sp.kind in ("F", "B", "W", "R"):
            key = (sp.kind, s.stage_of(sp.rank, sp.chunk, p, vpp), sp.mb)
            lo, hi = unit.get(key, (sp.start_s, sp.end_s))
            unit[key] = (min(lo, sp.start_s), max(hi, sp.end_s))
    nst = p * k
    for st in range(nst):
        for mb in range(m):
            f, bw = unit[("F", st, mb)], unit[("B", st, mb)]
            assert f[1] <= bw[0], "F precedes its B"
            if ("W", st, mb) in unit:
                assert bw[1] <= unit[("W", st, mb)][0], "B precedes its W"
            if ("R", st, mb) in unit:
                assert unit[("R", st, mb)][1] == bw[0], "recompute runs right before B"
            if st + 1 < nst:
                assert f[1] <= unit[("F", st + 1, mb)][0]
                assert unit[("B", st + 1, mb)][1] <= bw[0]


@pytest.mark.parametrize("name,p,m,v", CASES)
def test_streams_never_overlap_and_dependencies_hold(name, p, m, v):
    rng = random.Random(hash((name, p, m, v)) & 0xFFFF)
    for _ in range(3):
        inp = random_input(rng, name, p, m, v)
        assert_causal(simulate(inp), name, p, m, v)


# ---------------------------------------------------------------- fast path and monotonicity


@pytest.mark.parametrize("name,p,v", [("1f1b", 3, 1), ("1f1b", 4, 1), ("interleaved", 2, 2), ("interleaved", 4, 2),
                                      ("interleaved", 3, 3)])
def test_fast_path_equals_full_simulation(name, p, v):
    """The step time of a long 1F1B / interleaved pipeline from two short runs and a certificate
    (sim/periodic.py, the path ``pipeline_step_time`` takes) equals the whole program ``simulate``
    runs, to 1e-9 of the step, on random non-uniform stages with communication; 72 micro-batches
    are long enough for the fast path to be taken, and it must be, or this compares nothing."""
    from simengine.sim.engine import _ends, _prepare
    from simengine.sim.metrics import step_metrics
    from simengine.sim.periodic import periodic_metrics

    rng = random.Random(7 + p * 31 + v)
    taken = 0
    for _ in range(6):
        inp = random_input(rng, name, p, 72, v)
        taken += periodic_metrics(inp, _prepare, _ends, step_metrics) is not None
        full = simulate(inp).step_time_s
        assert pipeline_step_time(inp) == pytest.approx(full, rel=1e-9, abs=0.0)
    assert taken >= 4, taken


def _add_comm(rng, inp: PipelineInput) -> PipelineInput:
    stages = []
    for st in inp.stages:
        chunks = tuple(replace(
            ch,
            forward_comm=ch.forward_comm + ((("tp", rng.uniform(0, 0.3)),) if rng.random() < 0.5 else ()),
            backward_comm=tuple(replace(t, seconds=t.seconds + rng.uniform(0, 0.2)) for t in ch.backward_comm),
        ) for ch in st.chunks)
        stages.append(replace(
            st, chunks=chunks, p2p_s=st.p2p_s + rng.uniform(0, 0.1),
            dp_grad_buckets_s=tuple(x + rng.uniform(0, 0.1) for x in st.dp_grad_buckets_s)
            + ((rng.uniform(0, 0.2),) if rng.random() < 0.5 else ()),
            dp_param_buckets_s=tuple(x + rng.uniform(0, 0.1) for x in st.dp_param_buckets_s)))
    return replace(inp, stages=tuple(stages))


@pytest.mark.parametrize("name,p,m,v", CASES)
def test_adding_comm_never_shortens_a_step(name, p, m, v):
    rng = random.Random(1000 + p * 7 + m)
    for _ in range(6):
        base = random_input(rng, name, p, m, v, comm=rng.random() < 0.5)
        more = _add_comm(rng, base)
        t0, t1 = pipeline_step_time(base), pipeline_step_time(more)
        assert t1 >= t0 * (1 - 1e-12), (t0, t1)


# ---------------------------------------------------------------- overlap


def _with(inp, **stage_kw):
    return replace(inp, stages=tuple(replace(st, **stage_kw) for st in inp.stages))


def test_dp_grad_overlap_hides_all_but_last_bucket():
    buckets = (0.1, 0.2, 0.15, 0.1)  # each shorter than a quarter of the final backward (0.5)
    base = uniform("1f1b", 4, 8, f=1.0, b=2.0)
    t_base = simulate(base).step_time_s
    plain = simulate(_with(base, dp_grad_buckets_s=buckets))
    over = simulate(replace(_with(base, dp_grad_buckets_s=buckets), overlap_grad_reduce=True))
    assert plain.step_time_s == pytest.approx(t_base + sum(buckets))
    assert over.step_time_s == pytest.approx(t_base + buckets[-1])  # the first layers' bucket
    assert over.exposed_comm_s[0]["dp_comm"] == pytest.approx(buckets[-1])
    assert over.hidden_comm_s[0]["dp_comm"] == pytest.approx(sum(buckets[:-1]))
    assert plain.exposed_comm_s[0]["dp_comm"] == pytest.approx(sum(buckets))


def test_dp_grad_overlap_fully_hidden_off_the_critical_rank():
    base = uniform("1f1b", 4, 8, f=1.0, b=2.0)
    buckets = (0.3, 0.3, 0.3)  # the last rank finishes its backward (p-1)·b early
    stages = base.stages[:-1] + (replace(base.stages[-1], dp_grad_buckets_s=buckets),)
    over = simulate(replace(base, stages=stages, overlap_grad_reduce=True))
    plain = simulate(replace(base, stages=stages))
    assert over.step_time_s == plain.step_time_s == simulate(base).step_time_s
    assert over.exposed_comm_s[3]["dp_comm"] == pytest.approx(0.3)  # rank-local: only the last bucket waits
    assert plain.exposed_comm_s[3]["dp_comm"] == pytest.approx(0.9)


def test_dp_grad_overlap_slowdown_applies_to_the_overlapped_stretch():
    base = _with(uniform("1f1b", 1, 2, f=1.0, b=2.0), dp_grad_buckets_s=(0.1, 0.1))
    over = simulate(replace(base, overlap_grad_reduce=True, overlap_slowdown=1.5))
    # the final backward splits in two pieces of 1.0; bucket 0 is reduced beside piece 1, which
    # slows for the bucket's stretch only (sim/overlap.py): +0.5 · 0.1/1.5; then the last bucket
    assert over.step_time_s == pytest.approx(1 + 2 + 1 + 1 + (1 + 0.5 * 0.1 / 1.5) + 0.1)
    assert over.step_time_s <= simulate(_with(base, dp_grad_buckets_s=(0.1, 0.1))).step_time_s


def test_param_gather_overlap_vs_end_of_step():
    buckets = (0.2, 0.1, 0.1)
    base = uniform("1f1b", 2, 4, f=1.5, b=3.0)
    t_base = simulate(base).step_time_s
    end = simulate(_with(base, dp_param_buckets_s=buckets))
    over = simulate(replace(_with(base, dp_param_buckets_s=buckets), overlap_param_gather=True))
    assert end.step_time_s == pytest.approx(t_base + sum(buckets))  # after the optimizer
    assert over.step_time_s == pytest.approx(t_base + buckets[0])  # only the first bucket waits
    assert over.exposed_comm_s[0]["dp_comm"] == pytest.approx(buckets[0])


def test_tp_comm_on_compute_stream_vs_overlapped():
    p, m = 2, 4
    ch = ChunkCost(1.0, 2.0, forward_comm=(("tp", 0.25),), backward_comm=(("tp", 0.5),))
    inp = PipelineInput(tuple(StageCost(chunks=(ch,)) for _ in range(p)), m, "1f1b")
    seq = simulate(inp)
    assert seq.step_time_s == pytest.approx((m + p - 1) * (1 + 2 + 0.25 + 0.5))
    assert seq.exposed_comm_s[0]["tp"] == pytest.approx(m * 0.75)

    def beside(slow=1.0, fwd=0.25):  # each collective may run beside its phase's whole compute
        c = ChunkCost(1.0, 2.0, forward_comm=(CommTask("tp", fwd, 1.0),), backward_comm=(CommTask("tp", 0.5, 2.0),))
        return simulate(PipelineInput(tuple(StageCost(chunks=(c,)) for _ in range(p)), m, "1f1b", overlap_slowdown=slow))

    ov = beside()
    assert ov.step_time_s == pytest.approx((m + p - 1) * 3.0)  # fully hidden at slowdown 1
    assert ov.exposed_comm_s[0].get("tp", 0.0) == pytest.approx(0.0)
    assert ov.hidden_comm_s[0]["tp"] == pytest.approx(m * 0.75)
    assert {sp.stream for sp in ov.spans if sp.kind == "tp"} == {"comm"}
    slow = beside(1.2)  # contention only while the comm runs: (1.2 − 1) · t / 1.2
    assert slow.step_time_s == pytest.approx((m + p - 1) * (3.0 + 0.2 * 0.75 / 1.2))
    assert slow.step_time_s < seq.step_time_s
    lo = beside(fwd=1.5)  # 1.0 of it hides behind the forward, 0.5 is exposed
    assert lo.step_time_s == pytest.approx((m + p - 1) * 3.5)
    assert lo.exposed_comm_s[0]["tp"] == pytest.approx(m * 0.5)


def test_p2p_blocking_on_compute_nonblocking_on_pp_stream():
    inp = _with(uniform("1f1b", 4, 8), p2p_s=0.1)
    blk = simulate(inp)
    nb = simulate(replace(inp, p2p_blocking=False))
    assert {sp.stream for sp in blk.spans if sp.kind == "pp_comm"} == {"compute"}
    assert {sp.stream for sp in nb.spans if sp.kind == "pp_comm"} == {"pp"}
    assert nb.step_time_s <= blk.step_time_s
    # blocking: every hop on the critical path pays one send
    assert blk.step_time_s >= (8 + 3) * 3.0 + 3 * 0.1 * 2


# ---------------------------------------------------------------- memory


@pytest.mark.parametrize("name,p,m,v", CASES + [("interleaved", 4, 16, 4), ("dualpipev", 4, 16, 1)])
def test_peak_memory_matches_closed_form(name, p, m, v):
    s = get_schedule(name)
    k = s.chunks_per_rank(v)
    A, E, S = 3e8, 5e7, 2e9
    ch = ChunkCost(1.0 / k, 2.0 / k, 0.5 / k, recompute_s=0.1, activation_bytes=A, peak_extra_bytes=E)
    inp = PipelineInput(tuple(StageCost(chunks=(ch,) * k, static_bytes=S) for _ in range(p)), m, name, v)
    tl = simulate(inp)
    for r in range(p):
        want = S + s.max_inflight(r, p, m, v) * A + E
        assert tl.peak_memory_bytes[r] == pytest.approx(want, rel=1e-12)
        assert max(b for _, b in tl.memory[r]) == tl.peak_memory_bytes[r]
        assert tl.memory[r][0][0] == 0.0 and tl.memory[r][-1][1] == pytest.approx(S)


# ---------------------------------------------------------------- deadlock and validation


def test_cyclic_order_raises_deadlock_naming_tasks():
    inp = uniform("1f1b", 2, 2)
    orders = [
        [Action("F", 0, 0), Action("B", 0, 0), Action("F", 1, 0), Action("B", 1, 0)],
        [Action("F", 1, 0), Action("F", 0, 0), Action("B", 0, 0), Action("B", 1, 0)],
    ]
    for fn in (simulate, pipeline_step_time):
        with pytest.raises(DeadlockError) as ei:
            fn(inp, orders=orders)
        assert isinstance(ei.value, ValueError)
        assert (0, "compute", "B", 0, 0) in ei.value.blocked
        assert (1, "compute", "F", 1, 0) in ei.value.blocked
        assert "rank 1 compute: F mb=1 chunk=0" in str(ei.value)


def test_backward_before_own_forward_deadlocks():
    inp = uniform("1f1b", 1, 1)
    with pytest.raises(DeadlockError, match="B mb=0"):
        simulate(inp, orders=[[Action("B", 0, 0), Action("F", 0, 0)]])
    inp = uniform("zb-h1", 1, 1, w=1.0)
    with pytest.raises(DeadlockError, match="W mb=0"):
        simulate(inp, orders=[[Action("F", 0, 0), Action("W", 0, 0), Action("B", 0, 0)]])


def test_incomplete_order_is_a_value_error():
    inp = uniform("1f1b", 1, 2)
    with pytest.raises(ValueError, match="exactly once"):
        simulate(inp, orders=[[Action("F", 0, 0), Action("B", 0, 0)]])


def test_input_validation_names_fields():
    with pytest.raises(ValueError, match="forward_s"):
        ChunkCost(-1.0, 1.0)
    with pytest.raises(ValueError, match="overlap_slowdown"):
        uniform("1f1b", 2, 2, overlap_slowdown=0.5)
    with pytest.raises(ValueError, match="needs 2"):
        simulate(PipelineInput(uniform("1f1b", 2, 4).stages, 4, "interleaved", 2))


def test_hand_made_order_same_as_generated():
    inp = uniform("1f1b", 4, 8, f=1.0, b=2.0)
    orders = get_schedule("1f1b").orders(4, 8, 1)
    assert simulate(inp, orders=orders).step_time_s == simulate(inp).step_time_s


# ---------------------------------------------------------------- trace and hygiene


def test_chrome_trace_format():
    rng = random.Random(3)
    inp = random_input(rng, "interleaved", 2, 4, 2)
    tl = simulate(inp)
    tr = to_chrome_trace(tl, "demo")
    json.dumps(tr)
    ev = tr["traceEvents"]
    xs = [e for e in ev if e["ph"] == "X"]
    assert len(xs) == len(tl.spans)
    assert all(e["dur"] >= 0 and e["ts"] >= 0 and isinstance(e["pid"], int) for e in xs)
    names = {(e["name"], e["pid"]) for e in ev if e["ph"] == "M"}
    assert ("process_name", 0) in names and ("thread_name", 1) in names
    assert any(e["ph"] == "C" and "GiB" in e["args"] for e in ev)


def test_engine_is_pure():
    root = Path(__file__).resolve().parents[1] / "simengine"
    for sub in ("sim", "schedule"):
        for f in (root / sub).glob("*.py"):
            text = f.read_text()
            assert not re.search(r"\bprint\(|streamlit|os\.environ|getenv", text), f
