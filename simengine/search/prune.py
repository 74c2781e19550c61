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
* Activation offload (``offload(k)``: the first k layers' saved activations in host memory,
  ``cost/offload.py``) follows the same rules: the GPU holds L − k layers' activations, so
  memory falls with k, and the copies add exposed time that only grows with k (one more layer
  copied and one fewer activation set the GPU may hold: every wait of ``offload.stalls`` is at
  least as long; tests/test_cpu_offload.py checks it), so the fewest offloaded layers that fit
  dominate more, and ``none`` dominates every offload when it fits.
"""

from __future__ import annotations

import math
from typing import Any


from .. import fit
from ..config.scenario import Scenario
from ..errors import ConfigError
from ..pipeline import sim_microbatches
from ..schedule import get_schedule
from .a2a import hides_a2a, schedule_hides_a2a
from .bound import ep_alone, phase_alone, pipe_of, pipeline_bound, schedule_chains, speed_factors
from .candidate import (_SHARED_OF, _in_field_ranges, _recompute, _shared_key, _strategy,  # noqa: F401  (re-exported)
                        construct, example, group_error, quick_error, scenario, specs)
from .plan_terms import dp_tail, dp_tails, plan_a2a, zero_chunk, zero_deltas  # noqa: F401  (re-exported)
from .space import SearchSpace, flag_options, group_size, recompute_options, zero_stages
from .types import Candidate, GroupScreen, Rejection, oom_text

GIB = float(1 << 30)


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
    pipe, on, off, p2p = plan_phases(plan, sc)
    m, inline = sim_microbatches(sc), not sc.strategy.p2p_overlapped
    a2a = plan_a2a(plan, sc)
    return (worst.reserved_gib + gpu.non_torch_gib - gpu.memory_gib, worst.stage,
            (pipeline_bound(pipe, on, m, None, p2p, inline, a2a=a2a), pipeline_bound(pipe, off, m, None, p2p, inline, a2a=a2a)))


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
    so the peak is the other stage's peak with its static part swapped (the fit rule: simengine/fit.py)."""
    from ..cost.static_memory import static_memory

    gpu, st = sc.system.gpu, sc.strategy
    worst, stage = -math.inf, 0
    for sp, m in zip(plan.stages, mems):
        old, new = sp.static, static_memory(sc, sp.params)
        alloc = m.peak_gib * GIB - (old.weights + old.grads + old.optimizer + old.buffers) + (new.weights + new.grads + new.optimizer + new.buffers)
        over = fit.reserved(alloc, st.allocator_overhead, new.pools) / GIB + gpu.non_torch_gib - gpu.memory_gib
        if over > worst:
            worst, stage = over, sp.rank
    return worst, stage


def _bounds(plan, sc: Scenario) -> tuple[float, float]:
    """(on, off): ``bound.pipeline_bound`` of the plan, each phase run alone (``bound.phase_alone``:
    compute + contention + exposed communication — what the engine's value slots hold when
    nothing else is in flight), without p2p and DP tails (what ``bound_group`` prices from shared
    blocks). The plan is priced with the flags off; ``on`` drops the TP collectives (userbuffers
    may hide them all), ``off`` keeps them with the windows they have without userbuffers; the
    ZeRO-2/3 collectives the DP overlap flags may hide are left out of both."""
    pipe, on, off, _ = plan_phases(plan, sc)
    m, a2a = sim_microbatches(sc), plan_a2a(plan, sc)
    return pipeline_bound(pipe, on, m, a2a=a2a), pipeline_bound(pipe, off, m, a2a=a2a)


def plan_phases(plan, sc: Scenario) -> tuple[Any, list, list, float]:
    """(``bound.Pipe`` of the plan, per data-flow stage its phases run alone without and with the
    TP collectives, the p2p send seconds of a hand-off: ``StagePlan.p2p_s``, the same on every rank)."""
    slow, k = speed_factors(sc)
    pipe = pipe_of([(st.rank, c.work.index) for st in plan.stages for c in st.chunks], sc.strategy.schedule)
    # where no F&B pair can hide the expert all-to-all, F, B and W hold it as run alone (bound.hides_a2a);
    # a recompute is never paired (sim/values.py: its slot resolves every collective alone), so R always does
    ep = not hides_a2a(sc.strategy)
    out = []
    for with_tp in (False, True):
        seen: dict[tuple[int, bool], float] = {}  # chunks of the same kind share their PhaseCost objects (build_plan)
        ph: list = [None] * len(pipe.stage_rank)
        for st in plan.stages:
            for c in st.chunks:
                ph[c.work.index] = tuple(_alone(pc, with_tp, seen, slow, k, ep or i == 3)
                                         for i, pc in enumerate((c.fwd, c.bwd, c.wgt, c.recompute)))
        out.append(ph)
    return pipe, out[0], out[1], (plan.stages[0].p2p_s if plan.stages else 0.0)


