"""The front door's promise (simengine/api.py): plain dicts or validated specs in, ``ConfigError``
naming the field for anything else — never a bare AttributeError / TypeError from deep inside
(a robustness audit found ten such calls)."""

from __future__ import annotations

import math

import pytest

from simengine import api
from simengine.errors import ConfigError
from simengine.presets import load_preset, load_spec

MODEL, SYSTEM, STRATEGY = (load_preset(k, "small") for k in ("models", "systems", "strategies"))
SCENARIO = {"model": MODEL, "system": SYSTEM, "strategy": STRATEGY}


def test_plain_dicts_are_taken_where_specs_are():
    assert api.count_parameters(MODEL) == api.count_parameters(load_spec("models", "small"))
    assert api.model_flops_per_step(SCENARIO) == api.model_flops_per_step(api.scenario_from(SCENARIO)) > 0


def test_a_saved_system_from_its_dict(tmp_path):
    path = api.save_user_system(tmp_path, "mine", SYSTEM)
    assert path.is_file() and api.load_user_system(tmp_path, "mine") == load_spec("systems", "small")


@pytest.mark.parametrize("call, field", [
    (lambda: api.count_parameters([1]), "model"),
    (lambda: api.count_parameters({"name": "x"}), "model.hidden_size"),
    (lambda: api.save_user_system("/tmp", "mine", SYSTEM, provenance=[1]), "provenance"),
    (lambda: api.save_user_system("/tmp", "mine", SYSTEM, provenance="abc"), "provenance"),
    (lambda: api.save_user_system(None, "mine", SYSTEM), "folder"),
    (lambda: api.check_search_choices(None), "choices"),
    (lambda: api.chrome_trace({}), "timeline"),
    (lambda: api.search_fit_changes(SCENARIO, top="x"), "top"),
    (lambda: api.search({"model": MODEL, "system": SYSTEM, "seq_len": 8192, "global_batch": 64}, top=3, executor=5), "executor"),
    (lambda: api.search({"model": MODEL, "system": SYSTEM, "seq_len": 8192, "global_batch": 64}, top=3, progress=5), "progress"),
    (lambda: api.time_and_cost_to_train(math.nan, 1.0, 1.0), "tokens"),
    (lambda: api.time_and_cost_to_train(1e9, -1.0, 1.0), "tokens_per_s"),
    # TypeError / ZeroDivisionError (1 + allocator_overhead = 0) from simengine/fit.py before
    (lambda: api.reserved_gib(None, 0.05), "allocated_gib"),
    (lambda: api.reserved_gib(10.0, "x"), "allocator_overhead"),
    (lambda: api.reserved_gib(10.0, 0.05, math.nan), "pools_gib"),
    (lambda: api.allocated_limit_gib([], 2.5, 0.05), "memory_gib"),
    (lambda: api.allocated_limit_gib(80.0, 2.5, -1.0), "allocator_overhead"),
    # TypeError from pathlib before; a NUL or a name over the file system's limit: ValueError / OSError
    (lambda: api.load_user_system(None, "mine"), "systems_dir"),
    (lambda: api.user_system_provenance(5, "mine"), "systems_dir"),
    (lambda: api.save_user_system("/tmp/a\x00b", "mine", SYSTEM), "systems_dir"),
    (lambda: api.save_user_system("/tmp/" + "a" * 300, "mine", SYSTEM), "systems_dir"),
])
def test_bad_input_is_a_config_error_naming_the_field(call, field):
    with pytest.raises(ConfigError) as e:
        call()
    assert e.value.issues[0][0] == field


def test_a_trace_needs_a_path(tmp_path):
    tl = api.simulate(SCENARIO)
    for bad in (None, 5, "", "t\x00.json"):   # a NUL: open's ValueError before
        with pytest.raises(ConfigError) as e:
            api.write_chrome_trace(tl, bad)
        assert e.value.field == "path"
    api.write_chrome_trace(tl, tmp_path / "t.json")
    assert (tmp_path / "t.json").stat().st_size > 0


def test_a_calibration_needs_a_measurement_and_chunks_a_vpp_in_range():
    """``calibrate(system)`` with no file returned the system unchanged where the CLI refuses, and
    ``chunks_per_rank("interleaved", 10**30)`` answered 10**30 (StrategySpec.vpp stops at 128)."""
    for nccl in (None, [], {}):
        with pytest.raises(ConfigError) as e:
            api.calibrate(SYSTEM, nccl=nccl)
        assert e.value.field == "arguments"
    assert api.chunks_per_rank("interleaved", 128) == 128
    with pytest.raises(ConfigError) as e:
        api.chunks_per_rank("interleaved", 10**30)
    assert e.value.field == "strategy.vpp"
