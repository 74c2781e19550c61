"""Pure UI helpers: schema-driven fields cover every spec field with a unit and help, errors
map to fields, charts build, timelines aggregate past 5k spans, report downloads."""

from __future__ import annotations

import csv
import functools
import io
import json

import altair as alt
import numpy as np
import pandas as pd
import pytest

from simengine.api import estimate, simulate
from simengine.config import ModelSpec, StrategySpec, SystemSpec
from simengine.presets import size_scenario
from ui import charts
from ui.config_io import validate_section
from ui.derived import model_figures, scenario_figures, system_figures
from ui.report_io import budget, compare_rows, report_csv
from ui.schema import OTHER_OK, fields_of, grouped_fields, table_fields, text_fields
from ui.share import size_canonical
from ui.theme import TIME_COLORS, color_of, span_category, span_label, tint
from ui.timeline_data import gantt_frame, memory_frame, timeline_tables
from ui.units import fmt_count, fmt_time, unit_for

SPECS = {"model": ModelSpec, "system": SystemSpec, "strategy": StrategySpec}


@functools.cache
def _vega_lite_validator():
    import jsonschema

    return jsonschema.Draft7Validator(alt.vegalite.v6.schema.core.load_schema())


def valid_spec(spec: dict) -> dict:
    """The spec, after checking it against the Vega-Lite v6 JSON schema (the one Altair ships)."""
    errors = [e.message[:200] for e in _vega_lite_validator().iter_errors(spec)]
    assert not errors, errors
    json.dumps(spec, allow_nan=False)  # the page sends it as JSON
    return spec


@pytest.mark.parametrize("section", SPECS)
def test_every_field_gets_exactly_one_widget(section):
    cls = SPECS[section]
    leaves = {m.dotted for m in fields_of(cls)}
    shown = [m.dotted for _, ms in grouped_fields(section, cls) for m in ms]
    shown += [m.dotted for m in text_fields(cls)] + [m.dotted for m in table_fields(cls)]
    assert sorted(shown) == sorted(leaves)
    assert len(shown) == len(set(shown))


@pytest.mark.parametrize("section", SPECS)
def test_no_field_falls_into_other(section):
    """Every spec field sits in a named group (a new flag such as moe_shared_expert_overlap must be
    placed, not left in "Other"), unless ui/schema.OTHER_OK lists it on purpose."""
    groups = dict(grouped_fields(section, SPECS[section]))
    stray = sorted(m.dotted for m in groups.get("Other", []) if m.dotted not in OTHER_OK)
    assert stray == []


def test_moe_and_overlap_flags_in_their_groups():
    groups = {t: {m.dotted for m in ms} for t, ms in grouped_fields("strategy", StrategySpec)}
    assert {"ep", "etp", "moe_shared_expert_overlap", "overlap_moe_expert_parallel_comm",
            "moe_dispatch_dtype"} <= groups["MoE and expert parallelism"]
    assert "overlap_p2p_comm" in groups["Schedule and overlap"]


def test_groups_of_defaults_fold_on_the_medium_preset():
    """The groups a size preset leaves at their defaults fold (their widgets are then not sent):
    the Model page shows the dimensions, not the Llama-style variants; the Strategy page the
    layout, batch and schedule, not the tuning knobs."""
    from ui.schema import get_in

    cfg = size_canonical("medium")
    for section, spec, core in (("model", ModelSpec, "Architecture"), ("strategy", StrategySpec, "Parallelism")):
        open_titles = [t for t, ms in grouped_fields(section, spec)
                       if t == core or not all(m.at_default(get_in(cfg[section], m.path)) for m in ms)]
        shown = sum(len(ms) for t, ms in grouped_fields(section, spec) if t in open_titles)
        assert shown <= {"model": 9, "strategy": 17}[section], (section, open_titles)


