"""ZeRO-3 as DeepSpeed v0.3 ran it in 2021 (the release Narayanan et al. 2021 Table 2 compared
against), on PyTorch 1.8 — ``StrategySpec.fsdp_pattern = "zero3-2021"``.

Mechanisms, each read off that code (microsoft/DeepSpeed @v0.3.15):

1. **One collective per parameter tensor.** ``fetch_sub_module`` (runtime/zero/stage3.py) hands
   the submodule's parameters to ``_all_gather`` (zero/partition_parameters.py), which issues one
   ``_allgather_param`` — one ``torch.distributed.all_gather`` — per tensor; gradients are
   reduce-scattered by ``_reduce_scatter_gradients``, one ``torch.distributed.reduce_scatter`` per
   tensor (``reduce_bucket_size`` only decides when a group of them is launched). A GPT layer's
   weights, biases and norm scales are each their own call, each paying the ring latency.
2. **Host work per rank.** Those are PyTorch's tensor-*list* collectives: c10d
   ``ProcessGroupNCCL::allgather`` copies the flattened result into each of the world_size output
   tensors (``outputTensors[i][j].copy_(outputFlattened[i][j])`` with ``recordStream``), and
   ``reduce_scatter`` first flattens the world_size inputs (``flatten_for_scatter_gather``) — one
   ``copy_`` launch per rank per call — and DeepSpeed builds those lists in a Python loop over the
   ranks (``narrow`` views; ``view(-1).narrow`` for the gradients): world_size · (2 or 3) host ops.
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
5. **Small tensors persist.** ``persistent_parameters`` marks every tensor under
   ``param_persistence_threshold`` (1e5) elements ``ds_persist``; ``release_sub_module`` never
   partitions them again, so biases and norm scales are gathered once, not per pass (their
   gradients are still reduce-scattered, one call each).
6. **Kept for later.** ``release_sub_module`` keeps a weight when ``_keep_for_later``: its reuse
   distance (``get_reuse_distance_in_numel``, the elements used until the submodule runs again)
   is under ``max_reuse_distance`` (1e9). After a layer's recompute its last submodules run their
   backward next: those whose later weights in the layer sum to under 1e9 are not gathered again.
"""

from __future__ import annotations

from ..config.scenario import Scenario
from .comm import CommModel
from .phase import PhaseCost

# FP16_DeepSpeedZeroOptimizer_Stage3.__init__(max_live_parameters=1000000000) @v0.3.15
MAX_LIVE_PARAMETERS = 1_000_000_000
# FP16_DeepSpeedZeroOptimizer_Stage3.__init__(param_persistence_threshold=100000,
# max_reuse_distance=1000000000) @v0.3.15 (the zero/constants.py defaults)
PERSISTENCE_THRESHOLD = 100_000
MAX_REUSE_DISTANCE = 1_000_000_000
# the gradients reduced are ``param.grad`` of the fp16 model (``_reduce_scatter_gradient``); the
# fp32 copy is made of the partition afterwards
GRAD_BYTES = 2.0


def gemm_submodules(sc: Scenario) -> tuple[tuple[float, tuple[float, ...]], ...]:
    """(local weight elements, the other tensors' elements) of a dense GPT layer's GEMM
    submodules in forward order — QKV, attention output, h→f, f→h — each bias with its GEMM and
    each norm's scale (and shift) with the GEMM it feeds."""
    m, tp = sc.model, sc.strategy.tp
    h, hd, f = m.hidden_size, m.d_head, m.ffn_hidden_size
    q, kv = m.num_attention_heads * hd, m.kv_heads * hd
    up = 2 * f if m.activation == "swiglu" else f
    norm = (float(h),) * (2 if m.norm == "layernorm" else 1)
    outs = ((q + 2 * kv) / tp, h, up / tp, h)
    ws = (h * (q + 2 * kv) / tp, q * h / tp, h * up / tp, f * h / tp)
    out = []
    for i, (w, o) in enumerate(zip(ws, outs)):
        others = ((float(o),) if m.linear_bias else ()) + (norm if i in (0, 2) else ())
        out.append((w, others))
    return tuple(out)


