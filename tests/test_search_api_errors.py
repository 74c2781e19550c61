"""Bad search arguments are refused before any work, naming the argument (API and CLI): a top
of 0 once meant "no top" and ran the whole space unpruned; a huge worker count spawned one
process per batch."""

from __future__ import annotations

import json
import os

import pytest

from simengine import presets
from simengine.cli import main
from simengine.errors import ConfigError
from simengine.search import make_space, search
from simengine.search.executors import ProcessPool, RayExecutor, check_workers, make_executor

TINY = {**presets.load_preset("models", "llama3-8b"), "name": "tiny", "hidden_size": 1024, "num_layers": 4,
        "num_attention_heads": 16, "num_kv_heads": 4, "ffn_hidden_size": 4096, "vocab_size": 32000}
SYSTEM = presets.load_preset("systems", "h100-sxm5-80gb")


def _space():
    return make_space(TINY, SYSTEM, global_batch=16, seq_len=4096, gpus=[8], choices={"tp": (1,), "pp": (1,), "cp": (1,)})


@pytest.mark.parametrize("top", [0, -1, True, 2.5])
def test_search_refuses_a_top_that_is_not_a_positive_count(top):
    with pytest.raises(ConfigError) as e:
        search(_space(), top=top)
    assert e.value.issues[0][0] == "top"


def test_search_accepts_no_top_and_a_positive_top():
    assert len(search(_space(), top=1).candidates) == 1
    assert len(search(_space(), top=None).candidates) >= 1


@pytest.mark.parametrize("workers", [0, -3, 2 * (os.cpu_count() or 1) + 1, 100_000])
def test_worker_counts_outside_1_to_twice_the_cores_are_refused(workers):
    for make in (lambda: check_workers(workers), lambda: make_executor("process", workers),
                 lambda: ProcessPool(workers), lambda: RayExecutor(None, workers)):
        with pytest.raises(ConfigError) as e:
            make()
        assert e.value.issues[0][0] == "workers"


