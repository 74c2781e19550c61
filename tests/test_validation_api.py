"""Validation as a product: api.validate() over the bundled data, its JSON shape (the Validation
page's contract), the scenario of each row reproducing its prediction, and the CLI."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simengine import api
from simengine.validation import SOURCES, data

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def b200():
    return api.validate("b200"), api.validate("b200", calibrated=True)


def test_b200_rows_summary_and_json_shape(b200):
    plain, cal = b200
    assert len(plain.rows) == 40 and plain.skipped == [] and not plain.calibrated and cal.calibrated
    assert {r.metric for r in plain.rows} == {"step_time", "peak_memory"}
    out = json.loads(plain.model_dump_json())
    assert set(out) == {"calibrated", "rows", "summary", "skipped"}
    assert {"source", "run", "metric", "measured", "predicted", "error_pct", "weak", "scenario"} <= set(out["rows"][0])
    assert set(out["rows"][0]["scenario"]) == {"model", "system", "strategy"}
    assert set(out["summary"][0]) == {"source", "metric", "n", "mape_pct", "median_signed_pct", "worst_run", "worst_error_pct"}
    for res in b200:
        for s in res.summary:
            rows = [r for r in res.rows if r.metric == s.metric]
            assert s.n == 20
            assert s.mape_pct == pytest.approx(sum(abs(r.error_pct) for r in rows) / 20)
            worst = max(rows, key=lambda r: abs(r.error_pct))
            assert (s.worst_run, s.worst_error_pct) == (worst.run, worst.error_pct)


def test_calibration_changes_time_not_memory(b200):
    plain, cal = b200
    t = {r.run: r.predicted for r in plain.rows if r.metric == "step_time"}
    tc = {r.run: r.predicted for r in cal.rows if r.metric == "step_time"}
    assert t.keys() == tc.keys() and any(abs(t[k] / tc[k] - 1) > 0.01 for k in t)
    m = {r.run: r.predicted for r in plain.rows if r.metric == "peak_memory"}
    mc = {r.run: r.predicted for r in cal.rows if r.metric == "peak_memory"}
    assert m == pytest.approx(mc, rel=1e-9)


def test_each_row_scenario_reproduces_its_prediction(b200):
    """The page's "load this run" loads row.scenario; estimating it gives the same number."""
    for res in b200:
        for r in res.rows[:6]:
            rep = api.estimate(r.scenario)
            got = rep.step_time_s * 1e3 if r.metric == "step_time" else rep.peak_memory_gib
            assert got == pytest.approx(r.predicted, rel=1e-12), r.run
            assert r.error_pct == pytest.approx(100 * (r.predicted - r.measured) / r.measured)


def test_published_source_filter_and_skipped_reasons():
    res = api.validate("korthikanti22")
    assert res.rows and {r.source for r in res.rows} == {"korthikanti22"}
    assert {s.source for s in res.skipped} == {"korthikanti22"} and all(s.reason for s in res.skipped)
    weak = [r for r in res.rows if r.weak]
    assert weak and all(r.assumptions for r in weak)
    assert {s.metric for s in res.summary} == {r.metric for r in res.rows}


def test_unknown_source_names_the_field():
    with pytest.raises(api.ConfigError) as e:
        api.validate("nope")
    assert e.value.field == "source" and "b200" in str(e.value)
    assert SOURCES[0] == "b200" and len(SOURCES) == 10


def test_missing_bundled_data_fails_loudly(monkeypatch, tmp_path):
    monkeypatch.setattr(data, "data_path", lambda name: tmp_path / name)
    with pytest.raises(api.ConfigError) as e:
        data.read_text("published_runs.csv")
    assert "published_runs.csv" in str(e.value) and "missing" in str(e.value)


def test_nothing_reads_the_shared_folder_any_more():
    """The measured data ships with the package; code reaching for ../shared/validation would
    silently skip (or fail) wherever the checkout has no such neighbour."""
    reach = re.compile(r"""["']shared["']\s*/\s*["']validation|["']\.\./shared/validation""")
    offenders = [str(p.relative_to(REPO)) for folder in ("simengine", "tests", "benchmarks", "tools", "ui", "pages")
                 for p in (REPO / folder).rglob("*.py") if p != Path(__file__) and reach.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def cli(*args):
    return subprocess.run([sys.executable, "-m", "simengine", *args], cwd=REPO, capture_output=True, text=True)


def test_cli_validate_text_and_json():
    p = cli("validate", "--source", "korthikanti22")
    assert p.returncode == 0, p.stderr
    for needle in ("summary per source and metric", "worst 10 rows", "runs that could not be expressed", "microbatch-level"):
        assert needle in p.stdout
    j = cli("validate", "--source", "korthikanti22", "--json")
    assert j.returncode == 0 and json.loads(j.stdout)["summary"]
    bad = cli("validate", "--source", "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and bad.stderr.startswith("error: ")


def test_text_header_names_the_b200_system_only_for_b200_rows():
    """A source without B200 rows is not said to run on a B200 system."""
    from simengine.validation.cli import render_text

    assert "B200" not in render_text(api.validate("korthikanti22")).splitlines()[0]
    assert "datasheet B200 system" in render_text(api.validate("b200")).splitlines()[0]
