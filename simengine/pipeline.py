"""Bridge from priced stages (cost/stage.py) to the pipeline engine (sim/): the engine's input,
and the memory closed forms read off the schedule's order."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .config.scenario import Scenario, pipeline_size_issues
from .cost.phase import PhaseCost
from .cost.scale import scenario_straggler_factor, step_overhead_s
from .cost.stage import Plan
from .errors import ConfigError
from .memo import remember
from .schedule import count_max_inflight, get_schedule
from .schedule._combined import fb_orders
from .sim import ChunkCost, CommTask, PipelineInput, StageCost




def _backward(c) -> PhaseCost:
    out = PhaseCost()
    out.add(c.bwd)
    out.add(c.wgt)
    return out


def _tasks(tasks: tuple[tuple[str, float, float, float, float], ...]) -> tuple[CommTask, ...]:
    return tuple(CommTask(*t) for t in tasks)


def _chunk(c, k: float, made: dict[tuple, ChunkCost]) -> ChunkCost:
    # ranks holding the same kind of chunk share its priced phases (cost/stage.py
    # _plan_chunk_once): look those up by identity first, by content on a miss
    ident = (id(c.fwd), id(c.bwd), id(c.wgt), id(c.recompute), c.activation_bytes, c.peak_extra_bytes)
    ch = made.get(ident)
    if ch is not None:
        return ch
    phases = (c.fwd, c.bwd, c.wgt, c.recompute)
    hit = _CHUNK_COSTS.get(ident + (k,))
    if hit is not None and all(a is b for a, b in zip(hit[0], phases)):
        made[ident] = hit[1]
        return hit[1]
    bwd = _backward(c)
    ft, bt, rt = c.fwd.tasks(), bwd.tasks(), c.recompute.tasks()
    key = (c.fwd.compute_s, c.bwd.compute_s, c.wgt.compute_s, c.recompute.compute_s, c.activation_bytes,
           c.peak_extra_bytes, ft, bt, rt)
    ch = made.get(key)
    if ch is None:
        ch = made[key] = ChunkCost(
            forward_s=c.fwd.compute_s * k, backward_input_s=c.bwd.compute_s * k,
            backward_weight_s=c.wgt.compute_s * k, recompute_s=c.recompute.compute_s * k,
            forward_comm=_tasks(ft), backward_comm=_tasks(bt), recompute_comm=_tasks(rt),
            activation_bytes=c.activation_bytes, peak_extra_bytes=c.peak_extra_bytes,
        )
    made[ident] = ch
    remember(_CHUNK_COSTS, ident + (k,), (phases, ch), MAX_COSTS)  # the phases kept alive with their key
    return ch


def _stage(chunks: tuple[ChunkCost, ...], st, static: float, with_dp: bool, host: float) -> StageCost:
    """The StageCost of plan stage ``st`` with these ChunkCosts, shared across calls (its value
    table is too: sim/values.py). Its DP work is found by identity: DPWork is frozen and memoised
    (cost/dp.py ``dp_work``), so a repeated rank kind hands over the same object."""
    dp = st.dp if with_dp else None
    key = (tuple(map(id, chunks)), st.p2p_s, static, id(dp), host)
    hit = _STAGE_COSTS.get(key)
    if hit is not None and hit[1] is dp and all(a is b for a, b in zip(hit[0], chunks)):
        return hit[2]
    stage = StageCost(chunks=chunks, p2p_s=st.p2p_s, static_bytes=static,
                      dp_grad_buckets_s=dp.grad_buckets_s if dp is not None else (),
                      dp_param_buckets_s=dp.param_buckets_s if dp is not None else (),
                      # the optimizer task also carries the per-step host work (data loader, logging)
                      optimizer_s=(dp.optimizer_s if dp is not None else 0.0) + host)
    remember(_STAGE_COSTS, key, (chunks, dp, stage), MAX_COSTS)   # keeps what the key names by id alive
    return stage


# Across calls (a what-if edit, a search's next layout): a ChunkCost is a pure function of the
# priced phases it is read from — shared by identity while the chunk plans' memo holds them
# (cost/stage.py ``_plan_chunk_kept``; the phases are never changed once priced) — its bytes and
# the straggler factor; a StageCost of its ChunkCosts, DP work and fields. Each entry keeps what its key
# names by id alive, so an id in a key is never another object's.
_CHUNK_COSTS: dict[tuple, tuple] = {}
_STAGE_COSTS: dict[tuple, tuple] = {}
MAX_COSTS = 64


def sim_microbatches(sc: Scenario) -> int:
    """Micro-batch ids the engine runs through every stage: one per chain (DualPipe's directions
    each take half of the step's micro-batches, ``Schedule.chains``)."""
    return sc.num_microbatches // get_schedule(sc.strategy.schedule).chains


def pipeline_input(sc: Scenario, plan: Plan, *, with_dp: bool = True) -> PipelineInput:
    s = sc.strategy
    too_large = pipeline_size_issues(s.pp, len(plan.stages[0].chunks), sc.num_microbatches)  # check_scenario's own rule
    if too_large:   # (a scenario built without the check)
        raise ConfigError(too_large)
    # the user's factor × the straggler tail of every synchronising GPU (cost/scale.py)
    k = s.straggler_factor * scenario_straggler_factor(sc)
    host = step_overhead_s(sc)
    stages = []
    made: dict[tuple, ChunkCost] = {}  # middle stages price the same chunks: build each once
    # (identity keys are safe: ``plan`` keeps every phase alive for the whole call)
    same: dict[tuple, StageCost] = {}  # identical ranks share one StageCost (sim/values.py reuses its values)
    for st in plan.stages:
        # ranks holding the same priced chunks and model states (build_plan shares them) map to
        # one StageCost without pricing anything again: look those up by identity first
        # (``share``: build_plan's key of those, equal exactly when they are)
        ident = (st.share if st.share is not None else
                 tuple((id(c.fwd), id(c.bwd), id(c.wgt), id(c.recompute), c.activation_bytes, c.peak_extra_bytes)
                       for c in st.chunks), id(st.static), id(st.dp), st.p2p_s)
        stage = same.get(ident)
        if stage is not None:
            stages.append(stage)
            continue
        chunks = tuple(_chunk(c, k, made) for c in st.chunks)
        static = st.static.weights + st.static.grads + st.static.optimizer + st.static.buffers
        key = (tuple(map(id, chunks)), st.p2p_s, static, id(st.dp))
        stage = same.get(key)
        if stage is not None:
            same[ident] = stage
        else:
            stage = same[key] = _stage(chunks, st, static, with_dp, host)
            same[ident] = stage
        stages.append(stage)
    return PipelineInput(
        stages=tuple(stages), num_microbatches=sim_microbatches(sc), schedule=s.schedule, vpp=s.vpp,
        overlap_grad_reduce=s.overlap_grad_reduce, overlap_param_gather=s.overlap_param_gather,
        overlap_slowdown=s.overlap_slowdown, p2p_blocking=not s.p2p_overlapped,
        fb_overlap=s.overlap_moe_expert_parallel_comm,
    )


def max_inflight(schedule: str, rank: int, pp: int, m: int, vpp: int, combined: bool = False) -> int:
    """Micro-batch-chunks held at the peak; ``combined`` = Megatron-Core's combined 1F1B, whose one
    extra warm-up forward holds one more (read off its order, schedule/_combined.py)."""
    if combined:
        return count_max_inflight(fb_orders(get_schedule(schedule), pp, m, vpp, True)[0][rank])
    return get_schedule(schedule).max_inflight(rank, pp, m, vpp)


def peak_length(schedule: str, pp: int, m: int, vpp: int, combined: bool = False) -> int:
    """The shortest micro-batch count whose orders have the same distinct peak states, in the same
    order of first appearance, as ``m``'s (``_peak_states``): m itself except for a long
    interleaved pipeline. There (schedule/interleaved.py) every rank runs its warm-up forwards,
    then F/B pairs, then its cool-down backwards; the chunk of the j-th forward and of the j-th
    backward repeat with period pp·vpp in j (``_chunk``), so a rank's held count per chunk and its
    running chunk repeat with that period through the steady pairs, and the warm-up and (m a
    multiple of pp, so m·vpp a multiple of pp·vpp) the cool-down are the same for every m whose
    steady part holds a whole period. Two periods beyond the longest warm-up keep a margin;
    tests/test_peak_length.py holds the states to those of the whole order."""
    if schedule != "interleaved" or vpp < 2:
        return m
    unit = pp * vpp
    warm = 2 * (pp - 1) + (vpp - 1) * pp + (1 if combined else 0)
    short = pp * -(-(warm + 2 * unit) // unit)
    return short if m > short and m % pp == 0 else m


@lru_cache(maxsize=64)
def _peak_states(schedule: str, pp: int, m: int, vpp: int, combined: bool = False) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Per rank, the distinct candidate peak states of its order: micro-batches held per local
    chunk (rows of an int matrix) and the chunk running, at every F/B. A micro-batch-chunk is held
    from its F until its W (or B when there is no W) — the rule of sim/spans.py."""
    out = []
    for order in fb_orders(get_schedule(schedule), pp, m, vpp, combined)[0]:
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


@lru_cache(maxsize=64)
def _stacked_states(schedule: str, pp: int, m: int, vpp: int, combined: bool = False):
    """``_peak_states`` of every rank stacked: (counts, running, rank of each row, first row of
    each rank, micro-batches held per row), or None when the ranks hold different chunk counts."""
    states = _peak_states(schedule, pp, m, vpp, combined)
    if len({c.shape[1] for c, _ in states}) != 1:
        return None
    counts = np.concatenate([c for c, _ in states])
    running = np.concatenate([r for _, r in states])
    rank = np.repeat(np.arange(len(states)), [len(r) for _, r in states])
    first = np.cumsum([0] + [len(r) for _, r in states[:-1]])
    return counts, running, rank, first, counts.sum(axis=1)


def order_memory_peaks(schedule: str, pp: int, m: int, vpp: int,
                       chunks: list[list[tuple[float, float]]], combined: bool = False) -> list[tuple[float, float, int]]:
    """Exact activation peak per rank from the schedule's order, for ranks whose chunks differ
    (interleaved, DualPipeV): memory on a rank depends only on its own order, not on timing.

    ``chunks[r]`` = [(activation_bytes, peak_extra_bytes)] per local chunk; the chunk's transient
    applies while its F or B runs. Returns (held bytes, extra bytes, held count) at each peak
    (the first candidate state of the largest total, per rank).
    """
    m = peak_length(schedule, pp, m, vpp, combined)
    stacked = _stacked_states(schedule, pp, m, vpp, combined)
    if stacked is None or len(chunks) != pp or len({len(c) for c in chunks}) != 1:
        return _peaks_per_rank(schedule, pp, m, vpp, chunks, combined)
    counts, running, rank, first, held_count = stacked
    spec = np.array(chunks, dtype=float)  # [rank, chunk, (activation, transient)]
    if spec.shape[1] != counts.shape[1]:
        return _peaks_per_rank(schedule, pp, m, vpp, chunks, combined)
    act, ext = spec[:, :, 0], spec[:, :, 1]
    held = np.einsum("ij,ij->i", counts, act[rank])
    extra = ext[rank, running]
    total = held + extra
    best = np.maximum.reduceat(total, first)
    hits = np.flatnonzero(total == best[rank])
    i = hits[np.searchsorted(hits, first)]
    return list(zip(held[i].tolist(), extra[i].tolist(), held_count[i].tolist()))


def _peaks_per_rank(schedule: str, pp: int, m: int, vpp: int,
                    chunks: list[list[tuple[float, float]]], combined: bool = False) -> list[tuple[float, float, int]]:
    out = []
    for spec, (counts, running) in zip(chunks, _peak_states(schedule, pp, m, vpp, combined), strict=True):
        act = np.array([a for a, _ in spec])
        ext = np.array([e for _, e in spec])
        held = counts @ act
        total = held + ext[running]
        i = int(np.argmax(total))
        out.append((float(held[i]), float(ext[running[i]]), int(counts[i].sum())))
    return out
