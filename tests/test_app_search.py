"""AppTest of the Search page: a small search runs, the layout loads into the Strategy editor,
the search link round-trips, a damaged link is a message, and the page is in the navigation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from simengine.errors import ConfigError
from ui.layout import PAGES
from ui.search_view import decode_inputs, encode_inputs, parse_counts, parse_restrict

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


def test_link_round_trip_and_damaged_links():
    assert decode_inputs(encode_inputs(INPUTS)) == INPUTS
    out_of_range = [encode_inputs({**INPUTS, k: v}) for k, v in (("top", 0), ("top", 501), ("seq_len", 0), ("global_batch", 10**9))]
    for bad in ("", "!!!", "x" * 5000, encode_inputs({**INPUTS, "objective": "speed"}), *out_of_range):
        with pytest.raises(ConfigError):
            decode_inputs(bad)


def test_input_parsers_name_the_field():
    assert parse_counts("64..256") == [64, 128, 256] and parse_counts("8,16") == [8, 16]
    assert parse_restrict("tp=4,8; recompute=none") == {"tp": [4, 8], "recompute": ["none"]}
    for text, fn in (("abc", parse_counts), ("0", parse_counts), ("tpp=1", parse_restrict), ("tp=", parse_restrict)):
        with pytest.raises(ConfigError) as e:
            fn(text)
        assert e.value.field.startswith("search.")


def test_search_from_link_runs_and_loads_a_layout():
    at = open_search(search=encode_inputs(INPUTS))
    assert not at.error, [e.value for e in at.error]
    captions = " ".join(c.value for c in at.caption)
    assert "timed" in captions and "candidates in the space" in captions
    pick = next(s for s in at.selectbox if s.key and s.key.startswith("search.pick"))
    assert pick.options and "tp" in pick.options[0]
    at.button(key="search.use").click().run()
    assert not at.exception, [e.value for e in at.exception]
    strategy = json.loads(at.session_state["cfg.strategy"])
    assert strategy["tp"] in (1, 2) and strategy["cp"] == 1 and strategy["zero_stage"] in (1, 3)
    assert strategy["name"].startswith("search:")


def test_damaged_search_link_is_a_message():
    at = open_search(search="not-a-token")
    assert any("search link" in e.value for e in at.error)
