"""What each headline figure means, stated once (pure): memory kind and the MFU convention.

Memory: the engine reports the *allocated* peak (tensors alive, ``Report.peak_memory_gib``) and
the *reserved* peak (allocated × (1 + strategy.allocator_overhead) + what other CUDA streams'
caches hold, the caching allocator's pools, ``Report.reserved_memory_gib``); a stage fits when
reserved + system.gpu.non_torch_gib ≤ system.gpu.memory_gib (the fit rule: simengine/fit.py). The studio's memory headline
is the allocated peak everywhere (the uncertainty band is on it too); reserved is shown as such.
The timeline's curves are the simulator's allocated bytes (simengine/sim/metrics.py ``_memory``).
"""

from __future__ import annotations

from typing import Any

from simengine import api

from .units import fmt_count, fmt_num, fmt_pct

# short enough for a six-metric row at 1,400 px ("Peak memory (allocated)" was cut to "Peak memory (allo…")
PEAK_LABEL = "Allocated peak"
SIM_PEAK_LABEL = "Allocated peak (worst rank)"
MFU_LABEL = "MFU"
MFU_HELP = ("Model FLOPs utilisation: model FLOPs per step (6·N_active per token + full s² attention, PaLM "
            "App. B; recompute not counted) / (step time · dense BF16 peak · GPUs). The BF16 peak is used for "
            "FP8 and NVFP4 runs too, so theirs can pass 100 %.")
HFU_HELP = "Hardware FLOPs (model FLOPs + recomputed forward) / (step time · dense BF16 peak · GPUs)."


def memory_help(r: dict[str, Any], limit_gib: float | None = None) -> str:
    """Tooltip of the memory headline of a Report dict (``limit_gib``: ``allocated_limit_gib``)."""
    limit = "" if limit_gib is None else (
        f" The figure after the slash, {fmt_num(limit_gib)} GiB, is the most a stage may allocate and still fit.")
    free = r.get("free_memory_gib")
    left = "" if not isinstance(free, (int, float)) else (
        f" Left free on the GPU: {fmt_num(free)} GiB (the Search page's free GiB)." if free >= 0 else "")
    return (f"Allocated peak (live tensors) of the fullest stage. Reserved by PyTorch's caching allocator: "
            f"{fmt_num(r['reserved_memory_gib'])} GiB; a stage fits when reserved + the memory outside PyTorch "
            f"≤ {fmt_num(r['memory_capacity_gib'])} GiB." + left + limit)


def mfu_causal_note(r: dict[str, Any]) -> str:
    v = r.get("mfu_causal")
    return f" With causal attention FLOPs (half the s² term) MFU is {fmt_pct(v)}." if isinstance(v, (int, float)) else ""


def reserved_gib(allocated_gib: float, allocator_overhead: float, pools_gib: float = 0.0) -> float:
    """Reserved from allocated: the engine's fit rule (simengine/fit.py, ``api.reserved_gib``);
    ``pools_gib`` what other CUDA streams' caches hold beside the peak (``StageMemory.pools_gib``)."""
    return api.reserved_gib(allocated_gib, allocator_overhead, pools_gib)


def allocated_limit_gib(strategy: dict[str, Any], system: dict[str, Any], pools_gib: float = 0.0) -> float:
    """The most a stage may allocate and still fit (``fits``, solved for the allocated peak;
    simengine/fit.py): (capacity − memory outside PyTorch − other streams' pools) / (1 + allocator
    overhead). The headlines compare the allocated peak with it, not with the raw capacity: "77.9 /
    79.1 GiB" read as fitting beside a "does not fit" verdict (81.8 GiB reserved + 2.5 GiB outside
    PyTorch)."""
    gpu = system["gpu"]
    return api.allocated_limit_gib(float(gpu["memory_gib"]), float(gpu.get("non_torch_gib", 0.0)),
                                   float(strategy.get("allocator_overhead", 0.0)), pools_gib)


def fits(allocated_gib: float, strategy: dict[str, Any], system: dict[str, Any], pools_gib: float = 0.0) -> bool:
    """The engine's GPU fit rule (StageMemory.fits' first half): reserved + gpu.non_torch_gib ≤
    gpu.memory_gib. Host memory for offloaded activations is the other half: the report's
    "does not fit in host memory" warning (the Timeline page shows it from the estimate)."""
    gpu = system["gpu"]
    need = reserved_gib(allocated_gib, float(strategy.get("allocator_overhead", 0.0)), pools_gib) + float(gpu.get("non_torch_gib", 0.0))
    return need <= float(gpu["memory_gib"])


def stage_pools_gib(report: dict[str, Any] | None) -> dict[int, float]:
    """Per pipeline stage (its rank), what other CUDA streams' caches hold beside its peak
    (``StageMemory.pools_gib``; FSDP2's all-gather buffers), from an estimate report dict; {} without one."""
    if not report:
        return {}
    return {int(m["stage"]): float(m.get("pools_gib", 0.0)) for m in report.get("memory_by_stage", [])}


def rank_limits_gib(ranks: Any, strategy: dict[str, Any], system: dict[str, Any],
                    pools: dict[int, float]) -> dict[int, float]:
    """Per pipeline rank, the most it may allocate and still fit (``allocated_limit_gib`` with its
    stage's pools, ``stage_pools_gib``: the engine's ``StageMemory.allocated_limit_gib``). Stages
    differ when other streams' pools do (FSDP2's all-gather buffers); the rest is one GPU's."""
    return {int(r): allocated_limit_gib(strategy, system, pools.get(int(r), 0.0)) for r in ranks}


LIMIT_SAME_GIB = 0.005  # limits closer than this read the same at the 0.01 GiB the charts show


