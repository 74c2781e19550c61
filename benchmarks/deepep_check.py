"""DeepEP's published internode dispatch bandwidth vs simengine's hierarchical-dispatch mechanism.

DeepEP README (deepseek-ai/DeepEP @567632d, "Normal kernels with NVLink and RDMA forwarding"):
H800 (~160 GB/s NVLink), one CX7 400 Gb/s NIC per GPU (~50 GB/s), 4096 tokens per rank, hidden
7168, top-4 groups, top-8 experts, FP8 dispatch. It prints the *logical* RDMA bandwidth:
tests/test_internode.py divides ``num_rdma_token_sent · hidden`` (one row per destination node,
the sender's own node included) by the kernel time. simengine prices the same dispatch
(cost/moe_comm.py) at the nominal bandwidths with efficiency 1, so the ratio measured / predicted
is the efficiency the kernel reaches on its bottleneck tier — nothing here is fitted.

Since cost/hybridep.py the cross-node leg runs at HybridEP's measured share of the NIC (its H100 table),
not at the system's collective efficiency, so the first table now compares DeepEP's normal kernels
(20+ SMs, FP8) with HybridEP's 16-SM efficiency: DeepEP reaches more (ratios > 1 at 4 and 8 nodes).

HybridEP (the backend Megatron-Bridge's H100/B200 MoE recipes use; deepseek-ai/DeepEP branch hybrid-ep
@94a9f8f docs/README_Hybrid-EP.md, "H100 Platform"): H100, 4096 tokens, hidden 7168, top-8, uniform
random router, 8 local experts per rank, BF16 dispatch, "IB bandwidth" = algorithm bandwidth with the
sender's own node counted (tests/utils.py count_rdma_send_from_routing_map: "to align with DeepEP, we do
not set the local node map to zeros") — the same logical figure. Its 16-rank case is Qwen3-30B-A3B's
routing at ep 16 (128 experts, top-8). Priced on the DGX H100 preset (450 GB/s NVLink, 50 GB/s NIC):
"before" at the collective default (scale-out 0.80), "now" with cost/hybridep.py (API / now = 1 by
construction: the check that the bytes, the node count and the column are wired as the README's test).

The B200 table (8 ranks, one NVLink domain, 16 SMs) against the engine's scale-up leg at the
collective default (0.75 of 900 GB/s): the kernel reaches less, but as a cap it moved the one-domain
B200 rows away from their measurements, so it is printed, not applied (cost/hybridep.py).

Run: python benchmarks/deepep_check.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simengine import presets  # noqa: E402
from simengine.config import load_scenario  # noqa: E402
from simengine.cost.comm import CommModel  # noqa: E402
from simengine.cost.moe_comm import a2a_time, tier_bytes  # noqa: E402
from simengine.workload.builder import build_workload  # noqa: E402
from simengine.workload.dispatch import ExpertAllToAll  # noqa: E402
from simengine.workload.routing import expected_units_hit  # noqa: E402

PUBLISHED_GBS = {16: 43.0, 32: 58.0, 64: 51.0}  # README table, dispatch, "Bottleneck bandwidth (RDMA)"


def scenario(ep: int):
    system = presets.load_preset("systems", "h100-sxm5-80gb")
    system.update(name="H800 + CX7 (DeepEP README)", num_gpus=ep)
    system["scale_up"] = {**system["scale_up"], "bandwidth_gbs": 160.0}
    system["scale_out"] = {**system["scale_out"], "bandwidth_gbs": 50.0}
    system["efficiency"] = {"collective_scale_up": 1.0, "collective_scale_out": 1.0, "collective_overhead_us": 0.0}
    strategy = {"tp": 1, "pp": 1, "ep": ep, "etp": 1, "micro_batch_size": 1, "global_batch_size": ep, "seq_len": 4096,
                "moe_dispatcher": "deepep", "moe_dispatch_dtype": "fp8"}
    return load_scenario({"model": presets.load_preset("models", "deepseek-v3"), "system": system, "strategy": strategy})


# README_Hybrid-EP.md H100 table, BF16 dispatch, 16 SMs: (Torch API, kernel only) GB/s
HYBRIDEP_H100_BF16 = {16: (54.47, 71.71), 32: (47.36, 57.69), 64: (41.24, 49.97)}


def hybridep_scenario(ep: int, scale_out_eff: float = 0.80, gpu: str = "h100-sxm5-80gb"):
    system = presets.load_preset("systems", gpu)
    system.update(num_gpus=ep)
    system["efficiency"] = {"collective_scale_up": 0.75, "collective_scale_out": scale_out_eff, "collective_overhead_us": 0.0}
    model = presets.load_preset("models", "deepseek-v3")
    model.update(num_experts=8 * ep, n_group=None, topk_group=None, num_shared_experts=0, mtp_layers=0)
    strategy = {"tp": 1, "pp": 1, "ep": ep, "etp": 1, "micro_batch_size": 1, "global_batch_size": ep, "seq_len": 4096,
                "moe_dispatcher": "deepep"}
    return load_scenario({"model": model, "system": system, "strategy": strategy})


def _dispatch(sc) -> ExpertAllToAll:
    return next(o for o in build_workload(sc).blocks["moe"].fwd if isinstance(o, ExpertAllToAll) and o.name.endswith(":dispatch"))


def hybridep_table() -> None:
    print()
    print("| ranks | nodes | dest. nodes/token | before: logical GB/s (NCCL 0.80) | now (cost/hybridep.py) | HybridEP Torch API | kernel only | API / before | API / now |")
    print("|---|---|---|---|---|---|---|---|---|")
    for ep, (api, kernel) in HYBRIDEP_H100_BF16.items():
        sc = hybridep_scenario(ep)
        comm = CommModel(sc)
        op = _dispatch(sc)
        nodes = ep // comm.places["ep"].in_domain
        h_node = expected_units_hit(op.experts, op.top_k, nodes, op.n_group, op.topk_group)
        up_b, out_b = tier_bytes(comm, op)
        up, out = comm.tiers[("all_to_all", "scale_up")], comm.tiers[("all_to_all", "scale_out")]
        before = out.overhead_s + out.latency_s + up.latency_s + max(up_b / up.bandwidth_Bps, out_b / out.bandwidth_Bps)
        logical = op.tokens * h_node * op.row_bytes
        b_gbs, n_gbs = logical / before / 1e9, logical / a2a_time(comm, op) / 1e9
        print(f"| {ep} | {nodes} | {h_node:.2f} | {b_gbs:.1f} | {n_gbs:.1f} | {api:.1f} | {kernel:.1f} | {api / b_gbs:.2f} | {api / n_gbs:.2f} |")


# README_Hybrid-EP.md B200 table, HybridEP Torch API, 16 SMs, 8 ranks: Dispatch (BF16), Combine GB/s
HYBRIDEP_B200 = (535.94, 530.86)


def b200_table() -> None:
    sc = hybridep_scenario(8, gpu="b200-sxm-180gb")
    comm = CommModel(sc)
    op = _dispatch(sc)
    h_rank = expected_units_hit(op.experts, op.top_k, 8)
    logical = op.tokens * h_rank * op.row_bytes  # rows received, own rank's included (test_hybrid_ep.py)
    pred = logical / a2a_time(comm, op) / 1e9
    print()
    print("| B200 8 ranks | predicted NVL GB/s (0.75 of 900) | HybridEP Torch API dispatch / combine | API / predicted |")
    print("|---|---|---|---|")
    print(f"| ep 8 | {pred:.0f} | {HYBRIDEP_B200[0]:.0f} / {HYBRIDEP_B200[1]:.0f} | {HYBRIDEP_B200[0] / pred:.2f} |")


def main() -> None:
    print("| EP | nodes | dest. nodes/token | bound | predicted logical RDMA GB/s | DeepEP README GB/s | measured / predicted |")
    print("|---|---|---|---|---|---|---|")
    for ep, measured in PUBLISHED_GBS.items():
        sc = scenario(ep)
        comm = CommModel(sc)
        op = next(o for o in build_workload(sc).blocks["moe"].fwd if isinstance(o, ExpertAllToAll) and o.name.endswith(":dispatch"))
        nodes = ep // comm.places["ep"].in_domain
        h_node = expected_units_hit(op.experts, op.top_k, nodes, op.n_group, op.topk_group)
        up, out = tier_bytes(comm, op)
        bound = "RDMA" if out / 50e9 >= up / 160e9 else "NVLink"
        logical = op.tokens * h_node * op.row_bytes / a2a_time(comm, op) / 1e9
        print(f"| {ep} | {nodes} | {h_node:.2f} | {bound} | {logical:.1f} | {measured:.0f} | {measured / logical:.2f} |")
    hybridep_table()
    b200_table()


if __name__ == "__main__":
    main()
