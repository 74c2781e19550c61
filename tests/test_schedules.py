"""Schedules as pure order generators: completeness, dependency order, closed forms."""

from __future__ import annotations

import pytest

from simengine.schedule import SCHEDULES, Action, count_max_inflight, get_schedule
from simengine.schedule import interleaved, one_f_one_b

CASES = {
    "gpipe": [(p, m, 1) for p in (1, 2, 4, 7) for m in (1, 3, 4, 8, 13)],
    "1f1b": [(p, m, 1) for p in (1, 2, 4, 7) for m in (1, 3, 4, 8, 13)],
    "zb-h1": [(p, m, 1) for p in (1, 2, 4, 7) for m in (1, 3, 4, 8, 13)],
    "interleaved": [(p, k * p, v) for p in (1, 2, 3, 4, 8) for k in (1, 2, 3) for v in (1, 2, 3, 4)],
    "dualpipev": [(p, m, 1) for p in (1, 2, 3, 4, 8) for m in (2 * p, 2 * p + 1, 3 * p, 4 * p + 3)],
}


def default_cases(name):
    """Cases for a schedule without a hand-picked list: a grid filtered by its own requirements,
    so a newly added schedule module is covered by the generic tests below without editing them."""
    s = get_schedule(name)
    grid = [(p, m, v) for p in (1, 2, 3, 4, 7) for m in (1, 3, 4, 8, 13, 2 * p + 1) for v in (1, 2)]
    return sorted({(p, m, v) for p, m, v in grid if not s.requirements(p, m, v, None)})


def all_cases():
    for name in SCHEDULES:
        for p, m, v in CASES.get(name) or default_cases(name):
            yield name, p, m, v


def test_registry_discovers_one_module_per_schedule():
    import importlib
    import pkgutil
    import typing

    import simengine.schedule as pkg
    from simengine.config import StrategySpec

    # helper modules (leading underscore, like the registry skips) hold no schedule
    modules = {i.name for i in pkgutil.iter_modules(pkg.__path__) if not i.name.startswith("_")} - {"action", "base"}
    by_module = {importlib.import_module(f"simengine.schedule.{n}").SCHEDULE.name for n in modules}
    assert set(SCHEDULES) == by_module  # every schedule file is registered, nothing else is
    assert {"gpipe", "1f1b", "interleaved", "zb-h1", "dualpipev"} <= set(SCHEDULES)
    for name, s in SCHEDULES.items():
        assert get_schedule(name) is s and s.name == name
    with pytest.raises(ValueError, match="unknown schedule"):
        get_schedule("nope")
    # the strategy's schedule names (and the JSON schema enum the studio renders) are the registry
    ann = StrategySpec.model_fields["schedule"].annotation
    assert typing.get_args(ann) == tuple(SCHEDULES)
    assert StrategySpec.model_json_schema()["properties"]["schedule"]["enum"] == list(SCHEDULES)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_requirements_accept_a_plain_layout_and_name_fields(name):
    s = get_schedule(name)
    vpp = 2 if name == "interleaved" else 1
    assert s.requirements(4, 16, vpp, 64) == []
    assert s.requirements(4, None, vpp, None) == []  # unknowns are not judged
    for field, msg in s.requirements(4, 16, 3 if name != "interleaved" else 100, 8):
        assert field.startswith("strategy.") and "=" in msg


@pytest.mark.parametrize("name,args,field,text", [
    ("1f1b", (4, 8, 2, 32), "strategy.vpp", "vpp=2 needs schedule='interleaved'"),
    ("gpipe", (8, 8, 1, 4), "strategy.pp", "pp*vpp = 8*1 = 8 exceeds num_layers=4"),
    ("interleaved", (1, 8, 2, 32), "strategy.pp", "needs pp > 1 (pp=1)"),
    ("gpipe", (1, 8, 1, 32), "strategy.schedule", "schedule='gpipe' needs pp > 1"),
    ("zb-h1", (1, 8, 1, 32), "strategy.schedule", "use schedule='1f1b'"),
    ("zb-h2", (1, 8, 1, 32), "strategy.schedule", "no pipeline schedule runs"),
    ("interleaved", (4, 6, 2, 32), "strategy.global_batch_size", "m=6 divisible by pp=4"),
    ("interleaved", (4, 8, 7, 20), "strategy.pp", "pp*vpp = 4*7 = 28 exceeds num_layers=20"),
    ("dualpipev", (4, 7, 1, 32), "strategy.global_batch_size", "m=7 >= 2*pp = 8"),
    ("dualpipev", (4, 8, 1, 31), "strategy.pp", "num_layers=31 divisible by 2*pp = 8"),
    ("dualpipev", (4, 8, 2, 32), "strategy.vpp", "2 model chunks per rank"),
])
def test_requirements_messages(name, args, field, text):
    issues = get_schedule(name).requirements(*args)
    assert any(f == field and text in m for f, m in issues), issues


def test_at_pp_1_only_the_schedules_a_framework_runs_there_are_accepted():
    """pp 1 runs no pipeline schedule (Megatron-Core forward_backward_no_pipelining): 1f1b is
    that; DualPipeV's V on one rank is DeepSeek's overlapped forward/backward pair (DualPipeV.step
    accepts one rank); the others need a pipeline."""
    ok = {n for n in SCHEDULES if not get_schedule(n).requirements(1, 8, 1, 32)}
    assert ok == {"1f1b", "dualpipev"}


def test_action_is_small_and_frozen():
    a = Action("F", 3, 1)
    assert (a.kind, a.mb, a.chunk) == ("F", 3, 1)
    with pytest.raises(AttributeError):
        a.mb = 4  # type: ignore[misc]