@pytest.mark.parametrize("section", SPECS)
def test_fields_carry_help_bounds_and_choices(section):
    for m in fields_of(SPECS[section]):
        assert m.description, m.dotted
        assert m.help_text().startswith(m.description)
        if m.kind in ("int", "float") and m.name not in ("name",):
            assert m.bounds_text(), m.dotted  # every number in the specs is bounded
        if m.kind == "choice":
            assert m.choices and all(str(c) in m.help_text() for c in m.choices)


def test_units_in_labels():
    fm = {m.dotted: m for m in fields_of(SystemSpec)}
    assert fm["gpu.memory_gib"].label == "gpu.memory_gib [GiB]"
    assert fm["scale_out.bandwidth_gbs"].label == "scale_out.bandwidth_gbs [GB/s]"
    assert fm["gpu.peak_tflops.bf16"].label.endswith("[TFLOP/s]")
    assert unit_for("latency_us") == "µs" and unit_for("seq_len") == "tokens"
    numeric = [m for cls in SPECS.values() for m in fields_of(cls) if m.kind in ("int", "float")]
    assert all(m.unit for m in numeric), [m.dotted for m in numeric if not m.unit]


def test_locate_maps_paths_messages_and_table_rows():
    from ui.form import locate

    names = ["num_attention_heads", "num_kv_heads", "attention", "gpu.memory_gib", "efficiency.gemm_table"]
    out = locate("model", [("model", "num_attention_heads=32 is not a multiple of num_kv_heads=5")], names)
    assert set(out) == {"num_attention_heads", "num_kv_heads"}
    out = locate("system", [("system.gpu.memory_gib", "Input should be greater than 0"),
                            ("system.efficiency.gemm_table.2.m", "Input should be greater than or equal to 1"),
                            ("system", "something without a field")], names)
    assert out["gpu.memory_gib"] == ["Input should be greater than 0"]
    assert out["efficiency.gemm_table"][0].startswith("efficiency.gemm_table.2.m:")
    assert out[""] == ["something without a field"]


def test_validate_section_reports_dotted_paths():
    bad = dict(size_canonical("small")["system"])
    bad["gpu"] = dict(bad["gpu"], memory_gib=-1)
    canon, issues = validate_section("system", bad)
    assert canon is None and issues[0][0] == "system.gpu.memory_gib"
    assert validate_section("strategy", [1])[1][0][1].startswith("strategy must be a JSON object")


def test_derived_figures():
    cfg = size_canonical("small")
    m = model_figures(cfg["model"])
    assert round(m["params_total"] / 1e9, 2) == 8.03
    s = system_figures(cfg["system"])
    assert s["peak_bf16_pflops"] == pytest.approx(8 * 989 / 1e3) and s["cost_per_hour_usd"] == pytest.approx(8 * 2.99)
    x = scenario_figures(cfg)
    assert x["dp"] == 4 and x["num_microbatches"] == 16 and x["tokens_per_step"] == 64 * 8192


@pytest.mark.parametrize("size", ["small", "medium", "large"])
def test_charts_build_for_real_reports(size):
    r = estimate(size_scenario(size)).model_dump(mode="json")
    for chart in (charts.time_breakdown_chart(r["breakdown_s"], r["step_time_s"]), charts.mfu_waterfall_chart(r),
                  charts.memory_stage_chart(r["memory_by_stage"], r["memory_capacity_gib"]),
                  charts.compare_chart([{"label": "a", "breakdown_s": r["breakdown_s"]}])):
        valid_spec(chart)
    wf = charts.mfu_waterfall_frame(r)
    assert wf.iloc[-1]["end"] == pytest.approx(r["mfu"])
    losses = wf[(wf["step"] != charts.PEAK_STEP) & (wf["step"] != "MFU")]
    # the bars add up: peak − losses lands on the reported MFU (tiny losses are not drawn)
    assert 1.0 + losses["value"].sum() == pytest.approx(r["mfu"], abs=0.01)


