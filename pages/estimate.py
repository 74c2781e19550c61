"""Estimate: headline figures, time breakdown, MFU-loss waterfall, memory per stage, cost and
token budget, pinned-scenario comparison, downloads. Numbers come from the engine's Report."""

import pandas as pd
import streamlit as st

from ui import fold, state
from ui.chart_cache import draw, estimate_memory_spec, estimate_specs
from ui.engine import estimate_report
from ui.layout import boot, issues_box
from ui.compare import compare_section
from ui.pins import budget_problem
from ui.report_io import budget, report_csv, report_json
from ui.labels import (HFU_HELP, MFU_HELP, PEAK_LABEL, STAGE_MEMORY_COLUMNS, allocated_limit_gib, bubble_others, headline_limit_gib, memory_help, mfu_causal_note,
                       stage_memory_fields, trained_note)
from ui.text import md
from ui.units import fmt_count, fmt_flops, fmt_gib, fmt_num, fmt_pct, fmt_time, fmt_usd


def memory_by_stage(r: dict, chart: dict) -> None:
    # the table a little wider than the chart: its short headers read whole at 1,280 px
    a, b = st.columns([1, 1.25], gap="large")
    with a:
        draw(chart)
    with b:
        fields = stage_memory_fields(r["memory_by_stage"])
        mdf = pd.DataFrame(r["memory_by_stage"])[fields].rename(columns={f: STAGE_MEMORY_COLUMNS[f][0] for f in fields})
        # px per column: the six (with "on host") fit the ~400 px table of a 1,280 px window
        px = {"stage": 46, "peak_gib": 72, "reserved_gib": 66, "activations_gib": 78, "inflight_microbatches": 62}
        config = {head: st.column_config.NumberColumn(format="%.2f" if f.endswith("_gib") else None, help=tip,
                                                      width=px.get(f, 62))
                  for f, (head, tip) in STAGE_MEMORY_COLUMNS.items() if f in fields}
        st.dataframe(mdf, hide_index=True, width="stretch", height=min(420, 38 + 35 * len(mdf)), column_config=config)
        st.caption("GiB per GPU. Every memory category per stage is in the CSV download.")


boot("Estimate")
st.title("Estimate")

issues = state.scenario_issues()
if issues:
    issues_box(issues)
    st.stop()
res = estimate_report(state.scenario_json())
if not res["ok"]:
    issues_box(res["issues"], "The engine could not estimate this scenario")
    st.stop()
r = res["report"]
sc = state.scenario_dict()

# ---- headline ------------------------------------------------------------------------------
# a wrapping row: six side by side where they fit, on two lines in a narrower window (in six fixed
# columns a 1,280 px window cut "53.5 / 79.1 GiB" and "1,424.7 MWh" short)
row = st.container(horizontal=True, gap="medium")
row.metric("Step time", fmt_time(r["step_time_s"]), help="One optimizer step, slowest pipeline rank.")
row.metric("Throughput", f"{fmt_count(r['tokens_per_s'])} tok/s", help=f"{fmt_num(r['tokens_per_s_per_gpu'], ',.0f')} tokens/s per GPU.")
row.metric("MFU", fmt_pct(r["mfu"]), help=MFU_HELP + mfu_causal_note(r))
row.metric("HFU", fmt_pct(r["hfu"]), help=HFU_HELP)
# the allocated peak that still fits (not the capacity): the engine's, of the stage the headline shows
limit = headline_limit_gib(r) or allocated_limit_gib(sc["strategy"], sc["system"])
row.metric(PEAK_LABEL, f"{fmt_num(r['peak_memory_gib'])} / {fmt_num(limit)} GiB",
           "fits" if r["fits"] else "does not fit", delta_color="normal" if r["fits"] else "inverse", delta_arrow="off",
           help=memory_help(r, limit))
row.metric("Cost / 1M tokens", fmt_usd(r["cost_per_million_tokens_usd"]), help=f"{fmt_usd(r['cost_per_step_usd'])} per step.")
band = r.get("uncertainty") or {}
fmt_band = {"step_time_s": fmt_time, "tokens_per_s": lambda v: f"{fmt_count(v)} tok/s", "mfu": fmt_pct, "peak_memory_gib": fmt_gib}
names = {"step_time_s": "step time", "tokens_per_s": "throughput", "mfu": "MFU", "peak_memory_gib": "allocated peak memory"}
parts = [f"{names[k]} {fmt_band[k](lo)} – {fmt_band[k](hi)}" for k, (lo, hi) in band.items() if k in fmt_band]
if parts:
    st.caption("Uncertainty range from each cost component's relative error: " + " · ".join(parts))
share = r["reserved_memory_gib"] / r["memory_capacity_gib"] if r["memory_capacity_gib"] else float("nan")
outside = sc["system"]["gpu"].get("non_torch_gib", 0.0)
mem_text = (f"{fmt_num(r['peak_memory_gib'])} GiB allocated peak, {fmt_num(r['reserved_memory_gib'])} GiB reserved "
            f"({fmt_pct(share)} of {fmt_num(r['memory_capacity_gib'])} GiB) + {fmt_num(outside)} GiB outside PyTorch, "
            "on the fullest stage")
