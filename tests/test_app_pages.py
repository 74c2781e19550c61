"""AppTest over every page: presets, edits, inline validation errors, HF import, uploads,
share-link round trips and hostile query strings. Driven through app.py (st.navigation) and,
for deep links on a fresh server, through the page files directly."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_walk import open_fold, open_groups
from ui.share import decode_token, encode_token, size_canonical
from ui.timeline_data import MAX_EXACT_SPANS

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["pages/home.py", "pages/model.py", "pages/system.py", "pages/strategy.py", "pages/estimate.py", "pages/timeline.py",
         "pages/calibration.py"]
TIMEOUT = 60


def open_page(page: str = "pages/home.py", **query: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    if page != "pages/home.py":
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def widget(at: AppTest, dotted: str):
    """The generated widget of a dotted field path such as ``strategy.tp``."""
    for group in (at.number_input, at.text_input, at.selectbox, at.checkbox, at.text_area):
        for w in group:
            if w.key and w.key.split(".", 1)[-1] == dotted:
                return w
    raise AssertionError(f"no widget for {dotted}")


def scenario(at: AppTest) -> dict:
    return {s: json.loads(at.session_state[f"cfg.{s}"]) for s in ("model", "system", "strategy")}


def texts(elements) -> str:
    return "\n".join(str(e.value) for e in elements)


def metric(at: AppTest, label: str) -> str:
    for m in at.metric:
        if m.label.startswith(label):
            return m.value
    raise AssertionError(f"no metric {label!r}: {[m.label for m in at.metric]}")


# ---- every page ------------------------------------------------------------------------------
@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders(page):
    at = open_page(page, preset="medium")
    assert scenario(at) == size_canonical("medium")
    assert dict(at.query_params) == {"preset": "medium"}
    assert not at.error, texts(at.error)


@pytest.mark.parametrize("page", PAGES)
def test_page_works_without_app_py(page):
    """First request after a server start runs the page file itself (pages/ folder mode)."""
    at = AppTest.from_file(str(ROOT / page), default_timeout=TIMEOUT)
    at.query_params["preset"] = "large"
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert scenario(at) == size_canonical("large")
    assert dict(at.query_params) == {"preset": "large"}


def test_home_size_buttons_and_headline():
    at = open_page()
    assert metric(at, "Step time").endswith("s")
    at.button(key="size.medium").click().run()
    assert dict(at.query_params) == {"preset": "medium"}
    assert scenario(at) == size_canonical("medium")
    at.button(key="size.large").click().run()
    assert dict(at.query_params) == {"preset": "large"}
    assert "?preset=large" in texts(at.code)


# ---- share links ------------------------------------------------------------------------------
def test_share_link_round_trip_through_a_fresh_session():
    at = open_groups(open_page("pages/strategy.py"), "strategy")
    widget(at, "strategy.global_batch_size").set_value(128).run()
    widget(at, "strategy.recompute").set_value("selective").run()
    assert not at.exception
    params = dict(at.query_params)
    assert set(params) == {"s"} and params["s"].startswith("v1.")
    edited = scenario(at)
    assert edited["strategy"]["global_batch_size"] == 128 and edited["strategy"]["recompute"] == "selective"
    assert decode_token(params["s"])[0] == edited
    other = open_page("pages/estimate.py", s=params["s"])
    assert scenario(other) == edited
    assert dict(other.query_params) == params
    first = open_page("pages/estimate.py", s=params["s"])
    assert metric(first, "Step time") == metric(other, "Step time")


def test_edit_back_to_preset_gives_preset_link():
    at = open_page("pages/strategy.py")
    widget(at, "strategy.seq_len").set_value(4096).run()
    assert "s" in at.query_params
    widget(at, "strategy.seq_len").set_value(8192).run()
    assert dict(at.query_params) == {"preset": "small"}


def _bomb() -> str:
    return "v1." + base64.urlsafe_b64encode(zlib.compress(b'{"f":"' + b"A" * 30_000_000 + b'"}', 9)).decode().rstrip("=")


HOSTILE = [
    {"s": "garbage"}, {"s": "v1.!!!!"}, {"s": "v9.abc"}, {"s": "v1." + "A" * 20_000}, {"s": _bomb()},
    {"s": "<script>alert(1)</script>"}, {"preset": "evil"}, {"preset": "../../etc/passwd"}, {"preset": ""},
    {"s": "v1." + base64.urlsafe_b64encode(zlib.compress(b'{"b":"small","d":{"strategy":{"tp":0}}}')).decode().rstrip("=")},
]


@pytest.mark.parametrize("query", HOSTILE, ids=[f"hostile{i}" for i in range(len(HOSTILE))])
@pytest.mark.parametrize("page", ["pages/home.py", "pages/estimate.py"])
def test_hostile_query_strings_give_a_message(page, query):
    at = AppTest.from_file(str(ROOT / page), default_timeout=TIMEOUT)
    for k, v in query.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Could not open the link" in texts(at.error)
    assert "Traceback" not in texts(at.error)
    assert scenario(at) == size_canonical("small")
    assert dict(at.query_params) == query  # the link the user pasted stays in the address bar


def test_unknown_parameters_are_reported_and_dropped():
    at = open_page("pages/home.py", preset="medium", foo="bar")
    assert "Ignored unknown link parameter" in texts(at.info)
    assert dict(at.query_params) == {"preset": "medium"}


def test_bad_link_keeps_the_session_scenario():
    at = open_page("pages/home.py", preset="large")
    at.query_params["s"] = "v1.garbage!"
    at.run()
    assert "Could not open the link" in texts(at.error) and "Keeping the current scenario" in texts(at.error)
    assert scenario(at) == size_canonical("large")


def test_a_fresh_session_opens_the_preset_beside_a_damaged_edit():
    """``preset=medium&s=<damaged>`` opened in a new session showed the default small preset; it
    shows medium, and says why (a session with a scenario keeps it: the test above)."""
    at = open_page("pages/home.py", preset="medium", s="v1.garbage!")
    assert scenario(at) == size_canonical("medium") and not at.error
    assert "does not open" in texts(at.warning) and "'medium' preset" in texts(at.warning)


# ---- inline validation -----------------------------------------------------------------------
def _expander(at: AppTest, title: str):
    for ex in at.expander:
        if ex.label.startswith(title):
            return ex
    raise AssertionError(title)


def test_model_validator_error_sits_next_to_the_fields():
    at = open_page("pages/model.py")
    widget(at, "model.num_kv_heads").set_value(5).run()
    errs = texts(_expander(at, "Architecture").error)
    assert "num_kv_heads=5" in errs
    assert scenario(at)["model"] == size_canonical("small")["model"]  # invalid edits are not applied
    widget(at, "model.num_kv_heads").set_value(4).run()
    assert not at.error and scenario(at)["model"]["num_kv_heads"] == 4
    assert "s" in at.query_params


def test_bound_error_on_nested_field():
    at = open_page("pages/system.py")
    widget(at, "system.gpu.memory_gib").set_value(0.0).run()
    errs = texts(_expander(at, "GPU").error)
    assert "greater than 0" in errs
    widget(at, "system.gpu.price_per_hour").set_value(1.5).run()
    assert scenario(at)["system"]["gpu"]["price_per_hour"] == 2.99  # draft still invalid: nothing applied


def test_cross_section_error_under_tp_and_estimate_blocked():
    at = open_page("pages/strategy.py")
    widget(at, "strategy.tp").set_value(3).run()
    assert "tp=3 does not divide" in texts(_expander(at, "Parallelism").error)
    assert scenario(at)["strategy"]["tp"] == 3  # valid on its own: applied, and the link carries it
    at.switch_page("pages/estimate.py").run()
    assert not at.exception and "cannot be estimated" in texts(at.error)
    at.switch_page("pages/model.py").run()
    assert "strategy.tp" in texts(at.error)


def test_strategy_model_validator_message():
    at = open_page("pages/strategy.py")
    widget(at, "strategy.vpp").set_value(2).run()
    assert "needs schedule='interleaved'" in texts(at.error)


def test_optional_field_starts_at_auto_and_can_be_set():
    at = open_page("pages/strategy.py", preset="medium")
    dp = widget(at, "strategy.dp")
    assert dp.value is None and dp.proto.placeholder == "auto"
    dp.set_value(2).run()
    assert scenario(at)["strategy"]["dp"] == 2
    widget(at, "strategy.dp").set_value(3).run()
    assert r"tp\*pp\*cp\*dp" in texts(_expander(at, "Parallelism").error)  # stars kept literally


# ---- presets, uploads, downloads, HF import --------------------------------------------------
def test_catalogue_preset_picker():
    at = open_page("pages/model.py")
    at.selectbox(key="pick.model").set_value("qwen3-30b-a3b")
    at.button(key="load.model").click().run()
    assert scenario(at)["model"]["num_experts"] == 128
    assert "Loaded model preset" in texts(at.success)
    assert _expander(at, "Mixture of experts").proto.expanded


def test_the_preset_picker_names_no_preset_for_an_edited_section():
    """After an edit the picker shows none picked (its placeholder says where the section came
    from), not the first size preset, which read as if the section were that preset; picking one
    and loading it still works, and a preset section shows its own name."""
    at = open_page("pages/model.py")
    assert at.selectbox(key="pick.model").value == "small"
    widget(at, "model.num_layers").set_value(6).run()
    pick = at.selectbox(key="pick.model")
    assert pick.value is None and "edited" in pick.placeholder
    pick.set_value("medium")
    at.button(key="load.model").click().run()
    assert at.selectbox(key="pick.model").value == "medium"


@pytest.mark.parametrize("section", ["model", "system", "strategy"])
def test_json_upload_and_download(section):
    at = open_page(f"pages/{section}.py")
    assert any(b.label == "Download JSON" and b.key == f"dl.{section}" for b in at.get("download_button"))
    medium = size_canonical("medium")[section]
    at.file_uploader(key=f"upl.{section}").upload(f"{section}.json", json.dumps(medium).encode(), "application/json").run()
    assert not at.exception
    assert scenario(at)[section] == medium
    at.file_uploader(key=f"upl.{section}").upload("bad.json", b"{oops", "application/json").run()
    assert "Upload rejected" in texts(at.error) and "not valid JSON" in texts(at.error)
    assert scenario(at)[section] == medium


def test_upload_of_whole_scenario_and_invalid_section():
    at = open_page("pages/strategy.py")
    full = size_canonical("large")
    at.file_uploader(key="upl.strategy").upload("scenario.json", json.dumps(full).encode(), "application/json").run()
    assert scenario(at)["strategy"] == full["strategy"]
    bad = dict(full["strategy"], tp=0, schedule="warp")
    at.file_uploader(key="upl.strategy").upload("bad.json", json.dumps(bad).encode(), "application/json").run()
    errs = texts(at.error)
    assert "strategy.tp" in errs and "strategy.schedule" in errs


DEEPSEEK = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_act": "silu", "hidden_size": 7168,
            "intermediate_size": 18432, "kv_lora_rank": 512, "moe_intermediate_size": 2048, "n_routed_experts": 256,
            "n_shared_experts": 1, "num_attention_heads": 128, "num_experts_per_tok": 8, "num_hidden_layers": 61,
            "num_key_value_heads": 128, "num_nextn_predict_layers": 1, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64, "scoring_func": "sigmoid", "v_head_dim": 128, "vocab_size": 129280,
            "first_k_dense_replace": 3}


def test_hf_import_paste_and_upload():
    at = open_fold(open_page("pages/model.py"), "hf.box")
    at.text_area(key="hf.paste").set_value(json.dumps(DEEPSEEK))
    at.button(key="hf.import").click().run()
    assert not at.exception
    m = scenario(at)["model"]
    assert m["attention"] == "mla" and m["num_experts"] == 256 and m["mtp_layers"] == 1
    assert "Imported" in texts(at.success)
    assert "671" in metric(at, "Parameters (total)")
    llama = {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
             "intermediate_size": 8192, "vocab_size": 128256, "hidden_act": "silu", "tie_word_embeddings": True,
             "_name_or_path": "meta-llama/Llama-3.2-1B"}
    at.file_uploader(key="hf.upload").upload("config.json", json.dumps(llama).encode(), "application/json").run()
    assert scenario(at)["model"]["name"] == "Llama-3.2-1B" and scenario(at)["model"]["tie_embeddings"] is True


@pytest.mark.parametrize("paste, needle", [("{oops", "not valid JSON"), ("[]", "JSON object"),
                                           ('{"hidden_size": 4096}', "missing"),
                                           (json.dumps({**DEEPSEEK, "hidden_act": "tanh"}), "unsupported hidden_act")])
def test_hf_import_hostile_paste(paste, needle):
    at = open_fold(open_page("pages/model.py"), "hf.box")
    at.text_area(key="hf.paste").set_value(paste)
    at.button(key="hf.import").click().run()
    assert not at.exception
    assert "Hugging Face import failed" in texts(at.error) and needle in texts(at.error)
    assert scenario(at)["model"] == size_canonical("small")["model"]


# ---- estimate ------------------------------------------------------------------------------
def test_estimate_headline_pins_and_downloads():
    at = open_page("pages/estimate.py")
    for label in ("Step time", "Throughput", "MFU", "HFU", "Allocated peak", "Cost / 1M tokens", "Time to train"):
        assert metric(at, label) not in ("", "—")
    assert "Fits in memory" in texts(at.success)
    assert "Uncertainty range" in texts(at.caption)
    labels = [b.label for b in at.get("download_button")]
    assert "Report (JSON)" in labels and "Report (CSV)" in labels
    open_fold(at, "pin.box").button(key="pin.add").click().run()
    at.switch_page("pages/home.py").run()
    at.button(key="size.medium").click().run()
    at.switch_page("pages/estimate.py").run()
    assert not at.exception
    table = at.dataframe[-1].value
    assert list(table["scenario"]) [-1] == "current (unpinned)" and len(table) == 2
    assert table["tok/s/GPU"].iloc[0] != table["tok/s/GPU"].iloc[1]


def test_estimate_does_not_fit_verdict():
    at = open_page("pages/strategy.py")
    widget(at, "strategy.tp").set_value(1).run()
    at.switch_page("pages/estimate.py").run()
    assert "Does not fit" in texts(at.error)
    memory = _expander(at, "Memory per pipeline stage")
    assert memory.proto.expanded and len(at.get("vega_lite_chart")) == 3  # it shows which stage overflows


def test_estimate_per_stage_memory_of_a_fitting_step_is_drawn_on_demand():
    at = open_page("pages/estimate.py", preset="medium")
    assert "Fits in memory" in texts(at.success)
    assert not _expander(at, "Memory per pipeline stage").proto.expanded
    assert len(at.get("vega_lite_chart")) == 2 and not at.dataframe  # breakdown and waterfall only
    open_fold(at, "est.memory.fits")
    assert len(at.get("vega_lite_chart")) == 3 and list(at.dataframe[0].value["stage"]) == [0, 1, 2, 3]


# ---- timeline ------------------------------------------------------------------------------
def test_timeline_schedule_switcher_changes_the_scenario():
    at = open_page("pages/timeline.py", preset="medium")
    sw = at.button_group[0]
    sw.set_value("1f1b").run()
    assert not at.exception
    s = scenario(at)["strategy"]
    assert s["schedule"] == "1f1b" and s["vpp"] == 1
    assert decode_token(at.query_params["s"])[0]["strategy"]["schedule"] == "1f1b"
    at.button_group[0].set_value("interleaved").run()
    assert scenario(at)["strategy"]["schedule"] == "interleaved" and scenario(at)["strategy"]["vpp"] == 5  # restored


@pytest.mark.parametrize("gbs, needle", [(32, "spans shown"), (512, f"more than {MAX_EXACT_SPANS:,}")])
def test_timeline_draws_spans_or_aggregates(gbs, needle):
    cfg = size_canonical("medium")
    cfg["strategy"]["global_batch_size"] = gbs
    at = open_page("pages/timeline.py", s=encode_token(cfg))
    assert needle in texts(at.caption)
    # the binned view splits each bar by phase, and says so
    assert ("each bar split by phase" in texts(at.caption)) == (gbs == 512)


def test_timeline_refuses_an_inconsistent_schedule():
    at = open_page("pages/timeline.py")  # small: pp = 1
    at.button_group[0].set_value("interleaved").run()
    assert not at.exception
    assert "Cannot switch to interleaved" in texts(at.error)
    assert scenario(at)["strategy"]["schedule"] == "1f1b"


# ---- system tables -------------------------------------------------------------------------
def test_gemm_table_add_and_clear():
    at = open_page("pages/system.py")
    assert "gemm.add" not in [b.key for b in at.button]  # an empty table's group is folded: no grid sent
    open_fold(at, f"grp{at.session_state['cfg.gen.system']}.system.gemm_table")
    at.button(key="gemm.add").click().run()
    assert not at.exception
    assert len(scenario(at)["system"]["efficiency"]["gemm_table"]) == 1
    assert "s" in at.query_params
    at.button(key="gemm.add").click().run()
    assert len(scenario(at)["system"]["efficiency"]["gemm_table"]) == 2
    at.button(key="gemm.clear").click().run()
    assert scenario(at)["system"]["efficiency"]["gemm_table"] == []


def test_calibration_rejects_garbage():
    at = open_page("pages/calibration.py")
    at.file_uploader(key="cal.gemm").upload("sweep.csv", b"this,is\nnot,a sweep\n", "text/csv")
    at.run()
    at.button(key="cal.run").click().run()
    assert not at.exception
    assert "Calibration failed" in texts(at.error)


# ---- engine failures become messages ---------------------------------------------------------
def test_engine_failures_are_messages_not_tracebacks(monkeypatch):
    import streamlit as st

    import simengine.api as api
    from simengine.sim.errors import DeadlockError

    def boom(*_a, **_k):
        raise RuntimeError("synthetic engine failure")

    def deadlock(*_a, **_k):
        raise DeadlockError([(0, "compute", "F", 0, 0)])

    monkeypatch.setattr(api, "estimate_json", boom)
    monkeypatch.setattr(api, "simulate", deadlock)
    st.cache_data.clear()
    try:
        at = open_page("pages/estimate.py")
        assert "could not estimate" in texts(at.error) and "synthetic engine failure" in texts(at.error)
        at.switch_page("pages/timeline.py").run()
        assert not at.exception and "deadlocks" in texts(at.error)
        at.switch_page("pages/home.py").run()
        assert not at.exception and "could not estimate" in texts(at.error)
    finally:
        st.cache_data.clear()


def test_chrome_trace_is_valid_json():
    from ui.engine import chrome_trace

    from ui.state import DEFAULT_SIZE  # noqa: F401 — the module imports without a running app
    from ui.config_io import dumps

    trace = json.loads(chrome_trace(dumps(size_canonical("medium")), "probe"))
    kinds = {e["ph"] for e in trace["traceEvents"]}
    assert {"M", "X"} <= kinds and trace["otherData"]["name"] == "probe"


def test_timeline_and_estimate_show_the_same_bubble_on_medium():
    """The defect that opened the redesign: Estimate 0.95 % against Timeline 4.5 % on medium. Both
    pages now show the critical rank's bubble from the one metrics module."""
    from streamlit.testing.v1 import AppTest

    from simengine import api, presets
    from ui.units import fmt_pct

    rep = api.estimate(presets.size_scenario("medium"))
    at = AppTest.from_file(str(ROOT / "pages" / "timeline.py"), default_timeout=TIMEOUT)
    at.query_params["preset"] = "medium"
    at.run()
    assert not at.exception
    shown = {m.label: m.value for m in at.metric}
    assert shown["Bubble"] == fmt_pct(rep.bubble_fraction)
    assert any(f"critical rank ({rep.critical_rank})" in c.value for c in at.caption)


