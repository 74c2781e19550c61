"""Packed sequences (strategy.packed_doc_len): the varlen attention kernel attends within each
document, so attention work grows with the document, not the sequence; nothing else changes."""

from __future__ import annotations

import pytest
from scenarios import make, scenario_dict

from simengine import api
from simengine.errors import ConfigError
from simengine.estimate import model_flops_per_step
from simengine.workload.builder import build_workload
from simengine.workload.ops import Attention

STRAT = {"tp": 1, "pp": 1, "micro_batch_size": 2, "global_batch_size": 16, "seq_len": 8192}


def _sc(doc=None, **strategy):
    return make("llama3-8b", system={"num_gpus": 8}, strategy={**STRAT, "packed_doc_len": doc, **strategy})


def _attn(sc, phase="fwd"):
    (op,) = [o for o in getattr(build_workload(sc).blocks["attn"], phase) if isinstance(o, Attention)]
    return op


def test_the_kernel_runs_one_sequence_per_document():
    op, full = _attn(_sc(1024)), _attn(_sc())
    assert (op.b, op.s_q, op.s_kv) == (2 * 8, 1024, 1024) and (full.b, full.s_q) == (2, 8192)
    # causal pairs: s·(L+1)/2 instead of s·(s+1)/2
    assert op.flops / full.flops == pytest.approx((1024 + 1) / (8192 + 1), rel=1e-12)


def test_a_document_as_long_as_the_sequence_is_no_packing():
    assert api.estimate(_sc(8192)).model_dump() == api.estimate(_sc()).model_dump()


def test_packing_shortens_the_step_and_the_attention_flops_only():
    full, packed = _sc(), _sc(512)
    rf, rp = api.estimate(full), api.estimate(packed)
    assert rp.step_time_s < rf.step_time_s
    assert rp.peak_memory_gib == pytest.approx(rf.peak_memory_gib, rel=1e-12)  # flash keeps per-token state
    m = full.model
    per_token_attn = lambda s: 3 * 2 * s * m.num_attention_heads * (m.qk_head_dim + m.v_dim) * m.num_layers  # noqa: E731
    drop = full.tokens_per_step * (per_token_attn(8192) - per_token_attn(512))
    assert model_flops_per_step(full) - model_flops_per_step(packed) == pytest.approx(drop, rel=1e-12)


@pytest.mark.parametrize("strategy, text", [({"packed_doc_len": 1000}, "must divide seq_len"),
                                            ({"packed_doc_len": 1024, "cp": 2}, "context parallelism")])
def test_what_packing_is_not_modelled_for_is_refused_naming_the_field(strategy, text):
    with pytest.raises(ConfigError) as e:
        api.estimate(scenario_dict("llama3-8b", system={"num_gpus": 8}, strategy={**STRAT, **strategy}))
    assert any(f == "strategy.packed_doc_len" and text in msg for f, msg in e.value.issues)
