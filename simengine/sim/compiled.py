"""Task graph → a topologically ordered, two-input program, cached per structure.

Every task becomes one entry ``(a, b, value index)`` whose end time is
``max(end[a], end[b]) + duration`` (index 0 is a start-of-step sentinel at t = 0). Its inputs
are its stream predecessor and its dependencies on other streams (dependencies on the same
stream are implied by the FIFO order once the order is known to be acyclic). A task with three
inputs gets a zero-length join entry first; ``max(x, y) + 0.0 == max(x, y)`` exactly, so the
program computes bit-for-bit the list-scheduler times, whichever valid order evaluates it.

The structure depends only on counts and flags (``structure_key``), never on durations, so the
estimate path reuses it across cost variants.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from operator import itemgetter
from typing import Any, Sequence

from ..schedule import Action
from .errors import DeadlockError
from .graph import TaskGraph, build_graph
from .inputs import PipelineInput
from .layout import KIND_NAMES, NSTREAM, STREAMS
from .nogc import paused_gc
from .overlap import kinds


class Compiled:
    __slots__ = ("graph", "A", "B", "V", "pos", "getter", "key", "plan", "folded", "piece_class", "periodic")

    def __init__(self, graph: TaskGraph, A: list[int], B: list[int], V: list[int], pos: list[int], key):
        self.graph, self.A, self.B, self.V, self.pos, self.key = graph, A, B, V, pos, key
        self.plan: Any = None  # timeline plan (plan.py), built on the first full simulation
        self.folded: Any = None  # the program with compute-stream chains folded (chains.py), built on first use
        self.piece_class: Any = None  # per rank, an id of its DP piece layout (values.py), built on first use
        self.periodic: Any = None  # its steady-state window (periodic.py), built on first use
        self.getter = itemgetter(*V) if len(V) > 1 else (lambda vals, _i=V[0]: (vals[_i],))


def _chunk_sig(ch) -> tuple:
    return (kinds(ch.forward_comm), kinds(ch.backward_comm), ch.recompute_s > 0 or bool(ch.recompute_comm))


def _stage_sig(st, chunks: dict[int, tuple]) -> tuple:
    sig = []
    for ch in st.chunks:  # stages share ChunkCosts (pipeline.py): each signed once
        s = chunks.get(id(ch))
        if s is None:
            s = chunks[id(ch)] = _chunk_sig(ch)
        sig.append(s)
    return (len(st.dp_grad_buckets_s), len(st.dp_param_buckets_s), tuple(sig))


def structure_key(inp: PipelineInput) -> tuple:
    seen: dict[int, tuple] = {}  # ranks sharing one StageCost (pipeline.py) share its signature
    chunks: dict[int, tuple] = {}
    sig = []
    for st in inp.stages:
        s = seen.get(id(st))
        if s is None:
            s = seen[id(st)] = _stage_sig(st, chunks)
        sig.append(s)
    return (inp.schedule, len(inp.stages), inp.num_microbatches, inp.vpp,
            bool(inp.overlap_grad_reduce), bool(inp.overlap_param_gather), bool(inp.p2p_blocking),
            bool(inp.fb_overlap), tuple(sig))


def topo_order(g: TaskGraph) -> list[int]:
    """Kahn's algorithm over stream heads; raises DeadlockError naming every stuck head."""
    n = len(g.kind)
    d1, d2 = g.d1, g.d2
    done = bytearray(n)
    order: list[int] = []
    streams = g.streams
    ptr = [0] * len(streams)
    waiting: dict[int, list[int]] = {}
    stack = [s for s in range(len(streams)) if streams[s]]
    while stack:
        s = stack.pop()
        lst = streams[s]
        i, ln = ptr[s], len(lst)
        while i < ln:
            t = lst[i]
            a, b = d1[t], d2[t]
            if a >= 0 and not done[a]:
                waiting.setdefault(a, []).append(s)
                break
            if b >= 0 and not done[b]:
                waiting.setdefault(b, []).append(s)
                break
            done[t] = 1
            order.append(t)
            i += 1
            w = waiting.pop(t, None)
            if w:
                stack.extend(w)
        ptr[s] = i
    if len(order) != n:
        blocked = []
        for s, lst in enumerate(streams):
            if ptr[s] < len(lst):
                t = lst[ptr[s]]
                blocked.append((s // NSTREAM, STREAMS[s % NSTREAM], KIND_NAMES[g.kind[t]], g.mb[t], g.chunk[t]))
        raise DeadlockError(blocked)
    return order


def flatten(g: TaskGraph, order: list[int]) -> tuple[list[int], list[int], list[int], list[int]]:
    n = len(g.kind)
    prev = [-1] * n
    for lst in g.streams:
        for i in range(1, len(lst)):
            prev[lst[i]] = lst[i - 1]
    stream, d1, d2, val = g.stream, g.d1, g.d2, g.val
    pos = [0] * n  # 1-based positions: end[0] is the sentinel, so 0 also means "no input"
    A: list[int] = []
    B: list[int] = []
    V: list[int] = []
    aa, ba, va = A.append, B.append, V.append
    for t in order:
        st = stream[t]
        p = prev[t]
        a = pos[p] if p >= 0 else 0
        b = c = 0
        x = d1[t]
        if x >= 0 and stream[x] != st:
            b = pos[x]
        x = d2[t]
        if x >= 0 and stream[x] != st:
            x = pos[x]
            if b == 0:
                b = x
            elif x != b:
                c = x
        if c:
            if a == 0:
                a = c
            else:  # three inputs: a zero-length join first
                aa(a)
                ba(b)
                va(0)
                a = len(A)
                b = c
        aa(a)
        ba(b)
        va(val[t])
        pos[t] = len(A)
    return A, B, V, pos


def compile_graph(key: tuple, orders: Sequence[Sequence[Action]] | None = None) -> Compiled:
    with paused_gc():
        g = build_graph(key, orders)
        A, B, V, pos = flatten(g, topo_order(g))
    return Compiled(g, A, B, V, pos, key)


# LRU of compiled structures, bounded by entry count and by total program length (a
# pp=16, vpp=4, m=128 structure is ~80k entries and ~20 MB with its timeline plan).
_MAX_ENTRIES = 64
_MAX_TASKS = 400_000
_cache: OrderedDict[tuple, Compiled] = OrderedDict()
_cache_tasks = 0
_lock = threading.Lock()


def clear_cache() -> None:
    global _cache_tasks
    with _lock:
        _cache.clear()
        _cache_tasks = 0


def _cached(key: tuple) -> Compiled:
    global _cache_tasks
    with _lock:
        comp = _cache.get(key)
        if comp is not None:
            _cache.move_to_end(key)
            return comp
    comp = compile_graph(key)
    with _lock:
        if key not in _cache:
            _cache[key] = comp
            _cache_tasks += len(comp.A)
            while len(_cache) > 1 and (len(_cache) > _MAX_ENTRIES or _cache_tasks > _MAX_TASKS):
                _, old = _cache.popitem(last=False)
                _cache_tasks -= len(old.A)
    return comp


def compiled_for(inp: PipelineInput, orders: Sequence[Sequence[Action]] | None = None) -> Compiled:
    key = structure_key(inp)
    if orders is not None:
        return compile_graph(key, orders)
    return _cached(key)
