"""Errors the engine raises on bad input.

Every error names the field (dotted path such as ``strategy.tp``) so the UI can show it next to
that field and the CLI can print one line.
"""

from __future__ import annotations

import math
import re


class ConfigError(ValueError):
    """A scenario that cannot be estimated. ``issues`` is a list of (field, message)."""

    def __init__(self, issues: list[tuple[str, str]]):
        self.issues = list(issues)
        super().__init__(issues_text(self.issues))

    @property
    def field(self) -> str:
        return self.issues[0][0] if self.issues else ""


def issues_text(issues) -> str:
    """A ConfigError's message: each (field, message) as "field: message", joined by "; " (so the
    text of a concatenation of issue lists is its parts' texts joined by "; ")."""
    return "; ".join(f"{f}: {m}" if f else m for f, m in issues)


def _not_finite(x) -> bool:
    return isinstance(x, float) and not math.isfinite(x)


def _shown(value) -> str:
    """A rejected input as a message quotes it: its repr, at most 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def from_pydantic(err, prefix: str = "", fields=()) -> ConfigError:
    """Convert a pydantic ``ValidationError`` into a ConfigError with dotted field paths.

    Errors from a model-level validator carry no location; when ``fields`` (the model's field
    names) is given, such an error is attached to the first field its message names as
    ``field=value`` (e.g. "top_k=9 must be between 1 and num_experts=8" → ``model.top_k``)."""
    issues = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "__root__")
        msg = str(e.get("msg", "invalid value"))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        if e.get("type") in ("int_parsing", "float_parsing") and e.get("input") in ("true", "false"):
            msg = f"should be a number, not {e['input']}"  # a boolean given to a number (config/spec.py)
        elif e.get("type") in ("int_parsing", "float_parsing", "int_from_float"):   # pydantic's "Input should be …, unable to parse string as …"
            what = "a number" if e["type"] == "float_parsing" else "a whole number"
            msg = f"should be {what}, not {_shown(e.get('input'))}"
        elif e.get("type") == "int_parsing_size":   # 1e30: "Unable to parse input string as an integer, exceeded maximum size"
            msg = f"should be a whole number within its range, not {_shown(e.get('input'))}"
        if _not_finite(e.get("input")):   # NaN fails every bound: "less than or equal to 100000" misled
            msg = f"should be a finite number, not {e['input']}"
        if not loc and fields:
            named = [m.group(1) for m in re.finditer(r"\b([a-z_][a-z0-9_]*)\s*=", msg)]
            loc = next((n for n in named if n in fields), "")
        path = ".".join(p for p in (prefix, loc) if p)
        issues.append((path, msg))
    return ConfigError(issues)
