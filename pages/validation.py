"""Validation: the simulator's error against the bundled measured runs (``simengine.api.validate``),
by source and metric, predicted vs measured, the runs that could not be expressed, and "load this
run" to open any measured run as the current scenario."""

import streamlit as st

from ui import state
from ui.config_io import validate_scenario
from ui.layout import boot, issue_lines
from ui.text import md
from ui.labels import MFU_HELP
from ui.units import fmt_sig
from ui.validation_chart import plottable, predicted_vs_measured_chart
from ui.validation_data import collect, sources
from ui.validation_frames import (BAND, merge, rows_frame, run_rows, run_scenarios, skipped_frame, unit_of,
                                  summary_frame)

ABOUT = (
    "**What the data are.** Runs measured on real clusters by other people, bundled with simengine "
    "(`simengine/validation/data/`, see its ATTRIBUTION.md): Megatron-LM runs on one node of 8 × NVIDIA B200 "
    "from the SimuMax project (Moore Threads, release v1.2, Apache-2.0; SimuMax's own predictions are shown as a "
    "peer baseline), and published runs read from Narayanan et al. 2021 (SC21), Korthikanti et al. 2022 (MLSys23), "
    "the NVIDIA/Megatron-LM README, the pytorch/torchtitan benchmarks and torchao's float8 README, the NVIDIA "
    "NeMo and Megatron-Bridge performance pages, the DeepSeek-V3 and Llama 3 technical reports and NVIDIA's dgxc-benchmarking recipes (MIT). Each run is expressed as a scenario from the settings its source states (guesses are "
    "listed as assumptions; a *weak* row needs a setting the source does not print) and estimated as is: no "
    "constant is fitted to any row. Error = (predicted − measured) / measured, in each source's own metric.")
NUM = st.column_config.NumberColumn(format="%.4g")

boot("Validation")
st.title("Validation")
st.markdown(ABOUT)
calibrated = st.toggle("Calibrated B200 variant", key="val.calibrated",
                       help="B200 rows with the measured B200 operator efficiencies and NCCL fits instead of the "
                            "preset's defaults (`simengine validate --calibrated`). Published sources are unchanged.")
with st.spinner("Estimating every measured run (the first time on this server takes up to a minute)…"):
    results, failures = collect(calibrated)
for src, field, message in failures:
    st.error(f"**{md(src)}** could not be validated:  \n" + issue_lines([(field, message)]), icon="⚠️")  # issue_lines escapes
data = merge(results)
rows = rows_frame(data["rows"])
if rows.empty:
    st.info("No measured run could be compared.")
    st.stop()
order = sources()
st.caption(f"{rows['run'].nunique():,} runs, {len(rows):,} metric rows, {len(data['skipped']):,} runs not expressible"
           + (" · B200 calibrated" if calibrated else ""))

# ---- by source and metric ------------------------------------------------------------------
st.subheader("Error by source and metric")
summary = summary_frame(data["summary"], rows, order)
st.dataframe(summary, hide_index=True, width="stretch", height=min(800, 38 + 35 * len(summary)), key="val.summary",
             column_config={
                 "unit": st.column_config.TextColumn("unit", width="medium"),   # "TFLOP/s/GPU" whole
                 "runs": st.column_config.NumberColumn("rows"),
                 "mape_pct": st.column_config.NumberColumn("MAPE", format="%.1f %%"),
                 "median_signed_pct": st.column_config.NumberColumn("median signed", format="%+.1f %%"),
                 "within_band": st.column_config.NumberColumn(f"within ±{BAND:.0%}"),
                 "worst_run": st.column_config.TextColumn("worst run", width="medium"),
                 "worst_error_pct": st.column_config.NumberColumn("worst error", format="%+.1f %%")})

# ---- predicted vs measured -----------------------------------------------------------------
st.subheader("Predicted vs measured")
shown = st.multiselect("Sources", list(order), default=list(order), key="val.sources")
view = rows[rows["source"].isin(shown)]
points = plottable(view)
st.altair_chart(predicted_vs_measured_chart(view, list(order)), width="stretch")
if len(points) < len(view):
    st.caption(f"{len(view) - len(points)} row(s) with a zero or non-finite value are not on the log-log chart.")
with st.expander(f"Every row ({len(view):,})"):
    st.dataframe(view, hide_index=True, width="stretch", key="val.rows", column_config={
        "unit": st.column_config.TextColumn("unit", width="medium"), "measured": NUM, "predicted": NUM, "error_pct": st.column_config.NumberColumn("error", format="%+.1f %%"),
        "peer_predicted": st.column_config.NumberColumn("SimuMax v1.2", format="%.4g")})

# ---- load a run ----------------------------------------------------------------------------
st.subheader("Open a measured run")
scenarios = run_scenarios([r for r in data["rows"] if r["source"] in shown] or data["rows"])
key = st.selectbox("Measured run", list(scenarios), key="val.run",
                   help="Its scenario as launched (with this page's B200 variant) becomes the current scenario; the "
                        "Estimate and Timeline pages show it and the share link reproduces it.")
mine = run_rows(data["rows"], key)
st.markdown("  \n".join(f"- {md(r['metric'])}: measured {fmt_sig(r['measured'])} {md(unit_of(r))}, predicted "
                        f"{fmt_sig(r['predicted'])} {md(unit_of(r))} ({r['error_pct']:+.1f} %)" + (" · weak" if r["weak"] else "")
                        + (f" · {md(r['convention'])}" if r.get("convention") else "")
                        for r in mine))
if any(r["metric"] in ("mfu", "hfu") and r.get("convention") for r in mine):
    # the Estimate page shows an MFU of the loaded run under the same name, counted its own way
    st.caption(f"MFU here is the source's own; the Estimate page's is ours. {md(MFU_HELP)}")
assumptions = sorted({a for r in mine for a in r.get("assumptions", [])})
if assumptions:
    st.caption("Assumptions: " + "; ".join(md(a) for a in assumptions))
if st.button("Load this run", key="val.load", type="primary", icon=":material/open_in_new:"):
    cfg, issues = validate_scenario(scenarios[key])
    if cfg is None:
        st.error("This run's scenario is not valid:  \n" + issue_lines(issues, 12), icon="⚠️")
    else:
        state.set_scenario(cfg, f"measured run {key}"[:120])
        state.notify("success", f"Opened the measured run {md(key, 160)} as the current scenario.")
        st.switch_page("pages/estimate.py", query_params=state.page_address())

# ---- not expressible -----------------------------------------------------------------------
skipped = skipped_frame(data["skipped"])
st.subheader(f"Runs that could not be expressed ({len(skipped):,})")
st.caption("Measured runs whose source leaves out a setting the simulator needs, or that the engine refused; "
           "they are not in the table or the chart.")
st.dataframe(skipped, hide_index=True, width="stretch", key="val.skipped")
