"""estimate(scenario) -> Report: step time, throughput, MFU/HFU, memory per stage, cost, energy.

A pure function of the scenario. The step time comes from the same pipeline engine the timeline
simulator uses (its fast path; a long 1F1B or interleaved pipeline from its certified periodic
steady state, sim/periodic.py), so the two agree up to float rounding.
"""

from __future__ import annotations

import struct

from .config.model import ModelSpec
from .config.scenario import Scenario
from .config.system import GPUSpec
from . import fit
from .memo import config_cache, remember
from .cost.launch import gpu_us_per_launch, launch_warning
from .cost.stage import Plan, StagePlan, build_plan
from .pipeline import max_inflight, order_memory_peaks, pipeline_input, sim_microbatches
from .report import Report, StageMemory
from .sim import pipeline_metrics
from .uncertainty import bands
from .workload.lora import model_adapter_params
from .workload.mamba import ssd_flops_per_token
from .workload.window import attention_flops_ratio
from .workload.params import count_parameters, gemm_parameters_active, mtp_block_params

GIB = float(1 << 30)


def model_flops_per_step(sc: Scenario, causal: bool = False) -> float:
    """6·N·tokens + attention (PaLM, Chowdhery et al. 2022, App. B: 6N + 12·L·H·Q·T per token;
    here 3 × the forward 2·s·heads·(d_qk + d_v) per layer and token). ``causal=False`` counts the
    full s² attention (PaLM, Narayanan et al. 2021 Eq. 3 and shared/validation); ``causal=True``
    halves it as current Megatron-LM's ``num_floating_point_operations`` does. N = GEMM parameters
    active per token, the LM head included and the embedding lookup excluded; multi-token-prediction
    modules add one block, their 2h×h projection and another LM-head pass each (Megatron counts them)."""
    st = sc.strategy
    lora = (st.lora_targets, st.lora_rank) if st.peft == "lora" else None
    attn_len = st.packed_doc_len or st.seq_len  # packed sequences attend within each document
    return float(sc.tokens_per_step) * _model_flops_per_token(sc.model, sc.vocab_padded, attn_len, causal, lora)


@config_cache
def _model_flops_per_token(m: ModelSpec, vocab_padded: int, seq_len: int, causal: bool,
                           lora: tuple[str, int] | None = None) -> float:
    """``model_flops_per_step`` / tokens: a pure function of the model and the length attention
    spans (the sequence, or a packed document; memoised: the attention-window ratio walks every layer). Under LoRA (``lora`` = targets,
    rank) the frozen weights run forward and input-gradient GEMMs only, 4·N, and the adapters
    all three, 6·N_adapters (workload/lora.py); attention is unchanged (no weights)."""
    n = gemm_parameters_active(m, vocab_padded)
    per_layer_attn = 3 * 2 * seq_len * m.num_attention_heads * (m.qk_head_dim + m.v_dim) * (0.5 if causal else 1.0)
    # sliding-window layers attend over their band only (workload/window.py: causal pairs)
    attn = per_layer_attn * (m.num_attention_layers + m.mtp_layers) * attention_flops_ratio(m, seq_len)
    if m.num_mamba_layers:  # the SSD scan, forward and twice that backward (workload/mamba.py)
        attn += 3.0 * m.num_mamba_layers * ssd_flops_per_token(m)
    if m.mtp_layers:
        last = mtp_block_params(m)  # per depth: a repeated module computes at every one
        norms = 2 * m.hidden_size * (2 if m.norm == "layernorm" else 1)
        n += m.mtp_layers * (last.active - norms + 2 * m.hidden_size**2 + m.vocab_size * m.hidden_size)
    if lora is not None:
        return 4.0 * n + 6.0 * model_adapter_params(m, *lora) + attn
    return 6.0 * n + attn


def trainable_parameters(sc: Scenario) -> int:
    """Parameters the optimizer updates: every one, or under LoRA the adapters (workload/lora.py)."""
    m, st = sc.model, sc.strategy
    if st.peft != "lora":
        return _count_parameters(m)[0]
    return model_adapter_params(m, st.lora_targets, st.lora_rank)


_count_parameters = config_cache(count_parameters)  # a pure function of the (frozen) model


