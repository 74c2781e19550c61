"""Uneven pipelines: decoder_first/last_pipeline_num_layers (Megatron-LM names and rules) and an
explicit per-stage list (pipeline_layers, like Megatron-Core's pipeline_model_parallel_layout),
with 1F1B, interleaved and DualPipeV; the layers are conserved and memory/time follow."""

from __future__ import annotations

import pytest

from simengine import api
from simengine.config import StrategySpec, load_scenario
from simengine.cost.stage import build_plan
from simengine.errors import ConfigError
from simengine.estimate import memory_by_stage
from simengine.workload.builder import build_workload
from simengine.config.layout import even_split, stage_counts

from scenarios import make, scenario_dict

DSV3 = {"model_preset": "deepseek-v3", "strategy_preset": "deepseek-v3-ep64", "system": {"num_gpus": 1024}}


def per_stage(sc) -> dict[int, tuple[int, ...]]:
    """Virtual stage -> its layer indices, from the built workload."""
    return {c.index: c.layers for rank in build_workload(sc).ranks for c in rank}


def assert_conserved(sc):
    stages = per_stage(sc)
    flat = [i for s in sorted(stages) for i in stages[s]]
    assert flat == list(range(sc.model.num_layers))  # every layer once, contiguous in stage order
    wl = build_workload(sc)
    assert sum(c.first for r in wl.ranks for c in r) == 1 and sum(c.last for r in wl.ranks for c in r) == 1
    return stages


def test_llama3_405b_pp16_first_and_last_one_layer_fewer():
    # Dubey et al. 2024 §3.3.2: 126 layers on pp16, one layer fewer on the first and last stages
    sc = make("llama3-405b", system={"num_gpus": 128}, strategy={
        "tp": 8, "pp": 16, "global_batch_size": 16, "seq_len": 8192,
        "decoder_first_pipeline_num_layers": 7, "decoder_last_pipeline_num_layers": 7})
    stages = assert_conserved(sc)
    assert [len(stages[s]) for s in range(16)] == [7] + [8] * 14 + [7]
    mems = memory_by_stage(sc, build_plan(sc))
    w = [x.weights_gib for x in mems]
    assert w[1] == w[7] == w[14] > w[0] and w[1] > w[15]  # 8 layers > 7 (+ embedding / + head)
    # 1F1B: rank r holds p - r micro-batches; stage 1 (8 layers, 15 in flight) holds more than stage 0 (7, 16)
    assert mems[1].activations_gib > mems[0].activations_gib


def test_deepseek_v3_pp16_megatron_bridge_layout_both_ways():
    # Megatron-Bridge recipes/deepseek/h100/deepseek_v3.py _get_deepseek_v3_pipeline_layout (16, 1):
    # embedding + 4 decoder layers, 14 x 4, then 1 decoder layer + MTP + loss
    want = [4] * 15 + [1]
    base = {"tp": 2, "pp": 16, "vpp": 1, "etp": 1, "schedule": "1f1b", "pipeline_layers": None}  # not the preset's pp8·vpp4 layout
    by_last = make(**{**DSV3, "strategy": {**base, "decoder_last_pipeline_num_layers": 1}})
    by_list = make(**{**DSV3, "strategy": {**base, "pipeline_layers": want}})
    for sc in (by_last, by_list):
        stages = assert_conserved(sc)
        assert [len(stages[s]) for s in range(16)] == want
    last = build_workload(by_last).ranks[15][0]
    assert last.last and last.mtp == 1 and len(last.layers) == 1
    a, b = api.estimate(by_last), api.estimate(by_list)
    assert a.step_time_s == b.step_time_s and a.peak_memory_gib == b.peak_memory_gib


def test_deepseek_v3_pp8_vpp2_interleaved_layout():
    # the same 16-entry layout as (8, 2): entry v*pp + r is rank r's chunk v
    sc = make(**{**DSV3, "strategy": {"tp": 2, "pp": 8, "vpp": 2, "etp": 1, "schedule": "interleaved",
                                      "pipeline_layers": [4] * 15 + [1]}})
    assert_conserved(sc)
    ranks = build_workload(sc).ranks
    assert [c.index for c in ranks[7]] == [7, 15] and [len(c.layers) for c in ranks[7]] == [4, 1]
    assert [c.index for c in ranks[0]] == [0, 8] and ranks[0][0].first


def megatron_offset(num_layers, pp, vpp, first, last, rank, vp_stage):
    """Megatron-Core transformer_layer.get_transformer_layer_offset, interleaved uneven branch."""
    middle_stages = pp - 2
    middle = num_layers - first - last
    total_virtual = first // vpp + middle // vpp + last // vpp
    if rank == 0:
        return vp_stage * total_virtual
    return vp_stage * total_virtual + first // vpp + (rank - 1) * ((middle // vpp) // middle_stages)


def test_interleaved_first_last_match_megatron_offsets():
    sc = make("llama3-8b", system={"num_gpus": 4}, strategy={
        "pp": 4, "vpp": 2, "schedule": "interleaved", "global_batch_size": 8,
        "decoder_first_pipeline_num_layers": 6, "decoder_last_pipeline_num_layers": 6})
    stages = assert_conserved(sc)
    for rank, chunks in enumerate(build_workload(sc).ranks):
        for v, c in enumerate(chunks):
            assert c.index == v * 4 + rank
            assert c.layers[0] == megatron_offset(32, 4, 2, 6, 6, rank, v)
            assert len(c.layers) == (3 if rank in (0, 3) else 5)  # 6/2 at the ends, (32-12)/2/2 between
    assert len(stages) == 8


