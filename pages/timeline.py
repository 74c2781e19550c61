"""Timeline: the simulated pipeline step as a Gantt chart (rank × stream), bubble and exposed
communication per rank, memory over time, schedule switcher and Chrome-trace download."""

import typing

import pandas as pd
import streamlit as st

from simengine.api import chunks_per_rank
from simengine.config import StrategySpec
from ui import fold, state
from ui.chart_cache import draw, gantt_view, memory_view
from ui.config_io import cross_issues, validate_section
from ui.engine import MAX_TRACE_SPANS, chrome_trace, estimate_report, timeline
from ui.labels import LEANER_SCHEDULE, SIM_PEAK_LABEL, limit_caption, rank_limits_gib, reserved_gib, stage_pools_gib
from ui.layout import boot, issues_box
from ui.timeline_data import (MAX_EXACT_SPANS, MAX_GANTT_RANKS, exposed_words, per_rank_view, representative_ranks,
                              usable_window)
from ui.text import issues_md, md
from ui.units import fmt_gib, fmt_pct, fmt_time, fmt_time_beside

boot("Timeline")
st.title("Timeline")

VPP_KEY = "tl.vpp_memory"
SCHEDULES = list(typing.get_args(StrategySpec.model_fields["schedule"].annotation))


def _switch_schedule() -> None:
    """Apply the chosen schedule to the scenario when the result is consistent. vpp is
    remembered per schedule (in this session, for this strategy): leaving interleaved keeps its
    vpp, coming back restores it, and the page says what changed."""
    new = st.session_state.get("tl.schedule")
    strat = state.section_dict("strategy")
    old, old_vpp = strat["schedule"], strat["vpp"]
    if not new or new == old:
        return
    memory = vpp_memory()
    memory[old] = old_vpp
    strat["schedule"] = new
    strat["vpp"] = memory.get(new) or ((old_vpp if old_vpp > 1 else 2) if new == "interleaved" else 1)
    canon, issues = validate_section("strategy", strat)
    if canon is not None:
        issues = cross_issues({**state.scenario_dict(), "strategy": canon})
    if issues:
        state.notify("error", f"Cannot switch to {md(new)} with this scenario:  \n" + issues_md(issues, 4))
        return
    state.set_section("strategy", canon, "edited")
    state.sync_link()
    st.session_state[VPP_KEY] = {"gen": state.generation("strategy"), "vpp": memory}
    if canon["vpp"] != old_vpp:
        kept = f" {md(old)}'s vpp {old_vpp} is kept: switching back restores it." if old_vpp > 1 else ""
        n = chunks_per_rank(new, canon["vpp"])  # the schedule registry's count (dualpipe/dualpipev: 2)
        state.notify("info", f"Schedule {md(old)} → {md(new)}: vpp {old_vpp} → {canon['vpp']} "
                             f"({md(new)} runs {n} chunk{'' if n == 1 else 's'} per rank).{kept}")


def per_rank_table(ranks: pd.DataFrame) -> None:
    view = per_rank_view(ranks)
    number_cols = [k for k in view.columns if k != "rank" and pd.api.types.is_numeric_dtype(view[k])]
    st.dataframe(view, hide_index=True, width="stretch", height=min(400, 38 + 35 * len(view)), column_config={
        **{k: st.column_config.NumberColumn(format="%.2f") for k in number_cols},
        "exposed comm [ms]": st.column_config.NumberColumn(format="%.2f", help="Communication nothing else covers."),
        "hidden comm [ms]": st.column_config.NumberColumn(format="%.2f", help="Communication overlapped by compute."),
        # a text column: as a number column its blank cells read "None"
        "critical": st.column_config.TextColumn(help="yes = the critical rank (the Estimate page's breakdown)")})


def vpp_memory() -> dict[str, int]:
    """vpp per schedule remembered for the current strategy (forgotten when it is replaced)."""
    saved = st.session_state.get(VPP_KEY) or {}
    return dict(saved.get("vpp", {})) if saved.get("gen") == state.generation("strategy") else {}


