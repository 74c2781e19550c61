"""Megatron-Core's DP buckets: only the first chunk of the first pipeline rank is bucketed, and only
with overlap_grad_reduce (megatron/training/training.py ``per_chunk_bucket_sizes``;
distributed_data_parallel.py); every other chunk reduces its buffers once, after its final
backward. With that, turning a DP overlap on never makes a deep pipeline's step slower: before,
every rank's buckets ran beside its final backward, and that contention added up along the
cool-down chain of a pp 32 pipeline (+79 ms on a 405B 1F1B step)."""

from __future__ import annotations

import copy
import itertools

import pytest

from simengine import api, presets
from simengine.config import load_scenario
from simengine.cost.stage import build_plan
from scenarios import step_times_off_on

DP_FLAGS = ("overlap_grad_reduce", "overlap_param_gather")


def _large(**strategy) -> dict:
    cfg = copy.deepcopy(presets.size_scenario("large"))
    cfg["strategy"].update(recompute="full", recompute_num_layers=1, **strategy)
    return cfg


def _plan(cfg: dict):
    return build_plan(load_scenario(cfg))


@pytest.mark.parametrize("zero", [0, 1])
def test_only_the_first_chunk_of_the_first_rank_is_bucketed(zero):
    plan = _plan(_large(zero_stage=zero, overlap_grad_reduce=True, overlap_param_gather=zero >= 1))
    nch = 4  # the 'large' preset: vpp 4
    first, later = plan.stages[0].dp, plan.stages[5].dp
    k = len(first.grad_buckets_s) // nch
    assert k > 1 and len(first.grad_buckets_s) == k * nch
    # chunk 0: its buckets; chunks 1..3: zero-second entries, then the chunk's one reduce
    assert all(t > 0 for t in first.grad_buckets_s[:k])
    for c in range(1, nch):
        group = first.grad_buckets_s[c * k:(c + 1) * k]
        assert group[:-1] == (0.0,) * (k - 1) and group[-1] > 0
    # a later rank reduces each chunk's buffer once: one entry per chunk
    assert len(later.grad_buckets_s) == nch and all(t > 0 for t in later.grad_buckets_s)
    if zero >= 1:  # the parameter gathers: the chunk's one gather first, then the padding
        group = first.param_buckets_s[k:2 * k]
        assert group[0] > 0 and group[1:] == (0.0,) * (k - 1)
        assert len(later.param_buckets_s) == nch


def test_without_overlap_grad_reduce_no_chunk_is_bucketed():
    """Each chunk reduces and gathers its buffers in one collective: one non-zero entry per chunk
    (the structure keeps the bucketed count, padded: the engine compiles one for every flag)."""
    plan = _plan(_large(zero_stage=1, overlap_grad_reduce=False, overlap_param_gather=False))
    for st in plan.stages:
        n = len(st.chunks)
        g, p = st.dp.grad_buckets_s, st.dp.param_buckets_s
        k = len(g) // n
        assert len(g) == len(p) == k * n
        for c in range(n):
            assert [t > 0 for t in g[c * k:(c + 1) * k]] == [False] * (k - 1) + [True]
            assert [t > 0 for t in p[c * k:(c + 1) * k]] == [True] + [False] * (k - 1)


def test_one_structure_for_every_dp_flag_and_zero_stage_0_to_2():
    """The DP overlap flags and ZeRO 0–2 change only the bucket seconds, not the engine's
    structure: one compiled structure serves all of them (sim/compiled.py ``structure_key``)."""
    from simengine.pipeline import pipeline_input
    from simengine.sim.compiled import structure_key

    def key(z: int, ogr: bool, opg: bool) -> tuple:
        sc = load_scenario(_large(zero_stage=z, overlap_grad_reduce=ogr, overlap_param_gather=opg and z > 0))
        return structure_key(pipeline_input(sc, build_plan(sc)))

    flags = list(itertools.product((False, True), (False, True)))
    assert len({key(z, *f) for z in (0, 1) for f in flags}) == 1
    # ZeRO-2 adds its per-micro-batch reduce-scatter to the chunks' collectives; the DP part is the same
    dp_part = {tuple(s[:2] for s in key(z, *f)[-1]) for z in (0, 1, 2) for f in flags}
    assert len(dp_part) == 1


def test_bucketing_conserves_the_bytes_it_moves():
    """Bucketed or not, a rank reduces all of its gradients: the bucketed sum is the unbucketed one
    plus the per-call latency of the extra calls (positive, and small against the transfer)."""
    on = _plan(_large(zero_stage=1, overlap_grad_reduce=True))
    off = _plan(_large(zero_stage=1, overlap_grad_reduce=False))
    a, b = sum(on.stages[0].dp.grad_buckets_s), sum(off.stages[0].dp.grad_buckets_s)
    assert b < a < 1.2 * b
    for s_on, s_off in zip(on.stages[1:], off.stages[1:]):
        assert sum(s_on.dp.grad_buckets_s) == pytest.approx(sum(s_off.dp.grad_buckets_s), rel=1e-12)


def _never_slower(cfg: dict, flag: str) -> int:
    """Asserts the flag never slows ``cfg`` (the other flag off and on); the pairs compared."""
    compared = 0
    for other in (False, True):
        times = step_times_off_on(cfg, flag, **{f: other for f in DP_FLAGS if f != flag})
        if times is None:
            continue
        t_off, t_on = times
        assert t_on <= t_off * (1 + 1e-12), (cfg["strategy"], flag, other, t_off, t_on)
        compared += 1
    return compared


