"""Share links: query parameters that reproduce a scenario exactly (pure; no Streamlit).

Two forms, both stable across server restarts:

* ``?preset=small|medium|large`` when the scenario *is* a size preset, field for field;
* ``?s=v1.<payload>`` otherwise, where ``payload = base64url(zlib(json))`` without padding and
  the JSON is ``{"b": <size>, "d": <diff>, "h": <hash>}``: the nested dict of fields that differ
  from the canonical dump of the nearest size preset ``b`` (the one giving the shortest token), or
  ``{"f": <full config>, "h": ...}`` when no base helps. ``h`` is the first 10 hex digits of the
  SHA-256 of the full canonical scenario JSON: when a preset file changed after the link was made,
  decoding still works but says the result differs from what the sender saw.

Decoding treats the token as hostile: length cap, strict alphabet, bounded decompression (no zip
bombs), JSON only (never eval / pickle), shape checks, then full pydantic validation.

Length: a token may have up to ``MAX_TOKEN_CHARS`` (64,000) characters. Streamlit itself drops a
query string over 512 Ki characters (``CLIENT_STATE_QUERY_STRING_MAX_LENGTH`` in
``streamlit/runtime/state/query_params.py``, 1.67), so the cap stays well below it; a system
calibrated from a 2,000-point GEMM sweep gives ~45k characters. The HTTP server Streamlit runs
(uvicorn with h11) refuses a request head over 16 KiB when it arrives in several TCP segments
(``h11.DEFAULT_MAX_INCOMPLETE_EVENT_SIZE``), and reverse proxies have their own limits (nginx:
8 kB by default), so links over ``LONG_LINK_CHARS`` come with a note to keep the JSON too.
A scenario whose token exceeds the cap gets no working link: the pages say so and offer the
scenario JSON instead (see ``ui.layout``), and the address bar holds ``?s=too-large``
(:data:`TOO_LARGE`), which says so when opened instead of failing on an enormous token.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import zlib
from functools import lru_cache
from typing import Any
from urllib.parse import quote, urlencode

from simengine.errors import ConfigError
from simengine.presets import SCENARIO_SIZES, size_scenario

from .config_io import SECTIONS, apply_diff, diff, dumps, validate_scenario
from .text import clip

VERSION = "v1"
MAX_TOKEN_CHARS = 64_000
LONG_LINK_CHARS = 16_000
TOO_LARGE = "too-large"  # the address bar's 's' when the scenario's token is over MAX_TOKEN_CHARS
MAX_JSON_BYTES = 512_000
MAX_REPEATED = 8  # values of a repeated parameter tried (last first)
_B64 = re.compile(r"^[A-Za-z0-9_-]+$")


class ShareLinkError(ValueError):
    """A share link that cannot be opened; the message is meant for the user."""


@lru_cache(maxsize=8)
def _size_canonical_text(size: str) -> str:
    cfg, issues = validate_scenario(size_scenario(size))
    if cfg is None:  # a broken preset file: surface it, do not crash the page
        raise ConfigError(issues)
    return dumps(cfg)


def size_canonical(size: str) -> dict[str, dict[str, Any]]:
    """Canonical (validated, all fields) dump of size preset ``size``; a fresh copy."""
    return json.loads(_size_canonical_text(size))


def scenario_hash(cfg: dict[str, Any]) -> str:
    return hashlib.sha256(dumps(cfg).encode()).hexdigest()[:10]


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bases() -> list[tuple[str, dict]]:
    out = []
    for size in SCENARIO_SIZES:
        try:
            out.append((size, size_canonical(size)))
        except ConfigError:
            continue
    return out


def encode_token(cfg: dict[str, dict[str, Any]]) -> str:
    """``v1.<payload>`` for a canonical scenario (every section validated and dumped)."""
    h = scenario_hash(cfg)
    candidates = [{"f": cfg, "h": h}]
    candidates += [{"b": size, "d": diff(base, cfg), "h": h} for size, base in _bases()]
    best = min((zlib.compress(dumps(c).encode(), 9) for c in candidates), key=len)
    return f"{VERSION}.{_b64encode(best)}"


def link_params(cfg: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The query parameters of the share link of ``cfg`` (a canonical scenario)."""
    return dict(_link_params_cached(dumps(cfg)))


