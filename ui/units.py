"""Units per field and number formatting (pure)."""

from __future__ import annotations

import math

# Unit of a field, by exact name first, then by suffix. Shown in every label.
UNIT_BY_NAME: dict[str, str] = {
    "price_per_hour": "USD/GPU·h",
    "bf16": "TFLOP/s", "fp8": "TFLOP/s", "fp4": "TFLOP/s", "fp32": "TFLOP/s",
    "seq_len": "tokens", "packed_doc_len": "tokens", "micro_batch_size": "sequences", "global_batch_size": "sequences",
    "num_gpus": "GPUs", "gpus_per_node": "GPUs", "domain_size": "GPUs",
    "hidden_dropout": "probability", "attention_dropout": "probability",
    "allocator_overhead": "fraction", "overlap_slowdown": "×", "straggler_factor": "×", "async_overlap": "fraction",
    "moe_load_imbalance": "×", "capacity_factor": "×", "jitter_cv": "fraction",
    "n_group": "groups", "topk_group": "groups", "attention_window": "tokens", "full_attention_interval": "layers",
    "swiglu_limit": "activation value",
    "gemm": "× peak", "attention_fwd": "× peak", "attention_bwd": "× peak", "grouped_gemm": "× peak",
    "hbm": "× peak BW", "fp8_gemm": "× FP8 peak", "fp4_gemm": "× FP4 peak", "collective_scale_up": "× link BW",
    "collective_scale_out": "× link BW", "efficiency": "× peak", "sustained_clock_ratio": "× boost clock",
    "gemm_half_dim": "elements", "max_position_embeddings": "positions",
    "hidden_size": "elements", "ffn_hidden_size": "elements", "moe_ffn_hidden_size": "elements",
    "shared_expert_ffn_hidden_size": "elements", "head_dim": "elements", "vocab_size": "tokens", "moe_latent_size": "elements",
    "q_lora_rank": "elements", "kv_lora_rank": "elements", "qk_nope_head_dim": "elements",
    "qk_rope_head_dim": "elements", "v_head_dim": "elements",
    "num_layers": "layers", "first_k_dense_layers": "layers", "recompute_num_layers": "layers per stage",
    "mtp_layers": "modules", "num_attention_heads": "heads", "num_kv_heads": "heads",
    "num_experts": "experts", "top_k": "experts/token", "num_shared_experts": "experts",
    "moe_layer_freq": "layers", "mamba_num_heads": "heads", "mamba_head_dim": "elements", "mamba_state_dim": "elements",
    "mamba_num_groups": "groups", "mamba_conv_kernel": "taps", "mamba_chunk_size": "tokens",
    "decoder_first_pipeline_num_layers": "layers", "decoder_last_pipeline_num_layers": "layers", "cpu_offload_layers": "layers",
    "tp": "GPUs", "pp": "stages", "dp": "replicas", "cp": "GPUs", "ep": "GPUs", "etp": "GPUs",
    "vpp": "chunks/rank", "zero_stage": "stage", "dp_shard": "GPUs", "lora_rank": "rank",
}
UNIT_BY_SUFFIX: tuple[tuple[str, str], ...] = (
    ("_gib", "GiB"), ("_gbs", "GB/s"), ("_us", "µs"), ("_w", "W"), ("_ms", "ms"), ("_s", "s"), ("_bytes", "B"),
    ("_usd", "USD"), ("_blocks", "thread blocks"),
)


def unit_for(name: str) -> str:
    if name in UNIT_BY_NAME:
        return UNIT_BY_NAME[name]
    base = name.removesuffix("_fwd").removesuffix("_bwd")
    for suffix, unit in UNIT_BY_SUFFIX:
        if base.endswith(suffix):
            return unit
    return ""


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


COMPACT_LIMIT = 1e6  # a scaled figure this large (or more) is written in scientific notation


def _sci(x: float) -> str:
    """Compact scientific notation: 1.23e+190 (at most ~10 characters)."""
    return f"{x:.3g}" if abs(x) < 1e16 and abs(x) >= 1e-4 else f"{x:.2e}"


def _scaled(x: float, spec: str) -> str:
    """``format(x, spec)`` while that stays short; scientific notation beyond ``COMPACT_LIMIT``."""
    return format(x, spec) if abs(x) < COMPACT_LIMIT else _sci(x)


def fmt_time_beside(s: float, ref: float) -> str:
    """``fmt_time(s)``, but a zero reads in the unit of ``ref``, the figure beside it: "0 ms" next
    to an exposed 246.05 ms, where "0 s" switched the unit between two neighbouring metrics."""
    if s == 0 and _finite(ref) and ref != 0:
        return "0 " + fmt_time(ref).rsplit(" ", 1)[-1]
    return fmt_time(s)


def _shown(x: float, spec: str) -> float:
    """``x`` as ``format(x, spec)`` writes it, read back: the rounded figure a reader sees."""
    return float(format(x, spec).replace(",", ""))


def _rung(a: float, rungs: tuple[tuple[float, float, str], ...]) -> int | None:
    """Index of the unit (``(from, divisor, spec)``, largest first) that a magnitude ``a`` is written
    in, chosen after rounding: the largest unit ``a`` reaches, or the one above it when ``a``
    rounded in its own unit reads as that unit's start (999.9996 ms is "1.000 s", not
    "1,000.00 ms"; 999,999 is "1.00 M", not "1,000.00 k"). None below every unit."""
    for i, (start, div, spec) in enumerate(rungs):
        if a >= start:
            if i and _shown(a / div, spec) >= round(rungs[i - 1][0] / div, 9):
                return i - 1
            return i
    return None


