"""Report → each source's own metric; comparison and summary tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ...errors import ConfigError
from ..bands import metric_band
from .types import PublishedRun, SkippedRun
from .flops import (flops_eq3, flops_eq7, flops_eq8, flops_megatron, flops_megatron_bridge, flops_megatron_bridge_hybrid,
                    torchtitan_flops_per_token)


LayerTimes = Callable[[dict[str, Any]], tuple[float, float]]  # config → (forward, backward) seconds of one layer


def _layer_times(config: dict[str, Any]) -> tuple[float, float]:
    """Forward and backward (incl. recompute) seconds of one transformer layer for one micro-batch:
    the chunk cost of a 2-layer model minus that of a 1-layer model (cancels embedding and head)."""
    from ...api import layer_seconds

    return layer_seconds(config)


def predict_metrics(run: PublishedRun, report: Any, layer_times: LayerTimes | None = None) -> dict[str, float]:
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
    - NeMo / Megatron-Bridge ``tokens_per_sec_per_gpu`` as above; NeMo ``model_tflops_per_gpu`` =
      report.model_flops_per_step / step / GPUs (model FLOPs, recompute excluded); Megatron-Bridge's in its
      own FLOP count (flops_megatron_bridge) / step / GPUs.
    """
    metric_of = _METRIC_OF.get(run.source)
    out: dict[str, float] = {}
    for metric in run.measured:
        v = metric_of(run, report, metric, layer_times) if metric_of is not None else None
        if v is not None:
            out[metric] = v
    return out


def _narayanan21(run: PublishedRun, report: Any, metric: str, layer_times: LayerTimes | None) -> float | None:
    fb, step = run.flop_basis, report.step_time_s
    F = flops_eq3(fb["B"], fb["s"], fb["l"], fb["h"], fb["V"])
    if metric == "achieved_tflops_per_gpu":
        return F / step / fb["gpus"] / 1e12
    if metric == "pct_of_theoretical_peak":
        return 100.0 * F / step / fb["gpus"] / 312e12
    if metric == "aggregate_pflops":
        return F / step / 1e15
    return None


def _korthikanti22(run: PublishedRun, report: Any, metric: str, layer_times: LayerTimes | None) -> float | None:
    fb, step, gpus = run.flop_basis, report.step_time_s, run.flop_basis["gpus"]
    args = (fb["B"], fb["s"], fb["l"], fb["h"], fb["V"])
    rc = run.config["strategy"].get("recompute")
    if metric == "iteration_time":
        return step
    if metric == "mfu":
        return 100.0 * flops_eq7(*args) / (step * 312e12 * gpus)
    if metric == "hfu":
        hw = flops_eq8(*args) if rc == "selective" else flops_eq3(*args) if rc == "full" else flops_eq7(*args)
        return 100.0 * hw / (step * 312e12 * gpus)
    if metric.startswith("layer_") and layer_times is not None:
        f, b = layer_times(run.config)
        return 1e3 * {"layer_forward_time": f, "layer_backward_time": b, "layer_fwd_bwd_time": f + b}[metric]
    return None


def _megatron_readme(run: PublishedRun, report: Any, metric: str, layer_times: LayerTimes | None) -> float | None:
    fb, step = run.flop_basis, report.step_time_s
    F = flops_megatron(fb["B"], fb["s"], fb["l"], fb["h"], fb["heads"], fb["kv"], fb["ffn"], fb["V"])
    if metric == "achieved_tflops_per_gpu":
        return F / step / fb["gpus"] / 1e12
    if metric == "mfu":
        return 100.0 * F / step / fb["gpus"] / 989e12
    if metric == "aggregate_pflops":
        return F / step / 1e15
    return None


def _torchtitan(run: PublishedRun, report: Any, metric: str, layer_times: LayerTimes | None) -> float | None:
    if metric == "tokens_per_sec_per_gpu":
        return report.tokens_per_s_per_gpu
    if metric == "peak_memory":
        return report.reserved_memory_gib
    if metric == "mfu":
        fpt = torchtitan_flops_per_token(run.config["model"], run.config["strategy"]["seq_len"])
        return 100.0 * fpt * report.tokens_per_s_per_gpu / (run.flop_basis["peak"] * 1e12)
    return None


