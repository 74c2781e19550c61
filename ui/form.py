"""Widgets generated from the pydantic specs, with validation errors shown under the field.

``render_fields`` draws one widget per leaf field (type, bounds, choices, default, unit and
help all read from ``model_fields`` via :mod:`ui.schema`) and returns the draft dict plus a
placeholder per field; ``commit`` validates the draft, stores it when valid, and writes each
error into the placeholder of the field its dotted path (or its message) names.
"""

from __future__ import annotations

import copy
import math
import re
from functools import lru_cache
from typing import Any

import streamlit as st

from simengine.config.strategy import follow_framework

from . import fold, state
from .config_io import SPEC_CLASS, Issues
from .text import md, sentence_start
from .schema import FieldMeta, get_in, grouped_fields, set_in, text_fields

COLUMNS = 3
PROVENANCE = "Provenance (name of sources, citations)"


def widget_key(section: str, dotted: str) -> str:
    return f"w{state.generation(section)}.{section}.{dotted}"


def _float_step(value: Any, m: FieldMeta) -> float:
    if m.le is not None and m.le <= 3:
        return 0.01
    v = abs(float(value)) if isinstance(value, (int, float)) and value else 1.0
    return float(10 ** math.floor(math.log10(v))) / 10 if v >= 1 else 0.01


def _widget(section: str, m: FieldMeta, value: Any) -> Any:
    key = widget_key(section, m.dotted)
    label, help_ = m.label, m.help_text()
    cb = {"on_change": apply_edit, "args": (section,)}
    if m.kind == "bool":
        return st.checkbox(label, value=bool(value), key=key, help=help_, **cb)
    if m.kind == "choice":
        options = list(m.choices) + ([None] if m.optional else [])
        index = options.index(value) if value in options else 0
        return st.selectbox(label, options, index=index, key=key, help=help_,
                            format_func=lambda o: "auto" if o is None else str(o), **cb)
    # No min_value / max_value on the widget: the browser would refuse an out-of-range value with
    # only a tooltip and keep the old one. The value goes through; validation names the bound.
    if m.kind == "int":
        # a float widget showing integers: Streamlit's integer widget parses what is typed with
        # JavaScript's parseInt, so "1e2" became 1 and "3.2e1" 3, silently; parseFloat reads them
        # as 100 and 32, and _widget_value hands validation an int (or the fraction it must refuse).
        # "%.15g" shows every integer below 10^15 exactly, and a typed fraction as typed
        return st.number_input(label, value=None if value is None else _shown_number(value), step=1.0, format="%.15g",
                               key=key, help=help_, placeholder="auto" if m.optional else None, **cb)
    if m.kind == "float":
        return st.number_input(label, value=None if value is None else float(value), step=_float_step(value, m),
                               format="%g", key=key, help=help_, placeholder="auto" if m.optional else None, **cb)
    text = "" if value is None else str(value)
    return st.text_input(label, value=text, key=key, help=help_, max_chars=m.max_length, **cb)


def pending(section: str) -> dict[str, Any]:
    """The user's values of ``section`` that did not validate, by dotted field ({} when none):
    shown again in their fields (also after visiting another page) and reported as not applied."""
    return dict(_pending_state(section).get("values", {}))


def pending_issues(section: str) -> Issues:
    return [tuple(x) for x in _pending_state(section).get("issues", [])]


def _pending_state(section: str) -> dict[str, Any]:
    saved = st.session_state.get(f"cfg.pending.{section}") or {}
    return saved if saved.get("gen") == state.generation(section) else {}


@lru_cache(maxsize=8)
def field_specs(section: str) -> tuple[tuple[tuple[str, tuple[FieldMeta, ...]], ...], tuple[FieldMeta, ...]]:
    """(groups of scalar fields, long text fields) of ``section``: read once from the pydantic
    spec (the same on every rerun), not on every widget pass."""
    cls = SPEC_CLASS[section]
    return tuple((t, tuple(ms)) for t, ms in grouped_fields(section, cls)), tuple(text_fields(cls))


