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
   The GPU moves every tensor more than once: ``_allgather_param`` zero-fills the full buffer
   (``torch.zeros``) before the gather, c10d's copies read and write it again after the ring (the
   ``post`` hook of ``ProcessGroupNCCL::collective`` enqueues them right after the NCCL kernel, so
   the host issues them while the ring runs), and the reduce-scatter's flatten reads and writes
   the gradient before its ring (the ``pre`` hook). ``fetch_sub_module`` formats
   ``param.norm()`` into a ``print_rank_0`` message for every parameter it fetches — the f-string
   is built although the message is not printed — so every fetch reads each parameter once more
   and waits for the norm (``Tensor.__format__`` of a 0-dim tensor is ``item()``). That line is in
   v0.3.15 to v0.4.1, not in v0.3.13/14; without it the Table 2 rows move by −1.5..+1.5 points.
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
   backward next: those whose later submodules' parameters, counted in their recompute and again
   in their backward, sum to under 1e9 are not gathered again.
7. **Gradients through the contiguous ipg buffer.** The reduce-scatter path of (1) is the one of
   ``contiguous_gradients: true``, the value of DeepSpeed's Megatron ZeRO-3 example configs
   (DeepSpeedExamples ``Megatron-LM-v1.1.5-ZeRO3/examples/ds_zero_stage_3_config.json``; the
   paper does not print its config, and the stage-3 default False would all-reduce flattened
   buckets instead, ``buffered_reduce_fallback``). ``reduce_independent_p_g_buckets_and_remove_grads``
   copies a gradient that fits in the ``reduce_bucket_size`` buffer (5e8) into it, and
   ``average_tensor`` divides the gradients by the world size in place before they are reduced.
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
# zero/constants.py ZERO_OPTIMIZATION_REDUCE_BUCKET_SIZE_DEFAULT @v0.3.15
REDUCE_BUCKET_SIZE = 500_000_000
# the fp16 model's parameters (``FP16_DeepSpeedZeroOptimizer_Stage3``: fp16 mixed precision)
PARAM_BYTES = 2.0
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


def _launch_s(sc: Scenario) -> float:
    return sc.system.efficiency.kernel_overhead_us * 1e-6


def _hbm_s(sc: Scenario, nbytes: float) -> float:
    """One memory-bound kernel moving ``nbytes`` through HBM, priced as compute.py's
    ``ComputeModel.memory`` prices one: bytes / (HBM bandwidth · efficiency) + a launch."""
    g = sc.system.gpu
    return nbytes / (g.hbm_bandwidth_gbs * 1e9 * sc.system.efficiency.hbm) + _launch_s(sc)


def gather_s(sc: Scenario, comm: CommModel, n: float, ranks: int) -> tuple[float, float]:
    """(before, transfer) seconds of one tensor's gather of ``n`` elements (mechanisms 1-2).
    Before the ring: the zero-filled buffer and the Python loop of ``ranks`` narrow views.
    Transfer: the ring, then c10d's copies into the views (read and write of the tensor); the
    host issues their ``ranks`` launches while the ring runs, so it lasts the longer of the two."""
    b, launch = PARAM_BYTES * n, _launch_s(sc)
    before = _hbm_s(sc, b) + ranks * launch
    return before, max(comm.time("all_gather", b, "dps") + _hbm_s(sc, 2 * b), ranks * launch)


def reduce_scatter_s(sc: Scenario, comm: CommModel, n: float, ranks: int, bucket: float = REDUCE_BUCKET_SIZE) -> float:
    """Seconds of one gradient's reduce-scatter (mechanisms 1, 2 and 7): the copy into the ipg
    buffer when it fits, the average's in-place divide, the Python loop of ``ranks`` view + narrow
    pairs, c10d's flatten (``ranks`` copy launches, or the read and write of the gradient if
    longer), then the ring."""
    b, launch = GRAD_BYTES * n, _launch_s(sc)
    ipg = _hbm_s(sc, 2 * b) if n <= bucket else 0.0
    flatten = max(ranks * launch, _hbm_s(sc, 2 * b))
    return ipg + _hbm_s(sc, 2 * b) + 2 * ranks * launch + flatten + comm.time("reduce_scatter", b, "dps")