def test_the_per_stage_memory_line_is_what_a_stage_may_reserve():
    """The Estimate page's per-stage chart drew the raw capacity (79.1 GiB) as its dashed line: a
    stage reserving 78.0 GiB sat left of it while the page said "does not fit" (2.5 GiB lie outside
    PyTorch). The line is capacity − non_torch_gib, so every reserved tick right of it does not fit."""
    from ui.chart_cache import estimate_memory_spec
    from ui.config_io import dumps

    cfg = size_canonical("medium")
    cfg["strategy"]["seq_len"] = 16384
    r = estimate(cfg).model_dump(mode="json")
    gpu = cfg["system"]["gpu"]
    fullest = max(r["memory_by_stage"], key=lambda m: m["reserved_gib"])
    assert not r["fits"] and fullest["reserved_gib"] < gpu["memory_gib"]   # the case: over only with non_torch
    spec = estimate_memory_spec(dumps(cfg), r)
    line = next(d for d in spec["datasets"].values() if d and "cap" in d[0])[0]["cap"]
    assert line == pytest.approx(gpu["memory_gib"] - gpu["non_torch_gib"])
    for m in r["memory_by_stage"]:
        assert (m["reserved_gib"] <= line) == m["fits"]
    assert "outside PyTorch" in spec["title"]["subtitle"]


def test_colours_are_consistent_per_category():
    assert span_category("F") == "forward_compute" and span_category("tp_comm") == "tp_comm"
    assert span_category("dp_grad") == "dp_comm" and span_category("p2p") == "pp_comm"
    assert span_category("mystery") == "other" and "other" in TIME_COLORS


def test_gantt_legend_says_where_comm_runs():
    """A comm span on its own stream (comm, pp, dp) runs beside compute: its legend entry does not
    call it exposed (sim/metrics.py counts the part under compute as hidden); on the compute
    stream it is exposed in full and says so. Same colour either way."""
    tl = timeline_tables(simulate(size_canonical("medium")))
    for exact in (10**9, 0):  # individual spans, then time bins
        df, _, _ = gantt_frame(tl["spans"], max_spans=exact)
        off = df[~df["row"].str.endswith("· compute") & df["category"].str.contains("_comm")]
        on = df[df["row"].str.endswith("· compute") & df["category"].str.contains("_comm")]
        assert len(off) and len(on)
        off_labels = {span_label(c) for c in off["category"]}
        assert not any("exposed" in lab for lab in off_labels), off_labels
        assert all("exposed" in span_label(c) for c in on["category"])
        if exact == 0:  # the legend the page draws (binned: the exact frame is over Altair's row cap)
            spec = json.dumps(valid_spec(charts.gantt_chart(df, sorted(df["row"].unique()), True)))
            assert all(lab in spec for lab in off_labels) and "DP comm (exposed)" not in spec
    # the side-stream (hidden) variant: its kind's colour, visibly lighter (one colour for both read
    # as one legend entry)
    side, base = color_of(span_category("dp_grad", "dp")), color_of("dp_comm")
    assert side == tint(base) != base
    assert span_category("F", "comm") == "forward_compute"


def test_timeline_tables_and_aggregation():
    cfg = size_canonical("medium")
    cfg["strategy"]["global_batch_size"] = 512  # 256 micro-batches: far beyond 5k spans
    tl = timeline_tables(simulate(cfg))
    spans = tl["spans"]
    assert len(spans) > 5000 and set(tl["ranks"]["rank"]) == {0, 1, 2, 3}
    assert tl["step_time_s"] == pytest.approx(spans["end_s"].max(), rel=1e-6)
    df, aggregated, rows = gantt_frame(spans)
    assert aggregated and len(df) <= len(rows) * 320
    assert df["occupancy"].between(0, 1).all()
    part, agg2, _ = gantt_frame(spans, 0.0, tl["step_time_s"] / 50)
    assert not agg2 and len(part) > 0 and part["start_ms"].min() >= 0
    chart = charts.gantt_chart(part, rows, False, show_labels=True)
    assert valid_spec(chart)["layer"][1]["mark"]["type"] == "text"  # the micro-batch labels
    mem = memory_frame(tl["memory"], max_points=100)
    assert mem.groupby("rank").size().max() <= 101


