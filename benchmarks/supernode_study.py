"""DeepSeek-V3 on 1024 H100-class GPUs (tp 2, pp 2): tokens/s as the scale-up domain grows.

Run: python benchmarks/supernode_study.py [--dispatcher alltoall|deepep] [--etp N]
(prints the README's markdown table; the defaults are Megatron's alltoall dispatcher and expert
TP = tp. Megatron-Bridge's DeepSeek-V3 recipes run etp 1 with the flex dispatcher.)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simengine import presets  # noqa: E402
from simengine.studies import scale_up_domain_study  # noqa: E402

EPS, DOMAINS = (64, 128, 256), (8, 64, 128, 256)


def base_config() -> dict:
    system = presets.load_preset("systems", "h100-sxm5-80gb")
    system["num_gpus"] = 1024
    return {"model": presets.load_preset("models", "deepseek-v3"), "system": system,
            "strategy": {"name": "deepseek-v3 supernode study", "tp": 2, "pp": 2, "ep": 64, "micro_batch_size": 1,
                         "global_batch_size": 4096, "seq_len": 4096, "zero_stage": 1, "recompute": "full"}}


# the published supernode study's gains over a domain of 8, (ep, domain) → % (README "MoE study")
PUBLISHED = {(64, 64): 20.6, (64, 256): 62.6, (128, 128): 14.3, (128, 256): 69.1, (256, 256): 71.6}


def study(dispatcher: str | None = None, etp: int | None = None) -> dict:
    """ep → {domain → tokens/s} (``studies.scale_up_domain_study``), with the dispatcher and expert TP."""
    cfg = base_config()
    for key, value in (("moe_dispatcher", dispatcher), ("etp", etp)):
        if value is not None:
            cfg["strategy"][key] = value
    return scale_up_domain_study(cfg, EPS, DOMAINS)


def _gain(table: dict, ep: int, d: int) -> float:
    return (table[ep][d] / table[ep][DOMAINS[0]] - 1) * 100


def table_md(table: dict) -> str:
    lines = ["| ep | " + " | ".join(f"domain {d}" for d in DOMAINS) + " |", "|---|" + "---|" * len(DOMAINS)]
    for ep, row in table.items():
        lines.append(f"| {ep} | " + " | ".join(f"{row[d] / 1e3:,.0f}k ({_gain(table, ep, d):+.0f} %)" for d in DOMAINS) + " |")
    return "\n".join(lines)


def comparison_md(alltoall: dict, deepep: dict) -> str:
    """The published gains beside ours with each dispatcher (README's second table)."""
    lines = ["| ep | domain | published | simengine (alltoall, etp = tp) | simengine (deepep, etp 1) |", "|---|---|---|---|---|"]
    for (ep, d), pub in PUBLISHED.items():
        lines.append(f"| {ep} | {d} | +{pub:.1f} % | {_gain(alltoall, ep, d):+.0f} % | {_gain(deepep, ep, d):+.0f} % |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    dispatcher = argv[argv.index("--dispatcher") + 1] if "--dispatcher" in argv else None
    etp = int(argv[argv.index("--etp") + 1]) if "--etp" in argv else None
    print(table_md(study(dispatcher, etp)))


if __name__ == "__main__":
    main(sys.argv[1:])
