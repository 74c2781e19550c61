"""The program with chains of compute-stream communication folded into the task before them.

An exposed collective part (``K_EXP``) or a blocking p2p send (``K_P2P``) on the compute stream
whose only input is the compute task right before it, when nothing else reads that task's end,
starts exactly when that task ends: ``end = max(end[prev], 0) + d = end[prev] + d``. Such a chain
``t, c1, c2, …`` is one program entry of duration ``d_t + d_c1 + …`` (the same times up to the
rounding of the sum), so the loop and the metrics run over fewer entries (a 1F1B or interleaved
step sends after every F and B: ~40 % of the entries).

A kernel whose only input is the kernel right before it (B after its recompute R: the gradient
wait sits on R, graph.py ``backward``) folds the same way: it starts when that kernel ends; so
does a zero-length gate right after a kernel (it marks where the next kernel's hidden
collectives start; later readers read the entry, which ends where the gate does).

The metrics need nothing a fold hides: the folded tasks after the leading kernels are
communication on the compute stream, exposed in full (their totals come from the value table),
the compute stream is busy over the entry's whole extent, and the kernels head their entry back
to back (``[start, start + Σ d_kernel]``, ``kernel_run``). Only the last task of a chain is read
by later entries, and they read the folded entry instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .compact import packable
from .compiled import Compiled
from .layout import K_B, K_EXP, K_F, K_GATE, K_OPT, K_P2P, K_R, K_W, NSTREAM, S_COMPUTE


@packable
class Folded:
    """``A``, ``B``: the inputs of each entry (end indices, 0 = the sentinel; lists of the arrays
    ``a``, ``b``, made again on first use after a packed copy, compact.py); ``slots``: the value slots each entry sums, flattened, entry ``i`` starting at
    ``starts[i]``; ``pos``: each task's end index in this program (a folded task: its chain's);
    ``folded``: per task, folded into the entry of the task before it."""

    __slots__ = ("a", "b", "_A", "_B", "slots", "starts", "pos", "folded", "kernel_run", "cats", "reduced")
    _VOLATILE = ("_A", "_B")  # lists of ``a``, ``b`` (compact.py leaves them out of a packed copy)

    def __init__(self, a: np.ndarray, b: np.ndarray, slots: np.ndarray, starts: np.ndarray, pos: np.ndarray,
                 folded: np.ndarray, kernel_run: np.ndarray):
        self.a, self.b, self.slots, self.starts, self.pos, self.folded = a, b, slots, starts, pos, folded
        self._A: list[int] | None = None
        self._B: list[int] | None = None
        self.kernel_run = kernel_run  # per entry: how many of its first slots are kernels (back to back)
        self.cats: Any = None  # metric categories (metrics.py), built on first use
        self.reduced: Any = None  # the program with DP piece runs in closed form (closed.py), built on first use

    @property
    def A(self) -> list[int]:
        if self._A is None:
            self._A = self.a.tolist()
        return self._A

    @property
    def B(self) -> list[int]:
        if self._B is None:
            self._B = self.b.tolist()
        return self._B

    def durations(self, vals: np.ndarray) -> np.ndarray:
        """Each entry's duration: the sum of its value slots (in chain order)."""
        return np.add.reduceat(vals[self.slots], self.starts)


def _foldable(comp: Compiled, A: np.ndarray, B: np.ndarray, task: np.ndarray) -> np.ndarray:
    """Per end index: a task folded into the entry before it (numpy: structures reach 10⁶ entries)."""
    g = comp.graph
    n = A.size + 1
    kind = np.asarray(g.kind, dtype=np.int64)
    stream = np.asarray(g.stream, dtype=np.int64)
    readers = np.bincount(A, minlength=n) + np.bincount(B[B != A], minlength=n)
    x = np.where(B == 0, A, np.where(A == 0, B, -1))  # the only input of each entry, if one
    t = task[1:]
    u = task[np.maximum(x, 0)]
    ok = (t >= 0) & (x > 0) & (u >= 0)
    tt, uu = t[ok], u[ok]
    kt, ku = kind[tt], kind[uu]
    comm = ((kt == K_EXP) | (kt == K_P2P)) & (ku != K_GATE)
    # a kernel right after a kernel (B after its recompute), or the zero-length gate a kernel opens
    # for the hidden part of the next kernel's collectives (graph.py _comm): both start at its end
    kern = (_KERNEL[kt] | (kt == K_GATE)) & _KERNEL[ku]
    fold = np.zeros(n, dtype=bool)
    fold[1:][ok] = ((comm | kern) & (stream[tt] % NSTREAM == S_COMPUTE) & (readers[x[ok]] == 1)
                    & (stream[uu] == stream[tt]))
    return fold


_KERNEL = np.zeros(16, dtype=bool)
_KERNEL[[K_F, K_R, K_B, K_W]] = True
_TIMED_KERNEL = _KERNEL.copy()  # what the metrics count as a kernel (the optimizer heads its own entry)
_TIMED_KERNEL[K_OPT] = True


def _kernel_runs(kind: np.ndarray, task: np.ndarray, order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per folded entry, the number of leading slots (chain order) that are kernels."""
    t = task[order + 1]
    is_k = (t >= 0) & _TIMED_KERNEL[kind[np.maximum(t, 0)]]
    seg = np.repeat(np.arange(starts.size), np.diff(np.append(starts, order.size)))
    breaks = np.cumsum(~is_k)
    before = np.concatenate(([0], breaks))[starts][seg]  # breaks before the entry's first slot
    return np.bincount(seg, weights=(breaks - before == 0) & is_k, minlength=starts.size).astype(np.int64)


def fold_chains(comp: Compiled) -> Folded:
    A = np.asarray(comp.A, dtype=np.int64)
    B = np.asarray(comp.B, dtype=np.int64)
    V = np.asarray(comp.V, dtype=np.int64)
    n = A.size + 1
    pos = np.asarray(comp.pos, dtype=np.int64)
    task = np.full(n, -1, dtype=np.int64)
    task[pos] = np.arange(pos.size)
    fold = _foldable(comp, A, B, task)
    # each end index → the first entry of its chain (a folded task's only input precedes it)
    root = np.arange(n)
    root[1:][fold[1:]] = np.where(B == 0, A, B)[fold[1:]]
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    kept = ~fold
    kept[0] = False
    index = np.zeros(n, dtype=np.int64)
    index[kept] = np.arange(1, int(kept.sum()) + 1)
    new = index[root]  # end index → end index in the folded program
    keep = kept[1:]
    order = np.argsort(new[1:], kind="stable")  # each entry's slots, its chain in program order
    grouped = new[1:][order]
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
    kind = np.asarray(comp.graph.kind, dtype=np.int64)
    f = Folded(new[A[keep]], new[B[keep]], V[order], starts, new[pos], fold[pos],
               _kernel_runs(kind, task, order, starts))
    f._A, f._B = f.a.tolist(), f.b.tolist()  # made here, beside each other (the loop reads them in turn)
    return f


def folded_for(comp: Compiled) -> Folded:
    """The folded program of a compiled structure, built once and kept with it."""
    f = comp.folded
    if f is None:
        f = comp.folded = fold_chains(comp)
    return f
