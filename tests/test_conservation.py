"""Splitting by TP, CP, PP (and EP) conserves FLOPs and parameters."""

import pytest

from simengine.cost.static_memory import stage_params
from simengine.workload.builder import build_workload
from simengine.workload.ops import Attention, Gemm, GroupedGemm
from simengine.workload.params import attention_params, dense_mlp_params, embedding_params, head_params, moe_params

from scenarios import make


def replica_flops(sc):
    """FLOPs of one micro-batch summed over the tp·cp·pp ranks of one model replica."""
    wl = build_workload(sc)
    per_kind = {k: sum(op.flops for ph in (b.fwd, b.bwd, b.wgt) for op in ph
                       if isinstance(op, (Gemm, GroupedGemm, Attention))) for k, b in wl.blocks.items()}
    total = 0.0
    for chunks in wl.ranks:
        for c in chunks:
            total += len(c.layers) * per_kind["attn"] + c.dense_layers * per_kind.get("mlp", 0) + c.moe_layers * per_kind.get("moe", 0)
            total += per_kind["embed"] * c.first + per_kind["head"] * c.last
    return total * sc.strategy.tp * sc.strategy.cp


LAYOUTS = [{"tp": 1, "pp": 1, "cp": 1}, {"tp": 2, "pp": 1, "cp": 1}, {"tp": 8, "pp": 1, "cp": 1}, {"tp": 1, "pp": 4, "cp": 1},
           {"tp": 2, "pp": 2, "cp": 2}, {"tp": 1, "pp": 1, "cp": 8}, {"tp": 4, "pp": 2, "cp": 1}]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("cp_comm", ["p2p", "a2a"])
def test_dense_flops_conserved(layout, cp_comm):
    base = make("llama3-8b", system={"num_gpus": 1}, strategy={"global_batch_size": 1, "seq_len": 8192})
    sc = make("llama3-8b", system={"num_gpus": 8 * layout["tp"] * layout["pp"] * layout["cp"]},
              strategy={**layout, "global_batch_size": 8, "seq_len": 8192, "cp_comm_type": cp_comm})
    # the padded vocab grows with tp (Megatron pads to 128·tp): compare with the same padding
    pad = (sc.vocab_padded - base.vocab_padded) * sc.model.hidden_size * 2 * 3 * sc.strategy.seq_len
    assert replica_flops(sc) == pytest.approx(replica_flops(base) + pad, rel=1e-9)


@pytest.mark.parametrize("ep", [1, 2, 8])
def test_expert_flops_conserved_over_ep(ep):
    mk = lambda e: make("mixtral-8x7b", system={"num_gpus": 8}, strategy={"ep": e, "global_batch_size": 8, "seq_len": 4096})
    # one EP group (ep ranks) does the work of ep replicas' tokens: per-rank FLOPs equal
    assert replica_flops(mk(ep)) == pytest.approx(replica_flops(mk(1)), rel=1e-9)


def test_uniform_router_gives_each_rank_the_same_expert_load():
    sc = make("mixtral-8x7b", system={"num_gpus": 8}, strategy={"ep": 8, "global_batch_size": 8, "seq_len": 4096})
    wl = build_workload(sc)
    d = wl.dims
    assert d.tokens_per_expert * d.experts_local == d.moe_tokens * sc.model.top_k


@pytest.mark.parametrize("layout", [{"tp": 1, "pp": 1}, {"tp": 1, "pp": 4}, {"tp": 4, "pp": 1}, {"tp": 2, "pp": 8}])
def test_parameters_conserved(layout):
    sc = make("llama3-70b", system={"num_gpus": 8 * layout["tp"] * layout["pp"]},
              strategy={**layout, "global_batch_size": 8})
    wl = build_workload(sc)
    m, tp = sc.model, sc.strategy.tp
    replicated = m.num_layers * (attention_params(m).replicated + dense_mlp_params(m).replicated)
    replicated += head_params(m, 0)  # final norm
    total = sum(stage_params(sc, r).total for r in wl.ranks) * tp - replicated * (tp - 1)
    V = sc.vocab_padded
    expected = m.num_layers * (attention_params(m).total + dense_mlp_params(m).total) + embedding_params(m, V) + head_params(m, V)
    assert total == pytest.approx(expected, rel=1e-12)


def test_expert_parameters_conserved_over_ep():
    for ep in (1, 2, 4, 8):
        sc = make("mixtral-8x7b", system={"num_gpus": 8}, strategy={"ep": ep, "global_batch_size": 8})
        wl = build_workload(sc)
        p = stage_params(sc, wl.ranks[0])
        assert p.expert * ep == sc.model.num_moe_layers * moe_params(sc.model).experts