@pytest.mark.parametrize("name,p,m,v", list(all_cases()))
def test_orders_complete_and_causal(name, p, m, v):
    s = get_schedule(name)
    orders = s.orders(p, m, v)
    nch = s.chunks_per_rank(v)
    assert len(orders) == p
    for order in orders:
        pos = {}
        for i, a in enumerate(order):
            assert a.kind in "FBW" and 0 <= a.mb < m and 0 <= a.chunk < nch
            assert (a.kind, a.mb, a.chunk) not in pos, f"duplicate {a}"
            pos[(a.kind, a.mb, a.chunk)] = i
        for mb in range(m):
            for c in range(nch):
                assert pos[("F", mb, c)] < pos[("B", mb, c)]
                if ("W", mb, c) in pos:
                    assert pos[("B", mb, c)] < pos[("W", mb, c)]
        assert len(order) == len(pos)


@pytest.mark.parametrize("name,p,m,v", list(all_cases()))
def test_max_inflight_closed_form_matches_order(name, p, m, v):
    s = get_schedule(name)
    orders = s.orders(p, m, v)
    for r in range(p):
        assert s.max_inflight(r, p, m, v) == count_max_inflight(orders[r]), (name, p, m, v, r)


def test_count_max_inflight_uses_w_end_when_split():
    order = [Action("F", 0, 0), Action("B", 0, 0), Action("F", 1, 0), Action("W", 0, 0),
             Action("B", 1, 0), Action("W", 1, 0)]
    assert count_max_inflight(order) == 2  # mb 0 is held until its W
    assert count_max_inflight([a for a in order if a.kind != "W"]) == 1


def test_1f1b_warmup_steady_cooldown():
    o = one_f_one_b.rank_order(0, 4, 6)
    assert [a.kind for a in o] == list("FFF" + "FB" * 3 + "BBB")
    assert [a.kind for a in one_f_one_b.rank_order(3, 4, 6)] == list("FB" * 6)
    assert [a.kind for a in one_f_one_b.rank_order(0, 4, 2)] == list("FFBB")


def test_interleaved_megatron_chunk_order_and_warmup():
    p, m, v = 2, 4, 2
    o = interleaved.rank_order(0, p, m, v)
    fwd = [(a.mb, a.chunk) for a in o if a.kind == "F"]
    bwd = [(a.mb, a.chunk) for a in o if a.kind == "B"]
    # Megatron get_model_chunk_id / get_microbatch_id_in_model_chunk with group size p
    assert fwd == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (3, 0), (2, 1), (3, 1)]
    assert bwd == [(0, 1), (1, 1), (0, 0), (1, 0), (2, 1), (3, 1), (2, 0), (3, 0)]
    for r in range(4):
        o = interleaved.rank_order(r, 4, 8, 3)
        warm = next(i for i, a in enumerate(o) if a.kind == "B") - 1
        assert warm == (4 - r - 1) * 2 + (3 - 1) * 4


def test_zb_h1_same_peak_as_1f1b():
    for p in (2, 4, 8):
        for m in (p, 2 * p, 3 * p + 1):
            zb = get_schedule("zb-h1")
            f1 = get_schedule("1f1b")
            assert max(zb.max_inflight(r, p, m, 1) for r in range(p)) == max(
                f1.max_inflight(r, p, m, 1) for r in range(p))
            for order in zb.orders(p, m, 1):
                assert sum(a.kind == "W" for a in order) == m


def test_dualpipev_v_shape_and_bijection():
    s = get_schedule("dualpipev")
    for p in (1, 2, 4, 8):
        stages = sorted(s.stage_of(r, c, p, 1) for r in range(p) for c in range(2))
        assert stages == list(range(2 * p))
        assert s.stage_of(0, 1, p, 1) == 2 * p - 1  # the loss lives on rank 0
        assert s.stage_of(p - 1, 0, p, 1) + 1 == s.stage_of(p - 1, 1, p, 1)  # local turn
        assert s.chunks_per_rank(1) == 2


def test_interleaved_stage_mapping():
    s = get_schedule("interleaved")
    assert [s.stage_of(r, c, 4, 2) for c in range(2) for r in range(4)] == list(range(8))


@pytest.mark.parametrize("name,p,m,v,msg", [
    ("interleaved", 4, 6, 2, "multiple of pp"),
    ("dualpipev", 4, 7, 1, ">= 2"),
    ("dualpipev", 2, 8, 3, "2 chunks"),
    ("1f1b", 4, 8, 2, "only supported by schedule='interleaved'"),
    ("zb-h1", 4, 8, 2, "vpp"),
    ("gpipe", 4, 0, 1, "m=0"),
])
def test_invalid_parameters(name, p, m, v, msg):
    with pytest.raises(ValueError, match=msg):
        get_schedule(name).orders(p, m, v)


@pytest.mark.parametrize("schedule, vpp", [("nope", 1), (["1f1b"], 1), ("interleaved", -5), ("interleaved", 0),
                                           ("interleaved", "x"), ("interleaved", True)])
def test_api_chunks_per_rank_refuses_bad_input_with_a_config_error(schedule, vpp):
    """simengine.api's contract: bad input is a ConfigError naming the field, never a ValueError or a
    negative count handed back."""
    from simengine import api
    from simengine.errors import ConfigError

    with pytest.raises(ConfigError, match="strategy"):
        api.chunks_per_rank(schedule, vpp)
    assert api.chunks_per_rank("interleaved", 4) == 4 and api.chunks_per_rank("dualpipev") == 2
