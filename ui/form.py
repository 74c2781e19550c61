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
from typing import Any

import streamlit as st

from . import state
from .config_io import SPEC_CLASS, Issues
from .text import md
from .schema import FieldMeta, get_in, grouped_fields, set_in, text_fields

COLUMNS = 3


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
    if m.kind == "bool":
        return st.checkbox(label, value=bool(value), key=key, help=help_)
    if m.kind == "choice":
        options = list(m.choices) + ([None] if m.optional else [])
        index = options.index(value) if value in options else 0
        return st.selectbox(label, options, index=index, key=key, help=help_,
                            format_func=lambda o: "auto" if o is None else str(o))
    # No min_value / max_value on the widget: the browser would refuse an out-of-range value with
    # only a tooltip and keep the old one. The value goes through; validation names the bound.
    if m.kind == "int":
        return st.number_input(label, value=None if value is None else int(value), step=1, format="%d", key=key,
                               help=help_, placeholder="auto" if m.optional else None)
    if m.kind == "float":
        return st.number_input(label, value=None if value is None else float(value), step=_float_step(value, m),
                               format="%g", key=key, help=help_, placeholder="auto" if m.optional else None)
    text = "" if value is None else str(value)
    return st.text_input(label, value=text, key=key, help=help_, max_chars=m.max_length)


def pending(section: str) -> dict[str, Any]:
    """The user's values of ``section`` that did not validate, by dotted field ({} when none):
    shown again in their fields (also after visiting another page) and reported as not applied."""
    saved = st.session_state.get(f"cfg.pending.{section}") or {}
    return dict(saved.get("values", {})) if saved.get("gen") == state.generation(section) else {}


def _remember(section: str, draft: dict[str, Any], current: dict[str, Any], metas: list[FieldMeta]) -> None:
    values = {m.dotted: get_in(draft, m.path) for m in metas if get_in(draft, m.path) != get_in(current, m.path)}
    st.session_state[f"cfg.pending.{section}"] = {"gen": state.generation(section), "values": values}


def render_fields(section: str, *, expanded_groups: int = 99) -> tuple[dict[str, Any], dict[str, Any]]:
    """Draw every scalar field of ``section``; returns (draft dict, {dotted: placeholder})."""
    cls = SPEC_CLASS[section]
    current = state.section_dict(section)
    held = pending(section)
    shown = copy.deepcopy(current)
    for dotted, v in held.items():
        set_in(shown, tuple(dotted.split(".")), v)
    draft = copy.deepcopy(current)
    slots: dict[str, Any] = {"": st.empty()}
    saved = st.session_state.get(f"ui.open.{section}") or {}
    opened: set[str] = set(saved.get("groups", ())) if saved.get("gen") == state.generation(section) else set()
    for gi, (title, metas) in enumerate(grouped_fields(section, cls)):
        # the first group and any group with a non-default value open; all-default groups (MLA of
        # a GQA model, MoE of a dense one) stay folded; once open, a group stays open (for this section's generation): a value edited back
        # to its default does not fold the group away under the user's pointer
        expanded = gi < expanded_groups and (gi == 0 or title in opened
                                             or not all(m.at_default(get_in(current, m.path)) for m in metas))
        if expanded:
            opened.add(title)
        with st.expander(title, expanded=expanded):
            cols = st.columns(COLUMNS)
            for i, m in enumerate(metas):
                with cols[i % COLUMNS]:
                    value = _widget(section, m, get_in(shown, m.path))
                    if m.optional and m.kind == "str" and value == "":
                        value = None
                    set_in(draft, m.path, value)
                    slots[m.dotted] = st.empty()
    st.session_state[f"ui.open.{section}"] = {"gen": state.generation(section), "groups": sorted(opened)}
    texts = text_fields(cls)
    if texts:
        with st.expander("Provenance (name of sources, citations)", expanded=False):
            for m in texts:
                value = st.text_area(m.label, value=get_in(shown, m.path) or "", key=widget_key(section, m.dotted),
                                     help=m.help_text(), max_chars=m.max_length, height=90)
                set_in(draft, m.path, value)
                slots[m.dotted] = st.empty()
    return draft, slots


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
    by_field = locate(section, issues, [k for k in slots if k])
    for dotted, msgs in by_field.items():
        slot = slots.get(dotted) or slots[""]
        prefix = "" if dotted else "Not applied: "
        slot.error(prefix + "  \n".join(md(m, 600) for m in dict.fromkeys(msgs)), icon="⚠️")


def commit(section: str, draft: dict[str, Any], slots: dict[str, Any]) -> Issues:
    """Validate the draft; store it when valid; show errors next to the fields they name."""
    from .config_io import validate_section

    canon, issues = validate_section(section, draft)
    current = state.section_dict(section)
    if canon is not None:
        st.session_state.pop(f"cfg.pending.{section}", None)
        if canon != current:
            state.set_section(section, canon, "edited", reset_widgets=False)
            state.sync_link()
        return []
    cls = SPEC_CLASS[section]
    _remember(section, draft, current, [m for _, ms in grouped_fields(section, cls) for m in ms] + text_fields(cls))
    show_issues(section, issues, slots)
    return issues
