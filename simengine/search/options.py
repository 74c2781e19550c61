"""The candidates of one screened option — a group's (ZeRO stage, recompute) that fits — one per
overlap-flag combination, each with its own step-time bound, built now or only when the frontier
reaches the option.

A fitting option of a group (``prune.screen_group``) stands for its flag combinations (up to 8:
grad-reduce, param-gather and TP overlap; 6 on Megatron-Core's stack, which refuses param-gather
overlap without grad-reduce overlap, ``space.flag_options``). Each gets the bound of its own phases, DP tail,
gradient buckets and its schedule's order terms (``bound.pipeline_bound``), and a data flow for
the frontier to bound later (``flow.flow_of``). Most never come near the top: on llama3-405b /
16,384 H100 a screen built 8,856 such candidates of which 226 were ever looked at again. So
with a top to reach the screen leaves each option as one frontier node (``Option``) keyed by
``option_bound``: the pipeline bound at the least, stage by stage, of its combinations' phases
(TP collectives exposed or under userbuffers, plus at ZeRO-2/3 the per-micro-batch collectives
at each DP flag pair: ``flag_phases``), the least DP tail per rank over them and the order
terms, without the bucket terms. ``pipeline_bound`` is a maximum of sums of non-negative times
that only grow with each phase and tail, and the bucket terms only add terms, so that is below
the bound of every candidate of the option (tests/test_search_options.py checks it, and the
estimates, on every option of its test spaces). A key that left the ZeRO-2/3 collectives out
was 3.3× below the candidates' bounds (median, 405B/16k) and expanded 836 of the ~1,100
options; this one expands 233. ``expand`` builds the option's candidates as the eager screen
does (the same order numbers, so ranking ties break the same way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..config.scenario import Scenario
from ..config.strategy import p2p_overlapped
from ..pipeline import sim_microbatches
from .bound import pipeline_bound
from .candidate import _strategy, construct, scenario
from .flow import flow_of
from .orders import order_terms
from .plan_terms import dp_tails, plan_a2a, zero_deltas
from .space import SearchSpace, flag_options, rc_fields
from .types import GroupScreen


@dataclass(slots=True, frozen=True)
class Option:
    """One fitting (ZeRO stage, recompute) of a group, not yet expanded into its candidates."""

    z: int                            # ZeRO stage
    rc: tuple[str, int | None]        # recompute (level, layers)
    plan_z: int                       # the ZeRO stage its plan was priced at (the screen prices once per recompute)
    first: int                        # order offset of its first candidate within the group (order·1000 + first)
    count: int                        # its candidates (flag combinations)
    bound: float                      # a lower bound on the step time of each of them


def rc_scenario(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, z: int,
                rc: tuple[str, int | None]) -> Scenario:
    """The scenario the screen prices recompute ``rc`` with at ZeRO stage ``z`` (flags off);
    ConfigError when it is invalid."""
    base = _strategy(space, layout, mbs, z, ("none", None), {})
    return scenario(space, gpus, dict(base, **rc_fields(rc)))


def group_context(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int) -> tuple[dict[str, Any], Scenario, list, bool]:
    """(probe strategy, its scenario, flag combinations, whether there is a data-parallel group)
    of a group, as ``prune.screen_group`` builds them."""
    from .space import recompute_options, zero_stages

    zs = zero_stages(space)
    rcs = recompute_options(space, layout)
    probe = _strategy(space, layout, mbs, zs[0] if zs else 1, rcs[0] if rcs else ("none", None), {})
    sc0 = scenario(space, gpus, probe)
    has_dp = sc0.dp * layout["cp"] > 1 or sc0.edp > 1
    return probe, sc0, flag_options(space, layout, sc0.dp), has_dp


def flag_phases(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, z: int, rc: tuple[str, int | None],
                priced: tuple, ctx: tuple) -> list[list[tuple[float, float, float, float]]]:
    """Per flag combination of the group (``ctx``), its phases per data-flow stage: the plan's
    with its TP collectives exposed (``off``) or under userbuffers (``prune._userbuffer_phases``),
    plus at ZeRO-2/3 the collectives of every micro-batch as its flags price them."""
    from .prune import _userbuffer_phases

    probe, sc0, flags, has_dp = ctx
    plan, _, on, off, _, _ = priced
    ub = _userbuffer_phases(space, gpus, probe, sc0, on) if any(f["tp_comm_overlap"] for f in flags) else on
    zero: dict[tuple, list[tuple[float, float, float]]] = {}
    out = []
    for fl in flags:
        ph = ub if fl.get("tp_comm_overlap") else off
        if z >= 2 and has_dp:  # the ZeRO-2/3 collectives of every micro-batch, as this candidate's flags price them
            dpf = (fl["overlap_grad_reduce"], fl["overlap_param_gather"])
            if dpf not in zero:
                zero[dpf] = zero_deltas(Scenario.model_construct(
                    model=sc0.model, system=sc0.system, strategy=construct(space, _strategy(space, layout, mbs, z, rc, fl))), plan)
            ph = [(f + a, b + c, w, r + d) for (f, b, w, r), (a, c, d) in zip(ph, zero[dpf])]
        out.append(ph)
    return out


def _run_terms(layout: dict[str, Any], priced: tuple, sc0: Scenario) -> tuple[bool, Any, Any]:
    """(p2p inline, the expert all-to-all terms, the schedule's order terms) of an option."""
    plan, m = priced[0], priced[4]
    # combined 1F1B runs other orders (schedule/_combined.py): no order terms for it
    orders = None if sc0.strategy.overlap_moe_expert_parallel_comm else order_terms(layout["schedule"], layout["pp"], m, layout["vpp"])
    inline = not p2p_overlapped(sc0.strategy.framework, layout["schedule"], sc0.strategy.overlap_p2p_comm)
    return inline, plan_a2a(plan, sc0), orders


def add_candidates(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int, z: int,
                   rc: tuple[str, int | None], priced: tuple, ctx: tuple, tails: dict, out: GroupScreen,
                   first: int) -> None:
    """Append the option's candidates to ``out`` (entries with their bounds, and their flows),
    numbered ``order·1000 + first + i``. ``priced`` = (plan, pipe, on, off, m, p2p) of the
    recompute; ``tails`` the DP tails per DP flags at this ZeRO stage (they do not depend on
    recompute), filled as needed."""
    sc0, flags = ctx[1], ctx[2]
    plan, pipe, _, _, m, p2p = priced
    inline, a2a, orders = _run_terms(layout, priced, sc0)
    for i, (fl, ph) in enumerate(zip(flags, flag_phases(space, gpus, layout, mbs, z, rc, priced, ctx))):
        tail, grads = _tails(space, gpus, layout, mbs, z, rc, plan, fl, tails)
        lb = pipeline_bound(pipe, ph, m, tail, p2p, inline, order=orders, grads=grads, a2a=a2a)
        out.entries.append((gpus, _strategy(space, layout, mbs, z, rc, fl), lb, order * 1000 + first + i))
        # its data flow, bounded only if the frontier reaches it (run.py: a "flow" node)
        out.flows.append(flow_of(layout["schedule"], layout["pp"], m, layout["vpp"], inline, ph, p2p, tail,
                                 bool(sc0.strategy.overlap_moe_expert_parallel_comm), a2a, grads))


def option_bound(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, z: int, rc: tuple[str, int | None],
                 priced: tuple, ctx: tuple, tails: dict) -> float:
    """A lower bound of every candidate of an option (module docstring): its pipeline at the
    least of its flag combinations' phases (``flag_phases``), stage by stage, with its schedule's
    order terms and, per rank, the least DP tail over its DP flag combinations; without the
    bucket terms (``grads``), which only add terms. ``tails`` as in ``add_candidates``."""
    plan, pipe, _, _, m, p2p = priced
    sc0, flags = ctx[1], ctx[2]
    least: dict[int, float] = {}
    for fl in flags:
        for r, t in _tails(space, gpus, layout, mbs, z, rc, plan, fl, tails)[0].items():
            least[r] = min(least.get(r, t), t)
    phs = flag_phases(space, gpus, layout, mbs, z, rc, priced, ctx)
    low = [tuple(map(min, *col)) if len(col) > 1 else col[0] for col in zip(*phs)]
    inline, a2a, orders = _run_terms(layout, priced, sc0)
    return pipeline_bound(pipe, low, m, least, p2p, inline, order=orders, a2a=a2a)


def _tails(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, z: int, rc: tuple[str, int | None],
           plan, fl: dict[str, bool], tails: dict) -> tuple[dict[int, float], dict[int, tuple[float, ...]]]:
    """``plan_terms.dp_tails`` of a candidate at ZeRO stage ``z`` with flags ``fl``, memoised in
    ``tails`` by its DP flags: the DP work depends on the ZeRO stage and the DP flags, not on
    recompute (cost/dp.py: without overlap_grad_reduce one bucket per buffer, Megatron DDP
    bucket_size=None); the flag combinations share each rank kind's work where the flags do not
    change it (``tails[_WORKS]``, plan_terms.dp_tails)."""
    dpf = (fl["overlap_grad_reduce"], fl["overlap_param_gather"])
    hit = tails.get(dpf)
    if hit is None:
        def sc_z():
            return scenario(space, gpus, _strategy(space, layout, mbs, z, rc, dict(zip(("overlap_grad_reduce", "overlap_param_gather"), dpf))))
        hit = tails[dpf] = dp_tails(sc_z, plan, fl, tails.setdefault(_WORKS, {}))
    return hit


_WORKS = "dp works"   # the key in ``tails`` of the DPWork per rank kind that its flag combinations share (plan_terms.dp_tails)


def expand(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int, opt: Option) -> GroupScreen:
    """The option's candidates with their bounds and flows, as the screen builds them: its plan
    priced again at the stage the screen priced it (``plan_z``), its DP tails from its own plan."""
    from ..cost.stage import build_plan
    from .prune import plan_phases

    ctx = group_context(space, gpus, layout, mbs)
    sc = rc_scenario(space, gpus, layout, mbs, opt.plan_z, opt.rc)
    plan = build_plan(sc)
    pipe, on, off, p2p = plan_phases(plan, sc)
    out = GroupScreen([], 0, [])
    add_candidates(space, gpus, layout, mbs, order, opt.z, opt.rc, (plan, pipe, on, off, sim_microbatches(sc), p2p),
                   ctx, {}, out, opt.first)
    return out


def example(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, opt: Option) -> dict[str, Any]:
    """The option's first candidate (its first flag combination): the example of its rejection
    when never reached."""
    from .space import replica_dp

    return _strategy(space, layout, mbs, opt.z, opt.rc, flag_options(space, layout, replica_dp(gpus, layout))[0])