strategy = state.section_dict("strategy")
st.session_state["tl.schedule"] = strategy["schedule"]
# the whole width: beside the caption, the seven schedules ran past a 1,280 px window ("dua…")
st.segmented_control("Pipeline schedule (strategy.schedule)", SCHEDULES, key="tl.schedule",
                     on_change=_switch_schedule, required=True,
                     help="Switching changes the scenario (and its link); interleaved uses vpp chunks per rank.")
# dualpipe / dualpipev hold two chunks per rank at vpp 1 (the tooltips' chunk 0 and 1): said beside vpp
chunks = chunks_per_rank(strategy["schedule"], strategy["vpp"])
chunk_note = f" ({md(strategy['schedule'])} runs {chunks} chunks per rank)" if chunks != strategy["vpp"] else ""
st.caption(f"pp = {strategy['pp']} stage{'' if strategy['pp'] == 1 else 's'} · vpp = {strategy['vpp']}{chunk_note} · the schedule orders forward (F), "
           "backward (B), weight-gradient (W) and recompute (R) work per micro-batch on each rank.")

issues = state.scenario_issues()
if issues:
    issues_box(issues)
    st.stop()
with st.spinner("Simulating the step…"):
    tl = timeline(state.scenario_json())
if not tl["ok"]:
    issues_box(tl["issues"], "The timeline could not be simulated")
    st.stop()

spans, ranks, step = tl["spans"], tl["ranks"], tl["step_time_s"]
crit = ranks[ranks["critical"]].iloc[0] if len(ranks) and "critical" in ranks and ranks["critical"].any() else None
# the rank in a caption, so the five labels stay short enough to show whole at 1,400 px
st.caption(f"Bubble and communication on the critical rank ({int(crit['rank']) if crit is not None else '—'}): the rank "
           "with the least bubble, whose breakdown the Estimate page shows.")
# a wrapping row (as the Estimate page's headline): in five equal columns a 1,280 px window cut
# "Allocated peak (worst rank)" to "Allocated peak (wors…"
row = st.container(horizontal=True, gap="medium")
row.metric("Step time", fmt_time(step))
row.metric("Bubble", fmt_pct(crit["bubble_fraction"]) if crit is not None else "—",
           help="Step time − compute − exposed communication on the critical rank (the one with the least "
                "bubble: the Estimate page's breakdown); the mean over ranks is "
                + (fmt_pct(ranks["bubble_fraction"].mean()) if len(ranks) else "—") + ".")
row.metric("Exposed comm", fmt_time(crit["exposed_comm_s"]) if crit is not None else "—",
           help="Communication time nothing else covers (sim/metrics.py), as in the Estimate page's breakdown.")
row.metric("Hidden comm", fmt_time_beside(crit["hidden_comm_s"], crit["exposed_comm_s"]) if crit is not None else "—",
           help="Communication overlapped by compute kernels.")
peak = float(ranks["peak_gib"].max()) if len(ranks) and ranks["peak_gib"].notna().any() else None
row.metric(SIM_PEAK_LABEL, "—" if peak is None else fmt_gib(peak),
           help="Simulated live bytes over the step (weights, gradients, optimizer state, held activations); "
                "the caching allocator reserves more (strategy.allocator_overhead). The Estimate page's headline "
                "is the same kind of figure, from the closed-form per-stage model.")
system = state.section_dict("system")
# what other CUDA streams' caches hold beside each stage's peak (FSDP2's all-gather buffers): the estimate's
est = estimate_report(state.scenario_json())
pools = stage_pools_gib(est["report"] if est.get("ok") else None)

# per rank, the most it may allocate and still fit (the engine's fit rule with its stage's pools, ui/labels.py)
limits = rank_limits_gib(ranks["rank"], strategy, system, pools) if len(ranks) else {}
over = [] if peak is None else [(float(p) - limits[int(r)], int(r))
                                for r, p in zip(ranks["rank"], ranks["peak_gib"]) if pd.notna(p)]
