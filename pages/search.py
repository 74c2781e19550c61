"""Search: every feasible layout of the current model on the current GPU type, ranked, with the
Pareto front, the smallest changes that make the current scenario fit, and "use this layout"."""

import json

import pandas as pd
import streamlit as st

from simengine.api import SEARCH_OBJECTIVES as OBJECTIVES
from simengine.api import SEARCH_DIMS as DIMS
from simengine.errors import ConfigError
from ui import state
from ui.config_io import dumps
from ui.heavy import run_search
from ui.layout import boot, issue_lines, issues_box
from ui.pins import budget_problem
from ui.search_fit import fit_list
from ui.search_inputs import INPUT_HELP, INPUT_LABELS, LINK_PARAM, decode_inputs, encode_inputs, parse_count, parse_counts, parse_restrict, restricted_to_schedules
from ui.search_view import cached_result, cached_search, candidates_frame, empty_reason, grid_height, grid_options, item_labels, latest_pick, pareto_caption, pareto_chart, points_frame, results_csv, search_base, search_id, search_payload, tie_banner, what_if_text, with_budget
from ui.text import md, sentence_start

boot("Search")
st.title("Strategy search")
st.caption("Every valid layout (tp, pp, vpp, schedule, cp, ep, micro-batch, ZeRO, recompute or activation offload, overlap flags) of the current "
           "model on the current GPU type, memory-filtered before timing, ranked with the same estimate as everywhere else.")

sc = state.scenario_dict()
inputs = st.session_state.get("search.inputs")
token = st.query_params.get(LINK_PARAM)
# the form's widget of each search input (number inputs are float widgets: "1e3" reads as 1000)
WIDGETS = {"gpus": "search.gpus", "global_batch": "search.gbs", "seq_len": "search.seq", "top": "search.top",
           "objective": "search.obj", "restrict": "search.restrict"}
NUMBERS = ("global_batch", "seq_len", "top")


def _show_inputs(new: dict) -> None:
    """Put ``new`` into the form's widgets (a link or a button changed the inputs outside the form:
    a widget keeps what the browser last sent unless its state is set)."""
    for k, key in WIDGETS.items():
        st.session_state[key] = float(new[k]) if k in NUMBERS else new[k]


def _text_issues(gpus: str, restrict: str) -> list:
    """The problems of the GPU counts and the restrictions (``parse_counts``, ``parse_restrict``)."""
    issues: list = []
    for parse, text in ((parse_counts, gpus), (parse_restrict, restrict)):
        try:
            parse(text)
        except ConfigError as e:
            issues += e.issues
    return issues


def _said_under(slots: dict, issues: list) -> None:
    """Each field's messages together under it (a slot holds one element: a second ``error``
    replaced the first, so only the last bad line of the restrictions was said)."""
    by_field: dict[str, list[str]] = {}
    for field, msg in issues:
        by_field.setdefault(field, []).append(md(msg, 600))
    for field, msgs in by_field.items():
        slots.get(field, st).error("  \n".join(msgs), icon="⚠️")


def _default(input_name: str, **kw) -> dict:
    """A widget's default argument (``value``, ``index``): none once its state exists (set by
    ``_show_inputs`` or the user), so Streamlit never sees a default beside a state it was given."""
    return {} if WIDGETS[input_name] in st.session_state else kw


if token and token not in (st.session_state.get("search.token"), st.session_state.get("search.badtoken")):
    try:
        inputs = decode_inputs(token)
        st.session_state["search.inputs"] = inputs
        st.session_state["search.token"] = token
        _show_inputs(inputs)
    except Exception as e:  # noqa: BLE001 — a bad link is a message, never a traceback
        said = "; ".join(m for _, m in e.issues) if isinstance(e, ConfigError) else e  # not "search: the search link…"
        st.error(f"Could not open the search link: {md(said)}.")
        st.session_state["search.badtoken"] = token
if inputs and st.session_state.get("search.token") and token != st.session_state["search.token"]:
    # the page shows the session's search (opened again from the sidebar, or past a damaged
    # link): the address bar carries its token, as the sidebar's share link does (ui/state.py)
    st.query_params[LINK_PARAM] = st.session_state["search.token"]
elif token and token == st.session_state.get("search.badtoken"):
    del st.query_params[LINK_PARAM]   # no search shown: a damaged token is not kept to be copied on
defaults = inputs or {"gpus": str(sc["system"]["num_gpus"]), "global_batch": int(sc["strategy"]["global_batch_size"]),
                      "seq_len": int(sc["strategy"]["seq_len"]), "objective": "tokens_per_s", "top": 25, "restrict": ""}

