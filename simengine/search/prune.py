"""Evaluate one group of the space — a layout and a micro-batch size — with a memory pre-filter
before any timing and dominance pruning that cannot discard a better fitting candidate.

Why each rule is safe (the brute-force test in tests/test_search.py re-checks them):

* Memory (``simengine.estimate.memory_by_stage``, closed form, no timing) does not depend on
  the overlap flags, and along ``none → full(1) → … → full(all)`` it only falls: recomputing one
  more layer stores its input instead of its activations (Korthikanti et al. 2022 §5, Eq. 1 vs
  the 34·s·b·h term). So the least recompute that fits is found by bisection.
* Time only grows with recompute: more recomputed layers add forward work to the backward of
  every micro-batch while every other cost and the schedule's order stay the same, and a fixed
  per-stream order makes the list scheduler's finish time monotone in task durations (max-plus
  recurrences, ``simengine/sim/engine.py``). So if ``none`` fits, every recompute is dominated;
  otherwise ``full(k)`` with the least fitting k dominates ``full(k' > k)``; ``selective`` is timed too.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from pydantic import ValidationError

from ..config.model import ModelSpec
from ..config.scenario import Scenario, make_scenario
from ..config.strategy import StrategySpec
from ..config.system import SystemSpec
from ..errors import ConfigError, from_pydantic
from ..pipeline import sim_microbatches
from ..schedule import get_schedule
from .space import SearchSpace, flag_options, group_size, recompute_options, zero_stages
from .types import Candidate, GroupScreen, Rejection

GIB = float(1 << 30)


@lru_cache(maxsize=8)
def _specs(model_json: str, system_json: str, gpus: int) -> tuple[ModelSpec, SystemSpec]:
    import json

    sysd = dict(json.loads(system_json), num_gpus=gpus)
    return ModelSpec.model_validate(json.loads(model_json)), SystemSpec.model_validate(sysd)


_KEYS: dict[int, tuple[SearchSpace, str, str]] = {}


def specs(space: SearchSpace, gpus: int) -> tuple[ModelSpec, SystemSpec]:
    """Validated model and system (``gpus`` GPUs) of a space, built once per process."""
    import json

    hit = _KEYS.get(id(space))
    if hit is None or hit[0] is not space:
        hit = (space, json.dumps(space.model, sort_keys=True), json.dumps(space.system, sort_keys=True))
        _KEYS.clear()
        _KEYS[id(space)] = hit
    return _specs(hit[1], hit[2], gpus)


def scenario(space: SearchSpace, gpus: int, strategy: dict[str, Any]) -> Scenario:
    """The validated scenario of one candidate; ConfigError with the scenario's own message."""
    model, system = specs(space, gpus)
    try:
        st = StrategySpec.model_validate(strategy)
    except ValidationError as e:
        raise from_pydantic(e, "strategy", StrategySpec.model_fields) from None
    return make_scenario(model, system, st)


def memory_and_bound(sc: Scenario) -> tuple[float, int, tuple[float, float]]:
    """(GiB over capacity on the tightest stage — negative = headroom —, that stage, lower
    bounds on the step time with and without ``tp_comm_overlap``).

    A rank's compute stream runs, for each of the m micro-batches, every chunk's forward,
    backward, weight-gradient and recompute kernels and, in line after them, the exposed TP/CP/EP
    collectives (``simengine/sim/overlap.py``: what no overlap can hide). Bubbles, p2p, DP
    communication and the optimizer only add to that. The plan is priced with the overlap flags
    off: userbuffers overlap (``tp_comm_overlap``) can only hide TP collectives and slow the GEMMs
    they hide behind, so the bound with it drops the TP term; ZeRO-2/3 collectives are left out
    of both (the DP flags may hide them)."""
    from ..cost.stage import build_plan
    from ..estimate import memory_by_stage

    gpu = sc.system.gpu
    plan = build_plan(sc)
    mems = memory_by_stage(sc, plan)
    worst = max(mems, key=lambda x: x.reserved_gib)
    on, off = _bounds(plan, has_fb_pairs(sc))
    k = sim_microbatches(sc) * sc.strategy.straggler_factor  # ids through every chunk (DualPipe: m/2)
    return worst.reserved_gib + gpu.non_torch_gib - gpu.memory_gib, worst.stage, (on * k, off * k)


def priced(sc: Scenario):
    """(plan, memory per stage) of one scenario: what the pre-filter re-uses across ZeRO stages."""
    from ..cost.stage import build_plan
    from ..estimate import memory_by_stage

    plan = build_plan(sc)
    return plan, memory_by_stage(sc, plan)


