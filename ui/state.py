"""Session state of the studio: the scenario as validated JSON text, and the share link.

Session keys (plain strings / lists only, never engine objects):

* ``cfg.model`` / ``cfg.system`` / ``cfg.strategy`` — canonical JSON of each validated section;
* ``cfg.origin.<section>`` — where that section came from ("preset small", "edited", ...);
* ``cfg.gen.<section>`` — bumped when a section is replaced from outside, so its widgets reset;
* ``cfg.base.<section>`` / ``cfg.base_origin.<section>`` — the section as it was when it got its
  name (canonical JSON) and where from: edits since then (``renamed_changes``) make that name
  stale ("medium (64x H100 …)" on 48 GPUs), so the pages say so (session only, not in the link);
* ``cfg.link`` — the query parameters last written to the address bar;
* ``pins`` — scenarios pinned for comparison: ``[{"label", "json"}]`` (also in the link: ``pins``);
* ``budget.value`` — the Estimate page's token budget [billion tokens] (also in the link: ``budget``);
* ``cfg.badlink`` — a link that could not be opened and its messages: it stays in the address bar;
* ``notices`` — messages queued for the next render: ``[(level, text, where)]``.

Every page calls :func:`ensure_scenario` first, so a deep link opened on a freshly started
server works on any page, whether or not ``app.py`` ran (see app.py for why that matters).
"""

from __future__ import annotations

import re

import json
from functools import lru_cache, partial
from typing import Any
from urllib.parse import urlsplit

import streamlit as st

from simengine.errors import ConfigError
from simengine.presets import SCENARIO_SIZES, list_presets, load_preset, named_scenarios, scenario_preset

from . import pins as pin_link
from . import share
from .config_io import PRESET_KIND, SECTIONS, Issues, cross_issues, dumps, join_sections, notes_of, validate_section
from .text import clip, md

LINK_KEYS = ("s", "preset")
EXTRA_KEYS = ("pins", "budget")  # link parameters beyond the scenario (ui.pins)
# Query parameters left alone and not reported: Streamlit's own, "page" (consumed by app.py: share
# links name the page), and the Search page's inputs (ui/search_view.py LINK_PARAM), which travel
# next to the scenario link.
STREAMLIT_KEYS = {"embed", "embed_options", "page", "search"}
DEFAULT_SIZE = "small"
MAX_PINS = pin_link.MAX_PINS


def _ss():
    return st.session_state


# ---- reading --------------------------------------------------------------------------------
def section_json(section: str) -> str:
    return _ss()[f"cfg.{section}"]


def section_dict(section: str) -> dict[str, Any]:
    return json.loads(section_json(section))


def scenario_dict() -> dict[str, dict[str, Any]]:
    return {s: section_dict(s) for s in SECTIONS}


def scenario_json() -> str:
    """Canonical JSON of the whole scenario: the cache key of every engine call.

    Equal to ``dumps(scenario_dict())`` (sorted keys, no spaces), built from the stored section
    texts without parsing them again: it is called many times per rerun."""
    return join_sections({s: section_json(s) for s in SECTIONS})


def origin(section: str) -> str:
    return _ss().get(f"cfg.origin.{section}", "")


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted paths of a section's leaves (a list, such as a measured table, is one leaf)."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for k, v in data.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


@lru_cache(maxsize=32)
def _changes(base_text: str, text: str) -> tuple[tuple[str, Any, Any], ...]:
    if base_text == text:
        return ()
    old, new = _flat(json.loads(base_text)), _flat(json.loads(text))
    return tuple((k, old.get(k), new.get(k)) for k in sorted(set(old) | set(new))
                 if k != "name" and old.get(k) != new.get(k))


def renamed_changes(section: str) -> tuple[tuple[str, Any, Any], ...]:
    """``(field, value then, value now)`` of each field changed since the section got the name it
    still carries (``cfg.base.<section>``): when there are any, that name describes another
    section than the current one (a size preset's "medium (64x H100 …)" after num_gpus became 48)."""
    base = _ss().get(f"cfg.base.{section}")
    if not isinstance(base, str) or f"cfg.{section}" not in _ss() or _name_of(base) != section_dict(section).get("name"):
        return ()
    return _changes(base, section_json(section))


def base_origin(section: str) -> str:
    """Where the section got its name from ("preset medium", "uploaded x.json", ...)."""
    return str(_ss().get(f"cfg.base_origin.{section}", ""))


