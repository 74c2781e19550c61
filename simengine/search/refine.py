"""A group's step-time bound raised by the recompute its memory certainly needs, without a plan.

The first bound of a group (``prune.bound_group``) is its no-recompute candidate's: on a large
model most layouts cannot hold every activation, and their fitting candidates recompute — up to
a third more compute (Korthikanti et al. 2022 §5: full recompute re-runs the forward). Before a
group is screened (a plan and a memory check per recompute option and ZeRO stage), this module
finds the recompute options that cannot fit at *any* ZeRO stage of the space, from the same
closed forms the estimate uses, priced once per block kind:

* per chunk, the activations held per in-flight micro-batch and the transient on top
  (``cost/stage.py: _chunk_memory``) and the recompute phase (``_recompute_cost``), for the
  group's own chunks (``place_layers``) and the shared ``_Priced`` blocks of its block kind;
* per rank, the in-flight count of its schedule (``pipeline.max_inflight``) or, with several
  chunks, the peak read off its order (``pipeline.order_memory_peaks``) — ``estimate.memory_by_stage``;
* the model states at the ZeRO stage of the space that needs the least of them on that rank
  (``static_memory``): a lower bound on the memory of every candidate using that recompute.

Memory only falls along none → full(1) → … → full(all) and along offload(1) → … → offload(L − 1)
(``prune``), so the least full recompute and the fewest offloaded layers that may fit are found
by bisection; recompute and offload only add time (the bound leaves an offload's copies out). The group's bound becomes the
least bound over the options that may fit (selective, the fewest offloaded layers, the least full), each with its recompute
phase; a group where none may fit is rejected as OOM with the smallest excess found.

Two steps, so the frontier prices the ZeRO-2/3 collectives only where they can matter:
``refine_memory`` bounds the options that fit at *some* ZeRO stage without those collectives
(one bisection on the least excess over the stages), and ``refine_group`` adds them per stage
for a group still within reach of the top. The pieces are memoised on what they read, across
the groups of one search (``bound.SharedBounds``): chunk memory per block kind and recompute,
the per-rank peaks of a schedule's order per chunk memory, model states per (tp, cp, ep, etp,
pipeline layout, GPU count), ZeRO-2/3 deltas per block kind, pp and chunk.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from .. import fit
from ..config.scenario import Scenario
from ..cost.stage import _chunk_memory, _recompute_cost, _recomputed_layers
from ..pipeline import max_inflight, order_memory_peaks
from ..schedule import get_schedule
from ..errors import ConfigError
from .bound import BLOCK_KEY, PLACE_KEY, TP_OFF, TP_UB, a2a_terms, ep_alone, phase_alone, pipeline_bound, speed_factors, stage_phases_of
from .space import SearchSpace, flag_options, group_size, rc_fields, recompute_options, zero_stages
from .types import Rejection

GIB = float(1 << 30)


def refine_group(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int,
                 limit: float = math.inf) -> tuple[float, Rejection | None]:
    """(lower bound on the step time of every fitting candidate of the group, rejection when the
    group is invalid or certainly OOM). Per ZeRO stage of the space: the recompute options that
    may fit at that stage (its exact model states), each bounded with its recompute phase and, at
    ZeRO-2/3, the per-micro-batch collectives at the DP flags that cost the least; the least of
    those over the stages. ``limit`` (the frontier's top-th best so far, which only falls): once
    the options left are all above it without their collectives, the group is out of the top for
    good and their bound without them stands (a lower bound too)."""
    g = _group_of(space, gpus, layout, mbs, order)
    _GROUPS.pop((gpus, order), None)   # the last step of a group: its memo is not needed again
    if isinstance(g, Rejection):
        return math.inf, g
    best = math.inf
    for lb, zero, z, rc in g.options():
        if lb >= best:
            break
        if not zero or lb > limit:  # every later option is at least lb (above the limit: pruned for good)
            best = lb
            if zero:
                break
            continue
        best = min(best, _bound(g.sc0, g.placed, g.secs, g.memo, rc, g.tco, g.memo.zero(rc, z, g.flags)))
    if best == math.inf:
        return math.inf, g.oom(space, gpus, layout)
    return best, None


def refine_memory(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int,
                  order: int) -> tuple[float, Rejection | None, bool]:
    """The first, cheaper step of ``refine_group``: (the least bound over the recompute options
    that may fit at *some* ZeRO stage, without the ZeRO-2/3 collectives; the group's rejection;
    whether that is already ``refine_group``'s bound). ``refine_group``'s options at each stage
    are among these, each with collectives ≥ 0 added, so this bound is below it; it is the same
    when the least option fits at a stage without those collectives (ZeRO-0/1, or no DP group).
    Memory falls along the full options at every stage, so also their least over the stages:
    one bisection on it, not one per stage. The frontier prices the collectives
    (``refine_group``) only for a group that still reaches the top after this step; the group's
    memo is kept in this process meanwhile (``_GROUPS``), rebuilt when missing."""
    g = _group_of(space, gpus, layout, mbs, order)
    if isinstance(g, Rejection):
        _GROUPS.pop((gpus, order), None)
        return math.inf, g, True
    if not g.rcs or not g.zs:
        _GROUPS.pop((gpus, order), None)
        return g.plain(("none", None)), None, True
    fit = _may_fit(g.rcs, g.over_any)
    fulls = [rc for rc in g.rcs if rc[0] == "full"]
    if fit[-1:] and fit[-1][0] == "full":  # no full option before it fits at any ZeRO stage: nor at each one
        g.lo_full = fulls.index(fit[-1])
    elif fit[-1:] != [("none", None)]:
        g.lo_full = len(fulls)
    if not fit:
        _GROUPS.pop((gpus, order), None)
        return math.inf, g.oom(space, gpus, layout), True
    lb, rc = min(((g.plain(rc), i, rc) for i, rc in enumerate(fit)))[::2]
    exact = any(g.memo.over(rc, z) <= 0 for z in g.zs if not g.zero_at(z))
    if exact:
        _GROUPS.pop((gpus, order), None)
    return lb, None, exact


class _Group:
    """One group's scenario, placement, block seconds, memory memo and options (``_may_fit`` per
    ZeRO stage), shared by ``refine_memory`` and ``refine_group``."""

    def __init__(self, sc0: Scenario, placed, secs, memo: "_Memory", flags: list[dict[str, bool]],
                 zs: list[int], rcs: list[tuple[str, int | None]], probe: dict[str, Any]):
        self.sc0, self.placed, self.secs, self.memo, self.flags, self.rcs, self.probe = sc0, placed, secs, memo, flags, rcs, probe
        self.tco = any(f["tp_comm_overlap"] for f in flags)
        self.sharded = sc0.dp * sc0.strategy.cp * sc0.edp > 1   # cost/stage.py _plan_chunk: ZeRO-2/3 collectives per micro-batch
        self.zs = zs if self.sharded else zs[:1]                # without a DP group every ZeRO stage is the same
        self._options: list[tuple[float, bool, int, tuple[str, int | None]]] | None = None
        self._plain: dict[tuple[str, int | None], float] = {}
        self.lo_full = 0   # the full recompute options before this index fit at no ZeRO stage (refine_memory)

    def zero_at(self, z: int) -> bool:
        """Whether candidates at ZeRO stage ``z`` run ZeRO-2/3 collectives every micro-batch."""
        return z >= 2 and self.sharded

    def plain(self, rc: tuple[str, int | None]) -> float:
        """``_bound`` of recompute ``rc`` without the ZeRO-2/3 collectives: it reads no ZeRO stage,
        so the options of every stage with that recompute share it (memoised per group)."""
        hit = self._plain.get(rc)
        if hit is None:
            hit = self._plain[rc] = _bound(self.sc0, self.placed, self.secs, self.memo, rc, self.tco, None)
        return hit

    def over_any(self, rc: tuple[str, int | None]) -> float:
        """The least GiB over capacity of recompute ``rc`` over the group's ZeRO stages."""
        return min(self.memo.over(rc, z) for z in self.zs)

    def options(self) -> list[tuple[float, bool, int, tuple[str, int | None]]]:
        """(bound without the ZeRO-2/3 collectives, whether they apply, z, recompute) of every
        option that may fit, ascending by bound; [] when none may fit."""
        if self._options is None:
            out: list[tuple[float, bool, int, tuple[str, int | None]]]
            if not self.rcs or self.zs == []:
                out = [(self.plain(("none", None)), False, 0, ("none", None))]
            else:
                # the stages without ZeRO-2/3 collectives bound their options alike (no z in
                # _bound), so only the least of them counts: one bisection on their least excess
                plain = [z for z in self.zs if not self.zero_at(z)]
                out = [(self.plain(rc), False, plain[0], rc)
                       for rc in _may_fit(self.rcs, lambda rc: min(self.memo.over(rc, z) for z in plain), self.lo_full)] if plain else []
                out += [(self.plain(rc), True, z, rc)
                        for z in self.zs if self.zero_at(z) for rc in _may_fit(self.rcs, lambda rc, z=z: self.memo.over(rc, z), self.lo_full)]
            self._options = sorted(out, key=lambda o: o[0])
        return self._options

    def oom(self, space: SearchSpace, gpus: int, layout: dict[str, Any]) -> Rejection:
        from .types import example

        worst = min(self.over_any(rc) for rc in self.rcs[:1] + self.rcs[-1:])
        return Rejection("oom", f"OOM by at least {max(worst, 0.0):.2f} GiB at every ZeRO stage and recompute (memory lower bound)",
                         group_size(space, gpus, layout), example(gpus, self.probe))


# (gpus, group order) → its _Group between refine_memory and refine_group, in this process (a
# cache: another process rebuilds it); cleared with the space
_GROUPS: dict[tuple[int, int], "_Group | Rejection"] = {}
_GROUPS_OF: list = [None]
MAX_GROUPS = 4096
MAX_ORDER_PEAKS = 8192   # entries of SharedBounds.order_peaks (each up to pp·vpp pairs in its key)


def _group_of(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int) -> "_Group | Rejection":
    from .candidate import _shared_key

    key = _shared_key(space)
    if _GROUPS_OF[0] != key or len(_GROUPS) >= MAX_GROUPS:
        _GROUPS.clear()
        _GROUPS_OF[0] = key
    hit = _GROUPS.get((gpus, order))
    if hit is None:
        hit = _GROUPS[(gpus, order)] = _group(space, gpus, layout, mbs)
    return hit


def _group(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int) -> "_Group | Rejection":
    """The group's ``_Group``, or its rejection when its scenario is invalid."""
    from .prune import _shared, _strategy, scenario
    from .types import example

    zs = zero_stages(space)
    rcs = recompute_options(space, layout)
    probe = _strategy(space, layout, mbs, zs[0] if zs else 1, rcs[0] if rcs else ("none", None), {})
    try:
        sc0 = scenario(space, gpus, probe)
    except ConfigError as e:
        return Rejection("invalid", str(e), group_size(space, gpus, layout), example(gpus, probe))
    memo = memory_of(space, gpus, sc0, probe)
    secs = _shared(space).secs(gpus, probe, lambda: sc0)
    return _Group(sc0, memo.placed, secs, memo, flag_options(space, layout, sc0.dp), zs, rcs, probe)


def memory_of(space: SearchSpace, gpus: int, sc0: Scenario, probe: dict[str, Any]) -> "_Memory":
    """The closed-form memory of the group whose first candidate is ``probe`` (scenario ``sc0``),
    its pieces shared across the groups of the search (``bound.SharedBounds``)."""
    from .prune import _shared

    sb = _shared(space)
    placed = sb.placed(probe, sc0.model, sc0.strategy)
    return _Memory(sc0, placed, sb.priced_blocks(gpus, probe, lambda: sc0), zero_stages(space), sb,
                   (gpus, *(probe[k] for k in BLOCK_KEY)), bool(space.base.get("fp8_param_gather")))


def _may_fit(rcs: list[tuple[str, int | None]], over, lo: int = 0) -> list[tuple[str, int | None]]:
    """The activation options worth bounding: none when it fits (every other only adds time), else
    selective if it fits, the fewest offloaded layers that fit and the least full recompute that
    fits (memory falls along each of those families: bisection; more offloaded or recomputed
    layers only add time). ``lo``: the full options before that index are known not to fit."""
    if ("none", None) in rcs and over(("none", None)) <= 0:
        return [("none", None)]
    out: list[tuple[str, int | None]] = []
    if ("selective", None) in rcs and over(("selective", None)) <= 0:
        out.append(("selective", None))
    offs = [rc for rc in rcs if rc[0] == "offload"]
    i = _first_fit(offs, over, 0)
    if i < len(offs):
        out.append(offs[i])
    fulls = [rc for rc in rcs if rc[0] == "full"]
    lo = _first_fit(fulls, over, lo)
    if lo < len(fulls):
        out.append(fulls[lo])
    return out


def _first_fit(family: list[tuple[str, int | None]], over, lo: int) -> int:
    """The first index of ``family`` (memory falls along it) whose option fits, from ``lo``."""
    hi = len(family)
    while lo < hi:
        mid = (lo + hi) // 2
        if over(family[mid]) <= 0:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _bound(sc0: Scenario, placed, secs, memo: "_Memory", rc: tuple[str, int | None], tco: bool,
           zero: list[tuple[float, float, float]] | None) -> float:
    """``pipeline_bound`` of the group's candidates with recompute ``rc``: forward/backward from
    the shared blocks (as priced without userbuffers, and with them when the group has
    ``tp_comm_overlap`` candidates), the recompute phase without its TP collectives (both ways
    below what either candidate runs), ``zero`` (per stage: forward, backward, recompute) added,
    no p2p, no DP tail."""
    m = sc0.num_microbatches // _chains(sc0)
    rec = memo.recompute(rc)
    reps = placed.rep_ranks if zero is None else None
    ep, a2a = a2a_terms(placed, secs, sc0.strategy, m)
    out = math.inf
    for side in ((TP_OFF, TP_UB) if tco else (TP_OFF,)):
        ph = stage_phases_of(placed, secs, side, rec, ep=ep)
        if zero is not None:
            ph = [(f + a, b + c, w, r + d) for (f, b, w, r), (a, c, d) in zip(ph, zero)]
        out = min(out, pipeline_bound(placed.pipe, ph, m, ranks=reps, a2a=a2a))
    return out


def _chains(sc: Scenario) -> int:

    return get_schedule(sc.strategy.schedule).chains


def _chunk_kinds(shared, placed, model) -> tuple:
    """(ranks, each rank's chunks, the distinct chunks for memory with one of each, each rank's
    chunks as indices into them, per data-flow stage its chunk's key) of a placed layout, once
    per layout in a search (``SharedBounds.chunk_kinds``; the groups of other block kinds and
    micro-batch sizes share it). A chunk's memory depends on what it holds — the kind of each
    layer in order (recompute takes the first ones), the ends, MTP and windowed layers (cost/stage.py
    ``_plan_chunk_once``) —, the block kind (the memo's owner) and the recompute."""
    hit = shared.chunk_kinds.get(id(placed))
    if hit is not None and hit[0] is placed:
        return hit[1]
    ranks = sorted({cw.rank for cw in placed.works})
    by_rank = [tuple(cw for cw in sorted(placed.works, key=lambda c: (c.rank, c.index)) if cw.rank == r) for r in ranks]
    mem_kinds: list[tuple[tuple, Any]] = []
    index: dict[tuple, int] = {}
    rank_kinds: list[tuple[int, ...]] = []
    for chunks in by_rank:
        idx = []
        for cw in chunks:
            if model.hybrid_pattern is not None:  # cost/stage.py _chunk_key: the chunk's mixers in order
                kinds: Any = "".join(model.layer_kind(i) for i in cw.layers)
            else:
                kinds = tuple(model.is_moe_layer(i) for i in cw.layers) if cw.moe_layers else len(cw.layers)
            base = (kinds, cw.first, cw.last, cw.mtp, cw.mtp_moe, cw.window_layers)
            if base not in index:
                index[base] = len(mem_kinds)
                mem_kinds.append((base, cw))
            idx.append(index[base])
        rank_kinds.append(tuple(idx))
    bases = {cw.index: mem_kinds[i][0] for idx, chunks in zip(rank_kinds, by_rank) for i, cw in zip(idx, chunks)}
    out = (ranks, by_rank, mem_kinds, rank_kinds, bases)
    shared.chunk_kinds[id(placed)] = (placed, out)   # the layout kept alive with it: its id stays its own
    return out


class _Memory:
    """Memory lower bound and recompute phase of one group, per recompute option."""

    def __init__(self, sc0: Scenario, placed, p, zs: list[int], shared, block: tuple, fp8_gather: bool = False):
        self.sc0, self.placed, self.p = sc0, placed, p
        self.fp8_gather = fp8_gather   # the space's fp8_param_gather (its base), whatever the probe's stage
        # chunk memory is shared across the groups of one block kind (``bound.SharedBounds.chunk_memory``)
        self.chunk_memory: dict[tuple, tuple[float, float]] = shared.chunk_memory.setdefault(block, {})
        self.order_peaks: dict[tuple, list[tuple[float, float]]] = shared.order_peaks
        self.zero_memo: dict[tuple, tuple[float, float, float]] = shared.zero.setdefault(block, {})
        self.slow, self.k = speed_factors(sc0)
        st = sc0.strategy
        self.ranks, self.by_rank, self.mem_kinds, self.rank_kinds, self.stage_bases = _chunk_kinds(shared, placed, sc0.model)
        # model states depend on what static_memory / stage_params read (cost/static_memory.py):
        # tp, ep, etp, pp, cp, the DP groups (the GPU count) and the ZeRO stage, and the chunks each
        # rank holds (the pipeline layout) — not on the micro-batch size or cp_comm_type
        skey = (block[0], st.tp, st.cp, st.ep, st.etp, *(getattr(st, k) for k in PLACE_KEY), tuple(zs))
        static = shared.statics.get(skey)
        if static is None:
            static = shared.statics[skey] = self._statics(zs)
        self.static = static
        self.cap = sc0.system.gpu.memory_gib - sc0.system.gpu.non_torch_gib
        self.ov = st.allocator_overhead
        self._peaks: dict[tuple, list[tuple[float, float]]] = {}
        self._over: dict[tuple, float] = {}
        self._comm: Any = None
        # the block kind's priced blocks with each recompute option set: what _chunk_memory,
        # _recomputed_layers and _recompute_cost read of their scenario is the recompute fields, the
        # model and recompute_modules (the space's), so the groups of one block kind share them
        self._pf: dict[tuple, Any] = shared.priced_rc.setdefault(block, {})
        self._inflight: list[int] | None = None

    def _scenario(self, **update) -> Scenario:
        """The group's scenario with some strategy fields changed, not re-validated (the fields
        come from the space's own proposals; only the closed forms below read it). At another ZeRO
        stage its FP8 parameter gathers follow that stage (``fp8_gather_at``): the probe's stage
        may have turned off what the space asks for (ZeRO 0 gathers nothing)."""
        from .candidate import fp8_gather_at

        sc0 = self.sc0
        if "zero_stage" in update:
            update.setdefault("fp8_param_gather", fp8_gather_at(self.fp8_gather, sc0.strategy.framework, update["zero_stage"]))
        return Scenario.model_construct(model=sc0.model, system=sc0.system, strategy=sc0.strategy.model_copy(update=update))

    def _statics(self, zs: list[int]) -> dict[int, list[tuple[float, float]]]:
        """Per ZeRO stage of the space, per rank, its model-state bytes and the other streams' pools
        (cost/static_memory.py ``StaticMemory.pools``: reserved, not allocated)."""
        from ..cost.static_memory import static_memory, stage_params

        kinds: dict[tuple, int] = {}  # ranks holding the same kinds of chunk have the same model states
        of_rank = [kinds.setdefault(tuple(self.placed.of_stage[cw.index] for cw in chunks), len(kinds)) for chunks in self.by_rank]
        first = {i: chunks for chunks, i in zip(self.by_rank, of_rank)}
        params = [stage_params(self.sc0, first[i]) for i in range(len(kinds))]
        out = {}
        for z in zs or [self.sc0.strategy.zero_stage]:
            sc = self._scenario(zero_stage=z)
            per = [(sum((s.weights, s.grads, s.optimizer, s.buffers)), s.pools) for s in (static_memory(sc, p) for p in params)]
            out[z] = [per[i] for i in of_rank]
        return out

    def _priced_for(self, rc: tuple[str, int | None]):
        hit = self._pf.get(rc)
        if hit is None:
            hit = self._pf[rc] = replace(self.p, sc=self._scenario(**rc_fields(rc)))
        return hit

    def over(self, rc: tuple[str, int | None], z: int) -> float:
        """GiB over capacity on the tightest rank for recompute ``rc`` at ZeRO stage ``z``
        (``estimate.memory_by_stage``: model states + the held activations + the transient)."""
        hit = self._over.get((rc, z))
        if hit is None:
            peaks = self._peaks.get(rc)
            if peaks is None:
                peaks = self._peaks[rc] = self._activation_peaks(rc)
            hit = self._over[(rc, z)] = max(fit.reserved(static + held + extra, self.ov, pools) / GIB
                                            for (static, pools), (held, extra) in zip(self.static[z], peaks)) - self.cap
        return hit

    def tightest(self, rc: tuple[str, int | None], z: int) -> tuple[float, int]:
        """(``over``, the rank where it is reached): what ``prune.memory_at_zero`` says of the
        candidate's plan, from the closed forms alone (equal to ~1e-14 GiB on the test spaces,
        tests/test_search_options.py)."""
        over = self.over(rc, z)
        peaks = self._peaks[rc]
        per = [fit.reserved(static + held + extra, self.ov, pools) for (static, pools), (held, extra) in zip(self.static[z], peaks)]
        return over, self.ranks[max(range(len(per)), key=per.__getitem__)]

    def _activation_peaks(self, rc: tuple[str, int | None]) -> list[tuple[float, float]]:
        """Per rank, (held activation bytes, transient bytes) at its peak for recompute ``rc``."""

        st, sc0 = self.sc0.strategy, self.sc0
        m = sc0.num_microbatches // _chains(sc0)
        combined = st.overlap_moe_expert_parallel_comm
        seen = self.chunk_memory
        vals = []
        p = self._priced_for(rc)
        for base, cw in self.mem_kinds:
            n_rc = _recomputed_layers(p, cw)
            key = (rc[0], n_rc, rc[1] if rc[0] == "offload" else None, *base)
            hit = seen.get(key)
            if hit is None:
                hit = seen[key] = _chunk_memory(p, cw, n_rc)
            vals.append(hit)
        mems = [[vals[i] for i in idx] for idx in self.rank_kinds]
        if any(len(c) > 1 for c in mems):
            # the peak read off the order depends on the order and the chunks' memory alone: groups
            # of other block kinds (cp_comm_type, tp_comm_overlap, …) often hold the same numbers
            key = (st.schedule, st.pp, m, st.vpp, combined, tuple(map(tuple, mems)))
            peaks = self.order_peaks.get(key)
            if peaks is None:
                if len(self.order_peaks) >= MAX_ORDER_PEAKS:  # a cache: keep its memory bounded on huge spaces
                    self.order_peaks.clear()
                peaks = self.order_peaks[key] = [(h, e) for h, e, _ in order_memory_peaks(st.schedule, st.pp, m, st.vpp, mems, combined)]
            return peaks
        if self._inflight is None:  # the schedule's in-flight count per rank: the same for every recompute
            self._inflight = [max_inflight(st.schedule, r, st.pp, m, st.vpp, combined) for r in self.ranks]
        return [(n * c[0][0], c[0][1]) for n, c in zip(self._inflight, mems)]

    def zero(self, rc: tuple[str, int | None], z: int, flags: list[dict[str, bool]]) -> list[tuple[float, float, float]]:
        """Per data-flow stage, the least over the group's DP flags of what the ZeRO-2/3
        collectives add to its forward, backward and recompute (``prune.zero_deltas`` on the
        chunks' own compute, the group's own network). Shared across the groups of one block
        kind and pp (the network groups: cost/comm.py reads tp, cp, dp, pp, ep, etp) whose chunks
        hold the same (``SharedBounds.zero``): layouts that differ only in their schedule."""
        from ..cost.comm import CommModel
        from .prune import zero_chunk

        fl = tuple(sorted({(f["overlap_grad_reduce"], f["overlap_param_gather"]) for f in flags}))
        # (the weight gradient's compute is beside the backward's collectives only where the schedule
        # keeps it in the B task: cost/zero.py zero_per_microbatch)
        head = (self.sc0.strategy.pp, rc, z, fl, self.sc0.strategy.defers_weight_grad)
        out: list[tuple[float, float, float]] = []
        for cw, i in zip(self.placed.works, self.placed.of_stage):
            key = (*head, self.stage_bases[cw.index])
            hit = self.zero_memo.get(key)
            if hit is None:
                if self._comm is None:
                    self._comm = CommModel(self.sc0)
                p = self._priced_for(rc)
                n = self.placed.kinds[i]
                f = sum(c * p.costs[k][0].compute_s for k, c in n.items())
                b = sum(c * p.costs[k][1].compute_s for k, c in n.items())
                w = sum(c * p.costs[k][2].compute_s for k, c in n.items())
                r = _recompute_cost(p, cw, _recomputed_layers(p, cw)).compute_s
                best: tuple[float, float, float] | None = None
                for ogr, opg in fl:
                    sc = self._scenario(zero_stage=z, **rc_fields(rc), overlap_grad_reduce=ogr, overlap_param_gather=opg)
                    d = zero_chunk(sc, self._comm, cw, f, b, r, self.slow, w)
                    best = d if best is None else (min(best[0], d[0]), min(best[1], d[1]), min(best[2], d[2]))
                hit = self.zero_memo[key] = best or (0.0, 0.0, 0.0)
            out.append(hit)
        return out

    def recompute(self, rc: tuple[str, int | None]) -> list[float]:
        """The recompute phase of each distinct chunk of the layout (``Placed.kinds``), run alone
        without its TP collectives, with its expert all-to-all (cost/stage.py: _recompute_cost)."""

        if rc[0] in ("none", "offload"):   # (an offload's copies only add time: left out of the bound)
            return [0.0] * len(self.placed.kinds)
        p = self._priced_for(rc)
        out: list[float] = [0.0] * len(self.placed.kinds)
        done = set()
        for cw, i in zip(self.placed.works, self.placed.of_stage):
            if i in done:
                continue
            done.add(i)
            pc = _recompute_cost(p, cw, _recomputed_layers(p, cw))
            # never paired: its expert all-to-all runs alone (sim/values.py, the recompute slot)
            out[i] = phase_alone(pc, False, self.slow, self.k) + ep_alone(pc, self.slow)
        return out

