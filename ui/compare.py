"""Pinned-scenario comparison of the Estimate page: a compact table with deltas against a chosen
baseline (it fits a 1440 px window), every column in the CSV download, the breakdown chart."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from . import fold, state
from .charts import compare_chart
from .report_io import compare_rows
from .text import csv_text, issue_md, md

# (column of compare_rows, short title, format, delta kind: "rel" % change, "pt" points, None)
SHOWN = [("step time [s]", "step [s]", "%.3f", "rel"), ("tokens/s/GPU", "tok/s/GPU", "localized", "rel"),
         ("MFU [%]", "MFU [%]", "%.1f", "pt"), ("peak alloc [GiB]", "alloc [GiB]", "%.1f", "rel"),
         ("USD / 1M tokens", "$/1M tok", "%.3f", "rel")]
CURRENT = "current (unpinned)"


def delta_key(col: str, kind: str | None) -> str:
    """The CSV column of a delta: the figure's name with the delta's own unit ("Δ step time [%]",
    "Δ MFU [pt]"), not the figure's unit as well ("Δ step time [s] [%]")."""
    return f"Δ {col.split(' [')[0]} [{'pt' if kind == 'pt' else '%'}]"


def with_deltas(rows: list[dict[str, Any]], baseline: int) -> list[dict[str, Any]]:
    """Every row plus its ``delta_key`` columns against row ``baseline``: relative change in %
    (step time, throughput, memory, cost) or the difference in points (MFU)."""
    base = rows[baseline]
    out = []
    for row in rows:
        extra = {}
        for col, _, _, kind in SHOWN:
            b, v = base[col], row[col]
            extra[delta_key(col, kind)] = v - b if kind == "pt" else (100.0 * (v - b) / b if b else float("nan"))
        out.append({**row, **extra})
    return out


# the delta columns' titles: short enough for their column (the unit is in the cells)
DELTA_TITLE = {"step [s]": "Δ step", "tok/s/GPU": "Δ tok/s", "MFU [%]": "Δ MFU", "alloc [GiB]": "Δ alloc",
               "$/1M tok": "Δ cost"}


def delta_title(short: str, kind: str | None) -> str:
    return DELTA_TITLE.get(short, f"Δ {short.split(' [')[0]}")


def delta_format(kind: str | None) -> str:
    """Cells of a delta column carry their unit: points of MFU, % change otherwise."""
    return "%+.1f pt" if kind == "pt" else "%+.1f%%"