def common_limit_gib(limits: dict[int, float]) -> float | None:
    """The one limit every rank shares (to ``LIMIT_SAME_GIB``), or None when they differ."""
    values = list(limits.values())
    return min(values) if values and max(values) - min(values) < LIMIT_SAME_GIB else None


def limit_caption(limits: dict[int, float], memory_gib: float) -> str:
    """The Timeline memory chart's caption: what its dashed line(s) are (``memory_time_chart``)."""
    head, shared = "Allocated bytes per rank over the step", common_limit_gib(limits)
    why = f"{fmt_num(memory_gib)} GiB GPUs, less the memory outside PyTorch and the caching allocator's share"
    if not limits:
        return head + "."
    if shared is not None:
        return (f"{head}; the dashed line, {fmt_num(shared, ',.2f')} GiB, is the most a rank may allocate and still "
                f"fit, the same on every rank shown ({why}).")
    each = (", ".join(f"rank {r} {fmt_num(v, ',.2f')}" for r, v in sorted(limits.items())) if len(limits) <= 8 else
            f"{fmt_num(min(limits.values()), ',.2f')}–{fmt_num(max(limits.values()), ',.2f')}")
    return (f"{head}; the dashed lines, one per rank in its curve's colour, are the most each rank may allocate and "
            f"still fit: {each} GiB ({why}, and what other CUDA streams' pools hold beside the peak, such as FSDP2's "
            "all-gather buffers, which differs by stage).")


def headline_limit_gib(report: dict[str, Any]) -> float | None:
    """The allocated limit of the stage the memory headline shows (the largest allocated peak):
    ``StageMemory.allocated_limit_gib``, the engine's own."""
    stages = report.get("memory_by_stage") or []
    if not stages:
        return None
    return float(max(stages, key=lambda m: m["peak_gib"])["allocated_limit_gib"])


def reserved_limit_gib(report: dict[str, Any]) -> float | None:
    """The most a stage may *reserve* and still fit: capacity − the memory outside PyTorch (the fit
    rule, simengine/fit.py), read from the engine's own figures as reserved + free of a stage
    (``StageMemory.free_gib`` = memory_gib − reserved − non_torch_gib, simengine/report.py).
    The per-stage chart draws it beside the reserved ticks; the raw capacity there read as room
    that the memory outside PyTorch takes (a 78.0 GiB tick left of a 79.1 GiB line, "does not fit")."""
    stages = report.get("memory_by_stage") or []
    limits = [float(m["reserved_gib"]) + float(m["free_gib"]) for m in stages
              if isinstance(m.get("reserved_gib"), (int, float)) and isinstance(m.get("free_gib"), (int, float))]
    return min(limits) if limits else None


def trained_note(r: dict) -> str:
    """", 16.8M trained" after the parameter counts when fewer than all are trained (LoRA), else ""."""
    n, t = r.get("num_parameters"), r.get("num_trainable_parameters")
    if isinstance(n, int) and isinstance(t, int) and t < n:
        return f", {fmt_count(t)} trained"
    return ""


def bubble_others(r: dict) -> str:
    """" (up to 4.5 % on another rank)" when a rank waits visibly longer than the critical one, whose
    bubble is the least (a headline of 0.6 % read as the pipeline's, with three of four ranks at 4.4 %)."""
    most, crit = r.get("bubble_fraction_max"), r.get("bubble_fraction", 0.0)
    if isinstance(most, (int, float)) and most - crit >= 0.001:
        return f" (up to {fmt_pct(most)} on another rank)"
    return ""


# The Timeline's "does not fit" advice, per schedule: a schedule that keeps fewer micro-batches'
# activations in flight, where one does (GPipe holds every micro-batch's, 1F1B pp of them; ZB-H2
# holds more than ZB-H1 to fill its drain, Qi et al. 2024 §3); else only the micro-batch.
LEANER_SCHEDULE = {
    "gpipe": ", a smaller micro-batch or 1F1B (pp micro-batches in flight; GPipe holds all of them)",
    "zb-h2": ", a smaller micro-batch or ZB-H1 (as many micro-batches in flight as 1F1B; ZB-H2 holds more to fill its drain)",
}


# The Estimate page's "Memory per pipeline stage" table: field → (short header, tooltip). Short
# headers with the unit in the caption: "activations [GiB]" and "in flight" were cut to
# "activations [Gi…" and "in f…" in the half-width table of a 1,280 px window.
STAGE_MEMORY_COLUMNS: dict[str, tuple[str, str]] = {
    "stage": ("stage", "Pipeline stage."),
    "peak_gib": ("allocated", "Live tensors at the peak [GiB per GPU]."),
    "reserved_gib": ("reserved", "Allocated + the caching allocator's overhead [GiB per GPU]."),
    "free_gib": ("free", "GPU memory left free: capacity − reserved − the memory outside PyTorch "
                         "(negative: over capacity) [GiB per GPU]; the Search page's free GiB."),
    "activations_gib": ("activations", "Activations held at the peak [GiB per GPU]."),
    "inflight_microbatches": ("in flight", "Forward passes whose activations are held at the peak: one per micro-batch "
                                           "and model chunk it has gone through (with vpp chunks per rank, up to vpp "
                                           "per micro-batch)."),
    "host_offload_gib": ("on host", "Activations offloaded to host memory at the peak (strategy.cpu_offload_layers) "
                                    "[GiB per GPU]."),
}


def stage_memory_fields(stages: list[dict[str, Any]]) -> list[str]:
    """The fields of the per-stage memory table: activations offloaded to the host only when some
    stage offloads any."""
    host = any((s.get("host_offload_gib") or 0.0) > 0 for s in stages)
    return [f for f in STAGE_MEMORY_COLUMNS if f != "host_offload_gib" or host]