EDITED = " (edited)"


def display_name(section: str, limit: int | None = None) -> str:
    """The section's name as a page shows it (plain text; escape it): marked "(edited)" when
    fields changed since it got that name (``renamed_changes``). The stored name is not changed.
    ``limit`` cuts the name, never the mark (a 120-character name clipped after the mark was
    added lost it: the sidebar showed the preset's name as if unchanged)."""
    name = str(section_dict(section).get("name", ""))
    edited = bool(renamed_changes(section))
    if limit is not None:
        name = clip(name, max(limit - (len(EDITED) if edited else 0), 1))
    return name + EDITED if edited else name


def generation(section: str) -> int:
    return int(_ss().get(f"cfg.gen.{section}", 0))


@st.cache_data(max_entries=256, show_spinner=False)
def _cross(scenario_text: str) -> Issues:
    return cross_issues(json.loads(scenario_text))


def scenario_issues() -> Issues:
    """Cross-section problems of the current scenario (empty when it can be estimated)."""
    return _cross(scenario_json())


@st.cache_data(max_entries=256, show_spinner=False)
def _notes(scenario_text: str) -> Issues:
    return notes_of(json.loads(scenario_text))


def scenario_notes() -> Issues:
    """The current scenario's notes (``config_io.notes_of``): what its stack would refuse or runs
    only as a what-if, with the field each names."""
    return _notes(scenario_json())


# ---- writing --------------------------------------------------------------------------------
# origins that change some fields of the section in place and keep its name (the editors' fields
# and tables, the Search page's GPU count and fit changes, a calibration)
IN_PLACE_ORIGINS = frozenset({"edited", "search", "fit change", "calibrated", "refit to a training log"})


def _preset_data(section: str):
    """(origin, loader of the section dict) of each preset of ``section``'s kind (the size presets first), then
    of each named scenario (presets/scenarios.json: a catalogue system at the scenario's GPU count)."""
    kind = PRESET_KIND[section]
    names = list_presets(kind)
    for n in [s for s in SCENARIO_SIZES if s in names] + [n for n in names if n not in SCENARIO_SIZES]:
        yield f"preset {n}", partial(load_preset, kind, n)
    try:
        scenarios = named_scenarios()
    except ConfigError:   # a broken scenarios.json: the presets still match
        scenarios = {}
    for n in scenarios:
        yield f"scenario {n}", partial(_scenario_section, n, section)


def _scenario_section(name: str, section: str) -> dict[str, Any]:
    return scenario_preset(name)[section]


@lru_cache(maxsize=8)
def _preset_sections(section: str) -> tuple[tuple[str, str, str], ...]:
    """(origin, name, canonical JSON) of ``section`` in each preset and named scenario, each text
    once (a scenario's model is its preset's); a broken one left out."""
    out: dict[str, tuple[str, str, str]] = {}
    for label, load in _preset_data(section):
        try:
            canon, _ = validate_section(section, load())
        except (ConfigError, KeyError):
            continue
        if canon is not None:
            out.setdefault(dumps(canon), (label, str(canon.get("name", "")), dumps(canon)))
    return tuple(out.values())


def _named_base(section: str, name: Any, text: str) -> tuple[str, str] | None:
    """(canonical JSON, origin) of the preset or named scenario whose section carries ``name``,
    the one ``text`` changed least (the first on a tie); None when none carries it."""
    same = [(len(_changes(js, text)), i, js, label)
            for i, (label, n, js) in enumerate(_preset_sections(section)) if n == name]
    if not same:
        return None
    _, _, js, label = min(same)
    return js, label


@lru_cache(maxsize=16)
def _name_of(text: str) -> Any:
    return json.loads(text).get("name")


def _keep_base(section: str, canonical: dict[str, Any], text: str, origin_label: str) -> None:
    """Remember the section as it was when it got its name (``cfg.base.<section>``): kept by an
    in-place change that keeps the name, else the section itself — or the preset (a size preset,
    a catalogue model, system or strategy, a named scenario's section) whose name it carries (a
    share link or a saved file of an edited preset: "medium (64x H100 …)" on 48 GPUs is the
    medium preset, changed; "Llama-3-70B" with 40 layers the llama3-70b preset, changed)."""
    ss = _ss()
    name = canonical.get("name")
    base = ss.get(f"cfg.base.{section}")
    if origin_label in IN_PLACE_ORIGINS and isinstance(base, str) and _name_of(base) == name:
        return
    ss[f"cfg.base.{section}"], ss[f"cfg.base_origin.{section}"] = _named_base(section, name, text) or (text, origin_label)


