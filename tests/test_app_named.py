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


def test_a_strategy_preset_for_another_scenario_names_it():
    at = open_app("pages/strategy.py")   # the default: the small model on 8 H100
    at.selectbox(key="pick.strategy").set_value("deepseek-v3-ep64")
    at.button(key="load.strategy").click().run()
    warned = " ".join(str(w.value) for w in at.warning)
    assert "written for DeepSeek-V3" in warned and "1,024 × H100" in warned and "'deepseek-v3-ep64' on Home" in warned
    assert "num_gpus" not in warned   # another model: a GPU count would not fix it
    at.selectbox(key="pick.strategy").set_value("qwen3-30b-a3b-ep8")   # the same 8 GPUs, another model and GPU
    at.button(key="load.strategy").click().run()
    assert "'qwen3-30b-a3b-ep8' on Home" in " ".join(str(w.value) for w in at.warning)
    at.selectbox(key="pick.strategy").set_value("medium")   # a size scenario (no count of its own): no crash
    at.button(key="load.strategy").click().run()
    assert not at.exception and any("Loaded strategy preset" in str(s.value) for s in at.success)


def test_only_the_gpu_count_differs_so_it_says_set_num_gpus():
    at = open_app("pages/home.py")
    at.selectbox(key="pick.named").set_value("llama3-70b-tp4-pp4").run()
    at.button(key="open.named").click().run()
    at.switch_page("pages/strategy.py").run()
    at.selectbox(key="pick.strategy").set_value("llama3-70b-tp4-pp4")
    at.button(key="load.strategy").click().run()   # the scenario it was written for: no hint
    assert any("Loaded strategy preset" in str(s.value) for s in at.success)
    from ui.named import strategy_hint

    model, system = _scenario(at)["model"], _scenario(at)["system"]
    said = strategy_hint("llama3-70b-tp4-pp4", model, dict(system, num_gpus=32))
    assert "64 × H100" in said and "set num_gpus" in said


def test_named_labels_read_whole_and_name_a_low_precision():
    """At 1,280 px "Llama-3-70B · 64 × GB300 (Blackwell Ultra" was cut (a browser audit): the GPU's
    parenthesis, memory type and form factor go, and an FP8 / NVFP4 scenario says its precision."""
    from ui import named

    labels = named.options()
    assert labels["llama3-70b-nvfp4-gb300"] == "Llama-3-70B · 64 × GB300 · NVFP4"
    assert labels["llama3-70b-tp4-pp4"] == "Llama-3-70B · 64 × H100 80GB"
    assert labels["megatron-gpt-145.6b-1536xa100"] == "Megatron GPT 145.6B · 1,536 × A100 80GB"
    assert max(len(v) for v in labels.values()) <= 40   # "DeepSeek-V3 (671B) · 1,024 × H100 80GB H…" was cut too


def test_a_preset_name_edited_away_from_says_so_and_stays_stored():
    """"medium (64x H100 SXM5 80GB)" stayed the System page's name for a system of 48 GPUs (and
    the sidebar's "medium (Llama-3-70B)" for a 40-layer model): the name is now marked edited with
    what changed since it was the preset's, in this session and in a session opened from the link;
    the stored name, the link's format and the saved file stay as they were."""
    from app_walk import open_groups
    from test_app_pages import widget
    from ui.share import decode_params, size_canonical

    at = open_app("pages/home.py")
    at.button(key="size.medium").click().run()
    at.switch_page("pages/system.py").run()
    assert "*(edited)*" not in at.caption[0].value and "(preset medium)" in at.caption[0].value
    open_groups(at, "system", ["Cluster"])
    widget(at, "system.num_gpus").set_value(48).run()
    said = at.caption[0].value
    assert "**medium (64x H100 SXM5 80GB)** *(edited)*: the name of preset medium, with `num_gpus` 64 → 48." in said
    assert _scenario(at)["system"]["name"] == "medium (64x H100 SXM5 80GB)"   # not renamed behind the user's back
    params = dict(at.query_params)
    assert set(params) == {"s"} and decode_params(params)[0] == _scenario(at)   # the link as before
    again = open_app("pages/system.py", **params)   # a colleague's session: the same words
    assert "*(edited)*: the name of preset medium, with `num_gpus` 64 → 48" in again.caption[0].value

    at.switch_page("pages/model.py").run()
    open_groups(at, "model", ["Architecture"])
    widget(at, "model.num_layers").set_value(40).run()
    assert "medium (Llama-3-70B) (edited)" in at.sidebar.markdown[1].value
    assert "`num_layers` 80 → 40" in at.caption[0].value
    widget(at, "model.name").set_value("my 40-layer model").run()   # the user's own name: nothing to mark
    assert "(edited)" not in at.sidebar.markdown[1].value and "*(edited)*" not in at.caption[0].value
    at.switch_page("pages/home.py").run()
    at.button(key="size.medium").click().run()   # the preset again: its name is the preset's
    at.switch_page("pages/system.py").run()
    assert "*(edited)*" not in at.caption[0].value and _scenario(at) == size_canonical("medium")


def test_a_long_edited_name_keeps_its_mark_in_the_sidebar():
    """A 115-character model name (the limit is 120) with a field changed: the sidebar clipped
    "name (edited)" to 120 characters, so the mark was the part cut and the name read unchanged."""
    from app_walk import open_groups
    from test_app_pages import widget

    from ui.layout import NAME_CHARS

    at = open_app("pages/model.py")
    open_groups(at, "model", ["Architecture"])
    long_name = "L" * 115
    widget(at, "model.name").set_value(long_name).run()
    widget(at, "model.num_layers").set_value(16).run()
    assert "(edited)" in at.caption[0].value
    assert "(edited)" in at.sidebar.markdown[1].value
    assert len(at.sidebar.markdown[1].value.split(" ·")[0]) <= len("**Model** ") + NAME_CHARS + 1


def test_a_link_of_an_edited_catalogue_preset_is_marked_edited():
    """A share link (or saved file) of a section edited from a catalogue preset: only the size
    presets were matched by name, so "Llama-3-70B" with 40 layers read as the 80-layer model in the
    colleague's session. The presets and named scenarios are matched too; a named scenario sent
    unchanged (its catalogue system at its own GPU count) is no edit."""
    from ui.config_io import PRESET_KIND
    from ui.share import encode_token
    from simengine.presets import load_preset

    cfg, _ = validate_scenario(scenario_preset("llama3-70b-tp4-pp4"))
    token = encode_token(cfg)
    at = open_app("pages/model.py", s=token)
    assert "*(edited)*" not in at.caption[0].value and "(edited)" not in at.sidebar.markdown[1].value
    at.switch_page("pages/system.py").run()
    assert "*(edited)*" not in at.caption[0].value   # 64 GPUs: the scenario's count, not an edit of the preset's 8
    assert "(edited)" not in at.sidebar.markdown[1].value

    cfg["model"]["num_layers"] = 40
    cfg["strategy"]["micro_batch_size"] = cfg["strategy"]["micro_batch_size"] * 2
    at = open_app("pages/model.py", s=encode_token(cfg))
    assert load_preset(PRESET_KIND["model"], "llama3-70b")["name"] == cfg["model"]["name"] == "Llama-3-70B"
    assert "**Llama-3-70B** *(edited)*: the name of preset llama3-70b, with `num_layers` 80 → 40." in at.caption[0].value
    assert "Llama-3-70B (edited)" in at.sidebar.markdown[1].value
    at.switch_page("pages/strategy.py").run()
    assert "*(edited)*: the name of preset llama3-70b-tp4-pp4, with `micro_batch_size`" in at.caption[0].value
