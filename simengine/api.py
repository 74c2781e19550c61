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


def search(space, objective: str = "tokens_per_s", top: int | None = None, progress=None, executor=None):
    """Rank every fitting layout of a search space (``simengine.search``). ``space`` is a
    ``SearchSpace`` or a dict of ``make_space``'s arguments ({"model", "system", "seq_len",
    "global_batch" | "global_batch_tokens", "gpus", "choices", "token_budget"}); ``executor`` is
    an executor object or a name ("inprocess", "process", "ray"); ``progress(done, total)``
    returning True cancels. Returns a ``SearchResult``."""
    from .search import run_search

    return run_search(space, objective=objective, top=top, progress=progress, executor=executor)