def group_key(section: str, gen: int, title: str) -> str:
    """Session key of a group's open state (per generation: a replaced section starts afresh)."""
    return f"grp{gen}.{section}.{title}"


def group_titles(section: str) -> list[str]:
    groups, texts = field_specs(section)
    return [t for t, _ in groups] + ([PROVENANCE] if texts else [])


def _open_groups(section: str) -> dict[str, bool]:
    """{group title: open} as the user left the groups of ``section`` (this generation only)."""
    saved = st.session_state.get(f"ui.open.{section}") or {}
    return dict(saved.get("groups", {})) if saved.get("gen") == state.generation(section) else {}


def _all_fields(section: str) -> list[FieldMeta]:
    groups, texts = field_specs(section)
    return [m for _, ms in groups for m in ms] + list(texts)


def _shown_number(value: Any) -> Any:
    """An integer field's value for its float widget (a pending value that is no number shows as typed)."""
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _widget_value(m: FieldMeta, value: Any) -> Any:
    if m.kind == "int" and isinstance(value, float) and value.is_integer():
        return int(value)   # the float widget of an integer field (_widget): 100.0 is 100, 3.5 stays for validation to refuse
    return None if m.optional and m.kind == "str" and value == "" else value


def apply_edit(section: str) -> None:
    """``on_change`` of every field widget, before the rerun draws anything: validate the fields
    as they are now; store the section when valid, else keep the values and their issues as
    pending (nothing is computed from them). One rerun then shows a consistent page."""
    from .config_io import validate_section

    current = state.section_dict(section)
    draft = copy.deepcopy(current)
    metas = _all_fields(section)
    for m in metas:
        key = widget_key(section, m.dotted)
        if key in st.session_state:
            set_in(draft, m.path, _widget_value(m, st.session_state[key]))
    if section == "strategy":  # a new framework brings its own defaults for what the user left alone
        draft = follow_framework(current, draft)
    canon, issues = validate_section(section, draft)
    if canon is not None:
        st.session_state.pop(f"cfg.pending.{section}", None)
        if canon != current:
            state.set_section(section, canon, "edited", reset_widgets=False)
            state.sync_link()
        return
    values = {m.dotted: get_in(draft, m.path) for m in metas if get_in(draft, m.path) != get_in(current, m.path)}
    st.session_state[f"cfg.pending.{section}"] = {"gen": state.generation(section), "values": values,
                                                  "issues": [list(i) for i in issues]}


def _error(msgs: list[str], prefix: str = "") -> None:
    st.error(prefix + "  \n".join(md(m, 600) for m in dict.fromkeys(msgs)), icon="⚠️")


