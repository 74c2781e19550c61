"""All-to-all overlap (Megatron-Core --moe-shared-expert-overlap, --overlap-moe-expert-parallel-comm)
and DualPipeV's overlapped F&B pairs (DeepSeek-V3 report §3.2.1, Table 2), in the one simulator."""

from __future__ import annotations

import pytest
from scenarios import make

from simengine.errors import ConfigError
from simengine.estimate import estimate
from simengine.pipeline import pipeline_input
from simengine.cost.stage import build_plan
from simengine.schedule import get_schedule
from simengine.sim import ChunkCost, CommTask, PipelineInput, StageCost, simulate
from simengine.sim.overlap import paired

# (model, system overrides, strategy): MoE presets × schedules the combined 1F1B supports
CASES = [
    ("deepseek-v2-lite", {"num_gpus": 16}, {"ep": 8, "pp": 1, "schedule": "1f1b", "global_batch_size": 32}),
    ("deepseek-v2-lite", {"num_gpus": 32}, {"ep": 8, "pp": 2, "vpp": 3, "schedule": "interleaved", "global_batch_size": 64}),
    ("qwen3-30b-a3b", {"num_gpus": 32}, {"ep": 8, "pp": 2, "vpp": 2, "schedule": "interleaved", "global_batch_size": 64}),
    ("mixtral-8x7b", {"num_gpus": 32}, {"ep": 8, "tp": 2, "pp": 2, "vpp": 2, "schedule": "interleaved",
                                        "global_batch_size": 32, "moe_dispatcher": "deepep"}),
]
SHARED = [c for c in CASES if c[0].startswith("deepseek")]


def _sc(model, system, strategy, **flags):
    return make(model, "h100-sxm5-80gb", system=system,
                strategy={"seq_len": 4096, "micro_batch_size": 1, **strategy, **flags})


def _ep_total_s(sc) -> float:
    """Total expert all-to-all seconds of one step on the busiest rank (hidden or not)."""
    inp = pipeline_input(sc, build_plan(sc))
    m = sc.num_microbatches
    out = 0.0
    for st in inp.stages:
        tot = sum(t.seconds * t.count for ch in st.chunks for t in ch.forward_comm + ch.backward_comm
                  if t.kind == "ep_comm")
        out = max(out, tot * m)
    return out


@pytest.mark.parametrize("flag,cases", [("moe_shared_expert_overlap", SHARED), ("overlap_moe_expert_parallel_comm", CASES)])
def test_a2a_overlap_never_slower_and_hides_at_most_the_a2a(flag, cases):
    for model, system, strategy in cases:
        off = estimate(_sc(model, system, strategy))
        on = estimate(_sc(model, system, strategy, **{flag: True}))
        assert on.step_time_s < off.step_time_s, (model, strategy["schedule"])
        # the saving comes from the all-to-all only: at most all of it
        assert off.step_time_s - on.step_time_s <= _ep_total_s(_sc(model, system, strategy)) + 1e-12
        assert on.breakdown_s["ep_comm"] < off.breakdown_s["ep_comm"]


def test_both_overlaps_are_off_unless_asked_for():
    """Megatron-Core's defaults (``--moe-shared-expert-overlap`` and
    ``--overlap-moe-expert-parallel-comm`` are opt-in flags): a scenario that names neither gets
    neither — its all-to-all is exposed as with both set False, and either one set True changes it."""
    from simengine.config.strategy import StrategySpec

    flags = ("moe_shared_expert_overlap", "overlap_moe_expert_parallel_comm")
    assert all(StrategySpec.model_fields[f].default is False for f in flags)
    for model, system, strategy in CASES:
        a = estimate(_sc(model, system, strategy))
        b = estimate(_sc(model, system, strategy, **dict.fromkeys(flags, False)))
        on = estimate(_sc(model, system, strategy, overlap_moe_expert_parallel_comm=True))
        assert a.step_time_s == b.step_time_s and a.breakdown_s == b.breakdown_s
        assert on.breakdown_s["ep_comm"] < a.breakdown_s["ep_comm"]


def test_combined_1f1b_holds_one_more_microbatch():
    model, system, strategy = CASES[1]
    off, on = _sc(model, system, strategy), _sc(model, system, strategy, overlap_moe_expert_parallel_comm=True)
    a, b = estimate(off).memory_by_stage, estimate(on).memory_by_stage
    assert [x.inflight_microbatches + 1 for x in a] == [x.inflight_microbatches for x in b]


