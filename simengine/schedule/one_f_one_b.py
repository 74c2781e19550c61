"""1F1B, PipeDream-flush (Narayanan et al. 2021, "Memory-Efficient Pipeline-Parallel DNN
Training", §3) as Megatron-Core ``forward_backward_pipelining_without_interleaving``:
warm-up ``min(p - rank - 1, m)`` forwards, steady state one F then one B, cool-down Bs.
"""

from __future__ import annotations

from .action import Action
from .base import Schedule, check_basic, one_chunk, one_chunk_requirements, require_vpp1, stage_is_rank, TORCH_PIPELINING

NAME = "1f1b"


def check(p: int, m: int, vpp: int) -> None:
    check_basic(NAME, p, m, vpp)
    require_vpp1(NAME, vpp)


def rank_order(rank: int, p: int, m: int) -> list[Action]:
    warmup = min(p - rank - 1, m)  # Megatron: num_warmup_microbatches
    order = [Action("F", i, 0) for i in range(warmup)]
    for i in range(m - warmup):  # steady: num_microbatches_remaining
        order.append(Action("F", warmup + i, 0))
        order.append(Action("B", i, 0))
    order.extend(Action("B", i, 0) for i in range(m - warmup, m))  # cool-down
    return order


def orders(p: int, m: int, vpp: int = 1) -> list[list[Action]]:
    check(p, m, vpp)
    return [rank_order(r, p, m) for r in range(p)]


def max_inflight(rank: int, p: int, m: int, vpp: int = 1) -> int:
    # warm-up forwards plus the steady-state F that precedes the first B.
    return min(p - rank, m)


SCHEDULE = Schedule(NAME, orders, max_inflight, one_chunk, stage_is_rank, check, False,
                    requirements=one_chunk_requirements(NAME), menu_order=20,
                    frameworks=("megatron-te", "torch-native", "torch-compile", "deepspeed"),
                    shipped_in="Megatron-Core megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_without_interleaving; "
                             f"{TORCH_PIPELINING} Schedule1F1B; DeepSpeed deepspeed/runtime/pipe/schedule.py TrainSchedule")
