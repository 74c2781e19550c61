"""Latent MoE (Megatron-Core ``moe_latent_size``), MTP in a hybrid stack and a repeated MTP module:
Nemotron 3 Super 120B-A12B, its checkpoint's parameter counts and its published runs."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from simengine import presets
from simengine.config import ModelSpec
from simengine.cost.static_memory import stage_params
from simengine.estimate import estimate
from simengine.importers.hf import import_hf_config
from simengine.workload.builder import build_workload
from simengine.workload.dispatch import ExpertAllToAll
from simengine.workload.ops import Gemm, GroupedGemm
from simengine.workload.params import attention_params, count_parameters, moe_params, mtp_block_params

from scenarios import make

SUPER = "nemotron3-super-120b-a12b"
ROWS = ("ep-a2a:dispatch", "ep-a2a:combine", "ep-a2a:dcombine", "ep-a2a:ddispatch")   # the token rows (not the probs')
HF = Path(__file__).parent / "data" / "hf" / "nemotron-3-super-120b-a12b.json"


def _super(**model):
    return {**presets.load_preset("models", SUPER), **model}


def test_the_preset_has_the_checkpoints_parameters():
    """NVIDIA-Nemotron-3-Super-120B-A12B-BF16's safetensors headers: 123,611,012,096 bf16 weights, of
    which the MTP module holds 2,942,324,736; the routers' fp32 expert biases (512 per MoE layer) are
    stored apart. Every count below follows from the latent MoE (experts latent-wide, the two
    latent projections h·1024 each) and the MTP block "*E" with its three norms and 2h×h projection."""
    m = ModelSpec.model_validate(presets.load_preset("models", SUPER))
    total, active = count_parameters(m)
    bias = m.num_experts * m.num_moe_layers
    assert total - bias == 123_611_012_096 - 2_942_324_736
    h = m.hidden_size
    assert mtp_block_params(m).total + 2 * h * h + 3 * h - m.num_experts == 2_942_324_736
    assert 12.0e9 < active < 13.0e9   # "A12B"


def test_latent_moe_parameters():
    m = ModelSpec.model_validate(_super())
    plain = ModelSpec.model_validate(_super(moe_latent_size=None))
    h, x, f, E = m.hidden_size, 1024, m.expert_ffn, m.num_experts
    assert moe_params(m).experts == E * 2 * x * f           # squared ReLU: FC1 and FC2, latent-wide
    assert moe_params(plain).experts == E * 2 * h * f
    assert moe_params(m).replicated - moe_params(plain).replicated == 2 * h * x   # fc1/fc2_latent_proj, duplicated over TP
    assert moe_params(m).tp_sharded == moe_params(plain).tp_sharded               # the shared expert stays h-wide


def _sc(model: dict | None = None, **kw):
    """Nemotron 3 Super on B200s with ``model`` fields changed."""
    return make(SUPER, "b200-sxm-180gb", model=model, **kw)


def _moe_ops(model: dict, ep: int = 8):
    sc = _sc(model, system={"num_gpus": 8}, strategy={"ep": ep, "global_batch_size": 8, "seq_len": 4096})
    ph = build_workload(sc).blocks["moe"]
    return sc, [op for part in (ph.fwd, ph.bwd, ph.wgt) for op in part]


def test_a_latent_moe_routes_latent_wide_rows():
    """Megatron-Core MoELayer: fc1_latent_proj before the dispatch, fc2_latent_proj after the combine;
    the all-to-all rows, the permutation and the expert GEMMs are latent-wide (token_dispatcher.py
    hidden_dim = moe_latent_size), the router and the shared expert read the h-wide tokens."""
    sc, ops = _moe_ops({})
    _, plain = _moe_ops({"moe_latent_size": None})
    h, x, T = sc.model.hidden_size, 1024, build_workload(sc).dims.moe_tokens
    a2a = [op for op in ops if isinstance(op, ExpertAllToAll) and op.name in ROWS]
    assert len(a2a) == 4 and all(op.row_bytes == 2 * x for op in a2a)
    assert all(op.row_bytes == 2 * h for op in plain if isinstance(op, ExpertAllToAll) and op.name in ROWS)
    fc1 = next(op for op in ops if op.name == "fwd:expert_fc1")
    fc2 = next(op for op in ops if op.name == "fwd:expert_fc2")
    assert isinstance(fc1, GroupedGemm) and fc1.k == x and fc2.n == x
    lat = {op.name: op for op in ops if isinstance(op, Gemm) and "latent" in op.name}
    assert (lat["fwd:latent_fc1"].m, lat["fwd:latent_fc1"].k, lat["fwd:latent_fc1"].n) == (T, h, x)
    assert (lat["fwd:latent_fc2"].k, lat["fwd:latent_fc2"].n) == (x, h)
    assert not any("latent" in op.name for op in plain)
    assert next(op for op in ops if op.name == "fwd:fc1:shared").k == h


def test_latent_routed_bytes_scale_with_the_latent_width():
    """The same layer at latent 2048 sends twice the bytes of latent 1024 in every all-to-all."""
    vol = {x: sum(op.bytes for op in _moe_ops({"moe_latent_size": x})[1] if isinstance(op, ExpertAllToAll) and op.name in ROWS)
           for x in (1024, 2048)}
    assert vol[2048] == pytest.approx(2 * vol[1024], rel=1e-12)


def test_a_repeated_mtp_module_computes_at_every_depth_and_is_stored_once():
    """Megatron-Core ``mtp_use_repeated_layer``: one MTP module run at each depth — the same compute as
    separate modules, one module's weights (and gradients, optimizer state) on the last stage."""
    cfg = {"system": {"num_gpus": 64}, "strategy": {"ep": 64, "global_batch_size": 64, "seq_len": 8192, "dtype": "fp8"}}
    rep = _sc(**cfg)
    sep = _sc({"mtp_repeated_layer": False}, **cfg)
    a, b = estimate(rep), estimate(sep)
    for k in ("forward_compute", "backward_compute"):
        assert a.breakdown_s[k] == pytest.approx(b.breakdown_s[k], rel=1e-12)
    last = build_workload(rep).ranks[-1]
    m = rep.model
    one = mtp_block_params(m)
    h = m.hidden_size
    module = one.tp_sharded + one.replicated + 3 * h + 2 * h * h
    dense_diff = stage_params(sep, last).dense - stage_params(rep, last).dense
    expert_diff = stage_params(sep, last).expert - stage_params(rep, last).expert
    assert dense_diff == pytest.approx(module, rel=1e-12)
    assert expert_diff == pytest.approx(one.experts / 64, rel=1e-12)
    assert a.peak_memory_gib < b.peak_memory_gib


