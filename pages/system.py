"""System editor: GPU, cluster, network tiers, efficiency model and its measured tables."""

import streamlit as st

from ui import fold, state, tables
from ui.editor import editor_page
from ui.engine import figures
from ui.layout import boot, page_link
from ui.units import fmt_flops_rate, fmt_num, fmt_usd

boot("System")


def show_figures() -> None:
    f = figures("system", state.section_json("system"))
    if not f["ok"]:
        return
    x = f["figures"]
    c = st.columns(5)
    c[0].metric("Cluster peak BF16", fmt_flops_rate(x["peak_bf16_pflops"]), help="num_gpus × dense BF16 tensor peak.")
    fp4 = "no FP4 peak" if x["peak_fp4_pflops"] is None else f"FP4 (NVFP4) {fmt_flops_rate(x['peak_fp4_pflops'])}"
    c[1].metric("Cluster peak FP8", "—" if x["peak_fp8_pflops"] is None else fmt_flops_rate(x["peak_fp8_pflops"]),
                help=f"num_gpus × dense FP8 tensor peak; {fp4}.")
    c[2].metric("Cost per hour", fmt_usd(x["cost_per_hour_usd"]) + "/h", help="num_gpus × price_per_hour.")
    c[3].metric("HBM in total", f"{fmt_num(x['hbm_total_tib'], ',.2f')} TiB")
    c[4].metric("Nodes · domains", f"{x['nodes']:,} · {x['scale_up_domains']:,}",
                help=f"Nodes and scale-up (NVLink) domains. Board power {fmt_num(x['power_kw'])} kW at TDP.")


def efficiency_tables(slots: dict) -> dict[str, list]:
    """The measured tables as edited on the page (the editor stores them when the system stays valid)."""
    eff = dict(state.section_dict("system").get("efficiency", {}))
    gen = state.generation("system")
    saved = st.session_state.get("ui.open.system.tables") or {}
    remember = dict(saved.get("groups", {})) if saved.get("gen") == gen else {}
    # folded: the grid is not drawn and the table stays as it is (ui/fold.py)
    box, is_open = fold.group("Measured GEMM efficiencies (gemm_table)", f"grp{gen}.system.gemm_table", remember,
                              bool(eff.get("gemm_table")))
    if is_open:
        with box:
            st.caption("Achieved / peak per GEMM shape (m×n×k, batch b), interpolated in log-shape space. Edit cells "
                       "in the grid; tick rows to remove them.")
            eff["gemm_table"] = tables.gemm_grid("system", list(eff.get("gemm_table", [])))
            a, b, _ = st.columns([1, 1, 4])
            a.button("Add row", key="gemm.add", on_click=tables.add_gemm_row)
            b.button("Clear table", key="gemm.clear", on_click=tables.clear_gemm, disabled=not eff["gemm_table"])
            slots["efficiency.gemm_table"] = st.empty()
    box, is_open = fold.group("Measured collectives (collective_table)", f"grp{gen}.system.collective_table", remember,
                              bool(eff.get("collective_table")))
    if is_open:
        with box:
            st.caption("Fitted alpha-beta per collective kind and network tier (from nccl-tests); overrides the tier "
                       "defaults. Add or delete rows at the bottom of the table.")
            eff["collective_table"] = tables.collective_editor("system", list(eff.get("collective_table", [])))
            slots["efficiency.collective_table"] = st.empty()
    st.session_state["ui.open.system.tables"] = {"gen": gen, "groups": remember}
    page_link("pages/calibration.py", "Calibrate from measurements (GEMM / attention sweeps, nccl-tests logs) "
              "on the Calibration page", ":material/tune:")
    return {"efficiency.gemm_table": list(eff.get("gemm_table", [])),
            "efficiency.collective_table": list(eff.get("collective_table", []))}


editor_page("system", "System", "GPUs, cluster size, network tiers and how close to peak each kind of work runs.",
            show_figures, tables=efficiency_tables)
