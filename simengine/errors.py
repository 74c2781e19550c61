"""Errors the engine raises on bad input.

Every error names the field (dotted path such as ``strategy.tp``) so the UI can show it next to
that field and the CLI can print one line.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A scenario that cannot be estimated. ``issues`` is a list of (field, message)."""

    def __init__(self, issues: list[tuple[str, str]]):
        self.issues = list(issues)
        super().__init__("; ".join(f"{f}: {m}" if f else m for f, m in self.issues))

    @property
    def field(self) -> str:
        return self.issues[0][0] if self.issues else ""


def from_pydantic(err, prefix: str = "") -> ConfigError:
    """Convert a pydantic ``ValidationError`` into a ConfigError with dotted field paths."""
    issues = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e.get("loc", ()) if p != "__root__")
        path = ".".join(p for p in (prefix, loc) if p)
        msg = str(e.get("msg", "invalid value"))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        issues.append((path, msg))
    return ConfigError(issues)
