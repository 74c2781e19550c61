"""One published run (its metric rows) → a scenario dict; the whole CSV → runs and skipped runs."""

from __future__ import annotations

import csv
import io
import math
import re
from typing import Any

from ...errors import ConfigError
from .types import PublishedRun, SkippedRun, _Skip
from .cells import NARAYANAN_T1, _GPU_PEAK_BF16, _dtype, _int, _layout, _model, _recompute, _s, _source_key, _system, _vpp, _zero


def _map_run(rows: list[dict[str, str]]) -> PublishedRun:
    row = rows[0]
    rid = row["run_id"]
    src = _source_key(row["source"], rid)
    a: list[str] = []
    if src == "megatron-readme" and "strong" in rid:
        raise _Skip("tp/pp not stated (strong-scaling text gives only MFU endpoints)")
    task = rid.lower()
    if "lora" in task:
        raise _Skip("LoRA fine-tuning: frozen base weights and adapter GEMMs are not modelled")
    if src == "torchtitan" and not _int(row, "seq_len"):
        raise _Skip("seq_len not stated (torchtitan asyncTP benchmark page)")
    model = _model(row, a)
    gpus, tp, pp, cp, dp = _layout(row)
    layers = int(model["num_layers"])
    seq = _int(row, "seq_len")
    if not seq:
        raise _Skip("seq_len not stated")
    dtype = _dtype(row, a)
    mb = _int(row, "micro_batch")
    gbs = _int(row, "global_batch_seqs")
    strat: dict[str, Any] = {"name": rid, "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": _int(row, "ep") or 1,
                             "seq_len": seq, "dtype": dtype}
    if strat["ep"] > 1:
        # NeMo / Megatron-Bridge MoE recipes set expert_tensor_parallel_size=1 explicitly (the
        # Megatron default would be tp); the rows do not print it
        strat["etp"] = 1
        a.append("etp=1 (recipe default for MoE)")
    sp_cell = _s(row, "sp").lower()
    sp = sp_cell.startswith("yes") if sp_cell else None
    vpp = _vpp(row)
    flop_basis: dict[str, Any] = {"gpus": gpus}

    if src == "narayanan21":
        table2 = "_t2_" in rid
        key = _s(row, "params_B")
        if not table2:
            if key not in NARAYANAN_T1:
                raise _Skip(f"no sc21 script settings for {key}B")
            mb, lpv, ddp = NARAYANAN_T1[key]
            if lpv:
                vpp = (layers // pp) // lpv
        else:
            ddp = "deepspeed" if tp == 1 and pp == 1 else "local"
            if ddp == "local":
                # PTD-P rows of Table 2 reuse Table 1's 530B layout (tp 8, pp 35, 1 layer per virtual stage)
                _, lpv, _ = NARAYANAN_T1.get(key, (1, None, "local"))
                if lpv and pp > 1:
                    vpp = (layers // pp) // lpv
                    a.append(f"vpp {vpp} ({lpv} layer per virtual stage) from Table 1's {key}B settings")
        rec = _recompute(row, math.ceil(layers / pp), a, "recompute not stated: full (Eq.3 FLOP accounting assumes it)")
        if "assumed" in _s(row, "recompute").lower():
            a.append("full recompute assumed (not restated for Table 2)")
        if rec["recompute"] == "none" and not _s(row, "recompute"):
            rec = {"recompute": "full"}
        zero = 3 if ddp == "deepspeed" else 0
        strat.update(rec)
        strat.update(sequence_parallel=False, p2p_scatter_gather=True, zero_stage=zero, attention_impl="unfused", fused_cross_entropy=False,
                     # torch DDP overlaps the bucketed all-reduce with backward; Megatron's 'local' DDP
                     # reduces after backward; DeepSpeed ZeRO-3 overlaps (overlap_comm defaults to True at stage 3)
                     overlap_grad_reduce=ddp in ("torch", "deepspeed"), overlap_param_gather=ddp == "deepspeed")
        if ddp == "deepspeed":
            a.append("DeepSpeed ZeRO-3 overlap_comm (stage-3 default) and parameter prefetch = overlapped")
        flop_basis.update(B=gbs, s=seq, l=layers, h=int(model["hidden_size"]), V=int(model["vocab_size"]))

    elif src == "korthikanti22":
        rec = _recompute(row, math.ceil(layers / pp), a, None)
        strat.update(rec)
        if sp is None:
            sp = False
            a.append("sequence parallelism not restated: off (full-recompute baseline)")
        zero = _zero(row, a, 0, None)
        strat.update(sequence_parallel=sp, p2p_scatter_gather=True, zero_stage=zero, attention_impl="unfused", fused_cross_entropy=False,
                     overlap_grad_reduce=False)  # "8-way DP without grad all-reduce overlap"
        if "layer" in rid:
            gbs = mb  # one micro-batch through one layer (Table 4)
        flop_basis.update(B=gbs, s=seq, l=layers, h=int(model["hidden_size"]), V=int(model["vocab_size"]))

    elif src == "megatron-readme":
        # Megatron-Core r0.8 README table: overlaps stated; dtype/recompute/micro-batch not stated.
        if mb is None:
            mb = 1
            a.append("micro-batch not stated: 1")
        strat.update(_recompute(row, layers, a, "recompute not stated: none"))
        strat.update(sequence_parallel=tp > 1, zero_stage=_zero(row, a, 1, None), overlap_grad_reduce=True,
                     overlap_param_gather=True, tp_comm_overlap=tp > 1, fused_cross_entropy=False)
        a.append("kv_heads = heads (MHA), ffn = 4h, GPT-2 style blocks")
        if pp > 1:
            a.append("plain 1F1B (virtual pipeline size not stated)")
        flop_basis.update(B=gbs, s=seq, l=layers, h=int(model["hidden_size"]), heads=int(model["num_attention_heads"]),
                          kv=int(model["num_kv_heads"]), ffn=int(model["ffn_hidden_size"]), V=int(model["vocab_size"]))

    elif src == "torchtitan":
        local_bs = mb
        if pp > 1:
            # torchtitan: the local batch is split into pipeline_parallel_microbatches, default = number of stages
            if vpp != 1:
                raise _Skip("interleaved schedule with virtual stages per rank not stated")
            mb = max(local_bs // pp, 1)
            a.append(f"local batch {local_bs} split into {pp} pipeline micro-batches (torchtitan default = stages)")
        if gbs is None:
            gbs = local_bs * dp
            a.append(f"global batch = local batch {local_bs} x dp {dp}")
        rec = _recompute(row, math.ceil(layers / pp), a, None)
        zero = _zero(row, a, 3, None)
        d = _s(row, "dtype").lower()
        strat.update(rec)
        strat.update(sequence_parallel=tp > 1, zero_stage=zero, overlap_grad_reduce=True, overlap_param_gather=True,
                     tp_comm_overlap="asynctp" in d.replace(" ", ""), fused_cross_entropy=False,
                     gradient_accumulation_fusion=False, cp_comm_type="allgather")
        if rec["recompute"] == "selective":
            a.append("torchtitan per-op SAC mapped to selective (attention core) recompute")
        g = _s(row, "gpu_type").lower()
        if "h100" in g and ("500w" in g.replace(" ", "") or "lower tdp" in g):
            a.append("power-limited Grand Teton H100 (HBM2e, 500 W) priced as a 700 W H100 SXM5 (clocks and HBM bandwidth not stated)")
        # torchtitan MFU: its Float8 rows report half the MFU per token/s of the bf16 rows
        # (2024-08 405B table: 23.46 % at 177 tok/s vs 29.0 % at 109 tok/s), i.e. against the FP8 peak
        gpu = "a100" if "a100" in g else "h100"
        flop_basis.update(peak=_GPU_PEAK_BF16[gpu] * (2.0 if dtype == "fp8" else 1.0))

    elif src in ("nemo", "megatron-bridge"):
        if mb is None:
            raise _Skip("micro-batch not stated")
        strat.update(_recompute(row, layers, a, "recompute not stated (recipe script): none"))
        if sp is None:
            sp = tp > 1
            a.append("sequence parallelism (recipe script) = on when tp > 1")
        zero = _zero(row, a, 1, "distributed optimizer (ZeRO-1) presumed")
        strat.update(sequence_parallel=sp, zero_stage=zero, overlap_grad_reduce=True, overlap_param_gather=True,
                     tp_comm_overlap=tp > 1, fused_cross_entropy=True)
        if "sft" in task or "finetuning" in task:
            a.append("SFT on packed sequences: attention spans shorter than seq_len (modelled as pretraining)")
        ga = re.search(r"GA=(\d+)", row.get("notes") or "")
        if ga and gbs and mb and int(ga.group(1)) != gbs // (mb * dp):
            a.append(f"notes say GA={ga.group(1)} but gbs/(mb*dp) = {gbs // (mb * dp)}")
    else:
        raise _Skip(f"unknown source {row.get('source')!r}")

    if mb is None or gbs is None:
        raise _Skip("micro-batch or global batch not stated")
    strat["framework"] = _framework(src, row, strat, a)  # the software stack the source ran (H7)
    strat.update(micro_batch_size=mb, global_batch_size=gbs, vpp=vpp, schedule="interleaved" if vpp > 1 else "1f1b")
    system = _system(row, gpus)

    measured: dict[str, float] = {}
    units: dict[str, str] = {}
    for r in rows:
        try:
            measured[r["metric"]] = float(r["value"])
        except ValueError:
            continue
        units[r["metric"]] = r["unit"]
    return PublishedRun(rid, src, {"model": model, "system": system, "strategy": strat}, measured, units, flop_basis,
                        tuple(a), _s(row, "inferred_fields"), _s(row, "confidence"))


def _framework(src: str, row: dict[str, str], strat: dict[str, Any], a: list[str]) -> str:
    """Which framework a source ran (simengine/config/framework.py), from its source and dtype
    cells: torchtitan is PyTorch-native (eager, or torch.compile when the row says so);
    Narayanan et al. 2021 Table 2's ZeRO-3 baseline is DeepSpeed; the Megatron-LM papers, README,
    NeMo and Megatron-Bridge run Megatron(-Core) with its fused kernels."""
    if src == "torchtitan":
        return "torch-compile" if "compile" in _s(row, "dtype").lower() else "torch-native"
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