def test_dualpipev_with_an_odd_layer_count():
    # 61 layers cannot split over 2*pp = 8 stages evenly; the V puts stage 0 and stage 7 on rank 0
    cfg = scenario_dict(model_preset="llama3-8b", system={"num_gpus": 4},
                        strategy={"pp": 4, "schedule": "dualpipev", "global_batch_size": 16})
    cfg["model"]["num_layers"] = 61
    with pytest.raises(ConfigError, match=r"num_layers=61 divisible by 2\*pp = 8"):
        load_scenario(cfg)
    cfg["strategy"].update(decoder_first_pipeline_num_layers=4, decoder_last_pipeline_num_layers=3)
    sc = load_scenario(cfg)
    stages = assert_conserved(sc)
    assert [len(stages[s]) for s in range(8)] == [4] + [9] * 6 + [3]
    rank0 = build_workload(sc).ranks[0]
    assert [(c.index, len(c.layers), c.first, c.last) for c in rank0] == [(0, 4, True, False), (7, 3, False, True)]
    cfg["strategy"].pop("decoder_first_pipeline_num_layers")
    cfg["strategy"].pop("decoder_last_pipeline_num_layers")
    cfg["strategy"]["pipeline_layers"] = [5, 8, 8, 8, 8, 8, 8, 8]
    sc = load_scenario(cfg)
    assert [len(per_stage(sc)[s]) for s in range(8)] == [5] + [8] * 7
    assert api.simulate(sc).step_time_s == pytest.approx(api.estimate(sc).step_time_s)


def test_time_follows_the_layers():
    def stage_fwd(first):
        sc = make("llama3-8b", system={"num_gpus": 4}, strategy={
            "pp": 4, "global_batch_size": 8, "decoder_first_pipeline_num_layers": first,
            "decoder_last_pipeline_num_layers": first})
        return [st.chunks[0].fwd.compute_s for st in build_plan(sc).stages]

    even, light = stage_fwd(8), stage_fwd(4)  # 8/8/8/8 vs 4/12/12/4
    assert light[1] == pytest.approx(even[1] * 12 / 8, rel=1e-9)  # middle stages: layers only
    assert light[0] < even[0] and light[3] < even[3]


@pytest.mark.parametrize("strategy,field,text", [
    ({"pp": 4, "decoder_first_pipeline_num_layers": 5, "decoder_last_pipeline_num_layers": 5},
     "strategy.decoder_first_pipeline_num_layers",
     "num_layers - decoder_first_pipeline_num_layers - decoder_last_pipeline_num_layers = 31 - 5 - 5 = 21 middle "
     "layers do not split evenly over 2 middle pipeline ranks"),
    ({"pp": 4, "decoder_last_pipeline_num_layers": 40}, "strategy.decoder_last_pipeline_num_layers",
     "num_layers - decoder_last_pipeline_num_layers = 31 - 40 = -9"),
    ({"pp": 4, "vpp": 2, "schedule": "interleaved", "decoder_first_pipeline_num_layers": 5,
      "decoder_last_pipeline_num_layers": 6}, "strategy.decoder_first_pipeline_num_layers",
     "decoder_first_pipeline_num_layers = 5 is not divisible by vpp = 2"),
    ({"pp": 4, "pipeline_layers": [8, 8, 15]}, "strategy.pipeline_layers",
     "pipeline_layers has 3 entries; one per virtual stage needs pp = 4"),
    ({"pp": 4, "pipeline_layers": [8, 8, 8, 8]}, "strategy.pipeline_layers",
     "pipeline_layers 8+8+8+8 = 32 but num_layers = 31"),
    ({"pp": 2, "vpp": 2, "schedule": "interleaved", "pipeline_layers": [8, 8, 8]}, "strategy.pipeline_layers",
     "needs pp*chunks_per_rank = 2*2 = 4"),
    ({"pp": 1, "decoder_first_pipeline_num_layers": 3}, "strategy.decoder_first_pipeline_num_layers",
     "decoder_first_pipeline_num_layers needs pp >= 2 (pp=1)"),
])
def test_scenario_messages_name_every_term(strategy, field, text):
    cfg = scenario_dict(system={"num_gpus": strategy["pp"]}, strategy={"global_batch_size": 8, **strategy})
    cfg["model"]["num_layers"] = 31
    with pytest.raises(ConfigError) as e:
        load_scenario(cfg)
    assert any(f == field and text in m for f, m in e.value.issues), e.value.issues


def test_strategy_rejects_a_list_with_first_last_and_reads_text():
    with pytest.raises(ValueError, match="cannot be combined"):
        StrategySpec(global_batch_size=8, seq_len=8, pp=2, pipeline_layers=[1, 1], decoder_first_pipeline_num_layers=1)
    with pytest.raises(ValueError):
        StrategySpec(global_batch_size=8, seq_len=8, pipeline_layers=[1, -1])
    assert StrategySpec(global_batch_size=8, seq_len=8, pipeline_layers="[4, 4,1]").pipeline_layers == [4, 4, 1]
    with pytest.raises(ValueError, match="list of layer counts"):
        StrategySpec(global_batch_size=8, seq_len=8, pipeline_layers="4, x")


def test_even_split_unchanged_and_stage_counts_pure():
    assert even_split(126, 16) == [7] + [8] * 14 + [7]
    assert even_split(61, 32)[0] == 1 and sum(even_split(61, 32)) == 61
    counts, issues = stage_counts(32, 4, 1, lambda r, c: r, 5, 5)
    assert (counts, issues) == ([5, 11, 11, 5], [])
