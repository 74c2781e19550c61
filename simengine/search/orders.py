"""What the search's step-time bound reads of a schedule's own per-rank orders
(``bound.pipeline_bound``'s ``order``): for each chunk of a rank, the work its order runs up to
and including that chunk's last B, what the chain's head rank runs after that micro-batch's B,
and the work before each chunk's last gradient action — counted once per (schedule, p, m, vpp)."""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ..schedule import get_schedule
from ..schedule._combined import fb_orders

Counts = tuple[tuple[int, int, int, int], ...]   # (data-flow stage, F, B, W actions)
Term = tuple[int, Counts, Counts]                 # (stage of a chunk's last B, actions up to it, the head's after)
Pairs = tuple[tuple[tuple[int, int, bool, int], ...], ...]   # per rank: (F's stage, B's stage, the B carries its W, how many)


Tally = tuple[tuple[int, int, bool, int], ...]   # F&B pairs of a stretch of an order: (F's stage, B's stage, B carries its W, how many);
#                                               stage −1: that member is outside the stretch


class Orders(NamedTuple):
    """What ``pipeline_bound`` reads of a schedule's per-rank orders (``order_terms``)."""

    last_b: tuple[tuple[Term, ...], ...]     # per rank, per chunk: its last B's terms
    last_grad: tuple[tuple[Counts, ...], ...]  # per rank: the actions before each chunk's last gradient action, in their order
    last_b_pairs: tuple[tuple[tuple[Tally, Tally], ...], ...] = ()   # per rank, per term of last_b: the pairs of (up to it, the head's after)
    last_grad_pairs: tuple[tuple[Tally, ...], ...] = ()              # per rank, per entry of last_grad: the pairs before it
    last_grad_chunks: tuple[tuple[int, ...], ...] = ()               # per rank, per entry of last_grad: its chunk


