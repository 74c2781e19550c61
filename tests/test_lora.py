"""LoRA fine-tuning (workload/lora.py): frozen base weights lose their weight-gradient GEMMs, their
gradients, optimizer states and DP traffic; adapters train beside the target linears."""

from __future__ import annotations

import pytest
from scenarios import make, scenario_dict

from simengine import api
from simengine.config.model import ModelSpec
from simengine.cost.static_memory import stage_params
from simengine.errors import ConfigError
from simengine.estimate import model_flops_per_step
from simengine.presets import load_preset
from simengine.workload.builder import build_workload
from simengine.workload.lora import adapter_params
from simengine.workload.ops import Collective, Gemm
from simengine.workload.params import gemm_parameters_active

NODE = {"num_gpus": 8}
STRAT = {"tp": 2, "pp": 1, "micro_batch_size": 1, "global_batch_size": 32, "seq_len": 4096}


def _sc(peft="lora", targets="qkv", **strategy):
    return make("llama2-7b", system=NODE, strategy={**STRAT, "peft": peft, "lora_targets": targets, **strategy})


def _gemms(ph):
    return [op.name for op in ph.fwd + ph.bwd + ph.wgt if isinstance(op, Gemm)]


@pytest.mark.parametrize("targets, adapted", [("qkv", {"qkv"}), ("all", {"qkv", "proj", "fc1", "fc2"})])
def test_frozen_weights_have_no_wgrad_and_targets_get_adapters(targets, adapted):
    wl = build_workload(_sc(targets=targets))
    names = [n for b in ("attn", "mlp", "head") for n in _gemms(wl.blocks[b])]
    base_wgrads = [n for n in names if n.startswith("wgrad:") and ":lora_" not in n]
    assert base_wgrads == []
    fams = {n.split(":")[1] for n in names if ":lora_" in n}
    assert fams == adapted
    for fam in adapted:  # A and B, forward / dgrad / wgrad each
        assert sum(1 for n in names if n.split(":")[1] == fam and ":lora_" in n) == 6
    assert not any(op.name == "embed-wgrad" for op in wl.blocks["embed"].wgt)


def test_a_frozen_column_linear_is_not_gathered_again_in_backward():
    """Under SP a column-parallel linear re-gathers its input for its wgrad; frozen, only the
    adapted QKV (whose adapter's wgrad reads that input) still does."""
    def regathers(sc):
        return {op.name for b in ("attn", "mlp", "head") for op in build_workload(sc).blocks[b].bwd
                if isinstance(op, Collective) and op.name.startswith("ag-bwd:") and op.overlap_with.startswith("dgrad:")}
    full = regathers(_sc(peft="none", sequence_parallel=True))
    lora = regathers(_sc(sequence_parallel=True))
    assert {"ag-bwd:qkv", "ag-bwd:fc1:mlp", "ag-bwd:lm_head"} <= full
    assert lora == {"ag-bwd:qkv"}


def test_adapter_parameters_llama2_7b():
    """Rank 32 on the fused QKV of Llama-2-7B: 32 · (4096 + 3·4096) per layer, 32 layers = 16.8 M,
    Hu et al. 2021's count r·(d_in + d_out) per adapted matrix."""
    m = ModelSpec.model_validate(load_preset("models", "llama2-7b"))
    attn, mlp = adapter_params(m, "qkv", 32)
    assert (attn, mlp) == (32 * (4096 + 3 * 4096), 0)
    sc = _sc()
    p = stage_params(sc, build_workload(sc).ranks[0])
    assert p.dense * sc.strategy.tp == 32 * attn == 16_777_216
    full = stage_params(_sc(peft="none"), build_workload(_sc(peft="none")).ranks[0])
    assert p.frozen == full.total and p.frozen_ends == full.ends and p.expert == 0.0


def test_model_flops_are_forward_and_input_gradients_of_the_base():
    """6·N → 4·N for the frozen weights, 6 per adapter parameter, attention unchanged."""
    sc, base = _sc(), _sc(peft="none")
    m = sc.model
    n = gemm_parameters_active(m, sc.vocab_padded)
    a = m.num_layers * adapter_params(m, "qkv", 32)[0]
    tokens = sc.tokens_per_step
    assert model_flops_per_step(sc) == pytest.approx(model_flops_per_step(base) - tokens * (2 * n - 6 * a), rel=1e-12)


def test_lora_is_faster_and_smaller_than_the_full_fine_tune():
    full, lora = api.estimate(_sc(peft="none")), api.estimate(_sc())
    assert lora.step_time_s < full.step_time_s
    assert lora.breakdown_s["dp_comm"] < full.breakdown_s["dp_comm"]
    f, lo = full.memory_by_stage[0], lora.memory_by_stage[0]
    assert lo.weights_gib == pytest.approx(f.weights_gib, rel=0.01)  # frozen bf16 + tiny adapters
    assert lo.grads_gib < 0.01 * f.grads_gib and lo.optimizer_gib < 0.01 * f.optimizer_gib
    assert lo.activations_gib < f.activations_gib  # frozen FC1 / FC2 / LM head keep no input


def test_more_targets_cost_more():
    qkv, every = api.estimate(_sc(targets="qkv")), api.estimate(_sc(targets="all"))
    assert every.step_time_s > qkv.step_time_s and every.peak_memory_gib > qkv.peak_memory_gib


@pytest.mark.parametrize("model, strategy, text", [
    ("mixtral-8x7b", {"ep": 2}, "dense transformers only"),
    ("llama2-7b", {"zero_stage": 3}, "ZeRO-3"),
    ("llama2-7b", {"dtype": "fp8", "zero_stage": 1, "fp8_param_gather": True}, "frozen"),
])
def test_what_lora_is_not_modelled_for_is_refused_naming_the_field(model, strategy, text):
    cfg = scenario_dict(model, system=NODE, strategy={**STRAT, "peft": "lora", **strategy})
    with pytest.raises(ConfigError) as e:
        api.estimate(cfg)
    assert any(f == "strategy.peft" and text in msg for f, msg in e.value.issues)


def test_the_report_says_how_many_parameters_train():
    from ui.labels import trained_note

    full, lora = api.estimate(_sc(peft="none")), api.estimate(_sc())
    assert full.num_trainable_parameters == full.num_parameters
    assert lora.num_trainable_parameters == 16_777_216 and lora.num_parameters == full.num_parameters
    assert trained_note(lora.model_dump()) == ", 16.78 M trained" and trained_note(full.model_dump()) == ""


def test_cli_prints_the_trained_parameters(capsys):
    from simengine.cli import main

    assert main(["estimate", "--model", "llama2-7b", "--system", "h100-sxm5-80gb", "--strategy", "small",
                 "--set", "strategy.peft=lora"]) == 0
    assert "16.8 M trained" in capsys.readouterr().out