def compact_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The on-page table: label, layout, and each shown figure with its delta."""
    data = []
    for row in rows:
        item = {"scenario": row["scenario"], "fits": row["fits"]}
        for col, short, _, kind in SHOWN:
            item[short] = row[col]
            item[delta_title(short, kind)] = row[delta_key(col, kind)]
        data.append(item)
    return pd.DataFrame(data)


def rows_csv(rows: list[dict[str, Any]]) -> str:
    head = list(rows[0])
    return csv_text([head, *([r.get(k) for k in head] for r in rows)])


def _config(frame: pd.DataFrame) -> dict[str, Any]:
    # every column fits a 1440 px window inside the folded box's padding (tests/browser: 1440 px)
    cfg: dict[str, Any] = {"scenario": st.column_config.TextColumn(width=170), "fits": st.column_config.CheckboxColumn(width=40)}
    for _, short, fmt, kind in SHOWN:
        cfg[short] = st.column_config.NumberColumn(format=fmt, width=74)
        cfg[delta_title(short, kind)] = st.column_config.NumberColumn(
            format=delta_format(kind), width=70, help="Against the baseline: " + ("points" if kind == "pt" else "% change"))
    return {k: v for k, v in cfg.items() if k in frame.columns}


FAILED_ISSUES = 3  # a failed pin's line quotes at most this many of its issues


def failed_pin_text(index: int, label: str, issues: list) -> str:
    """The line that stands in for a pinned scenario the engine could not estimate: which pin (its
    number and label) and why (its issues, each escaped: labels and messages can hold Markdown)."""
    issues = list(issues)
    why = "; ".join(issue_md(f, m, 300) for f, m in issues[:FAILED_ISSUES]) or "no reason was given"
    more = f" (and {len(issues) - FAILED_ISSUES} more)" if len(issues) > FAILED_ISSUES else ""
    return (f"**Pin {index + 1}, {md(label, 80)}, could not be estimated** and is not in the comparison: "
            f"{why}{more}")


def _pin() -> None:
    refused = state.pin(st.session_state.get("pin.label") or "")
    if refused:
        st.toast(refused)


def compare_section(sc: dict[str, Any], r: dict[str, Any]) -> None:
    """Folded until something is pinned (a folded box draws nothing, ui/fold.py: its label field
    and buttons cost the browser about as much as a chart); open whenever pins exist."""
    pinned = bool(state.pins())
    box, is_open = fold.group("Compare pinned scenarios (pin this scenario to compare it side by side)", "pin.box",
                              st.session_state.setdefault("pin.fold", {}), pinned, force_open=pinned)
    if is_open:
        with box:
            _compare(sc, r)


def _compare(sc: dict[str, Any], r: dict[str, Any]) -> None:
    a, b, c = st.columns([3, 1, 1], vertical_alignment="bottom")
    s = sc["strategy"]
    a.text_input("Label for this scenario", key="pin.label",
                 value=f"{state.display_name('model', 40)} · {sc['system']['num_gpus']} GPUs · tp{s['tp']} pp{s['pp']} {s['schedule']}"[:80])
    full = len(state.pins()) >= state.MAX_PINS   # a ninth pin would have to drop one the user made
    b.button("Pin this scenario", key="pin.add", icon=":material/push_pin:", width="stretch", on_click=_pin, disabled=full,
             help=f"At most {state.MAX_PINS} pinned scenarios: clear the pins to pin more." if full else None)
    c.button("Clear pins", key="pin.clear", disabled=not state.pins(), width="stretch", on_click=state.clear_pins)
    from .engine import estimate_report

    items = []
    for i, p in enumerate(state.pins()):
        pr = estimate_report(p["json"])
        if pr["ok"]:
            items.append((p["label"], json.loads(p["json"]), pr["report"]))
        else:   # said, not dropped: a pin missing from the table without a word read as lost
            w, u = st.columns([6, 1], vertical_alignment="center")
            w.warning(failed_pin_text(i, p["label"], pr["issues"]), icon="⚠️")
            u.button("Unpin", key=f"pin.drop.{i}", on_click=state.unpin, args=(i,), width="stretch",
                     help="Remove this pinned scenario (the others stay).")
    if not items:
        if not state.pins():
            st.caption("Pin scenarios to compare them side by side (step time, MFU, memory, cost) with deltas against a "
                       "baseline. Pins stay in this session and in the share link.")
        return
    if all(json.loads(p["json"]) != sc for p in state.pins()):
        items.append((CURRENT, sc, r))
    rows = compare_rows(items)
    labels = [f"{i + 1}. {row['scenario']}" for i, row in enumerate(rows)]
    base = st.selectbox("Baseline (deltas are against it)", range(len(rows)), format_func=lambda i: labels[i],
                        key="pin.baseline", index=0)
    full = with_deltas(rows, base if base is not None and base < len(rows) else 0)
    frame = compact_frame(full)
    st.dataframe(frame, hide_index=True, width="stretch", column_config=_config(frame))
    st.download_button("Comparison (CSV, every column)", rows_csv(full), file_name="simengine-comparison.csv",
                       mime="text/csv", on_click="ignore", icon=":material/download:", key="dl.compare.csv")
    st.vega_lite_chart(compare_chart([{"label": lab, "breakdown_s": rep["breakdown_s"]} for lab, _, rep in items]),
                       width="stretch")
