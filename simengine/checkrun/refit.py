"""Refit a small named set of physical factors on several measured runs, with a leave-one-run-out
check.

Factors (each a multiplier, 1 = the system as given):

* ``compute``   — every compute efficiency (GEMM, attention, grouped GEMM and their tables;
  :func:`.compare.scaled_config`);
* ``scale_up``  — the scale-up network efficiency (``efficiency.collective_scale_up`` and the
  measured collective fits on that tier);
* ``scale_out`` — the same for the scale-out tier.

Fit: Gauss-Newton (Nocedal & Wright 2006, §10.3) on the log-ratio residuals
r_i = ln(T_pred,i(f) / T_meas,i) in log-factor space, the Jacobian by forward differences of the
real estimate (step 0.05 in ln f). A factor whose column is ~0 (no run spends time on it) is not
identifiable and stays at 1. Held out: each run predicted by the factors fitted on the others
(leave-one-out), so the reported error is one on data the fit did not see.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..api import estimate, scenario_from
from ..config.system import CollectivePoint, Efficiency
from .compare import scaled_config

FACTORS = ("compute", "scale_up", "scale_out")
_STEP = 0.05
_MIN_COLUMN = 1e-4   # d ln T / d ln f below this: the factor does not move any run


def apply_factors(config: dict[str, Any], f: dict[str, float]) -> dict[str, Any]:
    """``config`` with the factors applied (efficiencies clipped to their schema bounds)."""
    cfg = scaled_config(config, f.get("compute", 1.0)) if f.get("compute", 1.0) != 1.0 else copy.deepcopy(config)
    base = scenario_from(config).system.efficiency
    eff = cfg["system"].setdefault("efficiency", {})
    for tier in ("scale_up", "scale_out"):
        s = f.get(tier, 1.0)
        if s == 1.0:
            continue
        lo, hi = _bounds(Efficiency, f"collective_{tier}")
        eff[f"collective_{tier}"] = min(max(getattr(base, f"collective_{tier}") * s, lo), hi)
        plo, phi = _bounds(CollectivePoint, "efficiency")
        eff["collective_table"] = [
            {**p.model_dump(mode="json"), "efficiency": min(max(p.efficiency * s, plo), phi)} if p.tier == tier
            else p.model_dump(mode="json") for p in base.collective_table]
        base = scenario_from(cfg).system.efficiency  # the next tier scales what this one left
    return cfg


def _bounds(model: type, field: str) -> tuple[float, float]:
    """The schema's (ge, le) of ``model.field``: a scaled efficiency is clipped to what validates
    (SystemSpec's tier defaults stop at 1, a measured fit at 2: config/system.py)."""
    meta = model.model_fields[field].metadata   # type: ignore[attr-defined]
    lo = next(m.ge for m in meta if getattr(m, "ge", None) is not None)
    hi = next(m.le for m in meta if getattr(m, "le", None) is not None)
    return float(lo), float(hi)


@dataclass(frozen=True)
class FactorFit:
    values: dict[str, float]
    identifiable: tuple[str, ...]
    errors: tuple[float, ...]            # predicted/measured − 1 per run after the fit
    holdout_errors: tuple[float, ...]    # the same, each run left out of its own fit (empty for one run)
    evaluations: int

    @property
    def rms(self) -> float:
        return math.sqrt(sum(e * e for e in self.errors) / len(self.errors))

    @property
    def holdout_rms(self) -> float | None:
        h = self.holdout_errors
        return math.sqrt(sum(e * e for e in h) / len(h)) if h else None


def _residuals(runs, logf: np.ndarray, names: Sequence[str]) -> np.ndarray:
    f = {n: float(math.exp(v)) for n, v in zip(names, logf, strict=True)}
    return np.array([math.log(estimate(apply_factors(cfg, f)).step_time_s / t) for cfg, t in runs])


_HALVINGS = 5   # step halvings tried along a direction before the next one


def _alone(Ja: np.ndarray, r: np.ndarray, i: int) -> np.ndarray:
    """The Gauss-Newton step of the ``i``-th active factor alone (the others held)."""
    col = Ja[:, i]
    out = np.zeros(Ja.shape[1])
    norm = float(col @ col)
    if norm > 0:
        out[i] = -float(col @ r) / norm
    return out


def _backtrack(runs, names, x: np.ndarray, r: np.ndarray, active: list[int], direction: np.ndarray):
    """((x, residuals) of the first of ``direction``, its half, … that lowers the squared error,
    or None; the estimates' count)."""
    evals = 0
    for _ in range(_HALVINGS + 1):
        x_new = x.copy()
        x_new[active] = np.clip(x[active] + direction, math.log(0.02), math.log(50.0))
        r_new = _residuals(runs, x_new, names)
        evals += len(runs)
        if np.sum(r_new ** 2) < np.sum(r ** 2) - 1e-12:
            return (x_new, r_new), evals
        direction = direction / 2.0
    return None, evals


def _gauss_newton(runs, names: Sequence[str], iterations: int = 6) -> tuple[dict[str, float], tuple[str, ...], int]:
    k = len(names)
    x = np.zeros(k)
    r = _residuals(runs, x, names)
    evals = len(runs)
    active = list(range(k))
    for it in range(iterations):
        J = np.zeros((len(runs), k))
        for j in active:
            dx = x.copy()
            dx[j] += _STEP
            J[:, j] = (_residuals(runs, dx, names) - r) / _STEP
            evals += len(runs)
        if it == 0:
            active = [j for j in active if np.max(np.abs(J[:, j])) > _MIN_COLUMN]
            if not active:
                break
        Ja = J[:, active]
        step, *_ = np.linalg.lstsq(Ja, -r, rcond=None)
        # backtracking (step halving, Nocedal & Wright 2006 §3.1) along the Gauss-Newton step, then
        # along each factor's own step: a joint step can overshoot where the model is far from
        # linear (a factor clipped at an efficiency of 1), and stopping at the first worse step left
        # fits worse than a one-factor fit of the same runs
        moved = None
        for direction in [step] + [_alone(Ja, r, i) for i in range(len(active))]:
            moved, n = _backtrack(runs, names, x, r, active, direction)
            evals += n
            if moved is not None:
                break
        if moved is None:
            break
        x_new, r = moved
        step, x = x_new[active] - x[active], x_new
        if np.max(np.abs(step)) < 1e-4:
            break
    return {n: float(math.exp(x[i])) for i, n in enumerate(names)}, tuple(names[j] for j in active), evals


def fit_factors(runs: Sequence[tuple[dict[str, Any], float]], names: Sequence[str] = FACTORS) -> FactorFit:
    """Fit ``names`` (a subset of :data:`FACTORS`) to ``runs`` = [(config, measured step seconds)]."""
    unknown = [n for n in names if n not in FACTORS]
    if unknown:
        from ..errors import ConfigError

        raise ConfigError([("--factors", f"unknown factor(s) {', '.join(unknown)}; known: {', '.join(FACTORS)}")])
    runs = list(runs)
    values, ident, evals = _gauss_newton(runs, list(names))
    errors = tuple(math.expm1(e) for e in _residuals(runs, np.log([values[n] for n in names]), list(names)))
    held: list[float] = []
    if len(runs) > 1:
        for i in range(len(runs)):
            rest = runs[:i] + runs[i + 1:]
            v, _, n = _gauss_newton(rest, list(names), iterations=4)
            evals += n
            cfg, t = runs[i]
            held.append(estimate(apply_factors(cfg, v)).step_time_s / t - 1)
    return FactorFit(values, ident, errors, tuple(held), evals)
