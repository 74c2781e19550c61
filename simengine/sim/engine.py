"""The list scheduler: start = max(stream free, dependencies done), end = start + duration.

``simulate`` returns the full Timeline; ``pipeline_step_time`` is the estimate path. Both run
the same compiled program (``compiled.py``) over the same duration table (``values.py``), so
their step times are equal bit for bit; the fast path only skips recording and reuses the
cached structure.
"""

from __future__ import annotations

from typing import Sequence

from ..schedule import Action
from .compiled import compiled_for
from .inputs import PipelineInput
from .metrics import build_timeline
from .nogc import paused_gc
from .timeline import Timeline
from .values import build_values


def _times(A: list[int], B: list[int], D) -> tuple[list[float], list[float]]:
    start = [0.0]
    end = [0.0]
    sa, ea = start.append, end.append
    for a, b, d in zip(A, B, D):
        x = end[a]
        y = end[b]
        if y > x:
            x = y
        sa(x)
        ea(x + d)
    return start, end


def simulate(inp: PipelineInput, orders: Sequence[Sequence[Action]] | None = None) -> Timeline:
    """Simulate one training step. ``orders`` replaces the schedule's per-rank orders (tests,
    hand-made schedules); an order that cannot finish raises DeadlockError."""
    comp = compiled_for(inp, orders)
    start, end = _times(comp.A, comp.B, comp.getter(build_values(inp, comp)))
    with paused_gc():
        return build_timeline(inp, comp, start, end)


def pipeline_step_time(inp: PipelineInput, orders: Sequence[Sequence[Action]] | None = None) -> float:
    """Step time of ``simulate(inp).step_time_s``, without building the timeline."""
    comp = compiled_for(inp, orders)
    end = [0.0]
    ea = end.append
    for a, b, d in zip(comp.A, comp.B, comp.getter(build_values(inp, comp))):
        x = end[a]
        y = end[b]
        ea((x if x >= y else y) + d)
    return max(end)
