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


def main(argv: list[str]) -> None:
    cfg = base_config()
    for flag, key, cast in (("--dispatcher", "moe_dispatcher", str), ("--etp", "etp", int)):
        if flag in argv:
            cfg["strategy"][key] = cast(argv[argv.index(flag) + 1])
    table = scale_up_domain_study(cfg, EPS, DOMAINS)
    print("| ep | " + " | ".join(f"domain {d}" for d in DOMAINS) + " |")
    print("|---|" + "---|" * len(DOMAINS))
    for ep, row in table.items():
        first = row[DOMAINS[0]]
        cells = [f"{row[d] / 1e3:,.0f}k ({(row[d] / first - 1) * 100:+.0f} %)" for d in DOMAINS]
        print(f"| {ep} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
