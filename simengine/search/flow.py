"""The data-flow bound: a candidate's schedule run at lower-bound durations, nothing else.

``pipeline_bound`` (bound.py) sums chosen paths of the step's dependency graph; it misses the
waits of a middle rank in DualPipe's cool-down, whose last backwards wait for gradients that
come back through ranks still busy (4–11 % of a 405B DualPipe step). This runs every rank's own
order (``schedule._combined.fb_orders``, the F&B pairs the engine keeps, ``sim/graph.py``
``_pair_types``) on one compute stream per rank with the same per-stage phases the bound uses
(each a lower bound on what the engine's compute stream spends on that action,
``bound.phase_alone``), and the hand-offs of ``sim/graph.py``:

* F(s, i) starts after F(s−1, i) has arrived (its end, plus the p2p send when it crosses ranks);
  B(s, i) after B(s+1, i) has arrived, or on a chain's last stage after F(s, i); a recompute runs
  right before its B and waits for the same input (``_Rank.backward``: the R task is the entry);
  W(s, i) after B(s, i), on the same stream;
* a kept F&B pair starts when both inputs have arrived (its gate waits for the B's gradient) and
  sends both outputs after the B (``_forward_backward_chunk``): the F's first, then the B's;
* a send that crosses ranks takes ``p2p`` on the sender's compute stream when sends are inline
  (Megatron's blocking ``send_forward``/``send_backward``; the receiver waits for it), else it
  arrives ``p2p`` after the action on the rank's pp stream;
* the rank's ``tails[r]`` (``prune.dp_tail``) follow its last action.

Every duration is a lower bound and every edge is one the engine has (the engine adds more:
collectives, contention, DP and parameter streams), and ``end = max(inputs) + d`` is monotone,
so each end here is ≤ the engine's and the step is bounded below (``tests/test_flow.py`` holds it
below the estimate on every schedule). The program depends on (schedule, p, m, vpp, inline) alone
and is built once (``_program``); a call evaluates it, one pass over the actions."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ..schedule import get_schedule
from ..schedule._combined import fb_orders
from ..sim.graph import _pair_types, _stages
from ..sim.periodic import SCHEDULES as PERIODIC
from .bound import chunk_groups


class Flow(NamedTuple):
    """What ``flow_bound`` reads of a screened candidate (plain data: any executor carries it)."""

    schedule: str
    p: int
    m: int
    vpp: int
    inline: bool
    phases: tuple[tuple[float, float, float, float], ...]
    p2p: float
    tails: dict[int, float]
    a2a: tuple | None             # A2A.stages where pairs may hide the all-to-all (phases leave it out)
    grads: dict[int, tuple[float, ...]] | None = None   # per rank, its gradient buckets' seconds (overlap_grad_reduce)


def flow_of(schedule: str, p: int, m: int, vpp: int, inline: bool, phases, p2p: float,
            tails: dict[int, float] | None, combined: bool, a2a=None,
            grads: dict[int, tuple[float, ...]] | None = None) -> Flow | None:
    """The candidate's ``Flow`` where it can tighten the bound for less than the estimate costs:
    schedules the estimate runs in full (not 1F1B or interleaved, whose estimate is two short
    runs, ``sim/periodic.py``), and not Megatron-Core's combined 1F1B (other orders)."""
    if combined or schedule in PERIODIC or p < 2:
        return None
    return Flow(schedule, p, m, vpp, inline, tuple(tuple(x) for x in phases), p2p, dict(tails or {}),
                None if a2a is None else tuple(tuple(x) for x in a2a.stages),
                {r: g for r, g in grads.items() if g} if grads else None)   # the tuples shared


class Program(NamedTuple):
    """The actions in an order the data flow allows, each as (rank's previous action, the p2p
    sends it leaves on its stream; input A, p2p sends on its way; input B, likewise; what it
    runs: ``what`` rows (kind: 0 F, 1 B, 2 W, 3 F&B pair; the F's stage; the B's stage;
    whether the B carries its W)), and per rank its last action and the sends after it. Index
    −1: none."""

    prev: np.ndarray
    prev_sends: np.ndarray
    in_a: np.ndarray
    a_sends: np.ndarray
    in_b: np.ndarray
    b_sends: np.ndarray
    what: np.ndarray
    last: list[tuple[int, int]]
    grad_acts: list[list[int]]    # per rank, each chunk's last gradient action, in order (graph.py last_g)
    grad_chunks: list[tuple[int, ...]]   # per rank, the chunk of each of grad_acts


