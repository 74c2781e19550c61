"""How the search hands its work to an executor — phase 0 sorted by block kind, each round dealt
into batches, the round size — changes what a pool's workers do, never the result."""

from __future__ import annotations

import pytest

from simengine.search import ProcessPool, make_space, search
from simengine.search.executors import InProcess
from simengine.search.prune import work_floor
from simengine.search.run import DEAL, ROUND, ROUND_MAX, _by_kind, _dealt, round_size

from test_search import SMALL_GPU, TINY, _groups


def _space():
    return make_space({**TINY, "num_layers": 8}, SMALL_GPU, global_batch=16, seq_len=4096, gpus=[8],
                      choices={"tp": (1, 2), "pp": (1, 2, 4), "cp": (1, 2)})


@pytest.mark.parametrize("executor", [InProcess, lambda: ProcessPool(2)])
def test_phase_zero_by_block_kind_returns_each_groups_own_floor_in_order(executor):
    space = _space()
    groups = _groups(space)
    ex = executor()
    try:
        got = _by_kind(ex, space, groups, None)
    finally:
        getattr(ex, "close", lambda: None)()
    want = [work_floor(space, *g) for g in groups]
    assert [(lb, None if r is None else r.reason) for lb, r in got] == [(lb, None if r is None else r.reason) for lb, r in want]
    assert len({g[1]["tp"] for g in groups}) > 1


def test_a_round_is_dealt_whole_and_its_estimates_spread():
    grp = _groups(_space())[0]
    nodes = [("time", (8, {"tp": 1}, i)) for i in range(12)] + [("bound", grp)] * 30 + [("flow", ((8, {}, 99), 0.0, None))]
    batches = _dealt(nodes)
    assert len(batches) >= DEAL
    assert sorted(map(repr, (n for b in batches for n in b))) == sorted(map(repr, nodes))
    per = [sum(n[0] == "time" for n in b) for b in batches]
    assert max(per) - min(per) <= 1   # a run of estimates goes to every batch, not to one
    assert batches == _dealt(list(nodes))   # a function of the round alone


def test_the_round_size_follows_the_first_frontier_between_its_bounds():
    assert round_size(10) == ROUND and round_size(10**7) == ROUND_MAX
    sizes = [round_size(n) for n in range(0, 20000, 97)]
    assert sizes == sorted(sizes) and min(sizes) == ROUND and max(sizes) == ROUND_MAX


def test_same_result_in_process_and_on_a_pool_with_large_rounds(monkeypatch):
    """Rounds at their largest (every executor alike): the same candidates and rejections."""
    import simengine.search.run as run

    monkeypatch.setattr(run, "ROUND", ROUND_MAX)
    space = _space()
    a = search(space, top=3)
    b = search(space, top=3, executor=ProcessPool(2))
    assert [c.strategy for c in a.candidates] == [c.strategy for c in b.candidates]
    assert [(r.kind, r.reason, r.count) for r in a.rejections] == [(r.kind, r.reason, r.count) for r in b.rejections]
