"""Pipeline simulator: per-rank orders + per-chunk costs → timeline, step time, memory.

One list scheduler over a DAG of per-stream task orders (compute, comm, pp, dp streams per
rank): a task starts when its stream is free and its dependencies are done.
"""

from __future__ import annotations

from .engine import pipeline_metrics, pipeline_step_time, simulate
from .errors import DeadlockError
from .inputs import ChunkCost, CommTask, PipelineInput, StageCost
from .metrics import StepMetrics
from .timeline import Span, Timeline
from .trace import to_chrome_trace

__all__ = [
    "ChunkCost", "CommTask", "DeadlockError", "PipelineInput", "Span", "StageCost", "StepMetrics",
    "Timeline", "pipeline_metrics", "pipeline_step_time", "simulate", "to_chrome_trace",
]
