"""The program with chains of compute-stream communication folded into the task before them.

An exposed collective part (``K_EXP``) or a blocking p2p send (``K_P2P``) on the compute stream
whose only input is the compute task right before it, when nothing else reads that task's end,
starts exactly when that task ends: ``end = max(end[prev], 0) + d = end[prev] + d``. Such a chain
``t, c1, c2, …`` is one program entry of duration ``d_t + d_c1 + …`` (the same times up to the
rounding of the sum), so the loop and the metrics run over fewer entries (a 1F1B or interleaved
step sends after every F and B: ~40 % of the entries).

The metrics need nothing a fold hides: the folded tasks are communication on the compute stream,
exposed in full (their totals come from the value table), the compute stream is busy over the
entry's whole extent, and a kernel heads its entry (``[start, start + d_head]``). Only the last
task of a chain is read by later entries, and they read the folded entry instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .compiled import Compiled
from .layout import K_EXP, K_GATE, K_P2P, NSTREAM, S_COMPUTE


class Folded:
    """``A``, ``B``: the inputs of each entry (end indices, 0 = the sentinel); ``slots``: the value
    slots each entry sums, flattened, entry ``i`` starting at ``starts[i]``; ``pos``: each task's
    end index in this program (a folded task: its chain's); ``folded``: per task, folded into the
    entry of the task before it."""

    __slots__ = ("A", "B", "slots", "starts", "pos", "folded", "cats")

    def __init__(self, A: list[int], B: list[int], slots: list[int], starts: list[int], pos: list[int],
                 folded: list[bool]):
        self.A, self.B, self.pos, self.folded = A, B, pos, folded
        self.slots = np.array(slots, dtype=np.int64)
        self.starts = np.array(starts, dtype=np.int64)
        self.cats: Any = None  # metric categories (metrics.py), built on first use

    def durations(self, vals: np.ndarray) -> np.ndarray:
        """Each entry's duration: the sum of its value slots (in chain order)."""
        return np.add.reduceat(vals[self.slots], self.starts)


def _foldable(comp: Compiled) -> list[bool]:
    """Per end index: a task folded into the entry before it."""
    g, A, B = comp.graph, comp.A, comp.B
    n = len(A) + 1
    task = [-1] * n
    for t, p in enumerate(comp.pos):
        task[p] = t
    readers = [0] * n
    for a, b in zip(A, B):
        readers[a] += 1
        if b != a:
            readers[b] += 1
    fold = [False] * n
    for q in range(1, n):
        t = task[q]
        if t < 0 or g.kind[t] not in (K_EXP, K_P2P) or g.stream[t] % NSTREAM != S_COMPUTE:
            continue
        a, b = A[q - 1], B[q - 1]
        x = a if b == 0 else (b if a == 0 else -1)
        if x <= 0 or readers[x] != 1:
            continue
        u = task[x]
        if u >= 0 and g.stream[u] == g.stream[t] and g.kind[u] != K_GATE:
            fold[q] = True
    return fold


def fold_chains(comp: Compiled) -> Folded:
    fold = _foldable(comp)
    n = len(comp.A) + 1
    new = [0] * n  # end index → end index in the folded program (a folded task: its chain's entry)
    A: list[int] = []
    B: list[int] = []
    parts: list[list[int]] = [[]]  # per entry (1-based), the value slots it sums, in chain order
    for q in range(1, n):
        a, b, v = comp.A[q - 1], comp.B[q - 1], comp.V[q - 1]
        if fold[q]:
            new[q] = new[a if b == 0 else b]
            parts[new[q]].append(v)
            continue
        A.append(new[a])
        B.append(new[b])
        parts.append([v])
        new[q] = len(A)
    slots: list[int] = []
    starts: list[int] = []
    for lst in parts[1:]:
        starts.append(len(slots))
        slots += lst
    return Folded(A, B, slots, starts, [new[p] for p in comp.pos], [fold[p] for p in comp.pos])


def folded_for(comp: Compiled) -> Folded:
    """The folded program of a compiled structure, built once and kept with it."""
    f = comp.folded
    if f is None:
        f = comp.folded = fold_chains(comp)
    return f
