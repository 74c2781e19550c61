"""Per pipeline rank: the priced chunks (forward / backward-input / backward-weight / recompute),
activation memory per in-flight micro-batch, model states, p2p and data-parallel work.

This is the one place where workload and cost meet; the estimate and the timeline simulator both
start from the ``StagePlan`` list it returns, so they price exactly the same work.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..config.scenario import Scenario
from ..memo import remember
from ..workload.builder import ChunkWork, Workload, build_workload
from ..workload.dims import Dims
from ..workload.ops import BF16, Attention, Collective, Gemm
from ..workload.phases import Phases
from ..workload.recompute import gemms, op_sac, op_sac_stack, recomputed_layers, recomputed_ops
from .offload import shared_link as offload_shared_link, stalls as offload_stalls
from .activations import (BlockActivations, attention_activations, head_activations, kept_outputs, layer_input, mamba_activations,
                          mlp_activations, moe_activations, torch_cp_bwd_transient)
from .comm import CommModel
from .compute import ComputeModel
from .dp import DPWork, dp_key, dp_work
from .phase import PhaseCost, price_ops
from .zero import fsdp2_copies, zero_per_microbatch
from .static_memory import StageParams, StaticMemory, keeps_gathered, stage_params, static_memory


@dataclass(slots=True)
class ChunkPlan:
    work: ChunkWork
    fwd: PhaseCost
    bwd: PhaseCost        # backward w.r.t. inputs
    wgt: PhaseCost        # backward w.r.t. weights
    recompute: PhaseCost
    activation_bytes: float   # held per in-flight micro-batch
    peak_extra_bytes: float   # transient on top while this chunk runs
    host_bytes: float = 0.0   # offloaded to host memory per in-flight micro-batch (cpu_offload_layers)


@dataclass(slots=True)
class StagePlan:
    rank: int
    chunks: list[ChunkPlan]
    params: StageParams
    static: StaticMemory
    p2p_s: float
    dp: DPWork
    # ranks built from the same priced chunks and model states share this key (build_plan), so
    # the engine's input maps them to one stage without comparing their phases (pipeline.py)
    share: tuple | None = None


@dataclass(slots=True)
class Plan:
    workload: Workload
    stages: list[StagePlan]
    comm: CommModel


def _block_costs(wl: Workload, cm: ComputeModel, comm: CommModel, tp_overlap: bool,
                 system) -> dict[str, tuple[PhaseCost, PhaseCost, PhaseCost]]:
    """Each block's forward, backward-input and backward-weight priced (``price_ops``),
    memoised on ``system`` (what ``cm`` and ``comm`` were built from) and what pricing reads besides
    the ops: the shared op lists (workload/builder.py ``block_phases``, by identity), the system,
    dtype, ``tp_overlap`` and the placement of every group the blocks' collectives run on
    (cost/comm.py ``group_placements``; search/blocks.py keys a block's sides alike). A search
    or a page rerun prices the same blocks for many layouts (pp, vpp, the schedule, ZeRO, the DP
    flags change no block). The result is shared: read it, never change it."""
    blocks = wl.blocks
    key = (id(blocks), system, cm.dtype, tp_overlap, tuple(comm.places[g] for g in _groups_of(blocks)))
    try:
        hit = _PRICED.get(key)
    except TypeError:  # a system holding a list (unhashable): priced every time
        return _price_blocks(blocks, cm, comm, tp_overlap)
    if hit is not None and hit[0] is blocks:
        return hit[1]
    costs = _price_blocks(blocks, cm, comm, tp_overlap)
    remember(_PRICED, key, (blocks, costs), MAX_PRICED)   # the blocks kept alive with their key: their id stays theirs
    return costs


def _price_blocks(blocks: dict[str, Phases], cm: ComputeModel, comm: CommModel,
                  tp_overlap: bool) -> dict[str, tuple[PhaseCost, PhaseCost, PhaseCost]]:
    return {k: (price_ops(ph.fwd, cm, comm, tp_overlap), price_ops(ph.bwd, cm, comm, tp_overlap),
                price_ops(ph.wgt, cm, comm, tp_overlap)) for k, ph in blocks.items()}


# (id of a shared block dict, system, dtype, tp_overlap, placements) -> (that dict, its priced blocks)
_PRICED: dict[tuple, tuple] = {}
_GROUPS: dict[int, tuple] = {}   # id of a shared block dict -> (that dict, the groups its collectives run on)
MAX_PRICED = 512


def _groups_of(blocks: dict[str, Phases]) -> tuple[str, ...]:
    hit = _GROUPS.get(id(blocks))
    if hit is not None and hit[0] is blocks:
        return hit[1]
    groups = tuple(sorted(set().union(*(ph.groups() for ph in blocks.values()))))
    remember(_GROUPS, id(blocks), (blocks, groups), MAX_PRICED)
    return groups


@dataclass(slots=True)
class _Priced:
    """What every chunk of one scenario shares: its priced blocks and per-layer activations."""

    sc: Scenario
    cm: ComputeModel
    comm: CommModel
    d: Dims
    costs: dict[str, tuple[PhaseCost, PhaseCost, PhaseCost]]
    att: BlockActivations
    mlp: BlockActivations | None
    moe: BlockActivations | None
    head: BlockActivations
    mamba: BlockActivations | None
    core: tuple[Attention, ...]    # the attention core kernels of a full-attention layer (CP ring: one per step)
    core_w: tuple[Attention, ...]  # ... of a sliding-window layer (empty = no windowed layers)
    rc_blocks: dict[str, PhaseCost]  # per block, the forward it re-runs under selective recompute_modules
    # per block, its forward as full recompute re-runs it in the backward graph, where it prices
    # differently from the forward (async TP's gathers: cost/phase.py ``_symm_mem``); else ``costs``
    rc_full: dict[str, PhaseCost] | None = None


def _sac_kept(st, fwd, first_mm: int = 1) -> list:
    """The ops whose outputs torchtitan's per-op selective AC keeps (workload/recompute.py ``op_sac``).
    Eager, ``torch.utils.checkpoint``'s caching dispatch mode stores the output of every MUST_SAVE op
    (``_CachingTorchDispatchMode``: ``storage[func].append(...)`` whatever autograd needs). Under
    torch.compile the policy only tags the graph and AOTAutograd's min-cut partitioner
    (torch/_functorch/partitioners.py ``min_cut_rematerialization_partition``) saves just what the
    backward graph reads: the block's last GEMM (wo, w2) and the reduce-scatter after it only feed
    the residual add, whose backward reads neither, so they are not saved."""
    kept = op_sac(fwd, first_mm)[1]
    if st.framework != "torch-compile":
        return kept
    last = [o for o in fwd if isinstance(o, Gemm)][-1:]
    return [o for o in kept if all(o is not x for x in last) and not (isinstance(o, Collective) and o.kind == "reduce_scatter")]


def _priced(sc: Scenario, wl: Workload) -> _Priced:
    st, m, d = sc.strategy, sc.model, wl.dims
    cm = ComputeModel(sc.system, st.dtype)
    comm = CommModel(sc)
    core = tuple(op for op in wl.blocks["attn"].fwd if isinstance(op, Attention))
    core_w = tuple(op for op in wl.blocks["attn_window"].fwd if isinstance(op, Attention)) if "attn_window" in wl.blocks else ()
    sac = op_sac_stack(sc)
    first = {"mlp": 1 + gemms(wl.blocks["attn"].fwd)}   # op_sac counts a TransformerBlock's GEMMs from its attention's
    rc_blocks: dict[str, PhaseCost] = {}
    if st.recompute == "selective":
        for key in ("attn", "attn_window", "mlp", "moe"):
            if key not in wl.blocks:
                continue
            fwd = wl.blocks[key].fwd
            ops = op_sac(fwd, first.get(key, 1))[0] if sac and key != "moe" else \
                recomputed_ops(key, fwd, st.recompute_modules, m.attention == "mla")
            if ops:
                rc_blocks[key] = price_ops(ops, cm, comm, st.tp_comm_overlap, in_backward=True)
    att = attention_activations(d, m)
    if torch_ring_cp(sc, d):
        # PyTorch's ring attention backward holds the gathered K,V and fp32 dQ, dK,dV buffers
        # (activations.py ``torch_cp_bwd_transient``) where the plain flash backward holds dQ, dK, dV
        att = replace(att, bwd_transient=max(att.bwd_transient, torch_cp_bwd_transient(d, st.cp_comm_type == "allgather")))
    mlp = mlp_activations(d, d.ffn) if "mlp" in wl.blocks else None
    if sac:   # what torchtitan's per-op selective AC drops: all but the block input and the kept outputs
        att = replace(att, op_sac=max(att.saved - layer_input(d) - kept_outputs(_sac_kept(st, wl.blocks["attn"].fwd)), 0.0))
        if mlp is not None:
            mlp = replace(mlp, op_sac=max(mlp.saved - kept_outputs(_sac_kept(st, wl.blocks["mlp"].fwd, first["mlp"])), 0.0))
    rc_full = None
    if st.recompute == "full" and st.tp_comm_overlap and d.tp > 1 and d.stack.tp_overlap_impl == "symm_mem":
        rc_full = {k: price_ops(ph.fwd, cm, comm, True, in_backward=True) for k, ph in wl.blocks.items()}
    return _Priced(sc, cm, comm, d, _block_costs(wl, cm, comm, st.tp_comm_overlap, sc.system), att, mlp,
                   moe_activations(d, m) if "moe" in wl.blocks else None,
                   head_activations(d, st.fused_cross_entropy, head_ce(sc)),
                   mamba_activations(d, m) if "mamba" in wl.blocks else None, core, core_w, rc_blocks, rc_full)


def torch_ring_cp(sc: Scenario, d: Dims) -> bool:
    """Whether the full-attention layers run PyTorch's ``context_parallel`` ring attention: the
    condition under which workload/layers.py ``_core_attention`` builds ``_torch_cp``'s ops."""
    return (d.cp > 1 and sc.strategy.cp_comm_type in ("allgather", "p2p") and d.stack.cp_impl != "te"
            and not d.attention_window)


def head_ce(sc: Scenario) -> str:
    """How the unfused loss runs (cost/activations.py ``head_activations``): Megatron's vocab-parallel
    cross-entropy, or on the torch stacks torchtitan's ``cross_entropy(pred.float(), ...)`` — compiled
    (``StrategySpec.compiled_loss``), under loss parallelism when tp > 1 (torchtitan's default:
    ``ParallelDims.loss_parallel_enabled = tp_enabled and enable_loss_parallel``, with
    ``training.disable_loss_parallel`` False), else plain eager aten."""
    st = sc.strategy
    if st.framework not in ("torch-native", "torch-compile"):
        return "megatron"
    if st.compiled_loss:
        return "compiled"
    return "loss-parallel" if st.tp > 1 else "aten"


def _layer_blocks(cw: ChunkWork) -> tuple[tuple[str, int], ...]:
    """(block key, layers of the chunk built from it) for the transformer layers of a chunk."""
    return (("attn", cw.attn_layers - cw.window_layers), ("attn_window", cw.window_layers),
            ("mlp", cw.dense_layers), ("moe", cw.moe_layers), ("mamba", cw.mamba_layers))


def _chunk_phases(p: _Priced, cw: ChunkWork) -> tuple[PhaseCost, PhaseCost, PhaseCost]:
    """Forward, backward-input and backward-weight cost of one micro-batch through the chunk."""
    parts = [(key, n) for key, n in _layer_blocks(cw) if n]
    if cw.first:
        parts.append(("embed", 1))
    if cw.last:
        parts.append(("head", 1))
    if cw.mtp:
        # each MTP module: glue + one transformer block + the shared output head
        parts += [(key, cw.mtp) for key in ("mtp", "attn", "moe" if cw.mtp_moe else "mlp", "head")]
    fwd, bwd, wgt = PhaseCost(), PhaseCost(), PhaseCost()
    for key, n in parts:
        f, b, w = p.costs[key]
        fwd.add(f, n)
        bwd.add(b, n)
        wgt.add(w, n)
    return fwd, bwd, wgt


def _recomputed_layers(p: _Priced, cw: ChunkWork) -> int:
    """Layers of the chunk that full recompute re-runs (workload/recompute.py ``recomputed_layers``)."""
    return recomputed_layers(p.sc.strategy, len(cw.layers))


def _chunk_memory(p: _Priced, cw: ChunkWork, n_rc: int) -> tuple[float, float]:
    """(activation bytes held per in-flight micro-batch, transient bytes on top while the chunk
    runs backward), Korthikanti et al. 2022 §4 per layer; recomputed layers keep only their input."""
    d, st, m = p.d, p.sc.strategy, p.sc.model
    n_layers = len(cw.layers)
    per_dense = p.att.saved + (p.mlp.saved if p.mlp else 0.0)
    per_moe = p.att.saved + (p.moe.saved if p.moe else 0.0)
    drops = (0.0, 0.0, 0.0)  # what selective recompute drops of the attention, MLP and MoE blocks
    if st.recompute == "selective":
        # the recompute_modules' saved tensors (activations.py), or what torchtitan's per-op
        # selective AC drops of the attention and dense MLP blocks (_priced)
        mods, sac = st.recompute_modules, op_sac_stack(p.sc)
        att = p.att.op_sac if sac else p.att.dropped(mods)
        drops = (att, (p.mlp.op_sac if sac else p.mlp.dropped(mods)) if p.mlp else 0.0, p.moe.dropped(mods) if p.moe else 0.0)
        per_dense -= att + drops[1]
        per_moe -= att + drops[2]
    # the largest layer's tensors: what re-running one recomputed layer holds on top of its input
    biggest = max(per_dense if cw.dense_layers else 0.0, per_moe if cw.moe_layers else 0.0)
    if m.hybrid_pattern is not None:  # one mixer per layer (ModelSpec.hybrid_pattern): its own block's tensors
        per_kind = {"*": p.att.saved - drops[0], "-": (p.mlp.saved if p.mlp else 0.0) - drops[1],
                    "E": (p.moe.saved if p.moe else 0.0) - drops[2], "M": p.mamba.saved if p.mamba else 0.0}
        layer_saved = [per_kind[m.layer_kind(i)] for i in cw.layers]
        held = n_rc * layer_input(d) + sum(layer_saved[n_rc:])
        biggest = max(layer_saved, default=0.0)
    elif cw.moe_layers:
        kinds = [m.is_moe_layer(layer) for layer in cw.layers]
        held = n_rc * layer_input(d) + sum(per_moe if k else per_dense for k in kinds[n_rc:])
    else:
        held = n_rc * layer_input(d) + (n_layers - n_rc) * per_dense
    held -= sum(_offloaded(p, cw))  # at most L − N layers' activations on the GPU (cost/offload.py)
    transients = [p.att.bwd_transient] if cw.attn_layers or m.hybrid_pattern is None else []
    if p.mlp and cw.dense_layers:
        transients.append(p.mlp.bwd_transient)
    if p.moe and cw.moe_layers:
        transients.append(p.moe.bwd_transient)
    if p.mamba and cw.mamba_layers:
        transients.append(p.mamba.bwd_transient)
    extra = max(transients, default=0.0)
    if n_rc:
        extra += biggest - layer_input(d)
    if st.recompute == "selective":
        extra = _regrown(p, cw, drops, extra, op_sac_stack(p.sc))
    if cw.last:
        held += p.head.saved
        extra = max(extra, p.head.bwd_transient)
    if cw.mtp:
        block = per_moe if cw.mtp_moe else per_dense
        held += cw.mtp * (block + p.head.saved + 2 * layer_input(d) * 2)  # + norms/concat inputs
    if cw.first and d.dropout:
        held += d.sp_tokens * d.h  # embedding dropout mask
    return held, extra


def _offloaded(p: _Priced, cw: ChunkWork) -> list[float]:
    """Saved activation bytes of each layer the chunk offloads to host memory: its first
    ``cpu_offload_layers`` (StrategySpec; the scenario allows it only without recompute and
    pipeline parallelism, so these are whole layers' saved tensors)."""
    n = min(p.sc.strategy.cpu_offload_layers, len(cw.layers))
    if not n:
        return []
    m = p.sc.model
    per = {"*": p.att.saved, "-": p.mlp.saved if p.mlp else 0.0, "E": p.moe.saved if p.moe else 0.0,
           "M": p.mamba.saved if p.mamba else 0.0}
    if m.hybrid_pattern is not None:
        return [per[m.layer_kind(i)] for i in cw.layers[:n]]
    return [p.att.saved + (per["E"] if m.is_moe_layer(i) else per["-"]) for i in cw.layers[:n]]


def _offload_comm(p: _Priced, cw: ChunkWork, fwd: PhaseCost, bwd: PhaseCost) -> None:
    """What the offload copies add to one micro-batch's forward and backward where they outlast
    the layers' compute (cost/offload.py), as exposed ``offload_comm``."""
    saved = _offloaded(p, cw)
    if not saved:
        return
    n = len(cw.layers)
    f = sum(p.costs[k][0].compute_s * c for k, c in _layer_blocks(cw) if c) / n
    b = sum((p.costs[k][1].compute_s + p.costs[k][2].compute_s) * c for k, c in _layer_blocks(cw) if c) / n
    gpu = p.sc.system.gpu
    link_f = link_b = gpu.host_link_gbs
    if gpu.host_link_shares_nic:   # the NIC's traffic of the same phase takes part of the one PCIe link
        nic = p.sc.system.scale_out.bandwidth_gbs
        link_f = offload_shared_link(link_f, nic, _nic_seconds(p, fwd) / max(n * f, 1e-12))
        link_b = offload_shared_link(link_b, nic, _nic_seconds(p, bwd) / max(n * b, 1e-12))
    s_f, s_b = offload_stalls(saved, n, f, b, link_f, link_b)
    fwd.add_comm("offload_comm", s_f)
    bwd.add_comm("offload_comm", s_b)


# the parallel group (cost/comm.py ``group_placements``) each kind of a phase's collectives runs on
_KIND_GROUP = {"dp_comm": "dps", "cp_comm": "cp", "ep_comm": "ep", "tp_comm": "tp"}


def _nic_seconds(p: _Priced, ph: PhaseCost) -> float:
    """Seconds of a phase's collectives whose group crosses the scale-out network: what keeps the
    GPU's NIC streaming during the phase (cost/comm.py ``tier_of``)."""
    out = 0.0
    for kind, seconds, _, _, count in ph.tasks():
        group = _KIND_GROUP.get(kind)
        if group is not None and p.comm.tier_of(group) == "scale_out":
            out += seconds * count
    return out


def _regrown(p: _Priced, cw: ChunkWork, drops: tuple[float, float, float], extra: float, sac: bool) -> float:
    """The backward transient with what selective recompute rematerialises on top: one layer's
    dropped tensors live again while its backward runs. torchtitan's per-op SAC checkpoints the
    whole layer (torch/utils/checkpoint.py: the layer's forward reruns at its backward's start), so
    all its dropped tensors at once; Megatron-Core checkpoints each recompute module on its own
    (transformer_layer.py ``_checkpointed_*`` / ``CheckpointWithoutOutput``), rerun just before that
    module's backward, so one module's dropped tensors beside that module's own transient."""
    att = (drops[0], p.att.bwd_transient, bool(cw.attn_layers or p.sc.model.hybrid_pattern is None))
    blocks = [att, (drops[1], p.mlp.bwd_transient if p.mlp else 0.0, bool(p.mlp and cw.dense_layers)),
              (drops[2], p.moe.bwd_transient if p.moe else 0.0, bool(p.moe and cw.moe_layers))]
    if sac and p.sc.model.hybrid_pattern is None:
        layer = max((drops[0] + dr for dr, _, present in blocks[1:] if present), default=drops[0])
        return extra + layer
    return max([extra] + [dr + tr for dr, tr, present in blocks if present])


def _recompute_cost(p: _Priced, cw: ChunkWork, n_rc: int) -> PhaseCost:
    """Full recompute: the forward of the recomputed layers, comm included; selective: the
    attention cores again (Korthikanti et al. 2022 §5) when ``core_attn`` is a recompute module, and
    the forward ops of the other modules (workload/recompute.py)."""
    rc = PhaseCost()
    n_layers = len(cw.layers)
    if n_rc:
        share = n_rc / max(n_layers, 1)
        for key, n in _layer_blocks(cw):
            if n:
                rc.add(p.rc_full[key] if p.rc_full else p.costs[key][0], n * share)
    elif p.sc.strategy.recompute == "selective":
        # (torchtitan's per-op selective AC keeps SDPA's output: the attention core is not re-run)
        if "core_attn" in p.sc.strategy.recompute_modules and not op_sac_stack(p.sc):
            for ops, n in ((p.core, cw.attn_layers - cw.window_layers), (p.core_w, cw.window_layers)):
                for op in ops if n else ():
                    rc.compute_s += p.cm.attention(op) * n
                    rc.flops += op.flops * n
                    rc.kernels += p.cm.launches(op) * n
        for key, n in _layer_blocks(cw):
            if n and key in p.rc_blocks:
                rc.add(p.rc_blocks[key], n)
    return rc


def _zero_in_chunks(sc: Scenario) -> bool:
    """Whether ZeRO-2/3 collectives run every micro-batch, inside the chunks' phases (not FSDP2
    under a pipeline: once per step, ``static_memory.keeps_gathered``)."""
    return sc.strategy.zero_stage >= 2 and sc.dp * sc.strategy.cp * sc.edp > 1 and not keeps_gathered(sc)


def _plan_chunk(p: _Priced, cw: ChunkWork) -> ChunkPlan:
    sc = p.sc
    fwd, bwd, wgt = _chunk_phases(p, cw)
    n_rc = _recomputed_layers(p, cw)
    held, extra = _chunk_memory(p, cw, n_rc)
    rc = _recompute_cost(p, cw, n_rc)
    if _zero_in_chunks(sc):
        zero_per_microbatch(sc, p.comm, cw, fwd, bwd, rc, wgt.compute_s)
    if _zero_in_chunks(sc) or keeps_gathered(sc):
        # FSDP2's copy-out and reduce-scatter copy-in, or under a pipeline its unsharded gradient
        # accumulation, run on the compute stream (cost/zero.py ``fsdp2_copies``): compute time of
        # the phases, after their collectives took their windows
        for pc, (sec, k) in zip((fwd, bwd), fsdp2_copies(sc, cw, p.cm.hbm, p.cm.overhead)):
            pc.compute_s += sec
            pc.kernels += k
    _offload_comm(p, cw, fwd, bwd)
    return ChunkPlan(cw, fwd, bwd, wgt, rc, held, extra, sum(_offloaded(p, cw)))


def _chunk_key(p: _Priced, cw: ChunkWork) -> tuple:
    """What a chunk's cost depends on: the kind of each layer, the ends, MTP and windowed layers."""
    # the kind of each layer; a chunk without MoE layers is all dense, so its length says it all
    m = p.sc.model
    if m.hybrid_pattern is not None:
        kinds: Any = "".join(m.layer_kind(i) for i in cw.layers)
    else:
        kinds = tuple(m.is_moe_layer(i) for i in cw.layers) if cw.moe_layers else len(cw.layers)
    return (kinds, cw.first, cw.last, cw.mtp, cw.mtp_moe, cw.window_layers)


def _plan_chunk_once(p: _Priced, cw: ChunkWork, priced: dict[tuple, ChunkPlan], key: tuple | None = None) -> ChunkPlan:
    """``_plan_chunk`` of a chunk whose cost depends only on what it holds (``_chunk_key``),
    reused across ranks; the plan keeps its own work."""
    key = _chunk_key(p, cw) if key is None else key
    hit = priced.get(key)
    if hit is None:
        hit = priced[key] = _plan_chunk_kept(p, cw, key)
        if hit.work is cw:
            return hit
    return ChunkPlan(cw, hit.fwd, hit.bwd, hit.wgt, hit.recompute, hit.activation_bytes, hit.peak_extra_bytes, hit.host_bytes)


def _plan_chunk_kept(p: _Priced, cw: ChunkWork, key: tuple) -> ChunkPlan:
    """``_plan_chunk``, memoised across calls on what it reads when no ZeRO-2/3 collective is
    priced into the chunk: the priced blocks (``_block_costs``' result, by identity: it stands
    for the op lists, hence the dims and the model, and the system, dtype, tp_comm_overlap and
    placements they were priced with — the activations, attention cores and selective-recompute
    blocks of ``_Priced`` come from the same), what the chunk holds (``_chunk_key``) and the
    recompute fields. With ZeRO-2/3 collectives, or FSDP2's gradient accumulation under a pipeline
    (cost/zero.py ``fsdp2_accumulation``), the chunk also reads the DP groups, flags, FSDP pattern
    and micro-batch count: priced every call. The phases are shared: read them, never change them."""
    st = p.sc.strategy
    if _zero_in_chunks(p.sc) or keeps_gathered(p.sc):   # (FSDP2 under a pipeline: its accumulation reads the DP groups)
        return _plan_chunk(p, cw)
    mk = (id(p.costs), key, st.recompute, st.recompute_num_layers, tuple(st.recompute_modules or ()), op_sac_stack(p.sc),
          st.cpu_offload_layers, _offload_key(p.sc) if st.cpu_offload_layers else None)
    hit = _CHUNKS.get(mk)
    if hit is not None and hit[0] is p.costs:
        return hit[1]
    plan = _plan_chunk(p, cw)
    remember(_CHUNKS, mk, (p.costs, plan), MAX_PRICED)   # the priced blocks kept alive with their key: their id stays theirs
    return plan


def _offload_key(sc: Scenario) -> tuple:
    """What an offload's copies read beyond the priced blocks (``_offload_comm``): the host link,
    whether the NIC shares it, the NIC's bandwidth and the groups' tiers (the GPU count)."""
    gpu = sc.system.gpu
    return (gpu.host_link_gbs, gpu.host_link_shares_nic, sc.system.scale_out.bandwidth_gbs, sc.system.num_gpus,
            sc.system.domain, sc.dp, sc.strategy.cp, sc.strategy.ep)


# (id of priced blocks, chunk key, recompute fields) -> (those priced blocks, the chunk's plan)
_CHUNKS: dict[tuple, tuple] = {}


def build_plan(sc: Scenario) -> Plan:
    st = sc.strategy
    wl = build_workload(sc)
    p = _priced(sc, wl)
    d, comm = p.d, p.comm
    # with SP the activation between stages is already split over TP; without it Megatron-Core
    # sends the whole tensor from every TP rank, older Megatron-LM 1/tp of it (scatter/gather,
    # Narayanan et al. 2021 §4.1 — StrategySpec.p2p_scatter_gather)
    split = d.sp or st.p2p_scatter_gather
    p2p_bytes = (d.tokens // d.tp if split else d.tokens) * d.h * BF16
    p2p_s = comm.time("p2p", p2p_bytes, "pp") if st.pp > 1 else 0.0

    stages = []
    dp_base = None  # dp_work's scenario part of its key (cost/dp.py ``dp_key``), once per plan
    memo: dict[tuple, tuple[StageParams, StaticMemory, DPWork]] = {}
    priced: dict[tuple, ChunkPlan] = {}  # middle stages hold the same kind of chunk: price it once
    for rank_chunks in wl.ranks:
        keys = tuple(_chunk_key(p, cw) for cw in rank_chunks)
        chunks = [_plan_chunk_once(p, cw, priced, key) for cw, key in zip(rank_chunks, keys)]
        # ranks that hold the same blocks have the same model states and DP work (middle stages)
        # (the first rank alone buckets its DP buffers: cost/dp.py ``dp_work``)
        sig = (rank_chunks[0].rank == 0, *((len(c.layers), c.dense_layers, c.moe_layers, c.mamba_layers, c.attn_layers,
                                              c.first, c.last) for c in rank_chunks))
        states = memo.get(sig)
        if states is None:
            params = stage_params(sc, rank_chunks)
            dp_base = dp_key(sc, comm) if dp_base is None else dp_base
            states = memo[sig] = (params, static_memory(sc, params), rank_dp_work(sc, comm, params, rank_chunks, dp_base))
        stages.append(StagePlan(rank_chunks[0].rank, chunks, states[0], states[1], p2p_s, states[2], (keys, sig)))
    return Plan(wl, stages, comm)


def rank_dp_work(sc: Scenario, comm: CommModel, params: StageParams, rank_chunks, base: tuple | None = None) -> DPWork:
    """``dp_work`` of the rank holding ``rank_chunks`` (ChunkWork, in chunk order) with ``params``:
    each chunk's own parameters, the rank's position (only pipeline rank 0 buckets); ``base``:
    ``dp_key(sc, comm)`` when the caller has it."""
    per = tuple(stage_params(sc, (cw,)) for cw in rank_chunks) if len(rank_chunks) > 1 else ()
    return dp_work(sc, comm, params, per, rank_chunks[0].rank, base)
