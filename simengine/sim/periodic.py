"""Long pipelines by their periodic steady state: two short runs and a certificate instead of m.

1F1B and interleaved 1F1B repeat one unit in their steady state: P micro-batches (1F1B: P = 1;
interleaved: P = pp, Megatron's micro-batch group, ``schedule/interleaved.py``), whose tasks
depend on the tasks before them exactly as the unit before did. The program is max-plus linear
(``end = max(inputs) + d``, ``compiled.py``), so once the end times of a window of steady tasks
are those of the same tasks one unit earlier plus a constant λ — a window at least as wide as
the dependencies reach back (``reach``, in actions of a rank's order) plus one unit — every later unit repeats them
shifted by λ (induction over the program order: each input of a later task lies in the window
or after it). Then a program with k more units is the same program with k shifted copies of a
unit inserted and its cool-down shifted by k·λ, so the step time and every per-rank total
(compute, exposed and hidden communication by kind; the bubble follows) are affine in k: the
bubble (p − 1)/(v·m) of Narayanan et al. 2021 §2.2 is the same statement for uniform stages.

So ``periodic_metrics`` runs m_a micro-batches, checks the certificate on that run (every
entry of the window against its shift, ``_Shift``), builds the m_a + P run's end table from it
with one unit inserted after the window (``_Insert``; accepted only if it satisfies every entry
of that program, else that program runs too), and extrapolates every field of ``StepMetrics``
from the two (``metrics.py`` computes both); it returns None (the caller runs the full program) whenever a
precondition fails: another schedule, Megatron-Core's combined 1F1B, m too short to gain,
a window whose structure is not shift-invariant, or end times that are not yet periodic
(non-uniform stages whose transient outlasts the window). A certificate that holds only to the
rounding tolerance ``TOL`` per unit moves a result by at most k·TOL of the step time.

Checked per call: the window's structure (cached per compiled structure) and its end times, and
the inserted table against the m_a + P program. Not checked per call, a property of the two
schedules' orders: that the cool-down after k more units has the same structure, shifted
(``schedule/one_f_one_b.py``, ``schedule/interleaved.py``: warm-up and cool-down counts do not
depend on m once m·vpp exceeds the warm-up). tests/test_periodic.py holds the extrapolation to
the full engine on random configurations.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .chains import folded_for
from .compact import packable
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


@packable
class _Shift:
    """Per compiled structure: the window's entries and the entries of their shifts one unit
    later (``x``, ``y``: end indices of the folded program), or ``ok = False`` when the structure
    has no shift-invariant window. Tasks are placed by their *level*: the index of the F or B
    action that made them in their rank's order (one unit = ``2·P·chunks`` levels); the window is
    a run of levels, which keeps it about one unit wide (a task's inputs sit a few levels back,
    ``reach``), where micro-batch ids would smear it over the warm-up."""

    __slots__ = ("ok", "x", "y", "reach", "hi", "ident", "order", "sid", "level", "radix")

    def __init__(self, comp: Compiled, P: int):
        self.ok = False
        self.x = self.y = np.zeros(0, dtype=np.int64)
        self.reach = 0
        g = comp.graph
        n = len(g.kind)
        mb = np.asarray(g.mb, dtype=np.int64)
        m = g.m
        got = identities(g, g.m)
        if got is None:
            return
        ident, self.radix = got
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
        self.reach, self.ok, self.hi = reach, True, hi
        self.ident, self.order, self.sid, self.level = ident, order, sid, level


def identities(g, m: int) -> tuple[np.ndarray, tuple] | None:
    """A task's identity: (stream, kind, chunk, aux, value slot) and its micro-batch, one integer
    (unique by construction, graph.py: an F's and a B's exposed collectives differ by their value
    slot); the same numbers for the same task of any structure of the same stages with up to
    ``m`` micro-batches, and the radix. None when the mixed radix would not fit in 62 bits."""
    cols = [np.asarray(x, dtype=np.int64) for x in (g.stream, g.kind, g.chunk, g.aux, g.val)]
    radix = (g.p * NSTREAM, 16, g.nch + 1, int(cols[3].max(initial=0)) + 2, g.n_vals + 1, m + 2)
    if float(np.prod(np.asarray(radix, dtype=float))) >= 2.0**62:
        return None
    out = cols[0]
    for c, r, off in zip(cols[1:], radix[1:5], (0, 1, 1, 0)):
        out = out * r + (c + off)
    return out * radix[5] + np.asarray(g.mb, dtype=np.int64) + 1, radix[:5]


@packable
class _Insert:
    """Per pair (structure of m_a, structure of m_a + P): where each task entry of the longer
    program takes its end from the shorter one — itself up to the window's last level, the task
    one unit earlier (+ λ) after it (module docstring: the unit inserted after the window) — and
    its entries that head no task (zero-length joins, ``compiled.py``), filled from their inputs."""

    __slots__ = ("ok", "dst", "src", "shifted", "joins", "A", "B", "lam_mask")

    def __init__(self, sh: "_Shift", prog_a, comp_b: Compiled, P: int):
        self.ok = False
        gb = comp_b.graph
        got = identities(gb, gb.m)
        if got is None or got[1] != sh.radix:
            return
        ib = got[0]
        prog_b = folded_for(comp_b)
        own = np.flatnonzero(~prog_b.folded)
        mb = np.asarray(gb.mb, dtype=np.int64)[own]
        later = _levels(gb)[own] > sh.hi
        # identities of the shorter structure use its radix: re-encode the micro-batch digit
        ma, mb_n = gb.m - P, gb.m
        base = (ib[own] - (mb + 1)) // (mb_n + 2)
        want = base * (ma + 2) + np.where(later & (mb >= 0), mb - P, mb) + 1
        j = np.minimum(np.searchsorted(sh.sid, want), sh.sid.size - 1)
        found = sh.sid[j] == want
        src_task = sh.order[j]
        if not found.all() or prog_a.folded[src_task].any():
            return
        self.dst = prog_b.pos[own]
        self.src = prog_a.pos[src_task]
        self.shifted = later
        heads = np.zeros(prog_b.a.size + 1, dtype=bool)
        heads[self.dst] = True
        heads[0] = True
        self.joins = np.flatnonzero(~heads)
        self.A = prog_b.a  # the longer program's inputs, for the check
        self.B = prog_b.b
        self.lam_mask = later.astype(float)
        self.ok = True

    def ends(self, E_a: np.ndarray, lam: float, prog_b, dur_b: np.ndarray) -> np.ndarray | None:
        """The longer program's end table, or None when it does not satisfy every entry of the
        program to ``TOL`` of the step (the program has one solution: this is it, up to the
        rounding ``TOL`` bounds, carried at most along the longest path)."""
        E = np.zeros(self.A.size + 1)
        E[self.dst] = E_a[self.src] + lam * self.lam_mask
        if self.joins.size:
            j = self.joins
            E[j] = np.maximum(E[self.A[j - 1]], E[self.B[j - 1]]) + dur_b[j - 1]
        A, B = self.A, self.B
        res = np.abs(E[1:] - (np.maximum(E[A], E[B]) + dur_b))
        if float(res.max(initial=0.0)) > TOL * float(E.max()):
            return None
        return E


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
    phase = np.where(kind == K_GATE, _GATE_PHASE[np.minimum(aux, _GATE_PHASE.size - 1)],
                     np.where(kind == K_P2P, aux, _PHASE[kind]))
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
# a gate's phase by its ``aux`` (graph.py): 0 a forward's, 1 a backward's, 2 an F&B pair's, 3 a
# recompute's (part of its backward)
_GATE_PHASE = np.array([0, 1, 2, 1], dtype=np.int64)


def _shift_for(comp: Compiled, P: int) -> _Shift:
    memo = _memo(comp)
    sh = memo.get(("shift", P))
    if sh is None:
        sh = memo[("shift", P)] = _Shift(comp, P)
    return sh


def _insert_for(comp_b: Compiled, comp_a: Compiled, sh: _Shift, prog_a, P: int) -> _Insert:
    memo = _memo(comp_b)
    ins = memo.get(("insert", comp_a.key))
    if ins is None:
        ins = memo[("insert", comp_a.key)] = _Insert(sh, prog_a, comp_b, P)
    return ins


def _memo(comp: Compiled) -> dict:
    if comp.periodic is None:
        comp.periodic = {}
    return comp.periodic


def first_length(inp, P: int) -> int:
    """Micro-batches of the shorter run: warm-up and cool-down (each at most ``2·pp + (vpp−1)·pp``
    actions, ``schedule/interleaved.py`` ``_warmup``; 1F1B's ``pp − 1`` is less), the window
    (reach + one unit) and the unit its shift needs, a few levels of transient, in whole units."""
    unit = 2 * P * inp.vpp
    warm = 2 * inp.pp + (inp.vpp - 1) * inp.pp
    return -(-(2 * warm + 2 * unit + 8) // unit) * P


def periodic_metrics(inp, prepare, loop, metrics) -> StepMetrics | None:
    """``metrics(inp)`` of a long pipeline from two short runs (module docstring), or None.
    ``prepare(inp)`` → (compiled, folded program, values, durations); ``loop(comp, prog, dur)`` →
    the folded program's end table; ``metrics(comp, prog, end, values, durations)`` → its
    StepMetrics (engine.py passes its own). A certificate that fails at the first length is
    tried once at twice that length."""
    P = period(inp)
    if P == 0:
        return None
    m = inp.num_microbatches
    m_a = first_length(inp, P)
    for _ in range(2):
        if m < 2 * m_a + 2 * P:  # not worth it: the short runs would be as long as the program
            return None
        met = _try(inp, prepare, loop, metrics, P, m_a)
        if met is not None:
            return met
        m_a *= 2
    return None


def _try(inp, prepare, loop, metrics, P: int, m_a: int) -> StepMetrics | None:
    comp, prog, vals, dur = prepare(dataclasses.replace(inp, num_microbatches=m_a))
    end = loop(comp, prog, dur)
    sh = _shift_for(comp, P)
    if not sh.ok:
        return None
    E = np.asarray(end, dtype=float)
    d = E[sh.y] - E[sh.x]
    if float(d.max() - d.min()) > TOL * float(E.max()):
        return None
    ma = metrics(comp, prog, E, vals, dur)
    comp_b, prog_b, vals_b, dur_b = prepare(dataclasses.replace(inp, num_microbatches=m_a + P))
    E_b = _inserted(comp_b, prog_b, dur_b, comp, prog, sh, E, float(d.mean()), P)
    if E_b is None:  # the unit inserted does not satisfy the program: run it
        E_b = np.asarray(loop(comp_b, prog_b, dur_b), dtype=float)
    mb_ = metrics(comp_b, prog_b, E_b, vals_b, dur_b)
    if ma.names != mb_.names:
        return None
    return _extrapolate(ma, mb_, (inp.num_microbatches - m_a - P) // P)


def _inserted(comp_b, prog_b, dur_b, comp_a, prog_a, sh: _Shift, E_a: np.ndarray, lam: float, P: int):
    """The m_a + P program's end table without running it: the m_a table with one unit inserted
    after the window (``_Insert``), accepted only if it satisfies every entry of the program
    (``end = max(inputs) + d``, which has one solution) to ``TOL`` of the step."""
    ins = _insert_for(comp_b, comp_a, sh, prog_a, P)
    if not ins.ok:
        return None
    return ins.ends(E_a, lam, prog_b, dur_b)


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
