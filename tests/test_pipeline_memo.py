"""The pipeline engine's inputs are shared across calls (pipeline.py ``_CHUNK_COSTS``,
``_STAGE_COSTS``; sim/values.py ``_RANKS``): an estimate is the same number whatever ran before it,
a repeated scenario reuses its StageCosts and value blocks, and what they depend on — the
straggler factor, the DP buckets, the overlap fields — makes new ones."""

from __future__ import annotations

import pytest

from simengine import pipeline
from simengine.config import load_scenario
from simengine.cost.stage import build_plan
from simengine.estimate import estimate, forget_priced
from simengine.pipeline import pipeline_input
from simengine.sim import values

from test_priced_blocks import _cfg, _moe


def _forget() -> None:
    forget_priced()


CASES = [_cfg("small"), _cfg("medium"), _cfg("large"), _cfg("large", schedule="1f1b", vpp=1),
         _cfg("medium", overlap_grad_reduce=True, overlap_param_gather=True), _cfg("medium", overlap_grad_reduce=True),
         _cfg("medium", straggler_factor=1.1), _cfg("medium", zero_stage=3), _cfg("medium", zero_stage=3, overlap_param_gather=True),
         _cfg("medium", overlap_slowdown=1.2), _cfg("medium", schedule="zb-h1", vpp=1), _cfg("medium", schedule="dualpipev", vpp=1),
         _cfg("large", recompute="full", recompute_num_layers=2), _moe(), _moe(moe_dispatcher="deepep", pp=1, ep=8)]


def _fresh(cfg: dict) -> str:
    _forget()
    return estimate(load_scenario(cfg)).model_dump_json()


@pytest.mark.parametrize("i", range(len(CASES)))
def test_an_estimate_does_not_depend_on_what_ran_before(i):
    want = _fresh(CASES[i])
    assert estimate(load_scenario(CASES[i])).model_dump_json() == want   # warm: its own entries
    for other in CASES:   # the memos full of every other case's chunks, stages and value blocks
        estimate(load_scenario(other))
    assert estimate(load_scenario(CASES[i])).model_dump_json() == want


def test_a_repeated_scenario_reuses_its_stage_costs_and_value_blocks():
    sc = load_scenario(CASES[1])
    _forget()
    a = pipeline_input(sc, build_plan(sc))
    estimate(sc)
    held = (len(pipeline._CHUNK_COSTS), len(pipeline._STAGE_COSTS), len(values._RANKS))
    assert min(held) > 0
    blocks = {k: v[2] for k, v in values._RANKS.items()}
    estimate(sc)
    b = pipeline_input(sc, build_plan(sc))
    assert all(x is y for x, y in zip(a.stages, b.stages, strict=True))
    assert (len(pipeline._CHUNK_COSTS), len(pipeline._STAGE_COSTS), len(values._RANKS)) == held
    assert all(values._RANKS[k][2] is v for k, v in blocks.items())


@pytest.mark.parametrize("change", [
    {"straggler_factor": 1.25},                             # every ChunkCost's seconds
    {"overlap_slowdown": 1.2},                              # the value blocks (the same StageCosts)
    {"overlap_param_gather": False},                        # the value blocks' launch and tail slots
    {"overlap_grad_reduce": False, "overlap_param_gather": False},
    {"zero_stage": 2},                                      # the DP buckets of every StageCost
])
def test_what_the_inputs_read_makes_new_ones(change):
    base, changed = load_scenario(_cfg("medium", zero_stage=1)), load_scenario(_cfg("medium", **{"zero_stage": 1, **change}))
    _forget()
    a = pipeline_input(base, build_plan(base))
    b = pipeline_input(changed, build_plan(changed))
    if "straggler_factor" in change:
        assert a.stages[0].chunks[0] is not b.stages[0].chunks[0]
        assert b.stages[0].chunks[0].forward_s == pytest.approx(1.25 * a.stages[0].chunks[0].forward_s)
    want = _fresh(_cfg("medium", **{"zero_stage": 1, **change}))
    assert want != _fresh(_cfg("medium", zero_stage=1))   # the change changes the estimate
    estimate(base)
    assert estimate(changed).model_dump_json() == want
