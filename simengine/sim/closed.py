"""Closed forms for the DP bucket pieces: the folded program (chains.py) with the runs a DP
bucket structure makes replaced by a few entries, evaluated by numpy before and after the loop.

With ``overlap_param_gather`` a rank's parameter all-gathers open the step one after another on
its dp stream (``end_j = Σ_{i≤j} d_i``: nothing else feeds them) and the first F of each chunk
is split into one piece per bucket, piece j waiting for its gather (graph.py ``forward``):
``e_j = max(e_{j-1}, P_j) + d_j`` from the gate ``x``. Unrolled (max-plus algebra),

    e_j = max(x, M_j) + S_j,  M_j = max_{i≤j} (P_i − S_{i−1}),  S_j = Σ_{i≤j} d_i,

so the loop needs one entry ``max(x, M_n) + S_n`` (``M_n`` a constant entry) for the group.
With ``overlap_grad_reduce`` the final backward of each chunk is split into pieces
``e_j = x + S_j`` (x = the first piece's end, S_j = the pieces after it), each followed by its
bucket's reduce on the dp stream, ``g_j = max(g_{j−1}, e_j) + b_j``:

    g_j = max(g_{−1}, x + K_j) + B_j,  K_j = max_{i≤j} (S_i − B_{i−1}),  B_j = Σ_{i≤j} b_i,

so the loop needs ``x + S_n`` (the last piece, read by the next compute), ``y = x + K_n`` and
``max(g_{−1}, y) + B_n`` (the last reduce, read by the next bucket group and the optimizer).
Every end the loop skips is then written by the same formulas from the loop's ends, so the
metrics read the folded program's full end table (equal up to the rounding of the sums:
tests/test_fast_path.py holds them to 1e-9 of the step against a per-task list scheduler).

Rows are padded at their ends (index 0); every formula is a prefix sum or a prefix max along
the row, so a padded slot never reaches a real one and is never read back.

A run is reduced only when the program has exactly that shape (inputs checked entry by entry,
no other reader of a skipped end); anything else stays in the loop as it is.
"""

from __future__ import annotations

import numpy as np

from .chains import Folded
from .compact import packable
from .compiled import Compiled
from .layout import K_B, K_DPG, K_DPP, K_F, K_R, K_W

_EMPTY = np.zeros((0, 0))
# reduce a program only when that removes at least this share of its entries: measured on the
# presets and the 405B/16k structures, a reduction that removes less runs no faster than the
# loop over the entries it removes (numpy's per-call overhead in durations/expand) and its build
# costs 5–180 ms (a pp 64 ZB-H2 program of 217k entries)
MIN_REMOVED = 0.5


@packable
class Reduced:
    """The reduced program: ``A``, ``B`` (inputs, 0 = the sentinel), how to fill its durations
    from the folded program's and how to expand its ends back to the folded program's.

    ``kept_src``/``kept_dst``: folded entry → reduced entry of the entries kept as they are
    (0-based); ``inv``: per folded end index, the reduced end index standing for it (0 for a
    skipped one, written by the closed forms); ``static``: the gather chains [chain, j] (end
    indices, ``mask``), ``virt``: (chain, j) of the gathers read as constants, at ``virt_dst``."""

    __slots__ = ("A", "B", "n", "kept_src", "kept_dst", "inv", "static", "static_flat", "static_src", "virt",
                 "virt_dst", "params", "grads")
    A: list[int]
    B: list[int]
    n: int
    kept_src: np.ndarray
    kept_dst: np.ndarray
    inv: np.ndarray
    static: tuple[np.ndarray, np.ndarray] | None
    static_flat: np.ndarray | None
    static_src: np.ndarray | None
    virt: tuple[np.ndarray, ...]
    virt_dst: np.ndarray
    params: "_Params | None"
    grads: "_Grads | None"

    def durations(self, dur: np.ndarray) -> tuple[np.ndarray, tuple]:
        """Entry durations of the reduced program from the folded program's ``dur``, and what
        ``expand`` needs of this call (nothing per call is kept on the shared structure)."""
        out = np.empty(self.n)
        out[self.kept_dst] = dur[self.kept_src]
        ends = _EMPTY  # the static gathers' ends, [chain, j] (param groups wait on them)
        if self.static is not None:
            ends = np.cumsum(dur[self.static_src], axis=1)
            if self.virt_dst.size:
                out[self.virt_dst] = ends[self.virt]
        ps = self.params.durations(dur, ends, out) if self.params is not None else None
        gs = self.grads.durations(dur, out) if self.grads is not None else None
        return out, (ends, ps, gs)

    def expand(self, end_r: list[float], state: tuple) -> np.ndarray:
        """The folded program's end table (index 0 = sentinel) from the reduced program's ends."""
        ends, ps, gs = state
        full = np.fromiter(end_r, dtype=float, count=len(end_r))[self.inv]
        if self.static is not None and self.static_flat is not None:
            full[self.static_flat] = ends[self.static[1]]
        if ps is not None and self.params is not None:
            self.params.expand(full, ps)
        if gs is not None and self.grads is not None:
            self.grads.expand(full, gs)
        return full


