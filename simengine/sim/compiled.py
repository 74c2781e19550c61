"""Task graph → a topologically ordered, two-input program, cached per structure.

Every task becomes one entry ``(a, b, value index)`` whose end time is
``max(end[a], end[b]) + duration`` (index 0 is a start-of-step sentinel at t = 0). Its inputs
are its stream predecessor and its dependencies on other streams (dependencies on the same
stream are implied by the FIFO order once the order is known to be acyclic). A task with three
inputs gets a zero-length join entry first; ``max(x, y) + 0.0 == max(x, y)`` exactly, so the
program computes bit-for-bit the list-scheduler times, whichever valid order evaluates it.

The structure depends only on counts and flags (``structure_key``), never on durations, so the
estimate path reuses it across cost variants. The DP overlap flags are not among them: every
bucket has both its place beside its piece and its place in the step's tail, and the flags only
choose which holds its seconds (graph.py ``_Rank.tail``, values.py); with cost/dp.py keeping the
bucket counts independent of the flags and of ZeRO 0–2, a search compiles one structure where it
compiled up to four (30 → 12 compiles on the 405B/16k space, 4.1 → 1.2 s).
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
from .compact import held_bytes, pack, squeeze, unpack
from .layout import KIND_NAMES, NSTREAM, STREAMS
from .nogc import paused_gc
from .overlap import kinds


class Compiled:
    """A structure: its task graph and flattened program (``source``: ``graph``, ``A``, ``B``,
    ``V``, ``pos``, ``getter``) and what the estimate path builds from them on first use
    (``folded``, ``piece_class``, ``periodic``; ``plan`` for the timeline). A cached structure may
    drop its source (the cache below): the estimate path then reads only the derived parts, ``p``
    and ``pair_base``, and anything that reads the source gets it compiled again from ``key``
    (``build_graph`` is deterministic: the same graph, the same program)."""

    __slots__ = ("_src", "key", "p", "pair_base", "plan", "folded", "piece_class", "periodic", "packed", "squeezed", "nbytes", "stored")

    def __init__(self, graph: TaskGraph, A: list[int], B: list[int], V: list[int], pos: list[int], key):
        self._src: tuple | None = (graph, A, B, V, pos, itemgetter(*V) if len(V) > 1 else (lambda vals, _i=V[0]: (vals[_i],)))
        self.key, self.p, self.pair_base = key, graph.p, graph.pair_base
        self.plan: Any = None  # timeline plan (plan.py), built on the first full simulation
        self.folded: Any = None  # the program with compute-stream chains folded (chains.py), built on first use
        self.piece_class: Any = None  # per rank, an id of its DP piece layout (values.py), built on first use
        self.periodic: Any = None  # its steady-state window (periodic.py), built on first use
        self.packed = False  # a compact copy held by the cache only (compact.py): never handed out
        self.squeezed = False  # a packed copy compressed further (compact.squeeze)
        self.nbytes = 0  # bytes held, weighed by the cache when it stops being the newest (held)
        self.stored: Any = None  # (the packed copy it was unpacked from, _derived of it then)

    def _source(self) -> tuple:
        src = self._src
        if src is None:
            with paused_gc():
                g = build_graph(self.key)
                A, B, V, pos = flatten(g, topo_order(g))
            src = Compiled(g, A, B, V, pos, self.key)._src
            assert src is not None
            self._src = src
        return src

    graph = property(lambda self: self._source()[0])
    A = property(lambda self: self._source()[1])
    B = property(lambda self: self._source()[2])
    V = property(lambda self: self._source()[3])
    pos = property(lambda self: self._source()[4])
    getter = property(lambda self: self._source()[5])

    def held(self) -> int:
        """Bytes this structure holds: its derived parts measured (compact.held_bytes), its source
        and timeline plan estimated per program entry (``SOURCE_BYTES``, ``PLAN_BYTES``)."""
        n = held_bytes((self.folded, self.periodic, self.piece_class))
        src = self._src
        if src is not None:
            n += (SOURCE_BYTES + (PLAN_BYTES if self.plan is not None else 0)) * len(src[1])
        return n


def _chunk_sig(ch) -> tuple:
    """(forward kinds, backward kinds, has a recompute, recompute kinds): layout.py ``layout``."""
    return (kinds(ch.forward_comm), kinds(ch.backward_comm), ch.recompute_s > 0 or bool(ch.recompute_comm),
            kinds(ch.recompute_comm))


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
    # not the DP overlap flags: one structure serves them all (graph.py ``_Rank.tail``, values.py)
    return (inp.schedule, len(inp.stages), inp.num_microbatches, inp.vpp, bool(inp.p2p_blocking),
            bool(inp.fb_overlap), tuple(sig))


def topo_order(g: TaskGraph) -> list[int]:
    """Kahn's algorithm over stream heads; raises DeadlockError naming every stuck head."""
    n = len(g.kind)
    d1, d2 = g.d1, g.d2
    done = bytearray(n)
    order: list[int] = []
    push = order.append
    streams = g.streams
    ptr = [0] * len(streams)
    waiting: list[list[int] | None] = [None] * n  # per task, the streams whose head waits for it
    stack = [s for s in range(len(streams)) if streams[s]]
    while stack:
        s = stack.pop()
        lst = streams[s]
        i, ln = ptr[s], len(lst)
        while i < ln:
            t = lst[i]
            a = d1[t]
            if a >= 0 and not done[a]:
                w = waiting[a]
                if w is None:
                    waiting[a] = [s]
                else:
                    w.append(s)
                break
            b = d2[t]
            if b >= 0 and not done[b]:
                w = waiting[b]
                if w is None:
                    waiting[b] = [s]
                else:
                    w.append(s)
                break
            done[t] = 1
            push(t)
            i += 1
            w = waiting[t]
            if w is not None:
                stack.extend(w)
                waiting[t] = None
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


