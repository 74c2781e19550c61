"""Gradient accumulation without fusion (workload/dims.py ``grad_accumulation_bytes``,
workload/phases.py ``add_grad_accumulation``): Megatron's DDP hook adds each micro-batch's fresh
weight gradient to the accumulated one in a separate memory-bound pass; with
gradient-accumulation fusion the wgrad GEMM accumulates itself and no pass runs."""

from __future__ import annotations

import pytest
from scenarios import make

from simengine.api import estimate
from simengine.workload.builder import build_workload
from simengine.workload.ops import Gemm, GroupedGemm, Memory

STRATEGY = {"tp": 2, "pp": 2, "micro_batch_size": 1, "global_batch_size": 16, "seq_len": 2048}


def _wgt(sc, block: str):
    return build_workload(sc).blocks[block].wgt


def _pairs(ops):
    """(wgrad op, the op right after it) for every weight-gradient GEMM."""
    return [(op, ops[i + 1] if i + 1 < len(ops) else None) for i, op in enumerate(ops)
            if isinstance(op, (Gemm, GroupedGemm)) and op.name.startswith("wgrad:")]


@pytest.mark.parametrize("fp32_grads, per_weight", [(True, 2 + 4 + 4), (False, 2 + 2 + 2)])
def test_unfused_megatron_adds_one_pass_per_weight(fp32_grads, per_weight):
    """Read the new bf16 gradient, read and write the accumulated one (fp32 or half), per weight
    element, right after the GEMM that made it: one kernel per weight."""
    sc = make(system={"num_gpus": 8}, strategy={**STRATEGY, "gradient_accumulation_fusion": False, "fp32_main_grads": fp32_grads})
    pairs = _pairs(_wgt(sc, "attn")) + _pairs(_wgt(sc, "mlp"))
    assert len(pairs) >= 4
    for gemm, acc in pairs:
        assert isinstance(acc, Memory) and acc.name == "grad-acc:" + gemm.name[len("wgrad:"):]
        assert acc.bytes == pytest.approx(per_weight * gemm.m * gemm.n * gemm.count)
        assert acc.kernels == gemm.count


def test_moe_experts_accumulate_each_expert():
    sc = make(model_preset="mixtral-8x7b", system={"num_gpus": 8},
              strategy={**STRATEGY, "tp": 1, "ep": 4, "gradient_accumulation_fusion": False})
    grouped = [(g, a) for g, a in _pairs(_wgt(sc, "moe")) if isinstance(g, GroupedGemm)]
    assert grouped
    for g, acc in grouped:
        assert acc.bytes == pytest.approx(10 * g.groups * g.m * g.n) and acc.kernels == g.groups


@pytest.mark.parametrize("strategy", [
    {"gradient_accumulation_fusion": True},                                  # the GEMM accumulates
    {"gradient_accumulation_fusion": False, "framework": "torch-native"},    # FSDP2 accumulates the shard
    {"gradient_accumulation_fusion": False, "framework": "deepspeed"},       # its engine's own buffers
])
def test_no_pass_where_the_stack_does_not_run_it(strategy):
    sc = make(system={"num_gpus": 8}, strategy={**STRATEGY, **strategy})
    for block in ("attn", "mlp", "head"):
        assert not [op for op in _wgt(sc, block) if op.name.startswith("grad-acc:")]


def test_unfused_is_slower_by_the_passes_it_adds():
    """Every micro-batch pays the passes: the step grows, and more micro-batches grow it more."""
    def step(fused: bool, gbs: int) -> float:
        cfg_sc = make(system={"num_gpus": 8}, strategy={**STRATEGY, "global_batch_size": gbs, "gradient_accumulation_fusion": fused})
        return estimate(cfg_sc.model_dump(mode="json")).step_time_s
    d16 = step(False, 16) - step(True, 16)
    d32 = step(False, 32) - step(True, 32)
    assert d16 > 0 and d32 > 1.5 * d16


def test_narayanan_2021_rows_run_unfused_fp16_gradients():
    """The sc21 scripts (2021 Megatron-LM: --fp16, local or torch DDP, no fp32 accumulation) map to unfused
    half-precision accumulation; the DeepSpeed ZeRO-3 rows keep DeepSpeed's own."""
    from scenarios import VALIDATION

    from simengine.validation.published import published_runs

    runs, _ = published_runs((VALIDATION / "published_runs.csv").read_text())
    nar = [r for r in runs if r.source == "narayanan21"]
    assert nar
    for r in nar:
        st = r.config["strategy"]
        local = "ZeRO-3" not in r.run_id
        assert st.get("gradient_accumulation_fusion", True) is (not local), r.run_id
        assert st.get("fp32_main_grads", True) is (not local), r.run_id
