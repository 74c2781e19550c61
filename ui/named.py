"""Named scenarios (``presets/scenarios.json``): which model and system each strategy preset was
written for, and its GPU count. Home opens one whole; the Strategy editor says which one a loaded
strategy preset belongs to when the current system cannot run it."""

from __future__ import annotations

import re
from typing import Any

from simengine.errors import ConfigError
from simengine.presets import SCENARIO_SIZES, load_preset, named_scenarios, scenario_preset

from . import state
from .config_io import validate_scenario
from .text import md


def _gpus(entry: dict[str, Any]) -> int:
    """A named scenario's GPU count: its own, else its system preset's (the size scenarios)."""
    n = entry.get("num_gpus")
    if n is None:
        n = load_preset("systems", entry["system"]).get("num_gpus")
    return int(n) if isinstance(n, int) and not isinstance(n, bool) else 0


def options() -> dict[str, str]:
    """Each named scenario's name → a one-line label ("DeepSeek-V3 · 1,024 × NVIDIA H100 …"); the
    size scenarios have their own buttons on Home."""
    out = {}
    try:
        table = named_scenarios()
    except ConfigError:   # a broken catalogue file must not break Home
        return {}
    for name, e in sorted(table.items()):
        if name in SCENARIO_SIZES:
            continue
        try:
            model = load_preset("models", e["model"]).get("name", e["model"])
            gpu = load_preset("systems", e["system"]).get("gpu", {}).get("name", e["system"])
            dtype = load_preset("strategies", e["strategy"]).get("dtype", "bf16")
            tail = f" · {dtype.upper()}" if dtype in ("fp8", "nvfp4") else ""
            out[name] = f"{model} · {_gpus(e):,} × {_short(gpu)}{tail}"   # the part that tells them apart, whole at 1,280 px
        except (ConfigError, KeyError, TypeError, AttributeError):
            continue
    return out


def open_named(name: str) -> None:
    """Replace the whole scenario by the named one (a message either way, the scenario kept on error)."""
    try:
        cfg, issues = validate_scenario(scenario_preset(name))
    except (ConfigError, KeyError, TypeError, AttributeError) as e:   # a malformed catalogue entry: a message
        state.notify("error", f"Could not open scenario {md(repr(name))}: {md(str(e) or type(e).__name__)}", "named")
        return
    if cfg is None:
        state.notify("error", f"Scenario {md(repr(name))} is invalid: {md('; '.join(f'{f}: {m}' for f, m in issues[:4]))}", "named")
        return
    state.set_scenario(cfg, f"scenario {name}")
    state.notify("success", f"Opened the scenario {md(repr(name))}.", "named")


def _short(gpu: str) -> str:
    """"NVIDIA GB300 (Blackwell Ultra GPU)" → "GB300", "NVIDIA H100 80GB HBM3" → "H100 80GB",
    "NVIDIA A100-SXM4-80GB" → "A100 80GB": the vendor, the parenthesis, the memory type and the
    form factor go (they cut the labels at 1,280 px); the model and its memory size stay."""
    name = gpu.removeprefix("NVIDIA ").removeprefix("AMD Instinct ").split(" (")[0]
    name = re.sub(r"-SXM\d?-?", " ", name)
    return re.sub(r" HBM\w*$", "", name).strip()


def strategy_hint(strategy_name: str, model: dict[str, Any], system: dict[str, Any]) -> str:
    """For a strategy preset written for a named scenario the current one is not — another model,
    GPU or GPU count: which scenario, as a sentence ('' when none or the scenario already matches)."""
    try:
        table = named_scenarios()
    except ConfigError:
        return ""
    for name, e in sorted(table.items()):
        if e.get("strategy") != strategy_name or name in SCENARIO_SIZES:
            continue
        try:
            n = _gpus(e)
            want_model = load_preset("models", e["model"]).get("name")
            want_gpu = load_preset("systems", e["system"]).get("gpu", {}).get("name")
        except (ConfigError, KeyError, TypeError, AttributeError):
            continue
        same = model.get("name") == want_model and system.get("gpu", {}).get("name") == want_gpu
        if same and n == system.get("num_gpus"):
            return ""
        how = "or set num_gpus on the System page" if same else "where its model and system come with it"
        return (f" It was written for {md(want_model)} on {n:,} × {md(_short(str(want_gpu)))}: open the scenario "
                f"{md(repr(name))} on Home, {how}.")
    return ""