def _alone(pc, with_tp: bool, seen: dict[tuple[int, bool], float], slow: float, k: float, ep: bool = False) -> float:
    """``phase_alone`` of one priced phase, plus its expert all-to-all run alone with ``ep``."""
    hit = seen.get((id(pc), ep))
    if hit is None:
        hit = seen[(id(pc), ep)] = phase_alone(pc, with_tp, slow, k) + (ep_alone(pc, slow) if ep else 0.0)
    return hit


_SHARED: dict[str, Any] = {}


def _shared(space: SearchSpace):
    """The space's SharedBounds in this process (a worker gets a fresh copy of the space with
    every batch, so the memo is keyed by the space's text, not its identity)."""
    from .bound import SharedBounds

    sb = _SHARED.get(_shared_key(space))
    if sb is None:
        _SHARED.clear()
        sb = _SHARED[_SHARED_OF[1]] = SharedBounds()
    return sb


def block_kind(gpus: int, layout: dict[str, Any], mbs: int) -> tuple:
    """What ``work_floor`` prices once per process (``SharedBounds.floors``): the GPU count and
    the block kind (tp, cp, its communication, ep, etp, the micro-batch size)."""
    return _kind_head(gpus, layout) + (mbs,)


def _kind_head(gpus: int, layout: dict[str, Any]) -> tuple:
    """``block_kind`` before the micro-batch size (a layout's groups share it)."""
    return (gpus, layout["tp"], layout["cp"], layout["cp_comm_type"], layout["ep"], layout["etp"])


def floor_key(gpus: int, layout: dict[str, Any], mbs: int) -> tuple:
    """What ``work_floor`` reads of a group: its block kind, pp, the schedule's chains, whether
    its pairs may hide the all-to-all and which fill-and-drain floor applies (``_fills``; not vpp
    itself, the schedule or the split). Groups with one key share their floor, as long as
    it prices (``run.py``: one frontier node stands for all of them until it is reached)."""
    head, tail = floor_parts(gpus, layout)
    return head + (mbs,) + tail


def floor_parts(gpus: int, layout: dict[str, Any]) -> tuple[tuple, tuple]:
    """``floor_key`` before and after the micro-batch size: a layout's groups differ only there
    (``run._floors`` builds them once per layout)."""
    sched = layout["schedule"]
    return _kind_head(gpus, layout), (layout["pp"], schedule_chains(sched), _hides(sched), _fills(sched, layout.get("vpp")))


_FILLS: dict[str, int] = {}


def _fills(schedule: str, vpp: int | None) -> int:
    """Which fill-and-drain floor ``work_floor`` adds: 0 none (several chains or chunks per rank),
    1 with the backward-input alone (the schedule splits the weight gradient off: ZB-H1/H2, whose
    W may fill the drain), 2 with the whole backward (1F1B, GPipe: each B task carries its W,
    ``bound.Pipe.full_b``)."""
    if (vpp or 1) != 1:
        return 0
    hit = _FILLS.get(schedule)
    if hit is None:
        sched = get_schedule(schedule)
        hit = _FILLS[schedule] = 0 if sched.chains != 1 else 1 if sched.splits_weight_grad else 2
    return hit


_HIDES: dict[str, bool] = {}


def _hides(schedule: str) -> bool:
    """Whether F&B pairs of the schedule may hide the expert all-to-all (``bound.hides_a2a``;
    the space never searches ``overlap_moe_expert_parallel_comm``, base sets it — see work_floor)."""
    hit = _HIDES.get(schedule)
    if hit is None:
        hit = _HIDES[schedule] = schedule_hides_a2a(schedule, False)
    return hit