def test_aggregated_gantt_merges_equal_neighbour_bins_and_keeps_the_busy_time():
    """Adjacent bins of a row whose phases' shares agree (to MERGE_STEP) are one bar: far fewer
    marks, the same picture, each phase's busy time conserved and stacked inside its bar."""
    from ui.timeline_data import GANTT_BINS, MERGE_STEP

    tl = timeline_tables(simulate(size_canonical("medium")))
    spans, step = tl["spans"], tl["step_time_s"]
    df, aggregated, rows = gantt_frame(spans, 0.0, step, max_spans=0)
    bars = df.drop_duplicates(["row", "start_ms"])
    assert aggregated and len(bars) < len(rows) * GANTT_BINS / 3  # medium: 200 bars for 2,565 touched bins
    width_ms = step * 1e3 / GANTT_BINS
    for _, g in bars.sort_values("start_ms").groupby("row"):
        starts, ends = g["start_ms"].to_numpy(), g["end_ms"].to_numpy()
        assert (starts[1:] >= ends[:-1] - 1e-9).all()  # no overlap inside a row
        n_bins = np.round((ends - starts) / width_ms)
        assert np.allclose((ends - starts) / width_ms, n_bins) and (n_bins >= 1).all()  # whole bins
    levels = df.assign(q=np.round(df["share"] / MERGE_STEP)).pivot_table(
        index=["row", "start_ms", "end_ms"], columns="category", values="q", fill_value=0).reset_index()
    for _, g in levels.sort_values("start_ms").groupby("row"):
        touching = np.isclose(g["start_ms"].to_numpy()[1:], g["end_ms"].to_numpy()[:-1])
        same = (g.iloc[1:, 3:].to_numpy() == g.iloc[:-1, 3:].to_numpy()).all(axis=1)
        assert not (touching & same).any()  # neighbours that look alike were merged
    top = df["below"] + df["share"]
    assert (df["share"] > 0).all() and (top <= 1 + 1e-9).all()  # stacked inside the bar
    assert np.allclose(top.groupby([df["row"], df["start_ms"]]).max(), bars.set_index(["row", "start_ms"])["occupancy"].sort_index())
    busy_ms = (df["share"] * (df["end_ms"] - df["start_ms"])).groupby(df["row"]).sum()
    exact = spans.assign(row="rank " + spans["rank"].astype(str) + " · " + spans["stream"].astype(str),
                         ms=(spans["end_s"] - spans["start_s"]) * 1e3).groupby("row")["ms"].sum()
    assert np.allclose(busy_ms.sort_index(), exact.reindex(busy_ms.index).sort_index(), rtol=0.02)
    assert (df["spans"] >= 1).all() and df["spans"].max() <= len(spans)


def test_binned_gantt_shows_each_phases_share_not_only_the_dominant_one():
    """The binned view coloured a bin by its dominant phase only, so the exposed TP collectives
    between the medium preset's kernels (27 % of its step) all but vanished (4 bars of 254). Each
    bar now stacks every phase's share of its time: the TP comm the chart draws on each rank's
    compute row is that rank's exposed TP time of sim/metrics.py (the Estimate page's figure)."""
    tl = timeline_tables(simulate(size_canonical("medium")))
    df, aggregated, rows = gantt_frame(tl["spans"])
    assert aggregated
    spec = valid_spec(charts.gantt_chart(df, rows, True))
    stack = next(layer for layer in spec["layer"] if layer["encoding"]["y"]["field"] == "y0")
    drawn = pd.DataFrame(stack["data"]["values"])
    drawn = drawn.assign(row=np.floor(drawn["y1"]).astype(int).map(dict(enumerate(rows))),
                         ms=(drawn["end ms"] - drawn["start ms"]) * (drawn["y0"] - drawn["y1"]) / (1 - 2 * charts.ROW_PAD))
    tp = drawn[drawn["phase"] == "TP comm (exposed)"].groupby("row")["ms"].sum()
    for _, rank in tl["ranks"].iterrows():
        want = 1e3 * rank["exposed:tp_comm"]
        assert tp[f"rank {rank['rank']} · compute"] == pytest.approx(want, rel=0.01), rank["rank"]
    assert tp.sum() / 1e3 / len(tl["ranks"]) > 0.25 * tl["step_time_s"]