host = max((m.get("host_offload_gib", 0.0) for m in r["memory_by_stage"]), default=0.0)
if host > 0:
    mem_text += f"; {fmt_num(host)} GiB of activations offloaded to host memory per GPU"
host_full = next((w for w in r.get("warnings", []) if w.startswith("does not fit in host memory")), None)
if r["fits"]:
    st.success(f"**Fits in memory:** {mem_text}.", icon="✅")
elif host_full and not any(w.startswith("does not fit:") for w in r.get("warnings", [])):   # the host alone
    st.error(f"**Does not fit in host memory:** {md(host_full.removeprefix('does not fit in host memory: '), 300)}. "
             "Or raise system.gpu.host_memory_gib to what your nodes have.", icon="⛔")
else:
    # with offload Megatron-Core refuses recompute (config/scenario.py _offload_checks): offload more instead
    knob = "more offloaded layers (within host memory)" if host > 0 else "recompute"
    also = f" The host does not fit either: {md(host_full.removeprefix('does not fit in host memory: '), 300)}." if host_full else ""
    st.error(f"**Does not fit:** {mem_text}. Try more tp/pp, {knob}, a higher ZeRO stage or a smaller "
             f"micro-batch.{also}", icon="⛔")
    if all(state.origin(s).startswith("measured run ") for s in ("model", "system", "strategy")):
        # a run opened from the Validation page, unedited: it ran, so the verdict is the model's error
        st.info("This is a measured run as it was launched: it ran on real GPUs, so this verdict is our memory "
                "model's error on it, not the run's. The known causes (settings the source does not state, "
                "buffers we do not model) are in the README under \"Published runs\"; its time still validates.")
for w in r.get("warnings", []):
    if "does not fit" not in w:
        st.warning(md(w, 600))
for n in r.get("notes", []):   # how a number is counted (an FP8 / NVFP4 MFU past 100 %): not a problem
    st.info(md(n, 600), icon=":material/info:")
st.caption(f"{r['num_gpus']:,} GPUs · dp {r['dp']} · {r['num_microbatches']} micro-batches/step · "
           f"{fmt_count(r['tokens_per_step'])} tokens/step · {fmt_count(r['num_parameters'])} parameters "
           f"({fmt_count(r['num_active_parameters'])} active{trained_note(r)}) · {fmt_flops(r['model_flops_per_step'])} model FLOPs/step · "
           f"bubble {fmt_pct(r['bubble_fraction'])} on the critical rank{bubble_others(r)} · "
           f"{fmt_num(r.get('gpu_us_per_launch', 0.0), ',.0f')} µs GPU work per kernel launch")

specs = estimate_specs(state.scenario_json(), r)

# ---- time ----------------------------------------------------------------------------------
a, b = st.columns(2, gap="large")
with a:
    draw(specs["breakdown"])
with b:
    draw(specs["waterfall"])

# ---- memory --------------------------------------------------------------------------------
# Per stage on demand unless the step does not fit (then it shows which stage overflows): a
# folded box draws nothing (ui/fold.py); the headline and the fits line above sum it up.
place = "fits" if r["fits"] else "oom"
box, is_open = fold.group("Memory per pipeline stage", f"est.memory.{place}",
                          st.session_state.setdefault(f"est.fold.{place}", {}), not r["fits"])
if is_open:
    with box:
        memory_by_stage(r, estimate_memory_spec(state.scenario_json(), r))

# ---- cost and budget -------------------------------------------------------------------------
st.subheader("Cost and training budget")
a, b = st.columns([1, 3], gap="large")
with a:
    tokens_b = st.number_input("Token budget [billion tokens]", value=state.budget(),
                               step=100.0, format="%g", key="budget.tokens", on_change=state.keep_budget, args=("budget.tokens",),
                               help="Tokens to train on; time and cost follow from the reported throughput. "
                                    "Kept when you change page, and in the share link.")
    bad_budget = budget_problem(tokens_b)
    if bad_budget:
        st.error(bad_budget, icon="⚠️")
with b:
    if bad_budget:   # no figures for a budget the field does not show
        st.caption("Time, steps, GPU-hours, cost and energy to train appear once the budget is in range.")
    else:
        bud = budget(r, tokens_b * 1e9)
        row = st.container(horizontal=True, gap="medium")
        row.metric("Time to train", fmt_time(bud["seconds"]))
        row.metric("Optimizer steps", fmt_count(bud["steps"]))
        row.metric("GPU-hours", fmt_count(bud["gpu_hours"]))
        row.metric("Cost", fmt_usd(bud["cost_usd"]), help=f"At {sc['system']['gpu']['price_per_hour']} USD per GPU-hour.")
        row.metric("Energy at TDP", f"{fmt_num(bud['energy_mwh'])} MWh")

# ---- comparison ----------------------------------------------------------------------------
compare_section(sc, r)

# ---- downloads -----------------------------------------------------------------------------
st.subheader("Downloads")
a, b, _ = st.columns([1, 1, 3])
a.download_button("Report (JSON)", report_json(r, sc, state.share_url()), file_name="simengine-report.json",
                  mime="application/json", on_click="ignore", icon=":material/download:", key="dl.report.json")
b.download_button("Report (CSV)", report_csv(r), file_name="simengine-report.csv", mime="text/csv",
                  on_click="ignore", icon=":material/download:", key="dl.report.csv")
