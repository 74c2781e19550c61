"""Named scenarios (presets/scenarios.json) in the studio: Home opens one whole (model, system,
strategy and its GPU count) and it estimates; a strategy preset loaded on a system of another GPU
count says which scenario it was written for."""

from __future__ import annotations

import json

from app_walk import open_app

from simengine.presets import named_scenarios, scenario_preset
from ui.config_io import validate_scenario


def _scenario(at) -> dict:
    return {s: json.loads(at.session_state[f"cfg.{s}"]) for s in ("model", "system", "strategy")}


def test_home_opens_a_named_scenario_whole_and_it_estimates():
    at = open_app("pages/home.py")
    names = at.selectbox(key="pick.named").options
    assert len(names) == len(named_scenarios()) - 3   # small, medium, large: the size buttons above it
    at.selectbox(key="pick.named").set_value("deepseek-v3-ep64").run()
    at.button(key="open.named").click().run()
    assert not at.exception
    want, _ = validate_scenario(scenario_preset("deepseek-v3-ep64"))
    assert _scenario(at) == want and want["system"]["num_gpus"] == 1024
    assert any("Opened the scenario" in str(s.value) for s in at.success)
    assert not any("cannot be estimated" in str(e.value) for e in at.error)
    assert any(m.label == "Step time" and m.value.endswith("s") for m in at.metric)


def test_a_strategy_preset_for_another_gpu_count_names_its_scenario():
    at = open_app("pages/strategy.py")   # the default system: 8 GPUs
    at.selectbox(key="pick.strategy").set_value("deepseek-v3-ep64")
    at.button(key="load.strategy").click().run()
    warned = " ".join(str(w.value) for w in at.warning)
    assert "written for 1,024 GPUs" in warned and "deepseek-v3-ep64" in warned and "num_gpus" in warned
    at.selectbox(key="pick.strategy").set_value("llama3-8b-fsdp")   # written for 8 GPUs: no hint
    at.button(key="load.strategy").click().run()
    assert any("Loaded strategy preset" in str(s.value) for s in at.success)
    at.selectbox(key="pick.strategy").set_value("medium")   # a size scenario (no count of its own): no crash
    at.button(key="load.strategy").click().run()
    assert not at.exception and any("Loaded strategy preset" in str(s.value) for s in at.success)
