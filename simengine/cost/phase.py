"""Price an op list (one phase of one block) into compute seconds and communication tasks.

Cost decides no overlap. It records, for each collective, what it may run beside: TE/Megatron's
async backward all-gather/reduce-scatter is launched next to a GEMM (``overlap_with=<gemm>``),
and with ``tp_comm_overlap`` (TE userbuffers, Wang et al. 2022 "Overlap communication with
dependent computation via decomposition") every TP collective is decomposed with its
neighbouring GEMM — on the torch-compile stack, PyTorch's async TP, whose fused ops decompose only
the collectives Inductor's pattern matches and add work of their own (``_symm_mem``); a DTensor
collective along the sequence dim adds its ``aten.cat`` copy (``Collective.cat_copy``). An async NCCL kernel only runs beside a GEMM when the GEMM leaves SMs free
(``Efficiency.async_overlap``: 0 for persistent Hopper/Blackwell GEMMs); userbuffers reserve SMs
(share 1). How much hides, and what the contention costs, the simulator decides
(``simengine/sim/overlap.py``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from ..workload.ops import Attention, Collective, Gemm, GroupedGemm, Memory, Op
from .comm import CommModel
from .compute import ComputeModel
from .moe_comm import collective_time

COMM_KIND = {"tp": "tp_comm", "etp": "tp_comm", "cp": "cp_comm", "ep": "ep_comm", "dp": "dp_comm", "dps": "dp_comm", "dpr": "dp_comm", "edp": "dp_comm", "pp": "pp_comm"}


@dataclass(slots=True)
class PhaseCost:
    compute_s: float = 0.0
    # (kind, seconds, window_s, share) → repeats: the communication of the phase
    comm: dict[tuple[str, float, float, float], float] = field(default_factory=dict)
    flops: float = 0.0
    kernels: float = 0.0  # compute-stream launches (ComputeModel.launches); fractional under a recompute share
    # of compute_s, the grouped GEMMs priced from the scalar grouped level, not a measured table of
    # shapes (ComputeModel.grouped_measured): the least certain compute (simengine/uncertainty.py)
    grouped_scalar_s: float = 0.0

    @property
    def comm_s(self) -> dict[str, float]:
        """Total communication seconds by kind (hidden or not)."""
        out: dict[str, float] = {}
        for (kind, sec, _, _), n in self.comm.items():
            out[kind] = out.get(kind, 0.0) + sec * n
        return out

    def add_comm(self, kind: str, seconds: float, window_s: float = 0.0, share: float = 1.0, times: float = 1.0) -> None:
        if seconds > 0 and times > 0:
            key = (kind, seconds, window_s if share > 0 else 0.0, share if window_s > 0 else 1.0)
            self.comm[key] = self.comm.get(key, 0.0) + times

    def add(self, other: "PhaseCost", times: float = 1.0) -> None:
        self.compute_s += other.compute_s * times
        self.grouped_scalar_s += other.grouped_scalar_s * times
        for k, n in other.comm.items():
            self.comm[k] = self.comm.get(k, 0.0) + n * times
        self.flops += other.flops * times
        self.kernels += other.kernels * times

    def tasks(self) -> tuple[tuple[str, float, float, float, float], ...]:
        """(kind, seconds, window_s, share, count) in a stable order: ``sim.CommTask`` fields."""
        return tuple((k, s, w, sh, n) for (k, s, w, sh), n in sorted(self.comm.items()) if n > 0)


def price_ops(ops: list[Op], cm: ComputeModel, comm: CommModel, tp_overlap: bool = False,
              in_backward: bool = False) -> PhaseCost:
    """The ops' compute and communication tasks. ``in_backward``: a recompute's forward ops, run
    in the backward graph (async TP's gathers there: ``_symm_mem``)."""
    pc = PhaseCost()
    gemm_t: dict[str, float] = {}
    pending: list[Collective] = []
    compute_s = flops = grouped_scalar = 0.0
    kernels = 0
    for op in ops:  # (the op classes are disjoint: workload/ops.py)
        if isinstance(op, Gemm):
            t = gemm_t[op.name] = cm.gemm(op)
        elif isinstance(op, Memory):
            t = cm.memory(op)
        elif isinstance(op, Attention):
            t = gemm_t[op.name] = cm.attention(op)
        elif isinstance(op, GroupedGemm):
            t = cm.grouped_gemm(op)
            if not cm.grouped_measured(op):
                grouped_scalar += t
        else:
            pending.append(op)
            continue
        kernels += cm.launches(op)
        compute_s += t
        flops += op.flops
    pc.compute_s, pc.flops, pc.kernels, pc.grouped_scalar_s = compute_s, flops, kernels, grouped_scalar
    async_share = cm.eff.async_overlap
    for c in pending:
        t = collective_time(comm, c)  # expert all-to-alls per network tier (moe_comm.py)
        overlap = tp_overlap
        if tp_overlap and c.overlap_impl == "symm_mem":
            window, extra = _symm_mem(ops, c, gemm_t, cm, in_backward)
            if window > 0.0:   # fused (no cat copy: the fused op takes the split/cat pattern in)
                pc.compute_s += extra
                pc.kernels += 1
                pc.add_comm(COMM_KIND[c.group], t, window)
                continue
            overlap = False    # not fused: a plain NCCL collective, as without overlap
        if c.cat_copy:   # DTensor's all-gather / reduce-scatter along the sequence dim
            # a copy kernel in line with its collective (nothing to hide it behind), counted with
            # the TP communication it serves: what a bound that drops the TP term drops with it
            # (search/prune.py ``memory_and_bound``)
            pc.add_comm(COMM_KIND[c.group], cat_seconds(c, cm))
            pc.kernels += 1
        partner = c.overlap_with
        share = 1.0
        if partner.startswith(("fwd:", "dgrad:", "wgrad:")):
            share = 1.0 if (overlap and c.group == "tp" and c.decomposable) else async_share
            if c.group == "ep":
                # the shared expert beside the token all-to-all runs with CUDA_DEVICE_MAX_CONNECTIONS > 1
                # (token_dispatcher.py: "overlapped with dispatch A2A when CUDA_DEVICE_MAX_CONNECTIONS>1"):
                # both kernels really run at once, sharing the SMs (the contention of sim/overlap.py).
                # async_share is for TE's async TP collectives under CUDA_DEVICE_MAX_CONNECTIONS=1.
                share = 1.0
        if not partner and overlap and c.group == "tp" and c.decomposable:
            partner = _neighbour_gemm(ops, c)
        pc.add_comm(COMM_KIND[c.group], t, gemm_t.get(partner, 0.0), share)
    return pc


def cat_seconds(c: Collective, cm: ComputeModel) -> float:
    """The ``aten.cat`` copy of a DTensor collective along the sequence dim (``Collective.cat_copy``):
    read and write the whole (gathered / unreduced) buffer."""
    return 2.0 * c.bytes / cm.hbm + cm.overhead


# ATen's ``torch.sum`` over the tp partials of ``fused_matmul_reduce_scatter`` against a streaming
# kernel moving the same bytes: "On these shapes it reaches 23-43% of HBM peak against the Triton
# kernel's 82-88%, at identical DRAM traffic, because ATen's `reduce_kernel` is instruction-bound:
# for a reduction of extent 2-8 ..." (pytorch/pytorch#191803, which replaces it): the midpoints,
# 0.33 / 0.85, applied to the system's memory-bound efficiency (``Efficiency.hbm``)
ATEN_SMALL_REDUCE = 0.33 / 0.85


def _symm_mem(ops: list[Op], c: Collective, gemm_t: dict[str, float], cm: ComputeModel,
              in_backward: bool) -> tuple[float, float]:
    """(compute window, extra compute seconds on the compute stream) of a TP collective under
    PyTorch's async TP; (0, 0) when it is not fused. Read off Inductor's micro-pipeline pass
    (torch/_inductor/fx_passes/micro_pipeline_tp.py) and the fused ops it inserts
    (torch/distributed/_symmetric_memory/__init__.py):

    - what it fuses with: an all-gather with *every* matmul reading the gathered tensor as its left
      operand (``fuse_all_gather_matmul`` → ``_find_consumer_matmuls``: one
      ``fused_all_gather_matmul`` for wq, wk and wv — the GEMMs right after it here, so a per-op
      SAC recompute's gather fuses with the matmul it re-runs), a row-parallel output gradient's
      gather with its dgrad, a reduce-scatter with its single producer matmul (``_find_producer_matmul``:
      the forward GEMM; a backward one's dgrad). A gather read only by a wgrad (the input
      transposed: not a left operand) and an all-reduce (no pattern) are not fused.
    - the window: the operand is split in ``tp`` chunks, one per rank; the all-gather's last
      chunk's matmuls and the reduce-scatter's first chunk's run with no copy beside them
      (``_pipelined_multi_all_gather_and_consume``, ``_pipelined_produce_and_all2all``), so
      (tp − 1)/tp of the fused GEMMs' time hides the copies (which run on copy engines: ``copy_``
      of peer buffers, no SMs taken — the contention of sim/overlap.py still applies).
    - what it adds: the all-gather first copies the local shard into the symmetric buffer behind a
      barrier, not overlapped ("we are giving up the chance to overlap 'mv' and 'b' with the first
      shard_consumer": read + write of the shard); the reduce-scatter ends with a ``torch.sum``
      over the tp partials after the pipeline (``_fused_matmul_reduce_scatter_impl``
      ``reduce_fn(stacked_partials...)``), reading the whole unreduced output and writing the
      shard at ``ATEN_SMALL_REDUCE`` of a streaming kernel's bandwidth. And the gathered tensor
      comes back sequence-major (``_fused_all_gather_matmul_impl``: the gather dim moved to the
      front, ``unflatten`` a strided view), so where a wgrad reads it as [batch·seq, h] rows —
      in the backward graph: the recompute's gather, the output gradient's — a batch > 1 makes that
      reshape a copy of the gathered buffer (``Collective.seq_major``): the cat it saved.
    """
    tp = max(c.size, 1)
    if not c.decomposable or c.kind not in ("all_gather", "reduce_scatter") or c.overlap_with.startswith("dgrad:"):
        return 0.0, 0.0
    suffix = c.name.split(":", 1)[-1]
    if c.kind == "all_gather" and c.name.startswith("ag:"):
        at = next((i for i, o in enumerate(ops) if o is c), -1)
        names = [o.name for o in itertools.takewhile(lambda o: isinstance(o, Gemm) and o.name.startswith("fwd:"),
                                                      ops[at + 1:])] if at >= 0 else []
    else:
        names = [("fwd:" if c.name.startswith("rs:") else "dgrad:") + suffix]
    g = sum(gemm_t.get(n, 0.0) for n in names)
    if g <= 0.0:
        return 0.0, 0.0
    if c.kind == "all_gather":
        extra = 2.0 * c.bytes / tp / cm.hbm + cm.overhead
        if c.seq_major and (in_backward or c.name.startswith("ag-bwd:")):
            extra += cat_seconds(c, cm)
    else:
        extra = (c.bytes + c.bytes / tp) / (cm.hbm * ATEN_SMALL_REDUCE) + cm.overhead
    return g * (tp - 1) / tp, extra


def _neighbour_gemm(ops: list[Op], c: Collective) -> str:
    """The GEMM a TP collective is decomposed with under userbuffers overlap (the linear it feeds
    or drains)."""
    suffix = c.name.split(":", 1)[-1]
    for prefix in ("fwd:", "dgrad:", "wgrad:"):
        name = prefix + suffix
        if any(getattr(o, "name", None) == name for o in ops):
            return name
    return ""