@pytest.mark.parametrize("page", ["pages/model.py", "pages/strategy.py", "pages/estimate.py", "pages/timeline.py"])
def test_this_rounds_new_scenario_kinds_render(page):
    """This round's new scenario kinds through the pages a user opens: a packed LoRA fine-tune, and a
    hybrid Mamba-2 / MoE stack (Nemotron 3 Nano), and one with a latent MoE and a repeated MTP module
    (Nemotron 3 Super) — no exception, no error, the estimate shown."""
    from simengine.presets import load_preset

    lora = size_canonical("small")
    lora["strategy"].update(peft="lora", lora_targets="all", packed_doc_len=512)
    hybrid = size_canonical("small")
    hybrid["model"] = load_preset("models", "nemotron3-nano-30b-a3b")
    hybrid["system"] = dict(load_preset("systems", "h100-sxm5-80gb"), num_gpus=16)
    hybrid["strategy"].update(tp=1, pp=1, ep=8, etp=1, vpp=1, schedule="1f1b", micro_batch_size=1,
                              global_batch_size=64, seq_len=4096, recompute="full", zero_stage=1)
    latent = size_canonical("small")   # Nemotron 3 Super: a latent MoE with a repeated MTP module
    latent["model"] = load_preset("models", "nemotron3-super-120b-a12b")
    latent["system"] = dict(load_preset("systems", "b200-sxm-180gb"), num_gpus=64)
    latent["strategy"].update(tp=1, pp=1, ep=64, etp=1, vpp=1, schedule="1f1b", micro_batch_size=1, dtype="fp8",
                              global_batch_size=64, seq_len=8192, recompute="full", zero_stage=1)
    for cfg in (lora, hybrid, latent):
        at = open_page(page, s=encode_token(cfg))
        assert not at.error, [e.value for e in at.error]
        if page == "pages/estimate.py":
            assert metric(at, "Step time")


