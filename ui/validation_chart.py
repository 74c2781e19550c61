"""Predicted vs measured, log-log (pure: a rows frame in, an Altair chart out).

Every metric lies on one chart: the y = x line and the ±10 % band are unit-free, so a point's
distance from the diagonal is its relative error whatever the metric measures.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from .validation_frames import BAND

_FONT = {"labelFontSize": 11, "titleFontSize": 11}
PAD = 1.25  # the axes reach this factor beyond the smallest and largest value


def plottable(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows a log scale can show (measured and predicted finite and > 0)."""
    ok = (rows["measured"] > 0) & (rows["predicted"] > 0)
    ok &= rows["measured"].abs() < float("inf")
    ok &= rows["predicted"].abs() < float("inf")
    return rows[ok]


def axis_domain(rows: pd.DataFrame) -> tuple[float, float]:
    values = pd.concat([rows["measured"], rows["predicted"]])
    return float(values.min()) / PAD, float(values.max()) * PAD


def guide_frame(lo: float, hi: float) -> pd.DataFrame:
    """The y = x line and the ±10 % band at the two ends of the domain: straight lines in log-log."""
    return pd.DataFrame({"x": [lo, hi], "y": [lo, hi], "low": [lo * (1 - BAND), hi * (1 - BAND)],
                         "high": [lo * (1 + BAND), hi * (1 + BAND)]})


def predicted_vs_measured_chart(rows: pd.DataFrame, sources: list[str]) -> alt.LayerChart:
    """Points coloured by source (triangles: the mapping is weak), hover shows the run."""
    pts = plottable(rows).assign(mapping=lambda d: d["weak"].map({True: "weak", False: "as stated"}))
    lo, hi = axis_domain(pts) if len(pts) else (1.0, 10.0)
    scale = alt.Scale(type="log", domain=[lo, hi], nice=False)
    x = alt.X("x:Q", scale=scale, title="measured (each source's own metric and unit)")
    y = alt.Y("y:Q", scale=scale, title="predicted")
    guides = alt.Chart(guide_frame(lo, hi))
    band = guides.mark_area(opacity=0.18, color="#7f9fbf").encode(x=x, y=alt.Y("low:Q", scale=scale, title="predicted"),
                                                                  y2="high:Q")
    diag = guides.mark_line(color="#555555", strokeDash=[4, 3]).encode(x=x, y=y)
    points = alt.Chart(pts).mark_point(size=60, strokeWidth=1.6).encode(
        x=alt.X("measured:Q", scale=scale, title="measured (each source's own metric and unit)"),
        y=alt.Y("predicted:Q", scale=scale, title="predicted"),
        color=alt.Color("source:N", scale=alt.Scale(domain=sources), legend=alt.Legend(title="source")),
        shape=alt.Shape("mapping:N", scale=alt.Scale(domain=["as stated", "weak"], range=["circle", "triangle"]),
                        legend=alt.Legend(title="mapping")),
        tooltip=[alt.Tooltip("run:N"), alt.Tooltip("source:N"), alt.Tooltip("metric:N"), alt.Tooltip("unit:N"),
                 alt.Tooltip("measured:Q", format=",.4~g"), alt.Tooltip("predicted:Q", format=",.4~g"),
                 alt.Tooltip("error_pct:Q", format="+.1f", title="error %"), alt.Tooltip("mapping:N")],
    )
    chart = (band + diag + points).properties(height=520, title="Predicted vs measured (dashed: y = x; band: ±10 %)")
    return chart.configure_axis(**_FONT).configure_legend(**_FONT).configure_view(strokeWidth=0).interactive()
