"""Every bundled measured run, estimated through ``simengine.api`` and compared with its
measurement: the B200 Megatron-LM node (``b200``) and the published sources.

Nothing here is tuned to the rows: the scenarios come from ``b200.py`` (as launched) and
``published/`` (each source's settings, guesses listed as assumptions).
"""

from __future__ import annotations

from .. import presets
from ..errors import ConfigError
from .b200 import b200_runs, b200_system
from .bands import metric_band
from .data import read_text
from .published import SOURCES as PUBLISHED_SOURCES
from .published import evaluate, published_runs
from .published.conventions import convention
from .result import SkippedRow, ValidationResult, ValidationRow, summarize

SOURCES: tuple[str, ...] = ("b200", *PUBLISHED_SOURCES)
B200_SYSTEM_PRESET = "b200-sxm-180gb"
B200_NCCL_FITS = "b200-nccl-fits"


def _pct(predicted: float, measured: float) -> float:
    return 100.0 * (predicted - measured) / measured


def b200_system_for(calibrated: bool) -> dict:
    """The B200 system preset; calibrated = plus the measured op table and NCCL fits (as the
    README's "calibrated" column)."""
    preset = presets.load_preset("systems", B200_SYSTEM_PRESET)
    if not calibrated:
        return preset
    # the table's text, not a path: works from a checkout, a wheel or a zip alike
    return b200_system(preset, read_text("b200_op_efficiency.csv"), presets.load_calibration(B200_NCCL_FITS))


def b200_rows(calibrated: bool = False) -> list[ValidationRow]:
    """Step time (ms) and allocated peak memory (GiB) of the 20 B200 runs."""
    from ..api import estimate

    rows = []
    for run in b200_runs(read_text("b200_megatron_runs.csv"), b200_system_for(calibrated)):
        rep = estimate(run.config)
        for metric, unit, meas, pred, peer in (
            ("step_time", "ms", run.real_ms, rep.step_time_s * 1e3, run.peer_ms),
            ("peak_memory", "GiB", run.real_alloc_gib, rep.peak_memory_gib, run.peer_alloc_gib),
        ):
            rows.append(ValidationRow(source="b200", run=run.case, metric=metric, unit=unit, measured=meas, predicted=pred,
                                      error_pct=_pct(pred, meas), peer_predicted=peer, band=metric_band(metric, pred, rep),
                                      scenario=run.config))
    return rows


def published_rows(source: str | None = None) -> tuple[list[ValidationRow], list[SkippedRow]]:
    """Every metric row of the published runs (of one source, or all) and the runs that could not
    be expressed, with the reason."""
    runs, skipped = published_runs(read_text("published_runs.csv"))
    if source is not None:
        runs = [r for r in runs if r.source == source]
        skipped = [s for s in skipped if s.source == source]
    comps, failed = evaluate(runs)
    by_id = {r.run_id: r for r in runs}
    rows = []
    for c in comps:
        run = by_id[c.run_id]
        rows.append(ValidationRow(source=c.source, run=c.run_id, metric=c.metric, unit=run.units.get(c.metric, ""),
                                  measured=c.measured, predicted=c.predicted, error_pct=c.error_pct, weak=c.weak, band=c.band,
                                  assumptions=list(run.assumptions), convention=convention(run, c.metric), scenario=run.config))
    skips = [SkippedRow(source=s.source, run=s.run_id, reason=s.reason) for s in (*skipped, *failed)]
    return rows, skips


def validate(source: str | None = None, calibrated: bool = False) -> ValidationResult:
    """Predicted vs measured for ``source`` (None = all of :data:`SOURCES`)."""
    if source is not None and source not in SOURCES:
        raise ConfigError([("source", f"unknown validation source {source!r}; known: {', '.join(SOURCES)}")])
    rows: list[ValidationRow] = []
    skipped: list[SkippedRow] = []
    if source in (None, "b200"):
        rows += b200_rows(calibrated)
    if source is None or source in PUBLISHED_SOURCES:
        r, s = published_rows(source)
        rows += r
        skipped += s
    return ValidationResult(calibrated=calibrated, rows=rows, summary=summarize(rows), skipped=skipped)
