"""cost/memo.py: with the hook it describes, every estimate is identical to the unhooked one,
and the workload is built once for scenarios that differ only in what it does not read."""

from __future__ import annotations

import contextlib
import itertools

from simengine.api import estimate
from simengine.config import ModelSpec, StrategySpec, SystemSpec, make_scenario
from simengine.cost import memo, stage
from simengine import presets


@contextlib.contextmanager
def hooked(calls):
    orig_w, orig_c = stage.build_workload, stage._block_costs

    def build(sc):
        calls.append(1)
        return orig_w(sc)

    stage.build_workload = lambda sc: memo.workload(sc, build)
    stage._block_costs = lambda wl, cm, comm, tco, slow: memo.block_costs(wl, cm, comm, tco, slow, orig_c)
    try:
        yield
    finally:
        stage.build_workload, stage._block_costs = orig_w, orig_c
        memo.clear()


def test_hooked_estimates_are_identical_and_reuse_the_workload():
    model = ModelSpec.model_validate(presets.load_preset("models", "llama3-8b"))
    system = SystemSpec.model_validate({**presets.load_preset("systems", "h100-sxm5-80gb"), "num_gpus": 16})
    variants = list(itertools.product((0, 1, 3), (("none", None), ("selective", None), ("full", 2)), (False, True)))
    scs = [make_scenario(model, system, StrategySpec(tp=2, pp=2, global_batch_size=32, seq_len=4096, zero_stage=z,
                                                     recompute=rc, recompute_num_layers=k, overlap_grad_reduce=ov))
           for z, (rc, k), ov in variants]
    plain = [estimate(sc).model_dump() for sc in scs]
    calls: list = []
    with hooked(calls):
        again = [estimate(sc).model_dump() for sc in scs]
    assert again == plain
    assert len(calls) == 1