if over and max(over)[0] > 0:
    worst = max(over)[1]
    worst_peak = float(ranks.loc[ranks["rank"] == worst, "peak_gib"].iloc[0])
    need = reserved_gib(worst_peak, float(strategy.get("allocator_overhead", 0.0)), pools.get(worst, 0.0))
    st.error(f"**Does not fit:** rank {worst} peaks at {fmt_gib(worst_peak)} allocated (≈ {fmt_gib(need)} reserved + "
             f"{fmt_gib(system['gpu'].get('non_torch_gib', 0.0))} outside PyTorch) on "
             f"{fmt_gib(system['gpu']['memory_gib'])} GPUs. Try more tp/pp, recompute, a higher ZeRO stage"
             f"{LEANER_SCHEDULE.get(str(strategy.get('schedule')), ' or a smaller micro-batch')}.", icon="⛔")
if strategy.get("cpu_offload_layers"):   # what the GPU no longer holds sits in host memory: the Estimate page's verdict
    host_full = next((w for w in est["report"]["warnings"] if w.startswith("does not fit in host memory")), None) \
        if est.get("ok") else None
    if host_full:
        st.error(f"**Does not fit in host memory:** {md(host_full.removeprefix('does not fit in host memory: '), 300)}.",
                 icon="⛔")

# the estimate's other cautions, as the Estimate page shows them: a schedule picked above that the
# stack does not ship (a what-if), a layer split Megatron refuses… (the switcher took users there silently)
for w in (est["report"]["warnings"] if est.get("ok") else []):
    if "does not fit" not in w:
        st.warning(md(w, 600))

# ---- Gantt ---------------------------------------------------------------------------------
st.subheader("Pipeline")


@st.fragment
def gantt_section(scenario_text: str, spans, total_ms: float, shown_ranks, pre=None, exposed: str = "") -> None:
    """Window slider, labels toggle and the chart: a fragment, so moving the window redraws only
    the chart (not the whole page). ``exposed``: the critical rank's exposed communication in words."""
    # the slider takes what the toggle leaves: in columns [4, 1] a 1,280 px window cut its label to "Micro-batch l…"
    with st.container(horizontal=True, vertical_alignment="bottom", gap="medium"):
        window = st.slider("Time window [ms]", 0.0, float(round(total_ms, 3)), (0.0, float(round(total_ms, 3))),
                           key=f"tl.window.{hash(scenario_text)}", help="Narrow the window to see individual spans of a "
                           "large timeline; the chart also zooms with the mouse wheel and pans by dragging.")
        labels = st.toggle("Micro-batch labels", value=False, key="tl.labels",
                           help="Writes each span's micro-batch on it: drawn when the window holds individual "
                                f"spans (at most {MAX_EXACT_SPANS:,}), not in the binned view of a large timeline.")
    gantt = gantt_view(scenario_text, usable_window(float(window[0]), float(window[1]), total_ms),
                       tuple(shown_ranks) if shown_ranks is not None else None, bool(labels), spans, pre)
    if gantt["aggregated"]:
        st.caption(f"{len(spans):,} spans in the step; more than {MAX_EXACT_SPANS:,} in this window, so each row shows "
                   "time bins, each bar split by phase: a phase's height is its share of the bar's time, the faint grey "
                   "rest idle (hover for the shares). Short exposed collectives between kernels keep their share"
                   + (f": on the critical rank, exposed communication is {exposed}" if exposed else "")
                   + ". Communication on a side stream (comm, pp, dp) is hidden while compute runs beside it. "
                   "Narrow the window for individual spans" + (" and their micro-batch labels." if labels else "."))
    else:
        st.caption(f"{gantt['shown']:,} span{'' if gantt['shown'] == 1 else 's'} shown. Colour = phase; hover for micro-batch, chunk and times. "
                   "Communication on the compute stream is exposed; on a side stream (comm, pp, dp) it is hidden "
                   "while compute runs beside it (the exposed/hidden figures above).")
    draw(gantt["spec"])


