"""TP as the DTensor stacks run it, and PyTorch's async TP (torch-compile's ``tp_comm_overlap``):
Inductor's micro-pipeline pass (torch/_inductor/fx_passes/micro_pipeline_tp.py) and the
symmetric-memory fused ops it inserts (torch/distributed/_symmetric_memory/__init__.py), priced in
cost/phase.py ``_symm_mem``; the DTensor collectives' ``aten.cat`` copies and the missing backward
re-gather (workload/builder.py ``_torch_tp``)."""

from __future__ import annotations

import pytest
from scenarios import make as _make

from simengine.api import estimate
from simengine.cost import stage
from simengine.cost.comm import CommModel
from simengine.cost.compute import ComputeModel
from simengine.cost.moe_comm import collective_time
from simengine.cost.phase import ATEN_SMALL_REDUCE, cat_seconds, price_ops
from simengine.workload.builder import build_workload
from simengine.workload.ops import Collective, Gemm

ONE_NODE = {"num_gpus": 8}


def make(**strategy):
    st = {"tp": 8, "sequence_parallel": True, "micro_batch_size": 2, "global_batch_size": 2, **strategy}
    return _make(system=ONE_NODE, strategy=st)


def _models(sc):
    return ComputeModel(sc.system, sc.strategy.dtype), CommModel(sc)


def _coll(ops, name) -> Collective:
    (c,) = [o for o in ops if isinstance(o, Collective) and o.name == name]
    return c


def _gemm_s(cm, ops, *names) -> float:
    return sum(cm.gemm(o) for o in ops if isinstance(o, Gemm) and o.name in names)


def test_a_dtensor_stack_gathers_a_column_parallel_input_once():
    """Megatron re-gathers the column-parallel input for its wgrad; a DTensor stack's linear saves the
    gathered input (or its recompute gathers it again), so no ``ag-bwd:`` beside a dgrad."""
    for fw in ("torch-native", "torch-compile"):
        wl = build_workload(make(framework=fw))
        bwd = [o.name for ph in wl.blocks.values() for o in ph.bwd if isinstance(o, Collective)]
        assert "ag-bwd:q" not in bwd and "ag-bwd:fc1:mlp" not in bwd and "ag-bwd:lm_head" not in bwd
        assert "ag-bwd:proj" in bwd and "ag-bwd:fc2:mlp" in bwd   # the row-parallel output gradients
    te = build_workload(make(framework="megatron-te"))
    assert "ag-bwd:qkv" in [o.name for o in te.blocks["attn"].bwd]


def test_dtensor_sequence_parallel_collectives_pay_a_cat_copy():
    """funcol.all_gather_tensor / reduce_scatter_tensor along dim 1 chunk + cat (torchtitan#437):
    read + write of the whole buffer, exposed with the collective; TE's gathers have none."""
    sc = make(framework="torch-native")
    cm, comm = _models(sc)
    ag = _coll(build_workload(sc).blocks["attn"].fwd, "ag:q")
    assert ag.cat_copy and ag.overlap_impl == "userbuffers"
    pc = price_ops([ag], cm, comm)
    assert sorted(s for (_, s, _, _) in pc.comm) == sorted([collective_time(comm, ag), cat_seconds(ag, cm)])
    assert cat_seconds(ag, cm) == pytest.approx(2 * ag.bytes / cm.hbm + cm.overhead)
    te = build_workload(make(framework="megatron-te")).blocks["attn"].fwd
    assert not any(o.cat_copy for o in te if isinstance(o, Collective))


def test_async_tp_fuses_a_gather_with_every_matmul_reading_it():
    """One fused_all_gather_matmul for wq, wk and wv; the window is (tp-1)/tp of their GEMMs (the
    last chunk's matmuls run with no copy beside them); no cat (the fused op takes split/cat in)
    and the local shard's copy into the symmetric buffer is added."""
    sc = make(framework="torch-compile", tp_comm_overlap=True)
    cm, comm = _models(sc)
    fwd = build_workload(sc).blocks["attn"].fwd
    ag = _coll(fwd, "ag:q")
    assert ag.overlap_impl == "symm_mem" and ag.cat_copy and ag.seq_major
    qkv = ("fwd:q", "fwd:k", "fwd:v")
    alone = price_ops([o for o in fwd if o is ag or (isinstance(o, Gemm) and o.name in qkv)], cm, comm, True)
    gemms = _gemm_s(cm, fwd, *qkv)
    ((kind, t, window, share),) = alone.comm
    assert kind == "tp_comm" and t == collective_time(comm, ag) and share == 1.0
    assert window == pytest.approx(gemms * 7 / 8)
    in_block = price_ops(fwd, cm, comm, True)   # in the block: the same window (rope, attention follow)
    assert (kind, t, window, share) in in_block.comm
    assert alone.compute_s - gemms == pytest.approx(2 * ag.bytes / 8 / cm.hbm + cm.overhead)