@packable
class _Params:
    """Parameter-gather piece groups: ``pieces`` [group, j] end indices (0-padded, ``mask``),
    ``gathers`` the (chain, j) of the static gather each waits for, ``x`` the gate before each
    group; new entries (0-based): the constant ``M_n`` (``m_dst``) and the group's end (``e_dst``)."""

    def __init__(self, pieces, gathers, mask, x, last, m_dst, e_dst):
        self.pieces, self.gathers, self.mask, self.x, self.last = pieces, gathers, mask, x, last
        self.m_dst, self.e_dst = m_dst, e_dst
        self.flat = pieces[mask]
        self.src = pieces - 1
        self.rows = np.arange(len(last))

    def durations(self, dur: np.ndarray, ends: np.ndarray, out: np.ndarray) -> tuple:
        d = dur[self.src]
        s = np.cumsum(d, axis=1)
        run = np.maximum.accumulate(ends[self.gathers] - (s - d), axis=1)
        out[self.m_dst] = run[self.rows, self.last]
        out[self.e_dst] = s[self.rows, self.last]
        return run, s

    def expand(self, full: np.ndarray, state: tuple) -> None:
        run, s = state
        full[self.flat] = (np.maximum(full[self.x][:, None], run) + s)[self.mask]


@packable
class _Grads:
    """Gradient-reduce piece groups: ``pieces`` [group, j] (piece 0 stays in the loop),
    ``reduces`` the bucket reduce after each, ``prev`` the dp-stream entry before the group;
    new entries (0-based): ``y`` (``y_dst``), the last piece (``e_dst``) and the last reduce
    (``g_dst``)."""

    def __init__(self, pieces, reduces, mask, prev, last, y_dst, e_dst, g_dst):
        self.pieces, self.reduces, self.mask, self.prev, self.last = pieces, reduces, mask, prev, last
        self.y_dst, self.e_dst, self.g_dst = y_dst, e_dst, g_dst
        self.later = mask.copy()
        self.later[:, 0] = False
        self.pieces_flat, self.reduces_flat = pieces[self.later], reduces[mask]
        self.first = pieces[:, 0]
        self.src, self.reduces_src = pieces - 1, reduces - 1
        self.rows = np.arange(len(last))

    def durations(self, dur: np.ndarray, out: np.ndarray) -> tuple:
        d = dur[self.src]
        d[:, 0] = 0.0
        s = np.cumsum(d, axis=1)  # S_j: the pieces after the first
        b = dur[self.reduces_src]
        bs = np.cumsum(b, axis=1)
        run = np.maximum.accumulate(s - (bs - b), axis=1)
        rows, last = self.rows, self.last
        out[self.y_dst] = run[rows, last]
        out[self.e_dst] = s[rows, last]
        out[self.g_dst] = bs[rows, last]
        return s, run, bs

    def expand(self, full: np.ndarray, state: tuple) -> None:
        s, run, bs = state
        x = full[self.first][:, None]
        full[self.pieces_flat] = (x + s)[self.later]
        full[self.reduces_flat] = (np.maximum(full[self.prev][:, None], x + run) + bs)[self.mask]


def _pad(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    width = max(len(r) for r in rows)
    idx = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), width), dtype=bool)
    for i, r in enumerate(rows):
        idx[i, :len(r)] = r
        mask[i, :len(r)] = True
    return idx, mask


def _heads(comp: Compiled, prog: Folded) -> np.ndarray:
    """The kind of the task heading each folded entry (index 0, the sentinel: -1)."""
    n = prog.a.size
    kind = np.asarray(comp.graph.kind, dtype=np.int64)
    own = ~prog.folded
    out = np.full(n + 1, -1, dtype=np.int64)
    out[prog.pos[own]] = kind[own]
    return out