def test_timeline_tables_are_defensive():
    class Odd:  # a timeline with renamed / missing attributes
        spans = [{"rank": 0, "stream": "compute", "name": "F", "start": 0.0, "end": 1.0}]
    t = timeline_tables(Odd())
    assert t["spans"].iloc[0]["kind"] == "F" and t["step_time_s"] == 1.0
    assert len(t["ranks"]) == 1 and t["ranks"].iloc[0]["bubble_fraction"] is None
    df, agg, rows = gantt_frame(t["spans"])
    assert rows == ["rank 0 · compute"] and not agg
    empty, _, _ = gantt_frame(pd.DataFrame(columns=["rank", "stream", "kind", "mb", "chunk", "start_s", "end_s"]))
    assert empty.empty


def test_report_downloads_and_budget():
    r = estimate(size_scenario("small")).model_dump(mode="json")
    rows = list(csv.reader(io.StringIO(report_csv(r))))
    assert rows[0] == ["section", "key", "value", "unit"]
    keys = {(a, b) for a, b, *_ in rows[1:]}
    assert ("headline", "step_time_s") in keys and ("breakdown", "forward_compute") in keys
    assert any(a.startswith("memory.stage0") for a, *_ in rows)
    # every number has its unit (mfu_causal, model_flops_per_token, critical_rank and a stage's
    # "fits" had none); the text fields (warnings, names) need none
    unitless = [(a, b) for a, b, v, u in rows[1:] if not u and a != "warning" and not _is_text(v)]
    assert not unitless, unitless
    b = budget(r, 1e12)
    assert b["seconds"] == pytest.approx(1e12 / r["tokens_per_s"])
    assert b["cost_usd"] == pytest.approx(r["cost_per_million_tokens_usd"] * 1e6)
    cmp = compare_rows([("x", size_canonical("small"), r)])
    assert cmp[0]["MFU [%]"] == pytest.approx(100 * r["mfu"])


def test_formatting():
    assert fmt_time(6.4328) == "6.433 s" and fmt_time(0.0123) == "12.30 ms" and fmt_time(3 * 86400) == "3.0 d"
    assert fmt_count(8.03e9) == "8.03 B" and fmt_count(float("nan")) == "—"
    assert isinstance(alt.Chart(pd.DataFrame({"a": [1]})).mark_bar().to_dict(), dict)


@pytest.mark.parametrize(("fmt", "value", "shown"), [
    ("fmt_time", 0.9999996, "1.000 s"), ("fmt_time", 999.96e-6, "1.00 ms"), ("fmt_time", 999.96e-9, "1.0 µs"),
    ("fmt_time", 119.99996, "2.0 min"), ("fmt_time", 7199.99, "2.0 h"), ("fmt_time", 172799.9, "2.0 d"),
    ("fmt_time", -0.9999996, "-1.000 s"), ("fmt_time", 0.999, "999.00 ms"), ("fmt_time", 119.96, "119.960 s"),
    ("fmt_count", 999_999, "1.00 M"), ("fmt_count", 999.996, "1.00 k"), ("fmt_count", 999_999_999, "1.00 B"),
    ("fmt_count", 999.996e12, "1.00 P"), ("fmt_count", 999, "999"), ("fmt_count", 999_994, "999.99 k"),
    ("fmt_flops", 999_999.6, "1.00 MFLOP"), ("fmt_flops", 999.996e15, "1.00 EFLOP"),
    ("fmt_usd", 999_999.996, "$1.00 M"), ("fmt_usd", 99.996, "$100"), ("fmt_usd", 0.99996, "$1.00"),
    ("fmt_flops_rate", 999.96, "1.0 EFLOP/s"), ("fmt_flops_rate", 0.99996, "1.0 PFLOP/s"),
])
def test_the_unit_is_chosen_after_rounding(fmt, value, shown):
    """fmt_time(0.9999996) read "1,000.00 ms" and fmt_count(999_999) "1,000.00 k": the unit was
    chosen before rounding. A figure that rounds up to the next unit's start is written in it."""
    from ui import units

    assert getattr(units, fmt)(value) == shown


