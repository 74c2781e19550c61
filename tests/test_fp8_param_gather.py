"""FP8 primary weights (Megatron ``--fp8-param-gather``): the transformer-block weights live only in
TE's fp8 storage (no bf16 copy) and the distributed optimizer / FSDP all-gathers them in fp8; the
embedding and LM head stay bf16. The scenario refuses it where Megatron-LM does."""

from __future__ import annotations

import pytest
from scenarios import make, scenario_dict

from simengine.api import estimate
from simengine.config import load_scenario
from simengine.cost.comm import CommModel
from simengine.cost.dp import dp_work, param_gather_bytes
from simengine.cost.static_memory import stage_params, static_memory
from simengine.errors import ConfigError
from simengine.workload.builder import build_workload

ST = {"tp": 2, "pp": 2, "dtype": "fp8", "zero_stage": 1, "global_batch_size": 64, "micro_batch_size": 1,
      "overlap_param_gather": False, "overlap_grad_reduce": False}
SYS = {"num_gpus": 32}


def _stage(sc, rank):
    p = stage_params(sc, build_workload(sc).ranks[rank])
    return p, static_memory(sc, p)


@pytest.mark.parametrize("rank", [0, 1])   # rank 0 holds the embedding, rank 1 the LM head
@pytest.mark.parametrize("zero", [1, 3])
def test_the_bf16_copy_of_the_block_weights_is_gone(rank, zero):
    off = make(system=SYS, strategy={**ST, "zero_stage": zero})
    on = make(system=SYS, strategy={**ST, "zero_stage": zero, "fp8_param_gather": True})
    p, m_off = _stage(off, rank)
    _, m_on = _stage(on, rank)
    shard = off.dp_shard * off.strategy.cp if zero >= 3 else 1
    assert p.ends > 0
    assert m_off.weights - m_on.weights == pytest.approx(2.0 * (p.total - p.ends) / shard, rel=1e-12)
    assert m_on.weights == pytest.approx(2.0 * p.ends / shard, rel=1e-12)   # the ends stay bf16
    assert (m_on.grads, m_on.optimizer) == (m_off.grads, m_off.optimizer)


def test_the_parameter_all_gather_moves_one_byte_per_block_weight():
    on = make(system=SYS, strategy={**ST, "fp8_param_gather": True})
    p, _ = _stage(on, 0)
    assert param_gather_bytes(on, p, expert=True) == 1.0
    assert param_gather_bytes(on, p, expert=False) == pytest.approx((2.0 * p.ends + (p.dense - p.ends)) / p.dense)
    off = make(system=SYS, strategy=ST)
    assert param_gather_bytes(off, p, expert=False) == 2.0
    t_on = sum(dp_work(on, CommModel(on), p).param_buckets_s)
    t_off = sum(dp_work(off, CommModel(off), p).param_buckets_s)
    assert 0 < t_on < t_off


@pytest.mark.parametrize("overlap", [False, True])
def test_fp8_param_gather_never_makes_a_step_slower_or_bigger(overlap):
    base = scenario_dict(system=SYS, strategy={**ST, "overlap_param_gather": overlap, "overlap_grad_reduce": overlap})
    on = scenario_dict(system=SYS, strategy={**ST, "overlap_param_gather": overlap, "overlap_grad_reduce": overlap,
                                             "fp8_param_gather": True})
    a, b = estimate(base), estimate(on)
    assert b.step_time_s <= a.step_time_s
    assert all(y.reserved_gib < x.reserved_gib for x, y in zip(a.memory_by_stage, b.memory_by_stage))


@pytest.mark.parametrize("strategy, text", [
    ({"dtype": "bf16"}, "needs dtype='fp8'"),
    ({"zero_stage": 0}, "zero_stage >= 1"),
    ({"framework": "torch-native"}, "torchao's FSDP2 float8 all-gather: it needs zero_stage=3"),
])
def test_scenario_refuses_what_megatron_refuses(strategy, text):
    with pytest.raises(ConfigError, match=text):
        load_scenario(scenario_dict(system=SYS, strategy={**ST, "fp8_param_gather": True, **strategy}))


TORCH = {**ST, "framework": "torch-compile", "tp": 1, "pp": 1, "zero_stage": 3, "fp8_recipe": "tensorwise"}


@pytest.mark.parametrize("strategy, text", [
    ({"zero_stage": 1}, "zero_stage=3"),
    ({"fp8_recipe": "rowwise"}, "only supports tensorwise"),
    ({"dtype": "bf16", "fp8_recipe": "tensorwise"}, "needs dtype='fp8'"),
])
def test_torch_stacks_take_torchaos_float8_all_gather_with_fsdp_and_tensorwise_only(strategy, text):
    """On the torch stacks fp8_param_gather is torchao's FSDP2 float8 all-gather: FSDP2 only, and
    tensorwise only (torchao Float8LinearConfig: "float8 all-gather only supports tensorwise")."""
    load_scenario(scenario_dict(system=SYS, strategy={**TORCH, "fp8_param_gather": True}))
    with pytest.raises(ConfigError, match=text):
        load_scenario(scenario_dict(system=SYS, strategy={**TORCH, "fp8_param_gather": True, **strategy}))


def test_torchaos_float8_all_gather_halves_the_block_gathers_and_keeps_the_fp32_shards():
    """The torch stacks keep their sharded weights (no FP8 primary weights there): only the
    gathered bytes fall, for the FSDP gathers of every micro-batch and the gathered layers held."""
    off = make(system=SYS, strategy=TORCH)
    on = make(system=SYS, strategy={**TORCH, "fp8_param_gather": True})
    p, m_off = _stage(off, 0)
    _, m_on = _stage(on, 0)
    assert m_on.weights == m_off.weights and m_on.grads == m_off.grads and m_on.optimizer == m_off.optimizer
    assert m_on.buffers < m_off.buffers   # the gathered (running and prefetched) layers in fp8
    assert param_gather_bytes(on, p, expert=False) < 2.0 == param_gather_bytes(off, p, expert=False)
    a = estimate(scenario_dict(system=SYS, strategy=TORCH))
    b = estimate(scenario_dict(system=SYS, strategy={**TORCH, "fp8_param_gather": True}))
    assert b.step_time_s <= a.step_time_s