def work_floor(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int) -> tuple[float, Rejection | None]:
    """The cheapest lower bound of a group, a few operations once its block kind is priced: some
    rank runs at least the average share of the step's work, M micro-batches × one micro-batch's
    forward + backward through the whole model / pp (``bound.SharedBounds.model_work``, with its
    expert all-to-all: ``model_a2a``; with
    DualPipe's two chains each rank holds both directions, M/2 micro-batches each). Below
    ``bound_group`` (its first term, averaged over the ranks).

    With one chain and one chunk per rank (``floor_parts``' last field: 1F1B, GPipe, ZB-H1/H2 at
    vpp 1), also the pipeline's fill and drain, whatever the split: ``bound.pipeline_bound``
    holds for every rank r step ≥ Σ_{s<r} F_s (micro-batch 1's forward reaching r) + m·(F_r + B_r)
    (its last backward after every forward and backward of r) + Σ_{s<r} B_s (that gradient's way
    back), so with y_s = F_s + B_s (B the backward-input, with the weight gradient where each B
    task carries it: ``_fills``; where no F&B pair may hide the expert all-to-all, each phase with
    its all-to-all run alone: ``bound.stage_phases_of``'s ``ep``) step ≥ max_r (Σ_{s<r} y_s +
    m·y_r). For any y ≥ 0 with Σ y_s = Y this is ≥ Y / (1 − q^pp), q = 1 − 1/m: the weights
    w_r ∝ q^{−r} make Σ_r w_r (Σ_{s<r} y_s + m·y_r) = Y / (1 − q^pp) for every y (each y_s gets
    m·w_s + Σ_{r>s} w_r, the same for every s), and a maximum is at least a weighted average.
    Equal stages reach it in the limit; m ≫ pp leaves the average share the larger (the 1F1B
    bubble, Narayanan et al. 2021 §2.2.1: (pp − 1) stage times on top of m).

    (inf, rejection) when the group is invalid: checked on every call, whatever the memo holds,
    so the answer is the group's own and not this process's history (a pool's workers see other groups before it: a floor
    handed to an invalid group whose block kind another group had priced made the rejections
    differ between executors)."""
    tp, pp, cp = layout["tp"], layout["pp"], layout["cp"]
    if gpus % (tp * pp * cp):
        return bound_group(space, gpus, layout, mbs, order)
    rej = _invalid(space, gpus, layout, mbs)   # an invalid layout (tp 256 of 128 heads, …): its reason, no pricing
    if rej is not None:
        return math.inf, rej
    # the floor is M(gpus, pp, mbs, the schedule's chains) × W / pp, where the whole model's work
    # W reads the block kind alone (``BLOCK_KEY``, and tp_comm_overlap's options: tp and the
    # choices, ``flag_options``) — not pp, vpp, the schedule or the split; W is memoised per block
    # kind, so a group whose kind is priced costs a few integer operations
    sb = _shared(space)
    wkey = block_kind(gpus, layout, mbs)
    hit = sb.floors.get(wkey)
    if hit is None:
        zs = zero_stages(space)
        base = _strategy(space, layout, mbs, zs[0] if zs else 1, ("none", None), {})
        tco = any(f["tp_comm_overlap"] for f in flag_options(space, layout, gpus // (tp * pp * cp)))
        try:
            def sc_of():
                return scenario(space, gpus, base)
            work, fb = sb.model_work(gpus, base, specs(space, gpus)[0], lambda: construct(space, dict(base, pp=1, vpp=1, schedule="1f1b",
                                     decoder_first_pipeline_num_layers=None, decoder_last_pipeline_num_layers=None)), sc_of, tco)
            a2a = sb.model_a2a(gpus, base, sc_of, True)   # the forward's and backward's all-to-all, each run alone
            # per micro-batch through the whole model: [0] the work with every phase's all-to-all
            # alone, [1] where pairs may hide it; the fill's y summed: [2] F + B with their
            # all-to-all, [3] without it, [4] F + B + W without it ([0] is F + B + W with it)
            hit = sb.floors[wkey] = (work + sb.model_a2a(gpus, base, sc_of, False), max(work, a2a), fb + a2a, fb, work)
        except ConfigError:  # not priced (this group is invalid; another group of its kind may not be)
            return bound_group(space, gpus, layout, mbs, order)
    chains = sb.chains.get(layout["schedule"])
    if chains is None:
        chains = sb.chains[layout["schedule"]] = schedule_chains(layout["schedule"])
    dp = gpus // (tp * pp * cp)
    micro = int(space.base["global_batch_size"]) // (mbs * dp) // chains * chains  # pipeline.sim_microbatches per chain
    # the expert all-to-all: each F, B and W holds it run alone where no pair can hide it; where
    # one may, each action or pair takes ≥ its compute and ≥ its all-to-all alone (bound.pipeline_bound's a2a)
    paired = _hides(layout["schedule"]) or bool(space.base.get("overlap_moe_expert_parallel_comm"))
    floor = micro * hit[paired] / pp
    fills = _fills(layout["schedule"], layout.get("vpp"))
    if fills and micro >= 1:   # the fill and drain (docstring)
        y = (hit[3] if paired else hit[2]) if fills == 1 else (hit[4] if paired else hit[0])
        floor = max(floor, y / (1.0 - (1.0 - 1.0 / micro) ** pp))
    return floor, None


def bound_group(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int) -> tuple[float, Rejection | None]:
    """Lower bound on the step time of every candidate of a group, before any memory check:
    the bound of its no-recompute candidate (recompute only adds compute, the ZeRO stage does
    not change the bounded terms), with TP overlap when any flag combination allows it.
    (inf, rejection) when the group is invalid. Validity is the Scenario's own check run on an
    unvalidated strategy (``quick_error``); the bound is priced once per block kind and layout
    and shared (``bound.SharedBounds``), equal to ``_bounds`` of the group's plan."""
    rej = _invalid(space, gpus, layout, mbs)
    if rej is not None:
        return math.inf, rej
    zs = zero_stages(space)
    rcs = recompute_options(space, layout)
    probe = _strategy(space, layout, mbs, zs[0] if zs else 1, rcs[0] if rcs else ("none", None), {})
    model, system = specs(space, gpus)
    base = {**probe, **_recompute(space, "none", None)}
    st = construct(space, base)
    dp = system.num_gpus // (st.tp * st.pp * st.cp)
    m = st.global_batch_size // (st.micro_batch_size * dp) // schedule_chains(st.schedule)  # pipeline.sim_microbatches
    tco = any(f["tp_comm_overlap"] for f in flag_options(space, layout, dp))
    return _shared(space).bound(gpus, base, model, st, m, lambda: scenario(space, gpus, base), tco), None


def _invalid(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int) -> Rejection | None:
    """The group's rejection when its layout is invalid (the Scenario's own check on its first
    candidate, ``candidate.group_error``: the layout's checks once for all its micro-batch
    sizes), else None."""
    err, ex = group_error(space, gpus, layout, mbs, lambda m: _probe(space, layout, m))
    return Rejection("invalid", err, group_size(space, gpus, layout), ex) if ex is not None else None


def _probe(space: SearchSpace, layout: dict[str, Any], mbs: int) -> dict[str, Any]:
    """The group's first candidate: the first ZeRO stage and recompute option of the space."""
    zs = zero_stages(space)
    rcs = recompute_options(space, layout)
    return _strategy(space, layout, mbs, zs[0] if zs else 1, rcs[0] if rcs else ("none", None), {})


def screen_group(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int,
                 lazy: bool = False) -> GroupScreen:
    """Phase 1 of a group (layout, micro-batch size): validity, the memory pre-filter and
    recompute dominance; each surviving candidate gets a lower bound on its step time. With
    ``lazy`` each fitting (ZeRO stage, recompute) stays one ``options.Option`` with a bound of
    all its flag combinations, expanded only if the frontier reaches it (``options.py``)."""
    from .fitting import fitting_options
    from .options import Option, add_candidates, group_context, option_bound
    from .refine import memory_of

    zs = zero_stages(space)
    rcs = recompute_options(space, layout)
    out = GroupScreen([], 0, [])
    try:
        ctx = group_context(space, gpus, layout, mbs)
    except ConfigError as e:
        probe = _strategy(space, layout, mbs, zs[0] if zs else 1, rcs[0] if rcs else ("none", None), {})
        out.rejections.append(Rejection("invalid", str(e), group_size(space, gpus, layout), example(gpus, probe)))
        return out
    probe, _, flags, has_dp = ctx
    seen_zero = False
    memo = memory_of(space, gpus, ctx[1], probe)   # the group's closed-form memory (refine.py)
    known: dict[tuple[str, int | None], tuple[tuple[float, float], float]] = {}
    plans: dict[tuple[str, int | None], tuple] = {}   # recompute option → (plan, memory, bounds), any ZeRO stage
    n = 0
    for z in zs:
        if not has_dp and seen_zero:  # no data-parallel group: every ZeRO stage shards over 1 rank
            out.rejections.append(Rejection("dominated", f"zero_stage={z} is the same as zero_stage={zs[0]} without a data-parallel group",
                                            len(rcs) * len(flags), example(gpus, probe)))
            continue
        seen_zero = True
        tails: dict[tuple[bool, bool], tuple[dict[int, float], dict[int, tuple[float, ...]]]] = {}
        for rc, (_, head) in fitting_options(space, gpus, layout, mbs, z, rcs, len(flags), out, known, plans, memo):
            plan, _, pipe, on, off, m, p2p, _, plan_z = plans[rc]
            priced = (plan, pipe, on, off, m, p2p)
            if lazy:
                out.group = (gpus, layout, mbs, order)
                out.options.append(Option(z, rc, plan_z, n, len(flags), option_bound(space, gpus, layout, mbs, z, rc, priced, ctx, tails)))
            else:
                add_candidates(space, gpus, layout, mbs, order, z, rc, priced, ctx, tails, out, n)
                out.heads += [head] * (len(out.entries) - len(out.heads))   # no flag changes the memory
            n += len(flags)
    return out


def _userbuffer_phases(space: SearchSpace, gpus: int, probe: dict[str, Any], sc0: Scenario, on: list) -> list:
    """Per data-flow stage, the phases of a ``tp_comm_overlap`` candidate: forward, backward-input
    and backward-weight from the shared blocks priced with userbuffers windows (``bound.TP_UB``,
    what ``build_plan`` prices for it; the ZeRO-2/3 collectives are left out of both), the
    recompute without its TP collectives (``on``: userbuffers may hide them)."""
    from .bound import TP_UB, stage_phases_of

    sb = _shared(space)
    ep = not hides_a2a(sc0.strategy)
    ph = stage_phases_of(sb.placed(probe, sc0.model, sc0.strategy), sb.secs(gpus, probe, lambda: sc0), TP_UB, ep=ep)
    return [(f, b, w, o[3]) for (f, b, w, _), o in zip(ph, on)]


def time_candidate(space: SearchSpace, gpus: int, strat: dict[str, Any], order: int, out) -> Candidate | None:
    """Time one candidate with the estimate; a Candidate, or None with a rejection in ``out``."""
    from .. import api
    from ..estimate import host_overflow

    try:
        sc = scenario(space, gpus, strat)
        rep = api.estimate(sc)
    except ConfigError as e:
        out.rejections.append(Rejection("invalid", str(e), 1, example(gpus, strat)))
        return None
    gpu = sc.system.gpu
    worst = min(rep.memory_by_stage, key=lambda x: x.free_gib)
    head = worst.free_gib   # the estimate's own (StageMemory.free_gib)
    if head < 0:  # the estimate's verdict wins over the pre-filter's (each candidate counted once)
        out.rejections.append(Rejection("oom", oom_text(-head, worst.stage), 1, example(gpus, strat)))
        return None
    over = host_overflow(gpu, rep.memory_by_stage)
    if over:   # the GPU fits, the host memory its offloaded activations need does not
        out.rejections.append(Rejection("oom", f"host memory: {over}", 1, example(gpus, strat)))
        return None
    out.timed += 1
    st = sc.strategy.model_dump(mode="json")
    return Candidate(
        gpus=gpus, strategy=st, tokens_per_s=rep.tokens_per_s, step_time_s=rep.step_time_s, mfu=rep.mfu,
        cost_per_million_tokens_usd=rep.cost_per_million_tokens_usd, cost_per_step_usd=rep.cost_per_step_usd,
        peak_memory_gib=rep.peak_memory_gib, reserved_memory_gib=rep.reserved_memory_gib, headroom_gib=head,
        tight_stage=worst.stage, band={k: (float(v[0]), float(v[1])) for k, v in rep.uncertainty.items()},
        order=order, gpu_us_per_launch=rep.gpu_us_per_launch, what_if=dict(sc.notes).get("strategy.schedule", ""))