def _stage_memory(sc: Scenario, st: StagePlan, inflight: int, exact: tuple[float, float, int] | None) -> tuple[StageMemory, float]:
    static = st.static
    if exact is not None:  # non-uniform chunks: the peak read off the rank's order
        held, extra, inflight = exact
    else:
        # peak = model states + n held micro-batches + the transient of the one running
        # (peer_model_notes.md §6; Korthikanti et al. 2022 §4.2.3 for 1F1B's in-flight count)
        c = st.chunks[0]
        held = inflight * c.activation_bytes
        extra = c.peak_extra_bytes
    # offload runs with one chunk a rank (pp 1, config/scenario.py _offload_checks): the offloaded
    # layers of every held micro-batch sit in host memory
    host = inflight * sum(c.host_bytes for c in st.chunks) if exact is None else 0.0
    gpu = sc.system.gpu
    vals = (held, extra, host, static.weights, static.grads, static.optimizer, static.buffers, static.pools,
            sc.strategy.allocator_overhead, gpu.memory_gib, gpu.non_torch_gib, gpu.host_memory_gib)
    # everything ``_new_stage_memory`` reads, the floats by bit pattern (``_MEMS``)
    key = (st.rank, inflight, _BITS.pack(*vals))
    hit = _MEMS.get(key)
    if hit is not None and hit[0] == vals:
        return hit[1]
    out = _new_stage_memory(st.rank, inflight, *vals)
    remember(_MEMS, key, (vals, out), MAX_MEMS)
    return out


def _new_stage_memory(rank: int, inflight: int, held: float, extra: float, host: float, weights: float, grads: float,
                      optimizer: float, buffers: float, pools: float, ov: float, capacity: float, non_torch: float,
                      host_capacity: float) -> tuple[StageMemory, float]:
    """A stage's StageMemory and allocated peak (bytes) from its held and transient activation
    bytes, host-offloaded bytes, model states, the allocator overhead and the GPU's memory."""
    alloc = weights + grads + optimizer + buffers + held + extra
    reserved = fit.reserved(alloc, ov, pools)
    sm = StageMemory(
        stage=rank, peak_gib=alloc / GIB, reserved_gib=reserved / GIB, pools_gib=pools / GIB,
        allocated_limit_gib=fit.allocated_limit(capacity, non_torch, ov, pools / GIB),
        weights_gib=weights / GIB, grads_gib=grads / GIB, optimizer_gib=optimizer / GIB,
        activations_gib=held / GIB, other_gib=(buffers + extra) / GIB,
        inflight_microbatches=inflight, host_offload_gib=host / GIB,
        free_gib=capacity - reserved / GIB - non_torch,
        fits=reserved / GIB + non_torch <= capacity and host / GIB <= host_capacity,
    )
    return sm, alloc


# Across calls and ranks: (rank, in-flight count, the other inputs of ``_new_stage_memory`` packed
# as doubles) -> (those inputs, (their StageMemory, the allocated bytes)). The result is a pure
# function of the inputs. The packed bytes tell apart what compares equal but prints apart (0.0
# and -0.0); a hit also compares the inputs themselves (an int past 2**53 packs as its nearest
# double, its sums differ). StageMemory is frozen: shared.
_MEMS: dict[tuple, tuple[tuple, tuple[StageMemory, float]]] = {}
_BITS = struct.Struct("<12d")
MAX_MEMS = 4096


def grouped_scalar_share(stage: StagePlan) -> float:
    """Of the rank's compute seconds, the share in grouped GEMMs priced from the scalar grouped
    level (``PhaseCost.grouped_scalar_s``): what widens its band (simengine/uncertainty.py)."""
    total = scalar = 0.0
    for c in stage.chunks:
        for ph in (c.fwd, c.bwd, c.wgt, c.recompute):
            total += ph.compute_s
            scalar += ph.grouped_scalar_s
    return scalar / total if total > 0 else 0.0


def _mfu_basis_note(sc: Scenario, mfu: float) -> list[str]:
    """MFU is counted against the dense BF16 peak for every precision (``Report.mfu``; torchtitan
    counts its Float8 runs against the FP8 peak instead, validation/published/settings.py), so an
    FP8 or NVFP4 step can pass 100 %: a note says so, with the share of the precision's own peak."""
    g, dtype = sc.system.gpu.peak_tflops, sc.strategy.dtype
    low = g.of(dtype)
    if mfu <= 1.0 or dtype == "bf16" or not low:
        return []
    name = {"fp8": "FP8", "nvfp4": "NVFP4"}[dtype]
    return [f"MFU {mfu:.1%} is counted against the dense BF16 peak ({g.bf16:,.0f} TFLOP/s a GPU), as simengine counts "
            f"it for every precision; against the dense {name} peak ({low:,.0f} TFLOP/s) the same FLOPs are "
            f"{mfu * g.bf16 / low:.1%}."]


