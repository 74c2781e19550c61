"""overlap_p2p_comm as the stacks run it (config/strategy.py ``p2p_overlapped``): Megatron reads it
only in the interleaved schedule, and NeMo / Megatron-Bridge turn it on exactly when a recipe
interleaves (the published rows' mapping)."""

from __future__ import annotations

from scenarios import VALIDATION, scenario_dict
from simengine import api
from simengine.validation.published.mapping import published_runs


def _step(schedule: str, vpp: int, p2p: bool, framework: str = "megatron-te") -> float:
    st = {"tp": 2, "pp": 4, "vpp": vpp, "schedule": schedule, "global_batch_size": 64, "overlap_p2p_comm": p2p,
          "framework": framework}
    return api.estimate(scenario_dict(model_preset="llama3-8b", system_preset="h100-sxm5-80gb",
                                      system={"num_gpus": 16}, strategy=st)).step_time_s


def test_megatron_1f1b_ignores_the_flag_and_the_interleaved_schedule_reads_it():
    """forward_backward_pipelining_without_interleaving sends in place; Megatron-LM's arguments.py
    turns the flag off without virtual stages. With them the sends leave the compute stream. The
    zero-bubble and DualPipe schedules send in place on megatron-te too."""
    assert _step("1f1b", 1, True) == _step("1f1b", 1, False)
    assert _step("interleaved", 2, True) < _step("interleaved", 2, False)
    for schedule in ("zb-h1", "dualpipe"):
        assert _step(schedule, 1, True) == _step(schedule, 1, False)
        assert _step(schedule, 1, True, "torch-native") < _step(schedule, 1, False, "torch-native")


def test_other_stacks_keep_the_flag_on_1f1b():
    assert _step("1f1b", 1, True, "torch-native") < _step("1f1b", 1, False, "torch-native")


def test_nemo_and_megatron_bridge_rows_overlap_p2p_exactly_when_they_interleave():
    """Megatron-Bridge comm_overlap.py ``_get_model_comm_overlap_cfgs`` ("PP overlap": vp > 1) and
    NeMo-Framework-Launcher's interleaved recipes (``overlap_p2p_comm: True``)."""
    runs, _ = published_runs((VALIDATION / "published_runs.csv").read_text())
    rows = [r.config["strategy"] for r in runs if r.run_id.startswith(("nemo2407_", "mbridge_"))]
    interleaved = [s for s in rows if s.get("vpp", 1) > 1]
    assert len(interleaved) >= 30
    assert all(s["overlap_p2p_comm"] is (s.get("vpp", 1) > 1) for s in rows)


def test_the_default_is_megatron_lms():
    """Megatron-LM's --overlap-p2p-communication is on unless --no-overlap-p2p-communication
    (training/arguments.py, since 2023-05); the other stacks' default is off; a given value wins."""
    from simengine.config.strategy import StrategySpec

    base = {"global_batch_size": 8, "seq_len": 1024}
    assert StrategySpec(**base).overlap_p2p_comm is True
    assert StrategySpec(**base, framework="megatron-te").overlap_p2p_comm is True
    assert StrategySpec(**base, framework="torch-native").overlap_p2p_comm is False
    assert StrategySpec(**base, framework="deepspeed").overlap_p2p_comm is False
    assert StrategySpec(**base, framework="torch-compile", overlap_p2p_comm=True).overlap_p2p_comm is True
    assert StrategySpec(**base, overlap_p2p_comm=False).overlap_p2p_comm is False


def test_the_2021_megatron_runs_predate_the_overlap():
    runs, _ = published_runs((VALIDATION / "published_runs.csv").read_text())
    old = [r.config["strategy"] for r in runs if r.run_id.startswith(("narayanan21_", "korthikanti22_"))]
    assert old and all(s["overlap_p2p_comm"] is False for s in old)


def test_follow_framework_redefaults_only_what_the_user_left_alone():
    from simengine.config.strategy import StrategySpec, follow_framework, stack_defaults

    old = {"framework": "megatron-te", "tp": 2, "seq_len": 4096, "global_batch_size": 8,
           **stack_defaults("megatron-te")}
    old["gradient_accumulation_fusion"] = False  # the user's choice on megatron-te
    new = follow_framework(old, dict(old, framework="torch-native"))
    assert "overlap_p2p_comm" not in new and "fused_cross_entropy" not in new
    assert new["gradient_accumulation_fusion"] is False and new["tp"] == 2
    assert StrategySpec.model_validate(new).overlap_p2p_comm is False
    same = dict(old)
    assert follow_framework(old, same) is same  # no framework change: untouched
    changed_too = dict(old, framework="torch-native", overlap_p2p_comm=True)  # set in the same edit
    assert follow_framework(dict(old, overlap_p2p_comm=False), changed_too)["overlap_p2p_comm"] is True
    assert follow_framework(old, dict(old, framework="nonsense")) == dict(old, framework="nonsense")  # validation reports it
