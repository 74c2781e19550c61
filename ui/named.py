"""Named scenarios (``presets/scenarios.json``): which model and system each strategy preset was
written for, and its GPU count. Home opens one whole; the Strategy editor says which one a loaded
strategy preset belongs to when the current system cannot run it."""

from __future__ import annotations

from typing import Any

from simengine.errors import ConfigError
from simengine.presets import load_preset, named_scenarios, scenario_preset

from . import state
from .config_io import validate_scenario
from .text import md


def options() -> dict[str, str]:
    """Each named scenario's name → a one-line label ("DeepSeek-V3 · 1,024 × NVIDIA H100 …")."""
    out = {}
    try:
        table = named_scenarios()
    except ConfigError:   # a broken catalogue file must not break Home
        return {}
    for name, e in sorted(table.items()):
        try:
            model = load_preset("models", e["model"]).get("name", e["model"])
            gpu = load_preset("systems", e["system"]).get("gpu", {}).get("name", e["system"])
        except (ConfigError, KeyError, TypeError, AttributeError):
            continue
        out[name] = f"{name}: {model} on {int(e.get('num_gpus') or 0):,} × {gpu}"
    return out


def open_named(name: str) -> None:
    """Replace the whole scenario by the named one (a message either way, the scenario kept on error)."""
    try:
        cfg, issues = validate_scenario(scenario_preset(name))
    except ConfigError as e:
        state.notify("error", f"Could not open scenario {md(repr(name))}: {md(e)}", "named")
        return
    if cfg is None:
        state.notify("error", f"Scenario {md(repr(name))} is invalid: {md('; '.join(f'{f}: {m}' for f, m in issues[:4]))}", "named")
        return
    state.set_scenario(cfg, f"scenario {name}")
    state.notify("success", f"Opened the scenario {md(repr(name))}.", "named")


def strategy_hint(strategy_name: str, system: dict[str, Any]) -> str:
    """For a strategy preset written for a named scenario on another GPU count than the current
    system's: which scenario, as a sentence ('' when none or the count already matches)."""
    try:
        table = named_scenarios()
    except ConfigError:
        return ""
    for name, e in sorted(table.items()):
        if e.get("strategy") == strategy_name and int(e.get("num_gpus") or 0) != int(system.get("num_gpus") or 0):
            return (f" It was written for {int(e['num_gpus']):,} GPUs ({md(e['model'])} on {md(e['system'])}): open the "
                    f"scenario {md(repr(name))} on Home, or set num_gpus on the System page.")
    return ""
