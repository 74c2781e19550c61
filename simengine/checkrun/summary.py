"""One training log against one scenario, as plain data: what ``check-run`` prints (cli.py ``run``),
for the studio's Calibration page (``api.check_run``).

The measured step (``compare.measure``: the median after the warm-up iterations), the prediction
and its breakdown with the scale each part alone would need (``compare.compare``), the settings the
log states that the scenario contradicts (``stated.disagreements``) and, for Megatron logs, the
logged FLOPs beside the scenario's (``flops.logged_check``). With ``refit``: the compute-efficiency
scale that reproduces the first half of the steady iterations, checked on the second half
(``compare.refit_compute_scale``), and the scenario's system with it applied (``scaled_config``).
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .logs import parse_training_log

MIN_REFIT_ITERATIONS = 4   # steady iterations a refit needs: two to fit on, two held out (``halves``)


def check_run(config: dict[str, Any], log: str | bytes, warmup: int | None = None, refit: bool = False) -> dict[str, Any]:
    """The comparison of ``log`` (Megatron-LM or torchtitan stdout) with ``config``'s estimate
    (module docstring); ConfigError when the log cannot be read or compared."""
    from .compare import compare, measure

    run = parse_training_log(log)
    m = measure(run, config, warmup)
    c = compare(config, m)
    small = 0.01 * c.predicted_step_s   # a part under 1 % of the step closes no real gap alone
    out: dict[str, Any] = {
        "framework": run.framework, "iterations": len(run.iterations), "skipped": m.iterations_skipped,
        "used": len(m.iterations_used), "spread": m.spread, "stated": dict(run.stated),
        "mismatches": mismatches(run, config, m),
        "measured_step_s": m.step_time_s, "predicted_step_s": c.predicted_step_s, "rel_error": c.rel_error,
        "memory": [{"kind": kind, "measured_gib": got, "predicted_gib": pred}
                   for kind, got, pred in (("allocated", m.allocated_gib, c.predicted_allocated_gib),
                                           ("reserved", m.reserved_gib, c.predicted_reserved_gib)) if got is not None],
        "breakdown": [{"part": k, "predicted_s": v,
                       "scale_to_close": c.scale_to_close.get(k) if v >= small and (c.scale_to_close.get(k) or 0) > 0 else None}
                      for k, v in c.breakdown_s.items()],
        "warnings": list(run.warnings), "sha256": run.sha256,
    }
    if refit:
        out["refit"] = _refit(config, run, m, warmup)
    return out


def mismatches(run, config: dict[str, Any], m) -> list[str]:
    """What the log says the scenario contradicts: the settings it states (``stated.disagreements``)
    and, for a Megatron log, the FLOPs its TFLOP/s imply over the iterations used (``flops.mismatch``)."""
    from ..api import scenario_from
    from .flops import logged_check, mismatch
    from .stated import disagreements

    out = disagreements(run.stated, config)
    sc = scenario_from(config)
    fc = logged_check(run, m.iterations_used, sc)
    if fc is not None and (why := mismatch(fc, sc)):
        out.append(why)
    return out


def halves(run, config: dict[str, Any], warmup: int | None, m, field: str = "refit"):
    """(the first half of the steady iterations, the second, the second's label): what a refit
    without a second log fits on and holds out; ConfigError (naming ``field``) with too few."""
    from .compare import measure

    n = len(m.iterations_used)
    if n < MIN_REFIT_ITERATIONS:
        raise ConfigError([(field, f"a refit needs at least {MIN_REFIT_ITERATIONS} steady iterations, to hold some "
                                   f"out; the log has {n}")])
    return (measure(run, config, warmup, slice(0, n // 2)), measure(run, config, warmup, slice(n // 2, None)),
            f"iterations {m.iterations_used[n // 2]}+")


def _refit(config: dict[str, Any], run, m, warmup: int | None) -> dict[str, Any]:
    """The compute-efficiency scale fitted on the first half of the steady iterations and checked
    on the second (``halves``), with the system it gives."""
    from .compare import refit_compute_scale, scaled_config

    fit_on, hold, label = halves(run, config, warmup, m)
    r = refit_compute_scale(config, fit_on, hold, label, run.sha256)
    return {"factor": r.factor, "value": r.value, "fit_error": r.fit_error, "holdout_error": r.holdout_error,
            "holdout": r.holdout, "evaluations": r.evaluations, "provenance": r.provenance,
            "system": scaled_config(config, r.value)["system"]}