# host operations per rank per call: the all-gather builds its world_size output views in a Python
# loop (``_allgather_param``: ``flat_tensor.narrow`` per rank) and c10d copies into each (``copy_``);
# the reduce-scatter slices its world_size inputs in Python (``_reduce_scatter_gradient``:
# ``param.grad.view(-1).narrow`` per rank) and c10d flattens them (``copy_`` per rank)
HOST_OPS_PER_RANK = {"all_gather": 2, "reduce_scatter": 3}


def host_s(sc: Scenario, calls: float, ranks: int, kind: str = "all_gather") -> float:
    """Host seconds of ``calls`` tensor-list collectives on ``ranks`` ranks (mechanism 2): each
    per-rank PyTorch op priced at the per-kernel launch overhead (the same dispatch path)."""
    return calls * ranks * HOST_OPS_PER_RANK[kind] * sc.system.efficiency.kernel_overhead_us * 1e-6


def _call_s(comm: CommModel, kind: str, sizes: tuple[float, ...], bytes_per: float) -> float:
    """Collectives of one submodule's tensors, one call each — every call pays its own ring
    latency (mechanism 1)."""
    return sum(comm.time(kind, bytes_per * n, "dps") for n in sizes)


def add_layer_comm(sc: Scenario, comm: CommModel, layers: int, fwd: PhaseCost, bwd: PhaseCost, rc: PhaseCost,
                   max_live: float = MAX_LIVE_PARAMETERS, persist: float = PERSISTENCE_THRESHOLD,
                   reuse: float = MAX_REUSE_DISTANCE) -> None:
    """Per-micro-batch ZeRO-3 communication of ``layers`` dense layers as DeepSpeed v0.3 runs it:
    gathers in forward (and recompute) order, again in backward order, per-tensor reduce-scatters
    in backward. Tensors under ``persist`` elements are gathered once and kept (mechanism 5);
    after a recompute, a submodule whose reuse distance is under ``reuse`` keeps its weight for
    its backward (mechanism 6). A gather runs beside the previous submodule's compute (its GEMM
    share of the pass) when that submodule's weight is under ``max_live``; otherwise it runs
    alone. Host copies and reduce-scatters run alone (mechanism 3). The simulator decides what
    hides (sim/overlap.py)."""
    ranks = sc.dp_shard * sc.strategy.cp
    if ranks <= 1 or layers <= 0:
        return
    subs = gemm_submodules(sc)
    total = sum(w for w, _ in subs)
    gathered = [tuple(n for n in (w, *o) if n >= persist) for w, o in subs]
    # prefetch off (overlap_param_gather): every gather runs alone
    prefetch = sc.strategy.overlap_param_gather

    def gathers(pc: PhaseCost, order: list[int], skip: set[int]) -> None:
        calls = 0
        for j, i in enumerate(order):
            if i in skip or not gathered[i]:
                continue
            prev_w = subs[order[j - 1]][0]  # the previous submodule (the last one of the previous layer for the first)
            window = pc.compute_s / layers * prev_w / total if prefetch and prev_w < max_live else 0.0
            pc.add_comm("dp_comm", _call_s(comm, "all_gather", gathered[i], 2.0), window, 1.0, layers)
            calls += len(gathered[i])
        pc.add_comm("dp_comm", host_s(sc, calls, ranks), times=layers)

    fwd_order = list(range(len(subs)))
    gathers(fwd, fwd_order, set())
    kept: set[int] = set()
    if rc.compute_s > 0:
        gathers(rc, fwd_order, set())
        # reuse distance from a submodule's recompute to its backward: the weights computed in between
        kept = {i for i in fwd_order if sum(subs[k][0] for k in fwd_order[i + 1:]) < reuse}
    gathers(bwd, fwd_order[::-1], kept)
    # every tensor's gradient is reduce-scattered, persistent ones included; on the reduction
    # stream (``reduce_ipg_grads``), but the next submodule's fetch synchronises the whole device
    # before its backward is launched (mechanism 3): a reduce-scatter never runs beside compute
    for w, o in subs:
        bwd.add_comm("dp_comm", _call_s(comm, "reduce_scatter", (w, *o), GRAD_BYTES), times=layers)
    bwd.add_comm("dp_comm", host_s(sc, sum(1 + len(o) for _, o in subs), ranks, "reduce_scatter"), times=layers)
