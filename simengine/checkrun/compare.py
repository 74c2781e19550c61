"""Compare a measured training run with simengine's prediction for that exact scenario, and
optionally refit one named physical factor.

Measured step time: the median over the logged iterations after the warm-up ones (the first
iterations include compilation, allocator growth and NCCL setup; Megatron-LM's own timers skip
nothing, so the caller chooses ``warmup``). torchtitan logs tokens/s per GPU, turned into a step
time with the scenario's global tokens per step (``logs`` module docstring).

Residual by component: the prediction's breakdown (``Report.breakdown_s``) beside the measured
total, and for each component the scale it alone would need to close the gap
(1 + residual / component) — a pointer to where the error can live, not an attribution.

Refit (``refit_compute_scale``): the one factor a single scenario can identify, a multiplier on
every compute efficiency (GEMM, attention, grouped GEMM, their tables), found by the secant method
on the real estimate until the predicted step time matches the fitting iterations; checked on
held-out iterations (the later half) or on a second log of the same scenario. Network efficiency
per tier needs runs that differ in their communication: :mod:`.refit` fits compute, scale-up and
scale-out factors on several runs (``check-run --runs FILE --refit``) with a leave-one-run-out check.
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass
from typing import Any

from ..api import estimate, scenario_from
from ..errors import ConfigError
from .logs import RunLog

COMPUTE_PARTS = ("forward_compute", "backward_compute", "recompute")
_SCALARS = ("gemm", "fp8_gemm", "fp4_gemm", "attention_fwd", "attention_bwd", "grouped_gemm")
_TABLES = ("gemm_table", "attention_table", "grouped_gemm_table")


@dataclass(frozen=True)
class Measured:
    step_time_s: float
    iterations_used: tuple[int, ...]
    iterations_skipped: int
    spread: float                        # (max − min)/median over the iterations used
    allocated_gib: float | None
    reserved_gib: float | None
    framework: str


@dataclass(frozen=True)
class Comparison:
    measured: Measured
    predicted_step_s: float
    residual_s: float                    # measured − predicted
    rel_error: float                     # predicted / measured − 1
    breakdown_s: dict[str, float]
    scale_to_close: dict[str, float]     # per component: the factor it alone would need
    predicted_allocated_gib: float
    predicted_reserved_gib: float


def step_times(log: RunLog, config: dict[str, Any]) -> list[tuple[int, float]]:
    """(step, seconds) of every logged iteration."""
    if log.framework == "megatron":
        return [(i.step, i.time_s) for i in log.iterations if i.time_s and i.time_s > 0]
    sc = scenario_from(config)
    tokens = sc.strategy.global_batch_size * sc.strategy.seq_len
    return [(i.step, tokens / (i.tokens_per_s_per_gpu * sc.system.num_gpus))
            for i in log.iterations if i.tokens_per_s_per_gpu and i.tokens_per_s_per_gpu > 0]


def measure(log: RunLog, config: dict[str, Any], warmup: int | None = None,
            part: slice | None = None) -> Measured:
    """Median step time after ``warmup`` iterations (default: max(1, 10 %) of them, at most all
    but one); ``part`` selects a sub-range of the steady iterations (for hold-out checks)."""
    times = step_times(log, config)
    if not times:
        raise ConfigError([("log", "the log has no iteration with a positive step time")])
    skip = max(1, len(times) // 10) if warmup is None else warmup
    if not isinstance(skip, int) or skip < 0:
        raise ConfigError([("--warmup", f"must be a non-negative integer, got {skip!r}")])
    if warmup is not None and skip >= len(times):  # never compare with an iteration the user said to skip
        raise ConfigError([("--warmup", f"--warmup {skip} leaves no iteration to compare: the log has {len(times)} "
                                        f"with a positive step time")])
    skip = min(skip, len(times) - 1)
    steady = times[skip:]
    if part is not None:
        steady = steady[part] or steady
    vals = [t for _, t in steady]
    med = statistics.median(vals)
    return Measured(med, tuple(s for s, _ in steady), skip, (max(vals) - min(vals)) / med,
                    log.max_allocated_gib, log.max_reserved_gib, log.framework)


def compare(config: dict[str, Any], measured: Measured) -> Comparison:
    rep = estimate(config)
    pred = rep.step_time_s
    resid = measured.step_time_s - pred
    scale = {k: (1 + resid / v) for k, v in rep.breakdown_s.items() if v > 0}
    return Comparison(measured, pred, resid, pred / measured.step_time_s - 1, dict(rep.breakdown_s), scale,
                      rep.peak_memory_gib, rep.reserved_memory_gib)


def scaled_config(config: dict[str, Any], s: float) -> dict[str, Any]:
    """``config`` with every compute efficiency multiplied by ``s`` (clipped to the schema bounds)."""
    cfg = copy.deepcopy(config)
    eff = cfg["system"].setdefault("efficiency", {})
    base = scenario_from(config).system.efficiency
    for k in _SCALARS:
        v = getattr(base, k)
        if v is not None:   # fp4_gemm unset follows fp8_gemm (cost/compute.py gemm_level)
            eff[k] = min(max(v * s, 1e-4), 1.0)
    for t in _TABLES:
        eff[t] = [{**p.model_dump(mode="json"), "efficiency": min(max(p.efficiency * s, 1e-4), 2.0)}
                  for p in getattr(base, t)]
    return cfg


@dataclass(frozen=True)
class Refit:
    factor: str
    value: float
    fit_error: float          # predicted/measured − 1 on the fitting iterations after the fit
    holdout_error: float      # the same on the held-out iterations or log
    holdout: str              # what was held out
    evaluations: int
    provenance: dict[str, Any]


def refit_compute_scale(config: dict[str, Any], fit_on: Measured, holdout: Measured, holdout_label: str,
                        log_digest: str = "", max_iter: int = 8) -> Refit:
    """Secant search on log(s) for the compute-efficiency scale that reproduces ``fit_on``."""
    target = fit_on.step_time_s

    def f(s: float) -> float:
        return estimate(scaled_config(config, s)).step_time_s / target - 1

    s0, e0 = 1.0, f(1.0)
    rep = estimate(config)
    comp = sum(rep.breakdown_s.get(k, 0.0) for k in COMPUTE_PARTS)
    other = rep.step_time_s - comp
    s1 = min(max(comp / max(target - other, 0.05 * comp), 0.05), 20.0) if comp > 0 else 1.0
    e1, n = f(s1), 2
    while abs(e1) > 1e-4 and n < max_iter and e1 != e0:
        s2 = s1 - e1 * (s1 - s0) / (e1 - e0)
        s0, e0, s1 = s1, e1, min(max(s2, 0.02), 50.0)
        e1, n = f(s1), n + 1
    pred = estimate(scaled_config(config, s1)).step_time_s
    hold = pred / holdout.step_time_s - 1
    prov = {"factor": "compute_efficiency_scale", "value": s1, "log_sha256": log_digest,
            "iterations_used": list(fit_on.iterations_used), "fit_error": e1, "holdout": holdout_label,
            "holdout_error": hold}
    return Refit("compute_efficiency_scale", s1, e1, hold, holdout_label, n + 1, prov)


