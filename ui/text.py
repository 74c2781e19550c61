"""User-supplied text in Markdown (pure): escape it, clip it.

Streamlit renders ``st.markdown``, ``st.caption``, ``st.error`` … as GitHub-flavoured Markdown,
so a model or GPU name, a file name, a query parameter or a share-link fragment put there as is
could draw a link or a remote image (``[t](https://…)``, ``![t](…)``), an autolink (``<…>``,
``https://…``, ``www.…``, ``a@b.c``), a Streamlit directive (``:red[…]``, ``:material/…:``),
LaTeX (``$…$``), an HTML entity, emphasis or a code span. :func:`md` backslash-escapes every
character that starts one of those (CommonMark renders an escaped punctuation character as
itself), and puts an invisible word joiner into autolink literals, so the text reads the same
and means nothing. Harmless punctuation (``-``, ``.``, ``'``, ``,`` …) stays as is so messages
stay readable in the source, and ``_`` inside a word (``hidden_act``) cannot start emphasis.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from typing import Any

ECHO_CHARS = 60  # user values echoed in messages are cut to about this length

_ALWAYS = re.escape("\\`*~[]<>&$:@|#{}")
_SPECIAL = re.compile(
    rf"[{_ALWAYS}]"                        # links, images, autolinks, HTML, code, math, directives, …
    r"|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])"  # emphasis: '_' not inside a word
)
# GFM autolink literals (https://…, www.…, a@b.c) are found in the *text* after escapes are
# resolved (mdast-util-gfm-autolink-literal), and Streamlit rewrites ":material/" in the raw
# source before parsing, so no backslash stops those: an invisible WORD JOINER (U+2060) inside
# the pattern does ("https:⁠//", "www⁠.", "a@⁠b.c", ":⁠material/").
JOINER = "\u2060"
_BREAK = re.compile(r"(?<=:)(?=//|material/)|(?i:www)(?=\.)|(?<=@)")
_LINE_START = re.compile(r"^(\s*)([-+=>]|\d+(?=[.)]))")  # list, quote, setext markers at the start
_SPACE = re.compile(r"[\r\n\t\f\v\u2028\u2029\x85]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_BACKTICKS = re.compile(r"`+")
_SURROGATE = re.compile("[\ud800-\udfff]")  # lone surrogates cannot be sent (UTF-8): U+FFFD instead


def clip(value: Any, limit: int = ECHO_CHARS) -> str:
    """``str(value)`` cut to ``limit`` characters (an ellipsis marks the cut)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def _escape(m: re.Match) -> str:
    return "\\" + m.group(0)


def _join(m: re.Match) -> str:
    return m.group(0) + JOINER


def _escape_start(m: re.Match) -> str:
    lead, marker = m.group(1), m.group(2)
    return lead + (marker + "\\" if marker.isdigit() else "\\" + marker)  # "1." -> "1\.", "-" -> "\-"


def md(value: Any, limit: int | None = None) -> str:
    """``value`` as literal text for a Markdown context: one line (cut to ``limit``), every
    character that could start Markdown, HTML, an autolink or a Streamlit directive escaped."""
    text = value if isinstance(value, str) else str(value)
    if limit is not None:
        text = clip(text, limit)
    text = _BREAK.sub(_join, _CONTROL.sub("", _SPACE.sub(" ", _SURROGATE.sub("\ufffd", text))))
    text = _SPECIAL.sub(_escape, text)
    return _LINE_START.sub(_escape_start, text, count=1)


def sentence_start(text: str) -> str:
    """``text`` with a capital first letter, unless it opens with a field name or a value
    (``num_layers=32 …``, ``tp=8``, ``seq_len/cp``): "Num_layers" named no field."""
    first = text.split(" ", 1)[0]
    if not text or any(c in first for c in "_=/.0123456789"):
        return text
    return text[:1].upper() + text[1:]


def md_code(value: Any, limit: int | None = None) -> str:
    """An inline code span showing ``value`` literally, whatever backticks it holds."""
    text = value if isinstance(value, str) else str(value)
    if limit is not None:
        text = clip(text, limit)
    text = _CONTROL.sub("", _SPACE.sub(" ", _SURROGATE.sub("\ufffd", text)))
    if not text:
        return "` `"
    fence = "`" * (max((len(m) for m in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def issue_md(field: Any, message: Any, limit: int | None = 600) -> str:
    """One ``(field, message)`` issue as Markdown: the field path as literal code (it can hold a
    key a user typed), the message as literal text (engine messages hold ``*`` and ``_`` —
    ``tp*pp*cp = 3*4*1`` — and may quote user names such as ``system.gpu.name``)."""
    text = md(message, limit)
    return f"{md_code(field, 120)}: {text}" if field else text


def issues_md(issues: Any, limit: int | None = None, bullet: str = "- ") -> str:
    """Markdown lines (one per issue, each escaped by :func:`issue_md`)."""
    shown = list(issues)[:limit] if limit else list(issues)
    return "  \n".join(bullet + issue_md(f, m) for f, m in shown)


# a spreadsheet reads a cell that starts with one of these as a formula (OWASP "CSV Injection":
# =, +, -, @, tab, carriage return), e.g. a scenario label "=HYPERLINK(…)" in a downloaded CSV
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def sheet_cell(value: Any) -> Any:
    """``value`` for a CSV cell a spreadsheet shows as written: text that would start a formula
    gets a leading apostrophe (OWASP's advice), numbers — including text that parses as one,
    such as "-3.5" — stay as they are."""
    if not isinstance(value, str) or not value.startswith(_FORMULA_START):
        return value
    try:
        float(value)
        return value
    except ValueError:
        return "'" + value


def csv_text(rows: Iterable[Sequence[Any]]) -> str:
    """Rows (the header first) as CSV text, every cell through :func:`sheet_cell`: the one
    writer of the studio's CSV downloads."""
    buf = io.StringIO()
    w = csv.writer(buf)
    for row in rows:
        w.writerow([sheet_cell(v) for v in row])
    return buf.getvalue()
