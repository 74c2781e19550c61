"""Executors: run batches of groups in-process, in a local process pool, or on a Ray cluster.

Each executor maps a batch function (``screen_batch`` or ``time_batch``) over batches and returns the outcomes *in batch order*, so
the merged result is identical whichever executor ran it. Batches and outcomes are plain picklable
data (dataclasses of dicts and numbers). Ray is an optional extra (``pip install .[ray]``).
"""

from __future__ import annotations

import os

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from ..errors import ConfigError
from ..sim.nogc import paused_gc
from .space import SearchSpace
from .types import Flowed, GroupScreen, Refined, Timed

Batch = list[tuple]                                      # screen: (gpus, layout, mbs, order); time: (gpus, strategy, order)
Progress = Callable[[int, int], Any]                     # (items done, items total) → truthy = cancel


def screen_batch(space: SearchSpace, batch: Batch) -> list[GroupScreen]:
    """Phase 1 over groups (gpus, layout, micro-batch size, order)."""
    from .prune import screen_group

    with paused_gc():
        return [screen_group(space, g, lay, mbs, order) for g, lay, mbs, order in batch]


def bound_batch(space: SearchSpace, batch: Batch) -> list[tuple]:
    """Phase 0 over groups: (lower bound, rejection or None) of each (``prune.work_floor``)."""
    from .prune import work_floor

    with paused_gc():
        return [work_floor(space, g, lay, mbs, order) for g, lay, mbs, order in batch]


def work_batch(space: SearchSpace, batch: Batch) -> list:
    """One branch-and-bound round: ("bound", group) items get their pipeline bound, ("refine",
    group) items the recompute their memory needs, ("zero", (group, limit)) items that with the
    ZeRO-2/3 collectives, ("screen", group) items expand (("lazy", group): into ``options.Option``s
    left for the frontier, each expanded by an ("expand", (group, option)) item), ("flow",
    (candidate, bound, Flow)) items their data-flow bound, ("time", candidate) items time."""
    with paused_gc():
        return [r for kind, item in batch for r in _work_item(space, kind, item)]


def _work_item(space: SearchSpace, kind: str, item) -> list:
    """``work_batch`` on one item: its outcomes (one, or a screen's / timing's)."""
    from .flow import flow_bound
    from .prune import bound_group
    from .refine import refine_group, refine_memory

    if kind == "flow":
        cand, lb, fl = item
        return [Flowed(cand, max(lb, flow_bound(*fl)))]
    if kind == "zero":
        grp, limit = item
        g, lay, mbs, order = grp
        return [Refined(grp, *refine_group(space, g, lay, mbs, order, limit=limit), "screen")]
    if kind == "refine":
        lb, rej, exact = refine_memory(space, *item)
        return [Refined(item, lb, rej, "screen" if exact else "zero")]
    if kind == "bound":
        return [Refined(item, *bound_group(space, *item), "refine")]
    if kind == "headroom":   # the headroom objective's key: −(most headroom the group may have)
        from .headroom import headroom_bound

        most, rej = headroom_bound(space, *item)
        return [Refined(item, -most, rej, "screen")]
    if kind == "lazy":
        from .prune import screen_group
        g, lay, mbs, order = item
        return [screen_group(space, g, lay, mbs, order, lazy=True)]
    if kind == "expand":
        from .options import expand
        (g, lay, mbs, order), opt = item
        return [expand(space, g, lay, mbs, order, opt)]
    return screen_batch(space, [item]) if kind == "screen" else time_batch(space, [item])


def time_batch(space: SearchSpace, batch: Batch) -> list[Timed]:
    """Phase 3 over candidates (gpus, strategy, order)."""
    from .prune import time_candidate

    out = []
    with paused_gc():
        for g, strat, order in batch:
            t = Timed([], [])
            c = time_candidate(space, g, strat, order, t)
            if c is not None:
                t.candidates.append(c)
            out.append(t)
    return out


class Cancelled(Exception):
    """The progress callback asked to stop."""


def _tick(progress: Progress | None, done: int, total: int) -> None:
    if progress is not None and progress(done, total):
        raise Cancelled()


class InProcess:
    name = "inprocess"

    def map(self, fn: Callable, space: SearchSpace, batches: Sequence[Batch], progress: Progress | None = None) -> list[list]:
        out, done, total = [], 0, sum(len(b) for b in batches)
        for b in batches:
            out.append(fn(space, b))
            done += len(b)
            _tick(progress, done, total)
        return out


