"""Strategy editor: parallel layout, batch, precision, memory and overlap knobs."""

import streamlit as st

from ui import state
from ui.editor import editor_page
from ui.engine import layout_figures
from ui.layout import boot
from ui.units import fmt_count, fmt_flops

boot("Strategy")


def show_figures() -> None:
    lay = layout_figures(state.scenario_json())
    c = st.columns(5)
    if not lay["ok"]:
        for col, label in zip(c, ("dp replicas", "Micro-batches / step", "Tokens / step", "World size", "Model FLOPs / step")):
            col.metric(label, "—", help="Needs a consistent scenario (see the problems below).")
        return
    x = lay["figures"]
    # short (the full wording in help): "dp (data-parallel replicas)" read "dp (data-parallel repl…" at 1,280 px
    c[0].metric("dp replicas", f"{x['dp']:,.0f}", help=f"Data-parallel replicas (dp) = world / (tp · pp · cp). "
                f"Expert data-parallel size edp = {x['edp']:,.0f}.")
    c[1].metric("Micro-batches / step", f"{x['num_microbatches']:,.0f}", help="global_batch_size / (micro_batch_size · dp), per pipeline.")
    c[2].metric("Tokens / step", fmt_count(x["tokens_per_step"]), help="global_batch_size · seq_len.")
    c[3].metric("World size", f"{x['world']:,.0f} GPUs", help="tp · pp · cp · dp.")
    c[4].metric("Model FLOPs / step", fmt_flops(x["model_flops_per_step"]), help=f"Vocabulary padded to {x['vocab_padded']:,.0f}.")


editor_page("strategy", "Strategy", "How the model is split over the GPUs, the batch, precision and memory savers.",
            show_figures)
