"""The shapes a scenario needs measured: exactly the GEMM, grouped-GEMM and attention shapes of its
workload (``workload/builder.py``: the ops one micro-batch runs on each pipeline rank, forward,
data-grad and weight-grad), the memory-bound sizes, and the collectives with their group sizes
and message sizes. A default sweep for use without a scenario is here too."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config.scenario import Scenario
from ..workload.builder import build_workload
from ..workload.ops import Attention, Collective, Gemm, GroupedGemm, Memory


@dataclass(frozen=True, slots=True, order=True)
class GemmShape:
    m: int
    n: int
    k: int
    b: int = 1
    layout: str = "TN"


@dataclass(frozen=True, slots=True, order=True)
class GroupedShape:
    groups: int
    m: int
    n: int
    k: int
    layout: str = "TN"


@dataclass(frozen=True, slots=True, order=True)
class AttentionShape:
    phase: str
    batch: int
    seq_len: int
    heads: int
    kv_heads: int
    d_qk: int
    d_v: int
    causal: bool = True


@dataclass(frozen=True, slots=True, order=True)
class CollectiveNeed:
    kind: str
    ranks: int
    min_bytes: int
    max_bytes: int


@dataclass(frozen=True)
class Needs:
    gemm: tuple[GemmShape, ...]
    grouped: tuple[GroupedShape, ...]
    attention: tuple[AttentionShape, ...]
    memory_bytes: tuple[int, ...]
    collectives: tuple[CollectiveNeed, ...]


def _pow2_floor(x: float) -> int:
    return 1 << max(int(math.floor(math.log2(max(x, 1)))), 0)


def scenario_needs(sc: Scenario) -> Needs:
    wl = build_workload(sc)
    gemm, grouped, att, mem = set(), set(), set(), set()
    coll: dict[tuple[str, int], list[float]] = {}
    for ph in wl.blocks.values():
        for op in (*ph.fwd, *ph.bwd, *ph.wgt):
            if isinstance(op, Gemm):
                gemm.add(GemmShape(op.m, op.n, op.k, op.b, op.layout or "TN"))
            elif isinstance(op, GroupedGemm):
                grouped.add(GroupedShape(op.groups, op.m, op.n, op.k, op.layout))
            elif isinstance(op, Attention) and op.impl == "flash":
                att.add(AttentionShape(op.phase, op.b, op.s_kv, op.heads, op.kv_heads, op.d_qk, op.d_v, op.causal))
            elif isinstance(op, Memory) and op.bytes > 0:
                mem.add(_pow2_floor(op.bytes))  # log-binned: bandwidth varies smoothly with size
            elif isinstance(op, Collective) and op.size > 1:
                coll.setdefault((op.kind, op.size), []).append(op.bytes)
    st = sc.strategy
    if sc.dp * st.cp > 1:
        # gradient reduction in fp32 buckets of max(40M, 1M·dp) elements (Megatron-Core
        # distributed/distributed_data_parallel.py, DistributedDataParallel bucket_size)
        kinds = ("all_reduce",) if st.zero_stage == 0 else ("reduce_scatter", "all_gather")
        for kind in kinds:
            coll.setdefault((kind, sc.dp * st.cp), []).append(4e7 * 4)
    if st.pp > 1:
        coll.setdefault(("p2p", 2), []).append(st.micro_batch_size * st.seq_len * sc.model.hidden_size * 2 / (st.tp * st.cp))
    needs = tuple(CollectiveNeed(k, n, _pow2_floor(min(v) / 4) or 1, _pow2_floor(max(v)) * 4) for (k, n), v in coll.items())
    return Needs(tuple(sorted(gemm)), tuple(sorted(grouped)), tuple(sorted(att)), tuple(sorted(mem)), tuple(sorted(needs)))


def default_needs() -> Needs:
    """A small generic sweep: square-ish GEMMs 256–8192, attention at 1k–8k tokens, copies 1 MiB–1 GiB."""
    dims = (256, 1024, 4096, 8192)
    gemm = tuple(GemmShape(m, n, k, 1, lay) for m in dims for n in dims for k in dims for lay in ("TN",))
    att = tuple(AttentionShape(p, 1, s, 32, 8, 128, 128) for p in ("fwd", "bwd") for s in (1024, 2048, 4096, 8192))
    grouped = tuple(GroupedShape(g, m, 4096, 2048) for g in (4, 8, 16) for m in (512, 2048, 8192))
    return Needs(gemm, grouped, att, tuple(1 << p for p in range(20, 31, 2)), ())