DEEP = [(s, pp, z) for s, pp, z in itertools.product(("1f1b", "interleaved", "zb-h1", "zb-h2", "dualpipev"), (16, 32), (1, 2))]


@pytest.mark.parametrize("schedule,pp,zero", DEEP)
@pytest.mark.parametrize("flag", DP_FLAGS)
def test_a_dp_overlap_never_slows_a_deep_pipeline(schedule, pp, zero, flag):
    """Llama-3.1-405B on 16,384 H100s (gbs 2048), every schedule at pp 16 and 32: each DP overlap
    flag, with the other one off and on (before the Megatron bucketing, 55 of these pairs of the
    search's space ran slower with the flag on)."""
    vpp = 2 if schedule == "interleaved" else 1
    extra: dict = {}
    if schedule == "dualpipev":  # its V needs 2·pp stages of layers and at least 2·pp micro-batches
        k = 2 * pp
        base, rem = divmod(126, k)   # 126 layers: one more on `rem` of the middle stages
        extra = {"global_batch_size": 4096,
                 "pipeline_layers": [base] + [base + 1] * rem + [base] * (k - 2 - rem) + [base]}
    assert _never_slower(_large(schedule=schedule, pp=pp, vpp=vpp, zero_stage=zero, **extra), flag) == 2


@pytest.mark.parametrize("flag", DP_FLAGS)
@pytest.mark.parametrize("pp", [4, 8])
def test_a_dp_overlap_never_slows_an_moe_pipeline(flag, pp):
    """Expert and dense buffers on their own groups (EDP, DP×CP): deepseek-v3 with ep 64."""
    cfg = copy.deepcopy(presets.scenario_preset("deepseek-v3-ep64"))
    cfg["strategy"]["pp"] = pp
    cfg["strategy"]["vpp"] = 1
    cfg["strategy"]["pipeline_layers"] = None  # the preset's layout is for pp8·vpp4
    cfg["strategy"]["schedule"] = "1f1b"
    _never_slower(cfg, flag)


def test_megatron_refuses_overlap_param_gather_without_overlap_grad_reduce():
    """Megatron-LM arguments.py asserts overlap_grad_reduce when overlap_param_gather is on: the
    estimate says so next to the field (a note, not an error: FSDP2 stacks prefetch without it)."""
    cfg = copy.deepcopy(presets.size_scenario("medium"))
    cfg["strategy"].update(zero_stage=1, overlap_grad_reduce=False, overlap_param_gather=True)
    assert any("Megatron-LM refuses it" in w for w in api.estimate(cfg).warnings)
    assert ("strategy.overlap_param_gather" in dict(load_scenario(cfg).notes))
    cfg["strategy"]["overlap_grad_reduce"] = True
    assert not any("overlap_param_gather" in w for w in api.estimate(cfg).warnings)
    cfg["strategy"].update(overlap_grad_reduce=False, framework="torch-native")
    assert not any("overlap_param_gather" in w for w in api.estimate(cfg).warnings)


def test_the_chunks_share_the_rank_s_parameters():
    """Per-chunk buffers hold the rank's parameters between them (cost/dp.py ``_chunk_params``):
    dense, expert and the bf16 embedding/LM head, each summing to the rank's, the ends on the
    chunks that hold them."""
    from simengine.cost.dp import _chunk_params
    from simengine.cost.static_memory import stage_params

    sc = load_scenario(_large(zero_stage=1))
    for rank_chunks in build_plan(sc).workload.ranks[:1] + build_plan(sc).workload.ranks[-1:]:
        p = stage_params(sc, rank_chunks)
        per = _chunk_params(p, tuple(stage_params(sc, (cw,)) for cw in rank_chunks))
        for f in ("dense", "expert", "ends"):
            assert sum(getattr(c, f) for c in per) == pytest.approx(getattr(p, f), rel=1e-12)
        for c, cw in zip(per, rank_chunks):
            assert (c.ends > 0) == (cw.first or cw.last)


def test_overlap_grad_reduce_buckets_the_step_end_gather_and_can_cost_its_latency():
    """The flag does more than overlap: Megatron-Core buckets the gradient buffer only with it
    (distributed_data_parallel.py: bucket_size = None without overlap_grad_reduce), so a
    distributed optimizer's step-end parameter all-gather, when overlap_param_gather is off, runs
    once per bucket, each paying its latency. On a layout whose reduce-scatter has nothing to hide
    beside (4 layers of the 1.7B GPT at pp 4, ZeRO-2, found by a fuzz of flag pairs) that is a
    small net cost, not a defect of the overlap: the README says so."""
    m = presets.load_spec("models", "gpt-1.7b").model_dump(mode="json")
    m["num_layers"] = 4
    s = dict(presets.load_spec("systems", "h100-sxm5-80gb").model_dump(mode="json"), num_gpus=8)
    st = {"tp": 1, "pp": 4, "global_batch_size": 8, "seq_len": 512, "zero_stage": 2, "overlap_param_gather": False}
    off, on = (api.estimate({"model": m, "system": s, "strategy": dict(st, overlap_grad_reduce=f)}).step_time_s for f in (False, True))
    assert off < on < off * 1.01
