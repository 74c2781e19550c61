"""The default grouped-GEMM efficiency (no measured table) is the default GEMM level times the
grouped/plain ratio the bundled B200 table measures: TransformerEngine's GroupedLinear issues one
cuBLAS GEMM per expert on every architecture (multi_stream_cublas_gemm), so the ratio carries over."""

import csv
import io

import pytest

from simengine.config.system import Efficiency, SystemSpec
from simengine.cost.compute import ComputeModel
from simengine.presets import load_preset
from simengine.validation.data import read_text
from simengine.workload.ops import Gemm, GroupedGemm


def _op_default(op: str) -> float:
    rows = csv.DictReader(io.StringIO(read_text("b200_op_efficiency.csv")))
    return next(float(r["efficiency"]) for r in rows if r["table"] == "op_default" and r["op"] == op)


def test_default_is_the_gemm_level_times_the_measured_ratio():
    e = Efficiency()
    ratio = _op_default("group_matmul") / _op_default("matmul")
    assert ratio == pytest.approx(0.619, abs=0.001)
    assert e.grouped_gemm == pytest.approx(e.gemm * ratio, abs=0.005)


def test_an_h100_expert_gemm_runs_below_the_same_plain_gemm_by_that_ratio():
    """On a system without tables an expert GEMM's efficiency is the plain one's × 0.62 (same shape),
    and the B200 preset keeps its own measured level."""
    h100 = SystemSpec.model_validate(load_preset("systems", "h100-sxm5-80gb"))
    cm = ComputeModel(h100, "bf16")
    grouped = GroupedGemm(name="fwd:expert_fc1", groups=16, m=4096, n=5760, k=2880)
    plain = Gemm(name="fwd:fc1", m=4096, n=5760, k=2880)
    ratio = cm.grouped_efficiency(grouped) / cm.gemm_efficiency(plain.m, plain.n, plain.k, 1, "TN")
    assert ratio == pytest.approx(0.43 / 0.70, rel=1e-6)
    b200 = load_preset("systems", "b200-sxm-180gb")
    assert b200["efficiency"]["grouped_gemm"] == pytest.approx(_op_default("group_matmul"), abs=0.001)