# LRU of compiled structures bounded by bytes. The newest is the structure in use: live, with its
# source (a timeline or a periodic window built next reads it), and not counted in the bound (on a
# miss it gives up its source before the next compile, so a process holds the bound plus the one
# structure it works on, as any compile needs). The one before it stays live while it is small, or
# with its source while it is the newest one's partner (``_partners``: freeing a source between
# two runs of one estimate measurably slows the loop that follows). Every older one
# is a packed copy (compact.py) of what the estimate path reads, ~36 bytes per program entry
# (a pp=64 DualPipe structure: 5.1 MB packed, 45 MB live), unpacked (~6 ms) when used again; when
# those exceed the bound the oldest are squeezed (~0.26 MB for that structure, ~15 ms to unpack)
# before any is dropped: a 405B/16k search keeps all 64 of its structures in 28 MiB instead of
# recompiling 9 of them. A structure used again goes back as the copy it came from (``stored``).
SOURCE_BYTES = 210  # graph + program lists per entry, measured (pp=64 DualPipe: 29 MB / 138,510 entries)
PLAN_BYTES = 150  # timeline plan per entry (estimate)
_MAX_BYTES = 128 << 20
_MAX_LIVE = _MAX_BYTES // 16  # the structure before the newest stays live up to this size
_cache: OrderedDict[tuple, Compiled] = OrderedDict()
_lock = threading.Lock()


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def cache_bytes() -> int:
    """Bytes the cache counts against ``_MAX_BYTES`` now (every entry but the newest)."""
    with _lock:
        return sum(c.nbytes for c in list(_cache.values())[:-1])


def _derived(comp: Compiled) -> tuple:
    """Which of the parts built on first use a structure holds (its folded program, that one's
    reduced program, its DP piece classes, its periodic memo's entries)."""
    f = comp.folded
    return (f is not None, getattr(f, "reduced", None) is not None, comp.piece_class is not None, len(comp.periodic or ()))


