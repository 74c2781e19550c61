"""The collector around the engine's allocation bursts (sim/nogc.py): a search runs with it
off, and the process's collector is left as it was found, whoever else pauses it meanwhile."""

from __future__ import annotations

import gc
import threading

import pytest

from simengine import presets
from simengine.search import make_space, search
from simengine.search.executors import time_batch
from simengine.sim.nogc import paused_gc

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
