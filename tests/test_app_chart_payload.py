"""What the Timeline charts send to the browser stays small: the Gantt and the memory curves
are drawn on a canvas, the memory view is binned to what the chart can show (every rank's peak
kept), and only the Gantt's encoded columns are inlined."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ui import chart_cache, charts


def _values(spec: dict) -> list[dict]:
    return [row for rows in spec.get("datasets", {}).values() for row in rows]


def test_memory_view_is_binned_for_the_chart_and_keeps_each_peak():
    rng = np.random.default_rng(5)
    ranks, points = 8, 3000
    mem = pd.DataFrame({"rank": np.repeat(np.arange(ranks), points), "t_s": np.tile(np.linspace(0, 1.0, points), ranks),
                        "bytes": rng.uniform(1e9, 6e10, ranks * points)})
    spec = chart_cache.memory_view.__wrapped__("payload-test", None, 80.0, mem)
    rows = [r for r in _values(spec) if "GiB" in r]
    assert len(rows) <= chart_cache.VIEW_MEMORY_TOTAL and len(rows) > ranks * 100
    shown = pd.DataFrame(rows).groupby("rank")["GiB"].max().to_numpy()
    assert np.allclose(shown, (mem.groupby("rank")["bytes"].max() / 2**30).to_numpy(), atol=1e-4)
    assert spec["usermeta"]["embedOptions"]["renderer"] == "canvas"


def test_gantt_inlines_only_what_it_draws():
    df = pd.DataFrame({"row": ["rank 0 · compute"] * 2, "category": ["forward_compute", "backward_compute"],
                       "kind": ["F", "B"], "mb": [0, 0], "chunk": [0, 0], "start_ms": [0.0, 1.123456789],
                       "end_ms": [1.123456789, 3.0], "dur_ms": [1.123456789, 1.876543211], "mid_ms": [0.56, 2.06],
                       "label": ["0", "0"]})
    spec = charts.gantt_chart(df, ["rank 0 · compute"], False)
    rows = _values(spec)
    assert set(rows[0]) == {"row", "phase", "start_ms", "end_ms", "mb", "chunk", "dur_ms"}
    assert rows[1]["start_ms"] == 1.1235 and spec["usermeta"]["embedOptions"]["renderer"] == "canvas"
    assert spec["mark"]["aria"] is False  # no per-mark ARIA description strings: a canvas has no use for them
    labelled = _values(charts.gantt_chart(df, ["rank 0 · compute"], False, show_labels=True))
    assert {"mid_ms", "label"} <= set(labelled[0])


def test_gantt_tooltip_names_the_phase_and_no_negative_micro_batch():
    """A span's tooltip read "phase F" / "phase tp_comm" (the engine's kind code, where the legend
    says "forward compute") and "micro-batch −1, chunk −1" on the optimizer step and the DP
    collectives, which belong to no micro-batch: the legend's words and "—" instead."""
    from ui.timeline_data import gantt_frame

    spans = pd.DataFrame({"rank": [0, 0, 0, 0], "stream": ["compute", "compute", "dp", "compute"],
                          "kind": ["F", "tp_comm", "dp_comm", "optimizer"], "mb": [3, 3, -1, -1], "chunk": [1, 1, -1, -1],
                          "start_s": [0.0, 0.001, 0.0, 0.004], "end_s": [0.001, 0.002, 0.003, 0.005]})
    gdf, aggregated, rows = gantt_frame(spans)
    assert not aggregated
    spec = charts.gantt_chart(gdf, rows, False)
    tooltip = {t["field"]: t.get("title", t["field"]) for t in spec["encoding"]["tooltip"]}
    assert tooltip["phase"] == "phase" and "kind" not in tooltip
    got = {r["phase"]: (r["mb"], r["chunk"]) for r in _values(spec)}
    assert got == {"forward compute": ("3", "1"), "TP comm (exposed)": ("3", "1"),
                   "DP comm (side stream)": ("—", "—"), "optimizer": ("—", "—")}


def test_aggregated_gantt_tooltip_is_its_named_columns():
    """The binned Gantt's tooltip is the data of a faint bar under each stacked bar (no
    per-bar tooltip expression): its columns are named as a reader wants them, the phases' shares
    in words, and nothing else (no sort index, no Arrow index, no stacking geometry) rides along."""
    df = pd.DataFrame({"row": ["rank 0 · compute"] * 2 + ["rank 0 · dp"], "category": ["backward_compute", "tp_comm", "dp_comm"],
                       "share": [0.6012, 0.2522, 0.2], "below": [0.0, 0.6012, 0.0], "occupancy": [0.8534, 0.8534, 0.2],
                       "spans": [12, 12, 1], "start_ms": [0.0, 0.0, 2.0], "end_ms": [2.0, 2.0, 3.123456789]})
    spec = charts.gantt_chart(df, ["rank 0 · compute", "rank 0 · dp"], True, x_domain=(0.0, 4.0))
    hover, stack = spec["layer"]  # the stack over its grey bars (the tooltip's)
    assert "tooltip" not in stack["mark"] and "tooltip" not in stack["encoding"]
    assert hover["mark"]["tooltip"] == {"content": "data"} and "tooltip" not in hover["encoding"]
    assert "sort" not in hover["encoding"]["y"] and hover["encoding"]["y"]["scale"]["domain"] == ["rank 0 · compute", "rank 0 · dp"]
    rows = hover["data"]["values"]
    assert [set(r) for r in rows] == [{"row", "phases", "start ms", "end ms", "busy %", "spans"}] * 2
    assert rows[0]["phases"] == "backward compute 60.1 %, TP comm (exposed) 25.2 %" and rows[0]["busy %"] == 85.3
    assert rows[1]["end ms"] == 3.1235 and rows[1]["phases"].startswith("DP comm")
    assert [r["phase"] for r in stack["data"]["values"]] == ["backward compute", "TP comm (exposed)", "DP comm (exposed)"]


def test_text_marks_take_the_viewers_theme_colour(monkeypatch):
    """The MFU waterfall's values were black on the dark theme: ``chart_cache.themed`` sets the
    text marks without a colour of their own to Streamlit's text colour for the theme in use."""
    from types import SimpleNamespace

    import streamlit as st

    from ui import chart_cache
    from ui.charts import mfu_waterfall_chart
    from ui.share import size_canonical

    from simengine import api

    r = api.estimate(size_canonical("medium")).model_dump(mode="json")
    spec = mfu_waterfall_chart(r)
    for kind, colour in (("dark", "#fafafa"), ("light", "#31333f")):
        monkeypatch.setattr(st, "context", SimpleNamespace(theme=SimpleNamespace(type=kind)))
        out = chart_cache.themed(spec)
        assert out["config"]["text"]["color"] == colour and out["layer"] == spec["layer"]
    assert "config" not in spec or "text" not in spec.get("config", {})   # the cached spec is not changed
