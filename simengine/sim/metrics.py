"""Task start/end times → Timeline: spans, bubble, exposed/hidden comm, memory over time."""

from __future__ import annotations

from bisect import bisect_right

from .compiled import Compiled
from .inputs import PipelineInput
from .layout import (
    K_B, K_BC, K_F, K_FC, K_GATE, K_OPT, K_R, K_W, KIND_NAMES, NSTREAM, S_COMPUTE, STREAMS,
)
from .timeline import Span, Timeline

_PIECED = (K_F, K_B, K_W)
_COMPUTE = (K_F, K_R, K_B, K_W, K_OPT)


def _label(inp: PipelineInput, r: int, kind: int, chunk: int, aux: int) -> str:
    if kind == K_FC:
        return inp.stages[r].chunks[chunk].forward_comm[aux][0]
    if kind == K_BC:
        return inp.stages[r].chunks[chunk].backward_comm[aux][0]
    if kind == K_OPT:
        return "optimizer"
    return KIND_NAMES[kind]


def _memory(inp: PipelineInput, r: int, units: dict, static: float):
    """static + Σ activation_bytes of held micro-batch-chunks (F start → end of W, or of B when
    there is no W) + peak_extra_bytes of the chunk running F, R or B."""
    chunks = inp.stages[r].chunks
    ev: list[tuple[float, int, float]] = []  # (t, 0 = free first | 1 = alloc, delta)
    for (kind, mb, c), (s, e) in units.items():
        ch = chunks[c]
        extra = ch.peak_extra_bytes
        if kind == K_F:
            ev.append((s, 1, ch.activation_bytes))
            last = units.get((K_W, mb, c)) or units[(K_B, mb, c)]
            ev.append((last[1], 0, -ch.activation_bytes))
        if kind != K_W and extra and e > s:
            ev.append((s, 1, extra))
            ev.append((e, 0, -extra))
    ev.sort(key=lambda x: (x[0], x[1]))
    series = [(0.0, static)]
    cur = static
    for t, _, d in ev:
        cur += d
        if series[-1][0] == t:
            series[-1] = (t, cur)
        else:
            series.append((t, cur))
    return tuple(series), max(v for _, v in series)


def build_timeline(inp: PipelineInput, comp: Compiled, start: list[float], end: list[float]) -> Timeline:
    g = comp.graph
    pos = comp.pos
    kind_a, mb_a, ch_a, aux_a = g.kind, g.mb, g.chunk, g.aux
    step = max(end)
    p = g.p
    spans: list[Span] = []
    bubble, busy_s, exposed, hidden, memory, peaks = [], [], [], [], [], []
    for r in range(p):
        cstarts: list[float] = []
        cends: list[float] = []
        units: dict[tuple[int, int, int], list[float]] = {}
        stream_busy = 0.0
        comm_spans: list[Span] = []
        for sid in range(NSTREAM):
            sname = STREAMS[sid]
            cur = None
            cur_k = -1
            for t in g.streams[r * NSTREAM + sid]:
                k = kind_a[t]
                if k == K_GATE:
                    continue
                i = pos[t]
                s, e = start[i], end[i]
                mb, c = mb_a[t], ch_a[t]
                if sid == S_COMPUTE:
                    stream_busy += e - s
                    if k in _COMPUTE:
                        if cends and cends[-1] == s:
                            cends[-1] = e
                        else:
                            cstarts.append(s)
                            cends.append(e)
                        u = units.get((k, mb, c))
                        if u is None:
                            units[(k, mb, c)] = [s, e]
                        else:
                            u[1] = e
                if cur is not None and k == cur_k and k in _PIECED and cur[3] == mb and cur[4] == c and cur[6] == s:
                    cur[6] = e  # next piece of the same split task, back to back
                    continue
                if cur is not None:
                    spans.append(Span(*cur))
                    cur = None
                if k in _COMPUTE:
                    cur = [r, sname, _label(inp, r, k, c, 0), mb, c, s, e]
                    cur_k = k
                else:
                    sp = Span(r, sname, _label(inp, r, k, c, aux_a[t]), mb, c, s, e)
                    spans.append(sp)
                    comm_spans.append(sp)
            if cur is not None:
                spans.append(Span(*cur))
        ex: dict[str, float] = {}
        hi: dict[str, float] = {}
        for sp in comm_spans:
            s, e = sp.start_s, sp.end_s
            cov = 0.0
            j = bisect_right(cends, s)
            while j < len(cstarts) and cstarts[j] < e:
                lo = cstarts[j] if cstarts[j] > s else s
                up = cends[j] if cends[j] < e else e
                if up > lo:
                    cov += up - lo
                j += 1
            hi[sp.kind] = hi.get(sp.kind, 0.0) + cov
            ex[sp.kind] = ex.get(sp.kind, 0.0) + (e - s - cov)
        exposed.append(ex)
        hidden.append(hi)
        busy_s.append(sum(e - s for s, e in zip(cstarts, cends)))
        bubble.append((step - stream_busy) / step if step > 0 else 0.0)
        series, peak = _memory(inp, r, {k: tuple(v) for k, v in units.items() if k[0] != K_OPT},
                               inp.stages[r].static_bytes)
        memory.append(series)
        peaks.append(peak)
    return Timeline(
        spans=tuple(spans), step_time_s=step, bubble_fraction=tuple(bubble), compute_s=tuple(busy_s),
        exposed_comm_s=tuple(exposed), hidden_comm_s=tuple(hidden), memory=tuple(memory),
        peak_memory_bytes=tuple(peaks),
    )