def flow_bound(schedule: str, p: int, m: int, vpp: int, inline: bool, phases, p2p: float,
               tails: dict[int, float] | None = None, a2a=None,
               grads: dict[int, tuple[float, ...]] | None = None) -> float:
    """The step's lower bound from the data flow of ``schedule`` (module doc): ``phases[s]`` =
    (f, b, w, r) of data-flow stage s, as ``pipeline_bound`` reads them; ``a2a`` its ``A2A.stages``
    where F&B pairs may hide the expert all-to-all (the phases then leave it out); ``grads`` (with
    ``overlap_grad_reduce``) per rank its gradient buckets' seconds, queued on its DP stream
    (``_dp_stream``)."""
    pg = _program(schedule, p, m, vpp, inline)
    dur = _durations(pg.what, np.asarray(phases, dtype=float), a2a)
    hops = [(pg.prev_sends * p2p).tolist(), (pg.a_sends * p2p).tolist(), (pg.b_sends * p2p).tolist()]
    end = [0.0] * (len(dur) + 1)   # end[−1] = 0: a missing input (index −1) waits for nothing
    for j, (i0, c0, i1, c1, i2, c2, d) in enumerate(zip(pg.prev.tolist(), hops[0], pg.in_a.tolist(), hops[1],
                                                             pg.in_b.tolist(), hops[2], dur)):
        x, y, z = end[i0] + c0, end[i1] + c1, end[i2] + c2
        if y > x:
            x = y
        end[j] = (z if z > x else x) + d
    tails = tails or {}
    out = max(end[j] + n * p2p + tails.get(r, 0.0) for r, (j, n) in enumerate(pg.last))
    for r, g in (grads or {}).items():
        if g and pg.grad_acts[r]:
            out = max(out, _dp_stream(pg, end, hops, r, g) + tails.get(r, 0.0))
    return out


def _dp_stream(pg: Program, end: list[float], hops: list[list[float]], r: int, buckets: tuple[float, ...]) -> float:
    """When rank r's last gradient bucket ends, at the least. With ``overlap_grad_reduce`` each
    chunk's last gradient action (its last W, or its last B-full) is split into one piece per
    bucket of that chunk's group (graph.py ``_split``: contiguous near-equal groups in chunk
    order, ``bound.chunk_groups``; ``_grad_piece``), and each bucket's reduction waits for
    its piece on the rank's one DP stream, in that order. A piece ends no earlier than its
    action starts, here max(its inputs' arrivals) ≤ the engine's start, and each bucket takes at
    least its seconds alone (``prune.dp_tails``), so group i starts ≥ max(its action's start, the
    previous group's end). The optimizer waits for the last bucket (graph.py ``tail``): the
    rank's tail follows this too. ``pipeline_bound``'s ``grads`` term is this with the start read
    off the rank's own work alone; here it holds the waits of the data flow too."""
    acts = pg.grad_acts[r]
    t = 0.0
    for j, group in zip(acts, chunk_groups(buckets, pg.grad_chunks[r])):
        x = end[pg.prev[j]] + hops[0][j]
        y = end[pg.in_a[j]] + hops[1][j]
        z = end[pg.in_b[j]] + hops[2][j]
        start = max(x, y, z)
        t = max(t, start) + group
    return t


