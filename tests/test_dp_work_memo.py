"""Each rank kind's DP work is memoised on what it reads (cost/dp.py ``dp_work``): the memo
changes no number, and a change of anything ``_dp_work`` reads is computed anew."""

from __future__ import annotations

import copy

import pytest

from simengine.config import load_scenario
from simengine.cost import dp
from simengine.cost.stage import build_plan, stage_params

from test_priced_blocks import _cfg, _moe


def _unmemoised(sc, plan) -> list:
    """Every rank's DP work computed without the memo."""
    out = []
    for st in plan.stages:
        chunks = [c.work for c in st.chunks]
        per = tuple(stage_params(sc, (cw,)) for cw in chunks) if len(chunks) > 1 else ()
        out.append(dp._dp_work(sc, plan.comm, st.params, per, st.rank))
    return out


CASES = [_cfg("small"), _cfg("medium"), _cfg("large"), _cfg("large", zero_stage=3), _cfg("medium", zero_stage=0),
         _cfg("medium", zero_stage=2, overlap_grad_reduce=False), _cfg("medium", fp8_param_gather=True, dtype="fp8"),
         _moe(), _moe(zero_stage=3), _moe(fp32_main_grads=False), _moe(adam_moments_dtype="bf16")]


@pytest.mark.parametrize("cfg", CASES)
def test_the_memo_changes_no_number(cfg):
    dp._WORK.clear()
    for other in CASES:   # the memo filled with every other case's ranks first
        build_plan(load_scenario(other))
    sc = load_scenario(cfg)
    plan = build_plan(sc)
    assert [st.dp for st in plan.stages] == _unmemoised(sc, plan)


def _half(section: str, field: str):
    def change(c):
        c["system"][section][field] = c["system"][section][field] / 2
    return change


@pytest.mark.parametrize("base, change", [
    (_cfg("large"), _half("scale_out", "bandwidth_gbs")),
    (_cfg("large"), _half("gpu", "hbm_bandwidth_gbs")),           # the optimizer step
    (_cfg("large"), lambda c: c["strategy"].update(overlap_grad_reduce=False)),
    (_cfg("large"), lambda c: c["strategy"].update(fp32_main_grads=False)),
    (_cfg("large"), lambda c: c["strategy"].update(adam_moments_dtype="bf16")),   # the optimizer step's bytes
    (_cfg("large"), lambda c: c["strategy"].update(zero_stage=0)),
    (_cfg("large"), lambda c: c["strategy"].update(framework="torch-native")),
    (_cfg("medium", zero_stage=1), lambda c: c["strategy"].update(fp8_param_gather=True, dtype="fp8")),
    (_cfg("medium"), lambda c: c["system"].update(num_gpus=c["system"]["num_gpus"] * 2)),   # the DP group's size and span
    (_moe(), lambda c: c["strategy"].update(ep=8)),                 # the expert DP group
])
def test_a_change_of_what_it_reads_is_computed_anew(base, change):
    other = copy.deepcopy(base)
    change(other)
    dp._WORK.clear()
    a = build_plan(load_scenario(base))
    sc = load_scenario(other)
    b = build_plan(sc)
    assert [st.dp for st in b.stages] == _unmemoised(sc, b)
    assert [st.dp for st in a.stages] != [st.dp for st in b.stages]
