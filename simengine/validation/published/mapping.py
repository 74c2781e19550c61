"""One published run (its metric rows) → a scenario dict; the whole CSV → runs and skipped runs."""

from __future__ import annotations

import csv
import io
from typing import Any

from ...errors import ConfigError
from .mbridge_recipes import MISPRINTED
from .cells import NOT_STATED, _dtype, _int, _layout, _model, _s, _source_key, _system, _vpp
from .settings import SOURCE_SETTINGS, Draft
from .types import PublishedRun, SkippedRun, _Skip


def _draft(rows: list[dict[str, str]], src: str) -> Draft:
    """The cells every source's row carries: model, layout, sequence, dtype, batch sizes."""
    row = rows[0]
    rid = row["run_id"]
    a: list[str] = []
    if src == "megatron-readme" and "strong" in rid:
        raise _Skip("tp/pp not stated (strong-scaling text gives only MFU endpoints)")
    if rid in MISPRINTED:
        raise _Skip(MISPRINTED[rid])
    seq = _int(row, "seq_len") or _recipe_seq_len(src, rid, a)
    model = _model(row, a)
    gpus, tp, pp, cp, dp = _layout(row)
    layers = int(model["num_layers"])
    if not seq:
        raise _Skip("seq_len not stated")
    dtype = _dtype(row, a)
    mb = _int(row, "micro_batch")
    gbs = _int(row, "global_batch_seqs")
    strat: dict[str, Any] = {"name": rid, "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": _int(row, "ep") or 1,
                             "seq_len": seq, "dtype": dtype}
    if dtype == "fp8":
        strat["fp8_recipe"] = _fp8_recipe(src, row, a)
    if "lora" in rid.lower():
        strat.update(peft="lora", lora_rank=32, lora_targets="qkv")
        a.append("LoRA rank 32 on the fused QKV projection: NeMo 1.0 lora_tuning (adapter_dim 32, target_modules "
                 "['attention_qkv']) and Megatron-Bridge's performance recipes (peft.target_modules = ['linear_qkv'])")
    if strat["ep"] > 1:
        # NeMo / Megatron-Bridge MoE recipes set expert_tensor_parallel_size=1 explicitly (the
        # Megatron default would be tp); the rows do not print it
        strat["etp"] = 1
        a.append("etp=1 (recipe default for MoE)")
    sp_cell = _s(row, "sp").lower()
    sp = sp_cell.startswith("yes") if sp_cell else None
    return Draft(row, rid, model, gpus, layers, seq, dtype, tp, pp, dp, mb, gbs, sp, _vpp(row), strat, {"gpus": gpus}, a)


def _fp8_recipe(src: str, row: dict[str, str], a: list[str]) -> str:
    """The scaling recipe an FP8 row ran (StrategySpec.fp8_recipe): the page's own word where it
    gives one, else its stack's recipe of that release."""
    cell, gpu = _s(row, "dtype").lower(), _s(row, "gpu_type").lower()
    if "rowwise" in cell:
        return "rowwise"  # torchao Float8LinearRecipeName.ROWWISE (the page's "float8 rowwise")
    if src == "megatron-bridge" and ("mx" in cell or ("alternate" in cell and "b200" in gpu)):
        # "FP8-MX" / "MXFP8"; 25.09's alternate granularity on B200 is MX (the table's note: "GB200/B200
        # 32x32"; r0.1.0 configs/*_llm_pretrain.yaml list fp8_cs and fp8_mx for B200)
        return "mxfp8"
    if src == "nemo":
        # NeMo 24.07 runs TransformerEngine 1.x, whose only FP8 recipe is DelayedScaling
        # (transformer_engine/common/recipe/__init__.py at v1.9; Float8CurrentScaling came in 2025-03, TE #1471)
        a.append("FP8 delayed scaling (TransformerEngine 1.x in NeMo 24.07 has no other recipe)")
        return "delayed"
    if src == "dgxc-benchmarking":
        # its READMEs from v25.07: "Per-tensor delayed scaling recipe is used for FP8 training here";
        # before, NeMo 2's bf16_with_fp8_mixed (v2.2.0) names no recipe and sets an amax history of
        # 1024: TransformerEngine's DelayedScaling, the one its MegatronMixedPrecision builds
        a.append("FP8 delayed scaling (the recipes' stated FP8 recipe from v25.07; NeMo's default before)")
        return "delayed"
    return "tensorwise"