@pytest.mark.parametrize("strategy,field", [
    ({"ep": 8, "pp": 2, "schedule": "1f1b", "overlap_moe_expert_parallel_comm": True}, "strategy.overlap_moe_expert_parallel_comm"),
    # Megatron sets a vpp of 1 to None: interleaved at vpp 1 is no virtual pipeline
    ({"ep": 8, "pp": 2, "schedule": "interleaved", "vpp": 1, "overlap_moe_expert_parallel_comm": True},
     "strategy.overlap_moe_expert_parallel_comm"),
    ({"ep": 1, "pp": 1, "overlap_moe_expert_parallel_comm": True}, "strategy.overlap_moe_expert_parallel_comm"),
    ({"ep": 8, "recompute": "full", "overlap_moe_expert_parallel_comm": True}, "strategy.overlap_moe_expert_parallel_comm"),
    ({"ep": 8, "moe_dispatcher": "allgather", "moe_shared_expert_overlap": True}, "strategy.moe_shared_expert_overlap"),
    ({"ep": 8, "moe_shared_expert_overlap": True, "overlap_moe_expert_parallel_comm": True}, "strategy.overlap_moe_expert_parallel_comm"),
])
def test_scenario_checks_refuse_what_megatron_refuses(strategy, field):
    with pytest.raises(ConfigError) as e:
        make("deepseek-v2-lite", "h100-sxm5-80gb", system={"num_gpus": 16},
             strategy={"seq_len": 4096, "global_batch_size": 32, **strategy})
    assert field in str(e.value)


def test_shared_overlap_needs_shared_experts():
    with pytest.raises(ConfigError, match="needs shared experts"):
        make("qwen3-30b-a3b", "h100-sxm5-80gb", system={"num_gpus": 16},
             strategy={"seq_len": 4096, "global_batch_size": 32, "ep": 8, "moe_shared_expert_overlap": True})


# ---------------------------------------------------------------- F&B pairs in the simulator


def _uniform(p, m, name, ch, fb=False, slow=1.0, vpp=1):
    k = get_schedule(name).chunks_per_rank(vpp)
    return PipelineInput(tuple(StageCost(chunks=(ch,) * k) for _ in range(p)), m, name, vpp,
                         overlap_slowdown=slow, fb_overlap=fb)


@pytest.mark.parametrize("slow", [1.0, 1.3])
def test_combined_pair_hides_a2a_within_the_partner(slow):
    """pp = 1: F0, (F1‖B0), …, B(m-1). Each pair = F + B compute + contention + what does not fit."""
    tf, tb = 0.3, 0.5
    ch = ChunkCost(1.0, 1.5, 0.0, forward_comm=(CommTask("ep_comm", tf / 3, 0, 1, 3),),
                   backward_comm=(CommTask("ep_comm", tb, 0, 1, 1),))
    m = 6
    alone = simulate(_uniform(1, m, "1f1b", ch, slow=slow)).step_time_s
    both = simulate(_uniform(1, m, "1f1b", ch, fb=True, slow=slow)).step_time_s
    assert alone == pytest.approx(m * (1.0 + tf + 1.5 + tb))
    _, fe, fx, f_on_b = paired(ch.forward_comm, 1.5, slow, "ep_comm")
    _, be, bx, b_on_f = paired(ch.backward_comm, 1.0, slow, "ep_comm")
    pair = 1.0 + 1.5 + f_on_b + b_on_f + sum(fe) + sum(be)
    assert both == pytest.approx((1.0 + tf) + (m - 1) * pair + (1.5 + tb))
    assert alone - (m - 1) * (tf + tb) <= both < alone


def _busy(order, pairs, F, B, Bi, W, FB):
    """A rank's busy time over its order: F, W, a full B (Bi where its W runs apart) and one FB per
    F&B pair (``pairs`` holds the index of each pair's first action). Shared with the DualPipe tests."""
    wset = {(a.mb, a.chunk) for a in order if a.kind == "W"}
    t, skip = 0.0, False
    for i, a in enumerate(order):
        if skip:
            skip = False
            continue
        if i in pairs:
            t, skip = t + FB, True
        else:
            t += F if a.kind == "F" else W if a.kind == "W" else (Bi if (a.mb, a.chunk) in wset else B)
    return t


@pytest.mark.parametrize("p", [2, 4, 8])
@pytest.mark.parametrize("extra", [0, 3])
@pytest.mark.parametrize("f,w", [(1.0, 0.5), (0.8, 0.8), (1.0, 0.25)])
def test_dualpipev_bubble_and_memory_match_table_2(p, extra, f, w):
    """DeepSeek-V3 report Table 2 / deepseek-ai/DualPipe README, DualPipeV with PP = 2p stages on p
    ranks: bubble (PP/2 − 1)(F&B + B − 3W), activations PP + 1 chunks (parameters 2 stages: the
    next test). Exact
    for chunks whose input-gradient part B − W equals F (the uniform-chunk case the formula is
    derived for; with B − W ≠ F the simulated bubble differs, e.g. 2.75 vs 3.0 at p = 2)."""
    m = 2 * p + extra
    ch = ChunkCost(f, f, w, activation_bytes=1e9)
    tl = simulate(_uniform(p, m, "dualpipev", ch))
    F, Bi, W = ch.forward_s, ch.backward_input_s, ch.backward_weight_s
    B = Bi + W  # Table 2's B is a full backward chunk
    _, fe, fx, f_on_b = paired(ch.forward_comm, B, 1.0, "ep_comm")
    _, be, bx, b_on_f = paired(ch.backward_comm, F, 1.0, "ep_comm")
    FB = F + B + fx + bx + f_on_b + b_on_f + sum(fe) + sum(be)  # the engine's own pair time
    s = get_schedule("dualpipev")
    orders, pairs = s.orders(p, m, 1), s.pairs(p, m, 1)
    bubble = max(tl.step_time_s - _busy(o, pr, F, B, Bi, W, FB) for o, pr in zip(orders, pairs))
    assert bubble == pytest.approx((2 * p / 2 - 1) * (FB + B - 3 * W), rel=1e-12)
    for r in range(p):
        assert tl.peak_memory_bytes[r] == pytest.approx((2 * p + 1) * 1e9)
        assert len(s.orders(p, m, 1)[r])   # (parameters: test_dualpipev_ranks_hold_two_stages_of_parameters)