def test_the_measured_collectives_table_labels_every_column(monkeypatch):
    """The System page's collective_table editor (ui/tables.py): every field of a measured fit has
    its own labelled column, with its unit where it has one (step_latency_us and group_size were
    shown as bare field names)."""
    import streamlit as st

    from ui import tables

    seen = {}

    def editor(df, **kw):
        seen.update(kw["column_config"])
        return df
    monkeypatch.setattr(st, "data_editor", editor)
    monkeypatch.setattr(tables.state, "generation", lambda section: 0)
    tables.collective_editor("system", [])
    assert set(seen) == set(tables.COLL_COLUMNS)
    labels = {k: v["label"] for k, v in seen.items()}
    assert labels["step_latency_us"].endswith("[µs]") and labels["latency_us"].endswith("[µs]")
    assert labels["group_size"].endswith("[ranks]")


def test_a_zero_width_timeline_window_is_widened_inside_the_step():
    """Both slider handles on one point drew an empty chart on a "0.000000" axis: the Gantt gets at
    least the slider's step, about the same point, never outside the step."""
    from ui.timeline_data import MIN_WINDOW_MS, usable_window

    assert usable_window(1.0, 5.0, 10.0) == (1.0, 5.0)
    assert usable_window(5.0, 1.0, 10.0) == (1.0, 5.0)
    lo, hi = usable_window(4.0, 4.0, 10.0)
    assert hi - lo == pytest.approx(MIN_WINDOW_MS) and (lo + hi) / 2 == pytest.approx(4.0)
    assert usable_window(0.0, 0.0, 10.0) == pytest.approx((0.0, MIN_WINDOW_MS))
    assert usable_window(10.0, 10.0, 10.0) == pytest.approx((10.0 - MIN_WINDOW_MS, 10.0))
    assert usable_window(0.0, 0.0, 0.004) == pytest.approx((0.0, 0.004))   # a step shorter than the slider's step


def test_the_memory_chart_keeps_its_height_for_deep_pipelines():
    """A legend of 16+ ranks below the plot ate its height (50 px at pp 16, none at pp 35) and
    category10 repeated colours past 10 ranks: the legend is on the right, and more than 10 ranks
    are a gradient over the rank, one line each."""
    import pandas as pd

    from ui.charts import memory_time_chart

    def enc(ranks: int) -> dict:
        df = pd.DataFrame({"rank": [r for r in range(ranks) for _ in range(2)], "t_ms": [0.0, 1.0] * ranks, "GiB": 1.0})
        return memory_time_chart(df, 80.0)["layer"][0]["encoding"]

    few, many = enc(4), enc(35)
    assert few["color"]["type"] == "nominal" and few["color"]["legend"]["orient"] == "right"
    assert many["color"]["type"] == "quantitative" and many["color"]["legend"]["orient"] == "right"
    assert many["detail"] == {"field": "rank", "type": "nominal"}
    df = pd.DataFrame({"rank": [0, 0], "t_ms": [0.0, 18_694.0], "GiB": 1.0})
    x = memory_time_chart(df, 80.0, 18_694.0)["layer"][0]["encoding"]["x"]
    assert x["scale"] == {"domain": [0, 18_694.0], "nice": False}   # it ran to a "nice" 20,000 ms


