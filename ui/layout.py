"""Page boot: page config, compact CSS, the sidebar (navigation, scenario at a glance, link).

Every page starts with ``boot("Title")``. It does not rely on ``app.py`` having run: on the
first request after a server start Streamlit may run a page of ``pages/`` directly (see app.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import streamlit as st

from simengine.api import SEARCH_FLAG_LABELS

from . import share, state
from .text import issues_md, md
from .units import fmt_count

APP_NAME = "simengine studio"
FAVICON = Path(__file__).resolve().parent.parent / "assets" / "favicon.png"
ROUTER_FLAG = "studio.router"  # set by app.py on every run it makes (st.navigation is active)
NAME_CHARS = 120  # names shown in the scenario glance
LINK_BOX_CHARS, LINK_BOX_PX = 1500, 220
SHORT_LINK_CHARS = 200  # a longer share link folds into an expander in the sidebar (copy button there)  # a longer share link scrolls in a box of this height

# (script path relative to app.py, label, icon)
PAGES: list[tuple[str, str, str]] = [
    ("pages/home.py", "Home", ":material/home:"),
    ("pages/model.py", "Model", ":material/neurology:"),
    ("pages/system.py", "System", ":material/dns:"),
    ("pages/strategy.py", "Strategy", ":material/account_tree:"),
    ("pages/estimate.py", "Estimate", ":material/speed:"),
    ("pages/timeline.py", "Timeline", ":material/view_timeline:"),
    ("pages/search.py", "Search", ":material/manage_search:"),
    ("pages/calibration.py", "Calibration", ":material/tune:"),
    ("pages/validation.py", "Validation", ":material/fact_check:"),
]

_CSS = """
<style>
/* dense but calm: tighter vertical rhythm, smaller metric values */
.block-container {padding-top: 2.2rem; padding-bottom: 2rem;}
[data-testid="stMetricValue"] {font-size: 1.45rem;}
[data-testid="stMetricLabel"] p {font-size: 0.82rem;}
[data-testid="stExpander"] details summary p {font-weight: 600;}
[data-testid="stSidebar"] [data-testid="stCode"] code {font-size: 0.68rem; word-break: break-all; white-space: pre-wrap;}
div[data-testid="stVerticalBlock"] {gap: 0.55rem;}
@media (max-width: 640px) {.block-container {padding-left: 0.8rem; padding-right: 0.8rem; padding-top: 3rem;}}
</style>
"""


def page_slug(path: str) -> str:
    """``pages/estimate.py`` → ``estimate`` (the ``page`` parameter of a share link)."""
    return Path(path).stem


def boot(title: str) -> None:
    """Call first on every page: config, scenario from the link or session, sidebar, notices."""
    slug = st.session_state["ui.page"] = next((page_slug(p) for p, label, _ in PAGES if label == title), "home")
    if st.query_params.get("page") not in (None, slug):
        del st.query_params["page"]   # app.py keeps it for the page drawn at the root; any other page drops it
    icon = str(FAVICON) if FAVICON.is_file() else None  # local file: no font CDN needed offline
    st.set_page_config(page_title=f"{title} · {APP_NAME}", page_icon=icon, layout="wide",
                       initial_sidebar_state="auto")  # "auto": folded on a phone, open on a desktop
    st.html(_CSS)
    state.ensure_scenario()
    sidebar()
    show_notices()
    link_warning()
    from .editor import stale_warning  # editor imports layout

    for section in ("model", "system", "strategy"):
        if title.lower() != section:  # the editor itself says it next to the form
            stale_warning(section)
    from .heap import freeze_startup_heap

    freeze_startup_heap()  # once per server: the first page's imports stay out of later gc passes


def scenario_download(key: str, label: str = "Download the scenario JSON") -> None:
    """The whole scenario as one JSON file (Home's "Open a scenario file" and every editor's
    upload read it back)."""
    st.download_button(label, json.dumps(state.scenario_dict(), indent=1), file_name="simengine-scenario.json",
                       mime="application/json", key=key, on_click="ignore", icon=":material/download:")


def link_warning() -> None:
    """On every page: say so when the address bar cannot reproduce the scenario (its link is over
    the cap that decoding accepts), and offer the scenario JSON instead; and when it leaves the
    pinned scenarios out for the same reason."""
    pins_chars = state.pins_too_long()
    if pins_chars:
        n = len(state.pins())
        st.warning(f"**The pinned scenarios are not in the share link.** Their part of the link would be {pins_chars:,} "
                   f"characters, more than the {share.MAX_TOKEN_CHARS:,} a link may have, so the address bar and the "
                   f"share link reproduce the scenario without its {n:,} pin{'' if n == 1 else 's'} (usually: very large "
                   "measured GEMM or collective tables). The pins stay in this session; to share them, pin fewer "
                   "scenarios (*Clear pins* on the Estimate page, then pin again).", icon="⚠️")
    params = state.link_params()
    if not share.token_too_long(params):
        return
    st.warning(f"**This scenario has no working share link.** Its link would be {len(params['s']):,} characters, "
               f"more than the {share.MAX_TOKEN_CHARS:,} a link may have, so the address bar cannot reproduce it "
               "(usually: very large measured GEMM or collective tables). Download the scenario JSON to keep or "
               "send it; reopen it with *Open a scenario file* on the Home page.", icon="⚠️")
    scenario_download("dl.scenario.nolink")


def page_link(path: str, label: str, icon: str | None = None, query: dict[str, str] | None = None, **kw) -> None:
    """``st.page_link`` that never breaks a page (e.g. a page run outside the app's navigation) and
    opens the page at the session's address (``state.page_address``, or ``query`` when given): the page
    then has nothing to write to the address bar, which added a second history entry per click
    (Back had to be pressed twice per page)."""
    if path == "pages/home.py" and not st.session_state.get(ROUTER_FLAG):
        path = "app.py"  # pages-folder mode: the home page is the main script itself
    try:
        st.page_link(path, label=label, icon=icon, query_params=state.page_address() if query is None else query, **kw)
    except Exception:  # noqa: BLE001 — StreamlitPageNotFoundError and friends
        st.caption(label)


def sidebar() -> None:
    with st.sidebar:
        st.markdown(f"**{APP_NAME}**")
        here = state.page_address()
        for path, label, icon in PAGES:
            page_link(path, label, icon, query=here)
        st.divider()
        glance(compact=True)
        params = state.link_params()
        if share.token_too_long(params):
            st.caption("No share link: this scenario is too large for one (see the warning on the page).")
            return
        url = state.share_url()
        if len(url) <= SHORT_LINK_CHARS:
            st.caption("Share link (reproduces this scenario)")
            st.code(url, language=None, wrap_lines=True)
        else:  # a calibrated or catalogue system: thousands of characters would bury the sidebar
            st.caption(f"Share link: {len(url):,} characters (the address bar holds it too).")
            with st.expander("Show or copy the share link", icon=":material/link:"):
                st.code(url, language=None, wrap_lines=True, height=LINK_BOX_PX if len(url) > LINK_BOX_CHARS else "content")
        if state.pins_too_long():
            st.caption("Without the pinned scenarios: they are too large for a link (see the warning on the page).")
        if len(params.get("s", "")) > share.LONG_LINK_CHARS:
            st.caption(f"A long link ({len(url):,} characters): some proxies and servers refuse addresses over "
                       f"~{share.LONG_LINK_CHARS // 1000}k characters, so keep the scenario JSON (Home page) as well.")


def glance(compact: bool = False) -> None:
    """Current scenario in three lines; issues count when the sections disagree."""
    m, sy, s = (state.section_dict(x) for x in ("model", "system", "strategy"))
    from .engine import figures

    f = figures("model", state.section_json("model"))
    params = ""
    if f["ok"]:
        total, active = f["figures"]["params_total"], f["figures"]["params_active"]
        params = f" · {fmt_count(total)} params" + (f" ({fmt_count(active)} active)" if active < total else "")
    par = f"tp{s['tp']} pp{s['pp']} cp{s['cp']}" + (f" ep{s['ep']}" if s["ep"] > 1 else "") + \
          (f" vpp{s['vpp']}" if s["vpp"] > 1 else "") + (f" dp{s['dp']}" if s.get("dp") else "")
    lines = [
        f"**Model** {md(state.display_name('model', NAME_CHARS))}{params}",
        f"**System** {sy['num_gpus']:,} × {md(sy['gpu']['name'], NAME_CHARS)}{measured_note(sy)}",
        f"**Strategy** {par} · {md(s['schedule'])} · {memory_knobs(s)} · gbs {s['global_batch_size']:,} × "
        f"{s['seq_len']:,} tokens · {md(s['dtype'])}",
    ]
    if compact:
        st.markdown("  \n".join(lines))
    else:
        for line in lines:
            st.markdown(line)
    issues = state.scenario_issues()
    if issues:
        n = f"{len(issues)} problem{'' if len(issues) == 1 else 's'} between sections"
        # the Strategy editor lists them below its form: do not send its user to the page they are on
        where = "listed on this page" if st.session_state.get("ui.page") == "strategy" else "see the Strategy page"
        st.warning(f"{n}; {where}.", icon="⚠️")


MEASURED_TABLES = (("gemm_table", "GEMM shapes"), ("grouped_gemm_table", "grouped-GEMM shapes"),
                   ("attention_table", "attention shapes"), ("collective_table", "collective fits"))


def measured_note(system: dict) -> str:
    """" · calibrated: 30 GEMM shapes, 6 collective fits" after the system's GPU when its efficiencies carry
    measured tables (a calibration used in the scenario, or a saved system): the estimate then
    prices from them, and every page should say so ('' without any)."""
    eff = system.get("efficiency") or {}
    parts = [f"{len(eff[k]):,} {label}" for k, label in MEASURED_TABLES if eff.get(k)]
    return f" · calibrated: {', '.join(parts)}" if parts else ""


OVERLAP_FLAGS = SEARCH_FLAG_LABELS   # the overlap flags as the Search page's layout labels name them


def memory_knobs(s: dict) -> str:
    """Micro-batch, ZeRO stage, recompute, activation offload and overlap flags in the Search
    page's notation ("mbs2 zero1 rc-none overlap grad+param"): what "Use this layout" changes
    besides the split, so the sidebar shows it."""
    rc = s.get("recompute", "none")
    if rc == "full" and s.get("recompute_num_layers") is not None:
        rc = f"full{s['recompute_num_layers']}"
    parts = [f"mbs{s.get('micro_batch_size', 1):,}", f"zero{s.get('zero_stage', 0)}", f"rc-{md(rc)}"]
    if s.get("cpu_offload_layers"):
        parts.append(f"offload{s['cpu_offload_layers']:,}")
    on = [name for flag, name in OVERLAP_FLAGS if s.get(flag)]
    parts.append("overlap " + "+".join(on) if on else "no overlap")
    return " ".join(parts)


def issue_lines(issues, limit: int | None = None) -> str:
    """Markdown bullet lines of (field, message) issues; field paths can hold keys a user typed
    (an uploaded file's unknown field), so they are shown as literal code. A list cut at ``limit``
    says how many more there are."""
    issues = list(issues)
    more = len(issues) - limit if limit and len(issues) > limit else 0
    return issues_md(issues, limit) + (f"  \n- … and {more} more" if more else "")


def show_notices(where: str = "") -> None:
    """Queued messages: the page-wide ones (``where=""``, drawn by ``boot``) or those meant for
    one spot (an upload's messages right under it)."""
    for level, text in state.pop_notices(where):
        {"error": st.error, "warning": st.warning, "success": st.success}.get(level, st.info)(text)


def issues_box(issues, title: str = "This scenario cannot be estimated yet") -> None:
    st.error(f"**{title}:**  \n" + issue_lines(issues), icon="⚠️")
    c1, c2, c3 = st.columns(3)
    with c1:
        page_link("pages/model.py", "Fix on the Model page", ":material/neurology:")
    with c2:
        page_link("pages/system.py", "Fix on the System page", ":material/dns:")
    with c3:
        page_link("pages/strategy.py", "Fix on the Strategy page", ":material/account_tree:")
