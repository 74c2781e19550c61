"""The studio's CSV downloads: one writer (ui/text.py ``csv_text``) that keeps a spreadsheet from
reading a user's text as a formula, the Search page's ranked-candidates CSV (every number
unrounded, its band, its whole strategy) and its JSON beside it."""

from __future__ import annotations

import csv
import io
import json

from ui.compare import rows_csv
from ui.report_io import report_csv
from ui.search_view import results_csv
from ui.text import csv_text, sheet_cell


def test_text_that_starts_a_formula_is_kept_as_text():
    for bad in ("=1+2", '=HYPERLINK("http://x","y")', "@SUM(A1)", "+cmd|' /C calc'!A0", "-2+3+cmd", "\t=1", "\r=1"):
        assert sheet_cell(bad) == "'" + bad
    for fine in ("-3.5", "+1", "-1e-3", "Llama 3 · tp8", "", "a=b", 3, -2.5, None, True):
        assert sheet_cell(fine) == fine
    back = list(csv.reader(io.StringIO(csv_text([["a", "b"], ["=1+2", -4.25]]))))
    assert back == [["a", "b"], ["'=1+2", "-4.25"]]


def test_the_comparison_and_report_csvs_go_through_it():
    rows = [{"scenario": "=HYPERLINK(\"http://evil\")", "step_s": 1.5}, {"scenario": "baseline", "step_s": -0.5}]
    back = list(csv.DictReader(io.StringIO(rows_csv(rows))))
    assert back[0]["scenario"] == "'=HYPERLINK(\"http://evil\")" and back[1]["step_s"] == "-0.5"
    report = {"step_time_s": 2.0, "warnings": ["@evil()"], "breakdown_s": {"bubble": -0.0}}
    cells = [r[2] for r in csv.reader(io.StringIO(report_csv(report)))]
    assert "'@evil()" in cells and "2.0" in cells


def _search_json() -> dict:
    from simengine import presets
    from simengine.search import make_space, search

    m = presets.load_spec("models", "llama3-8b").model_dump(mode="json")
    s = presets.load_spec("systems", "h100-sxm5-80gb").model_dump(mode="json")
    space = make_space(m, s, global_batch=32, seq_len=4096, gpus=[8],
                       choices={"tp": [1, 2], "pp": [1, 2], "cp": [1], "zero_stage": [1, 3]})
    return search(space, top=6).to_json()


def test_the_ranked_candidates_csv_holds_every_number_and_the_strategy():
    res = _search_json()
    cands = res["candidates"]
    assert len(cands) >= 3
    rows = list(csv.DictReader(io.StringIO(results_csv(cands, res["ties"]))))
    assert [int(r["rank"]) for r in rows] == list(range(1, len(cands) + 1))
    for r, c in zip(rows, cands):
        assert r["layout"] == c["label"] and r["tie"] == str(cands.index(c) in res["ties"])
        # unrounded: the text of a float reads back as the same float
        assert float(r["tokens_per_s"]) == c["tokens_per_s"] and float(r["step_time_s"]) == c["step_time_s"]
        lo, hi = c["band"]["tokens_per_s"]
        assert float(r["tokens_per_s.low"]) == lo and float(r["tokens_per_s.high"]) == hi
        assert int(r["strategy.tp"]) == c["strategy"]["tp"] and r["strategy.schedule"] == c["strategy"]["schedule"]
        assert r["strategy.recompute_modules"] == "+".join(c["strategy"]["recompute_modules"])
    assert json.loads(json.dumps(res)) == res  # the JSON download is the result as it is


def test_a_candidate_without_a_band_leaves_its_cells_empty():
    c = {"label": "x", "gpus": 8, "tokens_per_s": 1.0, "strategy": {"tp": 1}, "band": {}}
    rows = list(csv.DictReader(io.StringIO(results_csv([c], []))))
    assert rows[0]["tokens_per_s.low"] == "" and rows[0]["mfu"] == "" and rows[0]["strategy.tp"] == "1"
