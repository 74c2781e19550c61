"""Model editor: presets, Hugging Face config.json import, every ModelSpec field, derived figures."""

import streamlit as st

from ui import fold, state
from ui.editor import editor_page
from ui.engine import figures, layout_figures
from ui.hf_import import UPLOAD_MB as HF_UPLOAD_MB
from ui.hf_import import HFImportError, hf_to_model
from ui.layout import boot, show_notices
from ui.text import clip, md
from ui.units import fmt_count, fmt_flops, fmt_gib

boot("Model")
HF = "hf"  # where the import's messages are drawn: right under its box


def show_figures() -> None:
    f = figures("model", state.section_json("model"))
    lay = layout_figures(state.scenario_json())
    c = st.columns(5)
    if f["ok"]:
        x = f["figures"]
        # a short label (the full wording in help): "Parameters (active/token)" read "Parameters (active/t…" at 1,280 px
        c[0].metric("Parameters (total)", fmt_count(x["params_total"]), help="simengine.workload.params.count_parameters; MTP modules excluded, as published.")
        c[1].metric("Active per token", fmt_count(x["params_active"]), help="Parameters active per token; MoE: top-k "
                    "routed + shared experts.")
        c[2].metric("Weights in BF16", fmt_gib(x["weights_bf16_gib"]), help="2 bytes per parameter, whole model.")
        c[3].metric("MoE layers", f"{x['moe_layers']:.0f}")
    if lay["ok"]:
        c[4].metric("Model FLOPs / token", fmt_flops(lay["figures"]["model_flops_per_token"]),
                    help="6·N_active + attention at the strategy's seq_len (PaLM App. B), as used for MFU.")
    else:
        c[4].metric("Model FLOPs / token", "—", help="Needs a consistent scenario (see the problems listed).")


def _import(text: bytes | str, label: str) -> None:
    """Map a config.json to the model section; any failure is a message, the model stays."""
    label = clip(label)
    try:
        model, notes = hf_to_model(text)
    except HFImportError as e:
        state.notify("error", f"Hugging Face import failed ({md(label)}): {md(e)}", HF)
        return
    except RecursionError:
        state.notify("error", f"Hugging Face import failed ({md(label)}): nested too deeply", HF)
        return
    except ValueError as e:  # e.g. an integer over Python's 4,300-digit conversion limit
        state.notify("error", f"Hugging Face import failed ({md(label)}): {md(e, 120)}", HF)
        return
    issues = state.load_section("model", model, f"imported {label}")
    if issues:
        state.notify("error", "Imported model is invalid: " + md("; ".join(f"{f}: {m}" for f, m in issues[:6]), 600), HF)
        return
    named = "" if model["name"] == "imported" else f" {md(model['name'], 120)}"   # (no name in the config: not "Imported imported")
    state.notify("success", f"Imported the model{named} from {md(label)}.", HF)
    for n in notes:
        state.notify("info", md(n, 300), HF)


def _import_upload() -> None:
    """The uploader emptied or holding another file: the box's messages are this event's alone."""
    state.drop_notices(HF)
    f = st.session_state.get("hf.upload")
    if f is not None:
        _import(f.getvalue(), f.name)


def _import_paste() -> None:
    state.drop_notices(HF)
    _import(st.session_state.get("hf.paste", ""), "pasted config.json")


def hf_box() -> None:
    box, is_open = fold.group("Import a Hugging Face config.json (Llama, Qwen, Mistral/Mixtral, DeepSeek, GLM-4.5, Nemotron)", "hf.box",
                              st.session_state.setdefault("hf.box.open", {}), False)
    if is_open:
        _hf_form(box)
    show_notices(HF)  # the import's messages, right under the box (visible with the box folded)


def _hf_form(box) -> None:
    with box:
        a, b = st.columns(2)
        with a:
            st.file_uploader("Upload config.json", type=["json"], key="hf.upload", on_change=_import_upload,
                             max_upload_size=HF_UPLOAD_MB)
        with b:
            # the text outlives the widget: Streamlit drops a widget's state on a page the user
            # leaves, and a pasted config was gone on coming back
            if "hf.paste" not in st.session_state and st.session_state.get("hf.paste.kept"):
                st.session_state["hf.paste"] = st.session_state["hf.paste.kept"]
            st.text_area("…or paste its content", key="hf.paste", height=120,
                         placeholder='{"hidden_size": 4096, "num_hidden_layers": 32, ...}',
                         on_change=lambda: st.session_state.update({"hf.paste.kept": st.session_state.get("hf.paste", "")}))
            st.button("Import pasted config", key="hf.import", on_click=_import_paste)
        st.caption("Maps hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim, "
                   "intermediate_size, vocab_size, hidden_act, tie_word_embeddings, the MLA ranks and head dims, and "
                   "the MoE fields (n_routed_experts / num_local_experts / num_experts, num_experts_per_tok, "
                   "moe_intermediate_size, n_shared_experts, first_k_dense_replace, scoring_func, "
                   "num_nextn_predict_layers).")


editor_page("model", "Model", "Architecture of the decoder-only transformer.", show_figures, before_form=hf_box)
