"""``search(space, …)``: plan the groups, evaluate them on an executor, merge, rank.

With a top to reach, a branch and bound over a frontier keyed by lower bounds that only rise as
a node is looked at more closely — each is below every fitting candidate it stands for, so a
node whose bound is above the top-th best timed step is out for good:

1. ``prune.work_floor``: the average rank's share of the step's work and, with one chunk per
   rank, the pipeline's fill and drain, once per family of groups that share it
   (``prune.floor_key``; DeepSeek-V3 on 16,384 GPUs: 1.56 M groups);
2. ``prune.bound_group``: validity and the pipeline bound of the no-recompute plan (``bound.py``);
3. ``refine.refine_memory``: the recompute its memory needs at the ZeRO stage that needs the
   least (no plan), or an OOM rejection; then, only for a group still in reach whose least
   option runs ZeRO-2/3 collectives, ``refine.refine_group``: per ZeRO stage, with them;
4. ``prune.screen_group``: the memory pre-filter on the group's plans; each fitting (ZeRO stage,
   recompute) is one node (``options.Option``) at the least bound of its flag combinations, and
   only when reached becomes its candidates, each with its own bound (p2p, DP tail, ZeRO
   collectives at its flags, zero-bubble tails);
5. ``flow.flow_bound``, for candidates of the schedules the estimate runs in full (DualPipe,
   DualPipeV, ZB-H1/H2): its schedule's data flow at the same lower-bound durations;
6. the estimate itself.

Pure and deterministic: groups are listed in a fixed order, batched in that order, merged in
that order, and ranked with the enumeration index as the final tie-break.
"""

from __future__ import annotations

import heapq
import math
import threading
import time
from typing import Any

from ..errors import ConfigError
from ..sim.nogc import paused_gc
from .executors import Batch, InProcess, Progress, _tick, bound_batch, work_batch
from .rank import check_objective, check_top, pareto, rank, ties
from .space import SearchSpace, group_size, layouts, micro_batches, why_empty
from .types import HEADROOM_SLACK_GIB, Flowed, GroupScreen, Refined, Rejection, SearchResult, Timed, example

BATCH_GROUPS = 16   # groups (or candidates) per executor task: enough work to amortise the transfer
BOUND_SLACK = 1e-9  # relative: see _kth
HEADROOM = "memory_headroom"
ROUND = 64          # frontier nodes (groups to screen, candidates to time) per branch-and-bound round, at least
ROUND_MAX = 256     # and at most: 1/25 of the first frontier in between (round_size)
DEAL = 8            # a round goes out in at least this many batches (``_dealt``): up to 8 workers share it


