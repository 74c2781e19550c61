"""Price an op list (one phase of one block) into compute seconds and communication tasks.

Cost decides no overlap. It records, for each collective, what it may run beside: TE/Megatron's
async backward all-gather/reduce-scatter is launched next to a GEMM (``overlap_with=<gemm>``),
and with ``tp_comm_overlap`` (TE userbuffers, Wang et al. 2022 "Overlap communication with
dependent computation via decomposition") every TP collective is decomposed with its
neighbouring GEMM. An async NCCL kernel only runs beside a GEMM when the GEMM leaves SMs free
(``Efficiency.async_overlap``: 0 for persistent Hopper/Blackwell GEMMs); userbuffers reserve SMs
(share 1). How much hides, and what the contention costs, the simulator decides
(``simengine/sim/overlap.py``).
"""

from __future__ import annotations

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
        for k, n in other.comm.items():
            self.comm[k] = self.comm.get(k, 0.0) + n * times
        self.flops += other.flops * times
        self.kernels += other.kernels * times

    def tasks(self) -> tuple[tuple[str, float, float, float, float], ...]:
        """(kind, seconds, window_s, share, count) in a stable order: ``sim.CommTask`` fields."""
        return tuple((k, s, w, sh, n) for (k, s, w, sh), n in sorted(self.comm.items()) if n > 0)


def price_ops(ops: list[Op], cm: ComputeModel, comm: CommModel, tp_overlap: bool = False) -> PhaseCost:
    pc = PhaseCost()
    gemm_t: dict[str, float] = {}
    pending: list[Collective] = []
    compute_s = flops = 0.0
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
        else:
            pending.append(op)
            continue
        kernels += cm.launches(op)
        compute_s += t
        flops += op.flops
    pc.compute_s, pc.flops, pc.kernels = compute_s, flops, kernels
    async_share = cm.eff.async_overlap
    for c in pending:
        t = collective_time(comm, c)  # expert all-to-alls per network tier (moe_comm.py)
        partner = c.overlap_with
        share = 1.0
        if partner.startswith(("fwd:", "dgrad:", "wgrad:")):
            share = 1.0 if (tp_overlap and c.group == "tp" and c.decomposable) else async_share
            if c.group == "ep":
                # the shared expert beside the token all-to-all runs with CUDA_DEVICE_MAX_CONNECTIONS > 1
                # (token_dispatcher.py: "overlapped with dispatch A2A when CUDA_DEVICE_MAX_CONNECTIONS>1"):
                # both kernels really run at once, sharing the SMs (the contention of sim/overlap.py).
                # async_share is for TE's async TP collectives under CUDA_DEVICE_MAX_CONNECTIONS=1.
                share = 1.0
        if not partner and tp_overlap and c.group == "tp" and c.decomposable:
            partner = _neighbour_gemm(ops, c)
        pc.add_comm(COMM_KIND[c.group], t, gemm_t.get(partner, 0.0), share)
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
