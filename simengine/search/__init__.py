"""Strategy search: every valid layout of a model on a system, pruned by memory and dominance,
timed with the same estimate as everywhere else, ranked, with its Pareto front (see run.py)."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .executors import InProcess, ProcessPool, RayExecutor, make_executor
from .fit import fit_changes
from .make import make_space
from .run import search
from .space import DIMS, SearchSpace
from .types import Candidate, Rejection, SearchResult

_SPACE_KEYS = ("model", "system", "seq_len", "global_batch", "global_batch_tokens", "gpus", "choices", "token_budget", "base")


def run_search(space: SearchSpace | dict[str, Any], objective: str = "tokens_per_s", top: int | None = None,
               progress=None, executor=None, best_so_far=None) -> SearchResult:
    """``api.search``: accept a SearchSpace or make_space's keyword dict, an executor or its name."""
    if isinstance(space, dict):
        bad = sorted(set(space) - set(_SPACE_KEYS))
        if bad:
            raise ConfigError([(bad[0], f"unknown search-space key (one of {', '.join(_SPACE_KEYS)})")])
        missing = [k for k in ("model", "system", "seq_len") if k not in space]
        if missing:
            raise ConfigError([(missing[0], "required")])
        space = make_space(**space)
    if not isinstance(space, SearchSpace):
        raise ConfigError([("space", "expected a SearchSpace or a dict")])
    if executor is None or isinstance(executor, str):
        executor = make_executor(executor)
    elif not callable(getattr(executor, "map", None)):
        raise ConfigError([("executor", "expected an executor (InProcess, ProcessPool, RayExecutor) or its name")])
    for name, fn in (("progress", progress), ("best_so_far", best_so_far)):
        if fn is not None and not callable(fn):
            raise ConfigError([(name, f"{name} must be a function or None")])
    return search(space, objective=objective, top=top, progress=progress, executor=executor, best_so_far=best_so_far)


__all__ = ["DIMS", "Candidate", "InProcess", "ProcessPool", "RayExecutor", "Rejection", "SearchResult", "SearchSpace",
           "fit_changes", "make_executor", "make_space", "run_search", "search"]
