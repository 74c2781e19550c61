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

Memory only falls along none → full(1) → … → full(all) (``prune``), so the least full recompute
that may fit is found by bisection; recompute only adds time. The group's bound becomes the
least bound over the options that may fit (selective, the least full), each with its recompute
phase; a group where none may fit is rejected as OOM with the smallest excess found.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ..config.scenario import Scenario
from ..errors import ConfigError
from .bound import TP_OFF, TP_UB, phase_alone, pipeline_bound, speed_factors, stage_phases_of
from .space import SearchSpace, flag_options, group_size, recompute_options, zero_stages
from .types import Rejection

GIB = float(1 << 30)


def refine_group(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, order: int) -> tuple[float, Rejection | None]:
    """(lower bound on the step time of every fitting candidate of the group, rejection when the
    group is invalid or certainly OOM)."""
    from .prune import _ex, _shared, _strategy, scenario

    zs = zero_stages(space)
    rcs = recompute_options(space, layout)
    probe = _strategy(space, layout, mbs, zs[0] if zs else 1, rcs[0] if rcs else ("none", None), {})
    try:
        sc0 = scenario(space, gpus, probe)
    except ConfigError as e:
        return math.inf, Rejection("invalid", str(e), group_size(space, gpus, layout), _ex(gpus, probe))
    sb = _shared(space)
    placed = sb.placed(probe, sc0.model, sc0.strategy)
    secs = sb.secs(gpus, probe, lambda: sc0)
    p = sb.priced_blocks(gpus, probe, lambda: sc0)
    memo = _Memory(sc0, placed, p, zs)
    tco = any(f["tp_comm_overlap"] for f in flag_options(space, layout, sc0.dp))
    none_ok = ("none", None) in rcs and memo.over(("none", None)) <= 0
    if none_ok or not rcs:
        return _bound(sc0, placed, secs, memo, ("none", None), tco), None
    options: list[tuple[str, int | None]] = []
    if ("selective", None) in rcs and memo.over(("selective", None)) <= 0:
        options.append(("selective", None))
    fulls = [rc for rc in rcs if rc[0] == "full"]
    lo, hi = 0, len(fulls)
    while lo < hi:  # the first full option whose memory lower bound fits
        mid = (lo + hi) // 2
        if memo.over(fulls[mid]) <= 0:
            hi = mid
        else:
            lo = mid + 1
    if lo < len(fulls):
        options.append(fulls[lo])
    if not options:
        worst = min(memo.over(rc) for rc in rcs)
        return math.inf, Rejection(
            "oom", f"OOM by at least {worst:.2f} GiB at every ZeRO stage and recompute (memory lower bound)",
            group_size(space, gpus, layout), _ex(gpus, probe))
    return min(_bound(sc0, placed, secs, memo, rc, tco) for rc in options), None


def _bound(sc0: Scenario, placed, secs, memo: "_Memory", rc: tuple[str, int | None], tco: bool) -> float:
    """``pipeline_bound`` of the group's candidates with recompute ``rc``: forward/backward from
    the shared blocks (as priced without userbuffers, and with them when the group has
    ``tp_comm_overlap`` candidates), the recompute phase without its TP collectives (both ways
    below what either candidate runs), no p2p, no DP tail."""
    m = sc0.num_microbatches // _chains(sc0)
    rec = memo.recompute(rc)
    reps = placed.rep_ranks
    out = pipeline_bound(placed.pipe, stage_phases_of(placed, secs, TP_OFF, rec), m, ranks=reps)
    if tco:
        out = min(out, pipeline_bound(placed.pipe, stage_phases_of(placed, secs, TP_UB, rec), m, ranks=reps))
    return out


def _chains(sc: Scenario) -> int:
    from ..schedule import get_schedule

    return get_schedule(sc.strategy.schedule).chains


