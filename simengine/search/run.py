"""``search(space, …)``: plan the groups, evaluate them on an executor, merge, rank.

Pure and deterministic: groups are listed in a fixed order, batched in that order, merged in
that order, and ranked with the enumeration index as the final tie-break.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..errors import ConfigError
from .executors import Batch, InProcess, Progress, _tick, screen_batch, time_batch
from .rank import check_objective, pareto, rank, ties
from .space import SearchSpace, check_choices, group_size, layouts, micro_batches
from .types import GroupScreen, Rejection, SearchResult, Timed

BATCH_GROUPS = 16   # groups (or candidates) per executor task: enough work to amortise the transfer
ROUND = 64          # candidates timed between two updates of the branch-and-bound threshold


def make_space(model: dict[str, Any], system: dict[str, Any], *, global_batch: int | None = None,
               global_batch_tokens: int | None = None, seq_len: int, gpus: list[int] | tuple[int, ...] | None = None,
               token_budget: float | None = None, choices: dict[str, Any] | None = None,
               base: dict[str, Any] | None = None) -> SearchSpace:
    """A search space from plain dicts. Batch in sequences (``global_batch``) or tokens
    (``global_batch_tokens``, a multiple of ``seq_len``). ``gpus`` defaults to the system's count."""
    if not isinstance(seq_len, int) or seq_len < 1:
        raise ConfigError([("seq_len", f"seq_len={seq_len!r} must be a positive integer")])
    if (global_batch is None) == (global_batch_tokens is None):
        raise ConfigError([("global_batch", "give the global batch in sequences or in tokens (one of them)")])
    if global_batch_tokens is not None:
        if global_batch_tokens % seq_len:
            raise ConfigError([("global_batch_tokens", f"{global_batch_tokens} tokens is not a multiple of seq_len={seq_len}")])
        global_batch = global_batch_tokens // seq_len
    if not isinstance(global_batch, int) or global_batch < 1:
        raise ConfigError([("global_batch", f"global_batch={global_batch!r} must be a positive integer")])
    counts = tuple(gpus) if gpus else (int(system.get("num_gpus", 1)),)
    if not counts or any(not isinstance(g, int) or g < 1 for g in counts) or len(counts) > 64:
        raise ConfigError([("system.num_gpus", "GPU counts must be 1 to 64 positive integers")])
    model, system = _validated(model, system)
    b = dict(base or {})
    for k in ("name", "dp"):
        b.pop(k, None)
    b.update(global_batch_size=global_batch, seq_len=seq_len)
    if token_budget is not None and not (isinstance(token_budget, (int, float)) and token_budget > 0):
        raise ConfigError([("token_budget", f"token_budget={token_budget!r} must be a positive number")])
    return SearchSpace(model=dict(model), system=dict(system), base=b, gpus=tuple(sorted(set(counts))),
                       choices=check_choices(choices or {}), token_budget=token_budget)


