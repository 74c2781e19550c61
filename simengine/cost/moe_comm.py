"""Expert all-to-all priced per network tier (scale-up part and scale-out part).

The EP group's placement (``CommModel.places["ep"]``, Megatron rank order) gives n members, d of
them per scale-up domain, so the group spans N = n/d domains ("nodes"). Per rank and per call:

- Megatron ``alltoall``: rows go to a uniformly chosen expert's rank, so of the T·k rows
  (d−1)/n stay in the domain and (n−d)/n cross it — exactly ``CommModel.time('all_to_all')``'s
  split (cost/comm.py), which prices it. Group-limited routing does not shrink it: under uniform
  routing each row's destination is still uniform over the experts.
- ``deepep``: a token crosses the scale-out network once per *remote destination node* and is
  forwarded over NVLink once per destination rank other than the receiving rail peer:

      out_bytes = f · T · H_node · (N−1)/N · row      H_node = E[distinct nodes hit per token]
      up_bytes  = f · T · H_rank · (d−1)/d · row      H_rank = E[distinct ranks hit per token]

  (simengine/workload/routing.py derives H under group-limited routing; with node-limited
  routing H_node ≤ topk_group). By symmetry a hit node is the sender's own with probability 1/N
  and a hit rank is the forwarder itself with probability 1/d. DeepEP pipelines the RDMA and
  NVLink legs inside one kernel (deepseek-ai/DeepEP csrc/kernels/internode.cu warp roles), so
  t = overhead + α_out + α_up + max(out_bytes / B_out, up_bytes / B_up), B_out the NIC's nominal
  bandwidth times the share HybridEP's kernel reaches on it (cost/hybridep.py, its published H100
  table; in place of the NCCL collective efficiency), B_up the scale-up tier's collective bandwidth.

f = the hottest receiving rank's load over the mean (``moe_load_imbalance``): the all-to-all ends
when that rank has received (dispatch) or sent (combine) its share.
"""

from __future__ import annotations

from ..workload.dispatch import ExpertAllToAll
from ..workload.ops import Collective
from ..workload.routing import expected_units_hit
from .comm import CommModel
from .hybridep import column, scale_out_efficiency


def _layout(comm: CommModel, op: ExpertAllToAll) -> tuple[int, int, int]:
    """(n members, d members per domain, N domains) of the op's group."""
    p = comm.places[op.group]
    n = op.size
    d = max(1, min(p.in_domain, n))
    return n, d, max(1, -(-n // d))


def tier_bytes(comm: CommModel, op: ExpertAllToAll) -> tuple[float, float]:
    """(scale-up bytes, scale-out bytes) the hottest rank moves in this all-to-all."""
    n, d, nodes = _layout(comm, op)
    if n <= 1:
        return 0.0, 0.0
    if op.dispatcher != "deepep":
        return op.bytes * (d - 1) / n, op.bytes * (n - d) / n
    scale = op.imbalance * op.tokens * op.row_bytes
    h_rank = expected_units_hit(op.experts, op.top_k, n, op.n_group, op.topk_group)
    up = scale * h_rank * (d - 1) / d
    if nodes <= 1:
        return up, 0.0
    h_node = expected_units_hit(op.experts, op.top_k, nodes, op.n_group, op.topk_group)
    return up, scale * h_node * (nodes - 1) / nodes


def a2a_time(comm: CommModel, op: ExpertAllToAll) -> float:
    """Seconds of one expert dispatch or combine on the hottest rank."""
    n, _, nodes = _layout(comm, op)
    if n <= 1 or op.bytes <= 0:
        return 0.0
    if op.dispatcher != "deepep":
        return comm.time("all_to_all", op.bytes, op.group, n)
    up_b, out_b = tier_bytes(comm, op)
    up = comm.tiers[("all_to_all", "scale_up")]
    t = up.overhead_s + up.latency_s + up_b / up.bandwidth_Bps
    if out_b > 0:
        out = comm.tiers[("all_to_all", "scale_out")]
        out_bw = out.nominal_Bps * scale_out_efficiency(nodes, column(op.name, op.wire))  # the kernel's measured share
        t = out.overhead_s + out.latency_s + up.latency_s + max(up_b / up.bandwidth_Bps, out_b / out_bw)
    return t


def collective_time(comm: CommModel, op: Collective) -> float:
    """Price any collective op: expert all-to-alls per tier, the rest by ``CommModel.time``.
    (The hook for cost/phase.py: replace ``comm.time(c.kind, c.bytes, c.group, c.size)``.)"""
    if isinstance(op, ExpertAllToAll):
        return a2a_time(comm, op)
    return comm.time(op.kind, op.bytes, op.group, op.size)