def round_size(frontier: int) -> int:
    """Nodes per round for a search whose first frontier holds ``frontier`` nodes: 1/25 of it,
    between ``ROUND`` and ``ROUND_MAX``. A round ends at a synchronisation point (a pool waits for
    its slowest batch, then the driver alone updates the frontier) and a larger one looks at
    more nodes before the top-th best can fall: small spaces (llama3-8b / 8 GPUs: 309 nodes,
    70b / 64: 1,565) keep 64 (256 timed 65 candidates instead of 12 on 8b / 8); the 16,384-GPU
    spaces (6,400 nodes and more) take 256 (llama3-405b on two processes: 11.2 s at 64, 9.9 s at
    256). A function of the space alone, so every executor runs the same rounds."""
    return min(ROUND_MAX, max(ROUND, frontier // 25))


def plan_groups(space: SearchSpace) -> tuple[list[tuple[int, dict[str, Any], int, int]], int]:
    """Every (gpus, layout, micro-batch size) group in enumeration order, and the space size.
    ConfigError past ``MAX_GROUPS``: the search holds every group's floor in memory (phase 0), so a
    space of 29 M groups (DeepSeek-V3 over the GPU counts 1..10 M) took 8 GB before any progress."""
    groups: list = []
    size = 0
    for g in space.gpus:
        for lay in layouts(space, g):
            per = group_size(space, g, lay)
            for mbs in micro_batches(space, g, lay):
                groups.append((g, lay, int(mbs), len(groups)))
                size += per
            if len(groups) > MAX_GROUPS:
                raise ConfigError([("space", too_many_groups(space))])
    return groups, size


# (layout, micro-batch size) groups a search takes: DeepSeek-V3's full space on 16,384 GPUs has
# ~0.7 M (~1 GB, benchmarks/bench_search.py v3-16k), on 131,072 GPUs 2.3 M (2.6 GB, ~3 min)
MAX_GROUPS = 2_000_000


def too_many_groups(space: SearchSpace) -> str:
    n = len(space.gpus)
    return (f"the space has more than {MAX_GROUPS:,} layouts × micro-batch sizes over its {n} GPU count{'s' * (n != 1)}: "
            "restrict it (fewer GPU counts, or pin tp, pp, ep or the micro-batch size)")


def _scaled(progress: Progress | None, offset: int, width: int, total: int) -> Progress | None:
    """Phase progress (done, n) mapped onto [offset, offset + width] of ``total``."""
    if progress is None:
        return None
    last = [offset]

    def tick(done: int, n: int):  # the frontier grows as groups expand: never report going back
        last[0] = max(last[0], offset + (done * width) // max(n, 1))
        return progress(last[0], total)
    return tick


def _bound_weight(objective: str) -> bool:
    """True when the objective scales with step time × GPUs (MFU, cost), False for step time
    alone (tokens/s and time to train: every candidate has the same tokens per step)."""
    return objective in ("mfu", "cost_per_million_tokens", "cost_to_train")


def _kth(cands: list, objective: str, top: int | None) -> float:
    """The top-th best score among timed candidates: a candidate whose lower bound is above it
    cannot enter the top. inf when no bound applies (no top, too few yet). With the headroom
    objective the score is −headroom, known exactly before timing (``_push_screen``), so a
    candidate whose headroom ties the top-th best is still timed (ranking breaks the tie by
    throughput, rank.py)."""
    if top is None or top < 1 or len(cands) < top:
        return math.inf
    if objective == HEADROOM:
        return sorted(-c.headroom_gib for c in cands)[top - 1] + HEADROOM_SLACK_GIB
    w = _bound_weight(objective)
    # a bound can equal its own estimate (uniform stages, nothing to hide): the slack keeps float
    # rounding of the two sums from pruning a candidate that ties the top-th best
    return sorted(c.step_time_s * (c.gpus if w else 1) for c in cands)[top - 1] * (1.0 + BOUND_SLACK)


def _best_first(ex, space: SearchSpace, groups: list, bounds: list, objective: str, top: int | None,
                progress: Progress | None, best_so_far=None) -> tuple[list[GroupScreen], list[Timed], list, list, list[Rejection]]:
    """Branch and bound over a frontier of groups (not yet screened) and candidates (screened,
    not yet timed), each keyed by a lower bound of its score. Each round takes the next ROUND
    nodes (``round_size``) whose bound does not exceed the top-th best score timed so far: groups are screened
    (memory pre-filter, dominance) and their candidates join the frontier, candidates are timed.
    Rounds have a fixed size and order, so every executor does exactly the same work. A family of
    groups sharing their floor (``_floors``) is one node until it is reached; then its groups join
    the frontier at that floor.
    With a top, a group is first refined (``refine.py``: its bound with the recompute its memory
    certainly needs, or its rejection) and re-queued at that bound.
    ``best_so_far(screens, timed)``, when given, is called after each round that timed a candidate.
    Returns (screens, timed, groups never screened, candidates never timed, refinement rejections)."""
    w = _bound_weight(objective)
    heap: list = []
    # with a top to reach, a group first gets the bound its memory allows (refine.py: cheap, no
    # plan); without one every group is screened anyway
    first = "bound" if top is not None and top >= 1 and objective != HEADROOM else "screen"
    # the headroom objective: every group first gets the most headroom its memory may leave
    # (key −inf, in order; headroom.headroom_bound), is screened at −that, and its candidates come
    # at −their headroom (_push_screen), so groups that cannot reach the top are never screened
    if objective == HEADROOM and top is not None and top >= 1:
        first = "headroom"
    gkey = (lambda lb, grp: -math.inf) if objective == HEADROOM else (lambda lb, grp: lb * (grp[0] if w else 1))
    for fam, (lb, rej) in bounds:
        if rej is None:
            grp = groups[fam[0]]
            node = (first, grp) if len(fam) == 1 else ("family", (lb, fam))
            heapq.heappush(heap, (gkey(lb, grp), 0, grp[3], node))
    screens: list[GroupScreen] = []
    timed: list[Timed] = []
    refused: list[Rejection] = []
    cands: list = []
    total, done = len(heap), 0
    size = round_size(total)
    while heap:
        bound = _kth(cands, objective, top)
        if heap[0][0] > bound:
            break
        batch: list = []
        while heap and len(batch) < size and heap[0][0] <= bound:
            if objective == HEADROOM and batch and (heap[0][3][0] == "time") != (batch[-1][0] == "time"):
                # a headroom round either screens or times: a candidate is timed only once every
                # group that may hold more headroom is screened, so the first timed are the best
                # (a mixed round timed candidates a group screened beside them then outranked)
                break
            kind, item = heapq.heappop(heap)[3]
            if kind == "family":  # reached: its groups join the frontier at the floor they share
                lb, fam = item
                for i in fam:
                    grp = groups[i]
                    heapq.heappush(heap, (gkey(lb, grp), 0, grp[3], (first, grp)))
                total += len(fam) - 1
                continue
            if kind == "screen" and first == "bound":  # with a top: options stay nodes (options.py)
                kind = "lazy"
            # refine learns the round's threshold (deterministic: the same on every executor)
            batch.append((kind, (item, bound / (item[0] if w else 1))) if kind == "zero" else (kind, item))
        for part in ex.map(work_batch, space, _dealt(batch), None):
            for o in part:
                if isinstance(o, Refined):
                    if o.rejection is not None:
                        refused.append(o.rejection)
                    else:
                        grp = o.group
                        heapq.heappush(heap, (o.bound * (grp[0] if w else 1), 0, grp[3], (o.then, grp)))
                        total += 1
                elif isinstance(o, GroupScreen):
                    screens.append(o)
                    total += _push_screen(heap, o, w, objective == HEADROOM)
                elif isinstance(o, Flowed):
                    g, _, order = o.cand
                    heapq.heappush(heap, (o.bound * (g if w else 1), 1, order, ("time", o.cand)))
                    total += 1
                else:
                    timed.append(o)
                    cands.extend(o.candidates)
        done += len(batch)
        if best_so_far is not None and any(k == "time" for k, _ in batch):
            best_so_far(screens, timed)
        _tick(progress, done, total)
    _tick(progress, total, total)
    left_groups = [(n[3][0], n[3][1]) for n in heap if n[3][0] not in ("time", "flow", "family", "expand")]
    left_groups += [("expand", n[3][1]) for n in heap if n[3][0] == "expand"]
    left_groups += [("family", [groups[i] for i in n[3][1][1]]) for n in heap if n[3][0] == "family"]
    left_cands = [n[3][1] if n[3][0] == "time" else n[3][1][0] for n in heap if n[3][0] in ("time", "flow")]
    return screens, timed, sorted(left_groups, key=_first_order), sorted(left_cands, key=lambda c: c[2]), refused


def _push_screen(heap: list, o: GroupScreen, w: bool, headroom: bool = False) -> int:
    """A screen's candidates (to time, or to bound by their data flow first) and its options (to
    expand, each standing for its flag combinations) onto the frontier; how many nodes. With the
    headroom objective (an eager screen) each candidate goes to be timed at −its headroom."""
    if headroom:
        for (g, strat, _, order), head in zip(o.entries, o.heads):
            heapq.heappush(heap, (-head, 1, order, ("time", (g, strat, order))))
        return len(o.entries)
    for (g, strat, lb, order), fl in zip(o.entries, o.flows or [None] * len(o.entries)):
        node = ("time", (g, strat, order)) if fl is None else ("flow", ((g, strat, order), lb, fl))
        heapq.heappush(heap, (lb * (g if w else 1), 1, order, node))
    grp = o.group
    if grp is not None:
        for opt in o.options:
            heapq.heappush(heap, (opt.bound * (grp[0] if w else 1), 1, grp[3] * 1000 + opt.first, ("expand", (grp, opt))))
    return len(o.entries) + len(o.options)


def _first_order(node: tuple) -> tuple[int, int]:
    step, item = node
    if step == "expand":  # (group, option): after its group's other nodes, in the order of its candidates
        return item[0][3], 1 + item[1].first
    return (item[0][3] if step == "family" else item[3]), 0


def search(space: SearchSpace, objective: str = "tokens_per_s", top: int | None = None,
           progress: Progress | None = None, executor=None, best_so_far=None) -> SearchResult:
    """Every fitting candidate of ``space`` ranked by ``objective`` (only the best ``top`` when
    given: groups and candidates whose step-time lower bound proves them outside the top are
    neither screened nor timed); the Pareto front of throughput vs cost vs memory headroom over
    the timed candidates; every rejection with its reason. ``best_so_far(result)``, when given, is
    called after each round that timed candidates with a ``SearchResult`` of those timed so far
    (ranked, not proven the best, without the rejections): what a caller that may have to stop the
    search early (the studio's time limit) can still show; the final result does not depend on it."""
    check_objective(objective)
    check_top(top)
    # one search at a time per process: the search's memos live in this process, keyed per space
    # (candidate.py, space.py, prune.py, refine.py), so two searches in two threads would read
    # each other's (two threads on two spaces returned wrong results). The studio runs each search
    # in its own worker process; a pool's or a cluster's workers are processes too.
    with _ONE_AT_A_TIME, paused_gc():  # a long allocation burst over a growing heap, no cycles (sim/nogc.py)
        return _search(space, objective, top, progress, executor, best_so_far)


_ONE_AT_A_TIME = threading.RLock()


def _search(space: SearchSpace, objective: str, top: int | None, progress: Progress | None, executor,
            best_so_far=None) -> SearchResult:
    t0 = time.perf_counter()
    ex = executor or InProcess()
    groups, size = plan_groups(space)
    if not groups:   # contradictory pins: an input error, said as such (a result of no candidate said nothing)
        raise ConfigError([("space", why_empty(space))])
    n1 = len(groups)
    hook = None
    if best_so_far is not None:
        def hook(screens: list[GroupScreen], timed: list[Timed]) -> None:
            best_so_far(_result(objective, top, screens, timed, [], size, t0, space.token_budget, _framework(space)))
    try:
        bounds = _floors(ex, space, groups, progress)
        screens, timed, left_groups, left_cands, refused = _best_first(ex, space, groups, bounds, objective, top,
                                                              _scaled(progress, n1, n1, 2 * n1), hook)
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()
    rejections = [r for _, (_, r) in bounds if r is not None] + [r for s in screens for r in s.rejections]
    rejections += [r for t in timed for r in t.rejections] + refused + _bound_rejections(space, left_groups, left_cands, top, objective)
    return _result(objective, top, screens, timed, rejections, size, t0, space.token_budget, _framework(space))


def _framework(space: SearchSpace) -> str:
    """The space's stack: its base's ``framework`` (the search never varies it)."""
    return str(space.base.get("framework", "megatron-te"))


def _result(objective: str, top: int | None, screens: list[GroupScreen], timed: list[Timed],
            rejections: list[Rejection], size: int, t0: float, token_budget: float | None = None,
            framework: str = "megatron-te") -> SearchResult:
    """The search's result from what it screened and timed (``rejections`` as given)."""
    cands = [c for t in timed for c in t.candidates]
    ranked = rank(cands, objective)
    ranked = ranked if top is None else ranked[:max(top, 0)]
    res = SearchResult(
        candidates=ranked, pareto=pareto(cands),
        rejections=rejections, space_size=size,
        evaluated=sum(t.timed for t in timed),
        memory_checked=sum(s.memory_checked for s in screens),
        seconds=0.0, objective=objective, ties=ties(ranked, objective), token_budget=token_budget, framework=framework)
    res.seconds = time.perf_counter() - t0
    return res


def _floors(ex, space: SearchSpace, groups: list, progress: Progress | None) -> list[tuple[list[int], tuple]]:
    """Phase 0: (the groups of a family, their floor and rejection) per family of groups sharing
    ``prune.floor_key``, in order of first group. Each family's floor is priced on its first group;
    where that one cannot be priced (an invalid group; another of its kind may not be), each of
    its groups gets its own (its own rejection, or its floor)."""
    order = _families(groups)
    n1 = len(groups)
    firsts = _by_kind(ex, space, [groups[f[0]] for f in order], _scaled(progress, 0, n1 // 2, 2 * n1))
    out: list[tuple[list[int], tuple]] = []
    alone: list[int] = []
    for fam, b in zip(order, firsts):
        if b[1] is None:
            out.append((fam, b))
        else:  # the first group's own rejection is ``b``: the others are looked at one by one
            out.append(([fam[0]], b))
            alone += fam[1:]
    alone.sort()
    each = _by_kind(ex, space, [groups[i] for i in alone], _scaled(progress, n1 // 2, n1 - n1 // 2, 2 * n1))
    out += [([i], b) for i, b in zip(alone, each)]
    return sorted(out, key=lambda fb: fb[0][0])


def _families(groups: list) -> list[list[int]]:
    """The indices of the groups sharing ``prune.floor_key``, per key in order of first group. A
    layout's groups come together (``plan_groups``) and differ only in the micro-batch size, so its
    ``floor_parts`` are numbered once: (that number, mbs) is equal exactly where ``floor_key`` is."""
    from .prune import floor_parts

    fams: dict[tuple[int, int], list[int]] = {}
    parts: dict[tuple, int] = {}
    last: tuple = (None, None, -1)
    for i, (g, lay, mbs, _) in enumerate(groups):
        if lay is not last[1] or g != last[0]:
            last = (g, lay, parts.setdefault(floor_parts(g, lay), len(parts)))
        fams.setdefault((last[2], mbs), []).append(i)
    return list(fams.values())


def _by_kind(ex, space: SearchSpace, items: list, progress: Progress | None) -> list[tuple]:
    """``prune.work_floor`` of each group, in the order given. Almost all of phase 0 is pricing
    each block kind's model work once per process (``bound.SharedBounds``): the groups go out
    sorted by block kind (``prune.block_kind``), so a pool's or cluster's workers each price
    their own kinds instead of every worker pricing nearly all of them (measured on
    llama3-405b / 16,384 H100: two processes took as long as one). Phase 0 is a few additions
    per group once the blocks are priced: large batches, so a pool spends its time pricing, not
    shipping the space. The floors do not depend on the batching."""
    # etp may be None (no expert TP): compared as -1, so kinds sort and equal ones lie together
    perm = sorted(range(len(items)), key=_kind_order(items))
    size = max(BATCH_GROUPS, len(items) // 64)
    done = [b for part in ex.map(bound_batch, space, _batches([items[i] for i in perm], size), progress) for b in part]
    out: list = [None] * len(items)
    for i, b in zip(perm, done):
        out[i] = b
    return out


def _kind_order(items: list):
    """The sort key of item i: (``prune.block_kind`` with etp None (no expert TP) as -1, so kinds
    sort and equal ones lie together; i), its layout's part built once per layout (a layout's
    groups share the dict, which ``items`` keeps alive while the key is in use)."""
    from .prune import _kind_head

    heads: dict[tuple[int, int], tuple] = {}

    def key(i: int) -> tuple:
        g, lay, mbs = items[i][0], items[i][1], items[i][2]
        head = heads.get((g, id(lay)))
        if head is None:
            head = heads[(g, id(lay))] = _sortable(_kind_head(g, lay))
        return head, mbs, i
    return key


def _sortable(kind: tuple) -> tuple:
    """A block kind (``prune.block_kind`` or its head) with etp None (no expert TP) as -1, so kinds sort."""
    return tuple(-1 if v is None else v for v in kind)


def _batches(items: list, size: int = BATCH_GROUPS) -> list[Batch]:
    return [items[i:i + size] for i in range(0, len(items), size)]


_GROUP_STEPS = ("bound", "refine", "zero", "screen", "lazy")   # a group's steps (item: the group; "zero": (group, limit))


def _dealt(items: list) -> list[Batch]:
    """A round's nodes in at least ``DEAL`` batches (about ``BATCH_GROUPS`` each). Fixed by the
    round alone (not the executor): every executor merges the same batches in the same order.

    * A group's steps go sorted by block kind (``_deal_key``) in consecutive slices: a kind's groups
      land in consecutive batches (one or two for a kind that fills no more), so a pool's workers
      each price their own kinds' blocks instead of every worker pricing most of them (two
      processes, back to back: DeepSeek-V3 on 16,384 GPUs 29.0 → 27.9 s, the workers' CPU
      43.2 → 40.8 s; llama3-405b 7.1 → 6.9 s).
    * The costly ones — an estimate that compiles a long pipeline takes ~0.5 s, a bound ~50 µs —
      come in runs (the frontier pops a layout's flag variants together): dealt round-robin,
      so a run is spread over the workers instead of handed to one."""
    k = min(len(items), max(DEAL, -(-len(items) // BATCH_GROUPS)))
    groups = sorted((i for i, it in enumerate(items) if it[0] in _GROUP_STEPS), key=lambda i: (_deal_key(items[i]), i))
    costly = [it for it in items if it[0] not in _GROUP_STEPS]
    out: list[list] = [[] for _ in range(k)]
    for j, i in enumerate(groups):
        out[j * k // len(groups)].append(items[i])
    for j, it in enumerate(costly):
        out[j % k].append(it)
    return [b for b in out if b]


def _deal_key(node: tuple) -> tuple:
    """A group step's block kind (``prune.block_kind``), sortable."""
    from .prune import block_kind

    kind, item = node
    g, lay, mbs, _ = item[0] if kind == "zero" else item
    return _sortable(block_kind(g, lay, mbs))


# what a group left on the frontier has been through, by the step it was waiting for
_LEFT = {
    "family": ("unevaluated", "not evaluated (validity and memory not checked): a lower bound on its step time "
                              "(the average rank's share of the step's work, or the pipeline's fill and drain) is not below {kth}"),
    "bound": ("unevaluated", "not evaluated (validity and memory not checked): a lower bound on its step time "
                             "(the average rank's share of the step's work, or the pipeline's fill and drain) is not below {kth}"),
    "headroom": ("unevaluated", "not evaluated (validity and memory not checked): the search stopped before it"),
    "refine": ("bound", "layout valid, memory not checked; outside the top {top}: a lower bound on its step time "
                        "(its pipeline without recompute) is not below {kth}"),
    "zero": ("bound", "layout valid, may fit; outside the top {top}: a lower bound on its step time (its pipeline with the "
                      "recompute its memory needs) is not below {kth}"),
    "screen": ("bound", "layout valid, may fit; outside the top {top}: a lower bound on its step time (its pipeline with the "
                        "recompute its memory needs and the per-micro-batch ZeRO collectives where they apply) is not below {kth}"),
}


# a group the headroom objective never screened: the most headroom its memory may leave is below the top's
_LEFT_HEADROOM = ("bound", "layout valid, may fit; outside the top {top}: the most memory headroom it may have (its "
                           "least memory at any recompute and ZeRO stage) is below {kth}")


def _bound_rejections(space: SearchSpace, groups: list, cands: list, top: int | None,
                      objective: str = "tokens_per_s") -> list[Rejection]:
    """The nodes the branch and bound never reached, each with what is known of it: a group
    waiting for its pipeline bound (``unevaluated``: not even checked for validity), one waiting
    for its memory refinement or its screening (valid; ``bound``), a screened candidate waiting
    to be timed (it passed the memory pre-filter; ``bound``: by its step-time bound, or with the
    headroom objective by its headroom)."""
    out = []
    for step, item in groups:
        if step == "expand":  # a fitting option never reached: its candidates, all flag combinations
            out.append(_option_left(space, item, top))
            continue
        kind, why = _LEFT[step] if not (objective == HEADROOM and step == "screen") else _LEFT_HEADROOM
        if step == "family":  # one rejection for a family never reached: its size, its first group
            g, lay, mbs, _ = item[0]
            # group_size reads the GPU count, tp, pp, cp and ep alone, which a family's groups
            # share (prune.floor_key): its size is its first group's times its count
            n = len(item) * group_size(space, g, lay)
        else:
            g, lay, mbs, _ = item
            n = group_size(space, g, lay)
        kth = _kth_words(top, "headroom" if objective == HEADROOM else "")
        out.append(Rejection(kind, why.format(top=top, kth=kth), n, {"num_gpus": g, **lay, "micro_batch_size": mbs}))
    why = f"passed the memory pre-filter; outside the top {top}: a lower bound on its step time (its pipeline, " \
          f"DP tail and collectives at its flags) is not below {_kth_words(top)}"
    if objective == HEADROOM:
        why = f"fits; outside the top {top}: its memory headroom (from the memory pre-filter, before timing) " \
              f"is below {_kth_words(top, 'headroom')}"
    out += [Rejection("bound", why, 1, example(g, strat)) for g, strat, _ in cands]
    return out


def _kth_words(top: int | None, what: str = "") -> str:
    """The timed candidate a bound is compared with, in words: "the best timed candidate" or "the
    slowest of the 10 best timed candidates" (the CLI printed "the 3-th best"); ``what`` =
    "headroom": that candidate's memory headroom."""
    if what == "headroom":
        return "the best timed candidate's" if top == 1 else f"the least of the {top} best timed candidates'"
    return "the best timed candidate" if top == 1 else f"the slowest of the {top} best timed candidates"


def _option_left(space: SearchSpace, item: tuple, top: int | None) -> Rejection:
    """The rejection of a fitting option (options.py) the frontier never reached."""
    from .options import example as first_candidate

    (g, lay, mbs, _), opt = item
    why = f"passed the memory pre-filter; outside the top {top}: a lower bound on its step time (its pipeline with " \
          f"the recompute it needs, at any overlap flags) is not below {_kth_words(top)}"
    return Rejection("bound", why, opt.count, example(g, first_candidate(space, g, lay, mbs, opt)))
