"""Overheads that grow with the job: the slowest of N GPUs, the DP reduce that backward cannot
hide, and the per-step host work outside the model. Pure functions of the scenario.

Straggler model. Every step synchronises all ranks (TP collectives per layer, PP hand-offs, the
DP gradient reduce), so a step runs at the pace of the slowest GPU. Same-SKU GPUs differ in speed:
Sinha et al. 2022 ("Not All GPUs Are Created Equal", SC22, arXiv:2208.11035, abstract) measured an
average 8 % (max 22 %) performance variation across >90 % of the GPUs of five clusters, outliers
1.5× slower than the median. Taking per-GPU speed as normal with coefficient of variation ``cv``,
the step time is the expected maximum of N draws: ``1 + cv · z(N)`` with z(N) the expected largest
of N standard normals, Blom's (1958) approximation z(N) = Φ⁻¹((N − 0.375)/(N + 0.25)). The
default cv = 0.01 reads the paper's 8 % as the spread (max − min) over a cluster: the expected
range of n normal draws is ≈ 6.5 σ at n = 1,000 and ≈ 8 σ at n = 27,000 (Summit's GPU count), so
σ ≈ 1.0–1.2 %; we take the lower end (``StrategySpec.jitter_cv``).

This replaces SimuMax's ``1 + log2(n)/(log2(n)+1) · 0.09 · sqrt(log2(n))`` over n node samples
(shared/validation/peer_model_notes.md §7: 1.117 at 8 nodes, 1.19 at 64): the same √log
growth (the maximum of normals grows like √(2 ln N)) but with its scale taken from a measured
spread instead of 0.09, and over GPUs (each GPU has its own clocks and power limit) rather than
nodes. A GPU far outside that spread is a fault to find and evict (MegaScale, Jiang et al. 2024,
NSDI '24, diagnoses and removes slow hosts), not part of this expected tail.
"""

from __future__ import annotations

from functools import lru_cache
from statistics import NormalDist

from ..config.scenario import Scenario


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """Expected largest of ``n`` independent standard normal draws (Blom 1958); 0 for n ≤ 1."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def straggler_factor(num_ranks: int, cv: float) -> float:
    """Multiplier on the synchronised compute time: the slowest of ``num_ranks`` GPUs whose
    speeds vary with coefficient of variation ``cv``. 1 for one GPU; grows like √(2 ln N)."""
    return 1.0 + max(cv, 0.0) * expected_max_normal(max(int(num_ranks), 1))


def scenario_straggler_factor(sc: Scenario) -> float:
    """The straggler factor of a scenario: every GPU of the job synchronises each step."""
    return straggler_factor(sc.system.num_gpus, sc.strategy.jitter_cv)


def step_overhead_s(sc: Scenario) -> float:
    """Per-step host work outside the model (data loader, logging, LR scheduler), seconds."""
    return sc.strategy.step_overhead_ms * 1e-3


def sync_overhead_s(sc: Scenario, pipeline_s: float) -> float:
    """Seconds the step gains at scale on top of a pipeline time ``pipeline_s`` priced at the mean
    GPU speed: the straggler tail plus the per-step host overhead."""
    return (scenario_straggler_factor(sc) - 1.0) * pipeline_s + step_overhead_s(sc)


def exposed_reduce_s(reduce_s: float, backward_s: float, buckets: int) -> float:
    """DP gradient reduce left exposed after the last backward when ``buckets`` equal buckets are
    launched as backward produces them (Megatron DDP / PyTorch DDP bucketing, Li et al. 2020,
    "PyTorch Distributed", §3.2.3) and run one after another on the communication stream.

    Bucket i is ready at i·b/B and takes R/B, so the last finishes at max over i of
    i·b/B + (B − i + 1)·R/B; past the end of backward that is max(R − b·(1 − 1/B), R/B): at small
    per-GPU batch (b small against R) almost all of R shows, never less than the last bucket.
    """
    if reduce_s <= 0:
        return 0.0
    n = max(int(buckets), 1)
    return max(reduce_s - max(backward_s, 0.0) * (1.0 - 1.0 / n), reduce_s / n)
