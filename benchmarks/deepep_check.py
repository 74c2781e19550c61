"""DeepEP's published internode dispatch bandwidth vs simengine's hierarchical-dispatch mechanism.

DeepEP README (deepseek-ai/DeepEP @567632d, "Normal kernels with NVLink and RDMA forwarding"):
H800 (~160 GB/s NVLink), one CX7 400 Gb/s NIC per GPU (~50 GB/s), 4096 tokens per rank, hidden
7168, top-4 groups, top-8 experts, FP8 dispatch. It prints the *logical* RDMA bandwidth:
tests/test_internode.py divides ``num_rdma_token_sent · hidden`` (one row per destination node,
the sender's own node included) by the kernel time. simengine prices the same dispatch
(cost/moe_comm.py) at the nominal bandwidths with efficiency 1, so the ratio measured / predicted
is the efficiency the kernel reaches on its bottleneck tier — nothing here is fitted.

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


if __name__ == "__main__":
    main()
