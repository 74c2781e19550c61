"""Hugging Face config.json → ModelSpec (ui/hf_import.py): the four families and hostile input."""

from __future__ import annotations

import json

import pytest

from simengine.config import ModelSpec
from simengine.presets import load_preset
from simengine.workload.params import count_parameters
from ui.hf_import import HFImportError, hf_to_model

LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
             "max_position_embeddings": 8192, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
             "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "tie_word_embeddings": False,
             "torch_dtype": "bfloat16", "vocab_size": 128256}
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096, "intermediate_size": 14336,
           "max_position_embeddings": 32768, "model_type": "mixtral", "num_attention_heads": 32, "num_experts_per_tok": 2,
           "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8, "rms_norm_eps": 1e-05,
           "tie_word_embeddings": False, "vocab_size": 32000}
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_act": "silu", "hidden_size": 7168,
               "intermediate_size": 18432, "kv_lora_rank": 512, "max_position_embeddings": 163840, "moe_intermediate_size": 2048,
               "moe_layer_freq": 1, "n_group": 8, "n_routed_experts": 256, "n_shared_experts": 1, "num_attention_heads": 128,
               "num_experts_per_tok": 8, "num_hidden_layers": 61, "num_key_value_heads": 128, "num_nextn_predict_layers": 1,
               "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-06,
               "scoring_func": "sigmoid", "tie_word_embeddings": False, "topk_group": 4, "v_head_dim": 128,
               "vocab_size": 129280, "first_k_dense_replace": 3}
QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "decoder_sparse_step": 1, "head_dim": 128, "hidden_act": "silu",
             "hidden_size": 2048, "intermediate_size": 6144, "max_position_embeddings": 40960, "mlp_only_layers": [],
             "model_type": "qwen3_moe", "moe_intermediate_size": 768, "num_attention_heads": 32, "num_experts": 128,
             "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
             "tie_word_embeddings": False, "vocab_size": 151936}


@pytest.mark.parametrize("cfg, preset", [(LLAMA3_8B, "llama3-8b"), (MIXTRAL, "mixtral-8x7b"),
                                         (DEEPSEEK_V3, "deepseek-v3"), (QWEN3_MOE, "qwen3-30b-a3b")])
def test_families_match_the_catalogue(cfg, preset):
    model, _ = hf_to_model(cfg)
    ref = ModelSpec.model_validate(load_preset("models", preset)).model_dump(mode="json")
    for k in ref:
        if k not in ("name", "source"):
            assert model[k] == ref[k], k
    assert count_parameters(ModelSpec.model_validate(model)) == count_parameters(ModelSpec.model_validate(ref))


def test_published_counts():
    total, active = count_parameters(ModelSpec.model_validate(hf_to_model(DEEPSEEK_V3)[0]))
    assert round(total / 1e9) == 671 and round(active / 1e9) == 38
    assert round(count_parameters(ModelSpec.model_validate(hf_to_model(LLAMA3_8B)[0]))[0] / 1e9, 2) == 8.03


def test_text_and_bytes_input_and_notes():
    model, notes = hf_to_model(json.dumps(MIXTRAL).encode())
    assert model["num_experts"] == 8 and model["moe_ffn_hidden_size"] == 14336
    assert any("moe_intermediate_size" in n for n in notes)
    model, _ = hf_to_model("\ufeff" + json.dumps(LLAMA3_8B))
    assert model["attention"] == "gqa" and model["num_kv_heads"] == 8


def test_mha_gelu_tied_and_text_config():
    cfg = {"hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16, "vocab_size": 50000,
           "hidden_act": "gelu_new", "tie_word_embeddings": True, "layer_norm_eps": 1e-5}
    model, notes = hf_to_model({"model_type": "wrapper", "text_config": cfg})
    assert model["attention"] == "mha" and model["activation"] == "gelu" and model["tie_embeddings"] is True
    assert model["norm"] == "layernorm" and model["ffn_hidden_size"] == 8192
    assert any("4 x hidden_size" in n for n in notes)


def test_qwen2_moe_shared_expert_width():
    cfg = dict(QWEN3_MOE, model_type="qwen2_moe", num_experts=60, num_experts_per_tok=4, moe_intermediate_size=1408,
               shared_expert_intermediate_size=5632, num_hidden_layers=24, hidden_size=2048, num_attention_heads=16,
               num_key_value_heads=16, head_dim=None)
    model, _ = hf_to_model(cfg)
    assert model["shared_expert_ffn_hidden_size"] == 5632 and model["num_shared_experts"] == 1


