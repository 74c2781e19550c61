"""What the timeline needs from a compiled structure, precomputed once per structure.

Per rank: the spans to emit per stream (gates dropped; pieces of a split task flagged so
back-to-back pieces merge into one span), the compute kernels (for busy time and exposure), the
comm tasks grouped by label, and the memory units (F start → last backward end; F/R/B extent).
"""

from __future__ import annotations

import numpy as np

from .graph import TaskGraph
from .layout import (
    K_B, K_BC, K_F, K_FC, K_GATE, K_OPT, K_R, K_W, KIND_NAMES, NSTREAM, S_COMPUTE, STREAMS,
)

_COMPUTE = (K_F, K_R, K_B, K_W, K_OPT)
_PIECED = (K_F, K_B, K_W)


class RankPlan:
    __slots__ = ("spans", "stream_pos", "kernel_pos", "comm_pos", "act_first", "act_free",
                 "act_chunk", "x_first", "x_last", "x_chunk")


def _label(kind: int, val: int) -> str | int:
    """Fixed label, or the value slot whose collective kind names the span (FC/BC)."""
    if kind in (K_FC, K_BC):
        return val
    return "optimizer" if kind == K_OPT else KIND_NAMES[kind]


def build_plan(g: TaskGraph, pos: list[int]) -> list[RankPlan]:
    kind_a, mb_a, ch_a, val_a = g.kind, g.mb, g.chunk, g.val
    plans = []
    for r in range(g.p):
        rp = RankPlan()
        rp.spans = []
        units: dict[tuple[int, int, int], list[int]] = {}
        comm: dict[str | int, list[int]] = {}
        kernels: list[int] = []
        for sid in range(NSTREAM):
            items = []
            prev_key = None
            for t in g.streams[r * NSTREAM + sid]:
                k = kind_a[t]
                if k == K_GATE:
                    continue
                p, mb, c = pos[t], mb_a[t], ch_a[t]
                key = (k, mb, c)
                cont = k in _PIECED and key == prev_key
                prev_key = key
                lab = _label(k, val_a[t])
                items.append((lab, mb, c, p, cont))
                if sid == S_COMPUTE and k in _COMPUTE:
                    kernels.append(p)
                    if k != K_OPT:
                        u = units.get(key)
                        if u is None:
                            units[key] = [p, p]
                        else:
                            u[1] = p
                elif k not in _COMPUTE:
                    comm.setdefault(lab, []).append(p)
            rp.spans.append((STREAMS[sid], items))
        rp.stream_pos = np.array([it[3] for it in rp.spans[S_COMPUTE][1]], dtype=np.int64)
        rp.kernel_pos = np.array(kernels, dtype=np.int64)
        rp.comm_pos = {lab: np.array(v, dtype=np.int64) for lab, v in comm.items()}
        first, free, chunk, xf, xl, xc = [], [], [], [], [], []
        for (k, mb, c), (a, b) in units.items():
            if k == K_F:
                first.append(a)
                last = units.get((K_W, mb, c)) or units[(K_B, mb, c)]
                free.append(last[1])
                chunk.append(c)
            if k != K_W:
                xf.append(a)
                xl.append(b)
                xc.append(c)
        rp.act_first, rp.act_free, rp.act_chunk = (np.array(x, dtype=np.int64) for x in (first, free, chunk))
        rp.x_first, rp.x_last, rp.x_chunk = (np.array(x, dtype=np.int64) for x in (xf, xl, xc))
        plans.append(rp)
    return plans
