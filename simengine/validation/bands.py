"""The estimate's uncertainty band carried onto a validation metric, so the README can say how
often a measured value falls inside it (``tools/readme_tables.py``, block ``validation:bands``).

Each metric is the report's step time or peak memory in the source's own definition
(``published/evaluate.py`` ``predict_metrics``): times scale with the step time, rates (tokens/s,
TFLOP/s, MFU, HFU, % of peak) with its inverse, so their band is the step-time band
(``Report.uncertainty``) moved onto the predicted value; memory rows (allocated or reserved) take
the relative width of the peak-memory band. Per-layer times (Korthikanti's Table 4) have no band
of their own: None. Read off the report alone: the validation package reaches the engine only
through ``simengine.api`` (tests/test_architecture.py).
"""

from __future__ import annotations

from typing import Any

TIME_METRICS = frozenset({"step_time", "iteration_time"})
RATE_METRICS = frozenset({"tokens_per_sec_per_gpu", "model_tflops_per_gpu", "achieved_tflops_per_gpu", "mfu", "hfu",
                          "aggregate_pflops", "pct_of_theoretical_peak"})
MEMORY_METRICS = frozenset({"peak_memory"})


def metric_band(metric: str, predicted: float, report: Any) -> tuple[float, float] | None:
    """(low, high) of ``metric`` whose prediction is ``predicted``, from ``report``'s bands."""
    if metric in MEMORY_METRICS:
        lo, hi = report.uncertainty["peak_memory_gib"]
        peak = report.peak_memory_gib
        return (predicted * lo / peak, predicted * hi / peak) if peak > 0 else (predicted, predicted)
    lo, hi = report.uncertainty["step_time_s"]
    step = report.step_time_s
    if metric in TIME_METRICS:
        return predicted * lo / step, predicted * hi / step
    if metric in RATE_METRICS:
        return predicted * step / hi, predicted * step / lo
    return None