with st.form("search.form"):
    c = st.columns([2, 2, 2, 3, 1])
    gpus = c[0].text_input("GPU counts", help="64, or 64,128, or 64..512 (doubling).", key=WIDGETS["gpus"],
                           **_default("gpus", value=defaults["gpus"]))
    slots = {"search.gpus": c[0].empty()}  # an input's error goes right under it (_searched)
    # float widgets without min/max: "1e3" reads as 1000, and a value out of range is said under
    # its field (ui/search_inputs.py parse_count) instead of the browser refusing it silently
    nums = {}
    for col, key in zip((c[1], c[2], c[4]), NUMBERS):
        nums[key] = col.number_input(INPUT_LABELS[key], step=1.0, format="%.15g", key=WIDGETS[key], help=INPUT_HELP[key],
                                      **_default(key, value=float(defaults[key])))
        slots[f"search.{key}"] = col.empty()
    # the Top column is too narrow for a sentence (it wrapped one letter per line): its error
    # goes under the whole row
    slots["search.top"] = st.empty()
    objs = list(OBJECTIVES)
    obj = c[3].selectbox("Objective", objs, format_func=lambda k: OBJECTIVES[k][1], key=WIDGETS["objective"],
                         **_default("objective", index=objs.index(defaults["objective"])))
    restrict = st.text_area("Pin or restrict dimensions (one per line)", height=120, key=WIDGETS["restrict"],
                            help=f"e.g. tp=4,8 or pp=1,2,4 or recompute=none. Dimensions: {', '.join(DIMS)}.",
                            **_default("restrict", value=defaults["restrict"]))
    slots["search.restrict"] = st.empty()
    go = st.form_submit_button("Search", type="primary", icon=":material/search:")
bad_numbers = []
if go:   # every input's problem at once, each under its field (the GPU counts and pins were said only once the numbers were right)
    for key, value in nums.items():
        try:
            nums[key] = parse_count(key, value)
        except ConfigError as e:
            bad_numbers += e.issues
    bad_numbers += _text_issues(gpus, restrict)
    _said_under(slots, bad_numbers)
if go and not bad_numbers:
    inputs = {"gpus": gpus, **nums, "objective": obj, "restrict": restrict}
    inputs = {k: inputs[k] for k in ("gpus", "global_batch", "seq_len", "objective", "top", "restrict")}
    st.session_state["search.inputs"] = inputs
    st.session_state.pop("search.cancelled", None)
    tok = encode_inputs(inputs)
    st.session_state["search.token"] = tok
    st.query_params[LINK_PARAM] = tok
    st.rerun()  # the sidebar's share link (drawn before this form) then carries the new search


def _searched(sc: dict, inputs: dict, slots: dict) -> tuple[dict, str] | None:
    """The search's result (JSON) and its ``search_id``, or None once a message says why there is
    none (bad inputs, cancelled, failed). The search runs in a worker process (ui/heavy.py ``run_search``)."""
    issues = _text_issues(inputs["gpus"], inputs["restrict"])  # under the field they name, before any worker starts
    _said_under(slots, issues)
    if issues:
        return None
    base, split_dropped = search_base(sc["strategy"])
    if split_dropped:
        st.caption("The scenario's explicit layer split is not kept: the search tries the even split and "
                   "Megatron's uneven first/last splits for every pipeline depth.")
    payload = search_payload(dumps(sc["model"]), dumps(sc["system"]), dumps(base), json.dumps(inputs, sort_keys=True))
    if cached_result(payload) is None and st.session_state.get("search.cancelled") == payload:
        st.warning("Search cancelled.")
        st.button("Run it after all", key="search.resume", on_click=lambda: st.session_state.pop("search.cancelled", None),
                  icon=":material/play_arrow:")
        return None
    box = st.empty()
    with box.container():
        st.button("Cancel", key="search.cancel", on_click=lambda: st.session_state.update({"search.cancelled": payload}),
                  icon=":material/stop:", help="Stops the running search (its worker process is killed).")
        bar = st.progress(0.0, text="searching in a worker process…")
    seen = [0, 1]

    def progress(done: int, total: int, elapsed: float) -> None:  # each update passes through Streamlit: any input stops the run
        seen[:] = [done, total]
        share = min(done / max(total, 1), 1.0)   # of the search's work (memory checks and timing), not of its candidates
        bar.progress(share, text=f"searching… {share:.0%} · {elapsed:.0f} s")

    out = cached_search(payload, lambda p: run_search(p, lambda elapsed: progress(*seen, elapsed), progress))
    box.empty()
    if out["ok"] and not out.get("partial") and out["result"]["candidates"]:   # no "done" bar above a failure or an empty result
        st.progress(1.0, text="done")
    if not out["ok"]:
        space = [m for f, m in out["issues"] if f == "space"]   # pins that leave no layout: said under the pins
        for msg in space:
            slots["search.restrict"].error(md(sentence_start(msg), 600), icon="⚠️")
        others = [i for i in out["issues"] if i[0] != "space"]
        if any(str(f).startswith(("model", "system", "strategy")) for f, _ in others):
            issues_box(others, "The search could not run")   # the scenario's own fields: links to their pages
        elif others or not space:   # the search's time limit, a busy server, a worker that died: nothing to fix on a page
            st.error(f"**The search could not run:**  \n{issue_lines(others)}", icon="⚠️")
        return None
    if out.get("partial"):
        res = out["result"]
        st.warning(f"{md(sentence_start(out['partial']))}. Shown: the best of the {res['evaluated']:,} candidates "
                   "timed until then — not proven the best of the space, and without the rejections.")
    return out["result"], search_id(payload)


