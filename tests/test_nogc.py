"""The collector settings around the engine's allocation bursts (sim/nogc.py): a search runs
with fewer young collections and leaves the process's thresholds as it found them."""

from __future__ import annotations

import gc
import threading

import pytest

from simengine import presets
from simengine.search import make_space, search
from simengine.search.executors import time_batch
from simengine.sim.nogc import SEARCH_THRESHOLD0, fewer_collections, paused_gc

TINY = {**presets.load_preset("models", "llama3-8b"), "name": "tiny", "hidden_size": 1024, "num_layers": 4,
        "num_attention_heads": 16, "num_kv_heads": 4, "ffn_hidden_size": 4096, "vocab_size": 32000}
SYSTEM = presets.load_preset("systems", "h100-sxm5-80gb")


@pytest.fixture
def thresholds():
    old = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*old)


def test_fewer_collections_raises_the_young_threshold_and_restores_it(thresholds):
    with fewer_collections():
        assert gc.get_threshold() == (SEARCH_THRESHOLD0, 10, 10)
        with fewer_collections():  # nested: the outer setting stays
            assert gc.get_threshold()[0] == SEARCH_THRESHOLD0
        assert gc.get_threshold()[0] == SEARCH_THRESHOLD0
    assert gc.get_threshold() == (700, 10, 10)


def test_fewer_collections_never_lowers_a_higher_threshold(thresholds):
    gc.set_threshold(10 * SEARCH_THRESHOLD0, 10, 10)
    with fewer_collections():
        assert gc.get_threshold()[0] == 10 * SEARCH_THRESHOLD0
    assert gc.get_threshold()[0] == 10 * SEARCH_THRESHOLD0


def test_fewer_collections_restores_after_an_error(thresholds):
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_concurrent_users_restore_once_the_last_leaves(thresholds):
    inside, leave = threading.Event(), threading.Event()

    def other():
        with fewer_collections():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with fewer_collections():
        pass
    assert gc.get_threshold()[0] == SEARCH_THRESHOLD0  # the other thread is still inside
    leave.set()
    t.join(10)
    assert gc.get_threshold() == (700, 10, 10)


def test_paused_gc_restores_the_collector(thresholds):
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_search_and_its_batches_leave_the_thresholds_as_they_were(thresholds):
    seen = []
    space = make_space(TINY, SYSTEM, global_batch=8, seq_len=2048, gpus=[2],
                       choices={"tp": (1, 2), "pp": (1,), "cp": (1,)})
    res = search(space, top=3, progress=lambda done, total: seen.append(gc.get_threshold()[0]))
    assert res.candidates
    assert seen and set(seen) == {SEARCH_THRESHOLD0}   # the whole search runs with the raised threshold
    assert gc.get_threshold() == (700, 10, 10)
    time_batch(space, [])
    assert gc.get_threshold() == (700, 10, 10)
