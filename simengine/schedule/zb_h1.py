"""ZB-H1 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241, §3.1, Fig. 3 top).

The backward is split into B (input gradient, on the critical path) and W (weight gradient,
deferrable). ZB-H1 keeps 1F1B's warm-up (``p - rank - 1`` forwards) and steady F/B alternation but
"adjusts the starting points of W depending on the number of warm-up micro-batches": rank i
defers its W by i steady steps, so every rank holds at most p micro-batches (counted until
their W ends) — the peak of 1F1B's first rank — and the postponed Ws fill the cool-down bubble.
In the cool-down each B is followed by one pending W; the remaining Ws close the step.
"""

from __future__ import annotations

from .action import Action
from .base import Schedule, check_basic, one_chunk, one_chunk_requirements, require_vpp1, stage_is_rank, TORCH_PIPELINING

NAME = "zb-h1"


def check(p: int, m: int, vpp: int) -> None:
    check_basic(NAME, p, m, vpp)
    require_vpp1(NAME, vpp)


def rank_order(rank: int, p: int, m: int) -> list[Action]:
    warmup = min(p - rank - 1, m)
    order = [Action("F", i, 0) for i in range(warmup)]
    next_w = 0
    for j in range(m - warmup):  # steady: F, B and (after a delay of `rank` steps) W
        order.append(Action("F", warmup + j, 0))
        order.append(Action("B", j, 0))
        if j >= rank:
            order.append(Action("W", next_w, 0))
            next_w += 1
    for j in range(m - warmup, m):  # cool-down: B then one deferred W fills the wait
        order.append(Action("B", j, 0))
        order.append(Action("W", next_w, 0))
        next_w += 1
    order.extend(Action("W", i, 0) for i in range(next_w, m))
    return order


def orders(p: int, m: int, vpp: int = 1) -> list[list[Action]]:
    check(p, m, vpp)
    return [rank_order(r, p, m) for r in range(p)]


def max_inflight(rank: int, p: int, m: int, vpp: int = 1) -> int:
    # warm-up (p-rank-1) + steady Fs before W starts (rank + 1) = p on every rank, at most m.
    return min(p, m)


SCHEDULE = Schedule(NAME, orders, max_inflight, one_chunk, stage_is_rank, check, True,
                    requirements=one_chunk_requirements(NAME, pipelined=True), menu_order=40,
                    frameworks=("torch-native",),
                    shipped_in=f"{TORCH_PIPELINING} ScheduleInterleavedZeroBubble (ZB-1P, Qi et al. 2024), not under torch.compile")
