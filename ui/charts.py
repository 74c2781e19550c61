"""Vega-Lite chart specs (pure: data in, spec dict out), drawn with ``st.vega_lite_chart``.
Colours come from ``ui.theme``.

Plain dicts, not Altair objects: building an Altair chart and converting it (``to_dict``, which
deep-copies and hashes every schema object) cost 30-70 ms of server CPU per Estimate or
Timeline rerun on the ``medium`` preset (cProfile of the page script,
``benchmarks/bench_studio.py --profile``) for specs of a few kB; these builders write the same
Vega-Lite (v6 schema) directly. ``tests/test_app_ui_units.py`` checks each against the schema.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np
import pandas as pd

from .labels import common_limit_gib
from .theme import MEMORY_COLORS, TIME_COLORS, TIME_LABELS, scale, span_label

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"
_FONT = {"labelFontSize": 11, "titleFontSize": 11}
# legend labels up to 320 px (Vega-Lite's default is 160)
CONFIG = {"view": {"continuousWidth": 300, "continuousHeight": 300, "strokeWidth": 0}, "axis": _FONT,
          "legend": {**_FONT, "labelLimit": 320}}
# Charts of thousands of marks are drawn on a canvas: Vega's SVG renderer builds one DOM node per
# mark (a Timeline Gantt of ~1,300 bins and its ~5,000-point memory curves cost the browser
# ~2× the CPU in SVG). Streamlit passes ``usermeta.embedOptions`` to vega-embed.
CANVAS = {"embedOptions": {"renderer": "canvas"}}
# A canvas has no per-mark accessibility tree, yet Vega-Lite gives every mark an ARIA
# ``description``: a string of every encoded field, formatted, built per mark on each encode
# pass (vega-embed's compiled spec; with Streamlit's CSP-safe expression interpreter that is
# about as much per-mark work as the tooltip). Canvas marks opt out (Vega-Lite mark ``aria``).
NO_ARIA = {"aria": False}
GANTT_DECIMALS = 4  # ms: 0.1 µs, finer than the 3 decimals the tooltips show
# The binned Gantt's tooltip: a bar's row, its phases' shares of its time in words, its times,
# busy % (the share some span is running, in percent to 0.1) and the spans touching it.
BINNED_TOOLTIP = ["row", "phases", "start ms", "end ms", "busy %", "spans"]
ROW_PAD = 0.1  # of a binned row's height, left free above and below its stacked bar (rows stay apart)
ROW_PX = 22    # a Gantt row's height
IDLE_GREY = "#8c8c8c"  # a binned bar's idle rest, faint (the grey of "other" in ui/theme.py)
# three a row: six side-stream labels of up to 320 px ran past a 1,280 px window's chart; no symbol
# stroke: the bars' grey rim framed each swatch and washed out the side-stream tints
GANTT_LEGEND = {"orient": "bottom", "title": None, "columns": 3, "symbolStrokeWidth": 0, "symbolOpacity": 1}
# Zoom and pan along x (mouse wheel, drag): an interval selection bound to the scales
# (Vega-Lite "bind": "scales", what Altair's ``interactive(bind_y=False)`` writes).
ZOOM_X = {"name": "zoom_x", "select": {"type": "interval", "encodings": ["x"]}, "bind": "scales"}

Spec = dict[str, Any]


def rows_of(df: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as JSON-ready dicts (missing values as None, as Altair's sanitizer does)."""
    out = df.astype(object).where(df.notna(), None) if df.isna().to_numpy().any() else df
    return out.to_dict(orient="records")


