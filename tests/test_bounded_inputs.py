"""Files and values a user hands the CLI and the API, bounded in size, time and memory: a device
or a pipe is refused before it is read (simengine/fileio.py ``read_bounded``), a search space's
GPU counts, batch and budget are checked before anything is enumerated, a pipeline too long for
the engine is the scenario check's rejection (so a search never does memory work on it), and
what is refused says why in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from simengine import api, presets
from simengine.errors import ConfigError
from simengine.fileio import read_bounded

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, timeout: int = 120, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simengine", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})


def test_a_bounded_read_refuses_devices_pipes_and_large_files(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"x" * 100)
    assert read_bounded(f, 100) == b"x" * 100
    with pytest.raises(ValueError, match="100 bytes, more than the 99 accepted"):
        read_bounded(f, 99)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for bad, why in (("/dev/zero", "not a regular file"), (fifo, "not a regular file"), (tmp_path, "a directory"),
                     (tmp_path / "missing", "no such file")):
        with pytest.raises(ValueError, match=why):
            read_bounded(bad, 1 << 20)


def test_calibration_readers_refuse_a_device_without_reading_it():
    system = presets.load_spec("systems", "h100-sxm5-80gb")
    for kw in ({"gemm": Path("/dev/zero")}, {"nccl": [Path("/dev/zero")]}):
        with pytest.raises(ConfigError, match="not a regular file"):
            api.calibrate(system, **kw)


def test_check_run_runs_file_is_bounded_and_typed(tmp_path):
    p = cli("check-run", "--runs", "/dev/zero")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "not a regular file" in p.stderr, p.stderr
    big = tmp_path / "runs.json"
    big.write_text(json.dumps([{"log": "x"}]) + " " * (2 << 20))
    p = cli("check-run", "--runs", str(big))
    assert p.returncode == 2 and "more than the 1,048,576 accepted" in p.stderr, p.stderr
    for bad in (5, None, "strategy.tp=4", [1]):
        runs = tmp_path / "r.json"
        runs.write_text(json.dumps([{"log": "x.log", "model": "small", "system": "small", "strategy": "small", "set": bad}]))
        p = cli("check-run", "--runs", str(runs))
        assert p.returncode == 2 and "'set' must be a list" in p.stderr, (bad, p.stderr)   # before its log is read


def test_import_hf_refuses_a_pipe(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    p = cli("import-hf", str(fifo), timeout=30)
    assert p.returncode == 2 and "not a regular file" in p.stderr, p.stderr


def _space(**kw):
    m = presets.load_preset("models", "llama3-8b")
    s = presets.load_preset("systems", "h100-sxm5-80gb")
    return api.make_search_space(m, s, **{"global_batch": 8, "seq_len": 1024, **kw})


@pytest.mark.parametrize("kw, field", [
    ({"gpus": [10**20]}, "system.num_gpus"), ({"gpus": [10_000_001]}, "system.num_gpus"), ({"gpus": [8.7]}, "system.num_gpus"),
    ({"gpus": [True]}, "system.num_gpus"), ({"gpus": 8}, "system.num_gpus"), ({"gpus": [float("nan")]}, "system.num_gpus"),
    ({"global_batch": None, "global_batch_tokens": "64"}, "global_batch_tokens"), ({"global_batch": True}, "global_batch"),
    ({"choices": [1]}, "choices"), ({"base": [1]}, "base"), ({"token_budget": float("inf")}, "token_budget"),
    ({"token_budget": True}, "token_budget"), ({"token_budget": 1e308}, "token_budget"),
])
def test_a_search_space_refuses_what_is_no_count(kw, field):
    with pytest.raises(ConfigError) as e:
        _space(**kw)
    assert e.value.field == field


def test_a_search_refuses_a_bad_objective_and_a_system_that_is_no_object():
    with pytest.raises(ConfigError) as e:
        api.search(_space(gpus=[8]), objective=[])
    assert e.value.field == "objective"
    with pytest.raises(ConfigError) as e:
        api.make_search_space(presets.load_preset("models", "llama3-8b"), [], global_batch=8, seq_len=1024)
    assert e.value.field == "system"


@pytest.mark.parametrize("value", ["abc", "a..b", "1.5..8", "NaN", "Infinity", "null", "[8]", "8.7", "true", "1e308",
                                   "100000000", "1..1000000000000000000000"])
def test_search_gpu_counts_from_the_command_line_are_one_line(value):
    p = cli("search", "--model", "small", "--system", "small", "--seq-len", "1024", "--global-batch", "8",
            "--space", f"system.num_gpus={value}", timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("error: "), (value, p.stderr)


def test_a_pipeline_too_long_for_the_engine_is_invalid_before_any_memory_work():
    """A global batch of 10^8 sequences on 8 GPUs: every layout's pipeline is beyond the engine's
    131,072 micro-batch-chunks, which the scenario check now says (config/scenario.py
    ``pipeline_size_issues``), so the search rejects every group in phase 0 (it used to refine
    their memory, taking minutes and gigabytes) and nothing fits."""
    res = api.search(_space(gpus=[8], global_batch=10**8, choices={"tp": [1, 2], "pp": [1, 2], "cp": [1]}), top=2)
    out = res.to_json()
    assert out["candidates"] == [] and out["memory_checked"] == 0
    assert all(k.startswith("invalid") for k in out["rejected"])
    assert any("exceeds the N the pipeline engine simulates" in k for k in out["rejected"])
    cfg = presets.size_scenario("small")
    cfg["strategy"].update(global_batch_size=10**8)
    with pytest.raises(ConfigError) as e:
        api.estimate(cfg)
    assert e.value.field == "strategy.global_batch_size" and "pipeline engine simulates" in str(e.value)


def test_odd_api_arguments_are_config_errors():
    cfg = presets.size_scenario("small")
    for call in (lambda: api.layer_seconds({}), lambda: api.layer_seconds(None), lambda: api.coverage(cfg, measured_fields=5),
                 lambda: api.coverage(cfg, measured_fields="efficiency.gemm_table"), lambda: api.list_user_systems(5)):
        with pytest.raises(ConfigError):
            call()


def test_a_damaged_provenance_list_is_a_message(tmp_path):
    from simengine.calibration.store import save_system

    system = presets.load_spec("systems", "small")
    save_system(tmp_path, "mine", system)
    doc = json.loads((tmp_path / "mine.json").read_text())
    for bad in (5, [{"target": [1]}], [{"target": {}}], ["x"]):
        (tmp_path / "mine.json").write_text(json.dumps({**doc, "provenance": bad}))
        with pytest.raises(ConfigError, match="unreadable provenance"):
            api.user_system_provenance(tmp_path, "mine")
        p = cli("coverage", "--model", "small", "--strategy", "small", "--systems-dir", str(tmp_path), "--system", "mine")
        assert p.returncode == 2 and "unreadable provenance" in p.stderr, p.stderr


def test_refit_clips_a_scaled_efficiency_to_the_schema():
    """check-run --refit --factors scale_up: the factor scales the tier default, which the schema
    caps at 1 (a measured table's points at 2): a large factor lands on the cap, never on a
    validation error for a field the user did not set (checkrun/refit.py ``apply_factors``)."""
    from simengine.checkrun.refit import apply_factors

    cfg = presets.size_scenario("small")
    out = apply_factors(cfg, {"scale_up": 50.0, "scale_out": 1e-9})
    eff = out["system"]["efficiency"]
    assert eff["collective_scale_up"] == 1.0 and eff["collective_scale_out"] == 1e-4
    api.estimate(out)   # validates