def _pack(comp: Compiled) -> Compiled:
    """A packed copy of what the estimate path reads; ``comp`` itself is left as it is. The copy it
    was unpacked from when it has built nothing since (compressing again costs ~40 ms on a pp=64
    DualPipe structure)."""
    if comp.stored is not None and comp.stored[1] == _derived(comp):
        return comp.stored[0]
    new = object.__new__(Compiled)
    new._src, new.plan, new.packed, new.squeezed, new.stored = None, None, True, False, None
    new.key, new.p, new.pair_base, new.piece_class = comp.key, comp.p, comp.pair_base, comp.piece_class
    new.folded, new.periodic = pack(comp.folded), pack(comp.periodic)
    new.nbytes = new.held()
    return new


def _squeeze(comp: Compiled) -> Compiled:
    """A packed copy compressed further (compact.squeeze)."""
    new = object.__new__(Compiled)
    new._src, new.plan, new.packed, new.squeezed, new.stored = None, None, True, True, None
    new.key, new.p, new.pair_base, new.piece_class = comp.key, comp.p, comp.pair_base, comp.piece_class
    new.folded, new.periodic = squeeze(comp.folded), squeeze(comp.periodic)
    new.nbytes = new.held()
    return new


def _unpack(comp: Compiled) -> Compiled:
    new = object.__new__(Compiled)
    new._src, new.plan, new.packed, new.squeezed, new.nbytes = None, None, False, False, 0
    new.key, new.p, new.pair_base, new.piece_class = comp.key, comp.p, comp.pair_base, comp.piece_class
    new.folded, new.periodic = unpack(comp.folded), unpack(comp.periodic)
    new.stored = (comp, _derived(new))
    return new


def _settle(skip: int = 1, coming: tuple | None = None) -> None:
    """Every entry but the ``skip`` newest without its source unless it is the next one and the
    newest one's partner, packed unless it is the next one and small or a partner; then, while those
    entries hold more than ``_MAX_BYTES``, the packed copies squeezed (compact.squeeze) oldest first
    and, when that is not enough, LRU eviction. ``skip = 0`` before the compile of ``coming``:
    the entry in use so far gives way to it. Called under ``_lock``."""
    total = 0
    keys = list(reversed(_cache))
    newest = keys[0] if skip and keys else coming
    for i, key in enumerate(keys):
        c = _cache[key]
        if i < skip:
            continue
        if not c.packed:
            partner = i == skip and newest is not None and _partners(key, newest)
            if not c.nbytes:  # it just gave way: weighed once, as it is now
                if not partner:  # a reader still holding it compiles it again (Compiled._source)
                    c._src = c.plan = None
                c.nbytes = c.held()
            if i > skip or (c.nbytes > _MAX_LIVE and not partner):
                c = _cache[key] = _pack(c)
        total += c.nbytes
    if total > _MAX_BYTES:  # short of room: compress packed copies, oldest first, before evicting any
        for key in reversed(keys[skip:]):
            c = _cache[key]
            if c.packed and not c.squeezed:
                _cache[key] = small = _squeeze(c)
                total += small.nbytes - c.nbytes
                if total <= _MAX_BYTES:
                    break
    while len(_cache) > skip and total > _MAX_BYTES:
        _, old = _cache.popitem(last=False)
        total -= old.nbytes


def _partners(a: tuple, b: tuple) -> bool:
    """Two structures of the same stages with other micro-batch counts: periodic.py's two short
    runs, which every estimate of a long pipeline uses in turn."""
    return a[:2] == b[:2] and a[3:] == b[3:]


def _cached(key: tuple) -> Compiled:
    with _lock:
        comp = _cache.get(key)
        if comp is not None:
            _cache.move_to_end(key)
            if comp.packed:
                comp = _cache[key] = _unpack(comp)
            comp.nbytes = 0  # the newest is not counted; weighed again when it gives way
            _settle()
            return comp
        _settle(0, key)
    comp = compile_graph(key)
    with _lock:
        if key not in _cache:
            _cache[key] = comp
            _settle()
    return comp


def compiled_for(inp: PipelineInput, orders: Sequence[Sequence[Action]] | None = None) -> Compiled:
    key = structure_key(inp)
    if orders is not None:
        return compile_graph(key, orders)
    return _cached(key)
