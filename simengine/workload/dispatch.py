"""MoE token dispatch and combine over the expert-parallel group, as the dispatchers run them.

- ``alltoall`` (Megatron-Core ``MoEAlltoAllTokenDispatcher``, megatron/core/transformer/moe/
  token_dispatcher.py): the router's permutation makes one row per (token, chosen expert)
  (``num_out_tokens = routing_map.size(0) · moe_router_topk``), and ``all_to_all(ep_group, …,
  input_splits)`` sends each row to the rank owning its expert — a token with two experts on the
  same remote rank travels twice. Combine is the reverse all-to-all; backward repeats both.
- ``deepep`` (Megatron ``--moe-token-dispatcher-type flex`` with the DeepEP backend,
  ``_DeepepManager`` → deepseek-ai/DeepEP ``Buffer.dispatch``): ``get_dispatch_layout``
  (csrc/kernels/layout.cu) marks ``is_token_in_rank`` and counts ``num_tokens_per_rdma_rank`` once
  per destination *node*; the internode kernel (csrc/kernels/internode.cu, warp roles
  ``kRDMASender`` → ``kRDMAAndNVLForwarder`` → ``kNVLReceivers``) sends a token once over RDMA to
  its rail peer on each destination node, which forwards it over NVLink once per destination
  rank; the two legs are pipelined ("asymmetric-domain bandwidth forwarding", DeepEP README).
  DeepSeek-V3's recipe dispatches in FP8 and combines in BF16 (DeepEP README, normal kernels).

The op carries what the routing decides (tokens, top-k, experts, groups, row bytes, the hottest
rank's load); ``simengine/cost/moe_comm.py`` turns it into bytes per network tier and seconds on
the group's placement. ``bytes`` is the flat buffer (T·k rows) so a pricer that only knows plain
all-to-alls still gets Megatron's alltoall figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config.model import ModelSpec
from .dims import Dims
from .ops import BF16, Collective
from .phases import Phases

FP8_ROW_FACTOR = 1.0 + 1.0 / 32.0  # 1 B per element + one scale byte per 32 (MXFP8 e8m0; DeepEP: fp32 per 128)


@dataclass(frozen=True, slots=True)
class ExpertAllToAll(Collective):
    """One dispatch or combine all-to-all of ``tokens`` router inputs on the ``ep`` group."""

    dispatcher: str = "alltoall"      # alltoall | deepep
    tokens: int = 0                   # tokens entering the router on this rank
    top_k: int = 1
    experts: int = 1
    n_group: int = 1
    topk_group: int = 1
    row_bytes: float = 0.0            # bytes per token row on the wire (h·2 bf16, h·(1+1/32) fp8)
    imbalance: float = 1.0            # hottest receiving rank's load / mean (StrategySpec.moe_load_imbalance)
    wire: str = "bf16"                # bf16 | fp8 (the forward dispatch's moe_dispatch_dtype)


def _flat_rows(d: Dims, m: ModelSpec) -> tuple[int, bool]:
    """Rows the alltoall dispatcher sends per source rank, and whether they are capacity-padded.
    Drop-and-pad (``capacity_factor``): every expert gets exactly ``capacity`` rows from each source,
    ``capacity = ceil(T·k / E · cf)`` (moe_utils.get_capacity with num_tokens·topk) and
    ``num_out_tokens = capacity · num_experts`` (MoEAlltoAllTokenDispatcher.preprocess)."""
    if m.capacity_factor is not None and m.pad_to_capacity:
        return math.ceil(d.moe_tokens * m.top_k / m.num_experts * m.capacity_factor) * m.num_experts, True
    return d.moe_tokens * m.top_k, False


def _op(name: str, d: Dims, m: ModelSpec, dispatcher: str, row_bytes: float, imbalance: float,
        wire: str = "bf16") -> ExpertAllToAll:
    rows, padded = _flat_rows(d, m)
    if padded and dispatcher != "deepep":
        imbalance = 1.0  # padded to capacity: every rank receives the same count, however routing goes
    flat = rows * row_bytes * imbalance
    return ExpertAllToAll(name, "all_to_all", flat, "ep", d.ep, dispatcher=dispatcher, tokens=d.moe_tokens,
                          top_k=m.top_k, experts=m.num_experts, n_group=m.n_group or 1,
                          topk_group=m.topk_group or 1, row_bytes=row_bytes, imbalance=imbalance, wire=wire)


def ep_alltoall(ph: Phases, d: Dims, m: ModelSpec, dispatcher: str, dispatch_dtype: str, imbalance: float) -> None:
    """Forward dispatch + combine and their backward (gradients travel bf16 the opposite way).
    The hottest rank receives ``imbalance`` × the mean in dispatch and sends as much back in
    combine, and every rank waits for it (an all-to-all ends when its slowest peer does)."""
    # a row is one token at the routed width: h, or a latent MoE's latent size (Megatron-Core
    # token_dispatcher.py: hidden_dim = moe_latent_size or hidden_size; fc1_latent_proj runs first)
    bf16 = d.moe_dim * BF16
    fwd_row = d.moe_dim * FP8_ROW_FACTOR if dispatch_dtype == "fp8" else bf16
    ph.fwd.append(_op("ep-a2a:dispatch", d, m, dispatcher, fwd_row, imbalance, "fp8" if dispatch_dtype == "fp8" else "bf16"))
    if dispatcher == "alltoall":
        # MoEAlltoAllTokenDispatcher.token_dispatch sends the permuted routing probabilities in a
        # second all_to_all (fp32 per row); its autograd repeats it in backward. DeepEP carries
        # them (topk_weights) inside the dispatch kernel.
        ph.fwd.append(_op("ep-a2a:probs", d, m, dispatcher, 4.0, imbalance))
        ph.bwd.append(_op("ep-a2a:dprobs", d, m, dispatcher, 4.0, imbalance))
    ph.fwd.append(_op("ep-a2a:combine", d, m, dispatcher, bf16, imbalance))
    ph.bwd.append(_op("ep-a2a:dcombine", d, m, dispatcher, bf16, imbalance))
    ph.bwd.append(_op("ep-a2a:ddispatch", d, m, dispatcher, bf16, imbalance))
