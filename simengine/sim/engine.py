"""The list scheduler: start = max(stream free, dependencies done), end = start + duration.

Every path runs the folded program (``chains.py``: compute-stream communication folded into the
task before it, the same times up to the rounding of a sum) and takes its numbers from
``metrics.py``: ``pipeline_metrics`` is the estimate path, ``pipeline_step_time`` only the step
time, and ``simulate`` also times every task on its own for the Timeline's spans and memory
curves (tests/test_fast_path.py: the folded metrics equal a per-task reference to 1e-9).
The estimate paths take a long 1F1B or interleaved pipeline from two short runs of it where its
steady state is certified periodic (``periodic.py``; tests/test_periodic.py: equal to the whole
program to 1e-9); ``simulate`` always runs the whole program (the Timeline needs every span).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..schedule import Action
from .chains import folded_for
from .closed import reduced_for
from .compiled import compiled_for
from .inputs import PipelineInput
from .metrics import StepMetrics, step_metrics
from .nogc import paused_gc
from .periodic import periodic_metrics
from .spans import build_timeline
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


def _prepare(inp: PipelineInput, orders=None):
    """The folded program (chains.py) over this input and its entry durations."""
    comp = compiled_for(inp, orders)
    vals = build_values(inp, comp)
    prog = folded_for(comp)
    return comp, prog, vals, prog.durations(vals)


def _ends(comp, prog, dur):
    """The folded program's end times (its DP piece runs in closed form, closed.py)."""
    red = reduced_for(comp, prog)
    if red is None:
        return _loop(prog.A, prog.B, dur.tolist())
    d, state = red.durations(dur)
    return red.expand(_loop(red.A, red.B, d.tolist()), state)


def _run(inp: PipelineInput, orders):
    """The folded program (chains.py) over this input: its entry durations and end times."""
    comp, prog, vals, dur = _prepare(inp, orders)
    return comp, prog, vals, dur, _ends(comp, prog, dur)


def _loop(A: list[int], B: list[int], D: list[float]) -> list[float]:
    """End times of a two-input program: ``end[i] = max(end[A[i]], end[B[i]]) + D[i]``."""
    end = [0.0]
    ea = end.append
    for a, b, d in zip(A, B, D):
        x = end[a]
        y = end[b]
        ea((x if x >= y else y) + d)
    return end


def simulate(inp: PipelineInput, orders: Sequence[Sequence[Action]] | None = None) -> Timeline:
    """Simulate one training step. ``orders`` replaces the schedule's per-rank orders (tests,
    hand-made schedules); an order that cannot finish raises DeadlockError."""
    comp, prog, vals, dur, fend = _run(inp, orders)
    met = step_metrics(comp, prog, fend, vals, dur)
    start, end = _times(comp.A, comp.B, comp.getter(vals.tolist()))  # every task's own span, starts kept exact
    with paused_gc():
        return build_timeline(inp, comp, start, end, met)


def full_metrics(inp: PipelineInput, orders: Sequence[Sequence[Action]] | None = None) -> StepMetrics:
    """``pipeline_metrics`` from the whole program, never the periodic extrapolation (tests)."""
    comp, prog, vals, dur, end = _run(inp, orders)
    return step_metrics(comp, prog, end, vals, dur)


def pipeline_metrics(inp: PipelineInput, orders: Sequence[Sequence[Action]] | None = None) -> StepMetrics:
    """``simulate(inp).metrics`` without building spans or memory curves; a long 1F1B or
    interleaved pipeline from its periodic steady state (periodic.py) where that is certified."""
    if orders is None:
        met = periodic_metrics(inp, _prepare, _ends, step_metrics)
        if met is not None:
            return met
    return full_metrics(inp, orders)


def pipeline_step_time(inp: PipelineInput, orders: Sequence[Sequence[Action]] | None = None) -> float:
    """Step time of ``simulate(inp).step_time_s``, without building the timeline."""
    if orders is None:
        met = periodic_metrics(inp, _prepare, _ends, step_metrics)
        if met is not None:
            return met.step_time_s
    return float(np.max(_run(inp, orders)[4]))