@lru_cache(maxsize=256)
def order_terms(schedule: str, p: int, m: int, vpp: int) -> Orders:
    """Per rank, for each chunk it holds: (its data-flow stage s, the actions of the rank's order
    up to and including that chunk's last B, the actions of the chain's head rank after the same
    micro-batch's B on the chain's first stage); and per rank the actions before each chunk's last
    gradient action (graph.py ``last_g``: the last W, or the last B-full), in the order of those
    actions. Read off the schedule's own orders (``Schedule.orders``, what ``sim/graph.py`` runs
    without combined 1F1B). A B whose micro-batch-chunk has no W in the order is B-full
    (graph.py): it counts one W as well."""
    sched = get_schedule(schedule)
    orders = sched.orders(p, m, vpp)
    nch = sched.chunks_per_rank(vpp)
    n = max(1, p * nch // max(1, sched.chains))
    stage = [[sched.stage_of(r, c, p, vpp) for c in range(nch)] for r in range(p)]
    where = {stage[r][c]: (r, c) for r in range(p) for c in range(nch)}
    full = [{(a.mb, a.chunk) for a in o if a.kind == "B"} - {(a.mb, a.chunk) for a in o if a.kind == "W"} for o in orders]
    last, last_g, b_at = [], [], []
    for r, o in enumerate(orders):  # one pass per rank: the positions every term reads
        lb: dict[int, int] = {}
        lg: dict[int, int] = {}
        at: dict[tuple[int, int], int] = {}
        for i, a in enumerate(o):
            if a.kind == "B":
                lb[a.chunk] = at[(a.mb, a.chunk)] = i
            if a.kind == "W" or (a.kind == "B" and (a.mb, a.chunk) in full[r]):
                lg[a.chunk] = i
        last.append(lb)
        last_g.append(lg)
        b_at.append(at)
    heads = []   # per rank, per chunk (in order of its last B): (stage, head rank, position of the head's B)
    want: list[set[int]] = [{len(o) - 1} | {i - 1 for i in last_g[r].values()} | set(last[r].values()) for r, o in enumerate(orders)]
    for r, o in enumerate(orders):
        row = []
        for c, i in sorted(last[r].items()):
            s = stage[r][c]
            hr, hc = where[s - s % n]
            j = b_at[hr][(o[i].mb, hc)]
            want[hr].add(j)
            row.append((s, i, hr, j))
        heads.append(row)
    snap = [_prefixes(o, stage[r], full[r], want[r]) for r, o in enumerate(orders)]
    out = tuple(tuple((s, snap[r][i], _minus(snap[hr][len(orders[hr]) - 1], snap[hr][j])) for s, i, hr, j in row)
                for r, row in enumerate(heads))
    grads = tuple(tuple(snap[r][i - 1] for i in sorted(last_g[r].values())) for r in range(p))
    chunks = tuple(tuple(c for c, _ in sorted(last_g[r].items(), key=lambda ci: ci[1])) for r in range(p))
    if sched.pairs is None:
        return Orders(out, grads, last_grad_chunks=chunks)
    from ..sim.graph import _pair_types

    kept = [sorted(_pair_types(o, prs)[0]) for o, prs in zip(orders, sched.pairs(p, m, vpp))]
    wsets = [{(a.mb, a.chunk) for a in o if a.kind == "W"} for o in orders]

    def tally(r: int, lo: int, hi: int) -> Tally:
        return _tally(orders[r], kept[r], stage[r], wsets[r], lo, hi)
    pb = tuple(tuple((tally(r, 0, i), tally(hr, j + 1, len(orders[hr]) - 1)) for _, i, hr, j in row) for r, row in enumerate(heads))
    pg = tuple(tuple(tally(r, 0, i - 1) for i in sorted(last_g[r].values())) for r in range(p))
    return Orders(out, grads, pb, pg, chunks)


def _tally(o, kept: list[int], stage_of_chunk: list[int], wset: set, lo: int, hi: int) -> Tally:
    """The F&B pairs (sim/graph.py ``_pair_types``: F at ``kept`` positions, its B next) with a
    member in ``o[lo:hi + 1]``, by type; a member outside the stretch has stage −1."""
    from bisect import bisect_left, bisect_right

    n: dict[tuple[int, int, bool], int] = {}
    for pos in kept[bisect_left(kept, lo - 1):bisect_right(kept, hi)]:
        f_in, b_in = lo <= pos <= hi, lo <= pos + 1 <= hi
        f, b = o[pos], o[pos + 1]
        key = (stage_of_chunk[f.chunk] if f_in else -1, stage_of_chunk[b.chunk] if b_in else -1, (b.mb, b.chunk) not in wset)
        n[key] = n.get(key, 0) + 1
    return tuple((sf, sb, cw, c) for (sf, sb, cw), c in sorted(n.items()))


def _prefixes(actions, stage_of_chunk: list[int], full: set, want: set[int]) -> dict[int, Counts]:
    """(data-flow stage, F, B, W) counts of ``actions[:i + 1]`` for every i in ``want`` (i = −1:
    none), a B-full counting one W too."""
    run: dict[int, list[int]] = {}
    out: dict[int, Counts] = {-1: ()}
    for i, a in enumerate(actions):
        row = run.get(a.chunk)
        if row is None:
            row = run[a.chunk] = [0, 0, 0]
        if a.kind == "F":
            row[0] += 1
        elif a.kind == "B":
            row[1] += 1
            if (a.mb, a.chunk) in full:
                row[2] += 1
        else:
            row[2] += 1
        if i in want:
            out[i] = tuple((stage_of_chunk[c], x[0], x[1], x[2]) for c, x in sorted(run.items()))
    return out


def _minus(total: Counts, prefix: Counts) -> Counts:
    """The counts of the actions after a prefix: ``total`` less ``prefix``, per stage."""
    before = {s: (f, b, w) for s, f, b, w in prefix}
    out = []
    for s, f, b, w in total:
        f0, b0, w0 = before.get(s, (0, 0, 0))
        if (f - f0, b - b0, w - w0) != (0, 0, 0):
            out.append((s, f - f0, b - b0, w - w0))
    return tuple(out)


@lru_cache(maxsize=256)
def pair_counts(schedule: str, p: int, m: int, vpp: int, combined: bool) -> Pairs:
    """Per rank, the overlapped F&B pairs the engine runs, by type: (the F's data-flow stage, the
    B's, whether the B carries its weight gradient — a B-full, no W of its own in the order —, how
    many). The same orders and the same pairs as the engine (``fb_orders``: the schedule's own
    ``pairs`` or Megatron-Core's combined 1F1B; sim/graph.py ``_pair_types``: the first F and the
    last gradient action of each chunk stay alone)."""
    from ..sim.graph import _pair_types

    sched = get_schedule(schedule)
    orders, pairs = fb_orders(sched, p, m, vpp, combined)
    out = []
    for r, o in enumerate(orders):
        kept = _pair_types(o, pairs[r])[0] if pairs else frozenset()
        wset = {(a.mb, a.chunk) for a in o if a.kind == "W"}
        n: dict[tuple[int, int, bool], int] = {}
        for pos in kept:
            f, b = o[pos], o[pos + 1]
            k = (sched.stage_of(r, f.chunk, p, vpp), sched.stage_of(r, b.chunk, p, vpp), (b.mb, b.chunk) not in wset)
            n[k] = n.get(k, 0) + 1
        out.append(tuple((sf, sb, full, c) for (sf, sb, full), c in sorted(n.items())))
    return tuple(out)
