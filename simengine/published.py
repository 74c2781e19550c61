"""Published training runs as scenarios: maps shared/validation/published_runs.csv (Narayanan et al.
2021, Korthikanti et al. 2022, the Megatron-LM README H100 table, torchtitan, NeMo and
Megatron-Bridge performance pages) onto (model, system, strategy) dicts, and converts a Report into
each source's own metric definition so prediction and measurement are compared like for like.

Pure functions over CSV text: no prints, no environment, no UI. Nothing here is tuned to the rows;
every setting comes from the row, from the validation README ("Settings the papers leave out"),
from a model preset of the same public architecture, or from a documented framework default —
and each setting that is *guessed* (not printed by the source) is listed in ``assumptions`` and
makes the run ``weak``. Rows that cannot be mapped are returned in ``skipped`` with the reason.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import ConfigError
from .presets import load_preset

# ---------------------------------------------------------------------------------------------
# Data types
# ---------------------------------------------------------------------------------------------

SOURCES: tuple[str, ...] = ("narayanan21", "korthikanti22", "megatron-readme", "torchtitan", "nemo", "megatron-bridge")


@dataclass(frozen=True)
class PublishedRun:
    run_id: str
    source: str                       # one of SOURCES
    config: dict[str, Any]            # {"model", "system", "strategy"} for simengine.api.estimate
    measured: dict[str, float]        # metric -> value, in the source's unit
    units: dict[str, str]
    flop_basis: dict[str, Any]        # inputs of the source's own FLOP formula (see predict_metrics)
    assumptions: tuple[str, ...] = ()  # settings guessed (not printed by the source)
    inferred: str = ""                # the CSV's own inferred_fields
    confidence: str = ""

    @property
    def weak(self) -> bool:
        return bool(self.assumptions)


@dataclass(frozen=True)
class SkippedRun:
    run_id: str
    source: str
    reason: str
    metrics: tuple[str, ...] = field(default_factory=tuple)


class _Skip(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Settings the papers leave out (validation README): Megatron-LM examples/sc21/run_table_1.sh
# (commit de7dc40f88): micro-batch, layers per virtual pipeline stage, DDP implementation.
# ---------------------------------------------------------------------------------------------

NARAYANAN_T1: dict[str, tuple[int, int | None, str]] = {
    "1.7": (16, None, "torch"), "3.6": (16, None, "torch"), "7.5": (16, None, "torch"),
    "18.4": (8, None, "torch"), "39.1": (4, None, "local"), "76.1": (2, 5, "local"),
    "145.6": (2, 5, "local"), "310.1": (1, 3, "local"), "529.6": (1, 1, "local"), "1008.0": (1, None, "local"),
}

# Model presets of the same public architecture, for rows that name the model but leave shape
# fields empty (NeMo / Megatron-Bridge / torchtitan Llama 2). Keys are normalised model names.
_MODEL_PRESETS: dict[str, str] = {
    "llama2-7b": "llama2-7b", "llama2-13b": "llama2-13b", "llama2-70b": "llama2-70b",
    "llama3-8b": "llama3-8b", "llama3-70b": "llama3-70b", "llama3.1-405b": "llama3-405b",
    "deepseekv3": "deepseek-v3", "qwen3-30b-a3b": "qwen3-30b-a3b", "qwen3-235b-a22b": "qwen3-235b-a22b",
    "gpt3-175b": "gpt3-175b", "gpt-3175b": "gpt3-175b",
}

_GPU_PEAK_BF16 = {"a100": 312.0, "h100": 989.0}  # dense bf16 TFLOP/s, as torchtitan counts MFU


# ---------------------------------------------------------------------------------------------
# Cell parsing
# ---------------------------------------------------------------------------------------------

def _s(row: dict[str, str], key: str) -> str:
    return (row.get(key) or "").strip()


def _int(row: dict[str, str], key: str) -> int | None:
    m = re.match(r"^\s*(\d+)", row.get(key) or "")
    return int(m.group(1)) if m else None


def _source_key(source: str, run_id: str) -> str:
    s = source.lower()
    if "narayanan" in s:
        return "narayanan21"
    if "korthikanti" in s:
        return "korthikanti22"
    if "megatron-lm readme" in s or run_id.startswith("mcore"):
        return "megatron-readme"
    if "torchtitan" in s:
        return "torchtitan"
    if "megatron-bridge" in s:
        return "megatron-bridge"
    if "nemo" in s:
        return "nemo"
    return "other"


def _norm_name(model: str) -> str:
    name = re.sub(r"\(.*?\)", "", model).strip().lower().replace("_", "-").replace(" ", "-")
    return re.sub(r"-+", "-", name)


def _system(row: dict[str, str], gpus: int) -> dict[str, Any]:
    g = _s(row, "gpu_type").lower()
    if "a100" in g:
        name = "a100-sxm4-80gb"
    elif "h200" in g:
        name = "h200-sxm-141gb"
    elif "h100" in g:
        name = "h100-sxm5-80gb"
    elif "b200" in g and "gb200" not in g:
        name = "b200-sxm-180gb"
    else:
        raise _Skip(f"no system preset for gpu_type {row.get('gpu_type')!r}")
    sysd = load_preset("systems", name)
    sysd["num_gpus"] = gpus
    if "h100" in g and ("96gb" in g or "95gb" in g):
        # Grand Teton H100 with 96 GB HBM2e (six 16 GiB stacks; torch reports about 95 GiB).
        # Its 500 W power limit (lower clocks than the 700 W SXM5) is not modelled.
        gpu = dict(sysd["gpu"])
        gpu["memory_gib"] = 95.0
        gpu["name"] = "NVIDIA H100 96GB HBM2e (Grand Teton, power-limited)"
        sysd["gpu"] = gpu
    return sysd


def _dtype(row: dict[str, str], notes: list[str]) -> str:
    d = _s(row, "dtype").lower()
    if "nvfp4" in d or "fp4" in d:
        raise _Skip("NVFP4 training: simengine has no FP4 GEMM precision")
    if "fp8" in d or "float8" in d:
        return "fp8"
    if not d:
        notes.append("dtype not stated: bf16")
    return "bf16"


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------

def _gpt_model(row: dict[str, str], a: list[str]) -> dict[str, Any]:
    """GPT-2/3 family as Megatron-LM trains it: GELU, LayerNorm, learned positions, biases, tied
    embeddings, MHA, ffn = 4h, hidden/attention dropout 0.1 (Megatron defaults)."""
    h, L, heads = _int(row, "hidden"), _int(row, "layers"), _int(row, "heads")
    if not (h and L and heads):
        raise _Skip("architecture (hidden/layers/heads) not given and no preset of that model")
    kv = _int(row, "kv_heads") or heads
    ffn = _int(row, "ffn") or 4 * h
    vocab = _int(row, "vocab")
    if vocab is None:
        preset = _MODEL_PRESETS.get(_norm_name(_s(row, "model")))
        if not preset:
            raise _Skip("vocab not given and no preset of that model")
        vocab = int(load_preset("models", preset)["vocab_size"])
        a.append(f"vocab {vocab} from preset {preset}")
    seq = _int(row, "seq_len") or 2048
    return {
        "name": f"{_s(row, 'model')} ({L} layers)", "source": f"published_runs.csv {row['run_id']}",
        "hidden_size": h, "num_layers": L, "num_attention_heads": heads, "num_kv_heads": kv,
        "ffn_hidden_size": ffn, "vocab_size": vocab, "activation": "gelu", "norm": "layernorm",
        "tie_embeddings": True, "attention": "mha" if kv == heads else "gqa", "linear_bias": True,
        "position_embedding": "learned", "max_position_embeddings": max(seq, 1),
        "hidden_dropout": 0.1, "attention_dropout": 0.1,
    }


def _llama_model(row: dict[str, str], a: list[str]) -> dict[str, Any]:
    """Llama family from the row (SwiGLU, RMSNorm, RoPE, untied, no biases, no dropout); fields the
    row leaves empty come from the preset of the same model."""
    preset_name = _MODEL_PRESETS.get(_norm_name(_s(row, "model")).replace("llama-", "llama").replace("3.1-8b", "3-8b").replace("3.1-70b", "3-70b"))
    preset = load_preset("models", preset_name) if preset_name else None
    vals = {k: _int(row, k) for k in ("hidden", "layers", "heads", "kv_heads", "ffn", "vocab")}
    keys = {"hidden": "hidden_size", "layers": "num_layers", "heads": "num_attention_heads",
            "kv_heads": "num_kv_heads", "ffn": "ffn_hidden_size", "vocab": "vocab_size"}
    missing = [k for k, v in vals.items() if v is None]
    if missing:
        if preset is None:
            raise _Skip(f"{', '.join(missing)} not given and no preset of that model")
        if any(k in missing for k in ("hidden", "layers", "heads")):
            a.append(f"architecture from preset {preset_name}")
        else:
            a.append(f"{', '.join(missing)} from preset {preset_name}")
        for k in missing:
            vals[k] = int(preset[keys[k]])
    heads, kv = vals["heads"], vals["kv_heads"]
    return {
        "name": _s(row, "model"), "source": f"published_runs.csv {row['run_id']}",
        "hidden_size": vals["hidden"], "num_layers": vals["layers"], "num_attention_heads": heads,
        "num_kv_heads": kv, "ffn_hidden_size": vals["ffn"], "vocab_size": vals["vocab"],
        "activation": "swiglu", "norm": "rmsnorm", "tie_embeddings": False,
        "attention": "mha" if kv == heads else "gqa", "linear_bias": False, "position_embedding": "rope",
    }


def _moe_model(row: dict[str, str], a: list[str]) -> dict[str, Any]:
    model = _s(row, "model")
    base = _norm_name(model)
    preset_name = _MODEL_PRESETS.get(base)
    if preset_name is None:
        raise _Skip(f"architecture of {model!r} not given and no preset of that model")
    m = load_preset("models", preset_name)
    a.append(f"architecture from preset {preset_name}")
    low = model.lower()
    if "tokendrop" in low:
        # Megatron-Bridge token-drop recipes: capacity factor 1 with padding to capacity
        m["capacity_factor"] = 1.0
    if m.get("mtp_layers"):
        if "mtp" in low:
            pass
        else:
            m["mtp_layers"] = 0
            a.append("no MTP module (model name does not say 'w/ MTP')")
    m["source"] = f"published_runs.csv {row['run_id']} (preset {preset_name})"
    return m


def _model(row: dict[str, str], a: list[str]) -> dict[str, Any]:
    name = _s(row, "model").lower()
    if "nemotron" in name:
        raise _Skip("Nemotron architecture not given in the row and no preset (Nemotron-4 dense / Nemotron-3 hybrid Mamba-MoE)")
    if "gpt oss" in name or "gpt-oss" in name:
        raise _Skip("GPT-OSS architecture not given in the row and no preset (attention sinks, sliding window)")
    if "deepseek" in name or "qwen3" in name:
        return _moe_model(row, a)
    if "llama" in name:
        return _llama_model(row, a)
    if "gpt" in name:
        return _gpt_model(row, a)
    raise _Skip(f"unknown model family {row.get('model')!r}")


# ---------------------------------------------------------------------------------------------
# Strategy
# ---------------------------------------------------------------------------------------------

def _recompute(row: dict[str, str], layers_per_stage: int, a: list[str], default_none_note: str | None) -> dict[str, Any]:
    r = _s(row, "recompute").lower()
    if not r:
        if default_none_note:
            a.append(default_none_note)
        return {"recompute": "none"}
    if "microbatch-level" in r:
        raise _Skip("microbatch-level activation recomputation (Korthikanti App. C) is not modelled")
    if r.startswith("none"):
        return {"recompute": "none"}
    if r.startswith("full"):
        return {"recompute": "full"}
    if r.startswith("selective layer"):
        # torchtitan layer-SAC: selective_ac_option "2" checkpoints every 2nd transformer block
        a.append("layer SAC = full recompute of every 2nd layer (torchtitan selective_ac_option '2')")
        return {"recompute": "full", "recompute_num_layers": max(layers_per_stage // 2, 1)}
    if r.startswith("selective"):
        return {"recompute": "selective"}
    raise _Skip(f"recompute setting {row.get('recompute')!r} not understood")


def _zero(row: dict[str, str], a: list[str], default: int, note: str | None) -> int:
    z = _s(row, "zero_fsdp").lower()
    if not z:
        if note:
            a.append(note)
        return default
    if "fsdp" in z or "zero-3" in z:
        return 3
    if "distributed optimizer" in z:
        if "likely" in z or "presumed" in z:
            a.append("distributed optimizer (ZeRO-1) presumed")
        return 1
    return 0


def _layout(row: dict[str, str]) -> tuple[int, int, int, int, int]:
    gpus = _int(row, "gpus")
    tp, pp = _int(row, "tp"), _int(row, "pp")
    if not gpus or tp is None or pp is None:
        raise _Skip("tp/pp not stated" + (" (only the model-parallel size tp*pp is given)" if "model-parallel size" in (row.get("notes") or "") or "tp x pp" in (row.get("inferred_fields") or "") else ""))
    cp = _int(row, "cp") or 1
    dp = _int(row, "dp") or gpus // (tp * pp * cp)
    if tp * pp * cp * dp != gpus:
        raise _Skip(f"tp*pp*cp*dp = {tp}*{pp}*{cp}*{dp} != gpus {gpus}")
    return gpus, tp, pp, cp, dp


def _vpp(row: dict[str, str]) -> int:
    v = _s(row, "vp_interleave")
    if not v:
        return 1
    n = _int(row, "vp_interleave")
    if n is None:
        raise _Skip(f"interleaved schedule with virtual stages per rank not stated ({v!r})")
    return n


# ---------------------------------------------------------------------------------------------
# Per-source mapping
# ---------------------------------------------------------------------------------------------

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

def flops_eq3(B: int, s: int, l: int, h: int, V: int) -> float:
    """Narayanan et al. 2021 Eq. 3: FLOPs per iteration with full recompute (counts the extra forward)."""
    return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h))


def flops_eq7(B: int, s: int, l: int, h: int, V: int) -> float:
    """Korthikanti et al. 2022 Eq. 7: model FLOPs per iteration (no recompute)."""
    return 72.0 * B * l * s * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * l))


def flops_eq8(B: int, s: int, l: int, h: int, V: int) -> float:
    """Korthikanti et al. 2022 Eq. 8: hardware FLOPs with selective recompute (attention core twice)."""
    return 72.0 * B * l * s * h * h * (1.0 + s / (3.0 * h) + V / (12.0 * h * l))


def flops_megatron(B: int, s: int, l: int, h: int, heads: int, kv: int, ffn: int, V: int, gated: bool = False) -> float:
    """Megatron-LM (core r0.8) ``num_floating_point_operations`` for a dense GPT: 12·B·s·L·h²·((1 + kv/heads
    + s/h) + ffn/h·(2 if gated else 1) + V/(2·L·h)); equals Eq. 7 for MHA with ffn = 4h."""
    return 12.0 * B * s * l * h * h * ((1.0 + kv / heads + s / h) + ffn / h * (2 if gated else 1) + V / (2.0 * l * h))


def torchtitan_flops_per_token(model: dict[str, Any], seq_len: int) -> float:
    """torchtitan ``get_num_flop_per_token``: 6·N (parameters without the token embedding) + 12·L·H·Q·T."""
    h, L = int(model["hidden_size"]), int(model["num_layers"])
    heads = int(model["num_attention_heads"])
    kv = int(model.get("num_kv_heads") or heads)
    hd = h // heads
    f, V = int(model["ffn_hidden_size"]), int(model["vocab_size"])
    per_layer = h * heads * hd + 2 * h * kv * hd + heads * hd * h + 3 * h * f + 2 * h
    n = L * per_layer + h + h * V  # + final norm + output projection
    return 6.0 * n + 12.0 * L * heads * hd * seq_len


def _layer_times(config: dict[str, Any]) -> tuple[float, float]:
    """Forward and backward (incl. recompute) seconds of one transformer layer for one micro-batch:
    the chunk cost of a 2-layer model minus that of a 1-layer model (cancels embedding and head)."""
    from .config.scenario import load_scenario
    from .cost.stage import build_plan

    out = []
    for n in (1, 2):
        cfg = {k: dict(v) for k, v in config.items()}
        cfg["model"]["num_layers"] = n
        c = build_plan(load_scenario(cfg)).stages[0].chunks[0]
        out.append((c.fwd.total_s, c.bwd.total_s + c.wgt.total_s + c.recompute.total_s))
    return out[1][0] - out[0][0], out[1][1] - out[0][1]


def predict_metrics(run: PublishedRun, report: Any, layer_times: Callable[[dict[str, Any]], tuple[float, float]] | None = None) -> dict[str, float]:
    """The report converted into each measured metric of ``run``, in the source's own definition:

    - Narayanan ``achieved_tflops_per_gpu`` / ``pct_of_theoretical_peak`` / ``aggregate_pflops``:
      Eq. 3 FLOPs (recompute forward counted) / predicted step time (/ GPUs; peak 312).
    - Korthikanti ``iteration_time`` = step time; ``mfu`` = Eq. 7 / (step · peak · GPUs); ``hfu`` = Eq. 8
      (selective) or Eq. 3 (full); ``layer_*_time`` from the per-layer chunk costs.
    - Megatron README ``achieved_tflops_per_gpu`` / ``mfu`` / ``aggregate_pflops``: Megatron's FLOP formula
      (model FLOPs, no recompute) / step; MFU against 989 TFLOP/s.
    - torchtitan ``tokens_per_sec_per_gpu`` = report.tokens_per_s_per_gpu; ``peak_memory`` = predicted
      *reserved* memory (torchtitan logs max_reserved); ``mfu`` = torchtitan's 6N + 12·L·H·Q·T per token
      against the bf16 peak, the FP8 peak for Float8 rows (what the table's own numbers imply).
    - NeMo / Megatron-Bridge ``tokens_per_sec_per_gpu`` as above; ``model_tflops_per_gpu`` =
      report.model_flops_per_step / step / GPUs (model FLOPs, recompute excluded).
    """
    fb = run.flop_basis
    step = report.step_time_s
    gpus = fb["gpus"]
    out: dict[str, float] = {}
    for metric in run.measured:
        v: float | None = None
        if run.source == "narayanan21":
            F = flops_eq3(fb["B"], fb["s"], fb["l"], fb["h"], fb["V"])
            if metric == "achieved_tflops_per_gpu":
                v = F / step / gpus / 1e12
            elif metric == "pct_of_theoretical_peak":
                v = 100.0 * F / step / gpus / 312e12
            elif metric == "aggregate_pflops":
                v = F / step / 1e15
        elif run.source == "korthikanti22":
            args = (fb["B"], fb["s"], fb["l"], fb["h"], fb["V"])
            rc = run.config["strategy"].get("recompute")
            if metric == "iteration_time":
                v = step
            elif metric == "mfu":
                v = 100.0 * flops_eq7(*args) / (step * 312e12 * gpus)
            elif metric == "hfu":
                hw = flops_eq8(*args) if rc == "selective" else flops_eq3(*args) if rc == "full" else flops_eq7(*args)
                v = 100.0 * hw / (step * 312e12 * gpus)
            elif metric.startswith("layer_") and layer_times is not None:
                f, b = layer_times(run.config)
                v = 1e3 * {"layer_forward_time": f, "layer_backward_time": b, "layer_fwd_bwd_time": f + b}[metric]
        elif run.source == "megatron-readme":
            F = flops_megatron(fb["B"], fb["s"], fb["l"], fb["h"], fb["heads"], fb["kv"], fb["ffn"], fb["V"])
            if metric == "achieved_tflops_per_gpu":
                v = F / step / gpus / 1e12
            elif metric == "mfu":
                v = 100.0 * F / step / gpus / 989e12
            elif metric == "aggregate_pflops":
                v = F / step / 1e15
        elif run.source == "torchtitan":
            if metric == "tokens_per_sec_per_gpu":
                v = report.tokens_per_s_per_gpu
            elif metric == "peak_memory":
                v = report.reserved_memory_gib
            elif metric == "mfu":
                fpt = torchtitan_flops_per_token(run.config["model"], run.config["strategy"]["seq_len"])
                v = 100.0 * fpt * report.tokens_per_s_per_gpu / (fb["peak"] * 1e12)
        elif run.source in ("nemo", "megatron-bridge"):
            if metric == "tokens_per_sec_per_gpu":
                v = report.tokens_per_s_per_gpu
            elif metric == "model_tflops_per_gpu":
                v = report.model_flops_per_step / step / gpus / 1e12
        if v is not None:
            out[metric] = v
    return out


@dataclass(frozen=True)
class Comparison:
    run_id: str
    source: str
    metric: str
    measured: float
    predicted: float
    weak: bool

    @property
    def error_pct(self) -> float:
        """Signed error of the prediction, % of the measured value."""
        return 100.0 * (self.predicted - self.measured) / self.measured


def evaluate(runs: list[PublishedRun]) -> tuple[list[Comparison], list[SkippedRun]]:
    """Estimate every run and compare each metric; runs the engine rejects come back as skipped."""
    import json

    from .api import estimate

    comps: list[Comparison] = []
    failed: list[SkippedRun] = []
    memo: dict[str, Any] = {}  # runs that differ only in their measurement share one scenario
    for run in runs:
        try:
            key = json.dumps({k: ({kk: vv for kk, vv in v.items() if kk not in ("name", "source")}) for k, v in run.config.items()},
                             sort_keys=True, default=str)
            rep = memo.get(key)
            if rep is None:
                rep = memo[key] = estimate(run.config)
            pred = predict_metrics(run, rep, _layer_times)
        except ConfigError as e:
            failed.append(SkippedRun(run.run_id, run.source, f"engine rejected the scenario: {e}", tuple(run.measured)))
            continue
        for metric, meas in run.measured.items():
            if metric in pred and meas:
                comps.append(Comparison(run.run_id, run.source, metric, meas, pred[metric], run.weak))
    return comps, failed


def summarize(comps: list[Comparison], by: Callable[[Comparison], Any] = lambda c: c.source) -> dict[Any, dict[str, float]]:
    """MAPE (%), median signed error (%) and count per group."""
    groups: dict[Any, list[float]] = {}
    for c in comps:
        groups.setdefault(by(c), []).append(c.error_pct)
    out = {}
    for k, errs in groups.items():
        errs_sorted = sorted(errs)
        n = len(errs_sorted)
        med = errs_sorted[n // 2] if n % 2 else 0.5 * (errs_sorted[n // 2 - 1] + errs_sorted[n // 2])
        out[k] = {"n": n, "mape": sum(abs(e) for e in errs) / n, "median_signed": med}
    return out