def set_section(section: str, canonical: dict[str, Any], origin_label: str, *, reset_widgets: bool = True) -> None:
    """Store a section that already passed :func:`validate_section`."""
    ss = _ss()
    text = dumps(canonical)
    _keep_base(section, canonical, text, origin_label)
    ss[f"cfg.{section}"] = text
    ss[f"cfg.origin.{section}"] = origin_label
    ss.pop(f"pick.{section}", None)   # the editor's preset picker follows the new origin (ui/editor.py toolbar)
    if reset_widgets:
        ss[f"cfg.gen.{section}"] = generation(section) + 1


def load_section(section: str, data: Any, origin_label: str) -> Issues:
    """Validate and store ``data`` as ``section``; returns the issues (nothing stored then)."""
    canon, issues = validate_section(section, data)
    if canon is not None:
        set_section(section, canon, origin_label)
        sync_link()
    return issues


def set_scenario(cfg: dict[str, dict[str, Any]], origin_label: str, *, sync: bool = True) -> None:
    for s in SECTIONS:
        set_section(s, cfg[s], origin_label)
    if sync:
        sync_link()


def load_size(size: str, *, sync: bool = True) -> None:
    set_scenario(share.size_canonical(size), f"preset {size}", sync=sync)


def notify(level: str, text: str, where: str = "") -> None:
    """Queue a message for this rerun: at the top of the page, or (``where``) at the spot that
    calls ``layout.show_notices(where)``, such as right under the upload it is about."""
    _ss().setdefault("notices", []).append((level, text, where))


def drop_notices(where: str) -> None:
    """Forget the messages queued for ``where`` and not drawn yet: a run that the next event cut
    short never drew them, and the next run drew them under that event (an emptied upload box
    said the previous file's "Imported …")."""
    pop_notices(where)


def pop_notices(where: str = "") -> list[tuple[str, str]]:
    queued = list(_ss().get("notices", []))
    mine = [(lvl, text) for lvl, text, *w in queued if (w[0] if w else "") == where]
    _ss()["notices"] = [n for n in queued if (n[2] if len(n) > 2 else "") != where]
    return mine


# ---- share link -----------------------------------------------------------------------------
def link_params() -> dict[str, str]:
    """Query parameters of the current scenario's link (cached on the scenario JSON)."""
    return share.link_params_json(scenario_json())


def link_too_long() -> bool:
    """True when the current scenario's link is over the cap and cannot be opened again."""
    return share.token_too_long(link_params())


def extra_params() -> dict[str, str]:
    """``pins`` and ``budget`` parameters of the session (only those that hold something)."""
    return dict(_extra_cached(tuple((p["label"], p["json"]) for p in pins()), budget()))


@lru_cache(maxsize=32)
def _extra_cached(pinned: tuple[tuple[str, str], ...], budget_b: float) -> dict[str, str]:
    return pin_link.extra_params([{"label": lab, "json": js} for lab, js in pinned], budget_b)


def pins_too_long() -> int:
    """The length of the pinned scenarios' link token when it is over the cap that decoding
    accepts (``address`` then leaves the pins out of the link, and ``layout.link_warning`` says
    so); 0 when the pins are in the link or there are none."""
    tok = extra_params().get("pins", "")
    return len(tok) if share.token_too_long({"s": tok}) else 0


def address() -> dict[str, str]:
    """What the address bar holds for this session: the scenario's link, then pins and budget
    (``page_address`` adds the search). Pins whose token is too long to open are left out
    (``pins_too_long``: every page says so)."""
    extra = extra_params()
    if pins_too_long():
        extra = {k: v for k, v in extra.items() if k != "pins"}
    return {**share.address_params(link_params()), **extra}


def page_address() -> dict[str, str]:
    """The address a page opens at and its share link: ``address`` and the session's search, on
    every page (a reload of another page kept the scenario but lost the search; the sidebar's page
    links carry all of it, ui/layout.py ``page_link``)."""
    return {**address(), **_search_param()}


