"""Scenario builders over the preset catalog, shared by the tests (import: from scenarios import make)."""

from __future__ import annotations

import copy
from pathlib import Path

from simengine import presets
from simengine.config import load_scenario

REPO = Path(__file__).resolve().parents[1]
VALIDATION = REPO / "simengine" / "validation" / "data"  # measured data bundled with the package
BASE_STRATEGY = {"tp": 1, "pp": 1, "micro_batch_size": 1, "global_batch_size": 8, "seq_len": 4096}


def scenario_dict(model_preset="llama3-8b", system_preset="h100-sxm5-80gb", strategy_preset=None,
                  model=None, system=None, strategy=None):
    """A scenario dict from presets, with per-section field overrides."""
    cfg = {
        "model": presets.load_preset("models", model_preset),
        "system": presets.load_preset("systems", system_preset),
        "strategy": presets.load_preset("strategies", strategy_preset) if strategy_preset else dict(BASE_STRATEGY),
    }
    for section, fields in (("model", model), ("system", system), ("strategy", strategy)):
        if fields:
            cfg[section] = {**cfg[section], **copy.deepcopy(fields)}
    return cfg


def make(*args, **kwargs):
    return load_scenario(scenario_dict(*args, **kwargs))


def step_times_off_on(cfg: dict, flag: str, **fixed):
    """(step time with ``flag`` off, with it on) of ``cfg`` with the strategy fields ``fixed``
    set in both, or None when the scenario with it off is invalid (the overlap invariants:
    turning an overlap on never makes a step slower)."""
    from simengine import api
    from simengine.errors import ConfigError

    off, on = copy.deepcopy(cfg), copy.deepcopy(cfg)
    for c, value in ((off, False), (on, True)):
        c["strategy"].update(fixed)
        c["strategy"][flag] = value
    try:
        t_off = api.estimate(off).step_time_s
    except ConfigError:
        return None
    return t_off, api.estimate(on).step_time_s
