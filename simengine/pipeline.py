"""Bridge from priced stages (cost/stage.py) to the pipeline engine (sim/), and the breakdown of
the step time on the critical rank."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .config.scenario import Scenario
from .cost.stage import Plan
from .errors import ConfigError
from .schedule import get_schedule
from .sim import ChunkCost, PipelineInput, StageCost, pipeline_step_time


MAX_MICROBATCH_CHUNKS = 131_072  # pp × chunks × micro-batches the engine simulates (~2–4 s)


def pipeline_input(sc: Scenario, plan: Plan, *, with_dp: bool = True) -> PipelineInput:
    s = sc.strategy
    size = s.pp * len(plan.stages[0].chunks) * sc.num_microbatches
    if size > MAX_MICROBATCH_CHUNKS:
        raise ConfigError([("strategy.global_batch_size",
                            f"{sc.num_microbatches} micro-batches × {s.pp} stages × {len(plan.stages[0].chunks)} chunks = {size:,} "
                            f"exceeds the {MAX_MICROBATCH_CHUNKS:,} the pipeline engine simulates; raise micro_batch_size or dp")])
    stages = []
    for st in plan.stages:
        chunks = tuple(
            ChunkCost(
                forward_s=c.fwd.compute_s * s.straggler_factor,
                backward_input_s=c.bwd.compute_s * s.straggler_factor,
                backward_weight_s=c.wgt.compute_s * s.straggler_factor,
                recompute_s=(c.recompute.compute_s + sum(c.recompute.comm_s.values())) * s.straggler_factor,
                forward_comm=tuple(sorted(c.fwd.comm_s.items())),
                backward_comm=tuple(sorted(_merge(c.bwd.comm_s, c.wgt.comm_s).items())),
                activation_bytes=c.activation_bytes,
                peak_extra_bytes=c.peak_extra_bytes,
            )
            for c in st.chunks
        )
        static = st.static.weights + st.static.grads + st.static.optimizer + st.static.buffers
        stages.append(StageCost(
            chunks=chunks, p2p_s=st.p2p_s, static_bytes=static,
            dp_grad_buckets_s=st.dp.grad_buckets_s if with_dp else (),
            dp_param_buckets_s=st.dp.param_buckets_s if with_dp else (),
            optimizer_s=st.dp.optimizer_s if with_dp else 0.0,
        ))
    return PipelineInput(
        stages=tuple(stages), num_microbatches=sc.num_microbatches, schedule=s.schedule, vpp=s.vpp,
        overlap_grad_reduce=s.overlap_grad_reduce, overlap_param_gather=s.overlap_param_gather,
        # TP overlap is priced per op in cost/phase.py (what is left is exposed), so the engine
        # runs the remaining in-layer comm in line; it must not hide EP/CP comm as well
        tp_comm_overlap=False, overlap_slowdown=s.overlap_slowdown, p2p_blocking=True,
    )


def _merge(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v
    return out


def max_inflight(schedule: str, rank: int, pp: int, m: int, vpp: int) -> int:
    return get_schedule(schedule).max_inflight(rank, pp, m, vpp)


@lru_cache(maxsize=64)
def _peak_states(schedule: str, pp: int, m: int, vpp: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Per rank, the distinct candidate peak states of its order: micro-batches held per local
    chunk (rows of an int matrix) and the chunk running, at every F/B. A micro-batch-chunk is held
    from its F until its W (or B when there is no W) — the rule of sim/metrics.py."""
    out = []
    for order in get_schedule(schedule).orders(pp, m, vpp):
        n_chunks = 1 + max(a.chunk for a in order)
        has_w = {(a.mb, a.chunk) for a in order if a.kind == "W"}
        held = [0] * n_chunks
        states: dict[tuple[tuple[int, ...], int], None] = {}
        for a in order:
            if a.kind == "F":
                held[a.chunk] += 1
            if a.kind in ("F", "B"):
                states[(tuple(held), a.chunk)] = None
            if a.kind == "W" or (a.kind == "B" and (a.mb, a.chunk) not in has_w):
                held[a.chunk] -= 1
        counts = np.array([st[0] for st in states], dtype=np.int64).reshape(len(states), n_chunks)
        running = np.array([st[1] for st in states], dtype=np.int64)
        out.append((counts, running))
    return tuple(out)


