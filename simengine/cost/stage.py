"""Per pipeline rank: the priced chunks (forward / backward-input / backward-weight / recompute),
activation memory per in-flight micro-batch, model states, p2p and data-parallel work.

This is the one place where workload and cost meet; the estimate and the timeline simulator both
start from the ``StagePlan`` list it returns, so they price exactly the same work.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config.scenario import Scenario
from ..workload.builder import ChunkWork, Workload, build_workload
from ..workload.ops import BF16, Attention
from .activations import (attention_activations, head_activations, layer_input, mlp_activations,
                          moe_activations)
from .comm import CommModel
from .compute import ComputeModel
from .dp import DPWork, dp_work, microbatch_dp
from .phase import PhaseCost, price_ops
from .static_memory import StageParams, StaticMemory, stage_params, static_memory


@dataclass(slots=True)
class ChunkPlan:
    work: ChunkWork
    fwd: PhaseCost
    bwd: PhaseCost        # backward w.r.t. inputs
    wgt: PhaseCost        # backward w.r.t. weights
    recompute: PhaseCost
    activation_bytes: float   # held per in-flight micro-batch
    peak_extra_bytes: float   # transient on top while this chunk runs


@dataclass(slots=True)
class StagePlan:
    rank: int
    chunks: list[ChunkPlan]
    params: StageParams
    static: StaticMemory
    p2p_s: float
    dp: DPWork


@dataclass(slots=True)
class Plan:
    workload: Workload
    stages: list[StagePlan]
    comm: CommModel


def _block_costs(wl: Workload, cm: ComputeModel, comm: CommModel, tp_overlap: bool,
                 slowdown: float) -> dict[str, tuple[PhaseCost, PhaseCost, PhaseCost]]:
    return {k: tuple(price_ops(ops, cm, comm, tp_overlap, slowdown) for ops in (ph.fwd, ph.bwd, ph.wgt))
            for k, ph in wl.blocks.items()}


def build_plan(sc: Scenario) -> Plan:
    st, m = sc.strategy, sc.model
    wl = build_workload(sc)
    d = wl.dims
    cm = ComputeModel(sc.system, st.dtype)
    comm = CommModel(sc)
    costs = _block_costs(wl, cm, comm, st.tp_comm_overlap, st.overlap_slowdown)
    att_act = attention_activations(d, m)
    mlp_act = mlp_activations(d, d.ffn) if "mlp" in wl.blocks else None
    moe_act = moe_activations(d, m) if "moe" in wl.blocks else None
    head_act = head_activations(d, st.fused_cross_entropy)
    core = next(op for op in wl.blocks["attn"].fwd if isinstance(op, Attention))
    core_fwd_s = cm.attention(core)
    # with SP the activation between stages is already split over TP; without it Megatron-Core
    # sends the whole tensor from every TP rank, older Megatron-LM 1/tp of it (scatter/gather,
    # Narayanan et al. 2021 §4.1 — StrategySpec.p2p_scatter_gather)
    split = d.sp or st.p2p_scatter_gather
    p2p_bytes = (d.tokens // d.tp if split else d.tokens) * d.h * BF16
    p2p_s = comm.time("p2p", p2p_bytes, "pp") if st.pp > 1 else 0.0

    stages = []
    memo: dict[tuple, tuple] = {}
    for rank_chunks in wl.ranks:
        chunks = []
        for cw in rank_chunks:
            fwd, bwd, wgt, rc = PhaseCost(), PhaseCost(), PhaseCost(), PhaseCost()
            n_layers = len(cw.layers)
            for key, n in (("attn", n_layers), ("mlp", cw.dense_layers), ("moe", cw.moe_layers)):
                if n:
                    f, b, w = costs[key]
                    fwd.add(f, n)
                    bwd.add(b, n)
                    wgt.add(w, n)
            if cw.first:
                f, b, w = costs["embed"]
                fwd.add(f), bwd.add(b), wgt.add(w)
            if cw.last:
                f, b, w = costs["head"]
                fwd.add(f), bwd.add(b), wgt.add(w)
            if cw.mtp:
                # each MTP module: glue + one transformer block + the shared output head
                for key in ("mtp", "attn", "moe" if cw.mtp_moe else "mlp", "head"):
                    f, b, w = costs[key]
                    fwd.add(f, cw.mtp), bwd.add(b, cw.mtp), wgt.add(w, cw.mtp)
            # activations held per micro-batch and the transient on top (Korthikanti et al. 2022)
            per_dense = att_act.saved + (mlp_act.saved if mlp_act else 0.0)
            per_moe = att_act.saved + (moe_act.saved if moe_act else 0.0)
            n_rc = 0
            if st.recompute == "full":
                n_rc = n_layers if st.recompute_num_layers is None else min(st.recompute_num_layers, n_layers)
            # the first n_rc layers of the chunk are recomputed (Megatron --recompute-method block)
            if st.recompute == "selective":
                per_dense -= att_act.selective
                per_moe -= att_act.selective
            if cw.moe_layers:
                kinds = [m.is_moe_layer(layer) for layer in cw.layers]
                held = n_rc * layer_input(d) + sum(per_moe if k else per_dense for k in kinds[n_rc:])
            else:
                held = n_rc * layer_input(d) + (n_layers - n_rc) * per_dense
            transients = [att_act.bwd_transient]
            if mlp_act and cw.dense_layers:
                transients.append(mlp_act.bwd_transient)
            if moe_act and cw.moe_layers:
                transients.append(moe_act.bwd_transient)
            extra = max(transients)
            if n_rc:
                biggest = max(per_dense if cw.dense_layers else 0.0, per_moe if cw.moe_layers else 0.0)
                extra += biggest - layer_input(d)
                # recompute = the forward of the recomputed layers, comm included
                share = n_rc / max(n_layers, 1)
                for key, n in (("attn", n_layers), ("mlp", cw.dense_layers), ("moe", cw.moe_layers)):
                    if n:
                        rc.add(costs[key][0], n * share)
            elif st.recompute == "selective":
                rc.compute_s += core_fwd_s * n_layers
                rc.flops += core.flops * n_layers
            if cw.last:
                held += head_act.saved
                extra = max(extra, head_act.bwd_transient)
            if cw.mtp:
                block = per_moe if cw.mtp_moe else per_dense
                held += cw.mtp * (block + head_act.saved + 2 * layer_input(d) * 2)  # + norms/concat inputs
            if cw.first and d.dropout:
                held += d.sp_tokens * d.h  # embedding dropout mask
            if st.zero_stage >= 2 and sc.dp * st.cp * sc.edp > 1:
                _zero_per_microbatch(sc, comm, cw, fwd, bwd, rc)
            chunks.append(ChunkPlan(cw, fwd, bwd, wgt, rc, held, extra))
        # ranks that hold the same blocks have the same model states and DP work (middle stages)
        sig = tuple((len(c.layers), c.dense_layers, c.moe_layers, c.first, c.last) for c in rank_chunks)
        states = memo.get(sig)
        if states is None:
            params = stage_params(sc, rank_chunks)
            states = memo[sig] = (params, static_memory(sc, params), dp_work(sc, comm, params))
        stages.append(StagePlan(rank_chunks[0].rank, chunks, states[0], states[1], p2p_s, states[2]))
    return Plan(wl, stages, comm)


def _zero_per_microbatch(sc: Scenario, comm: CommModel, cw: ChunkWork, fwd: PhaseCost, bwd: PhaseCost, rc: PhaseCost) -> None:
    """ZeRO-2/3 communication of every micro-batch of one chunk, exposed as DP comm: the weight
    all-gather before the forward (and again before the backward, and for the recompute) and the
    gradient reduce-scatter after the backward. With overlap (FSDP prefetch, bucketed async
    reduce-scatter) only the part longer than the compute it runs beside is exposed."""
    st = sc.strategy
    ag, rs = microbatch_dp(sc, comm, stage_params(sc, (cw,)))
    f_exposed = max(0.0, ag - fwd.compute_s) if st.overlap_param_gather else ag
    b_comm = ag + rs
    b_exposed = max(0.0, b_comm - bwd.compute_s) if st.overlap_grad_reduce else b_comm
    for pc, t in ((fwd, f_exposed), (bwd, b_exposed)):
        if t > 0:
            pc.comm_s["dp_comm"] = pc.comm_s.get("dp_comm", 0.0) + t
    if rc.compute_s > 0 and st.zero_stage >= 3 and not st.overlap_param_gather:
        rc.comm_s["dp_comm"] = rc.comm_s.get("dp_comm", 0.0) + ag
