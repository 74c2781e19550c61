"""Long pipelines by their periodic steady state: two short runs and a certificate instead of m.

1F1B and interleaved 1F1B repeat one unit in their steady state: P micro-batches (1F1B: P = 1;
interleaved: P = pp, Megatron's micro-batch group, ``schedule/interleaved.py``), whose tasks
depend on the tasks before them exactly as the unit before did. The program is max-plus linear
(``end = max(inputs) + d``, ``compiled.py``), so once the end times of a window of steady tasks
are those of the same tasks one unit earlier plus a constant λ — a window at least as wide as
the dependencies reach back (``D`` micro-batches) plus one unit — every later unit repeats them
shifted by λ (induction over the program order: each input of a later task lies in the window
or after it). Then a program with k more units is the same program with k shifted copies of a
unit inserted and its cool-down shifted by k·λ, so the step time and every per-rank total
(compute, exposed and hidden communication by kind; the bubble follows) are affine in k: the
bubble (p − 1)/(v·m) of Narayanan et al. 2021 §2.2 is the same statement for uniform stages.

So ``periodic_metrics`` runs m_a and m_a + P micro-batches in full, checks the certificate on
the m_a run (every task of the window against its shift, ``_Shift``), and extrapolates every
field of ``StepMetrics``; it returns None (the caller runs the full program) whenever a
precondition fails: another schedule, Megatron-Core's combined 1F1B, m too short to gain,
a window whose structure is not shift-invariant, or end times that are not yet periodic
(non-uniform stages whose transient outlasts the window). A certificate that holds only to the
rounding tolerance ``TOL`` per unit moves a result by at most k·TOL of the step time.
tests/test_periodic.py holds the extrapolation to the full engine on random configurations.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .chains import folded_for
from .compiled import Compiled
from .layout import K_B, K_F, K_GATE, K_P2P, K_R, K_W, NSTREAM
from .metrics import COMPUTE_CATS, StepMetrics, critical_rank

SCHEDULES = ("1f1b", "interleaved")
TOL = 1e-13  # spread of the window's shifts, relative to the step time (float rounding only)


def period(inp) -> int:
    """Micro-batches per repeating unit of the steady state, 0 when none is used here."""
    if inp.schedule not in SCHEDULES or inp.fb_overlap:
        return 0
    return inp.pp if inp.schedule == "interleaved" else 1


class _Shift:
    """Per compiled structure: the window's entries and the entries of their shifts one unit
    later (``x``, ``y``: end indices of the folded program), or ``ok = False`` when the structure
    has no shift-invariant window. Tasks are placed by their *level*: the index of the F or B
    action that made them in their rank's order (one unit = ``2·P·chunks`` levels); the window is
    a run of levels, which keeps it about one unit wide (a task's inputs sit a few levels back,
    ``reach``), where micro-batch ids would smear it over the warm-up."""

    __slots__ = ("ok", "x", "y", "reach")

    def __init__(self, comp: Compiled, P: int):
        self.ok = False
        self.x = self.y = np.zeros(0, dtype=np.int64)
        self.reach = 0
        g = comp.graph
        n = len(g.kind)
        mb = np.asarray(g.mb, dtype=np.int64)
        m = g.m
        # a task's identity: (stream, kind, chunk, aux, value slot) and its micro-batch — unique by
        # construction (graph.py: an F's and a B's exposed collectives differ by their value slot)
        cols = np.stack([np.asarray(x, dtype=np.int64) for x in (g.stream, g.kind, g.chunk, g.aux, g.val)])
        _, code = np.unique(cols, axis=1, return_inverse=True)
        ident = code.reshape(-1) * (m + 2) + mb + 1
        order = np.argsort(ident, kind="stable")
        sid = ident[order]
        if n == 0 or np.any(sid[1:] == sid[:-1]):
            return
        want = ident + P  # the same task P micro-batches later
        j = np.minimum(np.searchsorted(sid, want), n - 1)
        shift = np.where((sid[j] == want) & (mb >= 0) & (mb + P < m), order[j], -1)
        level = _levels(g)
        unit = 2 * P * g.nch  # one F and one B per micro-batch-chunk
        prev = np.full(n, -1, dtype=np.int64)
        for lst in g.streams:
            if len(lst) > 1:
                prev[np.asarray(lst[1:])] = lst[:-1]
        ins = (prev, np.asarray(g.d1, dtype=np.int64), np.asarray(g.d2, dtype=np.int64))
        sh0 = np.maximum(shift, 0)
        steady = (shift >= 0) & (level[sh0] - level == unit)
        for u in ins:
            has = u >= 0
            u0 = np.maximum(u, 0)
            su = np.where(has, shift[u0], -1)
            # the shifted task reads the shifted inputs, input by input (a missing shift fails)
            steady &= np.where(has, (su >= 0) & (u[sh0] == su) & (mb[u0] >= 0), u[sh0] < 0)
        prog = folded_for(comp)
        steady &= _same_entries(prog, shift)
        reach = 0
        for u in ins:
            s = steady & (u >= 0)
            if s.any():
                reach = max(reach, int((level[s] - level[u[s]]).max()))
        width = reach + unit
        top = int(level.max()) + 1
        bad = np.zeros(top, dtype=bool)
        np.logical_or.at(bad, level, ~steady & (mb >= 0))
        # the latest run of ``width`` steady levels: the transient gets the most room
        hi, run = -1, 0
        for v in range(top - 1, -1, -1):
            run = run + 1 if not bad[v] else 0
            if run >= width:
                hi = v + width - 1
                break
        if hi < 0:
            return
        t = np.flatnonzero((level > hi - width) & (level <= hi) & (mb >= 0) & ~prog.folded)
        if t.size == 0:
            return
        self.x, self.y = prog.pos[t], prog.pos[shift[t]]
        self.reach, self.ok = reach, True


def _same_entries(prog, shift: np.ndarray) -> np.ndarray:
    """Per task, whether the program entry holding it (chains.py folds a chain of tasks into one
    entry, whose end is the chain's last) holds the shifts of the same tasks: only then do the
    entries' ends compare like for like."""
    pos, folded = prog.pos, prog.folded
    n = pos.size
    hd = np.zeros(int(pos.max()) + 1 if n else 1, dtype=np.int64)
    own = np.flatnonzero(~folded)
    hd[pos[own]] = own
    head = hd[pos]
    s, sh = np.maximum(shift, 0), shift[head]
    member = (shift >= 0) & (sh >= 0) & (pos[s] == pos[np.maximum(sh, 0)]) & (folded[s] == folded)
    cnt = np.bincount(pos, minlength=hd.size)
    ok = np.ones(n, dtype=bool)
    np.logical_and.at(ok, head, member)
    ok &= (sh >= 0) & (cnt[pos] == cnt[pos[np.maximum(sh, 0)]])
    return ok[head]


def _levels(g) -> np.ndarray:
    """Per task, the index of the action that made it in its rank's order. Tasks are numbered
    rank by rank in creation order (graph.py); an action's tasks share (micro-batch, chunk,
    phase), the phase read off the kind (F: forward; R, B, W: backward; gates and p2p sends by
    their ``aux``) and carried by the collectives and buckets that follow."""
    kind = np.asarray(g.kind, dtype=np.int64)
    aux = np.asarray(g.aux, dtype=np.int64)
    phase = _PHASE[kind]
    own = (kind == K_GATE) | (kind == K_P2P)
    phase = np.where(own, aux, phase)
    idx = np.where(phase >= 0, np.arange(phase.size), 0)
    phase = phase[np.maximum.accumulate(idx)]  # collectives inherit the phase before them
    rank = np.asarray(g.stream, dtype=np.int64) // NSTREAM
    mb = np.asarray(g.mb, dtype=np.int64)
    chunk = np.asarray(g.chunk, dtype=np.int64)
    new = np.ones(phase.size, dtype=bool)
    new[1:] = (mb[1:] != mb[:-1]) | (chunk[1:] != chunk[:-1]) | (phase[1:] != phase[:-1]) | (rank[1:] != rank[:-1])
    count = np.cumsum(new) - 1
    first = np.ones(phase.size, dtype=bool)
    first[1:] = rank[1:] != rank[:-1]
    start = count[np.maximum.accumulate(np.where(first, np.arange(phase.size), 0))]
    return count - start


_PHASE = np.full(16, -1, dtype=np.int64)
_PHASE[K_F] = 0
_PHASE[[K_R, K_B, K_W]] = 1


def _shift_for(comp: Compiled, P: int) -> _Shift:
    sh = comp.periodic
    if sh is None or sh[0] != P:
        sh = comp.periodic = (P, _Shift(comp, P))
    return sh[1]


def first_length(inp, P: int) -> int:
    """Micro-batches of the shorter run: warm-up and cool-down (each at most ``2·pp + (vpp−1)·pp``
    actions, ``schedule/interleaved.py`` ``_warmup``; 1F1B's ``pp − 1`` is less), the window
    (reach + one unit) and the unit its shift needs, a few levels of transient, in whole units."""
    unit = 2 * P * inp.vpp
    warm = 2 * inp.pp + (inp.vpp - 1) * inp.pp
    return -(-(2 * warm + 2 * unit + 8) // unit) * P


def periodic_metrics(inp, run, metrics) -> StepMetrics | None:
    """``metrics(inp)`` of a long pipeline from two short runs (module docstring), or None.
    ``run(inp)`` → (compiled, folded, values, durations, end table) of the full program;
    ``metrics(comp, prog, end, values, durations)`` → its StepMetrics (engine.py passes its own).
    A certificate that fails at the first length is tried once at twice that length."""
    P = period(inp)
    if P == 0:
        return None
    m = inp.num_microbatches
    m_a = first_length(inp, P)
    for _ in range(2):
        if m < 2 * m_a + 2 * P:  # not worth it: the short runs would be as long as the program
            return None
        met = _try(inp, run, metrics, P, m_a)
        if met is not None:
            return met
        m_a *= 2
    return None


def _try(inp, run, metrics, P: int, m_a: int) -> StepMetrics | None:
    comp, prog, vals, dur, end = run(dataclasses.replace(inp, num_microbatches=m_a))
    sh = _shift_for(comp, P)
    if not sh.ok:
        return None
    E = np.asarray(end, dtype=float)
    d = E[sh.y] - E[sh.x]
    if float(d.max() - d.min()) > TOL * float(E.max()):
        return None
    ma = metrics(comp, prog, end, vals, dur)
    mb_ = metrics(*_reorder(run(dataclasses.replace(inp, num_microbatches=m_a + P))))
    if ma.names != mb_.names:
        return None
    return _extrapolate(ma, mb_, (inp.num_microbatches - m_a - P) // P)


def _reorder(r):
    comp, prog, vals, dur, end = r
    return comp, prog, end, vals, dur


def _extrapolate(a: StepMetrics, b: StepMetrics, k: int) -> StepMetrics:
    """``b`` plus k units of ``b − a``; the bubble as metrics.py defines it."""
    step = b.step_time_s + k * (b.step_time_s - a.step_time_s)
    time_s = b.time_s + k * (b.time_s - a.time_s)
    # exposed and hidden times are ≥ 0; what rounding leaves below ``TOL`` of the step is none
    exp = _snap(b.exposed_s + k * (b.exposed_s - a.exposed_s), TOL * step)
    hid = _snap(b.hidden_s + k * (b.hidden_s - a.hidden_s), TOL * step)
    nk = len(COMPUTE_CATS)
    bubble = np.maximum(step - time_s[:, :nk].sum(axis=1) - exp[:, nk:].sum(axis=1), 0.0)
    return StepMetrics(step, b.names, time_s, exp, hid, bubble, critical_rank(bubble, step))


def _snap(x: np.ndarray, eps: float) -> np.ndarray:
    return np.where(x > eps, x, 0.0)
