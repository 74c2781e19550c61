"""The cyclic garbage collector around the engine's allocation bursts.

Building the task graph and the spans allocates ~10⁵ small tuples; each allocation burst
triggers generation-0/1/2 collections that scan everything alive (measured: ~40 % of a cold
pp=16, vpp=4, m=128 simulation). Nothing built here forms reference cycles, so reference
counting frees it all; ``paused_gc`` restores the collector's previous state on exit.

A strategy search is one long burst over a heap that keeps growing (its memos of priced blocks,
bounds and compiled structures: ~470 MB on llama3-405b / 16,384 GPUs). With CPython's default
thresholds (700, 10, 10) it triggers a full collection each time the long-lived heap has grown
by a quarter (``gcmodule.c``: ``long_lived_pending > long_lived_total / 4``), each one a scan of
every object alive: 17 of them, which found nothing to free, took ~30 % of that search's CPU
time (55 s → 39 s measured back to back, same result). ``fewer_collections`` raises the
generation-0 threshold for the duration (young cycles — a few hundred per search, measured —
are still collected, ~30× less often) and restores it when the outermost user leaves.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

SEARCH_THRESHOLD0 = 20_000   # allocations between young collections during a search (CPython's default: 700)

_lock = threading.Lock()
_state: list = [0, None]     # [nesting depth, thresholds to restore]


@contextmanager
def paused_gc():
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@contextmanager
def fewer_collections(threshold0: int = SEARCH_THRESHOLD0):
    """Young collections at most every ``threshold0`` allocations while inside (nested and
    concurrent users share one setting; the outermost restores the previous thresholds)."""
    with _lock:
        if _state[0] == 0:
            old = gc.get_threshold()
            _state[1] = old
            gc.set_threshold(max(threshold0, old[0]), *old[1:])
        _state[0] += 1
    try:
        yield
    finally:
        with _lock:
            _state[0] -= 1
            if _state[0] == 0:
                gc.set_threshold(*_state[1])
