"""``python -m simengine validate [--source NAME] [--json] [--calibrated]``: predicted vs measured
on the bundled measured runs, per source and metric (registered by ``simengine/cli.py``)."""

from __future__ import annotations

import argparse

from .result import ValidationResult
from .run import SOURCES

WORST_ROWS = 10


def add_parser(sub) -> None:
    p = sub.add_parser("validate", help="compare predictions with the bundled measured runs")
    p.add_argument("--source", choices=SOURCES, help="one source (default: all)")
    p.add_argument("--json", action="store_true", help="print one JSON object (rows, summary, skipped)")
    p.add_argument("--calibrated", action="store_true",
                   help="b200: load the measured op table and NCCL fits into the system (datasheet preset otherwise)")
    p.add_argument("--rows", action="store_true", help="also print every row (text output)")


def _fmt(x: float) -> str:
    a = abs(x)
    return f"{x:.0f}" if a >= 1000 else f"{x:.1f}" if a >= 10 else f"{x:.2f}" if a >= 0.1 else f"{x:.3g}"


def _row_line(r) -> str:
    metric = f"{r.metric} [{r.unit}]" if r.unit else r.metric
    return (f"  {r.source:16s} {r.run[:60]:60s} {metric[:40]:40s} {_fmt(r.measured):>9s} {_fmt(r.predicted):>9s} "
            f"{r.error_pct:+7.1f} {abs(r.error_pct):6.1f}{'  weak' if r.weak else ''}")


def render_text(res: ValidationResult, all_rows: bool = False) -> str:
    """The human-readable report: summary per source and metric, worst rows, skipped runs."""
    head = f"  {'source':16s} {'run':60s} {'metric':40s} {'measured':>9s} {'predicted':>9s} {'signed%':>7s} {'abs%':>6s}"
    system = (f" (the b200 rows on the {'calibrated' if res.calibrated else 'datasheet'} B200 system)"
              if any(r.source == "b200" for r in res.rows) else "")
    lines = [f"validation: {len(res.rows)} rows, {len(res.skipped)} runs skipped{system}", ""]
    if all_rows:
        lines += ["rows", head, *(_row_line(r) for r in res.rows), ""]
    lines += ["summary per source and metric",
              f"  {'source':16s} {'metric':40s} {'n':>4s} {'MAPE%':>7s} {'median%':>8s}  worst run (error %)"]
    for s in res.summary:
        lines.append(f"  {s.source:16s} {s.metric[:40]:40s} {s.n:4d} {s.mape_pct:7.2f} {s.median_signed_pct:+8.2f}  "
                     f"{s.worst_run} ({s.worst_error_pct:+.1f})")
    worst = sorted(res.rows, key=lambda r: -abs(r.error_pct))[:WORST_ROWS]
    lines += ["", f"worst {len(worst)} rows", head, *(_row_line(r) for r in worst)]
    if res.skipped:
        lines += ["", "runs that could not be expressed"]
        lines += [f"  {s.source:16s} {s.run}: {s.reason}" for s in res.skipped]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> str:
    """The output text of ``validate`` for parsed ``args`` (the caller prints it)."""
    from ..api import validate

    res = validate(args.source, calibrated=args.calibrated)
    return res.model_dump_json() if args.json else render_text(res, args.rows)