# Runs whose page gives the command but not the sequence: the train config the command loads.
# torchtitan's asyncTP page (benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md) runs
# train_configs/llama3_70b.toml and llama3_8b.toml without a --training.seq_len override; both
# set ``seq_len = 8192`` at the torchtitan commit the page names (820504e).
_RECIPE_SEQ_LEN = {("torchtitan", "torchtitan202506_asynctp_"): (8192, "seq_len 8192 from the page's train config "
                                                               "(llama3_*.toml at torchtitan 820504e; the commands do not override it)")}


def _recipe_seq_len(src: str, rid: str, a: list[str]) -> int | None:
    for (source, prefix), (seq, note) in _RECIPE_SEQ_LEN.items():
        if src == source and rid.startswith(prefix):
            a.append(note)
            return seq
    return None


def _map_run(rows: list[dict[str, str]]) -> PublishedRun:
    row = rows[0]
    src = _source_key(row["source"], row["run_id"])
    d = _draft(rows, src)
    settings = SOURCE_SETTINGS.get(src)
    if settings is None:
        raise _Skip(f"unknown source {row.get('source')!r}")
    settings(d)
    if d.vpp == NOT_STATED:
        raise _Skip(f"interleaved schedule with virtual stages per rank not stated ({_s(row, 'vp_interleave')!r})")
    a, strat, mb, gbs = d.a, d.strat, d.mb, d.gbs
    if mb is None or gbs is None:
        raise _Skip("micro-batch or global batch not stated")
    strat["framework"] = _framework(src, row, strat, a)  # the software stack the source ran (H7)
    strat.update(micro_batch_size=mb, global_batch_size=gbs, vpp=d.vpp)
    strat.setdefault("schedule", "interleaved" if d.vpp > 1 else "1f1b")  # a source may name its own (DualPipe)
    system = _system(row, d.gpus)
    measured: dict[str, float] = {}
    units: dict[str, str] = {}
    for r in rows:
        try:
            measured[r["metric"]] = float(r["value"])
        except ValueError:
            continue
        units[r["metric"]] = r["unit"]
    return PublishedRun(d.rid, src, {"model": d.model, "system": system, "strategy": strat}, measured, units, d.flop_basis,
                        tuple(a), _s(row, "inferred_fields"), _s(row, "confidence"))


def _framework(src: str, row: dict[str, str], strat: dict[str, Any], a: list[str]) -> str:
    """Which framework a source ran (simengine/config/framework.py), from its source and dtype
    cells: torchtitan is PyTorch-native (eager, or torch.compile when the row says so);
    Narayanan et al. 2021 Table 2's ZeRO-3 baseline is DeepSpeed; the Megatron-LM papers, README,
    NeMo and Megatron-Bridge run Megatron(-Core) with its fused kernels."""
    if src == "torchtitan":
        return "torch-compile" if "compile" in _s(row, "dtype").lower() else "torch-native"
    if src == "llama3-report":
        # §3.3: Meta's PyTorch training stack (PyTorch's NCCL flight recorder, NCCLX); no
        # TransformerEngine or compiler is named
        a.append("Meta's training stack priced as eager PyTorch's kernels (torch-native; the report names "
                 "no TransformerEngine or compiler)")
        return "torch-native"
    if src == "narayanan21" and strat.get("zero_stage") == 3:
        a.append("ZeRO-3 baseline run with DeepSpeed (Megatron-DeepSpeed kernels)")
        return "deepspeed"
    return "megatron-te"


def published_runs(csv_text: str) -> tuple[list[PublishedRun], list[SkippedRun]]:
    """Rows of published_runs.csv grouped by run_id → (mapped runs, skipped runs with reasons)."""
    try:
        rows = list(csv.DictReader(io.StringIO(csv_text)))
        groups: dict[str, list[dict[str, str]]] = {}
        for r in rows:
            groups.setdefault(r["run_id"], []).append(r)
    except (KeyError, csv.Error) as e:
        raise ConfigError([("published_csv", f"not a published_runs.csv table: {e}")]) from e
    if rows and "metric" not in rows[0]:
        raise ConfigError([("published_csv", "not a published_runs.csv table: no 'metric' column")])
    runs: list[PublishedRun] = []
    skipped: list[SkippedRun] = []
    for rid, rs in groups.items():
        src = _source_key(rs[0].get("source", ""), rid)
        try:
            runs.append(_map_run(rs))
        except _Skip as e:
            skipped.append(SkippedRun(rid, src, str(e), tuple(r["metric"] for r in rs)))
        except (KeyError, ValueError, TypeError, ZeroDivisionError) as e:
            skipped.append(SkippedRun(rid, src, f"row not mappable: {e}", tuple(r["metric"] for r in rs)))
    return runs, skipped


# ---------------------------------------------------------------------------------------------
# Each source's FLOP formula and metric conversion
# ---------------------------------------------------------------------------------------------
