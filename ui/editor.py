"""The common frame of the Model, System and Strategy editors: preset picker, JSON upload and
download, derived figures, and the generated form with inline errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import streamlit as st

from simengine.errors import ConfigError
from simengine.presets import SCENARIO_SIZES, list_presets, load_preset

from . import form, state
from .config_io import PRESET_KIND, SECTIONS, UPLOAD_MB, is_hf_config, parse_json_text, section_of
from .layout import issue_lines, issues_box, show_notices
from .text import clip, issues_md, md, md_code

CUSTOM = "—"


def preset_options(section: str) -> list[str]:
    names = list_presets(PRESET_KIND[section])
    out = [s for s in SCENARIO_SIZES if s in names] + [n for n in names if n not in SCENARIO_SIZES]
    if section == "system":  # saved user systems (Calibration page, CLI calibrate) after the catalogue
        from .calibration_run import USER_PREFIX, user_systems

        out += [USER_PREFIX + n for n in user_systems()]
    return out


def _load_preset(section: str) -> None:
    name = st.session_state.get(f"pick.{section}")
    if not name or name == CUSTOM:
        state.notify("info", "Pick a preset in the list first, then load it.", f"upl.{section}")
        return
    try:
        from .calibration_run import USER_PREFIX, load_user_system

        if section == "system" and name.startswith(USER_PREFIX):
            data = load_user_system(name[len(USER_PREFIX):])
        else:
            data = load_preset(PRESET_KIND[section], name)
    except ConfigError as e:
        state.notify("error", f"Could not load preset {md(repr(name))}: {md(e)}")
        return
    issues = state.load_section(section, data, f"preset {name}")
    if issues:
        state.notify("error", f"Preset {md(repr(name))} is invalid:  \n" + issues_md(issues, 6))
    else:
        from .named import strategy_hint   # a strategy preset written for another GPU count: say which scenario

        hint = strategy_hint(name, state.section_dict("model"), state.section_dict("system")) if section == "strategy" else ""
        state.notify("warning" if hint else "success", f"Loaded {section} preset {md(repr(name))}.{hint}")


def read_upload(f) -> Any:
    """JSON of an uploaded file; raises ConfigError with a one-line message (never a traceback:
    also a >4,300-digit integer's ValueError or a RecursionError)."""
    name = clip(f.name)
    try:
        return parse_json_text(f.getvalue(), name)
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError([("", f"{name} is nested too deeply")]) from None
    except ValueError as e:
        raise ConfigError([("", f"{name} cannot be read: {clip(e, 120)}")]) from None


def take_upload(key: str) -> tuple[str, Any] | None:
    """(clipped file name, parsed JSON) of the upload widget ``key``; None when nothing was
    uploaded or it could not be read (the error is then posted under that upload)."""
    f = st.session_state.get(key)
    if f is None:
        return None
    try:
        return clip(f.name), read_upload(f)
    except ConfigError as e:
        state.notify("error", f"Upload rejected: {md(e)}", key)
        return None


def _upload(section: str) -> None:
    got = take_upload(f"upl.{section}")
    if got is None:
        return
    name, data = got
    if isinstance(data, dict) and section in data and set(data) <= set(SECTIONS):
        data = data[section]  # a whole scenario file: take this editor's section
    if is_hf_config(data):   # not twenty "Extra inputs are not permitted" lines: where it is read
        state.notify("error", f"Upload rejected: {md(name)} is a Hugging Face config.json, not a simengine {section}; "
                              "import it with *Import a Hugging Face config.json* on the Model page.", f"upl.{section}")
        return
    kind = section_of(data)
    if kind not in (None, section):   # another section's file: one line, not each of its fields refused
        where = "Home page (Open a scenario file)" if kind == "scenario" else f"{kind.capitalize()} page"
        state.notify("error", f"Upload rejected: {md(name)} is a {kind} file, not a {section}; open it on the {where}.",
                     f"upl.{section}")
        return
    issues = state.load_section(section, data, f"uploaded {name}")
    if issues:
        state.notify("error", f"Upload rejected, {md(name)} is not a valid {section}:  \n{issue_lines(issues, 12)}",
                     f"upl.{section}")
    else:
        state.notify("success", f"Loaded {section} from {md(name)}.", f"upl.{section}")


def toolbar(section: str) -> None:
    """Preset picker, JSON upload, JSON download in one row."""
    options = preset_options(section)
    origin = state.origin(section)
    current = origin.removeprefix("preset ")
    ss = st.session_state
    # (or the page was left: Streamlit drops the widget's state then, and a selectbox without it
    # shows its first option, not the section's preset)
    if f"pick.{section}" not in ss or ss.get(f"pick.synced.{section}") != (origin, state.generation(section)):
        # the section changed since the picker last showed it (an edit, an upload, an import): the
        # widget keeps its own value across reruns, so it read "small" beside "(edited)" until the
        # page was left; a pick not loaded yet is left alone (the section did not change)
        ss[f"pick.{section}"] = current if current in options else None
        ss[f"pick.synced.{section}"] = (origin, state.generation(section))
    # widths for a 1,280 px window (an ~820 px main column): [3, 1.1, 3, 1.4] cut the buttons to
    # "Load pre…" and "Download…"; the upload box needs less than the preset picker
    c1, c2, c3, c4 = st.columns([2.6, 1.35, 2.3, 1.75], vertical_alignment="bottom")
    with c1:
        # a section that is no preset (edited, uploaded, calibrated, from a link) shows none picked,
        # not the first preset, which read as if that were the current one
        st.selectbox("Preset", options, key=f"pick.{section}", help="Size presets first, then the catalogue.",
                     placeholder=f"{current or 'custom'} — pick a preset to load"[:80],
                     format_func=lambda n: f"{n} (size preset)" if n in SCENARIO_SIZES else n)
    with c2:
        st.button("Load preset", key=f"load.{section}", on_click=_load_preset, args=(section,), width="stretch")
    with c3:
        st.file_uploader(f"Upload {section} JSON", type=["json"], key=f"upl.{section}",
                         on_change=_upload, args=(section,), max_upload_size=UPLOAD_MB)
    with c4:
        data = state.section_dict(section)
        fname = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in str(data.get("name", section)))[:60]
        # short: "Download strategy JSON" was cut in its column at 1,400 px
        st.download_button("Download JSON", json.dumps(data, indent=2), file_name=f"{fname or section}.json",
                           mime="application/json", key=f"dl.{section}", width="stretch", on_click="ignore",
                           icon=":material/download:", help=f"The {section} as a JSON file (the same the upload beside it reads).")
    show_notices(f"upl.{section}")  # the upload's own messages, right under it


