"""Scenario sections as validated, canonical JSON (pure; no Streamlit).

The studio keeps each section (model, system, strategy) as the JSON text of a spec that passed
its own pydantic validation. Cross-section checks (``check_scenario``) are reported, not
enforced, so a user can change the model first and the strategy next.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel, ValidationError

from simengine.config import ModelSpec, StrategySpec, SystemSpec
from simengine.config.notes import scenario_notes
from simengine.config.scenario import check_scenario
from simengine.errors import ConfigError, from_pydantic

SECTIONS: tuple[str, ...] = ("model", "system", "strategy")
SPEC_CLASS: dict[str, type[BaseModel]] = {"model": ModelSpec, "system": SystemSpec, "strategy": StrategySpec}
PRESET_KIND: dict[str, str] = {"model": "models", "system": "systems", "strategy": "strategies"}
MAX_UPLOAD_BYTES = 2_000_000
# what a JSON upload widget says and refuses in the browser (Streamlit counts MB of 2^20 bytes;
# the server's own default, .streamlit/config.toml maxUploadSize, is the calibration pages' 64)
UPLOAD_MB = -(-MAX_UPLOAD_BYTES // 2**20)

Issues = list[tuple[str, str]]


def dumps(obj: Any) -> str:
    """Canonical JSON text: sorted keys, no spaces (stable cache keys and share links)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def join_sections(section_texts: dict[str, str]) -> str:
    """``dumps`` of a scenario from its sections' canonical JSON texts, without parsing them:
    equal to ``dumps({s: json.loads(t) for s, t in section_texts.items()})``."""
    return "{" + ",".join(f"{dumps(k)}:{section_texts[k]}" for k in sorted(section_texts)) + "}"


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def surrogate_path(data: Any, path: str = "", depth: int = 0) -> str | None:
    """Dotted path of the first key or string value holding a lone UTF-16 surrogate (JSON such
    as ``"\\udcff"`` decodes to one), or None. Such text cannot be encoded as UTF-8, so it would
    break the share link, the cache keys and every download; it is refused with its field."""
    if depth > 64:
        return None
    if isinstance(data, str):
        return path if _has_surrogate(data) else None
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for k, v in items:
        sub = f"{path}.{k}" if path else str(k)
        if isinstance(k, str) and _has_surrogate(k):
            return path or "(a field name)"
        found = surrogate_path(v, sub, depth + 1)
        if found is not None:
            return found
    return None


SURROGATE_MESSAGE = ("holds an invalid character (a lone UTF-16 surrogate such as \\udcff, which is not text); "
                     "remove it or retype the value")


def validate_section(section: str, data: Any) -> tuple[dict[str, Any] | None, Issues]:
    """(canonical dict, []) when ``data`` is a valid ``section``; (None, issues) otherwise.
    Issue paths are dotted and start with the section (``model.hidden_size``)."""
    if section not in SPEC_CLASS:
        return None, [("", f"unknown section {section!r}; expected one of {', '.join(SECTIONS)}")]
    if not isinstance(data, dict):
        return None, [(section, f"{section} must be a JSON object, got {type(data).__name__}")]
    bad = surrogate_path(data, section)
    if bad is not None:
        return None, [(bad.encode("utf-8", "backslashreplace").decode(), SURROGATE_MESSAGE)]
    try:
        spec = SPEC_CLASS[section].model_validate(data)
    except ValidationError as e:
        # fields: a model-level validator's message names its field as ``pp=1`` → ``strategy.pp``
        return None, from_pydantic(e, section, tuple(SPEC_CLASS[section].model_fields)).issues
    except (ValueError, TypeError, RecursionError) as e:  # defensive: odd payloads
        return None, [(section, f"invalid {section}: {str(e)[:200]}")]
    return spec.model_dump(mode="json"), []


def validate_scenario(data: Any) -> tuple[dict[str, dict[str, Any]] | None, Issues]:
    """Validate every section of ``{"model": .., "system": .., "strategy": ..}`` on its own."""
    if not isinstance(data, dict):
        return None, [("", "a scenario must be a JSON object with model, system and strategy")]
    out: dict[str, dict[str, Any]] = {}
    issues: Issues = []
    for key in sorted(set(data) - set(SECTIONS), key=str):
        issues.append((str(key)[:60].encode("utf-8", "backslashreplace").decode(), "unknown section (expected model, system, strategy)"))
    for sec in SECTIONS:
        if sec not in data:
            issues.append((sec, f"missing section {sec!r}"))
            continue
        canon, errs = validate_section(sec, data[sec])
        issues.extend(errs)
        if canon is not None:
            out[sec] = canon
    return (out, []) if not issues else (None, issues)


