"""What the timeline needs from a compiled structure, precomputed once per structure.

Per rank: the spans to emit per stream (gates dropped; pieces of a split task flagged so
back-to-back pieces merge into one span) and the memory units (F start → last backward end;
F/R/B extent). Span kinds: F, R, B, W, optimizer for compute, and the breakdown names
(tp_comm, cp_comm, ep_comm, dp_comm, pp_comm, …) for communication.
"""

from __future__ import annotations

import numpy as np

from .graph import TaskGraph
from .layout import CATEGORY, K_B, K_EXP, K_F, K_GATE, K_HID, K_OPT, K_R, K_W, KIND_NAMES, NSTREAM, STREAMS

_COMPUTE = (K_F, K_R, K_B, K_W, K_OPT)
_PIECED = (K_F, K_B, K_W)


class RankPlan:
    __slots__ = ("spans", "act_first", "act_free", "act_chunk", "x_first", "x_last", "x_chunk")
    spans: list[tuple[str, list[tuple[str, int, int, int, bool, bool]]]]
    act_first: np.ndarray
    act_free: np.ndarray
    act_chunk: np.ndarray
    x_first: np.ndarray
    x_last: np.ndarray
    x_chunk: np.ndarray


def _label(kind: int, val: int, slots: dict[int, str]) -> str:
    if kind in (K_HID, K_EXP):
        return slots[val]
    if kind in _COMPUTE:
        return "optimizer" if kind == K_OPT else KIND_NAMES[kind]
    return CATEGORY[kind]


def _memory_units(units: dict[tuple[int, int, int], list[int]], rp: RankPlan) -> None:
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


def build_plan(g: TaskGraph, pos: list[int], slots: dict[int, str]) -> list[RankPlan]:
    kind_a, mb_a, ch_a, val_a = g.kind, g.mb, g.chunk, g.val
    plans = []
    for r in range(g.p):
        rp = RankPlan()
        rp.spans = []
        units: dict[tuple[int, int, int], list[int]] = {}
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
                items.append((_label(k, val_a[t], slots), mb, c, p, cont, k in _COMPUTE))
                if k in _COMPUTE and k != K_OPT:
                    u = units.get(key)
                    if u is None:
                        units[key] = [p, p]
                    else:
                        u[1] = p
            rp.spans.append((STREAMS[sid], items))
        _memory_units(units, rp)
        plans.append(rp)
    return plans
