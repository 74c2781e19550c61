"""Calibration page logic: run the engine's calibration on uploads, keep the result in session
state (JSON text, never engine objects), apply it to the scenario, save it as a named user system.

Uploads are passed to the engine as bytes (never as paths). The folder of saved systems is the
UI's choice: ``$SIMENGINE_SYSTEMS_DIR`` or ``~/.simengine/systems`` (the engine reads no
environment variables; the studio layer may).
"""

from __future__ import annotations

import json
import os
import re
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
# the engine's field of each upload (simengine/calibration/calibrate.py read_input) → its widget
UPLOAD_OF = {"gemm_csv": "cal.gemm", "attention_csv": "cal.attention", "grouped_gemm_csv": "cal.grouped",
             "memory_csv": "cal.memory", "nccl_log": "cal.nccl"}
USER_PREFIX = "user: "


DEFAULT_SYSTEMS_DIR = Path.home() / ".simengine" / "systems"   # where the CLI looks for a saved system's name


def systems_dir() -> Path:
    given = os.environ.get("SIMENGINE_SYSTEMS_DIR")
    return Path(given) if given else DEFAULT_SYSTEMS_DIR


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
        one = {"cal.gemm": gemm, "cal.attention": attention, "cal.grouped": grouped, "cal.memory": memory}  # (nccl: its messages name their log)

        def named_by(key: str, msg: str) -> str:
            return f"{one[key].name[:200]}: {msg}" if one.get(key) is not None else msg

        placed = [(UPLOAD_OF[f], named_by(UPLOAD_OF[f], m)) for f, m in e.issues if f in UPLOAD_OF]
        rest = [(f, m) for f, m in e.issues if f not in UPLOAD_OF]
        st.session_state[RESULT_KEY] = json.dumps({"error": "Calibration failed:  \n" + _issues_text(rest) if rest else
                                                   "Calibration failed: see the message under the upload.",
                                                   "by_upload": placed, "uploaded": {
                                                       **{k: upload_names(f) for k, f in one.items()},
                                                       "cal.nccl": upload_names(nccl)}})
        return
    data = system.model_dump(mode="json")
    table = data["efficiency"].get("gemm_table") or []
    data["efficiency"]["gemm_table"] = sample_gemm_points(table)
    canon, issues = validate_section("system", data)
    if canon is None:
        st.session_state[RESULT_KEY] = json.dumps({"error": "Calibration produced an invalid system:  \n" + _issues_text(issues)})
        return
    base = state.section_dict("system")
    out = {"system": canon, "summary": named(summary.model_dump(mode="json"), {
        "efficiency.gemm_table": gemm, "efficiency.attention_table": attention,
        "efficiency.grouped_gemm_table": grouped, "efficiency.hbm": memory}),
        "gemm_points": len(table), "files": [f.name[:200] for f in files],
        # what the calibration sets, against the system it calibrated: "Use" sets these alone on
        # the scenario's system as it is then (edits made since stay), on the GPU it measured
        "fields": changed_fields(base, canon), "gpu": str(base.get("gpu", {}).get("name", ""))}
    if len(canon["efficiency"].get("gemm_table") or []) < len(table):
        out["full_gemm_table"] = table   # a saved system keeps every measured point (the scenario a sample)
    st.session_state[RESULT_KEY] = json.dumps(out)


_TABLE_NO = re.compile(r"\btable \d+: ")
MAX_WARNINGS = 50


def warning_lines(warnings: list[str], limit: int = MAX_WARNINGS) -> list[str]:
    """The calibration's warnings as the page lists them: the same warning about many tables once,
    with their count ("duplicate of an earlier table" 7,300 times buried a GPU-mismatch warning
    past the 50 shown), the rarest first, and a last line saying how many more there are."""
    groups: dict[str, int] = {}
    for w in warnings:
        key = _TABLE_NO.sub("", w)
        groups[key] = groups.get(key, 0) + 1
    ordered = sorted(groups.items(), key=lambda kv: kv[1])   # stable: first-seen order among equals
    lines = [w if n == 1 else f"{w} ({n:,} tables)" for w, n in ordered]
    if len(lines) > limit:
        lines = lines[:limit - 1] + [f"… and {len(lines) - limit + 1:,} more kinds of warning"]
    return lines