def _durations(what: np.ndarray, ph: np.ndarray, a2a) -> list[float]:
    """Each action's lower bound. F: f (+ its all-to-all alone), B: the recompute, b, the W it
    carries (+ its all-to-all alone), W: w. An F&B pair: the B's recompute (its slot resolves
    every collective alone) + max(B, A_F) + max(F, A_B), A the members' whole all-to-all
    (``a2a.a2a_work``: each hides at most behind the other's compute, sim/overlap.py ``resolve``);
    with no all-to-all to hide, F + B."""
    kind, s, s2, carry = what.T
    f, b, w, r = ph.T
    if a2a is None:
        alone_f = alone_b = len_f = len_b = np.zeros(len(ph))
    else:
        alone_f, alone_b, len_f, len_b = np.asarray(a2a, dtype=float).reshape(-1, 4).T
    bw = r[s2] + b[s2] + carry * w[s2]
    out = np.where(kind == 0, f[s] + alone_f[s], np.where(kind == 1, bw + alone_b[s2], w[s]))
    pair = r[s2] + np.maximum(b[s2] + carry * w[s2], len_f[s]) + np.maximum(f[s], len_b[s2])
    return np.where(kind == 3, pair, out).tolist()


@lru_cache(maxsize=32)   # a pp=64 DualPipe program: about 1 MB, built in about 0.5 s
def _program(schedule: str, p: int, m: int, vpp: int, inline: bool) -> Program:
    """The program of (schedule, p, m, vpp, inline sends): the ranks' orders walked round-robin,
    each rank as far as its inputs allow (the engine's topological order, ``compiled.topo_order``)."""
    sched = get_schedule(schedule)
    orders, pairs = fb_orders(sched, p, m, vpp)
    nch = sched.chunks_per_rank(vpp)
    n = max(1, p * nch // max(1, sched.chains))
    stage, rank_of = _stages(sched, schedule, p, vpp, nch)   # the engine's own placement
    full_b = not sched.splits_weight_grad
    w = _Walk(n, rank_of, inline)
    kept = [_pair_types(o, pairs[r] if pairs else frozenset())[0] for r, o in enumerate(orders)]
    wsets = [{(a.mb, a.chunk) for a in o if a.kind == "W"} for o in orders]
    ptr = [0] * p
    moved = True
    while moved:
        moved = False
        for r in range(p):
            i = w.rank(r, orders[r], ptr[r], stage[r], kept[r], wsets[r], full_b)
            moved = moved or i != ptr[r]
            ptr[r] = i
    if any(ptr[r] != len(orders[r]) for r in range(p)):
        raise ValueError(f"schedule '{schedule}' (p={p}, m={m}, vpp={vpp}): its orders deadlock")
    what = np.array(w.what, dtype=np.int32).reshape(-1, 4)
    idx = [np.array(x, dtype=np.int32) for x in (w.prev, w.in_a, w.in_b)]
    sends = [np.array(x, dtype=np.int8) for x in (w.prev_sends, w.a_sends, w.b_sends)]   # at most two per action
    acts = [_grad_acts(orders[r], w.at[r], wsets[r]) for r in range(p)]
    return Program(idx[0], sends[0], idx[1], sends[1], idx[2], sends[2], what,
                   [(w.tail.get(r, -1), w.tail_sends.get(r, 0)) for r in range(p)],
                   [a for a, _ in acts], [c for _, c in acts])


def _grad_acts(order, at: dict[int, int], wset: set) -> tuple[list[int], tuple[int, ...]]:
    """Program indices of each chunk's last gradient action, in order: the last W, or the last
    B with no W of its own (graph.py ``_Rank.__init__``, ``last_g``); and the chunk of each."""
    last: dict[int, int] = {}
    for pos, a in enumerate(order):
        if a.kind == "W" or (a.kind == "B" and (a.mb, a.chunk) not in wset):
            last[a.chunk] = pos
    acts = sorted((at[pos], c) for c, pos in last.items())
    return [i for i, _ in acts], tuple(c for _, c in acts)


class _Walk:
    """Builds the program one action at a time (``_program``)."""

    def __init__(self, n: int, rank_of: list[int], inline: bool):
        self.n, self.rank_of, self.inline = n, rank_of, inline
        self.prev: list[int] = []
        self.prev_sends: list[int] = []
        self.in_a: list[int] = []
        self.a_sends: list[int] = []
        self.in_b: list[int] = []
        self.b_sends: list[int] = []
        self.what: list[tuple[int, int, int, int]] = []
        self.f_out: dict[tuple[int, int], tuple[int, int]] = {}   # (stage, mb) → (action, sends before it arrives)
        self.b_out: dict[tuple[int, int], tuple[int, int]] = {}
        self.f_done: dict[tuple[int, int], int] = {}
        self.tail: dict[int, int] = {}
        self.tail_sends: dict[int, int] = {}
        self.at: list[dict[int, int]] = [{} for _ in range(max(rank_of, default=0) + 1)]   # per rank: order position → action

    def _f_in(self, s: int, mb: int):
        return (-1, 0) if s % self.n == 0 else self.f_out.get((s - 1, mb))

    def _b_in(self, s: int, mb: int):
        if s % self.n == self.n - 1:
            j = self.f_done.get((s, mb))
            return None if j is None else (j, 0)
        return self.b_out.get((s + 1, mb))

    def _emit(self, r: int, a: tuple[int, int], b: tuple[int, int], what: tuple[int, int, int, int]) -> int:
        j = len(self.what)
        self.prev.append(self.tail.get(r, -1))
        self.prev_sends.append(self.tail_sends.get(r, 0))
        self.in_a.append(a[0])
        self.a_sends.append(a[1])
        self.in_b.append(b[0])
        self.b_sends.append(b[1])
        self.what.append(what)
        self.tail[r], self.tail_sends[r] = j, 0
        return j

    def _send(self, r: int, j: int, s: int, to: int, out: dict, mb: int) -> None:
        """Action j of rank r hands stage s's output to stage ``to`` (a send when it crosses ranks)."""
        if self.rank_of[to] == r:
            out[(s, mb)] = (j, 0)
        elif self.inline:
            self.tail_sends[r] += 1
            out[(s, mb)] = (j, self.tail_sends[r])
        else:
            out[(s, mb)] = (j, 1)

    def _hand_f(self, r: int, j: int, s: int, mb: int) -> None:
        if s % self.n != self.n - 1:
            self._send(r, j, s, s + 1, self.f_out, mb)

    def _hand_b(self, r: int, j: int, s: int, mb: int) -> None:
        if s % self.n != 0:
            self._send(r, j, s, s - 1, self.b_out, mb)

    @staticmethod
    def _carries(mb: int, c: int, wset: set, full_b: bool) -> int:
        return int(full_b or (mb, c) not in wset)   # a B-full carries its W (graph.py V_BF)

    def rank(self, r: int, order, i: int, stage: list[int], kept, wset: set, full_b: bool) -> int:
        """Emits rank r's actions from position i while their inputs are known; the next position."""
        while i < len(order):
            a = order[i]
            s = stage[a.chunk]
            if a.kind == "F" and i in kept:
                b = order[i + 1]
                s2 = stage[b.chunk]
                fin, bin_ = self._f_in(s, a.mb), self._b_in(s2, b.mb)
                if fin is None or bin_ is None:
                    return i
                j = self._emit(r, fin, bin_, (3, s, s2, self._carries(b.mb, b.chunk, wset, full_b)))
                self.at[r][i] = self.at[r][i + 1] = j
                self.f_done[(s, a.mb)] = j
                self._hand_f(r, j, s, a.mb)
                self._hand_b(r, j, s2, b.mb)
                i += 2
                continue
            if a.kind == "F":
                fin = self._f_in(s, a.mb)
                if fin is None:
                    return i
                j = self._emit(r, fin, (-1, 0), (0, s, s, 0))
                self.f_done[(s, a.mb)] = j
                self._hand_f(r, j, s, a.mb)
            elif a.kind == "B":
                bin_ = self._b_in(s, a.mb)
                if bin_ is None:
                    return i
                j = self._emit(r, bin_, (-1, 0), (1, s, s, self._carries(a.mb, a.chunk, wset, full_b)))
                self._hand_b(r, j, s, a.mb)
                self.at[r][i] = j
            else:
                self.at[r][i] = self._emit(r, (-1, 0), (-1, 0), (2, s, s, 0))
            i += 1
        return i
