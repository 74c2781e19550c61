"""nccl-tests names of the collectives, and finding a collective's name in free text.

The kinds, their bus-bandwidth factors and algorithms live in one table shared with the cost
model: :mod:`simengine.collectives` (re-exported here for the readers).
"""

from __future__ import annotations

import re

from ..collectives import KINDS, bus_factor, ranks_from_factor

__all__ = ["KINDS", "UNSUPPORTED", "bus_factor", "kind_from_test_name", "kind_from_text", "normalize_kind",
           "ranks_from_factor"]

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
