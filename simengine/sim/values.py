"""Durations of every value slot (layout in ``layout.py``) for one PipelineInput.

Slowdown model (an approximation, stated once here): a compute task designated to overlap
communication has its duration multiplied by ``overlap_slowdown`` — a modelling assumption for
the SM and HBM contention between NCCL / TransformerEngine userbuffer kernels and GEMMs
(Megatron-LM ``--tp-comm-overlap``, ``--overlap-grad-reduce``, ``--overlap-param-gather``);
the factor is the user's ``StrategySpec.overlap_slowdown``, not derived here. Designated tasks are the F (B) compute of a chunk
whose forward (backward) collectives run overlapped (``tp_comm_overlap``), the pieces of the
first F that overlap the parameter all-gather, and the pieces of the final backward (B or W)
that overlap the gradient reduce-scatter. The factor is applied once, never compounded, and
regardless of how much of the task the communication actually covers.
"""

from __future__ import annotations

from .compiled import Compiled
from .inputs import PipelineInput


def build_values(inp: PipelineInput, comp: Compiled) -> list[float]:
    g = comp.graph
    slow = float(inp.overlap_slowdown)
    tco = inp.tp_comm_overlap
    vals = [0.0]
    app = vals.append
    ext = vals.extend
    for r, st in enumerate(inp.stages):
        app(st.p2p_s)
        app(st.optimizer_s)
        ext(st.dp_grad_buckets_s)
        ext(st.dp_param_buckets_s)
        gp, pp = g.grad_pieces[r], g.param_pieces[r]
        for c, ch in enumerate(st.chunks):
            f, bi, bw = ch.forward_s, ch.backward_input_s, ch.backward_weight_s
            bf = bi + bw
            kf = slow if (tco and ch.forward_comm) else 1.0
            kb = slow if (tco and ch.backward_comm) else 1.0
            npf, npb = pp[c], gp[c]
            app(f * kf)
            app(f * slow / npf if npf else 0.0)
            app(ch.recompute_s)
            app(bf * kb)
            app(bi * kb)
            app(bf * slow / npb if npb else 0.0)
            app(bw)
            app(bw * slow / npb if npb else 0.0)
            for _, sec in ch.forward_comm:
                app(sec)
            for _, sec in ch.backward_comm:
                app(sec)
    return vals
