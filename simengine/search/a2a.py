"""The expert all-to-all in the search's step-time bound, where F&B pairs may hide it
(``bound.pipeline_bound``'s ``a2a``): which schedules may pair, the pairs a rank runs, and what
the all-to-all adds to the work a bound term counts."""

from __future__ import annotations

from typing import NamedTuple

from ..schedule import get_schedule
from .orders import Counts, Pairs, Tally, pair_counts

Phases = tuple[float, float, float, float]     # forward, backward-input, backward-weight, recompute seconds


class A2A(NamedTuple):
    """``pipeline_bound``'s ``a2a``: where F&B pairs may hide the expert all-to-all."""

    stages: list[tuple[float, float, float, float]]   # per data-flow stage: F's, B's all-to-all alone (ep_alone); F's, B's whole length
    pairs: Pairs                                       # per rank, its F&B pairs by type (orders.pair_counts)


def schedule_hides_a2a(schedule: str, combined: bool) -> bool:
    """``hides_a2a`` from the schedule's name and ``overlap_moe_expert_parallel_comm``."""
    return bool(combined) or get_schedule(schedule).pairs is not None


def hides_a2a(strategy) -> bool:
    """Whether some F&B pair may run a phase's expert all-to-all beside another micro-batch's
    compute: the schedule pairs F and B (``Schedule.pairs``: DualPipe, DualPipeV) or combined 1F1B
    (``overlap_moe_expert_parallel_comm``, schedule/_combined.py). Otherwise every F and B runs
    alone (sim/values.py ``_rank_values``: each slot resolves its collectives by ``by_kind``), so
    the all-to-all belongs in the bound as ``phase_alone`` resolves it (``ep_alone``)."""
    return schedule_hides_a2a(strategy.schedule, strategy.overlap_moe_expert_parallel_comm)


def a2a_of(stages: list[tuple[float, float, float, float]], strategy, m: int) -> A2A | None:
    """``pipeline_bound``'s ``a2a`` from its per-stage terms (``A2A.stages``) and the strategy's
    pairs with m micro-batches per chain; None where no stage's F or B runs an expert all-to-all
    (a dense model, or no expert parallelism): there every ``a2a_work`` term is zero — a pair's
    max(B, 0) + max(F, 0) − F − B — so the bound is the same without a pass over every rank's
    pairs per call."""
    return A2A(stages, strategy_pairs(strategy, m)) if any(x for st in stages for x in st) else None


def strategy_pairs(strategy, m: int) -> Pairs:
    """``orders.pair_counts`` of a strategy with m micro-batches per chain (``sim_microbatches``)."""
    return pair_counts(strategy.schedule, strategy.pp, m, strategy.vpp, bool(strategy.overlap_moe_expert_parallel_comm))


def ep_length(pc) -> float:
    """A phase's expert all-to-all end to end: what a pair member runs beside its partner's
    compute (sim/overlap.py ``paired``: all of them as one collective of their total length)."""
    return sum(t[1] * t[4] for t in pc.tasks() if t[0] == "ep_comm")


def a2a_work(counts: Counts, tally: Tally, a2a: A2A, phases: list[Phases], full_b: bool) -> float:
    """What the expert all-to-all adds to the work of ``counts`` actions (``bound._work``) and
    the pairs of ``tally`` (``orders._tally``, or a rank's ``A2A.pairs``): each F and B its
    all-to-all alone, and each pair what it saves on its members counted alone. A pair's compute
    stream runs both members' compute and their exposed parts (sim/values.py ``_pair_values``):
    the F's all-to-all A_F beside the B's compute leaves ≥ A_F − B exposed (sim/overlap.py
    ``resolve`` at any slowdown s ≥ 1: hidden − contention ≤ min(A_F, B)), and the other way
    round, so the pair takes ≥ max(B, A_F) + max(F, A_B) (B with its weight gradient when it
    carries it) instead of F + B + both alone. A member whose partner is outside the stretch
    (stage −1) is held at its compute."""
    st = a2a.stages
    t = 0.0
    for s, nf, nb, _ in counts:
        t += nf * st[s][0] + nb * st[s][1]
    for sf, sb, carries_w, n in tally:
        if sf < 0:
            t -= n * st[sb][1]
        elif sb < 0:
            t -= n * st[sf][0]
        else:
            f = phases[sf][0]
            b = phases[sb][1] + (phases[sb][2] if carries_w or full_b else 0.0)
            t += n * (max(b, st[sf][2]) + max(f, st[sb][3]) - f - b - st[sf][0] - st[sb][1])
    return t
