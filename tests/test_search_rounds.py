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


def test_a_rounds_group_steps_go_by_block_kind():
    """Each block kind's group steps land in consecutive batches, one or two for a kind that fills
    no more (a pool's workers then price each kind's blocks once, not each of them), whatever order
    the frontier popped them in."""
    from simengine.search.prune import block_kind

    groups = _groups(_space())
    nodes = [(("refine", g) if i % 3 else ("zero", (g, 1.0))) for i, g in enumerate(groups[:96])][::-1]
    batches = _dealt(nodes)
    assert len(batches) >= DEAL and sorted(map(repr, (n for b in batches for n in b))) == sorted(map(repr, nodes))
    where: dict = {}
    for b, batch in enumerate(batches):
        for kind, item in batch:
            g = item[0] if kind == "zero" else item
            where.setdefault(block_kind(g[0], g[1], g[2]), set()).add(b)
    assert len(where) > 3 and all(max(bs) - min(bs) + 1 == len(bs) for bs in where.values())
    size = max(map(len, batches))
    counts = {k: sum(1 for b in batches for kind, item in b
                     if block_kind(*(item[0] if kind == "zero" else item)[:3]) == k) for k in where}
    assert all(len(where[k]) <= 2 for k, n in counts.items() if n <= size)


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


def test_searches_in_two_threads_return_what_each_returns_alone():
    """A search's memos live in its process, keyed per space: two searches on two spaces in two
    threads of one process ran interleaved and read each other's (wrong candidates and
    rejections); ``search`` now runs one at a time per process (run._ONE_AT_A_TIME)."""
    import sys
    import threading

    from simengine import presets
    from simengine.search import make_space, search

    tiny = {**presets.load_preset("models", "llama3-8b"), "name": "tiny", "hidden_size": 1024, "num_layers": 4,
            "num_attention_heads": 16, "num_kv_heads": 4, "ffn_hidden_size": 4096, "vocab_size": 32000}
    system = presets.load_preset("systems", "h100-sxm5-80gb")
    small = {**system, "gpu": {**system["gpu"], "memory_gib": 4.5}}
    spaces = [make_space(tiny, small, global_batch=16, seq_len=8192, gpus=[8]),
              make_space(tiny, system, global_batch=32, seq_len=4096, gpus=[16])]

    def sig(res):
        return ([(c.label(), c.step_time_s) for c in res.candidates],
                sorted((r.kind, r.reason, r.count, repr(sorted(r.example.items()))) for r in res.rejections))

    alone = [sig(search(s, top=5)) for s in spaces]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)   # the threads switch often: without the lock most runs mixed up
    try:
        for _ in range(2):
            out: list = [None, None]

            def run(i: int, out: list = out) -> None:
                out[i] = sig(search(spaces[i], top=5))
            threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert out == alone
    finally:
        sys.setswitchinterval(old)


@pytest.mark.parametrize("top,words", [(1, "not below the best timed candidate"),
                                       (3, "not below the slowest of the 3 best timed candidates")])
def test_bound_rejections_name_the_candidate_they_lost_to_in_words(top, words):
    """The CLI printed "is not below the 3-th best timed candidate"."""
    res = search(_space(), top=top)
    texts = [r.reason for r in res.rejections if r.kind in ("bound", "unevaluated")]
    assert texts and any(words in t for t in texts) and not any("-th best" in t for t in texts)
