"""The search's activation offload (StrategySpec.cpu_offload_layers, search/space.py
``offload_options``): proposed where Megatron-Core runs it, the fewest offloaded layers that fit
kept (prune.py), pins respected, and no fitting candidate better than the search's best (brute
force, which enumerates every offloaded layer count on its own)."""

from __future__ import annotations

import pytest
from test_search import SYSTEM, TINY, brute_force

from simengine import api
from simengine.errors import ConfigError
from simengine.search import make_space, search
from simengine.search.space import check_choices, recompute_options

# a tight GPU with a fast host link: the fastest fitting layouts offload (at 4.0 GiB nothing at
# tp 1 · pp 1 fits without recompute or offload)
FAST_LINK = {**SYSTEM, "gpu": {**SYSTEM["gpu"], "memory_gib": 4.0, "host_link_gbs": 900.0}}
CHOICES = {"tp": (1, 2), "pp": (1, 2), "cp": (1,), "overlap_param_gather": (True,), "tp_comm_overlap": (False,)}


def _space(choices=None, system=FAST_LINK, base=None):
    return make_space(TINY, system, global_batch=16, seq_len=8192, gpus=[8], choices=dict(choices or CHOICES), base=base)


@pytest.fixture(scope="module")
def whole():
    return search(_space())


def test_best_equals_brute_force_and_offloads():
    space = _space()
    brute = brute_force(space)
    best = max(brute, key=lambda b: b[0])
    assert best[2]["cpu_offload_layers"] > 0, "the test space's fastest fitting layout offloads"
    for top in (None, 1, 3):
        res = search(space, top=top)
        assert res.candidates[0].tokens_per_s == pytest.approx(best[0], rel=1e-12)
        assert res.evaluated + sum(r.count for r in res.rejections) == res.space_size


def test_offload_is_proposed_only_where_megatron_core_runs_it():
    space = _space()
    one = recompute_options(space, {"pp": 1, "schedule": "1f1b"})
    assert [rc for rc in one if rc[0] == "offload"] == [("offload", k) for k in range(1, TINY["num_layers"])]
    assert not [rc for rc in recompute_options(space, {"pp": 2, "schedule": "1f1b"}) if rc[0] == "offload"]
    assert not [rc for rc in recompute_options(space, {"pp": 1, "schedule": "dualpipev"}) if rc[0] == "offload"]
    torch = _space(base={"framework": "torch-native"})
    assert not [rc for rc in recompute_options(torch, {"pp": 1, "schedule": "1f1b"}) if rc[0] == "offload"]
    full = _space({**CHOICES, "recompute": ("full",)})
    assert not [rc for rc in recompute_options(full, {"pp": 1, "schedule": "1f1b"}) if rc[0] == "offload"]


def test_each_offloading_candidate_offloads_the_fewest_layers_that_fit(whole):
    offs = [c for c in whole.candidates if c.strategy["cpu_offload_layers"]]
    assert offs, "the test space has offloading candidates"
    for c in offs:
        s = c.strategy
        assert s["pp"] == 1 and s["recompute"] == "none" and s["schedule"] == "1f1b"
        assert f"offload{s['cpu_offload_layers']}" in c.label()
        fewer = dict(s, cpu_offload_layers=s["cpu_offload_layers"] - 1)
        rep = api.estimate({"model": TINY, "system": dict(FAST_LINK, num_gpus=c.gpus), "strategy": fewer})
        assert not rep.fits
    reasons = [r.reason for r in whole.rejections]
    assert any("offload of fewer layers" in r and "more offload only adds time" in r for r in reasons)
    assert any(r.startswith("OOM by") and "offload of" in r for r in reasons)


def test_a_pin_of_no_offload_searches_without_it():
    space = _space({**CHOICES, "cpu_offload_layers": (0,)})
    res = search(space, top=3)
    assert all(not c.strategy["cpu_offload_layers"] for c in res.candidates)
    best = max(b[0] for b in brute_force(space))
    assert res.candidates[0].tokens_per_s == pytest.approx(best, rel=1e-12)
    assert res.candidates[0].tokens_per_s < search(_space(), top=1).candidates[0].tokens_per_s


