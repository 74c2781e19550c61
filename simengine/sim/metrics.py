"""The one source of every reported number: task start/end times → step time, compute by kind,
exposed and hidden communication by kind, bubble, the critical rank (per rank, all ranks at once).

Definitions (per rank; the Estimate page, the Timeline page, the CLI and the search all read them):

* compute by kind: kernel time of F (forward_compute), B and W (backward_compute), R
  (recompute) and the optimizer;
* a collective's *exposed* time: the part during which the rank's compute stream is idle and no
  earlier-counted communication is already exposed (streams in the order compute, pp, comm, dp,
  so no instant is counted twice); communication on the compute stream itself (blocking p2p, the
  exposed part of an in-layer collective) is exposed in full;
* a collective's *hidden* time: the part under a compute kernel of the same rank;
* bubble = step time − compute − exposed communication (the rank waits on nothing it runs);
* the critical rank: the one with the least bubble (the most work), ties to the lowest rank.

So on every rank compute + exposed communication + bubble = step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compiled import Compiled
from .layout import (
    CATEGORY, CHUNK_FIXED, PAIR_FIXED, K_EXP, K_GATE, K_HID, NSTREAM, S_COMM, S_COMPUTE, S_DP, S_PP,
)

COMPUTE_CATS = ("forward_compute", "backward_compute", "recompute", "optimizer")
_OFF_STREAMS = (S_PP, S_COMM, S_DP)
_COMM_ORDER = {k: i for i, k in enumerate(("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm"))}


@dataclass(frozen=True)
class StepMetrics:
    step_time_s: float
    names: tuple[str, ...]  # category names: COMPUTE_CATS then communication kinds
    time_s: np.ndarray      # [rank, category] total time of the category's tasks
    exposed_s: np.ndarray   # [rank, category] exposed (communication categories only)
    hidden_s: np.ndarray    # [rank, category] under a compute kernel
    bubble_s: np.ndarray    # [rank]
    critical_rank: int

    @property
    def num_ranks(self) -> int:
        return len(self.bubble_s)

    def compute(self, r: int) -> dict[str, float]:
        return {k: float(self.time_s[r, i]) for i, k in enumerate(COMPUTE_CATS)}

    def comm(self, r: int, which: str = "exposed") -> dict[str, float]:
        arr = self.exposed_s if which == "exposed" else self.hidden_s
        n = len(COMPUTE_CATS)
        return {k: float(arr[r, i + n]) for i, k in enumerate(self.names[n:]) if self.time_s[r, i + n] > 0}

    def breakdown(self, r: int | None = None) -> dict[str, float]:
        """Where rank ``r``'s step goes (default: the critical rank); sums to the step time."""
        r = self.critical_rank if r is None else r
        comp = self.compute(r)
        out = {k: v for k, v in comp.items() if k != "optimizer" and (v > 0 or k in ("forward_compute", "backward_compute"))}
        comm = self.comm(r)
        for k in sorted(comm, key=lambda k: (_COMM_ORDER.get(k, len(_COMM_ORDER)), k)):
            if comm[k] > 0:
                out[k] = comm[k]
        if comp["optimizer"] > 0:
            out["optimizer"] = comp["optimizer"]
        out["bubble"] = float(self.bubble_s[r])
        return out

    def bubble_fraction(self, r: int | None = None) -> float:
        r = self.critical_rank if r is None else r
        return float(self.bubble_s[r] / self.step_time_s) if self.step_time_s > 0 else 0.0


class _Cats:
    """Per structure: each program position's rank and category, and position lists per stream."""

    __slots__ = ("names", "rank", "rc", "valid", "kernels", "compute_stream", "cs_comm", "off")
    names: tuple[str, ...]
    rank: np.ndarray
    rc: np.ndarray
    valid: np.ndarray
    kernels: np.ndarray
    compute_stream: np.ndarray
    cs_comm: np.ndarray
    off: tuple[np.ndarray, ...]


def _slot_names(comp: Compiled) -> dict[int, str]:
    """Value slot of every hidden/exposed collective part → its kind."""
    g = comp.graph
    out = {}
    for r, (_, _, chunks) in enumerate(g.sig):
        for c, (fk, bk, _) in enumerate(chunks):
            v = g.chunk_base[r][c] + CHUNK_FIXED
            for k, _ in fk + bk:
                out[v] = out[v + 1] = k
                v += 2
        for (cf, cb, _), v in g.pair_base[r].items():
            v += PAIR_FIXED
            for k, _ in chunks[cf][0] + chunks[cb][1]:
                out[v] = out[v + 1] = k
                v += 2
    return out


