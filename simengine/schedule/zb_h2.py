"""ZB-H2 (Qi et al. 2023, "Zero Bubble Pipeline Parallelism", arXiv:2401.10241, §3.1 "zero bubble
schedule", Fig. 3 bottom; Table 1: peak activation memory (2p−1)·M_B, bubble (p−1)(T_F+T_B−2T_W)).

Backward is split into B (input gradient) and W (weight gradient) as in ZB-H1. ZB-H2 spends
memory to remove the bubble: it "adds extra F passes during the warm-up phase to fill the bubble
preceding the initial B" and "reorders the W passes at the tail, which changes the layout from a
trapezoid into a parallelogram". Rank i of p:

* warm-up: ``2(p−1−i)+1`` forwards (1F1B runs ``p−1−i``) — exactly the time until micro-batch
  0's B comes back when F = B = W;
* main loop over micro-batches k: B_k, then W_{k−2i} (rank i holds back its ``2i`` most recent
  weight gradients, which lets its Bs run back to back ahead of the wave), then the next F;
* tail: the ``2i`` held-back Ws.

Every rank holds at most ``2p−1`` micro-batches (counted until their W ends), warm-up plus
held-back Ws — the paper's (2p−1)·M_B, about twice 1F1B's p·M_B. With F = B = W and no
communication each rank computes without a gap from its first F to its last W (the
parallelogram), so once the optimizer step need not wait for the slowest rank (the paper's
"optimizer post-validation", §4) the bubble is zero; the synchronous step from a common start is
bounded below by 3m + p − 1 like ZB-H1's. It needs enough micro-batches (m ≥ 2p − 1) to fill.
"""

from __future__ import annotations

from .action import Action
from .base import Schedule, check_basic, one_chunk, one_chunk_requirements, require_vpp1, stage_is_rank

NAME = "zb-h2"


def check(p: int, m: int, vpp: int) -> None:
    check_basic(NAME, p, m, vpp)
    require_vpp1(NAME, vpp)


def rank_order(rank: int, p: int, m: int) -> list[Action]:
    warm = min(2 * (p - 1 - rank) + 1, m)
    held_back = 2 * rank
    order = [Action("F", i, 0) for i in range(warm)]
    next_f = warm
    for k in range(m):
        order.append(Action("B", k, 0))
        if k >= held_back:
            order.append(Action("W", k - held_back, 0))
        if next_f < m:
            order.append(Action("F", next_f, 0))
            next_f += 1
    order.extend(Action("W", i, 0) for i in range(max(m - held_back, 0), m))
    return order


def orders(p: int, m: int, vpp: int = 1) -> list[list[Action]]:
    check(p, m, vpp)
    return [rank_order(r, p, m) for r in range(p)]


def max_inflight(rank: int, p: int, m: int, vpp: int = 1) -> int:
    # warm-up 2(p-1-rank)+1 plus one per held-back W (2·rank) = 2p-1 on every rank; W runs before
    # the next F once the hold-back is full, so the count never grows past it; at most m.
    return min(2 * p - 1, m)


SCHEDULE = Schedule(NAME, orders, max_inflight, one_chunk, stage_is_rank, check, True,
                    requirements=one_chunk_requirements(NAME, pipelined=True), menu_order=50,
                    frameworks=(),
                    shipped_in="Sea AI Lab's zero-bubble fork of Megatron-LM (sail-sg/zero-bubble-pipeline-parallelism) only")
