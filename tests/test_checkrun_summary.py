"""api.check_run: a training log against a scenario as plain data, the CLI's check-run numbers
(the studio's Calibration page shows them)."""

from __future__ import annotations

import argparse
import json

import pytest
from test_checkrun import MEGATRON, TITAN, _cfg, _megatron_log

from simengine import api
from simengine.errors import ConfigError


def _mixtral():
    from simengine.cli import build_config

    sets = ["system.num_gpus=16", "strategy.pp=1", "strategy.global_batch_size=128", "strategy.ep=4", "strategy.tp=4",
            "strategy.sequence_parallel=true", "strategy.seq_len=2048"]
    return build_config(argparse.Namespace(model="mixtral-8x7b", system="h100-sxm5-80gb", strategy="mixtral-8x7b-ep8",
                                           set=sets, systems_dir=None))


def test_a_megatron_log_gives_the_clis_figures():
    cfg = _mixtral()
    r = api.check_run(cfg, MEGATRON.read_bytes())
    json.dumps(r)   # plain data: it goes into the studio's session state as JSON
    assert r["framework"] == "megatron" and r["iterations"] == 6 and r["skipped"] == 1 and r["used"] == 5
    assert r["measured_step_s"] == pytest.approx(5.4449)   # the median of the five after the warm-up (test_checkrun)
    pred = api.estimate(cfg)
    assert r["predicted_step_s"] == pred.step_time_s and r["rel_error"] == pytest.approx(pred.step_time_s / 5.4449 - 1)
    mem = {m["kind"]: m for m in r["memory"]}
    assert mem["allocated"]["measured_gib"] == pytest.approx(54250.98583984375 / 1024)
    assert mem["reserved"]["predicted_gib"] == pred.reserved_memory_gib
    assert {b["part"] for b in r["breakdown"]} == set(pred.breakdown_s) and r["mismatches"] == []
    assert "refit" not in r


def test_the_log_states_what_the_scenario_contradicts():
    cfg = _mixtral()
    cfg["strategy"]["seq_len"] = 4096
    said = " ".join(api.check_run(cfg, MEGATRON.read_text())["mismatches"])
    assert "imply seq_len 2048" in said


def test_a_refit_reproduces_the_fitting_half_and_gives_its_system():
    cfg = _cfg()
    slow = api.estimate(cfg).step_time_s * 1.3 * 1e3
    r = api.check_run(cfg, _megatron_log([slow] * 10), refit=True)
    fit = r["refit"]
    assert abs(fit["fit_error"]) < 1e-3 and abs(fit["holdout_error"]) < 1e-3 and 0.5 < fit["value"] < 1.0
    refit_cfg = {**cfg, "system": fit["system"]}
    assert api.estimate(refit_cfg).step_time_s == pytest.approx(slow / 1e3, rel=1e-3)
    assert fit["system"]["num_gpus"] == cfg["system"]["num_gpus"] and fit["system"]["gpu"] == cfg["system"]["gpu"]


def test_a_torchtitan_log_reads_tokens_per_second():
    """torchtitan logs tokens/s per GPU and the peak reserved memory: the step is the scenario's
    tokens per step over tps × GPUs (checkrun/compare.py step_times)."""
    from simengine.cli import build_config
    from simengine.checkrun.logs import parse_training_log

    cfg = build_config(argparse.Namespace(model="llama3-8b", system="h100-sxm5-80gb", strategy="llama3-8b-fsdp",
                                          set=["system.num_gpus=8"], systems_dir=None))
    r = api.check_run(cfg, TITAN.read_bytes(), refit=True)
    log = parse_training_log(TITAN)
    assert r["framework"] == "torchtitan" and r["iterations"] == len(log.iterations)
    tokens = cfg["strategy"]["global_batch_size"] * cfg["strategy"]["seq_len"]
    tps = sorted(i.tokens_per_s_per_gpu for i in log.iterations[r["skipped"]:])
    assert tokens / (tps[0] * 8) >= r["measured_step_s"] >= tokens / (tps[-1] * 8)
    assert [m["kind"] for m in r["memory"]] == ["reserved"] and r["refit"]["factor"] == "compute_efficiency_scale"


def test_bad_logs_and_arguments_are_config_errors():
    cfg = _cfg()
    with pytest.raises(ConfigError, match="no training iterations"):
        api.check_run(cfg, b"nothing here\n")
    with pytest.raises(ConfigError, match="at least 4 steady iterations"):
        api.check_run(cfg, _megatron_log([1000.0] * 3), refit=True)
    with pytest.raises(ConfigError, match="warmup"):
        api.check_run(cfg, MEGATRON.read_text(), warmup=-1)
    with pytest.raises(ConfigError, match="text or bytes"):
        api.check_run(cfg, TITAN)   # a path is never read: the studio hands over the upload's bytes


def test_the_studios_worker_task_returns_the_same_check():
    """A heavy scenario's log check runs in a worker process (ui/calibration_log.py): the worker's
    task gives api.check_run's result, and a bad log as issues, never an exception."""
    from ui.worker_tasks import TASKS

    cfg = _mixtral()
    got = TASKS["check_run"](json.dumps({"scenario": cfg, "log": MEGATRON.read_text(), "warmup": None, "refit": False}))
    assert got["ok"] and got["result"] == api.check_run(cfg, MEGATRON.read_text())
    bad = TASKS["check_run"](json.dumps({"scenario": cfg, "log": "nothing", "warmup": None, "refit": False}))
    assert not bad["ok"] and "no training iterations" in bad["issues"][0][1]
