"""Result of one simulated training step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Span(NamedTuple):
    rank: int
    stream: str  # 'compute' | 'comm' | 'pp' | 'dp'
    kind: str  # 'F' 'R' 'B' 'W' 'optimizer' | 'p2p' 'dp_grad' 'dp_param' | a collective's kind
    mb: int  # -1 when not tied to a micro-batch
    chunk: int  # model chunk on the rank, -1 when not tied to one
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Timeline:
    spans: tuple[Span, ...]
    step_time_s: float
    # per rank:
    bubble_fraction: tuple[float, ...]  # idle compute-stream time / step time
    compute_s: tuple[float, ...]  # F/R/B/W/optimizer kernel time
    exposed_comm_s: tuple[dict[str, float], ...]  # comm time with no compute kernel running
    hidden_comm_s: tuple[dict[str, float], ...]  # comm time under a compute kernel
    memory: tuple[tuple[tuple[float, float], ...], ...]  # (t_s, bytes) steps, value from t on
    peak_memory_bytes: tuple[float, ...]

    @property
    def num_ranks(self) -> int:
        return len(self.bubble_fraction)
