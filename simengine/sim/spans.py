"""Task start/end times → Timeline: spans and memory over time, with the step's metrics
(``metrics.py``, the same numbers the estimate reports)."""

from __future__ import annotations

import numpy as np

from .compiled import Compiled
from .inputs import PipelineInput
from .metrics import StepMetrics, _slot_names
from .plan import RankPlan, build_plan
from .timeline import Span, Timeline


def _memory(inp: PipelineInput, r: int, rp: RankPlan, S: np.ndarray, E: np.ndarray):
    """static + Σ activation_bytes of held micro-batch-chunks (F start → end of its W, or of its
    B when there is no W) + peak_extra_bytes of the chunk running F, R or B (non-empty tasks)."""
    st = inp.stages[r]
    act = np.array([c.activation_bytes for c in st.chunks])[rp.act_chunk]
    ext = np.array([c.peak_extra_bytes for c in st.chunks])[rp.x_chunk]
    xs, xe = S[rp.x_first], E[rp.x_last]
    keep = (xe > xs) & (ext > 0)
    xs, xe, ext = xs[keep], xe[keep], ext[keep]
    t = np.concatenate((S[rp.act_first], E[rp.act_free], xs, xe))
    prio = np.concatenate((np.ones(act.size), np.zeros(act.size), np.ones(xs.size), np.zeros(xe.size)))
    delta = np.concatenate((act, -act, ext, -ext))
    static = float(st.static_bytes)
    if t.size == 0:
        return ((0.0, static),), static
    order = np.lexsort((prio, t))  # by time; frees (0) before allocations (1) at equal times
    t = t[order]
    val = static + np.cumsum(delta[order])
    last = np.r_[t[1:] != t[:-1], True]
    ts, vs = t[last].tolist(), val[last].tolist()
    series = list(zip(ts, vs))
    if ts[0] != 0.0:
        series.insert(0, (0.0, static))
    return tuple(series), max(v for _, v in series)


def _spans(plans: list[RankPlan], start: list[float], end: list[float]) -> list[Span]:
    spans: list[Span] = []
    add = spans.append
    for r, rp in enumerate(plans):
        for sname, items in rp.spans:
            for lab, mb, c, p, cont, kernel in items:
                s = start[p]
                e = end[p]
                if not kernel and e <= s:  # an empty communication part (nothing to show)
                    continue
                if cont and spans[-1].end_s == s:  # next piece of a split task, back to back
                    spans[-1] = spans[-1]._replace(end_s=e)
                    continue
                add(Span(r, sname, lab, mb, c, s, e))
    return spans


def build_timeline(inp: PipelineInput, comp: Compiled, start: list[float], end: list[float],
                   met: StepMetrics) -> Timeline:
    if comp.plan is None:
        comp.plan = build_plan(comp.graph, comp.pos, _slot_names(comp))
    S, E = np.asarray(start), np.asarray(end)
    memory, peaks = [], []
    for r, rp in enumerate(comp.plan):
        series, peak = _memory(inp, r, rp, S, E)
        memory.append(series)
        peaks.append(peak)
    n = met.num_ranks
    return Timeline(
        spans=tuple(_spans(comp.plan, start, end)), step_time_s=met.step_time_s,
        bubble_fraction=tuple(met.bubble_fraction(r) for r in range(n)),
        compute_s=tuple(sum(met.compute(r).values()) for r in range(n)),
        exposed_comm_s=tuple(met.comm(r, "exposed") for r in range(n)),
        hidden_comm_s=tuple(met.comm(r, "hidden") for r in range(n)),
        memory=tuple(memory), peak_memory_bytes=tuple(peaks), metrics=met,
    )
