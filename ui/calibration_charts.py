"""Altair charts of a calibration (pure: the summary's curves in, charts out; data from
``simengine.calibration.curves``): GEMM efficiency vs FLOPs, bus bandwidth vs message size per
collective and tier with the alpha-beta line, attention efficiency vs sequence length."""

from __future__ import annotations

import altair as alt
import pandas as pd

_FONT = {"labelFontSize": 11, "titleFontSize": 11}


def _cfg(chart):
    return chart.configure_axis(**_FONT).configure_legend(**_FONT).configure_view(strokeWidth=0)


def gemm_chart(rows: list[dict]) -> alt.TopLevelMixin | None:
    if not rows:
        return None
    df = pd.DataFrame(rows)
    # SI tick labels ("100G", "1T"): vega's default switched from "100,000,000,000" to "1e+12" on one axis
    base = alt.Chart(df).encode(x=alt.X("flops:Q", scale=alt.Scale(type="log"), title="GEMM FLOPs (2·b·m·n·k)",
                                        axis=alt.Axis(format="~s")))
    # the precision as the mark's shape: a table with bf16 and fp8 / nvfp4 rows of one GEMM shape
    # drew them as identical dots (each precision's efficiency is against its own peak)
    measured = base.mark_point(size=34, opacity=0.75, filled=True).encode(
        y=alt.Y("efficiency:Q", title="efficiency (achieved / its precision's peak)"), color=alt.Color("layout:N", title="layout"),
        shape=alt.Shape("dtype:N", title="precision"),
        tooltip=["shape:N", "layout:N", "dtype:N", alt.Tooltip("efficiency:Q", format=".3f")])
    held = df.dropna(subset=["held_out_prediction"])
    layers = [measured]
    if not held.empty:
        layers.append(alt.Chart(held).mark_point(shape="cross", color="#444", size=40).encode(
            x="flops:Q", y="held_out_prediction:Q",
            tooltip=["shape:N", alt.Tooltip("held_out_prediction:Q", format=".3f", title="interpolated (held out)")]))
    return _cfg(alt.layer(*layers).properties(
        height=300, title="GEMM: measured points (one shape per precision) and the table's interpolation at held-out points (crosses)"))


def collective_chart(rows: list[dict]) -> alt.TopLevelMixin | None:
    df = pd.DataFrame([r for r in rows if r["size_bytes"] > 0])
    if df.empty:
        return None
    df["series"] = df["kind"] + " · " + df["tier"] + " · " + df["ranks"].astype(str) + " ranks · " + \
        df["source"].str.slice(0, 40) + " #" + df["table"].astype(str)
    x = alt.X("size_bytes:Q", scale=alt.Scale(type="log"), title="message size [bytes]", axis=alt.Axis(format="~s"))
    pts = alt.Chart(df).mark_circle(size=30).encode(
        x=x, y=alt.Y("busbw_gbs:Q", title="bus bandwidth [GB/s]"), color=alt.Color("series:N", title=None, legend=alt.Legend(orient="bottom", columns=1, labelLimit=600)),
        tooltip=["series:N", "size_bytes:Q", alt.Tooltip("busbw_gbs:Q", format=".2f", title="measured busbw"),
                 alt.Tooltip("fit_busbw_gbs:Q", format=".2f", title="alpha-beta busbw")])
    line = alt.Chart(df.dropna(subset=["fit_busbw_gbs"])).mark_line(strokeDash=[4, 2]).encode(
        x=x, y="fit_busbw_gbs:Q", color="series:N")
    # Streamlit fits the whole chart, legend included, into ``height``: a legend of one row per
    # table below the plot gets its own rows on top of the plot's 300 px (else it squashes the plot)
    return _cfg(alt.layer(pts, line).properties(
        height=300 + _LEGEND_ROW_PX * int(df["series"].nunique()),
        title="Collectives: measured busbw (dots) and the alpha-beta fit (dashed) per table"))


_LEGEND_ROW_PX = 34  # one legend entry at the 11 px label font with its padding, as drawn (about 30 px)


def attention_chart(rows: list[dict]) -> alt.TopLevelMixin | None:
    if not rows:
        return None
    df = pd.DataFrame(rows)
    return _cfg(alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("seq_len:Q", scale=alt.Scale(type="log", base=2), title="sequence length"),
        y=alt.Y("efficiency:Q", title="efficiency (causal FLOPs)"), color=alt.Color("phase:N"),
        detail="heads:N", tooltip=["phase:N", "seq_len:Q", "heads:Q", "batch:Q", alt.Tooltip("efficiency:Q", format=".3f")],
    ).properties(height=260, title="Attention efficiency vs sequence length"))
