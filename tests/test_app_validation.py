"""The Validation page (pages/validation.py) in AppTest, and its pure helpers.

The first page run validates every bundled source (tens of seconds); the results are cached
(``ui.validation_data.source_result``) for the rest of the file. Expected values are computed
here through ``simengine.api`` on the fast sources, never copied from a run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from simengine import api
from simengine.validation import SkippedRow, ValidationResult, ValidationRow
from ui.config_io import validate_scenario
from ui.share import decode_token, size_canonical
from ui.text import md
from ui.validation_chart import guide_frame, plottable, predicted_vs_measured_chart
from ui.validation_data import clear
from ui.validation_frames import run_key, run_scenarios, rows_frame, summary_frame

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 400  # the first run validates every source


def open_validation(**query: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/validation.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def scenario(at: AppTest) -> dict:
    return {s: json.loads(at.session_state[f"cfg.{s}"]) for s in ("model", "system", "strategy")}


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


FRAME_COLUMN = {"val.summary": "mape_pct", "val.rows": "error_pct", "val.skipped": "reason"}  # one of each's own


def frame(at: AppTest, key: str) -> pd.DataFrame:
    """The table of the page named by its key (a plain dataframe carries no key to the client)."""
    found = [d.value for d in at.dataframe if FRAME_COLUMN[key] in d.value.columns]
    assert len(found) == 1, (key, [list(d.value.columns) for d in at.dataframe])
    return found[0]


def chart_spec(at: AppTest) -> dict:
    charts = at.get("vega_lite_chart")
    assert len(charts) == 1
    return json.loads(charts[0].proto.spec)


# ---- the page on the real bundled data --------------------------------------------------------
def test_page_shows_every_source_the_chart_and_the_skipped_runs():
    at = open_validation(preset="medium")
    assert not at.error, texts(at.error)
    assert "SimuMax" in texts(at.markdown) and "Narayanan" in texts(at.markdown)  # what the data are
    summary = frame(at, "val.summary")
    assert set(summary["source"]) == set(api.validation_sources())
    rows = frame(at, "val.rows")
    for src in ("b200", "megatron-readme", "torchtitan"):
        want = api.validate(src)
        mine = rows[rows["source"] == src]
        assert sorted(zip(mine["run"], mine["metric"])) == sorted((r.run, r.metric) for r in want.rows)
        got = dict(zip(zip(mine["run"], mine["metric"]), mine["error_pct"]))
        assert all(math.isclose(got[(r.run, r.metric)], r.error_pct) for r in want.rows)
        skipped = frame(at, "val.skipped")
        assert sorted(skipped[skipped["source"] == src]["run"]) == sorted(s.run for s in want.skipped)
    assert (summary["runs"].sum(), len(summary)) == (len(rows), rows.groupby(["source", "metric"]).ngroups)
    spec = chart_spec(at)
    assert len(spec["layer"]) == 3  # band, y = x, points
    points = spec["layer"][2]["encoding"]
    assert points["x"]["scale"]["type"] == "log" and points["y"]["scale"]["type"] == "log"
    assert points["color"]["field"] == "source" and "run" in [t["field"] for t in points["tooltip"]]
    assert scenario(at) == size_canonical("medium")  # looking does not change the scenario
    assert dict(at.query_params) == {"preset": "medium"}


def test_source_filter_narrows_the_chart_and_the_run_picker():
    at = open_validation()
    at.multiselect(key="val.sources").set_value(["b200"]).run()
    assert set(frame(at, "val.rows")["source"]) == {"b200"}
    assert all(o.startswith("b200 · ") for o in at.selectbox(key="val.run").options)
    assert set(frame(at, "val.summary")["source"]) == set(api.validation_sources())  # the table keeps them all


@pytest.mark.parametrize("source", ["b200", "megatron-readme"])
def test_load_this_run_opens_it_on_estimate_with_its_link(source):
    want = api.validate(source).rows[-1]
    key = run_key(want.source, want.run)
    at = open_validation()
    at.selectbox(key="val.run").set_value(key).run()
    at.button(key="val.load").click().run()
    assert not at.exception, [e.value for e in at.exception]
    expected, issues = validate_scenario(want.scenario)
    assert not issues and scenario(at) == expected
    assert [t.value for t in at.title] == ["Estimate"]
    assert md(key, 160) in texts(at.success)
    assert decode_token(at.query_params["s"])[0] == expected  # the share link reproduces the run
    at.switch_page("pages/timeline.py").run()
    assert not at.exception and scenario(at) == expected


def test_a_run_whose_mfu_is_counted_its_own_way_says_how():
    """torchtitan's Float8 MFU is against the FP8 peak (23.5 %); the Estimate page then showed 51.5 %
    for the loaded run with nothing saying why (validation/published/conventions.py)."""
    want = next(r for r in api.validate("torchtitan").rows if r.metric == "mfu" and r.run.endswith("_Float8"))
    assert "FP8 peak" in want.convention and "6·N + 12·L·H·Q·T" in want.convention
    at = open_validation()
    at.selectbox(key="val.run").set_value(run_key(want.source, want.run)).run()
    assert md(want.convention) in texts(at.markdown)
    assert "the Estimate page's is ours" in texts(at.caption)


def test_calibrated_toggle_switches_the_b200_rows():
    at = open_validation()
    at.toggle(key="val.calibrated").set_value(True).run()
    assert not at.exception
    cal, raw = api.validate("b200", calibrated=True), api.validate("b200")
    rows = frame(at, "val.rows")
    got = {(r, m): p for r, m, p in zip(rows["run"], rows["metric"], rows["predicted"])}
    assert all(math.isclose(got[(r.run, r.metric)], r.predicted) for r in cal.rows)
    assert any(not math.isclose(got[(r.run, r.metric)], r.predicted) for r in raw.rows)
    want = cal.rows[0]
    at.selectbox(key="val.run").set_value(run_key("b200", want.run)).run()
    at.button(key="val.load").click().run()
    assert scenario(at) == validate_scenario(want.scenario)[0]
    assert scenario(at)["system"] != validate_scenario(raw.rows[0].scenario)[0]["system"]


def test_page_runs_without_app_py():
    """First request after a server start runs the page file itself (pages/ folder mode)."""
    at = AppTest.from_file(str(ROOT / "pages" / "validation.py"), default_timeout=TIMEOUT)
    at.query_params["preset"] = "large"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert scenario(at) == size_canonical("large") and len(at.get("vega_lite_chart")) == 1


# ---- hostile and failing data (last: they clear the cache) -----------------------------------
EVIL = "[Session expired](https://evil.example/login) :red[x] <b>y</b> $z$"


def _fake_validate(source=None, calibrated=False):
    if source == "nemo":
        raise RuntimeError(f"synthetic validation failure {EVIL}")
    if source != "b200":
        return ValidationResult(calibrated=calibrated)
    rows = [ValidationRow(source="b200", run=EVIL, metric=m, unit="ms", measured=100.0, predicted=p,
                          error_pct=p - 100.0, assumptions=[EVIL], scenario=size_canonical("medium"))
            for m, p in (("step_time", 105.0), ("peak_memory", 0.0))]
    return ValidationResult(calibrated=calibrated, rows=rows, skipped=[SkippedRow(source="b200", run=EVIL, reason=EVIL)])


def test_hostile_run_names_are_escaped_and_failures_are_messages(monkeypatch):
    monkeypatch.setattr(api, "validate", _fake_validate)
    clear()
    try:
        at = open_validation()
        errors = texts(at.error)
        assert "synthetic validation failure" in errors and "nemo" in errors and md(EVIL) in errors and EVIL not in errors
        shown = texts(at.markdown) + texts(at.caption)
        assert md(EVIL) in shown and EVIL not in shown
        assert "not on the log-log chart" in texts(at.caption)  # the 0.0 prediction
        assert list(frame(at, "val.skipped")["reason"]) == [EVIL]  # a table cell is plain text
        at.button(key="val.load").click().run()
        assert scenario(at) == size_canonical("medium")
        assert md(run_key("b200", EVIL), 160) in texts(at.success) and EVIL not in texts(at.success)
    finally:
        clear()


# ---- pure helpers ------------------------------------------------------------------------------
def _row(source, run, metric, err, measured=100.0, weak=False):
    return {"source": source, "run": run, "metric": metric, "unit": "ms", "measured": measured,
            "predicted": measured * (1 + err / 100), "error_pct": err, "weak": weak, "peer_predicted": None,
            "scenario": {"run": run}}


def test_summary_counts_rows_within_the_band_in_source_order():
    rows = [_row("b", "r1", "t", 5.0), _row("b", "r2", "t", -10.0), _row("b", "r3", "t", 12.0), _row("a", "r1", "m", 50.0)]
    summary = [{"source": s, "metric": m, "n": n, "mape_pct": 1.0, "median_signed_pct": 0.0, "worst_run": "r",
                "worst_error_pct": 1.0} for s, m, n in (("a", "m", 1), ("b", "t", 3))]
    df = summary_frame(summary, rows_frame(rows), order=("b", "a"))
    assert list(df["source"]) == ["b", "a"]
    assert list(df["within_band"]) == [2, 0] and list(df["unit"]) == ["ms", "ms"]


def test_run_scenarios_one_per_run_and_source():
    rows = [_row("b", "r1", "t", 1.0), _row("b", "r1", "m", 2.0), _row("a", "r1", "t", 3.0)]
    assert list(run_scenarios(rows)) == [run_key("b", "r1"), run_key("a", "r1")]


def test_chart_guides_and_log_scale_drop_non_positive_values():
    g = guide_frame(10.0, 1000.0)
    assert list(g["y"]) == list(g["x"]) == [10.0, 1000.0]
    assert list(g["low"]) == pytest.approx([9.0, 900.0]) and list(g["high"]) == pytest.approx([11.0, 1100.0])
    rows = rows_frame([_row("a", "ok", "t", 1.0), _row("a", "zero", "t", -100.0), _row("a", "neg", "t", 0.0, -5.0),
                       _row("a", "inf", "t", 0.0, float("inf"))])
    assert list(plottable(rows)["run"]) == ["ok"]
    spec = predicted_vs_measured_chart(rows, ["a"]).to_dict()
    scale = spec["layer"][2]["encoding"]["x"]["scale"]
    assert scale["type"] == "log" and scale["domain"][0] < 100.0 < scale["domain"][1]