scenario_text = state.scenario_json()  # captured now: the trace callable runs later, outside this script run
if len(spans) > MAX_TRACE_SPANS:
    st.download_button("Chrome trace", b"", disabled=True, key="dl.trace", icon=":material/download:",
                       help=f"Not offered: {len(spans):,} spans (more than {MAX_TRACE_SPANS:,}).")
    st.caption(f"No Chrome trace for this step: it has {len(spans):,} spans, more than the {MAX_TRACE_SPANS:,} a trace "
               "file is offered for (it would be hundreds of MB of JSON). Fewer micro-batches or stages make one.")
else:
    st.download_button("Chrome trace", lambda: chrome_trace(scenario_text, "simengine"),
                       file_name="simengine-trace.json", mime="application/json", icon=":material/download:",
                       on_click="ignore", key="dl.trace", help="Open in Perfetto (ui.perfetto.dev) or chrome://tracing.")
n_ranks = len(ranks)
shown_ranks = None
if n_ranks > MAX_GANTT_RANKS:
    default = representative_ranks(ranks, n_ranks)
    shown_ranks = st.multiselect(
        f"Ranks drawn (at most {MAX_GANTT_RANKS} of {n_ranks:,})", list(range(n_ranks)), default=default,
        max_selections=MAX_GANTT_RANKS, key=f"tl.ranks.{hash(scenario_text)}",
        help="A deep pipeline is drawn for a few representative ranks; add or remove ranks here.") or default
    st.caption(f"{n_ranks:,} pipeline ranks: the chart and the memory curves show {len(shown_ranks)} of them (by default "
               "the first and last two, the ranks with the largest bubble, and evenly spaced ranks in between). "
               "The per-rank table below lists every rank.")
gantt_section(scenario_text, spans, max(step * 1e3, 1e-6), shown_ranks, tl.get("gantt_full"),
              exposed_words(crit, step) if crit is not None else "")

# ---- per rank ------------------------------------------------------------------------------
# Every rank's figures on demand (the headline above gives the critical rank's; a table costs
# the browser about as much as a small chart, benchmarks/bench_studio_profile.py); open by
# itself when the step does not fit (it shows which ranks overflow). ui/fold.py draws nothing
# while folded; open or folded is remembered separately for the two cases.
oom = bool(over) and max(over)[0] > 0
place = "oom" if oom else "fits"
box, ranks_open = fold.group("Per rank: bubble, compute, exposed and hidden communication, peak memory",
                             f"tl.rankfold.{place}", st.session_state.setdefault(f"tl.fold.ranks.{place}", {}), oom)
if ranks_open:
    with box:
        per_rank_table(ranks)
# The memory curves open by themselves when the step does not fit (they show where it peaks);
# otherwise on demand: a folded box draws nothing (ui/fold.py), and the curves cost the browser
# about as much as the Gantt. Open or folded is remembered separately for the two cases.
box, is_open = fold.group("Memory over the step (allocated bytes per rank)", f"tl.memory.{'oom' if oom else 'fits'}",
                          st.session_state.setdefault(f"tl.fold.{'oom' if oom else 'fits'}", {}), oom)
if is_open:
    with box:
        shown = {r: v for r, v in limits.items() if shown_ranks is None or r in shown_ranks}
        mem_spec = memory_view(scenario_text, tuple(shown_ranks) if shown_ranks is not None else None,
                               tuple(sorted(shown.items())), tl["memory"], float(step))
        if mem_spec is not None:
            st.caption(limit_caption(shown, float(system["gpu"]["memory_gib"])))
            draw(mem_spec)
        else:
            st.caption("No memory-over-time series in this timeline.")
