"""Overheads at scale (simengine/cost/scale.py): the straggler tail grows with the number of
synchronising GPUs, the exposed DP reduce follows the bucket schedule, host overhead is explicit."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from scenarios import make

from simengine.cost.scale import (expected_max_normal, exposed_reduce_s, scenario_straggler_factor,
                                  step_overhead_s, straggler_factor, sync_overhead_s)


def test_expected_max_matches_exact_order_statistics():
    # exact E[max] of n standard normals (Harter 1961 tables): n=2 → 1/√π, n=10 → 1.5388, n=100 → 2.5076
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=0.05)
    assert expected_max_normal(10) == pytest.approx(1.5388, rel=0.02)
    assert expected_max_normal(100) == pytest.approx(2.5076, rel=0.02)


def test_one_gpu_and_zero_jitter_cost_nothing():
    assert straggler_factor(1, 0.05) == 1.0
    assert straggler_factor(16384, 0.0) == 1.0


def test_straggler_factor_is_monotone_in_n():
    ns = [1, 2, 4, 8, 16, 64, 256, 1024, 4096, 16384, 100_000]
    f = [straggler_factor(n, 0.01) for n in ns]
    assert all(b > a for a, b in zip(f, f[1:], strict=False))


@settings(max_examples=200, deadline=None)
@given(hs.integers(min_value=2, max_value=10**7), hs.floats(min_value=0.0, max_value=0.5))
def test_straggler_tail_stays_below_the_gaussian_bound(n, cv):
    # E[max of n normals] ≤ √(2 ln n) (a union bound on the Gaussian tail)
    assert 1.0 <= straggler_factor(n, cv) <= 1.0 + cv * math.sqrt(2 * math.log(n)) + 1e-12


def test_gentler_than_simumax_log2_node_factor_at_scale():
    # SimuMax (peer_model_notes.md §7) at 64 nodes = 512 GPUs: 1 + 6/7·0.09·√6 ≈ 1.19
    simumax = 1 + 6 / 7 * 0.09 * math.sqrt(6)
    assert simumax == pytest.approx(1.189, abs=1e-3)
    assert 1.0 < straggler_factor(512, 0.01) < simumax


def test_scenario_factor_grows_with_the_job():
    small = make(system={"num_gpus": 8}, strategy={"global_batch_size": 64, "jitter_cv": 0.01})
    big = make(system={"num_gpus": 1024}, strategy={"global_batch_size": 1024, "jitter_cv": 0.01})
    assert 1.0 < scenario_straggler_factor(small) < scenario_straggler_factor(big)
    assert sync_overhead_s(small, 1.0) < sync_overhead_s(big, 1.0)
    assert scenario_straggler_factor(make(system={"num_gpus": 1024}, strategy={"global_batch_size": 1024})) == 1.0


def test_the_straggler_tail_and_host_overhead_reach_the_step():
    from simengine.estimate import estimate

    base = estimate(make(system={"num_gpus": 1024}, strategy={"global_batch_size": 1024}))
    slow = estimate(make(system={"num_gpus": 1024}, strategy={"global_batch_size": 1024, "jitter_cv": 0.02,
                                                              "step_overhead_ms": 5.0}))
    assert slow.step_time_s > base.step_time_s + 0.005
    assert slow.breakdown_s["optimizer"] == pytest.approx(base.breakdown_s["optimizer"] + 0.005)


def test_step_overhead_is_the_strategy_input():
    sc = make(system={"num_gpus": 8}, strategy={"step_overhead_ms": 12.5, "jitter_cv": 0.0})
    assert step_overhead_s(sc) == pytest.approx(0.0125)
    assert sync_overhead_s(sc, 3.0) == pytest.approx(0.0125)


def _bucket_schedule(reduce_s: float, backward_s: float, n: int) -> float:
    """Reference: bucket i ready at i·b/n, reduces serial on one stream; exposed = finish − b."""
    t = 0.0
    for i in range(1, n + 1):
        t = max(t, i * backward_s / n) + reduce_s / n
    return t - backward_s


@settings(max_examples=200, deadline=None)
@given(hs.floats(min_value=1e-4, max_value=10.0), hs.floats(min_value=0.0, max_value=10.0), hs.integers(min_value=1, max_value=200))
def test_exposed_reduce_matches_the_bucket_schedule(reduce_s, backward_s, n):
    assert exposed_reduce_s(reduce_s, backward_s, n) == pytest.approx(_bucket_schedule(reduce_s, backward_s, n), rel=1e-9, abs=1e-12)


def test_small_per_gpu_batch_exposes_the_reduce():
    # backward shrinks with the per-GPU batch; the reduce does not
    exposed = [exposed_reduce_s(1.0, b, 20) for b in (8.0, 2.0, 1.0, 0.5, 0.1, 0.0)]
    assert exposed == sorted(exposed)
    assert exposed[0] == pytest.approx(1.0 / 20)   # hidden except the last bucket
    assert exposed[-1] == pytest.approx(1.0)       # nothing to hide behind
    assert exposed_reduce_s(0.0, 1.0, 4) == 0.0
