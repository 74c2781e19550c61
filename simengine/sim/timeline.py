"""Result of one simulated training step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from .metrics import StepMetrics


class Span(NamedTuple):
    rank: int
    stream: str  # 'compute' | 'comm' | 'pp' | 'dp'
    kind: str  # 'F' 'R' 'B' 'W' 'optimizer' | a breakdown name: 'pp_comm' 'dp_comm' 'tp_comm' …
    mb: int  # -1 when not tied to a micro-batch
    chunk: int  # model chunk on the rank, -1 when not tied to one
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Timeline:
    spans: tuple[Span, ...]
    step_time_s: float
    # per rank:
    bubble_fraction: tuple[float, ...]  # (step − compute − exposed comm) / step (metrics.py)
    compute_s: tuple[float, ...]  # F/R/B/W/optimizer kernel time
    exposed_comm_s: tuple[dict[str, float], ...]  # by kind: comm nothing else covers (metrics.py)
    hidden_comm_s: tuple[dict[str, float], ...]  # by kind: comm under a compute kernel
    memory: tuple[tuple[tuple[float, float], ...], ...]  # (t_s, bytes) steps, value from t on
    peak_memory_bytes: tuple[float, ...]
    metrics: "StepMetrics | None" = None  # the numbers above, as the estimate reads them

    @property
    def critical_rank(self) -> int:
        return self.metrics.critical_rank if self.metrics is not None else 0

    @property
    def num_ranks(self) -> int:
        return len(self.bubble_fraction)
