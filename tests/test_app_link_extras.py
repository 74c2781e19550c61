"""Work is not lost: pins and the token budget live in the session and the share link (a reload
or a colleague's browser gets them back), and a link that cannot be opened stays in the address
bar with its message instead of being replaced by ``?preset=small``."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlsplit

import pytest

from app_walk import LINK_OR_IMAGE, open_app, open_fold, open_page, texts
from ui.config_io import dumps
from ui.pins import budget_text, decode_pins, encode_pins, parse_budget
from ui.share import ShareLinkError, pack, size_canonical
from ui.text import md


def _pins(at):
    return at.session_state.get("pins", [])


def test_pins_survive_a_reload_through_the_link():
    at = open_app("pages/estimate.py")
    assert not at.get("text_input")  # the comparison is folded until something is pinned
    open_fold(at, "pin.box").button(key="pin.add").click().run()
    at.switch_page("pages/home.py").run()
    at.button(key="size.medium").click().run()
    at.switch_page("pages/estimate.py").run()
    at.text_input(key="pin.label").set_value("the medium one").run()
    at.button(key="pin.add").click().run()
    params = dict(at.query_params)
    assert params["preset"] == "medium" and params["pins"].startswith("v1.")
    reloaded = open_app("pages/estimate.py", **params)  # a new session: what a reload or a colleague gets
    assert not reloaded.exception
    assert next(e for e in reloaded.expander if e.label.startswith("Compare pinned")).proto.expanded  # pins: open
    assert [p["label"] for p in _pins(reloaded)][-1] == "the medium one" and len(_pins(reloaded)) == 2
    assert [json.loads(p["json"]) for p in _pins(reloaded)] == [size_canonical("small"), size_canonical("medium")]
    table = reloaded.dataframe[-1].value
    assert "the medium one" in " ".join(map(str, table.to_numpy().ravel().tolist() + list(table.columns)))
    assert dict(reloaded.query_params) == params


def test_token_budget_is_kept_across_pages_and_in_the_link():
    at = open_app("pages/estimate.py")
    at.number_input(key="budget.tokens").set_value(50.0).run()
    at.switch_page("pages/home.py").run()
    at.switch_page("pages/estimate.py").run()
    assert at.number_input(key="budget.tokens").value == 50.0
    assert at.query_params["budget"] == "50"
    again = open_app("pages/estimate.py", preset="small", budget="50")
    assert again.number_input(key="budget.tokens").value == 50.0


@pytest.mark.parametrize("value", [15000.25, 1234.5678, 0.0012345678, 50.0])
def test_the_link_reproduces_the_token_budget_exactly(value):
    """%g keeps six digits: a budget of 15000.25 reached a colleague as 15000.2 (another cost)."""
    at = open_app("pages/estimate.py")
    at.number_input(key="budget.tokens").set_value(value).run()
    again = open_app("pages/estimate.py", **dict(at.query_params))
    assert again.number_input(key="budget.tokens").value == value
    assert parse_budget(budget_text(value)) == value


def test_the_share_url_opens_the_largest_token_budget():
    """The sidebar's share URL wrote budget=1e+06 unencoded: the '+' reads back as a space, so the
    link opened with "the token budget '1e 06' in the link is not a number"."""
    at = open_app("pages/estimate.py")
    at.number_input(key="budget.tokens").set_value(1e6).run()
    url = next(c.value for c in at.sidebar.code if "budget=" in c.value)
    query = {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}
    assert query["budget"] == budget_text(1e6)
    again = open_app(f"pages/{query.pop('page')}.py", **query)
    assert "Could not open" not in texts(again.error)
    assert again.number_input(key="budget.tokens").value == 1e6


@pytest.mark.parametrize("query", [{"s": "v1.garbage!"}, {"preset": "evil"}, {"preset": "small", "pins": "junk"},
                                   {"preset": "small", "budget": "-3"}])
def test_a_bad_link_stays_in_the_address_bar_with_its_message(query):
    at = open_page("pages/home.py", **query)
    assert not at.exception
    assert "Could not open" in texts(at.error)
    assert dict(at.query_params) == query
    at.run()  # any rerun: still the user's link, still the message
    assert dict(at.query_params) == query and "Could not open" in texts(at.error)
    at.button(key="size.medium").click().run()  # the user moves on: now the address is the new scenario's
    assert at.query_params["preset"] == "medium" and "Could not open" not in texts(at.error)


@pytest.mark.parametrize("query", [{"s": "v1.not_base64!"}, {"s": "v1.eNqrVkpSslIqzk3"}, {"preset": "small", "pins": "v1.x!"},
                                   {"preset": "small", "budget": "x"}])
def test_a_link_error_reads_as_one_sentence(query):
    """"…was it cut short?. Showing the small preset instead." — one stop after the question."""
    shown = texts(open_page("pages/home.py", **query).error)
    assert "Could not open" in shown and "?." not in shown and ".." not in shown


def test_pins_round_trip_and_hostile_entries():
    pins = [{"label": "a", "json": dumps(size_canonical("small"))}, {"label": "b" * 200, "json": dumps(size_canonical("large"))}]
    got, notes = decode_pins(encode_pins(pins))
    assert [p["json"] for p in got] == [p["json"] for p in pins] and notes == []
    assert len(got[1]["label"]) == 80
    assert encode_pins([]) == ""
    mixed = pack([{"l": "ok", "b": "small", "d": {}}, {"l": "bad", "b": "small", "d": {"strategy": {"tp": 0}}}, 7])
    got, notes = decode_pins(mixed)
    assert [p["label"] for p in got] == ["ok"] and len(notes) == 2 and "tp" in notes[0]
    for bad in ("junk", pack({"l": 1}), "v1." + "A" * 70_000):
        with pytest.raises(ShareLinkError):
            decode_pins(bad)
    assert parse_budget("12.5") == 12.5
    for bad in ("nan", "inf", "0", "1e9", "x"):
        with pytest.raises(ShareLinkError):
            parse_budget(bad)


@pytest.mark.parametrize("value", [-5.0, 2e6, 0.0])
def test_a_budget_out_of_range_is_said_and_shows_no_figures(value):
    """A bounded number input kept its last value while showing the refused one, so 'Time to
    train' and 'Cost' silently belonged to the previous budget: now the field says what is wrong,
    the figures wait for a budget in range, and the session's budget (and link) stay as they were."""
    at = open_app("pages/estimate.py")
    at.number_input(key="budget.tokens").set_value(50.0).run()
    assert "Time to train" in [m.label for m in at.metric]
    at.number_input(key="budget.tokens").set_value(value).run()
    assert not at.exception
    assert "Give a token budget between" in texts(at.error)
    assert "Time to train" not in [m.label for m in at.metric]
    assert at.query_params["budget"] == "50"