BAD = [
    ("", "empty"),
    ("   ", "empty"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('"text"', "JSON object"),
    ("{}", "missing"),
    (json.dumps({**LLAMA3_8B, "hidden_size": True}), "must be an integer"),
    (json.dumps({**LLAMA3_8B, "hidden_size": "4096"}), "must be an integer"),
    (json.dumps({**LLAMA3_8B, "hidden_size": 4096.5}), "whole number"),
    (json.dumps({**LLAMA3_8B, "num_hidden_layers": -1}), ">= 1"),
    (json.dumps({**LLAMA3_8B, "vocab_size": 10**15}), "implausibly large"),
    (json.dumps({**LLAMA3_8B, "hidden_act": "tanh"}), "unsupported hidden_act"),
    (json.dumps({**LLAMA3_8B, "hidden_act": ["silu"]}), "must be a string"),
    (json.dumps({**LLAMA3_8B, "tie_word_embeddings": "yes"}), "true or false"),
    (json.dumps({**LLAMA3_8B, "num_key_value_heads": 5}), "invalid model"),
    (json.dumps({**LLAMA3_8B, "hidden_size": 4100}), "not divisible"),
    (json.dumps({**MIXTRAL, "num_experts_per_tok": None}), "num_experts_per_tok"),
    (json.dumps({**MIXTRAL, "num_experts_per_tok": 9}), "top_k"),
    (json.dumps({**DEEPSEEK_V3, "v_head_dim": None}), "v_head_dim"),
    (json.dumps({**DEEPSEEK_V3, "scoring_func": "noaux_tc"}), "scoring_func"),
    ("[" * 50_000 + "]" * 50_000, "JSON"),
    ("x" * 2_000_001, "limit"),
    (b"\xff\xfe\x00garbage", "UTF-8"),
]


@pytest.mark.parametrize("text, needle", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_hostile_input_gives_one_clear_message(text, needle):
    with pytest.raises(HFImportError) as e:
        hf_to_model(text)
    assert needle.lower() in str(e.value).lower()


def test_pasted_config_text_outlives_a_trip_to_another_page():
    """The paste box was empty on coming back: Streamlit drops a widget's state on a page the user leaves."""
    from streamlit.testing.v1 import AppTest

    from app_walk import ROOT

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/model.py")
    at.session_state["hf.box"] = True   # the import box (ui/fold.py group) opened, as a click would
    at.run()
    text = '{"hidden_size": 4096, "num_hidden_layers": 32}'
    at.text_area(key="hf.paste").input(text).run()
    at.switch_page("pages/estimate.py").run()
    at.switch_page("pages/model.py").run()
    assert not at.exception
    assert at.text_area(key="hf.paste").value == text


def test_a_config_without_a_name_is_not_imported_as_imported_imported():
    """A pasted config.json with no architectures or name read "Imported imported from pasted config.json"."""
    from streamlit.testing.v1 import AppTest

    from app_walk import ROOT

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/model.py")
    at.session_state["hf.box"] = True
    at.run()
    at.text_area(key="hf.paste").input(json.dumps({"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                                                   "vocab_size": 32000, "intermediate_size": 11008})).run()
    at.button(key="hf.import").click().run()
    said = " ".join(str(s.value) for s in at.success)
    assert "Imported the model from" in said and "imported imported" not in said.lower()


def test_an_emptied_or_changed_upload_drops_the_previous_files_message():
    """A message queued for the import box by a run the next event cut short (the uploader emptied,
    or another file dropped, while the page was still drawing the first) was drawn under the next
    event: "Imported … from the previous file" under an empty box. The box's messages are the
    latest event's alone (state.drop_notices)."""
    from streamlit.testing.v1 import AppTest

    from app_walk import ROOT

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/model.py")
    at.session_state["hf.box"] = True
    at.run()
    llama = json.dumps(LLAMA3_8B).encode()
    at.file_uploader(key="hf.upload").upload("llama-3-8b.json", llama, "application/json").run()
    assert "llama-3-8b.json" in " ".join(str(s.value) for s in at.success)
    stale = [("success", "Imported the model from previous.json.", "hf")]   # queued, never drawn: the run was cut short
    at.session_state["notices"] = stale
    at.file_uploader(key="hf.upload").clear().run()
    assert not at.exception
    shown = [str(m.value) for m in (*at.success, *at.error, *at.info)]
    assert not any("previous.json" in m or "llama-3-8b.json" in m for m in shown), shown
    at.session_state["notices"] = stale
    at.file_uploader(key="hf.upload").upload("other.json", llama, "application/json").run()
    said = " ".join(str(s.value) for s in at.success)
    assert "other.json" in said and "previous.json" not in said, said
