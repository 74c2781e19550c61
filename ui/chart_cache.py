"""Chart specs cached on the scenario JSON and the view's options (``st.cache_data``).

A spec (``ui.charts``: plain Vega-Lite dicts) depends only on the scenario and the view options,
so it is built once and drawn with ``st.vega_lite_chart``. Frames are passed as ``_``-prefixed
arguments, which ``st.cache_data`` does not hash: the key is the scenario JSON plus options.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from .charts import gantt_chart, memory_stage_chart, memory_time_chart, mfu_waterfall_chart, time_breakdown_chart
from .timeline_data import gantt_frame, memory_frame

ENTRIES = 24
# The memory chart is ~1,300 px wide: 400 steps per rank (≥ 3 px each; each bin keeps its
# maximum, so every peak is drawn) and 4,000 points in all are what it can show. More points cost
# the browser without a visible difference (a deep pipeline's 8 ranks · 1,500 points were 600 kB
# of inlined JSON).
VIEW_MEMORY_POINTS, VIEW_MEMORY_TOTAL = 400, 4_000
# Inlined data is bounded by ui.timeline_data (MAX_EXACT_SPANS, memory_frame's cap).


def draw(chart_spec: dict[str, Any]) -> None:
    st.vega_lite_chart(themed(chart_spec), width="stretch")


# Streamlit's own text colours (light, dark): its chart theme colours axes and legends, not the
# text marks a chart draws on its background (the MFU waterfall's values were black on dark)
TEXT_COLORS = ("#31333f", "#fafafa")


def themed(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with its unstyled text marks in the viewer's theme colour (``st.context.theme``)."""
    dark = getattr(getattr(st.context, "theme", None), "type", None) == "dark"
    config = dict(spec.get("config") or {})
    config["text"] = {**(config.get("text") or {}), "color": TEXT_COLORS[dark]}
    return {**spec, "config": config}


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def estimate_specs(scenario_json: str, _report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Time breakdown and MFU waterfall specs of the scenario's Report."""
    r = _report
    return {"breakdown": time_breakdown_chart(r["breakdown_s"], r["step_time_s"]), "waterfall": mfu_waterfall_chart(r)}


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def estimate_memory_spec(scenario_json: str, _report: dict[str, Any]) -> dict[str, Any]:
    """The memory-per-stage spec (built only when its box is open)."""
    from .labels import reserved_limit_gib

    limit = reserved_limit_gib(_report)
    return memory_stage_chart(_report["memory_by_stage"], _report["memory_capacity_gib"] if limit is None else limit)


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def gantt_view(scenario_json: str, window_ms: tuple[float, float], ranks: tuple[int, ...] | None, labels: bool,
               _spans: Any, _pre: Any = None) -> dict[str, Any]:
    """{"spec", "aggregated", "shown"} of the Gantt chart of a window (ms) and rank subset.
    ``_pre``: ``(window, ranks, gantt_frame result)`` a worker computed already (heavy timelines)."""
    if _pre is not None and _pre[0] == window_ms and _pre[1] == ranks:
        gdf, aggregated, rows = _pre[2]
    else:
        gdf, aggregated, rows = gantt_frame(_spans, window_ms[0] / 1e3, window_ms[1] / 1e3,
                                            ranks=list(ranks) if ranks is not None else None)
    chart = gantt_chart(gdf, rows, aggregated, x_domain=window_ms, show_labels=labels and not aggregated)
    return {"spec": chart, "aggregated": aggregated, "shown": len(gdf)}


@st.cache_data(max_entries=ENTRIES, show_spinner=False)
def memory_view(scenario_json: str, ranks: tuple[int, ...] | None, limits: tuple[tuple[int, float], ...] | float,
                _memory: Any, step_s: float | None = None) -> dict[str, Any] | None:
    """The memory-over-the-step chart; ``limits``: the shown ranks' (rank, allocated limit) pairs
    (ui/labels.py ``rank_limits_gib``) or every rank's one; ``step_s`` extends each curve to the step's end."""
    memory = _memory
    if ranks is not None and len(memory):
        memory = memory[memory["rank"].isin(list(ranks))]
    mem = memory_frame(memory, max_points=VIEW_MEMORY_POINTS, max_total=VIEW_MEMORY_TOTAL, end_s=step_s)
    shown = limits if isinstance(limits, (int, float)) else dict(limits)
    return memory_time_chart(mem, shown, step_s * 1e3 if step_s else None) if len(mem) else None
