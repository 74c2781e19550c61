"""The compiled-structure cache (sim/compiled.py, sim/compact.py): it is bounded by the bytes its
entries hold, older entries are packed copies, and a structure used again from its packed copy
(or read after it gave up its source) gives bit-for-bit the numbers of a fresh compile."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

from simengine.sim import compiled, simulate
from simengine.sim.compact import _Ints, pack, squeeze, unpack
from simengine.sim.engine import pipeline_metrics
from simengine.sim.periodic import first_length, period

from test_periodic import plan_like


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch):
    compiled.clear_cache()
    yield
    compiled.clear_cache()


def _inputs() -> list:
    """Structures with and without DP piece runs (closed.py), and a long 1F1B and interleaved
    pipeline (periodic.py: two short structures per estimate)."""
    rng = random.Random("cache")
    out = []
    for schedule, p, vpp in (("1f1b", 4, 1), ("interleaved", 4, 2), ("zb-h1", 4, 1), ("dualpipe", 4, 1)):
        for ogr in (False, True):
            two = schedule == "dualpipe"  # two chunks per rank, one per direction
            inp = plan_like(rng, "interleaved" if two else schedule, p, 1, 2 if two else vpp)
            out.append(dataclasses.replace(inp, schedule=schedule, vpp=vpp, num_microbatches=16,
                                           overlap_grad_reduce=ogr, overlap_param_gather=ogr))
    for schedule, vpp in (("1f1b", 1), ("interleaved", 2)):
        inp = plan_like(rng, schedule, 4, 1, vpp)
        out.append(dataclasses.replace(inp, num_microbatches=3 * first_length(inp, period(inp)) + period(inp)))
    return out


def _numbers(met) -> tuple:
    return (met.step_time_s, met.names, met.time_s.tobytes(), met.exposed_s.tobytes(), met.hidden_s.tobytes(),
            met.bubble_s.tobytes(), met.critical_rank)


def _fresh(inp) -> tuple:
    compiled.clear_cache()
    return _numbers(pipeline_metrics(inp))


def test_reused_structures_equal_a_fresh_compile_bit_for_bit(monkeypatch):
    inputs = _inputs()
    want = [_fresh(inp) for inp in inputs]
    compiled.clear_cache()
    monkeypatch.setattr(compiled, "_MAX_LIVE", 0)  # every entry but the newest (and a partner) is packed
    for _ in range(3):  # first use, then from packed copies
        got = [_numbers(pipeline_metrics(inp)) for inp in inputs]
        assert got == want
        assert sum(c.packed for c in compiled._cache.values()) >= len(inputs) - 2
    # a structure re-used after it gave up its source compiles it again where it is read
    key = compiled.structure_key(inputs[1])
    assert compiled._cache[key].packed
    tl = simulate(inputs[1])
    compiled.clear_cache()
    ref = simulate(inputs[1])
    assert tl.step_time_s == ref.step_time_s and tl.spans == ref.spans


def test_the_cache_evicts_by_bytes(monkeypatch):
    inputs = _inputs()[:8]
    monkeypatch.setattr(compiled, "_MAX_LIVE", 0)
    for inp in inputs:
        pipeline_metrics(inp)
    assert len(compiled._cache) == len(inputs)  # small structures: all fit the default bound
    sizes = [c.nbytes for c in list(compiled._cache.values())[:-1]]
    assert all(s > 0 for s in sizes) and compiled.cache_bytes() == sum(sizes)
    compiled.clear_cache()
    limit = sum(sizes) // 2
    monkeypatch.setattr(compiled, "_MAX_BYTES", limit)
    for inp in inputs:
        pipeline_metrics(inp)
        assert compiled.cache_bytes() <= limit
    assert 1 < len(compiled._cache) < len(inputs)
    assert list(compiled._cache)[-1] == compiled.structure_key(inputs[-1])  # the newest always stays
    monkeypatch.setattr(compiled, "_MAX_BYTES", 0)
    pipeline_metrics(inputs[0])
    assert len(compiled._cache) == 1


def test_a_packed_copy_is_smaller_and_restores_every_dtype():
    inp = _inputs()[7]  # DualPipe with DP piece runs
    pipeline_metrics(inp)
    comp = compiled._cache[compiled.structure_key(inp)]
    live = comp.held()
    packed = compiled._pack(comp)
    assert packed.packed and packed.nbytes < live / 3
    assert comp.folded.a.dtype == np.int64 and not comp.packed  # the live structure is left as it is
    back = unpack(packed.folded)
    for name in ("a", "b", "slots", "starts", "pos", "folded", "kernel_run"):
        x, y = getattr(comp.folded, name), getattr(back, name)
        assert x.dtype == y.dtype and np.array_equal(x, y)


def test_packing_keeps_what_does_not_round_trip():
    whole = np.arange(-100, 100, dtype=float)
    frac = whole + 0.5
    neg0 = np.zeros(100)
    neg0[3] = -0.0
    big = np.arange(100, dtype=np.int64) << 40
    got = pack((whole, frac, neg0, big, list(range(100))))
    assert type(got[0]) is _Ints and got[0].small == np.int8
    assert got[1] is frac and got[2] is neg0 and got[3] is big
    back = unpack(got)
    assert back[0].dtype == whole.dtype and np.array_equal(back[0], whole)
    assert back[4] == list(range(100)) and type(back[4]) is list


def test_squeezed_copies_restore_exactly():
    """``squeeze``: 1-D integer arrays as compressed differences, others compressed as they are."""
    rng = np.random.default_rng(7)
    rising = np.cumsum(rng.integers(-3, 40, 5000)).astype(np.int64)   # a program's input indices
    wide = rng.integers(-(1 << 31), 1 << 31, 300).astype(np.int64)     # values fit int32, differences do not
    grid = rising[:4800].reshape(60, 80)                               # 2-D: compressed as it is, shape kept
    whole = np.arange(-100, 100, dtype=float)
    packed = pack((rising, wide, rising.tolist(), grid, whole))
    assert all(type(x) is _Ints and x.z is None for x in packed)
    got = squeeze(packed)
    assert got[0].delta and got[0].small == np.int8 and got[0].nbytes < rising.size  # under a byte per entry
    assert not got[1].delta and got[1].small == np.int32
    assert not got[3].delta and got[4].small == np.int8  # whole floats: int8 differences, restored as floats
    for back in (unpack(got), unpack(packed)):
        assert back[0].dtype == np.int64 and np.array_equal(back[0], rising)
        assert back[1].dtype == np.int64 and np.array_equal(back[1], wide)
        assert type(back[2]) is list and back[2] == rising.tolist()
        assert back[3].shape == grid.shape and back[3].dtype == np.int64 and np.array_equal(back[3], grid)
        assert back[4].dtype == whole.dtype and np.array_equal(back[4], whole)


def test_a_structure_used_again_keeps_its_packed_copy(monkeypatch):
    """A packed structure unpacked for use and giving way again, having built nothing new, goes
    back to the cache as the very copy it came from (no second compression); one that built
    something new since is packed afresh."""
    monkeypatch.setattr(compiled, "_MAX_LIVE", 0)
    inputs = _inputs()[:4]
    for inp in inputs:
        pipeline_metrics(inp)
    key = compiled.structure_key(inputs[0])
    first = compiled._cache[key]
    assert first.packed
    want = _numbers(pipeline_metrics(inputs[0]))
    live = compiled._cache[key]
    assert not live.packed and live.stored[0] is first
    pipeline_metrics(inputs[1])
    assert compiled._cache[key] is first
    assert _numbers(pipeline_metrics(inputs[0])) == want
    live = compiled._cache[key]
    live.periodic = {"built since": None}   # something new: the stored copy no longer holds it all
    pipeline_metrics(inputs[1])
    again = compiled._cache[key]
    assert again.packed and again is not first and again.periodic == {"built since": None}


def test_short_of_room_the_cache_squeezes_before_it_evicts(monkeypatch):
    monkeypatch.setattr(compiled, "_MAX_LIVE", 0)
    inputs = _inputs()
    want = [_fresh(inp) for inp in inputs]
    compiled.clear_cache()
    for inp in inputs:
        pipeline_metrics(inp)
    older = list(compiled._cache.values())[:-1]
    live = sum(c.nbytes for c in older if not c.packed)   # the newest one's partner stays live (periodic.py)
    packed = sum(c.nbytes for c in older if c.packed)
    squeezed = sum(compiled._squeeze(c).nbytes for c in older if c.packed)
    assert squeezed < packed * 0.8
    compiled.clear_cache()
    limit = live + (packed + squeezed) // 2   # room for every squeezed copy, not for every packed one
    monkeypatch.setattr(compiled, "_MAX_BYTES", limit)
    for _ in range(2):  # first use, then from packed and squeezed copies: the same numbers
        assert [_numbers(pipeline_metrics(inp)) for inp in inputs] == want
        assert compiled.cache_bytes() <= limit
    assert len(compiled._cache) == len(older) + 1 and any(c.squeezed for c in compiled._cache.values())