def _validated(model: dict[str, Any], system: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Model and system dicts validated (ConfigError naming the field) and normalised."""
    from pydantic import ValidationError

    from ..config import ModelSpec, SystemSpec
    from ..errors import from_pydantic

    out = []
    for key, cls, raw in (("model", ModelSpec, model), ("system", SystemSpec, system)):
        if isinstance(raw, cls):
            raw = raw.model_dump(mode="json")
        if not isinstance(raw, dict):
            raise ConfigError([(key, f"{key} must be a JSON object")])
        try:
            out.append(cls.model_validate(raw).model_dump(mode="json"))
        except ValidationError as e:
            raise from_pydantic(e, key, cls.model_fields) from None
    return out[0], out[1]


def plan_groups(space: SearchSpace) -> tuple[list[tuple[int, dict[str, Any], int, int]], int]:
    """Every (gpus, layout, micro-batch size) group in enumeration order, and the space size."""
    groups, size = [], 0
    for g in space.gpus:
        for lay in layouts(space, g):
            per = group_size(space, g, lay)
            for mbs in micro_batches(space, g, lay):
                groups.append((g, lay, int(mbs), len(groups)))
                size += per
    return groups, size


def _scaled(progress: Progress | None, offset: int, width: int, total: int) -> Progress | None:
    """Phase progress (done, n) mapped onto [offset, offset + width] of ``total``."""
    if progress is None:
        return None
    return lambda done, n: progress(offset + (done * width) // max(n, 1), total)


def _bound_weight(objective: str) -> bool:
    """True when the objective scales with step time × GPUs (MFU, cost), False for step time
    alone (tokens/s and time to train: every candidate has the same tokens per step)."""
    return objective in ("mfu", "cost_per_million_tokens", "cost_to_train")


def _kth(cands: list, objective: str, top: int | None) -> float:
    """The top-th best score among timed candidates: a candidate whose lower bound is above it
    cannot enter the top. inf when no bound applies (no top, headroom objective, too few yet)."""
    if top is None or top < 1 or objective == "memory_headroom" or len(cands) < top:
        return math.inf
    w = _bound_weight(objective)
    return sorted(c.step_time_s * (c.gpus if w else 1) for c in cands)[top - 1]


def _best_first(ex, space: SearchSpace, entries: list, objective: str, top: int | None,
                progress: Progress | None) -> tuple[list[Timed], list]:
    """Time the entries in ascending order of their bound, ROUND entries at a time, until the
    next bound exceeds the top-th best time found (branch and bound). Round boundaries are fixed,
    so every executor times exactly the same entries. Returns (outcomes, entries never timed)."""
    w = _bound_weight(objective)
    order = sorted(entries, key=lambda e: (e[2] * (e[0] if w else 1), e[3]))
    timed: list[Timed] = []
    cands: list = []
    skipped: list = []
    i = 0
    while i < len(order):
        bound = _kth(cands, objective, top)
        if order[i][2] * (order[i][0] if w else 1) > bound:
            break
        chunk = []
        for e in order[i:i + ROUND]:
            (chunk if e[2] * (e[0] if w else 1) <= bound else skipped).append(e)
        for part in ex.map(time_batch, space, _batches([(g, strat, o) for g, strat, _, o in chunk]), None):
            for t in part:
                timed.append(t)
                cands.extend(t.candidates)
        i += ROUND
        _tick(progress, min(i, len(order)), len(order))
    _tick(progress, len(order), len(order))
    return timed, skipped + order[i:]


def search(space: SearchSpace, objective: str = "tokens_per_s", top: int | None = None,
           progress: Progress | None = None, executor=None) -> SearchResult:
    """Every fitting candidate of ``space`` ranked by ``objective`` (only the best ``top`` when
    given: candidates whose step-time lower bound proves them outside the top are not timed);
    the Pareto front of throughput vs cost vs memory headroom over the timed candidates; every
    rejection with its reason."""
    check_objective(objective)
    t0 = time.perf_counter()
    ex = executor or InProcess()
    groups, size = plan_groups(space)
    n1 = len(groups)
    try:
        screens: list[GroupScreen] = [o for part in ex.map(screen_batch, space, _batches(groups), _scaled(progress, 0, n1, 2 * n1))
                                      for o in part]
        entries = [e for s in screens for e in s.entries]
        timed, pruned = _best_first(ex, space, entries, objective, top, _scaled(progress, n1, n1, 2 * n1))
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()
    cands = [c for t in timed for c in t.candidates]
    rejections = [r for s in screens for r in s.rejections] + [r for t in timed for r in t.rejections]
    rejections += _bound_rejections(pruned, top)
    ranked = rank(cands, objective)
    res = SearchResult(
        candidates=ranked if top is None else ranked[:max(top, 0)], pareto=pareto(cands),
        rejections=rejections, space_size=size,
        evaluated=sum(t.timed for t in timed),
        memory_checked=sum(s.memory_checked for s in screens),
        seconds=0.0, objective=objective, ties=ties(ranked, objective))
    res.seconds = time.perf_counter() - t0
    return res


def _batches(items: list) -> list[Batch]:
    return [items[i:i + BATCH_GROUPS] for i in range(0, len(items), BATCH_GROUPS)]


def _bound_rejections(pruned: list, top: int | None) -> list[Rejection]:
    from .types import SEARCHED

    out = []
    for gpus, strat, lb, _ in pruned:
        ex = {"num_gpus": gpus, **{k: strat.get(k) for k in SEARCHED}}
        out.append(Rejection("bound", f"outside the top {top}: its compute alone takes {lb:.3f} s per step, "
                                      f"a worse score than {top} timed candidates already reach", 1, ex))
    return out
