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

from simengine.errors import ConfigError
from simengine.presets import SCENARIO_SIZES, size_scenario

from .config_io import SECTIONS, apply_diff, diff, dumps, validate_scenario

VERSION = "v1"
MAX_TOKEN_CHARS = 12_000
MAX_JSON_BYTES = 512_000
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
    for size, base in _bases():
        if base == cfg:
            return {"preset": size}
    return {"s": encode_token(cfg)}


def decode_token(token: Any) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """(canonical scenario, notes) from a ``v1.`` token; raises ShareLinkError with a clear message."""
    if not isinstance(token, str) or not token:
        raise ShareLinkError("the share link has an empty 's' parameter")
    if len(token) > MAX_TOKEN_CHARS:
        raise ShareLinkError(f"the share link is too long ({len(token):,} characters; at most {MAX_TOKEN_CHARS:,})")
    version, dot, body = token.partition(".")
    if not dot or version != VERSION:
        shown = version[:12] if dot else token[:12]
        raise ShareLinkError(f"unsupported share-link format {shown!r}: expected a token starting with '{VERSION}.'")
    if not _B64.match(body):
        raise ShareLinkError("the share link is garbled (characters outside base64url); was it cut or re-encoded?")
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise ShareLinkError("the share link is garbled (bad base64); was it cut short?") from None
    d = zlib.decompressobj()
    try:
        text = d.decompress(raw, MAX_JSON_BYTES)
        if d.unconsumed_tail:
            raise ShareLinkError("the share link expands to more than 512 kB; refusing to open it")
        if not d.eof:
            raise ShareLinkError("the share link is truncated (incomplete compressed data); was it cut short?")
    except zlib.error:
        raise ShareLinkError("the share link is garbled (not compressed data); was it cut short?") from None
    try:
        payload = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ShareLinkError("the share link is garbled (its content is not JSON)") from None
    if not isinstance(payload, dict):
        raise ShareLinkError("the share link's content is not a scenario")
    notes: list[str] = []
    if "f" in payload:
        full = payload["f"]
    elif "b" in payload:
        base_name = payload.get("b")
        if base_name not in SCENARIO_SIZES:
            raise ShareLinkError(f"the share link refers to an unknown base preset {str(base_name)[:40]!r}")
        delta = payload.get("d", {})
        if not isinstance(delta, dict) or not set(delta) <= set(SECTIONS):
            raise ShareLinkError("the share link's changes must be an object with model / system / strategy")
        try:
            full = apply_diff(size_canonical(base_name), delta)
        except (ConfigError, TypeError, AttributeError, KeyError):
            raise ShareLinkError("the share link's changes do not fit the preset they refer to") from None
    else:
        raise ShareLinkError("the share link's content is not a scenario (no base and no full config)")
    cfg, issues = validate_scenario(full)
    if cfg is None:
        shown = "; ".join(f"{f}: {m}" if f else m for f, m in issues[:6])
        raise ShareLinkError(f"the share link holds an invalid scenario: {shown}")
    if isinstance(payload.get("h"), str) and payload["h"] != scenario_hash(cfg):
        notes.append("this link was made with a different version of its base preset or of the engine's "
                     "defaults; the scenario shown may differ slightly from what the sender saw")
    return cfg, notes


def decode_params(params: dict[str, Any]) -> tuple[dict[str, dict[str, Any]] | None, list[str]]:
    """Scenario named by query parameters (``s`` wins over ``preset``); None when neither is there.
    Raises ShareLinkError for a bad value. ``params`` values may be str or list[str]."""
    def one(key: str) -> str | None:
        v = params.get(key)
        if isinstance(v, (list, tuple)):
            v = v[-1] if v else ""
        return None if v is None else str(v)

    s = one("s")
    if s is not None:
        return decode_token(s.strip())
    preset = one("preset")
    if preset is not None:
        p = preset.strip().lower()
        if p not in SCENARIO_SIZES:
            raise ShareLinkError(f"unknown preset {preset[:40]!r} in the link; use one of {', '.join(SCENARIO_SIZES)}")
        return size_canonical(p), []
    return None, []


def link_query(params: dict[str, str]) -> str:
    """``?key=value`` text of link parameters (values are URL-safe already)."""
    return "?" + "&".join(f"{k}={v}" for k, v in params.items())
