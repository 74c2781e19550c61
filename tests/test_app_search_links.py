"""AppTest of the Search page's links: a search opened from a link, damaged links, the address
and share link carrying the search on every page, and which click picks the layout (split from
test_app_search.py)."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from simengine.errors import ConfigError
from test_app_search import INPUTS, ROOT, open_search
from ui.search_view import decode_inputs, encode_inputs


def test_link_round_trip_and_damaged_links():
    assert decode_inputs(encode_inputs(INPUTS)) == INPUTS
    out_of_range = [encode_inputs({**INPUTS, k: v}) for k, v in (("top", 0), ("top", 501), ("seq_len", 0), ("global_batch", 10**9))]
    not_text = [encode_inputs({**INPUTS, "objective": v}) for v in (["tokens_per_s"], {"a": 1})]   # unhashable: a TypeError
    for bad in ("", "!!!", "x" * 5000, encode_inputs({**INPUTS, "objective": "speed"}), *out_of_range, *not_text):
        with pytest.raises(ConfigError):
            decode_inputs(bad)


def test_damaged_search_link_is_a_message():
    at = open_search(search="not-a-token")
    assert [e.value for e in at.error] == ["Could not open the search link: the search link is damaged."]
    assert "search" not in at.query_params and "search=" not in at.sidebar.code[0].value   # not handed on


def test_the_search_shown_keeps_its_link_after_another_page():
    """Back on the Search page from another page (whose address has no ``search=``), the result is
    still shown, and so the address bar and the share link carry its token again; past a damaged
    link the page shows the session's search and the links carry its token, not the damaged one."""
    from ui import search_view

    search_view._store.clear()
    tok = encode_inputs({**INPUTS, "top": 2})
    at = open_search(search=tok)
    at.switch_page("pages/estimate.py").run()
    at.query_params.pop("search", None)   # a page's own address holds no search (sidebar navigation)
    at.switch_page("pages/search.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "timed" in " ".join(c.value for c in at.caption)
    assert at.query_params["search"] == tok and f"&search={tok}" in at.sidebar.code[0].value
    at.query_params["search"] = "damaged"
    at.run()
    assert [e.value for e in at.error] == ["Could not open the search link: the search link is damaged."]
    assert at.query_params["search"] == tok and "damaged" not in at.sidebar.code[0].value


def test_the_sidebar_share_link_carries_the_search():
    """On the Search page the share link reproduces the search (its ``search=`` token), after a
    search from a link and after pressing Search; a token that cannot be one stays out of it."""
    from ui import search_view

    search_view._store.clear()
    tok = encode_inputs({**INPUTS, "top": 2})
    at = open_search(search=tok)
    assert not at.exception, [e.value for e in at.exception]
    assert f"&search={tok}" in at.sidebar.code[0].value
    at.text_input(key="search.gpus").input("8")
    at.number_input(key="search.top").set_value(3)
    at.button[0].click()   # the form's submit button is the page's first
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    new = encode_inputs({**decode_inputs(tok), "top": 3})
    assert at.session_state["search.token"] == new and f"&search={new}" in at.sidebar.code[0].value
    bad = open_search(search="<script>alert(1)</script>")
    assert "search=" not in bad.sidebar.code[0].value


def test_the_latest_click_in_the_table_or_on_the_chart_picks_the_layout():
    """A chart point stays selected across reruns, and so does a table row: the one that changed
    last wins (a chart pick used to override every later table click, so 'Use this layout'
    loaded #11 with row 5 highlighted); another search starts with nothing picked."""
    from ui.search_view import latest_pick

    saved, picked = latest_pick(None, "t1", None, 10)        # a chart point
    assert picked == 10
    saved, picked = latest_pick(saved, "t1", 2, 10)           # then table row 3
    assert picked == 2
    saved, picked = latest_pick(saved, "t1", 4, 10)           # then row 5
    assert picked == 4
    saved, picked = latest_pick(saved, "t1", 4, 10)           # a rerun with no new click
    assert picked == 4
    saved, picked = latest_pick(saved, "t1", 4, 7)            # another chart point
    assert picked == 7
    assert latest_pick(saved, "t2", None, None)[1] is None   # a new search


def test_another_search_starts_with_its_first_layout_picked():
    """The Layout picker (and the grid and chart that pick into it) belongs to one search: after
    another search it names the new #1. Under one key the picker kept the old search's choice, so
    "Use this layout" loaded the new search's 3rd row; a chart point picked before did the same."""
    from ui import search_view

    search_view._store.clear()
    at = open_search(search=encode_inputs({**INPUTS, "top": 4}))

    def picker():
        return next(s for s in at.selectbox if s.key and s.key.startswith("search.pick"))

    picker().set_value(2).run()
    assert picker().value == 2
    at.number_input(key="search.top").set_value(5)
    at.button[0].click()   # the form's submit button is the page's first
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["search.inputs"]["top"] == 5
    assert picker().value == 0 and picker().options[0].startswith("#1 ")


def test_every_page_keeps_the_search_in_its_address_and_links():
    """After a search, another page's address, its share link and the sidebar's page links carry
    the search (a reload of Estimate lost it); a fresh session opened on that address shows the
    search once it goes to the Search page. The page links open each page at the session's
    address, so the page has nothing left to write to it (one history entry per click)."""
    from urllib.parse import parse_qs

    from ui import search_view

    search_view._store.clear()
    tok = encode_inputs({**INPUTS, "top": 2})
    at = open_search(search=tok)
    at.switch_page("pages/estimate.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.query_params["search"] == tok and f"&search={tok}" in at.sidebar.code[0].value
    links = [el.proto for el in at.sidebar.get("page_link")]
    address = {k: [v] for k, v in at.query_params.items()}
    assert links and all(parse_qs(p.query_string) == address for p in links), [p.query_string for p in links]
    fresh = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    for k, v in at.query_params.items():
        fresh.query_params[k] = v
    fresh.query_params["page"] = "estimate"
    fresh.run()
    fresh.switch_page("pages/search.py").run()
    assert not fresh.exception, [e.value for e in fresh.exception]
    assert "timed" in " ".join(c.value for c in fresh.caption)
