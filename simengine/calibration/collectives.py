"""Collective kinds, their nccl-tests names and bus-bandwidth factors.

Bus bandwidth (nccl-tests ``doc/PERFORMANCE.md``, "busbw"): the bytes each rank moves over its
busiest link for a ring implementation, divided by time, so that it is comparable to link speed.
For n ranks and a message of S bytes (S = the full buffer, as nccl-tests' ``size`` column):

  all_reduce            2(n−1)/n · S   (reduce-scatter + all-gather; Thakur et al. 2005, §4.5;
                                        Patarasuk & Yuan 2009, bandwidth-optimal ring)
  all_gather            (n−1)/n · S
  reduce_scatter        (n−1)/n · S
  all_to_all            (n−1)/n · S    (each rank sends S/n to each of n−1 peers)
  p2p (sendrecv)        1 · S
  broadcast / reduce    1 · S          (pipelined chain; parsed, not fitted: no simengine kind)
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]
KINDS: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")

# nccl-tests binary stem → collective name used in this package.
_NCCL_TEST_NAMES = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "sendrecv": "p2p",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "hypercube": "hypercube",
}
UNSUPPORTED = ("broadcast", "reduce", "gather", "scatter", "hypercube")

# Patterns for free text (file names, command lines, "Collective test starting: X"); order
# matters: longer names first so "reduce_scatter" is not read as "reduce".
_NAME_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p), kind)
    for p, kind in (
        (r"reduce_?scatter", "reduce_scatter"),
        (r"all_?reduce", "all_reduce"),
        (r"all_?gather", "all_gather"),
        (r"all_?to_?all|a2a", "all_to_all"),
        (r"send_?recv|p2p", "p2p"),
        (r"broadcast|bcast", "broadcast"),
        (r"hypercube", "hypercube"),
        (r"(?<![a-z])reduce(?![a-z])", "reduce"),
        (r"(?<![a-z])gather(?![a-z])", "gather"),
        (r"(?<![a-z])scatter(?![a-z])", "scatter"),
    )
)


def kind_from_test_name(stem: str) -> str | None:
    """``all_reduce`` / ``alltoall`` / ``sendrecv`` … (an nccl-tests binary stem) → collective."""
    return _NCCL_TEST_NAMES.get(stem.lower())


def kind_from_text(text: str) -> str | None:
    """Find a collective name in free text such as a file name; ``None`` when there is none."""
    t = re.sub(r"[\s\-.]+", "_", text.lower())
    for pat, kind in _NAME_PATTERNS:
        if pat.search(t):
            return kind
    return None


def normalize_kind(name: str) -> str:
    """Accept simengine or nccl-tests spellings (``alltoall``, ``sendrecv``, ``allreduce``)."""
    kind = kind_from_text(name)
    if kind is None:
        raise ValueError(f"unknown collective {name!r}; expected one of {', '.join(KINDS)}")
    return kind


def bus_factor(kind: str, n_ranks: int) -> float:
    """busbw / algbw for ``kind`` on ``n_ranks`` ranks (see module docstring for the sources)."""
    n = max(int(n_ranks), 1)
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0  # p2p, broadcast, reduce


def ranks_from_factor(kind: str, ratio: float) -> float | None:
    """Invert :func:`bus_factor`: the (real-valued) rank count a busbw/algbw ratio implies."""
    if kind == "all_reduce" and 0.0 < ratio < 2.0:
        return 2.0 / (2.0 - ratio)
    if kind in ("all_gather", "reduce_scatter", "all_to_all") and 0.0 < ratio < 1.0:
        return 1.0 / (1.0 - ratio)
    return None