def _lora(run: PublishedRun) -> bool:
    """A LoRA run: its page's TFLOP/s counts about 4·N per token (NeMo 24.07 LLAMA2-7B: 663 TFLOP/s at
    24,824 tokens/s = 26.7 GFLOP/token, 4·N = 27.0), a convention neither source documents, so only
    its tokens/s is compared."""
    return run.config["strategy"].get("peft") == "lora"


def _nemo(run: PublishedRun, report: Any, metric: str, layer_times: LayerTimes | None) -> float | None:
    if metric == "tokens_per_sec_per_gpu":
        return report.tokens_per_s_per_gpu
    if metric == "model_tflops_per_gpu" and not _lora(run):
        return report.model_flops_per_step / report.step_time_s / run.flop_basis["gpus"] / 1e12
    return None


def _megatron_bridge(run: PublishedRun, report: Any, metric: str, layer_times: LayerTimes | None) -> float | None:
    """As NeMo, but ``model_tflops_per_gpu`` in Megatron-Bridge's own FLOP count (flops_megatron_bridge:
    flop_utils.num_floating_point_operations, causal attention halved, MTP and padded vocab counted)."""
    if metric == "model_tflops_per_gpu":
        if _lora(run):  # (above)
            return None
        st, model = run.config["strategy"], run.config["model"]
        if model.get("hybrid_pattern"):  # Bridge's hybrid branch
            F = flops_megatron_bridge_hybrid(model, st["seq_len"], st["tp"]) * st["global_batch_size"]
        else:
            F = flops_megatron_bridge(model, st["seq_len"], st["tp"], run.flop_basis.get("glu_silu", True)) * st["global_batch_size"]
        return F / report.step_time_s / run.flop_basis["gpus"] / 1e12
    return _nemo(run, report, metric, layer_times)


def _dgxc(run: PublishedRun, report: Any, metric: str, layer_times: LayerTimes | None) -> float | None:
    """dgxc-benchmarking's "Training step time (seconds per step)" (its tokens/s is GBS × seq / that)."""
    return report.step_time_s if metric == "step_time" else None


def _llama3_report(run: PublishedRun, report: Any, metric: str, layer_times: LayerTimes | None) -> float | None:
    """The Llama 3 report's TFLOPs/GPU (Table 4; its BF16 MFU is that over 989): model FLOPs per token
    6·N + 12·L·H·Q·T (Chowdhery et al. 2023, App. B, the MFU its §3.3.2 reports; the report prints no
    count of its own) × tokens/s per GPU."""
    if metric != "achieved_tflops_per_gpu":
        return None
    fpt = torchtitan_flops_per_token(run.config["model"], run.config["strategy"]["seq_len"])
    return fpt * report.tokens_per_s_per_gpu / 1e12


# source (types.SOURCES) → its metric conversion
_METRIC_OF: dict[str, Callable[[PublishedRun, Any, str, LayerTimes | None], float | None]] = {
    "narayanan21": _narayanan21, "korthikanti22": _korthikanti22, "megatron-readme": _megatron_readme,
    "torchtitan": _torchtitan, "nemo": _nemo, "megatron-bridge": _megatron_bridge,
    "deepseek-v3-report": _nemo,  # tokens/s per GPU only
    "dgxc-benchmarking": _dgxc, "llama3-report": _llama3_report,
}


@dataclass(frozen=True)
class Comparison:
    run_id: str
    source: str
    metric: str
    measured: float
    predicted: float
    weak: bool
    band: tuple[float, float] | None = None   # the estimate's band on this metric (validation/bands.py)

    @property
    def error_pct(self) -> float:
        """Signed error of the prediction, % of the measured value."""
        return 100.0 * (self.predicted - self.measured) / self.measured


def evaluate(runs: list[PublishedRun]) -> tuple[list[Comparison], list[SkippedRun]]:
    """Estimate every run and compare each metric; runs the engine rejects come back as skipped."""
    import json

    from ...api import estimate

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
                comps.append(Comparison(run.run_id, run.source, metric, meas, pred[metric], run.weak,
                                        metric_band(metric, pred[metric], rep)))
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