def test_a_full_pin_list_keeps_every_pin_the_user_made(monkeypatch):
    """A ninth pin silently dropped the first one (state.pin kept the last MAX_PINS): the user's
    pinned scenario vanished from the table and the link. Now the button is disabled with the
    reason, and state.pin refuses (saying why) instead of dropping the oldest pin."""
    from ui import state
    from ui.pins import MAX_PINS

    mine = [{"label": f"mine {i}", "json": dumps({**size_canonical("small"), "strategy": {
        **size_canonical("small")["strategy"], "global_batch_size": 8 * (i + 1)}})} for i in range(MAX_PINS)]
    at = open_app("pages/estimate.py")
    at.session_state["pins"] = mine
    at.run()
    assert at.button(key="pin.add").disabled and "clear the pins" in at.button(key="pin.add").help
    assert [p["label"] for p in _pins(at)] == [p["label"] for p in mine]

    session = {"pins": list(mine), **{f"cfg.{s}": dumps(size_canonical("medium")[s]) for s in ("model", "system", "strategy")}}
    monkeypatch.setattr(state, "_ss", lambda: session)
    monkeypatch.setattr(state, "sync_link", lambda: None)
    assert "At most 8" in (state.pin("one more") or "")
    assert [p["label"] for p in session["pins"]] == [p["label"] for p in mine]
    session["pins"] = mine[:2]
    assert state.pin("one more") is None and [p["label"] for p in session["pins"]] == ["mine 0", "mine 1", "one more"]
    assert state.pin("again") == "Already pinned."


def test_a_pin_that_cannot_be_estimated_is_said_not_dropped(monkeypatch):
    """A pinned scenario whose estimate failed vanished from the comparison without a word (the
    user read it as lost): now a line names the pin and quotes why, escaped, with an Unpin button."""
    import ui.engine

    real = ui.engine.estimate_report
    good = dumps(size_canonical("small"))
    bad = dumps({**size_canonical("small"), "strategy": {**size_canonical("small")["strategy"], "global_batch_size": 16}})

    def estimate(text):
        if text == bad:
            return {"ok": False, "issues": [("strategy.tp", "boom *here* [x](https://evil.example)")]}
        return real(text)

    monkeypatch.setattr(ui.engine, "estimate_report", estimate)
    at = open_app("pages/estimate.py")
    at.session_state["pins"] = [{"label": "fine", "json": good}, {"label": "[evil](https://x.example)", "json": bad}]
    at.run()
    assert not at.exception
    said = texts(at.warning)
    assert f"Pin 2, {md('[evil](https://x.example)')}, could not be estimated" in said
    assert md("boom *here* [x](https://evil.example)") in said and "`strategy.tp`" in said
    assert not LINK_OR_IMAGE.search(said)
    table = at.dataframe[-1].value
    assert list(table["scenario"]) == ["fine"]   # the current scenario is the first pin
    at.button(key="pin.drop.1").click().run()
    assert [p["label"] for p in _pins(at)] == ["fine"] and "could not be estimated" not in texts(at.warning)

    at.session_state["pins"] = [{"label": "only", "json": bad}]   # no pin estimates: the line, not the "pin scenarios" hint
    at.run()
    assert "Pin 1, only, could not be estimated" in texts(at.warning)
    assert "Pin scenarios to compare" not in texts(at.caption)


def test_pins_too_long_for_the_link_are_said_to_be_left_out(monkeypatch):
    """Pins whose token is over the link cap were left out of the address bar and the share link
    without a word (only the scenario's own link had a warning): a colleague opening the link got
    no pins. Now every page says so, and the sidebar's link says it comes without them."""
    from ui import share

    at = open_app("pages/estimate.py")
    open_fold(at, "pin.box").button(key="pin.add").click().run()
    assert "pins" in at.query_params and "not in the share link" not in texts(at.warning)
    monkeypatch.setattr(share, "MAX_TOKEN_CHARS", len(at.query_params["pins"]) - 1)   # the pins' token is now too long
    for page in ("pages/estimate.py", "pages/home.py"):
        at.switch_page(page).run()
        assert not at.exception
        assert "pins" not in at.query_params
        assert "The pinned scenarios are not in the share link" in texts(at.warning), page
        assert "Without the pinned scenarios" in texts(at.sidebar.caption)
    assert [p["label"] for p in _pins(at)]   # still pinned in the session