def sync_link() -> None:
    """Make the address bar hold the link of the current scenario (no rerun is triggered).
    Repeated or extra parameters are rewritten to the canonical link."""
    params = address()
    current = {k: st.query_params.get_all(k) for k in st.query_params if k not in STREAMLIT_KEYS}
    keep = {k: st.query_params.get_all(k) for k in st.query_params if k in STREAMLIT_KEYS}
    # the session's search on a page whose address lacks it (the Search page says a damaged one
    # first and keeps its parameter itself)
    missing = {k: [v] for k, v in _search_param().items() if k not in keep} if _ss().get("ui.page") != "search" else {}
    if current != {k: [v] for k, v in params.items()} or missing:
        st.query_params.from_dict({**keep, **missing, **params})
    _ss()["cfg.link"] = params
    _ss().pop("cfg.badlink", None)


def share_url() -> str:
    """The address that reproduces this session's scenario, pins and budget on this page: the
    server's root with ``page=`` (see app.py for why no page path)."""
    base = ""
    try:
        base = st.context.url or ""
    except Exception:  # noqa: BLE001 — no browser context (tests)
        base = ""
    parts = urlsplit(base)
    prefix = str(st.get_option("server.baseUrlPath") or "").strip("/")
    root = f"{parts.scheme}://{parts.netloc}/" + (prefix + "/" if prefix else "") if parts.netloc else ""
    page = _ss().get("ui.page", "home")
    query = share.link_query(page_address())
    return root + (f"?page={page}&" + query[1:] if page != "home" else query)


def _search_param() -> dict[str, str]:
    """The token (``search=``, ui/search_inputs.py) of the session's search, so the address and the
    shared link reproduce the search too: the address bar's when it opens, else the session's (a
    damaged one in the address bar). Never a token that does not open: a damaged link is not
    handed on."""
    from .search_inputs import LINK_PARAM

    for tok in (st.query_params.get(LINK_PARAM), _ss().get("search.token")):
        if search_token_opens(tok):
            return {LINK_PARAM: tok}
    return {}


def search_token_opens(tok: object) -> bool:
    """Whether ``tok`` is a search link token that opens (``search_inputs.decode_inputs``)."""
    from .search_inputs import MAX_TOKEN_CHARS

    return isinstance(tok, str) and 0 < len(tok) <= MAX_TOKEN_CHARS and bool(_URL_SAFE.fullmatch(tok)) and _opens(tok)


@lru_cache(maxsize=64)
def _opens(tok: str) -> bool:
    from .search_inputs import decode_inputs

    try:
        decode_inputs(tok)
    except Exception:  # noqa: BLE001 — any failure means the link does not open (the page says why)
        return False
    return True


_URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")


def _incoming() -> tuple[dict[str, list[str]], dict[str, list[str]], list[str]]:
    """(scenario parameters in the address bar, pins/budget parameters, names of unknown ones);
    each value as the list of every value the parameter has."""
    link: dict[str, list[str]] = {}
    extra: dict[str, list[str]] = {}
    unknown: list[str] = []
    for k in st.query_params:
        if k in LINK_KEYS:
            link[k] = list(st.query_params.get_all(k)) or [""]
        elif k in EXTRA_KEYS:
            extra[k] = list(st.query_params.get_all(k)) or [""]
        elif k not in STREAMLIT_KEYS:
            unknown.append(k)
    return link, extra, unknown


def _sentence(e: Exception) -> str:
    """A link error's message, escaped, ending with one full stop (not "was it cut short?.")."""
    text = md(e)
    return text if text.endswith((".", "?", "!")) else text + "."


def _open_scenario(link: dict[str, list[str]], have: bool) -> list[str]:
    """Load the scenario a link names; returns error messages (nothing loaded then). A session that
    has a scenario keeps it when the link's ``s`` does not open, whatever ``preset`` the link also
    names (that preset would replace the session's edits); a fresh one opens that preset instead."""
    if have and "s" in link:
        link = {k: v for k, v in link.items() if k != "preset"}
    try:
        cfg, notes = share.decode_params(link)
    except share.ShareLinkError as e:
        return [f"Could not open the link: {_sentence(e)} " + (
            "Keeping the current scenario." if have else f"Showing the {DEFAULT_SIZE} preset instead.")]
    except ConfigError as e:  # a broken preset file on the server
        return [f"Could not open the link: {md(e)}"]
    if cfg is not None:
        size = share.link_params(cfg).get("preset")
        set_scenario(cfg, f"preset {size}" if "s" not in link and size else "share link", sync=False)
        for n in notes:
            notify("warning", md(n))
    return []


