"""GPipe (Huang et al. 2019, "GPipe", §2.3 Fig. 2c): all forwards, then all backwards.

Backward order follows torch.distributed.pipelining ``ScheduleGPipe`` (ascending micro-batch).
Every rank holds all m micro-batches' activations at the F→B turn.
"""

from __future__ import annotations

from .action import Action
from .base import Schedule, check_basic, one_chunk, one_chunk_requirements, require_vpp1, stage_is_rank, TORCH_PIPELINING

NAME = "gpipe"


def check(p: int, m: int, vpp: int) -> None:
    check_basic(NAME, p, m, vpp)
    require_vpp1(NAME, vpp)


def orders(p: int, m: int, vpp: int = 1) -> list[list[Action]]:
    check(p, m, vpp)
    one = [Action("F", i, 0) for i in range(m)] + [Action("B", i, 0) for i in range(m)]
    return [list(one) for _ in range(p)]


def max_inflight(rank: int, p: int, m: int, vpp: int = 1) -> int:
    return m


SCHEDULE = Schedule(NAME, orders, max_inflight, one_chunk, stage_is_rank, check, False,
                    requirements=one_chunk_requirements(NAME, pipelined=True), menu_order=10,
                    frameworks=("torch-native", "torch-compile"),
                    shipped_in=f"{TORCH_PIPELINING} ScheduleGPipe")
