"""Inputs of the pipeline simulator: per-rank, per-chunk costs in seconds and bytes.

Compute and communication are kept apart: ``forward_comm``/``backward_comm`` are the in-layer
collectives (TP/CP/EP, ZeRO-2/3 gathers and reduce-scatters) of one micro-batch through the
chunk, as ``CommTask``s: what each may run beside (``window_s``, its partner compute) is a fact of
the workload; how much of it hides, and what the contention costs, the simulator decides
(``overlap.py``). A plain ``(kind, seconds)`` pair is a collective with nothing to hide behind.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def _nonneg(owner: str, name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= 0):
        raise ValueError(f"{owner}.{name}={value!r} must be a finite number >= 0")


@dataclass(frozen=True, slots=True)
class CommTask:
    """``count`` repeats of one collective of ``seconds`` that may run beside ``window_s`` seconds
    of compute, of which the share ``share`` leaves SMs free for it (0 = runs alone)."""

    kind: str
    seconds: float
    window_s: float = 0.0
    share: float = 1.0
    count: float = 1.0


def _all_nonneg(vals) -> bool:
    """Every value a plain finite number >= 0, in one pass (NaN fails ``min`` or makes the sum NaN,
    inf makes it infinite); False sends the caller to the per-field checks that name the field."""
    return (all(type(v) is float or type(v) is int for v in vals)
            and min(vals, default=0.0) >= 0 and math.isfinite(sum(vals)))


def _tasks_ok(entries) -> bool:
    """``entries`` already CommTasks with valid fields (the cost model's output): no conversion."""
    return (type(entries) is tuple and all(type(t) is CommTask and type(t.kind) is str and t.kind and 0.0 <= t.share <= 1.0
                                           for t in entries)
            and _all_nonneg([x for t in entries for x in (t.seconds, t.window_s, t.count)]))


def _comm(owner: str, name: str, entries) -> tuple[CommTask, ...]:
    if _tasks_ok(entries):
        return entries
    out = []
    for i, e in enumerate(entries):
        t = e if isinstance(e, CommTask) else CommTask(*e)
        if not isinstance(t.kind, str) or not t.kind:
            raise ValueError(f"{owner}.{name}[{i}] kind must be a non-empty string")
        for f in ("seconds", "window_s"):
            _nonneg(owner, f"{name}[{i}].{f}", getattr(t, f))
        if not (0.0 <= t.share <= 1.0):
            raise ValueError(f"{owner}.{name}[{i}].share={t.share!r} must be in [0, 1]")
        _nonneg(owner, f"{name}[{i}].count", t.count)
        out.append(t)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ChunkCost:
    forward_s: float
    backward_input_s: float
    backward_weight_s: float = 0.0
    recompute_s: float = 0.0  # runs right before this chunk's backward (Korthikanti et al. 2022 §4)
    forward_comm: tuple[CommTask, ...] = ()
    backward_comm: tuple[CommTask, ...] = ()
    recompute_comm: tuple[CommTask, ...] = ()  # run as a forward's do, beside the recompute (graph.py)
    activation_bytes: float = 0.0  # held per in-flight micro-batch
    peak_extra_bytes: float = 0.0  # transient while this chunk runs F, R or B

    def __post_init__(self):
        if not _all_nonneg((self.forward_s, self.backward_input_s, self.backward_weight_s, self.recompute_s,
                            self.activation_bytes, self.peak_extra_bytes)):
            for n in ("forward_s", "backward_input_s", "backward_weight_s", "recompute_s",
                      "activation_bytes", "peak_extra_bytes"):
                _nonneg("ChunkCost", n, getattr(self, n))
        object.__setattr__(self, "forward_comm", _comm("ChunkCost", "forward_comm", self.forward_comm))
        object.__setattr__(self, "backward_comm", _comm("ChunkCost", "backward_comm", self.backward_comm))
        object.__setattr__(self, "recompute_comm", _comm("ChunkCost", "recompute_comm", self.recompute_comm))


@dataclass(frozen=True, slots=True)
class StageCost:
    chunks: tuple[ChunkCost, ...]  # one per model chunk on this pp rank
    p2p_s: float = 0.0  # one activation (or gradient) send to a neighbour rank
    static_bytes: float = 0.0  # weights + grads + optimizer states + buffers
    dp_grad_buckets_s: tuple[float, ...] = ()  # reduce-scatter/all-reduce per bucket, last layers first
    dp_param_buckets_s: tuple[float, ...] = ()  # param all-gather per bucket, first layers first
    optimizer_s: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "chunks", tuple(self.chunks))
        if not self.chunks or not all(isinstance(c, ChunkCost) for c in self.chunks):
            raise ValueError("StageCost.chunks must be a non-empty tuple of ChunkCost")
        if not _all_nonneg((self.p2p_s, self.static_bytes, self.optimizer_s)):
            for n in ("p2p_s", "static_bytes", "optimizer_s"):
                _nonneg("StageCost", n, getattr(self, n))
        for n in ("dp_grad_buckets_s", "dp_param_buckets_s"):
            vals = tuple(map(float, getattr(self, n)))
            # one pass over the buckets (searches build thousands of these): finite and >= 0
            if vals and not (min(vals) >= 0 and math.isfinite(sum(vals))):
                for i, v in enumerate(vals):
                    _nonneg("StageCost", f"{n}[{i}]", v)
            object.__setattr__(self, n, vals)


@dataclass(frozen=True, slots=True)
class PipelineInput:
    stages: tuple[StageCost, ...]  # one per pp rank
    num_microbatches: int
    schedule: str = "1f1b"
    vpp: int = 1
    overlap_grad_reduce: bool = False
    overlap_param_gather: bool = False
    overlap_slowdown: float = 1.0  # >= 1; compute slowdown while comm runs beside it (overlap.py)
    p2p_blocking: bool = True  # Megatron default: blocking send/recv on the compute stream
    # Megatron-Core combined 1F1B (--overlap-moe-expert-parallel-comm): steady-state F and B of
    # two micro-batches run as overlapped pairs (schedule/_combined.py; 1f1b with pp=1, interleaved)
    fb_overlap: bool = False

    def __post_init__(self):
        object.__setattr__(self, "stages", tuple(self.stages))
        if not self.stages or not all(isinstance(s, StageCost) for s in self.stages):
            raise ValueError("PipelineInput.stages must be a non-empty tuple of StageCost")
        if not isinstance(self.num_microbatches, int) or self.num_microbatches < 1:
            raise ValueError(f"PipelineInput.num_microbatches={self.num_microbatches!r} must be an int >= 1")
        if not isinstance(self.vpp, int) or self.vpp < 1:
            raise ValueError(f"PipelineInput.vpp={self.vpp!r} must be an int >= 1")
        s = self.overlap_slowdown
        if not (isinstance(s, (int, float)) and math.isfinite(s) and s >= 1.0):
            raise ValueError(f"PipelineInput.overlap_slowdown={s!r} must be a finite number >= 1")

    @property
    def pp(self) -> int:
        return len(self.stages)
