"""Durations of every value slot (layout in ``layout.py``) for one PipelineInput.

Overlap and contention are decided in ``overlap.py`` (the one rule): an in-layer collective's
hidden part goes on the comm stream, its exposed part on the compute stream, and the compute it
runs beside gets the contention it causes. A DP bucket that overlaps a piece of the final
backward (or the first forward) slows that piece by the same rule, only for its overlapped
stretch.
"""

from __future__ import annotations

import numpy as np

from ..memo import remember
from .compiled import Compiled
from .inputs import PipelineInput
from .layout import K_W, PAIRED_KIND
from .overlap import by_kind, paired, piece_durations, piece_groups


_ZERO = np.zeros(1)


def _chunk_extras(st, slow: float, memo: dict[int, tuple]) -> list[tuple]:
    out = []
    for ch in st.chunks:
        e = memo.get(id(ch))
        if e is None:
            fh, fe, fx = by_kind(ch.forward_comm, slow)
            bh, be, bx = by_kind(ch.backward_comm, slow)
            rh, re, rx = by_kind(ch.recompute_comm, slow)
            e = memo[id(ch)] = (fh, fe, fx, bh, be, bx, rh, re, rx)
        out.append(e)
    return out


def _rank_values(inp: PipelineInput, comp: Compiled, r: int, app, ext, memo: dict[int, tuple]) -> None:
    st = inp.stages[r]
    slow = float(inp.overlap_slowdown)
    app(st.p2p_s)
    app(st.optimizer_s)
    # every bucket has a launch slot (beside its piece) and a tail slot (graph.py ``_Rank.tail``):
    # the DP overlap flags say which holds its seconds, the other is 0
    gb, pb = st.dp_grad_buckets_s, st.dp_param_buckets_s
    g_on, p_on = bool(inp.overlap_grad_reduce), bool(inp.overlap_param_gather)
    g_launch, g_tail = (gb, (0.0,) * len(gb)) if g_on else ((0.0,) * len(gb), gb)
    p_launch, p_tail = (pb, (0.0,) * len(pb)) if p_on else ((0.0,) * len(pb), pb)
    ext(g_launch)
    ext(p_launch)
    extras = _chunk_extras(st, slow, memo)
    chunks = st.chunks

    def grad_base(info):
        c, kind, n, _ = info
        ch = chunks[c]
        if kind == K_W:
            return ch.backward_weight_s / n
        return (ch.backward_input_s + ch.backward_weight_s + extras[c][5]) / n  # B carries its contention

    def param_base(info):
        c, n, _ = info
        return (chunks[c].forward_s + extras[c][2]) / n

    grads, params = _piece_groups(comp)[r]
    ext(piece_durations(grads, g_launch, grad_base, slow))
    ext(piece_durations(params, p_launch, param_base, slow))
    ext(g_tail)
    ext(p_tail)
    for ch, (fh, fe, fx, bh, be, bx, rh, re, rx) in zip(chunks, extras):
        app(ch.forward_s + fx)
        app(ch.recompute_s + rx)
        app(ch.backward_input_s + ch.backward_weight_s + bx)
        app(ch.backward_input_s + bx)
        app(ch.backward_weight_s)
        for h, e in zip(fh + bh + rh, fe + be + re):
            app(h)
            app(e)
    for cf, cb, hw in comp.pair_base[r]:
        _pair_values(chunks[cf], chunks[cb], hw, slow, app)


def _pair_values(chf, chb, hw: bool, slow: float, app) -> None:
    """One F&B pair type: F and B compute, each with its own contention and the contention of the
    partner's all-to-all beside it, then the F's and the B's (hidden, exposed) per kind."""
    f_s = chf.forward_s
    b_s = chb.backward_input_s + (0.0 if hw else chb.backward_weight_s)
    fh, fe, fx, f_on_b = paired(chf.forward_comm, b_s, slow, PAIRED_KIND)
    bh, be, bx, b_on_f = paired(chb.backward_comm, f_s, slow, PAIRED_KIND)
    app(f_s + fx + b_on_f)
    app(b_s + bx + f_on_b)
    for h, e in zip(fh + bh, fe + be):
        app(h)
        app(e)


def _piece_layout(comp: Compiled) -> tuple[list[int], list[tuple]]:
    """Per rank, an id shared by the ranks whose DP pieces are laid out alike, and the rank's
    (grad, param) ``piece_groups`` (once per structure)."""
    if comp.piece_class is None:
        g = comp.graph
        ids: dict[tuple, int] = {}
        groups: dict[int, tuple] = {}
        classes = []
        for a, b in zip(g.grad_piece_of, g.param_piece_of):
            c = ids.setdefault((tuple(a), tuple(b)), len(ids))
            if c not in groups:
                groups[c] = (piece_groups(a), piece_groups(b))
            classes.append(c)
        comp.piece_class = (classes, [groups[c] for c in classes])
    return comp.piece_class


def _piece_groups(comp: Compiled) -> list[tuple]:
    return _piece_layout(comp)[1]


def build_values(inp: PipelineInput, comp: Compiled) -> np.ndarray:
    """The value table: slot 0 = 0.0, then every rank's block (``layout.py``)."""
    memo: dict[int, tuple] = {}
    pieces = _piece_groups(comp)
    pair_base = comp.pair_base
    flags = (float(inp.overlap_slowdown), bool(inp.overlap_grad_reduce), bool(inp.overlap_param_gather))
    blocks = [_ZERO]
    for r, st in enumerate(inp.stages):
        # a rank's values are a function of its StageCost, its DP pieces, its F&B pair types and
        # the overlap fields: identical ranks, and the same rank in the next call, reuse them
        key = (id(st), id(pieces[r]), tuple(pair_base[r]), flags)
        hit = _RANKS.get(key)
        if hit is None or hit[0] is not st or hit[1] is not pieces[r]:
            vals: list[float] = []
            _rank_values(inp, comp, r, vals.append, vals.extend, memo)
            hit = (st, pieces[r], np.fromiter(vals, dtype=float, count=len(vals)))
            remember(_RANKS, key, hit, MAX_RANKS)   # keeps the StageCost and pieces its key names alive
        blocks.append(hit[2])
    return np.concatenate(blocks)


# (id of a StageCost, id of its rank's DP piece groups, pair types, overlap fields) -> (that
# StageCost, those groups, the rank's value block: never written to)
_RANKS: dict[tuple, tuple] = {}
MAX_RANKS = 128