def fetch_norm_s(sc: Scenario, sizes: tuple[float, ...]) -> float:
    """The norms ``fetch_sub_module`` builds into its debug message: one read of every fetched
    parameter (mechanism 2)."""
    return sum(_hbm_s(sc, PARAM_BYTES * n) for n in sizes)


def reuse_distance(subs: tuple[tuple[float, tuple[float, ...]], ...], i: int) -> float:
    """Elements between submodule ``i``'s release after its recompute and its backward (mechanism
    6): ``get_reuse_distance_in_numel`` sums the parameters of every traced step from now to the
    submodule's next use (``_distance_in_numel``) — the later submodules' recompute forward and
    then their backward, each counted once per step, so twice."""
    return 2.0 * sum(w + sum(o) for w, o in subs[i + 1:])


def add_layer_comm(sc: Scenario, comm: CommModel, layers: int, fwd: PhaseCost, bwd: PhaseCost, rc: PhaseCost,
                   max_live: float = MAX_LIVE_PARAMETERS, persist: float = PERSISTENCE_THRESHOLD,
                   reuse: float = MAX_REUSE_DISTANCE) -> None:
    """Per-micro-batch ZeRO-3 communication of ``layers`` dense layers as DeepSpeed v0.3 runs it:
    gathers in forward (and recompute) order, again in backward order, per-tensor reduce-scatters
    in backward. Tensors under ``persist`` elements are gathered once and kept (mechanism 5);
    after a recompute, a submodule whose reuse distance is under ``reuse`` keeps its weight for
    its backward (mechanism 6). A gather runs beside the previous submodule's compute (its GEMM
    share of the pass) when that submodule's weight is under ``max_live``; otherwise it runs
    alone. What precedes each ring (the zero-fill and the narrow loop), every fetch's debug norms
    and the reduce-scatters run alone (mechanism 3). The simulator decides what hides
    (sim/overlap.py)."""
    ranks = sc.dp_shard * sc.strategy.cp
    if ranks <= 1 or layers <= 0:
        return
    subs = gemm_submodules(sc)
    total = sum(w for w, _ in subs)
    gathered = [tuple(n for n in (w, *o) if n >= persist) for w, o in subs]
    # prefetch off (overlap_param_gather): every gather runs alone
    prefetch = sc.strategy.overlap_param_gather

    def gathers(pc: PhaseCost, order: list[int], skip: set[int]) -> None:
        for j, i in enumerate(order):
            pc.add_comm("dp_comm", fetch_norm_s(sc, (subs[i][0], *subs[i][1])), times=layers)
            if i in skip or not gathered[i]:
                continue
            prev_w = subs[order[j - 1]][0]  # the previous submodule (the last one of the previous layer for the first)
            window = pc.compute_s / layers * prev_w / total if prefetch and prev_w < max_live else 0.0
            parts = [gather_s(sc, comm, n, ranks) for n in gathered[i]]
            pc.add_comm("dp_comm", sum(t for _, t in parts), window, 1.0, layers)
            pc.add_comm("dp_comm", sum(b for b, _ in parts), times=layers)

    fwd_order = list(range(len(subs)))
    gathers(fwd, fwd_order, set())
    kept: set[int] = set()
    if rc.compute_s > 0:
        gathers(rc, fwd_order, set())
        kept = {i for i in fwd_order if reuse_distance(subs, i) < reuse}
    gathers(bwd, fwd_order[::-1], kept)
    # every tensor's gradient is reduce-scattered, persistent ones included; on the reduction
    # stream (``reduce_ipg_grads``), but the next submodule's fetch synchronises the whole device
    # before its backward is launched (mechanism 3): a reduce-scatter never runs beside compute
    rs = sum(reduce_scatter_s(sc, comm, n, ranks) for w, o in subs for n in (w, *o))
    bwd.add_comm("dp_comm", rs, times=layers)