def _mfu_band_note(sc: Scenario, mfu_high: float, causal_flops: float) -> list[str]:
    """MFU counts attention's FLOPs in full, as Megatron-LM's ``num_floating_point_operations``
    does; causal flash attention runs about half of them, so the band's fast end of a BF16 step may
    pass 100 % although no GPU passes its peak (the band stops at the peak-bound of the FLOPs run,
    ``peak_floor_s``): a note says so, with that end on the FLOPs run."""
    if mfu_high <= 1.0 or sc.strategy.dtype != "bf16":
        return []
    ran = mfu_high * causal_flops / model_flops_per_step(sc)
    return [f"The MFU band reaches {mfu_high:.1%}: MFU counts attention's FLOPs in full (Megatron-LM's convention), "
            f"while causal attention runs about half of them; on the FLOPs the step runs, the band's end is {ran:.1%}."]


def _fit_warnings(sc: Scenario, mems: list[StageMemory]) -> list[str]:
    """Why a step does not fit (StageMemory.fits): GPU memory on the fullest stage, host memory for
    the activations it offloads."""
    gpu, out = sc.system.gpu, []
    worst = max(mems, key=lambda x: x.reserved_gib)
    if worst.reserved_gib + gpu.non_torch_gib > gpu.memory_gib:
        out.append(f"does not fit: {worst.reserved_gib:.1f} GiB reserved + {gpu.non_torch_gib:.1f} GiB outside PyTorch "
                   f"> {gpu.memory_gib:.1f} GiB on stage {worst.stage}")
    host = host_overflow(gpu, mems)
    if host:
        out.append(f"does not fit in host memory: {host}; offload fewer layers where the GPU "
                   "has room for them, else a smaller micro-batch or more tp/pp")
    return out


def host_overflow(gpu: GPUSpec, mems: list[StageMemory]) -> str:
    """'X GiB of activations offloaded per GPU > Y GiB (system.gpu.host_memory_gib)' when the
    host cannot hold what the fullest stage offloads (StageMemory.fits' host half), else ''."""
    host = max((x.host_offload_gib for x in mems), default=0.0)
    if host <= gpu.host_memory_gib:
        return ""
    return (f"{host:.2f} GiB of activations offloaded per GPU > {gpu.host_memory_gib:.2f} GiB "
            "(system.gpu.host_memory_gib)")


def memory_by_stage(sc: Scenario, plan: Plan) -> list[StageMemory]:
    """Peak memory of every pipeline stage: a closed form over the schedule's order, no timing
    (memory on a rank depends only on its own order). Cheap: the search's pre-filter uses it."""
    s = sc.strategy
    m_mb = sim_microbatches(sc)
    exact = None
    if any(len(stg.chunks) > 1 for stg in plan.stages):
        exact = order_memory_peaks(s.schedule, s.pp, m_mb, s.vpp,
                                   [[(c.activation_bytes, c.peak_extra_bytes) for c in stg.chunks] for stg in plan.stages],
                                   s.overlap_moe_expert_parallel_comm)
    mems = []
    for stg in plan.stages:
        if exact:  # the held count comes with the exact peak
            mems.append(_stage_memory(sc, stg, 0, exact[stg.rank])[0])
            continue
        inflight = max_inflight(s.schedule, stg.rank, s.pp, m_mb, s.vpp, s.overlap_moe_expert_parallel_comm)
        mems.append(_stage_memory(sc, stg, inflight, None)[0])
    return mems