def test_fp8_recipe_error_sits_under_precision_and_clears_on_a_torch_stack():
    """strategy.fp8_recipe (workload/fp8_recipes.py): rowwise is torchao's recipe, so on the default
    Megatron + TE stack the error names the field in its own group; the torch stack takes it."""
    at = open_groups(open_page("pages/strategy.py"), "strategy", ["Precision", "Software"])
    widget(at, "strategy.dtype").set_value("fp8").run()
    widget(at, "strategy.fp8_recipe").set_value("rowwise").run()
    assert "fp8_recipe='rowwise' is torchao's Float8 recipe" in texts(_expander(at, "Precision and memory").error)
    widget(at, "strategy.framework").set_value("torch-compile").run()
    assert not at.error and scenario(at)["strategy"]["fp8_recipe"] == "rowwise"
    at.switch_page("pages/estimate.py").run()
    assert not at.exception and not at.error


def test_changing_the_framework_brings_its_defaults_and_keeps_what_the_user_chose():
    """The editor holds every field explicitly, so a framework change must re-default the
    stack-dependent fields the user left alone (config/strategy.py ``follow_framework``):
    megatron-te's p2p overlap and fused kernels do not follow the strategy onto a torch stack."""
    at = open_groups(open_page("pages/strategy.py"), "strategy", ["Software", "Schedule", "Precision"])
    s = scenario(at)["strategy"]
    assert s["framework"] == "megatron-te" and s["overlap_p2p_comm"] and s["fused_cross_entropy"]
    widget(at, "strategy.gradient_accumulation_fusion").set_value(False).run()  # the user's own choice
    widget(at, "strategy.framework").set_value("torch-native").run()
    s = scenario(at)["strategy"]
    assert not at.error and s["framework"] == "torch-native"
    assert s["overlap_p2p_comm"] is False and s["fused_cross_entropy"] is False
    assert s["gradient_accumulation_fusion"] is False
    widget(at, "strategy.overlap_p2p_comm").set_value(True).run()  # chosen on the torch stack: it stays
    widget(at, "strategy.framework").set_value("torch-compile").run()
    assert scenario(at)["strategy"]["overlap_p2p_comm"] is True
    widget(at, "strategy.framework").set_value("megatron-te").run()
    s = scenario(at)["strategy"]
    assert s["overlap_p2p_comm"] is True and s["fused_cross_entropy"] is True