class _Memory:
    """Memory lower bound and recompute phase of one group, per recompute option."""

    def __init__(self, sc0: Scenario, placed, p, zs: list[int]):
        self.sc0, self.placed, self.p = sc0, placed, p
        self.slow, self.k = speed_factors(sc0)
        st = sc0.strategy
        self.ranks = sorted({cw.rank for cw in placed.works})
        self.by_rank = [tuple(cw for cw in sorted(placed.works, key=lambda c: (c.rank, c.index)) if cw.rank == r) for r in self.ranks]
        self.static = self._static_floor(zs)
        self.cap = sc0.system.gpu.memory_gib - sc0.system.gpu.non_torch_gib
        self.ov = st.allocator_overhead
        self._over: dict[tuple, float] = {}

    def _scenario(self, **update) -> Scenario:
        """The group's scenario with some strategy fields changed, not re-validated (the fields
        come from the space's own proposals; only the closed forms below read it)."""
        sc0 = self.sc0
        return Scenario.model_construct(model=sc0.model, system=sc0.system, strategy=sc0.strategy.model_copy(update=update))

    def _static_floor(self, zs: list[int]) -> list[float]:
        """Per rank, the least model-state bytes over the space's ZeRO stages (cost/static_memory.py)."""
        from ..cost.static_memory import static_memory, stage_params

        out = []
        scs = [self._scenario(zero_stage=z) for z in (zs or [self.sc0.strategy.zero_stage])]
        for chunks in self.by_rank:
            params = stage_params(self.sc0, chunks)
            least = math.inf
            for sc in scs:
                s = static_memory(sc, params)
                least = min(least, s.weights + s.grads + s.optimizer + s.buffers)
            out.append(least)
        return out

    def _priced_for(self, rc: tuple[str, int | None]):
        return replace(self.p, sc=self._scenario(recompute=rc[0], recompute_num_layers=rc[1]))

    def over(self, rc: tuple[str, int | None]) -> float:
        """GiB over capacity on the tightest rank for recompute ``rc`` at the best ZeRO stage
        (``estimate.memory_by_stage`` with the model states at their floor)."""
        hit = self._over.get(rc)
        if hit is not None:
            return hit
        from ..cost.stage import _chunk_memory, _recomputed_layers
        from ..pipeline import max_inflight, order_memory_peaks

        p = self._priced_for(rc)
        st, sc0 = self.sc0.strategy, self.sc0
        m = sc0.num_microbatches // _chains(sc0)
        combined = st.overlap_moe_expert_parallel_comm
        mems = [[_chunk_memory(p, cw, _recomputed_layers(p, cw)) for cw in chunks] for chunks in self.by_rank]
        if any(len(c) > 1 for c in mems):
            peaks = [(h, e) for h, e, _ in order_memory_peaks(st.schedule, st.pp, m, st.vpp, mems, combined)]
        else:
            peaks = [(max_inflight(st.schedule, r, st.pp, m, st.vpp, combined) * c[0][0], c[0][1]) for r, c in zip(self.ranks, mems)]
        worst = max((static + held + extra) * (1.0 + self.ov) / GIB for static, (held, extra) in zip(self.static, peaks))
        hit = self._over[rc] = worst - self.cap
        return hit

    def recompute(self, rc: tuple[str, int | None]) -> list[float]:
        """The recompute phase of each distinct chunk of the layout (``Placed.kinds``), run alone
        without its TP collectives (cost/stage.py: _recompute_cost)."""
        from ..cost.stage import _recompute_cost, _recomputed_layers

        if rc[0] == "none":
            return [0.0] * len(self.placed.kinds)
        p = self._priced_for(rc)
        out: list[float] = [0.0] * len(self.placed.kinds)
        done = set()
        for cw, i in zip(self.placed.works, self.placed.of_stage):
            if i in done:
                continue
            done.add(i)
            out[i] = phase_alone(_recompute_cost(p, cw, _recomputed_layers(p, cw)), False, self.slow, self.k)
        return out

