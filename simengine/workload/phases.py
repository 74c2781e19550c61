"""Phases: the op lists of one micro-batch (forward, backward-input, backward-weight) and the
helpers that emit a tensor-parallel linear layer with its GEMMs and TP collectives.

TP collectives follow Megatron-LM's ``ColumnParallelLinear`` / ``RowParallelLinear`` and
TransformerEngine's ``Linear`` (megatron/core/tensor_parallel/layers.py,
``LinearWithGradAccumulationAndAsyncCommunication``):

- column-parallel, SP: fwd all-gather of the input; bwd all-gather of the input again (only the
  shard was saved) overlapped with the dgrad GEMM, then reduce-scatter of the input grad
  overlapped with the wgrad GEMM. Without SP: bwd all-reduce of the input grad beside wgrad.
- row-parallel, SP: fwd reduce-scatter of the output; bwd all-gather of the output grad (blocking).
  Without SP: fwd all-reduce.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ops import BF16, Collective, Gemm, GroupedGemm, Memory, Op


@dataclass(slots=True)
class Phases:
    fwd: list[Op] = field(default_factory=list)
    bwd: list[Op] = field(default_factory=list)   # backward w.r.t. inputs (B)
    wgt: list[Op] = field(default_factory=list)   # backward w.r.t. weights (W)

    def groups(self) -> set[str]:
        """The parallel groups this block's collectives run on (what their prices read of the
        layout besides the ops: cost/comm.py ``group_placements``)."""
        return {op.group for ops in (self.fwd, self.bwd, self.wgt) for op in ops if hasattr(op, "group")}

    def extend(self, other: "Phases") -> None:
        self.fwd.extend(other.fwd)
        self.bwd.extend(other.bwd)
        self.wgt.extend(other.wgt)


def gemm_triple(ph: Phases, name: str, tokens: int, k_in: int, n_out: int, count: int = 1) -> None:
    """Forward, dgrad and wgrad GEMMs of y = x·Wᵀ with x: tokens×k_in, W: n_out×k_in."""
    ph.fwd.append(Gemm("fwd:" + name, m=tokens, n=n_out, k=k_in, layout="TN", count=count))
    ph.bwd.append(Gemm("dgrad:" + name, m=tokens, n=k_in, k=n_out, layout="NN", count=count))
    ph.wgt.append(Gemm("wgrad:" + name, m=n_out, n=k_in, k=tokens, layout="NT", count=count))


def add_grad_accumulation(ph: Phases, bytes_per_weight: float) -> None:
    """After each weight-gradient GEMM of ``ph``, the memory-bound pass that adds its gradient to
    the accumulated one (``dims.grad_accumulation_bytes``: bytes per weight element): one kernel
    per weight, a grouped GEMM's one per expert (each expert's weight is its own parameter)."""
    out: list[Op] = []
    for op in ph.wgt:
        out.append(op)
        if isinstance(op, Gemm) and op.name.startswith("wgrad:"):
            out.append(Memory("grad-acc:" + op.name[6:], bytes_per_weight * op.m * op.n * op.count, kernels=op.count))
        elif isinstance(op, GroupedGemm) and op.name.startswith("wgrad:"):
            out.append(Memory("grad-acc:" + op.name[6:], bytes_per_weight * op.groups * op.m * op.n, kernels=op.groups))
    ph.wgt[:] = out


def column_linear(ph: Phases, name: str, tokens: int, k_in: int, n_out_local: int, tp: int, sp: bool) -> None:
    """Column-parallel linear: input replicated (or SP-sharded), output split over TP."""
    full = tokens * k_in * BF16
    if tp > 1 and sp:
        ph.fwd.append(Collective("ag:" + name, "all_gather", full, "tp", tp))
    gemm_triple(ph, name, tokens, k_in, n_out_local)
    if tp > 1 and sp:
        ph.bwd.append(Collective("ag-bwd:" + name, "all_gather", full, "tp", tp, overlap_with="dgrad:" + name))
        ph.wgt.append(Collective("rs-bwd:" + name, "reduce_scatter", full, "tp", tp, overlap_with="wgrad:" + name))
    elif tp > 1:
        ph.wgt.append(Collective("ar-bwd:" + name, "all_reduce", full, "tp", tp, overlap_with="wgrad:" + name))


def row_linear(ph: Phases, name: str, tokens: int, k_in_local: int, n_out: int, tp: int, sp: bool) -> None:
    """Row-parallel linear: input split over TP, output reduced (SP: reduce-scattered)."""
    full = tokens * n_out * BF16
    gemm_triple(ph, name, tokens, k_in_local, n_out)
    if tp > 1 and sp:
        ph.fwd.append(Collective("rs:" + name, "reduce_scatter", full, "tp", tp))
        ph.bwd.insert(len(ph.bwd) - 1, Collective("ag-bwd:" + name, "all_gather", full, "tp", tp))
    elif tp > 1:
        ph.fwd.append(Collective("ar:" + name, "all_reduce", full, "tp", tp))
