"""What a schedule is: a named bundle of pure functions (no state, no timing).

Every schedule module provides ``orders(p, m, vpp)`` (per-rank list of Actions),
``max_inflight(rank, p, m, vpp)`` (closed form, proven against ``count_max_inflight`` in the
tests), ``chunks_per_rank(vpp)``, ``stage_of(rank, chunk, p, vpp)`` (global pipeline stage of a
model chunk; data flows stage s → s+1 in F and back in B) and ``check(p, m, vpp)`` which raises
ValueError naming the violated rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .action import Action


@dataclass(frozen=True)
class Schedule:
    name: str
    orders: Callable[[int, int, int], list[list[Action]]]
    max_inflight: Callable[[int, int, int, int], int]
    chunks_per_rank: Callable[[int], int]
    stage_of: Callable[[int, int, int, int], int]
    check: Callable[[int, int, int], None]
    splits_weight_grad: bool  # emits W actions


def check_basic(name: str, p: int, m: int, vpp: int) -> None:
    if p < 1:
        raise ValueError(f"{name}: pipeline size p={p} must be >= 1")
    if m < 1:
        raise ValueError(f"{name}: num_microbatches m={m} must be >= 1")
    if vpp < 1:
        raise ValueError(f"{name}: vpp={vpp} must be >= 1")


def require_vpp1(name: str, vpp: int) -> None:
    if vpp != 1:
        raise ValueError(f"{name}: vpp={vpp} is only supported by schedule='interleaved'")


def one_chunk(vpp: int) -> int:
    return 1


def stage_is_rank(rank: int, chunk: int, p: int, vpp: int) -> int:
    return rank