def cross_issues(cfg: dict[str, dict[str, Any]]) -> Issues:
    """Cross-section problems of a scenario whose sections are each valid."""
    try:
        specs = [SPEC_CLASS[s].model_validate(cfg[s]) for s in SECTIONS]
    except (ValidationError, KeyError, TypeError) as e:
        return [("", f"invalid scenario: {e}")]
    return check_scenario(*specs)


def notes_of(cfg: dict[str, dict[str, Any]]) -> Issues:
    """What a valid scenario's own stack would refuse or does not ship (``config/notes.py``: a
    schedule it runs as a what-if, a split Megatron would not build), each with the field it names:
    warnings the editors show under that field, never errors."""
    try:
        return scenario_notes(ModelSpec.model_validate(cfg["model"]), StrategySpec.model_validate(cfg["strategy"]))
    except (ValidationError, KeyError, TypeError):
        return []


def parse_json_text(text: str | bytes, what: str, limit: int = MAX_UPLOAD_BYTES) -> Any:
    """``json.loads`` with a size limit and one-line messages (raises ConfigError)."""
    if isinstance(text, bytes):
        if len(text) > limit:
            raise ConfigError([("", f"{what} is {len(text):,} bytes; the limit is {limit:,}")])
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError([("", f"{what} is not UTF-8 text")]) from None
    if not isinstance(text, str):
        raise ConfigError([("", f"{what} must be text")])
    if len(text) > limit:
        raise ConfigError([("", f"{what} is {len(text):,} characters; the limit is {limit:,}")])
    if not text.strip():
        raise ConfigError([("", f"{what} is empty")])
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError([("", f"{what} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}")]) from None
    except RecursionError:
        raise ConfigError([("", f"{what} is nested too deeply")]) from None
    except ValueError as e:  # an integer literal over Python's 4,300-digit conversion limit
        raise ConfigError([("", f"{what} holds a number too long to read: {_int_limit_text(e)}")]) from None


def _int_limit_text(e: ValueError) -> str:
    if "integer string conversion" in str(e):
        return f"an integer with more than {sys.get_int_max_str_digits():,} digits"
    return str(e)[:80]


def diff(base: Any, new: Any) -> Any:
    """Changed leaves of ``new`` relative to ``base`` (nested dicts; lists compared whole).
    Keys of ``base`` missing from ``new`` are not represented: callers diff canonical dumps,
    which share one key set."""
    if isinstance(base, dict) and isinstance(new, dict):
        out = {}
        for k, v in new.items():
            if k not in base:
                out[k] = v
            elif base[k] != v:
                out[k] = diff(base[k], v) if isinstance(base[k], dict) and isinstance(v, dict) else v
        return out
    return new


def apply_diff(base: Any, delta: Any, depth: int = 0) -> Any:
    """Inverse of :func:`diff`: ``apply_diff(a, diff(a, b)) == b`` for canonical dumps."""
    if depth > 16:
        raise ConfigError([("", "nested too deeply")])
    if isinstance(base, dict) and isinstance(delta, dict):
        out = dict(base)
        for k, v in delta.items():
            out[k] = apply_diff(base[k], v, depth + 1) if isinstance(base.get(k), dict) and isinstance(v, dict) else v
        return out
    return delta


def issue_text(issues: Issues) -> str:
    return "; ".join(f"{f}: {m}" if f else m for f, m in issues)


HF_KEYS = frozenset({"model_type", "architectures", "num_hidden_layers", "intermediate_size"})


def is_hf_config(data: Any) -> bool:
    """A Hugging Face ``config.json`` (its own field names: ``model_type``, ``architectures``,
    ``num_hidden_layers`` …, none of a ModelSpec's ``num_layers``): the Model page imports it."""
    return isinstance(data, dict) and len(HF_KEYS & {str(k) for k in data}) >= 2 and "num_layers" not in data


def section_of(data: Any) -> str | None:
    """The section an uploaded JSON object is, by its fields: the one whose field names it shares
    most of (at least half of its keys), or a whole scenario ("scenario"); None when none fits."""
    if not isinstance(data, dict) or not data:
        return None
    keys = {str(k) for k in data}
    if keys <= set(SECTIONS) and len(keys) > 1:
        return "scenario"
    shared = sorted(((len(keys & set(SPEC_CLASS[sec].model_fields)), sec) for sec in SECTIONS), reverse=True)
    (top, best), (second, _) = shared[0], shared[1]
    # a tie (a lone "name", which every section has) names no section
    return best if top > second and top * 2 >= len(keys) else None