def test_the_memory_chart_draws_a_limit_per_rank_where_they_differ():
    """One black dashed line where every rank may allocate the same; where the stages' limits
    differ (other streams' pools, FSDP2), one per rank in its curve's colour, at its own limit."""
    import pandas as pd

    from ui.charts import memory_time_chart

    for ranks in (4, 35):
        df = pd.DataFrame({"rank": [r for r in range(ranks) for _ in range(2)], "t_ms": [0.0, 1.0] * ranks, "GiB": 1.0})
        same = valid_spec(memory_time_chart(df, dict.fromkeys(range(ranks), 72.96)))
        rule = same["layer"][1]
        assert same["datasets"][rule["data"]["name"]] == [{"limit": 72.96}] and rule["mark"]["color"] == "#111111"
        own = {r: 72.5 + 0.01 * r for r in range(ranks)}
        spec = valid_spec(memory_time_chart(df, own))
        line, rule = spec["layer"]
        assert rule["encoding"]["color"] == line["encoding"]["color"] and "color" not in rule["mark"]
        assert {d["rank"]: d["limit"] for d in spec["datasets"][rule["data"]["name"]]} == own
        assert "each rank's allocated limit" in spec["title"] and "each rank" not in same["title"]


def test_calibration_charts_label_log_axes_alike_and_show_whole_series_names():
    """The GEMM axis ran "100,000,000,000" then "1e+12"; collective legends were cut mid-name."""
    from ui.calibration_charts import collective_chart, gemm_chart

    g = gemm_chart([{"flops": 1e8, "efficiency": 0.5, "layout": "TN", "shape": "s", "dtype": "bf16",
                     "held_out_prediction": None}, {"flops": 1e13, "efficiency": 0.7, "layout": "TN", "shape": "t",
                                                    "dtype": "bf16", "held_out_prediction": None}]).to_dict()
    assert g["layer"][0]["encoding"]["x"]["axis"]["format"] == "~s"
    # the precision is the mark's shape (bf16 and nvfp4 rows of one GEMM were identical dots)
    assert g["layer"][0]["encoding"]["shape"]["field"] == "dtype"
    c = collective_chart([{"size_bytes": 2 ** k, "busbw_gbs": 10.0 * k, "fit_busbw_gbs": 10.0 * k, "kind": "all_gather",
                           "tier": "scale_out", "ranks": 16, "source": "dstack-a3mega-c0_all_gather_16gpu.log", "table": 0}
                          for k in (10, 20)]).to_dict()
    enc = c["layer"][0]["encoding"]
    assert enc["x"]["axis"]["format"] == "~s" and enc["color"]["legend"]["labelLimit"] >= 600
    # Streamlit fits the legend into the chart's height: six tables below the plot squashed it to
    # a line (the audit's 1600 px page); each table's legend row adds to the height
    six = collective_chart([{"size_bytes": 2 ** k, "busbw_gbs": 10.0 * k, "fit_busbw_gbs": 10.0 * k, "kind": kind,
                             "tier": "scale_up", "ranks": 8, "source": "x.log", "table": t}
                            for t, kind in enumerate(("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p", "all_gather"))
                            for k in (10, 20)]).to_dict()
    assert six["height"] >= c["height"] + 5 * 20