@pytest.mark.parametrize("p", [4, 8])
def test_dualpipev_ranks_hold_two_stages_of_parameters(p):
    """Table 2's "Parameter 2×" for DualPipeV on p ranks (PP = 2p stages): rank r holds stages r
    and 2p − 1 − r (the V), so a middle rank's weights are two of the 2p stages — as many layers as
    one 1F1B stage on p ranks, half of DualPipe's two full copies."""
    cfg = {"tp": 1, "pp": p, "global_batch_size": 16 * p, "seq_len": 4096}
    v = build_plan(make("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 4 * p}, strategy={**cfg, "schedule": "dualpipev"}))
    one = build_plan(make("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 4 * p}, strategy={**cfg, "schedule": "1f1b"}))
    for st in v.stages:
        assert sorted(c.work.index for c in st.chunks) == [st.rank, 2 * p - 1 - st.rank]
        assert sum(len(c.work.layers) for c in st.chunks) == 32 // p
    mid = p // 2  # holds no embedding and no LM head in either schedule (at p ≥ 4)
    assert v.stages[mid].static.weights == pytest.approx(one.stages[mid].static.weights, rel=1e-12)


@pytest.mark.parametrize("p", [2, 4])
def test_dualpipev_pairs_hide_the_a2a(p):
    """With expert all-to-alls the pairs hide them behind the partner: never slower than F then
    B with every all-to-all exposed, and faster; Table 2's bubble is then an upper bound."""
    m = 3 * p
    ch = ChunkCost(1.0, 1.0, 0.5, forward_comm=(CommTask("ep_comm", 0.1, 0, 1, 4),),
                   backward_comm=(CommTask("ep_comm", 0.2, 0, 1, 2),))
    tl = simulate(_uniform(p, m, "dualpipev", ch, slow=1.1))
    seq = simulate(_uniform(p, m, "dualpipev", ch, slow=1.1), orders=get_schedule("dualpipev").orders(p, m, 1))
    assert tl.step_time_s < seq.step_time_s
    F, B, W, Bi = 1.4, 1.9, 0.5, 1.4
    _, fe, fx, f_on_b = paired(ch.forward_comm, 1.5, 1.1, "ep_comm")
    _, be, bx, b_on_f = paired(ch.backward_comm, 1.0, 1.1, "ep_comm")
    FB = 2.5 + f_on_b + b_on_f + sum(fe) + sum(be)
    s = get_schedule("dualpipev")
    bubble = max(tl.step_time_s - _busy(o, pr, F, B, Bi, W, FB) for o, pr in zip(s.orders(p, m, 1), s.pairs(p, m, 1)))
    assert 0 < bubble <= (p - 1) * (FB + B - 3 * W) + 1e-9


@pytest.mark.parametrize("flag", ["moe_shared_expert_overlap", "overlap_moe_expert_parallel_comm"])
def test_estimate_equals_timeline_with_overlap(flag):
    from simengine.timeline import simulate_scenario
    model, system, strategy = CASES[1]
    sc = _sc(model, system, strategy, **{flag: True})
    tl = simulate_scenario(sc)
    assert tl.step_time_s == pytest.approx(estimate(sc).step_time_s, rel=1e-9)
    assert any(sp.kind == "ep_comm" and sp.stream == "comm" for sp in tl.spans)  # hidden on the comm stream


def test_flags_off_build_no_pairs_and_no_hidden_a2a():
    from simengine.sim.compiled import compiled_for
    model, system, strategy = CASES[1]
    sc = _sc(model, system, strategy)
    comp = compiled_for(pipeline_input(sc, build_plan(sc)))
    assert all(not prs for prs in comp.graph.pairs) and all(not pb for pb in comp.graph.pair_base)
    for _, _, chunks in comp.graph.sig:
        for fk, bk, _, rk in chunks:
            assert ("ep_comm", True) not in fk + bk + rk
