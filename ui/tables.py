"""Efficiency tables of the System page: GEMM points in streamlit-aggrid, collective fits in
``st.data_editor``, and the GEMM-point cap a calibration keeps (the Calibration page,
``ui/calibration_run.py``, runs the calibration itself)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import streamlit as st

from simengine.config.system import CollectivePoint, GemmPoint

from . import state
import contextlib

GEMM_COLUMNS = list(GemmPoint.model_fields)          # m n k b dtype layout efficiency
COLL_COLUMNS = list(CollectivePoint.model_fields)    # kind tier efficiency latency_us
MAX_CAL_BYTES = 64 * 1024 * 1024
MAX_GEMM_POINTS = 2000  # GEMM points a calibration upload keeps in the scenario (evenly sampled)


def _clean(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, str) and v.strip() in ("", "None", "nan", "null"):
        return None
    if hasattr(v, "item"):  # numpy scalars
        v = v.item()
    return v


def rows_from_frame(df: Any, columns: list[str]) -> list[dict[str, Any]]:
    """Grid / editor output → list of row dicts (blank rows dropped, blanks → None)."""
    if not isinstance(df, pd.DataFrame) or df.empty:
        return []
    out = []
    for rec in df.to_dict("records"):
        row = {c: _clean(rec.get(c)) for c in columns}
        if all(v is None for v in row.values()):
            continue
        for c in ("m", "n", "k", "b"):
            if isinstance(row.get(c), float) and row[c].is_integer():
                row[c] = int(row[c])
            elif isinstance(row.get(c), str) and row[c].strip().isdigit():
                row[c] = int(row[c].strip())
        if "b" in row and row["b"] is None:
            row["b"] = 1
        if "efficiency" in row and isinstance(row["efficiency"], str):
            with contextlib.suppress(ValueError):
                row["efficiency"] = float(row["efficiency"])
        out.append({k: v for k, v in row.items() if not (v is None and k not in ("layout",))})
    return out


def gemm_grid(section: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Editable AgGrid of the measured GEMM points; returns the edited rows."""
    df = pd.DataFrame(rows, columns=GEMM_COLUMNS)
    if df.empty:
        st.caption("No measured GEMM points: the default efficiency curve is used. Add rows, or calibrate "
                   "from a measured sweep below.")
        return []
    try:
        from st_aggrid import AgGrid, GridOptionsBuilder

        gb = GridOptionsBuilder.from_dataframe(df)
        gb.configure_default_column(editable=True, resizable=True, sortable=True, filter=True, flex=1)
        gb.configure_column("dtype", cellEditor="agSelectCellEditor", cellEditorParams={"values": ["bf16", "fp8", "nvfp4", "fp32"]})
        gb.configure_column("layout", cellEditor="agSelectCellEditor", cellEditorParams={"values": ["", "TN", "NN", "NT"]})
        for c in ("m", "n", "k", "b"):
            gb.configure_column(c, type=["numericColumn"], headerTooltip=f"GEMM dimension {c} (elements)")
        gb.configure_column("efficiency", type=["numericColumn"], headerTooltip="achieved / peak of that dtype")
        gb.configure_selection("multiple", use_checkbox=True)
        gb.configure_grid_options(domLayout="normal", rowHeight=28)
        resp = AgGrid(df, gridOptions=gb.build(), height=min(420, 64 + 28 * len(df)),
                      update_on=["cellValueChanged", "selectionChanged"],
                      key=f"grid{state.generation(section)}.gemm", theme="streamlit", show_toolbar=False,
                      show_search=False, show_download_button=False)
    except Exception as e:  # noqa: BLE001 — the component failing must not take the page down
        st.warning(f"The interactive grid is unavailable ({type(e).__name__}); showing an editor instead.")
        edited = st.data_editor(df, num_rows="dynamic", key=f"ed{state.generation(section)}.gemm", width="stretch")
        return rows_from_frame(edited, GEMM_COLUMNS)
    data = resp.data if isinstance(resp.data, pd.DataFrame) else df
    out = rows_from_frame(data, GEMM_COLUMNS)
    sel = resp.selected_rows
    picked = isinstance(sel, pd.DataFrame) and not sel.empty
    if picked and st.button(f"Remove {len(sel)} selected row(s)", key=f"rm{state.generation(section)}.gemm"):
        drop = {tuple(r.get(c) for c in ("m", "n", "k", "b", "dtype")) for r in rows_from_frame(sel, GEMM_COLUMNS)}
        kept = [r for r in out if tuple(r.get(c) for c in ("m", "n", "k", "b", "dtype")) not in drop]
        _store_table(section, "gemm_table", kept, "edited")
        st.rerun()
    return out


def collective_editor(section: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    df = pd.DataFrame(rows, columns=COLL_COLUMNS)
    edited = st.data_editor(
        df, num_rows="dynamic", key=f"ed{state.generation(section)}.coll", width="stretch", hide_index=True,
        column_config={
            "kind": st.column_config.SelectboxColumn("kind", options=["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"], required=True),
            "tier": st.column_config.SelectboxColumn("tier", options=["scale_up", "scale_out"], required=True),
            "efficiency": st.column_config.NumberColumn("efficiency [× link BW]", min_value=0.0, max_value=2.0, format="%.3f"),
            "latency_us": st.column_config.NumberColumn("latency [µs]", min_value=0.0, format="%.2f"),
            "step_latency_us": st.column_config.NumberColumn("step latency [µs]", min_value=0.0, format="%.2f",
                                                             help="Latency per ring step (×2(n−1) for all-reduce, ×(n−1) otherwise)."),
            "group_size": st.column_config.NumberColumn("group size [ranks]", min_value=2, step=1,
                                                        help="Ranks the fit was measured on (empty = any); the closest size is used."),
        })
    return rows_from_frame(edited, COLL_COLUMNS)


def _store_table(section: str, field: str, rows: list[dict[str, Any]], origin_label: str) -> list:
    sysd = state.section_dict(section)
    sysd.setdefault("efficiency", {})[field] = rows
    return state.load_section(section, sysd, origin_label)


def add_gemm_row() -> None:
    sysd = state.section_dict("system")
    table = list(sysd.get("efficiency", {}).get("gemm_table", []))
    table.append({"m": 8192, "n": 8192, "k": 8192, "b": 1, "dtype": "bf16", "layout": None, "efficiency": 0.75})
    _store_table("system", "gemm_table", table, "edited")


def clear_gemm() -> None:
    _store_table("system", "gemm_table", [], "edited")


def sample_gemm_points(rows: list[Any], limit: int | None = None) -> list[Any]:
    """At most ``limit`` rows (``MAX_GEMM_POINTS``), evenly spaced over the table, first and
    last kept, order kept; ``rows`` itself when it is short enough."""
    limit = MAX_GEMM_POINTS if limit is None else limit
    n = len(rows)
    if n <= limit:
        return list(rows)
    if limit <= 1:
        return list(rows[:limit])
    return [rows[round(i * (n - 1) / (limit - 1))] for i in range(limit)]