def estimate_plan(sc: Scenario, plan: Plan) -> Report:
    s, sysm = sc.strategy, sc.system
    m_mb = sc.num_microbatches
    met = pipeline_metrics(pipeline_input(sc, plan))
    step = met.step_time_s
    parts = met.breakdown()
    gpus = sysm.num_gpus
    tokens = sc.tokens_per_step
    mflops = model_flops_per_step(sc)
    # hardware FLOPs = model FLOPs scaled by what recompute adds to the executed work
    # (Korthikanti et al. 2022 §6: HFU counts the recomputed forward; same attention convention)
    executed = recomputed = 0.0
    for stg in plan.stages:
        for c in stg.chunks:
            executed += c.fwd.flops + c.bwd.flops + c.wgt.flops
            recomputed += c.recompute.flops
    hflops = mflops * (1.0 + recomputed / executed) if executed > 0 else mflops
    peak = sysm.gpu.peak_tflops.bf16 * 1e12  # MFU against the dense bf16 peak (also for fp8 runs)
    mems = memory_by_stage(sc, plan)
    peak_gib = max(x.peak_gib for x in mems)
    reserved_gib = max(x.reserved_gib for x in mems)
    total, active = _count_parameters(sc.model)
    hours = step / 3600.0
    cost = hours * gpus * sysm.gpu.price_per_hour
    warnings = [msg for _, msg in sc.notes]  # layouts Megatron itself would refuse (config/scenario.py)
    if s.pp > 1 and m_mb < s.pp:
        warnings.append(f"only {m_mb} micro-batches for pp={s.pp}: the pipeline is mostly bubble")
    hidden = met.comm(met.critical_rank, "hidden")
    us, launched = gpu_us_per_launch(plan.stages[met.critical_rank])
    launch = launch_warning(us, launched, met.critical_rank, sc.model.is_moe and sc.model.capacity_factor is None)
    if launch:
        warnings.append(launch)
    warnings += _fit_warnings(sc, mems)
    causal = model_flops_per_step(sc, causal=True)
    unc = bands(step, parts, sysm, tokens, mflops / (step * peak * gpus), peak_gib, sum(hidden.values()),
                peak_floor_s(sc, causal * hflops / mflops if mflops > 0 else 0.0),
                grouped_scalar_share(plan.stages[met.critical_rank]))
    return Report(
        step_time_s=step, tokens_per_s=tokens / step, tokens_per_s_per_gpu=tokens / step / gpus,
        mfu=mflops / (step * peak * gpus), hfu=hflops / (step * peak * gpus),
        mfu_causal=causal / (step * peak * gpus),
        peak_memory_gib=peak_gib, reserved_memory_gib=reserved_gib, memory_capacity_gib=sysm.gpu.memory_gib,
        free_memory_gib=min(x.free_gib for x in mems), fits=all(x.fits for x in mems), memory_by_stage=mems, breakdown_s=parts,
        num_parameters=total, num_active_parameters=active, num_trainable_parameters=trainable_parameters(sc),
        model_flops_per_token=mflops / tokens, model_flops_per_step=mflops, hardware_flops_per_step=hflops,
        cost_per_step_usd=cost, cost_per_million_tokens_usd=cost / tokens * 1e6,
        energy_per_step_j=step * gpus * sysm.gpu.tdp_w,
        num_microbatches=m_mb, dp=sc.dp, num_gpus=gpus, tokens_per_step=tokens,
        bubble_fraction=met.bubble_fraction(), critical_rank=met.critical_rank,
        bubble_fraction_max=met.bubble_fraction_max(),
        hidden_comm_s=hidden, gpu_us_per_launch=us,
        uncertainty=unc, warnings=warnings, notes=_mfu_basis_note(sc, mflops / (step * peak * gpus)) + _mfu_band_note(sc, unc["mfu"][1], causal),
    )


def peak_floor_s(sc: Scenario, executed_flops: float) -> float:
    """The least step time the hardware allows: each GPU's share of the FLOPs a step executes
    (causal attention as flash attention runs it, recompute included) at the fastest tensor peak
    the recipe uses (its dtype's, else bf16's). A lower bound whatever the efficiencies: the
    busiest GPU runs at least the average share, at most at peak."""
    g = sc.system.gpu
    peak = max(g.peak_tflops.of(sc.strategy.dtype) or 0.0, g.peak_tflops.bf16) * 1e12
    return executed_flops / (sc.system.num_gpus * peak)


def layer_times(sc: Scenario) -> tuple[float, float]:
    """Forward and backward (incl. recompute) seconds of one micro-batch through the first chunk
    of the first stage, each phase run alone (sim/overlap.py decides what hides)."""
    from .sim.overlap import phase_seconds

    ch = pipeline_input(sc, build_plan(sc), with_dp=False).stages[0].chunks[0]
    slow = sc.strategy.overlap_slowdown
    fwd = phase_seconds(ch.forward_s, ch.forward_comm, slow)
    bwd = (phase_seconds(ch.backward_input_s + ch.backward_weight_s, ch.backward_comm, slow)
           + phase_seconds(ch.recompute_s, ch.recompute_comm, slow))
    return fwd, bwd


def estimate(sc: Scenario) -> Report:
    """Estimate one training step of ``sc``."""
    return estimate_plan(sc, build_plan(sc))


def forget_priced() -> None:
    """Empty the memos an estimate fills per block kind — the blocks' op lists and prices, the
    chunks' plans, the ranks' DP work, the pipeline inputs read off them, the collective model's
    tiers and placements and the stages' memory — so the next estimate prices its blocks anew
    (benchmarks/bench_estimate.py "a new block kind"; tests that check a memo changes no number).
    The compiled pipeline structures and the efficiency curves stay."""
    from . import pipeline
    from .cost import comm, dp, stage
    from .sim import values
    from .workload.builder import block_phases

    for memo in (stage._PRICED, stage._GROUPS, stage._CHUNKS, dp._WORK, pipeline._CHUNK_COSTS,
                 pipeline._STAGE_COSTS, values._RANKS, comm._PARTS, _MEMS):
        memo.clear()
    block_phases.cache_clear()  # type: ignore[attr-defined]
