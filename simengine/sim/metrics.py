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
* the critical rank: the one with the least bubble (the most work), ties to the lowest rank; bubbles
  within ``TIE_REL`` × step time of the least are ties (identical middle stages differ only by the
  rounding of their times, which must not pick the rank).

So on every rank compute + exposed communication + bubble = step time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .chains import Folded
from .compact import packable
from .compiled import Compiled
from .layout import (
    CATEGORY, CHUNK_FIXED, K_EXP, K_HID, KIND_NAMES, NSTREAM, PAIR_FIXED, S_COMM, S_COMPUTE, S_DP, S_PP,
)

COMPUTE_CATS = ("forward_compute", "backward_compute", "recompute", "optimizer")
_OFF_STREAMS = (S_PP, S_COMM, S_DP)
TIE_REL = 1e-9  # the tolerance the tests hold equal numbers to (tests/test_one_owner.py)
_COMM_ORDER = {k: i for i, k in enumerate(("tp_comm", "cp_comm", "ep_comm", "pp_comm", "dp_comm", "offload_comm"))}


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

    def bubble_fraction_max(self) -> float:
        """The largest ``bubble_fraction`` over the ranks: the same divisions, in one numpy call,
        and the same ``max`` over them in rank order."""
        if self.step_time_s > 0:
            return max((self.bubble_s / self.step_time_s).tolist())
        return 0.0


@packable
class _Cats:
    """Per structure: each program position's rank and category, and the positions the interval
    arithmetic needs (compute stream, its kernels, the other streams), with their value slots.

    Category totals need no times: a task's duration is its value slot's, so a (rank, category)
    total is Σ multiplicity × value over the distinct (rank·category, slot) pairs (``sums``);
    so is the exposed time of communication on the compute stream (counted in full)."""

    __slots__ = ("names", "ncat", "sums", "cs", "cs_src", "cs_rank", "kernels", "kernel_chained",
                 "kernel_slots", "kernel_rank", "off", "off_rc")
    names: tuple[str, ...]
    ncat: int
    # (rank·category, slot, multiplicity) of the totals, then (+ ranks·categories) of the exposed
    # time of compute-stream communication: one bincount gives both
    sums: tuple[np.ndarray, np.ndarray, np.ndarray]
    cs: np.ndarray        # compute-stream entries (folded program), per rank in stream order
    cs_src: np.ndarray    # ... their index in the duration array (cs - 1)
    cs_rank: np.ndarray
    kernels: np.ndarray   # indices into ``cs`` of the entries compute kernels head
    kernel_chained: np.ndarray  # indices into ``kernels`` of entries with communication folded after the kernels
    kernel_slots: tuple[np.ndarray, np.ndarray]  # ... their kernels' value slots, flattened, and where each entry's start
    kernel_rank: np.ndarray
    off: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]  # per other stream: (positions, slots, ranks)
    off_rc: np.ndarray    # rank·category of the concatenated ``off`` positions


