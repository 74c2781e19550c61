"""Interleaved 1F1B (Narayanan et al. 2021, SC'21 "Efficient Large-Scale Language Model
Training on GPU Clusters", §2.2) as Megatron-Core
``forward_backward_pipelining_with_interleaving`` / ``get_pp_rank_microbatches`` with
``microbatch_group_size_per_vp_stage = p`` (the default):

* virtual micro-batch k (0 ≤ k < m·vpp) runs chunk ``(k mod p·vpp) // p`` on the forward side
  and ``vpp - 1 - that`` on the backward side (``get_model_chunk_id``), micro-batch
  ``(k // (p·vpp))·p + k mod p`` (``get_microbatch_id_in_model_chunk``);
* warm-up ``(p - rank - 1)·2 + (vpp - 1)·p`` virtual micro-batches, capped at m·vpp (then all
  forwards run first), steady one F then one B, cool-down Bs.

Global stage of (rank, chunk) is ``chunk·p + rank``. Requires m % p == 0 (Megatron's rule before
``microbatch_group_size_per_vp_stage`` was added).
"""

from __future__ import annotations

from .action import Action
from .base import Issues, Schedule, check_basic, layer_rule, TORCH_PIPELINING

NAME = "interleaved"


def check(p: int, m: int, vpp: int) -> None:
    check_basic(NAME, p, m, vpp)
    if m % p:
        raise ValueError(f"{NAME}: num_microbatches m={m} must be a multiple of pp={p}")


def _warmup(rank: int, p: int, m: int, vpp: int, extra: int = 0) -> int:
    return min((p - rank - 1) * 2 + (vpp - 1) * p + extra, m * vpp)


def _chunk(k: int, p: int, vpp: int, forward: bool) -> int:
    c = (k % (p * vpp)) // p
    return c if forward else vpp - 1 - c


def _mb(k: int, p: int, vpp: int) -> int:
    return (k // (p * vpp)) * p + k % p


def rank_order(rank: int, p: int, m: int, vpp: int, extra_warmup: int = 0) -> list[Action]:
    """``extra_warmup`` forwards more before the steady state (``get_pp_rank_microbatches`` with
    ``overlap_moe_expert_parallel_comm``: one, so each steady F and B are independent)."""
    total = m * vpp
    warmup = _warmup(rank, p, m, vpp, extra_warmup)

    def fwd(k: int) -> Action:
        return Action("F", _mb(k, p, vpp), _chunk(k, p, vpp, True))

    def bwd(k: int) -> Action:
        return Action("B", _mb(k, p, vpp), _chunk(k, p, vpp, False))

    order = [fwd(k) for k in range(warmup)]
    for k in range(total - warmup):
        order.append(fwd(k + warmup))
        order.append(bwd(k))
    order.extend(bwd(k) for k in range(total - warmup, total))
    return order


def orders(p: int, m: int, vpp: int) -> list[list[Action]]:
    check(p, m, vpp)
    return [rank_order(r, p, m, vpp) for r in range(p)]


def max_inflight(rank: int, p: int, m: int, vpp: int) -> int:
    # warm-up virtual micro-batches + the steady F before the first B; all of them if no steady.
    return min((p - rank - 1) * 2 + (vpp - 1) * p + 1, m * vpp)


def chunks_per_rank(vpp: int) -> int:
    return vpp


def stage_of(rank: int, chunk: int, p: int, vpp: int) -> int:
    return chunk * p + rank  # Megatron: model chunk c on pp rank r holds layers of stage c·p + r


def requirements(pp: int, microbatches: int | None, vpp: int, layers: int | None) -> Issues:
    issues: Issues = []
    if pp == 1:
        # Megatron-LM arguments.py: "When interleaved schedule is used, pipeline-model-parallel size
        # should be greater than 1" (> 2 without --overlap-p2p-communication)
        issues.append(("strategy.pp", f"schedule='interleaved' needs pp > 1 (pp={pp})"))
    if microbatches is not None and microbatches % pp:
        issues.append(("strategy.global_batch_size",
                       f"interleaved schedule needs micro-batches per step m={microbatches} divisible by pp={pp}"))
    return issues + layer_rule(pp, vpp, layers)


SCHEDULE = Schedule(NAME, orders, max_inflight, chunks_per_rank, stage_of, check, False,
                    requirements=requirements, menu_order=30,
                    # not "deepspeed": DeepSpeed's PipelineEngine runs TrainSchedule (1F1B) with no virtual
                    # stages; Megatron-DeepSpeed's copy of Megatron's interleaved schedule is its path
                    # without that engine, which the "deepspeed" stack (ZeRO-3 and its pipeline) is not
                    frameworks=("megatron-te", "torch-native", "torch-compile"),
                    shipped_in="Megatron-Core megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving; "
                             f"{TORCH_PIPELINING} ScheduleInterleaved1F1B")
