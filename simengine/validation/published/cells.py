"""Reading the cells of a published-runs row: settings the papers leave out, presets, layouts."""

from __future__ import annotations

import re
from typing import Any

from ...presets import load_preset
from .types import _Skip

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
    "deepseekv3": "deepseek-v3", "deepseek-v3": "deepseek-v3", "qwen3-30b-a3b": "qwen3-30b-a3b", "qwen3-235b-a22b": "qwen3-235b-a22b",
    "gpt3-175b": "gpt3-175b", "gpt-3175b": "gpt3-175b", "gpt-oss-120b": "gpt-oss-120b",
    "gpt3-5b": "gpt3-5b", "gpt3-20b": "gpt3-20b",
    # NeMo's names: "Nemotron-8B"/"22B" are the Nemotron-3 recipes (nemotron_8b.yaml / nemotron_22b.yaml,
    # run names nemotron3-8B / nemotron3-22B), "15B"/"340B" the Nemotron-4 ones
    "nemotron-8b": "nemotron3-8b", "nemotron-22b": "nemotron3-22b", "nemotron-15b": "nemotron4-15b",
    "nemotron-340b": "nemotron4-340b", "nemotron3-8b": "nemotron3-8b", "nemotron3-22b": "nemotron3-22b",
    "nemotron4-15b": "nemotron4-15b", "nemotron4-340b": "nemotron4-340b",
    "nemotron-4-15b": "nemotron4-15b", "nemotron-4-340b": "nemotron4-340b",
    "nemotron-3-nano": "nemotron3-nano-30b-a3b",  # Megatron-Bridge's rows: the 30B-A3B hybrid Mamba MoE
    "nemotron-3-super": "nemotron3-super-120b-a12b",  # ... and the 120B-A12B one with a latent MoE and MTP
}

_GPU_PEAK_BF16 = {"a100": 312.0, "h100": 989.0}  # dense bf16 TFLOP/s, as torchtitan counts MFU

# H100 NVL datasheet: BF16 1,671 and FP8 3,341 TFLOP/s with sparsity (835.5 / 1670.5 dense) and
# FP32 60 TFLOP/s at a 400 W maximum TDP; the SXM5 runs 989 / 1979 dense and FP32 67 at up to
# 700 W (H100 datasheet). Both have 132 SMs, so the two peaks are the clock each board power sustains.
_H100_NVL_PEAK = {"bf16": 835.5, "fp8": 1670.5, "fp32": 60.0}
_H100_NVL_W, _H100_SXM_W = 400.0, 700.0
GRAND_TETON_W = 500.0  # torchtitan's H100 pages: "500W power limit" (2024-08: "lower TDP")


def power_capped_peak(sxm: float, nvl: float, watts: float) -> float:
    """Dense peak of an H100 SXM held at ``watts``: linear in board power between the NVL
    (400 W) and SXM (700 W) datasheet points, the bracket torchtitan's page gives ("between SXM
    and NVL"); 500 W gives 886.7 bf16 TFLOP/s (0.90 of the SXM5's). A bracket, not a measured
    DVFS curve: dynamic power ~ f³ (V ∝ f) would give (500/700)^(1/3) = 0.89 of the clock."""
    w = min(max(watts, _H100_NVL_W), _H100_SXM_W)
    return nvl + (sxm - nvl) * (w - _H100_NVL_W) / (_H100_SXM_W - _H100_NVL_W)


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
    if "dgxc-benchmarking" in s:   # before "nemo": its recipes run NeMo containers
        return "dgxc-benchmarking"
    if "nemo" in s:
        return "nemo"
    if "deepseek-v3 technical report" in s:
        return "deepseek-v3-report"
    if "llama 3 herd of models" in s:
        return "llama3-report"
    return "other"


def _norm_name(model: str) -> str:
    name = re.sub(r"\(.*?\)", "", model).strip().lower().replace("_", "-").replace(" ", "-")
    return re.sub(r"-+", "-", name)


NVL72_RACK_NODES = 18  # compute trays of an NVL72 rack (4 GPUs each)


