"""Host-bound MoE layers: the CPU issues kernels more slowly than the GPU retires them.

Mechanism (Megatron-Core ``MoEAlltoAllTokenDispatcher``, megatron/core/transformer/moe/
token_dispatcher.py, read at Megatron-Bridge r0.2.0's submodule cba6b0ed0 and r0.3.0's e9a1b8a1b):
for dropless routing with ep > 1 the all-to-all split sizes must be on the CPU, so ``preprocess``
sets ``cuda_sync_point = "before_ep_alltoall"`` and ``_maybe_dtoh_and_synchronize`` copies
``tokens_per_expert`` / ``input_splits`` / ``output_splits`` on a side stream that waits for the
compute stream, then ``d2h_event.synchronize()`` blocks the host. Once per MoE layer forward the
launch queue drains: after the sync the GPU runs only what the host issues from then on. Between two
syncs (one layer's forward: dispatch, experts, combine, then the next layer's attention, router and
permutation) the segment therefore lasts at least the host time to issue its kernels:

    t_layer_fwd = max(GPU time of the layer's forward, host time to issue it)

The other dropless dispatchers block the host once per layer forward too (same file):
``MoEAllGatherTokenDispatcher.dispatch_postprocess`` (``local_map.sum(dim=0).long().cpu()``), the
flex dispatcher's DeepEP path (``_DeepepManager.get_permuted_hidden_states_by_experts``:
``tokens_per_expert.sum().item()``) and HybridEP without a token upper bound (``_HybridEPManager``:
"-1 means no up-bound, which will cause a CPU sync"). The backward reuses the forward's CPU split
sizes (``tensor_parallel/mappings.py`` ``_AllToAll.backward``: ``ctx.input_split_sizes``; TE
GroupedLinear's ``m_splits`` list) — no sync — but starts from the drained queue the forward's last
sync leaves, so a backward whose host time exceeds its GPU time is host-bound over its whole length:
for a chunk of identical layers, the same per-layer max. With ``moe_pad_expert_input_to_capacity``
the split sizes are static (``drop_and_pad``: no DtoH, no sync) and the step is left unchanged (the
host may then run ahead across layers).

CUDA graphs (``cuda_graph_impl = "transformer_engine"``, ``cuda_graph_scope``; TE
``make_graphed_callables`` per layer, forward and backward): a captured scope costs one graph launch
instead of its kernels' host time. ``moe_preprocess`` moves the DtoH point to "before_ep_alltoall"
(``cuda_dtoh_point``) but the sync stays; only the ``moe`` scope (drop-and-pad) or a full-iteration
graph removes it.

Host cost per issued op (the sourced constants, only here):
- ``HOST_OP_S`` 10 µs: CPU-side cost of one eager PyTorch op from the Python call to
  ``cudaLaunchKernel`` — "~5–25 µs of CPU-side work per op" (layer-by-layer breakdown: Python
  bytecode ~1, pybind11 ~1, autograd ~1–3, ATen dispatcher ~1–2, backend ~1–5, driver launch
  ~1–3 µs; J. Lin, "From PyTorch op to kernel launch", gpu_kernel_serving lesson 18); 10 µs is the
  geometric middle of that range, not a value read off any validation row.
- ``EXPERT_HOST_S``: TransformerEngine's grouped expert MLP spends its CPU time per local expert
  (per-expert quantizers, ``torch.empty`` ×2·num_gemms and ``torch.split``, TE issue #1499); the TE
  maintainers' measurement of the grouped MLP block (TE issue #2897, GB200, 64 experts): forward
  ~1.2 ms, backward ~2.1 ms of CPU time, i.e. 18.75 µs and 32.8 µs per expert.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..workload.ops import Attention, Collective, Gemm, GroupedGemm, Memory, Op
from .phase import PhaseCost

HOST_OP_S = 10e-6
EXPERT_HOST_S = {"fwd": 1.2e-3 / 64, "bwd": 2.1e-3 / 64}
# grouped GEMMs each phase's expert-MLP host time is spread over: forward fc1, fc2; backward
# dgrad fc1, fc2 and wgrad fc1, fc2 (workload/layers.py moe_block)
_GROUPED_PER_PHASE = {"fwd": 2, "bwd": 4}

GraphScope = str  # "attn" | "moe_router" | "moe_preprocess" | "moe" | "full_iteration"

# moe-block op names → TE graph scope (MoELayer: router = TopKRouter incl. the pre-MLP norm's
# output consumer; preprocess = the dispatcher's permutation)
_ROUTER = ("norm:ln2", "norm-bwd:ln2", "fwd:router", "dgrad:router", "wgrad:router", "router-")
_PREPROCESS = ("permute",)


def moe_op_scope(name: str) -> GraphScope:
    if name.startswith(_ROUTER):
        return "moe_router"
    if name.startswith(_PREPROCESS):
        return "moe_preprocess"
    return "moe"


def op_host_s(op: Op, phase: str) -> float:
    """Host seconds to issue one op: kernels × HOST_OP_S (the kernel counts compute.py prices),
    a grouped GEMM its share of the per-expert host time."""
    if isinstance(op, GroupedGemm):
        return op.groups * EXPERT_HOST_S[phase] / _GROUPED_PER_PHASE[phase]
    if isinstance(op, Memory):
        return op.kernels * HOST_OP_S
    if isinstance(op, Attention):
        return (1 if op.phase == "fwd" else 2) * HOST_OP_S
    if isinstance(op, (Gemm, Collective)):
        return HOST_OP_S
    return 0.0


def host_s(ops: Iterable[Op], phase: str, scope_of, graphed: frozenset[str]) -> float:
    """Host time of a phase's ops; each captured scope present costs one graph launch instead."""
    if "full_iteration" in graphed:
        return HOST_OP_S
    total, launched = 0.0, set()
    for op in ops:
        scope = scope_of(getattr(op, "name", ""))
        if scope in graphed:
            launched.add(scope)
        else:
            total += op_host_s(op, phase)
    return total + len(launched) * HOST_OP_S


