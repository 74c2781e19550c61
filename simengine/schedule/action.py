"""The unit every schedule emits: one compute action of one micro-batch on one model chunk.

``kind`` is ``'F'`` (forward), ``'B'`` (backward; the whole backward when the schedule emits no
``'W'`` for that micro-batch-chunk, only the input gradient when it does) or ``'W'`` (weight
gradient, split off as in Qi et al. 2023, arXiv:2401.10241 §2). ``chunk`` is the model chunk
index on the rank (0..chunks-1), not the global stage.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence


class Action(NamedTuple):
    kind: str  # 'F' | 'B' | 'W'
    mb: int
    chunk: int


def F(mb: int, chunk: int = 0) -> Action:
    return Action("F", mb, chunk)


def B(mb: int, chunk: int = 0) -> Action:
    return Action("B", mb, chunk)


def W(mb: int, chunk: int = 0) -> Action:
    return Action("W", mb, chunk)


def count_max_inflight(order: Sequence[Action]) -> int:
    """Max micro-batch-chunks whose activations are held at once, read off one rank's order.

    A micro-batch-chunk is held from the start of its F until the end of its last backward
    action: its W when the order has one (W still needs the stored inputs, Qi et al. 2023 §2),
    else its B. Each F adds one before the count is read, so the F's own activation counts.
    """
    has_w = {(a.mb, a.chunk) for a in order if a.kind == "W"}
    held = peak = 0
    for a in order:
        if a.kind == "F":
            held += 1
            if held > peak:
                peak = held
        elif a.kind == "W" or (a.kind == "B" and (a.mb, a.chunk) not in has_w):
            held -= 1
    return peak
