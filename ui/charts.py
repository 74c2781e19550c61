"""Altair chart builders (pure: data in, chart out). Colours come from ``ui.theme``."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from .theme import MEMORY_COLORS, TIME_COLORS, TIME_LABELS, scale, span_label

_FONT = {"labelFontSize": 11, "titleFontSize": 11}
# Charts of thousands of marks are drawn on a canvas: Vega's SVG renderer builds one DOM node per
# mark (a Timeline Gantt of ~1,300 bins and its ~5,000-point memory curves cost the browser
# ~2× the CPU in SVG). Streamlit passes ``usermeta.embedOptions`` to vega-embed.
CANVAS = {"embedOptions": {"renderer": "canvas"}}
GANTT_DECIMALS = 4  # ms: 0.1 µs, finer than the 3 decimals the tooltips show


def _cfg(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    return chart.configure_axis(**_FONT).configure_legend(**_FONT).configure_view(strokeWidth=0)


def breakdown_frame(breakdown_s: dict[str, float], step_s: float) -> pd.DataFrame:
    rows = [{"category": k, "label": TIME_LABELS.get(k, k), "ms": v * 1e3,
             "share": (v / step_s if step_s > 0 else 0.0)} for k, v in breakdown_s.items() if v > 0]
    df = pd.DataFrame(rows, columns=["category", "label", "ms", "share"])
    order = {k: i for i, k in enumerate(TIME_COLORS)}
    return df.assign(_o=df["category"].map(lambda c: order.get(c, 99))).sort_values("_o").drop(columns="_o")


def time_breakdown_chart(breakdown_s: dict[str, float], step_s: float) -> alt.Chart:
    """One horizontal bar per category: where the step time goes on the critical rank."""
    df = breakdown_frame(breakdown_s, step_s)
    domain, rng = scale(list(df["category"]))
    return _cfg(alt.Chart(df).mark_bar().encode(
        y=alt.Y("label:N", sort=list(df["label"]), title=None),
        x=alt.X("ms:Q", title="time per step [ms]"),
        color=alt.Color("category:N", scale=alt.Scale(domain=domain, range=rng), legend=None),
        tooltip=[alt.Tooltip("label:N", title="category"), alt.Tooltip("ms:Q", format=",.2f", title="ms"),
                 alt.Tooltip("share:Q", format=".1%", title="share of step")],
    ).properties(height=alt.Step(24), title="Step time breakdown (critical rank)"))


def mfu_waterfall_frame(report: dict[str, Any]) -> pd.DataFrame:
    """Peak (100 %) minus each loss, as shares of the step, ending at the report's MFU.

    Losses: every non-(forward/backward) breakdown entry (bubble, exposed comm, optimizer,
    recompute) over the step time, then 'kernels below peak' = forward+backward time share − MFU,
    so the bars add up exactly to the MFU the engine reports.
    """
    step = float(report["step_time_s"])
    bd = report.get("breakdown_s", {}) or {}
    mfu = float(report["mfu"])
    rows = [{"step": "peak", "category": "peak", "start": 0.0, "end": 1.0, "value": 1.0}]
    level = 1.0
    fb = sum(v for k, v in bd.items() if k in ("forward_compute", "backward_compute"))
    losses = [(k, v / step) for k, v in bd.items() if k not in ("forward_compute", "backward_compute") and v > 0]
    losses.sort(key=lambda kv: -kv[1])
    losses.append(("kernel_efficiency", fb / step - mfu))
    for k, share in losses:
        if abs(share) < 5e-4:  # below 0.05 %: not worth a bar
            continue
        rows.append({"step": TIME_LABELS.get(k, k), "category": k, "start": level - share, "end": level, "value": -share})
        level -= share
    rows.append({"step": "MFU", "category": "mfu", "start": 0.0, "end": mfu, "value": mfu})
    return pd.DataFrame(rows)


def mfu_waterfall_chart(report: dict[str, Any]) -> alt.Chart:
    df = mfu_waterfall_frame(report)
    colors = dict(TIME_COLORS, peak="#4d4d4d", mfu="#2f6f3e")
    domain, rng = scale(list(df["category"]), colors)
    base = alt.Chart(df).encode(x=alt.X("step:N", sort=list(df["step"]), title=None,
                                        axis=alt.Axis(labelAngle=-35, labelLimit=150, labelOverlap=False)))
    bars = base.mark_bar(size=28).encode(
        y=alt.Y("start:Q", title="share of peak FLOP/s", axis=alt.Axis(format="%")), y2="end:Q",
        color=alt.Color("category:N", scale=alt.Scale(domain=domain, range=rng), legend=None),
        tooltip=[alt.Tooltip("step:N"), alt.Tooltip("value:Q", format="+.1%", title="change")],
    )
    text = base.mark_text(dy=-6, fontSize=10).encode(
        y="end:Q", text=alt.Text("value:Q", format="+.1%"))
    return _cfg((bars + text).properties(height=280, title="MFU loss waterfall"))


def memory_frame(memory_by_stage: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for m in memory_by_stage:
        for cat in MEMORY_COLORS:
            key = f"{cat}_gib"
            if key in m:
                rows.append({"stage": f"stage {m['stage']}", "stage_idx": m["stage"], "category": cat,
                             "GiB": float(m[key])})
    return pd.DataFrame(rows, columns=["stage", "stage_idx", "category", "GiB"])


def memory_stage_chart(memory_by_stage: list[dict[str, Any]], capacity_gib: float) -> alt.LayerChart:
    """Stacked allocated memory per pipeline stage, reserved memory tick and the capacity line."""
    df = memory_frame(memory_by_stage)
    stages = [f"stage {m['stage']}" for m in memory_by_stage]
    domain, rng = scale(list(MEMORY_COLORS), MEMORY_COLORS)
    order = {c: i for i, c in enumerate(MEMORY_COLORS)}
    df["order"] = df["category"].map(order)
    bars = alt.Chart(df).mark_bar().encode(
        y=alt.Y("stage:N", sort=stages, title=None),
        x=alt.X("sum(GiB):Q", title="memory per GPU [GiB]"),
        color=alt.Color("category:N", scale=alt.Scale(domain=domain, range=rng),
                        legend=alt.Legend(orient="bottom", title=None)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("stage:N"), alt.Tooltip("category:N"), alt.Tooltip("GiB:Q", format=",.2f")],
    )
    res = pd.DataFrame([{"stage": f"stage {m['stage']}", "reserved": m.get("reserved_gib", 0.0)} for m in memory_by_stage])
    tick = alt.Chart(res).mark_tick(color="#333", thickness=2, size=24).encode(
        y=alt.Y("stage:N", sort=stages), x="reserved:Q",
        tooltip=[alt.Tooltip("reserved:Q", format=",.2f", title="reserved GiB")])
    cap = alt.Chart(pd.DataFrame({"cap": [capacity_gib]})).mark_rule(color="#c0392b", strokeDash=[5, 3], size=2).encode(
        x="cap:Q", tooltip=[alt.Tooltip("cap:Q", format=",.1f", title="capacity GiB")])
    return _cfg((bars + tick + cap).properties(height=alt.Step(30), title="Peak memory per pipeline stage (tick = reserved, red = capacity)"))


def compare_chart(rows: list[dict[str, Any]]) -> alt.Chart:
    """Stacked step-time breakdown, one bar per pinned scenario. rows: {label, breakdown_s}."""
    data = []
    for r in rows:
        for k, v in (r.get("breakdown_s") or {}).items():
            if v > 0:
                data.append({"scenario": r["label"], "category": k, "label": TIME_LABELS.get(k, k), "ms": v * 1e3})
    df = pd.DataFrame(data, columns=["scenario", "category", "label", "ms"])
    domain, rng = scale(list(df["category"].unique()))
    domain = [TIME_LABELS.get(c, c) for c in domain]
    order = {c: i for i, c in enumerate(TIME_COLORS)}
    df["order"] = df["category"].map(lambda c: order.get(c, 99))
    return _cfg(alt.Chart(df).mark_bar().encode(
        y=alt.Y("scenario:N", title=None, sort=[r["label"] for r in rows], axis=alt.Axis(labelLimit=260)),
        x=alt.X("sum(ms):Q", title="step time [ms]"),
        color=alt.Color("label:N", scale=alt.Scale(domain=domain, range=rng),
                        legend=alt.Legend(orient="bottom", title=None, columns=5)),
        order=alt.Order("order:Q"),
        tooltip=["scenario:N", "label:N", alt.Tooltip("ms:Q", format=",.2f")],
    ).properties(height=alt.Step(30), title="Step time by category"))


def gantt_chart(df: pd.DataFrame, rows: list[str], aggregated: bool, x_domain: tuple[float, float] | None = None,
                show_labels: bool = False) -> alt.Chart:
    """Rank × stream rows, one rect per span (or per time bin when aggregated), coloured by phase.

    ``df`` columns: row, category, start_ms, end_ms, kind, mb, chunk (+ occupancy when aggregated).
    Zoom/pan along time with the mouse wheel / drag (``interactive(bind_y=False)``).
    """
    cats = list(df["category"].unique()) if len(df) else []
    domain, rng = scale(cats)
    df = _gantt_columns(df.assign(phase=df["category"].map(span_label)), aggregated, show_labels)
    domain = [span_label(c) for c in domain]
    x_scale = alt.Scale(domain=list(x_domain)) if x_domain else alt.Undefined
    enc: dict[str, Any] = {
        "y": alt.Y("row:N", sort=rows, title=None, axis=alt.Axis(labelLimit=160)),
        "x": alt.X("start_ms:Q", title="time [ms]", scale=x_scale), "x2": "end_ms:Q",
        "color": alt.Color("phase:N", scale=alt.Scale(domain=domain, range=rng),
                        legend=alt.Legend(orient="bottom", title=None, columns=6)),
    }
    if aggregated:
        enc["opacity"] = alt.Opacity("occupancy:Q", scale=alt.Scale(domain=[0, 1], range=[0.15, 1]), legend=None)
        enc["tooltip"] = [alt.Tooltip("row:N"), alt.Tooltip("phase:N", title="dominant phase"),
                          alt.Tooltip("start_ms:Q", format=",.3f"), alt.Tooltip("end_ms:Q", format=",.3f"),
                          alt.Tooltip("occupancy:Q", format=".0%", title="busy"), alt.Tooltip("spans:Q")]
    else:
        enc["tooltip"] = [alt.Tooltip("row:N"), alt.Tooltip("kind:N", title="phase"), alt.Tooltip("mb:Q", title="micro-batch"),
                          alt.Tooltip("chunk:Q"), alt.Tooltip("start_ms:Q", format=",.3f"),
                          alt.Tooltip("end_ms:Q", format=",.3f"), alt.Tooltip("dur_ms:Q", format=",.3f", title="duration ms")]
    base = alt.Chart(df)
    chart = base.mark_bar(stroke="#808080", strokeOpacity=0.35, strokeWidth=0.3 if not aggregated else 0).encode(**enc)
    if show_labels and not aggregated:
        text = base.transform_filter("datum.label != ''").mark_text(fontSize=9, color="#111", align="center").encode(
            y=alt.Y("row:N", sort=rows), x=alt.X("mid_ms:Q", scale=x_scale), text="label:N")
        chart = chart + text
    return _cfg(chart.properties(height=alt.Step(22), usermeta=CANVAS).interactive(bind_y=False))


def _gantt_columns(df: pd.DataFrame, aggregated: bool, labels: bool) -> pd.DataFrame:
    """Only the columns the Gantt encodes, times rounded: the chart's data is inlined in the page
    (JSON), so every column and digit is parsed by the browser once per bar."""
    cols = ["row", "phase", "start_ms", "end_ms"] + (["occupancy", "spans"] if aggregated else ["kind", "mb", "chunk", "dur_ms"])
    if labels and not aggregated:
        cols += ["mid_ms", "label"]
    out = df[[c for c in cols if c in df.columns]]
    times = [c for c in ("start_ms", "end_ms", "dur_ms", "mid_ms") if c in out.columns]
    out = out.assign(**{c: out[c].astype(float).round(GANTT_DECIMALS) for c in times})
    return out.assign(occupancy=out["occupancy"].astype(float).round(3)) if "occupancy" in out.columns else out


def memory_time_chart(df: pd.DataFrame, capacity_gib: float | None) -> alt.Chart:
    """Allocated memory over the step per rank (step-after lines) and the GPU capacity."""
    df = df[["rank", "t_ms", "GiB"]].assign(t_ms=df["t_ms"].astype(float).round(GANTT_DECIMALS),
                                            GiB=df["GiB"].astype(float).round(4))  # 0.1 MiB; tooltips show 0.01 GiB
    line = alt.Chart(df).mark_line(interpolate="step-after", strokeWidth=1.6).encode(
        x=alt.X("t_ms:Q", title="time [ms]"),
        y=alt.Y("GiB:Q", title="allocated [GiB]"),
        color=alt.Color("rank:N", title="pp rank", legend=alt.Legend(orient="bottom", columns=8)),
        tooltip=["rank:N", alt.Tooltip("t_ms:Q", format=",.2f"), alt.Tooltip("GiB:Q", format=",.2f")],
    )
    layers = [line]
    if capacity_gib:
        layers.append(alt.Chart(pd.DataFrame({"cap": [capacity_gib]})).mark_rule(color="#c0392b", strokeDash=[5, 3]).encode(y="cap:Q"))
    return _cfg(alt.layer(*layers).properties(height=260, title="Memory over the step (red = capacity)",
                                              usermeta=CANVAS).interactive(bind_y=False))
