"""Data-parallel gradient/parameter communication per bucket, and the optimizer step.

Buckets follow Megatron-Core's ``ParamAndGradBuffer``: bucket_size = max(40M, 1M·dp) parameters
(megatron/core/distributed/distributed_data_parallel.py); the dense and expert parameters have
separate buffers on their own groups (DP×CP and EDP). Every model chunk is its own DDP module,
and only the first chunk of the first pipeline rank is bucketed, only with overlap_grad_reduce
(``dp_work``): on a later rank the DP collectives are off the critical path, and buckets there
would only slow the cool-down's backwards by contention.

- ZeRO-0 (DDP): all-reduce of the grads (fp32 main grads unless reduced in bf16).
- ZeRO-1/2 (distributed optimizer): reduce-scatter of the grads, then all-gather of the updated
  bf16 parameters.
- ZeRO-2: the sharded grads are reduce-scattered in every micro-batch's backward; the updated
  bf16 parameters are all-gathered after the optimizer.
- ZeRO-3 (FSDP): per micro-batch, the bf16 parameters are all-gathered before the forward and
  again before the backward, and the grads reduce-scattered (``microbatch_dp``) — except FSDP2
  under a pipeline (``keeps_gathered``): once per step, as ZeRO-1's collectives run.

Optimizer (Megatron ``DistributedOptimizer.step`` with Apex/TE FusedAdam, memory-bound): zero and
NaN-check the grad buffer (4 + 4 B/param over the whole buffer), scale it by 1/dp before the
reduce (read+write, when dp > 1), then on the local shard: grad-norm read (4 B), clip scale
(read+write 8 B), Adam (read grad 4, read/write master, m, v 24 B; 16 B with bf16 moments) and the
bf16 copy back to the model weights (read 4, write 2 B): (8 + 8)·N + 42·N_shard bytes with fp32 grads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config.framework import optimizer_adam_cost
from ..config.scenario import Scenario
from ..memo import remember
from ..workload.ops import operand_bytes
from .comm import CommModel
from .static_memory import StageParams, keeps_gathered, optimizer_state_bytes

MIN_BUCKET_PARAMS = 40_000_000
OPTIMIZER_KERNELS = 12  # multi-tensor-apply launches per step (zero, norm, clip, adam, copy, …)


@dataclass(frozen=True, slots=True)
class DPWork:
    grad_buckets_s: tuple[float, ...]
    param_buckets_s: tuple[float, ...]
    optimizer_s: float


def _buckets(n_params: float, dp: int) -> tuple[int, float]:
    """(number of full buckets, parameters in the last partial bucket)."""
    size = max(MIN_BUCKET_PARAMS, 1_000_000 * dp)
    if n_params <= 0:
        return 0, 0.0
    full = int(n_params // size)
    return full, n_params - full * size


def _bucketed(comm: CommModel, kind: str, n_params: float, bytes_per_param: float, group: str, size: int) -> float:
    full, rest = _buckets(n_params, size)
    b = float(max(MIN_BUCKET_PARAMS, 1_000_000 * size))
    t = full * comm.time(kind, b * bytes_per_param, group) if full else 0.0
    return t + (comm.time(kind, rest * bytes_per_param, group) if rest > 0 else 0.0)


# DeepSpeed ZeRO-3 (deepspeed/runtime/zero/partitioned_param_coordinator.py, fetch_sub_module):
# the parameters of each submodule are gathered when the submodule runs — a GPT layer in
# Megatron-DeepSpeed has six (input/post-attention norms, QKV, attention output, h→4h, 4h→h) —
# and gradients are reduce-scattered in buckets of ``reduce_bucket_size`` (config.py default 5e8).
DEEPSPEED_SUBMODULES_PER_LAYER = 6
DEEPSPEED_REDUCE_BUCKET = 500_000_000


def zero_units(sc: Scenario, layers: int, n_params: float) -> tuple[int, int]:
    """(all-gather calls, reduce-scatter calls) per pass over a chunk of ``layers`` layers, by the
    ZeRO-3 implementation (StrategySpec.fsdp_pattern): FSDP2 (torchtitan ``fully_shard`` per
    TransformerBlock) and Megatron-FSDP gather and reduce one flat buffer per layer; DeepSpeed
    gathers per submodule and reduces per bucket."""
    layers = max(layers, 1)
    if sc.strategy.fsdp_pattern_name in ("zero3", "zero3-2021"):  # zero3-2021 here only for MoE (cost/deepspeed_v03.py)
        return layers * DEEPSPEED_SUBMODULES_PER_LAYER, max(1, math.ceil(n_params / DEEPSPEED_REDUCE_BUCKET))
    return layers, layers


def param_gather_bytes(sc: Scenario, p: StageParams, expert: bool) -> float:
    """Bytes per parameter of the distributed optimizer's / FSDP's parameter all-gather: bf16 (2 B),
    or with FP8 primary weights 1 B for the transformer-block weights (Megatron-Core
    param_and_grad_buffer.py: the param buffer holds the fp8 data of TE's quantized params when
    ``fp8_param_gather``; distributed_data_parallel_config.py "perform the param all-gather in fp8")
    while the embedding and LM head stay bf16 — averaged over the group's parameters."""
    if not sc.strategy.fp8_param_gather:
        return 2.0
    q = operand_bytes(sc.strategy.dtype)   # NVFP4 (--fp4-param-gather): the rowwise copy, 0.5625 B
    if expert:
        return q
    return (2.0 * p.ends + q * max(p.dense - p.ends, 0.0)) / p.dense if p.dense > 0 else 2.0