def upload_names(got) -> list[str]:
    """The file names in an uploader's value (one file, several, or none)."""
    files = got if isinstance(got, list) else [] if got is None else [got]
    return [f.name[:200] for f in files]


def upload_errors(key: str, got=None) -> list[str]:
    """The last calibration's messages about the upload ``key`` (shown under that upload, each
    naming its file: the engine's field names, gemm_csv or nccl_log, mean nothing on the page),
    while the uploader still holds the files they were about (``got``, its value): a file removed
    or replaced since takes its messages with it."""
    res = result() or {}
    then = res.get("uploaded", {}).get(key)
    if then is not None and then != upload_names(got):
        return []
    return [m for k, m in res.get("by_upload", []) if k == key]


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


def calibrated_system(res: dict[str, Any]) -> dict[str, Any] | str:
    """The scenario's system as it is now with the calibration's fields set (``run``'s "fields":
    the tables and efficiencies it fitted), or why it cannot be: the system's GPU is no longer the
    one measured. The scenario may have changed since the calibration ran (another GPU count, a
    preset): setting its whole calibrated system back undid those edits and called their effect
    the calibration's."""
    cur = state.section_dict("system")
    gpu = str(cur.get("gpu", {}).get("name", ""))
    if res.get("gpu") is not None and gpu != res["gpu"]:
        return (f"This calibration measured {md(res['gpu'], 80)}; the scenario's system is now {md(gpu, 80)}. "
                "Calibrate again with measurements of this GPU, or switch the System back.")
    merged = json.loads(json.dumps(cur))
    for field in res.get("fields", changed_fields(cur, res["system"])):
        *head, last = field.split(".")
        src, dst = res["system"], merged
        for k in head:
            src, dst = src[k], dst.setdefault(k, {})
        dst[last] = src.get(last)
    canon, issues = validate_section("system", merged)
    if canon is None:
        return "The calibrated system is not valid with the scenario's current system:  \n" + _issues_text(issues)
    return canon


def use_system(res: dict[str, Any], origin: str, where: str) -> dict[str, Any] | None:
    """Set ``res``'s fields on the scenario's system (``calibrated_system``) and its link; the
    system set, or None after saying why it cannot be (under ``where``'s notices)."""
    system = calibrated_system(res)
    if isinstance(system, str):
        state.notify("error", system, where)
        return None
    state.set_section("system", system, origin)
    state.sync_link()
    return system


def apply() -> None:
    """Set the calibration's fields on the scenario's system (``use_system``)."""
    res = result()
    if not res or "system" not in res:
        return
    system = use_system(res, "calibrated", "cal")
    if system is None:
        return
    s = res["summary"]
    msg = f"Calibrated: {s['gemm_points']:,} GEMM point(s)"
    if s["collective_fits"]:
        used = [f for f in s["collective_fits"] if f["used"]]
        msg += f", {len(used)} collective fit(s) used of {len(s['collective_fits'])}"
    state.notify("success", msg + ".", "cal")
    kept = len(system["efficiency"].get("gemm_table") or [])
    if kept < res["gemm_points"]:
        state.notify("info", f"The sweep has {res['gemm_points']:,} GEMM points; the system keeps {kept:,} of them, "
                             f"evenly spaced over the table (about one row in {res['gemm_points'] / kept:.1f}), so the "
                             "scenario, its link and every estimate stay fast. Interpolation between the kept "
                             "shapes covers the rest.", "cal")


