"""A lazy screen (``prune.screen_group(lazy=True)``): each fitting (ZeRO stage, recompute) of a
group stays one ``options.Option`` whose bound is below every candidate it stands for, expands
into exactly the candidates the eager screen builds, and a search that never reaches one says so
for all of its flag combinations."""

from __future__ import annotations

import pytest

from simengine import api
from simengine.search import make_space, search
from simengine.search.options import expand
from simengine.search.prune import scenario, screen_group
from simengine.search.types import example

from test_search import SMALL_GPU, SYSTEM, TINY, TINY_MOE, _groups

SPACES = [
    # every ZeRO stage (ZeRO-2/3 collectives per micro-batch), both DP flags, TP overlap, recompute
    (TINY, SMALL_GPU, {"tp": (1, 2), "pp": (1, 2), "cp": (1, 2), "cp_comm_type": ("p2p",)}),
    # zero-bubble and interleaved orders: the option bound keeps the order terms
    (TINY, SYSTEM, {"tp": (2,), "pp": (2, 4), "cp": (1,), "schedule": ("interleaved", "zb-h1", "zb-h2"),
                    "recompute": ("none",)}),
    # MoE: the expert all-to-all, DualPipe's F&B pairs
    (TINY_MOE, SYSTEM, {"tp": (1,), "pp": (2,), "cp": (1,), "ep": (2, 4), "schedule": ("dualpipe", "1f1b"),
                        "recompute": ("none",)}),
]


def _space(model, system, choices):
    return make_space({**model, "num_layers": 8}, system, global_batch=16, seq_len=4096, gpus=[8], choices=choices)


@pytest.mark.parametrize("model,system,choices", SPACES)
def test_an_option_expands_into_the_eager_screens_candidates_each_above_its_bound(model, system, choices):
    space = _space(model, system, choices)
    options = 0
    for g, lay, mbs, order in _groups(space):
        eager = screen_group(space, g, lay, mbs, order)
        lazy = screen_group(space, g, lay, mbs, order, lazy=True)
        assert not lazy.entries and not eager.options
        assert [r.reason for r in lazy.rejections] == [r.reason for r in eager.rejections]
        assert lazy.memory_checked == eager.memory_checked
        built = []
        for opt in lazy.options:
            part = expand(space, g, lay, mbs, order, opt)
            assert len(part.entries) == opt.count == len(part.flows)
            for _, _, lb, _ in part.entries:
                assert opt.bound <= lb * (1 + 1e-12)
            built += part.entries
            options += 1
        assert [(s, o) for _, s, _, o in built] == [(s, o) for _, s, _, o in eager.entries]
        for (_, _, a, _), (_, _, b, _) in zip(built, eager.entries):
            assert a == pytest.approx(b, rel=1e-12)
    assert options > 10


def test_an_options_bound_is_below_its_candidates_estimates():
    space = _space(TINY, SMALL_GPU, SPACES[0][2])
    checked = 0
    for g, lay, mbs, order in _groups(space)[::2]:
        for opt in screen_group(space, g, lay, mbs, order, lazy=True).options:
            for _, strat, _, _ in expand(space, g, lay, mbs, order, opt).entries[::3]:
                rep = api.estimate(scenario(space, g, strat))
                assert opt.bound <= rep.step_time_s * (1 + 1e-12)
                checked += 1
    assert checked > 20


def test_a_search_accounts_for_the_options_it_never_reached():
    """With a top of 1 most options stay on the frontier: each is one 'bound' rejection standing
    for its flag combinations, and every candidate is still timed or rejected."""
    space = _space(TINY, SMALL_GPU, SPACES[0][2])
    res = search(space, top=1)
    left = [r for r in res.rejections if "at any overlap flags" in r.reason]
    assert left and all(r.kind == "bound" and r.count >= 1 for r in left)
    assert any(r.count > 1 for r in left)
    firsts = set()
    for g, lay, mbs, order in _groups(space):
        for opt in screen_group(space, g, lay, mbs, order, lazy=True).options:
            _, strat, _, _ = expand(space, g, lay, mbs, order, opt).entries[0]
            firsts.add(tuple(sorted(example(g, strat).items(), key=str)))
    assert all(tuple(sorted(r.example.items(), key=str)) in firsts for r in left)
    full = search(space)
    assert res.candidates[0].strategy == full.candidates[0].strategy
    assert res.evaluated + sum(r.count for r in res.rejections) == res.space_size


@pytest.mark.parametrize("model,system,choices", SPACES[:1] + SPACES[2:])
def test_the_closed_form_memory_is_the_plans_memory(model, system, choices):
    """The screen rejects an option that ``refine._Memory`` puts over capacity without pricing its
    plan: that closed form must be the memory the plan gives (``prune.memory_at_zero``), stage
    and all, for every recompute option and ZeRO stage."""
    from simengine.errors import ConfigError
    from simengine.search.options import rc_scenario
    from simengine.search.prune import memory_at_zero, priced
    from simengine.search.refine import _Group, _group

    space = _space(model, system, {**choices, "recompute": ("none", "selective", "full")})
    checked = 0
    for g, lay, mbs, _ in _groups(space):
        grp = _group(space, g, lay, mbs)
        if not isinstance(grp, _Group):
            continue
        for rc in grp.rcs:
            for z in grp.zs:
                try:
                    sc = rc_scenario(space, g, lay, mbs, z, rc)
                except ConfigError:
                    continue
                over, stage = memory_at_zero(sc, *priced(sc))
                lo, at = grp.memo.tightest(rc, z)
                assert lo == pytest.approx(over, abs=1e-9)
                assert at == stage
                checked += 1
    assert checked > 30


@pytest.mark.parametrize("objective", ["tokens_per_s", "mfu", "cost_per_million_tokens", "time_to_train"])
def test_a_top_search_returns_the_full_rankings_head(objective):
    """Options keyed per objective (×GPUs where the score scales with them) never hide a better
    candidate: the top three are the full ranking's first three, in order (two GPU counts)."""
    space = make_space({**TINY, "num_layers": 8}, SMALL_GPU, global_batch=16, seq_len=4096, gpus=[4, 8],
                       choices={"tp": (1, 2), "pp": (1, 2), "cp": (1,)}, token_budget=1e9)
    full = search(space, objective=objective)
    top = search(space, objective=objective, top=3)
    assert [(c.gpus, c.strategy) for c in top.candidates] == [(c.gpus, c.strategy) for c in full.candidates[:3]]
    assert top.evaluated < full.evaluated