def test_the_hybrid_mtp_block_is_attention_plus_moe():
    m = ModelSpec.model_validate(_super())
    att, moe = attention_params(m), moe_params(m)
    assert m.mtp_moe and mtp_block_params(m).total == att.total + moe.total
    wl = build_workload(_sc(system={"num_gpus": 64}, strategy={"ep": 64, "pp": 1, "global_batch_size": 64}))
    last = wl.ranks[-1][-1]
    assert (last.mtp, last.mtp_moe) == (2, True)


@pytest.mark.parametrize("bad, field", [({"moe_latent_size": 1024, "num_experts": 0, "top_k": 0, "hybrid_pattern": None,
                                          "mtp_layers": 0, "mtp_repeated_layer": False}, "moe_latent_size"),
                                        ({"mtp_layers": 0}, "mtp_repeated_layer")])
def test_latent_and_repeated_mtp_need_their_parts(bad, field):
    with pytest.raises(ValidationError, match=field):
        ModelSpec.model_validate(_super(**bad))


def test_importing_the_checkpoints_config_gives_the_presets_architecture():
    """The Hugging Face config maps onto the preset (its partial_rotary_factor 1.0, the whole head,
    is accepted); the checkpoint holds one MTP module, the recipe runs it at two depths."""
    res = import_hf_config(json.loads(HF.read_text()))
    want = presets.load_preset("models", SUPER)
    skip = {"name", "source", "mtp_layers", "mtp_repeated_layer", "num_shared_experts", "head_dim"}
    got = res.model
    assert {k: got[k] for k in want if k not in skip} == {k: v for k, v in want.items() if k not in skip}
    assert (got["mtp_layers"], got["mtp_repeated_layer"]) == (1, False)
    assert any("mtp_repeated_layer" in w for w in res.warnings)
