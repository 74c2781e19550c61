"""Calibration page logic: run the engine's calibration on uploads, keep the result in session
state (JSON text, never engine objects), apply it to the scenario, save it as a named user system.

Uploads are passed to the engine as bytes (never as paths). The folder of saved systems is the
UI's choice: ``$SIMENGINE_SYSTEMS_DIR`` or ``~/.simengine/systems`` (the engine reads no
environment variables; the studio layer may).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import streamlit as st

from simengine import api
from simengine.errors import ConfigError

from . import state
from .config_io import validate_section
from .tables import MAX_CAL_BYTES, sample_gemm_points
from .text import md, md_code

RESULT_KEY = "cal.result"
USER_PREFIX = "user: "


def systems_dir() -> Path:
    given = os.environ.get("SIMENGINE_SYSTEMS_DIR")
    return Path(given) if given else Path.home() / ".simengine" / "systems"


def user_systems() -> list[str]:
    return api.list_user_systems(systems_dir())


def load_user_system(name: str) -> dict[str, Any]:
    return api.load_user_system(systems_dir(), name).model_dump(mode="json")


def _issues_text(issues) -> str:
    return "  \n".join(f"- {md_code(f, 60)}: {md(m, 300)}" if f else f"- {md(m, 300)}" for f, m in list(issues)[:12])


def run(gemm, nccl, attention, grouped, memory=None) -> None:
    """Calibrate the scenario's system from the uploads; the result (or the error) goes to session state."""
    files = [f for f in (gemm, attention, grouped, memory) if f is not None] + list(nccl or [])
    if not files:
        st.session_state[RESULT_KEY] = json.dumps({"error": "Upload at least one file: a GEMM sweep, an attention or "
                                                   "grouped-GEMM sweep, a memory-bandwidth sweep, or nccl-tests logs."})
        return
    total = sum(f.size for f in files)
    if total > MAX_CAL_BYTES:
        st.session_state[RESULT_KEY] = json.dumps({"error": f"Uploads total {total:,} bytes; at most {MAX_CAL_BYTES:,} "
                                                   "are accepted."})
        return

    def raw(f):
        return bytes(f.getvalue()) if f is not None else None

    logs = [(f.name[:200], bytes(f.getvalue())) for f in nccl or []]
    try:
        system, summary = api.calibrate(state.section_dict("system"), gemm=raw(gemm), nccl=logs or None,
                                        attention=raw(attention), grouped_gemm=raw(grouped), memory=raw(memory))
    except ConfigError as e:
        st.session_state[RESULT_KEY] = json.dumps({"error": "Calibration failed:  \n" + _issues_text(e.issues)})
        return
    data = system.model_dump(mode="json")
    table = data["efficiency"].get("gemm_table") or []
    data["efficiency"]["gemm_table"] = sample_gemm_points(table)
    canon, issues = validate_section("system", data)
    if canon is None:
        st.session_state[RESULT_KEY] = json.dumps({"error": "Calibration produced an invalid system:  \n" + _issues_text(issues)})
        return
    st.session_state[RESULT_KEY] = json.dumps({"system": canon, "summary": named(summary.model_dump(mode="json"), {
        "efficiency.gemm_table": gemm, "efficiency.attention_table": attention,
        "efficiency.grouped_gemm_table": grouped, "efficiency.hbm": memory}),
        "gemm_points": len(table), "files": [f.name[:200] for f in files]})


def named(summary: dict[str, Any], uploads: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with each sweep's file name in its provenance: the engine is handed the upload's
    bytes (never a path), so it knows no name for them (nccl logs go with theirs)."""
    for p in summary.get("provenance", []):
        f = uploads.get(p["target"])
        if f is not None and not p.get("file"):
            p["file"] = f.name[:200]
    return summary


def result() -> dict[str, Any] | None:
    text = st.session_state.get(RESULT_KEY)
    return json.loads(text) if text else None


def apply() -> None:
    """Make the calibrated system the scenario's system."""
    res = result()
    if not res or "system" not in res:
        return
    state.set_section("system", res["system"], "calibrated")
    state.sync_link()
    s = res["summary"]
    msg = f"Calibrated: {s['gemm_points']:,} GEMM point(s)"
    if s["collective_fits"]:
        used = [f for f in s["collective_fits"] if f["used"]]
        msg += f", {len(used)} collective fit(s) used of {len(s['collective_fits'])}"
    state.notify("success", msg + ".", "cal")
    kept = len(res["system"]["efficiency"].get("gemm_table") or [])
    if kept < res["gemm_points"]:
        state.notify("info", f"The sweep has {res['gemm_points']:,} GEMM points; the system keeps {kept:,} of them, "
                             f"evenly spaced over the table (every {res['gemm_points'] / kept:.1f}th row), so the "
                             "scenario, its link and every estimate stay fast. Interpolation between the kept "
                             "shapes covers the rest.", "cal")


def save(name: str, replace: bool = False) -> None:
    """Save the calibrated system (with its provenance) as a named user system; an existing one
    of that name (another session's, on a shared server) only with ``replace``."""
    from simengine.config import SystemSpec

    res = result()
    if not res or "system" not in res:
        state.notify("error", "Calibrate first, then save.", "cal.save")
        return
    if name in user_systems() and not replace:
        state.notify("error", f"Not saved: a system named {md_code(name, 64)} is already saved on this server; "
                              "tick 'Replace the saved system of that name' to overwrite it, or choose another name.", "cal.save")
        return
    try:
        system = SystemSpec.model_validate({**res["system"], "name": name})
        path = api.save_user_system(systems_dir(), name, system, res["summary"].get("provenance", ()))
    except ConfigError as e:
        state.notify("error", "Not saved:  \n" + _issues_text(e.issues), "cal.save")
        return
    except ValueError as e:  # pydantic: a name longer than the schema allows
        state.notify("error", f"Not saved: {md(str(e).splitlines()[0], 200)}", "cal.save")
        return
    state.notify("success", f"Saved as {md_code(name, 64)} ({md(path.name, 80)}); pick it as "
                            f"'{USER_PREFIX}{md(name, 64)}' in the System editor's preset list or use "
                            f"{md_code('--system ' + name, 80)} on the command line.", "cal.save")


def coverage_rows(system: dict[str, Any], measured_fields=()) -> list[dict[str, Any]] | str:
    """Coverage of the current scenario priced with ``system``; an error text when it cannot be priced."""
    cfg = state.scenario_dict()
    cfg["system"] = system
    try:
        cov = api.coverage(cfg, measured_fields)
    except ConfigError as e:
        return "Coverage needs a valid scenario: " + md("; ".join(m for _, m in e.issues[:3]), 300)
    return [{"op kind": k, "op time [ms]": v["seconds"] * 1e3, **{c: v[c] * 100 for c in
             ("measured", "interpolated", "extrapolated", "default")}} for k, v in cov.items()]