def link_params_json(scenario_text: str) -> dict[str, str]:
    """:func:`link_params` of a scenario given as its canonical JSON text (``config_io.dumps``).

    Cached on the text: the studio asks for the link several times per rerun, and encoding a
    scenario with large measured tables costs tens of milliseconds each time."""
    return dict(_link_params_cached(scenario_text))


@lru_cache(maxsize=32)
def _link_params_cached(scenario_text: str) -> tuple[tuple[str, str], ...]:
    for size in SCENARIO_SIZES:
        try:
            if _size_canonical_text(size) == scenario_text:
                return (("preset", size),)
        except ConfigError:
            continue
    return (("s", encode_token(json.loads(scenario_text))),)


def token_too_long(params: dict[str, str]) -> bool:
    """True when the link ``params`` cannot be opened again (its token is over the cap)."""
    return len(params.get("s", "")) > MAX_TOKEN_CHARS


def address_params(params: dict[str, str]) -> dict[str, str]:
    """What the address bar holds for link ``params``: the link itself, or ``{"s": TOO_LARGE}``."""
    return {"s": TOO_LARGE} if token_too_long(params) else params


def pack(obj: Any) -> str:
    """``v1.<base64url(zlib(canonical JSON))>`` of a JSON value (the token format)."""
    return f"{VERSION}.{_b64encode(zlib.compress(dumps(obj).encode(), 9))}"


def unpack(token: Any, what: str = "share link") -> Any:
    """The JSON value inside a ``v1.`` token, read as hostile input: length cap, strict alphabet,
    bounded decompression (no zip bombs), JSON only. Raises ShareLinkError with a clear message."""
    if not isinstance(token, str) or not token:
        raise ShareLinkError(f"the {what} is empty")
    if len(token) > MAX_TOKEN_CHARS:
        raise ShareLinkError(f"the {what} is too long ({len(token):,} characters; at most {MAX_TOKEN_CHARS:,})")
    version, dot, body = token.partition(".")
    if not dot or version != VERSION:
        shown = version[:12] if dot else token[:12]
        raise ShareLinkError(f"unsupported {what.replace(' ', '-')} format {shown!r}: expected a token starting with '{VERSION}.'")
    body = body.removesuffix("==").removesuffix("=")  # base64 padding added by some tools
    if not _B64.match(body):
        raise ShareLinkError(f"the {what} is garbled (characters outside base64url); was it cut or re-encoded?")
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise ShareLinkError(f"the {what} is garbled (bad base64); was it cut short?") from None
    d = zlib.decompressobj()
    try:
        text = d.decompress(raw, MAX_JSON_BYTES)
        if d.unconsumed_tail:
            raise ShareLinkError(f"the {what} expands to more than 512 kB; refusing to open it")
        if not d.eof:
            raise ShareLinkError(f"the {what} is truncated (incomplete compressed data); was it cut short?")
    except zlib.error:
        raise ShareLinkError(f"the {what} is garbled (not compressed data); was it cut short?") from None
    try:
        return json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ShareLinkError(f"the {what} is garbled (its content is not JSON)") from None


