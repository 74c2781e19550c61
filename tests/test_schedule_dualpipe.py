"""DualPipe, the bidirectional schedule (DeepSeek-V3 report §3.2.1, Table 2; deepseek-ai/DualPipe
dualpipe.py): two chains in one simulation, F&B pairs, and Table 2's bubble, parameters and
activations."""

from __future__ import annotations

import pytest
from scenarios import make
from test_a2a_overlap import _busy

from simengine.cost.stage import build_plan
from simengine.estimate import estimate
from simengine.schedule import count_max_inflight, get_schedule
from simengine.sim import ChunkCost, CommTask, PipelineInput, StageCost, simulate
from simengine.sim.overlap import paired
from simengine.timeline import simulate_scenario

S = get_schedule("dualpipe")


def _inp(p, m, ch, slow=1.0):
    return PipelineInput(tuple(StageCost(chunks=(ch, ch)) for _ in range(p)), m, "dualpipe", 1, overlap_slowdown=slow)


@pytest.mark.parametrize("p", [2, 4, 6, 8])
@pytest.mark.parametrize("m_dir", [0, 1, 4])
@pytest.mark.parametrize("f,w", [(1.0, 0.5), (0.7, 0.7)])
def test_bubble_and_activations_match_table_2(p, m_dir, f, w):
    """Table 2, DualPipe on PP ranks: bubble (PP/2 − 1)(F&B + B − 3W), activations PP + 1 stages.
    F, B (full backward), W and F&B are the engine's own chunk costs (B − W = F, as for dualpipev)."""
    m = p + m_dir  # micro-batches per direction (num_chunks / 2 >= num_ranks)
    ch = ChunkCost(f, f, w, activation_bytes=1e9)
    tl = simulate(_inp(p, m, ch))
    F, Bi, W = ch.forward_s, ch.backward_input_s, ch.backward_weight_s
    B = Bi + W
    _, fe, fx, fb_ = paired(ch.forward_comm, B, 1.0, "ep_comm")
    _, be, bx, bf = paired(ch.backward_comm, F, 1.0, "ep_comm")
    FB = F + B + fx + bx + fb_ + bf + sum(fe) + sum(be)
    bubble = max(tl.step_time_s - _busy(o, pr, F, B, Bi, W, FB) for o, pr in zip(S.orders(p, m, 1), S.pairs(p, m, 1)))
    assert bubble == pytest.approx((p / 2 - 1) * (FB + B - 3 * W), rel=1e-12, abs=1e-12)
    for r in range(p):
        assert tl.peak_memory_bytes[r] == pytest.approx((p + 1) * 1e9)
        assert S.max_inflight(r, p, m, 1) == count_max_inflight(S.orders(p, m, 1)[r]) == p + 1


@pytest.mark.parametrize("p,m", [(2, 2), (4, 6), (8, 9)])
def test_two_directions_are_independent_chains(p, m):
    """Direction 0 enters at rank 0 and its loss is on rank p-1; direction 1 the reverse."""
    tl = simulate(_inp(p, m, ChunkCost(1.0, 1.0, 0.5)))
    first = {}
    for sp in tl.spans:
        if sp.kind == "F":
            first.setdefault((sp.chunk, sp.mb), {})[sp.rank] = sp.start_s
    for mb in range(m):
        d0 = [first[(0, mb)][r] for r in range(p)]
        d1 = [first[(1, mb)][r] for r in reversed(range(p))]
        assert d0 == sorted(d0) and d1 == sorted(d1)
    assert S.stage_of(0, 0, p, 1) == 0 and S.stage_of(p - 1, 1, p, 1) == p  # each chain's entry


def test_pairs_hide_the_a2a():
    p, m = 4, 8
    ch = ChunkCost(1.0, 1.0, 0.5, forward_comm=(CommTask("ep_comm", 0.1, 0, 1, 4),),
                   backward_comm=(CommTask("ep_comm", 0.2, 0, 1, 2),))
    paired_t = simulate(_inp(p, m, ch, 1.1)).step_time_s
    alone_t = simulate(_inp(p, m, ch, 1.1), orders=S.orders(p, m, 1)).step_time_s  # same order, no pairs
    assert paired_t < alone_t


def test_parameters_twice_and_estimate_equals_timeline():
    base = {"pp": 4, "seq_len": 2048, "micro_batch_size": 1, "global_batch_size": 16}
    one = make("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 4}, strategy={**base, "schedule": "1f1b"})
    two = make("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 4}, strategy={**base, "schedule": "dualpipe"})
    w1 = [m.weights_gib for m in estimate(one).memory_by_stage]
    w2 = [m.weights_gib for m in estimate(two).memory_by_stage]
    # rank r holds stages r and p-1-r: 2x the parameters of one stage (Table 2 "Parameter Per Device 2x")
    for r in range(4):
        assert w2[r] == pytest.approx(w1[r] + w1[3 - r])
    plan = build_plan(two)
    assert [[len(c.work.layers) for c in st.chunks] for st in plan.stages] == [[8, 8]] * 4
    rep = estimate(two)
    assert simulate_scenario(two).step_time_s == pytest.approx(rep.step_time_s, rel=1e-9)
    assert rep.num_microbatches == 16  # both directions together


def test_requirements():
    assert S.requirements(3, 8, 1, 32)[0][0] == "strategy.pp"
    assert any(f == "strategy.global_batch_size" for f, _ in S.requirements(4, 7, 1, 32))
    assert S.requirements(4, 8, 1, 32) == []