def memory_at_zero(sc: Scenario, plan, mems) -> tuple[float, int]:
    """(GiB over capacity, tightest stage) of ``sc`` from the plan of the same scenario at another
    ZeRO stage: only the model states change (``cost/static_memory.py``: weights, grads, optimizer
    states and the ZeRO-3 buffers are sharded by the stage; activations and transients are not),
    so the peak is the other stage's peak with its static part swapped (estimate.py:
    reserved = allocated · (1 + allocator_overhead))."""
    from ..cost.static_memory import static_memory

    gpu, st = sc.system.gpu, sc.strategy
    worst, stage = -math.inf, 0
    for sp, m in zip(plan.stages, mems):
        old, new = sp.static, static_memory(sc, sp.params)
        alloc = m.peak_gib * GIB - (old.weights + old.grads + old.optimizer + old.buffers) + (new.weights + new.grads + new.optimizer + new.buffers)
        over = alloc * (1.0 + st.allocator_overhead) / GIB + gpu.non_torch_gib - gpu.memory_gib
        if over > worst:
            worst, stage = over, sp.rank
    return worst, stage


def has_fb_pairs(sc: Scenario) -> bool:
    """Whether some forward and backward run as an overlapped F&B pair: the schedule's own
    (DualPipe/DualPipeV ``_forward_backward_chunk``, ``Schedule.pairs``) or Megatron-Core's combined
    1F1B (``overlap_moe_expert_parallel_comm``; schedule/_combined.py)."""
    return sc.strategy.overlap_moe_expert_parallel_comm or get_schedule(sc.strategy.schedule).pairs is not None


def _bounds(plan, paired: bool = False) -> tuple[float, float]:
    """Per micro-batch: the largest per-rank time its compute stream must spend, each phase run
    alone at no contention (sim/overlap.py: compute + exposed communication — the least any
    overlap leaves, and monotone in the slowdown, so slowdown 1 bounds every strategy). The plan
    is priced with the flags off; ``on`` drops the TP collectives (userbuffers may hide them all),
    ``off`` keeps them with the windows they have without userbuffers; the ZeRO-2/3 collectives
    the DP overlap flags may hide are left out of both.

    With F&B pairs (``paired``) a member's expert all-to-all runs beside its partner's compute
    (sim/overlap.py ``paired``, ``layout.PAIRED_KIND``), and what it hides net of contention is at
    most that compute (``resolve``: hidden − extra ≤ window). Each phase is the partner of at most
    one other, so over a rank the all-to-all E leaves at least E − C exposed, C = the rank's compute:
    the bound is the rest of the phases plus max(0, E − C)."""
    from ..sim.inputs import CommTask
    from ..sim.layout import PAIRED_KIND
    from ..sim.overlap import phase_seconds

    hideable = {"dp_comm", PAIRED_KIND} if paired else {"dp_comm"}
    on = off = 0.0
    for st in plan.stages:
        with_tp = without_tp = compute = a2a = 0.0
        for c in st.chunks:
            for pc in (c.fwd, c.bwd, c.wgt, c.recompute):
                raw = tuple(CommTask(*t) for t in pc.tasks())
                # ZeRO-2/3 gathers live in the phases too and the DP flags may hide them: left out
                tasks = tuple(t for t in raw if t.kind not in hideable)
                with_tp += phase_seconds(pc.compute_s, tasks, 1.0)
                without_tp += phase_seconds(pc.compute_s, tuple(t for t in tasks if t.kind != "tp_comm"), 1.0)
                compute += pc.compute_s
                a2a += sum(t.seconds * t.count for t in raw if t.kind == PAIRED_KIND)
        left = max(0.0, a2a - compute) if paired else 0.0
        on, off = max(on, without_tp + left), max(off, with_tp + left)
    return on, off


def _rc_label(rc: tuple[str, int | None]) -> str:
    lvl, k = rc
    return lvl if lvl != "full" else ("full (all layers)" if k is None else f"full ({k} layers)")


def _strategy(space: SearchSpace, layout: dict[str, Any], mbs: int, z: int, rc: tuple[str, int | None],
              flags: dict[str, bool]) -> dict[str, Any]:
    return {**space.base, **layout, "micro_batch_size": mbs, "zero_stage": z, "recompute": rc[0],
            "recompute_num_layers": rc[1], "dp": None, **flags}


_LB_MEMO: dict[tuple, tuple[float, float]] = {}
_LB_SPACE: list = [None]


