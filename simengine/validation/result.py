"""The result of a validation run: JSON-serialisable pydantic models (the CLI's ``--json`` and the
studio's Validation page are built on exactly these)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ValidationRow(_Frozen):
    source: str = Field(..., description="b200 or a published source (narayanan21, korthikanti22, ...)")
    run: str = Field(..., description="run id (the CSV's case / run_id)")
    metric: str = Field(..., description="what was measured, in the source's own definition")
    unit: str = ""
    measured: float
    predicted: float
    error_pct: float = Field(..., description="signed error, 100·(predicted − measured)/measured")
    weak: bool = Field(False, description="the mapping needs a setting the source does not print (see assumptions)")
    assumptions: list[str] = []
    convention: str = Field("", description="the source's definition of a FLOP-based metric (published/conventions.py); '' for times, throughput and memory")
    peer_predicted: float | None = Field(None, description="the peer SimuMax v1.2's prediction (b200 only)")
    band: tuple[float, float] | None = Field(None, description="the estimate's uncertainty band on this metric (bands.py); None for per-layer times")
    scenario: dict[str, Any] = Field(..., description="{model, system, strategy} dicts, as launched: load it with api.estimate")


class SummaryRow(_Frozen):
    source: str
    metric: str
    n: int
    mape_pct: float
    median_signed_pct: float
    worst_run: str
    worst_error_pct: float


class SkippedRow(_Frozen):
    source: str
    run: str
    reason: str


class ValidationResult(_Frozen):
    calibrated: bool = Field(False, description="b200 rows used the measured op table + NCCL fits")
    rows: list[ValidationRow] = []
    summary: list[SummaryRow] = []
    skipped: list[SkippedRow] = []


def summarize(rows: list[ValidationRow]) -> list[SummaryRow]:
    """Per (source, metric): count, MAPE, median signed error, worst row (largest |error|)."""
    groups: dict[tuple[str, str], list[ValidationRow]] = {}
    for r in rows:
        groups.setdefault((r.source, r.metric), []).append(r)
    out = []
    for (source, metric), rs in groups.items():
        errs = sorted(r.error_pct for r in rs)
        n = len(errs)
        med = errs[n // 2] if n % 2 else 0.5 * (errs[n // 2 - 1] + errs[n // 2])
        worst = max(rs, key=lambda r: abs(r.error_pct))
        out.append(SummaryRow(source=source, metric=metric, n=n, mape_pct=sum(abs(e) for e in errs) / n,
                              median_signed_pct=med, worst_run=worst.run, worst_error_pct=worst.error_pct))
    return out
