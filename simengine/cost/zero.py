"""ZeRO-2/3 collectives of every micro-batch, inside a chunk's phases: the per-unit parameter
all-gathers and gradient reduce-scatters as FSDP2, Megatron-FSDP and DeepSpeed ZeRO-3 run them,
each beside the compute window it can hide under (the simulator, sim/overlap.py, decides how
much does). ``cost/stage.py`` prices a chunk's phases and hands them here when ZeRO-2/3 runs in
the chunks (``stage._zero_in_chunks``); the search's bounds call the same function
(search/plan_terms.py ``zero_chunk``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config.scenario import Scenario
from . import deepspeed_v03
from .comm import CommModel
from .dp import microbatch_dp, param_gather_bytes, sharded_buffers, zero_units
from .phase import PhaseCost
from .static_memory import StageParams, keeps_gathered, stage_params
from ..workload.recompute import op_sac_stack, recomputed_layers

if TYPE_CHECKING:
    from ..workload.builder import ChunkWork


# FSDP2 and Megatron-FSDP gather a unit's parameters once for its recomputation and its backward:
# Megatron-FSDP megatron_fsdp.py ("When recomputing a whole Transformer layer, gather parameters
# once for both the recomputation and backward computation": ``_pre_forward_param_unshard`` in the
# PRE_BACKWARD state skips the forward prefetch and finds the unit unsharded), and FSDP2's
# ``FSDPParamGroup.unshard`` returns at once for a group already unsharded (torch.distributed.
# fsdp._fully_shard._fsdp_param_group). DeepSpeed ZeRO-3 fetches again for the recompute.
GATHER_ONCE = ("fsdp2", "megatron-fsdp")


def zero_per_microbatch(sc: Scenario, comm: CommModel, cw: ChunkWork, fwd: PhaseCost, bwd: PhaseCost, rc: PhaseCost,
                         wgt_s: float = 0.0) -> None:
    """ZeRO-2/3 communication of every micro-batch of one chunk, as the frameworks run it, per
    unit (one transformer layer: FSDP2's per-block ``fully_shard`` in torchtitan
    ``parallelize_llama``, Megatron-FSDP's per-module units; DeepSpeed ZeRO-3 gathers per
    submodule and reduce-scatters per bucket — cost/dp.py::zero_units):

    * ZeRO-3 forward: unit i+1's parameter all-gather is prefetched while unit i computes
      (``overlap_param_gather``; FSDP ``forward_prefetch``), the first unit's is exposed;
    * ZeRO-3 backward: the parameters are gathered again (``reshard_after_forward``), prefetched
      one unit ahead, the first exposed; ZeRO-2/3: each unit's gradient reduce-scatter runs while
      the next unit's backward computes (``overlap_grad_reduce``), the last one exposed. A unit's
      backward is its input gradient, its weight gradient (``wgt_s``: autograd runs both before
      the unit's post-backward hook launches its reduce-scatter — except where the schedule
      defers W to a task of its own, ``StrategySpec.defers_weight_grad``: then only the input
      gradient is beside it) and its recomputation, which runs inside it: with FSDP2 or
      Megatron-FSDP (``GATHER_ONCE``) on the parameters gathered for the unit, and wherever
      nothing is gathered (ZeRO-2);
    * otherwise (DeepSpeed ZeRO-3) the recompute re-gathers the weights of the units it re-runs
      (``_regathered``), beside the recompute's own compute (those gathers and the backward's
      collectives keep their own windows: one window is never lent to two of them).

    The engine runs a chunk's recompute before its backward, so a unit's collectives are split
    between the two phases in proportion to their compute, each beside its share of the unit's
    window: the same hidden, exposed and contention seconds as one window (sim/overlap.py
    ``resolve`` scales with a common factor of collective and window). Without overlap every
    gather and reduce-scatter runs alone. The simulator decides how much hides."""
    st = sc.strategy
    if keeps_gathered(sc):   # gathered once per step and kept (static_memory.keeps_gathered): nothing per micro-batch
        return
    params = stage_params(sc, (cw,))
    if st.zero_stage >= 3 and st.fsdp_pattern_name == "zero3-2021" and not sc.model.is_moe:
        _deepspeed_v03(sc, comm, cw, params, fwd, bwd, rc)
        return
    units, rs_units = zero_units(sc, len(cw.layers) + cw.mtp, params.dense + params.expert)
    ag_u, rs_u = microbatch_dp(sc, comm, params, units, rs_units)
    ogr, opg = st.overlap_grad_reduce, st.overlap_param_gather
    _unit_gathers([([(fwd, 1.0)], fwd.compute_s / units, units)], ag_u, units, opg)
    once = rc.compute_s > 0 and (st.fsdp_pattern_name in GATHER_ONCE or ag_u <= 0)
    if rc.compute_s > 0 and not once:
        again = _regathered(sc, cw, units)
        if again:
            _unit_gathers([([(rc, 1.0)], rc.compute_s / again, again)], ag_u, again, opg)
    bw_s = bwd.compute_s + (0.0 if st.defers_weight_grad else wgt_s)   # a deferred W is its own task, later

    def windows(u: int) -> list:
        return _backward_windows(bwd, rc, bw_s, u, _recomputed_units(sc, cw, u) if once else 0)

    if ogr and opg and ag_u > 0 and rs_u > 0 and units > 1 and rs_units > 1:
        # both on the one DP stream beside the backward: they share its windows, never both get one
        # (DeepSpeed, rs_units != units: the buckets' seconds spread over the gathers' windows)
        _beside_groups(windows(units), ag_u + rs_u * (rs_units - 1) / (units - 1), units - 1)
        bwd.add_comm("dp_comm", ag_u)  # the first unit's gather
        bwd.add_comm("dp_comm", rs_u)  # the last unit's reduce-scatter
        return
    _unit_gathers(windows(units), ag_u, units, opg)
    _unit_gathers(windows(rs_units), rs_u, rs_units, ogr)


def fsdp2_copies(sc: Scenario, cw: ChunkWork, hbm: float, overhead: float) -> tuple[tuple[float, int], tuple[float, int]]:
    """(seconds, launches) of the memory-bound copies FSDP2 runs ON THE COMPUTE STREAM around its
    collectives in one micro-batch of chunk ``cw``, for the forward and for the backward; ``hbm``
    the achieved HBM bytes/s and ``overhead`` the seconds of one launch (cost/compute.py
    ``ComputeModel.memory``). torch.distributed.fsdp._fully_shard (torch 2.4 → 2.8 alike):

    * all-gather copy-out: ``FSDPParamGroup.wait_for_unshard`` (_fsdp_param_group.py), called from
      ``pre_forward`` / ``pre_backward`` on the current (default) stream, runs
      ``foreach_all_gather_copy_out`` (_fsdp_collectives.py): ``current_stream().wait_event(
      all_gather_event)`` then ``split_with_sizes_copy`` of the whole gathered buffer into the
      unsharded parameters — one read and one write of the gathered bytes (``param_gather_bytes``:
      bf16, or fp8 with torchao's float8 all-gather), one launch per unit. The next unit's
      compute waits for it: it is serial with the compute, nothing hides it. Every unit in the
      forward; in the backward the units ``reshard_after_forward`` freed: torchtitan
      ``apply_fsdp`` keeps the last TransformerBlock gathered ("FSDP would prefetch it
      immediately") and FSDP2 never reshards the root (the embedding and LM head:
      ``FSDPState._lazy_init`` sets its ``post_forward_mesh_info = None``).
    * reduce-scatter copy-in: ``FSDPParamGroup.post_backward`` (autograd, default stream) calls
      ``foreach_reduce``, whose ``foreach_reduce_scatter_copy_in`` → ``chunk_cat`` reads every
      unsharded gradient (param dtype, bf16: 2 B) and writes the reduce-scatter input in the
      reduce dtype (torchtitan ``mixed_precision_reduce`` float32: 4 B — the upcast is
      ``_chunk_cat``'s own) on the current stream (torch ≥ 2.5; torch 2.4 ran it on the
      reduce-scatter stream and then ``current_stream.wait_stream(reduce_scatter_stream)``: the
      compute waited for it all the same). One launch per unit.

    Not here because they hide or vanish: the all-gather copy-in (the fp32 → bf16 cast of the
    shard and ``all_gather_copy_in``: shard-sized, 1/dp of the unit, on the
    ``all_gather_copy_in_stream``, which the compute never waits for); the gradient division
    (``_get_gradient_divide_factors``: for fp32/bf16 none — NCCL's ReduceOp.AVG divides); the
    post-reduce cast (reduce dtype fp32 = the fp32 parameters' dtype: none) and the
    accumulation into the sharded gradient (shard-sized, on the reduce-scatter stream, only the
    last unit's waited for at ``finalize_backward``). torch.compile changes none of them:
    torchtitan compiles each TransformerBlock and dynamo skips FSDP2's hooks
    (``torch._dynamo.config.skip_fsdp_hooks = True``), compiled autograd is off: the copies run
    eagerly as above.

    Under a pipeline (``keeps_gathered``) neither runs per micro-batch; the backward instead
    accumulates each unit's unsharded gradient (``fsdp2_accumulation``)."""
    st = sc.strategy
    if not (st.zero_stage >= 3 and st.fsdp_pattern_name == "fsdp2"):
        return (0.0, 0), (0.0, 0)
    if keeps_gathered(sc):
        b, k = fsdp2_accumulation(sc, cw)
        return (0.0, 0), (b / hbm + k * overhead, k)
    p = stage_params(sc, (cw,))
    units = len(cw.layers) + cw.mtp
    grad_in = 2.0                                  # autograd's unsharded gradient, in param_dtype bf16
    grad_out = 4.0 if st.fp32_main_grads else 2.0  # the reduce-scatter input, in reduce_dtype
    fwd_b = bwd_b = 0.0
    groups = 0
    for n, group, _ in sharded_buffers(sc, p):
        expert = group == "edp"
        ends = 0.0 if expert else p.ends   # the root (embedding, LM head) is dense
        groups += 1
        pb = param_gather_bytes(sc, p, expert)
        fwd_b += 2.0 * pb * n
        # the backward re-gathers every unit but the last block and the root (its ``ends``)
        bwd_b += 2.0 * pb * max(n - ends, 0.0) * (units - 1) / max(units, 1) + (grad_in + grad_out) * n
    if not groups:
        return (0.0, 0), (0.0, 0)
    fwd_k, bwd_k = groups * units, groups * (2 * units - 1)
    return (fwd_b / hbm + fwd_k * overhead, fwd_k), (bwd_b / hbm + bwd_k * overhead, bwd_k)


def fsdp2_accumulation(sc: Scenario, cw: ChunkWork) -> tuple[float, int]:
    """(bytes, launches) of one micro-batch's gradient accumulation of chunk ``cw`` under FSDP2 with
    the units kept gathered across a pipeline's micro-batches (``keeps_gathered``), the mean over
    the step's ``num_microbatches`` micro-batches; it runs ON THE COMPUTE STREAM, after each unit's
    backward. torch.distributed.pipelining ``stage.py`` ``backward_maybe_with_nosync`` runs the
    backwards without gradient sync (``set_requires_gradient_sync(False)``: every one but the last,
    torch 2.4; from pytorch PR #134052, 2024-08, all of them, with ``set_reshard_after_backward(False)``,
    then one manual ``post_backward`` — later a REDUCE_GRAD action of the schedule — reduce-scatters),
    so each unit's ``FSDPParamGroup.post_backward``
    (_fsdp_param_group.py; autograd's hook, on the default stream) takes the ``not reduce_grads``
    path: ``accumulate_unsharded_grad_if_needed`` then ``to_accumulated_grad_if_needed`` for every
    ``FSDPParam`` (_fsdp_param.py; torch/distributed/_composable/fsdp in torch 2.4–2.5, the same
    code), one kernel per parameter tensor:

    * reduce dtype ≠ param dtype (torchtitan ``mixed_precision_reduce`` float32 → ``reduce_dtype``
      fp32, ``fp32_main_grads``; ``init_dtype_attrs`` clamps only ``param_dtype``):
      ``to_accumulated_grad_if_needed`` upcasts the first micro-batch's bf16 gradient
      (``unsharded_grad.to(self.reduce_dtype)``: read 2 B, write 4 B a parameter), and from the
      second on ``accumulate_unsharded_grad_if_needed`` adds it to the fp32 one
      (``self.unsharded_accumulated_grad += self.unsharded_param.grad``: read 2 + 4 B, write 4 B);
    * reduce dtype = param dtype (bf16): both return at once and the gradient stays in
      ``.grad``, where autograd's AccumulateGrad adds each later micro-batch's to it in place
      (torch/csrc/autograd/functions/accumulate_grad.h ``accumulateGrad``: ``variable_grad +=
      new_grad``: read 2 + 2 B, write 2 B); the first micro-batch's is stolen, no copy.

    The parameters are the chunk's FSDP-sharded ones (each group of size > 1, as ``fsdp2_copies``)."""
    st = sc.strategy
    bufs = list(sharded_buffers(sc, stage_params(sc, (cw,))))
    n = sum(b[0] for b in bufs)
    k = sum(_param_tensors(sc, cw, group == "edp") for _, group, _ in bufs)
    if n <= 0:
        return 0.0, 0
    m = max(sc.num_microbatches, 1)
    if st.fp32_main_grads:
        first, later, first_k = 2.0 + 4.0, 2.0 + 4.0 + 4.0, k
    else:
        first, later, first_k = 0.0, 2.0 + 2.0 + 2.0, 0
    return n * (first + later * (m - 1)) / m, round((first_k + k * (m - 1)) / m)


def _param_tensors(sc: Scenario, cw: ChunkWork, expert: bool) -> int:
    """Parameter tensors of chunk ``cw`` in its dense (``expert`` False) or routed-expert FSDP groups,
    as torchtitan's models hold them (torchtitan/models/llama3/model.py ``TransformerBlock``:
    attention wq, wk, wv, wo, feed_forward w1, w2, w3, attention_norm, ffn_norm; deepseek_v3
    ``MLA``: wq or wq_a, q_norm, wq_b, and wkv_a, kv_norm, wkv_b, wo; moe.py ``MoE``: the router's
    gate, ``GroupedExperts`` w1, w2, w3 — three tensors whatever the expert count —, the shared
    experts' w1, w2, w3; the root's tok_embeddings, norm and output). Biases double the linears;
    a Mamba-2 layer counts Megatron's MambaMixer's in_proj, conv1d weight and bias, dt_bias, A_log,
    D, norm and out_proj; every attention, MLP, MoE or Mamba module its pre-norm (a Llama block's
    attention_norm and ffn_norm)."""
    m = sc.model
    if expert:
        return 3 * cw.moe_layers
    lin = 2 if m.linear_bias else 1
    # MLA: wq (or wq_a, q_norm, wq_b), wkv_a, kv_norm, wkv_b, wo; else wq, wk, wv, wo (and q/k norms)
    attn = (3 if m.q_lora_rank else 1) + 4 if m.attention == "mla" else 4 * lin + (2 if m.qk_norm else 0)
    mlp = (3 if m.activation == "swiglu" else 2) * lin
    shared = 3 if (m.num_shared_experts or m.shared_expert_ffn_hidden_size) else 0
    n = cw.attn_layers * attn + cw.dense_layers * mlp + cw.moe_layers * (1 + shared) + cw.mamba_layers * 8
    n += cw.attn_layers + cw.dense_layers + cw.moe_layers + cw.mamba_layers   # each module's pre-norm
    n += (1 if cw.first else 0) + ((1 if sc.model.tie_embeddings else 2) if cw.last else 0)
    return n


def _recomputed_units(sc: Scenario, cw: ChunkWork, units: int) -> int:
    """How many of a chunk's ``units`` re-run some forward in the backward: every one under
    selective recompute, those of the recomputed layers under full recompute (the first
    ``recompute_num_layers``, workload/recompute.py ``recomputed_layers``), none without."""
    if sc.strategy.recompute == "selective":
        return units
    return round(units * recomputed_layers(sc.strategy, len(cw.layers)) / max(len(cw.layers) + cw.mtp, 1))


def _backward_windows(bwd: PhaseCost, rc: PhaseCost, bw_s: float, units: int, recomputed: int) -> list:
    """A chunk's backward as ``units`` windows for the DP collectives, in groups (beside, window,
    count): the ``recomputed`` units, whose window is their backward (``bw_s`` / units) and their
    recompute (the chunk's recompute over them), split between the recompute and backward phases
    in proportion; then the rest, their backward alone. Grouped, not averaged: the exposed part
    of a collective is convex in its window (sim/overlap.py ``resolve``), so one mean window would
    hide more than the units' own windows do."""
    bw_u = bw_s / units
    if recomputed <= 0 or rc.compute_s <= 0:
        return [([(bwd, 1.0)], bw_u, units)]
    rc_u = rc.compute_s / recomputed
    w = bw_u + rc_u
    groups = [([(bwd, bw_u / w), (rc, rc_u / w)], w, recomputed)]
    if units > recomputed:
        groups.append(([(bwd, 1.0)], bw_u, units - recomputed))
    return groups


def _regathered(sc: Scenario, cw: ChunkWork, units: int) -> int:
    """Units whose parameters a recompute fetches again where nothing stays gathered for it
    (DeepSpeed ZeRO-3 fetches a submodule's parameters for every forward it runs, the
    recompute's included: ``partitioned_param_coordinator.fetch_sub_module``): those of the
    recomputed layers (``recomputed_layers``), or none where
    selective recompute re-runs only the parameter-free attention core (Megatron's default
    ``core_attn``; torchtitan's per-op AC re-runs GEMMs, so every unit)."""
    st = sc.strategy
    if st.recompute == "selective" and not op_sac_stack(sc) and set(st.recompute_modules or ("core_attn",)) <= {"core_attn"}:
        return 0
    return _recomputed_units(sc, cw, units)


def _deepspeed_v03(sc: Scenario, comm: CommModel, cw: ChunkWork, params: StageParams, fwd: PhaseCost, bwd: PhaseCost, rc: PhaseCost) -> None:
    """DeepSpeed v0.3 ZeRO-3 (cost/deepspeed_v03.py): the layers per submodule and tensor; the
    embedding / LM-head weights of the chunk one gather per pass and one reduce-scatter, alone
    (the first and last modules: nothing computes before them in their pass)."""
    deepspeed_v03.add_layer_comm(sc, comm, len(cw.layers) + cw.mtp, fwd, bwd, rc)
    if params.ends <= 0:
        return
    ranks = sc.dp_shard * sc.strategy.cp
    ag = comm.time("all_gather", 2.0 * params.ends, "dps") + deepspeed_v03.host_s(sc, 1, ranks)
    fwd.add_comm("dp_comm", ag)
    bwd.add_comm("dp_comm", ag)
    rs = comm.time("reduce_scatter", deepspeed_v03.GRAD_BYTES * params.ends, "dps") + deepspeed_v03.host_s(sc, 1, ranks, "reduce_scatter")
    bwd.add_comm("dp_comm", rs)


def _unit_gathers(groups: list, per_unit_s: float, units: int, overlap: bool) -> None:
    """``units`` collectives of ``per_unit_s``; with overlap all but one run beside a unit's
    compute (``groups``: ``_backward_windows``' form), the one left alone on the first phase."""
    if per_unit_s <= 0:
        return
    first = groups[0][0][0][0]
    if overlap:
        _beside_groups(groups, per_unit_s, units - 1)
        first.add_comm("dp_comm", per_unit_s)
    else:
        first.add_comm("dp_comm", per_unit_s, times=units)


def _beside_groups(groups: list, seconds: float, times: int) -> None:
    """``times`` DP collectives of ``seconds``, one per window of ``groups`` in order (a group's
    count at most), each beside its window as ``_beside``."""
    for beside, window_s, count in groups:
        n = min(count, times)
        if n > 0:
            _beside(beside, seconds, window_s, n)
        times -= n


def _beside(beside: list[tuple[PhaseCost, float]], seconds: float, window_s: float, times: int) -> None:
    """``times`` DP collectives of ``seconds``, each beside a compute window of ``window_s`` that
    the phases of ``beside`` share in their proportions: each phase its share of both."""
    for pc, share in beside:
        if share > 0:
            pc.add_comm("dp_comm", seconds * share, window_s * share, 1.0, times)