def bound_group(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int) -> tuple[float, Rejection | None]:
    """Lower bound on the step time of every candidate of a group, before any memory check:
    the bound of its no-recompute candidate (recompute only adds compute, the ZeRO stage does
    not change the bounded terms), with TP overlap when any flag combination allows it.
    (inf, rejection) when the group is invalid. The bound is shared by the schedules that put
    one chunk on each rank (same partition, same per-rank work: gpipe, 1f1b, zb-h1)."""
    zs = zero_stages(space)
    rcs = recompute_options(space, layout)
    probe = _strategy(space, layout, mbs, zs[0] if zs else 1, rcs[0] if rcs else ("none", None), {})
    try:
        sc = scenario(space, gpus, probe)
    except ConfigError as e:
        return math.inf, Rejection("invalid", str(e), group_size(space, gpus, layout), _ex(gpus, probe))
    if _LB_SPACE[0] is not space:
        _LB_MEMO.clear()
        _LB_SPACE[0] = space
    # one chunk per rank, one chain, no F&B pairs: the same per-rank work (DualPipe holds two
    # chunks per rank and runs half the micro-batches through each; pairs hide the all-to-all)
    sched = get_schedule(layout["schedule"])
    one_chunk = sched.chunks_per_rank(layout["vpp"]) == 1 and sched.chains == 1 and not has_fb_pairs(sc)
    key = (gpus, mbs, *(layout[k] for k in ("tp", "pp", "vpp", "cp", "cp_comm_type", "ep", "etp")),
           "one-chunk" if one_chunk else (layout["schedule"], has_fb_pairs(sc)))
    lbs = _LB_MEMO.get(key)
    if lbs is None:
        base = dict(probe, recompute="none", recompute_num_layers=None)
        lbs = _LB_MEMO[key] = memory_and_bound(scenario(space, gpus, base))[2]
    tco = any(f["tp_comm_overlap"] for f in flag_options(space, layout, sc.dp))
    return (lbs[0] if tco else lbs[1]), None


def screen_group(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int) -> GroupScreen:
    """Phase 1 of a group (layout, micro-batch size): validity, the memory pre-filter and
    recompute dominance; each surviving candidate gets a lower bound on its step time."""
    zs = zero_stages(space)
    rcs = recompute_options(space, layout)
    out = GroupScreen([], 0, [])
    probe = _strategy(space, layout, mbs, zs[0] if zs else 1, rcs[0] if rcs else ("none", None), {})
    try:
        sc0 = scenario(space, gpus, probe)
    except ConfigError as e:
        out.rejections.append(Rejection("invalid", str(e), group_size(space, gpus, layout), _ex(gpus, probe)))
        return out
    flags = flag_options(space, layout, sc0.dp)
    has_dp = sc0.dp * layout["cp"] > 1 or sc0.edp > 1
    seen_zero = False
    known: dict[tuple[str, int | None], tuple[float, float]] = {}
    plans: dict[tuple[str, int | None], tuple] = {}   # recompute option → (plan, memory, bounds), any ZeRO stage
    for z in zs:
        if not has_dp and seen_zero:  # no data-parallel group: every ZeRO stage shards over 1 rank
            out.rejections.append(Rejection("dominated", f"zero_stage={z} is the same as zero_stage={zs[0]} without a data-parallel group",
                                            len(rcs) * len(flags), _ex(gpus, probe)))
            continue
        seen_zero = True
        for rc, (lb_on, lb_off) in _fitting_recompute(space, gpus, layout, mbs, z, rcs, len(flags), out, known, plans):
            for fl in flags:
                lb = lb_on if fl.get("tp_comm_overlap") else lb_off
                out.entries.append((gpus, _strategy(space, layout, mbs, z, rc, fl), lb, order * 1000 + len(out.entries)))
    return out


