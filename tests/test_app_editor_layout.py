"""Editor groups stay open once opened; the pinned comparison is compact, has deltas against a
chosen baseline and a CSV download of every column."""

from __future__ import annotations

import io

import pandas as pd

from app_walk import open_app, open_fold, open_groups
from ui.compare import SHOWN, compact_frame, with_deltas


def _expander(at, title):
    return next(ex for ex in at.expander if ex.label.startswith(title))


def _number(at, dotted):
    return next(w for w in at.number_input if w.key and w.key.split(".", 1)[-1] == dotted)


def _has_number(at, dotted):
    return any(w.key and w.key.split(".", 1)[-1] == dotted for w in at.number_input)


def test_group_stays_open_when_values_return_to_default():
    at = open_app("pages/model.py")
    assert not _expander(at, "Regularisation").proto.expanded
    assert not _has_number(at, "model.hidden_dropout")  # a folded group sends no widget
    assert _has_number(at, "model.num_layers")  # the first group is open
    open_groups(at, "model", ["Regularisation"])  # the user opens it
    assert _expander(at, "Regularisation").proto.expanded
    _number(at, "model.hidden_dropout").set_value(0.1).run()
    assert _expander(at, "Regularisation").proto.expanded
    _number(at, "model.hidden_dropout").set_value(0.0).run()
    assert _expander(at, "Regularisation").proto.expanded  # it does not fold under the user's pointer
    at.switch_page("pages/home.py").run()
    at.button(key="size.medium").click().run()  # a new model: groups start from its values again
    at.switch_page("pages/model.py").run()
    assert not _expander(at, "Regularisation").proto.expanded
    assert not _has_number(at, "model.hidden_dropout")


def test_groups_keep_their_state_across_pages_and_errors_open_them():
    at = open_app("pages/strategy.py")
    first = next(ex for ex in at.expander if ex.label.startswith("Parallelism"))
    assert first.proto.expanded
    folded = [ex.label for ex in at.expander if not ex.proto.expanded]
    assert "Software stack and overheads" in folded and not _has_number(at, "strategy.step_overhead_ms")
    open_groups(at, "strategy", ["Software stack"])
    open_groups(at, "strategy", ["Parallelism"], value=False)  # the user folds the first group
    assert not _has_number(at, "strategy.tp") and _has_number(at, "strategy.step_overhead_ms")
    at.switch_page("pages/estimate.py").run()
    at.switch_page("pages/strategy.py").run()  # back: as the user left them
    assert not _expander(at, "Parallelism").proto.expanded and _expander(at, "Software stack").proto.expanded
    _number(at, "strategy.step_overhead_ms").set_value(-5.0).run()  # invalid: stays pending with its error
    at.switch_page("pages/estimate.py").run()
    at.session_state["ui.open.strategy"] = {}  # even a forgotten state: the error's group opens
    at.switch_page("pages/strategy.py").run()
    assert _expander(at, "Software stack").proto.expanded and _expander(at, "Software stack").error


def test_comparison_has_deltas_a_baseline_and_a_download():
    at = open_fold(open_app("pages/estimate.py"), "pin.box")
    at.button(key="pin.add").click().run()
    at.switch_page("pages/home.py").run()
    at.button(key="size.medium").click().run()
    at.switch_page("pages/estimate.py").run()
    table = at.dataframe[-1].value
    assert len(table.columns) <= 12 and "scenario" in table.columns
    assert table["Δ step"].iloc[0] == 0 and table["Δ step"].iloc[1] != 0
    at.selectbox(key="pin.baseline").set_value(1).run()
    table = at.dataframe[-1].value
    assert table["Δ step"].iloc[1] == 0 and table["Δ step"].iloc[0] != 0
    dl = next(b for b in at.get("download_button") if b.proto.label.startswith("Comparison"))
    assert dl is not None


def test_with_deltas_relative_and_points():
    rows = [{"scenario": "a", "fits": True, "step time [s]": 2.0, "tokens/s/GPU": 100, "MFU [%]": 40.0,
             "peak alloc [GiB]": 50.0, "USD / 1M tokens": 1.0},
            {"scenario": "b", "fits": False, "step time [s]": 1.0, "tokens/s/GPU": 200, "MFU [%]": 45.0,
             "peak alloc [GiB]": 60.0, "USD / 1M tokens": 0.5}]
    out = with_deltas(rows, 0)
    # each delta in its own unit, not the figure's as well ("Δ step time [s] [%]")
    assert out[1]["Δ step time [%]"] == -50.0 and out[1]["Δ MFU [pt]"] == 5.0 and out[1]["Δ tokens/s/GPU [%]"] == 100.0
    frame = compact_frame(out)
    assert list(frame.columns)[:2] == ["scenario", "fits"] and len(frame.columns) == 2 + 2 * len(SHOWN)
    from ui.compare import rows_csv

    back = pd.read_csv(io.StringIO(rows_csv(out)))
    assert list(back["scenario"]) == ["a", "b"] and "Δ MFU [pt]" in back.columns and "Δ peak alloc [%]" in back.columns


