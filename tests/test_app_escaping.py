"""Engine and user text is rendered literally on every page (one helper: ui.text.md / issue_md):
``*`` in engine messages survives, a Markdown GPU name draws no link or image, and a lone UTF-16
surrogate in a link or file is a message naming the field, not an uncaught UnicodeEncodeError."""

from __future__ import annotations

import base64
import json
import zlib

import pytest

from app_walk import PAGES, open_app, open_page, rendered_strings, scenario, texts, unescaped_links
from ui.config_io import apply_diff
from ui.share import encode_token, size_canonical
from ui.text import issue_md, md

EVIL = ("[Session expired, sign in](https://evil.example/login) "
        "![t](https://evil.example/p.png)")
# fp8 on a GPU without an FP8 peak: the cross-check quotes system.gpu.name; tp 3: "tp*pp*cp = 3*1*1"
HOSTILE = {"system": {"gpu": {"name": EVIL, "peak_tflops": {"fp8": None}}}, "strategy": {"dtype": "fp8", "tp": 3}}


def _token(delta: dict) -> str:
    return encode_token(apply_diff(size_canonical("small"), delta))


def _raw_token(delta: dict) -> str:
    text = json.dumps({"b": "small", "d": delta})  # json.dumps writes a lone surrogate as \udcff
    return "v1." + base64.urlsafe_b64encode(zlib.compress(text.encode())).decode().rstrip("=")


@pytest.mark.parametrize("path", PAGES)
def test_engine_messages_keep_their_stars_and_user_names_draw_nothing(path):
    at = open_page(path, s=_token(HOSTILE))
    assert not at.exception, [e.value for e in at.exception]
    assert scenario(at)["system"]["gpu"]["name"] == EVIL
    strings = rendered_strings(at)
    assert not unescaped_links(at), unescaped_links(at)
    joined = "\n".join(strings)
    assert "tp*pp*cp" not in joined and "3*1*1" not in joined  # Markdown would eat the stars
    assert r"tp\*pp\*cp = 3\*1\*1 = 3" in joined, path


def test_inline_field_errors_are_escaped():
    at = open_app("pages/strategy.py", s=_token(HOSTILE))
    errors = texts(at.error)
    assert r"tp\*pp\*cp = 3\*1\*1" in errors and "has no FP8 peak" in errors
    assert "](https" not in errors.replace(r"\](https", "")


def test_issue_md_escapes_the_message_and_codes_the_field():
    assert issue_md("strategy.tp", "tp*pp*cp = 3*4*1 = 12") == r"`strategy.tp`: tp\*pp\*cp = 3\*4\*1 = 12"
    assert issue_md("", "micro_batch_size*dp") == r"micro_batch_size\*dp"
    assert md("x\udcffy") == "x\ufffdy"


@pytest.mark.parametrize("delta", [{"model": {"name": "x\udcffy"}}, {"strategy": {"schedule": "\udcff"}},
                                   {"system": {"gpu": {"name": "\udcff"}}}])
@pytest.mark.parametrize("path", ["pages/home.py", "pages/timeline.py"])
def test_link_with_a_lone_surrogate_is_a_message_naming_the_field(path, delta):
    at = open_page(path, s=_raw_token(delta))
    assert not at.exception, [e.value for e in at.exception]
    err = texts(at.error)
    assert "Could not open the link" in err and "surrogate" in err
    section = next(iter(delta))
    assert section in err


@pytest.mark.parametrize("bad", ['{"model": {"\\udcff": 1}}', '{"\\udcff": {}}'])
def test_scenario_file_with_a_lone_surrogate_is_a_message(bad):
    at = open_app()
    full = json.loads(json.dumps(size_canonical("small")))
    full.update(json.loads(bad)) if '"model"' not in bad else full["model"].update(json.loads(bad)["model"])
    at.file_uploader(key="upl.scenario").upload("s.json", json.dumps(full).encode(), "application/json").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Upload rejected" in texts(at.error)
    assert scenario(at) == size_canonical("small")
