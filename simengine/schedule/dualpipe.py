"""DualPipe, the bidirectional pipeline (DeepSeek-V3 report arXiv:2412.19437 §3.2.1, Fig. 5,
Table 2; open-source deepseek-ai/DualPipe ``dualpipe/dualpipe.py``, ``DualPipe.step``).

p ranks (p even) run two pipelines at once: half of the m micro-batches enter at rank 0 and flow
to rank p-1 (direction 0), the other half enter at rank p-1 and flow back to rank 0 (direction
1). Every rank holds both copies of its stages: local chunk 0 is stage r of direction 0, local
chunk 1 stage p-1-r of direction 1 (the same layers as direction 0's stage p-1-r), so a rank
holds the parameters of two stages ("Parameter Per Device 2×") and each direction is its own
chain of p stages (``chains = 2``; simulator micro-batch ids = m/2, one per direction).

``step`` runs the eight steps of DualPipeV with ``half_rank = min(r, p-1-r)``,
``num_half_ranks = p/2`` and ``half_num_chunks = m/2``; its phase 0 is direction 0 on the first
half of the ranks and direction 1 on the second ("For the second half of the ranks: phase 0 means
reverse direction"). The F&B pairs (``_forward_backward_chunk``) are those of dualpipev.py; the
middle ranks do not overlap the first pair of step 4. Approximation: the gradient all-reduce
between the two copies of a stage (ranks r and p-1-r) is not modelled.
"""

from __future__ import annotations

from . import dualpipev
from .action import Action
from .base import Issues, Schedule, check_basic, layer_rule

NAME = "dualpipe"


def check(p: int, m: int, vpp: int) -> None:
    """``m`` = micro-batches per direction (the simulator's ids), half of DualPipe's num_chunks."""
    check_basic(NAME, p, m, vpp)
    if vpp != 1:
        raise ValueError(f"{NAME}: always 2 chunks per rank (one per direction); vpp={vpp} must be 1")
    if p % 2:
        raise ValueError(f"{NAME}: pp={p} must be even (DualPipe.step: num_ranks % 2 == 0)")
    if m < p:
        raise ValueError(f"{NAME}: micro-batches per direction m={m} must be >= pp={p} (num_chunks >= 2*num_ranks)")


def _mapping(rank: int, p: int) -> tuple[int, tuple[int, int]]:
    half = min(rank, p - 1 - rank)
    return half, ((0, 1) if rank < p // 2 else (1, 0))


def orders(p: int, m: int, vpp: int = 1) -> list[list[Action]]:
    return [order for order, _ in _all(p, m, vpp)]


def pairs(p: int, m: int, vpp: int = 1) -> list[frozenset[int]]:
    return [pr for _, pr in _all(p, m, vpp)]


def _all(p: int, m: int, vpp: int) -> list[tuple[list[Action], frozenset[int]]]:
    check(p, m, vpp)
    out = []
    for r in range(p):
        half, chunk_of = _mapping(r, p)
        out.append(dualpipev.rank_pairs(half, p // 2, m, chunk_of))
    return out


def max_inflight(rank: int, p: int, m: int, vpp: int = 1) -> int:
    # dualpipev's 2·P + 1 with P = p/2 ranks of the half: "Activation Per Device PP+1" (Table 2)
    return p + 1


def chunks_per_rank(vpp: int) -> int:
    return 2


def stage_of(rank: int, chunk: int, p: int, vpp: int = 1) -> int:
    """Direction 0: stages 0..p-1 (rank r is stage r); direction 1: stages p..2p-1, entered at
    rank p-1 (stage p) and left at rank 0 (stage 2p-1). Stage s holds the layers of s mod p."""
    return rank if chunk == 0 else 2 * p - 1 - rank


def requirements(pp: int, microbatches: int | None, vpp: int, layers: int | None) -> Issues:
    issues: Issues = []
    if vpp != 1:
        issues.append(("strategy.vpp", f"vpp={vpp} needs schedule='interleaved' (schedule='{NAME}' holds one chunk "
                       "per direction on every rank; leave vpp=1)"))
    if pp % 2:
        issues.append(("strategy.pp", f"dualpipe needs an even pp (pp={pp}; DualPipe.step: num_ranks % 2 == 0)"))
    if microbatches is not None and (microbatches % 2 or microbatches < 2 * pp):
        issues.append(("strategy.global_batch_size", f"dualpipe needs an even number of micro-batches per step "
                       f"m={microbatches} >= 2*pp = {2 * pp} (half per direction; DualPipe.step)"))
    return issues + layer_rule(pp, 1, layers)


SCHEDULE = Schedule(NAME, orders, max_inflight, chunks_per_rank, stage_of, check, True,
                    requirements=requirements, menu_order=65, pairs=pairs, chains=2,
                    frameworks=(),
                    shipped_in="DeepSeek's reference implementation (deepseek-ai/DualPipe dualpipe/dualpipe.py DualPipe) only")
