"""How each source defines its FLOP-based metrics, in words: the Validation page says it beside a
row whose figure the Estimate page shows under the same name but counts otherwise (torchtitan's
Float8 MFU is against the FP8 peak, 23.5 %, where the Estimate's MFU of the loaded run is 51.5 %
against the BF16 peak). The conversions themselves are ``evaluate.py``'s (``predict_metrics``)."""

from __future__ import annotations

from .types import PublishedRun

_EQ3 = "Narayanan et al. 2021 Eq. 3 FLOPs (the recomputed forward counted)"
_MEGATRON = "Megatron-LM's FLOP formula (model FLOPs, no recompute)"
_BRIDGE = ("Megatron-Bridge's FLOP count (flop_utils.num_floating_point_operations: causal attention halved, MTP "
           "and the padded vocabulary counted)")

_FIXED: dict[tuple[str, str], str] = {
    ("narayanan21", "achieved_tflops_per_gpu"): f"{_EQ3} per second per GPU",
    ("narayanan21", "pct_of_theoretical_peak"): f"{_EQ3} against the A100's 312 TFLOP/s",
    ("narayanan21", "aggregate_pflops"): f"{_EQ3} per second",
    ("korthikanti22", "mfu"): "Korthikanti et al. 2022 Eq. 7 FLOPs against the A100's 312 TFLOP/s",
    ("korthikanti22", "hfu"): "Korthikanti et al. 2022 Eq. 8 (selective) or Eq. 3 (full recompute) FLOPs against 312 TFLOP/s",
    ("megatron-readme", "achieved_tflops_per_gpu"): f"{_MEGATRON} per second per GPU",
    ("megatron-readme", "mfu"): f"{_MEGATRON} against the H100's 989 TFLOP/s",
    ("megatron-readme", "aggregate_pflops"): f"{_MEGATRON} per second",
    ("megatron-bridge", "model_tflops_per_gpu"): f"{_BRIDGE} per second per GPU",
    ("nemo", "model_tflops_per_gpu"): "model FLOPs (recompute not counted) per second per GPU",
}


def convention(run: PublishedRun, metric: str) -> str:
    """The source's definition of ``metric`` where it is a FLOP count ('' for times, throughput
    and memory, which mean what the Estimate page's do)."""
    if run.source == "torchtitan" and metric == "mfu":
        peak = run.flop_basis.get("peak")
        fp8 = run.config["strategy"].get("dtype") == "fp8"
        return ("torchtitan's MFU: 6·N + 12·L·H·Q·T FLOPs per token against "
                + (f"{peak:,.0f} TFLOP/s" if isinstance(peak, (int, float)) else "the dense peak")
                + (" (the FP8 peak: what its Float8 rows imply)" if fp8 else " (the BF16 peak)"))
    return _FIXED.get((run.source, metric), "")
