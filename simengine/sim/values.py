"""Durations of every value slot (layout in ``layout.py``) for one PipelineInput.

Overlap and contention are decided in ``overlap.py`` (the one rule): an in-layer collective's
hidden part goes on the comm stream, its exposed part on the compute stream, and the compute it
runs beside gets the contention it causes. A DP bucket that overlaps a piece of the final
backward (or the first forward) slows that piece by the same rule, only for its overlapped
stretch.
"""

from __future__ import annotations

from .compiled import Compiled
from .inputs import PipelineInput
from .layout import K_W
from .overlap import by_kind, piece_extra


def _rank_values(inp: PipelineInput, comp: Compiled, r: int, app, ext) -> None:
    g = comp.graph
    st = inp.stages[r]
    slow = float(inp.overlap_slowdown)
    app(st.p2p_s)
    app(st.optimizer_s)
    ext(st.dp_grad_buckets_s)
    ext(st.dp_param_buckets_s)
    extras = []
    for ch in st.chunks:
        fh, fe, fx = by_kind(ch.forward_comm, slow)
        bh, be, bx = by_kind(ch.backward_comm, slow)
        extras.append((fh, fe, fx, bh, be, bx))
    for info in g.grad_piece_of[r]:
        if info is None:  # a bucket not tied to a piece (no overlap): slot unused
            app(0.0)
            continue
        c, kind, n, beside = info
        ch = st.chunks[c]
        base = (ch.backward_weight_s if kind == K_W else ch.backward_input_s + ch.backward_weight_s) / n
        if kind != K_W:  # a B piece carries the chunk's backward contention share too
            base += extras[c][5] / n
        app(base + (piece_extra(base, st.dp_grad_buckets_s[beside], slow) if beside >= 0 else 0.0))
    for info in g.param_piece_of[r]:
        if info is None:
            app(0.0)
            continue
        c, n, beside = info
        base = (st.chunks[c].forward_s + extras[c][2]) / n
        app(base + (piece_extra(base, st.dp_param_buckets_s[beside], slow) if beside >= 0 else 0.0))
    for ch, (fh, fe, fx, bh, be, bx) in zip(st.chunks, extras):
        app(ch.forward_s + fx)
        _, re, rx = by_kind(ch.recompute_comm, slow)
        app(ch.recompute_s + sum(re) + rx)
        app(ch.backward_input_s + ch.backward_weight_s + bx)
        app(ch.backward_input_s + bx)
        app(ch.backward_weight_s)
        for h, e in zip(fh, fe):
            app(h)
            app(e)
        for h, e in zip(bh, be):
            app(h)
            app(e)


def build_values(inp: PipelineInput, comp: Compiled) -> list[float]:
    vals = [0.0]
    app, ext = vals.append, vals.extend
    for r in range(len(inp.stages)):
        _rank_values(inp, comp, r, app, ext)
    return vals
