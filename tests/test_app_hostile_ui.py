"""Studio-side fixes of the QA pass (tests/test_hostile_inputs.py): huge JSON integers in uploads,
share links of large (calibrated) systems, link caching and GEMM sampling, bounded timeline data,
Markdown injection through names, compact number formatting, repeated / padded link parameters."""

from __future__ import annotations

import base64
import json
import random
import re
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app_walk import open_fold
from ui import share
from ui.config_io import apply_diff, dumps, join_sections, parse_json_text
from ui.share import ShareLinkError, decode_params, decode_token, encode_token, size_canonical
from simengine.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT = 60
HUGE_INT = "1" + "0" * 5000  # past Python's 4300-digit int-conversion limit
EVIL = "[Session expired, sign in](https://evil.example/login) ![t](https://evil.example/p.png)"
PAGES = ["pages/home.py", "pages/model.py", "pages/system.py", "pages/strategy.py", "pages/estimate.py", "pages/timeline.py"]


def page(path: str = "pages/home.py", **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / path), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def app(path: str = "pages/home.py", **query) -> AppTest:
    """Through app.py (st.navigation), so that ``switch_page`` works."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if path != "pages/home.py":
        at.switch_page(path).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def scenario(at: AppTest) -> dict:
    return {s: json.loads(at.session_state[f"cfg.{s}"]) for s in ("model", "system", "strategy")}


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def everything(at: AppTest) -> str:
    """The Markdown source of every text element of the page, sidebar included."""
    parts = [at.markdown, at.caption, at.error, at.warning, at.info, at.success, at.title, at.subheader]
    return "\n".join(texts(p) for p in parts)


def edited(delta: dict, base: str = "small") -> dict:
    return apply_diff(size_canonical(base), delta)


def big_gemm_system(points: int, seed: int = 1) -> dict:
    """A valid system whose random GEMM table does not compress (its link is ~30 chars a point)."""
    rng = random.Random(seed)
    sysd = size_canonical("small")["system"]
    sysd["efficiency"]["gemm_table"] = [
        {"m": rng.randint(1, 10**6), "n": rng.randint(1, 10**6), "k": rng.randint(1, 10**6), "b": 1, "dtype": "bf16",
         "layout": None, "efficiency": rng.uniform(0.05, 0.95)} for _ in range(points)]
    return sysd


# ---- 1. integers over 4,300 digits in uploads and pastes --------------------------------------
def test_parse_helpers_turn_a_huge_integer_into_a_message():
    from ui.hf_import import HFImportError, parse_config_text

    with pytest.raises(ConfigError, match="more than 4,300 digits"):
        parse_json_text('{"x": ' + HUGE_INT + "}", "big.json")
    with pytest.raises(HFImportError, match="more than 4,300 digits"):
        parse_config_text('{"hidden_size": ' + HUGE_INT + "}")


def test_hf_import_echoes_at_most_60_characters_of_a_value():
    from ui.hf_import import HFImportError, hf_to_model

    cfg = {"hidden_size": 4096, "num_hidden_layers": int("9" * 4000), "num_attention_heads": 32, "vocab_size": 32000}
    with pytest.raises(HFImportError) as e:
        hf_to_model(cfg)
    assert "implausibly large" in str(e.value) and len(str(e.value)) < 160
    cfg = {"hidden_size": -int("9" * 4000), "num_hidden_layers": 2, "num_attention_heads": 32, "vocab_size": 32000}
    with pytest.raises(HFImportError) as e:
        hf_to_model(cfg)
    assert "must be >= 1" in str(e.value) and len(str(e.value)) < 160


def test_hf_upload_of_a_huge_integer_is_a_message_and_keeps_the_model():
    at = open_fold(page("pages/model.py", preset="medium"), "hf.box")
    before = scenario(at)
    at.file_uploader(key="hf.upload").upload("config.json", ('{"hidden_size": ' + HUGE_INT + "}").encode(),
                                             "application/json").run()
    assert not at.exception, [e.value for e in at.exception]
    err = texts(at.error)
    assert "Hugging Face import failed" in err and "4,300 digits" in err and len(err) < 300
    assert scenario(at) == before


@pytest.mark.parametrize("section", ["system"])
def test_section_upload_of_a_huge_integer_is_a_message(section):
    at = page(f"pages/{section}.py")
    before = scenario(at)
    at.file_uploader(key=f"upl.{section}").upload("big.json", ('{"x": ' + HUGE_INT + "}").encode(), "application/json").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Upload rejected" in texts(at.error) and "4,300 digits" in texts(at.error)
    assert scenario(at) == before


def test_scenario_file_upload_on_home_round_trips_and_rejects_garbage():
    at = page("pages/home.py")
    assert any(b.label == "Download this scenario" for b in at.get("download_button"))
    large = size_canonical("large")
    at.file_uploader(key="upl.scenario").upload("scenario.json", json.dumps(large).encode(), "application/json").run()
    assert not at.exception and scenario(at) == large
    assert dict(at.query_params) == {"preset": "large"}
    for data in [('{"model": ' + HUGE_INT + "}").encode(), b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe{",
                 json.dumps({**large, "strategy": {"tp": 0}}).encode()]:
        at.file_uploader(key="upl.scenario").upload("bad.json", data, "application/json").run()
        assert not at.exception, [e.value for e in at.exception]
        assert "Upload rejected" in texts(at.error)
        assert scenario(at) == large


# ---- 2. share links of large scenarios ---------------------------------------------------------
def test_token_cap_is_64k_and_below_streamlits_query_string_limit():
    from streamlit.runtime.state.query_params import CLIENT_STATE_QUERY_STRING_MAX_LENGTH

    assert share.MAX_TOKEN_CHARS == 64_000
    assert share.MAX_TOKEN_CHARS + 100 < CLIENT_STATE_QUERY_STRING_MAX_LENGTH
    with pytest.raises(ShareLinkError, match="too long"):
        decode_token("v1." + "A" * 64_001)


def test_link_of_a_2000_point_gemm_table_round_trips():
    cfg = {**size_canonical("small"), "system": big_gemm_system(1500)}
    cfg = json.loads(dumps(cfg))
    tok = encode_token(cfg)
    assert 16_000 < len(tok) <= share.MAX_TOKEN_CHARS
    assert decode_token(tok)[0]["system"]["efficiency"]["gemm_table"] == cfg["system"]["efficiency"]["gemm_table"]


def test_scenario_too_large_for_a_link_warns_on_every_page_and_offers_the_json():
    at = app("pages/system.py")
    system = big_gemm_system(3000)
    at.file_uploader(key="upl.system").upload("big.json", json.dumps(system).encode(), "application/json").run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(scenario(at)["system"]["efficiency"]["gemm_table"]) == 3000  # nothing dropped
    assert len(share.link_params(scenario(at))["s"]) > share.MAX_TOKEN_CHARS
    assert dict(at.query_params) == {"s": share.TOO_LARGE}  # not a 100k-character token that cannot open
    for path in PAGES:
        at.switch_page(path).run()
        assert not at.exception, (path, [e.value for e in at.exception])
        assert "no working share link" in texts(at.warning), path
        labels = [b.label for b in at.get("download_button")]
        assert "Download the scenario JSON" in labels, path
        assert "No share link" in texts(at.sidebar.caption), path


def test_too_large_marker_opens_with_a_clear_message():
    at = page("pages/estimate.py", s=share.TOO_LARGE)
    err = texts(at.error)
    assert "Could not open the link" in err and "too large for a link" in err and "Home page" in err
    assert scenario(at) == size_canonical("small")


def test_long_link_gets_a_note_in_the_sidebar():
    cfg = {**size_canonical("small"), "system": big_gemm_system(800)}
    tok = encode_token(json.loads(dumps(cfg)))
    assert share.LONG_LINK_CHARS < len(tok) <= share.MAX_TOKEN_CHARS
    at = page("pages/home.py", s=tok)
    assert scenario(at)["system"]["efficiency"]["gemm_table"] == cfg["system"]["efficiency"]["gemm_table"]
    assert "long link" in texts(at.sidebar.caption).lower()
    assert "no working share link" not in texts(at.warning)


# ---- 3. link encoding cached; GEMM points of a calibration capped --------------------------------
def test_link_is_encoded_once_per_scenario_not_per_rerun(monkeypatch):
    calls = []
    real = share.encode_token
    monkeypatch.setattr(share, "encode_token", lambda cfg: calls.append(1) or real(cfg))
    share._link_params_cached.cache_clear()
    at = app("pages/home.py", s=encode_token(edited({"strategy": {"seq_len": 4096}})))
    first = len(calls)
    assert first == 1
    for _ in range(3):
        at.run()
    at.switch_page("pages/estimate.py").run()
    assert len(calls) == first  # reruns and page switches reuse the cached link


def test_scenario_json_is_joined_without_parsing():
    for size in ("small", "medium", "large"):
        cfg = size_canonical(size)
        cfg["model"]["name"] = "模型 🚀 \"quoted\" \\ </script>"
        texts_ = {s: dumps(cfg[s]) for s in cfg}
        assert join_sections(texts_) == dumps(cfg)


def test_sample_gemm_points_is_even_and_bounded():
    from ui.tables import MAX_GEMM_POINTS, sample_gemm_points

    rows = list(range(200_000))
    kept = sample_gemm_points(rows)
    assert len(kept) == MAX_GEMM_POINTS == 2000
    assert kept[0] == 0 and kept[-1] == 199_999 and kept == sorted(set(kept))
    gaps = np.diff(kept)
    assert gaps.min() >= 99 and gaps.max() <= 101
    assert sample_gemm_points(rows[:10]) == rows[:10]


def test_calibration_upload_keeps_at_most_2000_points_with_a_note():
    rng = random.Random(3)
    lines = ["m,n,k,b,dtype,layout,efficiency"] + [
        f"{rng.randint(1, 64) * 256},{rng.randint(1, 64) * 128},{rng.randint(1, 64) * 128},1,bf16,TN,{rng.uniform(0.2, 0.9):.4f}"
        for _ in range(5000)]
    at = page("pages/calibration.py")
    at.file_uploader(key="cal.gemm").upload("sweep.csv", "\n".join(lines).encode(), "text/csv")
    at.run()
    at.button(key="cal.run").click().run()
    at.button(key="cal.apply").click().run()
    assert not at.exception, [e.value for e in at.exception]
    table = scenario(at)["system"]["efficiency"]["gemm_table"]
    assert len(table) == 2000
    assert "keeps 2,000 of them" in texts(at.info)
    assert "Calibrated: 5,000 GEMM point(s)" in texts(at.success)
    assert len(at.query_params["s"]) <= share.MAX_TOKEN_CHARS


# ---- 4. timeline data stays bounded ----------------------------------------------------------
def test_memory_frame_caps_the_total_and_keeps_each_ranks_peak():
    from ui.timeline_data import MEMORY_TOTAL_POINTS, memory_frame

    ranks, points = 1024, 2000
    rng = np.random.default_rng(0)
    b = rng.uniform(0, 1, ranks * points) * 2**30
    mem = pd.DataFrame({"rank": np.repeat(np.arange(ranks), points), "t_s": np.tile(np.arange(points, dtype=float), ranks),
                        "bytes": b})
    out = memory_frame(mem)
    assert len(out) <= MEMORY_TOTAL_POINTS == 20_000
    peaks_in = mem.groupby("rank")["bytes"].max() / 2**30
    peaks_out = out.groupby("rank")["GiB"].max()
    assert np.allclose(peaks_in.to_numpy(), peaks_out.to_numpy())
    few = memory_frame(mem[mem["rank"] < 4])  # few ranks: up to MEMORY_POINTS each
    assert few.groupby("rank").size().max() <= 1500 and len(few) > 4 * 1000
    small = mem[(mem["rank"] < 2) & (mem["t_s"] < 10)]
    assert len(memory_frame(small)) == len(small)  # short series are kept point for point


def test_representative_ranks_and_gantt_rows_are_bounded():
    from ui.timeline_data import GANTT_SUBSET, gantt_frame, representative_ranks

    n = 1024
    bubble = np.linspace(0.1, 0.2, n)
    bubble[500] = 0.9
    ranks = pd.DataFrame({"rank": np.arange(n), "bubble_fraction": bubble})
    sub = representative_ranks(ranks, n)
    assert len(sub) <= GANTT_SUBSET and {0, 1, n - 2, n - 1, 500} <= set(sub)
    assert representative_ranks(ranks.head(64), 64) == list(range(64))
    # 126 ranks of equal bubble: the ones between are spread over the pipeline, not 0-8 then 17, 25, …
    flat = representative_ranks(pd.DataFrame({"rank": np.arange(126), "bubble_fraction": 0.1}), 126)
    assert len(flat) <= GANTT_SUBSET and max(np.diff(flat)) <= 2 * 126 / GANTT_SUBSET
    rng = np.random.default_rng(1)
    start = rng.uniform(0, 1, 200_000)
    spans = pd.DataFrame({"rank": rng.integers(0, n, 200_000), "stream": "compute", "kind": "F", "mb": 0, "chunk": 0,
                          "start_s": start, "end_s": start + 1e-3})
    df, _, rows = gantt_frame(spans, ranks=sub)
    assert len(rows) == len(sub) and set(df["row"]) <= set(rows) and len(df) <= max(5000, len(sub) * 320)
    df, aggregated, rows = gantt_frame(spans, ranks=sub, max_spans=1000)
    assert aggregated and len(rows) == len(sub) and len(df) <= len(sub) * 320


def _deep(pp: int = 128, gbs: int = 8) -> dict:
    return edited({"model": {"num_layers": pp}, "system": {"num_gpus": pp}, "strategy": {"tp": 1, "pp": pp, "global_batch_size": gbs}})


def test_timeline_page_draws_a_subset_of_a_deep_pipeline():
    at = page("pages/timeline.py", s=encode_token(_deep()))
    assert not at.error, texts(at.error)
    assert "128 pipeline ranks" in texts(at.caption)
    sel = at.multiselect[0]
    assert 4 < len(sel.value) <= 16 and {0, 127} <= set(sel.value)
    assert len(open_fold(at, "tl.rankfold.fits").dataframe[0].value) == 128  # the per-rank table lists every rank
    sel.set_value([0, 5, 127]).run()
    assert not at.exception and "show 3 of them" in texts(at.caption)


def test_chrome_trace_is_refused_beyond_the_span_limit(monkeypatch):
    import ui.engine

    monkeypatch.setattr(ui.engine, "MAX_TRACE_SPANS", 100)
    at = page("pages/timeline.py", preset="medium")
    trace = [b for b in at.get("download_button") if b.label == "Chrome trace"]
    assert trace and trace[0].proto.disabled
    assert "No Chrome trace for this step" in texts(at.caption)
    with pytest.raises(ValueError, match="spans"):
        ui.engine.chrome_trace(dumps(size_canonical("medium")), "x")


def test_large_timelines_are_not_kept_in_the_cache(monkeypatch):
    import streamlit as st

    import simengine.api as api
    import ui.engine as eng

    calls = []
    real = api.simulate
    monkeypatch.setattr(api, "simulate", lambda cfg: calls.append(1) or real(cfg))
    st.cache_data.clear()
    text = dumps(size_canonical("medium"))
    try:
        assert eng.timeline(text)["ok"] and eng.timeline(text)["ok"]
        assert len(calls) == 1  # small: cached
        monkeypatch.setattr(eng, "MAX_CACHED_TIMELINE_BYTES", 1000)
        other = dumps(edited({"strategy": {"global_batch_size": 64}}, "medium"))
        a, b = eng.timeline(other), eng.timeline(other)
        assert a["ok"] and b["ok"] and len(a["spans"]) == len(b["spans"]) > 0
        assert len(calls) == 3  # too large for the cache: simulated each time, never stored
    finally:
        st.cache_data.clear()
    assert eng.TIMELINE_CACHE_ENTRIES * eng.MAX_CACHED_TIMELINE_BYTES <= 400 * 2**20


def test_cached_timeline_frames_are_compact():
    from simengine import api
    from ui.timeline_data import compact_spans, frame_bytes, timeline_tables

    tl = timeline_tables(api.simulate(edited({"strategy": {"global_batch_size": 512}}, "medium")))
    spans = tl["spans"]
    small = compact_spans(spans)
    assert frame_bytes(small) * 2 < frame_bytes(spans)
    assert small["kind"].astype(str).tolist() == spans["kind"].tolist()
    assert (small["start_s"] == spans["start_s"]).all()


# ---- 5. no Markdown from user strings ----------------------------------------------------------
def test_md_escapes_links_images_html_and_directives():
    from ui.text import clip, md, md_code

    out = md(EVIL)
    assert re.search(r"(?<!\\)[\[\]<>:]", out) is None, out
    for raw in ["<img src=x onerror=alert(1)>", ":red[alert]", ":material/home:", "$x^2$", "&lt;", "`code`", "**b**",
                "https://evil.example", "www.evil.example", "a@evil.example", "~~s~~"]:
        esc = md(raw)
        for ch in "<:$&`*@~[":
            assert ch not in esc.replace("\\" + ch, ""), (raw, esc)
    # autolink literals are matched after escapes resolve: an invisible word joiner breaks them
    assert md("www.evil.example") == "www\u2060.evil.example" and md("a@b.example") == "a\\@\u2060b.example"
    assert md("https://x.example") == "https\\:\u2060//x.example" and md(":material/home:") == "\\:\u2060material/home\\:"
    assert md("hidden_act") == "hidden_act" and md("__init__") == "\\_\\_init\\_\\_"
    assert md("line1\n# heading") == "line1 \\# heading" and md("- item") == "\\- item" and md("1. x") == "1\\. x"
    assert md("Llama-3.2-1B") == "Llama-3.2-1B"
    assert len(clip("x" * 5000)) == 60 and md("y" * 500, 60).endswith("…")
    assert md_code("a`b") == "``a`b``" and md_code("") == "` `"


def test_names_from_a_link_are_plain_text_everywhere():
    cfg = edited({"model": {"name": EVIL}, "system": {"gpu": {"name": "![x](https://evil.example/gpu.png) :red[GPU]"},
                                                     "name": "<b>sys</b> www.evil.example"}})
    for path in PAGES:
        at = page(path, s=encode_token(cfg))
        assert scenario(at)["model"]["name"] == EVIL
        text = everything(at) + texts(at.sidebar.markdown)
        assert "](https://evil.example" not in text and "![" not in text and ":red[" not in text, path
        assert "<b>" not in text and "www.evil" not in text, path


def test_uploaded_file_names_and_unknown_parameters_are_escaped():
    at = page("pages/model.py", **{"[x](https://evil.example)": "1"})
    assert "](https://evil" not in texts(at.info) and "Ignored unknown link parameter" in texts(at.info)
    medium = size_canonical("medium")["model"]
    at.file_uploader(key="upl.model").upload("![p](https://evil.example/p.png).json", json.dumps(medium).encode(),
                                             "application/json").run()
    assert scenario(at)["model"] == medium
    assert "Loaded model from" in texts(at.success) and "![" not in everything(at)
    bad = {**medium, "`evil`](https://evil.example)": 1}
    at.file_uploader(key="upl.model").upload("x.json", json.dumps(bad).encode(), "application/json").run()
    err = texts(at.error)
    assert "Upload rejected" in err and "Extra inputs" in err
    assert "- ``model.`evil`](https://evil.example)``: Extra" in err  # a literal code span, not a link


# ---- 6. compact numbers ----------------------------------------------------------------------
def test_absurd_values_format_compactly():
    from ui.units import fmt_count, fmt_flops, fmt_gib, fmt_num, fmt_pct, fmt_time, fmt_usd

    for v in (1e190, 1e300, -1e300, 5e-324, 1e-15):
        assert len(fmt_time(v)) <= 16, fmt_time(v)
    assert fmt_time(1e300).endswith(" d") and "e+" in fmt_time(1e300)
    assert fmt_time(3e-9) == "3.0 ns" and fmt_time(1e-12) == fmt_time(5e-324) == "< 1 ns"
    assert fmt_time(6.4328) == "6.433 s" and fmt_time(3 * 86400) == "3.0 d" and fmt_time(0) == "0 s"
    for f in (fmt_count, fmt_flops, fmt_gib, fmt_usd, fmt_pct, fmt_num):
        for v in (1e300, -1e300, 1e-300):
            assert len(f(v)) <= 18, (f.__name__, f(v))
    assert fmt_count(8.03e9) == "8.03 B" and fmt_gib(80.0) == "80.0 GiB" and fmt_usd(2.5) == "$2.50"


# ---- 7. repeated and padded link parameters ----------------------------------------------------
def test_padded_token_is_accepted():
    cfg = edited({"strategy": {"seq_len": 4096}})
    padded = {}
    for i in range(40):  # payloads whose base64 ends in "=" and in "=="
        raw = zlib.compress(dumps({"f": cfg, "x": "y" * i}).encode(), 9)
        tok = "v1." + base64.urlsafe_b64encode(raw).decode()
        padded.setdefault(len(tok) - len(tok.rstrip("=")), tok)
    assert set(padded) >= {1, 2}
    for tok in (padded[1], padded[2]):
        assert decode_token(tok)[0] == cfg
        at = page("pages/home.py", s=tok)
        assert scenario(at) == cfg and not at.error
    with pytest.raises(ShareLinkError):
        decode_token("v1.===")


def test_decode_params_takes_the_last_value_that_opens():
    good = encode_token(edited({"strategy": {"seq_len": 4096}}))
    cfg, notes = decode_params({"s": ["garbage", good]})
    assert cfg["strategy"]["seq_len"] == 4096 and notes == []
    cfg, notes = decode_params({"s": [good, "garbage"]})
    assert cfg["strategy"]["seq_len"] == 4096 and "last value that works" in notes[0]
    with pytest.raises(ShareLinkError, match="unsupported share-link format 'garbage'"):
        decode_params({"s": ["v1.AAAA", "garbage"]})
    cfg, _ = decode_params({"preset": ["evil", "large"]})
    assert cfg == size_canonical("large")


@pytest.mark.parametrize("values", [["garbage", "GOOD"], ["GOOD", "garbage"], ["GOOD", "GOOD"]])
def test_repeated_s_parameter_opens_and_the_address_bar_is_canonical(values):
    cfg = edited({"strategy": {"seq_len": 4096}})
    good = encode_token(cfg)
    at = AppTest.from_file(str(ROOT / "pages/estimate.py"), default_timeout=TIMEOUT)
    at.query_params["s"] = [good if v == "GOOD" else v for v in values]
    at.run()
    assert not at.exception and not at.error, texts(at.error)
    assert scenario(at) == cfg
    assert dict(at.query_params) == {"s": good}


def _flat(node) -> list:
    """Elements of a page in document order."""
    out = [node]
    for child in getattr(node, "children", {}).values():
        out.extend(_flat(child))
    return out


def _position(at: AppTest, predicate) -> int:
    return next(i for i, n in enumerate(_flat(at.main)) if predicate(n))


def test_upload_messages_sit_under_their_upload():
    at = page("pages/model.py")
    at.file_uploader(key="upl.model").upload("big.json", ('{"x": ' + HUGE_INT + "}").encode(), "application/json").run()
    uploader = _position(at, lambda n: getattr(n, "type", "") == "file_uploader" and getattr(n, "key", "") == "upl.model")
    error = _position(at, lambda n: getattr(n, "type", "") == "error" and "Upload rejected" in str(getattr(n, "value", "")))
    hf_box = _position(at, lambda n: getattr(n, "type", "") == "expander" and "Hugging Face" in str(getattr(n, "label", "")))
    assert uploader < error < hf_box
    open_fold(at, "hf.box")
    at.text_area(key="hf.paste").set_value('{"hidden_size": ' + HUGE_INT + "}")
    at.button(key="hf.import").click().run()
    hf_box = _position(at, lambda n: getattr(n, "type", "") == "expander" and "Hugging Face" in str(getattr(n, "label", "")))
    error = _position(at, lambda n: getattr(n, "type", "") == "error" and "Hugging Face import failed" in str(getattr(n, "value", "")))
    assert error > hf_box


def test_share_link_errors_echo_little_of_a_huge_key():
    key = "k" * 100_000
    tok = "v1." + base64.urlsafe_b64encode(zlib.compress(json.dumps({"b": "small", "d": {"model": {key: 1}}}).encode(), 9)).decode()
    with pytest.raises(ShareLinkError) as e:
        decode_token(tok.rstrip("="))
    assert "Extra inputs" in str(e.value) and len(str(e.value)) < 400
    at = page("pages/home.py", s=tok)
    assert "Could not open the link" in texts(at.error) and len(texts(at.error)) < 600
