"""Calibration: upload measured GEMM / attention / grouped-GEMM sweeps and nccl-tests logs, see each
fit against its points, the coverage of the current scenario, then apply or save the system."""

import pandas as pd
import streamlit as st

from ui import calibration_charts as charts
from ui import calibration_log as cal_log
from ui import calibration_run as cal
from ui import state
from ui.layout import boot, page_link, show_notices
from ui.text import md

boot("Calibration")
st.title("Calibration")
st.caption("Measure your GPUs with `python -m simengine.measure` (or bring nccl-tests logs and GEMM sweeps), "
           "upload the files, check each fit against its points, then use the calibrated system in this scenario "
           "or save it by name. Every number keeps where it came from (file, sha256, rows used, fit error).")


def upload(label: str, key: str, types: list[str], many: bool = False):
    """A file uploader with the last calibration's messages about it right under it."""
    got = st.file_uploader(label, type=types, key=key, accept_multiple_files=many)
    said = cal.upload_errors(key, got)
    if said:
        st.error("  \n".join(f"- {md(m, 300)}" for m in said[:12]), icon="⚠️")
    return got


c1, c2 = st.columns(2)
with c1:
    gemm = upload("GEMM sweep CSV (m,n,k + efficiency / TFLOP/s / time; OpenXLA and SimuMax tables too)",
                  "cal.gemm", ["csv", "txt"])
    att = upload("Attention sweep CSV", "cal.attention", ["csv", "txt"])
with c2:
    nccl = upload("nccl-tests logs (several at once)", "cal.nccl", ["log", "txt", "out"], many=True)
    grp = upload("Grouped-GEMM sweep CSV (MoE)", "cal.grouped", ["csv", "txt"])
mem = upload("Memory-bandwidth sweep CSV (bytes + time_us, time_ms, time_ns or time_s)", "cal.memory", ["csv", "txt"])
st.button("Calibrate the scenario's system", key="cal.run", type="primary", on_click=cal.run,
          args=(gemm, nccl, att, grp, mem))

res = cal.result()
show_notices("cal")
if res and "error" in res:
    st.error(res["error"])
