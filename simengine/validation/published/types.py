"""Data types of the published-runs harness."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


# ---------------------------------------------------------------------------------------------
# Data types
# ---------------------------------------------------------------------------------------------

SOURCES: tuple[str, ...] = ("narayanan21", "korthikanti22", "megatron-readme", "torchtitan", "nemo", "megatron-bridge",
                             "deepseek-v3-report", "dgxc-benchmarking", "llama3-report")


@dataclass(frozen=True)
class PublishedRun:
    run_id: str
    source: str                       # one of SOURCES
    config: dict[str, Any]            # {"model", "system", "strategy"} for simengine.api.estimate
    measured: dict[str, float]        # metric -> value, in the source's unit
    units: dict[str, str]
    flop_basis: dict[str, Any]        # inputs of the source's own FLOP formula (see predict_metrics)
    assumptions: tuple[str, ...] = ()  # settings guessed (not printed by the source)
    inferred: str = ""                # the CSV's own inferred_fields
    confidence: str = ""

    @property
    def weak(self) -> bool:
        return bool(self.assumptions)


@dataclass(frozen=True)
class SkippedRun:
    run_id: str
    source: str
    reason: str
    metrics: tuple[str, ...] = field(default_factory=tuple)


class _Skip(Exception):
    pass
