"""Search page inputs: the GPU-count and restriction parsers and the search link's token.
Pure (no Streamlit): the worker process that runs a search (``ui.worker_tasks.search``) parses
the same inputs the page validated."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import re
import zlib
from typing import Any

from simengine.api import SEARCH_DIMS as DIMS
from simengine.api import SEARCH_OBJECTIVES as OBJECTIVES
from simengine.api import check_search_choices, search_expected_values
from simengine.errors import ConfigError

LINK_PARAM = "search"
MAX_TOKEN_CHARS = 4000
INPUT_KEYS = ("gpus", "global_batch", "seq_len", "objective", "top", "restrict")
# the Search page's number inputs take these ranges (pages/search.py); a link outside them is refused
INPUT_RANGES = {"global_batch": (1, 100_000_000), "seq_len": (1, 16_777_216), "top": (1, 500)}


# short labels: "Global batch (sequences)" wrapped onto two lines at 1,280 px and sat its input
# lower than its neighbours'; the unit is in the help
INPUT_LABELS = {"global_batch": "Global batch", "seq_len": "Sequence length", "top": "Top"}
INPUT_HELP = {"global_batch": "Sequences per optimizer step (strategy.global_batch_size).",
              "seq_len": "Tokens per sequence (strategy.seq_len).", "top": "How many of the best layouts to show."}


def parse_count(key: str, value: Any) -> int:
    """A numeric input of the Search form (``INPUT_RANGES``), typed in a float widget so that
    "1e3" reads as 1000 (Streamlit's integer widget parses it with parseInt: 1), and without the
    widget's min/max (the browser would refuse a value outside them with only a red icon): a
    whole number in range, else a ConfigError naming the field (``search.<key>``)."""
    lo, hi = INPUT_RANGES[key]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and float(value).is_integer() and lo <= value <= hi
    if not ok:
        raise ConfigError([(f"search.{key}", f"{INPUT_LABELS[key]}: give a whole number from {lo:,} to {hi:,}")])
    return int(value)


def parse_counts(text: str) -> list[int]:
    """"64" or "64,128" or "64..512" (doubling) → GPU counts; ConfigError naming the field."""
    text = (text or "").strip()
    try:
        ends = [_whole(x) for x in text.split("..", 1)] if ".." in text else None
        out = [_whole(x) for x in text.split(",") if x.strip()] if ends is None else []
    except (ValueError, OverflowError):
        raise ConfigError([("search.gpus", f"'{text[:40]}' is not a GPU count list such as 64 or 64,128 or 64..512")]) from None
    if ends is not None:
        a, b = ends
        if 1 <= b < a:
            raise ConfigError([("search.gpus", f"'{text[:40]}' runs backwards: write the smaller count first ({b}..{a})")])
        while 1 <= a <= b and len(out) < 64:
            out.append(a)
            a *= 2
    if not out or any(g < 1 or g > 1_000_000 for g in out) or len(out) > 64:
        raise ConfigError([("search.gpus", "give 1 to 64 GPU counts between 1 and 1,000,000")])
    return out


def _whole(text: str) -> int:
    """An integer written as one ("1024") or in scientific notation ("1e3", as the number fields
    beside it read it); ValueError for anything else (1.5, inf, nan)."""
    try:
        return int(text)
    except ValueError:
        x = float(text)
        if not x.is_integer():
            raise ValueError(text) from None
        return int(x)


def parse_restrict(text: str) -> dict[str, list[Any]]:
    """One restriction per line or ';': ``tp=4,8`` / ``recompute=none,full``; a ConfigError with
    one issue per bad line (only the first was said, so each fix met the next error)."""
    out: dict[str, list[Any]] = {}
    issues: list[tuple[str, str]] = []
    for part in (text or "").replace("\n", ";").split(";"):
        part = part.strip()
        if not part:
            continue
        name, eq, vals = part.partition("=")
        name = name.strip().removeprefix("strategy.")
        raws = [v.strip() for v in vals.split(",") if v.strip()]
        if not eq or name not in DIMS:
            issues.append(("search.restrict", f"'{part[:60]}' is not DIMENSION=V1,V2 with a dimension among {', '.join(DIMS)}"))
        elif name in out:  # two lines for one dimension: which one was meant is not ours to guess
            issues.append(("search.restrict", f"{name} is restricted twice; list its values on one line ({name}=V1,V2)"))
        elif not raws:
            issues.append(("search.restrict", f"'{part[:60]}' lists no value"))
        else:
            try:  # the values too (tp=abc), so the message is under the field, not the search's failure
                values = [_value(name, r) for r in raws]
                check_search_choices({name: values})
                out[name] = values
            except ConfigError as e:
                issues += [("search.restrict", m) for _, m in e.issues]
    if issues:
        raise ConfigError(issues[:MAX_RESTRICT_ISSUES])
    return out


MAX_RESTRICT_ISSUES = 8   # lines said at once under the box


def _value(dim: str, text: str) -> Any:
    """A restriction's value as the dimension takes it: the first reading of ``text`` the search
    accepts — JSON (4, true, null, "full"), a whole number in scientific notation (2e0, as the
    number fields read it), a word in any case (True, None, 1F1B) —, else a ConfigError quoting
    what was typed ("'1000000000.0' is not a valid value" quoted a number the user never wrote)."""
    readings: list[Any] = []
    with contextlib.suppress(ValueError):
        readings.append(json.loads(text))
    with contextlib.suppress(ValueError, OverflowError):
        readings.append(_whole(text))
    low = text.lower()
    readings += [{"true": True, "false": False, "none": None, "null": None}.get(low, low), low]
    for v in readings:
        try:
            check_search_choices({dim: [v]})
            return v
        except ConfigError:
            continue
    raise ConfigError([("search.restrict", f"'{text[:40]}' is not a valid value of {dim} ({search_expected_values(dim)})")])


def encode_inputs(inputs: dict[str, Any]) -> str:
    raw = json.dumps({k: inputs[k] for k in INPUT_KEYS}, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode_inputs(token: str) -> dict[str, Any]:
    """Inputs of a search link; ConfigError for anything that is not one."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        raise ConfigError([("search", "the search link is too long or not text")])
    try:
        raw = zlib.decompressobj().decompress(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)), 20_000)
        data = json.loads(raw)
    except (ValueError, zlib.error, TypeError):
        raise ConfigError([("search", "the search link is damaged")]) from None
    if not isinstance(data, dict) or set(data) != set(INPUT_KEYS):
        raise ConfigError([("search", "the search link does not hold search inputs")])
    try:   # the numbers by the form's own rule (parse_count)
        data.update({k: parse_count(k, data[k]) for k in INPUT_RANGES})
    except ConfigError:
        raise ConfigError([("search", "the search link holds invalid values")]) from None
    # the objective's type first: a list or an object is unhashable ('in' raised a TypeError, said
    # on the page as "Could not open the search link: unhashable type: 'list'")
    if not isinstance(data["objective"], str) or data["objective"] not in OBJECTIVES \
            or not isinstance(data["gpus"], str) or not isinstance(data["restrict"], str):
        raise ConfigError([("search", "the search link holds invalid values")])
    return data


def restricted_to_schedules(inputs: dict[str, Any], schedules: list[str]) -> dict[str, Any]:
    """``inputs`` with the schedule restricted to ``schedules`` (the Search page's "only the
    schedules this stack runs"): any schedule line replaced, the other lines kept."""
    lines = [x.strip() for x in re.split(r"[;\n]", inputs.get("restrict", "")) if x.strip()]
    kept = [x for x in lines if x.split("=", 1)[0].strip().removeprefix("strategy.") != "schedule"]
    return {**inputs, "restrict": "\n".join(kept + [f"schedule={','.join(schedules)}"])}