elif res:
    s = res["summary"]
    if not any((gemm, att, grp, mem, nccl)) and res.get("files"):   # the uploads are gone after another page; the result stays
        st.caption(f"This result is from {md(', '.join(res['files'][:6]), 300)}{' …' if len(res['files']) > 6 else ''}, uploaded "
                   "earlier; the upload boxes empty when you change page, so upload the files again to calibrate anew.")
    used = [f for f in s["collective_fits"] if f["used"]]
    m = st.columns(4)
    m[0].metric("GEMM points", f"{s['gemm_points']:,}", help=f"format: {s['gemm_format'] or '—'}")
    m[1].metric("Collective fits used", f"{len(used)} of {len(s['collective_fits'])}")
    m[2].metric("Attention shapes", f"{s['attention_rows']:,}")
    m[3].metric("Grouped-GEMM shapes", f"{s['grouped_gemm_rows']:,}")
    merged = cal.calibrated_system(res)   # the scenario's system now, with the calibration's fields set
    a, b, c = st.columns([2, 2, 3])
    a.button("Use in this scenario", key="cal.apply", on_click=cal.apply, icon=":material/check:",
             disabled=isinstance(merged, str), help=merged if isinstance(merged, str) else
             "Sets the fitted tables and efficiencies on the scenario's system; its other fields stay as they are.")
    # a new name clears the tick: 'Replace' answered for one saved system, not for the next one typed
    name = b.text_input("Save as (name)", key="cal.name", max_chars=64, placeholder="my-cluster",
                        on_change=lambda: st.session_state.update({"cal.replace": False}))
    taken = bool(name.strip()) and name.strip() in cal.user_systems()   # a saved system is replaced only when the user says so
    replace = b.checkbox("Replace the saved system of that name", key="cal.replace", value=False) if taken else False
    c.button("Save as a named system", key="cal.save", disabled=not name.strip() or (taken and not replace),
             on_click=lambda: cal.save(st.session_state.get("cal.name", ""), replace=bool(st.session_state.get("cal.replace"))),
             help="A name already saved on this server needs 'Replace the saved system' ticked." if taken else None)
    show_notices("cal.save")
    if s["provenance"]:
        st.markdown("**Fits and where they came from**")
        st.dataframe(pd.DataFrame([{"field": p["target"], "file": p["file"], "rows used": p["rows_used"],
                                    "fit error [%]": None if p["fit_error"] is None else p["fit_error"] * 100,
                                    "sha256": p["sha256"][:16], "method": p["method"]} for p in s["provenance"]]),
                     hide_index=True, width="stretch", column_config={"fit error [%]": st.column_config.NumberColumn(format="%.2f")})
    if s["collective_fits"]:
        st.dataframe(pd.DataFrame([{"used": f["used"], "file": f["source"], "table": f["table"], "kind": f["kind"],
                                    "ranks": f["n_ranks"], "tier": f["tier"], "busbw [GB/s]": f["busbw_gbs"],
                                    "efficiency": f["efficiency"], "alpha [µs]": f["alpha_us"],
                                    "RMS error [%]": f["rel_rms_error"] * 100} for f in s["collective_fits"]]),
                     hide_index=True, width="stretch", column_config={"efficiency": st.column_config.NumberColumn(
                         "efficiency", help="Fitted bus bandwidth / the tier's datasheet bandwidth per GPU. Above 1 "
                         "where the switch reduces in the network (NVLink SHARP, NVLS): an all-reduce's bus bandwidth "
                         "can then exceed the link's.")})
    if s["warnings"]:
        with st.expander(f"Refused rows and warnings ({len(s['warnings'])})", expanded=True):
            st.markdown("  \n".join(f"- {md(w, 300)}" for w in cal.warning_lines(s["warnings"])))
    st.markdown("**What it changes in the current scenario**")
    effect = merged if isinstance(merged, str) else cal.effect_rows(merged)
    cov = merged if isinstance(merged, str) else cal.coverage_rows(merged, [p["target"] for p in s["provenance"]])
    if isinstance(effect, str):
        st.warning(effect)
    else:
        st.dataframe(pd.DataFrame(effect), hide_index=True, width="content",
                     column_config={"change [%]": st.column_config.NumberColumn(format="%+.2f")})
        note = cal.extrapolation_note(cov)
        if note:
            st.warning(note, icon="⚠️")
        fields = cal.changed_fields(state.section_dict("system"), merged)
        st.caption(("System fields it sets: " + md(", ".join(fields), 600)) if fields else
                   "The calibrated system equals the scenario's: nothing changes (already in use).")
    st.markdown("**Coverage of the current scenario** (share of op time, %)")
    st.caption("Op time: every op one step runs, summed over the pipeline ranks, before overlap and bubbles; "
               "so it exceeds the step time.")
    if isinstance(cov, str):
        st.warning(cov)
    else:
        st.dataframe(pd.DataFrame(cov), hide_index=True, width="stretch",
                     column_config={k: st.column_config.NumberColumn(format="%.1f") for k in
                                    ("op time [ms]", "measured", "interpolated", "extrapolated", "default")})
    curves = s.get("curves", {})
    for build, key in ((charts.gemm_chart, "gemm"), (charts.collective_chart, "collectives"),
                       (charts.attention_chart, "attention")):
        chart = build(list(curves.get(key, [])))
        if chart is not None:
            st.altair_chart(chart, width="stretch")

st.divider()
st.subheader("Check against a training log")
st.caption("Upload the stdout of a Megatron-LM or torchtitan run of this scenario: its measured step time and memory "
           "beside the prediction, where the gap can live, and optionally a refit of the compute efficiency to it "
           "(fitted on half the steady iterations, checked on the rest). The CLI's `check-run` does the same.")
lc = st.columns([3, 1, 1])
log = lc[0].file_uploader("Training log (Megatron-LM or torchtitan stdout)", type=["log", "txt", "out"], key="cal.log")
warm = lc[1].number_input("Warm-up iterations to skip", min_value=0, max_value=100_000, value=None, step=1,
                          key="cal.log.warmup", placeholder="10 %", help="Empty: 10 % of the logged iterations, at least 1.")
refit = lc[2].checkbox("Refit compute to it", key="cal.log.refit")
st.button("Compare with the log", key="cal.log.run", on_click=cal_log.check, args=(log, warm, refit))
show_notices("cal.log")
got = cal_log.result()
if got and "error" in got:
    st.error(("" if not got.get("file") else md(got["file"], 200) + ": ") + md(got["error"], 600), icon="⚠️")
elif got:
    cal_log.show(got)

st.divider()
page_link("pages/system.py", "Edit the system's figures and tables on the System page", ":material/dns:")
