"""Home: what the studio does, the current scenario at a glance, size presets and named scenarios,
share link."""

import streamlit as st

from simengine.presets import SCENARIO_SIZES
from ui import state
from ui.config_io import UPLOAD_MB, section_of, validate_scenario
from ui.editor import take_upload
from ui.engine import estimate_report
from ui.labels import MFU_HELP, PEAK_LABEL, memory_help
from ui.named import open_named, options
from ui.layout import (LINK_BOX_CHARS, LINK_BOX_PX, boot, glance, issue_lines, issues_box, page_link, scenario_download,
                       show_notices)
from ui.share import size_canonical
from ui.text import md
from ui.units import fmt_count, fmt_gib, fmt_pct, fmt_time, fmt_usd


def _open_scenario_file() -> None:
    """Replace the whole scenario by an uploaded scenario JSON (what "Download this scenario"
    writes); a bad file is a message and the scenario stays."""
    got = take_upload("upl.scenario")
    if got is None:
        return
    name, data = got
    kind = section_of(data)
    if kind not in (None, "scenario"):   # one section's file: one line, not each of its fields as a section
        state.notify("error", f"Upload rejected: {md(name)} is a {kind} file, not a scenario (model, system and "
                              f"strategy); open it on the {kind.capitalize()} page.", "upl.scenario")
        return
    cfg, issues = validate_scenario(data)
    if cfg is None:
        state.notify("error", f"Upload rejected, {md(name)} is not a valid scenario:  \n{issue_lines(issues, 12)}",
                     "upl.scenario")
        return
    state.set_scenario(cfg, f"uploaded {name}")
    state.notify("success", f"Opened the scenario in {md(name)}.", "upl.scenario")


boot("Home")

st.title("simengine studio")
st.markdown(
    "Predicts one training step of a large language model on a GPU cluster: step time, throughput, MFU, "
    "memory per pipeline stage and cost, from the model, the system and the parallel strategy.  \n"
    "Edit any of the three, compare scenarios side by side, inspect the simulated pipeline timeline, "
    "and send the link in the address bar to a colleague: it reproduces the scenario exactly.")

left, right = st.columns([3, 2], gap="large")
with left:
    st.subheader("Current scenario")
    glance()
    issues = state.scenario_issues()
    if issues:
        issues_box(issues)
    else:
        res = estimate_report(state.scenario_json())
        if res["ok"]:
            r = res["report"]
            # two rows (3 + 2): five in a row cut the labels at a 1,280 px window ("Allocat…", "Cost / 1M to…")
            c = st.columns(3) + st.columns(3)[:2]
            c[0].metric("Step time", fmt_time(r["step_time_s"]))
            c[1].metric("Tokens/s", fmt_count(r["tokens_per_s"]))
            c[2].metric("MFU", fmt_pct(r["mfu"]), help=MFU_HELP)
            c[3].metric(PEAK_LABEL, fmt_gib(r["peak_memory_gib"]),
                        "fits" if r["fits"] else "does not fit", delta_color="normal" if r["fits"] else "inverse",
                        delta_arrow="off", help=memory_help(r))
            c[4].metric("Cost / 1M tokens", fmt_usd(r["cost_per_million_tokens_usd"]))
        else:
            issues_box(res["issues"], "The engine could not estimate this scenario")
    st.markdown("**Open**")
    cols = st.columns(3) + st.columns(3)[:2]  # "Systen", "Estima": five in a row were cut at 1,280 px
    for col, (path, label, icon) in zip(cols, [
            ("pages/model.py", "Model", ":material/neurology:"), ("pages/system.py", "System", ":material/dns:"),
            ("pages/strategy.py", "Strategy", ":material/account_tree:"), ("pages/estimate.py", "Estimate", ":material/speed:"),
            ("pages/timeline.py", "Timeline", ":material/view_timeline:")]):
        with col:
            page_link(path, label, icon)

with right:
    st.subheader("Start from a size preset")
    for size in SCENARIO_SIZES:
        try:
            names = size_canonical(size)
            desc = names["strategy"]["name"].split(":", 1)[-1].strip()
        except Exception:  # noqa: BLE001 — a broken preset file must not break Home
            desc = ""
        b, d = st.columns([1, 2], vertical_alignment="center")  # [1, 3] cut "Medium" to "Med…" at 1,280 px
        b.button(size.capitalize(), key=f"size.{size}", on_click=state.load_size, args=(size,), width="stretch",
                 type="primary" if state.link_params() == {"preset": size} else "secondary")
        d.caption(desc)
    named = options()
    if named:
        st.selectbox("Or a named scenario: a strategy preset with the model, system and GPU count it was written for",
                     list(named), format_func=named.get, key="pick.named")
        st.button("Open this scenario", key="open.named", on_click=lambda: open_named(st.session_state["pick.named"]))
        show_notices("named")
    st.subheader("Share link")
    if state.link_too_long():
        st.caption("This scenario is too large for a link; keep or send the scenario file below instead.")
    else:
        url = state.share_url()
        st.caption("The address bar always holds this link; anyone opening it sees this exact scenario.")
        st.code(url, language=None, wrap_lines=True, height=LINK_BOX_PX if len(url) > LINK_BOX_CHARS else "content")
    st.subheader("Scenario file")
    st.file_uploader("Open a scenario file (JSON with model, system and strategy)", type=["json"],
                     key="upl.scenario", on_change=_open_scenario_file, max_upload_size=UPLOAD_MB)
    show_notices("upl.scenario")
    scenario_download("dl.scenario", "Download this scenario")
