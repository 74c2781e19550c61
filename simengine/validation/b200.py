"""Measured runs as scenarios: maps rows of the bundled b200_megatron_runs.csv (data/) onto
(model, system, strategy) dicts, so the CLI, the tests and the README's error table run exactly the
launched configurations. Pure functions over CSV text; nothing here is tuned to the rows."""

from __future__ import annotations

import csv
import os
import io
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class MeasuredRun:
    case: str
    family: str
    config: dict[str, Any]
    real_ms: float
    real_alloc_gib: float
    peer_ms: float | None
    peer_alloc_gib: float | None


def _f(row: dict[str, str], key: str) -> float | None:
    v = (row.get(key) or "").strip()
    try:
        return float(v) if v else None
    except ValueError:
        return None


def _i(row: dict[str, str], key: str, default: int | None = None) -> int | None:
    v = _f(row, key)
    return int(v) if v is not None else default


def _need(row: dict[str, str], key: str) -> int:
    """A column every row must fill (an empty one is not a b200_megatron_runs.csv table)."""
    v = _i(row, key)
    if v is None:
        raise ValueError(f"column {key!r} is empty in case {row.get('case', '?')!r}")
    return v


def _model(row: dict[str, str]) -> dict[str, Any]:
    moe = row["model_type"] == "moe"
    m: dict[str, Any] = {
        "name": f"{row['model']} ({row['num_layers_used']} layers)",
        "source": "simengine/validation/data/b200_megatron_runs.csv (model as launched)",
        "hidden_size": _i(row, "hidden_size"),
        "num_layers": _i(row, "num_layers_used"),
        "num_attention_heads": _i(row, "num_attention_heads"),
        "ffn_hidden_size": _i(row, "ffn_hidden_size"),
        # Megatron's NullTokenizer adds one token before padding (validation README)
        "vocab_size": _need(row, "vocab_size_arg") + 1,
        "activation": row["activation"],
        "norm": row["norm"],
        "tie_embeddings": row["untie_embeddings_and_output_weights"] != "True",
        "linear_bias": row["linear_bias"] == "True",
    }
    if row["attention_type"] == "mla":
        m.update(attention="mla", q_lora_rank=_i(row, "q_lora_rank"), kv_lora_rank=_i(row, "kv_lora_rank"),
                 qk_nope_head_dim=_i(row, "qk_head_dim"), qk_rope_head_dim=_i(row, "qk_pos_emb_head_dim"),
                 v_head_dim=_i(row, "v_head_dim"))
    else:
        m.update(attention="gqa", num_kv_heads=_i(row, "num_kv_heads"), head_dim=_i(row, "head_dim"))
    if moe:
        ff = _i(row, "moe_ffn_hidden_size")
        m.update(num_experts=_i(row, "num_experts"), top_k=_i(row, "moe_topk"), moe_ffn_hidden_size=ff,
                 shared_expert_ffn_hidden_size=_i(row, "moe_shared_expert_intermediate_size"),
                 first_k_dense_layers=_i(row, "dense_layers_used", 0),
                 capacity_factor=_f(row, "moe_capacity_factor") if row.get("moe_pad_expert_input_to_capacity") == "True" else None)
    return m


def _strategy(row: dict[str, str]) -> dict[str, Any]:
    pp = _i(row, "pp", 1)
    return {
        "name": row["case"],
        "tp": _i(row, "tp", 1), "pp": pp, "dp": _i(row, "dp", 1), "cp": _i(row, "cp", 1),
        "ep": _i(row, "ep", 1), "etp": _i(row, "etp", 1) if row["model_type"] == "moe" else None,
        "vpp": _i(row, "vp", 1) or 1,
        "sequence_parallel": row["sequence_parallel"] == "True",
        "micro_batch_size": _i(row, "micro_batch_size", 1),
        "global_batch_size": _i(row, "global_batch_size"),
        "seq_len": _i(row, "seq_len"),
        "dtype": row["dtype"],
        "zero_stage": 1 if row["distributed_optimizer"] == "True" else 0,
        "recompute": "none" if row["recompute"] == "none" else "full",
        "schedule": "1f1b",
        "overlap_grad_reduce": row["overlap_grad_reduce"] == "True",
        "overlap_param_gather": row["overlap_param_gather"] == "True",
        "tp_comm_overlap": row["tp_comm_overlap"] == "True",
        "moe_dispatcher": "allgather" if row.get("moe_token_dispatcher") == "allgather" else "alltoall",
        "cp_comm_type": {"a2a": "a2a", "p2p": "p2p", "all_gather": "allgather"}.get(row.get("cp_comm_type") or "", "p2p"),
        "fused_cross_entropy": row["cross_entropy_fusion"] in ("te", "True", "native"),
        "gradient_accumulation_fusion": row["gradient_accumulation_fusion"] == "True",
        "fp32_main_grads": row["main_grad_dtype"] == "fp32",
    }


def b200_runs(csv_text: str, system: dict[str, Any]) -> list[MeasuredRun]:
    """Rows of b200_megatron_runs.csv as scenario dicts on ``system`` (num_gpus set per row)."""
    try:
        rows = list(csv.DictReader(io.StringIO(csv_text)))
        out = []
        for row in rows:
            sysd = dict(system)
            sysd["num_gpus"] = _i(row, "world_size")
            cfg = {"model": _model(row), "system": sysd, "strategy": _strategy(row)}
            out.append(MeasuredRun(row["case"], row["family"], cfg, float(row["real_ms"]), float(row["real_alloc_gib"]),
                                   _f(row, "simumax_perf_ms"), _f(row, "simumax_perf_alloc_gib")))
        return out
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError([("validation_csv", f"not a b200_megatron_runs.csv table: {e}")]) from e


def b200_system(preset: dict[str, Any], op_efficiency_csv: "str | os.PathLike | None" = None, nccl_fits: dict[str, Any] | None = None) -> dict[str, Any]:
    """The B200 system preset, optionally calibrated with the measured B200 operator table
    (data/b200_op_efficiency.csv, as a path or its text) and measured NCCL fits
    (presets/calibration/b200-nccl-fits.json)."""
    from ..calibration.calibrate import load_b200_system_efficiency
    from ..config.system import CollectivePoint

    system = dict(preset)
    if op_efficiency_csv is None and nccl_fits is None:
        return system
    eff = dict(system.get("efficiency") or {})
    if op_efficiency_csv is not None:
        loaded = load_b200_system_efficiency(op_efficiency_csv, hbm_bandwidth_gbs=system["gpu"]["hbm_bandwidth_gbs"])
        eff.update(loaded.model_dump(mode="json", exclude={"collective_table"}))
    if nccl_fits is not None:
        eff["collective_table"] = [CollectivePoint.model_validate(p).model_dump(mode="json") for p in nccl_fits["collective_table"]]
        eff["source"] = (eff.get("source", "") + "; " + nccl_fits.get("source", ""))[:2000]
    system["efficiency"] = eff
    return system
