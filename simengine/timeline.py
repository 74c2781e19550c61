"""simulate(scenario) -> Timeline: the per-rank pipeline timeline of one step, from the same
priced stages the estimate uses (cost/stage.py) and the same engine (sim/)."""

from __future__ import annotations

from .config.scenario import Scenario
from .cost.stage import build_plan
from .pipeline import pipeline_input
from .sim import Timeline, simulate


def simulate_scenario(sc: Scenario) -> Timeline:
    return simulate(pipeline_input(sc, build_plan(sc)))
