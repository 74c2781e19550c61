"""What a priced plan adds to a candidate's step-time bound beyond its phases: the expert
all-to-all where F&B pairs may hide it (``plan_a2a``), each rank's DP tail and gradient buckets
(``dp_tail``, ``dp_tails``) and the ZeRO-2/3 collectives of every micro-batch (``zero_deltas``);
``prune.screen_group`` reads them for each screened candidate."""

from __future__ import annotations

from ..config.scenario import Scenario
from ..cost.phase import PhaseCost
from ..cost.zero import zero_per_microbatch
from ..pipeline import sim_microbatches
from .a2a import A2A, a2a_of, ep_length, hides_a2a
from .bound import ep_alone, speed_factors, zero_alone


def plan_a2a(plan, sc: Scenario) -> A2A | None:
    """``pipeline_bound``'s ``a2a`` of a plan: per data-flow stage, its F's and B's expert
    all-to-all run alone (``bound.ep_alone``) and their whole length (``bound.ep_length``), and
    per rank its F&B pairs, where F&B pairs may hide it (``bound.hides_a2a``); None otherwise
    (its phases hold it already)."""
    if not hides_a2a(sc.strategy):
        return None
    slow, _ = speed_factors(sc)
    out: list = [None] * sum(len(s.chunks) for s in plan.stages)
    seen: dict[tuple[int, int], tuple[float, float, float, float]] = {}   # chunks of one kind share their priced phases
    for s in plan.stages:
        for c in s.chunks:
            key = (id(c.fwd), id(c.bwd))
            hit = seen.get(key)
            if hit is None:
                hit = seen[key] = (ep_alone(c.fwd, slow), ep_alone(c.bwd, slow), ep_length(c.fwd), ep_length(c.bwd))
            out[c.work.index] = hit
    return a2a_of(out, sc.strategy, sim_microbatches(sc))


def dp_tail(dp, overlap_grad_reduce: bool, overlap_param_gather: bool) -> float:
    """Seconds a rank's DP work (``cost/dp.py: DPWork``) adds after its last compute, for sure:
    the optimizer follows the last gradient bucket, which follows the backward that produces it;
    without ``overlap_grad_reduce`` every bucket runs after the rank's last backward
    (``finalize_model_grads``), without ``overlap_param_gather`` the parameter all-gathers run
    after the optimizer (sim/graph.py, the DP rules). Buckets run alone here: no contention."""
    tail = dp.optimizer_s
    if not overlap_grad_reduce:
        tail += sum(dp.grad_buckets_s)
    if not overlap_param_gather:
        tail += sum(dp.param_buckets_s)
    return tail


def dp_tails(sc_of, plan, flags: dict[str, bool], works: dict | None = None) -> tuple[dict[int, float], dict[int, tuple[float, ...]]]:
    """Per rank, ``dp_tail`` of its DP work at the ZeRO stage of ``sc_of()`` (the candidate's
    scenario, built only when a rank's work is not in ``works``; the model states, hence the
    buckets, follow the stage: cost/dp.py ``dp_work``; the plan's params and comm model do not),
    and, with ``overlap_grad_reduce``, its gradient buckets' seconds (``pipeline_bound``'s
    ``grads``; empty without it: the tail holds them all). ``works`` keeps each rank kind's
    DPWork across the DP flag combinations of one ZeRO stage: the flags change none but the first
    rank's, and that one only through ``overlap_grad_reduce`` (``dp_work`` buckets pipeline rank
    0's first chunk only with it; ``overlap_param_gather`` moves work, ``dp_tail``, and prices
    none)."""
    from ..cost.stage import rank_dp_work

    ogr = bool(flags.get("overlap_grad_reduce"))
    opg = bool(flags.get("overlap_param_gather"))
    works = {} if works is None else works
    sc = None
    tails, grads = {}, {}
    for st in plan.stages:
        first = st.rank == 0
        key = (id(st.params), first, first and ogr)
        hit = works.get(key)
        if hit is None or hit[0] is not st.params:
            if sc is None:
                sc = sc_of()
            # (the params kept alive with their key: its id stays theirs)
            hit = works[key] = (st.params, rank_dp_work(sc, plan.comm, st.params, [c.work for c in st.chunks]))
        dw = hit[1]
        tails[st.rank], grads[st.rank] = dp_tail(dw, ogr, opg), (tuple(dw.grad_buckets_s) if ogr else ())
    return tails, grads


def zero_deltas(sc: Scenario, plan) -> list[tuple[float, float, float]]:
    """Per data-flow stage, what the ZeRO-2/3 collectives of every micro-batch add to its forward,
    backward and recompute phases run alone, priced for ``sc``'s ZeRO stage and DP overlap flags
    as ``build_plan`` prices them (cost/zero.py: ``zero_per_microbatch``, from each chunk's own
    compute) and resolved by the engine's rule (``bound.phase_alone``: per collective, its
    contention plus its exposed part). The bound leaves these collectives out of the plan's
    phases (``_MAY_HIDE``: priced there with the flags off) and adds them back here."""

    slow, _ = speed_factors(sc)
    out: list = [None] * sum(len(st.chunks) for st in plan.stages)
    memo: dict[tuple, tuple[float, float, float]] = {}
    for st in plan.stages:
        for c in st.chunks:
            key = (id(c.fwd), id(c.bwd), id(c.wgt), id(c.recompute), len(c.work.layers), c.work.mtp, c.work.first, c.work.last)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = zero_chunk(sc, plan.comm, c.work, c.fwd.compute_s, c.bwd.compute_s, c.recompute.compute_s, slow,
                                             c.wgt.compute_s)
            out[c.work.index] = hit
    return out


def zero_chunk(sc: Scenario, comm, cw, fwd_s: float, bwd_s: float, rc_s: float, slow: float,
               wgt_s: float) -> tuple[float, float, float]:
    """``zero_deltas`` of one chunk whose forward, backward-input, recompute and weight-gradient
    compute take ``fwd_s``, ``bwd_s``, ``rc_s`` and ``wgt_s`` seconds."""
    fwd, bwd, rc = PhaseCost(compute_s=fwd_s), PhaseCost(compute_s=bwd_s), PhaseCost(compute_s=rc_s)
    zero_per_microbatch(sc, comm, cw, fwd, bwd, rc, wgt_s)
    return zero_alone(fwd, slow), zero_alone(bwd, slow), zero_alone(rc, slow)
