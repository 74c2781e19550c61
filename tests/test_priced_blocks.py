"""The priced blocks and chunks are memoised on what pricing reads (workload/builder.py
``block_phases``, cost/stage.py ``_block_costs`` and ``_plan_chunk_kept``): the memo changes no
number, layouts that change no block share one pricing, and a change that does change a block's
or a chunk's price (the network, tp_comm_overlap, the dtype, the group a collective runs on, the
recompute, ZeRO-3's flags) is priced anew."""

from __future__ import annotations

import copy

import pytest

from simengine import presets
from simengine.config import load_scenario
from simengine.cost import stage
from simengine.cost.stage import build_plan
from simengine.workload.builder import block_phases


def _cfg(size: str, **strategy) -> dict:
    cfg = copy.deepcopy(presets.size_scenario(size))
    cfg["strategy"].update(strategy)
    return cfg


def _moe(**strategy) -> dict:
    m = presets.load_spec("models", "deepseek-v2-lite").model_dump(mode="json")
    s = presets.load_spec("systems", "h100-sxm5-80gb").model_dump(mode="json")
    st = {"tp": 2, "pp": 2, "ep": 4, "micro_batch_size": 1, "global_batch_size": 64, "seq_len": 4096, "sequence_parallel": True}
    return {"model": m, "system": {**s, "num_gpus": 32}, "strategy": {**st, **strategy}}


def _fresh() -> None:
    stage._PRICED.clear()
    stage._GROUPS.clear()
    stage._CHUNKS.clear()
    block_phases.cache_clear()


def _numbers(plan) -> list:
    out = []
    for st in plan.stages:
        for c in st.chunks:
            for pc in (c.fwd, c.bwd, c.wgt, c.recompute):
                out.append((pc.compute_s, pc.flops, pc.kernels, sorted(pc.comm.items())))
            out.append((c.activation_bytes, c.peak_extra_bytes))
        out.append((st.p2p_s, st.dp))
    return out


CASES = [_cfg("small"), _cfg("medium"), _cfg("large"), _cfg("large", tp_comm_overlap=True), _cfg("medium", dtype="fp8"),
         _cfg("medium", recompute="selective"), _cfg("medium", recompute="selective", recompute_modules=["mlp"]),
         _cfg("large", recompute="full", recompute_num_layers=2), _cfg("large", zero_stage=3), _moe(),
         _moe(moe_dispatcher="deepep", pp=1, ep=8)]


@pytest.mark.parametrize("cfg", CASES)
def test_the_memo_changes_no_number(cfg):
    sc = load_scenario(cfg)
    _fresh()
    want = _numbers(build_plan(sc))
    # warm: the same scenario, then after scenarios that fill the memo with other blocks
    assert _numbers(build_plan(sc)) == want
    for other in CASES:
        build_plan(load_scenario(other))
    assert _numbers(build_plan(load_scenario(cfg))) == want


def test_layouts_that_change_no_block_share_one_pricing():
    _fresh()
    a = build_plan(load_scenario(_cfg("large", schedule="1f1b", vpp=1, recompute_num_layers=4)))
    b = build_plan(load_scenario(_cfg("large", schedule="1f1b", vpp=1, recompute_num_layers=4, zero_stage=3)))
    assert a.workload.blocks is b.workload.blocks
    assert len(stage._PRICED) == 1


@pytest.mark.parametrize("change", [
    lambda c: c["system"]["scale_up"].update(bandwidth_gbs=c["system"]["scale_up"]["bandwidth_gbs"] / 2),
    lambda c: c["strategy"].update(tp_comm_overlap=True),
    lambda c: c["system"]["gpu"].update(hbm_bandwidth_gbs=c["system"]["gpu"]["hbm_bandwidth_gbs"] / 2),
    lambda c: c["system"]["scale_up"].update(domain_size=4),   # the TP group crosses the scale-up domain
])
def test_a_change_that_changes_a_price_is_priced_anew(change):
    _priced_anew(_cfg("large"), change)


def _priced_anew(base: dict, change) -> None:
    """``change`` applied to ``base``, planned after ``base`` with the memos warm: the numbers of
    a plan built with the memos empty, and not ``base``'s."""
    other = copy.deepcopy(base)
    change(other)
    _fresh()
    a = build_plan(load_scenario(base))
    b = build_plan(load_scenario(other))
    _fresh()
    b_alone = build_plan(load_scenario(other))
    assert _numbers(b) == _numbers(b_alone)
    assert _numbers(a) != _numbers(b)


_RC = _cfg("large", schedule="1f1b", vpp=1, recompute="full", recompute_num_layers=2, zero_stage=1)


@pytest.mark.parametrize("base, change", [
    (_RC, lambda c: c["strategy"].update(recompute="full", recompute_num_layers=1)),
    (_RC, lambda c: c["strategy"].update(recompute="full", recompute_num_layers=3)),
    (_RC, lambda c: c["strategy"].update(recompute="selective", recompute_num_layers=None, recompute_modules=["core_attn"])),
    (_cfg("large", recompute="selective", recompute_num_layers=None, recompute_modules=["core_attn"]),
     lambda c: c["strategy"].update(recompute_modules=["mlp"])),
    # ZeRO-3's collectives sit in the chunks: its flags change them
    (_cfg("large", zero_stage=3), lambda c: c["strategy"].update(overlap_param_gather=False)),
])
def test_a_change_of_what_a_chunk_reads_is_priced_anew(base, change):
    _priced_anew(base, change)


def test_no_dense_block_reads_the_moe_dims():
    """workload/builder.py builds every block but the MoE one from the dims without their MoE
    fields (``_without_moe``), memoised on those: each builder on the scenario's own dims holds
    the same ops (frozen, compared by value)."""
    from simengine.workload.builder import _build_block, _without_moe
    from simengine.workload.dims import dims_of

    checked = 0
    for cfg in (_moe(), _moe(ep=8, pp=1, moe_dispatcher="deepep"), _moe(tp=1, ep=2, etp=2, dtype="fp8"),
                _moe(cp=2, cp_comm_type="a2a")):
        sc = load_scenario(cfg)
        d, m, st = dims_of(sc), sc.model, sc.strategy
        assert _without_moe(d) != d
        for kind, arg in (("attn", st.cp_comm_type), ("embed", None), ("head", st.fused_cross_entropy), ("mlp", None), ("mtp", None)):
            own, dense = _build_block(kind, d, m, arg), _build_block(kind, _without_moe(d), m, arg)
            assert (own.fwd, own.bwd, own.wgt) == (dense.fwd, dense.bwd, dense.wgt)
            checked += 1
    assert checked == 20
