"""Ranking: objectives, the Pareto front, and ties read off the uncertainty bands.

A tie: the ranked candidates whose band of the objective (``TIE_ON``: tokens/s for throughput)
overlaps the best candidate's band — the estimate
cannot tell them apart (``Report.uncertainty``, simengine/uncertainty.py), so the ranking reports a
set of equals rather than a winner.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ConfigError
from .types import Candidate

# objective → (sort key: smaller is better, what it means)
OBJECTIVES: dict[str, tuple[Callable[[Candidate], float], str]] = {
    "tokens_per_s": (lambda c: -c.tokens_per_s, "highest throughput"),
    "mfu": (lambda c: -c.mfu, "highest model FLOPs utilisation"),
    "cost_per_million_tokens": (lambda c: c.cost_per_million_tokens_usd, "cheapest per million tokens"),
    # time to train a token budget = budget / tokens_per_s; cost = budget · cost per token
    "time_to_train": (lambda c: -c.tokens_per_s, "shortest time to train the token budget"),
    "cost_to_train": (lambda c: c.cost_per_million_tokens_usd, "cheapest to train the token budget"),
    "memory_headroom": (lambda c: -c.headroom_gib, "most memory headroom (no more recompute than fitting needs)"),
}


# objective → the band its ties are read on (``_band``), in words: the Search page's tie column and
# banner name it (a memory-headroom tie read as a tokens/s tie beside the tokens/s band columns)
TIE_ON: dict[str, str] = {
    "tokens_per_s": "tokens/s", "mfu": "MFU", "time_to_train": "tokens/s",
    "cost_per_million_tokens": "cost per token", "cost_to_train": "cost per token",
    "memory_headroom": "free memory",
}


TIE_MARK = "(tie)"     # after a rank whose band reaches #1's: a word, where "1=8 GPUs …" read as "1 = 8 GPUs"
WHAT_IF_MARK = "*"     # after a rank priced as a what-if (its stack does not ship its schedule)


def rank_label(i: int, tied: bool, what_if: bool = False) -> str:
    """Row ``i`` (0-based) of a ranking as a table prints it: "3", "3 (tie)" (a tie with #1:
    ``ties``), "3*" (a what-if), "3* (tie)". The one owner of these marks."""
    return f"{i + 1}{WHAT_IF_MARK if what_if else ''}{' ' + TIE_MARK if tied else ''}"


def check_objective(name: str) -> str:
    if not isinstance(name, str) or name not in OBJECTIVES:   # a list is unhashable: a message, not a TypeError
        raise ConfigError([("objective", f"unknown objective {str(name)[:60]!r} (one of {', '.join(OBJECTIVES)})")])
    return name


def check_top(top: int | None) -> int | None:
    """None (every fitting candidate) or a positive count."""
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 1):
        raise ConfigError([("top", f"top={top!r} must be a positive integer")])
    return top


def rank(cands: list[Candidate], objective: str) -> list[Candidate]:
    """Sorted best first; equal scores go to the higher throughput (with the headroom objective
    the flag variants of a layout have the same memory: the slower ones are dominated), then keep
    enumeration order (deterministic across executors)."""
    key = OBJECTIVES[check_objective(objective)][0]
    return sorted(cands, key=lambda c: (key(c), -c.tokens_per_s, c.order))


def _band(c: Candidate, objective: str) -> tuple[float, float]:
    if objective in ("memory_headroom",):
        lo, hi = c.band.get("peak_memory_gib", (c.peak_memory_gib, c.peak_memory_gib))
        # headroom moves opposite to the peak
        return c.headroom_gib - (hi - c.peak_memory_gib), c.headroom_gib + (c.peak_memory_gib - lo)
    lo, hi = c.band.get("tokens_per_s", (c.tokens_per_s, c.tokens_per_s))
    if objective == "mfu":
        return c.band.get("mfu", (c.mfu, c.mfu))
    if objective in ("cost_per_million_tokens", "cost_to_train"):
        # cost per token scales with 1/throughput: its band is the throughput band inverted
        return -c.cost_per_million_tokens_usd * c.tokens_per_s / max(lo, 1e-30), -c.cost_per_million_tokens_usd * c.tokens_per_s / max(hi, 1e-30)
    return lo, hi


def ties(ranked: list[Candidate], objective: str) -> list[int]:
    """Indices of the ranked candidates (best included) whose band overlaps the best one's band
    (bands oriented so that higher is better), every one of them."""
    if not ranked:
        return []
    lo0, _ = _band(ranked[0], objective)
    out = []
    for i, c in enumerate(ranked):
        _, hi = _band(c, objective)
        if hi >= lo0:
            out.append(i)
    return out


def pareto(cands: list[Candidate], by_gpus: bool = False) -> list[Candidate]:
    """The candidates none of ``cands`` dominates: higher tokens/s, lower cost per million tokens
    (or fewer GPUs), more memory headroom. Sorted by tokens/s, best first. The search passes its
    timed candidates: a layout that recomputes more than it needs to fit is never timed (its
    recompute is dominated on time), so a front with more headroom at a little less throughput
    can lie outside it (README, "over the timed candidates")."""
    def vec(c: Candidate) -> tuple[float, float, float]:
        return (-c.tokens_per_s, float(c.gpus) if by_gpus else c.cost_per_million_tokens_usd, -c.headroom_gib)

    pts = sorted(cands, key=lambda c: (vec(c), c.order))
    front: list[Candidate] = []
    for c in pts:  # sorted lexicographically: a dominator always comes first
        v = vec(c)
        if not any(all(a <= b for a, b in zip(vec(f), v)) for f in front):
            front.append(c)
    return front