def gpu_s(*costs: PhaseCost) -> float:
    """GPU time of the phases as issued on the stream: compute plus every collective serially (an
    upper bound on the GPU time, so the stall it leaves is a lower bound)."""
    return sum(c.compute_s + sum(c.comm_s.values()) for c in costs)


def syncs_per_layer(drop_and_pad: bool, graphed: frozenset[str]) -> bool:
    """Whether the MoE layer's forward blocks the host: every dropless dispatcher does, unless the
    whole MoE layer or step is one graph (module docstring)."""
    return not drop_and_pad and not ({"moe", "full_iteration"} & graphed)


def layer_stall(attn_ops: tuple[list[Op], list[Op], list[Op]], moe_ops: tuple[list[Op], list[Op], list[Op]],
                attn_cost: tuple[PhaseCost, PhaseCost, PhaseCost], moe_cost: tuple[PhaseCost, PhaseCost, PhaseCost],
                graphed: frozenset[str]) -> tuple[float, float]:
    """(forward, backward) seconds one attention + MoE layer waits for the host, ≥ 0."""
    def issue(phase: str, a: list[Op], m: list[Op]) -> float:
        return host_s(a, phase, lambda _n: "attn", graphed) + host_s(m, phase, moe_op_scope, graphed)

    fwd = issue("fwd", attn_ops[0], moe_ops[0]) - gpu_s(attn_cost[0], moe_cost[0])
    bwd = (issue("bwd", attn_ops[1] + attn_ops[2], moe_ops[1] + moe_ops[2])
           - gpu_s(attn_cost[1], attn_cost[2], moe_cost[1], moe_cost[2]))
    return max(fwd, 0.0), max(bwd, 0.0)
