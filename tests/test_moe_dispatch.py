"""MoE routing limits and dispatch per network tier (issue "MoE at scale", items 1 and 2)."""

from __future__ import annotations

import itertools
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scenarios import make, scenario_dict
from simengine.api import estimate
from simengine.config import load_scenario
from simengine.cost.comm import CommModel
from simengine.cost.moe_comm import a2a_time, collective_time, tier_bytes
from simengine.errors import ConfigError
from simengine.workload.builder import build_workload
from simengine.workload.dispatch import ExpertAllToAll
from simengine.workload.routing import expected_units_hit


def brute_units_hit(experts: int, k: int, units: int, groups: int, keep: int) -> float:
    """Exact expectation by enumerating every kept-group set and every k-subset of its experts."""
    per = experts // groups
    total = 0.0
    group_sets = list(itertools.combinations(range(groups), keep))
    for gs in group_sets:
        pool = [e for g in gs for e in range(g * per, (g + 1) * per)]
        subsets = list(itertools.combinations(pool, k))
        total += sum(len({e * units // experts for e in sub}) for sub in subsets) / len(subsets)
    return total / len(group_sets)


@pytest.mark.parametrize("experts,k,units,groups,keep", [
    (8, 2, 4, 1, 1), (12, 3, 3, 4, 2), (12, 3, 4, 3, 2), (16, 4, 8, 4, 2), (12, 4, 6, 6, 3), (10, 2, 5, 2, 1),
])
def test_expected_units_hit_matches_enumeration(experts, k, units, groups, keep):
    assert expected_units_hit(experts, k, units, groups, keep) == pytest.approx(brute_units_hit(experts, k, units, groups, keep), rel=1e-12)


def test_ungrouped_is_the_hypergeometric_formula():
    e, k, n = 256, 8, 8
    closed = n * (1 - comb(e - e // n, k) / comb(e, k))
    assert expected_units_hit(e, k, n) == pytest.approx(closed, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(nodes=st.sampled_from([2, 4, 8, 16]), mult=st.sampled_from([1, 2, 4]), keep=st.integers(1, 8),
       k=st.integers(1, 8), per=st.sampled_from([4, 8, 16]))
def test_node_limited_routing_reaches_at_most_topk_group_nodes(nodes, mult, keep, k, per):
    groups = nodes * mult            # every group inside one node
    keep = min(keep, groups)
    experts = groups * per
    if k > keep * per:
        return
    hit = expected_units_hit(experts, k, nodes, groups, keep)
    assert hit <= min(keep, k, nodes) + 1e-9
    assert hit <= expected_units_hit(experts, k, nodes) + 1e-9  # limiting never spreads a token wider


def _dsv3(ep=64, domain=8, dispatcher="deepep", **strategy):
    return make("deepseek-v3", system={"num_gpus": 1024, "scale_up": {"bandwidth_gbs": 450.0, "latency_us": 3.4, "domain_size": domain}},
                strategy={"tp": 2, "pp": 2, "ep": ep, "etp": 1, "global_batch_size": 4096, "recompute": "full",
                          "moe_dispatcher": dispatcher, **strategy})


def _dispatch_op(sc) -> ExpertAllToAll:
    wl = build_workload(sc)
    return next(op for op in wl.blocks["moe"].fwd if isinstance(op, ExpertAllToAll) and op.name.endswith("dispatch"))


def test_node_limited_dispatch_crosses_with_at_most_m_nodes_worth_of_tokens():
    sc = _dsv3(ep=64, domain=8)                    # 8 nodes = DeepSeek-V3's 8 groups, topk_group 4
    op = _dispatch_op(sc)
    _, out = tier_bytes(CommModel(sc), op)
    assert 0 < out <= op.tokens * sc.model.topk_group * op.row_bytes
    # without the group limit a token reaches more nodes
    free = load_scenario({"system": sc.system, "strategy": sc.strategy,
                          "model": sc.model.model_copy(update={"n_group": None, "topk_group": None})})
    assert tier_bytes(CommModel(free), _dispatch_op(free))[1] > out


def test_expert_tp_spreads_the_ep_group_over_more_nodes():
    """etp = tp = 2 (Megatron's default) strides the EP group by 2: 4 EP ranks per 8-GPU node,
    16 nodes for ep 64, so DeepSeek-V3's 8 groups each span 2 nodes and a token may reach 8."""
    sc = _dsv3(ep=64, domain=8, etp=2)
    op = _dispatch_op(sc)
    _, out = tier_bytes(CommModel(sc), op)
    assert op.tokens * 4 * op.row_bytes < out <= op.tokens * 8 * op.row_bytes


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_ep_inside_one_domain_never_crosses_it(dispatcher):
    sc = _dsv3(ep=64, domain=64, dispatcher=dispatcher)
    comm = CommModel(sc)
    op = _dispatch_op(sc)
    up, out = tier_bytes(comm, op)
    assert out == 0 and up > 0
    t = a2a_time(comm, op)
    slow_out = {"model": sc.model, "strategy": sc.strategy,
                "system": sc.system.model_copy(update={"scale_out": sc.system.scale_out.model_copy(update={"bandwidth_gbs": 1.0})})}
    assert a2a_time(CommModel(load_scenario(slow_out)), op) == pytest.approx(t)


@settings(max_examples=40, deadline=None)
@given(ep=st.sampled_from([8, 16, 32, 64, 128]), domain=st.sampled_from([4, 8, 16, 32]),
       limit=st.booleans(), fp8=st.booleans())
def test_hierarchical_dispatch_moves_no_more_cross_node_bytes_than_flat(ep, domain, limit, fp8):
    strategy = {"moe_dispatch_dtype": "fp8" if fp8 else "bf16"}
    model = {} if limit else {"n_group": None, "topk_group": None}
    base = scenario_dict("deepseek-v3", system={"num_gpus": 1024, "scale_up": {"bandwidth_gbs": 450.0, "latency_us": 3.4, "domain_size": domain}},
                         strategy={"tp": 2, "pp": 2, "ep": ep, "etp": 1, "global_batch_size": 4096, **strategy}, model=model)
    flat = load_scenario(base)
    hier = load_scenario({**base, "strategy": {**base["strategy"], "moe_dispatcher": "deepep"}})
    f_up, f_out = tier_bytes(CommModel(flat), _dispatch_op(flat))
    h_up, h_out = tier_bytes(CommModel(hier), _dispatch_op(hier))
    assert h_out <= f_out + 1e-6
    if f_out > 0:
        assert h_out < f_out                       # a token's copies to one node travel once


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_load_imbalance_raises_a2a_time(dispatcher):
    times = []
    for imb in (1.0, 1.5, 3.0):
        sc = _dsv3(ep=64, domain=8, dispatcher=dispatcher, moe_load_imbalance=imb)
        times.append(a2a_time(CommModel(sc), _dispatch_op(sc)))
    assert times[0] < times[1] < times[2]


def test_load_imbalance_raises_ep_comm_in_the_estimate():
    cfg = lambda imb: scenario_dict("qwen3-30b-a3b", system={"num_gpus": 16}, strategy={
        "ep": 16, "global_batch_size": 16, "moe_load_imbalance": imb})
    a, b = estimate(cfg(1.0)), estimate(cfg(2.0))
    assert b.breakdown_s["ep_comm"] > a.breakdown_s["ep_comm"] > 0


def test_fp8_dispatch_shrinks_only_the_forward_dispatch():
    bf, f8 = _dsv3(), _dsv3(moe_dispatch_dtype="fp8")
    ops = lambda sc: {op.name: op.row_bytes for ph in (build_workload(sc).blocks["moe"].fwd, build_workload(sc).blocks["moe"].bwd)
                      for op in ph if isinstance(op, ExpertAllToAll)}
    a, b = ops(bf), ops(f8)
    h = bf.model.hidden_size
    assert a["ep-a2a:dispatch"] == 2 * h and b["ep-a2a:dispatch"] == pytest.approx(h * (1 + 1 / 32))
    assert all(a[n] == b[n] == 2 * h for n in ("ep-a2a:combine", "ep-a2a:dcombine", "ep-a2a:ddispatch"))


def test_flat_alltoall_prices_exactly_as_the_plain_collective():
    sc = _dsv3(dispatcher="alltoall")
    comm, op = CommModel(sc), _dispatch_op(sc)
    assert collective_time(comm, op) == comm.time("all_to_all", op.bytes, "ep", op.size)
    up, out = tier_bytes(comm, op)
    assert up + out == pytest.approx(op.bytes * (op.size - 1) / op.size)


def test_intranode_deepep_sends_once_per_destination_rank():
    sc = make("mixtral-8x7b", system={"num_gpus": 8}, strategy={"ep": 8, "global_batch_size": 8, "moe_dispatcher": "deepep"})
    op = _dispatch_op(sc)
    up, out = tier_bytes(CommModel(sc), op)
    assert out == 0
    # 8 experts over 8 ranks, top-2: a token reaches 2 distinct ranks, 7/8 of them remote
    assert up == pytest.approx(op.tokens * 2 * 7 / 8 * op.row_bytes)


@pytest.mark.parametrize("fields,name", [
    ({"n_group": 7, "topk_group": 2}, "n_group"), ({"n_group": 8, "topk_group": 9}, "topk_group"),
    ({"n_group": 8, "topk_group": None}, "n_group"), ({"n_group": 256, "topk_group": 1}, "top_k"),
])
def test_bad_group_settings_name_the_field(fields, name):
    with pytest.raises(ConfigError) as e:
        make("deepseek-v3", model=fields, strategy={"global_batch_size": 64})
    assert name in str(e.value)


def test_capacity_padding_sets_the_alltoall_rows_and_ignores_imbalance():
    """Drop-and-pad: capacity = ceil(T·k/E·cf) rows per expert from every source (Megatron
    moe_utils.get_capacity; MoEAlltoAllTokenDispatcher num_out_tokens = capacity·num_experts)."""
    def op(cf, imb):
        sc = make("mixtral-8x7b", model={"capacity_factor": cf}, system={"num_gpus": 8},
                  strategy={"ep": 8, "global_batch_size": 8, "moe_load_imbalance": imb})
        return _dispatch_op(sc)
    dropless, padded, padded_hot = op(None, 1.0), op(1.5, 1.0), op(1.5, 3.0)
    T, k, E = dropless.tokens, dropless.top_k, dropless.experts
    assert dropless.bytes == T * k * dropless.row_bytes
    assert padded.bytes == -(-T * k * 1.5 // E) * E * padded.row_bytes
    assert padded_hot.bytes == padded.bytes


def test_dropping_without_padding_caps_the_hot_rank_at_capacity():
    def dims_and_op(cf, imb, pad):
        sc = make("mixtral-8x7b", model={"capacity_factor": cf, "pad_to_capacity": pad}, system={"num_gpus": 8},
                  strategy={"ep": 8, "global_batch_size": 8, "moe_load_imbalance": imb})
        return build_workload(sc).dims, _dispatch_op(sc)
    d_free, op_free = dims_and_op(None, 3.0, True)
    d_drop, op_drop = dims_and_op(1.25, 3.0, False)
    d_mild, op_mild = dims_and_op(1.25, 1.1, False)
    assert op_drop.imbalance == 1.25 and op_mild.imbalance == 1.1 and op_free.imbalance == 3.0
    assert d_drop.tokens_per_expert < d_free.tokens_per_expert
    assert abs(d_mild.tokens_per_expert - d_free.tokens_per_expert * 1.1 / 3.0) <= 1  # ceil rounding


@pytest.mark.parametrize("etp", [2, 4])
def test_expert_tp_gather_is_the_rows_the_local_experts_process(etp):
    """Megatron-Core MoEAlltoAllTokenDispatcher.dispatch_postprocess all-gathers the a2a output over the
    expert-TP group (``gather_from_sequence_parallel_region(global_input_tokens, group=tp_group)``) and
    combine_preprocess reduce-scatters the expert output back: the full buffer is etp × the rows this rank
    received, i.e. the rows its local experts then process (T·k·etp balanced), h wide in bf16 — not etp × that;
    dispatch_postprocess gathers global_probs the same way."""
    from simengine.workload.dims import dims_of

    sc = load_scenario(scenario_dict(
        model={"name": "moe", "hidden_size": 1024, "num_layers": 2, "num_attention_heads": 8, "ffn_hidden_size": 2048,
               "vocab_size": 32000, "num_experts": 8, "top_k": 2, "moe_ffn_hidden_size": 1024},
        system={"num_gpus": 16}, strategy={"tp": 4, "sequence_parallel": True, "ep": 4, "etp": etp, "seq_len": 2048,
                                            "global_batch_size": 64, "moe_load_imbalance": 1.0}))
    d = dims_of(sc)
    rows = d.moe_tokens * 2 * etp  # T·k received on average, gathered over etp
    assert d.tokens_per_expert * d.experts_local == rows
    moe = build_workload(sc).blocks["moe"]
    etp_ops = [op for phase in (moe.fwd, moe.bwd, moe.wgt) for op in phase if getattr(op, "group", "") == "etp"]
    tokens = [op for op in etp_ops if "probs" not in op.name]
    assert sorted(op.kind for op in tokens) == ["all_gather", "all_gather", "reduce_scatter", "reduce_scatter"]
    assert all(op.bytes == rows * 1024 * 2 and op.size == etp for op in tokens)
    # the routing probabilities are gathered beside the tokens (fp32 per row), their gradient scattered back
    probs = sorted((op.kind, op.bytes) for op in etp_ops if "probs" in op.name)
    assert probs == [("all_gather", rows * 4), ("reduce_scatter", rows * 4)]


@pytest.mark.parametrize("dispatcher", ["alltoall", "deepep"])
def test_dispatch_op_fields_are_the_models(dispatcher):
    """Every field of the dispatch all-to-all by name: a field added to Collective must not shift
    the subclass's (a positional construction once read the dispatcher into ``decomposable``)."""
    sc = _dsv3(ep=64, domain=8, dispatcher=dispatcher)
    op = _dispatch_op(sc)
    m = sc.model
    assert (op.kind, op.group, op.size, op.overlap_with, op.decomposable) == ("all_to_all", "ep", 64, "", True)
    assert (op.dispatcher, op.top_k, op.experts, op.n_group, op.topk_group) == (dispatcher, m.top_k, m.num_experts,
                                                                                m.n_group, m.topk_group)
    assert op.tokens > 0 and op.row_bytes > 0 and op.imbalance >= 1.0 and op.wire in ("bf16", "fp8")
