"""Memoisation of pure functions of the frozen configuration objects (``config/``).

A search or a page rerun estimates many scenarios that share a model and a strategy; what
depends on those alone (the layer placement, the model-FLOPs count, the scenario notes) is
computed once. Frozen pydantic models hash by value; one holding a list (e.g.
``StrategySpec.pipeline_layers``) cannot be hashed, and then the function simply runs.
"""

from __future__ import annotations

import threading
from functools import lru_cache, wraps
from typing import Callable, TypeVar

T = TypeVar("T")


def config_cache(fn: Callable[..., T], maxsize: int = 256) -> Callable[..., T]:
    """``lru_cache(fn)`` for positional, hashable arguments; unhashable ones bypass the cache.
    The result is shared between callers: memoise only functions returning immutable values."""
    cached = lru_cache(maxsize=maxsize)(fn)

    @wraps(fn)
    def call(*args):
        # the cache hashes the arguments once (a frozen pydantic model hashes every field, so
        # hashing them first to test them would double the cost of every hit); a TypeError with
        # hashable arguments came from ``fn`` itself and propagates
        try:
            return cached(*args)
        except TypeError:
            if _hashable(args):
                raise
        return fn(*args)

    call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
    return call


def _hashable(args: tuple) -> bool:
    try:
        hash(args)
    except TypeError:
        return False
    return True


_LOCK = threading.Lock()


def remember(memo: dict, key, value, cap: int) -> None:
    """``memo[key] = value`` for a module-level memo shared by threads, emptied first when it holds
    ``cap`` entries (a cache: refilled on demand)."""
    with _LOCK:
        if len(memo) >= cap:
            memo.clear()
        memo[key] = value
