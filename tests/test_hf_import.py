"""Hugging Face config.json → ModelSpec in the engine (simengine/importers, api.import_hf_config):
real published config.json files (tests/data/hf/, sources in the README there), the parameter
counts their model cards state, and what the importer says it could not map."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simengine import api
from simengine.config import ModelSpec
from simengine.presets import load_preset
from simengine.workload.params import count_parameters

HF = Path(__file__).resolve().parent / "data" / "hf"
REPO = Path(__file__).resolve().parents[1]


def load(name: str) -> dict:
    return json.loads((HF / f"{name}.json").read_text(encoding="utf-8"))


def params(model: dict) -> tuple[int, int]:
    return count_parameters(ModelSpec.model_validate(model))


def test_gpt2_maps_to_its_124m_parameters():
    res = api.import_hf_config(load("gpt2"))
    m = res.model
    assert (m["hidden_size"], m["num_layers"], m["num_attention_heads"], m["vocab_size"]) == (768, 12, 12, 50257)
    assert (m["norm"], m["position_embedding"], m["max_position_embeddings"]) == ("layernorm", "learned", 1024)
    assert (m["activation"], m["tie_embeddings"], m["linear_bias"], m["ffn_hidden_size"]) == ("gelu", True, True, 3072)
    assert (m["hidden_dropout"], m["attention_dropout"]) == (0.1, 0.1)
    # GPT2LMHeadModel: sum(p.numel()) = 124,439,808 (wte 50257·768 + wpe 1024·768 + 12 blocks + ln_f)
    total, active = params(m)
    assert total == active
    assert total == pytest.approx(124_439_808, rel=1e-4)  # was 190 M with the Llama defaults
    assert res.unmapped == []


@pytest.mark.parametrize("name, preset", [("llama-3-8b", "llama3-8b"), ("mixtral-8x7b", "mixtral-8x7b"),
                                          ("deepseek-v3", "deepseek-v3"), ("qwen3-30b-a3b", "qwen3-30b-a3b")])
def test_real_configs_match_the_catalogue(name, preset):
    res = api.import_hf_config(load(name))
    ref = ModelSpec.model_validate(load_preset("models", preset)).model_dump(mode="json")
    for k in ref:
        if k not in ("name", "source"):
            assert res.model[k] == ref[k], k
    assert res.unmapped == [], res.unmapped


@pytest.mark.parametrize("name, total_b, active_b", [("llama-3-8b", 8.03, 8.03), ("mixtral-8x7b", 46.7, 12.9),
                                                      ("deepseek-v3", 671.0, 37.6), ("qwen3-30b-a3b", 30.5, 3.35)])
def test_published_parameter_counts(name, total_b, active_b):
    total, active = params(api.import_hf_config(load(name)).model)
    assert total / 1e9 == pytest.approx(total_b, abs=0.06) and active / 1e9 == pytest.approx(active_b, abs=0.06)


def test_unknown_family_names_every_field_it_could_not_map():
    cfg = dict(load("gpt2"), model_type="gpt_neox_like", rotary_pct=0.25, use_parallel_residual=True)
    res = api.import_hf_config(cfg)
    assert res.unmapped == ["rotary_pct", "use_parallel_residual"]
    text = " ".join(res.warnings)
    assert "gpt_neox_like" in text and "not a family this importer knows" in text
    assert "rotary_pct" in text and "use_parallel_residual" in text
    # partial_rotary_factor is read (Nemotron, Phi): priced as full RoPE, and said so
    res = api.import_hf_config(dict(cfg, partial_rotary_factor=0.25))
    assert "partial_rotary_factor" not in res.unmapped
    assert any("partial_rotary_factor=0.25" in w for w in res.warnings)


def test_features_not_modelled_are_warned():
    cfg = dict(load("mixtral-8x7b"), sliding_window=4096)  # sliding windows are modelled now
    assert api.import_hf_config(cfg).model["attention_window"] == 4096
    assert api.import_hf_config(load("mixtral-8x7b")).model.get("attention_window") in (None, 0)
    assert any("add_cross_attention" in w for w in api.import_hf_config(dict(cfg, add_cross_attention=True)).warnings)
    assert any("quantization_config" in w for w in api.import_hf_config(load("deepseek-v3")).warnings)


def test_bad_input_is_a_config_error_naming_config_json():
    with pytest.raises(api.ConfigError) as e:
        api.import_hf_config(dict(load("llama-3-8b"), hidden_act="tanh"))
    assert e.value.field == "config.json" and "hidden_act" in str(e.value)
    with pytest.raises(api.ConfigError):
        api.import_hf_config(dict(load("gpt2"), resid_pdrop=1.5))


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "simengine", *args], cwd=REPO, capture_output=True, text=True, input=stdin)


def test_cli_import_hf_prints_the_model_spec_and_warnings(tmp_path):
    p = cli("import-hf", str(HF / "gpt2.json"))
    assert p.returncode == 0, p.stderr
    model = json.loads(p.stdout)
    assert model["position_embedding"] == "learned"
    assert all(line.startswith("warning: ") for line in p.stderr.splitlines()) and "n_inner" in p.stderr
    # the output is a valid --model file
    path = tmp_path / "gpt2-model.json"
    path.write_text(p.stdout)
    e = cli("estimate", "--model", str(path), "--system", "small", "--strategy", "small", "--json")
    assert e.returncode == 0, e.stderr
    assert json.loads(e.stdout)["num_parameters"] == params(model)[0]


def test_cli_import_hf_json_and_bad_input():
    p = cli("import-hf", str(HF / "deepseek-v3.json"), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert set(out) == {"model", "warnings", "unmapped"} and out["model"]["attention"] == "mla"
    for args, stdin, needle in ((("import-hf", "/no/such/config.json"), None, "cannot read"),
                                (("import-hf", "-"), "{not json", "not valid JSON"),
                                (("import-hf", "-"), json.dumps({"model_type": "t5"}), "missing")):
        p = cli(*args, stdin=stdin)
        assert p.returncode == 2 and p.stdout == "", (args, p.stdout)
        assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("error: ") and needle in p.stderr


@pytest.mark.parametrize("key", ["partial_rotary_factor", "resid_pdrop", "attn_pdrop", "attention_dropout",
                                 "hidden_dropout", "embd_pdrop"])
@pytest.mark.parametrize("value", ["0.5", [0.5], {"x": 1}])
def test_a_fraction_given_as_text_or_a_list_is_said_so(key, value):
    """'"partial_rotary_factor": "0.5"' was an internal TypeError (exit 1): compared before its type was checked."""
    from simengine.importers.hf import HFImportError

    cfg = {k: v for k, v in load("gpt2").items() if k not in ("resid_pdrop", "attn_pdrop")}   # (read first when given)
    with pytest.raises(HFImportError, match=f"'{key}' must be a"):
        api.import_hf_config(dict(cfg, **{key: value}))


def test_activation_defaults_and_gemmas_gated_gelu_are_said():
    """No hidden_act: SwiGLU assumed without a word; Gemma 3's hidden_activation listed as unmapped
    (SwiGLU assumed); Gemma 2's gelu_pytorch_tanh mapped to a plain GELU MLP, though Gemma's MLP is
    gated; gpt_oss said "no biases" beside linear_bias true."""
    base = {k: v for k, v in load("gpt2").items() if k not in ("activation_function", "model_type")}
    res = api.import_hf_config(base)
    assert res.model["activation"] == "swiglu" and any("no 'hidden_act'" in w for w in res.warnings)
    for key in ("hidden_act", "hidden_activation"):
        gemma = api.import_hf_config(dict(base, model_type="gemma2", **{key: "gelu_pytorch_tanh"}))
        assert gemma.model["activation"] == "swiglu" and key not in gemma.unmapped
        assert any("GeGLU" in w for w in gemma.warnings)
    assert api.import_hf_config(dict(base, hidden_act="gelu_new")).model["activation"] == "gelu"
    oss = api.import_hf_config(dict(base, model_type="gpt_oss", sliding_window=128))   # (as its configs give it)
    assert oss.model["linear_bias"] is True and not any("no biases" in w for w in oss.warnings)
