"""Report downloads and the token-budget projection (pure)."""

from __future__ import annotations

import json
from typing import Any

from simengine.api import time_and_cost_to_train as to_train

from .text import csv_text
from .units import unit_for

_HEADLINE_UNITS = {
    "step_time_s": "s", "tokens_per_s": "tokens/s", "tokens_per_s_per_gpu": "tokens/s/GPU", "mfu": "fraction",
    "hfu": "fraction", "peak_memory_gib": "GiB", "reserved_memory_gib": "GiB", "memory_capacity_gib": "GiB",
    "num_parameters": "parameters", "num_active_parameters": "parameters", "num_trainable_parameters": "parameters", "model_flops_per_step": "FLOP",
    "hardware_flops_per_step": "FLOP", "cost_per_step_usd": "USD", "cost_per_million_tokens_usd": "USD",
    "energy_per_step_j": "J", "num_microbatches": "micro-batches", "dp": "replicas", "num_gpus": "GPUs",
    "tokens_per_step": "tokens", "bubble_fraction": "fraction", "bubble_fraction_max": "fraction", "fits": "bool", "gpu_us_per_launch": "µs",
    "mfu_causal": "fraction", "model_flops_per_token": "FLOP", "critical_rank": "pipeline rank",
}


def report_csv(report: dict[str, Any]) -> str:
    """Long CSV: section, key, value, unit (headline, time breakdown, memory per stage, warnings)."""
    rows: list[list[Any]] = [["section", "key", "value", "unit"]]
    for k, v in report.items():
        if isinstance(v, (int, float, bool, str)):
            rows.append(["headline", k, v, _HEADLINE_UNITS.get(k, unit_for(k))])
    for k, v in (report.get("breakdown_s") or {}).items():
        rows.append(["breakdown", k, v, "s"])
    for m in report.get("memory_by_stage") or []:
        for k, v in m.items():
            if k != "stage":
                rows.append([f"memory.stage{m.get('stage')}", k, v, unit_for(k) or ("micro-batches" if "microbatch" in k else
                                                                              "bool" if isinstance(v, bool) else "")])
    for k, pair in (report.get("uncertainty") or {}).items():
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            unit = _HEADLINE_UNITS.get(k, unit_for(k))
            rows.append(["uncertainty", f"{k}.low", pair[0], unit])
            rows.append(["uncertainty", f"{k}.high", pair[1], unit])
    for msg in report.get("warnings") or []:
        rows.append(["warning", "", msg, ""])
    for msg in report.get("notes") or []:
        rows.append(["note", "", msg, ""])
    return csv_text(rows)


def report_json(report: dict[str, Any], scenario: dict[str, Any], link: str) -> str:
    return json.dumps({"scenario": scenario, "report": report, "share_link": link}, indent=2)


def budget(report: dict[str, Any], tokens: float) -> dict[str, float]:
    """Wall time, GPU-hours, cost and energy to train ``tokens`` at the reported throughput."""
    seconds, cost = to_train(tokens, float(report["tokens_per_s"]), float(report["cost_per_million_tokens_usd"]))
    steps = tokens / float(report["tokens_per_step"]) if report.get("tokens_per_step") else float("nan")
    return {
        "seconds": seconds, "steps": steps,
        "gpu_hours": seconds / 3600 * float(report["num_gpus"]),
        "cost_usd": cost,
        "energy_mwh": float(report["energy_per_step_j"]) * steps / 3.6e9 if steps == steps else float("nan"),
    }


def compare_rows(items: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Comparison table rows from (label, scenario, report)."""
    rows = []
    for label, sc, r in items:
        s = sc["strategy"]
        rows.append({
            "scenario": label,
            "model": sc["model"].get("name", ""),
            "system": f"{sc['system']['num_gpus']}× {sc['system']['gpu']['name']}",
            "layout": f"tp{s['tp']} pp{s['pp']} cp{s['cp']} ep{s['ep']} vpp{s['vpp']} dp{r['dp']} {s['schedule']}",
            "step time [s]": r["step_time_s"], "tokens/s": round(r["tokens_per_s"]),
            "tokens/s/GPU": round(r["tokens_per_s_per_gpu"]), "MFU [%]": 100 * r["mfu"], "HFU [%]": 100 * r["hfu"],
            "peak alloc [GiB]": r["peak_memory_gib"], "reserved [GiB]": r["reserved_memory_gib"],
            # to 1e-9 %: a pp 1 step's bubble is the rounding of step − compute − exposed (5e-13 %)
            "fits": r["fits"], "bubble [%]": round(100 * r["bubble_fraction"], 9) + 0.0,
            "USD / 1M tokens": r["cost_per_million_tokens_usd"],
        })
    return rows
