"""Orders with overlapped F&B pairs: a schedule's own (DualPipe) or Megatron-Core's combined 1F1B.

Combined 1F1B (``--overlap-moe-expert-parallel-comm``, the "1F1B A2A overlap";
megatron/core/pipeline_parallel/combined_1f1b.py, ``combined_1f1b_schedule_for_no_pipelining``
and ``combined_1f1b_schedule_for_interleaved_pipelining``): in the steady state the forward of
one micro-batch and the backward of another on the same rank run as one schedule plan, layer by
layer (models/common/model_chunk_schedule_plan.py, ``TransformerLayerSchedulePlan.run``), so
each one's expert dispatch/combine hides behind the other's attention/MLP compute. It exists for
pp = 1 (phases: F0, F1+B0, …, F(m-1)+B(m-2), B(m-1)) and for the interleaved schedule
(transformer_config.py: "virtual_pipeline_model_parallel_size must be specified when
pipeline_model_parallel_size > 1"), where ``get_pp_rank_microbatches`` runs one extra warm-up
forward "to ensure the forward and backward computations are independent in all 1f1b steps".
How a pair is timed is the simulator's (``simengine/sim/graph.py``, ``overlap.py``).
"""

from __future__ import annotations

from . import interleaved
from .action import Action
from .base import Schedule


def supports(name: str, p: int) -> bool:
    """Megatron-Core runs the combined 1F1B without pipelining or with the interleaved schedule."""
    return name == "interleaved" or (name == "1f1b" and p == 1)


def _combined(p: int, m: int, vpp: int) -> tuple[list[list[Action]], list[frozenset[int]]]:
    orders, pairs = [], []
    for r in range(p):
        order = interleaved.rank_order(r, p, m, vpp, extra_warmup=1)  # p = vpp = 1: plain 1F1B
        warmup = interleaved._warmup(r, p, m, vpp, 1)
        pairs.append(frozenset(warmup + 2 * k for k in range(m * vpp - warmup)))  # each steady F
        orders.append(order)
    return orders, pairs


def fb_orders(sched: Schedule, p: int, m: int, vpp: int,
              combined: bool = False) -> tuple[list[list[Action]], list[frozenset[int]] | None]:
    """Per-rank orders and, per rank, the positions of the F of every overlapped F&B pair
    (None: no pairs)."""
    if combined:
        if not supports(sched.name, p):
            raise ValueError(f"overlap_moe_expert_parallel_comm: schedule '{sched.name}' with pp={p} has no combined "
                             "1F1B (Megatron-Core: pp=1, or schedule='interleaved')")
        sched.check(p, m, vpp)
        return _combined(p, m, 1 if sched.name == "1f1b" else vpp)
    orders = sched.orders(p, m, vpp)
    return orders, (sched.pairs(p, m, vpp) if sched.pairs is not None else None)