def _fitting_recompute(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, z: int,
                       rcs: list[tuple[str, int | None]], nflags: int, out: GroupScreen,
                       known: dict[tuple[str, int | None], tuple[float, float]],
                       plans: dict[tuple[str, int | None], tuple]) -> list[tuple[tuple[str, int | None], tuple[float, float]]]:
    """The recompute options worth timing at ZeRO stage ``z``, each with a lower bound on its
    step time; the others become rejections (each standing for its ``nflags`` flag combinations).
    ``known`` maps the options that fitted at a lower ZeRO stage to their bound: a higher stage
    shards more model state (Rajbhandari et al. 2020, Fig. 1), so they fit here too, and the
    compute the bound counts does not depend on the ZeRO stage. ``plans`` keeps each option's
    priced plan, so another ZeRO stage only recomputes the model states (``memory_at_zero``)."""
    base = _strategy(space, layout, mbs, z, ("none", None), {})

    def check(rc):  # (GiB over capacity, stage, error)
        if rc in known:
            return -1.0, 0, ""
        try:
            sc = scenario(space, gpus, dict(base, recompute=rc[0], recompute_num_layers=rc[1]))
        except ConfigError as e:
            return math.inf, -1, str(e)
        hit = plans.get(rc)
        if hit is None:  # price once per recompute option; other ZeRO stages swap the model states
            out.memory_checked += 1
            plan, mems = priced(sc)
            on, off = _bounds(plan, has_fb_pairs(sc))
            k = sim_microbatches(sc) * sc.strategy.straggler_factor
            hit = plans[rc] = (plan, mems, (on * k, off * k))
        o, stage = memory_at_zero(sc, hit[0], hit[1])
        if o <= 0:
            known[rc] = hit[2]
        return o, stage, ""

    def reject(kind, reason, n, rc):
        if n:
            ex = _ex(gpus, dict(base, recompute=rc[0], recompute_num_layers=rc[1]))
            out.rejections.append(Rejection(kind, reason, n * nflags, ex))

    keep: list[tuple[tuple[str, int | None], tuple[float, float]]] = []
    if ("none", None) in rcs:
        o, stage, err = check(("none", None))
        if o <= 0:
            reject("dominated", "recompute 'none' fits; any recompute only adds time", len(rcs) - 1, rcs[-1])
            return [(("none", None), known[("none", None)])]
        reject("invalid" if err else "oom", err or _oom(o, stage), 1, ("none", None))
    if ("selective", None) in rcs:
        o, stage, err = check(("selective", None))
        if o <= 0:
            keep.append((("selective", None), known[("selective", None)]))
        else:
            reject("invalid" if err else "oom", err or _oom(o, stage), 1, ("selective", None))
    keep += _least_full([rc for rc in rcs if rc[0] == "full"], check, reject, known)
    return keep


def _least_full(fulls, check, reject, known) -> list:
    """Bisect the full-recompute options (memory falls along the list) for the fewest recomputed
    layers that fit; the ones with more only add time (dominated), those with fewer do not fit."""
    lo, hi, last_bad = 0, len(fulls), None
    while lo < hi:  # first index whose memory fits
        mid = (lo + hi) // 2
        o, stage, err = check(fulls[mid])
        if err:
            reject("invalid", err, 1, fulls.pop(mid))
            hi -= 1
        elif o <= 0:
            hi = mid
        else:
            lo, last_bad = mid + 1, (o, stage, fulls[mid])
    keep = []
    if lo < len(fulls):
        keep.append((fulls[lo], known[fulls[lo]]))
        reject("dominated", f"full recompute of fewer layers ({_rc_label(fulls[lo])}) fits; more recompute only adds time",
               len(fulls) - lo - 1, fulls[-1])
    if lo and last_bad is not None:
        o, stage, rc = last_bad
        reject("oom", f"{_oom(o, stage)} (at least; {_rc_label(rc)} recompute)", lo, fulls[0])
    return keep


def _oom(over_gib: float, stage: int) -> str:
    return f"OOM by {over_gib:.2f} GiB on stage {stage}"


def time_candidate(space: SearchSpace, gpus: int, strat: dict[str, Any], order: int, out) -> Candidate | None:
    """Time one candidate with the estimate; a Candidate, or None with a rejection in ``out``."""
    from .. import api

    try:
        sc = scenario(space, gpus, strat)
        rep = api.estimate(sc)
    except ConfigError as e:
        out.rejections.append(Rejection("invalid", str(e), 1, _ex(gpus, strat)))
        return None
    gpu = sc.system.gpu
    worst = max(rep.memory_by_stage, key=lambda x: x.reserved_gib)
    head = gpu.memory_gib - worst.reserved_gib - gpu.non_torch_gib
    if head < 0:  # the estimate's verdict wins over the pre-filter's (each candidate counted once)
        out.rejections.append(Rejection("oom", _oom(-head, worst.stage), 1, _ex(gpus, strat)))
        return None
    out.timed += 1
    st = sc.strategy.model_dump(mode="json")
    return Candidate(
        gpus=gpus, strategy=st, tokens_per_s=rep.tokens_per_s, step_time_s=rep.step_time_s, mfu=rep.mfu,
        cost_per_million_tokens_usd=rep.cost_per_million_tokens_usd, cost_per_step_usd=rep.cost_per_step_usd,
        peak_memory_gib=rep.peak_memory_gib, reserved_memory_gib=rep.reserved_memory_gib, headroom_gib=head,
        tight_stage=worst.stage, band={k: (float(v[0]), float(v[1])) for k, v in rep.uncertainty.items()},
        order=order)


def _ex(gpus: int, strat: dict[str, Any]) -> dict[str, Any]:
    from .types import SEARCHED

    return {"num_gpus": gpus, **{k: strat.get(k) for k in SEARCHED}}
