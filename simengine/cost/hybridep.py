"""What share of a link's nominal bandwidth the flex dispatcher's kernel reaches, per network tier.

Megatron-Bridge's MoE recipes run the flex dispatcher on HybridEP (``moe_flex_dispatcher_backend =
"hybridep"``, ``moe_hybridep_num_sms = 32``: scripts/performance/utils/overrides.py, r0.4.0). Its
published measurements (deepseek-ai/DeepEP branch hybrid-ep @94a9f8f, docs/README_Hybrid-EP.md,
uniform random router, 4096 tokens, hidden 7168, top-8, 8 local experts per rank) are kernel
efficiencies, not fits to any training run. They are "Torch API" times — kernel + device-to-device
copy + flag/sync work (tests/test_hybrid_ep.py "Non-permute: dispatch = dispatch_kernel + d2d +
misc") — without the permute, which simengine prices as its own memory op (workload/layers.py).

Bandwidths there are *algorithm* bandwidths: bytes of every destination counted, the sender's own
node (RDMA, tests/utils.py count_rdma_send_from_routing_map "we do not set the local node map to
zeros") or own rank (NVLink: ``dispatched_hidden.numel() * 2``, rows received from all ranks)
included. Of those bytes a share (u−1)/u really crosses the tier (u = nodes, or ranks per domain),
the share simengine's ``tier_bytes`` counts, so the kernel's efficiency on the tier is

    efficiency = algbw · (u − 1)/u / nominal

- scale-out: the H100 table (one 400 Gb/s CX7 per GPU = 50 GB/s nominal; RDMA-bound there: the
  NVLink leg needs < 2/3 of the RDMA leg's time at the nominal bandwidths), 16 SMs per API —
  the most the table lists; bandwidth is flat from 8 SMs on (dispatch 57.74 → 54.47 GB/s at 16
  ranks), so the recipes' 32 SMs read the 16-SM row. Nodes between 2 and 8 interpolate linearly in
  log2(nodes); beyond, the nearest end.
- scale-up: not from these tables. The B200 one (8 ranks, one NVLink-5 domain, HybridEP Torch API,
  16 SMs: 535.94 GB/s algbw, i.e. 469 of the 900 GB/s per direction) is the kernel's own ceiling,
  not a share of the link (GB200's HybridEP is flat from 16 to 32 SMs, 550.10 → 545.71), and as a
  cap on the NVLink leg it moved every one-domain B200 row away from its measurement (Qwen3-30B
  B200 ep8 −10.6 → −15.5 %, DeepSeek-V3 B200 −4.9 → −6.0 %): left out, the leg keeps the tier's
  collective bandwidth (benchmarks/deepep_check.py prints the comparison).

Not modelled (looked at when this share was introduced):
- the share is per byte, so a smaller message (Qwen3-30B's hidden 2048 against the table's 7168) keeps
  it. Fitted as t = t0 + cross-node bytes / B over the 2/4/8-node rows the table reads t0 ≈ 0.67 ms,
  B ≈ 0.79 of the NIC; every row has 4096 tokens and hidden 7168, so whether t0 is per call, per
  token or per byte cannot be told from it.
- ``metadata_preprocess`` (csrc/hybrid_ep/executor/executor.cu allgather_routing_map: an NCCL
  all_gather_into_tensor of the bool routing map [T, E] over the EP group when nodes > 1, then the
  metadata kernel on moe_hybridep_num_sms_preprocessing = 108 SMs): run by every forward dispatch in
  Megatron (HybridEPDispatch gets no handle; _HybridEPManager.combine drops it), excluded from the
  README's figures (tests/test_hybrid_ep.py benchmarks with a cached ``handle``). Not HybridEP-only in
  simengine's "deepep" dispatcher (DeepEP's normal kernels have no such all-gather), so it waits
  for a backend field.

Columns: a forward dispatch reads "Dispatch (BF16)" or "Dispatch (FP8)"; a combine "Combine".
Backward swaps them (Megatron-Core fused_a2a.py HybridEPDispatch.backward calls
``combine_with_unpermute``, HybridEPCombine.backward ``dispatch_with_permute``): the gradient of a
dispatch runs the combine kernel, the gradient of a combine the BF16 dispatch kernel.
"""

from __future__ import annotations

import math

_IB_NOMINAL_GBS = 50.0    # DGX H100: one ConnectX-7 NDR 400 Gb/s per GPU

# README_Hybrid-EP.md "H100 Platform", Torch API, SM count 16: nodes → (Dispatch BF16, Dispatch FP8, Combine) GB/s
_OUT_ALGBW = {2: (54.47, 48.26, 53.35), 4: (47.36, 42.10, 52.53), 8: (41.24, 35.01, 46.57)}


def column(name: str, wire: str) -> int:
    """Table column (0 Dispatch BF16, 1 Dispatch FP8, 2 Combine) of an ExpertAllToAll, by its leg
    (the name's tail: dispatch / combine forward, ddispatch / dcombine their gradients)."""
    leg = name.rsplit(":", 1)[-1]
    if leg in ("combine", "ddispatch"):
        return 2
    return 1 if leg == "dispatch" and wire == "fp8" else 0


def scale_out_efficiency(nodes: int, col: int) -> float:
    """Achieved share of the NIC bandwidth on the cross-node leg for a group over ``nodes`` domains."""
    keys = sorted(_OUT_ALGBW)
    x = min(max(math.log2(max(nodes, 2)), math.log2(keys[0])), math.log2(keys[-1]))

    def eff(n: int) -> float:
        return _OUT_ALGBW[n][col] * (n - 1) / n / _IB_NOMINAL_GBS

    for lo, hi in zip(keys, keys[1:]):
        a, b = math.log2(lo), math.log2(hi)
        if x <= b:
            w = (x - a) / (b - a)
            return (1 - w) * eff(lo) + w * eff(hi)
    return eff(keys[-1])