@pytest.mark.parametrize("tp", [1, 2, 8])
def test_mla_flops_conserved_over_tp(tp):
    """MLA down-projections run on the SP shard, so TP splits every GEMM (Megatron-Core MLA)."""
    mk = lambda t: make("deepseek-v2-lite", system={"num_gpus": 8}, strategy={"tp": t, "global_batch_size": 8 // t * 2,
                                                                             "seq_len": 4096, "ep": 1, "etp": 1})
    assert replica_flops(mk(tp)) == pytest.approx(replica_flops(mk(1)) * 1.0, rel=0.002)


def test_cp_ring_runs_one_kernel_per_step_and_conserves_the_causal_flops():
    """TE AttnFuncWithCPAndKVP2P: a causal L×L kernel, then cp−1 non-causal L×L/2 kernels (L = s/cp),
    whose FLOPs add up to 1/cp of the causal work of the whole sequence."""
    from simengine.config import load_scenario
    from simengine.workload.builder import build_workload
    from simengine.workload.ops import Attention

    from scenarios import scenario_dict

    s, cp = 32768, 8
    sc = load_scenario(scenario_dict("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 8},
                                     strategy={"tp": 1, "cp": cp, "cp_comm_type": "p2p", "seq_len": s,
                                               "global_batch_size": 1}))
    att = [op for op in build_workload(sc).blocks["attn"].fwd if isinstance(op, Attention)]
    assert len(att) == cp
    assert (att[0].s_q, att[0].s_kv, att[0].causal) == (s // cp, s // cp, True)
    assert all((a.s_q, a.s_kv, a.causal) == (s // cp, s // (2 * cp), False) for a in att[1:])
    whole = Attention("x", 1, att[0].heads, att[0].kv_heads, s // cp, s, att[0].d_qk, att[0].d_v, True, "fwd")
    assert sum(a.flops for a in att) == pytest.approx(whole.flops, rel=1e-12)


def test_cp_a2a_sends_q_k_v_and_their_grads_one_all_to_all_each():
    """TE flash_attn_a2a_communicate: one all_to_all_single per tensor, so q, k, v (fwd) and dq, dk,
    dv (bwd) are separate collectives whose sizes are each tensor's and add up to the qkv buffer."""
    from simengine.config import load_scenario
    from simengine.workload.builder import build_workload
    from simengine.workload.ops import Collective

    from scenarios import scenario_dict

    s, cp = 32768, 4
    sc = load_scenario(scenario_dict("llama3-8b", "h100-sxm5-80gb", system={"num_gpus": 8},
                                     strategy={"tp": 2, "cp": cp, "cp_comm_type": "a2a", "seq_len": s,
                                               "global_batch_size": 1, "sequence_parallel": True}))
    blk = build_workload(sc).blocks["attn"]
    tokens, heads, kv, d = s // cp, 32 // 2, 8 // 2, 128  # per rank: s/cp tokens, heads/tp
    want = {"q": tokens * heads * d * 2, "k": tokens * kv * d * 2, "v": tokens * kv * d * 2}
    for ops, prefix, extra in ((blk.fwd, "", "o"), (blk.bwd, "d", "do")):
        a2a = {op.name.split(":")[1]: op.bytes for op in ops if isinstance(op, Collective) and op.name.startswith("cp-a2a")}
        assert a2a == {**{prefix + k: v for k, v in want.items()}, extra: tokens * heads * d * 2}


@pytest.mark.parametrize("cp", [2, 8])
def test_ring_attention_ops_built_once_are_the_ops_built_afresh(cp):
    """workload/layers.py memoises a CP ring's ops on the values they are built from: a workload
    built with the memo warm holds the same ops (frozen, compared by value) as one built cold,
    and each phase is the causal local step plus cp − 1 (transfer, kernel) pairs."""
    from simengine.workload.layers import _ring_ops
    from simengine.workload.ops import Collective

    sc = make("llama3-8b", system={"num_gpus": 8 * cp}, strategy={"cp": cp, "global_batch_size": 8, "seq_len": 8192,
                                                                  "cp_comm_type": "p2p"})
    from simengine.workload.builder import block_phases

    _ring_ops.cache_clear()
    block_phases.cache_clear()   # the blocks themselves are memoised too: build them again
    cold = build_workload(sc).blocks["attn"]
    block_phases.cache_clear()
    warm = build_workload(sc).blocks["attn"]
    assert _ring_ops.cache_info().hits >= 2
    assert (cold.fwd, cold.bwd) == (warm.fwd, warm.bwd)
    for ph in (cold.fwd, cold.bwd):
        ring = [op for op in ph if isinstance(op, Collective) and op.name.startswith("cp-ring:")]
        cores = [op for op in ph if isinstance(op, Attention)]
        assert len(ring) == cp - 1 and len(cores) == cp and sum(op.causal for op in cores) == 1
