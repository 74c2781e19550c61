"""The cyclic garbage collector off around the engine's allocation bursts.

Building the task graph and the spans allocates ~10⁵ small tuples; each allocation burst
triggers generation-0/1/2 collections that scan everything alive (measured: ~40 % of a cold
pp=16, vpp=4, m=128 simulation). Nothing built here forms reference cycles, so reference
counting frees it all.

A strategy search is one long burst over a heap that keeps growing (its groups, memos of
priced blocks, bounds and compiled structures: ~1.3 GB on deepseek-v3 / 16,384 GPUs). With
CPython's default thresholds (700, 10, 10) it triggers a full collection each time the
long-lived heap has grown by a quarter (``gcmodule.c``: ``long_lived_pending >
long_lived_total / 4``), each a scan of every object alive. With the young threshold raised to
20,000 (the previous setting here) DeepSeek-V3's search still spent 7.3 s of 50 s in 588
collections (5 full ones: 4.3 s) that found nothing: ``gc.collect()`` right after the search
frees 0 objects on the 8b, 70b, 405b and V3 spaces. So a search runs with the collector off
(``paused_gc``); whatever cycle it left would be collected at the next collection after it.

Leaving the pause would then cost a scan of everything the burst left alive: the collector
counts allocations, not collections, so the first allocation after ``gc.enable()`` collects the
youngest generation, which holds every object made during the pause (measured: 1.5 s at the end
of DeepSeek-V3's 38 s search, a ~1.3 GB heap, finding nothing). So before the collector is turned
back on, those objects move to the oldest generation unscanned (``gc.freeze()`` then
``gc.unfreeze()``: CPython's ``gc_freeze_impl`` splices every generation into the permanent one
and zeroes the young count, ``gc_unfreeze_impl`` splices it back as the oldest). They stay
collectable: a cycle among them goes at the next full collection, as a cycle that survived two
young collections would. Only a burst (``PROMOTE_OVER`` young objects) is moved: after a short
pause the young collection is cheap and keeps its usual timing.

One owner of the collector's state: nested and concurrent users share one pause, and the
collector is restored (on if it was on when the first entered) when the last one leaves, so a
short pause in one thread never turns it back on under another thread's search.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
PROMOTE_OVER = 100_000  # young objects at the end of a pause above which they move up unscanned (~10 ms of scan)
_state: list = [0, False]     # [users inside, whether the collector was on when the first entered]


@contextmanager
def paused_gc():
    """No automatic collection while inside (nested and concurrent users share it)."""
    with _lock:
        if _state[0] == 0:
            _state[1] = gc.isenabled()
            gc.disable()
        _state[0] += 1
    try:
        yield
    finally:
        with _lock:
            _state[0] -= 1
            if _state[0] == 0 and _state[1]:
                if gc.get_count()[0] > PROMOTE_OVER:
                    gc.freeze()     # the burst's survivors to the oldest generation, unscanned (above)
                    gc.unfreeze()
                gc.enable()