def test_a_pinned_layer_count_is_every_candidates_and_pipelines_say_why_not():
    res = search(_space({**CHOICES, "cpu_offload_layers": (2,)}))
    assert res.candidates and all(c.strategy["cpu_offload_layers"] == 2 and c.strategy["pp"] == 1 for c in res.candidates)
    assert any(r.kind == "invalid" and "without pipeline parallelism" in r.reason for r in res.rejections)
    assert res.evaluated + sum(r.count for r in res.rejections) == res.space_size


def test_offload_needs_recompute_none_among_the_choices():
    with pytest.raises(ConfigError) as e:
        check_choices({"cpu_offload_layers": (2, 4), "recompute": ("full",)})
    assert e.value.issues[0][0] == "strategy.cpu_offload_layers"
    with pytest.raises(ConfigError):
        check_choices({"cpu_offload_layers": (-1,)})
    assert check_choices({"cpu_offload_layers": (0,), "recompute": ("full",)})["cpu_offload_layers"] == (0,)


def test_the_cli_pins_offload_with_set(capsys, tmp_path):
    import json

    from simengine.cli import main

    mpath = tmp_path / "tiny.json"
    mpath.write_text(json.dumps(TINY))
    spath = tmp_path / "sys.json"
    spath.write_text(json.dumps(FAST_LINK))
    code = main(["search", "--model", str(mpath), "--system", str(spath), "--set", "system.num_gpus=8",
                 "--global-batch", "16", "--seq-len", "8192", "--set", "strategy.cpu_offload_layers=0",
                 "--space", "strategy.pp=1,2", "--top", "3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["candidates"]
    assert all(not c["strategy"]["cpu_offload_layers"] for c in out["candidates"])


def test_offload_past_the_host_memory_is_rejected_and_brute_force_agrees():
    """With little host memory the fewest offloaded layers that fit the GPU may not fit the host
    (more only take more): rejected with the host's reason, and the best is still brute force's."""
    small_host = {**FAST_LINK, "gpu": {**FAST_LINK["gpu"], "host_memory_gib": 0.4}}
    space = _space(system=small_host)
    res = search(space)
    assert any(r.reason.startswith("host memory:") for r in res.rejections)
    for c in res.candidates:
        rep = api.estimate({"model": TINY, "system": dict(small_host, num_gpus=c.gpus), "strategy": c.strategy})
        assert rep.fits and max(m.host_offload_gib for m in rep.memory_by_stage) <= 0.4
    best = max(b[0] for b in brute_force(space))
    assert res.candidates[0].tokens_per_s == pytest.approx(best, rel=1e-12)
    assert res.evaluated + sum(r.count for r in res.rejections) == res.space_size


@pytest.mark.parametrize("pins", [{"cpu_offload_layers": (0, 3, 1)}, {"cpu_offload_layers": (3, 1)},
                                  {"recompute": ("full",), "recompute_num_layers": (None, 1)},
                                  {"recompute": ("full",), "recompute_num_layers": (3, 1)}])
def test_restrictions_listed_in_any_order_find_the_brute_force_best(pins):
    """The bisections need memory to fall along each family: a restriction listed as 3, 1 once
    checked offload 1 (OOM) and rejected offload 3, the best, as 'OOM (at least; offload of 1 layer)'."""
    space = _space({**CHOICES, **pins})
    best = max(b[0] for b in brute_force(space))
    assert search(space, top=1).candidates[0].tokens_per_s == pytest.approx(best, rel=1e-12)


def test_offload_pins_that_nothing_could_run_are_refused():
    with pytest.raises(ConfigError) as e:
        check_choices({"cpu_offload_layers": (0, 2), "recompute_num_layers": (1,)})
    assert e.value.issues[0][0] == "strategy.cpu_offload_layers" and "recompute_num_layers" in e.value.issues[0][1]
    with pytest.raises(ConfigError):
        check_choices({"cpu_offload_layers": (0, 2), "recompute": ("selective", "full")})