def microbatch_dp(sc: Scenario, comm: CommModel, p: StageParams, ag_calls: int = 0, rs_calls: int = 0) -> tuple[float, float]:
    """(parameter all-gather, gradient reduce-scatter) seconds of ONE call of each that ZeRO-2/3
    repeat ``ag_calls`` / ``rs_calls`` times for every micro-batch of one chunk with parameters ``p``
    (0 calls = the totals in Megatron's 40M-parameter buckets). Sharded gradients cannot accumulate
    locally, so each backward reduce-scatters them (ZeRO-2/3, Rajbhandari et al. 2020 §5; DeepSpeed
    and PyTorch FSDP reduce-scatter per backward); ZeRO-3 also gathers the bf16 weights before each
    forward and again before each backward (FSDP reshard-after-forward). Each call pays its own
    latency: (n−1) ring steps on the group's tier (cost/comm.py)."""
    st = sc.strategy
    if st.zero_stage < 2:
        return 0.0, 0.0
    grad_b = 4.0 if st.fp32_main_grads else 2.0
    ag = rs = 0.0
    for n, group, size in ((p.dense, "dps", sc.dp_shard * st.cp), (p.expert, "edp", sc.edp)):
        if size <= 1 or n <= 0:
            continue
        pb = param_gather_bytes(sc, p, group == "edp")
        if rs_calls:
            rs += comm.time("reduce_scatter", grad_b * n / rs_calls, group)
        else:
            rs += _bucketed(comm, "reduce_scatter", n, grad_b, group, size)
        if st.zero_stage >= 3:
            ag += comm.time("all_gather", pb * n / ag_calls, group) if ag_calls else _bucketed(comm, "all_gather", n, pb, group, size)
    return ag, rs


def dp_work(sc: Scenario, comm: CommModel, p: StageParams, chunks: tuple[StageParams, ...] = (),
            rank: int = 0, base: tuple | None = None) -> DPWork:
    """``_dp_work``, memoised on everything it reads: the rank's parameters and each chunk's, whether
    it is pipeline rank 0, and what the scenario and ``comm`` set for every rank (``dp_key``;
    ``base``: that key when the caller already has it for this ``sc`` and ``comm``). ``build_plan``
    asks for each rank kind's every time; a what-if edit of the schedule, the micro-batch size or
    recompute, or a search's next candidate of the same layout, changes none of it. DPWork is
    frozen: shared."""
    key = (p, chunks, rank == 0, dp_key(sc, comm) if base is None else base)
    try:
        hit = _WORK.get(key)
    except TypeError:  # a system holding a list (unhashable): computed every time
        return _dp_work(sc, comm, p, chunks, rank)
    if hit is None:
        hit = _dp_work(sc, comm, p, chunks, rank)
        remember(_WORK, key, hit, MAX_WORK)
    return hit