def test_async_tp_reduce_scatter_ends_with_an_exposed_reduction():
    """fused_matmul_reduce_scatter: the tp partials are summed by torch.sum after the pipeline
    (read the whole unreduced output, write the shard) at ATen's small-extent reduction bandwidth."""
    sc = make(framework="torch-compile", tp_comm_overlap=True)
    cm, comm = _models(sc)
    fwd = build_workload(sc).blocks["mlp"].fwd
    rs = _coll(fwd, "rs:fc2:mlp")
    ops = [o for o in fwd if o is rs or (isinstance(o, Gemm) and o.name == "fwd:fc2:mlp")]
    pc = price_ops(ops, cm, comm, True)
    ((_, t, window, _),) = pc.comm
    assert window == pytest.approx(_gemm_s(cm, fwd, "fwd:fc2:mlp") * 7 / 8)
    reduction = (rs.bytes + rs.bytes / 8) / (cm.hbm * ATEN_SMALL_REDUCE) + cm.overhead
    assert pc.compute_s - _gemm_s(cm, fwd, "fwd:fc2:mlp") == pytest.approx(reduction)
    assert 0.23 / 0.85 < ATEN_SMALL_REDUCE < 0.43 / 0.85


def test_what_async_tp_does_not_fuse_stays_a_plain_collective():
    """The reduce-scatter of a sum of dgrads (wq/wk/wv, w1/w3) has no single producer matmul; the
    embedding and the output projection run outside the compiled TransformerBlocks: exposed, with
    their cat copy, as without overlap."""
    sc = make(framework="torch-compile", tp_comm_overlap=True)
    cm, comm = _models(sc)
    wl = build_workload(sc)
    rs = _coll(wl.blocks["attn"].wgt, "rs-bwd:q")
    assert not rs.decomposable
    pc = price_ops(wl.blocks["attn"].wgt, cm, comm, True)
    ours = {k for k in pc.comm if k[1] in (collective_time(comm, rs), cat_seconds(rs, cm))}
    assert ours and all(w == 0.0 or sh == cm.eff.async_overlap for (_, _, w, sh) in ours)
    for block in ("embed", "head"):
        for ph in (wl.blocks[block].fwd, wl.blocks[block].bwd, wl.blocks[block].wgt):
            colls = [o for o in ph if isinstance(o, Collective) and o.kind in ("all_gather", "reduce_scatter")]
            assert all(not o.decomposable and o.overlap_impl == "userbuffers" and o.cat_copy for o in colls)


@pytest.mark.parametrize("batch, copies", [(1, False), (2, True)])
def test_a_gather_fused_in_the_backward_graph_is_laid_out_again_for_its_wgrad(batch, copies):
    """The fused op returns the gathered tensor sequence-major; a wgrad reading it as [b·s, h] rows
    copies it when the local batch is > 1 — the recompute's gather and the output gradient's,
    not the forward's (whose gathered input nothing else reads under activation checkpointing)."""
    sc = make(framework="torch-compile", tp_comm_overlap=True, micro_batch_size=batch, global_batch_size=batch)
    cm, comm = _models(sc)
    fwd = build_workload(sc).blocks["attn"].fwd
    ag = _coll(fwd, "ag:q")
    f, r = price_ops(fwd, cm, comm, True), price_ops(fwd, cm, comm, True, in_backward=True)
    assert r.compute_s - f.compute_s == pytest.approx(cat_seconds(ag, cm) if copies else 0.0)


def test_full_recompute_prices_the_forward_as_the_backward_graph_runs_it():
    sc = make(framework="torch-compile", tp_comm_overlap=True, recompute="full")
    wl = build_workload(sc)
    p = stage._priced(sc, wl)
    assert p.rc_full is not None
    assert p.rc_full["attn"].compute_s > p.costs["attn"][0].compute_s
    off = stage._priced(make(framework="torch-compile", recompute="full"), wl)
    assert off.rc_full is None


def test_async_tp_hides_less_than_the_whole_collective_time():
    """The decomposition's added work (reductions, shard copies) makes async TP's gain smaller than
    the TP time it hides; still a gain on a compute-heavy layer."""
    cfg = {"framework": "torch-compile", "micro_batch_size": 4, "global_batch_size": 4, "seq_len": 8192}
    off = estimate({"model": make().model.model_dump(), "system": make().system.model_dump(),
                    "strategy": {**make(**cfg).strategy.model_dump(), "tp_comm_overlap": False}})
    on = estimate({"model": make().model.model_dump(), "system": make().system.model_dump(),
                   "strategy": {**make(**cfg).strategy.model_dump(), "tp_comm_overlap": True}})
    assert on.step_time_s < off.step_time_s
    assert off.step_time_s - on.step_time_s < off.breakdown_s["tp_comm"] - on.breakdown_s["tp_comm"]