def _open_extras(extra: dict[str, list[str]]) -> list[str]:
    """Pins and token budget from the link (when new to this session); returns error messages."""
    known = _ss().get("cfg.link") or {}
    errors = []
    value = (extra.get("pins") or [None])[-1]
    if value is not None and value != known.get("pins"):
        try:
            got, notes = pin_link.decode_pins(value)
        except share.ShareLinkError as e:
            errors.append(f"Could not open the pinned scenarios of the link: {_sentence(e)}")
        else:
            _ss()["pins"] = got
            for n in notes:
                notify("warning", md(n))
    value = (extra.get("budget") or [None])[-1]
    if value is not None and value != known.get("budget"):
        try:
            set_budget(pin_link.parse_budget(value), sync=False)
        except share.ShareLinkError as e:
            errors.append(f"Could not open the link: {_sentence(e)}")
    return errors


def ensure_scenario() -> None:
    """Load the scenario named by the address bar when it is new to this session; otherwise
    keep the session's scenario; default to the small preset. Always leaves a valid scenario in
    session state. A link that cannot be opened is a message and stays in the address bar (the
    user's link is not replaced) until the scenario changes; otherwise the address bar holds
    the session's link."""
    ss = _ss()
    link, extra, unknown = _incoming()
    here = {k: list(st.query_params.get_all(k)) for k in st.query_params if k not in STREAMLIT_KEYS}
    bad = ss.get("cfg.badlink")
    if bad is not None and bad["address"] == here:
        errors = list(bad["messages"])
    else:
        have = all(f"cfg.{s}" in ss for s in SECTIONS)
        known = {k: [v] for k, v in (ss.get("cfg.link") or {}).items() if k in LINK_KEYS}
        errors = _open_scenario(link, have) if link and link != known else []
        errors += _open_extras(extra)
        if unknown:
            shown = ", ".join(md(repr(clip(u, 30))) for u in unknown[:5])
            notify("info", f"Ignored unknown link parameter(s) {shown}; a studio link has only "
                           f"'preset' ({'/'.join(SCENARIO_SIZES)}) or 's' (an edited scenario), and 'pins' / 'budget'.")
    if not all(f"cfg.{s}" in ss for s in SECTIONS):
        load_size(DEFAULT_SIZE, sync=False)
    for text in errors:
        notify("error", text)
    if errors:
        ss["cfg.badlink"] = {"address": here, "messages": errors}
        return
    sync_link()


# ---- pinned scenarios and token budget (Estimate page; both in the link) ----------------------
def pins() -> list[dict[str, str]]:
    return list(_ss().get("pins", []))


def pin(label: str) -> str | None:
    """Pin the current scenario; None when pinned, else why not (already pinned; the list is full:
    the oldest pin is not dropped to make room, it was the user's)."""
    text = scenario_json()
    current = pins()
    if any(p["json"] == text for p in current):
        return "Already pinned."
    if len(current) >= MAX_PINS:
        return f"At most {MAX_PINS} scenarios can be pinned; clear the pins to pin more."
    current.append({"label": label[:pin_link.LABEL_CHARS] or f"scenario {len(current) + 1}", "json": text})
    _ss()["pins"] = current
    sync_link()
    return None


def unpin(index: int) -> None:
    current = pins()
    if 0 <= index < len(current):
        current.pop(index)
    _ss()["pins"] = current
    sync_link()


def clear_pins() -> None:
    _ss()["pins"] = []
    sync_link()


def budget() -> float:
    """Token budget of the Estimate page [billion tokens]; kept in the session, not the widget."""
    return float(_ss().get("budget.value", pin_link.DEFAULT_BUDGET_B))


def keep_budget(key: str) -> None:
    """``on_change`` of a token-budget input (widget ``key``): the session keeps a value in range
    only (``pins.budget_problem``: the page says what is wrong under the field)."""
    value = _ss().get(key)
    if pin_link.budget_problem(value) is None:
        set_budget(value)


def set_budget(value: float, *, sync: bool = True) -> None:
    _ss()["budget.value"] = float(value)
    if sync:
        sync_link()
