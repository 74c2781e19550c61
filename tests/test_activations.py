"""Korthikanti et al. 2022 (arXiv:2205.05198) Table 2: activation memory per transformer layer,
reproduced exactly for the GPT layer they analyse (MHA, GELU 4h MLP, LayerNorm, dropout,
unfused softmax attention, 16-bit activations)."""

import pytest

from simengine.cost.activations import attention_activations, layer_input, mlp_activations
from simengine.workload.dims import dims_of

from scenarios import make

GPT = {"hidden_dropout": 0.1, "attention_dropout": 0.1}


def layer_bytes(tp, sp, recompute="none", s=2048, b=1):
    sc = make("gpt3-175b", "a100-sxm4-80gb", model=GPT,
              system={"num_gpus": tp}, strategy={"tp": tp, "sequence_parallel": sp, "seq_len": s,
                                                  "micro_batch_size": b, "global_batch_size": b,
                                                  "attention_impl": "unfused"})
    d = dims_of(sc)
    att, mlp = attention_activations(d, sc.model), mlp_activations(d, d.ffn)
    if recompute == "selective":
        return att.saved - att.selective + mlp.saved
    if recompute == "full":
        return layer_input(d)
    return att.saved + mlp.saved


S, H, A = 2048, 12288, 96


@pytest.mark.parametrize("b", [1, 2])
def test_no_parallelism(b):
    assert layer_bytes(1, False, b=b) == S * b * H * (34 + 5 * A * S / H)


@pytest.mark.parametrize("t", [2, 4, 8])
def test_tensor_parallel(t):
    assert layer_bytes(t, False) == pytest.approx(S * H * (10 + 24 / t + 5 * A * S / (H * t)), rel=1e-12)


@pytest.mark.parametrize("t", [2, 4, 8])
def test_tensor_and_sequence_parallel(t):
    assert layer_bytes(t, True) == pytest.approx(S * H / t * (34 + 5 * A * S / H), rel=1e-12)


@pytest.mark.parametrize("t", [2, 8])
def test_tp_selective_recompute(t):
    assert layer_bytes(t, False, "selective") == pytest.approx(S * H * (10 + 24 / t), rel=1e-12)


@pytest.mark.parametrize("t", [2, 8])
def test_tp_sp_selective_recompute(t):
    assert layer_bytes(t, True, "selective") == pytest.approx(S * H * 34 / t, rel=1e-12)


def test_full_recompute_keeps_the_input():
    assert layer_bytes(1, False, "full") == 2 * S * H
    assert layer_bytes(8, True, "full") == 2 * S * H / 8


def test_flash_attention_has_no_quadratic_term():
    """With flash attention the per-layer bytes grow linearly in s."""
    def flash(s):
        sc = make("llama3-8b", system={"num_gpus": 1}, strategy={"seq_len": s, "global_batch_size": 1})
        d = dims_of(sc)
        return attention_activations(d, sc.model).saved + mlp_activations(d, d.ffn).saved
    assert flash(8192) == pytest.approx(2 * flash(4096), rel=1e-12)


@pytest.mark.parametrize("t", [2, 4, 8])
def test_fp8_sequence_parallel_saves_the_shard(t):
    """FP8 with TP+SP: TE's LayerNormLinear saves the quantized local shard ``ln_out`` and frees the
    all-gathered ``ln_out_total`` after the forward GEMM, re-gathering in backward
    (TransformerEngine transformer_engine/pytorch/module/layernorm_linear.py _LayerNormLinear.forward
    / backward, ``ln_out_needs_gather``), so every saved tensor of the layer divides by t."""
    def fp8_layer(tp):
        sc = make("llama3-8b", system={"num_gpus": tp}, strategy={"tp": tp, "sequence_parallel": tp > 1, "dtype": "fp8",
                                                                  "seq_len": 4096, "global_batch_size": 1})
        d = dims_of(sc)
        return attention_activations(d, sc.model).saved + mlp_activations(d, d.ffn).saved
    assert fp8_layer(t) * t == pytest.approx(fp8_layer(1), rel=1e-12)


def _head(framework, tp=1, compiled=False):
    from simengine.cost.activations import head_activations
    from simengine.cost.stage import head_ce

    sc = make("llama3-8b", system={"num_gpus": tp},
              strategy={"framework": framework, "tp": tp, "sequence_parallel": tp > 1, "global_batch_size": 1,
                        "fused_cross_entropy": False, "compiled_loss": compiled})
    d = dims_of(sc)
    return head_activations(d, False, head_ce(sc)), d


@pytest.mark.parametrize("framework,tp,compiled,kept,peak", [
    ("torch-native", 1, False, 4, 12),     # aten log_softmax out; + nll grad + log_softmax grad (fp32)
    ("torch-compile", 8, False, 4, 16),    # loss parallel: + zeros_like(x), exp(x), their sum (fp32)
    ("torch-compile", 1, True, 2, 4),      # compiled loss: the bf16 logits kept, the bf16 grad
    ("megatron-te", 1, False, 4, 10),      # Megatron's unfused vocab-parallel CE (unchanged)
])
def test_cross_entropy_bytes_per_logit(framework, tp, compiled, kept, peak):
    """torchtitan's cross_entropy(pred.float(), labels): what it keeps for backward and its backward
    peak, per logit (cost/activations.py head_activations)."""
    head, d = _head(framework, tp, compiled)
    logits = d.tokens * d.vocab
    rest = head.saved - kept * logits   # the final norm's and the LM head's saved inputs
    assert 0 < rest < logits
    assert head.bwd_transient == pytest.approx((peak - kept) * logits, rel=1e-12)
