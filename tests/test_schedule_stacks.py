"""Which stack ships which pipeline schedule (``Schedule.frameworks``): a schedule its stack does
not ship is a what-if — a note on the scenario, a mark on a search candidate, and the search says
where the best candidate the stack runs ranks."""

from __future__ import annotations

import json

import pytest

from simengine import api, presets
from simengine.config import load_scenario
from simengine.config.framework import FRAMEWORKS
from simengine.config.notes import schedule_what_if, shipped
from simengine.schedule import SCHEDULES
from simengine.search import make_space, search

TINY = {**presets.load_preset("models", "llama3-8b"), "name": "tiny", "hidden_size": 1024, "num_layers": 8,
        "num_attention_heads": 16, "num_kv_heads": 4, "ffn_hidden_size": 4096, "vocab_size": 32000}
SYSTEM = presets.load_preset("systems", "h100-sxm5-80gb")


def test_every_schedule_names_real_stacks_and_where_it_runs():
    for name, sched in SCHEDULES.items():
        assert set(sched.frameworks) <= set(FRAMEWORKS), name
        assert sched.shipped_in, name


def test_each_stack_runs_the_schedules_its_code_has():
    # megatron/core/pipeline_parallel/schedules.py: no pipelining, 1F1B, interleaved (combined 1F1B is a flag)
    assert shipped("megatron-te") == ["1f1b", "interleaved"]
    assert shipped("deepspeed") == ["1f1b"]   # deepspeed/runtime/pipe/schedule.py TrainSchedule
    # torch/distributed/pipelining: the zero-bubble and DualPipeV schedules refuse torch.compile'd stages
    assert set(shipped("torch-native")) == {"gpipe", "1f1b", "interleaved", "zb-h1", "dualpipev"}
    assert set(shipped("torch-compile")) == {"gpipe", "1f1b", "interleaved"}
    assert not any("zb-h2" in shipped(f) or "dualpipe" in shipped(f) for f in FRAMEWORKS)


def _scenario(schedule: str, framework: str, pp: int = 4) -> dict:
    sc = presets.size_scenario("medium")
    sc["strategy"].update(schedule=schedule, framework=framework, pp=pp, vpp=1, tp=1, cp=1,
                          tp_comm_overlap=False, overlap_param_gather=False, global_batch_size=512)
    return sc


def test_a_schedule_the_stack_does_not_ship_is_a_noted_what_if_and_the_same_estimate():
    sc = load_scenario(_scenario("dualpipe", "megatron-te"))
    (field, msg), = [n for n in sc.notes if n[0] == "strategy.schedule"]
    assert "Megatron-Core does not ship 'dualpipe'" in msg and "1f1b, interleaved" in msg and "deepseek-ai/DualPipe" in msg
    assert msg in api.estimate(sc).warnings


def test_every_stack_has_a_name_in_the_notes():
    from simengine.config.notes import STACK_NAMES

    assert set(STACK_NAMES) == set(FRAMEWORKS) and all(shipped(f) for f in FRAMEWORKS)


@pytest.mark.parametrize("schedule, framework", [("1f1b", "megatron-te"), ("interleaved", "megatron-te"),
                                                 ("dualpipev", "torch-native"), ("zb-h1", "torch-native"),
                                                 ("1f1b", "deepspeed")])
def test_a_schedule_the_stack_ships_has_no_note(schedule, framework):
    cfg = _scenario(schedule, framework)
    if schedule == "interleaved":
        cfg["strategy"].update(vpp=2)
    assert not [n for n in load_scenario(cfg).notes if n[0] == "strategy.schedule"]


def test_no_pipeline_runs_no_schedule():
    assert schedule_what_if("megatron-te", "dualpipe", 1) == ""
    assert schedule_what_if("torch-compile", "zb-h1", 2).startswith("a what-if: PyTorch's pipelining under torch.compile")


@pytest.fixture(scope="module")
def result():
    space = make_space(TINY, SYSTEM, global_batch=64, seq_len=4096, gpus=[8],
                       choices={"pp": (4,), "tp": (1,), "cp": (1,), "tp_comm_overlap": (False,)})
    return search(space, top=100)


def test_search_marks_what_ifs_and_finds_the_best_the_stack_runs(result):
    cands = result.candidates
    assert {c.strategy["schedule"] for c in cands} - {"1f1b", "interleaved"}, "the space should hold what-ifs"
    for c in cands:
        assert bool(c.what_if) == (c.strategy["schedule"] not in ("1f1b", "interleaved"))
    k = result.what_if()["first_shipped"]
    assert k is not None and all(c.what_if for c in cands[:k]) and not cands[k].what_if
    data = result.to_json()
    assert data["first_shipped"] == k and data["shipped_schedules"] == ["1f1b", "interleaved"]
    assert data["what_if"].startswith("Megatron-Core does not ship ")
    assert all(s in data["what_if"] for s in {c.strategy["schedule"] for c in cands if c.what_if})
    gap = (1 - cands[k].tokens_per_s / cands[0].tokens_per_s) * 100   # how far behind #1, in its own terms
    assert f"The best this stack runs is #{k + 1} ({gap:.1f} % fewer tokens/s than #1)" in data["what_if_summary"]
    json.dumps(data)
    shown = result.to_json(top=k)   # every candidate shown is a what-if: nothing points past the list
    assert shown["first_shipped"] is None and "None of the candidates shown runs on this stack" in shown["what_if_summary"]


def test_the_gap_to_the_best_shipped_candidate_is_read_on_the_objective():
    """With the headroom objective the best the stack runs is behind #1 in headroom, not tokens/s."""
    from simengine.search.types import Candidate
    from simengine.search.what_if import summary

    def cand(schedule, tps, head, what_if):
        return Candidate(gpus=8, strategy={"schedule": schedule, "framework": "megatron-te"}, tokens_per_s=tps,
                         step_time_s=1.0, mfu=0.4, cost_per_million_tokens_usd=1.0, cost_per_step_usd=1.0,
                         peak_memory_gib=1.0, reserved_memory_gib=1.0, headroom_gib=head, tight_stage=0, what_if=what_if)

    said = summary([cand("dualpipe", 100.0, 40.0, "x"), cand("1f1b", 120.0, 30.0, "")], "megatron-te", "memory_headroom")
    assert said["first_shipped"] == 1 and "(25.0 % less headroom than #1)" in said["what_if_summary"]


def test_cli_table_marks_what_ifs_and_names_the_restriction(capsys, tmp_path):
    from simengine.cli import main

    mpath = tmp_path / "tiny.json"
    mpath.write_text(json.dumps(TINY))
    args = ["search", "--model", str(mpath), "--system", "h100-sxm5-80gb", "--set", "system.num_gpus=8",
            "--global-batch", "64", "--seq-len", "4096", "--space", "strategy.pp=4", "--space", "strategy.tp=1",
            "--space", "strategy.cp=1", "--top", "2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    rows = [x for x in out.splitlines() if x.split(" ", 1)[0].rstrip("*") in ("1", "2")]
    assert len(rows) == 2 and all(r.split(" ", 1)[0].endswith("*") for r in rows), rows   # DualPipe / zero-bubble what-ifs
    assert "a what-if" in out and "add --space strategy.schedule=1f1b,interleaved" in out
    assert main(args + ["--space", "strategy.schedule=1f1b,interleaved"]) == 0
    out = capsys.readouterr().out
    assert "what-if" not in out