class ProcessPool:
    name = "process"

    def __init__(self, workers: int = 2):
        check_workers(workers)
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable, space: SearchSpace, batches: Sequence[Batch], progress: Progress | None = None) -> list[list]:
        total = sum(len(b) for b in batches)
        if self._pool is None:  # kept open across the rounds of one search; close() ends it
            self._pool = ProcessPoolExecutor(max_workers=self.workers)
        futs = [self._pool.submit(fn, space, b) for b in batches]
        out, done = [], 0
        try:
            for f, b in zip(futs, batches):  # in submission order: deterministic merge
                out.append(f.result())
                done += len(b)
                _tick(progress, done, total)
        except Cancelled:
            for f in futs:
                f.cancel()
            raise
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class RayExecutor:
    """Ray tasks, one per batch. ``address`` joins a running cluster; None starts a local one
    (``num_cpus`` workers) when Ray is not yet initialised."""

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None):
        if num_cpus is not None:
            check_workers(num_cpus)
        self.address, self.num_cpus = address, num_cpus
        self._remote: dict[Callable, Any] = {}   # one remote function per batch function, registered once
        self._space: tuple[Any, Any] = (None, None)   # (space, its object ref): put once per search

    def map(self, fn: Callable, space: SearchSpace, batches: Sequence[Batch], progress: Progress | None = None) -> list[list]:
        try:
            import ray
        except ImportError:
            raise ConfigError([("executor", "the Ray executor needs ray: pip install .[ray]")]) from None
        if not ray.is_initialized():
            self._init(ray)
        remote = self._remote.get(fn)
        if remote is None:  # a branch-and-bound search maps many rounds: export the function once
            remote = self._remote[fn] = ray.remote(fn)
        if self._space[0] is not space:
            self._space = (space, ray.put(space))
        ref_space = self._space[1]
        refs = [remote.remote(ref_space, b) for b in batches]
        out, done, total = [], 0, sum(len(b) for b in batches)
        try:
            for r, b in zip(refs, batches):
                out.append(ray.get(r))
                done += len(b)
                _tick(progress, done, total)
        except Cancelled:
            for r in refs:
                ray.cancel(r)
            raise
        return out

    def _init(self, ray: Any) -> None:
        """Start a local Ray instance or join ``address``; an address Ray cannot use ("nonsense://",
        "auto" with no cluster running, "ray://…" without ray[client]) is a ConfigError naming it."""
        kw: dict[str, Any] = {"address": self.address} if self.address else {"num_cpus": self.num_cpus}
        try:
            ray.init(ignore_reinit_error=True, include_dashboard=False, log_to_driver=False, **kw)
        except (ConnectionError, RuntimeError, ValueError) as e:
            where = f"the Ray cluster at {self.address[:100]!r}" if self.address else "a local Ray instance"
            raise ConfigError([("address", f"cannot start or join {where}: {str(e)[:200]}")]) from None

    def close(self) -> None:
        """End of a search: drop the space's object ref (the remote functions stay registered)."""
        self._space = (None, None)


def check_workers(workers: int) -> int:
    """A worker count between 1 and twice this machine's cores: more processes than that only
    compete for the cores (and each holds its own copy of the engine)."""
    most = 2 * (os.cpu_count() or 1)
    if not 1 <= workers <= most:
        raise ConfigError([("workers", f"workers={workers} must be 1 to {most} (twice this machine's cores)")])
    return workers


def make_executor(name: str | None = None, workers: int | None = None, address: str | None = None):
    """``inprocess`` (default), ``process`` (``workers`` processes) or ``ray``."""
    if workers is not None:
        check_workers(workers)
    name = name or ("process" if workers and workers > 1 else "inprocess")
    if address is not None and name != "ray":   # never silently run elsewhere than the user asked
        raise ConfigError([("address", f"a cluster address needs the ray executor (--executor ray), not '{name}'")])
    if name == "inprocess" and workers is not None and workers > 1:   # nor on fewer workers than asked
        raise ConfigError([("workers", f"{workers} workers need a pool (--executor process or ray); the in-process "
                                       "executor runs one")])
    if name == "inprocess":
        return InProcess()
    if name == "process":
        return ProcessPool(workers or 2)
    if name == "ray":
        return RayExecutor(address, workers)
    raise ConfigError([("executor", f"unknown executor '{name}' (inprocess, process or ray)")])