def _sums(key: np.ndarray, slot: np.ndarray, n_slots: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct (key, slot) pairs, sorted, with how often each occurs."""
    u, cnt = np.unique(key * n_slots + slot, return_counts=True)
    return u // n_slots, u % n_slots, cnt.astype(float)


def _slot_names(comp: Compiled) -> dict[int, str]:
    """Value slot of every hidden/exposed collective part → its kind."""
    g = comp.graph
    out = {}
    for r, (_, _, chunks) in enumerate(g.sig):
        for c, (fk, bk, _, rk) in enumerate(chunks):
            v = g.chunk_base[r][c] + CHUNK_FIXED
            for k, _ in fk + bk + rk:
                out[v] = out[v + 1] = k
                v += 2
        for (cf, cb, _), v in g.pair_base[r].items():
            v += PAIR_FIXED
            for k, _ in chunks[cf][0] + chunks[cb][1]:
                out[v] = out[v + 1] = k
                v += 2
    return out


def _categories(comp: Compiled) -> tuple[list[str], np.ndarray]:
    """Category names (COMPUTE_CATS, then communication kinds in order of first appearance) and
    each task's category index (-1: a gate)."""
    g = comp.graph
    slots = _slot_names(comp)
    kind = np.asarray(g.kind, dtype=np.int64)
    comm = (kind == K_HID) | (kind == K_EXP)
    labels = sorted(set(CATEGORY.values()) | set(slots.values()))
    code = {name: i for i, name in enumerate(labels)}
    of_kind = np.full(len(KIND_NAMES), -1, dtype=np.int64)
    for k, c in CATEGORY.items():
        of_kind[k] = code[c]
    of_slot = np.full(g.n_vals, -1, dtype=np.int64)
    for v, c in slots.items():
        of_slot[v] = code[c]
    lab = np.where(comm, of_slot[np.asarray(g.val, dtype=np.int64)], of_kind[kind])
    names = list(COMPUTE_CATS)
    present, first = np.unique(lab[lab >= 0], return_index=True)
    for c in present[np.argsort(first, kind="stable")]:
        if labels[c] not in names:
            names.append(labels[c])
    remap = np.full(len(labels) + 1, -1, dtype=np.int64)
    for i, name in enumerate(names):
        remap[code[name]] = i
    return names, remap[lab]  # lab = -1 (gate) → remap[-1] = -1


def build_cats(comp: Compiled, prog: Folded) -> _Cats:
    """Categories of ``comp``'s tasks, positions in the folded program ``prog`` (chains.py).
    Tasks are numbered rank by rank in creation order, which is each stream's order."""
    g = comp.graph
    names, cat = _categories(comp)
    stream = np.asarray(g.stream, dtype=np.int64)
    val = np.asarray(g.val, dtype=np.int64)
    rank, local = stream // NSTREAM, stream % NSTREAM
    nc, nk = len(names), len(COMPUTE_CATS)
    task = cat >= 0
    rc = rank * nc + cat
    cats = _Cats()
    cats.names, cats.ncat = tuple(names), nc
    cs_comm = task & (local == S_COMPUTE) & (cat >= nk)
    tot, exp = _sums(rc[task], val[task], g.n_vals), _sums(rc[cs_comm], val[cs_comm], g.n_vals)
    cats.sums = (np.concatenate((tot[0], exp[0] + g.p * nc)), np.concatenate((tot[1], exp[1])),
                 np.concatenate((tot[2], exp[2])))
    own = task & ~prog.folded  # a folded task's time is its chain entry's
    cs = np.flatnonzero(own & (local == S_COMPUTE))
    cats.cs = prog.pos[cs]
    cats.cs_src = cats.cs - 1
    cats.cs_rank = rank[cs].astype(float)
    kern = np.flatnonzero(cat[cs] < nk)
    cats.kernels = kern
    cats.kernel_rank = cats.cs_rank[kern]
    size = np.diff(np.append(prog.starts, prog.slots.size))
    e = cats.cs[kern] - 1
    ch = np.flatnonzero(prog.kernel_run[e] < size[e])  # entries with communication after their kernels
    cats.kernel_chained = ch
    run, first = prog.kernel_run[e[ch]], prog.starts[e[ch]]
    koff = np.cumsum(np.append(0, run[:-1])).astype(np.int64)
    flat = np.repeat(first - koff, run) + np.arange(int(run.sum()))
    cats.kernel_slots = (prog.slots[flat], koff)
    off = []
    for s in _OFF_STREAMS:
        t = np.flatnonzero(own & (local == s))
        if t.size:
            off.append((t, (prog.pos[t], val[t], rank[t].astype(float))))
    cats.off = tuple(x for _, x in off)
    cats.off_rc = np.concatenate([rc[t] for t, _ in off]) if off else np.zeros(0, dtype=np.int64)
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


def _bins(index: np.ndarray, weights: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(index, weights=weights, minlength=n).astype(float, copy=False)  # (empty → int zeros)


def step_metrics(comp: Compiled, prog: Folded, end, vals: np.ndarray, dur: np.ndarray) -> StepMetrics:
    """Metrics of one simulated step from the folded program's end times and entry durations and
    the value table (the duration of every value slot, ``values.py``)."""
    cats = prog.cats
    if cats is None:
        cats = prog.cats = build_cats(comp, prog)
    E = end if isinstance(end, np.ndarray) else np.fromiter(end, dtype=float, count=len(end))
    V = vals
    step = float(E.max())
    nr, nc = comp.p, cats.ncat
    rc, slot, mult = cats.sums
    both = _bins(rc, V[slot] * mult, 2 * nr * nc)
    total, exp = both[:nr * nc], both[nr * nc:]
    hid = np.zeros(nr * nc)
    if cats.off:
        # ranks laid end to end on one time axis, so one sort/interp serves every rank
        gap = 2.0 * step + 1.0
        ue = E[cats.cs]
        us = ue - dur[cats.cs_src]
        k = cats.kernels
        ke = ue[k]  # kernels head their entry back to back (chains.py): they end Σ d_kernel after its start
        ch = cats.kernel_chained
        ks = us[k]
        if ch.size:
            fs, off = cats.kernel_slots
            ke[ch] = ks[ch] + np.add.reduceat(V[fs], off)
        sk = cats.kernel_rank * gap
        kernels = _curve(ks + sk, ke + sk)
        shift = cats.cs_rank * gap
        us += shift
        ue += shift
        exposed, hidden = [], []
        for i, (p, ps, pr) in enumerate(cats.off):
            xe = E[p]
            d = V[ps]
            sh = pr * gap
            xs, xe = xe - d + sh, xe + sh
            exposed.append(np.maximum(d - _cover(_curve(us, ue), xs, xe), 0.0))
            hidden.append(np.maximum(_cover(kernels, xs, xe), 0.0))   # (a difference of two interpolations: -1e-18 on a zero)
            if i + 1 < len(cats.off):
                us, ue = _union(us, ue, xs, xe)
        exp += _bins(cats.off_rc, np.concatenate(exposed), nr * nc)
        hid += _bins(cats.off_rc, np.concatenate(hidden), nr * nc)
    total, exp, hid = total.reshape(nr, nc), exp.reshape(nr, nc), hid.reshape(nr, nc)
    nk = len(COMPUTE_CATS)
    bubble = np.maximum(step - total[:, :nk].sum(axis=1) - exp[:, nk:].sum(axis=1), 0.0)
    return StepMetrics(step, cats.names, total, exp, hid, bubble, critical_rank(bubble, step))


def critical_rank(bubble: np.ndarray, step: float) -> int:
    """The lowest rank whose bubble is the least, up to ``TIE_REL`` × the step time."""
    return int(np.flatnonzero(bubble <= bubble.min() + TIE_REL * step)[0])
