"""A boolean is never read as a number (config/spec.py): pydantic's lax mode used to build tp=1
from ``--set strategy.tp=true`` and micro_batch_size=0 from ``false`` in a JSON file."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simengine import api, presets
from simengine.config.model import ModelSpec
from simengine.config.spec import Spec
from simengine.config.strategy import StrategySpec
from simengine.config.system import GPUSpec, SystemSpec
from simengine.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _config() -> dict:
    return {k: presets.load_spec(kind, "small").model_dump(mode="json")
            for k, kind in (("model", "models"), ("system", "systems"), ("strategy", "strategies"))}


@pytest.mark.parametrize("section,field,value", [
    ("strategy", "tp", True),
    ("strategy", "micro_batch_size", False),
    ("strategy", "overlap_slowdown", True),       # a float field
    ("strategy", "etp", True),                    # int | None
    ("model", "num_layers", True),
    ("system", "num_gpus", True),
])
def test_a_boolean_for_a_number_is_refused_on_its_field(section, field, value):
    cfg = _config()
    cfg[section][field] = value
    with pytest.raises(ConfigError) as e:
        api.estimate(cfg)
    assert e.value.field == f"{section}.{field}", str(e.value)
    assert f"not {str(value).lower()}" in str(e.value)


def test_a_boolean_inside_a_nested_spec_or_a_list_is_refused():
    cfg = _config()
    cfg["system"]["gpu"]["memory_gib"] = False
    with pytest.raises(ConfigError) as e:
        api.estimate(cfg)
    assert e.value.field == "system.gpu.memory_gib"
    cfg = _config()
    cfg["strategy"]["pipeline_layers"] = [True] * 2
    with pytest.raises(ConfigError) as e:
        api.estimate(cfg)
    assert e.value.field.startswith("strategy.pipeline_layers"), str(e.value)


def test_boolean_fields_and_whole_numbers_still_read():
    cfg = _config()
    cfg["strategy"]["sequence_parallel"] = True
    cfg["strategy"]["tp"] = 2.0                  # JSON writes 2.0 for a whole number: still 2
    cfg["strategy"]["overlap_slowdown"] = 1
    sc = api.scenario_from(cfg)
    assert sc.strategy.tp == 2 and type(sc.strategy.tp) is int and sc.strategy.sequence_parallel is True
    with pytest.raises(ConfigError):             # a string field keeps pydantic's own refusal
        api.scenario_from({**cfg, "strategy": {**cfg["strategy"], "name": True}})


def _specs(cls=Spec):
    for sub in cls.__subclasses__():
        yield sub
        yield from _specs(sub)


def test_every_number_field_of_every_spec_is_covered():
    """The fields the guard watches are exactly the int/float fields without a bool in their type,
    on every spec (model, system and its tiers and calibration points, strategy)."""
    specs = set(_specs())
    assert {StrategySpec, ModelSpec, SystemSpec, GPUSpec} <= specs and len(specs) >= 10
    for cls in specs:
        for name, f in cls.model_fields.items():
            text = re.sub(r"Literal\[[^\]]*\]", "", str(f.annotation))  # a Literal's names are not types
            number = bool(re.search(r"\b(int|float)\b", text)) and not re.search(r"\b(bool|list)\b", text)
            assert (name in cls._no_bool) == number, (cls.__name__, name, text)
    assert StrategySpec._no_bool_lists == {"pipeline_layers"}


def test_python_callers_booleans_are_refused_too():
    """numpy's booleans and tuples of booleans, which a Python caller may hand over."""
    import numpy as np

    cfg = _config()
    for value, where in ((np.True_, "tp"), ((True, True), "pipeline_layers")):
        bad = {**cfg, "strategy": {**cfg["strategy"], where: value}}
        with pytest.raises(ConfigError) as e:
            api.scenario_from(bad)
        assert e.value.field.startswith(f"strategy.{where}"), str(e.value)


def test_a_number_field_that_takes_text_cannot_be_guarded():
    from pydantic import Field

    with pytest.raises(TypeError, match="takes text"):
        class _Bad(Spec):
            x: float | str = Field(1.0)


def test_cli_set_true_for_tp_exits_2_naming_the_field():
    r = subprocess.run([sys.executable, "-m", "simengine", "estimate", "--model", "small", "--system", "small",
                        "--strategy", "small", "--set", "strategy.tp=true"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "error: strategy.tp: should be a number, not true"


def test_json_spec_file_with_a_boolean_number_exits_2(tmp_path):
    spec = presets.load_spec("strategies", "small").model_dump(mode="json")
    spec["micro_batch_size"] = False
    path = tmp_path / "strategy.json"
    path.write_text(json.dumps(spec))
    r = subprocess.run([sys.executable, "-m", "simengine", "estimate", "--model", "small", "--system", "small",
                        "--strategy", str(path)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "micro_batch_size" in r.stderr and "not false" in r.stderr, r.stderr