def test_pareto_cost_ticks_tell_near_equal_costs_apart():
    """Costs 0.0777–0.0779 USD per 1M tokens printed as 0.0777 ×4, 0.0778 ×5, 0.0779 ×4 (4 decimals
    under ticks 0.00004 apart): the axis carries as many decimals as its tick spacing needs."""
    import pandas as pd

    from ui.search_view import pareto_chart, tick_decimals

    near = pd.Series([0.07770, 0.07792])
    step = (near.max() - near.min()) / 5
    d = tick_decimals(near)
    assert round(near.min(), d) != round(near.min() + step, d)
    assert tick_decimals(pd.Series([0.5, 2.7])) == 2 and tick_decimals(pd.Series([1.0])) == 2
    front = pd.DataFrame({"cost_per_million_tokens_usd": near, "tokens_per_s": [1.0, 2.0], "headroom_gib": [1.0, 2.0],
                          "place": [1, 2], "layout": ["a", "b"], "id": [0, 1], "gpus": [8, 16]})
    assert pareto_chart(front).to_dict()["encoding"]["x"]["axis"]["format"] == f"$,.{d}~f"


def test_plain_figures_for_prices_measurements_and_typed_values():
    """A free GPU read "$0.0000"; the Validation page "predicted 1.343e+04" without a unit; a typed
    1e30 thirty-one digits in the editor's banner."""
    from ui.editor import _figure
    from ui.units import fmt_sig, fmt_usd

    assert fmt_usd(0) == "$0" and fmt_usd(0.5) == "$0.5000"
    assert [fmt_sig(x) for x in (843, 850.4, 13430.2, 0.41234, 1e16)] == ["843", "850.4", "13,430", "0.4123", "1.00e+16"]
    assert _figure(10 ** 30) == "1e+30" and _figure(24) == 24 and _figure(True) is True


def test_a_peak_memory_says_which_kind_it_is():
    """The Validation page said "peak_memory … 47.84" for torchtitan's reserved figure, beside an
    Estimate page whose headline is the allocated peak."""
    from ui.validation_frames import rows_frame, unit_of

    titan = {"source": "torchtitan", "metric": "peak_memory", "unit": "GiB"}
    b200 = {"source": "b200", "metric": "peak_memory", "unit": "GiB"}
    assert unit_of(titan) == "GiB reserved" and unit_of(b200) == "GiB allocated"
    assert unit_of({"source": "b200", "metric": "step_time", "unit": "ms"}) == "ms"
    assert list(rows_frame([titan, b200])["unit"]) == ["GiB reserved", "GiB allocated"]


def _is_text(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return value not in ("True", "False")
    return False


def test_a_zero_time_reads_in_its_neighbours_unit_and_fit_advice_names_another_schedule():
    """The Timeline read "Hidden comm 0 s" beside "Exposed comm 246.05 ms"; its "does not fit"
    advice said "1F1B instead of GPipe" on a ZB-H2 pipeline."""
    from ui.labels import LEANER_SCHEDULE
    from ui.units import fmt_time_beside

    assert fmt_time_beside(0.0, 0.24605) == "0 ms" and fmt_time_beside(0.0, 2.5) == "0 s"
    assert fmt_time_beside(0.0, 0.0) == "0 s" and fmt_time_beside(0.0012, 5.0) == "1.20 ms"
    assert "GPipe holds" in LEANER_SCHEDULE["gpipe"] and "ZB-H1" in LEANER_SCHEDULE["zb-h2"]
    assert "1f1b" not in LEANER_SCHEDULE and "interleaved" not in LEANER_SCHEDULE


def test_a_cluster_flop_rate_keeps_its_unit_short():
    """The System page read "16,203.8 PFL…" at 1,280 px: the rate picks the unit that keeps it short."""
    from ui.units import fmt_flops_rate

    assert fmt_flops_rate(16203.8) == "16.2 EFLOP/s" and fmt_flops_rate(32.4) == "32.4 PFLOP/s"
    assert fmt_flops_rate(0.989) == "989.0 TFLOP/s" and fmt_flops_rate(float("nan")) == "—"


def test_a_fit_change_that_loses_nothing_reads_plus_zero():
    from ui.search_fit import lost_words

    assert lost_words(-0.0003) == "+0.0 % per GPU lost vs. unfitting"
    assert lost_words(0.0321) == "+3.2 % per GPU lost vs. unfitting" and lost_words(-0.05).startswith("-5.0 %")