def save(name: str, replace: bool = False) -> None:
    """Save the calibrated system (with its provenance) as a named user system; an existing one
    of that name (another session's, on a shared server) only with ``replace``. Spaces around the
    name are not part of it."""
    from simengine.config import SystemSpec

    name = name.strip()
    res = result()
    if not res or "system" not in res:
        state.notify("error", "Calibrate first, then save.", "cal.save")
        return
    if name in user_systems() and not replace:
        state.notify("error", f"Not saved: a system named {md_code(name, 64)} is already saved on this server; "
                              "tick 'Replace the saved system of that name' to overwrite it, or choose another name.", "cal.save")
        return
    data = json.loads(json.dumps(res["system"]))
    if res.get("full_gemm_table"):   # the scenario keeps a sample; the saved system every measured point
        data["efficiency"]["gemm_table"] = res["full_gemm_table"]
    try:
        system = SystemSpec.model_validate({**data, "name": name})
        path = api.save_user_system(systems_dir(), name, system, res["summary"].get("provenance", ()))
    except ConfigError as e:
        state.notify("error", "Not saved:  \n" + _issues_text(e.issues), "cal.save")
        return
    except ValueError as e:  # pydantic: a name longer than the schema allows
        state.notify("error", f"Not saved: {md(str(e).splitlines()[0], 200)}", "cal.save")
        return
    # the CLI finds a saved system by name in ~/.simengine/systems only (it reads no environment
    # variable): a studio saving elsewhere ($SIMENGINE_SYSTEMS_DIR) hints the file itself
    cli = name if systems_dir() == DEFAULT_SYSTEMS_DIR else str(path)
    state.notify("success", f"Saved as {md_code(name, 64)} ({md(path.name, 80)}); pick it as "
                            f"'{USER_PREFIX}{md(name, 64)}' in the System editor's preset list or use "
                            f"{md_code('--system ' + cli, 400)} on the command line.", "cal.save")


EFFECT = (("step time [s]", "step_time_s", "{:,.4f}"), ("tokens/s", "tokens_per_s", "{:,.0f}"), ("MFU", "mfu", "{:.2%}"))


def effect_rows(system: dict[str, Any]) -> list[dict[str, Any]] | str:
    """What the calibrated system changes in the current scenario: its estimate with the current
    system and with the calibrated one (the same cached estimate every page uses); an error text
    when either cannot be estimated."""
    from .config_io import dumps
    from .engine import estimate_report

    cfg = state.scenario_dict()
    now, cal = estimate_report(dumps(cfg)), estimate_report(dumps({**cfg, "system": system}))
    if not now["ok"] or not cal["ok"]:
        bad = now if not now["ok"] else cal
        return "The scenario cannot be estimated: " + md("; ".join(m for _, m in bad["issues"][:3]), 300)
    a, b = now["report"], cal["report"]
    return [{"": label, "current system": f.format(a[key]), "calibrated": f.format(b[key]),
             "change [%]": round((b[key] / a[key] - 1.0) * 100, 2) if a[key] else None} for label, key, f in EFFECT]


def changed_fields(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of the system fields the calibration set to another value (tables whole)."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += changed_fields(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}")
    return out


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


EXTRAPOLATED_WARN = 0.25   # share of the scenario's op time priced beyond the measured tables that earns a warning


def extrapolation_note(cov: list[dict[str, Any]] | str) -> str:
    """A warning when much of the scenario's op time is priced beyond what was measured (clamped
    to a table's edge, ``simengine.calibration.table``): the change the calibration makes then
    rests on extrapolation ('' otherwise)."""
    if isinstance(cov, str):
        return ""
    rows = {r["op kind"]: r for r in cov}
    total = rows.get("total")
    if total is None or total["extrapolated"] < EXTRAPOLATED_WARN * 100:
        return ""
    worst = [f"{k.replace('_', ' ')} {r['extrapolated']:.0f} %" for k, r in rows.items()
             if k != "total" and r["extrapolated"] >= 50][:4]
    return (f"{total['extrapolated']:.0f} % of this scenario's op time is priced beyond the measured shapes (clamped to "
            f"the tables' edge{': ' + ', '.join(worst) if worst else ''}), so that much of the calibrated pricing is an "
            "extrapolation. Measure the shapes this scenario runs before relying on it (coverage below).")

