"""The timeline simulator and the estimate price the same work: same step time on every
validation row and preset, and the simulated peak memory equals the memory model's."""

import json

import pytest

from simengine import api, presets
from simengine.cli import main
from simengine.validation import b200_runs

from scenarios import scenario_dict

GIB = 2**30


def test_estimate_equals_simulator_on_validation_rows(validation_dir):
    runs = b200_runs((validation_dir / "b200_megatron_runs.csv").read_text(), presets.load_preset("systems", "b200-sxm-180gb"))
    for r in runs:
        # equal up to the rounding of sim/periodic.py's extrapolation (long pipelines)
        assert api.simulate(r.config).step_time_s == pytest.approx(api.estimate(r.config).step_time_s, rel=1e-12), r.case


@pytest.mark.parametrize("schedule,vpp", [("1f1b", 1), ("interleaved", 2), ("gpipe", 1), ("zb-h1", 1), ("dualpipev", 1)])
def test_simulated_peak_memory_equals_memory_model(schedule, vpp):
    cfg = scenario_dict("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 16},
                        strategy={"tp": 2, "pp": 4, "vpp": vpp, "schedule": schedule, "global_batch_size": 16})
    rep, tl = api.estimate(cfg), api.simulate(cfg)
    assert tl.step_time_s == pytest.approx(rep.step_time_s, rel=1e-12)
    for stage, peak in zip(rep.memory_by_stage, tl.peak_memory_bytes, strict=True):
        assert peak / GIB == pytest.approx(stage.peak_gib, rel=1e-9), (schedule, stage.stage)


def test_chrome_trace_of_llama3_70b_interleaved(tmp_path, capsys):
    """llama3-70b on 64 GPUs, tp 4, pp 4, vpp 2: the CLI writes a valid Trace Event Format file."""
    trace = tmp_path / "trace.json"
    code = main(["simulate", "--model", "llama3-70b", "--system", "h100-sxm5-80gb", "--strategy", "llama3-70b-tp4-pp4",
                 "--set", "system.num_gpus=64", "--set", "strategy.cp=1", "--set", "strategy.vpp=2",
                 "--set", "strategy.global_batch_size=32", "--trace", str(trace), "--json"])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    assert isinstance(events, list) and events
    phases = {e["ph"] for e in events}
    assert {"X", "M"} <= phases
    names = {(e["pid"], e["args"]["name"]) for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert {pid for pid, _ in names} == {0, 1, 2, 3}
    for e in events:
        assert isinstance(e["pid"], int) and "name" in e
        if e["ph"] == "X":
            assert isinstance(e["tid"], (int, str)) and e["ts"] >= 0 and e["dur"] >= 0
        if e["ph"] == "C":
            assert all(isinstance(v, (int, float)) for v in e["args"].values())
    # no two spans on one (pid, tid) overlap
    by_thread = {}
    for e in events:
        if e["ph"] == "X":
            by_thread.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in by_thread.values():
        spans.sort()
        for (_, a1), (b0, _) in zip(spans, spans[1:], strict=False):
            assert b0 >= a1 - 1e-6