def compact(cfg: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{"b": size, "d": diff}`` against the nearest size preset, or ``{"f": cfg}`` (shortest)."""
    options = [{"f": cfg}] + [{"b": size, "d": diff(base, cfg)} for size, base in _bases()]
    return min(options, key=lambda o: len(dumps(o)))


def expand(payload: Any, what: str = "share link") -> dict[str, dict[str, Any]]:
    """The full (unvalidated) scenario of a ``{"f": ...}`` or ``{"b": ..., "d": ...}`` payload."""
    if not isinstance(payload, dict):
        raise ShareLinkError(f"the {what}'s content is not a scenario")
    if "f" in payload:
        return payload["f"]
    if "b" not in payload:
        raise ShareLinkError(f"the {what}'s content is not a scenario (no base and no full config)")
    base_name = payload.get("b")
    if base_name not in SCENARIO_SIZES:
        raise ShareLinkError(f"the {what} refers to an unknown base preset {str(base_name)[:40]!r}")
    delta = payload.get("d", {})
    if not isinstance(delta, dict) or not set(delta) <= set(SECTIONS):
        raise ShareLinkError(f"the {what}'s changes must be an object with model / system / strategy")
    try:
        return apply_diff(size_canonical(base_name), delta)
    except (ConfigError, TypeError, AttributeError, KeyError):
        raise ShareLinkError(f"the {what}'s changes do not fit the preset they refer to") from None


def validated(full: Any, what: str = "share link") -> dict[str, dict[str, Any]]:
    cfg, issues = validate_scenario(full)
    if cfg is None:
        shown = "; ".join(f"{clip(f)}: {clip(m, 200)}" if f else clip(m, 200) for f, m in issues[:6])
        raise ShareLinkError(f"the {what} holds an invalid scenario: {shown}")
    return cfg


def decode_token(token: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(canonical scenario, notes) from a ``v1.`` token; raises ShareLinkError with a clear message."""
    if not isinstance(token, str) or not token:
        raise ShareLinkError("the share link has an empty 's' parameter")
    if token == TOO_LARGE:
        raise ShareLinkError(f"this address was copied from a scenario too large for a link (over {MAX_TOKEN_CHARS:,} "
                             "characters), so it cannot reproduce it; ask for its scenario JSON file and open it on the "
                             "Home page")
    payload = unpack(token)
    cfg = validated(expand(payload))
    notes: list[str] = []
    if isinstance(payload.get("h"), str) and payload["h"] != scenario_hash(cfg):
        notes.append("this link was made with a different version of its base preset or of the engine's "
                     "defaults; the scenario shown may differ slightly from what the sender saw")
    return cfg, notes


def _decode_preset(value: str) -> tuple[dict[str, dict[str, Any]], list[str]]:
    p = value.strip().lower()
    if p not in SCENARIO_SIZES:
        raise ShareLinkError(f"unknown preset {value[:40]!r} in the link; use one of {', '.join(SCENARIO_SIZES)}")
    return size_canonical(p), []


def decode_params(params: dict[str, Any]) -> tuple[dict[str, dict[str, Any]] | None, list[str]]:
    """Scenario named by query parameters (``s`` wins over ``preset``); None when neither is there.

    ``params`` values may be str or list[str] (a parameter repeated in the address bar): the
    last value that opens wins, with a note; when none opens, the error is the last value's.
    Raises ShareLinkError for a bad value."""
    def values(key: str) -> list[str] | None:
        v = params.get(key)
        if v is None:
            return None
        vals = [str(x) for x in v] if isinstance(v, (list, tuple)) else [str(v)]
        return vals or [""]

    failed: ShareLinkError | None = None
    for key, decode in (("s", lambda v: decode_token(v.strip())), ("preset", _decode_preset)):
        vals = values(key)
        if vals is None:
            continue
        first_error: ShareLinkError | None = None
        for i, v in enumerate(reversed(vals[-MAX_REPEATED:])):
            try:
                cfg, notes = decode(v)
            except ShareLinkError as e:
                first_error = first_error or e
                continue
            if i:
                notes = [*notes, f"the link repeats '{key}' {len(vals)} times; opened the last value that works"]
            if failed is not None:   # an 's' that does not open beside a preset that does: the preset, said so
                notes = [*notes, f"its edited scenario ('s') does not open ({failed}); opened the '{v}' preset the link also names"]
            return cfg, notes
        assert first_error is not None
        if key == "preset":
            raise failed or first_error   # the edit's own error when it failed too
        failed = first_error
    if failed is not None:
        raise failed
    return None, []


def link_query(params: dict[str, str]) -> str:
    """``?key=value`` text of link parameters, percent-encoded: tokens are URL-safe already, but a
    budget such as ``1e+06`` is not (an unencoded ``+`` reads back as a space)."""
    return "?" + urlencode(params, quote_via=quote)
