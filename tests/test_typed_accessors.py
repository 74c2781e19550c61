"""The typed accessors the type check relies on: ModelSpec.mla / expert_ffn (the optional MLA and
expert widths, narrowed where the validator guarantees them) and the per-source tables of the
published-runs harness (one entry per source) and the framework rows (the strategy's framework
help and defaults come from the row, so a new framework is one file)."""

from __future__ import annotations

import csv
import io

import pytest

from simengine.config import ModelSpec
from simengine.presets import load_preset
from simengine.validation.data import read_text
from simengine.validation.published import SOURCES, published_runs
from simengine.validation.published.evaluate import _METRIC_OF
from simengine.validation.published.settings import SOURCE_SETTINGS


def _model(name: str) -> ModelSpec:
    return ModelSpec.model_validate(load_preset("models", name))


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v2-lite"])
def test_mla_dims_are_the_fields(name):
    m = _model(name)
    dims = m.mla
    assert dims.kv_lora_rank == m.kv_lora_rank and dims.v_head_dim == m.v_head_dim
    assert (dims.qk_nope_head_dim, dims.qk_rope_head_dim) == (m.qk_nope_head_dim, m.qk_rope_head_dim)
    assert dims.q_lora_rank == (m.q_lora_rank or 0)  # V2-Lite: no query compression → 0
    assert m.qk_head_dim == dims.qk_nope_head_dim + dims.qk_rope_head_dim and m.v_dim == dims.v_head_dim


def test_q_lora_rank_none_reads_as_zero():
    assert _model("deepseek-v2-lite").q_lora_rank is None
    assert _model("deepseek-v2-lite").mla.q_lora_rank == 0


def test_mla_of_a_gqa_model_raises():
    with pytest.raises(ValueError, match="no MLA dimensions"):
        _ = _model("llama3-8b").mla


def test_expert_ffn():
    m = _model("mixtral-8x7b")
    assert m.expert_ffn == m.moe_ffn_hidden_size
    with pytest.raises(ValueError, match="no moe_ffn_hidden_size"):
        _ = _model("llama3-8b").expert_ffn


def test_every_source_has_settings_and_metrics():
    assert set(SOURCE_SETTINGS) == set(SOURCES)
    assert set(_METRIC_OF) == set(SOURCES)


def test_torchtitan_row_without_local_batch_is_skipped_with_the_reason():
    text = read_text("published_runs.csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    run_id = next(r.run_id for r in published_runs(text)[0] if r.source == "torchtitan")  # one that maps as bundled
    picked = [dict(r, micro_batch="") for r in rows if r["run_id"] == run_id]
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(picked)
    runs, skipped = published_runs(out.getvalue())
    assert runs == [] and [s.reason for s in skipped] == ["local batch (micro_batch) not stated"]


def test_framework_help_lists_every_row():
    from simengine.config import StrategySpec
    from simengine.config.framework import FRAMEWORKS

    text = StrategySpec.model_json_schema()["properties"]["framework"]["description"]
    for name, stack in FRAMEWORKS.items():
        assert f"{name} ({stack.summary})" in text