def editor_page(section: str, title: str, intro: str, figures: Callable[[], None],
                before_form: Callable[[], None] | None = None,
                tables: Callable[[dict[str, Any]], dict[str, list]] | None = None) -> None:
    """Field edits are applied by the widgets' callbacks (``form.apply_edit``) before this runs,
    so one rerun draws figures, sidebar and form from the same scenario (no second rerun)."""
    st.title(title)
    st.caption(intro + " " + current_caption(section))
    toolbar(section)
    stale_warning(section, here=True)
    figures()
    if before_form:
        before_form()
    cross = [(f, m) for f, m in state.scenario_issues() if not f.startswith(section + ".")]
    if cross:
        issues_box(cross, "Problems between sections (the scenario cannot be estimated until they are fixed)")
    held = form.pending_issues(section)
    # the edits not applied, and the applied scenario's own problems (a pending tp=2.5 used to hide
    # those of pp=3, which the sidebar counted as "listed on this page"; the banner above says
    # which value of a pending field is in use)
    pending_fields = {f for f, _ in held}
    pending_names = pending_fields | {f.removeprefix(section + ".") for f in pending_fields}
    applied = [(f, m) for f, m in state.scenario_issues() if f.startswith(section + ".") and (f, m) not in held]
    # under a field holding a rejected value, only that value's own error: the problems of the value
    # still in use (tp = 3 while 0 is typed) go to the banner, said to be the applied value's
    in_use = [(f, m) for f, m in applied if f in pending_names]
    own = held + [x for x in applied if x not in in_use]
    banner = st.container()
    rest = form.render_fields(section, own, notes=[(f, m) for f, m in state.scenario_notes() if f.startswith(section + ".")])
    if rest or in_use:
        with banner:
            st.error("  \n".join([("Not applied: " if k in pending_names else "") + md(m, 600)
                                   for k, ms in rest.items() for m in ms]
                                  + [f"In use ({md_code(f.removeprefix(section + '.'), 60)}, its last valid value): {md(m, 600)}"
                                     for f, m in in_use]), icon="⚠️")
    if tables:
        slots: dict[str, Any] = {"": st.empty()}
        if form.commit_tables(section, tables(slots), slots):
            st.rerun()  # derived figures, sidebar and link above the tables follow the edit


CHANGES_SHOWN = 4  # changed fields listed beside a name they make stale


def _then_now(v: Any) -> str:
    """A field's value in the "changed since" list: a table as its row count, numbers as typed."""
    if isinstance(v, list):
        return f"{len(v):,} row{'' if len(v) == 1 else 's'}"
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:.6g}"
    return clip(v, 30)


def current_caption(section: str) -> str:
    """"Current system: **name** (origin)." — and when fields changed since the section got that
    name (a size preset's "medium (64x H100 …)" after num_gpus became 48), the name marked as
    edited with what changed, so it does not read as a description of the current section (the
    stored name, the link and the saved files stay as they are)."""
    name = md(state.section_dict(section).get("name", ""), 120)
    changed = state.renamed_changes(section)
    if not changed:
        return f"Current {section}: **{name}** ({md(state.origin(section) or 'default', 120)})."
    said = ", ".join(f"{md_code(f, 60)} {md(_then_now(a))} → {md(_then_now(b))}" for f, a, b in changed[:CHANGES_SHOWN])
    more = f" and {len(changed) - CHANGES_SHOWN:,} more" if len(changed) > CHANGES_SHOWN else ""
    return f"Current {section}: **{name}** *(edited)*: the name of {md(state.base_origin(section), 120)}, with {said}{more}."


def _figure(v):
    """A typed value as the field shows it: a huge number as 1e+30, not thirty-one digits."""
    return f"{v:.4g}" if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) >= 1e15 else v


def stale_warning(section: str, here: bool = False) -> None:
    """Say that ``section`` holds edits that did not validate, and that results use the last
    valid values (nothing is computed from the invalid text, and nothing silently)."""
    held = form.pending(section)
    if not held:
        return
    current = state.section_dict(section)
    shown = ", ".join(f"{md_code(d, 60)} = {md(clip(_figure(v), 30))} (in use: {md(clip(form.get_in(current, tuple(d.split('.'))), 30))})"
                      for d, v in list(held.items())[:6])
    where = "the figures below, the link and every other page use" if here else "this page uses"
    st.warning(f"**Not applied — the {section} has invalid edits:** {shown}. Until they are fixed, {where} "
               f"the last valid {section}.", icon="⚠️")
    if not here:
        from .layout import page_link

        page_link(f"pages/{section}.py", f"Fix on the {section.capitalize()} page")