def dataset(rows: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(name, rows): named by a hash of the rows, as Altair names its datasets, so a chart's spec
    is the same text for the same data (Streamlit keeps the chart's identity across reruns)."""
    digest = hashlib.md5(json.dumps(rows, sort_keys=True, default=str).encode(), usedforsecurity=False).hexdigest()
    return f"data-{digest}", rows


def top(datasets: list[tuple[str, list[dict[str, Any]]]], body: Spec) -> Spec:
    """A top-level spec: schema, the shared config, the named datasets and the chart."""
    return {"$schema": SCHEMA, "config": CONFIG, "datasets": dict(datasets), **body}


def field(name: str, kind: str, **kw: Any) -> Spec:
    """One encoding channel: ``field("ms", "quantitative", title=...)``."""
    return {"field": name, "type": kind, **kw}


def tip(name: str, kind: str, fmt: str | None = None, title: str | None = None) -> Spec:
    return {**field(name, kind), **({"format": fmt} if fmt else {}), **({"title": title} if title else {})}


def colour(name: str, domain: list[str], rng: list[str], legend: Spec | None) -> Spec:
    return field(name, "nominal", scale={"domain": domain, "range": rng}, legend=legend)


def breakdown_frame(breakdown_s: dict[str, float], step_s: float) -> pd.DataFrame:
    rows = [{"category": k, "label": TIME_LABELS.get(k, k), "ms": v * 1e3,
             "share": (v / step_s if step_s > 0 else 0.0)} for k, v in breakdown_s.items() if v > 0]
    df = pd.DataFrame(rows, columns=["category", "label", "ms", "share"])
    order = {k: i for i, k in enumerate(TIME_COLORS)}
    return df.assign(_o=df["category"].map(lambda c: order.get(c, 99))).sort_values("_o").drop(columns="_o")


def time_breakdown_chart(breakdown_s: dict[str, float], step_s: float) -> Spec:
    """One horizontal bar per category: where the step time goes on the critical rank."""
    df = breakdown_frame(breakdown_s, step_s)
    domain, rng = scale(list(df["category"]))
    return top([data := dataset(rows_of(df))], {
        "data": {"name": data[0]}, "mark": {"type": "bar"}, "encoding": {
            "y": field("label", "nominal", sort=list(df["label"]), title=None),
            "x": field("ms", "quantitative", title="time per step [ms]"),
            "color": colour("category", domain, rng, None),
            "tooltip": [tip("label", "nominal", title="category"), tip("ms", "quantitative", ",.2f", "ms"),
                        tip("share", "quantitative", ".1%", "share of step")]},
        "height": {"step": 24}, "title": "Step time breakdown (critical rank)"})


PEAK_STEP = "BF16 peak"   # MFU's basis for every precision (simengine/report.py ``mfu``)
ABOVE_PEAK = "kernels above BF16 peak"


def mfu_waterfall_frame(report: dict[str, Any]) -> pd.DataFrame:
    """The BF16 peak (100 %) minus each loss, as shares of the step, ending at the report's MFU.

    Losses: every non-(forward/backward) breakdown entry (bubble, exposed comm, optimizer,
    recompute) over the step time, then 'kernels below peak' = forward+backward time share − MFU,
    so the bars add up exactly to the MFU the engine reports.
    """
    step = float(report["step_time_s"])
    bd = report.get("breakdown_s", {}) or {}
    mfu = float(report["mfu"])
    rows = [{"step": PEAK_STEP, "category": "peak", "start": 0.0, "end": 1.0, "value": 1.0}]
    level = 1.0
    fb = sum(v for k, v in bd.items() if k in ("forward_compute", "backward_compute"))
    losses = [(k, v / step) for k, v in bd.items() if k not in ("forward_compute", "backward_compute") and v > 0]
    losses.sort(key=lambda kv: -kv[1])
    losses.append(("kernel_efficiency", fb / step - mfu))
    for k, share in losses:
        if abs(share) < 5e-4:  # below 0.05 %: not worth a bar
            continue
        # FP8 / NVFP4 GEMMs can outrun the BF16 peak MFU is counted against: then a gain, named so
        name = ABOVE_PEAK if k == "kernel_efficiency" and share < 0 else TIME_LABELS.get(k, k)
        rows.append({"step": name, "category": k, "start": level - share, "end": level, "value": -share})
        level -= share
    rows.append({"step": "MFU", "category": "mfu", "start": 0.0, "end": mfu, "value": mfu})
    df = pd.DataFrame(rows)
    df["top"] = df[["start", "end"]].max(axis=1)   # a label sits above its bar, a gain's too
    return df


def mfu_waterfall_chart(report: dict[str, Any]) -> Spec:
    df = mfu_waterfall_frame(report)
    colors = dict(TIME_COLORS, peak="#4d4d4d", mfu="#2f6f3e")
    domain, rng = scale(list(df["category"]), colors)
    x = field("step", "nominal", sort=list(df["step"]), title=None,
              axis={"labelAngle": -35, "labelLimit": 150, "labelOverlap": False})
    bars = {"mark": {"type": "bar", "size": 28}, "encoding": {
        "x": x, "y": field("start", "quantitative", title="share of the dense BF16 peak", axis={"format": "%"}),
        "y2": {"field": "end"}, "color": colour("category", domain, rng, None),
        "tooltip": [tip("step", "nominal"), tip("value", "quantitative", "+.1%", "change")]}}
    text = {"mark": {"type": "text", "dy": -6, "fontSize": 10}, "encoding": {
        "x": x, "y": field("top", "quantitative"), "text": field("value", "quantitative", format="+.1%")}}
    return top([data := dataset(rows_of(df))], {"data": {"name": data[0]}, "layer": [bars, text], "height": 280,
                                                "title": "MFU loss waterfall"})


def memory_frame(memory_by_stage: list[dict[str, Any]]) -> pd.DataFrame:
    rows = []
    for m in memory_by_stage:
        for cat in MEMORY_COLORS:
            key = f"{cat}_gib"
            if key in m:
                rows.append({"stage": f"stage {m['stage']}", "stage_idx": m["stage"], "category": cat,
                             "GiB": float(m[key])})
    return pd.DataFrame(rows, columns=["stage", "stage_idx", "category", "GiB"])


def memory_stage_chart(memory_by_stage: list[dict[str, Any]], capacity_gib: float) -> Spec:
    """Stacked allocated memory per pipeline stage, reserved memory tick and the line a reserved
    tick must stay left of to fit: ``capacity_gib``, the GPU's memory less what lies outside
    PyTorch (``labels.reserved_limit_gib``; the fit rule, simengine/fit.py)."""
    df = memory_frame(memory_by_stage)
    stages = [f"stage {m['stage']}" for m in memory_by_stage]
    domain, rng = scale(list(MEMORY_COLORS), MEMORY_COLORS)
    order = {c: i for i, c in enumerate(MEMORY_COLORS)}
    df["order"] = df["category"].map(order)
    y = field("stage", "nominal", sort=stages, title=None)
    parts = dataset(rows_of(df))
    res = dataset([{"stage": f"stage {m['stage']}", "reserved": m.get("reserved_gib", 0.0)} for m in memory_by_stage])
    cap = dataset([{"cap": capacity_gib}])
    bars = {"data": {"name": parts[0]}, "mark": {"type": "bar"}, "encoding": {
        "y": y, "x": field("GiB", "quantitative", aggregate="sum", title="memory per GPU [GiB]"),
        "color": colour("category", domain, rng, {"orient": "bottom", "title": None, "columns": 3}),
        "order": field("order", "quantitative"),
        "tooltip": [tip("stage", "nominal"), tip("category", "nominal"), tip("GiB", "quantitative", ",.2f")]}}
    tick = {"data": {"name": res[0]}, "mark": {"type": "tick", "color": "#333", "thickness": 2, "size": 24},
            "encoding": {"y": field("stage", "nominal", sort=stages), "x": field("reserved", "quantitative"),
                         "tooltip": [tip("reserved", "quantitative", ",.2f", "reserved GiB")]}}
    rule = {"data": {"name": cap[0]}, "mark": {"type": "rule", "color": "#111111", "strokeDash": [5, 3], "size": 2},
            "encoding": {"x": field("cap", "quantitative"),
                         "tooltip": [tip("cap", "quantitative", ",.1f", "most a stage may reserve [GiB]")]}}
    # the key in a subtitle and the legend in rows of three: at 1,280 px the one-line title was cut
    # to "(tick = reser…" and the legend's last entry to "othe"
    return top([parts, res, cap], {"layer": [bars, tick, rule], "height": {"step": 30},
                                   "title": {"text": "Peak memory per pipeline stage",
                                             "subtitle": "tick = reserved, dashed = capacity − memory outside PyTorch"}})


def compare_chart(rows: list[dict[str, Any]]) -> Spec:
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
    return top([d := dataset(rows_of(df))], {"data": {"name": d[0]}, "mark": {"type": "bar"}, "encoding": {
        "y": field("scenario", "nominal", title=None, sort=[r["label"] for r in rows], axis={"labelLimit": 260}),
        "x": field("ms", "quantitative", aggregate="sum", title="step time [ms]"),
        "color": colour("label", domain, rng, {"orient": "bottom", "title": None, "columns": 5}),
        "order": field("order", "quantitative"),
        "tooltip": [tip("scenario", "nominal"), tip("label", "nominal"), tip("ms", "quantitative", ",.2f")]},
        "height": {"step": 30}, "title": "Step time by category"})


def gantt_chart(df: pd.DataFrame, rows: list[str], aggregated: bool, x_domain: tuple[float, float] | None = None,
                show_labels: bool = False) -> Spec:
    """Rank × stream rows, one rect per span coloured by phase (``binned_gantt_chart`` when
    ``aggregated``). ``df`` columns: row, category, start_ms, end_ms, mb, chunk, dur_ms (+ mid_ms,
    label for the labels). Zoom/pan along time with the mouse wheel / drag (``ZOOM_X``)."""
    if aggregated:
        return binned_gantt_chart(df, rows, x_domain)
    cats = list(df["category"].unique()) if len(df) else []
    domain, rng = scale(cats)
    df = _gantt_columns(df.assign(phase=df["category"].map(span_label)), show_labels)
    x_scale = {"scale": {"domain": list(x_domain)}} if x_domain else {}
    # the phase in the legend's words (it showed the span's kind code: "F", "tp_comm"), and "—"
    # for a span of no micro-batch or chunk (optimizer, DP collectives: they read "−1")
    enc: Spec = {"y": field("row", "nominal", sort=rows, title=None, axis={"labelLimit": 160}),
                 "x": field("start_ms", "quantitative", title="time [ms]", **x_scale), "x2": {"field": "end_ms"},
                 "color": colour("phase", [span_label(c) for c in domain], rng, GANTT_LEGEND),
                 "tooltip": [tip("row", "nominal"), tip("phase", "nominal"),
                             tip("mb", "nominal", title="micro-batch"), tip("chunk", "nominal"),
                             tip("start_ms", "quantitative", ",.3f", "start [ms]"), tip("end_ms", "quantitative", ",.3f", "end [ms]"),
                             tip("dur_ms", "quantitative", ",.3f", "duration [ms]")]}
    bars = {"mark": {"type": "bar", **NO_ARIA, "stroke": "#808080", "strokeOpacity": 0.35, "strokeWidth": 0.3},
            "encoding": enc}
    body: Spec = {"height": {"step": ROW_PX}, "usermeta": CANVAS}
    if show_labels:
        text = {"transform": [{"filter": "datum.label != ''"}],
                "mark": {"type": "text", **NO_ARIA, "fontSize": 9, "color": "#111", "align": "center"},
                "encoding": {"y": field("row", "nominal", sort=rows),
                             "x": field("mid_ms", "quantitative", **x_scale), "text": field("label", "nominal")}}
        body["layer"] = [{**bars, "params": [ZOOM_X]}, text]
    else:
        body.update(bars, params=[ZOOM_X])
    return top([d := dataset(rows_of(df))], {"data": {"name": d[0]}, **body})


def binned_gantt_chart(df: pd.DataFrame, rows: list[str], x_domain: tuple[float, float] | None = None) -> Spec:
    """The binned Gantt (``timeline_data._binned``): in each row's bar the phases' shares of its
    time stacked from the row's foot, over a faint grey bar (the rest: idle) that carries the
    tooltip (``BINNED_TOOLTIP``) and the zoom; the stack has neither, so Vega-Lite makes it
    non-interactive and the pointer reaches the bar beneath. The stack's y axis is the row's
    number (row i spans [i, i + 1]), the grey bars' the row bands: two independent y scales over
    one height, the bands without padding, so they line up. The tooltip is the bar's data: a
    tooltip encoding is a formatted object built for every bar on every encode pass, per-bar work
    of the order of drawing it. Data inline in each layer: Streamlit sends top-level data as an
    Arrow table, whose index column the browser adds to each row (and so to a data tooltip); rows
    by an explicit domain, not a sort array (which adds a sort-index field to the data)."""
    domain, rng = scale(list(df["category"].unique()))
    x = field("start ms", "quantitative", title="time [ms]", **({"scale": {"domain": list(x_domain)}} if x_domain else {}))
    stack = {"data": {"values": _stacked(df, rows)}, "mark": {"type": "bar", **NO_ARIA, "strokeWidth": 0},
             "encoding": {"x": x, "x2": {"field": "end ms"}, "y2": {"field": "y1"},
                          "y": field("y0", "quantitative", axis=None,
                                     scale={"domain": [0, len(rows)], "reverse": True, "nice": False, "zero": False}),
                          "color": colour("phase", [span_label(c) for c in domain], rng, GANTT_LEGEND)}}
    hover = {"data": {"values": _binned_bars(df)}, "params": [ZOOM_X],
             "mark": {"type": "bar", **NO_ARIA, "fill": IDLE_GREY, "fillOpacity": 0.15, "height": {"band": 1 - 2 * ROW_PAD},
                      "tooltip": {"content": "data"}},
             "encoding": {"x": x, "x2": {"field": "end ms"},
                          "y": field("row", "nominal", title=None, axis={"labelLimit": 160, "orient": "left"},
                                     scale={"domain": rows, "paddingInner": 0, "paddingOuter": 0})}}
    # a height step is dropped for the stack's continuous y: the plot's height is set, and only the
    # width fits the page (Streamlit's theme fits both, so the axis and legend shrank the rows)
    return {"$schema": SCHEMA, "config": CONFIG, "height": ROW_PX * max(len(rows), 1), "usermeta": CANVAS,
            "autosize": {"type": "fit-x", "contains": "padding"},
            "resolve": {"scale": {"y": "independent"}}, "layer": [hover, stack]}


def _stacked(df: pd.DataFrame, rows: list[str]) -> list[dict[str, Any]]:
    """Each (bar, phase) as the stack draws it: row i's bar fills [i + ROW_PAD, i + 1 − ROW_PAD]
    from its foot (i + 1 − ROW_PAD), the phase from ``below`` to ``below + share`` of that height."""
    foot = df["row"].map({r: k for k, r in enumerate(rows)}).to_numpy(dtype=float) + 1 - ROW_PAD
    height, below, share = 1 - 2 * ROW_PAD, df["below"].to_numpy(dtype=float), df["share"].to_numpy(dtype=float)
    return _records({"phase": df["category"].map(span_label).tolist(), "start ms": _ms(df["start_ms"]).tolist(),
                     "end ms": _ms(df["end_ms"]).tolist(), "y0": np.round(foot - height * below, 4).tolist(),
                     "y1": np.round(foot - height * (below + share), 4).tolist()})


def _binned_bars(df: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per binned bar, named as its tooltip shows them (``BINNED_TOOLTIP``): the phases'
    shares of its time in words, largest first ("backward compute 70.1 %, TP comm (exposed) 26.9 %")."""
    d = df.sort_values(["row", "start_ms", "share"], ascending=[True, True, False], kind="stable")
    out: list[dict[str, Any]] = []
    for row, start, end, busy, spans, cat, share in zip(
            d["row"].tolist(), _ms(d["start_ms"]).tolist(), _ms(d["end_ms"]).tolist(), d["occupancy"].tolist(),
            d["spans"].tolist(), d["category"].tolist(), d["share"].tolist()):
        words = f"{span_label(cat)} {100 * share:.1f} %"
        if out and out[-1]["row"] == row and out[-1]["start ms"] == start:
            out[-1]["phases"] += ", " + words
        else:
            out.append({"row": row, "phases": words, "start ms": start, "end ms": end,
                        "busy %": round(100 * busy, 1), "spans": int(spans)})
    return out


def _records(columns: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Rows of equal-length columns as dicts (pandas' ``to_dict`` walks Arrow strings slowly)."""
    names = list(columns)
    return [dict(zip(names, values)) for values in zip(*columns.values())]


def _ms(values: pd.Series) -> pd.Series:
    return values.astype(float).round(GANTT_DECIMALS)


def _gantt_columns(df: pd.DataFrame, labels: bool) -> pd.DataFrame:
    """Only the columns the Gantt encodes, times rounded: the chart's data is inlined in the page
    (JSON), so every column and digit is parsed by the browser once per bar."""
    cols = ["row", "phase", "start_ms", "end_ms", "mb", "chunk", "dur_ms"] + (["mid_ms", "label"] if labels else [])
    out = df[[c for c in cols if c in df.columns]]
    times = [c for c in ("start_ms", "end_ms", "dur_ms", "mid_ms") if c in out.columns]
    out = out.assign(**{c: _ms(out[c]) for c in times})
    # the tooltip's text: a negative number is the engine's "none" (optimizer, DP collectives)
    return out.assign(**{c: _index_text(out[c]) for c in ("mb", "chunk") if c in out.columns})


def _index_text(values: pd.Series) -> list[str]:
    """A micro-batch or chunk number as the tooltip shows it: "—" where the span has none (< 0)."""
    nums = pd.to_numeric(values, errors="coerce")
    return [str(int(v)) if v >= 0 else "—" for v in nums.fillna(-1)]


def _rank_colour(n: int) -> Spec:
    """The memory curves' colour: up to 10 ranks one colour each, listed on the right; more as a
    gradient over the rank (category10 repeats beyond 10, and a legend of 16+ entries below the
    plot ate its 260 px: 50 px left at pp 16, none at pp 35), one line per rank (``detail``)."""
    if n <= 10:
        return {"color": field("rank", "nominal", title="pp rank", legend={"orient": "right"})}
    return {"color": field("rank", "quantitative", title="pp rank", scale={"scheme": "viridis"},
                           legend={"orient": "right", "format": "d", "gradientLength": 150}),
            "detail": field("rank", "nominal")}


def memory_time_chart(df: pd.DataFrame, limits: dict[int, float] | float | None, end_ms: float | None = None) -> Spec:
    """Allocated memory over the step per rank (step-after lines) and the allocated limit: the most
    a rank may allocate and still fit (ui/labels.py ``rank_limits_gib``). ``limits`` per rank draws
    one dashed line per rank in its curve's colour where the ranks' limits differ (other streams'
    pools differ by stage), one black line where they are the same; a number is every rank's."""
    df = df[["rank", "t_ms", "GiB"]].assign(t_ms=df["t_ms"].astype(float).round(GANTT_DECIMALS),
                                            GiB=df["GiB"].astype(float).round(4))  # 0.1 MiB; tooltips show 0.01 GiB
    curves = dataset(rows_of(df))
    colours = _rank_colour(df["rank"].nunique())
    line = {"data": {"name": curves[0]}, "mark": {"type": "line", **NO_ARIA, "interpolate": "step-after", "strokeWidth": 1.6},
            "params": [ZOOM_X], "encoding": {
                # the axis ends where the step does (a "nice" axis ran to 20,000 ms for an 18,694 ms step)
                "x": field("t_ms", "quantitative", title="time [ms]",
                           **({"scale": {"domain": [0, end_ms], "nice": False}} if end_ms else {})),
                "y": field("GiB", "quantitative", title="allocated [GiB]"), **colours,
                "tooltip": [tip("rank", "nominal"), tip("t_ms", "quantitative", ",.2f"), tip("GiB", "quantitative", ",.2f")]}}
    layers, datasets = [line], [curves]
    shared = _common_limit(limits)
    if limits:
        rows = [{"limit": shared}] if shared is not None else [{"rank": r, "limit": v} for r, v in sorted(limits.items())]
        cap = dataset(rows)
        datasets.append(cap)
        layers.append(_limit_rule(cap[0], None if shared is not None else colours["color"]))
    which = "the allocated limit" if shared is not None or not limits else "each rank's allocated limit, in its colour"
    return top(datasets, {"layer": layers, "height": 260, "title": f"Memory over the step (dashed = {which})",
                          "usermeta": CANVAS})


def _common_limit(limits: dict[int, float] | float | None) -> float | None:
    """The one limit line to draw for every rank, or None (none, or one per rank)."""
    if isinstance(limits, dict):
        return common_limit_gib(limits)
    return float(limits) if limits else None


def _limit_rule(data: str, colour: Spec | None) -> Spec:
    """Dashed horizontal rules at ``limit``: black, or in the rank's colour (``colour``)."""
    what = "most this rank may allocate [GiB]" if colour else "most a rank may allocate [GiB]"
    tips = ([tip("rank", "nominal")] if colour else []) + [tip("limit", "quantitative", ",.2f", what)]
    mark = {"type": "rule", "strokeDash": [5, 3], **({} if colour else {"color": "#111111"})}
    return {"data": {"name": data}, "mark": mark,
            "encoding": {"y": field("limit", "quantitative"), **({"color": colour} if colour else {}), "tooltip": tips}}