def test_cli_exits_2_with_one_line_on_a_bad_top_or_worker_count(capsys):
    base = ["search", "--model", "llama3-8b", "--system", "h100-sxm5-80gb", "--set", "system.num_gpus=8",
            "--global-batch", "32", "--seq-len", "4096"]
    for extra, field in ((["--top", "0"], "top"), (["--workers", "100000"], "workers")):
        assert main(base + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and field in err[0]


def test_an_address_without_the_ray_executor_is_refused_not_ignored(capsys):
    for name in (None, "inprocess", "process"):
        with pytest.raises(ConfigError) as e:
            make_executor(name, None, "ray://head:10001")
        assert e.value.issues[0][0] == "address" and "--executor ray" in str(e.value)
    assert main(["search", "--model", "small", "--system", "small", "--global-batch", "64", "--seq-len", "8192",
                 "--address", "foo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "address" in err[0]


def test_an_address_ray_cannot_use_is_one_line_not_an_internal_error(monkeypatch, capsys):
    """--executor ray --address nonsense:// (or "auto" with no cluster, or ray://… without
    ray[client]): ray.init's RuntimeError / ConnectionError / ValueError was the CLI's "internal
    error". A stand-in ray module raises as the real one does, so no cluster starts here."""
    import sys
    import types

    def init(**kw):
        raise RuntimeError(f"Module: nonsense does not exist. This module was parsed from Address: {kw.get('address')}")

    fake = types.SimpleNamespace(is_initialized=lambda: False, init=init)
    monkeypatch.setitem(sys.modules, "ray", fake)
    with pytest.raises(ConfigError) as e:
        RayExecutor("nonsense://").map(len, None, [])
    assert e.value.field == "address" and "nonsense://" in str(e.value)
    assert main(["search", "--model", "small", "--system", "small", "--global-batch", "64", "--seq-len", "8192",
                 "--executor", "ray", "--address", "nonsense://"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: address: cannot start or join the Ray cluster at 'nonsense://'")


def test_a_space_where_nothing_fits_says_so(capsys):
    code = main(["search", "--model", "small", "--system", "small", "--global-batch", "64", "--seq-len", "8192",
                 "--space", "strategy.pp=3"])
    out = capsys.readouterr().out
    assert code == 0 and "no layout of this space is valid and fits" in out and "invalid:" in out
    # each generalised reason (numbers as N) comes with one case in its own numbers
    assert "tp*pp*cp = N*N*N = N" in out and "e.g. strategy.tp: tp*pp*cp = 1*3*1 = 3 does not divide system.num_gpus = 8" in out


def test_a_dimension_pinned_or_restricted_twice_is_refused(capsys):
    """Two --space (or a --set and a --space) for one dimension used to keep the last silently."""
    base = ["search", "--model", "small", "--system", "small", "--global-batch", "64", "--seq-len", "8192"]
    for extra in (["--space", "strategy.tp=4", "--space", "strategy.tp=2"],
                  ["--set", "strategy.tp=4", "--space", "strategy.tp=2,4"],
                  ["--set", "strategy.pp=1", "--set", "strategy.pp=2"],
                  ["--space", "system.num_gpus=8", "--space", "system.num_gpus=16"]):
        assert main(base + extra) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "twice" in err[0], (extra, err)


# -- from a robustness audit of the search's CLI and API ---------------------------------------

_B = ["search", "--model", "llama3-8b", "--system", "h100-sxm5-80gb", "--set", "system.num_gpus=8",
      "--global-batch", "64", "--seq-len", "8192", "--top", "3"]


def _one_line_error(capsys, argv: list[str], *words: str) -> None:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and all(w in err[0] for w in words), (argv, err)


def test_batch_and_sequence_beyond_the_scenarios_bounds_are_refused_at_once(capsys):
    # 10**24 sequences used to hang the divisor enumeration (minutes of CPU on a shared server)
    for argv, word in ((_B[:7] + ["--global-batch", str(10**24), "--seq-len", "8192"], "global_batch"),
                       (_B[:7] + ["--global-batch-tokens", str(8192 * 10**21), "--seq-len", "8192"], "global_batch"),
                       (_B[:7] + ["--global-batch", "64", "--seq-len", str(10**9)], "seq_len")):
        _one_line_error(capsys, argv, word)


def test_fixed_strategy_fields_of_the_wrong_type_are_a_message_not_a_crash(capsys):
    # used to exit 1 with "internal error: TypeError: unhashable type: 'list'"
    for bad, field in (("strategy.framework=[1]", "strategy.framework"),
                       ("strategy.decoder_first_pipeline_num_layers=x", "strategy.decoder_first_pipeline_num_layers"),
                       ("strategy.pipeline_layers=x", "strategy.pipeline_layers")):
        _one_line_error(capsys, _B + ["--set", bad], field)
    m = presets.load_spec("models", "llama3-8b").model_dump(mode="json")
    s = presets.load_spec("systems", "h100-sxm5-80gb").model_dump(mode="json")
    for base in ({1: 2}, {"no_such_field": 1}, {"framework": [1]}):
        with pytest.raises(ConfigError):
            make_space(m, s, global_batch=64, seq_len=8192, base=base)
    with pytest.raises(ConfigError):
        make_space(m, s, global_batch=64, seq_len=8192, gpus=[])


def test_inputs_the_search_would_ignore_are_refused(capsys):
    _one_line_error(capsys, _B + ["--set", "strategy.seq_len=4096"], "--seq-len")
    _one_line_error(capsys, _B + ["--set", "strategy.global_batch_size=7"], "--global-batch")
    _one_line_error(capsys, _B + ["--set", "strategy.dp=3"], "strategy.dp")
    _one_line_error(capsys, _B + ["--space", "system.num_gpus="], "system.num_gpus")
    _one_line_error(capsys, _B + ["--executor", "inprocess", "--workers", "2"], "workers")
    _one_line_error(capsys, _B + ["--space", "strategy.etp=0"], "strategy.etp")   # not 261,592 rejections
    _one_line_error(capsys, _B + ["--set", "strategy.recompute=none", "--set", "strategy.recompute_num_layers=2"],
                    "recompute_num_layers")


def test_pins_hold_where_they_cannot_matter_and_a_layer_count_asks_for_full_recompute(capsys):
    assert main(_B + ["--set", "strategy.cp_comm_type=a2a", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["candidates"]
    assert got and all(c["strategy"]["cp_comm_type"] == "a2a" for c in got)   # at cp 1 too: never shown dropped
    assert main(_B + ["--set", "strategy.recompute_num_layers=2", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["candidates"]
    assert got and all((c["strategy"]["recompute"], c["strategy"]["recompute_num_layers"]) == ("full", 2) for c in got)


def test_pins_that_leave_no_layout_say_why(capsys):
    # 32 layers at pp 2 · vpp 3: the space proposed nothing and the result said "the rejections
    # below say why" above an empty list
    _one_line_error(capsys, _B + ["--set", "strategy.schedule=interleaved", "--set", "strategy.pp=2", "--set", "strategy.vpp=3"],
                    "space", "num_layers=32", "pp*vpp = 2*3")


def test_a_token_budget_gives_every_candidate_its_time_and_cost_to_train(capsys):
    from simengine.api import time_and_cost_to_train

    assert main(_B + ["--token-budget", "1e12", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["token_budget"] == 1e12 and out["candidates"]
    for c in out["candidates"] + out["pareto"]:
        assert (c["time_to_train_s"], c["cost_to_train_usd"]) == time_and_cost_to_train(1e12, c["tokens_per_s"],
                                                                                         c["cost_per_million_tokens_usd"])


def test_fixed_fields_in_the_text_forms_the_strategy_reads_are_accepted(capsys):
    """The field-by-field check once skipped StrategySpec's own "before" validators and refused
    recompute_modules=core_attn,mlp and pipeline_layers="4 4", which estimate accepts."""
    from simengine.search.make import _check_base

    for base in ({"recompute_modules": "core_attn,mlp"}, {"pipeline_layers": "4 4"}, {"dtype": "fp8"}):
        _check_base(base)
    assert main(["search", "--model", "small", "--system", "small", "--seq-len", "2048", "--global-batch", "64",
                 "--top", "2", "--set", "strategy.recompute_modules=core_attn,mlp"]) == 0
    capsys.readouterr()


def test_the_cli_refuses_a_top_past_its_limit(capsys):
    """--top 10,000 timed nearly every layout of an 8-GPU space (> 2 min: the bound prunes nothing
    until ``top`` layouts are timed); the CLI refuses it in one line, naming the argument."""
    from simengine.search.cli import MAX_TOP

    code = main(["search", "--model", "small", "--system", "small", "--global-batch", "64", "--seq-len", "8192",
                 "--top", str(MAX_TOP + 1)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "--top" in err and f"{MAX_TOP:,}" in err


def test_a_space_past_the_group_limit_is_refused_before_its_floors(monkeypatch):
    """A space is enumerated group by group and refused once it passes ``run.MAX_GROUPS``: DeepSeek-V3
    over the GPU counts 1..10 M made 29 M groups and 8 GB before the first progress tick."""
    from simengine.search import run

    groups, _ = run.plan_groups(_space())
    monkeypatch.setattr(run, "MAX_GROUPS", len(groups) - 1)
    with pytest.raises(ConfigError) as e:
        search(_space(), top=3)
    assert e.value.issues[0][0] == "space" and "restrict it" in e.value.issues[0][1]
    monkeypatch.setattr(run, "MAX_GROUPS", len(groups))
    assert search(_space(), top=3).candidates


def test_a_scenario_at_tp_1_does_not_fix_sequence_parallel_for_the_search():
    """``fixed_fields``: the qwen3-30b-a3b-ep8 preset runs tp 1 with sequence_parallel false, which
    changes nothing there; kept for every layout it refused each tp > 1 layout of the MoE model
    ("MoE with tp > 1 needs sequence_parallel"). Dropped, StrategySpec's default applies; a
    scenario at tp > 1 keeps its own choice. The CLI's --strategy and the studio read the same."""
    from simengine import api
    from simengine.search.make import fixed_fields
    from test_search import SYSTEM, TINY_MOE
    from ui.search_view import search_base

    qwen = presets.scenario_preset("qwen3-30b-a3b-ep8")["strategy"]
    assert qwen["tp"] == 1 and qwen["sequence_parallel"] is False
    base, dropped = fixed_fields(qwen)
    assert "sequence_parallel" not in base and not dropped and search_base(qwen) == (base, dropped)
    assert fixed_fields(dict(qwen, tp=2))[0]["sequence_parallel"] is False   # a choice at tp 2
    space = api.make_search_space(TINY_MOE, SYSTEM, global_batch=16, seq_len=4096, gpus=[8], base=base,
                                  choices={"tp": [2], "pp": [1], "cp": [1], "ep": [4], "zero_stage": [1], "recompute": ["none"]})
    res = api.search(space, top=3)
    assert res.candidates and all(c.strategy["tp"] == 2 and c.strategy.get("sequence_parallel", True) for c in res.candidates)
    pinned = api.make_search_space(TINY_MOE, SYSTEM, global_batch=16, seq_len=4096, gpus=[8], base={**base, "sequence_parallel": False},
                                   choices={"tp": [2], "pp": [1], "cp": [1], "ep": [4], "zero_stage": [1], "recompute": ["none"]})
    assert not api.search(pinned, top=3).candidates   # what the kept false did


def test_the_cli_reads_a_strategy_file_as_the_studio_does_and_keeps_its_own_pins(capsys):
    """``--strategy`` at tp 1 with sequence_parallel false: tp 2 layouts of the MoE model are found;
    the same false given with ``--set`` is the user's pin and refuses them with the scenario's words."""
    argv = ["search", "--model", "qwen3-30b-a3b", "--system", "h100-sxm5-80gb", "--strategy", "qwen3-30b-a3b-ep8",
            "--global-batch", "64", "--seq-len", "4096", "--top", "2", "--json", "--set", "system.num_gpus=16",
            "--set", "strategy.tp=2", "--set", "strategy.pp=1", "--set", "strategy.cp=1", "--set", "strategy.ep=8"]
    assert main(argv) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["candidates"] and all(c["strategy"]["tp"] == 2 for c in got["candidates"])
    assert main(argv + ["--set", "strategy.sequence_parallel=false"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert not got["candidates"] and any("needs sequence_parallel" in r for r in got["rejected"])
