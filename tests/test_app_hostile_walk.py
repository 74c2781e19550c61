"""Hostile-input walk: generated links, uploads and field values over every page (hypothesis,
bounded examples, no deadline). Each example asserts: no uncaught exception, no Markdown link
or image drawn from user text, and bounded work (engine calls per run counted, not timed)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simengine.api as api
from app_walk import PAGES, open_app, open_groups, open_page, unescaped_links
from ui.config_io import apply_diff
from ui.pins import encode_pins
from ui.share import encode_token, pack, size_canonical

SETTINGS = settings(max_examples=10, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
MAX_ENGINE_CALLS = 4  # per script run: the page's estimate or timeline, plus a pin or two at most

NASTY = ["[Session expired, sign in](https://evil.example/login)", "![t](https://evil.example/p.png)",
         "<img src=x onerror=alert(1)>", ":red[x] :material/warning:", "$x^2$", "`code`", "**b** _i_",
         "www.evil.example a@evil.example", "\udcff", "\x00\x1b[31m", "# h\n- li\n1. x", "&lt;&#x41;", "\u202e" + "abc"]
text = st.one_of(st.sampled_from(NASTY), st.text(min_size=0, max_size=80),
                 st.lists(st.sampled_from(NASTY), min_size=1, max_size=3).map(" ".join))
# what can travel over the wire (URL, upload name): a lone surrogate arrives as U+FFFD
sendable = text.map(lambda s: s.encode("utf-8", "replace").decode("utf-8"))
name_fields = st.sampled_from([("model", "name"), ("system", "name"), ("system", "gpu.name"), ("strategy", "name")])


@pytest.fixture
def engine_calls(monkeypatch):
    calls = []
    est, sim = api.estimate_json, api.simulate
    monkeypatch.setattr(api, "estimate_json", lambda *a, **k: calls.append("estimate") or est(*a, **k))
    monkeypatch.setattr(api, "simulate", lambda *a, **k: calls.append("simulate") or sim(*a, **k))
    return calls


def _named(section: str, dotted: str, value: str) -> dict:
    delta: dict = {}
    cur = delta.setdefault(section, {})
    parts = dotted.split(".")
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
    cur[parts[-1]] = value
    return apply_diff(size_canonical("small"), delta)


def _check(at, calls) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not unescaped_links(at), unescaped_links(at)
    assert len(calls) <= MAX_ENGINE_CALLS, calls


@SETTINGS
@given(page=st.sampled_from(PAGES), field=name_fields, value=text)
def test_hostile_names_in_a_link(engine_calls, page, field, value):
    engine_calls.clear()
    cfg = _named(field[0], field[1], value)
    try:
        token = encode_token(cfg)
    except (UnicodeEncodeError, ValueError):  # a lone surrogate cannot even be encoded: a link carries U+FFFD
        sent = value.encode("utf-8", "replace").decode("utf-8")
        token = pack({"b": "small", "d": {field[0]: {field[1]: sent}}}) if "." not in field[1] else "v1.x"
    _check(open_page(page, s=token), engine_calls)


@SETTINGS
@given(page=st.sampled_from(PAGES), key=st.sampled_from(["s", "preset", "pins", "budget", "zz", "[x](https://e.x)"]),
       value=st.one_of(sendable, st.sampled_from(["v1.", "v1.AAAA", "too-large", "medium", "1e309", "-1", "nan"])))
def test_hostile_query_parameters(engine_calls, page, key, value):
    engine_calls.clear()
    _check(open_page(page, **{key: value}), engine_calls)


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), text),
                           lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(text, c, max_size=4)),
                           max_leaves=12)


@SETTINGS
@given(data=st.one_of(json_values, st.dictionaries(st.sampled_from(["model", "system", "strategy", "x"]), json_values,
                                                    max_size=3)),
       file_name=sendable.map(lambda s: s.replace("\x00", "")))   # no file system names a file with a NUL byte
def test_hostile_scenario_uploads(engine_calls, data, file_name):
    engine_calls.clear()
    at = open_app()
    raw = json.dumps(data).encode()
    at.file_uploader(key="upl.scenario").upload((file_name or "x")[:60] + ".json", raw, "application/json").run()
    _check(at, engine_calls)


def test_an_upload_field_that_is_a_link_is_shown_as_code():
    """An uploaded file's unknown section named like a Markdown link is listed as a code span
    (ui/text.py md_code), which CommonMark draws as literal text."""
    at = open_app()
    name = "[Session expired, sign in](https://evil.example/login)"
    at.file_uploader(key="upl.scenario").upload(name + ".json", json.dumps({name: None}).encode(), "application/json").run()
    shown = [e.value for e in at.error]
    assert any("`" + name + "`" in v for v in shown), shown
    _check(at, [])


def test_a_crafted_upload_name_with_a_nul_byte_shows_no_traceback():
    """Only a crafted request sends a file name with a NUL byte: Streamlit refuses it itself
    (file_uploader_utils.enforce_filename_restriction) before any studio code runs, and the
    studio's config shows such an escaped exception as a generic message, no traceback."""
    import tomllib

    from app_walk import ROOT

    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["client"]["showErrorDetails"] == "none"
    at = open_app()
    at.file_uploader(key="upl.scenario").upload("\x00x.json", b"{}", "application/json").run()
    (exc,) = at.exception
    assert "redacted" in exc.value and "null" not in exc.value and not exc.stack_trace


@SETTINGS
@given(field=st.sampled_from(["strategy.tp", "strategy.pp", "strategy.vpp", "strategy.zero_stage",
                              "strategy.global_batch_size", "strategy.seq_len", "strategy.micro_batch_size"]),
       value=st.one_of(st.integers(-10**6, 10**6), st.sampled_from([0, -1, 2**31, 10**18])))
def test_hostile_field_values(engine_calls, field, value):
    engine_calls.clear()
    at = open_groups(open_app("pages/strategy.py"), "strategy")  # every field drawn (folded groups draw none)
    box = next(w for w in at.number_input if w.key and w.key.split(".", 1)[-1] == field)
    box.set_value(value).run()
    _check(at, engine_calls)
    at.switch_page("pages/estimate.py").run()
    _check(at, engine_calls)


def test_pins_link_with_hostile_labels(engine_calls):
    pins = encode_pins([{"label": s, "json": json.dumps(size_canonical("small"), sort_keys=True, separators=(",", ":"))}
                        for s in NASTY if "\udcff" not in s][:6])
    _check(open_page("pages/estimate.py", preset="small", pins=pins), engine_calls)
