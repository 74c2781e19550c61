"""ZeRO-3 as DeepSpeed v0.3 ran it in 2021 (the release Narayanan et al. 2021 Table 2 compared
against), on PyTorch 1.8 — ``StrategySpec.fsdp_pattern = "zero3-2021"``.

Mechanisms, each read off that code (microsoft/DeepSpeed @v0.3.15):

1. **One collective per parameter tensor.** ``fetch_sub_module`` (runtime/zero/stage3.py) hands
   the submodule's parameters to ``_all_gather`` (zero/partition_parameters.py), which issues one
   ``_allgather_param`` — one ``torch.distributed.all_gather`` — per tensor; gradients are
   reduce-scattered by ``_reduce_scatter_gradients``, one ``torch.distributed.reduce_scatter`` per
   tensor (``reduce_bucket_size`` only decides when a group of them is launched). A GPT layer's
   weights, biases and norm scales are each their own call, each paying the ring latency.
2. **A host copy per rank.** Those are PyTorch's tensor-*list* collectives: c10d
   ``ProcessGroupNCCL::allgather`` copies the flattened result into each of the world_size output
   tensors (``outputTensors[i][j].copy_(outputFlattened[i][j])`` with ``recordStream``), and
   ``reduce_scatter`` first flattens the world_size inputs (``flatten_for_scatter_gather``) — one
   ``copy_`` launch per rank per call: world_size · kernel launch overhead of host time.
3. **Blocking fetch.** ``_allgather_param`` calls ``torch.cuda.synchronize()`` before every
   gather and ``fetch_sub_module`` ("This call is blocking") ends in ``_synchronize_communication``
   (``comm_stream.synchronize(); torch.cuda.synchronize()``): the GPU queue is drained at every
   submodule, so the host time of (2) runs alone — it is never hidden behind queued kernels — and
   a gradient reduce-scatter launched on the reduction stream (``reduce_ipg_grads``) has to finish
   before the next submodule's backward is launched: it runs alone too.
4. **Prefetch one submodule ahead, gated by the live-parameter budget.**
   ``prefetch_next_sub_modules`` gathers the next ``prefetch_bucket_size`` elements while the
   current submodule computes, but only ``if not self.in_flight_handles and
   self.total_available_parameter_numel < self.max_available_parameters_in_numel``
   (``max_live_parameters``, default 1e9 in ``FP16_DeepSpeedZeroOptimizer_Stage3.__init__``).
   A submodule whose own weight is ≥ 1e9 elements (the 530B model's QKV, h→4h and 4h→h) blocks the
   prefetch: the next submodule's gather then runs alone.
"""

from __future__ import annotations

from ..config.scenario import Scenario
from .comm import CommModel
from .phase import PhaseCost

# FP16_DeepSpeedZeroOptimizer_Stage3.__init__(max_live_parameters=1000000000) @v0.3.15
MAX_LIVE_PARAMETERS = 1_000_000_000
# the gradients reduced are ``param.grad`` of the fp16 model (``_reduce_scatter_gradient``); the
# fp32 copy is made of the partition afterwards
GRAD_BYTES = 2.0


def gemm_submodules(sc: Scenario) -> tuple[tuple[float, int], ...]:
    """(local weight elements, parameter tensors) of a dense GPT layer's GEMM submodules in
    forward order — QKV, attention output, h→f, f→h — with each norm's tensors counted with the
    GEMM it feeds (the prefetch gathers them in the same group)."""
    m, tp = sc.model, sc.strategy.tp
    h, hd, f = m.hidden_size, m.d_head, m.ffn_hidden_size
    q, kv = m.num_attention_heads * hd, m.kv_heads * hd
    up = 2 * f if m.activation == "swiglu" else f
    bias = 1 if m.linear_bias else 0
    norm = 2 if m.norm == "layernorm" else 1
    return ((h * (q + 2 * kv) / tp, 1 + bias + norm), (q * h / tp, 1 + bias),
            (h * up / tp, 1 + bias + norm), (f * h / tp, 1 + bias))


def host_s(sc: Scenario, calls: float, ranks: int) -> float:
    """Host seconds of ``calls`` tensor-list collectives on ``ranks`` ranks: one ``copy_`` launch
    per rank each (mechanism 2)."""
    return calls * ranks * sc.system.efficiency.kernel_overhead_us * 1e-6


def _call_s(comm: CommModel, kind: str, elems: float, tensors: int, small: float, grad_b: float) -> float:
    """One submodule's collectives: its weight in one call and its other ``tensors − 1`` (bias,
    norm) in one call each — every call pays its own ring latency (mechanism 1)."""
    b = 2.0 if kind == "all_gather" else grad_b
    return comm.time(kind, b * elems, "dps") + (tensors - 1) * comm.time(kind, b * small, "dps")


def add_layer_comm(sc: Scenario, comm: CommModel, layers: int, fwd: PhaseCost, bwd: PhaseCost, rc: PhaseCost,
                   max_live: float = MAX_LIVE_PARAMETERS) -> None:
    """Per-micro-batch ZeRO-3 communication of ``layers`` dense layers as DeepSpeed v0.3 runs it:
    gathers in forward (and recompute) order, again in backward order, per-tensor reduce-scatters
    in backward. A gather runs beside the previous submodule's compute (its GEMM share of the
    pass) when that submodule's weight is under ``max_live``; otherwise it runs alone. The host
    copies run alone (mechanism 3). The simulator decides what hides (sim/overlap.py)."""
    ranks = sc.dp_shard * sc.strategy.cp
    if ranks <= 1 or layers <= 0:
        return
    grad_b = GRAD_BYTES
    subs = gemm_submodules(sc)
    total = sum(n for n, _ in subs)
    small = float(sc.model.hidden_size)
    calls = sum(t for _, t in subs)
    # prefetch off (overlap_param_gather): every gather runs alone
    prefetch = sc.strategy.overlap_param_gather

    def gathers(pc: PhaseCost, order: tuple[tuple[float, int], ...]) -> None:
        for i, (n, tensors) in enumerate(order):
            prev_n = order[i - 1][0]  # the previous submodule (the last one of the previous layer for the first)
            window = pc.compute_s / layers * prev_n / total if prefetch and prev_n < max_live else 0.0
            pc.add_comm("dp_comm", _call_s(comm, "all_gather", n, tensors, small, grad_b), window, 1.0, layers)
        pc.add_comm("dp_comm", host_s(sc, calls, ranks), times=layers)

    gathers(fwd, subs)
    if rc.compute_s > 0:
        gathers(rc, subs)
    back = subs[::-1]
    gathers(bwd, back)
    # the reduce-scatters run on the reduction stream (``reduce_ipg_grads``), but the next
    # submodule's fetch synchronises the whole device before its backward is launched
    # (mechanism 3): a reduce-scatter never runs beside the next submodule's compute
    for n, tensors in back:
        bwd.add_comm("dp_comm", _call_s(comm, "reduce_scatter", n, tensors, small, grad_b), times=layers)
    bwd.add_comm("dp_comm", host_s(sc, calls, ranks), times=layers)