def _budget() -> float:
    """The session's token budget [billion tokens] (the Estimate page's, kept in the share link):
    editable here too, outside the form, so a change re-draws the table without searching again."""
    st.session_state.setdefault("search.budget_b", state.budget())
    col = st.columns([1, 3])[0]
    value = col.number_input("Token budget [billion tokens]", step=100.0, format="%g", key="search.budget_b",
                             on_change=state.keep_budget, args=("search.budget_b",),
                             help="Every candidate shows the days and the cost to train it; the same budget as the "
                                  "Estimate page's, kept in the share link.")
    bad = budget_problem(value)
    if bad:   # the days and cost shown stay those of the session's budget, said so
        col.error(f"{bad[:-1]}; the table shows the last one in range, {state.budget():g} billion.", icon="⚠️")
        return state.budget()
    return float(value)


def _results(sc: dict, res: dict, sid: str, top: int, counts: int = 1) -> None:
    """The ranked grid (at most ``top`` rows), the Pareto chart, "use this layout" and the
    rejections; the widgets that pick a layout are keyed by the search (``search_id``: a new one
    starts with nothing picked)."""
    cands = res["candidates"]
    st.caption(f"{res['space_size']:,} candidates in the space · {res['memory_checked']:,} memory checks (a layout's overlap-flag variants share one) · {res['evaluated']:,} timed · "
               f"{res['shown']:,} shown · {res['seconds']:.1f} s")
    if not cands:  # no table, no chart: the reason, the rejections and the fit changes
        st.warning(md(empty_reason(res), 1200))
        _rejections(res, expanded=True)
        st.subheader("Smallest changes to make the current scenario fit")
        fit_list(state.scenario_json())
        return
    if len(res["ties"]) > 1:
        st.info(tie_banner(len(res["ties"]), res["objective"], top))
    _what_if_box(res)
    tokens = _budget() * 1e9
    cands = with_budget(cands, tokens)
    res = {**res, "candidates": cands, "pareto": with_budget(res["pareto"], tokens)}

    df = candidates_frame(cands, res["ties"])
    grid_pick = chart_pick = None
    try:
        from st_aggrid import AgGrid

        grid = AgGrid(df, gridOptions=grid_options(df, res["objective"]), height=grid_height(list(df["layout"])), theme="streamlit",
                      update_on=["selectionChanged"], key=f"search.grid.{sid}", show_toolbar=False)
        sel = grid.selected_rows
        if isinstance(sel, pd.DataFrame) and not sel.empty:
            grid_pick = int(sel.iloc[0]["rank"]) - 1
    except Exception:  # noqa: BLE001 — the component failing must not take the page down
        st.dataframe(df, hide_index=True, width="stretch")

    a, b = st.columns(2)
    a.download_button("Ranked candidates (CSV)", results_csv(cands, res["ties"]), file_name="simengine-search.csv",
                      mime="text/csv", on_click="ignore", icon=":material/download:", key="dl.search.csv", width="stretch")
    b.download_button("Whole result (JSON)", json.dumps(res, indent=1), file_name="simengine-search.json",
                      mime="application/json", on_click="ignore", icon=":material/download:", key="dl.search.json",
                      width="stretch", help="The object `simengine search --json` prints (candidates with their "
                      "strategy, estimate and band, Pareto front, rejections by reason), without its fit changes.")
    pts, items = points_frame(cands, res["pareto"])
    st.subheader("Pareto front: throughput vs cost vs memory headroom")
    front = pts[pts["pareto"]]
    shown = front if not front.empty else pts
    ev = st.altair_chart(pareto_chart(shown), on_select="rerun", key=f"search.chart.{sid}", width="stretch")
    st.caption(pareto_caption(shown, counts))
    sel_pts = (ev.get("selection", {}).get("pick") if isinstance(ev, dict) else None) or []
    if sel_pts and isinstance(sel_pts[0], dict) and "id" in sel_pts[0]:
        chart_pick = int(sel_pts[0]["id"]) - 1
    picked = _latest_pick(sid, grid_pick, chart_pick)

    labels = item_labels(items, len(cands))
    if labels:
        choice = st.selectbox("Layout", range(len(items)), index=picked if picked is not None and picked < len(items) else 0,
                              format_func=lambda i: labels[i], key=f"search.pick.{sid}.{picked}")
        if st.button("Use this layout", type="primary", key="search.use", icon=":material/input:"):
            c = items[choice]
            issues = state.load_section("system", dict(sc["system"], num_gpus=c["gpus"]), "search")
            issues += state.load_section("strategy", dict(c["strategy"], name=f"search: {c['label']}"[:120]), "search")
            if issues:
                issues_box(issues, "Could not load the layout")
            else:
                _say_batch_change(sc["strategy"], c["strategy"])
                st.switch_page("pages/strategy.py", query_params=state.page_address())

    _rejections(res, expanded=False)
    st.subheader("Smallest changes to make the current scenario fit")
    fit_list(state.scenario_json())


