"""Helpers of the studio's AppTest suites: open pages, walk every text an element carries."""

from __future__ import annotations

import json
import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["pages/home.py", "pages/model.py", "pages/system.py", "pages/strategy.py", "pages/estimate.py",
         "pages/timeline.py"]
TIMEOUT = 60
# Markdown that only user or engine text could have produced, unescaped: a link or an image.
LINK_OR_IMAGE = re.compile(r"(?<!\\)\]\(|!(?<!\\)\[(?=[^\]]*\]\()")
NOT_MARKDOWN = {"code_text", "id", "form_id", "data", "spec", "arrow_data", "default"}  # literal or binary


def open_app(path: str = "pages/home.py", **query: str) -> AppTest:
    """Through app.py (st.navigation), so ``switch_page`` works."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if path != "pages/home.py":
        at.switch_page(path).run()
    return at


def open_page(path: str, **query: str) -> AppTest:
    """The page file itself (the first request after a server start runs it without app.py)."""
    at = AppTest.from_file(str(ROOT / path), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    return at


def open_groups(at: AppTest, section: str, titles: list[str] | None = None, value: bool = True) -> AppTest:
    """Open (``value=False``: fold) editor groups of ``section`` (all, or those whose title starts
    with one of ``titles``) as a user clicking their headers would, and rerun: a folded group
    draws no field (ui/fold.py)."""
    from ui.form import group_key, group_titles

    gen = int(at.session_state[f"cfg.gen.{section}"]) if f"cfg.gen.{section}" in at.session_state else 0
    for t in group_titles(section):
        if titles is None or any(t.startswith(x) for x in titles):
            at.session_state[group_key(section, gen, t)] = value
    at.run()
    return at


def open_fold(at: AppTest, key: str) -> AppTest:
    """Open the folded box ``key`` (``ui.fold.group``, e.g. the Model page's ``hf.box``) as a
    user clicking its header would, and rerun: a folded box draws nothing inside it."""
    at.session_state[key] = True
    at.run()
    return at


def scenario(at: AppTest) -> dict:
    return {s: json.loads(at.session_state[f"cfg.{s}"]) for s in ("model", "system", "strategy")}


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def _proto_strings(msg, out: list[str], depth: int = 0) -> None:
    if depth > 8:
        return
    for field, value in msg.ListFields():
        if field.name in NOT_MARKDOWN:
            continue
        repeated = not isinstance(value, (str, bytes)) and not hasattr(value, "ListFields") and hasattr(value, "__iter__")
        vals = value if repeated else [value]
        for v in vals:
            if isinstance(v, str):
                out.append(v)
            elif hasattr(v, "ListFields"):
                _proto_strings(v, out, depth + 1)


def rendered_strings(at: AppTest) -> list[str]:
    """Every string of every element on the page (sidebar included): Markdown bodies, labels,
    help tooltips, captions, options, toasts; code blocks (literal text) and data excluded."""
    out: list[str] = []
    stack = [at._tree]
    while stack:
        node = stack.pop()
        children = getattr(node, "children", None)
        if isinstance(children, dict):
            stack.extend(children.values())
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "ListFields") and type(node).__name__ != "Code":
            _proto_strings(proto, out)
    return out


# a code span: a run of backticks, text, the same run (CommonMark 6.1); it takes precedence over
# links, so a link inside one is drawn as literal code (ui/text.py md_code shows user keys so)
CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)   # an escaped backtick opens none


def unescaped_links(at: AppTest) -> list[str]:
    return [s[:200] for s in rendered_strings(at) if LINK_OR_IMAGE.search(CODE_SPAN.sub("", s))]


def assert_workers_killed() -> None:
    """Every worker child left after a cancelled call was killed: wait for each to be reaped (no
    fixed sleep: a loaded CI machine); one still listed must have died by a signal, not by
    finishing its work."""
    import multiprocessing as mp

    left = [p for p in mp.active_children() if p.name.startswith("Process")]
    for p in left:
        p.join(timeout=30)
    assert not [p for p in left if p.is_alive() or p.exitcode >= 0]
