"""Calibration page, "Check against a training log": a Megatron-LM or torchtitan log against the
current scenario (``api.check_run``: the CLI's ``check-run``), and its refit of the compute
efficiency used in the scenario like a calibration (``calibration_run.calibrated_system``: the
fitted fields alone, on the GPU it was measured on). The result lives in session state as JSON.

A heavy scenario (``ui.heavy.is_heavy``: a long pipeline to simulate) is checked in a bounded
worker process, as its estimate is: a refit runs up to ten estimates.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import streamlit as st

from . import state
from .calibration_run import calibrated_system, changed_fields, use_system
from .tables import MAX_CAL_BYTES
from .text import md, sentence_start

LOG_KEY = "cal.log.result"
PARTS = {"forward_compute": "forward compute", "backward_compute": "backward compute", "recompute": "recompute",
         "optimizer": "optimizer", "bubble": "pipeline bubble"}


def check(upload, warmup: int | None, refit: bool) -> None:
    """Compare the uploaded log with the scenario; the result (or the error) goes to session state."""
    if upload is None:
        st.session_state[LOG_KEY] = json.dumps({"error": "Upload a training log first (Megatron-LM or torchtitan stdout)."})
        return
    if upload.size > MAX_CAL_BYTES:
        st.session_state[LOG_KEY] = json.dumps({"error": f"The log is {upload.size:,} bytes; at most {MAX_CAL_BYTES:,} are accepted."})
        return
    cfg = state.scenario_dict()
    payload = json.dumps({"scenario": cfg, "log": bytes(upload.getvalue()).decode("utf-8", "replace"),
                          "warmup": warmup, "refit": refit})
    got = _run(payload, json.dumps(cfg))
    if not got["ok"]:
        st.session_state[LOG_KEY] = json.dumps({"error": "; ".join(str(m) for _, m in got["issues"][:3]),
                                                "file": upload.name[:200]})
        return
    out = got["result"]
    out["file"] = upload.name[:200]
    if "refit" in out:   # used like a calibration: its fields alone, on the GPU it was measured on
        system = out["refit"].pop("system")
        out["refit"]["use"] = {"system": system, "fields": changed_fields(cfg["system"], system),
                               "gpu": str(cfg["system"]["gpu"]["name"])}
    st.session_state[LOG_KEY] = json.dumps(out)


def _run(payload: str, scenario_json: str) -> dict[str, Any]:
    from .heavy import is_heavy, run_task

    return run_task("check_run", payload) if is_heavy(scenario_json) else check_inline(payload)


def check_inline(payload: str) -> dict[str, Any]:
    """``api.check_run`` of a payload ({"scenario", "log", "warmup", "refit"}) in this process: the
    worker's task itself (``ui.worker_tasks.check_run``)."""
    from .worker_tasks import check_run

    return check_run(payload)


def result() -> dict[str, Any] | None:
    text = st.session_state.get(LOG_KEY)
    return json.loads(text) if text else None


def use_refit() -> None:
    res = result()
    use = (res or {}).get("refit", {}).get("use")
    if not use:
        return
    if use_system(use, "refit to a training log", "cal.log") is None:
        return
    state.notify("success", f"Compute efficiencies scaled by {res['refit']['value']:.3f}, refit to "
                            f"{md(res.get('file', 'the log'), 120)}.", "cal.log")


def compare_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Measured beside predicted: the step time and each memory figure the log reports."""
    rows = [{"": "step time [s]", "measured": f"{r['measured_step_s']:,.4f}", "predicted": f"{r['predicted_step_s']:,.4f}",
             "error [%]": round(r["rel_error"] * 100, 2)}]
    for m in r["memory"]:
        rows.append({"": f"{m['kind']} memory [GiB]", "measured": f"{m['measured_gib']:,.2f}",
                     "predicted": f"{m['predicted_gib']:,.2f}",
                     "error [%]": round((m["predicted_gib"] / m["measured_gib"] - 1) * 100, 2) if m["measured_gib"] else None})
    return rows


def breakdown_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Each part of the prediction and the scale it alone would need to close the gap (a pointer
    to where the error can live, not an attribution: checkrun/compare.py)."""
    return [{"part": PARTS.get(b["part"], b["part"].replace("_", " ")), "predicted [ms]": b["predicted_s"] * 1e3,
             "scale alone to close the gap": "—" if b["scale_to_close"] is None else f"×{b['scale_to_close']:.2f}"}
            for b in r["breakdown"] if b["predicted_s"] > 0]


def show(r: dict[str, Any]) -> None:
    """The comparison, its mismatches and warnings, and the refit with its "use" button."""
    st.caption(f"{md(r['file'], 200)}: {r['framework']}, {r['iterations']:,} iterations logged, {r['skipped']:,} skipped "
               f"as warm-up, {r['used']:,} used (spread {r['spread']:.1%}).")
    for w in r["mismatches"]:
        st.warning(f"{sentence_start(md(w, 300))}: the comparison is not of the logged run.", icon="⚠️")
    st.dataframe(pd.DataFrame(compare_rows(r)), hide_index=True, width="content",
                 column_config={"error [%]": st.column_config.NumberColumn(format="%+.2f", help="predicted / measured − 1")})
    st.dataframe(pd.DataFrame(breakdown_rows(r)), hide_index=True, width="content",
                 column_config={"predicted [ms]": st.column_config.NumberColumn(format="%,.1f")})
    if r["warnings"]:
        st.caption("Log warnings: " + md("; ".join(r["warnings"][:8]), 600))
    fit = r.get("refit")
    if fit:
        st.markdown(f"**Refit:** compute efficiencies × {fit['value']:.3f} reproduce the first half of the steady "
                    f"iterations (error {fit['fit_error']:+.2%}); on the held-out {md(fit['holdout'], 80)} the error is "
                    f"{fit['holdout_error']:+.2%}.")
        use = calibrated_system(fit["use"])
        if r["mismatches"] and not isinstance(use, str):   # a refit would absorb what differs into compute
            use = ("The log contradicts the scenario (above): the refit would put the difference into the compute "
                   "efficiency. Make the scenario the logged run's, then compare again.")
        st.button("Use the refit system in this scenario", key="cal.log.use", on_click=use_refit,
                  disabled=isinstance(use, str), help=use if isinstance(use, str) else
                  "Scales every compute efficiency (GEMM, attention, grouped GEMM and their tables) of the scenario's system.")
        if isinstance(use, str):
            st.caption(md(use, 300))
