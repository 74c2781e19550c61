"""The surface the app and the CLI use. Every function takes plain JSON-like dicts or validated
specs and returns pydantic models / dicts; bad input raises ``ConfigError`` naming the field."""

from __future__ import annotations

import json
import math
from typing import Any

from .config.scenario import Scenario, load_scenario
from .errors import ConfigError
from .estimate import estimate as _estimate
from .report import Report


def scenario_from(config: dict[str, Any] | Scenario) -> Scenario:
    if isinstance(config, Scenario):
        return config
    return load_scenario(config)


def estimate(config: dict[str, Any] | Scenario) -> Report:
    """Estimate one training step. ``config`` = {"model": {...}, "system": {...}, "strategy": {...}}."""
    sc = scenario_from(config)
    try:
        rep = _estimate(sc)
    except (ZeroDivisionError, OverflowError, ValueError) as e:  # numbers out of any sane range
        if isinstance(e, ConfigError):
            raise
        raise ConfigError([("system", "cannot estimate this scenario: the hardware figures or sizes are out of any "
                                      "computable range")]) from e
    if not (math.isfinite(rep.step_time_s) and rep.step_time_s > 0):
        raise ConfigError([("system", "cannot estimate this scenario: the step time is not finite (hardware figures "
                                      "too small or sizes too large)")])
    return rep


def estimate_json(config_json: str) -> dict[str, Any]:
    """JSON text in, report dict out (the studio caches on the JSON text)."""
    try:
        data = json.loads(config_json)
    except (TypeError, ValueError) as e:
        raise ConfigError([("", f"not valid JSON: {e}")]) from e
    return estimate(data).model_dump(mode="json")


def simulate(config: dict[str, Any] | Scenario):
    """Simulate the pipeline timeline of one step (per-rank spans, memory over time)."""
    from .timeline import simulate_scenario

    return simulate_scenario(scenario_from(config))


def calibrate(system: dict[str, Any] | Any, *, gemm=None, nccl=None, attention=None, grouped_gemm=None, memory=None):
    """Calibrate a system (a SystemSpec or its dict) from measured files (text, bytes or
    ``pathlib.Path``; ``nccl`` a list or a mapping name → content) →
    ``(SystemSpec, CalibrationSummary)`` (fits, errors, refused rows, provenance, plot curves)."""
    from pydantic import ValidationError

    from .calibration.calibrate import calibrate_with_summary
    from .config import SystemSpec
    from .errors import from_pydantic

    if not isinstance(system, SystemSpec):
        try:
            system = SystemSpec.model_validate(system)
        except ValidationError as e:
            raise from_pydantic(e, "system") from None
    return calibrate_with_summary(system, gemm, nccl, attention_csv=attention, grouped_gemm_csv=grouped_gemm,
                                  memory_csv=memory)


def coverage(config: dict[str, Any] | Scenario, measured_fields=()) -> dict[str, dict[str, float]]:
    """Share of the scenario's op time priced from measured / interpolated / extrapolated /
    default efficiencies, per op kind (``simengine.coverage``)."""
    from .coverage import coverage as _coverage

    return _coverage(scenario_from(config), measured_fields)


def list_user_systems(folder) -> list[str]:
    """Names of the saved user systems in ``folder`` (the caller picks it; ``calibration.store``)."""
    from .calibration.store import list_systems

    return list_systems(folder)


def load_user_system(folder, name: str):
    """The saved user system ``name`` (a validated SystemSpec)."""
    from .calibration.store import load_system

    return load_system(folder, name)


def save_user_system(folder, name: str, system, provenance=()):
    """Save ``system`` (validated first) as ``folder/name.json`` atomically, with its provenance."""
    from .calibration.store import save_system

    return save_system(folder, name, system, provenance)
