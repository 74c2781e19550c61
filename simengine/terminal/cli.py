"""Text the command line writes to a terminal: the one place that renders user text there.

A model name, a JSON key of an imported config.json or a line of a training log can hold an ANSI
escape (ESC [ …), a carriage return that rewrites the line before it, a newline that forges a
line of its own, or a Unicode direction override. :func:`shown` writes every such character as a
``\\uXXXX`` escape: on a terminal it is inert text, and inside a JSON string it is the same
character (RFC 8259 §7), so JSON output stays valid and means what it meant. Newlines and tabs
stay (tables are made of them); a message that must be one line goes through :func:`one_line`,
which also caps its length. ``StdoutGuard`` applies :func:`shown` to everything written to stdout
and turns a failed write (a full disk) into ``OutputError``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

# C0 controls but tab and newline, DEL, C1 controls, line/paragraph separators, bidi embeddings,
# overrides and isolates (U+202A–U+202E, U+2066–U+2069)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
MAX_LINE = 2000   # characters of one error or warning line; the rest is counted, not printed


def _escape(m: re.Match) -> str:
    return f"\\u{ord(m.group(0)):04x}"


def shown(text: str) -> str:
    """``text`` with every control character but newline and tab written as ``\\uXXXX``."""
    return _CONTROL.sub(_escape, text)


def one_line(text: Any, limit: int = MAX_LINE) -> str:
    """``text`` as one terminal line of at most ``limit`` characters (and a count of the rest)."""
    flat = shown(str(text).replace("\n", " ").replace("\t", " "))
    return flat if len(flat) <= limit else f"{flat[:limit]}… ({len(flat) - limit:,} more characters)"


def warn(text: Any) -> None:
    """One ``warning:`` line on stderr."""
    print(one_line(f"warning: {text}"), file=sys.stderr)


class OutputError(Exception):
    """stdout could not be written (not a closed pipe)."""


class StdoutGuard:
    """stdout for one command: what is written goes through :func:`shown`; a write or flush that
    fails (not a closed pipe: ``BrokenPipeError`` passes as it is) raises ``OutputError``."""

    def __init__(self, raw: Any):
        self._raw = raw

    def write(self, text: str) -> int:
        try:
            return self._raw.write(shown(text))
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputError(e.strerror or str(e)) from None

    def flush(self) -> None:
        try:
            self._raw.flush()
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputError(e.strerror or str(e)) from None

    def __getattr__(self, name: str) -> Any:   # fileno, isatty, encoding, buffer, …
        return getattr(self._raw, name)
