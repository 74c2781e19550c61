"""Host-bound MoE layers (simengine/cost/host.py): the per-layer host sync of dropless dispatchers makes a
layer last at least the host time to issue its kernels; CUDA graphs remove the host cost of their scopes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from scenarios import make
from simengine.api import estimate
from simengine.cost import host
from simengine.cost.phase import PhaseCost
from simengine.workload.ops import Gemm, GroupedGemm, Memory

REPO = Path(__file__).resolve().parents[1]
SLOW_HOST_S = 1e-3  # a host 100x slower per op than the sourced one: makes every small MoE layer host-bound


def _qwen(strategy: dict | None = None, model: dict | None = None):
    st = {"tp": 1, "pp": 1, "ep": 8, "micro_batch_size": 1, "global_batch_size": 64, "seq_len": 4096,
          "moe_dispatcher": "alltoall", **(strategy or {})}
    return make("qwen3-30b-a3b", "h100-sxm5-80gb", model=model, strategy=st, system={"num_gpus": 8})


def _step(sc, monkeypatch, op_s: float) -> float:
    monkeypatch.setattr(host, "HOST_OP_S", op_s)
    monkeypatch.setattr(host, "EXPERT_HOST_S", {k: v * op_s / 10e-6 for k, v in {"fwd": 1.2e-3 / 64, "bwd": 2.1e-3 / 64}.items()})
    return estimate(sc).step_time_s


def test_layer_stall_is_host_minus_gpu_when_positive():
    attn = ([Gemm("fwd:qkv", 8, 8, 8), Memory("norm:ln1", 0.0, kernels=2)], [Gemm("dgrad:qkv", 8, 8, 8)], [Gemm("wgrad:qkv", 8, 8, 8)])
    moe = ([GroupedGemm("fwd:expert_fc1", 4, 8, 8, 8, "TN"), Memory("permute", 0.0, kernels=2)], [], [])
    attn_c = (PhaseCost(compute_s=10e-6), PhaseCost(compute_s=1.0), PhaseCost())
    moe_c = (PhaseCost(compute_s=5e-6), PhaseCost(), PhaseCost())
    moe_c[0].add_comm("ep_comm", 4e-6)
    fwd, bwd = host.layer_stall(attn, moe, attn_c, moe_c, frozenset())
    # forward: 1 + 2 + 2 ops and 4 experts' half of the forward expert-MLP host time, against 19 µs of GPU work
    issued = 5 * host.HOST_OP_S + 4 * host.EXPERT_HOST_S["fwd"] / 2
    assert fwd == pytest.approx(issued - 19e-6)
    assert bwd == 0.0  # 1 s of backward GPU work hides the two launches


def test_graphed_scope_costs_one_launch():
    ops = [Gemm("fwd:router", 8, 8, 8), Memory("router-softmax-topk-aux", 0.0, kernels=20), Memory("permute", 0.0, kernels=2),
           GroupedGemm("fwd:expert_fc1", 16, 8, 8, 8, "TN")]
    eager = host.host_s(ops, "fwd", host.moe_op_scope, frozenset())
    graphed = host.host_s(ops, "fwd", host.moe_op_scope, frozenset({"moe_router", "moe_preprocess"}))
    assert eager - graphed == pytest.approx((21 + 2 - 2) * host.HOST_OP_S)  # 23 ops become two graph launches
    assert host.host_s(ops, "fwd", host.moe_op_scope, frozenset({"full_iteration"})) == host.HOST_OP_S


def test_mechanism_never_makes_a_step_faster(monkeypatch):
    for strategy in ({}, {"micro_batch_size": 4}, {"moe_dispatcher": "deepep"}):
        sc = _qwen(strategy)
        without = _step(sc, monkeypatch, 0.0)
        assert _step(sc, monkeypatch, 10e-6) >= without
        assert _step(sc, monkeypatch, SLOW_HOST_S) > without  # a slow enough host is exposed


def test_gpu_bound_layer_is_unchanged(monkeypatch):
    # at the sourced host cost a 4096-token Qwen3-30B layer on H100 is GPU-bound: nothing changes
    sc = _qwen()
    assert _step(sc, monkeypatch, 10e-6) == _step(sc, monkeypatch, 0.0)


def test_full_graph_or_drop_and_pad_removes_the_host_cost(monkeypatch):
    base = _step(_qwen(), monkeypatch, 0.0)
    assert _step(_qwen({"cuda_graph_scope": ["full_iteration"]}), monkeypatch, SLOW_HOST_S) == pytest.approx(base, rel=1e-12)
    # drop-and-pad: static split sizes, no DtoH sync, nothing added (the padded work itself differs)
    padded = {"capacity_factor": 1.0, "pad_to_capacity": True}
    assert _step(_qwen(model=padded), monkeypatch, SLOW_HOST_S) == _step(_qwen(model=padded), monkeypatch, 0.0)


def test_te_scoped_graphs_reduce_but_keep_the_sync(monkeypatch):
    eager = _step(_qwen(), monkeypatch, SLOW_HOST_S)
    scoped = _step(_qwen({"cuda_graph_scope": ["attn", "moe_router", "moe_preprocess"]}), monkeypatch, SLOW_HOST_S)
    base = _step(_qwen(), monkeypatch, 0.0)
    assert base < scoped < eager  # the experts stay eager and the sync stays


def test_sourced_constants_live_only_in_host_module():
    doc = host.__doc__ or ""
    for cite in ("token_dispatcher.py", "TE issue #2897", "5–25 µs"):
        assert cite in doc
    defined = []
    for path in (REPO / "simengine").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign):
                defined += [(path.name, t.id) for t in node.targets if isinstance(t, ast.Name) and t.id in ("HOST_OP_S", "EXPERT_HOST_S")]
    assert sorted(defined) == [("host.py", "EXPERT_HOST_S"), ("host.py", "HOST_OP_S")]


def test_scope_is_edited_as_text_like_recompute_modules():
    from simengine.config.strategy import StrategySpec

    st = StrategySpec(global_batch_size=8, seq_len=128, cuda_graph_scope="['attn', 'moe_router']")
    assert st.cuda_graph_scope == ("attn", "moe_router")
    with pytest.raises(ValueError):
        StrategySpec(global_batch_size=8, seq_len=128, cuda_graph_scope="attn, experts")