def order_memory_peaks(schedule: str, pp: int, m: int, vpp: int,
                       chunks: list[list[tuple[float, float]]]) -> list[tuple[float, float, int]]:
    """Exact activation peak per rank from the schedule's order, for ranks whose chunks differ
    (interleaved, DualPipeV): memory on a rank depends only on its own order, not on timing.

    ``chunks[r]`` = [(activation_bytes, peak_extra_bytes)] per local chunk; the chunk's transient
    applies while its F or B runs. Returns (held bytes, extra bytes, held count) at each peak.
    """
    out = []
    for spec, (counts, running) in zip(chunks, _peak_states(schedule, pp, m, vpp), strict=True):
        act = np.array([a for a, _ in spec])
        ext = np.array([e for _, e in spec])
        held = counts @ act
        total = held + ext[running]
        i = int(np.argmax(total))
        out.append((float(held[i]), float(ext[running[i]]), int(counts[i].sum())))
    return out


def step_time_s(inp: PipelineInput) -> tuple[float, dict[str, float]]:
    """Step time and where it goes on the critical rank (the rank whose busy time is largest).

    The breakdown sums to the step time: compute and exposed in-layer communication are counted
    per micro-batch; p2p is the blocking send/recv time; ``dp_comm`` and ``optimizer`` are the
    part of the step after the pipeline drains (exposed); ``bubble`` is the rest.
    """
    step = pipeline_step_time(inp)
    m = inp.num_microbatches
    best = None
    for st in inp.stages:
        parts = {"forward_compute": 0.0, "backward_compute": 0.0, "recompute": 0.0}
        for c in st.chunks:
            parts["forward_compute"] += m * c.forward_s
            parts["backward_compute"] += m * (c.backward_input_s + c.backward_weight_s)
            parts["recompute"] += m * c.recompute_s
            for kind, t in c.forward_comm + c.backward_comm:
                parts[kind] = parts.get(kind, 0.0) + m * t
        busy = sum(parts.values())
        if best is None or busy > best[0]:
            best = (busy, parts, st)
    busy, parts, st = best
    n_p2p = 0
    if len(inp.stages) > 1:
        n_p2p = 2 * m * len(st.chunks) * (1 if st is inp.stages[0] or st is inp.stages[-1] else 2)
    parts["pp_comm"] = n_p2p * st.p2p_s
    dp_tail = 0.0 if inp.overlap_grad_reduce else sum(st.dp_grad_buckets_s)
    dp_tail += 0.0 if inp.overlap_param_gather else sum(st.dp_param_buckets_s)
    parts["dp_comm"] = parts.get("dp_comm", 0.0) + dp_tail  # + ZeRO-2/3 per-micro-batch comm
    parts["optimizer"] = st.optimizer_s
    rest = step - sum(parts.values())
    if rest < 0:  # overlapped work hides part of what is listed; shrink the comm entries first
        for key in ("dp_comm", "pp_comm"):
            cut = min(parts[key], -rest)
            parts[key] -= cut
            rest += cut
    if rest > 0 and (inp.overlap_grad_reduce or inp.overlap_param_gather):
        # overlapped DP comm still exposes its tail (the last bucket after the last backward,
        # the first all-gather before the first forward — Megatron DDP behaviour)
        tail = (st.dp_grad_buckets_s[-1:] if inp.overlap_grad_reduce else ()) + (st.dp_param_buckets_s[:1] if inp.overlap_param_gather else ())
        cut = min(rest, sum(tail) if len(inp.stages) > 1 else rest)
        parts["dp_comm"] += cut
        rest -= cut
    parts["bubble"] = max(rest, 0.0)
    return step, {k: v for k, v in parts.items() if v > 0 or k in ("forward_compute", "backward_compute", "bubble")}
