"""The activation options of a group worth timing at one ZeRO stage (``prune.screen_group``):
none when it fits, else selective if it fits, the fewest offloaded layers and the least full
recompute that fit, each family bisected (memory falls along it, time grows: the rules in
``prune``'s docstring); every other option a rejection with its reason."""

from __future__ import annotations

import math
from typing import Any

from ..errors import ConfigError
from ..estimate import host_overflow
from ..pipeline import sim_microbatches
from .bound import pipeline_bound
from .candidate import _strategy, example, specs
from .plan_terms import plan_a2a
from .prune import memory_at_zero, plan_phases, priced
from .space import SearchSpace, rc_fields
from .types import GroupScreen, Rejection, oom_text


def _rc_label(rc: tuple[str, int | None]) -> str:
    lvl, k = rc
    if lvl == "offload":
        return f"offload of {k} layer{'s' if k != 1 else ''}"
    return lvl if lvl != "full" else ("full (all layers)" if k is None else f"full ({k} layers)")


SURE_OOM_GIB = 1e-6   # refine's closed form over capacity by more than this: the plan's memory is too


def fitting_options(space: SearchSpace, gpus: int, layout: dict[str, Any], mbs: int, z: int,
                    rcs: list[tuple[str, int | None]], nflags: int, out: GroupScreen,
                    known: dict[tuple[str, int | None], tuple[tuple[float, float], float]],
                    plans: dict[tuple[str, int | None], tuple], memo) -> list[tuple[tuple[str, int | None], tuple[tuple[float, float], float]]]:
    """The recompute options worth timing at ZeRO stage ``z``, each with (a lower bound on its
    step time, its memory headroom in GiB: the estimate's own, ``memory_at_zero``); the others
    become rejections (each standing for its ``nflags`` flag combinations). ``known`` maps the
    options that fitted to those. Every ZeRO stage is checked: a higher
    stage shards more model state (Rajbhandari et al. 2020, Fig. 1) but ZeRO-3 adds its gather
    buffers (cost/static_memory.py), so on a small model ZeRO-3 can need more than ZeRO-2 — the
    pre-filter once assumed "fits at a lower stage ⇒ fits higher" and let two candidates of the
    small test space through that the estimate then found OOM. ``plans`` keeps each option's
    priced plan, so another ZeRO stage only recomputes the model states (``memory_at_zero``),
    with the estimate's own ``memory_by_stage`` as the one owner of the peak. An option that
    ``memo`` (``refine._Memory``: the same memory from its closed forms, without a plan) puts
    over capacity by more than ``SURE_OOM_GIB`` is rejected without pricing its plan: only
    options that may fit need one (their bounds read it)."""
    from .options import rc_scenario

    base = _strategy(space, layout, mbs, z, ("none", None), {})

    def check(rc):  # (GiB over capacity, stage, error)
        try:
            sc = rc_scenario(space, gpus, layout, mbs, z, rc)
        except ConfigError as e:
            return math.inf, -1, str(e)
        hit = plans.get(rc)
        if hit is None:  # price once per recompute option; other ZeRO stages swap the model states
            o, stage = memo.tightest(rc, z)
            if o > SURE_OOM_GIB:   # certainly over: no plan needed
                return o, stage, ""
            out.memory_checked += 1
            plan, mems = priced(sc)
            pipe, on, off, p2p = plan_phases(plan, sc)
            m = sim_microbatches(sc)  # ids through every chunk (DualPipe: m/2 per direction)
            inline, a2a = not sc.strategy.p2p_overlapped, plan_a2a(plan, sc)
            hit = plans[rc] = (plan, mems, pipe, on, off, m, p2p,
                               (pipeline_bound(pipe, on, m, None, p2p, inline, a2a=a2a),
                                pipeline_bound(pipe, off, m, None, p2p, inline, a2a=a2a)), z)
        o, stage = memory_at_zero(sc, hit[0], hit[1])
        if o <= 0:
            known[rc] = (hit[7], -o)
        return o, stage, ""

    def reject(kind, reason, n, rc):
        if n:
            ex = example(gpus, dict(base, **rc_fields(rc)))
            out.rejections.append(Rejection(kind, reason, n * nflags, ex))

    keep: list[tuple[tuple[str, int | None], tuple[tuple[float, float], float]]] = []
    if ("none", None) in rcs:
        o, stage, err = check(("none", None))
        if o <= 0:
            why = ("recompute 'none' without offload fits; any recompute or offload only adds time"
                   if any(rc[0] == "offload" for rc in rcs) else "recompute 'none' fits; any recompute only adds time")
            reject("dominated", why, len(rcs) - 1, rcs[-1])
            return [(("none", None), known[("none", None)])]
        reject("invalid" if err else "oom", err or oom_text(o, stage), 1, ("none", None))
    if ("selective", None) in rcs:
        o, stage, err = check(("selective", None))
        if o <= 0:
            keep.append((("selective", None), known[("selective", None)]))
        else:
            reject("invalid" if err else "oom", err or oom_text(o, stage), 1, ("selective", None))

    def host_full(rc):   # host memory rises with the offloaded layers: past the least that fits the GPU, none fits the host
        over = host_overflow(specs(space, gpus)[1].gpu, plans[rc][1])
        return f"host memory: {over} (at least; {_rc_label(rc)})" if over else ""

    keep += _least_full([rc for rc in rcs if rc[0] == "offload"], check, reject, known, "offload of fewer layers", "more offload",
                        host_full)
    keep += _least_full([rc for rc in rcs if rc[0] == "full"], check, reject, known)
    return keep


def _least_full(fulls, check, reject, known, fewer: str = "full recompute of fewer layers", more: str = "more recompute",
                beyond=None) -> list:
    """Bisect the full-recompute (or offload) options (memory falls along the list) for the fewest
    recomputed (offloaded) layers that fit; the ones with more only add time (dominated), those
    with fewer do not fit. ``beyond(rc)``: why the least that fits the GPU and every option after
    it cannot run for a limit that only tightens along the list (the host memory an offload
    takes), '' when it can."""
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
    why = beyond(fulls[lo]) if beyond is not None and lo < len(fulls) else ""
    if why:
        reject("oom", why, len(fulls) - lo, fulls[lo])
    elif lo < len(fulls):
        keep.append((fulls[lo], known[fulls[lo]]))
        reject("dominated", f"{fewer} ({_rc_label(fulls[lo])}) fits; {more} only adds time",
               len(fulls) - lo - 1, fulls[-1])
    if lo and last_bad is not None:
        o, stage, rc = last_bad
        reject("oom", f"{oom_text(o, stage)} (at least; {_rc_label(rc)}{'' if rc[0] == 'offload' else ' recompute'})", lo, fulls[0])
    return keep