def test_sidebar_problem_count_does_not_send_the_strategy_page_to_itself():
    """A flag the model cannot use (moe_shared_expert_overlap on a dense model) is a problem between
    sections; the sidebar points to the Strategy page from elsewhere, but on that page it says
    the problems are listed there."""
    from app_walk import texts
    from ui.share import encode_token, size_canonical

    cfg = size_canonical("medium")
    cfg["strategy"]["moe_shared_expert_overlap"] = True
    token = encode_token(cfg)
    on_strategy = texts(open_app("pages/strategy.py", s=token).sidebar.warning)
    assert "between sections" in on_strategy and "Strategy page" not in on_strategy
    assert "listed on this page" in on_strategy and "problem(s)" not in on_strategy
    elsewhere = texts(open_app("pages/estimate.py", s=token).sidebar.warning)
    assert "between sections" in elsewhere and "see the Strategy page" in elsewhere


def test_the_preset_picker_follows_the_section_it_names():
    """It kept showing "small (size preset)" after an edit made the section "(edited)", until the
    page was left and opened again; a pick not loaded yet is left alone."""
    from app_walk import open_groups, open_page

    at = open_groups(open_page("pages/strategy.py", preset="small"), "strategy")
    assert at.selectbox(key="pick.strategy").value == "small"
    at.selectbox(key="pick.strategy").set_value("medium").run()     # picked, not loaded: kept
    assert at.selectbox(key="pick.strategy").value == "medium"
    _number(at, "strategy.global_batch_size").set_value(128).run()  # the section is edited: none is its preset
    assert at.selectbox(key="pick.strategy").value is None
    at.button(key="load.strategy").click().run()   # nothing picked: said, not silently nothing
    assert "Pick a preset in the list first" in " ".join(i.value for i in at.info)
    at.selectbox(key="pick.strategy").set_value("medium").run()
    at.button(key="load.strategy").click().run()
    assert at.selectbox(key="pick.strategy").value == "medium"


def test_the_preset_picker_names_the_preset_after_a_trip_to_another_page():
    """Leaving the page drops the picker's widget state: a selectbox without it shows its first
    option ("small" for a medium scenario) unless the page sets it again."""
    from app_walk import open_app

    at = open_app("pages/strategy.py", preset="medium")
    assert at.selectbox(key="pick.strategy").value == "medium"
    at.switch_page("pages/estimate.py").run()
    at.switch_page("pages/strategy.py").run()
    assert not at.exception and at.selectbox(key="pick.strategy").value == "medium"


def test_a_pending_edit_does_not_hide_the_applied_scenarios_problems():
    """medium, pp=3, then tp=2.5 (not applied): the sidebar said "2 problems between sections;
    listed on this page" and the page listed only tp's own error."""
    from app_walk import open_groups, open_page

    at = open_groups(open_page("pages/strategy.py", preset="medium"), "strategy")
    _number(at, "strategy.pp").set_value(3).run()
    _number(at, "strategy.tp").set_value(2.5).run()
    said = " ".join(e.value for e in at.error)
    assert "should be a whole number, not 2.5" in said     # the pending edit's own error
    assert "does not divide system.num_gpus" in said       # the applied tp=8 with pp=3
    # (its batch errors read a dp floored from 64 / 24, which the user never set: not reported)
    assert "micro_batch_size*dp" not in said and "divisible by pp=3" not in said


def test_under_a_rejected_value_only_its_own_error_the_value_in_use_in_the_banner():
    """small, tp = 3 (applied, invalid across sections), then tp = 0 (rejected): the box under the
    field showing 0 listed "tp*pp*cp = 3*1*1 = 3 does not divide …" beside 0's own error."""
    from app_walk import open_groups, open_page

    at = open_groups(open_page("pages/strategy.py", preset="small"), "strategy")
    _number(at, "strategy.tp").set_value(3).run()
    _number(at, "strategy.tp").set_value(0).run()
    boxes = [str(e.value).replace("\\", "") for e in at.error]
    own = [b for b in boxes if "greater than or equal to 1" in b]
    assert own and not any("does not divide" in b for b in own)
    banner = [b for b in boxes if "In use (" in b]
    assert banner and "does not divide system.num_gpus" in banner[0]


def test_a_rounding_bubble_reads_as_none_in_the_comparison():
    """A pp 1 step's bubble is the rounding of step − compute − exposed: the CSV said 5.22e-13 %."""
    from ui.report_io import compare_rows

    sc = {"model": {"name": "m"}, "system": {"num_gpus": 8, "gpu": {"name": "g"}},
          "strategy": {"tp": 1, "pp": 1, "cp": 1, "ep": 1, "vpp": 1, "schedule": "1f1b"}}
    r = {"dp": 8, "step_time_s": 1.0, "tokens_per_s": 1.0, "tokens_per_s_per_gpu": 1.0, "mfu": 0.5, "hfu": 0.5,
         "peak_memory_gib": 1.0, "reserved_memory_gib": 1.0, "fits": True, "cost_per_million_tokens_usd": 1.0}
    rows = compare_rows([("a", sc, {**r, "bubble_fraction": 5.22e-15}), ("b", sc, {**r, "bubble_fraction": 0.0371})])
    assert [x["bubble [%]"] for x in rows] == [0.0, 3.71]