def render_fields(section: str, issues: Issues = (), *, expanded_groups: int = 99,
                  notes: Issues = ()) -> dict[str, list[str]]:
    """Draw every scalar field of ``section`` (pending values shown as typed) with its issues
    right under it, and under a field the scenario's notes on it (warnings: what the stack would
    refuse or runs as a what-if); returns the issues no field took (the caller shows them as a banner)."""
    current = state.section_dict(section)
    shown = copy.deepcopy(current)
    for dotted, v in pending(section).items():
        set_in(shown, tuple(dotted.split(".")), v)
    groups, texts = field_specs(section)
    by_field = locate(section, list(issues), [m.dotted for m in _all_fields(section)])
    typed = {d.removeprefix(section + ".") for d in pending(section)}
    noted: dict[str, list[str]] = {}
    for f, msg in notes:   # "strategy.schedule" → the field "schedule", as ``locate`` names them
        noted.setdefault(f.removeprefix(section + "."), []).append(msg)
    remember = _open_groups(section)
    gen = state.generation(section)
    for gi, (title, metas) in enumerate(groups):
        # a group starts open when it is the first one or holds a non-default value (MLA of a GQA
        # model, MoE of a dense one start folded); from then on it stays as the user left it for
        # this section's generation (a value edited back to its default does not fold it away);
        # a group with an error opens. A folded group draws no field (ui/fold.py).
        has_error = any(m.dotted in by_field for m in metas)
        default_open = gi < expanded_groups and (gi == 0 or not all(m.at_default(get_in(current, m.path)) for m in metas))
        box, is_open = fold.group(title, group_key(section, gen, title), remember, default_open, has_error)
        if not is_open:
            continue
        with box:
            cols = st.columns(COLUMNS)
            for i, m in enumerate(metas):
                with cols[i % COLUMNS]:
                    _widget(section, m, get_in(shown, m.path))
                    if m.dotted in by_field:
                        _error(by_field[m.dotted])
                    elif m.dotted in noted and m.dotted not in typed:   # a note on the applied value, not on a typed one
                        st.warning("  \n".join(md(sentence_start(x), 600) for x in noted[m.dotted]), icon=":material/info:")
    if texts:
        box, is_open = fold.group(PROVENANCE, group_key(section, gen, PROVENANCE), remember, False,
                                  any(m.dotted in by_field for m in texts))
        if is_open:
            with box:
                for m in texts:
                    st.text_area(m.label, value=get_in(shown, m.path) or "", key=widget_key(section, m.dotted),
                                 help=m.help_text(), max_chars=m.max_length, height=90, on_change=apply_edit,
                                 args=(section,))
                    if m.dotted in by_field:
                        _error(by_field[m.dotted])
    st.session_state[f"ui.open.{section}"] = {"gen": gen, "groups": remember}
    return {k: v for k, v in by_field.items() if k not in {m.dotted for m in _all_fields(section)}}


def locate(section: str, issues: Issues, field_names: list[str]) -> dict[str, list[str]]:
    """Map issues to field placeholders: by dotted path first, else by the field names the
    message mentions (model-level validators name every term), else the section banner ''."""
    out: dict[str, list[str]] = {}
    known = set(field_names)
    leaf = {}
    for d in field_names:
        leaf.setdefault(d.rsplit(".", 1)[-1], d)
    for path, msg in issues:
        rel = path[len(section) + 1:] if path.startswith(section + ".") else ("" if path in (section, "") else path)
        # pydantic paths of table rows look like efficiency.gemm_table.3.m: keep the table field
        parts = rel.split(".") if rel else []
        target = ""
        for n in range(len(parts), 0, -1):
            cand = ".".join(parts[:n])
            if cand in known:
                target = cand
                break
        if target:
            out.setdefault(target, []).append(msg if rel == target else f"{rel}: {msg}")
            continue
        mentioned = [leaf[w] for w in dict.fromkeys(re.findall(r"[a-z][a-z0-9_]*", msg)) if w in leaf]
        if mentioned:
            for d in mentioned:
                out.setdefault(d, []).append(msg)
        else:
            out.setdefault("", []).append(f"{path}: {msg}" if path and path != section else msg)
    return out


def show_issues(section: str, issues: Issues, slots: dict[str, Any]) -> None:
    """Issues of table fields (System page) in their placeholders; the rest in the banner ''."""
    by_field = locate(section, issues, [k for k in slots if k])
    for dotted, msgs in by_field.items():
        slot = slots.get(dotted) or slots[""]
        with slot.container():
            _error(msgs, "" if dotted else "Not applied: ")


def commit_tables(section: str, rows: dict[str, list], slots: dict[str, Any]) -> bool:
    """Store edited table fields (``{"efficiency.gemm_table": rows}``) when the section stays
    valid; returns True when something changed (the caller reruns so the page follows)."""
    from .config_io import validate_section

    current = state.section_dict(section)
    draft = copy.deepcopy(current)
    for dotted, value in rows.items():
        set_in(draft, tuple(dotted.split(".")), value)
    if draft == current:
        return False
    canon, issues = validate_section(section, draft)
    if canon is None:
        show_issues(section, issues, slots)
        return False
    if canon == current:
        return False
    state.set_section(section, canon, "edited", reset_widgets=False)
    state.sync_link()
    return True
