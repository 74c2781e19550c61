"""Validation page tables (pure: the JSON of ``simengine.api.validate`` results in, DataFrames out).

A result is ``{"calibrated", "rows", "summary", "skipped"}`` as ``ValidationResult.model_dump``
writes it (``simengine/validation/result.py``); each row carries the scenario it was estimated
from, which "load this run" opens as the current scenario.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

BAND = 0.10  # the ±10 % band of the chart and the "within ±10 %" column
ROW_COLUMNS = ["source", "run", "metric", "unit", "measured", "predicted", "error_pct", "weak", "peer_predicted"]
SUMMARY_COLUMNS = ["source", "metric", "unit", "runs", "mape_pct", "median_signed_pct", "within_band", "worst_run",
                   "worst_error_pct"]
SKIPPED_COLUMNS = ["source", "run", "reason"]
KEY_SEP = " · "


def run_key(source: str, run: str) -> str:
    """The label of one measured run in the run picker (unique: a run id is unique per source)."""
    return f"{source}{KEY_SEP}{run}"


def merge(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """One result from the per-source results (summaries are per (source, metric), so they add up)."""
    return {k: [x for r in results for x in r.get(k, [])] for k in ("rows", "summary", "skipped")}


# which peak memory a source measured (simengine/validation/published/evaluate.py: torchtitan logs
# max_reserved, the B200 runs torch.cuda.max_memory_allocated): the page said "peak_memory 47.84"
# for a reserved figure while the Estimate page's headline is the allocated peak
MEMORY_KIND = {"torchtitan": "reserved"}


def unit_of(row: dict[str, Any]) -> str:
    """A row's unit, a peak memory's saying which kind."""
    unit = str(row.get("unit") or "")
    if row.get("metric") == "peak_memory" and unit == "GiB":
        return f"GiB {MEMORY_KIND.get(str(row.get('source')), 'allocated')}"
    return unit


def rows_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Every metric row, without its scenario (a peak memory's unit names its kind, ``unit_of``)."""
    return pd.DataFrame([{**{c: r.get(c) for c in ROW_COLUMNS}, "unit": unit_of(r)} for r in rows], columns=ROW_COLUMNS)


def summary_frame(summary: list[dict[str, Any]], rows: pd.DataFrame, order: tuple[str, ...] = ()) -> pd.DataFrame:
    """The engine's per (source, metric) summary plus the unit and how many rows lie within ±10 %,
    sources in ``order`` (the API's order), then metric."""
    out = []
    for s in summary:
        mine = rows[(rows["source"] == s["source"]) & (rows["metric"] == s["metric"])]
        units = sorted(set(mine["unit"].dropna()))
        out.append({"source": s["source"], "metric": s["metric"], "unit": ", ".join(units), "runs": s["n"],
                    # shown to 0.1: a median of −0.02 % read "-0.0 %" (+ 0.0 turns −0.0 into 0.0)
                    "mape_pct": s["mape_pct"], "median_signed_pct": round(s["median_signed_pct"], 1) + 0.0,
                    "within_band": int((mine["error_pct"].abs() <= 100 * BAND).sum()),
                    "worst_run": s["worst_run"], "worst_error_pct": s["worst_error_pct"]})
    df = pd.DataFrame(out, columns=SUMMARY_COLUMNS)
    rank = {s: i for i, s in enumerate(order)}
    return (df.assign(_o=df["source"].map(lambda s: rank.get(s, len(rank))))
            .sort_values(["_o", "metric"], kind="stable").drop(columns="_o").reset_index(drop=True))


def skipped_frame(skipped: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame([{c: s.get(c) for c in SKIPPED_COLUMNS} for s in skipped], columns=SKIPPED_COLUMNS)


def run_scenarios(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Run label → the scenario it was estimated from (first row of each run; every metric row of
    a run carries the same scenario), in row order."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        out.setdefault(run_key(r["source"], r["run"]), r["scenario"])
    return out


def run_rows(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The metric rows of one run (label from :func:`run_key`)."""
    return [r for r in rows if run_key(r["source"], r["run"]) == key]
