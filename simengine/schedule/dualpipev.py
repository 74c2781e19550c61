"""DualPipeV, the "cut-in-half" DualPipe (DeepSeek-V3 report arXiv:2412.19437 §3.2.1; open-source
deepseek-ai/DualPipe ``dualpipe/dualpipev.py``, ``DualPipeV.step``; also PyTorch
``torch.distributed.pipelining.ScheduleDualPipeV``).

Each of p ranks holds two chunks of a 2p-stage pipeline in a V: chunk 0 on rank r is stage r,
chunk 1 is stage 2p-1-r, so the turn (stage p-1 → p) is local on rank p-1 and the loss is on
rank 0. The eight phases of ``step`` are reproduced verbatim (micro-batch ids are per-chunk
counters, W pops a FIFO like ``WeightGradStore``). A backward run with ``enable_zb`` becomes B
now and W later; one without is one full backward B (no W action).

F&B overlap: every ``_forward_backward_chunk(phase0, phase1)`` of steps 4 and 5 (the F of one
chunk, then the full B of the other) is an overlapped pair: ``rank_pairs`` names the position of
its F, and the simulator runs the pair as one unit (both inputs received first, both outputs sent
after, each one's expert all-to-all beside the other's compute; ``simengine/sim/graph.py``).
"""

from __future__ import annotations

from .action import Action
from .base import Issues, Schedule, check_basic, layer_rule, TORCH_PIPELINING

NAME = "dualpipev"


def check(p: int, m: int, vpp: int) -> None:
    check_basic(NAME, p, m, vpp)
    if vpp not in (1, 2):
        raise ValueError(f"{NAME}: always 2 chunks per rank; vpp={vpp} must be 1 or 2")
    if m < 2 * p:
        raise ValueError(f"{NAME}: num_microbatches m={m} must be >= 2*pp={2 * p} (DualPipeV.step)")


def rank_order(rank: int, p: int, m: int) -> list[Action]:
    return rank_pairs(rank, p, m)[0]


def rank_pairs(rank: int, p: int, m: int, chunk_of: tuple[int, int] = (0, 1)) -> tuple[list[Action], frozenset[int]]:
    """The rank's order and the positions of the F of each overlapped F&B pair
    (``DualPipeV._forward_backward_chunk``). ``DualPipe.step`` runs the same eight steps with
    ``half_rank``, ``num_half_ranks`` and ``half_num_chunks`` for rank, p and m, its phase 0/1
    being the local chunk ``chunk_of[phase]`` (schedule/dualpipe.py)."""
    order: list[Action] = []
    pairs: set[int] = set()
    nf = [0, 0]
    nb = [0, 0]
    pending_w: list[tuple[int, int]] = []

    def f(c: int) -> None:
        order.append(Action("F", nf[c], chunk_of[c]))
        nf[c] += 1

    def b(c: int, zb: bool = False) -> None:
        order.append(Action("B", nb[c], chunk_of[c]))
        if zb:
            pending_w.append((nb[c], chunk_of[c]))
        nb[c] += 1

    def fb(c0: int, c1: int) -> None:  # _forward_backward_chunk(c0, c1): one overlapped pair
        pairs.add(len(order))
        f(c0)
        b(c1)

    def w() -> None:
        mb, c = pending_w.pop(0)
        order.append(Action("W", mb, c))

    for _ in range((p - rank - 1) * 2):  # step 1: nF0
        f(0)
    for _ in range(rank + 1):  # step 2: nF0F1
        f(0)
        f(1)
    for _ in range(p - rank - 1):  # step 3: nB1W1F1 (zero bubble)
        b(1, zb=True)
        w()
        f(1)
    for i in range(m - 2 * p + rank + 1):  # step 4 (main): nF0B1F1B0, two F&B pairs
        if i == 0 and rank == p - 1:  # the turn (DualPipe: the middle ranks): "We don't overlap these two
            # chunks to further reduce bubble size."
            f(0)
            b(1)
        else:
            fb(0, 1)
        fb(1, 0)
    for _ in range(p - rank - 1):  # step 5: nB1F1B0
        b(1)
        fb(1, 0)
    step_6 = rank + 1  # step 6: nB1B0, second half with zero bubble
    zb = False
    for i in range(step_6):
        if i == step_6 // 2 and rank % 2 == 1:
            zb = True
        b(1, zb)
        if i == step_6 // 2 and rank % 2 == 0:
            zb = True
        b(0, zb)
    for _ in range(p - rank - 1):  # step 7: nWB0 (zero bubble)
        w()
        b(0, zb=True)
    while pending_w:  # step 8: nW
        w()
    return order, frozenset(pairs)


def orders(p: int, m: int, vpp: int = 2) -> list[list[Action]]:
    check(p, m, vpp)
    return [rank_order(r, p, m) for r in range(p)]


def pairs(p: int, m: int, vpp: int = 2) -> list[frozenset[int]]:
    check(p, m, vpp)
    return [rank_pairs(r, p, m)[1] for r in range(p)]


def max_inflight(rank: int, p: int, m: int, vpp: int = 2) -> int:
    # Steps 1-2 fill 2(p-rank-1) + 2(rank+1) = 2p chunk-activations; step 3 keeps it (B1,W,F1);
    # the first F0 of step 4 (which always runs, m >= 2p) adds one before any B frees.
    return 2 * p + 1


def chunks_per_rank(vpp: int) -> int:
    return 2


def stage_of(rank: int, chunk: int, p: int, vpp: int = 2) -> int:
    return rank if chunk == 0 else 2 * p - 1 - rank


def requirements(pp: int, microbatches: int | None, vpp: int, layers: int | None) -> Issues:
    issues: Issues = []
    if vpp != 1:
        issues.append(("strategy.vpp", f"vpp={vpp} needs schedule='interleaved' (schedule='{NAME}' always "
                       "holds 2 model chunks per rank, a V; leave vpp=1)"))
    if microbatches is not None and microbatches < 2 * pp:
        issues.append(("strategy.global_batch_size",
                       f"dualpipev needs micro-batches per step m={microbatches} >= 2*pp = {2 * pp} (DualPipeV.step)"))
    if layers is not None and layers % (2 * pp):
        issues.append(("strategy.pp", f"dualpipev needs num_layers={layers} divisible by 2*pp = {2 * pp} "
                       "(or set decoder_first_pipeline_num_layers / decoder_last_pipeline_num_layers or pipeline_layers)"))
    return issues + layer_rule(pp, 2, layers, "2")


SCHEDULE = Schedule(NAME, orders, max_inflight, chunks_per_rank, stage_of, check, True,
                    requirements=requirements, menu_order=60, pairs=pairs,
                    frameworks=("torch-native",),
                    shipped_in=f"{TORCH_PIPELINING} ScheduleDualPipeV, not under torch.compile (_check_torch_compile_compatibility)")
