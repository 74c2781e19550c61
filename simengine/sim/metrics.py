"""Task start/end times → Timeline: spans, bubble, exposed/hidden comm, memory over time."""

from __future__ import annotations

import numpy as np

from .compiled import Compiled
from .inputs import PipelineInput
from .layout import CHUNK_FIXED
from .plan import RankPlan, build_plan
from .timeline import Span, Timeline


def _comm_labels(inp: PipelineInput, comp: Compiled) -> dict[int, str]:
    """Value slot of every TP/CP/EP collective → its kind (layout.py chunk block)."""
    out = {}
    for r, st in enumerate(inp.stages):
        for c, ch in enumerate(st.chunks):
            v = comp.graph.chunk_base[r][c] + CHUNK_FIXED
            for kind, _ in ch.forward_comm + ch.backward_comm:
                out[v] = kind
                v += 1
    return out


def _busy_curve(S: np.ndarray, E: np.ndarray, kernels: np.ndarray):
    """Cumulative compute-kernel time up to t (kernels are disjoint and in stream order)."""
    s, e = S[kernels], E[kernels]
    done = np.cumsum(e - s)
    xp = np.column_stack((s, e)).ravel()
    fp = np.column_stack((done - (e - s), done)).ravel()
    if xp.size == 0:
        return lambda t: np.zeros_like(t)
    return lambda t: np.interp(t, xp, fp)


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


def build_timeline(inp: PipelineInput, comp: Compiled, start: list[float], end: list[float]) -> Timeline:
    if comp.plan is None:
        comp.plan = build_plan(comp.graph, comp.pos)
    labels = _comm_labels(inp, comp)
    S, E = np.asarray(start), np.asarray(end)
    step = max(end)
    spans: list[Span] = []
    add = spans.append
    bubble, busy, exposed, hidden, memory, peaks = [], [], [], [], [], []
    for r, rp in enumerate(comp.plan):
        for sname, items in rp.spans:
            for lab, mb, c, p, cont in items:
                s = start[p]
                e = end[p]
                if cont and spans[-1].end_s == s:  # next piece of a split task, back to back
                    spans[-1] = spans[-1]._replace(end_s=e)
                    continue
                add(Span(r, sname, lab if lab.__class__ is str else labels[lab], mb, c, s, e))
        stream_busy = float((E[rp.stream_pos] - S[rp.stream_pos]).sum())
        bubble.append((step - stream_busy) / step if step > 0 else 0.0)
        busy.append(float((E[rp.kernel_pos] - S[rp.kernel_pos]).sum()))
        curve = _busy_curve(S, E, rp.kernel_pos)
        ex: dict[str, float] = {}
        hi: dict[str, float] = {}
        for lab, ps in rp.comm_pos.items():
            name = lab if lab.__class__ is str else labels[lab]
            cs, ce = S[ps], E[ps]
            cov = float((curve(ce) - curve(cs)).sum())
            tot = float((ce - cs).sum())
            hi[name] = hi.get(name, 0.0) + cov
            ex[name] = ex.get(name, 0.0) + max(tot - cov, 0.0)
        exposed.append(ex)
        hidden.append(hi)
        series, peak = _memory(inp, r, rp, S, E)
        memory.append(series)
        peaks.append(peak)
    return Timeline(
        spans=tuple(spans), step_time_s=step, bubble_fraction=tuple(bubble), compute_s=tuple(busy),
        exposed_comm_s=tuple(exposed), hidden_comm_s=tuple(hidden), memory=tuple(memory),
        peak_memory_bytes=tuple(peaks),
    )