def build_cats(comp: Compiled) -> _Cats:
    g, pos = comp.graph, comp.pos
    slots = _slot_names(comp)
    names = list(COMPUTE_CATS)
    index = {k: i for i, k in enumerate(names)}
    n = len(comp.A) + 1
    rank = np.zeros(n, dtype=np.int64)
    cat = np.full(n, -1, dtype=np.int64)
    per_stream: list[list[list[int]]] = [[[] for _ in range(NSTREAM)] for _ in range(g.p)]
    for t, k in enumerate(g.kind):
        if k == K_GATE:
            continue
        p = pos[t]
        s = g.stream[t]
        r, local = divmod(s, NSTREAM)
        name = slots[g.val[t]] if k in (K_HID, K_EXP) else CATEGORY[k]
        i = index.get(name)
        if i is None:
            i = index[name] = len(names)
            names.append(name)
        rank[p], cat[p] = r, i
        per_stream[r][local].append(p)
    cats = _Cats()
    cats.names = tuple(names)
    cats.rank = rank
    cats.valid = np.flatnonzero(cat >= 0)
    cats.rc = rank * len(names) + cat
    cs = [p for r in range(g.p) for p in per_stream[r][S_COMPUTE]]
    cats.compute_stream = np.array(cs, dtype=np.int64)
    is_kernel = np.zeros(n, dtype=bool)
    is_kernel[cats.valid] = cat[cats.valid] < len(COMPUTE_CATS)
    cats.kernels = cats.compute_stream[is_kernel[cats.compute_stream]]
    cats.cs_comm = cats.compute_stream[~is_kernel[cats.compute_stream]]
    cats.off = tuple(np.array([p for r in range(g.p) for p in per_stream[r][s]], dtype=np.int64)
                     for s in _OFF_STREAMS)
    return cats


def _curve(us: np.ndarray, ue: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative covered time of sorted, disjoint intervals, as interpolation points."""
    n = us.size
    length = ue - us
    done = np.cumsum(length)
    xp = np.empty(2 * n)
    fp = np.empty(2 * n)
    xp[0::2], xp[1::2] = us, ue
    fp[0::2], fp[1::2] = done - length, done
    return xp, fp


def _cover(curve: tuple[np.ndarray, np.ndarray], xs: np.ndarray, xe: np.ndarray) -> np.ndarray:
    """Time of each [xs, xe] covered by the intervals behind ``curve``."""
    xp, fp = curve
    if xp.size == 0 or xs.size == 0:
        return np.zeros(xs.size)
    return np.interp(xe, xp, fp) - np.interp(xs, xp, fp)


def _union(us: np.ndarray, ue: np.ndarray, xs: np.ndarray, xe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.concatenate((us, xs))
    e = np.concatenate((ue, xe))
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    ce = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > ce[:-1]
    idx = np.flatnonzero(new)
    last = np.empty(idx.size, dtype=np.int64)
    last[:-1] = idx[1:] - 1
    last[-1] = s.size - 1
    return s[idx], ce[last]


def step_metrics(comp: Compiled, end, dur) -> StepMetrics:
    """Metrics of one simulated step from the program's end times and durations."""
    cats = comp.cats
    if cats is None:
        cats = comp.cats = build_cats(comp)
    E = np.asarray(end, dtype=float)
    D = np.empty(E.size)
    D[0] = 0.0
    D[1:] = dur
    step = float(E.max())
    # ranks laid end to end on one time axis, so one sort/interp serves every rank
    shift = cats.rank * (2.0 * step + 1.0)
    S2, E2 = E - D + shift, E + shift
    exposed = np.zeros(E.size)
    hidden = np.zeros(E.size)
    exposed[cats.cs_comm] = D[cats.cs_comm]
    kernels = _curve(S2[cats.kernels], E2[cats.kernels])
    us, ue = S2[cats.compute_stream], E2[cats.compute_stream]
    todo = [p for p in cats.off if p.size]
    for i, p in enumerate(todo):
        xs, xe = S2[p], E2[p]
        exposed[p] = np.maximum(D[p] - _cover(_curve(us, ue), xs, xe), 0.0)
        hidden[p] = _cover(kernels, xs, xe)
        if i + 1 < len(todo):
            us, ue = _union(us, ue, xs, xe)
    nr, nc = comp.graph.p, len(cats.names)
    v, rc = cats.valid, cats.rc[cats.valid]
    total = np.bincount(rc, weights=D[v], minlength=nr * nc).reshape(nr, nc)
    exp = np.bincount(rc, weights=exposed[v], minlength=nr * nc).reshape(nr, nc)
    hid = np.bincount(rc, weights=hidden[v], minlength=nr * nc).reshape(nr, nc)
    nk = len(COMPUTE_CATS)
    bubble = np.maximum(step - total[:, :nk].sum(axis=1) - exp[:, nk:].sum(axis=1), 0.0)
    return StepMetrics(step, cats.names, total, exp, hid, bubble, int(np.argmin(bubble)))