def _say_batch_change(before: dict, after: dict) -> None:
    """A note on the Strategy page when the loaded layout brings the search's own global batch or
    sequence length (the scenario's were replaced without a word)."""
    was, now = (before["global_batch_size"], before["seq_len"]), (after["global_batch_size"], after["seq_len"])
    if was != now:
        state.notify("info", f"The layout came with the search's global batch and sequence length, {now[0]:,} × {now[1]:,} "
                             f"tokens (the scenario had {was[0]:,} × {was[1]:,}).")


def _latest_pick(sid: str, grid: int | None, chart: int | None) -> int | None:
    """The layout of the latest click in the table or on the chart (``latest_pick``), per search."""
    st.session_state["search.picks"], picked = latest_pick(st.session_state.get("search.picks"), sid, grid, chart)
    return picked


def _what_if_box(res: dict) -> None:
    """The note over what-if rows (a schedule the stack does not ship) and the button that searches
    the stack's own schedules only."""
    if not res.get("what_if"):
        return
    st.info(md(what_if_text(res), 1200))
    st.button(f"Search only the schedules this stack runs ({', '.join(res['shipped_schedules'])})", key="search.shipped",
              on_click=_only_shipped, args=(res["shipped_schedules"],), icon=":material/filter_alt:")


def _only_shipped(schedules: list[str]) -> None:
    """Search again with the schedule restricted to the stack's own (the form shows the new
    restriction), keeping the share link in step."""
    new = restricted_to_schedules(st.session_state["search.inputs"], schedules)
    st.session_state["search.inputs"] = new
    _show_inputs(new)
    st.session_state["search.token"] = tok = encode_inputs(new)
    st.query_params[LINK_PARAM] = tok


def _rejections(res: dict, expanded: bool) -> None:
    """Each reason whole, with its count and one example (a table cut the reasons at 1,600 px, so
    two "bound:" rows read alike)."""
    with st.expander("Rejected candidates and why", expanded=expanded):
        eg = res.get("rejected_examples", {})
        lines = []
        for k, v in res["rejected"].items():
            ex = eg.get(k, {}).get("reason", "")
            lines.append(f"- **{v:,}** · {md(k, 500)}" + (f"  \n  e.g. {md(ex, 500)}" if ex and ex != k else ""))
        st.markdown("\n".join(lines))


# Functions, not one script: a worker process started from this page re-imports it bare (no
# session, no inputs; ui/worker.py), and each step returns where the page would stop.
if bad_numbers:
    st.warning("Not searched: correct the inputs marked above.")
elif not inputs:
    st.info("Set the inputs and press **Search**.")
else:
    searched = _searched(sc, inputs, slots)
    if searched is not None:
        _results(sc, *searched, top=inputs["top"], counts=len(set(parse_counts(inputs["gpus"]))))