def _static_chains(A: list[int], B: list[int], entries: np.ndarray) -> list[list[int]]:
    """Gathers fed by nothing (``B = 0``, ``A`` = the sentinel or the previous such gather):
    their chains, in order."""
    chains: list[list[int]] = []
    tail: dict[int, int] = {}  # last entry of a chain → chain number
    for i in entries.tolist():
        a = A[i - 1]
        if B[i - 1] != 0:
            continue
        if a == 0:
            tail[i] = len(chains)
            chains.append([i])
        elif a in tail:
            k = tail.pop(a)
            chains[k].append(i)
            tail[i] = k
    return chains


def _param_groups(A, B, readers, entries: np.ndarray, static: set[int]) -> list[list[int]]:
    """Runs of first-F pieces: each waits for a static gather (``B``) and the piece before it."""
    groups: list[list[int]] = []
    open_: dict[int, int] = {}  # last piece → group
    for i in entries.tolist():
        if B[i - 1] not in static:
            continue
        a = A[i - 1]
        k = open_.pop(a, None)
        if k is not None and readers[a] == 1:
            groups[k].append(i)
        else:
            k = len(groups)
            groups.append([i])
        open_[i] = k
    return [g for g in groups if len(g) > 1]


def _grad_groups(A, B, readers, heads: np.ndarray, entries: np.ndarray) -> list[tuple[list[int], list[int]]]:
    """Runs of final-backward pieces (each after the one before, nothing else feeding it) with
    the bucket reduce after each on the dp stream: (pieces, reduces)."""
    groups: list[tuple[list[int], list[int]]] = []
    open_: dict[int, int] = {}  # last reduce → group
    for i in entries.tolist():
        e = B[i - 1]
        if e == 0 or heads[e] not in (K_R, K_B, K_W):  # the first piece may follow its recompute in one entry
            continue
        k = open_.pop(A[i - 1], None)
        if k is not None:
            pieces, reduces = groups[k]
            if A[e - 1] == pieces[-1] and B[e - 1] == 0 and readers[pieces[-1]] == 2 and readers[reduces[-1]] == 1:
                pieces.append(e)
                reduces.append(i)
                open_[i] = k
                continue
        open_[i] = len(groups)
        groups.append(([e], [i]))
    return [g for g in groups if len(g[0]) > 1]


class _Emit:
    """Builds the reduced program entry by entry; ``remap`` gives an input's reduced index."""

    def __init__(self, static_pos: set[int]):
        self.A: list[int] = []
        self.B: list[int] = []
        self.new: dict[int, int] = {0: 0}  # folded end index → reduced (kept entries, replacements)
        self.static = static_pos
        self.virt: dict[int, int] = {}  # static gather → its constant entry

    def add(self, a: int, b: int) -> int:
        self.A.append(a)
        self.B.append(b)
        return len(self.A)

    def remap(self, i: int) -> int:
        j = self.new.get(i)
        if j is not None:
            return j
        if i in self.static:
            j = self.virt.get(i)
            if j is None:
                j = self.virt[i] = self.add(0, 0)
            return j
        raise KeyError(i)  # an end the reduced program does not keep


def reduce_program(comp: Compiled, prog: Folded) -> Reduced | None:
    """The reduced program of ``prog``, or None when it has no DP piece run to reduce."""
    A, B = prog.A, prog.B
    n = len(A)
    heads = _heads(comp, prog)
    gathers, reduces = np.flatnonzero(heads == K_DPP), np.flatnonzero(heads == K_DPG)
    if gathers.size == 0 and reduces.size < 2:
        return None
    a, b = np.asarray(A, dtype=np.int64), np.asarray(B, dtype=np.int64)
    readers = np.bincount(a, minlength=n + 1) + np.bincount(b[b != a], minlength=n + 1)
    chains = _static_chains(A, B, gathers)
    static = {i for c in chains for i in c}
    pgroups = _param_groups(A, B, readers, np.flatnonzero(heads == K_F), static) if static else []
    ggroups = _grad_groups(A, B, readers, heads, reduces)
    if not pgroups and not ggroups:
        return None
    removed = len(static) + sum(len(g) for g in pgroups) + sum(len(p) - 1 + len(r) for p, r in ggroups)
    if removed < MIN_REMOVED * n:  # the loop over the few entries it would save costs less than the reduction
        return None
    try:
        return _build(A, B, n, chains, static, pgroups, ggroups)
    except KeyError:  # a skipped end read elsewhere: keep the program as it is
        return None


