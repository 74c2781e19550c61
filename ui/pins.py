"""Pinned scenarios and the token budget in the share link (pure; no Streamlit).

``?pins=v1.<payload>``: the payload is ``[{"l": label, "b": size, "d": diff} | {"l", "f": full}]``,
one entry per pinned scenario, each compacted against its nearest size preset and the list
compressed as a whole (``ui.share.pack``); decoding reads it as hostile input (``ui.share.unpack``)
and validates every scenario. ``?budget=<billion tokens>`` is the Estimate page's token budget.
Both parameters appear only when they hold something (no pins; the default budget).
"""

from __future__ import annotations

import json
import math
from typing import Any

from .config_io import dumps
from .share import ShareLinkError, compact, expand, pack, unpack, validated
from .text import clip

MAX_PINS = 8
LABEL_CHARS = 80
DEFAULT_BUDGET_B = 1000.0
BUDGET_RANGE = (0.001, 1e6)  # billion tokens, as the Estimate page's input accepts


def encode_pins(pins: list[dict[str, str]]) -> str:
    """Token of ``[{"label", "json"}]`` (canonical scenario JSON texts); "" for no pins."""
    if not pins:
        return ""
    return pack([{"l": p["label"][:LABEL_CHARS], **compact(json.loads(p["json"]))} for p in pins[-MAX_PINS:]])


def decode_pins(token: str) -> tuple[list[dict[str, str]], list[str]]:
    """(pins, notes) from a ``pins`` token: a bad entry is skipped with a note; a bad token
    raises ShareLinkError."""
    payload = unpack(token, "pinned-scenarios link")
    if not isinstance(payload, list):
        raise ShareLinkError("the pinned-scenarios link does not hold a list of scenarios")
    pins: list[dict[str, str]] = []
    notes: list[str] = []
    for i, item in enumerate(payload[:MAX_PINS]):
        label = clip(item.get("l", ""), LABEL_CHARS) if isinstance(item, dict) and isinstance(item.get("l"), str) else ""
        try:
            cfg = validated(expand(item, "pinned scenario"), "pinned scenario")
        except ShareLinkError as e:
            notes.append(f"pinned scenario {i + 1} was skipped: {e}")
            continue
        pins.append({"label": label or f"scenario {len(pins) + 1}", "json": dumps(cfg)})
    if len(payload) > MAX_PINS:
        notes.append(f"the link pins {len(payload)} scenarios; kept the first {MAX_PINS}")
    return pins, notes


def parse_budget(text: str) -> float:
    """Token budget (billion tokens) from the link; raises ShareLinkError when it is not a number in range."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ShareLinkError(f"the token budget {clip(text, 30)!r} in the link is not a number") from None
    lo, hi = BUDGET_RANGE
    if not math.isfinite(value) or not lo <= value <= hi:
        raise ShareLinkError(f"the token budget {clip(text, 30)!r} in the link must be between {lo:g} and {hi:g} billion")
    return value


def budget_problem(value: float | None) -> str | None:
    """What is wrong with a token budget typed into a page (billion tokens), None when it is in
    range. The inputs take any number and say so under the field: a bounded ``st.number_input``
    keeps its last value while showing the refused one, so the figures beside it silently
    belonged to another budget."""
    lo, hi = BUDGET_RANGE
    if value is None or not math.isfinite(value) or not lo <= value <= hi:
        return f"Give a token budget between {lo:g} and {hi:g} billion tokens."
    return None


def budget_text(value: float) -> str:
    """The budget as the link writes it: short (``50``, ``1e+06``) when that reads back as the same
    number, else every digit needed (``15000.25``: ``%g`` would send ``15000.2``)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(float(value))


def extra_params(pins: list[dict[str, str]], budget_b: float) -> dict[str, Any]:
    """The link parameters beyond the scenario: ``pins`` and ``budget`` when they hold something."""
    out: dict[str, Any] = {}
    if pins:
        out["pins"] = encode_pins(pins)
    if budget_b != DEFAULT_BUDGET_B:
        out["budget"] = budget_text(budget_b)
    return out
