"""What a schedule is: a named bundle of pure functions (no state, no timing).

Every schedule module (one file per schedule, discovered by ``simengine.schedule``'s registry
through its module-level ``SCHEDULE``) provides:

* ``orders(p, m, vpp)`` — per-rank list of Actions;
* ``max_inflight(rank, p, m, vpp)`` — closed form, proven against ``count_max_inflight`` in the
  tests;
* ``chunks_per_rank(vpp)`` and ``stage_of(rank, chunk, p, vpp)`` — global pipeline stage of a
  model chunk (data flows stage s → s+1 in F and back in B); the workload builder asks it which
  layers a rank holds;
* ``requirements(pp, microbatches, vpp, layers)`` — the scenario rules of the schedule as
  ``(field, message)`` pairs, each term named (``Scenario`` shows them next to the field).
  ``microbatches`` / ``layers`` are None where the caller does not know them (a strategy on its
  own; an explicit per-stage layer layout);
* ``check(p, m, vpp)`` — raises ValueError naming the violated rule (the simulator's guard);
* ``chains`` — independent pipelines the stages form (1; DualPipe's two directions: 2, stage
  s holds the layers of stage s mod (stages/chains), and ``m`` counts micro-batches per chain);
* ``pairs(p, m, vpp)`` (optional) — per rank, the positions of the F actions that run as one
  overlapped F&B pair with the B right after them (DualPipe's ``_forward_backward_chunk``);
* ``frameworks`` / ``shipped_in`` — the software stacks (``config/framework.py`` names) whose code
  runs the schedule, and where (file and function or class). On any other stack the schedule is a
  what-if (``config/notes.py``: a note on the scenario, a mark on a search candidate).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .action import Action

Issues = list[tuple[str, str]]
# PyTorch's pipeline schedules (``get_schedule_class``; torchtitan's pipeline_parallel_schedule names them)
TORCH_PIPELINING = "PyTorch torch/distributed/pipelining/schedules.py"


@dataclass(frozen=True)
class Schedule:
    name: str
    orders: Callable[[int, int, int], list[list[Action]]]
    max_inflight: Callable[[int, int, int, int], int]
    chunks_per_rank: Callable[[int], int]
    stage_of: Callable[[int, int, int, int], int]
    check: Callable[[int, int, int], None]
    splits_weight_grad: bool  # emits W actions
    requirements: Callable[[int, int | None, int, int | None], Issues]  # (pp, m, vpp, layers) -> issues
    menu_order: int = 100  # position in the studio's schedule switcher and the JSON schema enum
    pairs: Callable[[int, int, int], list[frozenset[int]]] | None = None  # F&B pairs (F positions)
    # independent pipelines: the stages split into ``chains`` equal chains, each with its own first
    # stage and loss, each micro-batch id one micro-batch per chain (DualPipe's two directions)
    chains: int = 1
    frameworks: tuple[str, ...] = ()
    shipped_in: str = ""


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


def vpp1_rule(name: str, vpp: int) -> Issues:
    """A one-chunk-per-rank schedule has no virtual stages."""
    if vpp != 1:
        return [("strategy.vpp", f"vpp={vpp} needs schedule='interleaved' (schedule='{name}' runs one model chunk per rank)")]
    return []


def layer_rule(pp: int, chunks: int, layers: int | None, chunks_term: str = "vpp") -> Issues:
    """Every virtual stage of the default (even) split holds at least one layer."""
    if layers is not None and pp * chunks > layers:
        return [("strategy.pp", f"pp*{chunks_term} = {pp}*{chunks} = {pp * chunks} exceeds num_layers={layers}")]
    return []


def one_chunk(vpp: int) -> int:
    return 1


def stage_is_rank(rank: int, chunk: int, p: int, vpp: int) -> int:
    return rank


def pipelined_rule(name: str, pp: int) -> Issues:
    """A pipeline schedule needs a pipeline: at pp 1 the frameworks run none (Megatron-Core
    pipeline_parallel/schedules.py ``get_forward_backward_func`` → ``forward_backward_no_pipelining``:
    each micro-batch's forward, then its backward; torchtitan builds no schedule when pp is off),
    which is schedule='1f1b' at pp 1 here. GPipe's all-forwards-first at pp 1 held every
    micro-batch's activations (323 GiB on the ``small`` preset) for a run no framework makes."""
    if pp == 1:
        return [("strategy.schedule", f"schedule='{name}' needs pp > 1: at pp=1 no pipeline schedule runs (each "
                 "micro-batch's forward, then its backward, as Megatron-Core's forward_backward_no_pipelining): "
                 "use schedule='1f1b'")]
    return []


def one_chunk_requirements(name: str, pipelined: bool = False):
    """``requirements`` of a schedule with one chunk per rank and no rule of its own
    (``pipelined``: it also needs pp > 1, ``pipelined_rule``)."""
    def requirements(pp: int, microbatches: int | None, vpp: int, layers: int | None) -> Issues:
        return (pipelined_rule(name, pp) if pipelined else []) + vpp1_rule(name, vpp) + layer_rule(pp, 1, layers)
    return requirements