def _build(A, B, n, chains, static, pgroups, ggroups) -> Reduced:
    removed = set(static)
    p_last = {}
    for k, g in enumerate(pgroups):
        removed.update(g)
        p_last[g[-1]] = k
    g_first, g_lastp, g_lastr = {}, {}, {}
    for k, (pieces, reduces) in enumerate(ggroups):
        removed.update(pieces[1:])
        removed.update(reduces)
        g_first[pieces[0]] = k
        g_lastp[pieces[-1]] = k
        g_lastr[reduces[-1]] = k
    em = _Emit(static)
    kept_old: list[int] = []
    kept_new: list[int] = []
    m_new, pe_new = [0] * len(pgroups), [0] * len(pgroups)
    y_new, ge_new, gg_new = [0] * len(ggroups), [0] * len(ggroups), [0] * len(ggroups)
    rep_old: list[int] = []
    rep_new: list[int] = []
    for i in range(1, n + 1):
        if i not in removed:
            j = em.add(em.remap(A[i - 1]), em.remap(B[i - 1]))
            em.new[i] = j
            kept_old.append(i)
            kept_new.append(j)
            if i in g_first:
                y_new[g_first[i]] = em.add(j, 0)
            continue
        if i in p_last:
            k = p_last[i]
            m_new[k] = em.add(0, 0)
            j = pe_new[k] = em.add(em.remap(A[pgroups[k][0] - 1]), m_new[k])
        elif i in g_lastp:
            k = g_lastp[i]
            j = ge_new[k] = em.add(em.new[ggroups[k][0][0]], 0)
        elif i in g_lastr:
            k = g_lastr[i]
            j = gg_new[k] = em.add(em.remap(A[ggroups[k][1][0] - 1]), y_new[k])
        else:
            continue
        em.new[i] = j
        rep_old.append(i)
        rep_new.append(j)
    red = Reduced()
    red.A, red.B, red.n = em.A, em.B, len(em.A)
    arr = lambda x: np.asarray(x, dtype=np.int64)  # noqa: E731
    red.kept_src, red.kept_dst = arr(kept_old) - 1, arr(kept_new) - 1
    inv = np.zeros(n + 1, dtype=np.int64)
    inv[arr(kept_old + rep_old)] = arr(kept_new + rep_new)
    red.inv = inv
    coord = {i: (c, j) for c, chain in enumerate(chains) for j, i in enumerate(chain)}
    red.static = red.static_flat = red.static_src = None
    red.virt, red.virt_dst = (arr([]), arr([])), arr([])
    if chains:
        red.static = _pad(chains)
        red.static_flat = red.static[0][red.static[1]]
        red.static_src = red.static[0] - 1
        red.virt = tuple(arr(x) for x in zip(*(coord[i] for i in em.virt))) if em.virt else red.virt
        red.virt_dst = arr(list(em.virt.values())) - 1
    red.params = red.grads = None
    if pgroups:
        pieces, mask = _pad(pgroups)
        gc = [[coord[B[i - 1]] for i in g] for g in pgroups]
        chain, _ = _pad([[c for c, _ in g] for g in gc])
        pos, _ = _pad([[j for _, j in g] for g in gc])
        red.params = _Params(pieces, (chain, pos), mask, arr([A[g[0] - 1] for g in pgroups]),
                             arr([len(g) - 1 for g in pgroups]), arr(m_new) - 1, arr(pe_new) - 1)
    if ggroups:
        pieces, mask = _pad([p for p, _ in ggroups])
        reduces, _ = _pad([r for _, r in ggroups])
        red.grads = _Grads(pieces, reduces, mask, arr([A[r[0] - 1] for _, r in ggroups]),
                           arr([len(p) - 1 for p, _ in ggroups]), arr(y_new) - 1, arr(ge_new) - 1, arr(gg_new) - 1)
    return red


_NONE = object()


def reduced_for(comp: Compiled, prog: Folded) -> Reduced | None:
    """The reduced program of a folded program, built once and kept with it."""
    r = prog.reduced
    if r is None:
        r = prog.reduced = reduce_program(comp, prog) or _NONE
    return None if r is _NONE else r