# (from [s], divisor, format), largest first; then the unit's name
_TIME = ((86400 * 2, 86400, ",.1f"), (3600 * 2, 3600, ",.1f"), (120, 60, ",.1f"), (1, 1, ",.3f"),
         (1e-3, 1e-3, ",.2f"), (1e-6, 1e-6, ",.1f"), (1e-9, 1e-9, ",.1f"))
_TIME_UNITS = ("d", "h", "min", "s", "ms", "µs", "ns")


def fmt_time(s: float) -> str:
    """Seconds with a unit that keeps 3–4 significant figures (ns … days), the unit chosen after
    rounding; absurd durations (a million days and more) in scientific notation, under a
    nanosecond as "< 1 ns"."""
    if not _finite(s):
        return "—"
    if s == 0:
        return "0 s"   # none at all (no hidden communication), not "0.0 µs"
    i = _rung(abs(s), _TIME)
    if i is None:
        return "< 1 ns" if s > 0 else "> -1 ns"  # float noise around zero, or absurd hardware figures
    _, div, spec = _TIME[i]
    return f"{_scaled(s / div, spec) if i == 0 else format(s / div, spec)} {_TIME_UNITS[i]}"


_COUNT = ((1e15, 1e15, ",.2f"), (1e12, 1e12, ",.2f"), (1e9, 1e9, ",.2f"), (1e6, 1e6, ",.2f"), (1e3, 1e3, ",.2f"),
          (0.0, 1.0, ",.3g"))
_COUNT_UNITS = ("P", "T", "B", "M", "k", "")


def fmt_count(n: float, unit: str = "") -> str:
    """1.23 k / M / B / T / P (decimal, as parameter counts and tokens are quoted), the prefix
    chosen after rounding (999,999 is "1.00 M")."""
    if not _finite(n):
        return "—"
    a = abs(n)
    i = _rung(a, _COUNT)
    if i is not None and i < len(_COUNT) - 1:
        return f"{_scaled(n / _COUNT[i][1], ',.2f')} {_COUNT_UNITS[i]}{unit}".rstrip()
    if 0 < a < 1e-3:
        return f"{_sci(n)} {unit}".rstrip()
    return f"{n:,.0f} {unit}".rstrip() if float(n).is_integer() else f"{n:,.3g} {unit}".rstrip()


_FLOPS = ((1e18, 1e18, ",.2f"), (1e15, 1e15, ",.2f"), (1e12, 1e12, ",.2f"), (1e9, 1e9, ",.2f"), (1e6, 1e6, ",.2f"),
          (0.0, 1.0, ",.0f"))
_FLOPS_UNITS = ("E", "P", "T", "G", "M", "")


def fmt_flops(f: float, per: str = "") -> str:
    """FLOP counts or rates: 1.23 PFLOP / 456 TFLOP/s (the prefix chosen after rounding)."""
    if not _finite(f):
        return "—"
    a = abs(f)
    i = _rung(a, _FLOPS)
    if i is not None and i < len(_FLOPS) - 1:
        return f"{_scaled(f / _FLOPS[i][1], ',.2f')} {_FLOPS_UNITS[i]}FLOP{per}"
    if 0 < a < 1e-3:
        return f"{_sci(f)} FLOP{per}"
    return f"{f:,.0f} FLOP{per}"


def fmt_gib(g: float) -> str:
    return "—" if not _finite(g) else f"{_scaled(g, ',.1f')} GiB"


_USD = ((1e6, 1e6, ",.2f"), (100, 1, ",.0f"), (1, 1, ",.2f"), (0.0, 1, ",.4f"))


def fmt_usd(x: float) -> str:
    """Dollars: $1.23 M, $1,234, $12.34, $0.1234 (the form chosen after rounding: $99.996 is
    "$100", not "$100.00")."""
    if not _finite(x):
        return "—"
    if x == 0:
        return "$0"   # a free GPU (price 0), not "$0.0000"
    a = abs(x)
    if a < 1e-4:
        return f"${_sci(x)}"
    i = _rung(a, _USD)
    if i == 0:
        return f"${_scaled(x / 1e6, ',.2f')} M"
    return f"${format(x, _USD[i if i is not None else -1][2])}"


def fmt_pct(x: float) -> str:
    return "—" if not _finite(x) else f"{_scaled(100 * x, '.1f')} %"


def fmt_sig(x: float) -> str:
    """About four significant figures in plain notation with thousands separators (13,430 not
    1.343e+04; 0.4123), scientific only where plain would be absurd."""
    if not _finite(x):
        return "—"
    a = abs(x)
    if a >= 1e15 or (0 < a < 1e-4):
        return _sci(x)
    if a >= 1000:
        return f"{x:,.0f}"
    return f"{x:.4g}"


_RATE = ((1e3, 1e3, ",.1f"), (1.0, 1.0, ",.1f"), (0.0, 1e-3, ",.1f"))
_RATE_UNITS = ("EFLOP/s", "PFLOP/s", "TFLOP/s")


def fmt_flops_rate(pflops: float) -> str:
    """A cluster's FLOP rate from PFLOP/s, in the unit that keeps it short (chosen after
    rounding): "989.0 TFLOP/s", "16.2 EFLOP/s" (the System page's "16,203.8 PFL…" lost its unit
    at 1,280 px)."""
    if not _finite(pflops):
        return "—"
    i = _rung(abs(pflops), _RATE)
    i = len(_RATE) - 1 if i is None else i
    return f"{_scaled(pflops / _RATE[i][1], ',.1f')} {_RATE_UNITS[i]}"


def fmt_num(x: float, spec: str = ",.1f") -> str:
    """Any figure with ``spec`` while short, in scientific notation when absurdly large."""
    return "—" if not _finite(x) else _scaled(x, spec)