def nvl72_segment_gpus(gpus: int, gpus_per_node: int = 4) -> int:
    """GPUs of a Megatron-Bridge job that share one NVLink domain on an NVL72 system. Its launcher
    (scripts/performance/utils/executors.py slurm_executor, r0.1.0 … 63b08b397) asks Slurm for
    ``--segment``: beyond one rack (nodes > 18) the largest divisor of the node count up to 18, so a
    256-GPU job (64 trays) runs as four 16-tray (64-GPU) segments, one per rack, not as 72 + 72 + 72 +
    40. Within one rack the whole job from c0b9a0003 on (segment = nodes); r0.1.0 and r0.2.0 set no
    flag there, and those jobs (8 and 64 GPUs) are taken to have had one rack too. A job no larger
    than a rack keeps the preset's 72-GPU domain."""
    nodes = -(-gpus // gpus_per_node)
    if nodes <= NVL72_RACK_NODES:
        return NVL72_RACK_NODES * gpus_per_node
    seg = next(c for c in range(NVL72_RACK_NODES, 0, -1) if nodes % c == 0)
    return seg * gpus_per_node


def _system(row: dict[str, str], gpus: int) -> dict[str, Any]:
    g = _s(row, "gpu_type").lower()
    if "a100" in g:
        name = "a100-sxm4-80gb"
    elif "h200" in g:
        name = "h200-sxm-141gb"
    elif "h100" in g and "roce" in g:
        name = "h100-roce-400g"   # Meta's 24K-GPU RoCE cluster (Llama 3 report §3.3.1; the preset's source)
    elif "h100" in g:
        name = "h100-sxm5-80gb"
    elif "gb200" in g:  # before "b200", which "gb200" contains (and "b300" in "gb300")
        name = "gb200-nvl72"
    elif "gb300" in g:
        name = "gb300-nvl72"
    elif "b300" in g:
        name = "b300-sxm-288gb"
    elif "b200" in g:
        name = "b200-sxm-180gb"
    elif "h800" in g:
        name = "h800-sxm5-80gb"
    else:
        raise _Skip(f"no system preset for gpu_type {row.get('gpu_type')!r}")
    sysd = load_preset("systems", name)
    sysd["num_gpus"] = gpus
    if name.endswith("-nvl72") and _s(row, "source").lower().startswith("nvidia-nemo/megatron-bridge"):
        seg = nvl72_segment_gpus(gpus, int(sysd["gpus_per_node"]))
        if seg < int(sysd["scale_up"]["domain_size"]):
            sysd["scale_up"] = {**sysd["scale_up"], "domain_size": seg}
    if "h100" in g and ("96gb" in g or "95gb" in g):
        # Grand Teton H100 with 96 GB HBM2e (six 16 GiB stacks; torch reports about 95 GiB) "with
        # 2.4 TB/sec peak memory bandwidth" (torchtitan benchmarks/llama3_h100_202412_torchtitan.md,
        # asyncTP_llama3_h100_2025-06_torchtitan.md: the SXM5's HBM3 gives 3.35), held at a 500 W
        # power limit: "the actual peak TFLOPs number is between SXM and NVL" (same page).
        gpu = dict(sysd["gpu"])
        gpu["memory_gib"] = 95.0
        gpu["hbm_bandwidth_gbs"] = 2400.0
        gpu["name"] = "NVIDIA H100 96GB HBM2e (Grand Teton, 500 W)"
        gpu["peak_tflops"] = {k: power_capped_peak(v, _H100_NVL_PEAK[k], GRAND_TETON_W) for k, v in gpu["peak_tflops"].items()}
        gpu["tdp_w"] = GRAND_TETON_W
        sysd["gpu"] = gpu
    return sysd


def _dtype(row: dict[str, str], notes: list[str]) -> str:
    d = _s(row, "dtype").lower()
    if "nvfp4" in d or "fp4" in d:
        if "nemotron_3_super" in _s(row, "model").lower():
            # Megatron-Bridge nemotron_3_super_bf16_with_nvfp4_mixed (perf_recipes, commit 067f987)
            raise _Skip("NVFP4 with per-module BF16 overrides (the recipe keeps the last 14 layers, the attention and "
                        "latent projections and MTP in BF16 and Mamba's out_proj in MXFP8): not modelled")
        return "nvfp4"
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
        preset = _MODEL_PRESETS.get(_norm_name(_s(row, "model")))
        if not preset:
            raise _Skip("architecture (hidden/layers/heads) not given and no preset of that model")
        return _from_preset(row, preset, a)
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


def _from_preset(row: dict[str, str], preset: str, a: list[str]) -> dict[str, Any]:
    """A model the row names but does not spell out: its preset, architecture cells checked."""
    m = load_preset("models", preset)
    a.append(f"architecture from preset {preset}")
    keys = {"hidden": "hidden_size", "layers": "num_layers", "heads": "num_attention_heads",
            "kv_heads": "num_kv_heads", "ffn": "ffn_hidden_size"}
    for cell, field in keys.items():
        v = _int(row, cell)
        if v is not None and v != int(m[field]):
            raise _Skip(f"{cell}={v} in the row but {m[field]} in preset {preset}")
    m["source"] = f"published_runs.csv {row['run_id']} (preset {preset})"
    return m


def _nemotron_model(row: dict[str, str], a: list[str]) -> dict[str, Any]:
    """Nemotron-3 (8B, 22B) and Nemotron-4 (15B, 340B): dense squared-ReLU GPTs; Nemotron 3 Nano
    (2025): the hybrid Mamba-2 / attention / MoE stack of Megatron-Bridge's Nemotron3NanoProvider;
    Nemotron 3 Super (2026): a hybrid stack with a latent MoE and a repeated MTP module."""
    preset = _MODEL_PRESETS.get(_norm_name(_s(row, "model")))
    if preset is None:
        raise _Skip(f"no preset of {_s(row, 'model')!r}")
    return _from_preset(row, preset, a)


def _model(row: dict[str, str], a: list[str]) -> dict[str, Any]:
    name = _s(row, "model").lower()
    if "nemotron" in name:
        return _nemotron_model(row, a)
    if "deepseek" in name or "qwen3" in name or "gpt oss" in name or "gpt-oss" in name:
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


NOT_STATED = 0  # ``_vpp`` of an interleaved row that does not say how many stages each rank holds


def _vpp(row: dict[str, str]) -> int:
    """Virtual stages per rank: 1 without interleaving, ``NOT_STATED`` when the row interleaves
    without a count (a source whose code has a default resolves it, ``settings.py``; else skipped)."""
    v = _s(row, "vp_interleave")
    if not v:
        return 1
    n = _int(row, "vp_interleave")
    return NOT_STATED if n is None else n


# ---------------------------------------------------------------------------------------------
# Per-source mapping
# ---------------------------------------------------------------------------------------------
