"""AppTest of the Search page: a small search runs, the layout loads into the Strategy editor,
the search link round-trips, a damaged link is a message, and the page is in the navigation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from simengine.errors import ConfigError
from simengine.api import SEARCH_DIMS as DIMS_ALL
from ui.layout import PAGES
from ui.search_view import encode_inputs, parse_counts, parse_restrict

ROOT = Path(__file__).resolve().parent.parent
RESTRICT = "tp=1,2\npp=1\ncp=1\nzero_stage=1,3\noverlap_grad_reduce=true\noverlap_param_gather=true\ntp_comm_overlap=false"
INPUTS = {"gpus": "8", "global_batch": 64, "seq_len": 8192, "objective": "tokens_per_s", "top": 5, "restrict": RESTRICT}


def open_search(**query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("pages/search.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_search_page_is_registered():
    assert ("pages/search.py", "Search", ":material/manage_search:") in PAGES


def test_input_parsers_name_the_field():
    assert parse_counts("64..256") == [64, 128, 256] and parse_counts("8,16") == [8, 16]
    assert parse_counts("1e3") == [1000] and parse_counts("8..3.2e1") == [8, 16, 32]   # as the number fields read it
    assert parse_restrict("tp=4,8; recompute=none") == {"tp": [4, 8], "recompute": ["none"]}
    for text, fn in (("abc", parse_counts), ("0", parse_counts), ("1.5", parse_counts), ("inf", parse_counts),
                     ("tpp=1", parse_restrict), ("tp=", parse_restrict)):
        with pytest.raises(ConfigError) as e:
            fn(text)
        assert e.value.field.startswith("search.")


def test_restrictions_read_values_as_the_form_does_and_quote_what_was_typed():
    """Scientific notation as the number fields take it, words in any case; a refused value is
    quoted as typed, with what the dimension takes ("'1000000000.0' is not a valid value of
    micro_batch_size" quoted a number nobody wrote, "'True' is not a valid value" gave no hint)."""
    assert parse_restrict("tp=2e0,8; overlap_grad_reduce=True; recompute=None; schedule=1F1B; etp=null") == {
        "tp": [2, 8], "overlap_grad_reduce": [True], "recompute": ["none"], "schedule": ["1f1b"], "etp": [None]}
    for text, said in (("micro_batch_size=1e9", "'1e9' is not a valid value of micro_batch_size (a whole number from 1 to 65,536)"),
                       ("tp=1e400", "'1e400' is not a valid value of tp"),
                       ("zero_stage=1.5", "'1.5' is not a valid value of zero_stage (0, 1, 2 or 3)"),
                       ("overlap_grad_reduce=yes", "(true or false)"),
                       ("tp=" + ",".join(["2"] * 900), "tp needs 1 to 256 values, not 900")):
        with pytest.raises(ConfigError) as e:
            parse_restrict(text)
        assert said in e.value.issues[0][1], e.value.issues


def test_a_backwards_gpu_range_is_said_to_run_backwards():
    with pytest.raises(ConfigError) as e:
        parse_counts("8..4")
    assert e.value.issues == [("search.gpus", "'8..4' runs backwards: write the smaller count first (4..8)")]


def test_search_from_link_runs_and_loads_a_layout():
    at = open_search(search=encode_inputs(INPUTS))
    assert not at.error, [e.value for e in at.error]
    captions = " ".join(c.value for c in at.caption)
    assert "timed" in captions and "candidates in the space" in captions
    labels = [d.proto.label for d in at.get("download_button")]
    assert labels == ["Ranked candidates (CSV)", "Whole result (JSON)"]  # tests/test_csv_downloads.py: their content
    pick = next(s for s in at.selectbox if s.key and s.key.startswith("search.pick"))
    assert pick.options and "tp" in pick.options[0]
    at.button(key="search.use").click().run()
    assert not at.exception, [e.value for e in at.exception]
    strategy = json.loads(at.session_state["cfg.strategy"])
    assert strategy["tp"] in (1, 2) and strategy["cp"] == 1 and strategy["zero_stage"] in (1, 3)
    assert strategy["name"].startswith("search:")
    assert not any("came with the search's global batch" in i.value for i in at.info)   # the scenario's own 64 × 8192
    other = open_search(search=encode_inputs({**INPUTS, "global_batch": 128, "seq_len": 4096}))
    other.button(key="search.use").click().run()
    assert not other.exception, [e.value for e in other.exception]
    assert any("128 × 4,096 tokens (the scenario had 64 × 8,192)" in i.value for i in other.info), [i.value for i in other.info]


# -- the search runs in a bounded worker process, never on the server's script thread ---------


def _payload(inputs=None) -> str:
    from ui.config_io import dumps
    from ui.search_view import search_payload
    from ui.share import size_canonical

    sc = size_canonical("small")
    base = {k: v for k, v in sc["strategy"].items() if k not in ("tp", "pp", "global_batch_size", "seq_len", "dp", "name")}
    return search_payload(dumps(sc["model"]), dumps(sc["system"]), dumps(base), json.dumps(inputs or INPUTS, sort_keys=True))


def test_search_page_runs_the_search_in_a_worker(monkeypatch):
    """A search on the server's script thread holds its interpreter for as long as the search runs
    (DeepSeek-V3 on 16,384 GPUs: over a minute), starving every other session of the studio."""
    import simengine.api
    import simengine.search
    from ui import search_view

    def boom(*_a, **_k):
        raise AssertionError("the search ran in the server process")

    monkeypatch.setattr(simengine.api, "search", boom)
    monkeypatch.setattr(simengine.search, "search", boom)
    search_view._store.clear()
    at = open_search(search=encode_inputs({**INPUTS, "top": 4}))
    assert not at.error, [e.value for e in at.error]
    assert "timed" in " ".join(c.value for c in at.caption)
    assert at.session_state["worker.spent"]["seconds"] > 0   # the worker's time, charged to the session


def test_worker_search_reports_progress_and_equals_the_engine():
    from simengine import api
    from simengine.api import make_search_space
    from ui import worker
    from ui.search_inputs import parse_restrict

    seen = []
    out = worker.run("search", _payload(), "s-search", {}, progress=lambda d, n, t: seen.append((d, n)))
    assert out["ok"], out
    assert seen and all(0 <= d <= n for d, n in seen) and seen[-1][0] == seen[-1][1]
    from ui.share import size_canonical

    sc = size_canonical("small")
    base = {k: v for k, v in sc["strategy"].items() if k not in ("tp", "pp", "global_batch_size", "seq_len", "dp", "name")}
    here = api.search(make_search_space(sc["model"], sc["system"], global_batch=INPUTS["global_batch"], seq_len=INPUTS["seq_len"],
                                        gpus=[8], choices=parse_restrict(RESTRICT), base=base), top=INPUTS["top"])
    got = out["result"]["candidates"]
    assert [c["label"] for c in got] == [c.label() for c in here.candidates]
    assert [c["step_time_s"] for c in got] == [c.step_time_s for c in here.candidates]


class _Stop(Exception):
    pass


# every dimension on 8 … 4,096 GPUs: a search that cannot finish before the first poll (0.2 s)
LONG = {**INPUTS, "gpus": "8..4096", "restrict": ""}


def test_a_cancelled_search_kills_its_worker():
    from app_walk import assert_workers_killed
    from ui import worker

    def stop(*_a):
        raise _Stop  # what Streamlit does to the script run when the user clicks Cancel

    with pytest.raises(_Stop):
        worker.run("search", _payload(LONG), "s-search-cancel", {}, stop, stop)
    assert "s-search-cancel" not in worker._INFLIGHT
    assert_workers_killed()


def test_a_search_has_its_own_time_limit(monkeypatch):
    from ui import worker

    monkeypatch.setattr(worker, "SEARCH_TIMEOUT_S", 0.2)
    out = worker.run("search", _payload(LONG), "s-search-timeout", {})
    assert not out["ok"] and "search took more than" in out["issues"][0][1]


def test_bad_search_inputs_are_a_message_before_any_worker(monkeypatch):
    from ui import worker

    def boom(*_a, **_k):
        raise AssertionError("a worker started for inputs that cannot run")

    monkeypatch.setattr(worker, "run", boom)
    at = open_search(search=encode_inputs({**INPUTS, "restrict": "tpp=4"}))
    assert not at.exception, [e.value for e in at.exception]
    assert any("tpp=4" in e.value for e in at.error)


def _after_restrict(at):
    """The element right under the restrictions box in the search form."""
    kids = list(at.get("form")[0].children.values())
    return kids[[type(e).__name__ for e in kids].index("TextArea") + 1]


def test_bad_search_inputs_are_shown_under_their_fields():
    """They were a box below the form titled "The search could not run" with links to fix the
    Model, System or Strategy page: the wrong place for a typo in the GPU counts."""
    at = open_search(search=encode_inputs({**INPUTS, "gpus": "abc", "restrict": "tpp=4"}))
    form = at.get("form")[0]
    gpus_column = form.children[0].children[0]
    assert [type(e).__name__ for e in gpus_column.children.values()] == ["TextInput", "Error"]
    assert "'abc' is not a GPU count list" in gpus_column.children[1].value
    after_restrict = _after_restrict(at)
    assert type(after_restrict).__name__ == "Error" and "tpp=4" in after_restrict.value
    assert len(at.error) == 2
    assert [p.label for p in at.main.get("page_link")] == []  # no "Fix on the Model page"


def test_a_bad_restriction_value_is_shown_under_the_field_before_any_worker(monkeypatch):
    """tp=abc passed the page's parser, started a worker, and came back as "The search could not
    run: strategy.tp: 'abc' is not a valid value of tp" below the form, with Model/System/Strategy links."""
    from ui import worker

    def boom(*_a, **_k):
        raise AssertionError("a worker started for inputs that cannot run")

    monkeypatch.setattr(worker, "run", boom)
    at = open_search(search=encode_inputs({**INPUTS, "restrict": "tp=abc"}))
    after_restrict = _after_restrict(at)
    assert type(after_restrict).__name__ == "Error" and "'abc' is not a valid value of tp" in after_restrict.value
    assert len(at.error) == 1 and not at.main.get("page_link")
    with pytest.raises(ConfigError) as e:
        parse_restrict("pp=1,2\nschedule=1f1b,nope")
    assert e.value.issues[0][0] == "search.restrict" and "nope" in e.value.issues[0][1]
    # every bad line is said, all under the box (only the first was, then only the last)
    with pytest.raises(ConfigError) as e:
        parse_restrict("tp=0\nfoo=bar\npp=1\npp=2\nschedule=")
    said = [m for _, m in e.value.issues]
    assert len(said) == 4 and "'foo=bar'" in said[1] and "restricted twice" in said[2] and "lists no value" in said[3]
    at = open_search(search=encode_inputs({**INPUTS, "restrict": "tp=abc\nfoo=bar"}))
    box = _after_restrict(at)
    assert type(box).__name__ == "Error" and "'abc' is not a valid value of tp" in box.value and "foo=bar" in box.value


def test_cancelled_search_waits_for_the_user():
    """Cancel stops the search for good (the rerun that the click causes does not start it again)
    until "Run it after all"."""
    from ui import search_view

    search_view._store.clear()
    at = open_search()
    inputs = {**INPUTS, "top": 3}
    at.session_state["search.inputs"] = inputs
    at.session_state["search.token"] = encode_inputs(inputs)
    at.query_params["search"] = encode_inputs(inputs)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    payload = next(iter(search_view._store()))
    search_view._store.clear()
    at.session_state["search.cancelled"] = payload
    at.run()
    assert "Search cancelled." in [w.value for w in at.warning]
    at.button(key="search.resume").click().run()
    assert not at.exception and "timed" in " ".join(c.value for c in at.caption)


def test_a_heavy_scenarios_fit_changes_run_in_a_worker(monkeypatch):
    """The smallest changes to fit are a few dozen estimates of the current scenario: seconds each
    for a heavy one (1,024 layers at pp 8 · vpp 128), so they go to a worker too."""
    from ui import heavy, search_fit
    from ui.config_io import apply_diff, dumps
    from ui.share import encode_token, size_canonical

    big = apply_diff(size_canonical("medium"), {"model": {"num_layers": 1024}, "strategy": {"pp": 8, "vpp": 128}})

    def boom(*_a, **_k):
        raise AssertionError("a heavy scenario's fit changes ran on the script thread")

    monkeypatch.setattr(search_fit, "fit_changes_json", boom)
    heavy._CACHE.clear()
    inputs = {**INPUTS, "gpus": str(big["system"]["num_gpus"]), "top": 1,
              "restrict": "tp=8\npp=8\nvpp=1\ncp=1\nschedule=1f1b\nzero_stage=1\nrecompute=full\nmicro_batch_size=1"}
    at = AppTest.from_file(str(ROOT / "pages/search.py"), default_timeout=300)
    at.query_params["s"] = encode_token(big)
    at.query_params["search"] = encode_inputs(inputs)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert ("fit", dumps(big)) in heavy._CACHE


def test_a_partial_search_is_shown_as_such_and_not_kept(monkeypatch):
    """A search stopped at its time limit comes back with its best so far: the page shows it with
    a warning that says so, and the next visit runs the search again (nothing cached)."""
    from simengine import api
    from simengine.api import make_search_space
    from ui import heavy, search_view
    from ui.search_inputs import parse_restrict
    from ui.share import size_canonical

    sc = size_canonical("small")
    res = api.search(make_search_space(sc["model"], sc["system"], global_batch=INPUTS["global_batch"], seq_len=INPUTS["seq_len"],
                                       gpus=[8], choices=parse_restrict(RESTRICT)), top=3).to_json()
    why = "this search took more than 180 s and was stopped; pin or restrict dimensions"
    calls = []

    def runner(payload, tick=None, progress=None):
        calls.append(payload)
        return {"ok": True, "partial": why, "result": res, "issues": []}

    monkeypatch.setattr(heavy, "run_search", runner)
    search_view._store.clear()
    at = open_search(search=encode_inputs({**INPUTS, "top": 3}))
    assert not at.exception, [e.value for e in at.exception]
    warning = " ".join(w.value for w in at.warning)
    assert "This search took more than 180 s" in warning and "not proven the best" in warning
    assert "timed" in " ".join(c.value for c in at.caption)
    assert not search_view._store()
    at.run()
    assert len(calls) == 2


def test_the_scenarios_explicit_layer_split_is_searched_not_pinned():
    """A scenario with pipeline_layers (the DeepSeek-V3 preset: Megatron-Bridge's pp8·vpp4 layout)
    searches every pipeline depth: the split is left out of the fixed fields, and the page says so."""
    from simengine import presets
    from simengine.api import make_search_space, search
    from ui.search_view import search_base

    base, dropped = search_base(presets.scenario_preset("deepseek-v3-ep64")["strategy"])
    assert dropped and "pipeline_layers" not in base and base["moe_dispatcher"] == "deepep"
    small = presets.size_scenario("small")
    base, dropped = search_base(small["strategy"])
    assert not dropped and set(base) == set(small["strategy"]) - {*DIMS_ALL, "global_batch_size", "seq_len", "dp", "name"}
    # llama3-8b's 32 layers on pp2 as [15, 17]: the search still reaches pp 4
    strat = dict(small["strategy"], pp=2, pipeline_layers=[15, 17])
    base, dropped = search_base(strat)
    space = make_search_space(small["model"], small["system"], global_batch=32, seq_len=4096, gpus=[8], base=base,
                              choices={"tp": [1], "pp": [4], "cp": [1], "zero_stage": [1], "recompute": ["none"]})
    res = search(space, top=5)
    assert dropped and res.candidates and {c.strategy["pp"] for c in res.candidates} == {4}
    assert all(c.strategy.get("pipeline_layers") is None for c in res.candidates)


def test_a_number_out_of_range_is_said_under_its_field_and_nothing_runs(monkeypatch):
    """Top 600 (1 to 500) was refused by the browser with only a red icon and pressing Search did
    nothing; the number inputs are float widgets without min/max (so "1e3" reads as 1000), checked
    on Search (ui/search_inputs.py parse_count)."""
    from ui import heavy
    from ui.search_inputs import parse_count

    assert parse_count("global_batch", 1000.0) == 1000 and parse_count("top", 5) == 5
    for key, bad in (("top", 600), ("top", 0), ("top", 2.5), ("seq_len", float("nan")), ("global_batch", True)):
        with pytest.raises(ConfigError) as e:
            parse_count(key, bad)
        assert e.value.field == f"search.{key}"
    monkeypatch.setattr(heavy, "run_search", lambda *a, **k: pytest.fail("no search may start"))
    at = open_search()
    at.number_input(key="search.top").set_value(600)
    at.button[0].click()   # the form's submit button is the page's first
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("give a whole number from 1 to 500" in e.value for e in at.error)
    assert any("Not searched" in w.value for w in at.warning)
    assert "search.inputs" not in at.session_state


def test_every_bad_input_is_said_at_once(monkeypatch):
    """Bad GPU counts and pins were said only after the numbers were put right (errors in rounds)."""
    from ui import heavy

    monkeypatch.setattr(heavy, "run_search", lambda *a, **k: pytest.fail("no search may start"))
    at = open_search()
    at.text_input(key="search.gpus").input("abc")
    at.number_input(key="search.top").set_value(0)
    at.text_area(key="search.restrict").input("foo=1")
    at.button[0].click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(e.value for e in at.error)
    assert "give a whole number from 1 to 500" in said and "abc" in said and "foo" in said, said
    assert "search.inputs" not in at.session_state


# -- a search that returns nothing, Pareto points beyond the ranking, a dimension given twice ----


def test_a_space_with_no_valid_layout_says_why_and_draws_no_table():
    # 10**6 GPUs of the small model at batch 64: no layout can split the batch (browser audit:
    # an empty grid, an empty chart with a "NaN" legend, and "more GPUs" as the advice)
    at = open_search(search=encode_inputs({**INPUTS, "gpus": "1000000", "restrict": ""}))
    warned = " ".join(w.value for w in at.warning)
    assert "No layout in this space is valid" in warned and "most common reason" in warned
    assert "more GPUs" not in warned
    assert not at.get("vega_lite_chart") and not at.get("download_button")
    assert not at.get("component_instance")   # no AgGrid either
    assert any("Rejected candidates" in e.label for e in at.expander)
    # each reason whole with its count and an example (a table cut them at 1,600 px)
    listed = [m.value for m in at.markdown if m.value.startswith("- **")]
    assert listed and "invalid" in listed[0] and "e.g." in listed[0]


def test_empty_reason_tells_memory_from_invalid_layouts():
    from ui.search_view import empty_reason

    oom = {"rejected": {"oom: OOM by at least N GiB": 3, "invalid: strategy.tp: x": 5}}
    assert "fits in memory" in empty_reason(oom)
    bad = {"rejected": {"invalid: a": 2, "invalid: b": 7}, "rejected_examples": {"invalid: b": {"reason": "tp=3 does not divide 32"}}}
    said = empty_reason(bad)
    assert "No layout in this space is valid" in said and "7 of 9" in said and "tp=3 does not divide 32" in said
    assert "see the reasons below" in empty_reason({"rejected": {"bound: outside the top N": 4}})


def test_pareto_points_beyond_the_ranking_carry_no_rank():
    from ui.search_view import PARETO_ONLY, item_labels, points_frame

    def cand(i: int) -> dict:
        return {"label": f"L{i}", "order": i, "strategy": {}, "band": {}, "tokens_per_s": 100.0 - i, "mfu": 0.5,
                "cost_per_million_tokens_usd": 1.0 + i, "peak_memory_gib": 10.0, "headroom_gib": 5.0 + i, "gpus": 8}

    ranked, front = [cand(0)], [cand(0), cand(5)]
    df, items = points_frame(ranked, front)
    assert list(df["place"]) == ["#1", PARETO_ONLY]
    assert item_labels(items, len(ranked)) == ["#1 L0", "(Pareto) L5"]


def test_a_dimension_restricted_twice_is_refused():
    with pytest.raises(ConfigError, match="restricted twice"):
        parse_restrict("tp=4\ntp=2")


def test_pins_that_leave_no_layout_are_said_under_the_pins():
    at = open_search(search=encode_inputs({**INPUTS, "restrict": "schedule=interleaved\npp=2\nvpp=3"}))
    said = " ".join(e.value for e in at.error).replace("\\", "")   # the page escapes Markdown
    assert "leave no layout" in said and "pp*vpp = 2*3 = 6" in said
    assert not at.get("progress")   # no full "done" bar above the failure (a search that ran draws one)
    empty = open_search(search=encode_inputs({**INPUTS, "restrict": "tp=3"}))   # runs, finds nothing valid
    assert empty.warning and not empty.get("progress")
    assert [p.proto.text for p in open_search(search=encode_inputs(INPUTS)).get("progress")] == ["done"]


def test_every_candidate_shows_the_days_and_cost_to_train_the_sessions_budget():
    """The objectives "time / cost to train the token budget" were offered with no budget anywhere
    on the page: the ranking equalled tokens/s and no candidate said how long or how much."""
    from simengine.api import time_and_cost_to_train
    from ui.search_view import candidates_frame, results_csv, with_budget

    at = open_search(search=encode_inputs(INPUTS))
    box = at.number_input(key="search.budget_b")
    assert box.value == 1000.0    # the session's budget (the Estimate page's default), in billion tokens
    box.set_value(15000.0).run()
    assert not at.exception and at.session_state["budget.value"] == 15000.0   # the same budget, kept in the link
    assert at.query_params["budget"] == "15000"
    at.number_input(key="search.budget_b").set_value(-5.0).run()   # out of range: said, and the table keeps 15000
    assert not at.exception and "the table shows the last one in range, 15000 billion" in " ".join(e.value for e in at.error)
    assert at.session_state["budget.value"] == 15000.0 and at.query_params["budget"] == "15000"
    cand = {"label": "L", "order": 0, "strategy": {}, "band": {}, "tokens_per_s": 2.0e6, "mfu": 0.5, "gpus": 64,
            "cost_per_million_tokens_usd": 0.1, "peak_memory_gib": 1.0, "headroom_gib": 1.0}
    [c] = with_budget([cand], 15e12)
    assert (c["time_to_train_s"], c["cost_to_train_usd"]) == time_and_cost_to_train(15e12, 2.0e6, 0.1) == (7.5e6, 1.5e6)
    df = candidates_frame([c], [])
    assert df["days_to_train"][0] == round(7.5e6 / 86400, 2) and df["usd_to_train"][0] == 1_500_000
    head = results_csv([c], []).splitlines()[0].split(",")
    assert "time_to_train_s" in head and "cost_to_train_usd" in head


def test_the_pareto_chart_formats_its_axes_and_legend():
    """One point (a degenerate domain) drew its ticks as "82,994.000000" and "0.080100"; with one
    GPU count the x axis is the memory headroom (below)."""
    from ui.search_view import pareto_chart, points_frame

    cand = {"label": "L", "order": 0, "strategy": {}, "band": {}, "tokens_per_s": 82994.0, "mfu": 0.5, "gpus": 8,
            "cost_per_million_tokens_usd": 0.0801, "peak_memory_gib": 1.0, "headroom_gib": 21.29}
    other = dict(cand, label="M", order=1, gpus=16, cost_per_million_tokens_usd=0.0905, tokens_per_s=146000.0)
    df, _ = points_frame([cand, other], [cand, other])
    enc = pareto_chart(df).to_dict()["encoding"]
    assert enc["y"]["axis"]["format"] == ",.0f" and enc["x"]["axis"]["format"] == "$,.3~f"  # $0.080 … $0.091
    assert enc["color"]["legend"]["format"] == ",.1f"
    one, _ = points_frame([cand], [cand])
    assert pareto_chart(one).to_dict()["encoding"]["x"]["axis"]["format"] == ",.1f"


def test_with_one_gpu_count_the_pareto_chart_trades_throughput_for_memory():
    """With one GPU count the cost per token is price × GPUs / tokens/s: cost against tokens/s drew
    one curve twice (x and y the same information), 0.3 % apart filling the plot. Now tokens/s
    against free memory, and the caption says how far apart the points are."""
    from ui.search_view import pareto_caption, pareto_chart, points_frame

    base = {"strategy": {}, "band": {}, "mfu": 0.5, "gpus": 8, "peak_memory_gib": 1.0}
    cands = [dict(base, label="A", order=0, tokens_per_s=85600.0, cost_per_million_tokens_usd=0.0777, headroom_gib=3.9),
             dict(base, label="B", order=1, tokens_per_s=85250.0, cost_per_million_tokens_usd=0.0780, headroom_gib=21.0)]
    df, _ = points_frame(cands, cands)
    enc = pareto_chart(df).to_dict()["encoding"]
    assert enc["x"]["field"] == "headroom_gib" and "color" not in enc
    said = pareto_caption(df)
    assert "One GPU count" in said and "85,250 to 85,600 (0.4 % apart" in said
    df2, _ = points_frame([cands[0], dict(cands[1], gpus=16)], [cands[0], dict(cands[1], gpus=16)])
    assert pareto_chart(df2).to_dict()["encoding"]["x"]["field"] == "cost_per_million_tokens_usd"
    assert pareto_caption(df2).startswith("Colour: free GiB")


def test_a_front_of_one_gpu_count_out_of_several_searched_says_so():
    """A search of 64..256 whose front holds only 64-GPU layouts opened its caption "One GPU
    count: …", as if one count had been searched: now it says the front holds one of the three."""
    from ui.search_view import pareto_caption, points_frame

    base = {"strategy": {}, "band": {}, "mfu": 0.5, "gpus": 64, "peak_memory_gib": 1.0}
    cands = [dict(base, label="A", order=0, tokens_per_s=85600.0, cost_per_million_tokens_usd=0.0777, headroom_gib=3.9),
             dict(base, label="B", order=1, tokens_per_s=85250.0, cost_per_million_tokens_usd=0.0780, headroom_gib=21.0)]
    df, _ = points_frame(cands, cands)
    said = pareto_caption(df, 3)
    assert said.startswith("The front holds one GPU count (64) of the 3 searched") and "One GPU count" not in said
    assert "85,250 to 85,600" in said
    assert pareto_caption(df, 1).startswith("One GPU count:") and pareto_caption(df).startswith("One GPU count:")


def test_what_if_rows_are_marked_and_one_click_searches_the_stacks_own_schedules():
    """A pp 4 space of the default model at 2,048 tokens ranks DualPipe / zero-bubble layouts first: Megatron-Core
    ships neither, so the page says so, marks the rows, and its button restricts the schedules to
    the stack's own (the restriction box, the search and the share link follow)."""
    from ui import search_view

    search_view._store.clear()
    at = open_search(search=encode_inputs({**INPUTS, "seq_len": 2048, "top": 3, "restrict": "tp=1\npp=4\ncp=1\ntp_comm_overlap=false"}))
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(i.value for i in at.info)
    assert "what-if" in said and "Megatron-Core does not ship" in said
    assert "\\*" not in said   # no markdown the escaping would print literally (md() escapes '*')
    at.button(key="search.shipped").click().run()
    assert not at.exception, [e.value for e in at.exception]
    restrict = at.session_state["search.inputs"]["restrict"]
    assert restrict.endswith("schedule=1f1b,interleaved") and "pp=4" in restrict
    assert at.text_area(key="search.restrict").value == restrict
    assert "what-if" not in " ".join(i.value for i in at.info)
    assert f"&search={at.session_state['search.token']}" in at.sidebar.code[0].value


def test_restricting_to_the_stacks_schedules_replaces_a_schedule_line():
    from ui.search_inputs import restricted_to_schedules

    got = restricted_to_schedules({"restrict": "tp=1; strategy.schedule=dualpipe\npp=4", "top": 3}, ["1f1b", "interleaved"])
    assert got == {"restrict": "tp=1\npp=4\nschedule=1f1b,interleaved", "top": 3}
    assert parse_restrict(got["restrict"])["schedule"] == ["1f1b", "interleaved"]


def test_the_grid_is_as_tall_as_its_wrapped_rows():
    """The grid's height assumed one-line rows (70 + 30·rows): with Top = 4 and two-line layout
    labels only two rows were in view. Each row now counts its label's lines, up to the cap."""
    from ui.search_view import GRID_MAX_PX, grid_height

    two_lines = "8 GPUs tp2 pp1 mbs4 zero3 offload9 overlap grad+param+tp"   # 56 characters: wraps once
    assert grid_height([two_lines] * 4) == 125 + 4 * (8 + 2 * 26) > 70 + 30 * 4 + 4 * 26
    assert grid_height(["8 GPUs tp8 pp1 mbs1"]) == 125 + 34
    assert grid_height([two_lines] * 25) == GRID_MAX_PX


def test_a_search_stopped_with_nothing_timed_points_to_the_search_inputs(monkeypatch):
    """A search that hit its time limit before timing anything said so with "Fix on the Model /
    System / Strategy page" links under it: the fix is in the search's own inputs."""
    from ui import heavy, search_view

    why = "this search took more than 180 s and was stopped; pin or restrict dimensions (e.g. tp=8, pp=8,16)"
    monkeypatch.setattr(heavy, "run_search", lambda payload, tick=None, progress=None: {"ok": False, "issues": [("", why)]})
    search_view._store.clear()
    at = open_search(search=encode_inputs({**INPUTS, "top": 7}))
    assert not at.exception, [e.value for e in at.exception]
    assert any("took more than 180 s" in e.value for e in at.error)
    assert not at.main.get("page_link")


def test_the_shared_result_store_evicts_an_entry_another_session_took_without_an_error(monkeypatch):
    """The sessions' threads share the store (``cached_search``): an oldest key that another session
    evicted between this one's choosing and popping it was a KeyError on a full store."""
    from ui import search_view

    class Racing(dict):
        raced = False

        def __iter__(self):   # once, as if another session popped the oldest key just before this pop
            first = [] if self.raced else ["gone"]
            self.raced = True
            return iter([*first, *super().__iter__()])

    store = Racing({f"k{i}": {"ok": True} for i in range(search_view.CACHE_ENTRIES)})
    monkeypatch.setattr(search_view, "_store", lambda: store)
    assert search_view.cached_search("new", lambda p: {"ok": True})["ok"]
    assert "new" in store and len(store) <= search_view.CACHE_ENTRIES
