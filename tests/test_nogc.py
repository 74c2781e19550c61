"""The collector around the engine's allocation bursts (sim/nogc.py): a search runs with it
off, and the process's collector is left as it was found, whoever else pauses it meanwhile."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from simengine import presets
from simengine.search import make_space, search
from simengine.search.executors import time_batch
from simengine.sim.nogc import PROMOTE_OVER, paused_gc

TINY = {**presets.load_preset("models", "llama3-8b"), "name": "tiny", "hidden_size": 1024, "num_layers": 4,
        "num_attention_heads": 16, "num_kv_heads": 4, "ffn_hidden_size": 4096, "vocab_size": 32000}
SYSTEM = presets.load_preset("systems", "h100-sxm5-80gb")


@pytest.fixture
def collector():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_gc_turns_the_collector_off_and_restores_it(collector):
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested: the outer pause stays
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_paused_gc_leaves_a_collector_that_was_off_off(collector):
    gc.disable()
    with paused_gc():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_paused_gc_restores_after_an_error(collector):
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_concurrent_users_restore_once_the_last_leaves(collector):
    inside, leave = threading.Event(), threading.Event()

    def other():
        with paused_gc():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with paused_gc():
        pass
    assert not gc.isenabled()  # the other thread is still inside: a short pause does not turn it back on
    leave.set()
    t.join(10)
    assert gc.isenabled()


def test_a_search_and_its_batches_run_without_the_collector_and_restore_it(collector):
    seen = []
    space = make_space(TINY, SYSTEM, global_batch=8, seq_len=2048, gpus=[2],
                       choices={"tp": (1, 2), "pp": (1,), "cp": (1,)})
    res = search(space, top=3, progress=lambda done, total: seen.append(gc.isenabled()))
    assert res.candidates
    assert seen and set(seen) == {False}   # the whole search runs with the collector off
    assert gc.isenabled()
    time_batch(space, [])
    assert gc.isenabled()


def test_a_search_leaves_no_cycles_behind(collector):
    """What the pause rests on: nothing a search builds forms a reference cycle, so with the
    collector off it frees everything by reference counting (a cycle would wait for the next
    collection)."""
    space = make_space(TINY, SYSTEM, global_batch=8, seq_len=2048, gpus=[2, 4])
    gc.collect()
    search(space, top=3)
    assert gc.collect() == 0


class _Node:
    def __init__(self):
        self.other = self  # a reference cycle: only the collector frees it


def test_a_burst_leaves_the_young_generation_empty_and_its_cycles_collectable(collector):
    """Leaving a pause after a burst moves its survivors to the oldest generation unscanned
    (sim/nogc.py): the first young collection after it scans nothing of the burst (it used to
    scan it all: 1.5 s after DeepSeek-V3's search), and a cycle made inside is still collected
    by a full collection."""
    gc.collect()
    with paused_gc():
        kept = [(i,) * 2 for i in range(PROMOTE_OVER + 50_000)]   # the burst's survivors
        ref = weakref.ref(_Node())   # garbage, in a cycle
        assert gc.get_count()[0] > PROMOTE_OVER
    assert gc.isenabled() and gc.get_count()[0] < 1_000
    junk = [[] for _ in range(2_000)]  # enough allocations for a young collection to run
    assert junk and not any(o is kept for o in gc.get_objects(generation=1))  # not scanned and promoted by one
    assert any(o is kept for o in gc.get_objects(generation=2))
    assert ref() is not None and len(kept) > PROMOTE_OVER
    gc.collect()
    assert ref() is None


def test_a_short_pause_leaves_its_objects_to_the_usual_young_collection(collector, monkeypatch):
    moved = []
    monkeypatch.setattr(gc, "freeze", lambda: moved.append(1))
    gc.collect()
    with paused_gc():
        kept = [(i,) * 2 for i in range(5_000)]
    assert kept and not moved
    with paused_gc():
        kept = [(i,) * 2 for i in range(PROMOTE_OVER + 50_000)]
    assert moved == [1]