def dp_key(sc: Scenario, comm: CommModel) -> tuple:
    """What ``_dp_work`` reads besides a rank's parameters: the strategy fields and DP group sizes
    below, the system (the optimizer's HBM and launch costs; ``comm``'s tiers, built from it) and
    the placement of the groups its collectives run on (``_DP_GROUPS``, ``comm.places``)."""
    st = sc.strategy
    return (st.zero_stage, keeps_gathered(sc), st.fp32_main_grads, st.adam_moments_dtype, st.fp8_param_gather, st.dtype,
            st.overlap_grad_reduce, st.cp, st.framework, sc.dp, sc.dp_shard, sc.dp_replicas, sc.edp, sc.system,
            tuple(comm.places[g] for g in _DP_GROUPS))


_DP_GROUPS = ("dps", "dpr", "edp")   # the groups _chunk_collectives prices on (_dp_buffers, HSDP's replicas)
_WORK: dict[tuple, DPWork] = {}
MAX_WORK = 4096


def _dp_work(sc: Scenario, comm: CommModel, p: StageParams, chunks: tuple[StageParams, ...] = (),
             rank: int = 0) -> DPWork:
    """The DP work of pipeline rank ``rank`` holding ``p`` over its model chunks ``chunks`` (their
    parameters in chunk order; () = one chunk). Each chunk is its own DDP module with its own
    buffers (Megatron ``get_model`` wraps every model chunk), and only the first chunk of the first
    pipeline rank splits its buffers into buckets, and only with ``overlap_grad_reduce``
    (megatron/training/training.py ``per_chunk_bucket_sizes``: ``None if (chunk_idx > 0 or
    pp_rank > 0)``; distributed_data_parallel.py: "Set bucket_size to infinity if
    overlap_grad_reduce is False", "Turn off bucketing if we are on a pipeline stage that is not
    the first (since data-parallel communication on these stages is not on the critical path)").

    An unbucketed chunk's collectives run back to back as one entry, after every gradient of the
    chunk is ready (its final backward) and before its first forward. The engine splits a
    chunk's final backward and its first forward into one piece per entry of the chunk's group
    (sim/graph.py), so every chunk of a rank has the same number of entries: an unbucketed chunk's
    group is its one entry padded with zero-second entries — before it for the gradients (the
    reduce follows the last piece), after it for the parameters (the first piece waits for it).
    The counts do not depend on the DP overlap flags (the first rank's first chunk has as many
    entries as its buckets whether it runs them or not) nor, at ZeRO 0–2, on the stage (both
    lists have them): the engine compiles one structure for all of those candidates."""
    per = _chunk_params(p, chunks)
    st = sc.strategy
    grads: list[tuple[float, ...]] = []
    params: list[tuple[float, ...]] = []
    cap = max(1, MAX_BUCKETS // len(per))
    seen: dict[tuple, tuple[tuple[float, ...], tuple[float, ...]]] = {}  # interleaved chunks often hold the same
    for i, cp in enumerate(per):
        first = rank == 0 and i == 0
        key = (cp.dense, cp.expert, cp.ends, first)
        hit = seen.get(key)
        if hit is None:
            g, pa = _chunk_collectives(sc, comm, cp, first and bool(st.overlap_grad_reduce))
            g_m, p_m = _merge(g, cap), _merge(pa, cap)
            k = max(len(g_m), len(p_m))
            if k:
                k = max(k, min(_bucket_entries(sc, cp), cap) if first else 1)
            hit = seen[key] = (_pad(g_m, k, True), _pad(p_m, k, False))
        grads.append(hit[0])
        params.append(hit[1])
    return DPWork(_padded(grads, front=True), _padded(params, front=False), _optimizer_s(sc, p))


def _pad(group: tuple[float, ...], k: int, front: bool) -> tuple[float, ...]:
    pad = (0.0,) * (k - len(group))
    return pad + group if front else group + pad


def _bucket_entries(sc: Scenario, p: StageParams) -> int:
    """How many entries ``_chunk_collectives`` gives a bucketed chunk's gradients (at least its
    parameter gathers): one per bucket of each buffer with a DP group (``_repeat`` keeps at most
    MAX_BUCKETS), two with HSDP's replica all-reduce."""
    n_out = 0
    for n, _, size, replicas in _dp_buffers(sc, p):
        full, rest = _buckets(n, size * replicas)
        n_out += (min(full, MAX_BUCKETS) + (1 if rest > 0 else 0)) * (2 if replicas > 1 and sc.strategy.zero_stage >= 1 else 1)
    return n_out


def _dp_buffers(sc: Scenario, p: StageParams):
    """(parameters, group, group size, HSDP replicas) of each of a chunk's buffers that has a DP
    group: the dense one on DP×CP (the HSDP shard), the expert one on EDP."""
    for n, group, size, replicas in ((p.dense, "dps", sc.dp_shard * sc.strategy.cp, sc.dp_replicas), (p.expert, "edp", sc.edp, 1)):
        if size * replicas > 1 and n > 0:
            yield n, group, size, replicas


def sharded_buffers(sc: Scenario, p: StageParams):
    """(parameters, group, shard size) of each of a chunk's buffers that ZeRO-3 / FSDP shards: those
    of ``_dp_buffers`` whose shard group has more than one member (an HSDP group of one shard only
    replicates: nothing gathered, nothing copied)."""
    for n, group, size, _ in _dp_buffers(sc, p):
        if size > 1:
            yield n, group, size


def _chunk_params(p: StageParams, chunks: tuple[StageParams, ...]) -> list[StageParams]:
    """Each chunk's share of the rank's dense, expert and embedding/LM-head parameters: its own
    counts scaled so the shares add up to the rank's (a tied embedding held once per rank is
    counted once)."""
    if len(chunks) <= 1:
        return [p]
    n = len(chunks)
    d, e, x = (sum(getattr(c, f) for c in chunks) for f in ("dense", "expert", "ends"))
    return [StageParams(p.dense * c.dense / d if d > 0 else p.dense / n,
                        p.expert * c.expert / e if e > 0 else p.expert / n,
                        c.gemm_shapes, p.ends * c.ends / x if x > 0 else 0.0) for c in chunks]


def _padded(groups: list[tuple[float, ...]], front: bool) -> tuple[float, ...]:
    """The chunks' groups, each padded with zero-second entries to the longest (``dp_work``)."""
    k = max((len(g) for g in groups), default=0)
    return tuple(t for g in groups for t in _pad(g, k, front))


def _chunk_collectives(sc: Scenario, comm: CommModel, p: StageParams, bucketed: bool) -> tuple[list[float], list[float]]:
    """(gradient collectives, parameter all-gathers) of one chunk's buffers in launch order: per
    bucket of bucket_size = max(40M, 1M·dp) parameters when ``bucketed``, else one entry each
    holding the chunk's whole buffers run back to back."""
    st = sc.strategy
    z = 1 if keeps_gathered(sc) else st.zero_stage   # FSDP2 under a pipeline: ZeRO-1's collectives, once per step
    grad_b = 4.0 if st.fp32_main_grads else 2.0
    grads: list[float] = []
    params: list[float] = []
    for n, group, size, replicas in _dp_buffers(sc, p):
        pb = param_gather_bytes(sc, p, group == "edp")
        full, rest = _buckets(n, size * replicas) if bucketed else (0, n)
        for b, count in ((float(max(MIN_BUCKET_PARAMS, 1_000_000 * size * replicas)), full), (rest, 1 if rest > 0 else 0)):
            if not count:
                continue
            if z == 0:
                grads.extend(_repeat(comm.time("all_reduce", b * grad_b, group), count))
            elif z == 1:
                grads.extend(_repeat(comm.time("reduce_scatter", b * grad_b, group), count))
                params.extend(_repeat(comm.time("all_gather", b * pb, group), count))
            elif z == 2:  # grads were reduce-scattered per micro-batch; refresh the bf16 weights
                params.extend(_repeat(comm.time("all_gather", b * pb, group), count))
            # ZeRO-3: everything happens per micro-batch (microbatch_dp)
            if replicas > 1 and z >= 1:
                # HSDP: the replicas all-reduce their gradient shard once per step (torchtitan HSDP,
                # FSDP2 ``fully_shard`` on a 2-D mesh; Megatron partial DistOpt all-reduce across
                # instances) on the replica group, whose tier is the stride it spans
                grads.extend(_repeat(comm.time("all_reduce", b * grad_b / size, "dpr"), count))
    if not bucketed:
        return ([sum(grads)] if grads else []), ([sum(params)] if params else [])
    return grads, params


def _optimizer_s(sc: Scenario, p: StageParams) -> float:
    """The optimizer step of the rank's parameters ``p`` (module docstring)."""
    st, e = sc.strategy, sc.system.efficiency
    z = st.zero_stage
    grad_b = 4.0 if st.fp32_main_grads else 2.0
    dp, edp = sc.dp, sc.edp
    dpcp = sc.dp_shard * st.cp
    hbm = sc.system.gpu.hbm_bandwidth_gbs * 1e9 * e.hbm
    shard = p.dense / (dpcp if z >= 1 else 1) + p.expert / (edp if z >= 1 else 1)
    local = p.dense / (dpcp if z >= 2 else 1) + p.expert / (edp if z >= 2 else 1)
    # the grad buffer is zeroed and NaN-checked in full, and scaled by 1/dp in place before it is
    # reduced (Megatron DDP: check_for_nan_in_grad, gradient_scaling_factor when the collective
    # does not average) — 4 + 4 + 8 B per local gradient element of 4 B
    scaled = (p.dense / (dpcp if z >= 2 else 1) if dp * st.cp > 1 else 0.0) + (p.expert / (edp if z >= 2 else 1) if edp > 1 else 0.0)
    # per shard parameter: grad-norm read, clip read+write, Adam's grad read and the bf16 copy back
    # (18 B with fp32 grads, 16 with bf16), and Adam's states read and written (2 × 12 B; 2 × 8
    # with bf16 moments) — the module docstring's 42 B
    state_rw = 2.0 * optimizer_state_bytes(st.adam_moments_dtype)
    opt_bytes = grad_b * (2 * local + 2 * scaled) + ((18.0 if grad_b == 4.0 else 16.0) + state_rw) * shard
    # the Adam update itself as the framework implements it (fused multi-tensor Adam: 28 B per
    # local parameter in one launch; PyTorch foreach AdamW: more passes and launches —
    # config/framework.py::optimizer_adam_cost)
    adam_b, adam_ops = optimizer_adam_cost(st.framework)
    opt_bytes += (adam_b - 28.0) * shard
    return opt_bytes / hbm + (OPTIMIZER_KERNELS + adam_ops - 1) * e.kernel_overhead_us * 1e-6 + _kept_copies(sc, p) / hbm


def _kept_copies(sc: Scenario, p: StageParams) -> float:
    """Bytes of FSDP2's once-per-step copies on the compute stream under a pipeline
    (``keeps_gathered``), carried by the optimizer task between the step's gradient reduce-scatter
    and parameter all-gather (``_chunk_collectives``): after the last backward ``foreach_reduce``'s
    ``foreach_reduce_scatter_copy_in`` (_fsdp_collectives.py, ``chunk_cat``) reads every
    accumulated unsharded gradient and writes the reduce-scatter input, both in the reduce dtype
    (fp32 with torchtitan's ``mixed_precision_reduce``: 4 + 4 B; ``FSDPParam.
    to_accumulated_grad_if_needed`` left it there — cost/zero.py ``fsdp2_accumulation``); before
    the first forward ``foreach_all_gather_copy_out`` in ``FSDPParamGroup.wait_for_unshard`` reads
    the gathered buffer and writes the unsharded parameters (``param_gather_bytes`` each way) —
    the per-micro-batch copies of cost/zero.py ``fsdp2_copies``, here once. Their launches (one a
    unit each) are left out: ~2 per layer a step."""
    if not keeps_gathered(sc):
        return 0.0
    st = sc.strategy
    grad_b = 4.0 if st.fp32_main_grads else 2.0
    return sum((2.0 * grad_b + 2.0 * param_gather_bytes(sc, p, group == "edp")) * n for n, group, _ in sharded_buffers(sc, p))


MAX_BUCKETS = 64  # more buckets than this change nothing the timeline can show


def _repeat(t: float, count: int) -> list[float]:
    """``count`` equal buckets, pre-merged into at most MAX_BUCKETS entries (time conserved)."""
    if count <= MAX_BUCKETS:
        return [t] * count
    return [t * (count // MAX_BUCKETS + (1 if i < count % MAX_BUCKETS else 0)) for i in range(MAX_BUCKETS)]


def _merge(times: list[float], cap: int = MAX_BUCKETS) -> tuple[float, ...]:
    """At most ``cap`` consecutive groups, time conserved: a 100-trillion-parameter stage
    would otherwise make millions of bucket tasks (and a huge pipeline graph)."""
    n = len(times)
    if n <= cap:
        return tuple(times)
    out = []
    for i in range(cap):
        lo, hi = i * n // cap, (i + 1) * n // cap
        out.append(float(sum(times[lo:hi])))
    return tuple(out)


def num_buckets(n_params: float, dp: int) -> int:
    return math.ceil(n_params / max(MIN_BUCKET_PARAMS, 1_000_000 * dp)) if n_params > 0 else 0
