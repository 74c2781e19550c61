"""Price an op list (one phase of one block) into compute seconds and exposed communication.

A collective marked ``overlap_with=<gemm>`` runs beside that GEMM (TE/Megatron's async
backward all-gather/reduce-scatter): only the part longer than the GEMM is exposed.
With ``tp_comm_overlap`` (TE userbuffers, Wang et al. 2022 "Overlap communication with dependent
computation via decomposition") every TP collective is hidden behind its neighbouring GEMM the
same way. The overlapped stretch of the GEMM runs ``slowdown`` times slower (contention).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..workload.ops import Attention, Collective, Gemm, GroupedGemm, Memory, Op
from .comm import CommModel
from .compute import ComputeModel

COMM_KIND = {"tp": "tp_comm", "etp": "tp_comm", "cp": "cp_comm", "ep": "ep_comm", "dp": "dp_comm", "edp": "dp_comm", "pp": "pp_comm"}


@dataclass(slots=True)
class PhaseCost:
    compute_s: float = 0.0
    comm_s: dict[str, float] = field(default_factory=dict)   # exposed, by kind (tp_comm, cp_comm, ep_comm)
    hidden_comm_s: float = 0.0
    flops: float = 0.0
    kernels: int = 0

    @property
    def total_s(self) -> float:
        return self.compute_s + sum(self.comm_s.values())

    def add(self, other: "PhaseCost", times: float = 1.0) -> None:
        self.compute_s += other.compute_s * times
        for k, v in other.comm_s.items():
            self.comm_s[k] = self.comm_s.get(k, 0.0) + v * times
        self.hidden_comm_s += other.hidden_comm_s * times
        self.flops += other.flops * times
        self.kernels += int(other.kernels * times)

    def scaled(self, times: float) -> "PhaseCost":
        out = PhaseCost()
        out.add(self, times)
        return out


def price_ops(ops: list[Op], cm: ComputeModel, comm: CommModel, tp_overlap: bool = False, slowdown: float = 1.0) -> PhaseCost:
    pc = PhaseCost()
    gemm_t: dict[str, float] = {}
    pending: list[Collective] = []
    for op in ops:
        if isinstance(op, Gemm):
            t = cm.gemm(op)
            gemm_t[op.name] = t
        elif isinstance(op, GroupedGemm):
            t = cm.grouped_gemm(op)
        elif isinstance(op, Attention):
            t = cm.attention(op)
            gemm_t[op.name] = t
        elif isinstance(op, Memory):
            t = cm.memory(op)
        else:
            pending.append(op)
            continue
        pc.compute_s += t
        pc.flops += op.flops
        pc.kernels += getattr(op, "kernels", 1)
    async_share = cm.eff.async_overlap
    for c in pending:
        t = comm.time(c.kind, c.bytes, c.group, c.size)
        kind = COMM_KIND[c.group]
        partner = c.overlap_with
        share = 1.0
        if partner.startswith(("fwd:", "dgrad:", "wgrad:")):
            # an async NCCL kernel beside a GEMM only overlaps when the GEMM leaves SMs free
            # (Efficiency.async_overlap); with userbuffers (tp_comm_overlap) SMs are reserved
            share = 1.0 if (tp_overlap and c.group == "tp") else async_share
        if not partner and tp_overlap and c.group == "tp":
            partner = _neighbour_gemm(ops, c)
        if partner and partner in gemm_t and share > 0:
            # while NCCL runs beside the GEMM it takes SMs and HBM bandwidth: the overlapped part
            # of the GEMM runs ``slowdown`` times slower (StrategySpec.overlap_slowdown)
            g = gemm_t[partner] * share
            hidden = min(t, g * slowdown)
            pc.hidden_comm_s += hidden
            pc.compute_s += (slowdown - 1.0) * min(g, t / slowdown)
            t -= hidden
        if t > 0:
            pc.comm_s[kind] = pc.comm_s.get(kind, 0.0) + t
    return pc


def _neighbour_gemm(ops: list[Op], c: Collective) -> str:
    """The GEMM a TP collective is decomposed with under userbuffers overlap (the linear it feeds
    or drains)."""
    suffix = c.name.split(":", 1)[-1]
    for prefix in ("fwd:", "dgrad:", "wgrad:"):
        name = prefix + suffix
        if any(getattr(o, "name", None) == name for o in ops):
            return name
    return ""
